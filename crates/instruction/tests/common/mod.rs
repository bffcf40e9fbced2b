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

/// Reads the JSON form (the protocol's `parse_json`), checks and runs one instruction.
pub fn execute_json(
    e: &Engine,
    json: &str,
    params: &HashMap<String, espalier_instruction::ParamValue>,
) -> Result<espalier_instruction::Reply, espalier_instruction::InstructionError> {
    let instr = espalier_protocol::parse_json(json)?;
    let plan = e.check(&instr, None)?;
    e.run(&plan, params, None)
}

/// An instruction's text parsed (as a client sends it) and checked: a plan to run or visit.
pub fn plan(e: &Engine, text: &str) -> espalier_instruction::plan::Plan {
    let instr = espalier_instruction::parse_instruction(text, espalier_instruction::parse::ParseOptions::CLIENT)
        .unwrap_or_else(|err| panic!("{text}\n  does not parse: {err}"));
    e.check(&instr, Some(text)).unwrap_or_else(|err| panic!("{text}\n  does not check: {err}"))
}

/// Runs an instruction that must succeed.
pub fn exec(e: &Engine, text: &str) {
    e.execute_text(text, &HashMap::new()).unwrap_or_else(|err| panic!("{text}\n  failed: {err}"));
}

/// Runs an instruction, returning its reply or error.
pub fn run(e: &Engine, text: &str) -> Result<espalier_instruction::Reply, espalier_instruction::InstructionError> {
    e.execute_text(text, &HashMap::new())
}

/// The rows of a query as JSON arrays of their values, in reply order.
pub fn query_rows(e: &Engine, text: &str) -> Vec<String> {
    match run(e, text).unwrap_or_else(|err| panic!("{text}\n  failed: {err}")) {
        espalier_instruction::Reply::Query(q) => {
            q.rows.iter().map(|r| serde_json::to_string(&r.values).unwrap()).collect()
        }
        other => panic!("{text}: not a query reply: {other:?}"),
    }
}

/// `espalier check` finds nothing wrong (it recomputes derived values and index rows).
pub fn check_ok(e: &Engine) {
    let snap = e.database().snapshot().unwrap();
    let report = espalier_data::check(&snap.graph(), &mut |_| {}).unwrap();
    assert!(report.is_ok(), "check found problems: {:?}", report.problems);
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
