//! `espalier exec`: one instruction (or a file of them), its reply on standard output.

use std::collections::HashMap;
use std::io::{Read, Write};

use espalier_instruction::{Engine, InstructionError, ParamValue, Reply};

use crate::output::{render_reply, Format};
use crate::{db, ExecArgs, Failure, Global};

/// `name=value` pairs as parameter values. Values stay text: the engine reads a text parameter
/// as a number where a number is needed, and `007` keeps its leading zeros as a key.
pub fn parse_params(pairs: &[String]) -> Result<HashMap<String, ParamValue>, Failure> {
    let mut out = HashMap::new();
    for pair in pairs {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| Failure::other(format!("--param {pair:?}: expected NAME=VALUE, e.g. --param order=o1")))?;
        let name = name.trim().trim_start_matches('$');
        if name.is_empty() {
            return Err(Failure::other(format!("--param {pair:?}: the name is empty")));
        }
        out.insert(name.to_string(), ParamValue::Text(value.to_string()));
    }
    Ok(out)
}

/// Runs one instruction given as text, or as JSON when it starts with `{`.
pub fn run_one(engine: &Engine, source: &str, params: &HashMap<String, ParamValue>) -> Result<Reply, Failure> {
    let result = if source.trim_start().starts_with('{') {
        // The JSON form is the protocol's structured instruction.
        espalier_protocol::parse_json(source)
            .map_err(InstructionError::Parse)
            .and_then(|instr| engine.check(&instr, None))
            .and_then(|plan| engine.run(&plan, params, None))
    } else {
        engine.execute_text(source, params)
    };
    result.map_err(|e| Failure::Instruction(e, Some(source.to_string())))
}

pub fn format_of(g: &Global, explicit: Option<Format>) -> Format {
    match explicit {
        Some(f) => f,
        None if g.json => Format::Json,
        None => Format::Table,
    }
}

pub fn exec(g: &Global, args: &ExecArgs) -> Result<(), Failure> {
    let params = parse_params(&args.params)?;
    let format = format_of(g, args.format);
    // Read the input before opening the database, so that input errors come first.
    let (source, from_file) = match (&args.instruction, &args.file) {
        (_, Some(path)) => (
            std::fs::read_to_string(path).map_err(|e| Failure::other(format!("reading {}: {e}", path.display())))?,
            true,
        ),
        (Some(dash), None) if dash == "-" => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| Failure::other(format!("reading standard input: {e}")))?;
            (s, false)
        }
        (Some(text), None) => (text.clone(), false),
        (None, None) => return Err(Failure::other("give an instruction, `-` for standard input, or --file F")),
    };
    if source.trim().is_empty() {
        return Err(Failure::other("the instruction is empty"));
    }
    let engine = db::open(g)?;
    let stdout = std::io::stdout();
    let print = |reply: &Reply| {
        let mut out = stdout.lock();
        let _ = out.write_all(render_reply(reply, format).as_bytes());
        let _ = out.flush();
    };
    if from_file && !source.trim_start().starts_with('{') {
        db::run_all(&engine, &source, &params, print)
    } else {
        let reply = run_one(&engine, &source, &params)?;
        print(&reply);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_split_at_the_first_equals_sign() {
        let p = parse_params(&["a=1".into(), "$b=x=y".into(), "c=".into()]).unwrap();
        assert_eq!(p["a"], ParamValue::Text("1".into()));
        assert_eq!(p["b"], ParamValue::Text("x=y".into()));
        assert_eq!(p["c"], ParamValue::Text(String::new()));
        assert!(parse_params(&["novalue".into()]).is_err());
        assert!(parse_params(&["=v".into()]).is_err());
    }
}
