//! `espalier bench social --quick` end to end: the tiny network in process beside SQLite,
//! then over a server on a free 127.0.0.1 port — every query and the three commands, both
//! encodings, with and without compression — every reply checked; beside Neo4j over Bolt; and
//! its usage errors.

mod common;

use common::{run, text};

#[test]
fn quick_run_checks_every_query_in_process_and_over_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().join("work");
    std::fs::create_dir(&d).expect("work dir");
    let dir_arg = d.display().to_string();
    let svg = dir.path().join("social.svg");
    let svg_arg = svg.display().to_string();
    let args = [
        "--json",
        "bench",
        "social",
        "--quick",
        "--requests",
        "6",
        "--clients",
        "1,2",
        "--encoding",
        "msgpack,json",
        "--compressions",
        "none,deflate",
        "--dir",
        &dir_arg,
        "--svg",
        &svg_arg,
    ];
    let o = run(dir.path(), &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    let ops = json["in_process"]["ops"].as_array().expect("in-process ops");
    assert_eq!(ops.len(), 18 + 3, "eighteen queries and three commands");
    assert_eq!(json["in_process"]["counts"]["people"].as_u64(), Some(60));
    let remote = json["remote"].as_array().expect("remote runs");
    assert_eq!(remote.len(), 2, "none and deflate");
    for r in remote {
        let points = r["report"]["points"].as_array().expect("points");
        // 21 workloads × 2 encodings × K = 1, 2.
        assert_eq!(points.len(), 21 * 2 * 2, "{}", r["compression"]);
        for p in points {
            assert_eq!((p["failed"].as_u64(), p["wrong"].as_u64()), (Some(0), Some(0)), "{p}");
            assert_eq!(p["operations"].as_u64(), Some(6), "{p}");
        }
        let names: Vec<&str> = points.iter().filter_map(|p| p["workload"].as_str()).collect();
        for w in ["cmd:friend-recommendations", "cmd:fof-2", "cmd:fof-3", "shortest-path", "profiles-10"] {
            assert!(names.contains(&w), "{w} missing");
        }
    }
    assert_eq!(std::fs::read_dir(&d).expect("read dir").count(), 0, "nothing left in --dir");
    let chart = std::fs::read_to_string(&svg).expect("the chart");
    assert!(chart.starts_with("<svg") && chart.contains("fof-3"), "{chart}");
    assert!(dir.path().join("social-remote-deflate.svg").exists());
}

#[test]
fn usage_errors_name_the_option() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (args, want) in [
        (&["bench", "social", "--quick", "--size", "huge"][..], "--size"),
        (&["bench", "social", "--quick", "--query", "fof-9"][..], "--query"),
        (&["bench", "social", "--quick", "--peers", "duckdb"][..], "--peers"),
        (&["bench", "social", "--quick", "--compressions", "lz4"][..], "--compression"),
        (&["bench", "social", "--quick", "--invocations", "2000000"][..], "--invocations"),
        (&["bench", "social", "--quick", "--pool", "0"][..], "--pool"),
        (&["bench", "social", "--quick", "--peers", "neo4j-bolt", "--no-remote"][..], "--peers neo4j-bolt"),
        (&["bench", "social", "--quick", "--jvm-warmup", "4000"][..], "--jvm-warmup"),
    ] {
        let o = run(dir.path(), args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(text(&o.stderr).contains(want), "{args:?}: {}", text(&o.stderr));
    }
}

/// The peers directory: `ESPALIER_PEERS_DIR`, else the repository's `peers/`.
fn peers_dir() -> String {
    std::env::var("ESPALIER_PEERS_DIR").unwrap_or_else(|_| format!("{}/../../peers", env!("CARGO_MANIFEST_DIR")))
}

#[test]
fn beside_neo4j_over_bolt_at_the_same_points() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = [
        "bench",
        "social",
        "--quick",
        "--query",
        "friends,profile",
        "--clients",
        "1,2",
        "--requests",
        "6",
        "--compressions",
        "none",
        "--peers",
        "sqlite,neo4j-bolt",
    ];
    let peers = peers_dir();
    let installed = std::process::Command::new(format!("{peers}/neo4j/run")).arg("--version").output();
    if installed.is_ok_and(|o| o.status.success()) {
        let args = [&["--json"][..], &base, &["--require-peers", "--peers-dir", &peers]].concat();
        let o = run(dir.path(), &args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
        let bolt = &json["neo4j_bolt"];
        assert!(bolt["version"].as_str().is_some_and(|v| v.starts_with("Neo4j 5.26")), "{bolt}");
        assert_eq!(bolt["espalier"].as_str(), Some("ws, msgpack, compression none"));
        // friends is a graph query, profile is not: friends at K = 1, 2.
        let rows = bolt["comparisons"].as_array().expect("comparisons");
        let at: Vec<(&str, u64)> =
            rows.iter().map(|r| (r["query"].as_str().unwrap_or(""), r["clients"].as_u64().unwrap_or(0))).collect();
        assert_eq!(at, [("friends", 1), ("friends", 2)]);
        for r in rows {
            assert!(r["ratio"].as_f64().is_some_and(|x| x > 0.0), "{r}");
        }
        for p in bolt["points"].as_array().expect("points") {
            assert_eq!(
                (p["wrong"].as_u64(), p["failed"].as_u64(), p["operations"].as_u64()),
                (Some(0), Some(0), Some(6))
            );
        }
    } else {
        eprintln!("skipped the run beside Neo4j over Bolt: {peers}/neo4j/run does not start (scripts/peers-setup)");
    }

    // Not installed: reported as not run, and fatal only when required.
    let missing = [&base[..], &["--peers-dir", "/nonexistent"]].concat();
    let o = run(dir.path(), &missing);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("neo4j-bolt did not run: neo4j-bolt is not available"), "{}", text(&o.stdout));
    let o = run(dir.path(), &[&missing[..], &["--require-peers"]].concat());
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("neo4j-bolt is not available"), "{}", text(&o.stderr));
}
