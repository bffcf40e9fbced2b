//! [`LogReader`]: recovery. Reads the segments in order, verifies every record, stops at the
//! first that does not verify, tells a torn last write from damage in the middle, and cuts the
//! log there on request.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::format::{
    parse_record, parse_segment_header, Parsed, BATCH_START, MAX_PAYLOAD, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
};
use super::segment::{list_segments, sync_dir, MAX_SEGMENT_SIZE};
use super::{log_dir, LogError, Tail};

/// One record read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRecord<'a> {
    /// Its version.
    pub version: u64,
    /// Its payload, as appended.
    pub payload: &'a [u8],
}

/// Where and why the log ends, after a [`LogReader`] has read it all.
#[derive(Debug, Clone)]
pub struct LogEnd {
    /// Why reading stopped.
    pub tail: Tail,
    /// The last version read intact (skipped ones included), or `None` if none was.
    pub last_version: Option<u64>,
    /// Records handed out (those at or after the version reading started from).
    pub records: u64,
    /// Bytes of the segments read and verified.
    pub bytes: u64,
    /// The segment and offset where the valid log ends.
    cut_at: Option<(PathBuf, u64)>,
    /// Segments after that point.
    after: Vec<PathBuf>,
    log_dir: PathBuf,
}

impl LogEnd {
    /// Cuts the log where the valid part ends, so that a writer can continue after
    /// [`LogEnd::last_version`]: the segment there is shortened to its last good record (or
    /// deleted if it has none) and every later segment is deleted; then synced. On a
    /// [`Tail::Clean`] end this only trims the unused pre-zeroed space of the last segment.
    /// On [`Tail::Corrupt`] it deletes the valid records after the damage: the caller decides
    /// whether to (e.g. only when the operator asks). Call it before opening a writer.
    pub fn cut(&self) -> Result<(), LogError> {
        if let Some((segment, offset)) = &self.cut_at {
            if *offset <= SEGMENT_HEADER_LEN as u64 {
                remove(segment)?;
            } else {
                let file = std::fs::OpenOptions::new().write(true).open(segment).map_err(LogError::io(segment, 0))?;
                let len = file.metadata().map_err(LogError::io(segment, 0))?.len();
                if len > *offset {
                    file.set_len(*offset).map_err(LogError::io(segment, *offset))?;
                    // fdatasync flushes the new size too: it is needed to read the data.
                    file.sync_data().map_err(LogError::io(segment, *offset))?;
                }
            }
        }
        for segment in &self.after {
            remove(segment)?;
        }
        if self.cut_at.is_some() || !self.after.is_empty() {
            sync_dir(&self.log_dir)?;
        }
        Ok(())
    }
}

fn remove(path: &Path) -> Result<(), LogError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(LogError::io(path, 0)(e)),
        _ => Ok(()),
    }
}

/// Reads the log of a database directory from a version, verifying each record.
///
/// ```no_run
/// # fn main() -> Result<(), espalier_storage::log::LogError> {
/// # let dir = std::path::Path::new("db");
/// use espalier_storage::log::{LogReader, LogWriter, LogOptions, Tail};
/// let mut reader = LogReader::open(dir, 1)?;
/// while let Some(record) = reader.next_record()? {
///     // apply record.payload as version record.version
/// }
/// let end = reader.end()?;
/// if let Tail::Corrupt { .. } = end.tail { /* report; cut only if the operator agrees */ }
/// end.cut()?;
/// let writer = LogWriter::open(dir, LogOptions::default(), end.last_version.unwrap_or(0) + 1)?;
/// # Ok(()) }
/// ```
pub struct LogReader {
    log_dir: PathBuf,
    segments: Vec<(u64, PathBuf)>,
    /// The segment loaded (or to be loaded next).
    idx: usize,
    loaded: bool,
    /// The loaded segment's bytes, and the offset of the next record in it.
    buf: Vec<u8>,
    pos: usize,
    /// The loaded segment's first version (from its header).
    first: u64,
    from: u64,
    last: Option<u64>,
    /// Where the data of the last segment read ended cleanly.
    valid_end: Option<(usize, usize)>,
    records: u64,
    bytes: u64,
    end: Option<LogEnd>,
}

impl std::fmt::Debug for LogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader").field("log_dir", &self.log_dir).field("last", &self.last).finish()
    }
}

impl LogReader {
    /// Opens the log of the database directory `db_dir` to read the records from version
    /// `from` on (those before it in the segments read are verified, not handed out). Segments
    /// that hold only earlier versions are not read. `from` 0 reads the whole log. Refuses if
    /// the log begins after `from` ([`LogError::Gap`]); an empty log reads as empty.
    pub fn open(db_dir: &Path, from: u64) -> Result<LogReader, LogError> {
        let log_dir = log_dir(db_dir);
        let segments = list_segments(&log_dir)?;
        // The last segment starting at or before `from` holds it, if any does.
        let idx = segments.iter().rposition(|(first, _)| *first <= from).unwrap_or(0);
        if let Some((first, _)) = segments.first() {
            if from != 0 && *first > from {
                return Err(LogError::Gap { dir: log_dir, wanted: from, first: *first });
            }
        }
        Ok(LogReader {
            log_dir,
            segments,
            idx,
            loaded: false,
            buf: Vec::new(),
            pos: 0,
            first: 0,
            from,
            last: None,
            valid_end: None,
            records: 0,
            bytes: 0,
            end: None,
        })
    }

    /// The next record at or after the start version, verified; `None` at the end of the valid
    /// log (see [`LogReader::end`] for why it ended). Errors are I/O errors only: damage ends
    /// the log, it is not an error.
    pub fn next_record(&mut self) -> Result<Option<LogRecord<'_>>, LogError> {
        loop {
            if self.end.is_some() {
                return Ok(None);
            }
            if !self.loaded {
                if self.idx >= self.segments.len() {
                    self.finish(Tail::Clean, self.valid_end);
                    return Ok(None);
                }
                self.load()?;
                continue;
            }
            match parse_record(&self.buf, self.pos) {
                // A segment without records is a torn first write (header and records are one
                // write): report it rather than read on.
                Parsed::End if self.pos == SEGMENT_HEADER_LEN => self.damage()?,
                Parsed::End => {
                    self.bytes += self.pos as u64;
                    self.valid_end = Some((self.idx, self.pos));
                    self.idx += 1;
                    self.loaded = false;
                }
                Parsed::Damage => self.damage()?,
                Parsed::Record { version, batch_start, payload, next } => {
                    let expected = self.last.map_or(self.first, |v| v + 1);
                    // Each segment begins a write; versions run on without a gap.
                    if version != expected || (self.pos == SEGMENT_HEADER_LEN && !batch_start) {
                        self.damage()?;
                        continue;
                    }
                    self.last = Some(version);
                    self.pos = next;
                    if version >= self.from {
                        self.records += 1;
                        return Ok(Some(LogRecord { version, payload: &self.buf[payload] }));
                    }
                }
            }
        }
    }

    /// Reads (and verifies) what is left, then says where and why the log ends.
    pub fn end(mut self) -> Result<LogEnd, LogError> {
        while self.next_record()?.is_some() {}
        self.end.take().ok_or_else(|| LogError::Options("the reader ended without an end".into()))
    }

    /// Reads the segment `idx` whole and checks its header: its name's version, and the
    /// version after the previous segment's last.
    fn load(&mut self) -> Result<(), LogError> {
        let path = &self.segments[self.idx].1;
        let mut file = std::fs::File::open(path).map_err(LogError::io(path, 0))?;
        let len = file.metadata().map_err(LogError::io(path, 0))?.len();
        if len > MAX_SEGMENT_SIZE {
            return Err(LogError::SegmentTooLarge { path: path.clone(), len, max: MAX_SEGMENT_SIZE });
        }
        self.buf.clear();
        self.buf.reserve(len as usize);
        // The file cannot grow past the bound while read: no writer runs during recovery, and
        // `take` keeps a file that does from growing the buffer.
        file.by_ref().take(MAX_SEGMENT_SIZE).read_to_end(&mut self.buf).map_err(LogError::io(path, 0))?;
        self.loaded = true;
        let named = self.segments[self.idx].0;
        match parse_segment_header(&self.buf) {
            Some(first) if first == named && self.last.is_none_or(|last| last.checked_add(1) == Some(first)) => {
                self.first = first;
                self.pos = SEGMENT_HEADER_LEN;
            }
            _ => {
                self.pos = 0;
                self.damage()?;
            }
        }
        Ok(())
    }

    /// The record at `self.pos` of the loaded segment does not verify: the log ends there.
    /// Torn if nothing after it shows a later write, corrupt if something does.
    fn damage(&mut self) -> Result<(), LogError> {
        let segment = self.segments[self.idx].1.clone();
        let offset = self.pos as u64;
        self.bytes += offset;
        let tail = match self.later_write()? {
            None => Tail::Torn { segment, offset },
            Some(resumes_at) => Tail::Corrupt { segment, offset, version: self.last.unwrap_or(0), resumes_at },
        };
        self.finish(tail, Some((self.idx, self.pos)));
        Ok(())
    }

    /// The first version of a write that began after the damage at `self.pos`: a valid
    /// record with the batch-start bit later in this segment, or a later segment with a valid
    /// header. A crash tears only the last write, so either proves the damage is not a tear.
    /// `Some(0)` if the search gave up (crafted data): report corruption rather than cut.
    fn later_write(&self) -> Result<Option<u64>, LogError> {
        let after = self.last.unwrap_or(0);
        // Random damage costs one word read per 8 bytes; the budget bounds the checksum work
        // crafted bytes (many plausible headers) could cause.
        let mut budget = 4 * self.buf.len() + (1 << 20);
        let mut q = self.pos + 8;
        while q + 16 <= self.buf.len() {
            let word = u32::from_le_bytes([self.buf[q], self.buf[q + 1], self.buf[q + 2], self.buf[q + 3]]);
            if word & BATCH_START != 0 {
                let len = (word & !BATCH_START) as usize;
                // Only a length that fits is worth a checksum.
                if len > MAX_PAYLOAD || q + RECORD_HEADER_LEN + len > self.buf.len() {
                    q += 8;
                    continue;
                }
                if len > budget {
                    return Ok(Some(0));
                }
                budget -= len;
                if let Parsed::Record { version, batch_start: true, .. } = parse_record(&self.buf, q) {
                    if version > after {
                        return Ok(Some(version));
                    }
                }
            }
            q += 8;
        }
        for (named, path) in &self.segments[self.idx + 1..] {
            let mut header = [0u8; SEGMENT_HEADER_LEN];
            let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut header));
            match read {
                Ok(()) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::NotFound) => {
                    continue
                }
                Err(e) => return Err(LogError::io(path, 0)(e)),
            }
            if parse_segment_header(&header) == Some(*named) {
                return Ok(Some(*named));
            }
        }
        Ok(None)
    }

    fn finish(&mut self, tail: Tail, cut_at: Option<(usize, usize)>) {
        // Without a cut point nothing was read, so nothing lies after it.
        let after = match cut_at {
            Some((i, _)) => self.segments.get(i + 1..).unwrap_or_default().iter().map(|(_, p)| p.clone()).collect(),
            None => Vec::new(),
        };
        self.end = Some(LogEnd {
            tail,
            last_version: self.last,
            records: self.records,
            bytes: self.bytes,
            cut_at: cut_at.map(|(i, pos)| (self.segments[i].1.clone(), pos as u64)),
            after,
            log_dir: self.log_dir.clone(),
        });
    }
}

/// Deletes the segments of the log in the database directory `db_dir` that hold only versions
/// before `version` (a checkpoint at `version - 1` covers them); the last segment is always
/// kept. Returns how many it deleted. The deletions are not synced: a segment that comes back
/// after a crash holds only versions the checkpoint covers, which recovery skips.
pub fn truncate_before(db_dir: &Path, version: u64) -> Result<usize, LogError> {
    truncate_log_before(&log_dir(db_dir), version)
}

pub(super) fn truncate_log_before(log_dir: &Path, version: u64) -> Result<usize, LogError> {
    let segments = list_segments(log_dir)?;
    let mut deleted = 0;
    for pair in segments.windows(2) {
        // A segment's versions end before the next one's first.
        if pair[1].0 <= version {
            remove(&pair[0].1)?;
            deleted += 1;
        }
    }
    Ok(deleted)
}
