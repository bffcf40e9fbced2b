//! `espalier bench mix` at CI size against every system this machine has (Espalier, SQLite,
//! and PostgreSQL when its server programs are installed): every point did work, no reply was
//! wrong, no batch failed, and every table changed by exactly what was acknowledged.

use espalier_bench::mix::{self, Config, SystemKind};
use espalier_bench::peers::{pg_server, DurabilityPairing};

#[test]
fn the_mix_runs_right_on_every_system_at_ci_size() {
    let mut systems = vec![SystemKind::Espalier, SystemKind::Sqlite];
    if pg_server::find_bin().is_ok() {
        systems.push(SystemKind::Postgres);
    } else {
        eprintln!("PostgreSQL is not installed: the mix runs without it ({})", pg_server::INSTALL_HINT);
    }
    let config = Config {
        size: 300,
        clients: vec![1, 3],
        systems: systems.clone(),
        seconds: 0.3,
        warmup_seconds: 0.05,
        max_scan: 40,
        durability: DurabilityPairing::None,
        ..Config::quick()
    };
    let report = mix::run(&config, &|_| {}).expect("the mix runs");
    assert_eq!(report.problems(), 0, "{:#?}", report.problem_lines());
    assert_eq!(report.points.len(), systems.len() * 2 * 2);
    for p in &report.points {
        assert!(p.batches > 0, "{:?} K={} transactions={} did nothing", p.system, p.clients, p.transactions);
        let l = p.latency.as_ref().expect("latencies");
        assert!(l.min_us <= l.median_us && l.median_us <= l.max_us);
    }
    assert_eq!(report.costs.len(), systems.len() * 2);
    let md = report.to_markdown();
    assert!(md.contains("What transactions cost") && md.contains("| espalier | 3 | transactions |"), "{md}");
    assert!(report.chart_svg().starts_with("<svg"));
    assert!(report.to_json()["points"].as_array().is_some_and(|p| p.len() == report.points.len()));
}

/// The mix's scans in process: Espalier, SQLite and DuckDB (from `scripts/peers-setup`, which
/// `scripts/test` runs first) return the same keys for every scan; without DuckDB installed
/// the report says so, or the run fails when DuckDB is required.
#[test]
fn the_scans_agree_beside_duckdb() {
    let peers_dir = match std::env::var_os("ESPALIER_PEERS_DIR") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../peers"),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config { size: 400, max_scan: 60, scans: 40, peers_dir, require_peers: true, ..Config::quick() };
    let report = mix::scans::run(&config, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = report.systems.iter().map(|s| s.system.as_str()).collect();
    assert_eq!(names, ["espalier", "sqlite", "duckdb"]);
    assert!(report.systems.iter().all(|s| s.timings.as_ref().is_some_and(|t| t.count == 40)), "{report:?}");
    assert!(report.rows > 40, "scans of 1 to 60 records return more than one each on average");
    assert!(report.to_markdown().contains("DuckDB"));

    let missing = Config { peers_dir: "/nonexistent".into(), require_peers: false, ..config.clone() };
    let dir = tempfile::tempdir().expect("tempdir");
    let report = mix::scans::run(&missing, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.systems[2].unavailable.as_deref().is_some_and(|u| u.contains("duckdb is not available")));
    let dir = tempfile::tempdir().expect("tempdir");
    let e = mix::scans::run(&Config { require_peers: true, ..missing }, dir.path()).unwrap_err().to_string();
    assert!(e.contains("duckdb is not available"), "{e}");
}
