//! `espalier_bench::remote` at toy size, without PostgreSQL (the command-line test runs it
//! with pgbench): every workload's replies are right, over both transports and encodings,
//! with compression and shared sessions; counting by requests gives exactly that many
//! operations; and a corrupted expected value makes every reply wrong, so the check can fail.

use espalier_bench::remote::{self, Compression, Config, Encoding, Report, Stop, Transport, Workload};

fn tiny(workloads: &[&str]) -> Config {
    Config {
        clients: vec![1, 3],
        stop: Stop::Seconds(0.25),
        warmup_seconds: 0.05,
        workloads: workloads.iter().map(|w| Workload::parse(w).expect("workload")).collect(),
        demo_rows: 50,
        b6_scale: 0.02,
        b6_nested_scale: 0.05,
        pool: 16,
        postgres: false,
        progress: false,
        ..Config::quick()
    }
}

fn assert_all_right(r: &Report) {
    for p in &r.points {
        assert_eq!(
            (p.failed, p.wrong),
            (0, 0),
            "{} {:?}/{} K={}: {:?}",
            p.workload,
            p.transport,
            p.encoding,
            p.clients,
            p.examples
        );
        assert!(p.operations > 0 && p.ops_per_sec > 0.0, "{} K={} did nothing", p.workload, p.clients);
        assert!(p.checked >= p.operations, "every measured reply was checked");
        let l = p.latency.as_ref().expect("latencies");
        assert!(l.min_us > 0.0 && l.min_us <= l.median_us && l.median_us <= l.p99_us && l.p99_us <= l.max_us);
        assert_eq!(l.count as u64, p.operations);
    }
    assert!(r.verifications.iter().all(|v| v.ok && v.acknowledged > 0), "{:?}", r.verifications);
    assert_eq!(r.wrong(), 0);
}

#[test]
fn every_workload_replies_right_over_websocket() {
    let config = tiny(&["echo", "get", "query", "command", "update", "b6:many_references"]);
    let r = remote::run(&config).expect("runs");
    assert_eq!(r.points.len(), 6 * 2);
    assert_all_right(&r);
    // Both write workloads, at both client counts, were checked against the data.
    assert_eq!(r.verifications.len(), 2 * 2);
    let md = r.to_markdown();
    for heading in ["### echo (ws, msgpack)", "### b6:many_references (ws, msgpack)", "### Targets (issue #4)"] {
        assert!(md.contains(heading), "{heading} missing:\n{md}");
    }
    assert!(md.contains("| K | ops/s | min | q1 | median | q3 | p99 | max | failed | wrong |"), "{md}");
    assert!(md.contains("every acknowledged write is in the data"), "{md}");
    let zero = r.targets.iter().find(|t| t.target.starts_with("zero wrong replies")).expect("target");
    assert_eq!(zero.met, Some(true));
    // Without PostgreSQL and K = 64 the comparisons say what they need.
    assert!(r.targets.iter().any(|t| t.met.is_none() && t.measured.contains("K = 64")));
    let json = r.to_json();
    assert_eq!(json["points"].as_array().map(Vec::len), Some(12));
    assert!(json["points"][0]["latency"]["median_us"].as_f64().is_some());
}

#[test]
fn http_json_compression_and_shared_sessions_reply_right() {
    let mut config = tiny(&["echo", "get", "command"]);
    config.transports = vec![Transport::Http];
    config.encodings = vec![Encoding::Json, Encoding::Msgpack];
    config.clients = vec![2];
    let r = remote::run(&config).expect("runs over HTTP");
    assert_eq!(r.points.len(), 3 * 2);
    assert_all_right(&r);
    assert!(r.to_markdown().contains("### MessagePack against JSON"));

    // Every reply compressed (compress_min 0), four clients on two sessions.
    let mut config = tiny(&["query", "update"]);
    config.compression = Compression::Zstd;
    config.compress_min = 0;
    config.connections = Some(2);
    config.clients = vec![4];
    let r = remote::run(&config).expect("runs compressed");
    assert_all_right(&r);
    assert!(r.points.iter().all(|p| p.connections == 2 && p.compression == Compression::Zstd));
}

#[test]
fn counting_by_requests_measures_exactly_that_many() {
    let mut config = tiny(&["get", "command"]);
    config.stop = Stop::Requests(120);
    config.clients = vec![4];
    let r = remote::run(&config).expect("runs");
    assert_all_right(&r);
    for p in &r.points {
        assert_eq!(p.operations, 120, "{}", p.workload);
        // Warm-up: a tenth, at least one per client.
        assert_eq!(p.checked, 120 + 12, "{}", p.workload);
    }
    let v = &r.verifications[0];
    assert_eq!((v.acknowledged, v.increments), (132, 132));
}

#[test]
fn a_corrupted_expected_value_is_counted_as_wrong() {
    let mut config = tiny(&["get", "query", "command", "b6:search"]);
    config.corrupt_expected = true;
    config.clients = vec![2];
    let r = remote::run(&config).expect("runs");
    for p in &r.points {
        assert_eq!(p.failed, 0, "{}: {:?}", p.workload, p.examples);
        assert!(p.checked > 0 && p.wrong >= p.checked, "{}: {} wrong of {}", p.workload, p.wrong, p.checked);
        assert_eq!(p.operations, 0, "no wrong reply counts as an operation done");
        assert!(p.examples.iter().any(|e| e.starts_with("wrong: ")), "{:?}", p.examples);
    }
    // The writes committed but none was acknowledged as expected: the data check fails too.
    assert!(r.verifications.iter().all(|v| !v.ok && v.acknowledged == 0 && v.increments > 0));
    let zero = r.targets.iter().find(|t| t.target.starts_with("zero wrong replies")).expect("target");
    assert_eq!(zero.met, Some(false));
    assert!(r.to_markdown().contains("### Failed and wrong replies (examples)"));
}
