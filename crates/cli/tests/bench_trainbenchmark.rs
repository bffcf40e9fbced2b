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
    // Both systems' files after the run: a checkpoint and a SQLite file hold pages at least.
    for system in ["disk_espalier_bytes", "disk_sqlite_bytes"] {
        assert!(sizes[0][system].as_u64().unwrap() >= 4096, "{system}: {}", sizes[0][system]);
    }
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

/// The peers directory: `ESPALIER_PEERS_DIR`, else the repository's `peers/`.
fn peers_dir() -> String {
    std::env::var("ESPALIER_PEERS_DIR").unwrap_or_else(|_| format!("{}/../../peers", env!("CARGO_MANIFEST_DIR")))
}

#[test]
fn quick_run_beside_duckdb_kuzu_and_neo4j_finds_the_same_matches() {
    let peers = peers_dir();
    let charts = tempfile::tempdir().unwrap();
    let svg = charts.path().join("tb.svg");
    let svg_arg = svg.display().to_string();
    let out = run(&[
        "--json",
        "bench",
        "trainbenchmark",
        "--quick",
        "--peers",
        "duckdb,kuzu,neo4j",
        "--require-peers",
        "--peers-dir",
        &peers,
        "--svg",
        &svg_arg,
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let size = &report["sizes"][0];
    let versions: Vec<&str> =
        size["peers"].as_array().unwrap().iter().map(|p| p["version"].as_str().unwrap()).collect();
    assert!(versions[0].starts_with("DuckDB ") && versions[1].starts_with("Kùzu "), "{versions:?}");
    assert!(versions[2].starts_with("Neo4j 5.26"), "{versions:?}");
    for q in size["queries"].as_array().unwrap() {
        let peers = q["peers"].as_array().unwrap();
        assert_eq!(peers.len(), 3, "{q}");
        assert!(peers.iter().all(|p| p["timings"]["median_us"].as_f64().unwrap() > 0.0), "{q}");
    }
    let chart = std::fs::read_to_string(&svg).unwrap();
    for system in ["Espalier", "SQLite", "duckdb", "kuzu", "neo4j", "ConnectedSegments"] {
        assert!(chart.contains(system), "{system} in the chart");
    }

    // A peer that is not installed: reported, and fatal only when required.
    let missing = [
        "bench",
        "trainbenchmark",
        "--quick",
        "--query",
        "PosLength",
        "--peers",
        "kuzu",
        "--peers-dir",
        "/nonexistent",
    ];
    let out = run(&missing);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("kuzu did not run: kuzu is not available"));
    let out = run(&[&missing[..], &["--require-peers"]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("kuzu is not available"));
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
    let out = run(&["bench", "trainbenchmark", "--quick", "--peers", "neo5j"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--peers: unknown peer \"neo5j\"; expected duckdb, kuzu or neo4j"));
}
