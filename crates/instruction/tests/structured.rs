//! Structured instructions (JSON, and anything decoded with serde as the protocol does) meet
//! the same rules as the text form: what the text parser rejects, they reject with the same
//! message, and no value reaches an `assert` of the executor (#18 item 5, #19).

use std::collections::HashMap;

use espalier_instruction::ast::{Instruction, Located, Step, Value};
use espalier_instruction::parse::{parse_instruction, ParseOptions};
use espalier_instruction::{validate, Engine, InstructionError};
use espalier_protocol::{parse_json, Instruction as Wire};

mod common;
use common::{engine, execute_json};

const SCHEMA: &str = "root (\n  'n' -> number\n  'd' -> dictionary ( 'x' -> number )\n  \
                      's' -> stategroup ( 'A' -> ( ) 'B' -> ( ) )\n)\n";

/// Decodes `json` into the protocol's wire form and converts it to the syntax tree as the
/// server does (without `parse_json`), then checks and runs it through the engine: the outcome
/// as text, `Ok` or the error.
fn structured(e: &Engine, json: &str) -> Result<String, String> {
    let wire: Wire = serde_json::from_str(json).map_err(|err| err.to_string())?;
    let instr = wire.to_ast().map_err(|err| InstructionError::Parse(err.into_parse_error(None)).to_string())?;
    let plan = e.check(&instr, None).map_err(|err| err.to_string())?;
    e.run(&plan, &HashMap::new(), None).map(|r| format!("{r:?}")).map_err(|err| err.to_string())
}

/// `{"random":0}` sent as a structured instruction reached `assert!(bound > 0)` in run.rs
/// and panicked the writer thread (#18 item 5); any `random` or `index` from a client is
/// refused before it is checked, with the text parser's message.
#[test]
fn random_zero_and_benchmark_values_are_refused_not_panicked_on() {
    let (_d, e) = engine(SCHEMA);
    let cases = [
        r#"{"update":{"path":[],"items":[{"name":"n","op":{"set_number":{"random":0}}}]}}"#,
        r#"{"update":{"path":[],"items":[{"name":"n","op":{"set_number":{"random":5}}}]}}"#,
        r#"{"update":{"path":[],"items":[{"name":"n","op":{"add_number":"index"}}]}}"#,
        r#"{"get":{"path":[{"dictionary":{"name":"d","key":{"random":null}}}]}}"#,
        r#"{"transaction":[{"update":{"path":[],"items":[{"name":"s","op":{"switch_state":{"state":{"random":null},"items":[]}}}]}}]}"#,
    ];
    for json in cases {
        let word = if json.contains("index") { "index" } else { "random" };
        let want = format!("`{word}` is only allowed in benchmark files");
        let through_engine = structured(&e, json).expect_err(json);
        assert!(through_engine.contains(&want), "{json}: {through_engine}");
        let through_json = execute_json(&e, json, &HashMap::new()).expect_err(json).to_string();
        assert!(through_json.contains(&want), "{json}: {through_json}");
        assert_eq!(parse_json(json).expect_err(json).0.message, want, "{json}");
    }
    // The database is untouched and still serves.
    assert!(structured(&e, r#"{"update":{"path":[],"items":[{"name":"n","op":{"set_number":{"int":7}}}]}}"#).is_ok());
}

/// Pairs of a text the parser rejects and the structured instruction that says the same:
/// both are refused with the same message.
#[test]
fn what_the_text_parser_rejects_the_structured_form_rejects_with_the_same_message() {
    let (_d, e) = engine(SCHEMA);
    let pattern = |clause: &str| {
        format!(
            r#"{{"match":{{"clauses":[{clause}],"distinct":false,"columns":[{{"alias":"x","expr":{{"term":{{"var":"r"}}}}}}],"order":[],"limit":null,"offset":null}}}}"#
        )
    };
    let bind = |var: &str, step: &str| format!(r#"{{"bind":{{"var":"{var}","from":null,"path":[{step}]}}}}"#);
    let routes = r#"{"dictionary":{"name":"d","key":null}}"#;
    let cases: Vec<(String, String)> = vec![
        ("transaction ( )".into(), r#"{"transaction":[]}"#.into()),
        (
            "collection match r in . 'd' t in r repeat 3 to 1 ( > 'x' ) select 'x' -> r".into(),
            pattern(&format!(
                "{},{}",
                bind("r", routes),
                bind("t", r#"{"repeat":{"min":3,"max":1,"steps":[{"reference":"x"}]}}"#)
            )),
        ),
        (
            "collection match r in . 'd' t in r repeat 1 to 5000 ( > 'x' ) select 'x' -> r".into(),
            pattern(&format!(
                "{},{}",
                bind("r", routes),
                bind("t", r#"{"repeat":{"min":1,"max":5000,"steps":[{"reference":"x"}]}}"#)
            )),
        ),
        (
            "collection select . 'd' : \"k\" 'x' -> number : 'x'".into(),
            r#"{"query":{"path":[],"select":[{"dictionary":{"name":"d","key":{"text":"k"}}}],"projections":[{"alias":"x","path":[],"kind":"number","property":"x","filter":null}],"limit":null,"offset":null}}"#.into(),
        ),
        (
            "collection select . 'd' 'x' -> . 'd' number : 'x'".into(),
            r#"{"query":{"path":[],"select":[{"dictionary":{"name":"d","key":null}}],"projections":[{"alias":"x","path":[{"dictionary":{"name":"d","key":null}}],"kind":"number","property":"x","filter":null}],"limit":null,"offset":null}}"#.into(),
        ),
        (
            "collection match r in . 'd' where r == count select 'x' -> r".into(),
            pattern(&format!(
                r#"{},{{"where":{{"path":{{"var":"r","path":[],"target":"count"}}}}}}"#,
                bind("r", routes)
            )),
        ),
    ];
    for (text, json) in &cases {
        let from_text = parse_instruction(text, ParseOptions::CLIENT).expect_err(text).0.message;
        let from_json = parse_json(json).expect_err(json).0.message;
        assert_eq!(from_text, from_json, "{text}\n{json}");
        let wire: Wire = serde_json::from_str(json).unwrap_or_else(|err| panic!("{err}: {json}"));
        let instr = wire.to_ast().unwrap_or_else(|err| panic!("{err}: {json}"));
        assert_eq!(validate(&instr).expect_err(json).message, from_json);
        let through_engine = structured(&e, json).expect_err(json);
        assert!(through_engine.contains(&from_json), "{through_engine}");
    }
}

/// Nesting past the bound: JSON cannot say it (serde_json stops at 128 levels first, with
/// its own error), but MessagePack or an instruction built in code can.
#[test]
fn nesting_past_the_bound_is_refused_in_both_forms() {
    let text = format!("get . 'd' : {}\"k\"{}", "[ ".repeat(70), " ]".repeat(70));
    let from_text = parse_instruction(&text, ParseOptions::CLIENT).expect_err(&text).0.message;
    let mut key = Value::Text("k".into());
    for _ in 0..70 {
        key = Value::Compound(vec![key]);
    }
    let instr = Instruction::Get {
        path: vec![Located { item: Step::Dictionary { name: "d".into(), key: Some(key) }, span: Default::default() }],
    };
    assert_eq!(validate(&instr).expect_err("deep").message, from_text);
    let (_d, e) = engine(SCHEMA);
    let through_engine = e.check(&instr, None).expect_err("deep").to_string();
    assert!(through_engine.contains(&from_text), "{through_engine}");
}

/// Forms only the structured form can build (the text grammar has no way to write them) are
/// refused too, rather than given a meaning the text form never has.
#[test]
fn structured_only_forms_are_refused() {
    let (_d, e) = engine(SCHEMA);
    let cases = [
        (r#"{"get":{"path":[{"dictionary":{"name":"d","key":{"compound":[]}}}]}}"#, "at least one component"),
        (r#"{"get":{"path":[{"dictionary":{"name":"d","key":{"param":""}}}]}}"#, "parameter name"),
        (r#"{"get":{"path":[{"dictionary":{"name":"d","key":{"param":"a b"}}}]}}"#, "not a parameter name"),
        (
            r#"{"query":{"path":[],"select":[{"dictionary":{"name":"d","key":null}}],"projections":[{"alias":"s","path":[],"kind":"stategroup","property":"s","filter":{"in":[]}}],"limit":null,"offset":null}}"#,
            "at least one state name",
        ),
        (
            r#"{"query":{"path":[],"select":[{"dictionary":{"name":"d","key":null}}],"projections":[{"alias":"s","path":[],"kind":"text","property":"t","filter":{"prefix":{"int":5}}}],"limit":null,"offset":null}}"#,
            "a text or a $parameter",
        ),
        (
            r#"{"match":{"clauses":[],"distinct":false,"columns":[],"order":[],"limit":null,"offset":null}}"#,
            "needs a variable binding",
        ),
        (
            r#"{"match":{"clauses":[{"bind":{"var":"r","from":null,"path":[{"dictionary":{"name":"d","key":null}}]}},{"where":{"and":[]}}],"distinct":false,"columns":[{"alias":"x","expr":{"term":{"var":"r"}}}],"order":[],"limit":null,"offset":null}}"#,
            "two conditions or more",
        ),
        (
            r#"{"match":{"clauses":[{"bind":{"var":"r","from":null,"path":[{"dictionary":{"name":"d","key":null}}]}},{"where":{"exists":[]}}],"distinct":false,"columns":[{"alias":"x","expr":{"term":{"var":"r"}}}],"order":[],"limit":null,"offset":null}}"#,
            "`exists ( … )` needs",
        ),
        (
            r#"{"match":{"clauses":[{"bind":{"var":"r s","from":null,"path":[{"dictionary":{"name":"d","key":null}}]}}],"distinct":false,"columns":[{"alias":"x","expr":{"term":{"var":"r"}}}],"order":[],"limit":null,"offset":null}}"#,
            "not a variable name",
        ),
    ];
    for (json, want) in cases {
        let from_json = parse_json(json).expect_err(json).0.message;
        assert!(from_json.contains(want), "{json}: {from_json}");
        let through_engine = structured(&e, json).expect_err(json);
        assert!(through_engine.contains(want), "{json}: {through_engine}");
    }
}
