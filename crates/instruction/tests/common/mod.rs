//! Helpers shared by the instruction tests (each test file uses some of them).
#![allow(dead_code)]

use std::collections::HashMap;

use espalier_instruction::Engine;
use espalier_transaction::{DatabaseOptions, Durability};

/// A fresh database for `schema` in a temporary directory (kept alive by the returned guard).
pub fn engine(schema: &str) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let e = Engine::create(&dir.path().join("db"), schema, opts).unwrap();
    (dir, e)
}

/// Runs an instruction that must succeed.
pub fn exec(e: &Engine, text: &str) {
    e.execute_text(text, &HashMap::new()).unwrap_or_else(|err| panic!("{text}\n  failed: {err}"));
}

/// A small deterministic generator (xorshift), so the tests need no extra crate.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
