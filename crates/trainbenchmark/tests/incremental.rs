//! Incremental results against recomputation: random mutation sequences on a small railway,
//! with the six Train Benchmark queries and queries that exercise what the incremental
//! update treats specially (`exists`, `distinct`, values in columns, reverse and up steps,
//! collections read mid-path, pairs joined by one matrix step, repeats) registered. After every request, each registered query's rows must equal the
//! query run afresh, and the differences the commits carried, applied to the rows at
//! registration, must give the same rows.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use espalier_instruction::Engine;
use espalier_trainbenchmark::{Query, SCHEMA};
use espalier_transaction::{DatabaseOptions, Durability, FeedItem};
use proptest::prelude::*;

const EXTRA: &[&str] = &[
    // exists: opaque, so the query runs again whole when a follow changes
    "collection match r in . 'Routes' where exists ( p in r . 'Follows' where p stategroup : 'Position' == 'DIVERGING' ) \
     select 'r' -> r",
    // distinct rows, a value through a state in a column (no value: left out)
    "collection match t in . 'Regions' . 'Track Elements' s in t > 'Monitored By' \
     select distinct 's' -> s 'len' -> t ? 'Kind' * 'Segment' number : 'Length'",
    // backwards along a matrix, or, not
    "collection match s in . 'Regions' . 'Sensors' t in s < 'Monitored By' \
     where t ? 'Kind' * 'Switch' or not t > 'Connects To' select 's' -> s 't' -> t",
    // an up step, a reference's key in a column, a state of the parent
    "collection match p in . 'Routes' . 'Follows' r in p .^ where r stategroup : 'Active' == 'Yes' \
     select 'p' -> p 'target' -> p reference : 'Target' 'position' -> p stategroup : 'Position'",
    // links into a node read backwards: by the variable itself, and one step along a path
    "collection match s in . 'Regions' . 'Sensors' where not s < 'Monitored By' select 's' -> s",
    "collection match p in . 'Routes' . 'Follows' where p > 'Target' < 'Connects To' select 'p' -> p",
    // a collection read in the middle of a path: a switch gaining or losing a sensor
    // reaches the follows (and routes) whose target it is only by walking back
    "collection match p in . 'Routes' . 'Follows' where p > 'Target' > 'Monitored By' select 'p' -> p",
    "collection match r in . 'Routes' s in r . 'Follows' > 'Target' > 'Monitored By' select 'r' -> r 's' -> s",
    // a repeat: opaque
    "collection match a in . 'Regions' . 'Track Elements' b in a repeat 1 to 3 ( > 'Connects To' ) \
     select 'a' -> a 'b' -> b",
    // a semaphore's signal through the route's entry, and its segment's length
    "collection match r in . 'Routes' m in r ? 'Entry' * 'Set' > 'Semaphore' \
     where m stategroup : 'Signal' != 'FAILURE' select 'r' -> r 'm' -> m 'len' -> m .^ number : 'Length'",
];

const REGIONS: [&str; 2] = ["1", "2"];

#[derive(Debug, Clone)]
enum Op {
    AddSensor(usize, u8),
    RemoveSensor(usize, u8),
    AddElement(usize, u8, bool),
    RemoveElement(usize, u8),
    Length(usize, u8, i64),
    Kind(usize, u8, bool),
    SwitchPosition(usize, u8, u8),
    Monitor(usize, u8, usize, u8, bool),
    Connect(usize, u8, usize, u8, bool),
    AddSemaphore(usize, u8, u8),
    Signal(usize, u8, u8, u8),
    AddRoute(u8),
    RemoveRoute(u8),
    Active(u8, bool),
    Entry(u8, bool, Option<(usize, u8, u8)>),
    Require(u8, usize, u8, bool),
    Follow(u8, u8, usize, u8),
    Unfollow(u8, u8),
    Position(u8, u8, u8),
    Both(Box<Op>, Box<Op>),
}

const STATES: [&str; 3] = ["FAILURE", "STRAIGHT", "DIVERGING"];
const SIGNALS: [&str; 3] = ["FAILURE", "STOP", "GO"];

fn te(r: usize, t: u8) -> String {
    format!(". 'Regions' : \"{}\" . 'Track Elements' : \"t{t}\"", REGIONS[r])
}

fn text(op: &Op) -> String {
    match op {
        Op::AddSensor(r, s) => format!("update . 'Regions' : \"{}\" ( 'Sensors' -> dictionary \"s{s}\" ( ) )", REGIONS[*r]),
        Op::RemoveSensor(r, s) => {
            format!("update . 'Regions' : \"{}\" ( 'Sensors' -> dictionary \"s{s}\" remove )", REGIONS[*r])
        }
        Op::AddElement(r, t, switch) => {
            let kind = if *switch { "'Switch' ( )" } else { "'Segment' ( 'Length' -> number 3 )" };
            format!(
                "update . 'Regions' : \"{}\" ( 'Track Elements' -> dictionary \"t{t}\" ( 'Kind' -> stategroup {kind} ) )",
                REGIONS[*r]
            )
        }
        Op::RemoveElement(r, t) => {
            format!("update . 'Regions' : \"{}\" ( 'Track Elements' -> dictionary \"t{t}\" remove )", REGIONS[*r])
        }
        Op::Length(r, t, l) => format!("update {} ? 'Kind' * 'Segment' ( 'Length' -> number {l} )", te(*r, *t)),
        Op::Kind(r, t, switch) => {
            let s = if *switch { "'Switch'" } else { "'Segment'" };
            format!("update {} ( 'Kind' -> stategroup {s} set to ( ) )", te(*r, *t))
        }
        Op::SwitchPosition(r, t, p) => format!(
            "update {} ? 'Kind' * 'Switch' ( 'Current Position' -> stategroup '{}' set to ( ) )",
            te(*r, *t),
            STATES[*p as usize % 3]
        ),
        Op::Monitor(r, t, sr, s, add) => {
            let how = if *add { "( )" } else { "remove" };
            format!("update {} ( 'Monitored By' -> dictionary [\"{}\", \"s{s}\"] {how} )", te(*r, *t), REGIONS[*sr])
        }
        Op::Connect(r, t, r2, t2, add) => {
            let how = if *add { "( )" } else { "remove" };
            format!("update {} ( 'Connects To' -> dictionary [\"{}\", \"t{t2}\"] {how} )", te(*r, *t), REGIONS[*r2])
        }
        Op::AddSemaphore(r, t, m) => {
            format!("update {} ? 'Kind' * 'Segment' ( 'Semaphores' -> dictionary \"m{m}\" ( ) )", te(*r, *t))
        }
        Op::Signal(r, t, m, s) => format!(
            "update {} ? 'Kind' * 'Segment' . 'Semaphores' : \"m{m}\" ( 'Signal' -> stategroup '{}' set to ( ) )",
            te(*r, *t),
            SIGNALS[*s as usize % 3]
        ),
        Op::AddRoute(x) => format!("update ( 'Routes' -> dictionary \"r{x}\" ( ) )"),
        Op::RemoveRoute(x) => format!("update ( 'Routes' -> dictionary \"r{x}\" remove )"),
        Op::Active(x, yes) => {
            format!("update . 'Routes' : \"r{x}\" ( 'Active' -> stategroup '{}' set to ( ) )", if *yes { "Yes" } else { "No" })
        }
        Op::Entry(x, exit, to) => {
            let which = if *exit { "Exit" } else { "Entry" };
            match to {
                None => format!("update . 'Routes' : \"r{x}\" ( '{which}' -> stategroup 'None' set to ( ) )"),
                Some((r, t, m)) => format!(
                    "update . 'Routes' : \"r{x}\" ( '{which}' -> stategroup 'Set' set to ( 'Semaphore' -> reference \
                     [\"{}\", \"t{t}\", \"m{m}\"] ) )",
                    REGIONS[*r]
                ),
            }
        }
        Op::Require(x, r, s, add) => {
            let how = if *add { "( )" } else { "remove" };
            format!("update . 'Routes' : \"r{x}\" ( 'Requires' -> dictionary [\"{}\", \"s{s}\"] {how} )", REGIONS[*r])
        }
        Op::Follow(x, p, r, t) => format!(
            "update . 'Routes' : \"r{x}\" ( 'Follows' -> dictionary \"p{p}\" ( 'Target' -> reference [\"{}\", \"t{t}\"] ) )",
            REGIONS[*r]
        ),
        Op::Unfollow(x, p) => format!("update . 'Routes' : \"r{x}\" ( 'Follows' -> dictionary \"p{p}\" remove )"),
        Op::Position(x, p, s) => format!(
            "update . 'Routes' : \"r{x}\" . 'Follows' : \"p{p}\" ( 'Position' -> stategroup '{}' set to ( ) )",
            STATES[*s as usize % 3]
        ),
        Op::Both(a, b) => format!("transaction ( {} , {} )", text(a), text(b)),
    }
}

fn one_op() -> impl Strategy<Value = Op> {
    let r = 0..2usize;
    let t = 0..6u8;
    let s = 0..3u8;
    prop_oneof![
        1 => (r.clone(), s.clone()).prop_map(|(r, s)| Op::AddSensor(r, s)),
        1 => (r.clone(), s.clone()).prop_map(|(r, s)| Op::RemoveSensor(r, s)),
        1 => (r.clone(), t.clone(), any::<bool>()).prop_map(|(r, t, w)| Op::AddElement(r, t, w)),
        1 => (r.clone(), t.clone()).prop_map(|(r, t)| Op::RemoveElement(r, t)),
        3 => (r.clone(), t.clone(), -2..4i64).prop_map(|(r, t, l)| Op::Length(r, t, l)),
        2 => (r.clone(), t.clone(), any::<bool>()).prop_map(|(r, t, w)| Op::Kind(r, t, w)),
        3 => (r.clone(), t.clone(), 0..3u8).prop_map(|(r, t, p)| Op::SwitchPosition(r, t, p)),
        4 => (r.clone(), t.clone(), r.clone(), s.clone(), any::<bool>())
            .prop_map(|(a, b, c, d, e)| Op::Monitor(a, b, c, d, e)),
        4 => (r.clone(), t.clone(), r.clone(), t.clone(), any::<bool>())
            .prop_map(|(a, b, c, d, e)| Op::Connect(a, b, c, d, e)),
        2 => (r.clone(), t.clone(), 0..2u8).prop_map(|(r, t, m)| Op::AddSemaphore(r, t, m)),
        3 => (r.clone(), t.clone(), 0..2u8, 0..3u8).prop_map(|(r, t, m, s)| Op::Signal(r, t, m, s)),
        1 => (0..3u8).prop_map(Op::AddRoute),
        1 => (0..3u8).prop_map(Op::RemoveRoute),
        3 => (0..3u8, any::<bool>()).prop_map(|(x, y)| Op::Active(x, y)),
        3 => (0..3u8, any::<bool>(), proptest::option::of((r.clone(), t.clone(), 0..2u8)))
            .prop_map(|(x, e, to)| Op::Entry(x, e, to)),
        4 => (0..3u8, r.clone(), s.clone(), any::<bool>()).prop_map(|(x, r, s, a)| Op::Require(x, r, s, a)),
        2 => (0..3u8, 0..3u8, r.clone(), t.clone()).prop_map(|(x, p, r, t)| Op::Follow(x, p, r, t)),
        1 => (0..3u8, 0..3u8).prop_map(|(x, p)| Op::Unfollow(x, p)),
        3 => (0..3u8, 0..3u8, 0..3u8).prop_map(|(x, p, s)| Op::Position(x, p, s)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => one_op(),
        1 => (one_op(), one_op()).prop_map(|(a, b)| Op::Both(Box::new(a), Box::new(b))),
    ]
}

/// Rows as a multiset of their JSON text.
fn bag(rows: impl IntoIterator<Item = Vec<serde_json::Value>>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in rows {
        *out.entry(serde_json::Value::Array(r).to_string()).or_insert(0) += 1;
    }
    out
}

fn fresh(engine: &Engine, q: &str) -> BTreeMap<String, usize> {
    match engine.execute_text(q, &HashMap::new()).expect("the query runs") {
        espalier_instruction::Reply::Query(r) => bag(r.rows.into_iter().map(|r| r.values)),
        other => panic!("a query replies with rows, not {other:?}"),
    }
}

fn queries() -> Vec<String> {
    Query::ALL.iter().map(|q| q.pattern().to_string()).chain(EXTRA.iter().map(|s| s.to_string())).collect()
}

fn engine() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = DatabaseOptions { durability: Durability::None, ..DatabaseOptions::default() };
    let engine = Engine::create(&dir.path().join("db"), SCHEMA, options).expect("railway database");
    for r in REGIONS {
        engine
            .execute_text(&format!("update ( 'Regions' -> dictionary \"{r}\" ( ) )"), &HashMap::new())
            .expect("region");
    }
    (dir, engine)
}

/// Every region with sensors s0–s2 and elements t0–t5 (even ones segments with a semaphore
/// m0, odd ones switches), chained and monitored; routes r0–r2, each following two switches
/// and requiring a sensor, r0 and r1 active with an entry and an exit. The random operations
/// then change a railway that has matches to lose and gain.
fn populated() -> (tempfile::TempDir, Engine) {
    let (dir, engine) = engine();
    let mut setup = Vec::new();
    for r in 0..2 {
        for s in 0..3 {
            setup.push(Op::AddSensor(r, s));
        }
        for t in 0..6 {
            setup.push(Op::AddElement(r, t, t % 2 == 1));
            setup.push(Op::Monitor(r, t, r, t % 3, true));
            if t % 2 == 0 {
                setup.push(Op::AddSemaphore(r, t, 0));
                setup.push(Op::Signal(r, t, 0, 1 + (t / 2) % 2));
                setup.push(Op::Length(r, t, t as i64 - 2));
            }
        }
        for t in 0..5 {
            setup.push(Op::Connect(r, t, r, t + 1, true));
        }
    }
    for x in 0..3u8 {
        setup.push(Op::AddRoute(x));
        setup.push(Op::Require(x, x as usize % 2, x, true));
        setup.push(Op::Follow(x, 0, x as usize % 2, 1));
        setup.push(Op::Follow(x, 1, 1, 3 + 2 * (x % 2)));
        setup.push(Op::Position(x, 0, 1 + x % 2));
        if x < 2 {
            setup.push(Op::Active(x, true));
            setup.push(Op::Entry(x, false, Some((x as usize, 0, 0))));
            setup.push(Op::Entry(x, true, Some((1 - x as usize, 2, 0))));
        }
    }
    for op in &setup {
        engine.execute_text(&text(op), &HashMap::new()).unwrap_or_else(|e| panic!("{}: {e}", text(op)));
    }
    (dir, engine)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn registered_queries_equal_their_recomputation(ops in proptest::collection::vec(op(), 1..60)) {
        let (_dir, engine) = populated();
        let feed = engine.database().subscribe(1 << 16);
        let mut feed = feed;
        let mut kept: Vec<(u64, String, BTreeMap<String, usize>)> = Vec::new();
        for q in queries() {
            let reg = engine.register_text(&q, &HashMap::new()).expect("registers");
            kept.push((reg.id, q, bag(reg.result.rows.into_iter().map(|r| r.values))));
        }
        for op in &ops {
            // Many fail (a key that exists, a node still referred to): nothing is applied then.
            let _ = engine.execute_text(&text(op), &HashMap::new());
            while let Some(item) = feed.next_timeout(Duration::from_millis(0)) {
                let FeedItem::Changes(set) = item else { panic!("the test feed does not lag") };
                for d in &set.diffs {
                    prop_assert!(d.error.is_none(), "{:?}", d.error);
                    let (_, _, rows) = kept.iter_mut().find(|(id, ..)| *id == d.query).expect("a registered query");
                    for r in &d.removed {
                        let k = serde_json::Value::Array(r.clone()).to_string();
                        let n = rows.get_mut(&k).expect("a removed row was there");
                        *n -= 1;
                        if *n == 0 {
                            rows.remove(&k);
                        }
                    }
                    for r in &d.added {
                        *rows.entry(serde_json::Value::Array(r.clone()).to_string()).or_insert(0) += 1;
                    }
                }
            }
            for (id, q, from_diffs) in &kept {
                let expected = fresh(&engine, q);
                let (_, now) = engine.registry().result(*id).expect("still registered");
                prop_assert_eq!(&bag(now.rows.into_iter().map(|r| r.values)), &expected, "after {}\nquery {}", text(op), q);
                prop_assert_eq!(from_diffs, &expected, "differences, after {}\nquery {}", text(op), q);
            }
        }
    }
}

/// Registering while another thread commits: a registration loads its query outside the
/// registry's lock, then applies the commits made meanwhile from their touched sets, so every
/// registered query ends equal to its recomputation, and writes are not held up by loads.
#[test]
fn registrations_during_commits_miss_none() {
    let (_dir, engine) = populated();
    // A fixed random sequence (many ops fail: nothing is applied then), run once.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let ops: Vec<Op> = (0..600)
        .map(|_| proptest::strategy::ValueTree::current(&one_op().new_tree(&mut runner).expect("an op")))
        .collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut registered: Vec<(u64, String)> = Vec::new();
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut commits = 0u64;
            for op in &ops {
                if engine.execute_text(&text(op), &HashMap::new()).is_ok() {
                    commits += 1;
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            commits
        });
        'registering: while registered.len() < 1000 {
            for q in queries() {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break 'registering;
                }
                let reg = engine.register_text(&q, &HashMap::new()).expect("registers");
                assert!(reg.version <= engine.database().version(), "rows of a commit not made yet");
                registered.push((reg.id, q));
            }
        }
        let commits = writer.join().expect("the writer");
        assert!(commits > 0, "the writer committed nothing");
    });
    for (id, q) in &registered {
        let (_, now) = engine.registry().result(*id).expect("still registered");
        assert_eq!(bag(now.rows.into_iter().map(|r| r.values)), fresh(&engine, q), "query {q}");
    }
    let (caught_up, reloaded) = engine.registry().catch_ups();
    assert!(caught_up + reloaded > 0, "no registration overlapped a commit: the test shows nothing");
    eprintln!("{} registrations, {caught_up} caught up from touched sets, {reloaded} loaded again", registered.len());
}

#[test]
fn aggregates_order_and_paging_are_refused_with_a_reason() {
    let (_dir, engine) = engine();
    for q in [
        "collection match r in . 'Routes' select 'n' -> count ( )",
        "collection match r in . 'Routes' select 'r' -> r order by 'r'",
        "collection match r in . 'Routes' select 'r' -> r limit 3",
        "collection select . 'Routes'",
    ] {
        let e = engine.register_text(q, &HashMap::new()).expect_err("refused");
        let msg = e.to_string();
        assert!(msg.contains("registered") || msg.contains("pattern query"), "{q}: {msg}");
    }
}

#[test]
fn a_repair_step_updates_a_few_seeds_not_the_whole_query() {
    let (_dir, engine) = engine();
    for op in [Op::AddElement(0, 1, false), Op::AddElement(0, 2, false), Op::Length(0, 1, 0), Op::Length(0, 2, -1)] {
        engine.execute_text(&text(&op), &HashMap::new()).expect("applies");
    }
    let reg = engine.register_text(Query::PosLength.pattern(), &HashMap::new()).expect("registers");
    assert_eq!(reg.result.rows.len(), 2);
    let mut feed = engine.database().subscribe(16);
    engine.execute_text(&text(&Op::Length(0, 1, 5)), &HashMap::new()).expect("repair");
    let Some(FeedItem::Changes(set)) = feed.next_timeout(Duration::from_secs(1)) else { panic!("a change set") };
    assert_eq!(set.diffs.len(), 1);
    assert_eq!(set.diffs[0].removed, vec![vec![serde_json::json!(["1", "t1"])]]);
    assert!(set.diffs[0].added.is_empty());
    let n = engine.registry().with(reg.id, |q| q.len()).expect("registered");
    assert_eq!(n, 1);
    assert!(engine.unregister(reg.id));
    engine.execute_text(&text(&Op::Length(0, 2, 5)), &HashMap::new()).expect("after unregistering");
    let Some(FeedItem::Changes(set)) = feed.next_timeout(Duration::from_secs(1)) else { panic!("a change set") };
    assert!(set.diffs.is_empty(), "nothing registered any more");
}

#[test]
fn a_commits_changes_come_in_the_order_of_their_nodes() {
    let (_dir, engine) = engine();
    // Created t6 … t1 in that order: their records' ids grow with them, against their keys'.
    for t in (1..=6).rev() {
        engine.execute_text(&text(&Op::AddElement(0, t, false)), &HashMap::new()).expect("applies");
        engine.execute_text(&text(&Op::Length(0, t, 0)), &HashMap::new()).expect("applies");
    }
    let reg = engine.register_text(Query::PosLength.pattern(), &HashMap::new()).expect("registers");
    assert_eq!(reg.result.rows.len(), 6);
    let mut feed = engine.database().subscribe(16);
    // One commit repairs four, in neither order.
    let members: Vec<String> = [5, 2, 6, 1].iter().map(|&t| text(&Op::Length(0, t, 4))).collect();
    engine.execute_text(&format!("transaction ( {} )", members.join(", ")), &HashMap::new()).expect("repair");
    let Some(FeedItem::Changes(set)) = feed.next_timeout(Duration::from_secs(1)) else { panic!("a change set") };
    assert_eq!(set.diffs.len(), 1);
    let removed: Vec<serde_json::Value> = set.diffs[0].removed.iter().map(|r| r[0].clone()).collect();
    let t = |n: u8| serde_json::json!([REGIONS[0], format!("t{n}")]);
    assert_eq!(removed, vec![t(6), t(5), t(2), t(1)]);
    assert!(set.diffs[0].added.is_empty());
}
