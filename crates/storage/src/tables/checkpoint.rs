//! Checkpoints: a published snapshot written whole to a file, so that recovery starts from it
//! and the log before it can go.
//!
//! # File
//!
//! `DIR/checkpoint-<log version, 20 digits>.ckpt`: magic `ESPCKP01`, the log version it covers
//! (u64 LE), then chunks, each a length (u32 LE), the crc32c of its bytes (u32 LE) and the bytes:
//! redo operations ([`super::redo`]) that rebuild the snapshot from nothing (every live row,
//! every key index entry, every string and its count, the meta values, the version). A chunk
//! holds whole operations, at most [`CHUNK_BYTES`] of them (one row or key is far smaller); a
//! zero length ends the file.
//!
//! # Switching in
//!
//! Written to `.tmp`, fsynced, renamed, the directory fsynced; then the manifest is rewritten
//! (atomically, [`super::write_atomic`]) to name it; only then are the log segments it covers
//! and the older checkpoint deleted. A crash at any point leaves the previous manifest with
//! its checkpoint and log, or the new ones: both recover the same data.
//!
//! The writer never waits for a checkpoint: it is written from an immutable snapshot while
//! commits go on; the only pause is taking the snapshot (a lock and an `Arc` clone).

use std::io::{BufWriter, Read as _, Write as _};
use std::path::{Path, PathBuf};

use super::redo::{Op, RedoBuf};
use super::{Read, Snapshot, TablesError};

const MAGIC: &[u8; 8] = b"ESPCKP01";
/// Bytes of operations per chunk.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Largest chunk a reader accepts (an operation past a chunk's budget still ends it).
const MAX_CHUNK: usize = 64 << 20;

/// The file name of the checkpoint covering the log through `log_version`.
pub fn file_name(log_version: u64) -> String {
    format!("checkpoint-{log_version:020}.ckpt")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TablesError + '_ {
    move |source| TablesError::Io { path: path.to_path_buf(), source }
}

/// Writes `snapshot` (covering the log through `log_version`) to its checkpoint file in `dir`,
/// durably; returns the file's path and size.
pub fn write(
    dir: &Path,
    snapshot: &Snapshot,
    log_version: u64,
    shape_tables: usize,
) -> Result<(PathBuf, u64), TablesError> {
    let tmp = dir.join(file_name(log_version)).with_extension("tmp");
    write_file(dir, snapshot, log_version, shape_tables).inspect_err(|_| {
        // A half-written checkpoint would hold space the next attempt needs (a full disk).
        let _ = std::fs::remove_file(&tmp);
    })
}

fn write_file(
    dir: &Path,
    snapshot: &Snapshot,
    log_version: u64,
    shape_tables: usize,
) -> Result<(PathBuf, u64), TablesError> {
    let path = dir.join(file_name(log_version));
    let tmp = path.with_extension("tmp");
    let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(MAGIC).map_err(io(&tmp))?;
    out.write_all(&log_version.to_le_bytes()).map_err(io(&tmp))?;
    let mut buf = RedoBuf::default();
    let mut size = 16u64;
    let mut flush = |buf: &mut RedoBuf, out: &mut BufWriter<std::fs::File>, force: bool| -> Result<(), TablesError> {
        if buf.is_empty() || (!force && buf.len() < CHUNK_BYTES) {
            return Ok(());
        }
        let bytes = buf.bytes();
        out.write_all(&(bytes.len() as u32).to_le_bytes()).map_err(io(&tmp))?;
        out.write_all(&crc32c::crc32c(bytes).to_le_bytes()).map_err(io(&tmp))?;
        out.write_all(bytes).map_err(io(&tmp))?;
        size += 8 + bytes.len() as u64;
        buf.clear();
        Ok(())
    };
    for t in 0..shape_tables as u32 {
        let Some(table) = snapshot.table(t) else { continue };
        for (row, bytes) in table.rows() {
            buf.push(Op::Put { table: t, row, bytes });
            flush(&mut buf, &mut out, false)?;
        }
    }
    for (i, index) in snapshot.indexes.iter().enumerate() {
        for e in index.iter() {
            buf.push(Op::KeyPut { index: i as u32, owner: e.owner, row: e.row, key: e.key });
            flush(&mut buf, &mut out, false)?;
        }
    }
    for (id, count, bytes) in snapshot.strings.iter() {
        let id = id as u32;
        buf.push(Op::StringStored { id, bytes });
        if count != 1 {
            buf.push(Op::StringCount { id, count });
        }
        flush(&mut buf, &mut out, false)?;
    }
    for (name, value) in snapshot.meta.iter() {
        buf.push(Op::Meta { name, value });
    }
    buf.push(Op::Version(snapshot.version()));
    flush(&mut buf, &mut out, true)?;
    out.write_all(&[0; 8]).map_err(io(&tmp))?;
    size += 8;
    let file = out.into_inner().map_err(|e| io(&tmp)(e.into_error()))?;
    file.sync_all().map_err(io(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))?;
    Ok((path, size))
}

/// Reads the checkpoint at `path`, verifying every chunk, and hands each chunk's operations to
/// `apply`. Returns the log version it covers.
pub fn read(path: &Path, apply: &mut dyn FnMut(&[u8]) -> Result<(), String>) -> Result<u64, TablesError> {
    let damaged = |why: String| TablesError::Checkpoint { path: path.to_path_buf(), why };
    let file = std::fs::File::open(path).map_err(io(path))?;
    let mut input = std::io::BufReader::with_capacity(1 << 20, file);
    let mut head = [0u8; 16];
    input.read_exact(&mut head).map_err(|e| damaged(format!("no header: {e}")))?;
    if &head[..8] != MAGIC {
        return Err(damaged("not a checkpoint of this format".into()));
    }
    let log_version = u64::from_le_bytes(head[8..16].try_into().unwrap_or_default());
    let mut chunk = Vec::new();
    let mut at = 16u64;
    // Bounded by the file: every chunk consumes at least its 8-byte header.
    loop {
        let mut h = [0u8; 8];
        input.read_exact(&mut h).map_err(|e| damaged(format!("cut short at byte {at}: {e}")))?;
        let len = u32::from_le_bytes(h[..4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(h[4..].try_into().unwrap_or_default());
        if len == 0 {
            return Ok(log_version);
        }
        if len > MAX_CHUNK {
            return Err(damaged(format!("a chunk of {len} bytes at byte {at}")));
        }
        chunk.resize(len, 0);
        input.read_exact(&mut chunk).map_err(|e| damaged(format!("cut short at byte {at}: {e}")))?;
        if crc32c::crc32c(&chunk) != crc {
            return Err(damaged(format!("the chunk at byte {at} does not match its checksum")));
        }
        apply(&chunk).map_err(|why| damaged(format!("the chunk at byte {at}: {why}")))?;
        at += 8 + len as u64;
    }
}

/// Deletes checkpoint files in `dir` other than `keep` (older ones, and `.tmp` leftovers).
pub fn remove_others(dir: &Path, keep: &str) -> Result<usize, TablesError> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).map_err(io(dir))?.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("checkpoint-") && name != keep {
            std::fs::remove_file(entry.path()).map_err(io(&entry.path()))?;
            removed += 1;
        }
    }
    Ok(removed)
}
