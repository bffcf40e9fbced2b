//! [`Writer`]: the one writer of a database on tables. Every change goes through it: it applies
//! the change to its private version of each structure and appends the redo operation; a
//! commit writes the operations to the log (one append, one `fdatasync` in `sync` mode) and
//! then publishes the new version as a [`Snapshot`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use crate::key_index::{KeyIndex, KeyIndexWriter, LeafCopy};
use crate::log::{LogBatch, LogWriter};
use crate::mapping::MappedFile;
use crate::table::{Page, StableBytes, TableSavepoint, TableVersion, TableWriter, MAX_ROW};

use super::checkpoint::WrittenPage;
use super::redo::{self, Op, RedoBuf};
use super::strings::{StringChange, StringsSavepoint, StringsWriter};
use super::{Read, Snapshot, TablesError};

/// Most bytes of operations per log record (the first payload byte says whether the commit
/// ends); a record never spans two of the redo's parts.
const CHUNK: usize = (1 << 20) - 1;

/// Bytes of records after which a large commit's batch is appended and the next one started:
/// a bulk load's tens of MiB go to the log in appends of this size from a buffer of this size,
/// instead of one buffer grown (and copied) to the whole.
const APPEND_BYTES: usize = 4 << 20;

/// Where [`Writer::rollback_to`] returns to: every structure's version then (constant time per
/// structure: roots are shared) and the length of the redo operations.
#[derive(Debug, Clone)]
pub struct Savepoint {
    tables: Vec<TableSavepoint>,
    indexes: Vec<KeyIndex>,
    strings: StringsSavepoint,
    meta: Arc<BTreeMap<Vec<u8>, Vec<u8>>>,
    redo: usize,
}

/// The one writer (see the module doc).
pub struct Writer {
    pub(super) tables: Vec<TableWriter>,
    pub(super) indexes: Vec<KeyIndexWriter>,
    pub(super) strings: StringsWriter,
    pub(super) meta: Arc<BTreeMap<Vec<u8>, Vec<u8>>>,
    redo: RedoBuf,
    pub(super) log: LogWriter,
    /// The last published version (what an abort returns to), and where readers find it.
    published: Arc<Snapshot>,
    pub(super) slot: Arc<Mutex<Arc<Snapshot>>>,
    /// Published versions that readers may still hold, oldest first, by publish number (rows
    /// they can see are not reused: [`TableWriter::release_before`]). Weak: a version nobody
    /// holds is freed by whoever dropped it last, at once, not later by the writer. (Held
    /// strongly here, every version after a long-held snapshot stayed in memory until that
    /// snapshot ended, and the writer then freed them all inside one commit: a pause as long
    /// as the checkpoint that held it.)
    held: VecDeque<(u64, Weak<Snapshot>)>,
    /// Why writing stopped (a failed log write or `fdatasync`); every later write fails.
    poisoned: Option<String>,
    /// Bytes appended to the log since open.
    log_bytes: u64,
    /// The last commit's log batch, kept so that a commit does not allocate one; given up
    /// past [`KEPT_BUFFER_BYTES`] (a bulk load's must not stay).
    batch: LogBatch,
}

/// Largest log batch buffer a writer keeps between commits.
const KEPT_BUFFER_BYTES: usize = 1 << 16;

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("tables", &self.tables.len()).field("indexes", &self.indexes.len()).finish()
    }
}

impl Read for Writer {
    fn table(&self, table: u32) -> Option<&TableVersion> {
        self.tables.get(table as usize).map(TableWriter::current)
    }

    fn index(&self, index: u32) -> Option<&KeyIndex> {
        self.indexes.get(index as usize).map(KeyIndexWriter::current)
    }

    fn string(&self, id: u64) -> Option<&[u8]> {
        self.strings.get(id)
    }

    fn string_count(&self, id: u64) -> Option<u64> {
        self.strings.count(id)
    }

    fn meta(&self, name: &[u8]) -> Option<&[u8]> {
        self.meta.get(name).map(Vec::as_slice)
    }

    fn string_table(&self) -> super::StringsVersion {
        self.strings.current()
    }

    fn version(&self) -> u64 {
        self.published.version
    }
}

impl Writer {
    /// A writer over recovered structures; publishes them as the first snapshot.
    pub(super) fn new(
        mut tables: Vec<TableWriter>,
        mut indexes: Vec<KeyIndexWriter>,
        mut strings: StringsWriter,
        meta: BTreeMap<Vec<u8>, Vec<u8>>,
        version: u64,
        log: LogWriter,
    ) -> Writer {
        let meta = Arc::new(meta);
        let first = Arc::new(Snapshot {
            tables: tables.iter_mut().map(TableWriter::publish_version).collect(),
            indexes: indexes.iter_mut().map(KeyIndexWriter::publish_version).collect(),
            strings: strings.publish_version(),
            meta: meta.clone(),
            version,
            publish: 1,
            log_version: log.next_version() - 1,
            log_bytes: 0,
        });
        Writer {
            tables,
            indexes,
            strings,
            meta,
            redo: RedoBuf::default(),
            log,
            published: first.clone(),
            slot: Arc::new(Mutex::new(first.clone())),
            held: VecDeque::from([(first.publish, Arc::downgrade(&first))]),
            poisoned: None,
            log_bytes: 0,
            batch: LogBatch::new(),
        }
    }

    fn check(&self) -> Result<(), TablesError> {
        match &self.poisoned {
            Some(reason) => Err(TablesError::Poisoned { reason: reason.clone() }),
            None => Ok(()),
        }
    }

    fn table_mut(&mut self, table: u32) -> Result<&mut TableWriter, TablesError> {
        // A `match`, not `ok_or`: that builds (and drops) the error on every call, 2% of a load.
        match self.tables.get_mut(table as usize) {
            Some(t) => Ok(t),
            None => Err(TablesError::NoTable { table }),
        }
    }

    fn index_mut(&mut self, index: u32) -> Result<&mut KeyIndexWriter, TablesError> {
        match self.indexes.get_mut(index as usize) {
            Some(i) => Ok(i),
            None => Err(TablesError::NoIndex { index }),
        }
    }

    /// A new row of `table` holding `bytes` (one row wide); returns its row.
    pub fn insert(&mut self, table: u32, bytes: &[u8]) -> Result<u32, TablesError> {
        self.check()?;
        let t = self.table_mut(table)?;
        if bytes.len() != t.current().width() {
            return Err(TablesError::Width { table, len: bytes.len(), width: t.current().width() });
        }
        if t.current().len() >= MAX_ROW - 1 {
            return Err(TablesError::TableFull { table });
        }
        let row = t.insert_row(bytes);
        self.redo.put_row(table, row, bytes);
        Ok(row)
    }

    /// Live row `row` of `table` to overwrite, with the redo buffer that logs it and the
    /// table's row width ([`Writer::put`], [`Writer::swap_at`]).
    fn live_row(&mut self, table: u32, row: u32) -> Result<(&mut [u8], &mut RedoBuf, usize), TablesError> {
        self.check()?;
        // The fields, not `table_mut`: the row stays borrowed while the redo buffer takes it.
        let Some(t) = self.tables.get_mut(table as usize) else { return Err(TablesError::NoTable { table }) };
        let width = t.current().width();
        match t.row_mut(row) {
            Some(slot) => Ok((slot, &mut self.redo, width)),
            None => Err(TablesError::NoRow { table, row }),
        }
    }

    /// Overwrites live row `row` of `table` with `bytes`.
    pub fn put(&mut self, table: u32, row: u32, bytes: &[u8]) -> Result<(), TablesError> {
        let (slot, redo, width) = self.live_row(table, row)?;
        if bytes.len() != width {
            return Err(TablesError::Width { table, len: bytes.len(), width });
        }
        slot.copy_from_slice(bytes);
        redo.put_row(table, row, bytes);
        Ok(())
    }

    /// Exchanges `bytes` with the same number of bytes of live row `row` of `table` from byte
    /// `at` (one slot of a record: a number set, a count bumped), so that `bytes` holds what
    /// the row held; logs the row's image as [`Writer::put`] does. One lookup of the row, and
    /// no copy of the record in and out.
    pub fn swap_at(&mut self, table: u32, row: u32, at: usize, bytes: &mut [u8]) -> Result<(), TablesError> {
        let (slot, redo, width) = self.live_row(table, row)?;
        let Some(part) = at.checked_add(bytes.len()).and_then(|end| slot.get_mut(at..end)) else {
            return Err(TablesError::Span { table, at, len: bytes.len(), width });
        };
        part.swap_with_slice(bytes);
        redo.put_row(table, row, slot);
        Ok(())
    }

    /// Frees row `row` of `table`; false if it was not live.
    pub fn free(&mut self, table: u32, row: u32) -> Result<bool, TablesError> {
        self.check()?;
        let freed = self.table_mut(table)?.free(row);
        if freed {
            self.redo.free_row(table, row);
        }
        Ok(freed)
    }

    /// Puts `row` under `(owner, key)` in key index `index`; returns the row it replaced.
    pub fn index_put(&mut self, index: u32, owner: u32, key: &[u8], row: u32) -> Result<Option<u32>, TablesError> {
        self.check()?;
        let old = self.index_mut(index)?.insert(owner, key, row).map_err(|e| TablesError::KeyTooLong { len: e.len })?;
        self.redo.push(Op::KeyPut { index, owner, row, key });
        Ok(old)
    }

    /// Moves `(owner, old)` of key index `index` to `(owner, new)` with `row`, in one descent
    /// when both keys lie in one leaf; returns the row the old key held (`None`: it was not
    /// there, and nothing changed). Logged as the remove and the put it stands for.
    pub fn index_move(
        &mut self,
        index: u32,
        owner: u32,
        old: &[u8],
        new: &[u8],
        row: u32,
    ) -> Result<Option<u32>, TablesError> {
        self.check()?;
        let moved = self.index_mut(index)?.move_key(owner, old, new, row);
        let was = moved.map_err(|e| TablesError::KeyTooLong { len: e.len })?;
        if was.is_some() {
            self.redo.push(Op::KeyRemove { index, owner, key: old });
            self.redo.push(Op::KeyPut { index, owner, row, key: new });
        }
        Ok(was)
    }

    /// Removes `(owner, key)` from key index `index`; returns the row it held.
    pub fn index_remove(&mut self, index: u32, owner: u32, key: &[u8]) -> Result<Option<u32>, TablesError> {
        self.check()?;
        let old = self.index_mut(index)?.remove(owner, key);
        if old.is_some() {
            self.redo.push(Op::KeyRemove { index, owner, key });
        }
        Ok(old)
    }

    /// Takes one more hold on `text` (storing it if new); returns its id (0 for "").
    pub fn acquire(&mut self, text: &[u8]) -> Result<u64, TablesError> {
        self.check()?;
        let (id, change) = self.strings.acquire(text);
        self.note_string(change, text);
        Ok(id)
    }

    /// Lets go of one hold on string `id` (freed when none is left).
    pub fn release(&mut self, id: u64) -> Result<(), TablesError> {
        self.check()?;
        let change = self.strings.release(id)?;
        self.note_string(change, &[]);
        Ok(())
    }

    fn note_string(&mut self, change: Option<StringChange>, text: &[u8]) {
        match change {
            Some(StringChange::Stored(id)) => self.redo.push(Op::StringStored { id, bytes: text }),
            Some(StringChange::Count(id, count)) => self.redo.push(Op::StringCount { id, count }),
            Some(StringChange::Freed(id)) => self.redo.push(Op::StringFreed { id }),
            None => {}
        }
    }

    /// Sets meta value `name` (the catalog, counters of the layer above).
    pub fn set_meta(&mut self, name: &[u8], value: &[u8]) -> Result<(), TablesError> {
        self.check()?;
        Arc::make_mut(&mut self.meta).insert(name.to_vec(), value.to_vec());
        self.redo.push(Op::Meta { name, value });
        Ok(())
    }

    /// Whether anything was written since the last commit.
    pub fn is_dirty(&self) -> bool {
        !self.redo.is_empty()
    }

    /// Bytes of redo operations since the last commit.
    pub fn pending_bytes(&self) -> usize {
        self.redo.len()
    }

    /// A point to roll back to.
    pub fn savepoint(&mut self) -> Savepoint {
        Savepoint {
            tables: self.tables.iter().map(TableWriter::savepoint).collect(),
            indexes: self.indexes.iter().map(|i| i.current().clone()).collect(),
            strings: self.strings.savepoint(),
            meta: self.meta.clone(),
            redo: self.redo.mark(),
        }
    }

    /// Undoes every change since `sp`.
    pub fn rollback_to(&mut self, sp: &Savepoint) {
        for (t, s) in self.tables.iter_mut().zip(&sp.tables) {
            t.rollback_to(s);
        }
        for (i, s) in self.indexes.iter_mut().zip(&sp.indexes) {
            i.rollback_to(s);
        }
        self.strings.rollback_to(&sp.strings);
        self.meta = sp.meta.clone();
        self.redo.truncate(sp.redo);
    }

    /// Undoes everything since the last commit.
    pub fn abort(&mut self) {
        let published = self.published.clone();
        for (t, v) in self.tables.iter_mut().zip(&published.tables) {
            t.rollback_to_published(v);
        }
        for (i, v) in self.indexes.iter_mut().zip(&published.indexes) {
            i.rollback_to(v);
        }
        self.strings.rollback_to_published(&published.strings);
        self.meta = published.meta.clone();
        self.redo.clear();
    }

    /// Makes everything since the last commit durable (per the log's durability mode) as
    /// `version` of the layer above, then publishes it. On a log failure the changes are
    /// undone, the writer is poisoned (every later write fails; reopen to recover) and the
    /// error returned: a commit never pretends.
    pub fn commit(&mut self, version: u64) -> Result<Arc<Snapshot>, TablesError> {
        self.commit_then(version, &mut || {})
    }

    /// [`Writer::commit`], calling `durable` once the commit is in the log and before readers
    /// can see it (the layer above advances its own version counter there, so that no reader
    /// sees a version the counter has not reached).
    pub fn commit_then(&mut self, version: u64, durable: &mut dyn FnMut()) -> Result<Arc<Snapshot>, TablesError> {
        self.check()?;
        self.redo.push(Op::Version(version));
        let start = self.log.next_version();
        if let Err(e) = self.append() {
            self.abort();
            // A full disk met before any of this commit reached the log (the next segment
            // could not be prepared) leaves the log as it was: this commit fails, and later
            // ones succeed once space is freed. Any other failure stops all writes.
            if !(e.is_storage_full() && self.log.next_version() == start) {
                self.poisoned = Some(e.to_string());
            }
            return Err(e);
        }
        self.redo.clear();
        durable();
        Ok(self.publish(version))
    }

    /// Writes the redo operations as log records: pieces of at most [`CHUNK`] bytes of one
    /// redo part each, after a byte saying whether the commit ends there; one append per
    /// [`APPEND_BYTES`].
    fn append(&mut self) -> Result<(), TablesError> {
        let batch = &mut self.batch;
        batch.clear();
        // The most the batch held: what its buffer grew to.
        let mut largest = 0;
        let (total, mut done) = (self.redo.len(), 0);
        let pieces = self.redo.parts().flat_map(|part| part.chunks(CHUNK));
        // One turn per record: the pieces are non-empty and together are the redo.
        for (next, piece) in (self.log.next_version()..).zip(pieces) {
            let first = if done == 0 { redo::FIRST } else { 0 };
            done += piece.len();
            let flags = first | if done == total { redo::LAST } else { 0 };
            if !batch.is_empty() && batch.encoded_len() + piece.len() + 64 > APPEND_BYTES {
                self.log.append(batch)?;
                self.log_bytes += batch.encoded_len() as u64;
                largest = largest.max(batch.encoded_len());
                batch.clear();
            }
            batch.push_parts(next, &[&[flags], piece])?;
        }
        self.log.append(batch)?;
        self.log_bytes += batch.encoded_len() as u64;
        if largest.max(batch.encoded_len()) > KEPT_BUFFER_BYTES {
            self.batch = LogBatch::new();
        }
        Ok(())
    }

    fn publish(&mut self, version: u64) -> Arc<Snapshot> {
        let publish = self.published.publish + 1;
        let snapshot = Arc::new(Snapshot {
            tables: self.tables.iter_mut().map(TableWriter::publish_version).collect(),
            indexes: self.indexes.iter_mut().map(KeyIndexWriter::publish_version).collect(),
            strings: self.strings.publish_version(),
            meta: self.meta.clone(),
            version,
            publish,
            log_version: self.log.next_version() - 1,
            log_bytes: self.log_bytes,
        });
        debug_assert!(self.tables.iter().all(|t| t.current().version() == publish), "tables publish together");
        self.published = snapshot.clone();
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = snapshot.clone();
        self.held.push_back((publish, Arc::downgrade(&snapshot)));
        // Versions nobody holds are gone for readers: rows they alone saw are free.
        while self.held.len() > 1 && self.held.front().is_some_and(|(_, s)| s.strong_count() == 0) {
            self.held.pop_front();
        }
        let oldest = self.held.front().map_or(publish, |(p, _)| *p);
        for t in &mut self.tables {
            t.release_before(oldest);
        }
        self.strings.release_before(oldest);
        snapshot
    }

    /// Makes every commit so far durable (`fdatasync` of the log), whatever the durability mode.
    pub fn sync(&mut self) -> Result<(), TablesError> {
        self.check()?;
        self.log.sync()?;
        Ok(())
    }

    /// The last published version.
    pub fn published(&self) -> &Arc<Snapshot> {
        &self.published
    }

    /// After a checkpoint wrote `snapshot` to `file`: replaces each of the writer's `pages`
    /// (their copies in `file`) that is still the one `snapshot` has (unchanged since) by its
    /// mapped copy, so that the heap memory goes once no published version holds it. Pointer
    /// swaps, and copies of the directory nodes above them where a published version shares
    /// those. Returns the pages swapped.
    pub fn swap_in_mapped_pages(
        &mut self,
        snapshot: &Snapshot,
        file: &Arc<MappedFile>,
        pages: &[WrittenPage],
    ) -> usize {
        let owner: Arc<dyn StableBytes> = file.clone();
        let mut swapped = 0;
        for w in pages {
            let (t, p) = (w.table as usize, w.page);
            // The table after the schema's is the string table's counts.
            let (writer, was) = if t == self.tables.len() {
                (Some(self.strings.counts_mut()), Some(snapshot.strings.counts()))
            } else {
                (self.tables.get_mut(t), snapshot.tables.get(t))
            };
            let (Some(writer), Some(was)) = (writer, was) else { continue };
            let layout = writer.current().layout();
            let (Some(was), Some(mapped)) =
                (was.page(p), Page::mapped(owner.clone(), w.offset as usize, layout, w.crc))
            else {
                continue;
            };
            swapped += usize::from(writer.swap_in_mapped(p, was, mapped));
        }
        swapped
    }

    /// As [`Writer::swap_in_mapped_pages`] for the leaves of key index `index`: `leaves` maps
    /// a leaf's buffer address in `snapshot` to its copy in `file`. Inner nodes on the way are
    /// copied where a published version shares them.
    pub fn swap_in_mapped_leaves(
        &mut self,
        snapshot: &Snapshot,
        file: &Arc<MappedFile>,
        index: u32,
        leaves: &HashMap<usize, LeafCopy>,
    ) -> usize {
        let (Some(writer), Some(was)) = (self.indexes.get_mut(index as usize), snapshot.indexes.get(index as usize))
        else {
            return 0;
        };
        let owner: Arc<dyn StableBytes> = file.clone();
        writer.swap_in_mapped(was, &owner, leaves)
    }

    /// Why writes stopped, if they did.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Test hook: the log's fault injection.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn log_faults(&self) -> Arc<crate::log::Faults> {
        self.log.faults()
    }
}
