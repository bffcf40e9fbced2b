//! The redo log of the storage engine: an append-only sequence of checksummed records, one
//! per committed version, in segment files. The engine puts its redo operations in the
//! payloads, makes a group-commit batch durable with one [`LogWriter::append`] (one write — a
//! `pwrite` in `sync` mode, a copy into the mapped segment in `none` and `periodic` mode — and
//! in `sync` mode one `fdatasync`), and replays the log after its last checkpoint with a
//! [`LogReader`].
//!
//! # Files
//!
//! `DIR/log/<first version, 20 digits>.log`, e.g. `DIR/log/00000000000000000001.log`. A segment
//! holds the records of consecutive versions; the next segment starts at the version after the
//! previous one's last. `DIR/log/*.tmp` are segments being prepared (not yet part of the log;
//! deleted when a writer opens).
//!
//! # Segment header (24 bytes)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `ESPLOG01` |
//! | 8 | 8 | first version, u64 LE (equals the file name's) |
//! | 16 | 4 | reserved, 0 |
//! | 20 | 4 | crc32c of bytes 0..20, u32 LE |
//!
//! The header is written in the same write as the segment's first batch, before the file is
//! renamed from `.tmp` to its name, so a named segment whose header does not verify is a torn
//! or damaged write, never a segment still being set up.
//!
//! # Records (8-byte aligned)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | length word, u32 LE: bits 0–30 the payload length, bit 31 set on the first record of a batch (one write) |
//! | 4 | 4 | crc32c of the length word, then the version and the payload, u32 LE |
//! | 8 | 8 | version, u64 LE |
//! | 16 | length | payload (opaque to this module) |
//! | | | zero padding to the next multiple of 8, checked on read |
//!
//! Versions are consecutive: each record's version is the previous one's plus one, across
//! segments too, so a lost record or a missing segment is found, not skipped. A version is
//! never 0, so a 16-byte all-zero header is never a record: in pre-zeroed space it is the end
//! of the segment's data (and everything after it must be zero as well).
//!
//! Two additions to the plain "length, crc over version and payload" header, both so that the
//! reader can tell a torn last write from damage in the middle:
//! - the **batch-start bit** marks where each write began. A crash can tear only the last
//!   write (in `sync` mode, every earlier write was flushed before the next one began), so
//!   damage followed by the start of a later valid write is corruption, not a torn tail;
//! - the **crc covers the length word**, so that bit (and every other header bit) is checked.
//!
//! # Bounds
//!
//! A payload is at most [`MAX_PAYLOAD`] bytes, a batch at most [`MAX_BATCH_BYTES`] encoded bytes
//! (and at most a segment less its header), a segment at most [`MAX_SEGMENT_SIZE`]; larger ones
//! are refused with a typed error. The reader holds one segment in memory at a time.
//!
//! # Failures
//!
//! A failed write or `fdatasync` (or the background one of `periodic` mode) poisons the
//! writer: that append returns the error, naming the file and offset, and every later append
//! returns [`LogError::Poisoned`]. A failed `fdatasync` is never retried: after one, Linux may
//! have dropped the dirty pages and cleared the error, so a retry could succeed without the
//! data being on disk (PostgreSQL's "fsyncgate", 2018). The database must be reopened, which
//! recovers from what is really on disk.
//!
//! Tests make the next write fail, write short (a torn write seen by a surviving process) or
//! make the next `fdatasync` fail through `Faults` (`LogWriter::faults`), compiled in this
//! crate's tests and with the `fault-injection` feature for other crates' tests.
//!
//! # Recovery
//!
//! [`LogReader`] reads the segments in order from a version, verifies every record and stops at
//! the first one that does not verify. [`LogEnd::tail`] says why it stopped ([`Tail`]): the end
//! of the data, a torn last write, or damage followed by later valid writes (corruption: the log
//! after it is not served, and cutting it loses acknowledged commits). [`LogEnd::cut`] cuts the
//! log there so a new [`LogWriter`] continues after the last good version.

mod format;
mod reader;
mod segment;
mod writer;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use format::{LogBatch, MAX_BATCH_BYTES, MAX_PAYLOAD, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
pub use reader::{truncate_before, LogEnd, LogReader, LogRecord};
pub(crate) use segment::is_full;
#[cfg(any(test, feature = "fault-injection"))]
pub use segment::Faults;
pub use segment::{Preparation, MAX_SEGMENT_SIZE, MIN_SEGMENT_SIZE};
pub use writer::{Appended, LogOptions, LogWriter};

/// Why the reader stopped: where the valid log ends, and what lies after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// The data ends cleanly: end of file, or zeros to the end of the last segment.
    Clean,
    /// The last write is incomplete (a crash during it): everything from `offset` in
    /// `segment` is an unacknowledged write's remains. Cutting there loses nothing that was
    /// acknowledged in `sync` mode, with one exception no reader can see: damage inside the
    /// last write looks the same.
    Torn {
        /// The segment file holding the torn write.
        segment: PathBuf,
        /// Where the first record that does not verify begins.
        offset: u64,
    },
    /// A record that does not verify, followed by the start of a later valid write (in the
    /// same segment or a later one): damage in the middle of the log, not a crash in `sync`
    /// mode (a write begins only after the one before it is durable). In `periodic` and
    /// `none` modes an OS crash can also leave this, as unsynced writes reach the disk in any
    /// order. The records after it are not served; cutting the log there loses them.
    Corrupt {
        /// The segment file holding the damaged record.
        segment: PathBuf,
        /// Where the damaged record begins.
        offset: u64,
        /// The last version read intact before the damage (0 if none).
        version: u64,
        /// The first version of the later valid write that proves this is damage (0 if the
        /// search gave up on crafted bytes: then it is called corruption to be safe).
        resumes_at: u64,
    },
}

/// What can go wrong with the log. Every I/O error names the file and the offset.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A read, create, rename, truncate or directory operation failed.
    #[error("log I/O error on {} at offset {offset}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Where in it.
        offset: u64,
        /// What the system said.
        source: std::io::Error,
    },
    /// Writing a batch failed (part of it may be on disk); the writer is poisoned.
    #[error("log write to {} at offset {offset} ({len} bytes) failed: {source}; the log is poisoned", path.display())]
    Write {
        /// The segment.
        path: PathBuf,
        /// Where the batch starts in it.
        offset: u64,
        /// The batch's bytes.
        len: usize,
        /// What the system said.
        source: std::io::Error,
    },
    /// `fdatasync` failed: the data up to `offset` may not be on disk; the writer is poisoned.
    #[error("fdatasync of {} failed (data up to offset {offset} not known durable): {source}; the log is poisoned", path.display())]
    Sync {
        /// The segment.
        path: PathBuf,
        /// How far it was written.
        offset: u64,
        /// What the system said.
        source: std::io::Error,
    },
    /// No space is left for the next segment: nothing of the batch was written and the
    /// writer is not poisoned (appends succeed again once space is freed).
    #[error("no space left to prepare the next log segment {}: {source}; nothing of the batch was written, and writes resume once space is freed", path.display())]
    Full {
        /// The segment being prepared.
        path: PathBuf,
        /// What the system said (`ENOSPC` or `EDQUOT`).
        source: std::io::Error,
    },
    /// An earlier write or `fdatasync` failed; nothing more is appended. Reopen the database
    /// (recovery reads what is really on disk).
    #[error("the log is poisoned by an earlier failure: {reason}")]
    Poisoned {
        /// The failure that stopped the log.
        reason: String,
    },
    /// A record's payload is over [`MAX_PAYLOAD`].
    #[error("a log record payload of {len} bytes is over the limit of {max} bytes")]
    PayloadTooLarge {
        /// The payload's bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A batch is over [`MAX_BATCH_BYTES`] or does not fit in one segment.
    #[error("a log batch of {len} bytes is over the limit of {max} bytes")]
    BatchTooLarge {
        /// The batch's bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A record's version is not the next one.
    #[error("log version {got} out of order: expected {expected}")]
    VersionOrder {
        /// The next version.
        expected: u64,
        /// The record's.
        got: u64,
    },
    /// An append of a batch without records.
    #[error("an empty batch cannot be appended")]
    EmptyBatch,
    /// A writer was opened at a version that an existing segment already holds.
    #[error("the log segment {} starts at version {first}, not before the next version {next}: recover and cut the log first", path.display())]
    Overlap {
        /// The segment.
        path: PathBuf,
        /// Its first version.
        first: u64,
        /// The version the writer was opened at.
        next: u64,
    },
    /// The log starts after the version the reader was asked to start from.
    #[error("the log in {} starts at version {first}, after the requested version {wanted}: the versions between are missing", dir.display())]
    Gap {
        /// The log directory.
        dir: PathBuf,
        /// The version asked for.
        wanted: u64,
        /// The log's first version.
        first: u64,
    },
    /// A segment file is larger than any segment the writer makes.
    #[error("log segment {} is {len} bytes, over the limit of {max} bytes", path.display())]
    SegmentTooLarge {
        /// The segment.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The options cannot work.
    #[error("invalid log options: {0}")]
    Options(String),
}

impl LogError {
    /// True for a full disk (or quota) met before anything was written: the one failure that
    /// leaves the log as it was.
    pub fn is_storage_full(&self) -> bool {
        matches!(self, LogError::Full { .. })
    }

    pub(crate) fn io(path: impl Into<PathBuf>, offset: u64) -> impl FnOnce(std::io::Error) -> LogError {
        let path = path.into();
        move |source| LogError::Io { path, offset, source }
    }
}

/// The log's directory inside a database directory.
pub fn log_dir(db_dir: &std::path::Path) -> PathBuf {
    db_dir.join("log")
}
