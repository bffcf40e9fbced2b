//! `espalier schema check FILE`.

use std::path::Path;

use espalier_schema::Schema;

use crate::Failure;

/// Compiles `source` and its command bodies; on failure, the rendered diagnostics (with `file`
/// as the file name, carets under the offending text).
pub fn compile_all(source: &str, file: &str) -> Result<Schema, String> {
    let schema = espalier_schema::compile(source).map_err(|d| d.render(source, file))?;
    espalier_instruction::compile_commands(&schema).map_err(|d| d.render(source, file))?;
    Ok(schema)
}

pub fn check(path: &Path) -> Result<(), Failure> {
    let source =
        std::fs::read_to_string(path).map_err(|e| Failure::other(format!("reading {}: {e}", path.display())))?;
    let file = path.display().to_string();
    match compile_all(&source, &file) {
        Ok(schema) => {
            println!("{file}: ok");
            print!("{}", espalier_schema::describe(&schema));
            Ok(())
        }
        Err(rendered) => {
            eprint!("{rendered}");
            if !rendered.ends_with('\n') {
                eprintln!();
            }
            Err(Failure::Exit(1))
        }
    }
}
