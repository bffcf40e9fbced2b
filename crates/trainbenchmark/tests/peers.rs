//! DuckDB, Kùzu and Neo4j on a generated repair model: each finds exactly SQLite's matches for
//! every query (the peers come from `scripts/peers-setup`, which `scripts/test` runs first).

use std::path::PathBuf;

use espalier_trainbenchmark::peers::{self, GraphPeer};
use espalier_trainbenchmark::queries::{sql_matches, sqlite_of};
use espalier_trainbenchmark::{csv, generate, Query, Scenario};

/// The peers directory: `ESPALIER_PEERS_DIR`, else the repository's `peers/`.
fn peers_dir() -> PathBuf {
    match std::env::var_os("ESPALIER_PEERS_DIR") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../peers"),
    }
}

#[test]
fn every_peer_finds_sqlites_matches() {
    let peers = peers_dir();
    let tables = generate(Scenario::Repair, 2).tables();
    let conn = sqlite_of(&tables).unwrap();
    for peer in GraphPeer::ALL {
        let dir = tempfile::tempdir().unwrap();
        csv::write(dir.path(), "railway-repair-2", &tables).unwrap();
        let run = peers::run(peer, &peers, dir.path(), "railway-repair-2", 0, 2, &Query::ALL)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(run.load_ms > 0.0);
        let mut found = 0;
        for q in &run.queries {
            assert_eq!(q.times.len(), 2);
            let sql = sql_matches(&conn, q.query).unwrap();
            assert_eq!(q.matches, sql, "{} {}", peer.name(), q.query.name());
            found += sql.len();
        }
        assert!(found > 0, "the repair model has matches");
        println!("{}: {found} matches, loaded in {:.0} ms", run.version, run.load_ms);
    }
    for peer in GraphPeer::ALL {
        let e = peers::check(peer, &PathBuf::from("/nonexistent")).unwrap_err().to_string();
        assert!(e.contains(&format!("{} is not available", peer.name())), "{e}");
    }
}
