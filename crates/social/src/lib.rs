//! The social-network benchmark of Holzschuher & Peinl (EDBT/ICDT workshops 2014;
//! `../shared/seeds/001_…`) on Espalier, beside SQLite.
//!
//! - [`SCHEMA`]: the network in Alan notation (`social.alan`), with the paper's three
//!   stored procedures as declared commands.
//! - [`generate::generate`]: the paper's counts and friend-degree distribution from a seed
//!   (the same seed gives the same network).
//! - [`load::write`] puts a network into Espalier, [`sqlite::load`] into SQLite.
//! - [`queries::Query`]: the appendix table's eighteen queries as pattern queries (the
//!   "10 people" rows as a transaction of ten), with each invocation's parameters.
//! - [`espalier`](mod@espalier) runs them in process; [`sqlite`] runs them as SQL, the
//!   independent answer every Espalier answer is checked against.
//! - [`bench`](mod@bench): both side by side, every answer cross-checked; [`remote`]: the
//!   same queries (and the three commands) over the server with K clients.
//! - [`peers`]: the graph queries on Kùzu and Neo4j embedded; [`bolt`]: on Neo4j over Bolt
//!   with K clients, beside the server.

#![warn(missing_docs)]

pub mod bench;
pub mod bolt;
pub mod espalier;
pub mod generate;
pub mod load;
pub mod model;
pub mod peers;
pub mod queries;
pub mod remote;
pub mod sqlite;

use std::path::Path;

use espalier_instruction::Engine;
use espalier_transaction::{DatabaseOptions, TxError};
use serde::Serialize;
use serde_json::Value;

pub use generate::{generate, GenerateError};
pub use model::{Network, Params, Size};
pub use queries::Query;

/// The social network's schema.
pub const SCHEMA: &str = include_str!("../social.alan");

/// The seed the benchmark generates with unless told otherwise.
pub const SEED: u64 = 2014;

/// Why a network could not be loaded into Espalier.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The schema lacks a property the loader needs.
    #[error("the social schema lacks what the loader needs: {0}")]
    Schema(String),
    /// The network refers to something (kind, index) it does not contain.
    #[error("the network refers to {0} {1}, which it does not contain")]
    Dangling(&'static str, usize),
    /// Writing the data failed.
    #[error("{0}")]
    Data(#[from] espalier_data::DataError),
    /// The write transaction failed.
    #[error("{0}")]
    Transaction(#[from] TxError),
    /// Creating the database (its engine) failed.
    #[error("{0}")]
    Instruction(#[from] espalier_instruction::InstructionError),
}

/// Creates a social database at `path` holding `net`, written as one atomic request.
pub fn create(path: &Path, net: &Network, options: DatabaseOptions) -> Result<Engine, LoadError> {
    let engine = Engine::create(path, SCHEMA, options)?;
    engine.database().write(|g| load::write(g, net))?;
    Ok(engine)
}

/// One invocation's answer in a form both systems give: the result rows (a batch's members'
/// rows one after the other) and the total before any limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Answer {
    /// Rows before `limit` (summed over a batch's members).
    pub total: u64,
    /// The rows' values, in order.
    pub rows: Vec<Vec<Value>>,
}
