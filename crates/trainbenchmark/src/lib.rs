//! The Train Benchmark (Szárnyas et al., SoSyM 2018) on Espalier.
//!
//! - [`SCHEMA`]: the railway metamodel in Alan notation (`railway.alan`).
//! - [`xmi::read`] and [`csv::read`]: the official model files (`../shared/data/trainbenchmark`);
//!   [`containment::model`] rebuilds the tree the CSV form leaves out.
//! - [`generate::generate`]: models of any size by the official generator's rules (size 1
//!   reproduces the official models exactly).
//! - [`load::write`]: a model into an Espalier database.
//! - [`queries::Query`]: the six queries as pattern queries, and as SQL over the relational
//!   form in SQLite — the independent route every answer is checked against — and in Cypher;
//!   [`peers`] runs them on DuckDB and Kùzu.

#![warn(missing_docs)]

pub mod bench;
pub mod containment;
pub mod csv;
pub mod generate;
pub mod java_random;
pub mod load;
pub mod model;
pub mod peers;
pub mod queries;
pub mod repair;
pub mod xmi;

use std::path::Path;
use std::sync::Arc;

use espalier_instruction::Engine;
use espalier_transaction::{Database, DatabaseOptions, TxError};

pub use generate::{generate, Scenario};
pub use model::{Model, Tables};
pub use queries::{Matches, Query};

/// The railway schema.
pub const SCHEMA: &str = include_str!("../railway.alan");

/// A model file that cannot be read: the file, the line (0 when not known) and why.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", if *line == 0 { String::new() } else { format!(":{line}") })]
pub struct ImportError {
    /// The file.
    pub file: String,
    /// The line, from 1 (0 when not known).
    pub line: usize,
    /// Why it cannot be read.
    pub message: String,
}

impl ImportError {
    pub(crate) fn at(file: &str, line: usize, message: String) -> ImportError {
        ImportError { file: file.to_string(), line, message }
    }
}

/// Why a model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The schema is not the railway schema: a property or state the loader needs is missing.
    #[error("the railway schema lacks what the loader needs: {0}")]
    Schema(String),
    /// The model links to an element id that it does not contain.
    #[error("the model refers to element {0}, which it does not contain")]
    Dangling(u64),
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

/// Reads an official model from its XMI file.
pub fn read_xmi(path: &Path) -> Result<Model, ImportError> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ImportError::at(&source, 0, format!("cannot read: {e}")))?;
    xmi::read(&text, &source)
}

/// Reads an official model from its CSV files, `<dir>/<prefix>-Region.csv` and the others, and
/// rebuilds its containment (see [`containment`]).
pub fn read_csv_model(dir: &Path, prefix: &str) -> Result<Model, ImportError> {
    containment::model(&csv::read(dir, prefix)?, prefix)
}

/// Creates a railway database at `path` holding `model`.
pub fn create(path: &Path, model: &Model, options: DatabaseOptions) -> Result<Engine, LoadError> {
    let engine = Engine::create(path, SCHEMA, options)?;
    fill(engine.database(), model)?;
    Ok(engine)
}

/// Writes `model` into an empty railway database, as one atomic request.
pub fn fill(db: &Arc<Database>, model: &Model) -> Result<(), LoadError> {
    db.write(|g| load::write(g, model))?;
    Ok(())
}
