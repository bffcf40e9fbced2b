//! Pattern queries: the social-network queries of Holzschuher & Peinl (seed 001, appendix),
//! on a generated network whose expected answers are computed independently, in plain Rust
//! over the same in-memory data that was loaded.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use espalier_instruction::{Engine, ParamValue, Reply};
use serde_json::{json, Value};

mod common;
use common::{engine, exec, Rng};

const SCHEMA: &str = r#"
root (
    'People' -> dictionary (
        'Name' -> text
        'Age' -> number
        'Friends' -> matrix ( .^ . 'People' ) ( 'Since' -> number )
        'Groups' -> matrix ( .^ . 'Groups' ) ( )
        'Activities' -> dictionary ( 'Title' -> text 'Created' -> number )
        'Message Collections' -> dictionary ( 'Messages' -> matrix ( .^ .^ . 'Messages' ) ( ) )
    )
    'Groups' -> dictionary ( 'Name' -> text )
    'Messages' -> dictionary (
        'From' -> reference ( .^ . 'People' )
        'Title' -> text
        'Sent' -> number
    )
)
"#;

struct Network {
    people: Vec<String>,
    age: HashMap<String, i64>,
    friends: BTreeMap<String, BTreeSet<String>>,
    groups: BTreeMap<String, BTreeSet<String>>, // person -> groups
    /// person -> (activity key, created)
    activities: BTreeMap<String, Vec<(String, i64)>>,
    /// message key -> (from, sent)
    messages: BTreeMap<String, (String, i64)>,
    /// person -> collection -> messages
    collections: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

fn generate(n: usize, seed: u64) -> Network {
    let mut rng = Rng(seed);
    let people: Vec<String> = (0..n).map(|i| format!("p{i:02}")).collect();
    let mut friends: BTreeMap<String, BTreeSet<String>> = people.iter().map(|p| (p.clone(), BTreeSet::new())).collect();
    for _ in 0..n * 2 {
        let a = &people[rng.below(n as u64) as usize];
        let b = &people[rng.below(n as u64) as usize];
        if a != b {
            friends.get_mut(a).unwrap().insert(b.clone());
            friends.get_mut(b).unwrap().insert(a.clone());
        }
    }
    let mut groups = BTreeMap::new();
    let mut activities = BTreeMap::new();
    let mut collections = BTreeMap::new();
    let mut messages = BTreeMap::new();
    let mut age = HashMap::new();
    for (i, p) in people.iter().enumerate() {
        age.insert(p.clone(), 18 + rng.below(50) as i64);
        let gs: BTreeSet<String> = (0..rng.below(3)).map(|_| format!("g{}", rng.below(6))).collect();
        groups.insert(p.clone(), gs);
        let acts: Vec<(String, i64)> =
            (0..rng.below(4)).map(|j| (format!("a{j}"), (i as i64) * 7 + rng.below(1000) as i64)).collect();
        activities.insert(p.clone(), acts);
        for j in 0..rng.below(3) {
            messages.insert(
                format!("m{i:02}-{j}"),
                (people[rng.below(n as u64) as usize].clone(), rng.below(10_000) as i64),
            );
        }
    }
    let keys: Vec<String> = messages.keys().cloned().collect();
    for p in &people {
        let mut cs = BTreeMap::new();
        for c in ["inbox", "archive"] {
            let ms: BTreeSet<String> =
                (0..rng.below(4)).map(|_| keys[rng.below(keys.len() as u64) as usize].clone()).collect();
            cs.insert(c.to_string(), ms);
        }
        collections.insert(p.clone(), cs);
    }
    Network { people, age, friends, groups, activities, messages, collections }
}

fn load(e: &Engine, n: &Network) {
    for g in 0..6 {
        exec(e, &format!("update ( 'Groups' -> dictionary \"g{g}\" ( 'Name' -> text \"Group {g}\" ) )"));
    }
    for p in &n.people {
        exec(
            e,
            &format!(
                "update ( 'People' -> dictionary \"{p}\" ( 'Name' -> text \"Name of {p}\" 'Age' -> number {} ) )",
                n.age[p]
            ),
        );
    }
    for (k, (from, sent)) in &n.messages {
        exec(
            e,
            &format!(
                "update ( 'Messages' -> dictionary \"{k}\" ( 'From' -> reference \"{from}\" 'Title' -> text \"About {k}\" 'Sent' -> number {sent} ) )"
            ),
        );
    }
    for p in &n.people {
        let mut items = String::new();
        for (i, f) in n.friends[p].iter().enumerate() {
            items.push_str(&format!(" 'Friends' -> matrix \"{f}\" ( 'Since' -> number {i} )"));
        }
        for g in &n.groups[p] {
            items.push_str(&format!(" 'Groups' -> matrix \"{g}\" ( )"));
        }
        for (a, created) in &n.activities[p] {
            items.push_str(&format!(
                " 'Activities' -> dictionary \"{a}\" ( 'Title' -> text \"{p} did {a}\" 'Created' -> number {created} )"
            ));
        }
        for (c, ms) in &n.collections[p] {
            let inner: String = ms.iter().map(|m| format!(" 'Messages' -> matrix \"{m}\" ( )")).collect();
            items.push_str(&format!(" 'Message Collections' -> dictionary \"{c}\" ({inner} )"));
        }
        exec(e, &format!("update . 'People' : \"{p}\" ({items} )"));
    }
}

/// Runs a query with `$person` (and others) bound; returns the rows' values.
fn rows(e: &Engine, text: &str, params: &[(&str, &str)]) -> Vec<Vec<Value>> {
    let params: HashMap<String, ParamValue> =
        params.iter().map(|(k, v)| (k.to_string(), ParamValue::Text(v.to_string()))).collect();
    match e.execute_text(text, &params).unwrap_or_else(|err| panic!("{text}\n  failed: {err}")) {
        Reply::Query(q) => q.rows.into_iter().map(|r| r.values).collect(),
        other => panic!("not a query reply: {other:?}"),
    }
}

fn texts(rows: &[Vec<Value>]) -> Vec<String> {
    rows.iter().map(|r| r[0].as_str().unwrap().to_string()).collect()
}

fn bfs(n: &Network, from: &str) -> HashMap<String, usize> {
    let mut dist = HashMap::from([(from.to_string(), 0)]);
    let mut queue = VecDeque::from([from.to_string()]);
    while let Some(x) = queue.pop_front() {
        for f in &n.friends[&x] {
            if !dist.contains_key(f) {
                dist.insert(f.clone(), dist[&x] + 1);
                queue.push_back(f.clone());
            }
        }
    }
    dist
}

#[test]
fn social_network_queries_match_an_independent_computation() {
    let net = generate(40, 0x5EED_1234_ABCD);
    let (_dir, e) = engine(SCHEMA);
    load(&e, &net);
    let mut checked_nonempty = 0;
    for person in net.people.iter().take(12) {
        let p = [("person", person.as_str())];
        let mine = &net.friends[person];

        // People's friends.
        let got = texts(&rows(&e, "collection match x in . 'People' : $person f in x > 'Friends' select 'f' -> f", &p));
        assert_eq!(got, mine.iter().cloned().collect::<Vec<_>>(), "friends of {person}");

        // Friend recommendations: friends of friends who are not friends, by friends in common.
        let got = rows(
            &e,
            "collection match x in . 'People' : $person f in x > 'Friends' c in f > 'Friends'
               where c != x and not x > 'Friends' == c
             select 'candidate' -> c 'common' -> count ( ) order by 'common' desc 'candidate'",
            &p,
        );
        let mut common: BTreeMap<String, i64> = BTreeMap::new();
        for f in mine {
            for c in &net.friends[f] {
                if c != person && !mine.contains(c) {
                    *common.entry(c.clone()).or_default() += 1;
                }
            }
        }
        let mut want: Vec<(String, i64)> = common.into_iter().collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let want: Vec<Vec<Value>> = want.into_iter().map(|(c, n)| vec![json!(c), json!(n)]).collect();
        assert_eq!(got, want, "friend recommendations for {person}");
        checked_nonempty += usize::from(!want.is_empty());

        // Group recommendations: groups of friends the person is not in, by friends in them.
        let got = rows(
            &e,
            "collection match x in . 'People' : $person f in x > 'Friends' g in f > 'Groups'
               where not x > 'Groups' == g
             select 'group' -> g 'friends' -> count ( distinct f ) order by 'friends' desc 'group'",
            &p,
        );
        let mut count: BTreeMap<String, i64> = BTreeMap::new();
        for f in mine {
            for g in &net.groups[f] {
                if !net.groups[person].contains(g) {
                    *count.entry(g.clone()).or_default() += 1;
                }
            }
        }
        let mut want: Vec<(String, i64)> = count.into_iter().collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let want: Vec<Vec<Value>> = want.into_iter().map(|(c, n)| vec![json!(c), json!(n)]).collect();
        assert_eq!(got, want, "group recommendations for {person}");

        // Friends of friends, 2 levels, not friends: by chained steps, and by `repeat`.
        let fof2: BTreeSet<String> = mine
            .iter()
            .flat_map(|f| net.friends[f].iter())
            .filter(|c| *c != person && !mine.contains(*c))
            .cloned()
            .collect();
        let got = texts(&rows(
            &e,
            "collection match x in . 'People' : $person c in x > 'Friends' > 'Friends'
               where c != x and x > 'Friends' != c
             select 'c' -> c order by 'c'",
            &p,
        ));
        assert_eq!(got, fof2.iter().cloned().collect::<Vec<_>>(), "friends of friends of {person}");
        let dist = bfs(&net, person);
        let at2: Vec<String> = {
            let mut v: Vec<String> = dist.iter().filter(|(_, d)| **d == 2).map(|(k, _)| k.clone()).collect();
            v.sort();
            v
        };
        assert_eq!(at2, fof2.iter().cloned().collect::<Vec<_>>(), "distance 2 is friends of friends");
        let got = texts(&rows(
            &e,
            "collection match x in . 'People' : $person c in x repeat 2 to 2 ( > 'Friends' ) select 'c' -> c order by 'c'",
            &p,
        ));
        assert_eq!(got, at2, "repeat 2 to 2 from {person}");

        // 3 levels: walks of three friendships, not ending at a friend or the person.
        let fof3: BTreeSet<String> = mine
            .iter()
            .flat_map(|f| net.friends[f].iter())
            .flat_map(|f| net.friends[f].iter())
            .filter(|c| *c != person && !mine.contains(*c))
            .cloned()
            .collect();
        let got = texts(&rows(
            &e,
            "collection match x in . 'People' : $person c in x > 'Friends' > 'Friends' > 'Friends'
               where c != x and not x > 'Friends' == c
             select 'c' -> c order by 'c'",
            &p,
        ));
        assert_eq!(got, fof3.iter().cloned().collect::<Vec<_>>(), "3-level friends of friends of {person}");
        let within3: Vec<String> = {
            let mut v: Vec<String> =
                dist.iter().filter(|(_, d)| (2..=3).contains(*d)).map(|(k, _)| k.clone()).collect();
            v.sort();
            v
        };
        let got = texts(&rows(
            &e,
            "collection match x in . 'People' : $person c in x repeat 2 to 3 ( > 'Friends' ) select 'c' -> c order by 'c'",
            &p,
        ));
        assert_eq!(got, within3, "repeat 2 to 3 from {person}");

        // Shortest paths to everyone: the length is the BFS distance, and each hop is a friendship.
        for other in net.people.iter().step_by(7) {
            let got = rows(
                &e,
                "collection match x in . 'People' : $person y in . 'People' : $other
                 select 'path' -> shortest x ( > 'Friends' ) to y max 8",
                &[("person", person), ("other", other)],
            );
            match dist.get(other).filter(|d| **d <= 8) {
                None => assert!(got.is_empty(), "no path {person} -> {other}, got {got:?}"),
                Some(d) => {
                    let path: Vec<String> =
                        got[0][0].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
                    assert_eq!(path.len(), d + 1, "{person} -> {other}: {path:?}");
                    assert_eq!(path.first(), Some(person));
                    assert_eq!(path.last(), Some(other));
                    for hop in path.windows(2) {
                        assert!(net.friends[&hop[0]].contains(&hop[1]), "{hop:?} is not a friendship");
                    }
                }
            }
        }

        // Inbox: messages of one collection, newest first, with the sender through a reference.
        let got = rows(
            &e,
            "collection match m in . 'People' : $person . 'Message Collections' : \"inbox\" > 'Messages'
             select 'message' -> m 'from' -> m reference : 'From' 'sent' -> m number : 'Sent'
             order by 'sent' desc 'message'",
            &p,
        );
        let mut want: Vec<(String, String, i64)> = net.collections[person]["inbox"]
            .iter()
            .map(|m| (m.clone(), net.messages[m].0.clone(), net.messages[m].1))
            .collect();
        want.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        let want: Vec<Vec<Value>> = want.into_iter().map(|(m, f, s)| vec![json!(m), json!(f), json!(s)]).collect();
        assert_eq!(got, want, "inbox of {person}");

        // Message collections with the number of messages in each (non-empty ones).
        let got = rows(
            &e,
            "collection match c in . 'People' : $person . 'Message Collections' m in c > 'Messages'
             select 'collection' -> c 'messages' -> count ( ) order by 'collection'",
            &p,
        );
        let want: Vec<Vec<Value>> = net.collections[person]
            .iter()
            .filter(|(_, ms)| !ms.is_empty())
            .map(|(c, ms)| vec![json!([person, c]), json!(ms.len())])
            .collect();
        assert_eq!(got, want, "message collections of {person}");

        // Activities of friends, newest first, limited (with the total before the limit).
        let reply = e
            .execute_text(
                "collection match x in . 'People' : $person a in x > 'Friends' . 'Activities'
                 select 'activity' -> a 'created' -> a number : 'Created' order by 'created' desc 'activity' limit 5",
                &p.iter().map(|(k, v)| (k.to_string(), ParamValue::Text(v.to_string()))).collect(),
            )
            .unwrap();
        let Reply::Query(q) = reply else { panic!() };
        let mut want: Vec<(String, String, i64)> =
            mine.iter().flat_map(|f| net.activities[f].iter().map(move |(a, c)| (f.clone(), a.clone(), *c))).collect();
        assert_eq!(q.total, want.len() as u64, "activities of friends of {person}");
        want.sort_by(|a, b| b.2.cmp(&a.2).then((&a.0, &a.1).cmp(&(&b.0, &b.1))));
        let want: Vec<Vec<Value>> = want.into_iter().take(5).map(|(f, a, c)| vec![json!([f, a]), json!(c)]).collect();
        let got: Vec<Vec<Value>> = q.rows.into_iter().map(|r| r.values).collect();
        assert_eq!(got, want, "newest activities of friends of {person}");
    }
    assert!(checked_nonempty >= 6, "the generated network gives recommendations to most people");

    // Members of a group, backwards along the 'Groups' matrix; groups of a person forwards.
    for g in 0..6 {
        let g = format!("g{g}");
        let got = texts(&rows(
            &e,
            "collection match g in . 'Groups' : $g p in g < 'Groups' select 'p' -> p order by 'p'",
            &[("g", &g)],
        ));
        let want: Vec<String> = net.groups.iter().filter(|(_, gs)| gs.contains(&g)).map(|(p, _)| p.clone()).collect();
        assert_eq!(got, want, "members of {g}");
    }
}

/// A hand-built network whose answers are worked out by hand in the comments.
#[test]
fn hand_checked_answers() {
    let (_dir, e) = engine(SCHEMA);
    for x in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        exec(&e, &format!("update ( 'People' -> dictionary \"{x}\" ( 'Name' -> text \"{x}\" 'Age' -> number 30 ) )"));
    }
    let pairs = [
        ("a", "b"),
        ("a", "c"),
        ("a", "d"),
        ("b", "c"),
        ("b", "e"),
        ("c", "e"),
        ("c", "f"),
        ("d", "g"),
        ("e", "h"),
        ("g", "h"),
    ];
    for (x, y) in pairs {
        exec(&e, &format!("update . 'People' : \"{x}\" ( 'Friends' -> matrix \"{y}\" ( ) )"));
        exec(&e, &format!("update . 'People' : \"{y}\" ( 'Friends' -> matrix \"{x}\" ( ) )"));
    }
    let p = [("person", "a")];
    // a's friends b, c, d; their friends outside {a, b, c, d}: e (via b and c), f (c), g (d).
    let got = rows(
        &e,
        "collection match x in . 'People' : $person f in x > 'Friends' c in f > 'Friends'
           where c != x and not x > 'Friends' == c
         select 'candidate' -> c 'common' -> count ( ) order by 'common' desc 'candidate'",
        &p,
    );
    assert_eq!(got, vec![vec![json!("e"), json!(2)], vec![json!("f"), json!(1)], vec![json!("g"), json!(1)]]);
    // a to h: a-b-e-h, a-c-e-h and a-d-g-h have 3 hops, the fewest. The answer is the first
    // in walk order (docs/instructions.md, "Columns"): the first hop to a's first friend that
    // leads on (b: a's friends are listed b, c, d, the order their records were made in), then
    // b's first friend that does (e), then h. The search from both ends grows a's side once
    // (b, c, d), then h's, the smaller, twice (e, g; then b, c, d, where it meets a's) and
    // still answers that path.
    let shortest = |from: &str, to: &str, max: u32| {
        rows(
            &e,
            &format!(
                "collection match x in . 'People' : \"{from}\" y in . 'People' : \"{to}\"
                 select 'p' -> shortest x ( > 'Friends' ) to y max {max}"
            ),
            &[],
        )
    };
    assert_eq!(shortest("a", "h", 6), vec![vec![json!(["a", "b", "e", "h"])]]);
    // The bound reached exactly: the same path.
    assert_eq!(shortest("a", "h", 3), vec![vec![json!(["a", "b", "e", "h"])]]);
    // The other way: h's friends are e, g; e's first friend on a shortest path is b.
    assert_eq!(shortest("h", "a", 6), vec![vec![json!(["h", "e", "b", "a"])]]);
    // Too short a bound: no path, no row.
    assert!(shortest("a", "h", 2).is_empty());
    // From a person to themself: no step.
    assert_eq!(shortest("f", "f", 0), vec![vec![json!(["f"])]]);
    // Everyone within 1 hop of h, h included (repeat 0 to 1): e, g, h.
    let got = texts(&rows(
        &e,
        "collection match x in . 'People' : \"h\" y in x repeat 0 to 1 ( > 'Friends' ) select 'y' -> y order by 'y'",
        &[],
    ));
    assert_eq!(got, ["e", "g", "h"]);
    // Aggregates over everyone: 8 people, 20 friendship entries, each person has 2 or 3.
    let got = rows(
        &e,
        "collection match x in . 'People' f in x > 'Friends'
         select 'people' -> count ( distinct x ) 'links' -> count ( ) 'oldest' -> max ( x number : 'Age' )",
        &[],
    );
    assert_eq!(got, vec![vec![json!(8), json!(20), json!(30)]]);
    // Degree per person, two most connected (c: a b e f = 4; a, b, e: 3).
    let got = rows(
        &e,
        "collection match x in . 'People' f in x > 'Friends'
         select 'x' -> x 'degree' -> count ( ) order by 'degree' desc 'x' limit 2",
        &[],
    );
    assert_eq!(got, vec![vec![json!("c"), json!(4)], vec![json!("a"), json!(3)]]);
    // Aggregates over nothing: one row.
    let got = rows(
        &e,
        "collection match x in . 'People' where x number : 'Age' > 99
         select 'n' -> count ( ) 's' -> sum ( x number : 'Age' ) 'm' -> min ( x number : 'Age' ) 'v' -> avg ( x number : 'Age' )",
        &[],
    );
    assert_eq!(got, vec![vec![json!(0), json!(0), Value::Null, Value::Null]]);
    // `explain`: the plan with the rows each operation produced. a has 3 friends, who have
    // 3 + 4 + 2 = 9 friends; 3 of those are a, 3 are a's friends; 3 candidates remain.
    let got = rows(
        &e,
        "explain collection match x in . 'People' : $person f in x > 'Friends' c in f > 'Friends'
           where c != x and not x > 'Friends' == c
         select 'candidate' -> c 'common' -> count ( ) order by 'common' desc 'candidate'",
        &p,
    );
    let ops: Vec<&str> = got.iter().map(|r| r[0].as_str().unwrap()).collect();
    let actual: Vec<u64> = got.iter().map(|r| r[2].as_u64().unwrap()).collect();
    assert_eq!(
        ops,
        [
            "bind x from root . 'People' : $person (lookup by key)",
            "bind f from x > 'Friends' (matrix, forwards)",
            "bind c from f > 'Friends' (matrix, forwards)",
            "filter not c reaches x",
            "filter not x > 'Friends' reaches c (one lookup: the matrix entry keyed by c)",
            "group by [candidate]; order by common desc, candidate; columns candidate, common",
        ]
    );
    assert_eq!(actual, [1, 3, 9, 6, 4, 3]);
    assert!(got[..5].iter().all(|r| r[1].as_f64().is_some()), "every operation has an estimate: {got:?}");
}

/// A filter whether one matrix step from a variable arrives at another variable
/// (`x > 'Groups' == g`, backwards `g < 'Groups' == x`, and their negations) gives the
/// memberships computed in plain Rust. Every person meets every group: each person's and each
/// group's links are asked about many times in a row, as RouteSensor asks a route's.
#[test]
fn a_reach_filter_between_two_variables_answers_both_ways_and_negated() {
    let n = generate(40, 11);
    let (_dir, e) = engine(SCHEMA);
    load(&e, &n);
    let members: BTreeSet<(String, String)> =
        n.groups.iter().flat_map(|(p, gs)| gs.iter().map(move |g| (p.clone(), g.clone()))).collect();
    let all: BTreeSet<(String, String)> =
        n.people.iter().flat_map(|p| (0..6).map(move |g| (p.clone(), format!("g{g}")))).collect();
    let outside: BTreeSet<(String, String)> = all.difference(&members).cloned().collect();
    assert!(!members.is_empty() && !outside.is_empty(), "the network has both");
    let pairs = |cond: &str| -> BTreeSet<(String, String)> {
        let text = format!("collection match x in . 'People' g in . 'Groups' where {cond} select 'x' -> x 'g' -> g");
        rows(&e, &text, &[])
            .iter()
            .map(|r| (r[0].as_str().unwrap().to_string(), r[1].as_str().unwrap().to_string()))
            .collect()
    };
    for cond in ["x > 'Groups' == g", "g < 'Groups' == x"] {
        assert_eq!(pairs(cond), members, "{cond}");
        assert_eq!(pairs(&format!("not {cond}")), outside, "not {cond}");
    }
    // Both negations are filters of the two bound variables (the reach test), not walks.
    for cond in ["not x > 'Groups' == g", "not g < 'Groups' == x"] {
        let text = format!("explain collection match x in . 'People' g in . 'Groups' where {cond} select 'x' -> x");
        let plan = texts(&rows(&e, &text, &[]));
        assert!(plan.iter().any(|op| op.starts_with("filter not") && op.contains("reaches")), "{cond}: {plan:?}");
    }
}
