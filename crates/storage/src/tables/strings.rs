//! The string table: every text is stored once, with the exact number of slots that hold it
//! (thesis §4.3.2). A string's id is its row in a table of counts; its bytes are in a
//! persistent map ([`Blobs`]) under the same id. The writer finds a text's id through a hash
//! table of ids keyed by the text's hash, which only the writer has (readers go by id).
//!
//! Id 0 is the empty string: never stored, so a fresh slot needs no string write.

use std::sync::Arc;

use hashbrown::HashTable;
use xxhash_rust::xxh3::xxh3_64;

use super::blobs::Blobs;
use crate::table::{RowError, TableSavepoint, TableVersion, TableWriter};

/// Bytes of a count row.
const COUNT_WIDTH: usize = 8;

/// One version of the string table.
#[derive(Clone, Debug)]
pub struct StringsVersion {
    counts: TableVersion,
    blobs: Blobs,
}

/// The bytes of string `id` in a version's counts and texts (empty for 0).
fn text_in<'a>(counts: &TableVersion, blobs: &'a Blobs, id: u64) -> Option<&'a [u8]> {
    if id == 0 {
        return Some(&[]);
    }
    let row = u32::try_from(id).ok()?;
    counts.row(row)?;
    blobs.get(row)
}

/// How many slots hold string `id` in a version's counts (0 for the empty string).
fn count_in(counts: &TableVersion, id: u64) -> Option<u64> {
    if id == 0 {
        return Some(0);
    }
    let row = counts.row(u32::try_from(id).ok()?)?;
    Some(u64::from_le_bytes(row.try_into().ok()?))
}

impl StringsVersion {
    /// The bytes of string `id` (empty for 0), or `None` if it is not stored.
    pub fn get(&self, id: u64) -> Option<&[u8]> {
        text_in(&self.counts, &self.blobs, id)
    }

    /// How many slots hold string `id`, or `None` if it is not stored (0 for the empty string).
    pub fn count(&self, id: u64) -> Option<u64> {
        count_in(&self.counts, id)
    }

    /// Every stored string: (id, count, bytes), by id.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &[u8])> + '_ {
        self.counts.rows().map(|(row, count)| {
            let count = u64::from_le_bytes(count.try_into().unwrap_or([0; 8]));
            (u64::from(row), count, self.blobs.get(row).unwrap_or_default())
        })
    }

    /// Bytes the strings take on disk: counts and texts.
    pub fn disk_bytes(&self) -> u64 {
        self.counts.disk_bytes() + self.iter().map(|(_, _, b)| b.len() as u64).sum::<u64>()
    }
}

/// A change to the writer's hash table, as its undo.
#[derive(Debug, Clone, Copy)]
enum HashUndo {
    /// This id (with this hash) was added: remove it.
    Added(u32, u64),
    /// This id (with this hash) was removed: add it back.
    Removed(u32, u64),
}

/// Where [`StringsWriter::rollback_to`] returns to.
#[derive(Debug, Clone)]
pub struct StringsSavepoint {
    counts: TableSavepoint,
    blobs: Blobs,
    undo: usize,
}

/// What a string write did, for the redo log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringChange {
    /// A new string with count 1.
    Stored(u32),
    /// The count of a stored string is now this.
    Count(u32, u64),
    /// The last holder let go: the string is gone.
    Freed(u32),
}

/// The one writer of the string table.
pub struct StringsWriter {
    counts: TableWriter,
    blobs: Blobs,
    /// (hash of the bytes, id) of every stored string, found by the hash. The hash is kept so
    /// that growing the table and undoing need no bytes.
    by_hash: HashTable<(u64, u32)>,
    undo: Vec<HashUndo>,
}

impl std::fmt::Debug for StringsWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StringsWriter").field("strings", &self.by_hash.len()).finish()
    }
}

impl Default for StringsWriter {
    fn default() -> Self {
        StringsWriter {
            counts: TableWriter::new(COUNT_WIDTH),
            blobs: Blobs::default(),
            by_hash: HashTable::new(),
            undo: Vec::new(),
        }
    }
}

/// Why a string write failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StringError {
    /// The id names no stored string.
    #[error("string {0} is not stored")]
    Missing(u64),
    /// Recovery found a row it cannot place.
    #[error(transparent)]
    Row(#[from] RowError),
}

impl StringsWriter {
    /// The writer's version as it is now.
    pub fn current(&self) -> StringsVersion {
        StringsVersion { counts: self.counts.current().clone(), blobs: self.blobs.clone() }
    }

    /// The bytes of string `id` as the writer sees them.
    pub fn get(&self, id: u64) -> Option<&[u8]> {
        text_in(self.counts.current(), &self.blobs, id)
    }

    /// How many slots hold string `id`, as the writer sees it.
    pub fn count(&self, id: u64) -> Option<u64> {
        count_in(self.counts.current(), id)
    }

    /// The id of `text` if it is stored.
    pub fn find(&self, text: &[u8]) -> Option<u64> {
        if text.is_empty() {
            return Some(0);
        }
        let blobs = &self.blobs;
        let hash = xxh3_64(text);
        self.by_hash.find(hash, |&(h, id)| h == hash && blobs.get(id) == Some(text)).map(|&(_, id)| u64::from(id))
    }

    /// Takes one more hold on `text`, storing it if new; returns its id and the change.
    pub fn acquire(&mut self, text: &[u8]) -> (u64, Option<StringChange>) {
        if text.is_empty() {
            return (0, None);
        }
        if let Some(id) = self.find(text) {
            let count = self.count(id).unwrap_or(0) + 1;
            let row = id as u32;
            if let Some(r) = self.counts.row_mut(row) {
                r.copy_from_slice(&count.to_le_bytes());
            }
            return (id, Some(StringChange::Count(row, count)));
        }
        let row = self.counts.insert_row(&1u64.to_le_bytes());
        self.blobs.set(row, Some(Arc::from(text)));
        let hash = xxh3_64(text);
        self.hash_add(row, hash);
        self.undo.push(HashUndo::Added(row, hash));
        (u64::from(row), Some(StringChange::Stored(row)))
    }

    /// Lets go of one hold on string `id`; frees it when none is left.
    pub fn release(&mut self, id: u64) -> Result<Option<StringChange>, StringError> {
        if id == 0 {
            return Ok(None);
        }
        let count = self.count(id).ok_or(StringError::Missing(id))?;
        let row = id as u32;
        if count > 1 {
            if let Some(r) = self.counts.row_mut(row) {
                r.copy_from_slice(&(count - 1).to_le_bytes());
            }
            return Ok(Some(StringChange::Count(row, count - 1)));
        }
        let hash = xxh3_64(self.blobs.get(row).unwrap_or_default());
        self.hash_remove(row, hash);
        self.undo.push(HashUndo::Removed(row, hash));
        self.counts.free(row);
        self.blobs.set(row, None);
        Ok(Some(StringChange::Freed(row)))
    }

    fn hash_add(&mut self, row: u32, hash: u64) {
        self.by_hash.insert_unique(hash, (hash, row), |&(h, _)| h);
    }

    fn hash_remove(&mut self, row: u32, hash: u64) {
        if let Ok(found) = self.by_hash.find_entry(hash, |&(h, id)| h == hash && id == row) {
            found.remove();
        }
    }

    /// A point to roll back to.
    pub fn savepoint(&self) -> StringsSavepoint {
        StringsSavepoint { counts: self.counts.savepoint(), blobs: self.blobs.clone(), undo: self.undo.len() }
    }

    /// Undoes every string write since `sp`.
    pub fn rollback_to(&mut self, sp: &StringsSavepoint) {
        while self.undo.len() > sp.undo {
            match self.undo.pop() {
                Some(HashUndo::Added(row, hash)) => self.hash_remove(row, hash),
                Some(HashUndo::Removed(row, hash)) => self.hash_add(row, hash),
                None => break,
            }
        }
        self.counts.rollback_to(&sp.counts);
        self.blobs = sp.blobs.clone();
    }

    /// Undoes everything since the last publish (`published` is what it returned).
    pub fn rollback_to_published(&mut self, published: &StringsVersion) {
        let sp = StringsSavepoint { counts: self.counts.savepoint(), blobs: published.blobs.clone(), undo: 0 };
        self.rollback_to(&sp);
        self.counts.rollback_to_published(&published.counts);
    }

    /// Publishes the writer's version.
    pub fn publish_version(&mut self) -> StringsVersion {
        self.undo.clear();
        StringsVersion { counts: self.counts.publish_version(), blobs: self.blobs.clone() }
    }

    /// Makes ids freed before snapshot version `oldest` reusable (see
    /// [`TableWriter::release_before`]).
    pub fn release_before(&mut self, oldest: u64) {
        self.counts.release_before(oldest);
    }

    /// Recovery: string `row` is stored with `count` holders and `bytes`.
    pub fn put_at(&mut self, row: u32, count: u64, bytes: &[u8]) -> Result<(), StringError> {
        if self.counts.row(row).is_some() {
            let old = xxh3_64(self.blobs.get(row).unwrap_or_default());
            self.hash_remove(row, old);
        }
        self.counts.put_at(row, &count.to_le_bytes())?;
        self.blobs.set(row, Some(Arc::from(bytes)));
        self.hash_add(row, xxh3_64(bytes));
        Ok(())
    }

    /// Recovery: string `row`'s count is `count`.
    pub fn set_count_at(&mut self, row: u32, count: u64) -> Result<(), StringError> {
        let Some(r) = self.counts.row_mut(row) else {
            return Err(StringError::Missing(u64::from(row)));
        };
        r.copy_from_slice(&count.to_le_bytes());
        Ok(())
    }

    /// Recovery: string `row` is gone.
    pub fn clear_at(&mut self, row: u32) {
        if self.counts.row(row).is_some() {
            let hash = xxh3_64(self.blobs.get(row).unwrap_or_default());
            self.hash_remove(row, hash);
        }
        self.counts.clear_at(row);
        self.blobs.set(row, None);
    }

    /// Recovery is done: freed ids become reusable.
    pub fn rebuild_free(&mut self) {
        self.counts.rebuild_free();
        self.undo.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_release_and_rollback() {
        let mut w = StringsWriter::default();
        let (a, _) = w.acquire(b"alpha");
        let (a2, change) = w.acquire(b"alpha");
        assert_eq!(a, a2);
        assert_eq!(change, Some(StringChange::Count(a as u32, 2)));
        let published = w.publish_version();
        let sp = w.savepoint();
        let (b, _) = w.acquire(b"beta");
        w.release(a).unwrap();
        w.release(a).unwrap();
        assert_eq!(w.find(b"alpha"), None);
        assert_eq!(w.find(b"beta"), Some(b));
        w.rollback_to(&sp);
        assert_eq!(w.find(b"alpha"), Some(a));
        assert_eq!(w.count(a), Some(2));
        assert_eq!(w.find(b"beta"), None);
        assert_eq!(published.get(a), Some(&b"alpha"[..]));
        assert_eq!(published.get(b), None);
        w.release(a).unwrap();
        w.rollback_to_published(&published);
        assert_eq!(w.count(a), Some(2));
        assert!(matches!(w.release(999), Err(StringError::Missing(999))));
    }
}
