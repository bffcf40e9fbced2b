//! `espalier bench run` and `espalier bench compare` end to end, at a tiny scale.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{run, text, BIN};

fn benchmarks(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benchmarks").join(rel).display().to_string()
}

const TINY: [&str; 8] = ["--scale", "0.06", "--nested-scale", "0.1", "--repeat-scale", "0.01", "--warmup", "1"];

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

#[test]
fn run_writes_every_report_and_compare_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut args = vec![
        "bench",
        "run",
        "--out",
        "a.json",
        "--markdown",
        "a.md",
        "--svg",
        "a.svg",
        "--cold",
        "--cold-samples",
        "2",
    ];
    args.extend(TINY);
    let b5 = benchmarks("b5");
    let add = benchmarks("b1/add.bench");
    args.extend([b5.as_str(), add.as_str()]);
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    for name in ["add_failure", "path_failure", "remove_failure", "set_state_failure", "add"] {
        assert!(md.contains(&format!("| {name} | hot |")), "{md}");
        assert!(md.contains(&format!("| {name} | cold | 2 |")), "{md}");
    }
    assert!(md.contains("all failed: 10× key_exists (as expected)"), "{md}");
    assert_eq!(std::fs::read_to_string(d.join("a.md")).unwrap(), md);
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("a.json")).unwrap()).unwrap();
    assert_eq!(json["results"].as_array().unwrap().len(), 10);
    assert!(json["suites"][0]["cold_method"].is_string());
    assert!(std::fs::read_to_string(d.join("a.svg")).unwrap().starts_with("<svg"));

    // JSON on standard output with --json; a second labelled run to compare with.
    let mut args = vec!["--json", "bench", "run", "--label", "second", "--out", "b.json"];
    args.extend(TINY);
    args.push(add.as_str());
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert_eq!(out["label"], "second");

    let o = run(d, &["bench", "compare", "a.json", "b.json", "--svg", "c.svg"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let cmp = text(&o.stdout);
    assert!(cmp.contains("| b1 | add | hot |") && cmp.contains("second ÷ espalier"), "{cmp}");
    // add_failure is only in the first report.
    assert!(cmp.contains("| b5 | add_failure | hot |") && cmp.contains(" — |"), "{cmp}");
    assert!(std::fs::read_to_string(d.join("c.svg")).unwrap().contains("espalier vs second"));
}

#[test]
fn bad_files_fail_before_anything_runs_and_leave_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("bad.bench"),
        "root ( 'n' -> number )\ninitialize ( 'n' -> number 1 )\nrepeat 3 (\n  update ( 'm' -> number 2 )\n)\n",
    )
    .unwrap();
    let add = benchmarks("b1/add.bench");
    let o = run(d, &["bench", "run", "--out", "r.json", "--markdown", "r.md", add.as_str(), "bad.bench"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("bad.bench:4:12: error: no property 'm'"), "{err}");
    assert!(err.contains("4 |   update ( 'm' -> number 2 )") && err.contains('^'), "{err}");
    assert!(o.stdout.is_empty());
    assert_eq!(files_in(d), vec![d.join("bad.bench")], "no report, no partial file");

    // Bad options: a clear message, status 1.
    let o = run(d, &["bench", "run", "--scale", "0", add.as_str()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("scale must be a positive number"), "{}", text(&o.stderr));
    let o = run(d, &["bench", "run", "nope.bench"]);
    assert!(text(&o.stderr).contains("nope.bench does not exist"), "{}", text(&o.stderr));
    let o = run(d, &["bench", "compare", "bad.bench", "bad.bench"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("not a benchmark report"), "{}", text(&o.stderr));
}

#[test]
fn strict_fails_on_unexpected_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Random keys collide with existing ones: failures nobody declared.
    std::fs::write(
        d.join("collide.bench"),
        "root ( 'd' -> dictionary ( ) )\ninitialize ( 'd' -> dictionary 5 ( ) )\nrepeat 4 ( update ( 'd' -> dictionary random 5 ( ) ) )\n",
    )
    .unwrap();
    let o = run(d, &["bench", "run", "collide.bench"]);
    assert!(o.status.success());
    assert!(text(&o.stderr).contains("unexpected outcomes"), "{}", text(&o.stderr));
    let o = run(d, &["bench", "run", "--strict", "collide.bench"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn help_teaches() {
    let o = Command::new(BIN).args(["bench", "run", "--help"]).output().unwrap();
    let help = text(&o.stdout);
    for needle in
        ["--scale", "--cold", "--repeat-scale", "posix_fadvise", "benchmarks/b1", "docs/benchmark-language.md"]
    {
        assert!(help.contains(needle), "help lacks {needle}:\n{help}");
    }
}

/// `espalier bench FILE…` is `espalier bench run FILE…`; `--compare` puts the run beside
/// earlier reports; a name that is neither a command nor a file is an error that lists the
/// commands.
#[test]
fn bench_file_shorthand_and_compare_after_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let b5 = benchmarks("b5");
    let mut args = vec!["bench", "run", b5.as_str(), "--out", "base.json"];
    args.extend(TINY);
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut args = vec!["bench", b5.as_str(), "--label", "again", "--compare", "base.json"];
    args.extend(TINY);
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    assert!(md.contains("| b5 | add_failure | hot |"), "the run's own report: {md}");
    assert!(md.contains("| espalier | again | again ÷ espalier |"), "the comparison, base first: {md}");
    for (args, want) in [
        (vec!["bench", "nosuch"], "no bench command or file named \"nosuch\" (commands: core"),
        (vec!["bench", b5.as_str(), "--bogus"], "unexpected argument '--bogus'"),
        (vec!["bench", b5.as_str(), "--compare", "missing.json"], "cannot read missing.json"),
        (vec!["--json", "bench", b5.as_str(), "--compare", "base.json"], "--compare writes Markdown"),
    ] {
        let o = run(d, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(text(&o.stderr).contains(want), "{args:?}: {}", text(&o.stderr));
    }
}
