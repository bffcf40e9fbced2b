//! The bytes of segment headers and records (laid out in the module doc of `log`), and
//! [`LogBatch`], which encodes records for one write.

use super::LogError;

/// Magic at the start of every segment: the format and its version.
pub(super) const MAGIC: &[u8; 8] = b"ESPLOG01";
/// Bytes of a segment header; a multiple of 8, so records stay 8-byte aligned.
pub const SEGMENT_HEADER_LEN: usize = 24;
/// Bytes of a record header (length word, crc, version).
pub const RECORD_HEADER_LEN: usize = 16;
/// Largest payload of one record (16 MiB). A commit whose redo is larger must be split or
/// written by a checkpoint; the bound keeps a corrupt length from making the reader allocate.
pub const MAX_PAYLOAD: usize = 16 << 20;
/// Largest batch (one write): 32 MiB of encoded records, so a batch always fits an empty
/// segment of the default 64 MiB.
pub const MAX_BATCH_BYTES: usize = 32 << 20;
/// Bit 31 of the length word: this record begins a write.
pub(super) const BATCH_START: u32 = 1 << 31;
const LENGTH_MASK: u32 = BATCH_START - 1;

const _: () = assert!(MAX_PAYLOAD as u64 <= LENGTH_MASK as u64);

/// Bytes a record with `payload_len` bytes of payload takes on disk.
pub(super) fn record_len(payload_len: usize) -> usize {
    (RECORD_HEADER_LEN + payload_len).next_multiple_of(8)
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    let bytes = b.get(at..at.checked_add(4)?)?;
    let mut a = [0u8; 4];
    a.copy_from_slice(bytes);
    Some(u32::from_le_bytes(a))
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    let bytes = b.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(bytes);
    Some(u64::from_le_bytes(a))
}

/// The segment header for a segment whose first record is `first_version`.
pub(super) fn segment_header(first_version: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut h = [0u8; SEGMENT_HEADER_LEN];
    h[0..8].copy_from_slice(MAGIC);
    h[8..16].copy_from_slice(&first_version.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The first version a valid segment header names, or `None` if `b` does not start with one.
pub(super) fn parse_segment_header(b: &[u8]) -> Option<u64> {
    let h = b.get(0..SEGMENT_HEADER_LEN)?;
    if &h[0..8] != MAGIC || le_u32(h, 16)? != 0 || le_u32(h, 20)? != crc32c::crc32c(&h[0..20]) {
        return None;
    }
    le_u64(h, 8).filter(|&v| v != 0)
}

/// What lies at one offset of a segment.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Parsed {
    /// No more data in this segment: end of file, or zeros from here to the end of file.
    End,
    /// A record that verifies. `next` is the offset after it and its padding.
    Record { version: u64, batch_start: bool, payload: std::ops::Range<usize>, next: usize },
    /// Something that is neither: a torn or damaged record, or stray bytes after the end.
    Damage,
}

/// Parses the record at `pos` of the segment bytes `b`. Never panics, whatever `b` holds.
pub(super) fn parse_record(b: &[u8], pos: usize) -> Parsed {
    let Some(rest) = b.get(pos..) else { return Parsed::Damage };
    if rest.is_empty() {
        return Parsed::End;
    }
    let header = match rest.get(..RECORD_HEADER_LEN) {
        Some(h) if h.iter().all(|&x| x == 0) => None,
        Some(h) => Some(h),
        // Less than a header left: only zeros may remain.
        None => None,
    };
    let Some(h) = header else {
        // An all-zero header (or a short all-zero tail): the end, if nothing but zeros follows.
        // Non-zero bytes after it are the remains of a write whose start did not reach disk.
        return if rest.iter().all(|&x| x == 0) { Parsed::End } else { Parsed::Damage };
    };
    match verify_record(b, pos, h) {
        Some(p) => p,
        None => Parsed::Damage,
    }
}

fn verify_record(b: &[u8], pos: usize, h: &[u8]) -> Option<Parsed> {
    let word = le_u32(h, 0)?;
    let crc = le_u32(h, 4)?;
    let version = le_u64(h, 8)?;
    let len = (word & LENGTH_MASK) as usize;
    if version == 0 || len > MAX_PAYLOAD {
        return None;
    }
    let start = pos.checked_add(RECORD_HEADER_LEN)?;
    let end = start.checked_add(len)?;
    let next = pos.checked_add(record_len(len))?;
    // Version and payload are contiguous: bytes 8.. of the record.
    let covered = b.get(pos + 8..end)?;
    let padding = b.get(end..next)?;
    if crc32c::crc32c_append(crc32c::crc32c(&h[0..4]), covered) != crc || padding.iter().any(|&x| x != 0) {
        return None;
    }
    Some(Parsed::Record { version, batch_start: word & BATCH_START != 0, payload: start..end, next })
}

/// Records for one write, encoded as they will be on disk. Room for a segment header is kept
/// in front, so the writer can start a segment with the same single write.
///
/// Versions must be consecutive; the first must be the writer's next version.
#[derive(Debug, Clone)]
pub struct LogBatch {
    buf: Vec<u8>,
    first: u64,
    records: usize,
}

impl Default for LogBatch {
    fn default() -> Self {
        LogBatch::new()
    }
}

impl LogBatch {
    /// An empty batch.
    pub fn new() -> LogBatch {
        LogBatch { buf: vec![0; SEGMENT_HEADER_LEN], first: 0, records: 0 }
    }

    /// Empties the batch, keeping its buffer for the next one.
    pub fn clear(&mut self) {
        self.buf.truncate(SEGMENT_HEADER_LEN);
        self.first = 0;
        self.records = 0;
    }

    /// Adds the record of `version` (the previous record's version plus one, or any version
    /// ≥ 1 for the first) with `payload`. Refuses payloads over [`MAX_PAYLOAD`] and batches that
    /// would grow over [`MAX_BATCH_BYTES`]; the batch is unchanged then.
    pub fn push(&mut self, version: u64, payload: &[u8]) -> Result<(), LogError> {
        self.push_parts(version, &[payload])
    }

    /// [`LogBatch::push`] of the payload that `parts` make one after the other (written into
    /// the batch from where they lie, without first joining them).
    pub fn push_parts(&mut self, version: u64, parts: &[&[u8]]) -> Result<(), LogError> {
        let payload_len: usize = parts.iter().map(|p| p.len()).sum();
        if payload_len > MAX_PAYLOAD {
            return Err(LogError::PayloadTooLarge { len: payload_len, max: MAX_PAYLOAD });
        }
        if self.records == 0 {
            if version == 0 {
                return Err(LogError::VersionOrder { expected: 1, got: 0 });
            }
        } else if Some(version) != self.next_version() {
            return Err(LogError::VersionOrder { expected: self.next_version().unwrap_or(u64::MAX), got: version });
        }
        let len = record_len(payload_len);
        if self.encoded_len() + len > MAX_BATCH_BYTES {
            return Err(LogError::BatchTooLarge { len: self.encoded_len() + len, max: MAX_BATCH_BYTES });
        }
        let mut word = payload_len as u32;
        if self.records == 0 {
            word |= BATCH_START;
            self.first = version;
        }
        let word = word.to_le_bytes();
        // The version and a short first part (the tables' flags byte) in one checksum call: a
        // call costs more than its few bytes, and most commits are one small record.
        let mut head = [0u8; 16];
        head[..8].copy_from_slice(&version.to_le_bytes());
        let (head_len, rest) = match parts.split_first() {
            Some((first, rest)) if first.len() <= 8 => {
                head[8..8 + first.len()].copy_from_slice(first);
                (8 + first.len(), rest)
            }
            _ => (8, parts),
        };
        let crc = crc32c::crc32c_append(crc32c::crc32c(&word), &head[..head_len]);
        let crc = rest.iter().fold(crc, |crc, p| crc32c::crc32c_append(crc, p));
        self.buf.reserve(len);
        self.buf.extend_from_slice(&word);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf.extend_from_slice(&version.to_le_bytes());
        for p in parts {
            self.buf.extend_from_slice(p);
        }
        self.buf.resize(self.buf.len() + len - RECORD_HEADER_LEN - payload_len, 0);
        self.records += 1;
        Ok(())
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records
    }

    /// True when the batch has no records.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Bytes the records take on disk (headers, payloads, padding).
    pub fn encoded_len(&self) -> usize {
        self.buf.len() - SEGMENT_HEADER_LEN
    }

    /// The first record's version.
    pub fn first_version(&self) -> Option<u64> {
        (self.records > 0).then_some(self.first)
    }

    /// The last record's version.
    pub fn last_version(&self) -> Option<u64> {
        (self.records > 0).then(|| self.first + self.records as u64 - 1)
    }

    fn next_version(&self) -> Option<u64> {
        self.first.checked_add(self.records as u64)
    }

    /// The records alone.
    pub(super) fn records_bytes(&self) -> &[u8] {
        &self.buf[SEGMENT_HEADER_LEN..]
    }

    /// A segment header for the first version, then the records: what starts a segment.
    pub(super) fn with_segment_header(&mut self) -> &[u8] {
        let header = segment_header(self.first);
        self.buf[..SEGMENT_HEADER_LEN].copy_from_slice(&header);
        &self.buf
    }
}
