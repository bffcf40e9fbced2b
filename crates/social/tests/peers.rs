//! Kùzu and Neo4j on the tiny network: every invocation of the eight graph queries answers
//! SQLite's rows, in SQLite's order (the peers come from `scripts/peers-setup`, which
//! `scripts/test` runs first); a missing peer is reported, or fails the run when required.
//! Neo4j over Bolt: K = 1, 2 clients on the remote run's pools, every reply right, and a wrong
//! one counted.

use std::path::{Path, PathBuf};

use espalier_bench::graph_peer::{self, GraphPeer};
use espalier_bench::remote::{Config as RemoteConfig, Stop};
use espalier_social::bench::{build, run, Config};
use espalier_social::peers::QUERIES;
use espalier_social::remote::{database, Pool};
use espalier_social::{bolt, Query, Size};

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

#[test]
fn neo4j_over_bolt_answers_every_reply_with_sqlites_rows() {
    let peers = peers_dir();
    // Unlike the test above, this one is skipped without the peer (and says so).
    if let Err(e) = graph_peer::check(GraphPeer::Neo4j, &peers) {
        eprintln!("skipped: Neo4j over Bolt: {e}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let built = build(Size::Tiny, espalier_social::SEED, &dir.path().join("data")).expect("the tiny network");
    let (_, mut pools) = database(built.espalier, &built.net, &built.sqlite, &QUERIES, 16, espalier_social::SEED)
        .expect("the pools, checked against SQLite");
    // Every reply is compared: a last query, friends again, whose every answer has a row more.
    let mut altered: Pool = pools.iter().find(|p| p.query == Query::Friends).expect("friends").clone();
    altered.answers.iter_mut().for_each(|a| a.rows.push(vec![serde_json::Value::Null]));
    pools.push(altered);
    let mut config = RemoteConfig::quick();
    config.clients = vec![1, 2];
    config.stop = Stop::Seconds(0.3);
    config.warmup_seconds = 0.1;
    config.progress = false;

    let run = bolt::run(&peers, &built.sqlite, &dir.path().join("bolt"), &pools, &config, 0.0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(run.version.starts_with("Neo4j 5.26"), "{}", run.version);
    assert!(run.address.starts_with("127.0.0.1:"), "{}", run.address);
    let measured: Vec<(&str, usize)> = run.points.iter().map(|p| (p.query.as_str(), p.clients)).collect();
    let names = QUERIES.iter().map(|q| q.name()).chain(["friends"]);
    let want: Vec<(&str, usize)> = names.flat_map(|q| [(q, 1), (q, 2)]).collect();
    assert_eq!(measured, want);
    let (right, wrong) = run.points.split_at(2 * QUERIES.len());
    for p in right {
        assert_eq!((p.wrong, p.failed), (0, 0), "{p:?}");
        assert!(p.operations > 0 && p.ops_per_sec > 0.0 && p.latency.is_some(), "{p:?}");
    }
    for p in wrong {
        assert!(p.checked > 0 && p.wrong == p.checked && p.operations == 0, "{p:?}");
        assert!(p.examples.iter().all(|e| e.starts_with("wrong")), "{:?}", p.examples);
    }

    // Not installed: said, and skipped unless required.
    let e = bolt::run(Path::new("/nonexistent"), &built.sqlite, &dir.path().join("none"), &pools, &config, 0.0)
        .unwrap_err();
    assert!(e.to_string().contains("neo4j-bolt is not available"), "{e}");
    assert!(e.skipped(false).is_ok_and(|why| why.contains("scripts/peers-setup")));
}
