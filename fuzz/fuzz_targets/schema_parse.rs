//! The schema language, as `espalier schema check`, `init` and `Engine::create` read it:
//! compile any text, render its errors with carets, and for a schema that compiles, its
//! summary, its storage shape and its commands (instruction text inside the schema).
//! Only a panic, a hang or a crash fails.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else { return };
    match espalier_schema::compile(source) {
        Ok(schema) => {
            let _ = espalier_schema::describe(&schema);
            let _ = espalier_data::shape(&schema);
            if let Err(d) = espalier_instruction::compile_commands(&schema) {
                let _ = d.render(source, "schema.alan");
            }
        }
        Err(d) => {
            let _ = d.render(source, "schema.alan");
        }
    }
});
