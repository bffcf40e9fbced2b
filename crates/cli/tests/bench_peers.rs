//! `espalier bench peers` end to end at a tiny scale (Espalier and SQLite; the PostgreSQL peer
//! is tested in crates/bench/tests/peers.rs), and its usage errors.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_espalier");

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN).args(args).current_dir(dir).env_remove("ESPALIER_DB").output().expect("run espalier")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const TINY: [&str; 10] =
    ["--scale", "0.05", "--nested-scale", "0.1", "--ops", "5", "--warmup", "1", "--systems", "espalier,sqlite"];

#[test]
fn peers_reports_every_operation_as_json_and_markdown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let mut args = vec!["--json", "bench", "peers", "--suite", "b6", "--dir"];
    let dir_arg = d.display().to_string();
    args.push(&dir_arg);
    args.extend(TINY);
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    let results = json["results"].as_array().expect("results");
    assert_eq!(results.len(), 5 * 2, "five B6 operations on two systems");
    assert!(results.iter().all(|r| r["count"] == 5 && r["median_us"].as_f64().is_some_and(|m| m > 0.0)));
    assert!(json["cross_checks"].as_u64().is_some_and(|n| n >= 30));
    assert_eq!(std::fs::read_dir(d).expect("dir").count(), 0, "the temporary databases are deleted");

    let mut args = vec!["bench", "peers", "--suite", "b7"];
    args.extend(TINY);
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    for op in ["many_references", "search", "task_start"] {
        assert!(md.contains(&format!("| {op} | espalier |")) && md.contains(&format!("| {op} | sqlite |")), "{md}");
    }
    assert!(!md.contains("| get_big_items |"), "B7 has three operations: {md}");
}

#[test]
fn peers_rejects_bad_options_with_a_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for (args, want) in [
        (vec!["--systems", "sqlite"], "must start with espalier"),
        (vec!["--systems", "espalier,mysql"], "unknown system \"mysql\""),
        (vec!["--scale", "0"], "scale must be a positive number"),
        (vec!["--ops", "0"], "ops must be at least 1"),
    ] {
        let mut all = vec!["bench", "peers", "--suite", "b6"];
        all.extend(args);
        let o = run(d, &all);
        assert_eq!(o.status.code(), Some(1), "{all:?}");
        assert!(text(&o.stderr).contains(want), "{all:?}: {}", text(&o.stderr));
    }
}
