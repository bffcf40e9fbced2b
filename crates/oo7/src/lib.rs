//! OO7 (Carey, DeWitt, Naughton 1993; `../shared/seeds/002_…`) on Espalier, beside SQLite.
//!
//! - [`SCHEMA`]: appendix A's schema in Alan notation (`oo7.alan`).
//! - [`generate::generate`]: the tiny, small and medium configurations of table 1 at
//!   atomic-part fanout 3, 6 or 9, from a seed (the same seed gives the same database).
//! - [`load::write`]: a database into Espalier; [`sqlite::create_tables`]: into SQLite.
//! - [`ops::Op`]: the traversals (T1, T2a–c, T3a–c, T6, T8, T9, CU), queries (Q1–Q5, Q7,
//!   Q8) and structural modifications (insert, delete), each in [`espalier`] (pattern
//!   queries, update instructions, and the data API where an operation updates as it
//!   traverses) and in [`sqlite`] (SQL and prepared statements, written from the paper).
//! - [`bench`](mod@bench): both systems side by side, every answer cross-checked, hot and cold
//!   runs.

#![warn(missing_docs)]

pub mod bench;
pub mod espalier;
pub mod generate;
pub mod load;
pub mod model;
pub mod ops;
pub mod peers;
pub mod schema;
pub mod sqlite;

use std::path::Path;
use std::sync::Arc;

use espalier_instruction::Engine;
use espalier_transaction::{Database, DatabaseOptions, TxError};

pub use generate::{generate, GenerateError};
pub use model::{Oo7, Params, Size};
pub use ops::{Answer, Op};

/// The OO7 schema.
pub const SCHEMA: &str = include_str!("../oo7.alan");

/// Why a database could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The schema is not OO7's: a property, state or index the loader needs is missing.
    #[error("the OO7 schema lacks what the loader needs: {0}")]
    Schema(String),
    /// The generated database refers to an atomic part, composite part or assembly (kind,
    /// id) that it does not contain.
    #[error("the database refers to {0} {1}, which it does not contain")]
    Dangling(&'static str, u64),
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

/// Creates an OO7 database at `path` holding `db`.
pub fn create(path: &Path, db: &Oo7, options: DatabaseOptions) -> Result<Engine, LoadError> {
    let engine = Engine::create(path, SCHEMA, options)?;
    fill(engine.database(), db)?;
    Ok(engine)
}

/// Writes `db` into an empty OO7 database, as one atomic request.
pub fn fill(database: &Arc<Database>, db: &Oo7) -> Result<(), LoadError> {
    database.write(|g| load::write(g, db))?;
    Ok(())
}
