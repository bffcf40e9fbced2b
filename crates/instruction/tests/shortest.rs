//! `shortest a ( steps ) to b max N` on random directed graphs, against a model: a plain
//! breadth-first search from `a` over the same links, listed in the order the steps walk them.
//!
//! The engine searches from both ends (the steps walked backwards through the link indexes
//! and the tree); the model from the start only, keeping the node each node was first reached
//! from, which gives the first shortest path in walk order (docs/instructions.md, "Columns").
//! Every answer must be that path: a real path (each hop a link of the steps), as long as the
//! plain distance, and no longer than `max`; a pair with no such path has no row.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use common::{engine, exec, query_rows};
use espalier_instruction::Engine;
use proptest::prelude::*;

const SCHEMA: &str = r#"
root (
    'Nodes' -> dictionary (
        'Friends' -> matrix ( .^ . 'Nodes' ) ( )
        'Edges' -> dictionary ( 'To' -> reference ( .^ .^ . 'Nodes' ) )
        'Out' -> group ( 'Links' -> matrix ( +^ .^ . 'Nodes' ) ( ) )
        'Open' -> stategroup ( 'No' -> ( ) 'Yes' -> ( 'Via' -> matrix ( ?^ .^ . 'Nodes' ) ( ) ) )
        'Mark' -> stategroup ( 'Off' -> ( ) 'On' -> ( ) )
    )
)
"#;

/// One node's links, as drawn (indexes are taken modulo the number of nodes).
#[derive(Debug, Clone)]
struct Spec {
    friends: Vec<usize>,
    /// (key digit, target) of entries of 'Edges'; the first of a key is kept.
    edges: Vec<(u8, usize)>,
    links: Vec<usize>,
    /// 'Open' in 'Yes': the 'Via' links of a 'Yes' node switched away from first (its links
    /// must be gone from the link index), then those of the current one.
    open: Option<(Vec<usize>, Vec<usize>)>,
}

/// A graph: per node, its links normalised.
struct Graph {
    n: usize,
    friends: Vec<BTreeSet<usize>>,
    edges: Vec<BTreeMap<u8, usize>>,
    links: Vec<BTreeSet<usize>>,
    via: Vec<Option<BTreeSet<usize>>>,
}

fn graph(specs: &[Spec]) -> Graph {
    let n = specs.len();
    let set = |v: &[usize]| v.iter().map(|i| i % n).collect::<BTreeSet<_>>();
    Graph {
        n,
        friends: specs.iter().map(|s| set(&s.friends)).collect(),
        edges: specs
            .iter()
            .map(|s| {
                let mut m = BTreeMap::new();
                for &(k, t) in &s.edges {
                    m.entry(k).or_insert(t % n);
                }
                m
            })
            .collect(),
        links: specs.iter().map(|s| set(&s.links)).collect(),
        via: specs.iter().map(|s| s.open.as_ref().map(|(_, v)| set(v))).collect(),
    }
}

fn key(i: usize) -> String {
    format!("n{i:02}")
}

/// The nodes are created first, in key order, so a matrix's targets (listed by record) come in
/// key order too.
fn load(e: &Engine, specs: &[Spec], g: &Graph) {
    let n = g.n;
    for i in 0..n {
        exec(e, &format!("update ( 'Nodes' -> dictionary \"{}\" ( ) )", key(i)));
    }
    for (i, spec) in specs.iter().enumerate() {
        let at = format!("update . 'Nodes' : \"{}\"", key(i));
        for &f in &g.friends[i] {
            exec(e, &format!("{at} ( 'Friends' -> matrix \"{}\" ( ) )", key(f)));
        }
        for (k, &t) in &g.edges[i] {
            exec(e, &format!("{at} ( 'Edges' -> dictionary \"e{k}\" ( 'To' -> reference \"{}\" ) )", key(t)));
        }
        for &l in &g.links[i] {
            exec(e, &format!("{at} ( 'Out' -> group ( 'Links' -> matrix \"{}\" ( ) ) )", key(l)));
        }
        if let Some((before, _)) = &spec.open {
            exec(e, &format!("{at} ( 'Open' -> stategroup 'Yes' set to ( ) )"));
            if !before.is_empty() {
                for t in before.iter().map(|t| t % n).collect::<BTreeSet<_>>() {
                    exec(e, &format!("{at} ( 'Open' -> stategroup 'Yes' ( 'Via' -> matrix \"{}\" ( ) ) )", key(t)));
                }
                exec(e, &format!("{at} ( 'Open' -> stategroup 'No' set to ( ) )"));
                exec(e, &format!("{at} ( 'Open' -> stategroup 'Yes' set to ( ) )"));
            }
            for &t in g.via[i].iter().flatten() {
                exec(e, &format!("{at} ( 'Open' -> stategroup 'Yes' ( 'Via' -> matrix \"{}\" ( ) ) )", key(t)));
            }
        }
    }
}

/// The nodes a body reaches from a node, in the order it walks them (repeats included; the
/// search counts a node's first).
type Walk = Box<dyn Fn(&Graph, usize) -> Vec<usize>>;

/// The bodies tried, each with its walk in the model.
fn bodies() -> Vec<(&'static str, Walk)> {
    vec![
        // A matrix forwards; backwards through its link index.
        ("> 'Friends'", Box::new(|g, u| g.friends[u].iter().copied().collect())),
        // Entries, then a reference: backwards the reference's link index, then up.
        (". 'Edges' > 'To'", Box::new(|g, u| g.edges[u].values().copied().collect())),
        // A matrix in a group: its link index gives the record holding the group.
        ("+ 'Out' > 'Links'", Box::new(|g, u| g.links[u].iter().copied().collect())),
        // A matrix in a state, only while the state is selected.
        ("? 'Open' * 'Yes' > 'Via'", Box::new(|g, u| g.via[u].iter().flatten().copied().collect())),
        // Two links in one repetition.
        (
            "> 'Friends' . 'Edges' > 'To'",
            Box::new(|g, u| g.friends[u].iter().flat_map(|&f| g.edges[f].values().copied()).collect()),
        ),
        // A repetition inside: the nodes one and then two hops away, each once, not `u` itself.
        (
            "repeat 1 to 2 ( > 'Friends' )",
            Box::new(|g, u| {
                let mut seen = BTreeSet::from([u]);
                let (mut out, mut frontier) = (Vec::new(), vec![u]);
                for _ in 0..2 {
                    let mut next = Vec::new();
                    for &x in &frontier {
                        for &f in &g.friends[x] {
                            if seen.insert(f) {
                                next.push(f);
                            }
                        }
                    }
                    out.extend(&next);
                    frontier = next;
                }
                out
            }),
        ),
    ]
}

/// The model: breadth first from `a`, each node keeping the node it was first reached from,
/// stopping at `b` or after `max` repetitions.
fn first_shortest(adj: &[Vec<usize>], a: usize, b: usize, max: usize) -> Option<Vec<usize>> {
    if a == b {
        return Some(vec![a]);
    }
    let mut parent = vec![None; adj.len()];
    parent[a] = Some(a);
    let mut frontier = vec![a];
    for _ in 0..max {
        let mut next = Vec::new();
        for &u in &frontier {
            for &v in &adj[u] {
                if parent[v].is_none() {
                    parent[v] = Some(u);
                    if v == b {
                        let mut path = vec![b];
                        let mut at = b;
                        while at != a {
                            at = parent[at].unwrap();
                            path.push(at);
                        }
                        path.reverse();
                        return Some(path);
                    }
                    next.push(v);
                }
            }
        }
        frontier = next;
    }
    None
}

/// Plain breadth-first distances from `a` (no bound).
fn distances(adj: &[Vec<usize>], a: usize) -> Vec<Option<usize>> {
    let mut dist = vec![None; adj.len()];
    dist[a] = Some(0);
    let mut queue = VecDeque::from([a]);
    while let Some(u) = queue.pop_front() {
        for &v in &adj[u] {
            if dist[v].is_none() {
                dist[v] = Some(dist[u].unwrap() + 1);
                queue.push_back(v);
            }
        }
    }
    dist
}

/// Every pair's path for `body` bounded by `max`, by (from, to), from one query.
fn paths(e: &Engine, body: &str, max: usize) -> BTreeMap<(usize, usize), Vec<usize>> {
    let q = format!(
        "collection match x in . 'Nodes' y in . 'Nodes'
         select 'x' -> x 'y' -> y 'p' -> shortest x ( {body} ) to y max {max}"
    );
    let index = |v: &serde_json::Value| v.as_str().and_then(|s| s.strip_prefix('n')).unwrap().parse::<usize>().unwrap();
    query_rows(e, &q)
        .into_iter()
        .map(|row| {
            let row: Vec<serde_json::Value> = serde_json::from_str(&row).unwrap();
            let path = row[2].as_array().unwrap().iter().map(index).collect();
            ((index(&row[0]), index(&row[1])), path)
        })
        .collect()
}

fn targets() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0usize..11, 0..6)
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        targets(),
        proptest::collection::vec((0u8..6, 0usize..11), 0..5),
        targets(),
        proptest::option::of((targets(), targets())),
    )
        .prop_map(|(friends, edges, links, open)| Spec { friends, edges, links, open })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// For every body, every pair of nodes and every bound from 0 to the number of nodes: the
    /// path is the model's, a real path as long as the plain distance; none past the bound.
    #[test]
    fn shortest_paths_are_the_first_in_walk_order(specs in proptest::collection::vec(spec(), 1..11)) {
        let g = graph(&specs);
        let (_dir, e) = engine(SCHEMA);
        load(&e, &specs, &g);
        for (body, walk) in bodies() {
            let adj: Vec<Vec<usize>> = (0..g.n).map(|u| walk(&g, u)).collect();
            let dist: Vec<Vec<Option<usize>>> = (0..g.n).map(|a| distances(&adj, a)).collect();
            for max in 0..=g.n {
                let got = paths(&e, body, max);
                for (a, from_a) in dist.iter().enumerate() {
                    for (b, d) in from_a.iter().enumerate() {
                        let want = first_shortest(&adj, a, b, max);
                        let path = got.get(&(a, b));
                        prop_assert_eq!(path, want.as_ref(), "{} from node {} to {} max {}", body, a, b, max);
                        let within = d.filter(|d| *d <= max || a == b);
                        let length = path.map(|p| p.len() - 1);
                        prop_assert_eq!(length, within, "length, {} from node {} to {} max {}", body, a, b, max);
                        if let Some(p) = path {
                            prop_assert_eq!((p[0], p[p.len() - 1]), (a, b));
                            for hop in p.windows(2) {
                                let linked = adj[hop[0]].contains(&hop[1]);
                                prop_assert!(linked, "{}: node {} to {} is no link", body, hop[0], hop[1]);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Every body above is searched from both ends (`explain` says so); so is every body the
/// checker accepts: the one step with no inverse, up out of a state without properties, is
/// refused (such a state stores nothing to go up from).
#[test]
fn the_search_direction_is_explained() {
    let (_dir, e) = engine(SCHEMA);
    let explain = |body: &str| {
        let q = format!(
            "explain collection match x in . 'Nodes' y in . 'Nodes' select 'p' -> shortest x ( {body} ) to y max 3"
        );
        common::run(&e, &q).map(|_| query_rows(&e, &q).pop().unwrap())
    };
    for (body, _) in bodies() {
        let tail = explain(body).unwrap();
        assert!(tail.contains("columns p (shortest, searched from both ends)"), "{body}: {tail}");
    }
    let err = explain("? 'Mark' * 'On' ?^ > 'Friends'").unwrap_err();
    assert!(err.to_string().contains("cannot go up from state 'On' of 'Mark'"), "{err}");
}

/// A start with many links and a target with few: the search grows the target's side and
/// meets the start's frontier, and still answers the first shortest path in walk order.
#[test]
fn meeting_from_the_target_side_keeps_the_first_path() {
    let (_dir, e) = engine(SCHEMA);
    // s -> a1..a5 (created in that order); a1 -> b1 (a dead end); a3 -> b4, b3; a4 -> b3;
    // b3 -> t, b4 -> t. Shortest paths: s-a3-b3-t, s-a3-b4-t, s-a4-b3-t; the first in walk
    // order: s's first link that leads on is a3, and a3's first link (b3 before b4) is b3.
    for k in ["s", "a1", "a2", "a3", "a4", "a5", "b1", "b3", "b4", "t"] {
        exec(&e, &format!("update ( 'Nodes' -> dictionary \"{k}\" ( ) )"));
    }
    let links = [
        ("s", "a1"),
        ("s", "a2"),
        ("s", "a3"),
        ("s", "a4"),
        ("s", "a5"),
        ("a1", "b1"),
        ("a3", "b4"),
        ("a3", "b3"),
        ("a4", "b3"),
        ("b3", "t"),
        ("b4", "t"),
    ];
    for (x, y) in links {
        exec(&e, &format!("update . 'Nodes' : \"{x}\" ( 'Friends' -> matrix \"{y}\" ( ) )"));
    }
    let q = |from: &str, to: &str, max: u32| {
        query_rows(
            &e,
            &format!(
                "collection match x in . 'Nodes' : \"{from}\" y in . 'Nodes' : \"{to}\"
                 select 'p' -> shortest x ( > 'Friends' ) to y max {max}"
            ),
        )
    };
    assert_eq!(q("s", "t", 3), [r#"[["s","a3","b3","t"]]"#]);
    assert_eq!(q("s", "t", 6), [r#"[["s","a3","b3","t"]]"#]);
    assert_eq!(q("s", "t", 2), Vec::<String>::new(), "max too small");
    assert_eq!(q("t", "s", 6), Vec::<String>::new(), "the links are one way");
    assert_eq!(q("s", "s", 0), [r#"[["s"]]"#], "from a node to itself: no step, within any max");
    assert_eq!(q("b1", "t", 6), Vec::<String>::new(), "a dead end");
}
