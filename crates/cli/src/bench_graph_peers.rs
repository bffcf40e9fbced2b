//! The options every suite with embedded peers shares: which peers, where their drivers are,
//! and whether a missing one fails the run (see `espalier_bench::graph_peer`).

use std::path::PathBuf;

use espalier_bench::graph_peer::GraphPeer;

/// `--peers`, `--peers-dir` and `--require-peers`.
#[derive(Debug, Clone, clap::Args)]
pub struct GraphPeerOptions {
    /// Embedded peers to run beside SQLite, comma-separated: duckdb, kuzu, neo4j. Each loads
    /// the same data from CSV files and must give Espalier's answers.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub peers: Vec<String>,
    /// The peers directory: the repository's peers/, where scripts/peers-setup installs their
    /// drivers (.venv for DuckDB and Kùzu, neo4j/run for Neo4j).
    #[arg(long, value_name = "DIR", env = "ESPALIER_PEERS_DIR", default_value = "peers")]
    pub peers_dir: PathBuf,
    /// Fail when a peer asked for is not installed (otherwise the report says it did not run).
    #[arg(long)]
    pub require_peers: bool,
}

impl GraphPeerOptions {
    /// The peers asked for, or which name is unknown.
    pub fn peers(&self) -> Result<Vec<GraphPeer>, String> {
        GraphPeer::parse_list(&self.peers)
    }
}
