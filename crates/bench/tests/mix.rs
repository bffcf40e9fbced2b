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
