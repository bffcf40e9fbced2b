//! Layer 4: transactions — atomic requests, group commit, versions and change sets.
//!
//! A request is a closure over a [`WriteGraph`]. Requests from many threads queue up; one of
//! the waiting threads leads: it runs a batch of them in the one writer, each
//! under its own savepoint (a failing request is rolled back alone and keeps its error),
//! commits once (one fsync for the whole batch), then wakes everyone with their own result.
//! A lone writer leads its own one-request batch, so there is no thread hand-off.
//!
//! Detached requests ([`Database::write_detached`], the server's path) wait for nothing:
//! their result goes to a callback on the thread that ran their batch. A batch whose next
//! request is detached is led by the database's writer thread (started on the first detached
//! request), or, when nothing is running and commits need no fsync, by the submitting thread.

#![warn(missing_docs)]
mod database;
mod feed;
mod group_commit;

pub use database::{CommitFigures, CommitHook, Committed, Database, DatabaseOptions, Snapshot};
pub use espalier_data::{Change, ChangeSet, DataError, Graph, NodePath, NodeRef, WriteGraph};
pub use espalier_storage::Durability;
pub use feed::{FeedItem, Subscription};

/// Failures of the transaction machinery itself (not of a request's own logic).
#[derive(Debug, Clone, thiserror::Error)]
pub enum TxError {
    /// Writing failed: a batch could not run or commit (nothing of it is applied), a checkpoint
    /// or sync failed, or a data error was converted to this type.
    #[error("commit failed: {0}")]
    Commit(String),
    /// The request's closure panicked (the message is the panic's); its writes are rolled back.
    #[error("the request panicked: {0}")]
    Panicked(String),
    /// The disk (or quota) is full: the batch was not written, nothing of it is applied, and
    /// writes succeed again once space is freed.
    #[error("the disk is full: {0}")]
    StorageFull(String),
    /// Creating or opening the database failed (a database already there, a stored schema that
    /// does not compile, another on-disk format, unreadable files, …).
    #[error("{0}")]
    Open(String),
    /// The database directory is held by another open: another process (a server, say, whose
    /// address the error names), or this one.
    #[error("{0}")]
    Locked(std::sync::Arc<espalier_storage::LockError>),
}

impl From<DataError> for TxError {
    fn from(e: DataError) -> TxError {
        TxError::Commit(e.to_string())
    }
}

impl From<espalier_storage::tables::TablesError> for TxError {
    fn from(e: espalier_storage::tables::TablesError) -> TxError {
        TxError::Commit(e.to_string())
    }
}
