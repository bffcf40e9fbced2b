//! Every kind of schema error: where it points (line, column) and what it says.

use espalier_schema::*;

/// All diagnostics for `src`, which must fail to compile.
fn errors(src: &str) -> Vec<Diagnostic> {
    match compile(src) {
        Ok(_) => panic!("compiled, but should not have:\n{src}"),
        Err(Diagnostics(d)) => {
            assert!(!d.is_empty());
            d
        }
    }
}

/// The single diagnostic for `src` as (line, column, message).
fn one(src: &str) -> (u32, u32, String) {
    let d = errors(src);
    assert_eq!(d.len(), 1, "expected one error, got {d:?}");
    (d[0].line, d[0].column, d[0].message.clone())
}

fn expect(src: &str, line: u32, column: u32, message: &str) {
    assert_eq!(one(src), (line, column, message.to_string()), "\n{src}");
}

#[test]
fn duplicate_property() {
    expect(
        "root (\n    'a' -> number\n    'a' -> text\n)",
        3,
        5,
        "duplicate property 'a' in the root node; it is already declared at 2:5",
    );
}

#[test]
fn duplicate_state() {
    expect(
        "root (\n    'sg' -> stategroup (\n        'x' -> ( )\n        'x' -> ( )\n    )\n)",
        4,
        9,
        "duplicate state 'x' in stategroup 'sg'; it is already declared at 3:9",
    );
}

#[test]
fn empty_stategroup() {
    expect(
        "root (\n    'sg' -> stategroup ( )\n)",
        2,
        13,
        "stategroup 'sg' has no states; expected at least one state like 'State' -> ( )",
    );
}

#[test]
fn unknown_property_in_path() {
    expect(
        "root (\n    'Clients' -> dictionary ( )\n    'r' -> reference ( . 'Client' )\n)",
        3,
        26,
        "no property 'Client' in the root node; it has 'Clients', 'r'",
    );
    expect(
        "root (\n    'd' -> dictionary (\n        'r' -> reference ( . 'x' )\n    )\n)",
        3,
        30,
        "no property 'x' in an entry of the dictionary 'd'; it has 'r'",
    );
}

#[test]
fn wrong_kind_of_step() {
    expect(
        "root (\n    'Clients' -> group ( )\n    'r' -> reference ( . 'Clients' )\n)",
        3,
        26,
        "'Clients' is a group, but `.` steps into a dictionary; use `+ 'Clients'`",
    );
    expect(
        "root (\n    'd' -> dictionary ( )\n    'r' -> reference ( + 'd' )\n)",
        3,
        26,
        "'d' is a dictionary, but `+` steps into a group; use `. 'd'`",
    );
    expect(
        "root (\n    'n' -> number\n    'r' -> reference ( ? 'n' * 'x' )\n)",
        3,
        26,
        "'n' is a number, but `?` steps into a stategroup; a path can only step into groups, dictionaries, matrices and states",
    );
}

#[test]
fn unknown_state_in_path() {
    expect(
        "root (\n    'sg' -> stategroup ( 'a' -> ( 'd' -> dictionary ( ) ) 'b' -> ( ) )\n    'r' -> reference ( ? 'sg' * 'c' . 'd' )\n)",
        3,
        33,
        "stategroup 'sg' has no state 'c'; it has 'a', 'b'",
    );
}

#[test]
fn path_must_end_on_a_dictionary() {
    expect(
        "root (\n    'G' -> group ( 'D' -> dictionary ( ) )\n    'r' -> reference ( + 'G' )\n)",
        3,
        26,
        "the path of the reference 'r' ends at the group 'G'; it must end with a `.` step into a dictionary, whose entries are the targets",
    );
    expect(
        "root (\n    'd' -> dictionary ( 'm' -> matrix ( .^ ) ( ) )\n)",
        2,
        39,
        "the path of the matrix 'm' does not go down; it stays at the root node; it must end with a `.` step into a dictionary, whose entries are the targets",
    );
}

#[test]
fn matrix_step_in_reference_path() {
    expect(
        "root (\n    'd' -> dictionary ( )\n    'm' -> matrix ( . 'd' ) ( )\n    'r' -> reference ( % 'm' )\n)",
        4,
        24,
        "a reference path cannot step into a matrix with `%`: references target dictionary entries; end the path with `. 'Dictionary'`",
    );
}

#[test]
fn wrong_up_step_names_the_node() {
    let src = "root (
    'Orders' -> dictionary ( )
    'Machines' -> dictionary (
        'Current Process' -> group (
            'Order' -> reference ( .^ . 'Orders' )
        )
    )
)";
    expect(src, 5, 36, "`.^` leaves a dictionary entry, but here the node is the group 'Current Process'; use `+^`");
    expect(
        "root (\n    'd' -> dictionary ( 's' -> stategroup ( 'x' -> ( 'r' -> reference ( +^ . 'd' ) ) ) )\n)",
        2,
        73,
        "`+^` leaves a group, but here the node is the state 'x' of the stategroup 's'; use `?^`",
    );
}

#[test]
fn going_up_from_the_root() {
    expect(
        "root (\n    'd' -> dictionary ( )\n    'r' -> reference ( .^ . 'd' )\n)",
        3,
        24,
        "`.^` goes up, but here the node is the root node, which has no parent",
    );
}

#[test]
fn up_step_after_down_step() {
    expect(
        "root (\n    'd' -> dictionary ( )\n    'r' -> reference ( . 'd' .^ )\n)",
        3,
        30,
        "`.^` goes up, but the path already went down at 3:26; all `^` steps come first",
    );
}

#[test]
fn unknown_property_kind() {
    expect(
        "root (\n    'a' -> nmber\n)",
        2,
        12,
        "unknown property kind `nmber`; expected number, text, group, dictionary, matrix, reference, stategroup, or derived count, sum, min, max or condition",
    );
    // The parser recovers and reports the next bad kind too.
    let d = errors("root (\n    'a' -> nmber\n    'b' -> grup ( 'c' -> number )\n    'e' -> 'f' -> number\n)");
    let at: Vec<(u32, u32)> = d.iter().map(|d| (d.line, d.column)).collect();
    assert_eq!(at, vec![(2, 12), (3, 12), (4, 12)], "{d:?}");
    assert_eq!(
        d[2].message,
        "expected a property kind (number, text, group, dictionary, matrix, reference, stategroup, or derived count, sum, min, max or condition) for 'e', found name 'f'"
    );
}

#[test]
fn collection_size_in_the_model_is_rejected() {
    // B.4.3 state_filter as printed in the thesis.
    let src = "root (\n    'd' -> dictionary 1000 (\n        'sg' -> stategroup ( 's0' -> () 's1' -> ( 'n' -> number ) )\n    )\n)";
    expect(
        src,
        2,
        23,
        "unexpected number 1000 after `dictionary`: collection sizes belong in a benchmark's `initialize`, not in the schema; expected `(`",
    );
}

#[test]
fn trailing_text_after_the_root_node() {
    expect(
        "root ( )\nfoo",
        2,
        1,
        "unexpected `foo` after the root node; expected `command`, `index` or the end of the input",
    );
    expect(
        "root ( 'a' -> number ) )",
        1,
        24,
        "unexpected `)` after the root node; expected `command`, `index` or the end of the input",
    );
}

#[test]
fn missing_closing_parenthesis_points_at_the_opening_one() {
    expect(
        "root (\n    'a' -> number\n",
        1,
        6,
        "this `(`, which opens the root node, is never closed; expected `)` before the end of the input",
    );
    expect(
        "root (\n    'd' -> dictionary ( )\n    'r' -> reference ( . 'd'\n",
        3,
        22,
        "this `(`, which opens the path of the reference 'r', is never closed; expected `)` before the end of the input",
    );
    expect(
        "root ( )\ncommand 'C' ( ) ( update ( )\n",
        2,
        17,
        "this `(`, which opens the body of command 'C', is never closed; expected `)` before the end of the input",
    );
}

#[test]
fn other_syntax_errors() {
    expect("", 1, 1, "expected `root` to start the schema, found end of input");
    expect("root ( 'a' number )", 1, 12, "expected `->` after the property name 'a', found `number`");
    expect(
        "root ( -> number )",
        1,
        8,
        "expected a property name like 'Name' or `)` closing the node opened at 1:6, found `->`",
    );
    expect("root ( '' -> number )", 1, 8, "a property name cannot be empty");
    expect(
        "root ( 'r' -> reference ( * 's' ) )",
        1,
        27,
        "a state step `* 'State'` must follow a stategroup step `? 'Stategroup'`",
    );
    // Lexer errors come through unchanged.
    expect("root ( 'a -> number\n)", 1, 8, "name is not closed before the end of the line");
}

#[test]
fn nesting_depth_is_bounded() {
    let mut src = String::from("root ");
    for i in 0..70 {
        src.push_str(&format!("( 'g{i}' -> group "));
    }
    src.push_str("( )");
    src.push_str(&")".repeat(70));
    let d = errors(&src);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].message, format!("node definitions are nested more than {MAX_DEPTH} levels deep"));
    let opening = src.match_indices('(').nth(MAX_DEPTH).map(|(i, _)| i).expect("enough parens");
    assert_eq!(d[0].span.start as usize, opening);
    // 64 levels are fine.
    let mut ok = String::from("root ");
    for i in 0..MAX_DEPTH - 1 {
        ok.push_str(&format!("( 'g{i}' -> group "));
    }
    ok.push_str("( 'n' -> number )");
    ok.push_str(&")".repeat(MAX_DEPTH - 1));
    let s = compile(&ok).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.root().storage, Storage::Record { size: 8 });
}

#[test]
fn duplicate_commands_and_parameters() {
    expect(
        "root ( )\ncommand 'C' ( ) ( )\ncommand 'C' ( ) ( )",
        3,
        9,
        "command 'C' is declared twice; the first is at 2:9",
    );
    expect(
        "root ( )\ncommand 'C' ( 'p' -> number 'p' -> text ) ( )",
        2,
        29,
        "duplicate parameter 'p' in command 'C'; it is already declared at 2:15",
    );
    expect(
        "root ( )\ncommand 'C' ( 'p' -> bool ) ( )",
        2,
        22,
        "expected the parameter kind `number` or `text` for 'p', found `bool`",
    );
}

const INDEXED: &str = "root (\n    'd' -> dictionary (\n        'n' -> number\n        't' -> text\n        'r' -> reference ( .^ . 'd' )\n        'g' -> group ( 'n2' -> number )\n    )\n)\n";

#[test]
fn index_errors() {
    let src = format!("{INDEXED}index 'I' ( . 'd' ) 'n' equality\nindex 'I' ( . 'd' ) 't' equality");
    expect(&src, 10, 7, "index 'I' is declared twice; the first is at 9:7");

    let src = format!("{INDEXED}index 'I' ( . 'd' ) 'r' equality");
    expect(&src, 9, 21, "index 'I' is on 'r', a reference; an index needs a number, text or stategroup property");

    let src = format!("{INDEXED}index 'I' ( . 'd' ) 'x' equality");
    expect(&src, 9, 21, "no property 'x' in an entry of the dictionary 'd' (or in its groups) to index");

    let src = format!("{INDEXED}index 'I' ( . 'd' ) 'n' range unique");
    expect(&src, 9, 31, "index 'I' cannot be `unique`: uniqueness is only checked by `equality` indexes");

    let src = format!("{INDEXED}index 'I' ( . 'd' ) 'n' prefix");
    expect(&src, 9, 21, "index 'I' is on 'n', a number; a `prefix` index needs a text property");

    let src = format!("{INDEXED}index 'I' ( . 'd' + 'g' ) 'n2' range");
    expect(
        &src,
        9,
        21,
        "the path of index 'I' ends at the group 'g'; it must end with a `.` dictionary or `%` matrix step, whose entries are indexed",
    );

    let src = format!("{INDEXED}index 'I' ( .^ . 'd' ) 'n' range");
    expect(&src, 9, 13, "the path of index 'I' starts at the root and cannot go up with `.^`");

    let src = format!("{INDEXED}index 'I' ( . 'd' ) 'n' sorted");
    expect(&src, 9, 25, "expected the index kind `equality`, `range` or `prefix`, found `sorted`");

    // Properties inside the entry's groups are found by name.
    let s = compile(&format!("{INDEXED}index 'I' ( . 'd' ) 'n2' range")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.property_name(s.indexes[0].property), "'n2' of root.'d'+'g'");
}

#[test]
fn several_errors_are_reported_in_source_order() {
    let src = "root (
    'a' -> number
    'd' -> dictionary ( 'r' -> reference ( . 'nope' ) )
    'a' -> text
)
command 'C' ( ) ( )
command 'C' ( ) ( )
";
    let d = errors(src);
    let summary: Vec<(u32, u32)> = d.iter().map(|d| (d.line, d.column)).collect();
    assert_eq!(summary, vec![(3, 46), (4, 5), (7, 9)], "{d:?}");
}

#[test]
fn render_puts_the_caret_under_the_name() {
    let src = "root (\n    'Clients' -> dictionary ( )\n    'r' -> reference ( . 'Client' )\n)";
    let Err(d) = compile(src) else { panic!("should fail") };
    let out = d.render(src, "shop.alan");
    assert_eq!(
        out,
        "shop.alan:3:26: error: no property 'Client' in the root node; it has 'Clients', 'r'\n  |\n3 |     'r' -> reference ( . 'Client' )\n  |                          ^^^^^^^^\n"
    );
}
