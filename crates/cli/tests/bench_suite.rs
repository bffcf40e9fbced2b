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

/// A benchmark whose instructions fail where the file does not say they may fails the run
/// (status 2, after the report); `--allow-unexpected` says it should not, and `--strict` (the
/// old way to ask for the failure) is still accepted.
#[test]
fn unexpected_outcomes_fail_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Random keys collide with existing ones: failures nobody declared.
    std::fs::write(
        d.join("collide.bench"),
        "root ( 'd' -> dictionary ( ) )\ninitialize ( 'd' -> dictionary 5 ( ) )\nrepeat 4 ( update ( 'd' -> dictionary random 5 ( ) ) )\n",
    )
    .unwrap();
    let o = run(d, &["bench", "run", "collide.bench", "--out", "r.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("error: 1 instruction(s) had unexpected outcomes") && err.contains("key_exists"), "{err}");
    assert!(text(&o.stdout).contains("unexpected"), "the report is printed all the same");
    assert!(d.join("r.json").exists(), "and written");
    let o = run(d, &["bench", "run", "--strict", "collide.bench"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(d, &["bench", "collide.bench", "--allow-unexpected"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("warning: 1 instruction(s) had unexpected outcomes"), "{}", text(&o.stderr));
}

/// `bench run benchmarks/b6 --scale 0.05` ran task_stop and task_start 300 times over 15
/// machines, task_start with a reference to order "5" of 5: 585 runs failed with key_missing
/// and the run exited 0. Now the literal key refuses the scale before anything is built, and
/// `index` runs once per (scaled) machine.
#[test]
fn b6_scaled_down_is_refused_or_fitted_never_failing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let b6 = benchmarks("b6");
    let o = run(d, &["bench", "run", b6.as_str(), "--scale", "0.05"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    for needle in ["use_case.bench", "'task_start'", "\"5\" of 'Orders'", "5 entries", "--scale 0.06 or more"] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert!(o.stdout.is_empty() && !err.contains(".bench …"), "refused before building: {err}");

    let o = run(d, &["bench", "run", b6.as_str(), "--scale", "0.06", "--repeat-scale", "0.1", "--warmup", "1"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("'task_stop' runs 18 times, not 30") && err.contains("'Machines'"), "{err}");
    let md = text(&o.stdout);
    assert!(md.contains("| task_start | hot | 18 |") && !md.contains("key_missing"), "{md}");
}

/// The global options (`--json`, `--db`, `--durability`) after `bench FILE`, as after any
/// subcommand.
#[test]
fn global_options_anywhere_in_the_bench_shorthand() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let add = benchmarks("b1/add.bench");
    let mut args = vec!["bench", add.as_str(), "--json", "--db", "unused.db", "--durability", "periodic"];
    args.extend(TINY);
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert_eq!(out["options"]["durability"], "periodic", "{out}");
    // The same after `bench run FILE`, and --fsync is --durability sync.
    let mut args = vec!["bench", "run", add.as_str(), "--fsync", "--json"];
    args.extend(TINY);
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert_eq!(out["options"]["durability"], "sync", "{out}");
    let o = run(d, &["bench", add.as_str(), "--fsync", "--durability", "none"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("--fsync means --durability sync"), "{}", text(&o.stderr));
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

/// `bench run --help` said `--durability … [default: sync]` beside `--fsync`'s "by default
/// commits are not fsynced": one default per command now, and it is the one that applies.
#[test]
fn bench_run_help_states_one_durability_default() {
    let o = Command::new(BIN).args(["bench", "run", "--help"]).output().unwrap();
    let help = text(&o.stdout);
    assert!(!help.contains("[default: sync]"), "{help}");
    for needle in [
        "`none` for bench run and bench peers (their --fsync is `sync`)",
        "the same as `--durability sync`",
        "durability none unless --fsync or --durability says otherwise",
        "Global options:",
        "do not use it",
        "--allow-unexpected",
        "Exit status: 0 when every instruction had the outcome its file declares",
    ] {
        assert!(help.contains(needle), "help lacks {needle:?}:\n{help}");
    }
    // What the help says is what a run does: without options, durability none.
    let dir = tempfile::tempdir().unwrap();
    let add = benchmarks("b1/add.bench");
    let mut args = vec!["--json", "bench", "run", add.as_str()];
    args.extend(TINY);
    let o = Command::new(BIN).args(&args).current_dir(dir.path()).env_remove("ESPALIER_DURABILITY").output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["options"]["durability"], "none");
    // And the other commands' default, sync, is said in theirs.
    let o = Command::new(BIN).args(["exec", "--help"]).output().unwrap();
    assert!(text(&o.stdout).contains("Default: `sync` for init, exec, shell, import, serve"), "{}", text(&o.stdout));
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
