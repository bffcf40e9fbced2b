//! The undo log behind savepoints: every write first remembers what it overwrote, so that one
//! instruction in a group-commit batch can be rolled back without aborting the others.

use crate::Table;

#[derive(Debug)]
pub(crate) struct UndoEntry {
    pub table: Table,
    pub key: Vec<u8>,
    /// The value before the write, or `None` if the key did not exist.
    pub old: Option<Vec<u8>>,
}

/// Upper bound on undo entries in one write transaction; past it, savepoints are refused and
/// the caller runs smaller transactions. Keeps a runaway instruction from exhausting memory.
pub(crate) const MAX_UNDO_ENTRIES: usize = 64 * 1024 * 1024;
