//! Kùzu and Neo4j on the tiny network: every invocation of the eight graph queries answers
//! SQLite's rows, in SQLite's order (the peers come from `scripts/peers-setup`, which
//! `scripts/test` runs first); a missing peer is reported, or fails the run when required.

use std::path::PathBuf;

use espalier_bench::graph_peer::GraphPeer;
use espalier_social::bench::{run, Config};
use espalier_social::peers::QUERIES;

/// The peers directory: `ESPALIER_PEERS_DIR`, else the repository's `peers/`.
fn peers_dir() -> PathBuf {
    match std::env::var_os("ESPALIER_PEERS_DIR") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../peers"),
    }
}

#[test]
fn the_graph_peers_answer_the_graph_queries_as_sqlite() {
    let config = Config {
        peers: vec![GraphPeer::Kuzu, GraphPeer::Neo4j],
        peers_dir: peers_dir(),
        require_peers: true,
        ..Config::quick()
    };
    let report = run(&config).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.peers.len(), 2);
    for p in &report.peers {
        let names: Vec<&str> = p.queries.iter().map(|q| q.query.as_str()).collect();
        let want: Vec<&str> = QUERIES.iter().map(|q| q.name()).collect();
        assert_eq!(names, want, "{}", p.system);
        assert!(p.queries.iter().all(|q| q.invocations > 0 && q.ratio.is_finite()), "{p:?}");
    }
    assert!(report.to_markdown().contains("| fof-3 |"));

    let missing = Config { peers_dir: PathBuf::from("/nonexistent"), require_peers: false, ..config.clone() };
    let report = run(&missing).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.peers.iter().all(|p| p.unavailable.as_deref().is_some_and(|u| u.contains("is not available"))));
    let e = run(&Config { require_peers: true, ..missing }).unwrap_err().to_string();
    assert!(e.contains("kuzu is not available"), "{e}");
}
