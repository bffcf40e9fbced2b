//! The core benchmark end to end at toy size: both systems agree and every operation has samples.

use espalier_bench::core::{run, Config, ESPALIER, OPS, SQLITE};

#[test]
fn tiny_run_cross_checks_and_measures_every_op() {
    let config = Config {
        items: 300,
        groups: 20,
        regions: 5,
        orders: 6,
        lines_per_order: 100,
        ops: 40,
        warmup: 5,
        cross_check_samples: 50,
        build_batch: 128,
        progress: false,
        memory_probe_bytes: 1 << 20,
        memory_loads: 10_000,
        fsyncs: 2,
        ..Config::quick()
    };
    let report = run(&config).expect("the run succeeds and both systems agree");
    assert!(report.cross_checked > 0);
    for op in OPS {
        for system in [ESPALIER, SQLITE] {
            let r = report.result(op, system).unwrap_or_else(|| panic!("no result for {op} on {system}"));
            let s = &r.summary;
            assert_eq!(s.count, 40, "{op} {system}");
            assert!(s.min_us > 0.0 && s.min_us <= s.q1_us && s.q1_us <= s.median_us, "{op} {system}: {s:?}");
            assert!(s.median_us <= s.q3_us && s.q3_us <= s.p99_us && s.p99_us <= s.max_us, "{op} {system}: {s:?}");
        }
        assert!(report.ratio(op).is_some_and(|r| r.is_finite() && r > 0.0), "{op}");
    }
    assert_eq!(report.targets.len(), 4);
    let json = report.to_json();
    let results = json["results"].as_array().expect("results array");
    assert_eq!(results.len(), OPS.len() * 2);
    for key in ["name", "system", "count", "min_us", "q1_us", "median_us", "q3_us", "max_us", "p99_us", "mean_us"] {
        assert!(results[0].get(key).is_some(), "JSON record lacks {key}");
    }
    let md = report.to_markdown();
    assert!(md.contains("| key_lookup | espalier |") && (md.contains("PASS") || md.contains("MISS")));
}
