//! Layer 2: the durable substrate — an ordered key-value store with snapshot reads and one
//! writer at a time, on LMDB through `heed`.
//!
//! The interface is deliberately narrow (tables of byte keys and values; get, put, delete,
//! ordered range scans; savepoints) so that another ordered KV store could stand behind it.
//! Nothing above this crate names LMDB.

mod lock;
pub mod log;
mod store;
mod undo;

/// The new storage engine's structures (`docs/storage.md`); nothing uses them yet.
pub mod key_index;
pub mod table;
pub mod tables;

pub use lock::{DirLock, HeldBy, Holder, LockError, LOCK_FILE};
pub use store::{Durability, Prefix, ReadTxn, Reader, Savepoint, Scan, Store, StoreOptions, WriteTxn};

/// The tables of a database. Each is its own LMDB B+tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// node id → record (header, fixed layout, key)
    Nodes = 0,
    /// owner record id | property id | entry key → entry record id
    Entries = 1,
    /// target record id | source record id | property id → () — the reverse-link index
    Links = 2,
    /// string id → reference count | bytes
    Strings = 3,
    /// hash(bytes) | string id → () — finds a string's id by its content
    StringIndex = 4,
    /// name → value: counters, schema text, format version
    Meta = 5,
    /// index number | encoded value | entry record id → () — the schema's declared indexes
    Indexes = 6,
}

impl Table {
    pub const ALL: [Table; 7] =
        [Table::Nodes, Table::Entries, Table::Links, Table::Strings, Table::StringIndex, Table::Meta, Table::Indexes];

    pub fn name(self) -> &'static str {
        match self {
            Table::Nodes => "nodes",
            Table::Entries => "entries",
            Table::Links => "links",
            Table::Strings => "strings",
            Table::StringIndex => "string_index",
            Table::Meta => "meta",
            Table::Indexes => "indexes",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("the database at {path} could not be opened: {source}")]
    Open { path: String, source: heed::Error },
    #[error("{path} is not an Espalier database directory (no data.mdb); run `espalier init` first")]
    NotADatabase { path: String },
    /// The memory map is full; the caller aborts the transaction, calls [`Store::grow`] and retries.
    #[error("the database map is full ({map_size} bytes)")]
    MapFull { map_size: usize },
    #[error("key of {len} bytes in table {table} is longer than the limit of {max} bytes")]
    KeyTooLong { table: &'static str, len: usize, max: usize },
    #[error("storage error in table {table}: {source}")]
    Lmdb { table: &'static str, source: heed::Error },
    #[error("storage error: {0}")]
    Env(heed::Error),
    #[error("I/O error on {path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// Another open (another process, or this one) holds the database directory.
    #[error(transparent)]
    Locked(#[from] LockError),
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
