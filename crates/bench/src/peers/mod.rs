//! Peers on the same work: the B6 and B7 benchmarks of the thesis (appendix B.6, B.7) run on
//! Espalier, on SQLite and on PostgreSQL, loaded with the same data, with every result
//! cross-checked between the systems.
//!
//! The pieces, in the order a run uses them:
//!
//! - [`dataset`] builds the B6/B7 data in Espalier from the benchmark files in `benchmarks/`
//!   (appendix B.6's model and `initialize` part), with [`crate::suite`]'s dataset builder.
//! - [`relational`] maps any schema to SQL tables and copies an Espalier snapshot into them
//!   (the mapping is described there); [`sqlite`] and [`postgres`] are the two peers, and
//!   [`pg_server`] starts and stops a real PostgreSQL server for the run.
//! - [`workload`] holds the operations: each is the Espalier instruction text with `$params`,
//!   the equivalent SQL, and a parameter generator. Query results are compared row by row;
//!   after a mutation the touched node is read back from every system and compared.
//! - [`runner`] measures each operation on each system (warm-up, then timed repetitions),
//!   reports ratios against Espalier and each system's size on disk.
//!
//! **Durability pairing** ([`DurabilityPairing`]): Espalier `none` runs beside SQLite
//! `synchronous=OFF` and PostgreSQL `fsync=off, synchronous_commit=off`; `periodic` beside
//! `synchronous=NORMAL` and `synchronous_commit=off`; `sync` beside `synchronous=FULL` and
//! PostgreSQL's defaults (`fsync=on, synchronous_commit=on`). SQLite always runs in WAL mode.

pub mod dataset;
pub mod pg_server;
pub mod postgres;
pub mod relational;
pub mod runner;
pub mod sqlite;
pub mod workload;

use std::fmt;

use espalier_instruction::InstructionError;
use serde::Serialize;

pub use runner::{run, Config, Report};

/// Why a peer run failed. A cross-check mismatch is an error: the run stops.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// An Espalier instruction failed.
    #[error("Espalier: {context}: {source}")]
    Espalier {
        /// What the run was doing.
        context: String,
        /// The instruction error.
        #[source]
        source: Box<InstructionError>,
    },
    /// Espalier's data layer failed.
    #[error("Espalier data: {context}: {source}")]
    Data {
        /// What the run was doing.
        context: String,
        /// The data error.
        #[source]
        source: Box<espalier_data::DataError>,
    },
    /// A SQLite call failed.
    #[error("SQLite: {context}: {source}")]
    Sqlite {
        /// What the run was doing.
        context: String,
        /// The SQLite error.
        #[source]
        source: Box<rusqlite::Error>,
    },
    /// A PostgreSQL call failed.
    #[error("PostgreSQL: {context}: {}", pg_message(.source))]
    Postgres {
        /// What the run was doing.
        context: String,
        /// The PostgreSQL client's error.
        #[source]
        source: ::postgres::Error,
    },
    /// Starting, using or stopping the PostgreSQL server.
    #[error("PostgreSQL server: {0}")]
    Server(String),
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What the run was doing.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The systems disagree: names the operation, the system, the parameters and the rows.
    #[error("cross-check failed: {0}")]
    Mismatch(String),
    /// Bad configuration or data the run cannot use.
    #[error("{0}")]
    Invalid(String),
}

/// The `postgres` crate prints only "db error" for server errors; the server's message is in
/// the source.
fn pg_message(e: &::postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut m = format!("{}: {}", db.severity(), db.message());
            if let Some(d) = db.detail() {
                m.push_str(&format!(" ({d})"));
            }
            m
        }
        None => e.to_string(),
    }
}

impl PeerError {
    /// A [`PeerError::Io`] with its context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> PeerError {
        PeerError::Io { context: context.into(), source }
    }

    /// A [`PeerError::Sqlite`] with its context.
    pub fn sqlite(context: impl Into<String>, source: rusqlite::Error) -> PeerError {
        PeerError::Sqlite { context: context.into(), source: Box::new(source) }
    }

    /// A [`PeerError::Postgres`] with its context.
    pub fn pg(context: impl Into<String>, source: ::postgres::Error) -> PeerError {
        PeerError::Postgres { context: context.into(), source }
    }

    /// A [`PeerError::Espalier`] with its context.
    pub fn espalier(context: impl Into<String>, source: InstructionError) -> PeerError {
        PeerError::Espalier { context: context.into(), source: Box::new(source) }
    }

    /// A [`PeerError::Data`] with its context.
    pub fn data(context: impl Into<String>, source: espalier_data::DataError) -> PeerError {
        PeerError::Data { context: context.into(), source: Box::new(source) }
    }
}

/// The benchmark sets of appendix B that run on the peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    /// B.6: the use-case model at production-like size, all five operations.
    B6,
    /// B.7: the same model with far bigger collections; many_references, search, task_start.
    B7,
}

impl Suite {
    /// The suite's name in reports: `b6` or `b7`.
    pub fn name(self) -> &'static str {
        match self {
            Suite::B6 => "b6",
            Suite::B7 => "b7",
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A system the operations run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum System {
    /// The Espalier engine, in process.
    Espalier,
    /// SQLite, in process.
    Sqlite,
    /// PostgreSQL, a server started for the run.
    Postgres,
}

impl System {
    /// Every system, in report order.
    pub const ALL: [System; 3] = [System::Espalier, System::Sqlite, System::Postgres];

    /// The system's name in reports: `espalier`, `sqlite` or `postgres`.
    pub fn name(self) -> &'static str {
        match self {
            System::Espalier => "espalier",
            System::Sqlite => "sqlite",
            System::Postgres => "postgres",
        }
    }

    /// Parses `espalier`, `sqlite` or `postgres` (also `postgresql`, `pg`).
    pub fn parse(s: &str) -> Result<System, PeerError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "espalier" => Ok(System::Espalier),
            "sqlite" => Ok(System::Sqlite),
            "postgres" | "postgresql" | "pg" => Ok(System::Postgres),
            other => {
                Err(PeerError::Invalid(format!("unknown system {other:?}: expected espalier, sqlite or postgres")))
            }
        }
    }
}

impl fmt::Display for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How each system makes commits durable; chosen together so that all promise the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityPairing {
    /// No fsync on commit anywhere.
    None,
    /// Background flushing: Espalier every 100 ms, SQLite at checkpoints, PostgreSQL's WAL writer.
    Periodic,
    /// fsync before every commit returns.
    Sync,
}

impl DurabilityPairing {
    /// Espalier's durability setting.
    pub fn espalier(self) -> espalier_transaction::Durability {
        match self {
            DurabilityPairing::None => espalier_transaction::Durability::None,
            DurabilityPairing::Periodic => {
                espalier_transaction::Durability::Periodic(std::time::Duration::from_millis(100))
            }
            DurabilityPairing::Sync => espalier_transaction::Durability::Sync,
        }
    }

    /// SQLite's `synchronous` setting (WAL mode).
    pub fn sqlite(self) -> &'static str {
        match self {
            DurabilityPairing::None => "OFF",
            DurabilityPairing::Periodic => "NORMAL",
            DurabilityPairing::Sync => "FULL",
        }
    }

    /// PostgreSQL settings, as `postgresql.conf` lines.
    pub fn postgres(self) -> &'static [&'static str] {
        match self {
            DurabilityPairing::None => &["fsync = off", "synchronous_commit = off", "full_page_writes = off"],
            DurabilityPairing::Periodic => &["fsync = on", "synchronous_commit = off", "wal_writer_delay = 100ms"],
            DurabilityPairing::Sync => &["fsync = on", "synchronous_commit = on"],
        }
    }

    /// The pairing's name in reports: `none`, `periodic` or `sync`.
    pub fn name(self) -> &'static str {
        match self {
            DurabilityPairing::None => "none",
            DurabilityPairing::Periodic => "periodic",
            DurabilityPairing::Sync => "sync",
        }
    }
}
