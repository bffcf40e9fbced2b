//! Segment files: names, listing, how their space is prepared, and the one place where the log
//! writes and syncs (with the fault hook for tests).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
#[cfg(any(test, feature = "fault-injection"))]
use std::sync::Arc;

use super::LogError;

/// Smallest segment size accepted (tests use small segments to roll often).
pub const MIN_SEGMENT_SIZE: u64 = 4096;
/// Largest segment size accepted, and the largest segment file the reader loads (it holds one
/// segment in memory).
pub const MAX_SEGMENT_SIZE: u64 = 1 << 30;

/// How a segment's space is made ready before records are written into it.
///
/// Pre-zeroed is the default, chosen by measurement (`--example log_floor`, ext4 on a virtio
/// disk, 2 shared cores, three invocations of three runs each):
/// - one client: `pwrite` + `fdatasync` costs the same on pre-zeroed and `fallocate`d
///   segments within the noise (a 100–170-byte record enters a fresh 4 KiB block only every
///   24–40 commits), and 1.2–1.4× more when appending (the size changes every time), with a
///   p99 up to 6× worse;
/// - 64 clients, where every group-commit batch (~10 KB) enters fresh blocks: pre-zeroed
///   segments gave 2–18% more commits/s than `fallocate`d ones and 12–25% more than appending,
///   with an equal or lower p99.
///
/// Beyond the figures: an `fdatasync` of overwritten, already written blocks has no metadata
/// to journal, so it never waits for an ext4 journal commit that carries other files' changes
/// (checkpoints being written, say); a first write into an unwritten extent does. The price is
/// writing each segment twice (zeros, then records), off the commit path, on a background
/// thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preparation {
    /// The whole segment is written with zeros and synced ahead of time, by a background
    /// thread, while the previous segment fills. Later writes overwrite allocated, written
    /// blocks: `fdatasync` flushes data only.
    PreZeroed,
    /// `fallocate` reserves the segment: the blocks exist but are marked unwritten, so the
    /// first write into each block changes the extent tree, which `fdatasync` must journal.
    Fallocate,
    /// The segment grows with every write: each `fdatasync` also journals the new file size.
    Append,
}

/// The file name of the segment starting at `first_version`.
pub(super) fn segment_name(first_version: u64) -> String {
    format!("{first_version:020}.log")
}

/// The first version in a segment file name, or `None` if it is not one.
fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segments of the log in `log_dir`, in version order. A missing directory is an empty log.
pub(super) fn list_segments(log_dir: &Path) -> Result<Vec<(u64, PathBuf)>, LogError> {
    let entries = match std::fs::read_dir(log_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LogError::io(log_dir, 0)(e)),
    };
    let mut segments = Vec::new();
    for entry in entries {
        let entry = entry.map_err(LogError::io(log_dir, 0))?;
        if let Some(first) = entry.file_name().to_str().and_then(parse_name) {
            segments.push((first, entry.path()));
        }
    }
    segments.sort_unstable_by_key(|(first, _)| *first);
    Ok(segments)
}

/// Makes a directory entry change (create, rename, delete) in `dir` durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(LogError::io(dir, 0))
}

/// Failures to inject into a writer's next write or `fdatasync`, for tests of the failure
/// paths without a failing disk. Enabled in this crate's tests and with the `fault-injection`
/// feature; each armed fault fires once.
#[cfg(any(test, feature = "fault-injection"))]
#[derive(Debug)]
pub struct Faults {
    fail_write: std::sync::atomic::AtomicBool,
    /// The next segment preparation fails as on a full disk.
    pub(super) fail_prepare: std::sync::atomic::AtomicBool,
    fail_sync: std::sync::atomic::AtomicBool,
    /// Bytes the next write really writes before failing; `usize::MAX` when not armed.
    short_write: std::sync::atomic::AtomicUsize,
}

#[cfg(any(test, feature = "fault-injection"))]
impl Default for Faults {
    fn default() -> Self {
        Faults {
            fail_write: false.into(),
            fail_prepare: false.into(),
            fail_sync: false.into(),
            short_write: usize::MAX.into(),
        }
    }
}

#[cfg(any(test, feature = "fault-injection"))]
impl Faults {
    pub(super) fn new() -> Arc<Faults> {
        Arc::new(Faults::default())
    }

    /// The next write fails (`EIO`) without writing anything.
    pub fn fail_next_write(&self) {
        self.fail_write.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The next segment preparation fails with `ENOSPC`, as on a full disk (until it is
    /// asked again, every preparation after it succeeds).
    pub fn fail_next_prepare(&self) {
        self.fail_prepare.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The next `fdatasync` fails (`EIO`), as a disk error reported at writeback would.
    pub fn fail_next_sync(&self) {
        self.fail_sync.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The next write writes only its first `bytes` bytes, then fails (`ENOSPC`): a torn
    /// write seen from a process that survives it.
    pub fn short_next_write(&self, bytes: usize) {
        self.short_write.store(bytes, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A segment file open for writing: every write and sync of the log goes through here.
#[derive(Debug)]
pub(super) struct LogFile {
    pub file: File,
    pub path: PathBuf,
    /// The prepared space mapped shared and writable, when writes go through memory (see
    /// [`SegmentMap`]); `None`: each write is a `pwrite`.
    pub map: Option<SegmentMap>,
    #[cfg(any(test, feature = "fault-injection"))]
    pub faults: Arc<Faults>,
}

/// A pre-zeroed segment's prepared space, mapped shared and writable: in `none` and
/// `periodic` mode a write is a copy into the page cache, with no system call.
///
/// Why: a 150-byte `pwrite` costs 0.75–1 µs of kernel time, a fifth of an embedded update
/// commit; the copy costs 0.03 µs, a write fault included once per 4 KiB page (C, 200,000
/// writes into a 64 MiB pre-zeroed file, this machine). What stays true:
/// - a process crash loses nothing: the copied bytes are in the page cache, which outlives
///   the process, exactly as after a `pwrite`;
/// - `fdatasync` flushes pages dirtied through a shared mapping (Linux has one page cache), so
///   `periodic`'s background sync and `close` make them durable;
/// - no write can fault for space: only pre-zeroed segments are mapped, whose blocks were
///   allocated and written before the first record.
///
/// `sync` mode keeps `pwrite`: after each `fdatasync` a mapped page is clean and
/// write-protected, so the next copy faults and dirties the whole folio, and its `fdatasync`
/// wrote more: 103–114 µs a commit against 82–91 µs (same program).
#[derive(Debug)]
pub(super) struct SegmentMap(memmap2::MmapRaw);

impl SegmentMap {
    /// Maps the first `size` bytes of `file` (a prepared segment of at least that size), or
    /// `None` when the mapping fails (then the log writes with `pwrite`).
    pub fn new(file: &File, size: u64) -> Option<SegmentMap> {
        let len = usize::try_from(size).ok()?;
        memmap2::MmapOptions::new().len(len).map_raw(file).ok().map(SegmentMap)
    }

    /// Copies `buf` to `offset`; `false` (nothing copied) when it would end past the mapping.
    fn copy(&self, buf: &[u8], offset: u64) -> bool {
        let Ok(start) = usize::try_from(offset) else { return false };
        let Some(end) = start.checked_add(buf.len()) else { return false };
        if end > self.0.len() {
            return false;
        }
        // SAFETY: `start..end` lies within the mapping, which lives as long as `self`. The
        // mapped file is this process's alone (the directory lock), its size is never cut
        // below the mapping while it is written (`close` cuts it after the last write), and
        // only the one log writer writes it (`LogWriter` is not shared), so nothing aliases
        // the bytes written.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), self.0.as_mut_ptr().add(start), buf.len()) };
        true
    }
}

impl LogFile {
    /// Writes all of `buf` at `offset`: a copy into the mapping when there is one and `buf`
    /// fits in it, else one `pwrite` (repeated only if the kernel writes less).
    pub fn write_at(&self, buf: &[u8], offset: u64) -> Result<(), LogError> {
        let fail = |source| LogError::Write { path: self.path.clone(), offset, len: buf.len(), source };
        #[cfg(any(test, feature = "fault-injection"))]
        {
            use std::sync::atomic::Ordering::SeqCst;
            if self.faults.fail_write.swap(false, SeqCst) {
                return Err(fail(io::Error::from_raw_os_error(libc::EIO)));
            }
            let short = self.faults.short_write.swap(usize::MAX, SeqCst);
            if short != usize::MAX {
                let part = &buf[..short.min(buf.len())];
                self.write_bytes(part, offset).map_err(fail)?;
                return Err(fail(io::Error::from_raw_os_error(libc::ENOSPC)));
            }
        }
        self.write_bytes(buf, offset).map_err(fail)
    }

    fn write_bytes(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        match &self.map {
            Some(map) if map.copy(buf, offset) => Ok(()),
            _ => self.file.write_all_at(buf, offset),
        }
    }

    /// `fdatasync`. `written` (the end of the data meant to be durable) is for the error.
    pub fn sync(&self, written: u64) -> Result<(), LogError> {
        let fail = |source| LogError::Sync { path: self.path.clone(), offset: written, source };
        #[cfg(any(test, feature = "fault-injection"))]
        if self.faults.fail_sync.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(fail(io::Error::from_raw_os_error(libc::EIO)));
        }
        self.file.sync_data().map_err(fail)
    }
}

/// Creates the file `path` and prepares `size` bytes of segment space the `how` way. `sync`
/// makes the preparation durable, so that later `fdatasync`s of the segment flush data only.
pub(super) fn prepare(path: &Path, size: u64, how: Preparation, sync: bool) -> Result<File, LogError> {
    prepare_space(path, size, how, sync).map_err(|e| {
        // A half-prepared file would hold the space a retry needs (on a full disk, all of it).
        let _ = std::fs::remove_file(path);
        match e {
            LogError::Io { path, source, .. } if is_full(&source) => LogError::Full { path, source },
            other => other,
        }
    })
}

/// The size of the writes that pre-zero a segment (see [`prepare_space`]).
const ZERO_CHUNK: usize = 64 << 10;

/// A full device or an exhausted quota.
pub(crate) fn is_full(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

fn prepare_space(path: &Path, size: u64, how: Preparation, sync: bool) -> Result<File, LogError> {
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path);
    let file = file.map_err(LogError::io(path, 0))?;
    match how {
        Preparation::Append => {}
        Preparation::Fallocate => {
            use std::os::fd::AsRawFd;
            let len = libc::off_t::try_from(size).map_err(|_| LogError::Options(format!("segment size {size}")))?;
            // SAFETY: a plain syscall on a file descriptor we own.
            if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } != 0 {
                return Err(LogError::io(path, 0)(io::Error::last_os_error()));
            }
        }
        Preparation::PreZeroed => {
            // 64 KiB writes. The page cache keeps a write's pages as one folio of about the
            // write's size (large folios, ext4 on Linux 6.18 here), and every later small write
            // into a folio walks all of its 4 KiB blocks: a 150-byte `pwrite` cost 1.7–2.0 µs
            // into the 1 MiB folios of 1 MiB writes, 0.75–0.98 µs into 64, 16 or 4 KiB ones
            // (10 KB writes and `pwrite` + `fdatasync` the same either way). 64 KiB writes
            // keep the folios small and the zeroing cheap (1,024 writes per 64 MiB).
            let zeros = vec![0u8; ZERO_CHUNK];
            let mut at = 0u64;
            while at < size {
                let n = (size - at).min(zeros.len() as u64) as usize;
                file.write_all_at(&zeros[..n], at).map_err(LogError::io(path, at))?;
                at += n as u64;
            }
        }
    }
    if sync && how != Preparation::Append {
        file.sync_data().map_err(LogError::io(path, size))?;
    }
    Ok(file)
}
