//! `Engine::visit_rows`: the rows a visitor is handed are the rows `Engine::run` returns —
//! values, keys, order, offset, limit and total — for streamed pattern and collection queries
//! and for the queries that are collected first (ordered, grouped, distinct, commands); a
//! visitor that breaks stops the scan; instructions without rows are refused.

use std::collections::HashMap;
use std::ops::ControlFlow;

use espalier_instruction::{Engine, ParamValue, Reply, RowValue};
use serde_json::Value;

mod common;
use common::{engine, exec, plan, Rng};

const SCHEMA: &str = r#"
root (
    'Cities' -> dictionary ( 'Name' -> text )
    'People' -> dictionary (
        'Name' -> text
        'Age' -> number
        'Lives In' -> reference ( .^ . 'Cities' )
        'Status' -> stategroup (
            'Single' -> ( )
            'Married' -> ( 'Since' -> number )
        )
        'Friends' -> matrix ( .^ . 'People' ) ( 'Since' -> number )
        'Pets' -> dictionary ( 'Kind' -> text )
    )
)
index 'By Age' ( . 'People' ) 'Age' range
command 'Adults' ( 'min' -> number ) (
    collection match p in . 'People' where p number : 'Age' >= $min select 'p' -> p 'age' -> p number : 'Age'
)
"#;

fn load(e: &Engine) {
    let mut rng = Rng(0xC0FFEE);
    for c in 0..4 {
        exec(e, &format!("update ( 'Cities' -> dictionary \"c{c}\" ( 'Name' -> text \"City {c}\" ) )"));
    }
    let n = 60;
    for p in 0..n {
        let status = if rng.below(2) == 0 {
            "'Status' -> stategroup 'Single' ( )".to_string()
        } else {
            format!("'Status' -> stategroup 'Married' ( 'Since' -> number {} )", 1990 + rng.below(30))
        };
        exec(
            e,
            &format!(
                "update ( 'People' -> dictionary \"p{p:02}\" ( 'Name' -> text \"Näme {p} ✓\" 'Age' -> number {} \
                 'Lives In' -> reference \"c{}\" {status} ) )",
                rng.below(90),
                rng.below(4)
            ),
        );
    }
    for p in 0..n {
        let mut items = String::new();
        for _ in 0..rng.below(5) {
            let f = rng.below(n);
            if f != p && !items.contains(&format!("\"p{f:02}\"")) {
                items.push_str(&format!(" 'Friends' -> matrix \"p{f:02}\" ( 'Since' -> number {} )", rng.below(9)));
            }
        }
        for k in 0..rng.below(3) {
            items.push_str(&format!(" 'Pets' -> dictionary \"pet{k}\" ( 'Kind' -> text \"kind {}\" )", rng.below(3)));
        }
        exec(e, &format!("update . 'People' : \"p{p:02}\" ({items} )"));
    }
}

/// What `run` answers: total, and each row's key and values.
fn run(e: &Engine, text: &str, params: &HashMap<String, ParamValue>) -> (u64, Vec<(Vec<String>, Vec<Value>)>) {
    match e.execute_text(text, params).unwrap_or_else(|err| panic!("{text}\n  failed: {err}")) {
        Reply::Query(q) => (q.total, q.rows.into_iter().map(|r| (r.key, r.values)).collect()),
        other => panic!("{text}: not a query reply: {other:?}"),
    }
}

/// What `visit_rows` hands over, in the same form.
fn visit(e: &Engine, text: &str, params: &HashMap<String, ParamValue>) -> (u64, Vec<(Vec<String>, Vec<Value>)>) {
    let plan = plan(e, text);
    let mut rows = Vec::new();
    let total = e
        .visit_rows(&plan, params, None, &mut |key, values| {
            rows.push((key.to_vec(), values.iter().map(RowValue::to_json).collect()));
            ControlFlow::Continue(())
        })
        .unwrap_or_else(|err| panic!("{text}\n  failed: {err}"));
    (total, rows)
}

const QUERIES: &[&str] = &[
    // Streamed: numbers, texts (not ASCII), keys, states, references, matrix steps.
    "collection match p in . 'People' select 'p' -> p 'name' -> p text : 'Name' 'age' -> p number : 'Age'",
    "collection match p in . 'People' select 'city' -> p reference : 'Lives In' 'status' -> p stategroup : 'Status'",
    "collection match p in . 'People' f in p > 'Friends' select 'p' -> p 'f' -> f 'fname' -> f text : 'Name'",
    "collection match p in . 'People' f in p % 'Friends' select 'link' -> f 'since' -> f number : 'Since'",
    "collection match p in . 'People' k in p . 'Pets' select 'pet' -> k 'kind' -> k text : 'Kind'",
    "collection match p in . 'People' where p number : 'Age' >= 30 select 'p' -> p limit 7",
    "collection match p in . 'People' where p number : 'Age' >= 30 select 'p' -> p limit 4 offset 5",
    "collection match p in . 'People' where p number : 'Age' >= 30 select 'p' -> p offset 1000",
    "collection match p in . 'People' : $who select 'since' -> p ? 'Status' * 'Married' number : 'Since'",
    "collection match p in . 'People' where p number : 'Age' > 200 select 'p' -> p",
    "collection match x in . 'People' : $who y in . 'People' : $other select 'path' -> shortest x ( > 'Friends' ) to y max 6",
    // Only numbers of the variables' own records; through the range index on 'Age' (its
    // probes hand on each row's record), with its ends, limit and offset.
    "collection match p in . 'People' select 'age' -> p number : 'Age' limit 5 offset 2",
    "collection match p in . 'People' where p number : 'Age' >= 30 and p number : 'Age' <= 40 select 'age' -> p number : 'Age'",
    "collection match p in . 'People' where p number : 'Age' >= 30 and p number : 'Age' <= 40 select 'a' -> p number : 'Age' limit 3 offset 2",
    "collection match p in . 'People' where p number : 'Age' <= 25 select 'a' -> p number : 'Age'",
    "collection match p in . 'People' f in p % 'Friends' where p number : 'Age' >= 60 select 'since' -> f number : 'Since' 'age' -> p number : 'Age'",
    // Collected first: ordered, distinct, grouped; a command.
    "collection match p in . 'People' select 'p' -> p 'age' -> p number : 'Age' order by 'age' desc 'p' limit 9",
    "collection match p in . 'People' f in p > 'Friends' select distinct 'city' -> f reference : 'Lives In'",
    "collection match p in . 'People' f in p > 'Friends' select 'p' -> p 'n' -> count ( ) 'avg' -> avg ( f number : 'Age' ) order by 'p'",
    "command 'Adults' ( 'min' -> 50 )",
    // Collection queries, streamed: keys of nested dictionaries and of a matrix (its targets'
    // keys), filters, states crossed (a row that crosses an unselected state is left out),
    // references, offset and limit, key ranges.
    "collection select . 'People' 'Name' -> text : 'Name' 'Age' -> number : 'Age' limit 11",
    "collection select . 'People' . 'Pets' 'Kind' -> text : 'Kind'",
    "collection select . 'People' % 'Friends' 'since' -> number : 'Since'",
    "collection select . 'People' 'a' -> number : 'Age' > 40 'city' -> reference : 'Lives In' limit 5 offset 3",
    "collection select . 'People' 's' -> stategroup : 'Status' == 'Married' 'since' -> ? 'Status' * 'Married' number : 'Since'",
    "collection select . 'People' 'c' -> > 'Lives In' text : 'Name' 'n' -> text : 'Name' offset 50",
    "collection select . 'People' from $who 'a' -> number : 'Age' limit 6",
    "collection select . 'People' 'a' -> number : 'Age' 's' -> ? 'Status' * 'Married' number : 'Since' limit 9 offset 4",
    "collection select . 'People' 'a' -> number : 'Age' 'a2' -> number : 'Age' limit 3 offset 4",
    "collection select . 'People' after $who 'a' -> number : 'Age' >= 30 limit 4 offset 1",
    "collection . 'People' : $who select . 'Pets' 'kind' -> text : 'Kind'",
];

#[test]
fn a_visitor_is_handed_the_rows_run_returns() {
    let (_dir, e) = engine(SCHEMA);
    load(&e);
    let mut rng = Rng(7);
    let mut nonempty = 0;
    for round in 0..8 {
        let params: HashMap<String, ParamValue> = [
            ("who".to_string(), ParamValue::Text(format!("p{:02}", rng.below(60)))),
            ("other".to_string(), ParamValue::Text(format!("p{:02}", rng.below(60)))),
        ]
        .into();
        for q in QUERIES {
            let want = run(&e, q, &params);
            let got = visit(&e, q, &params);
            assert_eq!(got, want, "round {round}: {q}");
            nonempty += usize::from(!want.1.is_empty());
        }
    }
    assert!(nonempty > QUERIES.len() * 6, "too few queries had rows to compare: {nonempty}");
}

#[test]
fn texts_of_a_streamed_query_are_borrowed_from_the_snapshot() {
    let (_dir, e) = engine(SCHEMA);
    load(&e);
    let text = "collection match p in . 'People' select 'name' -> p text : 'Name' 'p' -> p";
    let plan = plan(&e, text);
    let (mut borrowed, mut rows) = (0, 0);
    e.visit_rows(&plan, &HashMap::new(), None, &mut |_, values| {
        rows += 1;
        borrowed += usize::from(matches!(&values[0], RowValue::Text(std::borrow::Cow::Borrowed(_))));
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!((rows, borrowed), (60, 60));
}

#[test]
fn key_paths_of_a_streamed_query_are_borrowed_from_the_snapshot() {
    let (_dir, e) = engine(SCHEMA);
    load(&e);
    // A dictionary entry under an entry, and a matrix entry (its last key the target's).
    for (text, matrix) in [
        ("collection match p in . 'People' k in p . 'Pets' select 'pet' -> k", false),
        ("collection match p in . 'People' f in p % 'Friends' select 'link' -> f", true),
    ] {
        let plan = plan(&e, text);
        let (mut borrowed, mut rows) = (0, 0);
        e.visit_rows(&plan, &HashMap::new(), None, &mut |_, values| {
            rows += 1;
            let RowValue::Key(keys) = &values[0] else { panic!("{text}: {values:?}") };
            assert_eq!(keys.len(), 2, "{text}: {keys:?}");
            if matrix {
                // The link's last key is the friend's own key: a person's.
                let last = values[0].last_key().unwrap_or_default();
                assert!(last.len() == 3 && last.starts_with('p'), "{text}: {keys:?}");
            }
            borrowed += usize::from(keys.iter().all(|k| matches!(k, std::borrow::Cow::Borrowed(_))));
            ControlFlow::Continue(())
        })
        .unwrap();
        assert!(rows > 10, "{text}: {rows} rows");
        assert_eq!(borrowed, rows, "{text}");
    }
}

#[test]
fn a_reference_of_one_key_is_a_text_streamed_or_not() {
    let (_dir, e) = engine(SCHEMA);
    load(&e);
    // A collection query streams; `order by` makes a pattern query collect its rows first.
    for text in [
        "collection select . 'People' 'city' -> reference : 'Lives In'",
        "collection match p in . 'People' select 'city' -> p reference : 'Lives In' order by 'city'",
    ] {
        let mut rows = 0;
        e.visit_rows(&plan(&e, text), &HashMap::new(), None, &mut |_, values| {
            rows += 1;
            let city = values[0].as_str().unwrap_or_else(|| panic!("{text}: {values:?}"));
            assert!(city.starts_with('c'), "{text}: {city}");
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(rows, 60, "{text}");
    }
}

#[test]
fn texts_of_a_collection_query_are_borrowed_and_keys_spelled_into_one_buffer() {
    let (_dir, e) = engine(SCHEMA);
    load(&e);
    let text = "collection select . 'People' 'name' -> text : 'Name'";
    let plan = plan(&e, text);
    let (mut borrowed, mut keys) = (0, Vec::new());
    e.visit_rows(&plan, &HashMap::new(), None, &mut |key, values| {
        borrowed += usize::from(matches!(&values[0], RowValue::Text(std::borrow::Cow::Borrowed(_))));
        keys.push(key.to_vec());
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(borrowed, 60);
    assert_eq!(keys, (0..60).map(|p| vec![format!("p{p:02}")]).collect::<Vec<_>>());
}

#[test]
fn a_visitor_that_breaks_stops_the_scan() {
    let (_dir, e) = engine(SCHEMA);
    load(&e);
    for text in
        ["collection match p in . 'People' select 'p' -> p", "collection select . 'People' 'p' -> text : 'Name'"]
    {
        let plan = plan(&e, text);
        let mut seen = Vec::new();
        let total = e
            .visit_rows(&plan, &HashMap::new(), None, &mut |key, values| {
                seen.push(key.first().map_or_else(|| values[0].as_str().unwrap().to_string(), Clone::clone));
                if seen.len() == 3 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .unwrap();
        assert_eq!(seen, ["p00", "p01", "p02"], "{text}");
        assert_eq!(total, 3, "{text}: the matches counted before the visitor stopped");
    }
}

#[test]
fn instructions_without_rows_are_refused_and_nothing_runs() {
    let (_dir, e) = engine(SCHEMA);
    load(&e);
    let version = e.database().version();
    for text in [
        "update ( 'Cities' -> dictionary \"c9\" ( 'Name' -> text \"Nine\" ) )",
        "get . 'People' : \"p01\"",
        "transaction ( collection match p in . 'People' select 'p' -> p )",
    ] {
        let plan = plan(&e, text);
        let mut called = false;
        let err = e
            .visit_rows(&plan, &HashMap::new(), None, &mut |_, _| {
                called = true;
                ControlFlow::Continue(())
            })
            .expect_err(text);
        assert!(err.to_string().contains("only a query's rows can be visited"), "{text}: {err}");
        assert!(!called, "{text}");
    }
    assert_eq!(e.database().version(), version, "nothing was written");
}
