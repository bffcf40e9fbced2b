//! [`LogWriter`]: appends batches, one write each (a `pwrite`, or a copy into the mapped
//! segment in `none` and `periodic` mode) and in `sync` mode one `fdatasync`, rolls
//! segments, prepares the next segment in the background, and poisons itself on a failure.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::format::{LogBatch, MAX_BATCH_BYTES, SEGMENT_HEADER_LEN};
#[cfg(any(test, feature = "fault-injection"))]
use super::segment::Faults;
use super::segment::{
    list_segments, prepare, segment_name, sync_dir, LogFile, Preparation, SegmentMap, MAX_SEGMENT_SIZE,
    MIN_SEGMENT_SIZE,
};
use super::{log_dir, LogError};
use crate::Durability;

/// How the log is written.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// When an append is durable: `Sync` — on return (one `fdatasync` per batch); `Periodic` —
    /// within the interval (a background `fdatasync`); `None` — when the OS writes back.
    pub durability: Durability,
    /// A segment is closed and the next begun when a batch would not fit. Segments start at
    /// a 1024th of this (at least [`MIN_SEGMENT_SIZE`]) and double with each new segment up to
    /// it (64 MiB by default), so that a database that writes little keeps a small log.
    pub segment_size: u64,
    /// How segment space is made ready (pre-zeroed by default).
    pub preparation: Preparation,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions { durability: Durability::Sync, segment_size: 64 << 20, preparation: Preparation::PreZeroed }
    }
}

/// What an append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The batch's first version.
    pub first_version: u64,
    /// The batch's last version.
    pub last_version: u64,
    /// True when the batch is on disk now (`sync` mode); otherwise it is written to the OS.
    pub durable: bool,
}

/// The segment being written.
struct Current {
    file: Arc<LogFile>,
    /// Offset after the last record written.
    end: u64,
    /// The size the segment was prepared with: a batch that would end past it starts the next.
    size: u64,
}

/// What the writer shares with its background `fdatasync` thread (`periodic` mode).
struct Shared {
    /// Why the log is poisoned, once it is.
    poison: Mutex<Option<String>>,
    poisoned: AtomicBool,
    /// The segment the syncer flushes, and the end of the data written to it.
    current: Mutex<Option<Arc<LogFile>>>,
    end: AtomicU64,
    /// Something was written since the last background `fdatasync`.
    dirty: AtomicBool,
    stop: Mutex<bool>,
    wake: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn poison(&self, error: &LogError) {
        let mut reason = lock(&self.poison);
        if reason.is_none() {
            *reason = Some(error.to_string());
        }
        self.poisoned.store(true, Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), LogError> {
        if !self.poisoned.load(Ordering::SeqCst) {
            return Ok(());
        }
        let reason = lock(&self.poison).clone().unwrap_or_default();
        Err(LogError::Poisoned { reason })
    }
}

/// A prepared segment file, not yet part of the log.
struct Prepared {
    file: std::fs::File,
    path: PathBuf,
    size: u64,
}

/// The size of the first segment a writer prepares (in a new log, and after a checkpoint
/// retired the log): a 1024th of the largest, at least [`MIN_SEGMENT_SIZE`], a multiple of 8.
/// Small because an idle database keeps this one, pre-zeroed, beside its checkpoint (64 KiB
/// by default); a busy one doubles past it within a few segments.
fn first_segment_size(largest: u64) -> u64 {
    (largest / 1024).max(MIN_SEGMENT_SIZE).min(largest) & !7
}

/// Appends batches of records to the log in `DIR/log`. One per database; not shared between
/// threads (the group-commit leader owns it while it writes a batch).
pub struct LogWriter {
    log_dir: PathBuf,
    options: LogOptions,
    current: Option<Current>,
    next_version: u64,
    shared: Arc<Shared>,
    /// The next segment, being prepared in the background.
    preparer: Option<JoinHandle<Result<Prepared, LogError>>>,
    prepared_seq: u64,
    /// The size of the next segment to prepare (doubling up to `options.segment_size`).
    next_size: u64,
    syncer: Option<JoinHandle<()>>,
    #[cfg(any(test, feature = "fault-injection"))]
    faults: Arc<Faults>,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("log_dir", &self.log_dir)
            .field("next_version", &self.next_version)
            .field("poisoned", &self.shared.poisoned.load(Ordering::Relaxed))
            .finish()
    }
}

impl LogWriter {
    /// Opens the log of the database directory `db_dir` for appending from `next_version` (the
    /// version after the last one recovered: from the log's [`super::LogEnd`], or the
    /// checkpoint's if later). The first append starts a new segment; existing segments are
    /// kept as they are (recover and [`super::LogEnd::cut`] first, so none is damaged).
    /// Refuses if a segment already starts at or after `next_version`.
    pub fn open(db_dir: &Path, options: LogOptions, next_version: u64) -> Result<LogWriter, LogError> {
        if !(MIN_SEGMENT_SIZE..=MAX_SEGMENT_SIZE).contains(&options.segment_size) || options.segment_size & 7 != 0 {
            return Err(LogError::Options(format!(
                "segment size {} is not a multiple of 8 between {MIN_SEGMENT_SIZE} and {MAX_SEGMENT_SIZE}",
                options.segment_size
            )));
        }
        if options.durability == Durability::Periodic(Duration::ZERO) {
            return Err(LogError::Options("a periodic sync interval must be longer than zero".into()));
        }
        if next_version == 0 {
            return Err(LogError::VersionOrder { expected: 1, got: 0 });
        }
        let dir = log_dir(db_dir);
        if !dir.is_dir() {
            std::fs::create_dir_all(&dir).map_err(LogError::io(&dir, 0))?;
            if options.durability != Durability::None {
                sync_dir(db_dir)?;
            }
        }
        // Leftovers of a preparation cut short: never part of the log.
        for entry in std::fs::read_dir(&dir).map_err(LogError::io(&dir, 0))? {
            let path = entry.map_err(LogError::io(&dir, 0))?.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                std::fs::remove_file(&path).map_err(LogError::io(&path, 0))?;
            }
        }
        if let Some((first, path)) = list_segments(&dir)?.pop() {
            if first >= next_version {
                return Err(LogError::Overlap { path, first, next: next_version });
            }
        }
        let shared = Arc::new(Shared {
            poison: Mutex::new(None),
            poisoned: AtomicBool::new(false),
            current: Mutex::new(None),
            end: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let next_size = first_segment_size(options.segment_size);
        let mut writer = LogWriter {
            log_dir: dir,
            options,
            current: None,
            next_version,
            shared,
            preparer: None,
            prepared_seq: 0,
            next_size,
            syncer: None,
            #[cfg(any(test, feature = "fault-injection"))]
            faults: Faults::new(),
        };
        writer.spawn_preparer();
        if let Durability::Periodic(every) = writer.options.durability {
            let shared = writer.shared.clone();
            let thread = std::thread::Builder::new()
                .name("espalier-log-sync".into())
                .spawn(move || background_sync(&shared, every))
                .map_err(LogError::io(&writer.log_dir, 0))?;
            writer.syncer = Some(thread);
        }
        Ok(writer)
    }

    /// The version the next batch must start with.
    pub fn next_version(&self) -> u64 {
        self.next_version
    }

    /// The log directory (`DIR/log`).
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// The fault hook of this writer's files (tests, `fault-injection` feature).
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn faults(&self) -> Arc<Faults> {
        self.faults.clone()
    }

    /// Appends `batch` with one write, then makes it durable as the mode says (`sync`: one
    /// `fdatasync` before returning). A batch that does not fit in the current segment starts
    /// the next one (then the write also carries the segment header, and the segment is
    /// renamed into the log and the directory synced: once per segment).
    ///
    /// A write or `fdatasync` failure returns its error and poisons the writer: every later
    /// append returns [`LogError::Poisoned`]. The batch is not consumed; the caller clears it.
    pub fn append(&mut self, batch: &mut LogBatch) -> Result<Appended, LogError> {
        self.shared.check()?;
        let (Some(first_version), Some(last_version)) = (batch.first_version(), batch.last_version()) else {
            return Err(LogError::EmptyBatch);
        };
        if first_version != self.next_version {
            return Err(LogError::VersionOrder { expected: self.next_version, got: first_version });
        }
        let len = batch.encoded_len();
        let capacity = (self.options.segment_size as usize - SEGMENT_HEADER_LEN).min(MAX_BATCH_BYTES);
        if len > capacity {
            return Err(LogError::BatchTooLarge { len, max: capacity });
        }
        let fits = self.current.as_ref().is_some_and(|c| c.end + len as u64 <= c.size);
        if fits {
            self.write_batch(batch.records_bytes())?;
        } else {
            self.start_segment(batch)?;
        }
        self.next_version = last_version + 1;
        Ok(Appended { first_version, last_version, durable: self.options.durability == Durability::Sync })
    }

    /// Whether the current segment is written through memory ([`SegmentMap`]).
    #[cfg(test)]
    pub(super) fn is_mapped(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.file.map.is_some())
    }

    /// Makes everything appended so far durable (for `none` and `periodic` callers, and close).
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.shared.check()?;
        if let Some(current) = &self.current {
            current.file.sync(current.end).inspect_err(|e| self.shared.poison(e))?;
        }
        Ok(())
    }

    /// Deletes the segments that hold only versions before `version` (those a checkpoint at
    /// `version - 1` covers). Never the segment being written. Returns how many it deleted.
    pub fn truncate_before(&self, version: u64) -> Result<usize, LogError> {
        super::reader::truncate_log_before(&self.log_dir, version)
    }

    /// Deletes the segment being written when a checkpoint covers every version appended
    /// (`covered` is the last one: no append came after it), so that a database that is not
    /// writing keeps no log beside its checkpoint. The segment prepared ahead is deleted too
    /// and a first-size one prepared instead: the next append starts a small segment, as in a
    /// new log. Returns whether it retired the segment.
    ///
    /// Safe against a crash at any point: the checkpoint holds every record of the segment,
    /// and recovery reads an empty log after it as the end of the data.
    pub fn retire_covered(&mut self, covered: u64) -> Result<bool, LogError> {
        // A poisoned log keeps its files for the reopen that must follow.
        if self.shared.poisoned.load(Ordering::SeqCst) || covered.checked_add(1) != Some(self.next_version) {
            return Ok(false);
        }
        let Some(current) = self.current.take() else { return Ok(false) };
        // The background syncer (periodic mode) follows no segment until the next append.
        *lock(&self.shared.current) = None;
        std::fs::remove_file(&current.file.path).map_err(LogError::io(&current.file.path, 0))?;
        if let Some(thread) = self.preparer.take() {
            if let Ok(Ok(prepared)) = thread.join() {
                std::fs::remove_file(&prepared.path).map_err(LogError::io(&prepared.path, 0))?;
            }
        }
        if self.options.durability != Durability::None {
            sync_dir(&self.log_dir)?;
        }
        self.next_size = first_segment_size(self.options.segment_size);
        self.spawn_preparer();
        Ok(true)
    }

    /// One write of the records at the end of the current segment, then the mode's sync.
    fn write_batch(&mut self, records: &[u8]) -> Result<(), LogError> {
        let Some(current) = self.current.as_mut() else {
            return Err(LogError::Options("no segment to append to".into()));
        };
        let result = current.file.write_at(records, current.end).and_then(|()| {
            let end = current.end + records.len() as u64;
            if self.options.durability == Durability::Sync {
                current.file.sync(end)?;
            }
            Ok(end)
        });
        let end = result.inspect_err(|e| self.shared.poison(e))?;
        current.end = end;
        self.after_write(end);
        Ok(())
    }

    /// Starts a segment with `batch`: its header and records in one write into the prepared
    /// file, synced (per mode), then renamed into the log and the directory synced. The data
    /// is durable before the name is, so a named segment never lacks its header for a reason
    /// other than a torn write in `periodic` or `none` mode.
    fn start_segment(&mut self, batch: &mut LogBatch) -> Result<(), LogError> {
        let durability = self.options.durability;
        if let (Some(old), Durability::Periodic(_)) = (&self.current, durability) {
            // The background syncer only follows the newest segment.
            old.file.sync(old.end).inspect_err(|e| self.shared.poison(e))?;
        }
        // Preparing writes nothing into the log: a failure (say a full disk) does not poison.
        let prepared = self.take_prepared()?;
        let first_version = batch.first_version().unwrap_or(self.next_version);
        let path = self.log_dir.join(segment_name(first_version));
        let result = (|| {
            // Writes go through memory where that is both faster and as safe (`SegmentMap`).
            let mapped = durability != Durability::Sync && self.options.preparation == Preparation::PreZeroed;
            let map = if mapped { SegmentMap::new(&prepared.file, prepared.size) } else { None };
            let file = LogFile {
                map,
                file: prepared.file,
                path: prepared.path.clone(),
                #[cfg(any(test, feature = "fault-injection"))]
                faults: self.faults.clone(),
            };
            let bytes = batch.with_segment_header();
            file.write_at(bytes, 0)?;
            let end = bytes.len() as u64;
            if durability == Durability::Sync {
                file.sync(end)?;
            }
            std::fs::rename(&prepared.path, &path).map_err(LogError::io(&path, 0))?;
            if durability != Durability::None {
                sync_dir(&self.log_dir)?;
            }
            Ok((LogFile { path: path.clone(), ..file }, end))
        })();
        let (file, end) = result.inspect_err(|e| self.shared.poison(e))?;
        let file = Arc::new(file);
        *lock(&self.shared.current) = Some(file.clone());
        // A batch larger than the prepared size made the file longer: later ones go on.
        self.current = Some(Current { file, end, size: prepared.size.max(end) });
        if end > prepared.size {
            // Segments this write rate fills at once are too small: the next fits it twice.
            self.next_size = self.next_size.max(end.saturating_mul(2).next_power_of_two());
            self.next_size = self.next_size.min(self.options.segment_size);
        }
        self.after_write(end);
        self.spawn_preparer();
        Ok(())
    }

    fn after_write(&self, end: u64) {
        if matches!(self.options.durability, Durability::Periodic(_)) {
            self.shared.end.store(end, Ordering::SeqCst);
            self.shared.dirty.store(true, Ordering::SeqCst);
        }
    }

    /// Starts preparing the next segment on its own thread; if no thread can be started, the
    /// next roll prepares it inline.
    fn spawn_preparer(&mut self) {
        self.prepared_seq += 1;
        let path = self.log_dir.join(format!("prepared-{:06}.tmp", self.prepared_seq));
        let (size, how, sync) =
            (self.take_size(), self.options.preparation, self.options.durability != Durability::None);
        let thread = std::thread::Builder::new()
            .name("espalier-log-prepare".into())
            .spawn(move || prepare(&path, size, how, sync).map(|file| Prepared { file, path, size }));
        self.preparer = thread.ok();
    }

    /// The size of the segment to prepare now; the next one is twice it, up to the largest.
    fn take_size(&mut self) -> u64 {
        let size = self.next_size;
        self.next_size = size.saturating_mul(2).min(self.options.segment_size);
        debug_assert!(size >= MIN_SEGMENT_SIZE.min(self.options.segment_size) && size & 7 == 0);
        size
    }

    fn take_prepared(&mut self) -> Result<Prepared, LogError> {
        let finished = match self.preparer.take() {
            Some(thread) => thread.join().unwrap_or_else(|_| {
                Err(LogError::io(&self.log_dir, 0)(std::io::Error::other("the segment preparer panicked")))
            }),
            None => Err(LogError::Options(String::new())),
        };
        #[cfg(any(test, feature = "fault-injection"))]
        if self.faults.fail_prepare.swap(false, Ordering::SeqCst) {
            if let Ok(prepared) = &finished {
                let _ = std::fs::remove_file(&prepared.path);
            }
            let source = std::io::Error::from_raw_os_error(libc::ENOSPC);
            return Err(LogError::Full { path: self.log_dir.clone(), source });
        }
        match finished {
            Ok(prepared) => Ok(prepared),
            // Prepare inline: the background attempt failed (or none ran); if this fails too,
            // the error is the caller's (the next append tries again).
            Err(_) => {
                self.prepared_seq += 1;
                let path = self.log_dir.join(format!("prepared-{:06}.tmp", self.prepared_seq));
                let size = self.take_size();
                let o = &self.options;
                let file = prepare(&path, size, o.preparation, o.durability != Durability::None)?;
                Ok(Prepared { file, path, size })
            }
        }
    }

    /// Makes everything appended durable, then closes the log: the current segment is cut to
    /// its data (its prepared space is not read again, since the next writer starts a new
    /// segment) and the next segment's preparation is deleted. Dropping the writer instead
    /// does not sync (`none` mode's promise) and cannot report errors.
    pub fn close(mut self) -> Result<(), LogError> {
        self.sync()?;
        if let Some(current) = &self.current {
            let file = &current.file;
            file.file.set_len(current.end).map_err(LogError::io(&file.path, current.end))?;
            file.sync(current.end).inspect_err(|e| self.shared.poison(e))?;
        }
        if let Some(thread) = self.preparer.take() {
            if let Ok(Ok(prepared)) = thread.join() {
                std::fs::remove_file(&prepared.path).map_err(LogError::io(&prepared.path, 0))?;
            }
        }
        Ok(())
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if let Some(thread) = self.syncer.take() {
            *lock(&self.shared.stop) = true;
            self.shared.wake.notify_all();
            let _ = thread.join();
        }
        // Let a preparation finish rather than leave a thread writing into the directory;
        // its file is deleted by the next open.
        if let Some(thread) = self.preparer.take() {
            let _ = thread.join();
        }
    }
}

/// `periodic` mode: every interval, `fdatasync` the current segment if it was written to. A
/// failure poisons the log (the next append reports it): it is never retried.
fn background_sync(shared: &Shared, every: Duration) {
    let mut stop = lock(&shared.stop);
    loop {
        stop = shared.wake.wait_timeout(stop, every).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
        if *stop || shared.poisoned.load(Ordering::SeqCst) {
            return;
        }
        if shared.dirty.swap(false, Ordering::SeqCst) {
            let file = lock(&shared.current).clone();
            if let Some(file) = file {
                if let Err(e) = file.sync(shared.end.load(Ordering::SeqCst)) {
                    shared.poison(&e);
                    return;
                }
            }
        }
    }
}
