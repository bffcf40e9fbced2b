//! The README's first taste, read out of README.md itself and typed into `espalier shell` on
//! a fresh `init --demo` database: every instruction runs, and Espalier answers exactly what the
//! README shows under it (the lines indented by two spaces).
//!
//! The README's `cargo run` commands are run as written by `scripts/readme-check`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::text;

const BIN: &str = env!("CARGO_BIN_EXE_espalier");

/// An instruction of the taste and the answer the README shows for it.
struct Step {
    instruction: String,
    answer: Vec<String>,
}

/// The fenced block after the line that says the instructions are typed in `espalier shell`.
fn taste() -> Vec<Step> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).expect("read README.md");
    let intro = readme.find("typed here in `espalier shell`").expect("the README introduces the taste");
    let rest = &readme[intro..];
    let open = rest.find("\n```\n").expect("the taste's block opens") + 5;
    let block = &rest[open..open + rest[open..].find("\n```").expect("the taste's block closes")];
    let mut steps: Vec<Step> = Vec::new();
    for line in block.lines() {
        match line.strip_prefix("  ") {
            Some(answer) => steps.last_mut().expect("an answer follows an instruction").answer.push(answer.into()),
            None => steps.push(Step { instruction: line.into(), answer: Vec::new() }),
        }
    }
    steps
}

fn run(db: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BIN)
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("ESPALIER_DB")
        .env("ESPALIER_HISTORY", db.with_extension("history"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run espalier");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn the_readme_taste_runs_as_shown_on_the_demo_database() {
    let steps = taste();
    assert!(steps.len() >= 4, "the taste has its instructions");
    assert!(steps.iter().any(|s| s.answer.iter().any(|a| a.starts_with("error[referenced]"))));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("espalier.db");
    let init = run(&db, &["init", "--demo"], "");
    assert!(init.status.success(), "{}", text(&init.stderr));
    for step in &steps {
        // One shell per instruction, so each answer is known to be its own.
        let out = run(&db, &["shell"], &format!("{}\n", step.instruction));
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        let failed = step.answer.first().is_some_and(|a| a.starts_with("error["));
        let (shown, other) = if failed { (&stderr, &stdout) } else { (&stdout, &stderr) };
        let got: Vec<&str> = shown.lines().collect();
        assert_eq!(got, step.answer, "{}\nstdout:\n{stdout}\nstderr:\n{stderr}", step.instruction);
        assert!(other.is_empty(), "{}: unexpected output {other:?}", step.instruction);
        assert_eq!(out.status.code(), Some(if failed { 2 } else { 0 }), "{}", step.instruction);
    }
}
