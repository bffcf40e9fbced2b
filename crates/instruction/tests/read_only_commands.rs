//! A command whose body only reads is a stored procedure: it runs on a snapshot (no version
//! is used), answers with its last instruction's rows, and takes its parameters as values or
//! as `$` parameters of the call; a command that writes still answers `done`.

use std::collections::HashMap;

use espalier_instruction::{ParamValue, Reply};

mod common;
use common::{engine, exec};

const SCHEMA: &str = r#"
root (
    'People' -> dictionary (
        'Age' -> number
        'Friends' -> matrix ( .^ . 'People' ) ( )
    )
)
command 'friends' ( 'person' -> text ) (
    collection match x in . 'People' : $person f in x > 'Friends' select 'f' -> f order by 'f'
)
command 'older' ( 'age' -> number ) (
    collection match x in . 'People' where x number : 'Age' > $age select 'x' -> x order by 'x'
)
command 'birthday' ( 'person' -> text ) (
    update . 'People' : $person ( 'Age' -> number + 1 )
)
"#;

fn rows(reply: Reply) -> Vec<serde_json::Value> {
    match reply {
        Reply::Query(q) => q.rows.into_iter().map(|r| r.values[0].clone()).collect(),
        other => panic!("expected rows, got {other:?}"),
    }
}

#[test]
fn a_reading_command_answers_with_rows_and_writes_nothing() {
    let (_dir, e) = engine(SCHEMA);
    exec(&e, "update ( 'People' -> dictionary \"a\" ( 'Age' -> number 30 ) 'People' -> dictionary \"b\" ( 'Age' -> number 40 ) )");
    exec(&e, "update . 'People' : \"a\" ( 'Friends' -> matrix \"b\" ( ) )");
    let version = e.database().version();
    let got = rows(e.execute_text("command 'friends' ( 'person' -> \"a\" )", &HashMap::new()).unwrap());
    assert_eq!(got, vec![serde_json::json!("b")]);
    let params = HashMap::from([("p".to_string(), ParamValue::Text("a".into()))]);
    let got = rows(e.execute_text("command 'friends' ( 'person' -> $p )", &params).unwrap());
    assert_eq!(got, vec![serde_json::json!("b")]);
    let got = rows(e.execute_text("command 'older' ( 'age' -> 35 )", &HashMap::new()).unwrap());
    assert_eq!(got, vec![serde_json::json!("b")]);
    assert_eq!(e.database().version(), version, "reads commit nothing");
    let plan = e
        .check(
            &espalier_instruction::parse_instruction(
                "command 'friends' ( 'person' -> \"a\" )",
                espalier_instruction::parse::ParseOptions::CLIENT,
            )
            .unwrap(),
            None,
        )
        .unwrap();
    assert!(plan.is_read_only());
    match e.execute_text("command 'birthday' ( 'person' -> \"a\" )", &HashMap::new()).unwrap() {
        Reply::Done { changes, .. } => assert_eq!(changes, 1),
        other => panic!("a writing command answers done, got {other:?}"),
    }
}
