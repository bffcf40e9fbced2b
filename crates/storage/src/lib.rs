//! Layer 2: storage by node type (`docs/storage.md`). The layer above gives a shape (a table
//! of fixed-width rows per node type, a number of key indexes) and changes it through the one
//! [`tables::Writer`]; readers take immutable [`tables::Snapshot`]s and never wait for it.
//!
//! - [`table`]: a table's rows in pages behind a copy-on-write radix directory, row reuse
//!   after the snapshots that saw a row; the `table::arena` module's huge pages hold them.
//! - [`key_index`]: the copy-on-write B+tree of (owner row, key) → row.
//! - [`tables`]: the database on them: the string table, meta values, savepoints, the redo
//!   operations of a commit, snapshots, the manifest, checkpoints (mapped read-only), recovery.
//! - [`log`]: the redo log: checksummed records, one write and one `fdatasync` per batch,
//!   recovery that cuts a torn tail and refuses damage.
//! - [`mapping`]: checkpoint files mapped read-only and the bytes mapped; [`heap_bytes`]: what
//!   memory the layer holds.
//! - [`DirLock`]: one process owns a database directory.

#![warn(missing_docs)]

use std::time::Duration;

mod arena;
pub mod key_index;
mod lock;
pub mod log;
pub mod mapping;
pub mod table;
pub mod tables;

pub use lock::{DirLock, HeldBy, Holder, LockError, LOCK_FILE};

/// Memory the storage layer holds on its heap: table pages, directory nodes and key index
/// node buffers (the huge-page arena's blocks in use, the string table's counts among them),
/// and the texts stored since the last checkpoint. Not counted: the writer's hash table of
/// the strings (about 10 bytes a string) and meta values.
/// (Here, at the root, because it sums what two modules hold.)
pub fn heap_bytes() -> usize {
    crate::arena::in_use() + crate::tables::text_heap_bytes()
}

/// What a commit promises once it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync on every commit: a returned commit survives power loss.
    Sync,
    /// fsync in the background every interval: a process crash loses nothing, power loss
    /// loses at most the last interval.
    Periodic(Duration),
    /// never fsync (the OS writes back when it likes): a process crash loses nothing, power
    /// loss can lose everything since the OS last wrote back.
    None,
}
