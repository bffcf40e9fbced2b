//! Layer 3: the typed graph on top of storage.
//!
//! Layout (`keys` and `record`, `docs/storage.md`): a table per node type, whose rows are the
//! records of its nodes (a node id is `type << 32 | row`); a key index per collection
//! (owner row, key) → entry row, where a matrix's key is its target's row (4 bytes); a key
//! index per reference or matrix (target row, source row as 4 bytes) → the source's row for a
//! reference, the entry's owner's row for a matrix, for going backwards; a key index per
//! schema index; the string table (`keys`, `docs/storage.md`).

#![warn(missing_docs)]

pub mod change;
pub mod check;
pub mod dump;
mod error;
mod graph;
pub mod index;
pub mod keys;
pub mod record;
mod write;

pub use change::{Change, ChangeSet, NodePath, PathStep, QueryDiff, Touched};
pub use check::{check, CheckReport};
pub use dump::{export, import, DumpError, ImportStats};
pub use error::{DataError, UniqueViolation};
pub use graph::{lossy_text, EntryKey, Graph, NodeView};
pub use keys::{meta, shape};
pub use record::{NodeId, NodeRef, ROOT_ID};
pub use write::GraphSavepoint;
pub use write::{MemberError, WriteGraph, MAX_DEFERRED};

/// The result of the data layer's operations (the error is a [`DataError`] unless another is
/// given).
pub type Result<T, E = DataError> = std::result::Result<T, E>;
