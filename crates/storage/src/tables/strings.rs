//! The string table: every text is stored once, with the exact number of slots that hold it
//! (thesis §4.3.2). A string's id is its row in a table of counts; its bytes are on the heap
//! ([`Blobs`]) if it was stored since the last checkpoint, else in a checkpoint file
//! ([`MappedTexts`]). The writer finds a text's id through a hash table of ids keyed by the
//! text's hash, which only the writer has (readers go by id).
//!
//! Id 0 is the empty string: never stored, so a fresh slot needs no string write.

use hashbrown::HashTable;
use xxhash_rust::xxh3::xxh3_64;

use super::blobs::{Blobs, Text};
use super::texts::MappedTexts;
use crate::table::{RowError, TableSavepoint, TableVersion, TableWriter};

/// Bytes of a count row.
pub const COUNT_WIDTH: usize = 8;

/// The hash the writer's table keeps of a text: 32 bits, so that an entry is 8 bytes with its
/// id (a string costs the writer about 10 bytes of memory, not 20 with a 64-bit hash).
/// Texts with equal hashes are told apart by their bytes.
pub fn text_hash(text: &[u8]) -> u32 {
    (xxh3_64(text) >> 32) as u32
}

/// The table's hash of a kept 32-bit hash: spread over 64 bits, since the table takes its
/// bucket from the low bits and its tag from the top seven.
#[inline]
fn spread(h: u32) -> u64 {
    u64::from(h).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// One version of the string table.
#[derive(Clone, Debug)]
pub struct StringsVersion {
    counts: TableVersion,
    /// Texts stored since the last checkpoint.
    blobs: Blobs,
    /// Texts in checkpoint files.
    mapped: MappedTexts,
}

/// The bytes of string `id` in a version's counts and texts (empty for 0).
fn text_in<'a>(counts: &TableVersion, blobs: &'a Blobs, mapped: &'a MappedTexts, id: u64) -> Option<&'a [u8]> {
    if id == 0 {
        return Some(&[]);
    }
    let row = u32::try_from(id).ok()?;
    counts.row(row)?;
    // The heap first: a text stored since the checkpoint may reuse the id of one in a file.
    blobs.get(row).or_else(|| mapped.get(row))
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
        text_in(&self.counts, &self.blobs, &self.mapped, id)
    }

    /// How many slots hold string `id`, or `None` if it is not stored (0 for the empty string).
    pub fn count(&self, id: u64) -> Option<u64> {
        count_in(&self.counts, id)
    }

    /// Every stored string: (id, count, bytes), by id.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &[u8])> + '_ {
        self.counts.rows().map(|(row, count)| {
            let count = u64::from_le_bytes(count.try_into().unwrap_or([0; 8]));
            (u64::from(row), count, self.get(u64::from(row)).unwrap_or_default())
        })
    }

    /// Bytes the strings take on disk: counts and texts.
    pub fn disk_bytes(&self) -> u64 {
        self.counts.disk_bytes() + self.iter().map(|(_, _, b)| b.len() as u64).sum::<u64>()
    }

    /// The table of counts.
    pub fn counts(&self) -> &TableVersion {
        &self.counts
    }

    /// The texts on the heap (stored since the last checkpoint), by id.
    pub(super) fn heap_texts(&self) -> Vec<(u32, &std::sync::Arc<Text>)> {
        self.blobs.iter()
    }

    /// How many texts are on the heap (stored since the last checkpoint): after an open, none.
    pub fn heap_texts_len(&self) -> usize {
        self.blobs.iter().len()
    }

    /// The texts in checkpoint files.
    pub fn mapped(&self) -> &MappedTexts {
        &self.mapped
    }
}

/// A change to the writer's hash table, as its undo.
#[derive(Debug, Clone, Copy)]
enum HashUndo {
    /// This id (with this hash) was added: remove it.
    Added(u32, u32),
    /// This id (with this hash) was removed: add it back.
    Removed(u32, u32),
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
    mapped: MappedTexts,
    /// ([`text_hash`] of the bytes, id) of every stored string, found by the hash. The hash is
    /// kept so that growing the table and undoing read no bytes (most are in mapped files).
    by_hash: HashTable<(u32, u32)>,
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
            mapped: MappedTexts::default(),
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
    /// Recovery from a checkpoint: the counts and the mapped texts it holds, and the
    /// ([`text_hash`], id) of every live text, as hashed at open.
    pub fn from_checkpoint(counts: TableWriter, mapped: MappedTexts, hashes: &[(u32, u32)]) -> StringsWriter {
        let mut by_hash = HashTable::with_capacity(hashes.len());
        for &(h, id) in hashes {
            by_hash.insert_unique(spread(h), (h, id), |&(h, _)| spread(h));
        }
        StringsWriter { counts, blobs: Blobs::default(), mapped, by_hash, undo: Vec::new() }
    }

    /// The writer's version as it is now.
    pub fn current(&self) -> StringsVersion {
        StringsVersion { counts: self.counts.current().clone(), blobs: self.blobs.clone(), mapped: self.mapped.clone() }
    }

    /// The bytes of string `id` as the writer sees them.
    pub fn get(&self, id: u64) -> Option<&[u8]> {
        text_in(self.counts.current(), &self.blobs, &self.mapped, id)
    }

    /// The table of counts, for swapping in a checkpoint's mapped pages.
    pub fn counts_mut(&mut self) -> &mut TableWriter {
        &mut self.counts
    }

    /// After a checkpoint wrote `snapshot`'s heap texts and made `mapped` (which places every
    /// text of `snapshot`): the writer reads its texts through `mapped`, and drops from the
    /// heap each text that is still the one `snapshot` had (identity, not bytes: a text stored
    /// since under a reused id stays).
    pub fn swap_in_mapped_texts(&mut self, snapshot: &StringsVersion, mapped: MappedTexts) {
        self.mapped = mapped;
        if self.blobs.same(&snapshot.blobs) {
            // No text stored or freed since the snapshot (the usual case): all of them go, in
            // constant time under the writer's lock.
            self.blobs = Blobs::default();
            return;
        }
        // Otherwise a walk of the heap texts, under the writer's lock (one slice).
        let written = snapshot.blobs.iter();
        let before = self.blobs.iter();
        let mut kept = Blobs::default();
        let mut w = written.iter().peekable();
        // Both lists are by id: one merge.
        for (id, text) in before {
            while w.peek().is_some_and(|(wid, _)| *wid < id) {
                w.next();
            }
            let written = matches!(w.peek(), Some((wid, was)) if *wid == id && std::sync::Arc::ptr_eq(was, text));
            if !written {
                kept.set(id, Some(text.clone()));
            }
        }
        self.blobs = kept;
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
        let hash = text_hash(text);
        self.by_hash
            .find(spread(hash), |&(h, id)| h == hash && self.get(u64::from(id)) == Some(text))
            .map(|&(_, id)| u64::from(id))
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
        self.blobs.set(row, Some(Text::new(text)));
        let hash = text_hash(text);
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
        let hash = text_hash(self.get(id).unwrap_or_default());
        self.hash_remove(row, hash);
        self.undo.push(HashUndo::Removed(row, hash));
        self.counts.free(row);
        self.blobs.set(row, None);
        Ok(Some(StringChange::Freed(row)))
    }

    fn hash_add(&mut self, row: u32, hash: u32) {
        self.by_hash.insert_unique(spread(hash), (hash, row), |&(h, _)| spread(h));
    }

    fn hash_remove(&mut self, row: u32, hash: u32) {
        if let Ok(found) = self.by_hash.find_entry(spread(hash), |&(h, id)| h == hash && id == row) {
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
        StringsVersion { counts: self.counts.publish_version(), blobs: self.blobs.clone(), mapped: self.mapped.clone() }
    }

    /// Makes ids freed before snapshot version `oldest` reusable (see
    /// [`TableWriter::release_before`]).
    pub fn release_before(&mut self, oldest: u64) {
        self.counts.release_before(oldest);
    }

    /// Recovery: string `row` is stored with `count` holders and `bytes`.
    pub fn put_at(&mut self, row: u32, count: u64, bytes: &[u8]) -> Result<(), StringError> {
        if self.counts.row(row).is_some() {
            let old = text_hash(self.get(u64::from(row)).unwrap_or_default());
            self.hash_remove(row, old);
        }
        self.counts.put_at(row, &count.to_le_bytes())?;
        self.blobs.set(row, Some(Text::new(bytes)));
        self.hash_add(row, text_hash(bytes));
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
            let hash = text_hash(self.get(u64::from(row)).unwrap_or_default());
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
