//! `espalier bench mix` end to end: Espalier and SQLite at toy size (the library test adds
//! PostgreSQL), the JSON report and the chart, nothing left in `--dir`; and its usage errors.

mod common;

use common::{run, text};

#[test]
fn quick_mix_runs_without_and_with_transactions_and_checks_every_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let work = d.join("work");
    std::fs::create_dir(&work).expect("work dir");
    let (work_arg, svg) = (work.display().to_string(), d.join("mix.svg"));
    let svg_arg = svg.display().to_string();
    let lines = d.join("throughput.svg");
    let lines_arg = lines.display().to_string();
    let args = [
        "--durability",
        "none",
        "--json",
        "bench",
        "mix",
        "--quick",
        "--size",
        "200",
        "--clients",
        "2",
        "--peers",
        "sqlite",
        "--seconds",
        "0.2",
        "--dir",
        &work_arg,
        "--svg",
        &svg_arg,
        "--throughput-svg",
        &lines_arg,
    ];
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    let points = json["points"].as_array().expect("points");
    assert_eq!(points.len(), 4, "two systems, two modes");
    for p in points {
        assert_eq!((p["errors"].as_u64(), p["wrong"].as_u64()), (Some(0), Some(0)), "{p}");
        assert!(p["state"].is_null(), "{p}");
        assert!(p["batches"].as_u64().is_some_and(|b| b > 0), "{p}");
    }
    assert_eq!(json["costs"].as_array().map(Vec::len), Some(2));
    assert!(std::fs::read_to_string(&svg).expect("chart").starts_with("<svg"));
    let lines = std::fs::read_to_string(&lines).expect("throughput chart");
    assert_eq!(lines.matches("<polyline").count(), 4, "two systems in each mode: {lines}");
    assert_eq!(std::fs::read_dir(&work).expect("read dir").count(), 0, "temporary databases deleted");

    for (bad, says) in [
        (vec!["bench", "mix", "--peers", "mysql"], "expected postgres or sqlite"),
        (vec!["bench", "mix", "--size", "0"], "--size"),
        (vec!["bench", "mix", "--mix", "50,50"], "five percentages"),
    ] {
        let o = run(d, &bad);
        assert!(!o.status.success(), "{bad:?}");
        assert!(text(&o.stderr).contains(says), "{bad:?}: {}", text(&o.stderr));
    }
}
