//! Key-range reads: `collection … select . 'd' from "k" | after "k" … limit N`. The rows are
//! those of a sorted map from the start key on, the text prints and parses back, the checker
//! refuses what has no key order, and a read with a limit stops after its page.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};

use espalier_instruction::parse::{clear_spans, parse_instruction, to_text, ParseOptions};
use espalier_instruction::{Engine, ParamValue, Reply};

mod common;
use common::{engine, exec, Rng};

const SCHEMA: &str = r#"
root (
    'Users' -> dictionary (
        'Field' -> text
        'Score' -> number
        'Visits' -> dictionary ( 'At' -> number )
    )
    'Tags' -> matrix ( . 'Users' ) ( 'Weight' -> number )
)
"#;

fn parse(text: &str) -> espalier_instruction::ast::Instruction {
    parse_instruction(text, ParseOptions::CLIENT).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The keys and `Score` values of a query's rows, with its total.
fn rows(e: &Engine, text: &str, params: &HashMap<String, ParamValue>) -> (u64, Vec<(String, i64)>) {
    match e.execute_text(text, params).unwrap_or_else(|err| panic!("{text}\n  failed: {err}")) {
        Reply::Query(q) => {
            let rows = q.rows.iter().map(|r| (r.key.join("/"), r.values[0].as_i64().unwrap())).collect();
            (q.total, rows)
        }
        other => panic!("{text}: not a query reply: {other:?}"),
    }
}

#[test]
fn from_and_after_print_and_parse_back() {
    for text in [
        "collection select . 'Users' from \"u5\" 's' -> number : 'Score' limit 300",
        "collection select . 'Users' after $last 's' -> number : 'Score' limit 3 offset 1",
        "collection select . 'Users' from 42",
        "collection select . 'Users' . 'Visits' after \"a\" 'at' -> number : 'At' > 3 limit 2",
    ] {
        let mut parsed = parse(text);
        let printed = to_text(&parsed);
        assert_eq!(printed, text);
        let mut again = parse(&printed);
        clear_spans(&mut parsed);
        clear_spans(&mut again);
        assert_eq!(again, parsed);
    }
}

#[test]
fn key_ranges_without_key_order_are_refused_before_they_run() {
    let (_d, e) = engine(SCHEMA);
    for (text, want) in [
        ("collection select % 'Tags' from \"u1\"", "matrix"),
        ("collection . 'Users' : \"u1\" select from \"a\"", "needs a collection path"),
        ("collection select . 'Users' from [ \"a\", \"b\" ]", "one key"),
        ("collection select . 'Users' from", "a value"),
    ] {
        let err = e.execute_text(text, &HashMap::new()).expect_err(text).to_string();
        assert!(err.contains(want), "{text}: {err}");
    }
}

/// Random keys, random starts, limits and offsets: the rows are the model's range, in order.
#[test]
fn a_key_range_returns_the_model_s_rows_in_key_order() {
    let (_d, e) = engine(SCHEMA);
    let mut rng = Rng(0x5eed_1234);
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    let mut visits: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut items = String::new();
    for _ in 0..400 {
        let key = format!("u{}", rng.below(1000));
        let score = i64::try_from(rng.below(100)).unwrap();
        if model.contains_key(&key) {
            continue;
        }
        model.insert(key.clone(), score);
        let visit = format!("v{}", rng.below(3));
        visits.insert((key.clone(), visit.clone()), score);
        items.push_str(&format!(
            " 'Users' -> dictionary \"{key}\" ( 'Score' -> number {score} 'Visits' -> dictionary \"{visit}\" ( 'At' -> number {score} ) )"
        ));
    }
    exec(&e, &format!("update ({items} )"));
    for round in 0..200 {
        let start = format!("u{}", rng.below(1100));
        let exclusive = rng.below(2) == 1;
        let limit = rng.below(40);
        let offset = rng.below(5);
        let word = if exclusive { "after" } else { "from" };
        let mut params = HashMap::new();
        let key = if round % 2 == 0 {
            format!("\"{start}\"")
        } else {
            params.insert("k".to_string(), ParamValue::Text(start.clone()));
            "$k".to_string()
        };
        let in_range = |k: &String| if exclusive { *k > start } else { *k >= start };
        let text =
            format!("collection select . 'Users' {word} {key} 's' -> number : 'Score' limit {limit} offset {offset}");
        let want: Vec<(String, i64)> = model
            .iter()
            .filter(|(k, _)| in_range(k))
            .skip(offset as usize)
            .take(limit as usize)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let (total, got) = rows(&e, &text, &params);
        assert_eq!(got, want, "{text}");
        // The scan stops when the page is full: the total counts the matching rows it read
        // (none for `limit 0`, whose page is full before it starts).
        let matching = model.keys().filter(|k| in_range(k)).count() as u64;
        let read = if limit == 0 { 0 } else { matching.min(offset + limit) };
        assert_eq!(total, read, "{text}");

        // With a filter and a nested collection: the start applies to the first dictionary.
        let text =
            format!("collection select . 'Users' . 'Visits' {word} {key} 'at' -> number : 'At' >= 50 limit {limit}");
        let want: Vec<(String, i64)> = visits
            .iter()
            .filter(|((k, _), at)| in_range(k) && **at >= 50)
            .take(limit as usize)
            .map(|((k, v), at)| (format!("{k}/{v}"), *at))
            .collect();
        assert_eq!(rows(&e, &text, &params).1, want, "{text}");
    }
    // Without a limit the range runs to the end of the collection, and total counts it.
    let (total, got) = rows(&e, "collection select . 'Users' from \"u5\" 's' -> number : 'Score'", &HashMap::new());
    let want: Vec<_> = model.range("u5".to_string()..).map(|(k, v)| (k.clone(), *v)).collect();
    assert_eq!((total, got.len()), (want.len() as u64, want.len()));
    assert_eq!(got, want);
}

/// The read seeks its first key and stops after its page: with the cancel flag already set
/// (looked at every 1024 rows read), a page of 300 from the middle of 5000 entries comes
/// back, while the same page without a start key (which counts every match) is stopped.
#[test]
fn a_key_range_with_a_limit_reads_its_page_not_the_collection() {
    let (_d, e) = engine(SCHEMA);
    let entries: String =
        (0..5000).map(|i| format!(r#" 'Users' -> dictionary "u{i:05}" ( 'Score' -> number {i} )"#)).collect();
    exec(&e, &format!("update ({entries} )"));
    let params = HashMap::new();
    let cancel = AtomicBool::new(true);
    let plan = |text: &str| e.check(&parse(text), Some(text)).unwrap();

    let ranged = plan("collection select . 'Users' from \"u02500\" 's' -> number : 'Score' limit 300");
    let Reply::Query(q) = e.read_cancellable(&ranged, &params, &cancel).expect("reads 300 rows, not 5000") else {
        panic!("not a query reply")
    };
    assert_eq!((q.total, q.rows.len()), (300, 300));
    assert_eq!(q.rows[0].key, vec!["u02500".to_string()]);
    assert_eq!(q.rows[299].key, vec!["u02799".to_string()]);

    let counted = plan("collection select . 'Users' 's' -> number : 'Score' limit 300");
    let err = e.read_cancellable(&counted, &params, &cancel).expect_err("counts all 5000");
    assert_eq!(err.code(), "limit", "{err}");
    cancel.store(false, Ordering::Relaxed);
    let Reply::Query(q) = e.read_cancellable(&counted, &params, &cancel).unwrap() else { panic!("not a query reply") };
    assert_eq!((q.total, q.rows.len()), (5000, 300));
}
