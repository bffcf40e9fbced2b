//! Instructions end to end: text in, replies and typed errors out.

use std::collections::HashMap;

use espalier_instruction::{Engine, InstructionError, ParamValue, Reply};
use espalier_transaction::DatabaseOptions;
use serde_json::json;

mod common;
use common::engine;

const SCHEMA: &str = r#"
root (
    'Clients' -> dictionary (
        'Name' -> text
        'Is Premium Client' -> stategroup ( 'No' -> ( ) 'Yes' -> ( ) )
    )
    'Orders' -> dictionary (
        'Client' -> reference ( .^ . 'Clients' )
        'Quantity' -> number
        'Lines' -> dictionary ( 'Amount' -> number )
        'Tags' -> matrix ( .^ . 'Clients' ) ( 'Weight' -> number )
    )
    'Machines' -> dictionary (
        'Current Task' -> stategroup (
            'Not Selected' -> ( )
            'Selected' -> (
                'Current Order' -> reference ( ?^ .^ . 'Orders' )
                'Status' -> stategroup (
                    'Not Started' -> ( )
                    'Started' -> ( 'Starting Time' -> number 'Iteration' -> number )
                )
            )
        )
        'Pulses' -> number
    )
)
command 'start' ( 'machine' -> text 'order' -> text 'time' -> number ) (
    update . 'Machines' : $machine (
        'Current Task' -> stategroup 'Selected' set to (
            'Current Order' -> reference $order
            'Status' -> stategroup 'Started' ( 'Starting Time' -> number $time 'Iteration' -> number 1 )
        )
    )
)
command 'pulse' ( 'machine' -> text ) (
    update . 'Machines' : $machine ( 'Pulses' -> number + 1 )
)
"#;

fn run(e: &Engine, text: &str) -> Result<Reply, InstructionError> {
    e.execute_text(text, &HashMap::new())
}

fn ok(e: &Engine, text: &str) -> Reply {
    run(e, text).unwrap_or_else(|err| panic!("{text}\n  failed: {err}"))
}

fn fail(e: &Engine, text: &str) -> (String, String) {
    match run(e, text) {
        Ok(r) => panic!("{text}\n  should fail, got {r:?}"),
        Err(err) => (err.code().to_string(), err.to_string()),
    }
}

fn seed(e: &Engine) {
    ok(
        e,
        r#"update ( 'Clients' -> dictionary "c1" ( 'Name' -> text "Acme" 'Is Premium Client' -> stategroup 'Yes' ( ) ) )"#,
    );
    ok(e, r#"update ( 'Clients' -> dictionary "c2" ( 'Name' -> text "Abc Ltd" ) )"#);
    ok(e, r#"update ( 'Clients' -> dictionary "c3" ( 'Name' -> text "Bolt" ) )"#);
    for (o, c, q) in [("o1", "c1", 5), ("o2", "c2", 50), ("o3", "c1", 500)] {
        ok(
            e,
            &format!(
                r#"update ( 'Orders' -> dictionary "{o}" ( 'Client' -> reference "{c}" 'Quantity' -> number {q} ) )"#
            ),
        );
    }
    ok(e, r#"update ( 'Machines' -> dictionary "m1" ( ) 'Machines' -> dictionary "m2" ( ) )"#);
}

fn rows(r: Reply) -> (u64, Vec<(Vec<String>, Vec<serde_json::Value>)>) {
    match r {
        Reply::Query(q) => (q.total, q.rows.into_iter().map(|r| (r.key, r.values)).collect()),
        other => panic!("not a query reply: {other:?}"),
    }
}

#[test]
fn queries_filter_project_through_states_and_references_with_total() {
    let (_d, e) = engine(SCHEMA);
    seed(&e);
    let (total, got) = rows(ok(&e, "collection select . 'Clients' 'Name' -> text : 'Name' ( [ 'A' ] * ) limit 1"));
    assert_eq!(total, 2, "total counts every match, not just the page");
    assert_eq!(got, vec![(vec!["c1".into()], vec![json!("Acme")])]);
    let (total, got) = rows(ok(
        &e,
        "collection select . 'Orders' 'q' -> number : 'Quantity' > 10 'c' -> reference : 'Client' offset 1",
    ));
    assert_eq!(total, 2);
    assert_eq!(got, vec![(vec!["o3".into()], vec![json!(500), json!("c1")])]);
    // Through a reference into a stategroup: orders of premium clients.
    let (total, got) =
        rows(ok(&e, "collection select . 'Orders' 'p' -> > 'Client' stategroup : 'Is Premium Client' == 'Yes'"));
    assert_eq!(total, 2);
    assert_eq!(got.iter().map(|r| r.0[0].as_str()).collect::<Vec<_>>(), ["o1", "o3"]);
    // A projection through a state that is not selected excludes the row (B4 state filter).
    ok(&e, r#"command 'start' ( 'machine' -> "m1" 'order' -> "o2" 'time' -> 77 )"#);
    let (total, got) = rows(ok(&e, "collection select . 'Machines' 't' -> ? 'Current Task' * 'Selected' ? 'Status' * 'Started' number : 'Starting Time'"));
    assert_eq!((total, got), (1, vec![(vec!["m1".into()], vec![json!(77)])]));
    // B6 many_references: a node path to one machine, then a projection through state and two references.
    let (total, got) = rows(ok(
        &e,
        r#"collection . 'Machines' : "m1" select 'Premium' -> ? 'Current Task' * 'Selected' > 'Current Order' > 'Client' stategroup : 'Is Premium Client' limit 10"#,
    ));
    assert_eq!((total, got), (1, vec![(vec![], vec![json!("No")])]));
    // Nested collection path.
    ok(
        &e,
        r#"update . 'Orders' : "o1" ( 'Lines' -> dictionary "l1" ( 'Amount' -> number 3 ) 'Lines' -> dictionary "l2" ( ) )"#,
    );
    let (total, got) = rows(ok(&e, "collection select . 'Orders' . 'Lines' 'a' -> number : 'Amount'"));
    assert_eq!(total, 2);
    assert_eq!(got[0], (vec!["o1".into(), "l1".into()], vec![json!(3)]));
}

#[test]
fn b5_failures_are_typed_and_change_nothing() {
    let (_d, e) = engine(SCHEMA);
    seed(&e);
    let version = e.database().version();
    let cases = [
        (
            r#"update . 'Clients' : "c1" ( 'Is Premium Client' -> stategroup 'Yes' set to ( ) )"#,
            "already_in_state",
            ". 'Clients' : \"c1\" ? 'Is Premium Client' is already in state 'Yes'",
        ),
        (r#"update ( 'Clients' -> dictionary "c1" ( ) )"#, "key_exists", ". 'Clients' already has an entry \"c1\""),
        (r#"update ( 'Clients' -> dictionary "nope" remove )"#, "key_missing", ". 'Clients' has no entry \"nope\""),
        (
            r#"update . 'Machines' : "m1" ? 'Current Task' * 'Selected' ( 'Status' -> stategroup 'Started' set to ( ) )"#,
            "state_not_selected",
            ". 'Machines' : \"m1\" ? 'Current Task' is in state 'Not Selected', not 'Selected'",
        ),
        (
            r#"update ( 'Clients' -> dictionary "c2" remove )"#,
            "referenced",
            "cannot remove . 'Clients' : \"c2\": . 'Orders' : \"o2\" refers to it through 'Client'",
        ),
        (
            r#"update ( 'Orders' -> dictionary "o9" ( 'Quantity' -> number 1 ) )"#,
            "reference_unset",
            "reference 'Client' of . 'Orders' : \"o9\" must be set when the node is created",
        ),
        (
            r#"update . 'Orders' : "o1" ( 'Client' -> reference "zz" )"#,
            "key_missing",
            ". 'Clients' has no entry \"zz\"",
        ),
    ];
    for (text, code, message) in cases {
        let (c, m) = fail(&e, text);
        assert_eq!((c.as_str(), m.as_str()), (code, message), "{text}");
    }
    // A transaction whose last instruction fails leaves nothing of the first.
    let (c, _) = fail(
        &e,
        r#"transaction ( update ( 'Clients' -> dictionary "c9" ( ) ), update ( 'Clients' -> dictionary "c1" ( ) ) )"#,
    );
    assert_eq!(c, "key_exists");
    assert_eq!(e.database().version(), version, "no failed instruction committed");
    let (total, _) = rows(ok(&e, "collection select . 'Clients'"));
    assert_eq!(total, 3);
}

#[test]
fn type_errors_name_the_place_before_anything_runs() {
    let (_d, e) = engine(SCHEMA);
    let cases = [
        (
            "update ( 'Nmae' -> text \"x\" )",
            "1:10: no property 'Nmae' in the root; it has 'Clients', 'Orders', 'Machines'",
        ),
        ("update ( 'Clients' -> number 5 )", "1:10: 'Clients' is a dictionary; `number` does not apply to it"),
        ("collection select . 'Clients' 'x' -> number : 'Name'", "1:31: 'name' is a text, not a number"),
        (
            "update . 'Machines' : \"m\" ( 'Current Task' -> stategroup 'Busy' set to ( ) )",
            "1:29: stategroup 'Current Task' has no state 'Busy'; its states are 'Not Selected', 'Selected'",
        ),
        ("command 'stop' ( )", "unknown command 'stop'; declared: 'start', 'pulse'"),
        ("command 'pulse' ( )", "command 'pulse' needs parameter 'machine'"),
    ];
    for (text, message) in cases {
        let (code, m) = fail(&e, text);
        assert_eq!(m, message, "{text}");
        assert_eq!(code, "type");
    }
    let (code, m) = fail(&e, "update . 'Clients' ( )");
    assert_eq!(code, "syntax");
    assert_eq!(m, "syntax error: 1:20: expected `:` and a key after dictionary 'Clients' (a node path picks one entry), found `(`");
    let (code, m) = fail(&e, "update ( 'Clients' -> dictionary index ( ) )");
    assert_eq!(
        (code.as_str(), m.as_str()),
        ("syntax", "syntax error: 1:34: `index` is only allowed in benchmark files")
    );
}

#[test]
fn commands_transactions_params_and_get() {
    let (_d, e) = engine(SCHEMA);
    seed(&e);
    let r = ok(&e, r#"command 'start' ( 'machine' -> "m2" 'order' -> "o3" 'time' -> 12345 )"#);
    assert!(matches!(r, Reply::Done { changes, .. } if changes >= 4), "{r:?}");
    for _ in 0..3 {
        ok(&e, r#"command 'pulse' ( 'machine' -> "m2" )"#);
    }
    let node = match ok(&e, r#"get . 'Machines' : "m2""#) {
        Reply::Node(n) => n,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        node,
        json!({"Current Task": {"Selected": {"Current Order": "o3", "Status": {"Started": {"Starting Time": 12345, "Iteration": 1}}}}, "Pulses": 3})
    );
    // The running task refers to o3: o3 cannot go; switching the machine away frees it.
    assert_eq!(fail(&e, r#"update ( 'Orders' -> dictionary "o3" remove )"#).0, "referenced");
    let r = ok(
        &e,
        r#"transaction ( update . 'Machines' : "m2" ( 'Current Task' -> stategroup 'Not Selected' set to ( ) ), update ( 'Orders' -> dictionary "o3" remove ), collection select . 'Orders' )"#,
    );
    match r {
        Reply::Transaction(replies) => {
            assert!(matches!(replies[0], Reply::Done { .. }));
            assert!(
                matches!(&replies[2], Reply::Query(q) if q.total == 2),
                "a transaction's query sees its own writes"
            );
        }
        other => panic!("{other:?}"),
    }
    // Parameters in free-standing instructions.
    let mut params = HashMap::new();
    params.insert("min".to_string(), ParamValue::Int(40));
    let r = e.execute_text("collection select . 'Orders' 'q' -> number : 'Quantity' >= $min", &params).unwrap();
    assert_eq!(rows(r).0, 1);
    // JSON form of the same thing.
    let json = r#"{"query":{"path":[],"select":[{"dictionary":{"name":"Orders","key":null}}],"projections":[{"alias":"q","path":[],"kind":"number","property":"Quantity","filter":{"compare":{"op":"ge","value":{"param":"min"}}}}],"limit":null,"offset":null}}"#;
    assert_eq!(rows(common::execute_json(&e, json, &params).unwrap()).0, 1);
}

#[test]
fn matrix_entries_are_keyed_by_reference_and_navigable_backwards() {
    let (_d, e) = engine(SCHEMA);
    seed(&e);
    ok(&e, r#"update . 'Orders' : "o1" ( 'Tags' -> matrix "c3" ( 'Weight' -> number 2 ) )"#);
    assert_eq!(fail(&e, r#"update . 'Orders' : "o1" ( 'Tags' -> matrix "c3" ( ) )"#).0, "key_exists");
    assert_eq!(fail(&e, r#"update . 'Orders' : "o1" ( 'Tags' -> matrix "nobody" ( ) )"#).0, "key_missing");
    assert_eq!(fail(&e, r#"update ( 'Clients' -> dictionary "c3" remove )"#).0, "referenced");
    let (_, got) = rows(ok(&e, "collection select . 'Orders' % 'Tags' 'w' -> number : 'Weight'"));
    assert_eq!(got, vec![(vec!["o1".into(), "c3".into()], vec![json!(2)])]);
    ok(&e, r#"update . 'Orders' : "o1" ( 'Tags' -> matrix "c3" remove )"#);
    ok(&e, r#"update ( 'Clients' -> dictionary "c3" remove )"#);
}

/// A matrix row's key is its target's key, spelled out only for rows in the page: paging
/// through a matrix must give the same keys, in order, as reading it whole.
#[test]
fn matrix_rows_keep_their_keys_through_offset_limit_and_filters() {
    let (_d, e) = engine(SCHEMA);
    seed(&e);
    for (o, c, w) in [("o1", "c1", 1), ("o1", "c2", 2), ("o1", "c3", 3), ("o2", "c3", 4), ("o3", "c2", 5)] {
        ok(&e, &format!(r#"update . 'Orders' : "{o}" ( 'Tags' -> matrix "{c}" ( 'Weight' -> number {w} ) )"#));
    }
    let q = "collection select . 'Orders' % 'Tags' 'w' -> number : 'Weight'";
    let (total, all) = rows(ok(&e, q));
    assert_eq!(total, 5);
    let keys: Vec<Vec<String>> = all.iter().map(|(k, _)| k.clone()).collect();
    let expected: Vec<Vec<String>> = [("o1", "c1"), ("o1", "c2"), ("o1", "c3"), ("o2", "c3"), ("o3", "c2")]
        .iter()
        .map(|(o, c)| vec![o.to_string(), c.to_string()])
        .collect();
    assert_eq!(keys, expected);
    for offset in 0..6 {
        for limit in 1..4 {
            let (t, page) = rows(ok(&e, &format!("{q} limit {limit} offset {offset}")));
            assert_eq!(t, 5, "the total counts every row");
            let want: Vec<_> = all.iter().skip(offset).take(limit).cloned().collect();
            assert_eq!(page, want, "limit {limit} offset {offset}");
        }
    }
    let (t, filtered) =
        rows(ok(&e, "collection select . 'Orders' % 'Tags' 'w' -> number : 'Weight' > 2 limit 1 offset 1"));
    assert_eq!((t, filtered), (3, vec![(vec!["o2".into(), "c3".into()], vec![json!(4)])]));
}

#[test]
fn bad_command_bodies_are_schema_errors_pointing_into_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let schema = "root ( 'n' -> number )\ncommand 'bump' ( ) (\n  update ( 'm' -> number 1 )\n)\n";
    let err = Engine::create(&dir.path().join("db"), schema, DatabaseOptions::default()).err().expect("must fail");
    let text = err.to_string();
    assert!(text.contains("schema:3:12: error: in command 'bump': no property 'm' in the root; it has 'n'"), "{text}");
    assert!(!dir.path().join("db").exists(), "nothing created for a bad schema");
}

#[test]
fn an_entry_removed_and_added_again_inside_one_transaction_is_updated_as_the_new_entry() {
    // The write path remembers where the entry it found by key lives; after the entry is
    // removed and a new one takes its key (with a new record id), that memory must not be used.
    let (_d, e) = engine(SCHEMA);
    seed(&e);
    ok(
        &e,
        r#"transaction (
            update . 'Machines' : "m1" ( 'Pulses' -> number 5 ),
            update ( 'Machines' -> dictionary "m1" remove ),
            update ( 'Machines' -> dictionary "m1" ( 'Pulses' -> number 1 ) ),
            update . 'Machines' : "m1" ( 'Pulses' -> number + 10 )
        )"#,
    );
    let (_, got) = rows(ok(&e, r#"collection select . 'Machines' 'p' -> number : 'Pulses'"#));
    assert!(got.contains(&(vec!["m1".to_string()], vec![json!(11)])), "{got:?}");
    let snap = e.database().snapshot().unwrap();
    let report = espalier_data::check(&snap.graph(), &mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
}

/// A read given a cancel flag stops soon after it is set (the server sets it past its query
/// time limit), with a `limit` error; unset, the same read runs to its end. Both kinds of
/// query: collection walks and pattern matches.
#[test]
fn reads_stop_when_cancelled() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (_d, e) = engine(SCHEMA);
    let entries: String =
        (0..3000).map(|i| format!(r#" 'Clients' -> dictionary "k{i:04}" ( 'Name' -> text "n" )"#)).collect();
    ok(&e, &format!("update ({entries} )"));
    let params = HashMap::new();
    let check = |text: &str| {
        let instr =
            espalier_instruction::parse::parse_instruction(text, espalier_instruction::parse::ParseOptions::CLIENT)
                .unwrap();
        e.check(&instr, Some(text)).unwrap()
    };
    for text in [
        "collection select . 'Clients' 'n' -> text : 'Name'",
        "collection match c in . 'Clients' select 'n' -> c text : 'Name'",
    ] {
        let plan = check(text);
        let cancel = AtomicBool::new(false);
        let Reply::Query(q) = e.read_cancellable(&plan, &params, &cancel).unwrap() else { panic!("{text}") };
        assert_eq!(q.total, 3000, "{text}");
        cancel.store(true, Ordering::Relaxed);
        let err = e.read_cancellable(&plan, &params, &cancel).unwrap_err();
        assert_eq!(err.code(), "limit", "{text}: {err}");
        assert!(err.to_string().contains("stopped"), "{err}");
    }
}

/// #18: references are checked when the whole request ends, so a transaction's members may
/// come in any order; the error names the member (from 0, with its text) and the node.
#[test]
fn an_aggregate_over_a_removed_target_is_left_until_the_referrer_moves_on() {
    let schema = r#"
root (
    'Clients' -> dictionary (
        'Ordered' -> sum ( < 'Client' ) 'Quantity'
    )
    'Orders' -> dictionary (
        'Client' -> reference ( .^ . 'Clients' )
        'Quantity' -> number
    )
)"#;
    let (_d, e) = engine(schema);
    ok(&e, r#"update ( 'Clients' -> dictionary "a" ( ) 'Clients' -> dictionary "b" ( ) )"#);
    ok(&e, r#"update ( 'Orders' -> dictionary "o" ( 'Client' -> reference "a" 'Quantity' -> number 5 ) )"#);
    // Remove the target, change the summed number on the referrer that still points at it
    // (no aggregate of the removed client to move), then point the referrer elsewhere.
    ok(
        &e,
        r#"transaction ( update ( 'Clients' -> dictionary "a" remove ), update . 'Orders' : "o" ( 'Quantity' -> number 7 ), update . 'Orders' : "o" ( 'Client' -> reference "b" ) )"#,
    );
    let sums = rows(ok(&e, "collection select . 'Clients' 'Ordered' -> number : 'Ordered'"));
    assert_eq!(sums, (1, vec![(vec!["b".to_string()], vec![serde_json::json!(7)])]));
}

#[test]
fn integrity_is_checked_when_the_transaction_ends() {
    let (_d, e) = engine(SCHEMA);
    seed(&e);
    let clients = |e: &Engine| rows(ok(e, "collection select . 'Clients'")).0;
    let orders = |e: &Engine| rows(ok(e, "collection select . 'Orders'")).0;
    // c2 is referred to by o2 only. Removing the target first and the referrer second used to
    // fail on the first member; now both orders succeed.
    ok(
        &e,
        r#"transaction ( update ( 'Clients' -> dictionary "c2" remove ), update ( 'Orders' -> dictionary "o2" remove ) )"#,
    );
    assert_eq!((clients(&e), orders(&e)), (2, 2));
    // Re-pointing the referrer later in the transaction frees the target too.
    ok(
        &e,
        r#"transaction ( update . 'Clients' : "c3" ( 'Name' -> text "Cato" ), update ( 'Clients' -> dictionary "c1" remove ), update . 'Orders' : "o1" ( 'Client' -> reference "c3" ), update . 'Orders' : "o3" ( 'Client' -> reference "c3" ) )"#,
    );
    assert_eq!(clients(&e), 1);
    // Still referred to at the end: the whole transaction fails, naming the member that
    // removed it and the referrer; nothing of it stays.
    let (code, message) = fail(
        &e,
        r#"transaction ( update ( 'Clients' -> dictionary "c4" ( ) ), update ( 'Clients' -> dictionary "c3" remove ), update . 'Orders' : "o1" ( 'Client' -> reference "c4" ) )"#,
    );
    assert_eq!(code, "referenced");
    assert!(
        message.starts_with("in transaction member [1] `update ( 'Clients' -> dictionary \"c3\" remove )`"),
        "{message}"
    );
    assert!(
        message.contains("cannot remove . 'Clients' : \"c3\"") && message.contains("'Orders' : \"o3\""),
        "{message}"
    );
    assert_eq!((clients(&e), orders(&e)), (1, 2));
    // A reference is to a node, not to its key: a client added again under the key is
    // another node, which the old reference does not reach.
    let (code, _) = fail(
        &e,
        r#"transaction ( update ( 'Clients' -> dictionary "c3" remove ), update ( 'Clients' -> dictionary "c3" ( ) ) )"#,
    );
    assert_eq!(code, "referenced");
    // A member's own error names it too.
    let (code, message) = fail(
        &e,
        r#"transaction ( update ( 'Clients' -> dictionary "c5" ( ) ), update ( 'Clients' -> dictionary "c5" ( ) ) )"#,
    );
    assert_eq!(code, "key_exists");
    assert!(message.starts_with("in transaction member [1] `"), "{message}");
    assert_eq!(clients(&e), 1);
    // A matrix key is named by its target's path, not by a record number.
    ok(&e, r#"update . 'Orders' : "o1" ( 'Tags' -> matrix "c3" ( ) )"#);
    let (code, message) = fail(&e, r#"update . 'Orders' : "o1" ( 'Tags' -> matrix "c3" ( ) )"#);
    assert_eq!(code, "key_exists");
    assert!(message.contains("already has an entry . 'Clients' : \"c3\""), "{message}");
    assert!(!message.contains("record"), "{message}");
}
