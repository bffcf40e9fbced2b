//! DuckDB and Kùzu on the official repair model: each finds exactly SQLite's matches for every
//! query (the peers come from `scripts/peers-setup`, which `scripts/test` runs first).

use std::path::PathBuf;

use espalier_trainbenchmark::peers::{self, GraphPeer};
use espalier_trainbenchmark::queries::{sql_matches, sqlite_of};
use espalier_trainbenchmark::{csv, generate, Query, Scenario};

/// The Python with the peers: `ESPALIER_PEERS_PYTHON`, else the venv of `scripts/peers-setup`.
fn python() -> PathBuf {
    match std::env::var_os("ESPALIER_PEERS_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../peers/.venv/bin/python"),
    }
}

#[test]
fn duckdb_and_kuzu_find_sqlites_matches() {
    let python = python();
    assert!(python.exists(), "{} is missing: run scripts/peers-setup", python.display());
    let tables = generate(Scenario::Repair, 2).tables();
    let conn = sqlite_of(&tables).unwrap();
    for peer in GraphPeer::ALL {
        let dir = tempfile::tempdir().unwrap();
        csv::write(dir.path(), "railway-repair-2", &tables).unwrap();
        let run = peers::run(peer, &python, dir.path(), "railway-repair-2", 0, 2, &Query::ALL)
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
    let e = peers::check(GraphPeer::Kuzu, &PathBuf::from("/nonexistent/python")).unwrap_err().to_string();
    assert!(e.contains("kuzu is not available"), "{e}");
}
