//! The structured instruction is the protocol's own type: it decodes from a frame in either
//! encoding, converts to the syntax tree and back without loss, and a benchmark word in it
//! (`index`, `random`) is refused by the conversion with the text parser's message and the
//! place it was found, never a panic.

use espalier_instruction::parse::{clear_spans, parse_instruction, ParseOptions};
use espalier_instruction::InstructionError;
use espalier_protocol::instruction::Value;
use espalier_protocol::{parse_json, Codec, Encoding, Instruction, Message, RequestBody, Source};

fn structured(message: Message) -> Instruction {
    match message.into_request().expect("a valid request").body {
        RequestBody::Execute { source: Source::Structured(i), .. } => i,
        other => panic!("{other:?}"),
    }
}

#[test]
fn benchmark_words_decode_and_are_refused_by_the_conversion() {
    let cases = [
        (
            r#"{"update":{"path":[],"items":[{"name":"n","op":{"set_number":{"random":0}}}]}}"#,
            "random",
            "update.items[0].op.set_number",
        ),
        (
            r#"{"update":{"path":[],"items":[{"name":"n","op":{"add_number":"index"}}]}}"#,
            "index",
            "update.items[0].op.add_number",
        ),
        (
            r#"{"get":{"path":[{"group":"g"},{"dictionary":{"name":"d","key":{"compound":[{"text":"a"},{"random":null}]}}}]}}"#,
            "random",
            "get.path[1].dictionary.key.compound[1]",
        ),
        (
            r#"{"transaction":[{"command":{"name":"c","args":[["a",{"int":1}],["b","index"]]}}]}"#,
            "index",
            "transaction[0].command.args[1]",
        ),
    ];
    for (json, word, place) in cases {
        let want = format!("`{word}` is only allowed in benchmark files");
        let frame = format!(r#"{{"id":7,"kind":"execute","instruction":{json}}}"#);
        for encoding in [Encoding::Json, Encoding::Msgpack] {
            let codec = Codec::plain(encoding, 1 << 20);
            let bytes = match encoding {
                Encoding::Json => frame.clone().into_bytes(),
                Encoding::Msgpack => {
                    rmp_serde::to_vec_named(&serde_json::from_str::<serde_json::Value>(&frame).unwrap()).unwrap()
                }
            };
            let decoded = match encoding {
                Encoding::Json => codec.decode_text(std::str::from_utf8(&bytes).unwrap()),
                Encoding::Msgpack => codec.decode_binary(&bytes),
            };
            let wire = structured(decoded.expect("the frame decodes"));
            let refused = wire.to_ast().expect_err(json);
            assert_eq!((refused.place.as_str(), refused.message.as_str()), (place, want.as_str()), "{json}");
            // As the server reports it: code `syntax`, the parser's message.
            let e = InstructionError::Parse(refused.into_parse_error(None));
            assert_eq!((e.code(), e.to_string()), ("syntax", format!("syntax error: {want}")));
        }
        assert_eq!(parse_json(json).expect_err(json).0.message, want);
    }
}

#[test]
fn the_syntax_tree_round_trips_through_the_wire_form() {
    let texts = [
        "update . 'Orders' : \"o1\" ( 'Lines' -> dictionary [ \"a\", $b ] ( 'Quantity' -> number 5 ) )",
        "collection + 'Shop' select . 'Orders' 'q' -> + 'Sum' number : 'Total' > 10 'c' -> text : 'Name' ( [ \"A\" ] * ) limit 5 offset 2",
        "collection match o in . 'Orders' c in o > 'Client' where o number : 'Total' >= 3 and not c == o \
         select distinct 'c' -> c 'n' -> count ( ) order by 'n' desc limit 3",
        "transaction ( command 'pulse' ( 'machine' -> \"M1\" ), get . 'Machines' : $m )",
        "collection select . 'Orders' from \"o5\" 'q' -> number : 'Total' limit 300",
        "collection . 'Shops' : \"s\" select . 'Orders' . 'Lines' after $last 'q' -> number : 'Quantity' limit 3 offset 1",
        "transaction ( collection select . 'Orders' after 17 'q' -> number : 'Total' limit 1 )",
    ];
    for text in texts {
        let mut instr = parse_instruction(text, ParseOptions::CLIENT).unwrap_or_else(|e| panic!("{e}\n{text}"));
        clear_spans(&mut instr);
        let wire = Instruction::from(&instr);
        assert_eq!(wire.to_ast().unwrap(), instr, "{text}");
        let json = serde_json::to_string(&wire).unwrap();
        assert_eq!(parse_json(&json).unwrap(), instr, "{json}");
    }
    assert_eq!(Value::Random(Some(0)), serde_json::from_str(r#"{"random":0}"#).unwrap());
}

/// A key-range start is `{"from": value}` or `{"after": value}`; a query without one has no
/// `start` field on the wire (older clients' frames decode unchanged), and a benchmark word
/// in it is refused with its place.
#[test]
fn a_key_range_start_is_an_optional_wire_field() {
    let json = r#"{"query":{"path":[],"select":[{"dictionary":{"name":"Orders","key":null}}],"start":{"after":{"text":"o5"}},"projections":[],"limit":10,"offset":null}}"#;
    let want =
        parse_instruction("collection select . 'Orders' after \"o5\" limit 10", ParseOptions::CLIENT).map(|mut i| {
            clear_spans(&mut i);
            i
        });
    assert_eq!(parse_json(json).unwrap(), want.unwrap());
    let bytes = rmp_serde::to_vec_named(&serde_json::from_str::<serde_json::Value>(json).unwrap()).unwrap();
    let wire: Instruction = rmp_serde::from_slice(&bytes).unwrap();
    assert_eq!(serde_json::to_string(&wire).unwrap(), json);
    let plain = parse_instruction("collection select . 'Orders' limit 10", ParseOptions::CLIENT).unwrap();
    assert!(!serde_json::to_string(&Instruction::from(&plain)).unwrap().contains("start"));
    let refused = parse_json(
        r#"{"query":{"path":[],"select":[],"start":{"from":"index"},"projections":[],"limit":null,"offset":null}}"#,
    )
    .expect_err("a benchmark word");
    assert!(refused.to_string().contains("`index` is only allowed in benchmark files"), "{refused}");
}
