//! A collection query run inside the write transaction (a member of a transaction that
//! writes) packs its rows for later (`run/rows.rs`): spelt out, they must be the rows the same
//! query answers on a snapshot — values of every kind, keys of dictionaries and matrices,
//! filters, offsets, limits and key ranges.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;

use espalier_instruction::{Engine, ParamValue, Reply};

mod common;
use common::{engine, exec, plan};

const SCHEMA: &str = r#"
root (
    'Clients' -> dictionary (
        'Name' -> text
        'Premium' -> stategroup ( 'No' -> ( ) 'Yes' -> ( 'Since' -> number ) )
        'Tags' -> matrix ( .^ . 'Labels' ) ( 'Weight' -> number )
        'Notes' -> dictionary ( 'Text' -> text )
    )
    'Labels' -> dictionary ( 'Colour' -> text )
    'Counter' -> number
)
"#;

fn load(e: &Engine) {
    exec(e, "update ( 'Labels' -> dictionary \"red\" ( 'Colour' -> text \"rouge\" ) 'Labels' -> dictionary \"blue\" ( 'Colour' -> text \"bleu\" ) )");
    for i in 0..40 {
        let premium = if i % 3 == 0 {
            format!("'Premium' -> stategroup 'Yes' ( 'Since' -> number {i} )")
        } else {
            "'Premium' -> stategroup 'No' ( )".to_string()
        };
        exec(
            e,
            &format!(
                "update ( 'Clients' -> dictionary \"c{i:02}\" ( 'Name' -> text \"name ü {i}\" {premium} \
                 'Tags' -> matrix \"red\" ( 'Weight' -> number {i} ) \
                 'Notes' -> dictionary \"n1\" ( 'Text' -> text \"note {i}\" ) ) )"
            ),
        );
    }
}

const QUERIES: &[&str] = &[
    "collection select . 'Clients' 'n' -> text : 'Name' 'p' -> stategroup : 'Premium'",
    "collection select . 'Clients' 'n' -> text : 'Name' > \"name ü 2\" 's' -> ? 'Premium' * 'Yes' number : 'Since'",
    "collection select . 'Clients' 'n' -> text : 'Name' ( [ 'name ü 1' ] * ) limit 3",
    "collection select . 'Clients' 'n' -> text : 'Name' limit 7 offset 5",
    "collection select . 'Clients' from $k 'n' -> text : 'Name' limit 4",
    "collection select . 'Clients' after $k 'n' -> text : 'Name' limit 300",
    "collection select . 'Clients' % 'Tags' 'w' -> number : 'Weight' > 3",
    "collection select . 'Clients' . 'Notes' 't' -> text : 'Text'",
];

fn params() -> HashMap<String, ParamValue> {
    HashMap::from([("k".to_string(), ParamValue::Text("c17".into()))])
}

#[test]
fn a_query_in_a_writing_transaction_answers_the_rows_of_a_snapshot() {
    let (_dir, e) = engine(SCHEMA);
    load(&e);
    for q in QUERIES {
        let alone = match e.execute_text(q, &params()) {
            Ok(r) => r,
            Err(err) => panic!("{q}: {err}"),
        };
        assert!(matches!(&alone, Reply::Query(r) if r.total > 0), "{q}: {alone:?}");
        // The write comes after the query: the query sees the state before it.
        let text = format!("transaction ( {q}, update ( 'Counter' -> number + 1 ) )");
        let Reply::Transaction(replies) = e.execute_text(&text, &params()).unwrap() else { panic!("{text}") };
        assert_eq!(replies[0], alone, "{q}");
        assert!(matches!(replies[1], Reply::Done { changes: 1, .. }), "{text}: {replies:?}");
    }
}

#[test]
fn a_detached_write_answers_packed_rows_and_a_node_spelt_out() {
    let (_dir, e) = engine(SCHEMA);
    load(&e);
    let e = Arc::new(e);
    let q = QUERIES[1];
    let Reply::Query(alone) = e.execute_text(q, &params()).unwrap() else { panic!() };
    let Reply::Node(node) = e.execute_text("get . 'Clients' : \"c03\"", &params()).unwrap() else { panic!() };
    let run = |text: &str| {
        let plan = plan(&e, text);
        let (tx, rx) = mpsc::channel();
        e.run_detached(plan, params(), true, move |r| tx.send(r).unwrap());
        rx.recv().unwrap().unwrap()
    };
    let written = run(&format!("transaction ( {q}, get . 'Clients' : \"c03\", update ( 'Counter' -> number + 1 ) )"));
    assert!(written.is_large());
    let Reply::Transaction(replies) = written.into_reply().unwrap() else { panic!() };
    assert_eq!(replies[0], Reply::Query(alone));
    assert_eq!(replies[1], Reply::Node(node));
    // A write that reads nothing is small: its reply is sent from the writer.
    let written = run("update ( 'Counter' -> number + 1 )");
    assert!(!written.is_large());
    assert!(matches!(written.into_reply().unwrap(), Reply::Done { changes: 1, .. }));
}
