//! `espalier bench trainbenchmark` end to end at CI size, and its usage errors.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_espalier");

fn run(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(BIN).args(args).current_dir(dir.path()).env_remove("ESPALIER_DB").output().expect("run espalier")
}

#[test]
fn quick_run_reports_every_query_cross_checked() {
    let out = run(&["--json", "bench", "trainbenchmark", "--quick"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sizes = report["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 1);
    assert_eq!(sizes[0]["size"], 1);
    let queries = sizes[0]["queries"].as_array().unwrap();
    let names: Vec<&str> = queries.iter().map(|q| q["query"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["PosLength", "SwitchMonitored", "RouteSensor", "SwitchSet", "ConnectedSegments", "SemaphoreNeighbor"]
    );
    // The official repair model's matches (the same the SQLite cross-check found).
    let matches: Vec<u64> = queries.iter().map(|q| q["matches"].as_u64().unwrap()).collect();
    assert_eq!(matches, [52, 0, 12, 1, 4, 8]);
    for q in queries {
        assert!(q["espalier"]["median_us"].as_f64().unwrap() > 0.0);
        if q["matches"].as_u64().unwrap() > 0 {
            assert!(q["repair"]["fixed"].as_u64().unwrap() > 0, "{q}");
        }
    }
}

#[test]
fn usage_errors_name_the_choices() {
    let out = run(&["bench", "trainbenchmark", "--scenario", "chaos", "--quick"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scenario \"chaos\"; use batch, inject or repair"));
    let out = run(&["bench", "trainbenchmark", "--query", "Teleport", "--quick"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown query \"Teleport\""));
    let out = run(&["bench", "trainbenchmark", "--size", "0", "--runs", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("size 0 is outside"));
}
