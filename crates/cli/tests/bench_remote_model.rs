//! `espalier bench remote-model --quick` end to end: the six Train Benchmark queries and the
//! GraBaTs singleton query over the server, every reply checked; and its usage errors.

mod common;

use common::{run, text};

#[test]
fn quick_run_measures_every_model_query_with_zero_wrong_replies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let dir_arg = d.display().to_string();
    let o = run(d, &["--json", "bench", "remote-model", "--quick", "--requests", "8", "--dir", &dir_arg]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    let points = json["points"].as_array().expect("points");
    let names = [
        "tb:PosLength",
        "tb:SwitchMonitored",
        "tb:RouteSensor",
        "tb:SwitchSet",
        "tb:ConnectedSegments",
        "tb:SemaphoreNeighbor",
        "grabats:singleton",
    ];
    assert_eq!(points.len(), names.len() * 2, "seven queries at K = 1 and 4");
    for p in points {
        assert!(names.contains(&p["workload"].as_str().unwrap_or("")), "{p}");
        assert_eq!((p["failed"].as_u64(), p["wrong"].as_u64()), (Some(0), Some(0)), "{p}");
        assert_eq!(p["operations"].as_u64(), Some(8), "{p}");
        assert!(p["latency"]["dispersion"].as_f64().is_some(), "{p}");
    }
    assert!(text(&o.stderr).contains("each checked in process"), "{}", text(&o.stderr));
    // Nothing is left in --dir.
    assert_eq!(std::fs::read_dir(d).expect("read dir").count(), 0);

    let svg = d.join("chart.svg");
    let svg_arg = svg.display().to_string();
    let lines = d.join("throughput.svg");
    let lines_arg = lines.display().to_string();
    let o = run(
        d,
        &[
            "bench",
            "remote-model",
            "--quick",
            "--requests",
            "4",
            "--clients",
            "2",
            "--query",
            "singleton",
            "--svg",
            &svg_arg,
            "--throughput-svg",
            &lines_arg,
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let chart = std::fs::read_to_string(&svg).expect("the chart");
    assert!(chart.starts_with("<svg") && chart.contains("grabats:singleton") && chart.contains("K = 2"), "{chart}");
    let lines = std::fs::read_to_string(&lines).expect("the throughput chart");
    assert!(lines.contains("<polyline") && lines.contains("at 2 clients"), "{lines}");
    let markdown = text(&o.stdout);
    assert!(markdown.contains("Medians in ms (coefficient of dispersion)"), "{markdown}");
    assert!(markdown.contains("| grabats:singleton | "), "{markdown}");
    assert!(!markdown.contains("tb:"), "{markdown}");
}

#[test]
fn usage_errors_name_the_option() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = run(dir.path(), &["bench", "remote-model", "--query", "Nope"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--query: unknown query \"Nope\"; expected PosLength"), "{}", text(&o.stderr));
    let o = run(dir.path(), &["bench", "remote-model", "--size", "0"]);
    assert!(text(&o.stderr).contains("--size: 0 is not between 1 and 4096"), "{}", text(&o.stderr));
    let o = run(dir.path(), &["bench", "remote-model", "--grabats-types", "0", "--query", "singleton"]);
    assert!(text(&o.stderr).contains("--grabats-types: 0 is not between"), "{}", text(&o.stderr));
    let o = run(dir.path(), &["bench", "remote-model", "--clients", "0"]);
    assert!(text(&o.stderr).contains("--clients: 0 is not between"), "{}", text(&o.stderr));
}
