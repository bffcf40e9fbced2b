//! Layer 3: the typed graph on top of storage.
//!
//! Key layout (all integers in keys are big-endian so that byte order is numeric order):
//!
//! | table | key | value |
//! |---|---|---|
//! | Nodes | record id | header (type, parent property, parent record) · fixed layout · entry key |
//! | Entries | owner record · property · entry key | entry record id |
//! | Links | target record · source record · property | — (the reverse-link index) |
//! | Strings | string id | reference count · bytes |
//! | StringIndex | xxh3(bytes) · string id | — |
//! | Meta | name | counters, schema text |
//! | Indexes | index number · encoded value · entry record id | — (see [`index`]) |
//!
//! A collection's entries are one contiguous key range under the record that owns it, so
//! lookup by key is one B+tree descent and iteration is a cursor walk.

pub mod change;
pub mod check;
pub mod dump;
mod error;
mod graph;
pub mod index;
mod keys;
mod record;
mod strings;
mod write;

pub use change::{Change, ChangeSet, NodePath, PathStep, QueryDiff, Touched};
pub use check::{check, CheckReport};
pub use dump::{export, import, DumpError, ImportStats};
pub use error::{DataError, UniqueViolation};
pub use graph::{EntryKey, Graph, NodeView};
pub use keys::meta;
pub use record::{NodeId, NodeRef, ROOT_ID};
pub use write::WriteGraph;

pub type Result<T, E = DataError> = std::result::Result<T, E>;
