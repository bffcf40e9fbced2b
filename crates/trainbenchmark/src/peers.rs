//! The embedded graph and analytical peers of the Train Benchmark: DuckDB (the SQL of
//! [`Query::sql`]), Kùzu and Neo4j (the Cypher of [`Query::cypher`]), each run by a driver in
//! the peers directory (`peers/` of the repository, which `scripts/peers-setup` installs):
//! `trainbenchmark.py` in `.venv` for DuckDB and Kùzu, `neo4j/run` (Java, embedded Neo4j
//! Community) for Neo4j. The model goes to them as the official CSV files; their matches come
//! back to be compared with Espalier's.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Deserialize;

use crate::queries::{Matches, Query};

/// Most bytes a peer's reply may have (its matches included).
const MAX_REPLY_BYTES: usize = 1 << 30;

/// A peer system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphPeer {
    /// DuckDB, embedded, on the SQL tables.
    DuckDb,
    /// Kùzu, embedded, on a property graph.
    Kuzu,
    /// Neo4j Community, embedded in a JVM, on the same property graph.
    Neo4j,
}

impl GraphPeer {
    /// Every peer.
    pub const ALL: [GraphPeer; 3] = [GraphPeer::DuckDb, GraphPeer::Kuzu, GraphPeer::Neo4j];

    /// `duckdb`, `kuzu` or `neo4j`: the name in options, reports and the driver's request.
    pub fn name(self) -> &'static str {
        match self {
            GraphPeer::DuckDb => "duckdb",
            GraphPeer::Kuzu => "kuzu",
            GraphPeer::Neo4j => "neo4j",
        }
    }

    /// The driver's command in the peers directory `dir`.
    fn command(self, dir: &Path) -> Command {
        match self {
            GraphPeer::DuckDb | GraphPeer::Kuzu => {
                let mut c = Command::new(python(dir));
                c.arg(dir.join("trainbenchmark.py"));
                c
            }
            GraphPeer::Neo4j => Command::new(dir.join("neo4j/run")),
        }
    }

    /// The peer called `s`, if any.
    pub fn parse(s: &str) -> Option<GraphPeer> {
        GraphPeer::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// Why a peer did not run.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The peer is not installed where the run looked: the run goes on without it.
    #[error("{peer} is not available: {reason}")]
    Unavailable {
        /// The peer's name.
        peer: &'static str,
        /// What was missing.
        reason: String,
    },
    /// The peer was there and failed.
    #[error("{peer}: {reason}")]
    Failed {
        /// The peer's name.
        peer: &'static str,
        /// What went wrong, as the driver said it.
        reason: String,
    },
}

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

/// The Python of the peers directory `dir` (its venv, which `scripts/peers-setup` makes).
fn python(dir: &Path) -> std::path::PathBuf {
    dir.join(".venv/bin/python")
}

/// Whether the peer's driver is installed in the peers directory `dir`; the reason if not.
pub fn check(peer: GraphPeer, dir: &Path) -> Result<(), PeerError> {
    let unavailable = |reason: String| PeerError::Unavailable { peer: peer.name(), reason };
    let mut probe = match peer {
        GraphPeer::DuckDb | GraphPeer::Kuzu => {
            let mut c = Command::new(python(dir));
            c.args(["-c", &format!("import {}", peer.name())]);
            c
        }
        GraphPeer::Neo4j => {
            let mut c = Command::new(dir.join("neo4j/run"));
            c.arg("--version");
            c
        }
    };
    let out = probe.stdin(Stdio::null()).output();
    match out {
        Ok(out) if out.status.success() => Ok(()),
        Ok(_) | Err(_) => Err(unavailable(format!(
            "its driver in {} does not start (scripts/peers-setup installs it; point --peers-dir or \
             ESPALIER_PEERS_DIR at the repository's peers/)",
            dir.display()
        ))),
    }
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
    check(peer, peers)?;
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
    let mut child = peer
        .command(peers)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(format!("starting its driver: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(request.to_string().as_bytes()).map_err(|e| failed(format!("sending the request: {e}")))?;
    }
    let out = child.wait_with_output().map_err(|e| failed(format!("waiting for the driver: {e}")))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(failed(said.lines().last().unwrap_or("the driver failed without a message").to_string()));
    }
    if out.stdout.len() > MAX_REPLY_BYTES {
        return Err(failed(format!("a reply of {} bytes, more than {MAX_REPLY_BYTES}", out.stdout.len())));
    }
    let reply: Reply =
        serde_json::from_slice(&out.stdout).map_err(|e| failed(format!("the driver's reply is not readable: {e}")))?;
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
