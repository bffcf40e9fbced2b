//! The database on tables (`docs/storage.md`): a table per node type, key indexes, the string
//! table and meta values, changed by one [`Writer`] and read through immutable [`Snapshot`]s;
//! durable through the redo log.
//!
//! This layer does not know the schema: the layer above gives the [`Shape`] (how many tables,
//! their row widths, how many key indexes) and an opaque catalog (the schema text), which the
//! manifest keeps so that the layer above can compute the same shape when it opens.
//!
//! # Directory
//!
//! - `manifest`: magic, format, the shape, the catalog; crc32c. Written once at create (a
//!   temporary file, fsynced, renamed, the directory fsynced).
//! - `lock`: the directory lock ([`DirLock`]).
//! - `log/`: the redo log ([`crate::log`]): every commit since the checkpoint.
//! - `checkpoint-<log version>.ckpt`: the checkpoint files ([`checkpoint`]): the manifest
//!   names the last one, whose catalog names the older files it still uses. Recovery verifies
//!   and maps them, then replays the log after the last.

mod blobs;
pub mod checkpoint;
pub mod redo;
mod strings;
pub mod texts;
mod writer;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::key_index::{KeyIndex, KeyIndexWriter};
use crate::log::{LogError, LogOptions, LogReader, LogWriter, Tail};
use crate::table::{RowError, TableVersion, TableWriter, MAX_ROW_WIDTH};
use crate::{DirLock, Durability, Holder, LockError};

pub use blobs::text_heap_bytes;
pub use redo::DecodeError;
pub use strings::{StringError, StringsVersion};
pub use writer::{Savepoint, Writer};

/// The manifest's file name in the database directory.
pub const MANIFEST: &str = "manifest";
const MAGIC: &[u8; 8] = b"ESPTAB02";
/// Longest catalog kept in the manifest.
pub const MAX_CATALOG: usize = 16 << 20;
/// Pages the writer swaps for their mapped copies per hold of its lock, after a checkpoint:
/// bounds the pause a commit can meet.
const SWAP_SLICE: usize = 1024;
/// The pause between two slices of the swap, in which a waiting commit takes the lock.
const SWAP_GAP: std::time::Duration = std::time::Duration::from_micros(50);
/// Most tables and key indexes a shape may have.
pub const MAX_STRUCTURES: usize = 1 << 20;

/// What the layer above stores: the row width of each table (0 for a number that has no
/// table), and the number of key indexes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shape {
    /// Row width of table `i` in bytes (0: no table).
    pub tables: Vec<u32>,
    /// Key indexes `0..indexes`.
    pub indexes: u32,
}

/// Read access to one version: a [`Snapshot`] or the [`Writer`]'s own (which sees its writes).
pub trait Read {
    /// Table `table`'s version (`None` for a number that is not a table).
    fn table(&self, table: u32) -> Option<&TableVersion>;
    /// Key index `index`.
    fn index(&self, index: u32) -> Option<&KeyIndex>;
    /// The bytes of string `id` (empty for 0), `None` if it is not stored.
    fn string(&self, id: u64) -> Option<&[u8]>;
    /// How many slots hold string `id`.
    fn string_count(&self, id: u64) -> Option<u64>;
    /// Meta value `name`.
    fn meta(&self, name: &[u8]) -> Option<&[u8]>;
    /// The string table as it is in this version (shares its structure: constant time).
    fn string_table(&self) -> StringsVersion;
    /// The layer above's version of the last commit seen.
    fn version(&self) -> u64;

    /// Row `row` of table `table`, if live.
    #[inline]
    fn row(&self, table: u32, row: u32) -> Option<&[u8]> {
        self.table(table)?.row(row)
    }
}

/// One published version: never changes, however the writer goes on.
#[derive(Debug)]
pub struct Snapshot {
    tables: Vec<TableVersion>,
    indexes: Vec<KeyIndex>,
    strings: StringsVersion,
    meta: Arc<BTreeMap<Vec<u8>, Vec<u8>>>,
    version: u64,
    /// Publishes before and including this one (row reuse waits for the oldest held).
    publish: u64,
    /// The last log version this snapshot includes (a checkpoint of it covers the log to here).
    log_version: u64,
    /// Bytes appended to the log since open, through this snapshot's commit.
    log_bytes: u64,
}

impl Read for Snapshot {
    #[inline]
    fn table(&self, table: u32) -> Option<&TableVersion> {
        self.tables.get(table as usize)
    }

    #[inline]
    fn index(&self, index: u32) -> Option<&KeyIndex> {
        self.indexes.get(index as usize)
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

    fn string_table(&self) -> StringsVersion {
        self.strings.clone()
    }

    fn version(&self) -> u64 {
        self.version
    }
}

impl Snapshot {
    /// The string table (for checks: every string with its count).
    pub fn strings(&self) -> &StringsVersion {
        &self.strings
    }

    /// Bytes the data would take on disk: rows, key index nodes, strings.
    pub fn disk_bytes(&self) -> u64 {
        self.tables.iter().map(TableVersion::disk_bytes).sum::<u64>()
            + self.indexes.iter().map(KeyIndex::disk_bytes).sum::<u64>()
            + self.strings.disk_bytes()
    }
}

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    /// The directory holds no database (no manifest).
    #[error("{} is not an Espalier database directory (no {MANIFEST}); run `espalier init` first", .0.display())]
    NotADatabase(PathBuf),
    /// A database is already there.
    #[error("{} already holds a database", .0.display())]
    Exists(PathBuf),
    /// A checkpoint file does not verify.
    #[error("the checkpoint {} is damaged: {why}", .path.display())]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong, and where.
        why: String,
    },
    /// The manifest does not verify or is of another format.
    #[error("the manifest {} is damaged or of another format: {why}", .path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The shape the layer above computed differs from the one the database was made with.
    #[error("the database's tables ({stored}) differ from the schema's ({given})")]
    ShapeMismatch {
        /// The shape in the manifest.
        stored: String,
        /// The shape the schema gives.
        given: String,
    },
    /// A shape out of bounds.
    #[error("invalid shape: {0}")]
    Shape(String),
    /// The log is damaged before its end: recovery stops rather than serve a guess.
    #[error("the log is damaged at {} offset {offset} after version {version}, and valid records follow (from version {resumes_at}): the database is not opened, since serving it would drop the commits after the damage; restore it from a backup or an export", .segment.display())]
    Corrupt {
        /// The damaged segment.
        segment: PathBuf,
        /// Where in it.
        offset: u64,
        /// The last good version before the damage.
        version: u64,
        /// The version of the first valid record after it.
        resumes_at: u64,
    },
    /// A committed operation that cannot be replayed.
    #[error("log record of version {log_version} cannot be replayed: {why}")]
    Replay {
        /// The record's log version.
        log_version: u64,
        /// Why it cannot be applied.
        why: String,
    },
    /// The directory lock.
    #[error(transparent)]
    Locked(#[from] LockError),
    /// The log (I/O, full disk, a failed fsync).
    #[error(transparent)]
    Log(#[from] LogError),
    /// A file other than the log.
    #[error("I/O error on {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// An earlier log failure stopped writes; reopen the database.
    #[error("writes are stopped by an earlier failure: {reason}; reopen the database to recover")]
    Poisoned {
        /// The failure that stopped writes.
        reason: String,
    },
    /// Bad arguments from the layer above: no table of that number.
    #[error("no table {table}")]
    NoTable {
        /// The number given.
        table: u32,
    },
    /// No key index of that number.
    #[error("no key index {index}")]
    NoIndex {
        /// The number given.
        index: u32,
    },
    /// A row that is not live.
    #[error("row {row} of table {table} is not live")]
    NoRow {
        /// The table.
        table: u32,
        /// The row.
        row: u32,
    },
    /// Bytes that are not one row wide.
    #[error("table {table} has rows of {width} bytes, given {len}")]
    Width {
        /// The table.
        table: u32,
        /// The bytes given.
        len: usize,
        /// The table's row width.
        width: usize,
    },
    /// Bytes that would reach past the end of a row.
    #[error("table {table} has rows of {width} bytes, given {len} at byte {at}")]
    Span {
        /// The table.
        table: u32,
        /// Where the bytes were to start.
        at: usize,
        /// The bytes given.
        len: usize,
        /// The table's row width.
        width: usize,
    },
    /// A table that holds [`crate::table::MAX_ROW`] rows.
    #[error("table {table} is full")]
    TableFull {
        /// The table.
        table: u32,
    },
    /// A key over [`crate::key_index::MAX_KEY_LEN`].
    #[error("a key of {len} bytes is over the key index's limit")]
    KeyTooLong {
        /// The key's bytes.
        len: usize,
    },
    /// The string table.
    #[error(transparent)]
    String(#[from] StringError),
}

impl TablesError {
    /// True for a full disk (or quota): the log could not prepare its next segment (the
    /// commit failed whole, writes go on once space is freed), or a checkpoint could not be
    /// written.
    pub fn is_storage_full(&self) -> bool {
        match self {
            TablesError::Log(e) => e.is_storage_full(),
            TablesError::Io { source, .. } => crate::log::is_full(source),
            _ => false,
        }
    }
}

impl From<RowError> for TablesError {
    fn from(e: RowError) -> Self {
        TablesError::Shape(e.to_string())
    }
}

/// How a database is opened.
#[derive(Debug, Clone)]
pub struct TablesOptions {
    /// When a commit is durable.
    pub durability: Durability,
    /// Who holds the directory lock.
    pub holder: Holder,
    /// Log segment size.
    pub segment_size: u64,
}

impl Default for TablesOptions {
    fn default() -> Self {
        TablesOptions { durability: Durability::Sync, holder: Holder::Process, segment_size: 64 << 20 }
    }
}

/// What recovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// Commits replayed.
    pub commits: u64,
    /// Bytes of log read.
    pub log_bytes: u64,
    /// A torn last write was cut at (segment, offset).
    pub torn: Option<(PathBuf, u64)>,
    /// The log version of the checkpoint recovery started from (0: none).
    pub checkpoint: u64,
}

/// What a checkpoint wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpointed {
    /// The log version it covers.
    pub log_version: u64,
    /// Its file's size.
    pub bytes: u64,
    /// Log segments deleted after it.
    pub segments_deleted: usize,
    /// Table pages and key index leaves written to its file (the others were mapped from
    /// older files and named there).
    pub written: usize,
    /// Of those, the ones the writer swapped for their mapped copies (not changed since).
    pub swapped: usize,
    /// The longest the writer was held for one slice of the swap.
    pub swap_pause: std::time::Duration,
}

/// An open database on tables: the lock, the writer, the published version.
pub struct Tables {
    dir: PathBuf,
    lock: DirLock,
    writer: Mutex<Writer>,
    slot: Arc<Mutex<Arc<Snapshot>>>,
    shape: Shape,
    catalog: Vec<u8>,
    recovered: Recovered,
    /// Held while a checkpoint is written (one at a time): the log version of the last one,
    /// and where the texts lie in the checkpoint files.
    checkpointing: Mutex<(u64, checkpoint::TextState)>,
    /// Log bytes (since open) the last checkpoint covers.
    checkpointed_bytes: AtomicU64,
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables").field("dir", &self.dir).finish()
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TablesError + '_ {
    move |source| TablesError::Io { path: path.to_path_buf(), source }
}

fn check_shape(shape: &Shape) -> Result<(), TablesError> {
    if shape.tables.len() > MAX_STRUCTURES || shape.indexes as usize > MAX_STRUCTURES {
        return Err(TablesError::Shape(format!(
            "{} tables and {} key indexes; at most {MAX_STRUCTURES} of each",
            shape.tables.len(),
            shape.indexes
        )));
    }
    if let Some(w) = shape.tables.iter().find(|&&w| w as usize > MAX_ROW_WIDTH) {
        return Err(TablesError::Shape(format!("a row of {w} bytes is wider than {MAX_ROW_WIDTH}")));
    }
    Ok(())
}

fn encode_manifest(shape: &Shape, catalog: &[u8], checkpoint: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(32 + shape.tables.len() * 4 + catalog.len());
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&(shape.tables.len() as u32).to_le_bytes());
    for w in &shape.tables {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b.extend_from_slice(&shape.indexes.to_le_bytes());
    b.extend_from_slice(&(catalog.len() as u64).to_le_bytes());
    b.extend_from_slice(catalog);
    b.extend_from_slice(&checkpoint.to_le_bytes());
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

fn decode_manifest(path: &Path, b: &[u8]) -> Result<Manifest, TablesError> {
    let bad = |why: &str| TablesError::Manifest { path: path.to_path_buf(), why: why.to_string() };
    let (body, crc) = b.split_at_checked(b.len().saturating_sub(4)).ok_or_else(|| bad("too short"))?;
    if b.len() < 4 + MAGIC.len() || crc32c::crc32c(body).to_le_bytes() != crc {
        return Err(bad("checksum mismatch"));
    }
    if &body[..8] != MAGIC {
        return Err(bad("not a manifest of this format"));
    }
    let mut at = 8;
    let mut take = |n: usize| -> Result<&[u8], TablesError> {
        let s = body.get(at..at + n).ok_or_else(|| bad("truncated"))?;
        at += n;
        Ok(s)
    };
    let u32_of = |s: &[u8]| u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let n = u32_of(take(4)?) as usize;
    if n > MAX_STRUCTURES {
        return Err(bad("too many tables"));
    }
    let mut tables = Vec::with_capacity(n);
    for _ in 0..n {
        tables.push(u32_of(take(4)?));
    }
    let indexes = u32_of(take(4)?);
    let len = take(8)?;
    let len = u64::from_le_bytes(len.try_into().map_err(|_| bad("truncated"))?) as usize;
    if len > MAX_CATALOG {
        return Err(bad("catalog too large"));
    }
    let catalog = take(len)?.to_vec();
    let checkpoint = u64::from_le_bytes(take(8)?.try_into().map_err(|_| bad("truncated"))?);
    Ok(Manifest { shape: Shape { tables, indexes }, catalog, checkpoint })
}

/// What the manifest says.
struct Manifest {
    shape: Shape,
    catalog: Vec<u8>,
    /// The log version the checkpoint covers (0: no checkpoint).
    checkpoint: u64,
}

/// Writes `bytes` to `dir/name` atomically: a temporary file, fsynced, renamed, the directory
/// fsynced.
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), TablesError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))?;
    Ok(())
}

fn empty_structures(shape: &Shape) -> (Vec<TableWriter>, Vec<KeyIndexWriter>) {
    // A number without a table gets a one-byte table nobody writes: indexes stay positions.
    let tables = shape.tables.iter().map(|&w| TableWriter::new((w as usize).max(1))).collect();
    let indexes = (0..shape.indexes).map(|_| KeyIndexWriter::new()).collect();
    (tables, indexes)
}

impl Tables {
    /// Whether `dir` holds a database on tables.
    pub fn exists(dir: &Path) -> bool {
        dir.join(MANIFEST).exists()
    }

    /// Reads the catalog (and shape) from the manifest of the database in `dir`, without
    /// opening it.
    pub fn read_manifest(dir: &Path) -> Result<(Shape, Vec<u8>), TablesError> {
        let m = Tables::manifest(dir)?;
        Ok((m.shape, m.catalog))
    }

    fn manifest(dir: &Path) -> Result<Manifest, TablesError> {
        let path = dir.join(MANIFEST);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(TablesError::NotADatabase(dir.to_path_buf()))
            }
            Err(e) => return Err(io(&path)(e)),
        };
        decode_manifest(&path, &bytes)
    }

    /// Creates an empty database in `dir` (made if missing) with `shape` and `catalog`.
    pub fn create(dir: &Path, shape: Shape, catalog: &[u8], options: TablesOptions) -> Result<Tables, TablesError> {
        check_shape(&shape)?;
        if catalog.len() > MAX_CATALOG {
            return Err(TablesError::Shape(format!("a catalog of {} bytes is over {MAX_CATALOG}", catalog.len())));
        }
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let lock = DirLock::acquire(dir, options.holder)?;
        if Tables::exists(dir) {
            return Err(TablesError::Exists(dir.to_path_buf()));
        }
        write_atomic(dir, MANIFEST, &encode_manifest(&shape, catalog, 0))?;
        Tables::start(dir, lock, Manifest { shape, catalog: catalog.to_vec(), checkpoint: 0 }, options)
    }

    /// Opens the database in `dir`, checking that its shape is `shape`; recovers it from the
    /// log (a torn last write is cut; damage before the end refuses to open).
    pub fn open(dir: &Path, shape: Shape, options: TablesOptions) -> Result<Tables, TablesError> {
        check_shape(&shape)?;
        if !Tables::exists(dir) {
            return Err(TablesError::NotADatabase(dir.to_path_buf()));
        }
        let lock = DirLock::acquire(dir, options.holder)?;
        let manifest = Tables::manifest(dir)?;
        if manifest.shape != shape {
            let (stored, given) = (format!("{:?}", manifest.shape), format!("{shape:?}"));
            return Err(TablesError::ShapeMismatch { stored, given });
        }
        Tables::start(dir, lock, manifest, options)
    }

    fn start(dir: &Path, lock: DirLock, manifest: Manifest, options: TablesOptions) -> Result<Tables, TablesError> {
        let Manifest { shape, catalog, checkpoint } = manifest;
        let (mut tables, mut indexes) = empty_structures(&shape);
        let mut strings = strings::StringsWriter::default();
        let mut texts = checkpoint::TextState::default();
        let mut meta = BTreeMap::new();
        let mut version = 0;
        if checkpoint > 0 {
            let path = dir.join(checkpoint::file_name(checkpoint));
            // Format 2 gives the tables and key indexes mapped, and only strings, meta values
            // and the version as operations; format 1 gives everything as operations.
            let mut r = Replay { tables: &mut tables, indexes: &mut indexes, strings: &mut strings, meta: &mut meta };
            let (covered, loaded) = checkpoint::load(dir, &path, &shape.tables, shape.indexes, &mut |ops| {
                if let Some(v) = r.apply(ops)? {
                    version = v;
                }
                Ok(())
            })?;
            if let Some(loaded) = loaded {
                tables = loaded.tables;
                indexes = loaded.indexes;
                // Format 3: the strings are mapped; format 2 gave them as operations above.
                if let Some(l) = loaded.strings {
                    texts = l.state;
                    strings = strings::StringsWriter::from_checkpoint(l.counts, texts.mapped(), &l.hashes);
                }
            }
            if covered != checkpoint {
                return Err(TablesError::Checkpoint {
                    path,
                    why: format!("it covers log version {covered}, the manifest says {checkpoint}"),
                });
            }
        }
        let mut reader = LogReader::open(dir, checkpoint + 1)?;
        let mut commit: Vec<u8> = Vec::new();
        let mut commits = 0;
        while let Some(record) = reader.next_record()? {
            let (flags, ops) = record
                .payload
                .split_first()
                .ok_or_else(|| TablesError::Replay { log_version: record.version, why: "empty payload".into() })?;
            if flags & redo::FIRST != 0 {
                commit.clear();
            }
            commit.extend_from_slice(ops);
            if flags & redo::LAST != 0 {
                let mut r =
                    Replay { tables: &mut tables, indexes: &mut indexes, strings: &mut strings, meta: &mut meta };
                let replayed =
                    r.apply(&commit).map_err(|why| TablesError::Replay { log_version: record.version, why })?;
                version = replayed.ok_or_else(|| TablesError::Replay {
                    log_version: record.version,
                    why: "a commit without its version".into(),
                })?;
                commit.clear();
                commits += 1;
            }
        }
        let end = reader.end()?;
        let torn = match &end.tail {
            Tail::Clean => None,
            Tail::Torn { segment, offset } => Some((segment.clone(), *offset)),
            Tail::Corrupt { segment, offset, version, resumes_at } => {
                return Err(TablesError::Corrupt {
                    segment: segment.clone(),
                    offset: *offset,
                    version: *version,
                    resumes_at: *resumes_at,
                })
            }
        };
        // A commit whose last record is missing was never acknowledged: cut it with the tail.
        end.cut()?;
        // Records of a commit whose last record is missing (a crash between two appends of
        // one large commit) were never acknowledged: `commit` holds them and is dropped; the
        // next commit's first record tells replay to drop them again on the next open.
        let next = end.last_version.map_or(checkpoint + 1, |v| (v + 1).max(checkpoint + 1));
        for t in &mut tables {
            t.rebuild_free();
        }
        strings.rebuild_free();
        let log_options =
            LogOptions { durability: options.durability, segment_size: options.segment_size, ..LogOptions::default() };
        let log = LogWriter::open(dir, log_options, next)?;
        let writer = Writer::new(tables, indexes, strings, meta, version, log);
        let slot = writer.slot.clone();
        Ok(Tables {
            dir: dir.to_path_buf(),
            lock,
            writer: Mutex::new(writer),
            slot,
            shape,
            catalog,
            recovered: Recovered { commits, log_bytes: end.bytes, torn, checkpoint },
            checkpointing: Mutex::new((checkpoint, texts)),
            checkpointed_bytes: AtomicU64::new(0),
        })
    }

    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory lock (a server records its address in it).
    pub fn dir_lock(&self) -> &DirLock {
        &self.lock
    }

    /// The catalog given at create.
    pub fn catalog(&self) -> &[u8] {
        &self.catalog
    }

    /// What recovery found when this database was opened.
    pub fn recovered(&self) -> &Recovered {
        &self.recovered
    }

    /// The last published version, for reading.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The writer (one at a time).
    pub fn writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Log bytes written since the last checkpoint (or since open).
    pub fn log_bytes_since_checkpoint(&self) -> u64 {
        self.snapshot().log_bytes.saturating_sub(self.checkpointed_bytes.load(Ordering::Acquire))
    }

    /// Writes the last published version as a checkpoint and switches to it (manifest), then
    /// deletes the log segments and the checkpoint it replaces. Commits go on meanwhile: it
    /// reads an immutable snapshot. `None` if nothing was committed since the last checkpoint.
    pub fn checkpoint(&self) -> Result<Option<Checkpointed>, TablesError> {
        let mut guard = self.checkpointing.lock().unwrap_or_else(|p| p.into_inner());
        let (last, texts) = &mut *guard;
        let snapshot = self.snapshot();
        if snapshot.log_version <= *last {
            return Ok(None);
        }
        let saved = texts.save();
        let written = checkpoint::write(&self.dir, &snapshot, snapshot.log_version, self.shape.tables.len(), texts)?;
        let switched = crate::mapping::MappedFile::open(&written.path, written.generation)
            .map_err(io(&written.path))
            .and_then(|file| {
                write_atomic(&self.dir, MANIFEST, &encode_manifest(&self.shape, &self.catalog, snapshot.log_version))?;
                Ok(file)
            });
        let file = switched.inspect_err(|_| {
            // The manifest names the previous checkpoint, whose files are all still there (or
            // the new one, if only the directory's fsync failed: the same data). Either way
            // the texts' places go back to the previous one's: nothing was swapped, so the
            // next checkpoint writes everything this one did again.
            texts.restore(&saved);
        })?;
        *last = snapshot.log_version;
        self.checkpointed_bytes.store(snapshot.log_bytes, Ordering::Release);
        let mut segments_deleted = crate::log::truncate_before(&self.dir, snapshot.log_version + 1)?;
        checkpoint::remove_others(&self.dir, &written.files)?;
        // The text directory's pages are the checkpoint's own: swapped at once. Then the
        // writer reads the texts just written through it and drops their heap copies.
        let owner: Arc<dyn crate::table::StableBytes> = file.clone();
        let dir_written = texts.dir.current().clone();
        for w in &written.dir_pages {
            let mapped = crate::table::Page::mapped(owner.clone(), w.offset as usize, dir_written.layout(), w.crc);
            if let (Some(was), Some(mapped)) = (dir_written.page(w.page), mapped) {
                texts.dir.swap_in_mapped(w.page, was, mapped);
            }
        }
        drop(dir_written);
        texts.files.insert(written.generation, file.clone());
        texts.files.retain(|g, _| texts.live.contains_key(g));
        let mapped = texts.mapped();
        let (mut swapped, mut swap_pause) = (0, std::time::Duration::ZERO);
        let mut timed = |swap: &mut dyn FnMut(&mut Writer) -> usize| {
            let mut w = self.writer();
            let started = std::time::Instant::now();
            swapped += swap(&mut w);
            swap_pause = swap_pause.max(started.elapsed());
            drop(w);
            // The lock is not fair: without a pause this thread takes it again before a
            // waiting commit is scheduled, and the commit waits out every slice (measured:
            // p99.99 of a commit 1.6 ms with 4,096-page slices back to back).
            std::thread::sleep(SWAP_GAP);
        };
        for slice in written.pages.chunks(SWAP_SLICE) {
            timed(&mut |w| w.swap_in_mapped_pages(&snapshot, &file, slice));
        }
        for (i, leaves) in &written.leaves {
            timed(&mut |w| w.swap_in_mapped_leaves(&snapshot, &file, *i, leaves));
        }
        timed(&mut |w| {
            w.strings.swap_in_mapped_texts(&snapshot.strings, mapped.clone());
            0
        });
        // Last, once the checkpoint is wholly in place: if nothing was committed since the
        // snapshot, the segment being written is covered too.
        segments_deleted += usize::from(self.writer().log.retire_covered(snapshot.log_version)?);
        Ok(Some(Checkpointed {
            log_version: snapshot.log_version,
            bytes: written.bytes,
            segments_deleted,
            written: written.count(),
            swapped,
            swap_pause,
        }))
    }
}

/// Applies a commit's operations to the structures being recovered.
struct Replay<'a> {
    tables: &'a mut Vec<TableWriter>,
    indexes: &'a mut Vec<KeyIndexWriter>,
    strings: &'a mut strings::StringsWriter,
    meta: &'a mut BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Replay<'_> {
    /// Applies `ops`; returns the version they end with, if they carry one.
    fn apply(&mut self, ops: &[u8]) -> Result<Option<u64>, String> {
        use redo::Op;
        let mut read = redo::Ops::new(ops);
        let mut version = None;
        for _ in 0..=ops.len() {
            let Some(op) = read.next_op().map_err(|e| e.to_string())? else {
                return Ok(version);
            };
            match op {
                Op::Put { table, row, bytes } => {
                    let t = self.tables.get_mut(table as usize).ok_or_else(|| format!("no table {table}"))?;
                    t.put_at(row, bytes).map_err(|e| e.to_string())?;
                }
                Op::Free { table, row } => {
                    self.tables.get_mut(table as usize).ok_or_else(|| format!("no table {table}"))?.clear_at(row);
                }
                Op::KeyPut { index, owner, row, key } => {
                    let i = self.indexes.get_mut(index as usize).ok_or_else(|| format!("no key index {index}"))?;
                    i.insert(owner, key, row).map_err(|e| format!("key of {} bytes", e.len))?;
                }
                Op::KeyRemove { index, owner, key } => {
                    self.indexes
                        .get_mut(index as usize)
                        .ok_or_else(|| format!("no key index {index}"))?
                        .remove(owner, key);
                }
                Op::StringStored { id, bytes } => self.strings.put_at(id, 1, bytes).map_err(|e| e.to_string())?,
                Op::StringCount { id, count } => self.strings.set_count_at(id, count).map_err(|e| e.to_string())?,
                Op::StringFreed { id } => self.strings.clear_at(id),
                Op::Meta { name, value } => {
                    self.meta.insert(name.to_vec(), value.to_vec());
                }
                Op::Version(v) => version = Some(v),
            }
        }
        Err("too many operations".into())
    }
}

#[cfg(test)]
mod tests;
