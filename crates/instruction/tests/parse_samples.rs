//! Every instruction body of the thesis (§2.3, listing 6.2, Appendix B) and a few more forms:
//! they parse to the expected AST, survive `to_text` and JSON round trips, and no truncation or
//! token mutation of them makes the parser panic.

use espalier_instruction::ast::*;
use espalier_instruction::parse::{
    clear_spans, parse_instruction, parse_instructions, to_text, ParseOptions, ValueWords,
};
use espalier_protocol::parse_json;
use espalier_schema::lexer::{tokenize, Token, TokenKind};

/// The benchmark files' `index` and `random` as the instruction parser's extra words (the
/// benchmark crate has its own; this one names the parameter after the word): `index` is
/// `$index`, `random` `$random`, `random 1000` `$random_1000`.
struct BenchWords;

impl ValueWords for BenchWords {
    fn value(&self, tokens: &[Token]) -> Result<Option<(Value, usize)>, (usize, String)> {
        match (tokens.first().map(|t| &t.kind), tokens.get(1).map(|t| &t.kind)) {
            (Some(TokenKind::Word(w)), _) if w == "index" => Ok(Some((Value::Param("index".into()), 1))),
            (Some(TokenKind::Word(w)), Some(TokenKind::Int(n))) if w == "random" => {
                Ok(Some((Value::Param(format!("random_{n}")), 2)))
            }
            (Some(TokenKind::Word(w)), _) if w == "random" => Ok(Some((Value::Param("random".into()), 1))),
            _ => Ok(None),
        }
    }

    fn describe(&self) -> &str {
        "`index` or `random`"
    }
}

const BENCH: ParseOptions<'static> = ParseOptions { values: Some(&BenchWords) };

/// (name, body) — each body is what a benchmark `repeat N ( … )` contains.
const SAMPLES: &[(&str, &str)] = &[
    (
        "§2.3 current process",
        "update + 'Current Process' (
            'Current Order' -> reference \"order01232\"
            'Is Planned' -> stategroup set to 'yes' (
                'Is Started' -> stategroup set to 'no' ()
            )
        )",
    ),
    ("listing 6.2", "update . 'd1' : random ( 'n' -> number 10 )"),
    ("B.1.1 add", "update (\n    'd' -> dictionary index ( )\n)"),
    (
        "B.1.2 add_big",
        "update (
            'd' -> dictionary index (
                't1' -> text \"e\"
                't2' -> text \"f\"
                't3' -> text \"g\"
                't4' -> text \"h\"
                'n1' -> integer 2
                'n2' -> integer 2
                'n3' -> integer 2
                'n4' -> integer 2
                'sg1' -> stategroup 's2' ()
                'sg2' -> stategroup 's3' ()
            )
        )",
    ),
    ("B.1.3 increment", "update (\n    'n' -> integer 2\n)"),
    ("B.1.4 matrix_add", "update (\n    'm' -> matrix random 1000 ( )\n)"),
    ("B.1.5 remove_all", "update (\n    'd' -> dictionary index remove\n)"),
    ("B.1.6 remove_in_100000", "update (\n    'd' -> dictionary random 100000 remove\n)"),
    (
        "B.1.7 set_state",
        "update (
            'sg' -> stategroup 's1' set to ( )
        ),
        update (
            'sg' -> stategroup 's0' set to ( )
        )",
    ),
    ("B.1.8 set_reference", "update (\n    'r' -> reference random 10000\n)"),
    ("B.2.1 set_in_x", "update . 'd' : random (\n    'n' -> integer 2\n)"),
    ("B.2.2 get_in_x", "collection select . 'd'\n'n' -> number : 'n'\nlimit 10"),
    ("B.3.1 depth 2", "update . 'd1' : random . 'd2' : random ( 'n' -> integer 2 )"),
    ("B.3.2 depth 3", "update . 'd1' : random . 'd2' : random . 'd3' : random ( 'n' -> integer 2 )"),
    ("B.3.3 depth 4", "update . 'd1' : random . 'd2' : random . 'd3' : random . 'd4' : random ( 'n' -> integer 2 )"),
    (
        "B.3.4 depth 5",
        "update . 'd1' : random . 'd2' : random . 'd3' : random . 'd4' : random .
        'd5': random ('n' -> integer 2)",
    ),
    (
        "B.3.5 depth 6",
        "update . 'd1' : random . 'd2' : random . 'd3' : random . 'd4' : random .
        'd5': random . 'd6' : random ( 'n' -> integer 2 )",
    ),
    ("B.4.1 number_filter", "collection select . 'd1'\n'n' -> number : 'n' > 100\nlimit 10"),
    ("B.4.2 text_filter", "collection select . 'd1'\n't' -> text : 't' ( [ 'a' ] * )\nlimit 10"),
    ("B.4.3 state_filter", "collection select . 'd'\n'n' -> ? 'sg' * 's1' number : n\nlimit 10"),
    ("B.5.1 set_state_failure", "update (\n    'sg' -> stategroup 's0' set to ( )\n)"),
    ("B.5.2 path_failure (corrected)", "update . 'd' : random ? 'sg' * 's1' (\n    'n' -> number 2\n)"),
    ("B.5.3 add_failure", "update (\n    'd' -> dictionary random 10000 ( )\n)"),
    ("B.5.4 remove_failure", "update (\n    'd' -> dictionary 10 remove\n)"),
    (
        "B.6.1 search",
        "collection select . 'Clients'
        'Name' -> text : 'Name' ( [ 'a' ] * )
        limit 10 ,
        collection select . 'Clients'
        'Name' -> text : 'Name' ( [ 'ab' ] * )
        limit 10 ,
        collection select . 'Clients'
        'Name' -> text : 'Name' ( [ 'abc' ] * )
        limit 10 ,
        collection select . 'Clients'
        'Name' -> text : 'Name' ( [ 'abcd' ] * )
        limit 10 ,
        collection select . 'Clients'
        'Name' -> text : 'Name' ( [ 'abcde' ] * )
        limit 10",
    ),
    (
        "B.6.2 overview_subcollection",
        "collection select . 'Orders' . 'Modifications' % 'Added Materials'
        'Quantity' -> number : 'Quantity'
        limit 10",
    ),
    (
        "B.6.3 task_start",
        "update . 'Machines' : index (
            'Current Task' -> stategroup 'Selected' set to (
                'Product' -> reference \"5\"
                'Status' -> stategroup 'Started' (
                    'Starting Time' -> integer 12345
                    'Iteration' -> integer 1
                )
            )
        )",
    ),
    (
        "B.6.4 get_big_items",
        "collection select . 'Orders'
        'Product' -> reference : 'Product'
        'Status' -> stategroup : 'Status'
        'Connected To Sales Order Line' -> stategroup : 'Connected To Sales Order Line'
        'Quantity' -> number : 'Quantity'
        'Due Date' -> number : 'Due Date'
        'Scheduled Start Date' -> number : 'Scheduled Start Date'
        'Scheduled End Date' -> number : 'Scheduled End Date'
        'Planner Group' -> text : 'Planner Group'
        'Requested Group' -> text : 'Requested Group'
        'First Order' -> number : 'First Order'
        'Planning Pool' -> text : 'Planning Pool'
        limit 10",
    ),
    (
        "B.6.5 many_references",
        "collection . 'Machines' : random select
        'Premium' -> ? 'Current Task' * 'Selected' > 'Current Order' > 'Client'
        stategroup : 'Is Premium Client'
        limit 10",
    ),
    // Forms the thesis does not show.
    ("get root", "get"),
    ("get entry", "get . 'Orders' : \"o1\" + 'Contact' % 'Added Materials' : [\"m1\", \"x\"]"),
    ("command", "command 'Start Task' ( 'machine' -> \"M1\" 'iteration' -> 3 'who' -> $user )"),
    (
        "transaction",
        "transaction (
            update . 'Orders' : \"o1\" ( 'Quantity' -> number + 5 ),
            update . 'Orders' : \"o2\" ( 'Quantity' -> number - 5 )
            get . 'Orders' : \"o1\"
        )",
    ),
    (
        "entry update and groups",
        "update ( 'Orders' -> dictionary \"o1\" update (
            'Contact' -> group ( 'Phone' -> number -12 )
            'Contact 2' -> ( 'Phone' -> number + $delta )
            'Note' -> text \"a \\\"quoted\\\" line\\n\"
            'Status' -> stategroup random set to ( )
            'Count' -> number random 10
        ) )",
    ),
    (
        "query with everything",
        "collection . 'Orders' : $order > 'Client' select . 'Modifications' % 'Added Materials'
        'q' -> number : 'Quantity' >= -3
        'st' -> ? 'Status' * 'Done' + 'Info' stategroup : 'Kind' == 'Yes'
        'st2' -> stategroup : 'Kind' in ( 'Yes' 'No' )
        't' -> text : 'Name' != \"x\"
        'p' -> text : 'Name' ( [ $prefix ] * )
        'r' -> reference : 'Product' < \"5\"
        'n' -> number : 'Quantity' <= 10
        limit 10 offset 20",
    ),
];

fn parse_list(src: &str) -> Vec<Instruction> {
    parse_instructions(src, BENCH)
        .unwrap_or_else(|e| panic!("{e}\n{src}"))
        .into_iter()
        .map(|l| {
            let mut i = l.item;
            clear_spans(&mut i);
            i
        })
        .collect()
}

fn one(src: &str) -> Instruction {
    let mut i = parse_instruction(src, BENCH).unwrap_or_else(|e| panic!("{e}\n{src}"));
    clear_spans(&mut i);
    i
}

fn l<T>(item: T) -> Located<T> {
    Located { item, span: Default::default() }
}

fn item(name: &str, op: Op) -> Located<Item> {
    l(Item { name: name.into(), op })
}

fn dict(name: &str, key: Value) -> Located<Step> {
    l(Step::Dictionary { name: name.into(), key: Some(key) })
}

fn text(s: &str) -> Value {
    Value::Text(s.into())
}

#[test]
fn every_sample_parses() {
    for (name, src) in SAMPLES {
        let list = parse_instructions(src, BENCH).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!list.is_empty(), "{name}");
        if list.len() == 1 {
            assert!(parse_instruction(src, BENCH).is_ok(), "{name}");
        }
    }
}

#[test]
fn section_2_3_example() {
    let got = one(SAMPLES[0].1);
    let want = Instruction::Update {
        path: vec![l(Step::Group("Current Process".into()))],
        items: vec![
            item("Current Order", Op::SetReference(text("order01232"))),
            item(
                "Is Planned",
                Op::SwitchState {
                    state: text("yes"),
                    items: vec![item("Is Started", Op::SwitchState { state: text("no"), items: vec![] })],
                },
            ),
        ],
    };
    assert_eq!(got, want);
}

#[test]
fn listing_6_2_and_b_2_1() {
    assert_eq!(
        one("update . 'd1' : random ( 'n' -> number 10 )"),
        Instruction::Update {
            path: vec![dict("d1", Value::Param("random".into()))],
            items: vec![item("n", Op::SetNumber(Value::Int(10)))],
        }
    );
    assert_eq!(
        one("update ( 'm' -> matrix random 1000 ( ) 'd' -> dictionary index remove )"),
        Instruction::Update {
            path: vec![],
            items: vec![
                item("m", Op::AddEntry { key: Value::Param("random_1000".into()), items: vec![] }),
                item("d", Op::RemoveEntry { key: Value::Param("index".into()) }),
            ],
        }
    );
}

#[test]
fn b_1_7_is_a_list_of_two_switches() {
    let list = parse_list(SAMPLES.iter().find(|s| s.0.starts_with("B.1.7")).unwrap().1);
    let switch = |s: &str| Instruction::Update {
        path: vec![],
        items: vec![item("sg", Op::SwitchState { state: text(s), items: vec![] })],
    };
    assert_eq!(list, vec![switch("s1"), switch("s0")]);
}

#[test]
fn b_6_3_task_start() {
    let got = one(SAMPLES.iter().find(|s| s.0.starts_with("B.6.3")).unwrap().1);
    let want = Instruction::Update {
        path: vec![dict("Machines", Value::Param("index".into()))],
        items: vec![item(
            "Current Task",
            Op::SwitchState {
                state: text("Selected"),
                items: vec![
                    item("Product", Op::SetReference(text("5"))),
                    item(
                        "Status",
                        Op::UpdateState {
                            state: "Started".into(),
                            items: vec![
                                item("Starting Time", Op::SetNumber(Value::Int(12345))),
                                item("Iteration", Op::SetNumber(Value::Int(1))),
                            ],
                        },
                    ),
                ],
            },
        )],
    };
    assert_eq!(got, want);
}

#[test]
fn b_6_5_many_references_and_b_4_queries() {
    let got = one(SAMPLES.iter().find(|s| s.0.starts_with("B.6.5")).unwrap().1);
    let want = Instruction::Query(Query {
        path: vec![dict("Machines", Value::Param("random".into()))],
        select: vec![],
        projections: vec![l(Projection {
            alias: "Premium".into(),
            path: vec![
                l(Step::State { stategroup: "Current Task".into(), state: "Selected".into() }),
                l(Step::Reference("Current Order".into())),
                l(Step::Reference("Client".into())),
            ],
            kind: LeafKind::Stategroup,
            property: "Is Premium Client".into(),
            filter: None,
        })],
        limit: Some(10),
        offset: None,
        start: None,
    });
    assert_eq!(got, want);

    let Instruction::Query(q) = one("collection select . 'd'\n'n' -> ? 'sg' * 's1' number : n\nlimit 10") else {
        panic!("not a query")
    };
    assert_eq!(q.select, vec![l(Step::Dictionary { name: "d".into(), key: None })]);
    assert_eq!(q.projections[0].item.property, "n");
    assert_eq!(q.projections[0].item.kind, LeafKind::Number);

    let Instruction::Query(q) = one(SAMPLES.iter().find(|s| s.0.starts_with("B.4.2")).unwrap().1) else {
        panic!("not a query")
    };
    assert_eq!(q.projections[0].item.filter, Some(Filter::Prefix(text("a"))));
    let Instruction::Query(q) = one(SAMPLES.iter().find(|s| s.0.starts_with("B.4.1")).unwrap().1) else {
        panic!("not a query")
    };
    assert_eq!(q.projections[0].item.filter, Some(Filter::Compare { op: Comparison::Gt, value: Value::Int(100) }));
}

#[test]
fn numbers_add_and_subtract() {
    let ops = |src: &str| match one(src) {
        Instruction::Update { items, .. } => items.into_iter().map(|i| i.item.op).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        ops("update ( 'a' -> number + 5 'b' -> number - 5 'c' -> number -5 'd' -> number + $p 'e' -> number - -2 )"),
        vec![
            Op::AddNumber(Value::Int(5)),
            Op::AddNumber(Value::Int(-5)),
            // `-5` without a space is a negative literal: set, not subtract.
            Op::SetNumber(Value::Int(-5)),
            Op::AddNumber(Value::Param("p".into())),
            Op::AddNumber(Value::Int(2)),
        ]
    );
}

#[test]
fn spans_cover_first_to_last_token() {
    let src = "update . 'd' : \"x\" (\n  'n' -> number 1\n)\nget + 'g'";
    let list = parse_instructions(src, BENCH).unwrap();
    let text = |s: espalier_schema::Span| &src[s.start as usize..s.end as usize];
    assert_eq!(text(list[0].span), "update . 'd' : \"x\" (\n  'n' -> number 1\n)");
    assert_eq!(text(list[1].span), "get + 'g'");
    let Instruction::Update { path, items } = &list[0].item else { panic!() };
    assert_eq!(text(path[0].span), ". 'd' : \"x\"");
    assert_eq!(text(items[0].span), "'n' -> number 1");
}

#[test]
fn to_text_round_trips_every_sample() {
    for (name, src) in SAMPLES {
        for instr in parse_list(src) {
            let printed = to_text(&instr);
            let again = parse_instruction(&printed, BENCH).unwrap_or_else(|e| panic!("{name}: {e}\n{printed}"));
            let mut again = again;
            clear_spans(&mut again);
            assert_eq!(again, instr, "{name}: {printed}");
            // Canonical: printing again changes nothing.
            assert_eq!(to_text(&again), printed, "{name}");
        }
    }
}

#[test]
fn json_round_trips_every_sample() {
    for (name, src) in SAMPLES {
        for instr in parse_list(src) {
            let json = serde_json::to_string_pretty(&espalier_protocol::Instruction::from(&instr)).unwrap();
            let back = parse_json(&json).unwrap_or_else(|e| panic!("{name}: {e}\n{json}"));
            assert_eq!(back, instr, "{name}\n{json}");
        }
    }
}

#[test]
fn client_mode_accepts_samples_without_bench_values() {
    for (name, src) in SAMPLES {
        let has_bench = src.contains("index") || src.contains("random");
        let client = parse_instructions(src, ParseOptions::CLIENT);
        assert_eq!(client.is_ok(), !has_bench, "{name}: {client:?}");
    }
}

/// Parses `src` in both modes; a success must survive the text round trip.
fn check_no_panic(src: &str) {
    for opts in [ParseOptions::CLIENT, BENCH] {
        if let Ok(list) = parse_instructions(src, opts) {
            for l in list {
                let mut instr = l.item;
                clear_spans(&mut instr);
                let printed = to_text(&instr);
                let mut again = parse_instruction(&printed, opts)
                    .unwrap_or_else(|e| panic!("{e}\nfrom {src:?}\nprinted {printed}"));
                clear_spans(&mut again);
                assert_eq!(again, instr, "from {src:?}\nprinted {printed}");
            }
        }
        let _ = parse_instruction(src, opts);
    }
}

#[test]
fn truncations_and_token_mutations_never_panic() {
    const REPLACEMENTS: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        ",",
        "'x'",
        "\"s\"",
        "5",
        "-",
        "+",
        ".",
        ":",
        "?",
        "*",
        ">",
        "==",
        "->",
        "index",
        "random",
        "set",
        "to",
        "update",
        "remove",
        "collection",
        "select",
        "stategroup",
        "number",
        "in",
        "limit",
        "transaction",
        "$p",
        "\n",
    ];
    let mut runs = 0usize;
    for (_, src) in SAMPLES {
        let tokens = tokenize(src).unwrap();
        for (i, tok) in tokens.iter().enumerate() {
            let (s, e) = (tok.span.start as usize, tok.span.end as usize);
            check_no_panic(&src[..s]);
            check_no_panic(&src[..e]);
            check_no_panic(&format!("{}{}", &src[..s], &src[e..]));
            check_no_panic(&format!("{}{}", &src[..e], &src[s..]));
            if let Some(next) = tokens.get(i + 1) {
                let (ns, ne) = (next.span.start as usize, next.span.end as usize);
                check_no_panic(&format!("{}{} {}{}", &src[..s], &src[ns..ne], &src[s..e], &src[ne..]));
            }
            for r in REPLACEMENTS {
                check_no_panic(&format!("{} {r} {}", &src[..s], &src[e..]));
                runs += 1;
            }
        }
    }
    assert!(runs > 1000);
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    // `update ( 'a' -> ` is one level, each group one more, `( )` the last.
    let nest = |k: usize| format!("update ( 'a' -> {}( ){} )", "( 'a' -> ".repeat(k), " )".repeat(k));
    assert!(parse_instruction(&nest(62), BENCH).is_ok());
    let e = parse_instruction(&nest(63), BENCH).unwrap_err();
    assert!(e.to_string().contains("nesting is deeper than 64 levels"), "{e}");
    for src in [
        nest(100_000),
        format!("get . 'd' : {}1{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!("{}get{}", "transaction ( ".repeat(100_000), " )".repeat(100_000)),
    ] {
        let e = parse_instruction(&src, BENCH).unwrap_err();
        assert!(e.to_string().contains("nesting is deeper than 64 levels"), "{e}");
    }
}

#[test]
fn parser_hands_over_mid_stream() {
    use espalier_instruction::parse::Parser;
    use espalier_schema::lexer::TokenKind;
    let src = "repeat 3 ( update ( 'n' -> number index ), get\n get + 'g' ) next";
    let tokens = tokenize(src).unwrap();
    let mut p = Parser::new(src, &tokens, BENCH);
    p.set_pos(3); // after `repeat 3 (`
    let list = p.instruction_list().unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(tokens[p.pos()].kind, TokenKind::RParen);
    assert_eq!(&src[list[2].span.start as usize..list[2].span.end as usize], "get + 'g'");

    // A slice without the final `Eof` token ends like the input does.
    let mut p = Parser::new(src, &tokens[3..10], BENCH);
    assert!(p.instruction().is_ok());
    let mut p = Parser::new(src, &tokens[3..9], BENCH);
    let e = p.instruction().unwrap_err();
    assert_eq!(e.0.message, "`(` is never closed");
    let mut p = Parser::new(src, &[], BENCH);
    assert!(p.instruction().is_err());
    assert!(p.instruction_list().unwrap().is_empty());
}
