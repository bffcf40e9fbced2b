//! The embedded graph and analytical peers of the Train Benchmark: DuckDB (the SQL of
//! [`Query::sql`]), Kùzu and Neo4j (the Cypher of [`Query::cypher`]), each run by a driver in
//! the peers directory (`peers/` of the repository, which `scripts/peers-setup` installs):
//! `trainbenchmark.py` in `.venv` for DuckDB and Kùzu, `neo4j/run trainbenchmark` (Java, embedded Neo4j
//! Community) for Neo4j. The model goes to them as the official CSV files; their matches come
//! back to be compared with Espalier's.

use std::path::Path;
use std::time::Duration;

pub use espalier_bench::graph_peer::{check, GraphPeer, PeerError};
use serde::Deserialize;

use crate::queries::{Matches, Query};

/// One query's timings and matches on a peer.
#[derive(Debug, Clone)]
pub struct PeerQuery {
    /// The query.
    pub query: Query,
    /// Each timed run.
    pub times: Vec<Duration>,
    /// The matches, sorted.
    pub matches: Matches,
}

/// A peer's run on one model.
#[derive(Debug, Clone)]
pub struct PeerRun {
    /// The peer.
    pub peer: GraphPeer,
    /// The peer's name and version as it reports them.
    pub version: String,
    /// Loading the model from the CSV files into a new database, in ms.
    pub load_ms: f64,
    /// The queries, in the order asked.
    pub queries: Vec<PeerQuery>,
}

#[derive(Deserialize)]
struct Reply {
    version: String,
    load_ms: f64,
    queries: Vec<ReplyQuery>,
}

#[derive(Deserialize)]
struct ReplyQuery {
    name: String,
    times_us: Vec<f64>,
    matches: Matches,
}

/// Runs `queries` on `peer` (its driver in the peers directory `peers`) over the model whose
/// official CSV files are `<dir>/<prefix>-*.csv`: `warmup` untimed and `runs` timed runs each.
/// The peer's database goes in `dir`.
pub fn run(
    peer: GraphPeer,
    peers: &Path,
    dir: &Path,
    prefix: &str,
    warmup: usize,
    runs: usize,
    queries: &[Query],
) -> Result<PeerRun, PeerError> {
    let failed = |reason: String| PeerError::Failed { peer: peer.name(), reason };
    let request = serde_json::json!({
        "system": peer.name(),
        "dir": dir,
        "prefix": prefix,
        "warmup": warmup,
        "runs": runs,
        "queries": queries.iter().map(|q| serde_json::json!({
            "name": q.name(), "sql": q.sql(), "cypher": q.cypher(),
        })).collect::<Vec<_>>(),
    });
    let reply: Reply = espalier_bench::graph_peer::call(peer, peers, "trainbenchmark", &request)?;
    if reply.queries.len() != queries.len() {
        return Err(failed(format!("{} queries answered of {}", reply.queries.len(), queries.len())));
    }
    let mut answered = Vec::with_capacity(queries.len());
    for (&query, r) in queries.iter().zip(reply.queries) {
        if r.name != query.name() || r.times_us.len() != runs {
            return Err(failed(format!("{}: answered as {} with {} runs", query.name(), r.name, r.times_us.len())));
        }
        let times = r.times_us.iter().map(|&us| Duration::from_secs_f64(us.max(0.0) / 1e6)).collect();
        answered.push(PeerQuery { query, times, matches: r.matches });
    }
    Ok(PeerRun { peer, version: reply.version, load_ms: reply.load_ms, queries: answered })
}
