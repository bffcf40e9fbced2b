//! `Store` (an LMDB environment with one B+tree per [`Table`]), its read and write transactions.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, RoTxn, RwTxn, WithoutTls};

use crate::lock::{DirLock, Holder};
use crate::undo::{UndoEntry, MAX_UNDO_ENTRIES};
use crate::{Result, StorageError, Table};

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

#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub durability: Durability,
    /// Initial map size; the map grows by doubling when it fills, so this is no limit.
    pub initial_map_size: usize,
    /// Map the file writable (faster commits; disallows nested LMDB transactions, which we
    /// do not use — savepoints are an undo log).
    pub write_map: bool,
    pub max_readers: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { durability: Durability::Sync, initial_map_size: 64 << 20, write_map: true, max_readers: 1022 }
    }
}

/// Grow the map before a write once the used pages pass this fraction of it.
const GROW_AT_FILL: f64 = 0.75;
/// Largest map we will ask for (16 TiB of address space).
const MAX_MAP_SIZE: usize = 1 << 44;

pub struct Store {
    env: Env<WithoutTls>,
    tables: Vec<Database<Bytes, Bytes>>,
    /// Readers and writers hold it shared; growing the map takes it exclusively, because
    /// LMDB may only resize while no transaction of this process is active.
    gate: RwLock<()>,
    path: PathBuf,
    options: StoreOptions,
    /// The periodic syncer (`Durability::Periodic`): its stop flag, and the thread, joined on
    /// drop so that the environment is closed before the lock is let go.
    syncer: Option<(Arc<(Mutex<bool>, Condvar)>, JoinHandle<()>)>,
    /// The directory's lock, held while the store is open; the last field, so dropped after
    /// the environment has closed.
    lock: DirLock,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

fn lmdb(table: Table) -> impl Fn(heed::Error) -> StorageError {
    move |source| match source {
        heed::Error::Mdb(heed::MdbError::MapFull) => StorageError::MapFull { map_size: 0 },
        source => StorageError::Lmdb { table: table.name(), source },
    }
}

impl Store {
    /// Opens the database directory `path`, creating it when `create` is set. Takes the
    /// directory's lock ([`DirLock`]) first: while another open holds it (another process, or
    /// this one), this fails with [`StorageError::Locked`] and writes nothing.
    pub fn open(path: &Path, create: bool, options: StoreOptions) -> Result<Arc<Store>> {
        let display = path.display().to_string();
        if create {
            std::fs::create_dir_all(path).map_err(|source| StorageError::Io { path: display.clone(), source })?;
        } else if !path.join("data.mdb").exists() {
            return Err(StorageError::NotADatabase { path: display });
        }
        let lock = DirLock::acquire(path, Holder::Process)?;
        let mut flags = EnvFlags::NO_READ_AHEAD;
        if options.write_map {
            flags |= EnvFlags::WRITE_MAP;
        }
        if options.durability != Durability::Sync {
            flags |= EnvFlags::NO_SYNC;
        }
        // Reopen with at least the current file size as map size, so a grown database opens.
        // Not more: with a writable map LMDB extends the file to the map size, so asking for
        // more on every open would double the file each time.
        let file_size = std::fs::metadata(path.join("data.mdb")).map(|m| m.len() as usize).unwrap_or(0);
        let map_size = round_to_page(options.initial_map_size.max(file_size));
        let env = unsafe {
            // SAFETY: the directory is opened once per process (we hold its lock, so this is the
            // only Store for it), and we never open it with conflicting flags in this process.
            EnvOpenOptions::new()
                .read_txn_without_tls()
                .map_size(map_size)
                .max_dbs(Table::ALL.len() as u32)
                .max_readers(options.max_readers)
                .flags(flags)
                .open(path)
        }
        .map_err(|source| StorageError::Open { path: display.clone(), source })?;
        let mut wtxn = env.write_txn().map_err(StorageError::Env)?;
        let mut tables = Vec::with_capacity(Table::ALL.len());
        for table in Table::ALL {
            let db = env.create_database::<Bytes, Bytes>(&mut wtxn, Some(table.name())).map_err(lmdb(table))?;
            tables.push(db);
        }
        wtxn.commit().map_err(StorageError::Env)?;
        let mut syncer = None;
        if let Durability::Periodic(every) = options.durability {
            let env = env.clone();
            let stop = Arc::new((Mutex::new(false), Condvar::new()));
            let stop_seen = stop.clone();
            let thread = std::thread::Builder::new()
                .name("espalier-sync".into())
                .spawn(move || {
                    let (flag, wake) = &*stop_seen;
                    let mut stopped = flag.lock().unwrap_or_else(|e| e.into_inner());
                    while !*stopped {
                        stopped = wake.wait_timeout(stopped, every).unwrap_or_else(|e| e.into_inner()).0;
                        // A failed background sync is retried next interval; the next Sync
                        // commit or close reports persistent failures.
                        let _ = env.force_sync();
                    }
                })
                .map_err(|source| StorageError::Io { path: display.clone(), source })?;
            syncer = Some((stop, thread));
        }
        Ok(Arc::new(Store { env, tables, gate: RwLock::new(()), path: path.to_path_buf(), options, syncer, lock }))
    }

    /// The directory's lock: a server records its address in it ([`DirLock::set_holder`]).
    pub fn dir_lock(&self) -> &DirLock {
        &self.lock
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    fn db(&self, table: Table) -> Database<Bytes, Bytes> {
        self.tables[table as usize]
    }

    /// A snapshot: sees every commit made before it began and none after; never blocks the writer.
    pub fn read(&self) -> Result<ReadTxn<'_>> {
        let gate = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let txn = self.env.read_txn().map_err(StorageError::Env)?;
        Ok(ReadTxn { store: self, txn, _gate: gate })
    }

    /// The one write transaction (LMDB serialises writers). Grows the map first if it is
    /// getting full.
    pub fn write(&self) -> Result<WriteTxn<'_>> {
        let info = self.env.info();
        let used = (info.last_page_number + 1) * PAGE_SIZE;
        if used as f64 > info.map_size as f64 * GROW_AT_FILL {
            self.grow()?;
        }
        let gate = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let txn = self.env.write_txn().map_err(StorageError::Env)?;
        Ok(WriteTxn { store: self, txn, undo: Vec::new(), undo_enabled: false, map_full: false, _gate: gate })
    }

    /// Doubles the map. Waits until no transaction of this process is active.
    pub fn grow(&self) -> Result<()> {
        let _exclusive = self.gate.write().unwrap_or_else(|e| e.into_inner());
        let current = self.env.info().map_size;
        let next = round_to_page(current.saturating_mul(2).min(MAX_MAP_SIZE));
        if next <= current {
            return Err(StorageError::MapFull { map_size: current });
        }
        // SAFETY: we hold the gate exclusively, so no transaction of this process is active.
        unsafe { self.env.resize(next) }.map_err(StorageError::Env)
    }

    pub fn map_size(&self) -> usize {
        self.env.info().map_size
    }

    /// Bytes the data file occupies on disk (allocated blocks, not the sparse map size).
    pub fn disk_size(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(self.path.join("data.mdb")).map(|m| m.blocks() * 512).unwrap_or(0)
    }

    /// Makes every commit so far durable (used on close and by `Durability::None` callers).
    pub fn sync(&self) -> Result<()> {
        self.env.force_sync().map_err(StorageError::Env)
    }

    /// Number of entries in a table (for `check` and statistics).
    pub fn len(&self, txn: &ReadTxn<'_>, table: Table) -> Result<u64> {
        self.db(table).len(&txn.txn).map_err(lmdb(table))
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.syncer.take() {
            let (flag, wake) = &*stop;
            *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
            wake.notify_all();
            // It syncs once more on its way out and drops its handle on the environment.
            let _ = thread.join();
        }
        if self.options.durability != Durability::Sync {
            let _ = self.env.force_sync();
        }
    }
}

/// LMDB's page size: the OS page size, 4 KiB on every platform we build for.
const PAGE_SIZE: usize = 4096;

fn round_to_page(size: usize) -> usize {
    size.div_ceil(PAGE_SIZE) * PAGE_SIZE
}

/// Reads shared by snapshots and the write transaction (which reads its own writes).
pub trait Reader {
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<&[u8]>>;
    /// Entries with keys `>= start`, in key order; the caller stops when it leaves its prefix.
    fn scan<'t>(&'t self, table: Table, start: &[u8]) -> Result<Scan<'t>>;

    /// Entries whose key starts with `prefix`, in key order.
    fn prefix<'t>(&'t self, table: Table, prefix: &[u8]) -> Result<Prefix<'t>> {
        Ok(Prefix { inner: self.scan(table, prefix)?, prefix: prefix.to_vec() })
    }

    /// Is there any key starting with `prefix`?
    fn any_with_prefix(&self, table: Table, prefix: &[u8]) -> Result<bool> {
        match self.scan(table, prefix)?.next() {
            Some(Ok((k, _))) => Ok(k.starts_with(prefix)),
            Some(Err(e)) => Err(e),
            None => Ok(false),
        }
    }
}

/// An ordered scan over one table.
pub struct Scan<'t> {
    inner: heed::RoRange<'t, Bytes, Bytes>,
    table: Table,
}

impl<'t> Iterator for Scan<'t> {
    type Item = Result<(&'t [u8], &'t [u8])>;
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|r| r.map_err(lmdb(self.table)))
    }
}

pub struct Prefix<'t> {
    inner: Scan<'t>,
    prefix: Vec<u8>,
}

impl<'t> Iterator for Prefix<'t> {
    type Item = Result<(&'t [u8], &'t [u8])>;
    fn next(&mut self) -> Option<Self::Item> {
        match self.inner.next()? {
            Ok((k, v)) if k.starts_with(&self.prefix) => Some(Ok((k, v))),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

fn get_in<'t>(store: &Store, txn: &'t RoTxn<'_>, table: Table, key: &[u8]) -> Result<Option<&'t [u8]>> {
    store.db(table).get(txn, key).map_err(lmdb(table))
}

fn scan_in<'t>(store: &Store, txn: &'t RoTxn<'_>, table: Table, start: &[u8]) -> Result<Scan<'t>> {
    let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(start), Bound::Unbounded);
    let inner = store.db(table).range(txn, &bounds).map_err(lmdb(table))?;
    Ok(Scan { inner, table })
}

pub struct ReadTxn<'s> {
    store: &'s Store,
    txn: RoTxn<'s, WithoutTls>,
    _gate: RwLockReadGuard<'s, ()>,
}

impl Reader for ReadTxn<'_> {
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<&[u8]>> {
        get_in(self.store, &self.txn, table, key)
    }
    fn scan<'t>(&'t self, table: Table, start: &[u8]) -> Result<Scan<'t>> {
        scan_in(self.store, &self.txn, table, start)
    }
}

/// The single write transaction. Writes are visible to its own reads at once and to others
/// after [`WriteTxn::commit`]. With savepoints enabled every write is undoable.
pub struct WriteTxn<'s> {
    store: &'s Store,
    txn: RwTxn<'s>,
    undo: Vec<UndoEntry>,
    undo_enabled: bool,
    map_full: bool,
    _gate: RwLockReadGuard<'s, ()>,
}

impl Reader for WriteTxn<'_> {
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<&[u8]>> {
        get_in(self.store, &self.txn, table, key)
    }
    fn scan<'t>(&'t self, table: Table, start: &[u8]) -> Result<Scan<'t>> {
        scan_in(self.store, &self.txn, table, start)
    }
}

/// A point to roll back to: the length of the undo log when it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Savepoint(usize);

impl<'s> WriteTxn<'s> {
    fn check_key(&self, table: Table, key: &[u8]) -> Result<()> {
        let max = 511;
        if key.len() > max {
            return Err(StorageError::KeyTooLong { table: table.name(), len: key.len(), max });
        }
        Ok(())
    }

    fn remember(&mut self, table: Table, key: &[u8]) -> Result<()> {
        if !self.undo_enabled {
            return Ok(());
        }
        if self.undo.len() >= MAX_UNDO_ENTRIES {
            return Err(StorageError::Io {
                path: self.store.path.display().to_string(),
                source: std::io::Error::other("transaction too large to undo: more than 64M writes"),
            });
        }
        let old = get_in(self.store, &self.txn, table, key)?.map(<[u8]>::to_vec);
        self.undo.push(UndoEntry { table, key: key.to_vec(), old });
        Ok(())
    }

    fn note_full(&mut self, e: StorageError) -> StorageError {
        if let StorageError::MapFull { .. } = e {
            self.map_full = true;
            return StorageError::MapFull { map_size: self.store.map_size() };
        }
        e
    }

    pub fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_key(table, key)?;
        self.remember(table, key)?;
        let r = self.store.db(table).put(&mut self.txn, key, value).map_err(lmdb(table));
        r.map_err(|e| self.note_full(e))
    }

    /// Deletes `key`; returns whether it existed.
    pub fn delete(&mut self, table: Table, key: &[u8]) -> Result<bool> {
        self.remember(table, key)?;
        let r = self.store.db(table).delete(&mut self.txn, key).map_err(lmdb(table));
        r.map_err(|e| self.note_full(e))
    }

    /// From now on every write is recorded so that [`WriteTxn::rollback_to`] can undo it.
    pub fn enable_savepoints(&mut self) {
        self.undo_enabled = true;
    }

    pub fn savepoint(&self) -> Savepoint {
        assert!(self.undo_enabled, "savepoint taken without enable_savepoints");
        Savepoint(self.undo.len())
    }

    /// Undoes every write made since `sp`, newest first.
    pub fn rollback_to(&mut self, sp: Savepoint) -> Result<()> {
        assert!(sp.0 <= self.undo.len(), "savepoint {} beyond undo log {}", sp.0, self.undo.len());
        while self.undo.len() > sp.0 {
            let Some(entry) = self.undo.pop() else { break };
            let db = self.store.db(entry.table);
            let r = match entry.old {
                Some(old) => db.put(&mut self.txn, &entry.key, &old).map(|_| ()),
                None => db.delete(&mut self.txn, &entry.key).map(|_| ()),
            };
            r.map_err(lmdb(entry.table)).map_err(|e| self.note_full(e))?;
        }
        Ok(())
    }

    /// Did a write fail because the map is full? Then the whole transaction must be aborted,
    /// the map grown and the work retried.
    pub fn map_full(&self) -> bool {
        self.map_full
    }

    pub fn commit(self) -> Result<()> {
        assert!(!self.map_full, "commit after a map-full write; abort and grow instead");
        self.txn.commit().map_err(|e| match e {
            heed::Error::Mdb(heed::MdbError::MapFull) => StorageError::MapFull { map_size: self.store.map_size() },
            e => StorageError::Env(e),
        })
    }

    /// Discards every write of this transaction.
    pub fn abort(self) {
        self.txn.abort();
    }

    pub fn store(&self) -> &'s Store {
        self.store
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> Arc<Store> {
        let opts = StoreOptions { durability: Durability::None, initial_map_size: 1 << 20, ..Default::default() };
        Store::open(dir, true, opts).unwrap()
    }

    #[test]
    fn put_get_scan_and_snapshot_isolation() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut w = store.write().unwrap();
        for k in [b"a1".as_slice(), b"a2", b"b1"] {
            w.put(Table::Meta, k, k).unwrap();
        }
        w.commit().unwrap();
        let snap = store.read().unwrap();
        let mut w = store.write().unwrap();
        w.put(Table::Meta, b"a3", b"x").unwrap();
        w.commit().unwrap();
        let keys: Vec<_> = snap.prefix(Table::Meta, b"a").unwrap().map(|r| r.unwrap().0.to_vec()).collect();
        assert_eq!(keys, vec![b"a1".to_vec(), b"a2".to_vec()], "snapshot must not see later commit");
        drop(snap);
        let r = store.read().unwrap();
        assert_eq!(r.prefix(Table::Meta, b"a").unwrap().count(), 3);
        assert!(r.any_with_prefix(Table::Meta, b"b").unwrap());
        assert!(!r.any_with_prefix(Table::Meta, b"c").unwrap());
    }

    #[test]
    fn savepoints_undo_only_later_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut w = store.write().unwrap();
        w.enable_savepoints();
        w.put(Table::Meta, b"k", b"1").unwrap();
        let sp = w.savepoint();
        w.put(Table::Meta, b"k", b"2").unwrap();
        w.put(Table::Meta, b"new", b"x").unwrap();
        w.delete(Table::Meta, b"k").unwrap();
        w.rollback_to(sp).unwrap();
        assert_eq!(w.get(Table::Meta, b"k").unwrap(), Some(b"1".as_slice()));
        assert_eq!(w.get(Table::Meta, b"new").unwrap(), None);
        w.commit().unwrap();
    }

    #[test]
    fn map_grows_past_initial_size() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let value = vec![7u8; 1000];
        let mut written = 0u32;
        // 8 MB into a 1 MB map: must grow several times, retrying the batch that hit the wall.
        while written < 8000 {
            let mut w = store.write().unwrap();
            let mut ok = true;
            for i in written..written + 500 {
                if let Err(e) = w.put(Table::Nodes, &i.to_be_bytes(), &value) {
                    assert!(matches!(e, StorageError::MapFull { .. }), "{e}");
                    ok = false;
                    break;
                }
            }
            if ok {
                w.commit().unwrap();
                written += 500;
            } else {
                w.abort();
                store.grow().unwrap();
            }
        }
        assert!(store.map_size() >= 8 << 20);
        drop(store);
        let store = Store::open(dir.path(), false, StoreOptions::default()).unwrap();
        let r = store.read().unwrap();
        assert_eq!(store.len(&r, Table::Nodes).unwrap(), 8000);
    }

    #[test]
    fn reopening_does_not_grow_the_file() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path()));
        let size = || std::fs::metadata(dir.path().join("data.mdb")).unwrap().len();
        let first = size();
        for _ in 0..40 {
            let opts = StoreOptions { durability: Durability::None, initial_map_size: 1 << 20, ..Default::default() };
            drop(Store::open(dir.path(), false, opts).unwrap());
        }
        assert_eq!(size(), first, "40 reopens must not change the file size");
    }

    #[test]
    fn an_open_store_holds_the_directory_lock() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        // A second open (here in the same process; another process likewise) is refused
        // before it touches the environment.
        match Store::open(dir.path(), false, StoreOptions::default()) {
            Err(StorageError::Locked(crate::LockError::HeldHere { .. })) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(store.dir_lock().held_by().pid, Some(std::process::id()));
        drop(store);
        // Closed: the lock is free at once, also behind a periodic syncer (joined on drop).
        let periodic = StoreOptions { durability: Durability::Periodic(Duration::from_secs(60)), ..Default::default() };
        for _ in 0..3 {
            drop(Store::open(dir.path(), false, periodic.clone()).unwrap());
        }
    }

    #[test]
    fn key_too_long_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut w = store.write().unwrap();
        let e = w.put(Table::Entries, &[1u8; 600], b"").unwrap_err();
        assert!(e.to_string().contains("longer than the limit"), "{e}");
    }
}
