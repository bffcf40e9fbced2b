//! Pattern queries that must be refused, with the place and the reason.

use std::collections::HashMap;

use espalier_instruction::Engine;

mod common;
use common::{engine, execute_json};

const SCHEMA: &str = r#"
root (
    'Regions' -> dictionary (
        'Entry' -> reference ( . 'Track Elements' )
        'Sensors' -> dictionary ( )
        'Track Elements' -> dictionary (
            'Monitored By' -> matrix ( .^ .^ . 'Regions' . 'Sensors' ) ( )
            'Kind' -> stategroup (
                'Segment' -> ( 'Length' -> number )
                'Switch' -> ( 'Current Position' -> stategroup ( 'FAILURE' -> ( ) 'STRAIGHT' -> ( ) ) )
            )
        )
    )
    'Routes' -> dictionary (
        'Active' -> stategroup ( 'No' -> ( ) 'Yes' -> ( ) )
        'Requires' -> matrix ( .^ . 'Regions' . 'Sensors' ) ( )
        'Entry' -> reference ( .^ . 'Regions' . 'Track Elements' )
        'Exit' -> reference ( .^ . 'Regions' . 'Track Elements' )
    )
)
"#;

/// The error text of `query`, which must fail with `code`.
fn fails(e: &Engine, query: &str, code: &str) -> String {
    match e.execute_text(query, &HashMap::new()) {
        Ok(r) => panic!("{query}\n  should fail, gave {r:?}"),
        Err(err) => {
            assert_eq!(err.code(), code, "{query}\n  {err}");
            err.to_string()
        }
    }
}

#[test]
fn check_errors_point_at_the_offending_step() {
    let (_d, e) = engine(SCHEMA);
    let cases: &[(&str, &str)] = &[
        (
            "collection match s in . 'Regions' . 'Track Elements' ? 'Kind' * 'Segment' where s number : 'Lenght' <= 0 select 'x' -> s",
            "1:81: no property 'Lenght' in state 'Segment' of 'Kind'; it has 'Length'",
        ),
        (
            "collection match r in . 'Routes' . 'Requires' select 'x' -> r",
            "1:34: 'Requires' is a matrix, but `.` steps into a dictionary",
        ),
        (
            "collection match r in . 'Routes' where r ? 'Active' * 'Maybe' select 'x' -> r",
            "1:42: stategroup 'Active' has no state 'Maybe'; its states are 'No', 'Yes'",
        ),
        ("collection match r in . 'Routes' select 'x' -> q", "1:48: unknown variable q (bind it first with `q in …`); in scope here: r"),
        (
            "collection match r in . 'Routes' r in . 'Routes' select 'x' -> r",
            "1:34: variable r is already bound; choose another name",
        ),
        (
            "collection match r in . 'Routes' ? 'Active' * 'Yes' select 'x' -> r",
            "1:34: r would be bound to state 'Yes' of 'Active', which stores nothing",
        ),
        (
            "collection match r in . 'Routes' s in . 'Regions' . 'Sensors' where r > 'Entry' == s select 'x' -> r",
            "1:69: these steps from r reach an entry of 'Track Elements', but s is an entry of 'Sensors': they can never be the same node",
        ),
        (
            "collection match s in . 'Regions' . 'Sensors' where s < 'Exit' select 'x' -> s",
            "1:55: no reference or matrix named 'Exit' points at an entry of 'Sensors'",
        ),
        (
            "collection match t in . 'Regions' . 'Track Elements' where t < 'Entry' select 'x' -> t",
            "1:62: `< 'Entry'` is ambiguous: references named 'Entry' in an entry of 'Regions' and an entry of 'Routes' point here",
        ),
        (
            "collection match r in . 'Routes' where r > 'Requires' number : 'x' == 1 select 'x' -> r",
            "1:42: `> 'Requires'` over a matrix reaches many nodes, but a value path must reach one",
        ),
        (
            "collection match r in . 'Routes' select 'n' -> sum ( r stategroup : 'Active' )",
            "1:54: `sum` adds numbers",
        ),
        (
            "collection match r in . 'Routes' t in r repeat 1 to 3 ( > 'Entry' ) select 'x' -> r",
            "1:41: the steps of `repeat` must lead back to the kind of node they start from",
        ),
        (
            "collection match r in . 'Routes' where r stategroup : 'Active' == 'Yes' select 'a' -> r order by 'b'",
            "`order by 'b'`: no such column; the columns are 'a'",
        ),
        (
            "collection match t in . 'Regions' .^ .^ select 'x' -> t",
            "1:38: `.^` does not apply here: the root has no parent",
        ),
        (
            "collection match r in . 'Routes' where r number : 'Active' == 1 select 'x' -> r",
            "1:40: 'active' is a stategroup, not a number",
        ),
        (
            "collection match r in . 'Routes' where r stategroup : 'Active' > 'Yes' select 'x' -> r",
            "states compare with `==` and `!=` only",
        ),
        (
            "collection match r in . 'Routes' s in . 'Regions' . 'Sensors' where r % 'Requires' : r select 'x' -> r",
            "matrix 'Requires' is keyed by an entry of 'Sensors', but r is an entry of 'Routes'",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .map(|(query, want)| (query, want, fails(&e, query, "type")))
        .filter(|(_, want, got)| !got.contains(**want))
        .map(|(query, want, got)| format!("{query}\n  got:  {got}\n  want: {want}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn syntax_errors_point_at_the_offending_token() {
    let (_d, e) = engine(SCHEMA);
    let cases: &[(&str, &str)] = &[
        (
            "collection match select 'x' -> r",
            "1:18: expected a variable binding (`name in …`) after `match`, found `select`",
        ),
        ("collection match select in . 'Routes' select 'x' -> r", "1:18: expected a variable binding"),
        (
            "collection match r in . 'Routes'",
            "1:33: expected a binding (`name in …`), `where` or `select`, found end of input",
        ),
        ("collection match r in . 'Routes' select", "1:40: expected a column ('name' -> …) after `select`"),
        ("collection match r in select 'x' -> r", "1:23: expected a variable or a step"),
        (
            "collection match r in . 'Routes' t in r repeat 3 to 1 ( > 'Entry' ) select 'x' -> r",
            "`repeat 3 to 1`: the most is below the least",
        ),
        (
            "collection match r in . 'Routes' t in r repeat 1 to 5000 ( > 'Entry' ) select 'x' -> r",
            "repetitions must be between 0 and 1024, not 5000",
        ),
        (
            "collection match r in . 'Routes' where ( r select 'x' -> r",
            "1:44: expected `and`, `or` or `)`, found `select`",
        ),
        ("collection match r in . 'Routes' where r == 5 select 'x' -> r", "expected a variable after `==` / `!=`"),
        ("collection match r in . 'Routes' where exists ( ) select 'x' -> r", "in `exists ( … )`"),
        ("collection match r in . 'Routes' select 'x' -> r order 'x'", "expected `by` after `order`"),
        ("collection match r in . 'Routes' select 'x' -> count ( r", "1:54: `(` is never closed"),
        ("collection match r in . 'Routes' select 'x' -> shortest r ( > 'Entry' ) r max 3", "expected `to`"),
        (
            "explain get . 'Routes' : \"r\"",
            "1:9: expected `collection match …` after `explain` (it explains pattern queries), found `get`",
        ),
        ("explain collection select . 'Routes'", "1:9: expected `collection match …` after `explain`"),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .map(|(query, want)| (query, want, fails(&e, query, "syntax")))
        .filter(|(_, want, got)| !got.contains(**want))
        .map(|(query, want, got)| format!("{query}\n  got:  {got}\n  want: {want}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn run_time_errors_are_values_not_crashes() {
    let (_d, e) = engine(SCHEMA);
    // A parameter that was not given.
    let got = fails(&e, "collection match r in . 'Routes' : $route select 'x' -> r", "value");
    assert!(got.contains("no value given for parameter $route"), "{got}");
    // A compound key of the wrong arity, given as a parameter.
    let mut params = HashMap::new();
    params.insert("s".to_string(), espalier_instruction::ParamValue::Text("[\"a\"]".into()));
    let err = e
        .execute_text("collection match r in . 'Routes' where r % 'Requires' : $s select 'x' -> r", &params)
        .unwrap_err();
    assert_eq!(err.code(), "value", "{err}");
}

#[test]
fn the_json_form_runs_and_is_checked_like_the_text() {
    let (_d, e) = engine(SCHEMA);
    let json = r#"{"match":{"clauses":[{"bind":{"var":"r","from":null,"path":[{"dictionary":{"name":"Routes","key":null}}]}}],
        "distinct":false,"columns":[{"alias":"n","expr":{"count":{"distinct":false,"term":null}}}],
        "order":[],"limit":null,"offset":null}}"#;
    match execute_json(&e, json, &HashMap::new()).unwrap() {
        espalier_instruction::Reply::Query(q) => assert_eq!(q.rows[0].values, vec![serde_json::json!(0)]),
        other => panic!("{other:?}"),
    }
    let bad = json.replace(r#""term":null"#, r#""term":{"var":"q"}"#);
    let err = execute_json(&e, &bad, &HashMap::new()).unwrap_err();
    assert_eq!(err.code(), "type");
    assert!(err.to_string().starts_with("unknown variable q"), "{err}");
}

#[test]
fn json_only_shapes_are_bounded() {
    let (_d, e) = engine(SCHEMA);
    let with_path = |path: &str, var_from: &str| {
        format!(
            r#"{{"match":{{"clauses":[{{"bind":{{"var":"r","from":null,"path":[{{"dictionary":{{"name":"Routes","key":null}}}}]}}}},
            {{"bind":{{"var":"s","from":{var_from},"path":{path}}}}}],
            "distinct":false,"columns":[{{"alias":"n","expr":{{"count":{{"distinct":false,"term":null}}}}}}],
            "order":[],"limit":null,"offset":null}}}}"#
        )
    };
    // A repetition past the bound, and one whose most is below its least.
    let repeat = |min: u32, max: u32| {
        with_path(
            &format!(
                r#"[{{"repeat":{{"min":{min},"max":{max},"steps":[{{"up":"dictionary"}},{{"dictionary":{{"name":"Routes","key":null}}}}]}}}}]"#
            ),
            r#""r""#,
        )
    };
    for (json, want) in [(repeat(0, 5000), "need MIN <= MAX <= 1024"), (repeat(3, 1), "need MIN <= MAX")] {
        let err = execute_json(&e, &json, &HashMap::new()).unwrap_err();
        assert!(err.to_string().contains(want), "{err}");
    }
    // A path of 300 steps.
    let long: Vec<&str> =
        std::iter::repeat_n([r#"{"up":"dictionary"}"#, r#"{"dictionary":{"name":"Routes","key":null}}"#], 150)
            .flatten()
            .collect();
    let err = execute_json(&e, &with_path(&format!("[{}]", long.join(",")), r#""r""#), &HashMap::new()).unwrap_err();
    assert!(err.to_string().contains("a path of 300 steps; at most 256"), "{err}");
}
