//! Syntax errors name what was expected and what was found, at the right line and column.

use espalier_instruction::parse::{parse_instruction, parse_instructions, ParseOptions};
use espalier_protocol::parse_json;

const CLIENT: ParseOptions = ParseOptions::CLIENT;

/// (line, column, message) of the error for `src`.
fn err(src: &str, opts: ParseOptions) -> (u32, u32, String) {
    let e = parse_instruction(src, opts).expect_err(src).0;
    (e.line, e.column, e.message)
}

#[test]
fn display_is_line_column_message() {
    let e = parse_instruction("update (\n  'n' number 5\n)", CLIENT).unwrap_err();
    assert_eq!(e.to_string(), "2:7: expected `->` after property name 'n', found `number`");
}

#[test]
fn node_path_needs_a_step_symbol() {
    // B.5.2 as printed in the thesis omits the `.`.
    assert_eq!(
        err("update 'd1' : random ? 'sg' * 's1' (\n  'n' -> number 2\n)", CLIENT),
        (1, 8, "expected a step (`.`, `%`, `+`, `?`, `>`) or `(`, found name 'd1'".into())
    );
    assert_eq!(
        err("collection . 'd' : \"a\" 'x' -> number : 'n'", CLIENT),
        (1, 24, "expected a step (`.`, `%`, `+`, `?`, `>`) or `select`, found name 'x'".into())
    );
    assert_eq!(
        err("update . 'd' ( )", CLIENT),
        (1, 14, "expected `:` and a key after dictionary 'd' (a node path picks one entry), found `(`".into())
    );
    assert_eq!(
        err("update ? 'sg' 's1' ( )", CLIENT),
        (1, 15, "expected `*` and a state after stategroup 'sg', found name 's1'".into())
    );
}

#[test]
fn bench_values_only_in_benchmarks() {
    assert_eq!(
        err("update (\n  'd' -> dictionary index ( )\n)", CLIENT),
        (2, 21, "`index` is only allowed in benchmark files".into())
    );
    assert_eq!(err("update . 'd' : random ( )", CLIENT), (1, 16, "`random` is only allowed in benchmark files".into()));
    assert_eq!(
        err("update ( 'sg' -> stategroup random set to ( ) )", CLIENT),
        (1, 29, "`random` is only allowed in benchmark files".into())
    );
    // In benchmark files they parse (crates/bench/tests/suite_parse.rs,
    // `benchmark_values_are_the_benchmark_languages`).
}

#[test]
fn unclosed_parens_point_at_the_opening_paren() {
    assert_eq!(err("update . 'd' : \"x\" (\n  'n' -> number 1\n", CLIENT), (1, 20, "`(` is never closed".into()));
    assert_eq!(
        err("update (\n  'g' -> group (\n    'n' -> number 1\n  )", CLIENT),
        (1, 8, "`(` is never closed".into())
    );
    assert_eq!(err("command 'C' ( 'a' -> 1", CLIENT), (1, 13, "`(` is never closed".into()));
    assert_eq!(err("transaction ( get", CLIENT), (1, 13, "`(` is never closed".into()));
    assert_eq!(err("get . 'd' : [ \"a\", \"b\"", CLIENT), (1, 13, "`[` is never closed".into()));
}

#[test]
fn operations_and_values() {
    assert_eq!(
        err("update ( 'n' -> nmber 5 )", CLIENT),
        (
            1,
            17,
            "expected an operation for 'n' (`number`, `integer`, `text`, `reference`, `group`, \
             `(`, `dictionary`, `matrix` or `stategroup`), found `nmber`"
                .into()
        )
    );
    assert_eq!(
        err("update ( 'r' -> reference 'x' )", CLIENT),
        (1, 27, "expected a value, found name 'x' (texts and keys are written in double quotes: \"x\")".into())
    );
    assert_eq!(
        err("update ( 'd' -> dictionary \"k\" )", CLIENT),
        (1, 32, "expected `(`, `remove` or `update` after the key of dictionary 'd', found `)`".into())
    );
    assert_eq!(
        err("update ( 'n' -> number - $p )", CLIENT),
        (1, 26, "expected a number after `-`, found parameter $p".into())
    );
    assert_eq!(
        err("update ( 'sg' -> stategroup 's1' )", CLIENT),
        (1, 34, "expected `set to` or `(` after the state, found `)`".into())
    );
    assert_eq!(
        err("update ( 'sg' -> stategroup 's1' set ( ) )", CLIENT),
        (1, 38, "expected `to` after `set`, found `(`".into())
    );
    assert_eq!(
        err("update ( 5 )", CLIENT),
        (1, 10, "expected a property name ('name' -> …) or `)`, found number 5".into())
    );
}

#[test]
fn query_errors() {
    assert_eq!(
        err("collection select . 'd'\n'n' number : 'n'", CLIENT),
        (2, 5, "expected `->` after projection name 'n', found `number`".into())
    );
    assert_eq!(
        err("collection select . 'd' : \"x\" 'n' -> number : 'n'", CLIENT),
        (
            1,
            25,
            "a collection path takes every entry: no key after dictionary 'd' (pick entries in \
             the node path before `select`)"
                .into()
        )
    );
    assert_eq!(
        err("collection select 'n' -> . 'd' number : 'n'", CLIENT),
        (
            1,
            26,
            "a projection path cannot enter a dictionary; put it in the collection path after \
             `select`"
                .into()
        )
    );
    assert_eq!(
        err("collection select 'n' -> integer : 'n'", CLIENT),
        (
            1,
            26,
            "expected a step (`?`, `+`, `>`) or a property kind (`number`, `text`, `stategroup`, \
             `reference`) in projection 'n', found `integer`"
                .into()
        )
    );
    assert_eq!(
        err("collection select 'n' -> number : 'n' limit -1", CLIENT),
        (1, 45, "`limit` cannot be negative".into())
    );
    assert_eq!(
        err("collection select 't' -> text : 't' ( [ 'a' ] )", CLIENT),
        (1, 47, "expected `*` after `]` in a prefix filter, found `)`".into())
    );
    assert_eq!(
        err("collection select 's' -> stategroup : 's' in ( )", CLIENT),
        (1, 48, "expected a state name, found `)`".into())
    );
}

#[test]
fn steps_read_alike_in_every_path() {
    // One grammar reads the steps of node, collection and pattern paths; a pattern's messages
    // also offer the up step, and its `>` also follows matrices.
    for (path, in_paths, in_patterns) in [
        ("+ 5", Some("a group name after `+`"), "a group name or `^` after `+`"),
        (". 5", Some("a dictionary name after `.`"), "a dictionary name or `^` after `.`"),
        ("% 5", Some("a matrix name after `%`"), "a matrix name or `^` after `%`"),
        ("? 5", Some("a stategroup name after `?`"), "a stategroup name or `^` after `?`"),
        ("? 'sg' 5", Some("`*` and a state after stategroup 'sg'"), "`*` and a state after stategroup 'sg'"),
        ("? 'sg' * 5", Some("a state name after `?` 'sg' `*`"), "a state name after `?` 'sg' `*`"),
        ("> 5", Some("a reference name after `>`"), "a reference or matrix name after `>`"),
        ("< 5", None, "a reference or matrix name after `<` (followed backwards)"),
    ] {
        let expected = |src: &str, what: &str| (1, src.len() as u32, format!("expected {what}, found number 5"));
        if let Some(what) = in_paths {
            for src in [format!("get {path}"), format!("collection select {path}")] {
                assert_eq!(err(&src, CLIENT), expected(&src, what), "{src}");
            }
        }
        let src = format!("collection match x in {path}");
        assert_eq!(err(&src, CLIENT), expected(&src, in_patterns), "{src}");
    }
    assert_eq!(
        err("collection select 'n' -> % 'm' number : 'n'", CLIENT).2,
        "a projection path cannot enter a matrix; put it in the collection path after `select`"
    );
    assert!(parse_instruction("collection match x in . 'd' : \"k\" y in x % 'm' : x select 'a' -> y", CLIENT).is_ok());
}

#[test]
fn leaves_read_alike_in_projections_and_patterns() {
    for start in ["collection select 'n' -> number", "collection match x in . 'd' where x number"] {
        for (rest, what) in [(" 5", "`:` and the property name after the kind"), (" : 5", "a property name after `:`")]
        {
            let src = format!("{start}{rest}");
            assert_eq!(err(&src, CLIENT), (1, src.len() as u32, format!("expected {what}, found number 5")), "{src}");
        }
    }
}

#[test]
fn instruction_boundaries() {
    assert_eq!(
        err("", CLIENT),
        (
            1,
            1,
            "expected an instruction (`update`, `collection`, `get`, `command` or `transaction`), \
             found end of input"
                .into()
        )
    );
    assert_eq!(err("get . 'a' : 1, get", CLIENT), (1, 14, "expected one instruction, found `,` after it".into()));
    assert_eq!(err("update ( ) )", CLIENT), (1, 12, "expected the end of the instruction, found `)`".into()));
    assert_eq!(err("transaction ( )", CLIENT), (1, 15, "a transaction needs at least one instruction".into()));
    let e = parse_instructions("get . 'a' : 1 get", CLIENT).unwrap_err().0;
    assert_eq!(
        (e.line, e.column, e.message.as_str()),
        (1, 15, "expected `,` or a line break between instructions, found `get`")
    );
    let e = parse_instructions("get ,\n", CLIENT).unwrap_err().0;
    assert_eq!((e.line, e.column, e.message.as_str()), (2, 1, "expected an instruction after `,`, found end of input"));
    assert_eq!(parse_instructions("get\nget + 'g', get", CLIENT).unwrap().len(), 3);
    assert_eq!(parse_instructions("  // nothing\n", CLIENT).unwrap().len(), 0);
}

#[test]
fn lexer_errors_pass_through() {
    assert_eq!(err("update ( 'a -> number 1 )", CLIENT), (1, 10, "name is never closed".into()));
    assert_eq!(err("get # ", CLIENT), (1, 5, "unexpected character `#`".into()));
}

#[test]
fn json_errors_name_line_and_column() {
    let e = parse_json("{\n  \"update\": {\n    \"path\": [],\n    \"itemz\": []\n  }\n}").unwrap_err();
    // Unknown fields are ignored (serde's default), so the misspelling shows as a missing
    // field where the object ends.
    assert_eq!((e.0.line, e.0.column), (5, 3), "{e}");
    assert_eq!(e.0.message, "invalid JSON instruction: missing field `items`", "{e}");
    let e = parse_json("{\"get\": {\"path\": [{\"dictionary\": {\"name\": \"d\", \"key\": {\"int\": \"x\"}}}]}}")
        .unwrap_err();
    assert_eq!(e.0.line, 1);
    assert!(e.to_string().starts_with("1:"), "{e}");
    assert!(e.0.message.contains("invalid type"), "{e}");
    let e = parse_json("not json").unwrap_err();
    assert_eq!((e.0.line, e.0.column), (1, 1), "{e}");

    let random = "{\"get\": {\"path\": [{\"dictionary\": {\"name\": \"d\", \"key\": {\"random\": 5}}}]}}";
    let e = parse_json(random).unwrap_err();
    assert_eq!(e.0.message, "`random` is only allowed in benchmark files");
}
