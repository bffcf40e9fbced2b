//! What the operating system tells about the run: memory (`/proc/self/status`), disk use,
//! dropping a file from the page cache and measuring how much of it is cached.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Memory of this process, in bytes (0 where the system does not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Peak resident set (`VmHWM`) since the last [`reset_peak`]; includes the page cache pages
    /// mapped into the process.
    pub peak_rss_bytes: u64,
    /// Resident anonymous memory now (`RssAnon`): the heap, not the mapped data file.
    pub anon_bytes: u64,
    /// Resident pages of mapped files now (`RssFile`).
    pub file_bytes: u64,
}

fn status_kb(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(field))?;
    let rest = line.get(field.len()..)?.trim_start_matches(':').trim();
    let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
    Some(kb * 1024)
}

/// Reads `/proc/self/status` (zeros where unavailable).
pub fn memory() -> Memory {
    let Ok(text) = std::fs::read_to_string("/proc/self/status") else { return Memory::default() };
    Memory {
        peak_rss_bytes: status_kb(&text, "VmHWM").unwrap_or(0),
        anon_bytes: status_kb(&text, "RssAnon").unwrap_or(0),
        file_bytes: status_kb(&text, "RssFile").unwrap_or(0),
    }
}

/// Page faults of this process so far: (minor, major), from `/proc/self/stat` (zeros where
/// unavailable). A minor fault maps a page that is already in the page cache; a major fault
/// reads it from disk.
pub fn page_faults() -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string("/proc/self/stat") else { return (0, 0) };
    // The command name (field 2) is in parentheses and may hold spaces; count after it.
    let Some(rest) = text.rfind(')').and_then(|i| text.get(i + 1..)) else { return (0, 0) };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, minflt field 10, majflt field 12.
    let get = |field: usize| fields.get(field - 3).and_then(|f| f.parse().ok()).unwrap_or(0);
    (get(10), get(12))
}

/// Resets the peak resident set (`echo 5 > /proc/self/clear_refs`); false if not permitted.
pub fn reset_peak() -> bool {
    std::fs::OpenOptions::new().write(true).open("/proc/self/clear_refs").and_then(|mut f| f.write_all(b"5")).is_ok()
}

/// How the page cache was emptied for a cold sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropMethod {
    /// `fdatasync` then `posix_fadvise(POSIX_FADV_DONTNEED)` on the data file, with the
    /// database closed (no mapping keeps pages alive), then a fresh open.
    Fadvise,
    /// The cache could not be dropped: only the database was closed and opened again.
    ReopenOnly,
}

impl DropMethod {
    /// The method in words, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            DropMethod::Fadvise => {
                "page cache dropped for the database file before every sample (fdatasync + \
                 posix_fadvise(POSIX_FADV_DONTNEED) with the database closed), then the database reopened"
            }
            DropMethod::ReopenOnly => {
                "NOT cold: the page cache could not be dropped on this system; the database was only \
                 closed and reopened before every sample (a fresh open)"
            }
        }
    }
}

/// Asks the kernel to drop `path` from the page cache. The file must not be mapped by anyone
/// who keeps its pages in use; dirty pages are written first.
#[cfg(target_os = "linux")]
pub fn drop_from_cache(path: &Path) -> std::io::Result<DropMethod> {
    use std::os::fd::AsRawFd;
    let f = File::open(path)?;
    f.sync_data()?;
    // SAFETY: the descriptor is valid for the call; fadvise only reads its arguments.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Ok(DropMethod::ReopenOnly);
    }
    Ok(DropMethod::Fadvise)
}

#[cfg(not(target_os = "linux"))]
pub fn drop_from_cache(_path: &Path) -> std::io::Result<DropMethod> {
    Ok(DropMethod::ReopenOnly)
}

/// Fraction (0–1) of `path`'s allocated pages that are in the page cache, by `mincore`; `None`
/// if it cannot be measured.
#[cfg(target_os = "linux")]
pub fn cached_fraction(path: &Path) -> Option<f64> {
    use std::os::fd::AsRawFd;
    let f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len() as usize;
    if len == 0 {
        return Some(0.0);
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page).ok().filter(|&p| p > 0)?;
    // SAFETY: a read-only shared mapping of a file we opened, unmapped below; nothing reads
    // through it (mincore only asks about residency).
    let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0) };
    if addr == libc::MAP_FAILED {
        return None;
    }
    let pages = len.div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: `addr` maps `len` bytes; `vec` has one byte per page of it.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    // SAFETY: unmapping exactly what was mapped above.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return None;
    }
    let resident = vec.iter().filter(|&&b| b & 1 == 1).count();
    // Holes of the sparse file are never resident; relate to the allocated pages.
    use std::os::unix::fs::MetadataExt;
    let allocated = (f.metadata().ok()?.blocks() * 512).div_ceil(page as u64).max(1);
    Some((resident as f64 / allocated as f64).min(1.0))
}

#[cfg(not(target_os = "linux"))]
pub fn cached_fraction(_path: &Path) -> Option<f64> {
    None
}

/// Reads `path` once from start to end so its pages are in the page cache (the "hot" start).
pub fn warm_file(path: &Path) -> std::io::Result<u64> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
    }
}

/// Copies a (sparse) file, skipping all-zero 64 KB blocks so the copy stays sparse, and keeps
/// the length.
pub fn copy_sparse(from: &Path, to: &Path) -> std::io::Result<u64> {
    const BLOCK: usize = 64 * 1024;
    let mut src = File::open(from)?;
    let len = src.metadata()?.len();
    let mut dst = File::create(to)?;
    let mut buf = vec![0u8; BLOCK];
    let mut offset = 0u64;
    let mut written = 0u64;
    while offset < len {
        let want = BLOCK.min((len - offset) as usize);
        src.read_exact(&mut buf[..want])?;
        if buf[..want].iter().any(|&b| b != 0) {
            dst.seek(SeekFrom::Start(offset))?;
            dst.write_all(&buf[..want])?;
            written += want as u64;
        }
        offset += want as u64;
    }
    dst.set_len(len)?;
    dst.sync_all()?;
    Ok(written)
}

/// Facts about the machine for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The CPU's model name.
    pub cpu: String,
    /// CPUs available to the process.
    pub cpus: usize,
    /// Physical memory (`MemTotal`), in bytes.
    pub memory_bytes: u64,
    /// The kernel release.
    pub kernel: String,
}

/// The facts about this machine, from `/proc`.
pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    Machine {
        cpu,
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        memory_bytes: status_kb(&meminfo, "MemTotal").unwrap_or(0),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_and_copies_sparse_files() {
        let m = memory();
        assert!(m.peak_rss_bytes > 0 && m.anon_bytes > 0, "{m:?}");
        let (minor, _) = page_faults();
        let touched: Vec<u8> = vec![1; 8 << 20];
        assert_eq!(touched.iter().map(|&b| u64::from(b)).sum::<u64>(), 8 << 20);
        assert!(page_faults().0 > minor, "touching new memory faults pages in");
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let mut f = File::create(&a).unwrap();
        f.write_all(b"head").unwrap();
        f.set_len(1 << 20).unwrap();
        f.seek(SeekFrom::Start(900_000)).unwrap();
        f.write_all(b"tail").unwrap();
        drop(f);
        let b = dir.path().join("b");
        let written = copy_sparse(&a, &b).unwrap();
        assert_eq!(written, 2 * 64 * 1024);
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        assert_eq!(warm_file(&b).unwrap(), 1 << 20);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn dropping_a_file_empties_its_cache() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, vec![7u8; 4 << 20]).unwrap();
        warm_file(&a).unwrap();
        let before = cached_fraction(&a).expect("mincore works");
        assert!(before > 0.9, "{before}");
        assert_eq!(drop_from_cache(&a).unwrap(), DropMethod::Fadvise);
        let after = cached_fraction(&a).expect("mincore works");
        assert!(after < 0.1, "after drop {after}");
    }
}
