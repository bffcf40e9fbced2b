//! Helpers shared by the `espalier bench …` end-to-end tests (each test file uses some).
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_espalier");

/// Runs `espalier` with `args` in `dir`, without a database from the environment.
pub fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN).args(args).current_dir(dir).env_remove("ESPALIER_DB").output().expect("run espalier")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
