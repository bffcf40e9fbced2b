//! The embedded graph and analytical peers (DuckDB, Kùzu, Neo4j), each run by a driver
//! program in the peers directory (`peers/` of the repository, which `scripts/peers-setup`
//! installs): `<suite>.py` in `.venv` for DuckDB and Kùzu, `neo4j/run <suite>` (Java, embedded
//! Neo4j Community) for Neo4j. A suite (`trainbenchmark`; `graph` for OO7 and the social network) sends its driver one JSON
//! request on standard input and reads one JSON reply from standard output; what they hold is
//! the suite's (its driver's docstring documents it). This module starts the driver, checks
//! that it is installed, and reads the reply.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::de::DeserializeOwned;

/// Most bytes a peer's reply may have.
const MAX_REPLY_BYTES: usize = 1 << 30;

/// A peer system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphPeer {
    /// DuckDB, embedded, on SQL tables.
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

    /// The peer called `s`, if any.
    pub fn parse(s: &str) -> Option<GraphPeer> {
        GraphPeer::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }

    /// Parses a `--peers` list (empty items skipped), naming an unknown peer.
    pub fn parse_list(list: &[String]) -> Result<Vec<GraphPeer>, String> {
        list.iter()
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                GraphPeer::parse(p)
                    .ok_or_else(|| format!("--peers: unknown peer {p:?}; expected duckdb, kuzu or neo4j"))
            })
            .collect()
    }

    /// The driver of `suite` in the peers directory `dir`.
    fn command(self, dir: &Path, suite: &str) -> Command {
        match self {
            GraphPeer::DuckDb | GraphPeer::Kuzu => {
                let mut c = Command::new(python(dir));
                c.arg(dir.join(format!("{suite}.py")));
                c
            }
            GraphPeer::Neo4j => {
                let mut c = Command::new(dir.join("neo4j/run"));
                c.arg(suite);
                c
            }
        }
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

impl PeerError {
    /// Why the peer did not run, when the run may go on without it: it is not installed and
    /// not `required`. Any other error is the run's (returned as it is).
    pub fn skipped(self, required: bool) -> Result<String, PeerError> {
        match self {
            PeerError::Unavailable { .. } if !required => Ok(self.to_string()),
            e => Err(e),
        }
    }
}

/// The Python of the peers directory `dir` (its venv, which `scripts/peers-setup` makes).
pub fn python(dir: &Path) -> PathBuf {
    dir.join(".venv/bin/python")
}

/// Whether the peer's driver is installed in the peers directory `dir`; the reason if not.
pub fn check(peer: GraphPeer, dir: &Path) -> Result<(), PeerError> {
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
    match probe.stdin(Stdio::null()).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(_) | Err(_) => Err(PeerError::Unavailable {
            peer: peer.name(),
            reason: format!(
                "its driver in {} does not start (scripts/peers-setup installs it; point --peers-dir or \
                 ESPALIER_PEERS_DIR at the repository's peers/)",
                dir.display()
            ),
        }),
    }
}

/// Runs `peer`'s driver of `suite` (in the peers directory `dir`) on `request` and reads its
/// reply. The driver's last line on standard error is the reason when it fails.
pub fn call<R: DeserializeOwned>(
    peer: GraphPeer,
    dir: &Path,
    suite: &str,
    request: &serde_json::Value,
) -> Result<R, PeerError> {
    check(peer, dir)?;
    let failed = |reason: String| PeerError::Failed { peer: peer.name(), reason };
    let mut child = peer
        .command(dir, suite)
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
    serde_json::from_slice(&out.stdout).map_err(|e| failed(format!("the driver's reply is not readable: {e}")))
}

/// Writes one CSV record (RFC 4180: a field with a comma, quote or line break is quoted, its
/// quotes doubled), the form the drivers read their tables in.
pub fn write_csv_record<'a>(
    out: &mut impl std::io::Write,
    fields: impl IntoIterator<Item = &'a str>,
) -> std::io::Result<()> {
    for (i, f) in fields.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        if f.contains([',', '"', '\n', '\r']) {
            write!(out, "\"{}\"", f.replace('"', "\"\""))?;
        } else {
            out.write_all(f.as_bytes())?;
        }
    }
    out.write_all(b"\n")
}
