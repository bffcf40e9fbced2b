//! The instruction language's text form as the server and the shell read it: parse one
//! instruction (and a list, as `espalier exec` does), check it against the demo schema the
//! way `Engine::check` does for a request, and run what checks on the demo data (writes
//! rolled back). Whatever parses prints (`to_text`) to text that parses to the same
//! instruction. Otherwise only a panic, a hang or a crash fails.
#![no_main]

use std::collections::HashMap;
use std::sync::OnceLock;

use espalier_fuzz::demo_engine;
use espalier_instruction::parse::{clear_spans, parse_instruction, parse_instructions, to_text, ParseOptions};
use espalier_instruction::{Engine, ParamValue};
use libfuzzer_sys::fuzz_target;

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| demo_engine("instruction_parse", true))
}

fn params() -> HashMap<String, ParamValue> {
    HashMap::from([("n".into(), ParamValue::Int(7)), ("t".into(), ParamValue::Text("o1".into()))])
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = parse_instructions(text, ParseOptions::CLIENT).map_err(|e| e.to_string());
    let mut instr = match parse_instruction(text, ParseOptions::CLIENT) {
        Ok(i) => i,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let engine = engine();
    match engine.check(&instr, Some(text)) {
        Ok(plan) => {
            let _ = engine.run_rolled_back(&plan, &params()).map_err(|e| e.to_string());
        }
        Err(e) => {
            let _ = (e.code(), e.to_string());
        }
    }
    clear_spans(&mut instr);
    let printed = to_text(&instr);
    let mut again = parse_instruction(&printed, ParseOptions::CLIENT)
        .unwrap_or_else(|e| panic!("the printed form does not parse: {e}\n{printed}"));
    clear_spans(&mut again);
    assert_eq!(again, instr, "printed as {printed}");
});
