//! The structured form of instructions as clients send it: JSON (`parse_json`, and in a
//! JSON frame) or MessagePack, decoded into the protocol's wire form, converted to the syntax
//! tree, validated and checked by `Engine::check` as the server does for a structured request, then run on the demo data (writes rolled back). Whatever is
//! accepted re-encodes to JSON that decodes to the same instruction, and prints as text
//! that parses to it (an instruction the server accepts has a text form: `validate.rs`).
//! Otherwise only a panic, a hang or a crash fails.
#![no_main]

use std::collections::HashMap;
use std::sync::OnceLock;

use espalier_fuzz::demo_engine;
use espalier_instruction::ast::Instruction;
use espalier_instruction::parse::{clear_spans, parse_instruction, to_text, ParseOptions};
use espalier_instruction::{Engine, ParamValue};
use espalier_protocol::codec::decode_value;
use espalier_protocol::instruction::{parse_json, Instruction as Wire};
use espalier_protocol::Encoding;
use libfuzzer_sys::fuzz_target;

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| demo_engine("structured_decode", true))
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks the encoding: 0x01 MessagePack, anything else JSON.
    let Some((&encoding, body)) = data.split_first() else { return };
    let decoded: Option<Instruction> = if encoding == 1 {
        // A benchmark word (`index`, `random`) is refused by the conversion, as in the server.
        decode_value::<Wire>(Encoding::Msgpack, body, 1 << 20).ok().and_then(|w| w.to_ast().map_err(|e| e.to_string()).ok())
    } else {
        std::str::from_utf8(body).ok().and_then(|json| parse_json(json).map_err(|e| e.to_string()).ok())
    };
    let Some(mut instr) = decoded else { return };
    let engine = engine();
    match engine.check(&instr, None) {
        Ok(plan) => {
            let params: HashMap<String, ParamValue> = HashMap::new();
            let _ = engine.run_rolled_back(&plan, &params).map_err(|e| e.to_string());
        }
        Err(e) => {
            let _ = (e.code(), e.to_string());
            // Only what the server accepts must round-trip: `validate` leaves some rules of
            // the text form to the checker (a node path's steps need keys, …).
            return;
        }
    }
    clear_spans(&mut instr);
    let json = serde_json::to_string(&Wire::from(&instr)).expect("an instruction encodes as JSON");
    let mut back = parse_json(&json).unwrap_or_else(|e| panic!("its JSON does not decode: {e}\n{json}"));
    clear_spans(&mut back);
    assert_eq!(back, instr, "JSON {json}");
    let printed = to_text(&instr);
    let mut again = parse_instruction(&printed, ParseOptions::CLIENT)
        .unwrap_or_else(|e| panic!("its text form does not parse: {e}\n{printed}\nJSON {json}"));
    clear_spans(&mut again);
    assert_eq!(again, instr, "printed as {printed}\nJSON {json}");
});
