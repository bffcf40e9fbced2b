//! Helpers shared by the end-to-end tests of the `espalier` command (each test file uses some).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_espalier");

/// Runs `espalier` with `args` in `dir`, without a database from the environment.
pub fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN).args(args).current_dir(dir).env_remove("ESPALIER_DB").output().expect("run espalier")
}

/// Runs `espalier --db DB ARGS`, without a database or token from the environment.
pub fn espalier_on(db: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("ESPALIER_DB")
        .env_remove("ESPALIER_TOKEN")
        .output()
        .expect("run espalier")
}

/// Output bytes as text, for messages and `contains` checks.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Spawns a configured `espalier … serve` with its standard output piped, and returns it with
/// the address from its first line (`listening on ws://ADDR/ws …`), once it accepts connections.
pub fn spawn_serve(mut command: Command) -> (Child, String) {
    let mut child = command.stdout(Stdio::piped()).spawn().expect("spawn espalier serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("read the address line");
    let addr = line
        .strip_prefix("listening on ws://")
        .and_then(|rest| rest.split("/ws").next())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, addr)
}
