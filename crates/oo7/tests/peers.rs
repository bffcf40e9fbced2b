//! DuckDB, Kùzu and Neo4j on the tiny OO7 database: every run of every read-only operation
//! answers as SQLite's own code does (the peers come from `scripts/peers-setup`, which
//! `scripts/test` runs first), and the benchmark compares them with Espalier run by run.

use std::path::PathBuf;

use espalier_bench::graph_peer::GraphPeer;
use espalier_oo7::bench::{open_sqlite, run, Config};
use espalier_oo7::ops::Draw;
use espalier_oo7::{generate, peers, sqlite, Op, Size};

/// The peers directory: `ESPALIER_PEERS_DIR`, else the repository's `peers/`.
fn peers_dir() -> PathBuf {
    match std::env::var_os("ESPALIER_PEERS_DIR") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../peers"),
    }
}

#[test]
fn every_peer_answers_as_sqlite_run_by_run() {
    let db = generate(Size::Tiny, 3, 11).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let conn = open_sqlite(&dir.path().join("sqlite.db")).unwrap();
    sqlite::create_tables(&conn, &db).unwrap();
    let tables = dir.path().join("csv");
    std::fs::create_dir(&tables).unwrap();
    let files = peers::write_tables(&conn, &tables).unwrap();
    for peer in GraphPeer::ALL {
        let work = dir.path().join(peer.name());
        std::fs::create_dir(&work).unwrap();
        let ran =
            peers::run(peer, &peers_dir(), &db, &files, &work, &peers::OPS, 1, 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ran.ops.len(), peers::OPS.len());
        for r in &ran.ops {
            assert_eq!(r.times.len(), 2);
            assert_eq!(r.answers.len(), 3);
            for (i, got) in r.answers.iter().enumerate() {
                let want = sqlite::read(&conn, r.op, &Draw::new(&db, r.op, i as u64)).unwrap();
                assert_eq!(*got, want, "{} {} run {i}", ran.version, r.op.name());
            }
        }
        let t1 = ran.ops.iter().find(|r| r.op == Op::T1).unwrap();
        assert_eq!(t1.answers[0].count as usize, db.atomic_parts() / db.composites.len() * 3 * 27);
        println!("{}: loaded in {:.0} ms", ran.version, ran.load_ms);
    }
}

#[test]
fn the_benchmark_reports_each_peer_or_why_it_did_not_run() {
    let only = vec![Op::T1, Op::Q1, Op::Q8, Op::Q8Coded];
    let config = Config {
        only: only.clone(),
        cold: 0,
        peers: GraphPeer::ALL.to_vec(),
        peers_dir: peers_dir(),
        require_peers: true,
        ..Config::quick()
    };
    let report = run(&config).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.peers.len(), 3);
    for p in &report.peers {
        let ops: Vec<&str> = p.ops.iter().map(|o| o.op.as_str()).collect();
        assert_eq!(ops, ["T1", "Q1", "Q8"], "{} (Q8 coded is each system's own code)", p.system);
    }
    let md = report.to_markdown();
    assert!(md.contains("Beside the embedded peers") && md.contains("| Q1 |"), "{md}");

    let missing = Config { peers_dir: PathBuf::from("/nonexistent"), require_peers: false, ..config.clone() };
    let report = run(&missing).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.peers.iter().all(|p| p.unavailable.as_deref().is_some_and(|u| u.contains("is not available"))));
    assert!(report.to_markdown().contains("neo4j did not run"));
    let required = Config { require_peers: true, ..missing };
    let e = run(&required).unwrap_err().to_string();
    assert!(e.contains("duckdb is not available"), "{e}");
}
