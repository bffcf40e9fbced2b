//! Texts in checkpoint files (`docs/storage.md`, "Strings"): a checkpoint writes the texts
//! stored since the one before as records in a region of its file, and a **text directory**
//! (a table of 16-byte rows: id → file generation, offset) says where each live text lies, in
//! this file or an older one. A version reads a text from the heap if it was stored since the
//! last checkpoint ([`super::blobs`]), else through the directory from the mapped file.
//!
//! A record is `[length u32 LE][id u32 LE][crc32c u32 LE][bytes]`, unaligned, one after the
//! other; the crc32c covers the length, the id and the bytes. Recovery reads every region
//! the catalog names (a sequential `pread`, nothing kept), checks each record, and hashes the
//! live ones for the writer's lookup.

use std::sync::Arc;

use crate::mapping::MappedFile;
use crate::table::{TableVersion, TableWriter};

/// Bytes of a text directory row: the file's generation and the record's offset (u64 LE each).
pub const DIR_WIDTH: usize = 16;
/// Bytes of a record's header.
pub const HEADER: usize = 12;

/// The crc32c of a record: its length, id and bytes.
pub fn record_crc(id: u32, bytes: &[u8]) -> u32 {
    let mut head = [0u8; 8];
    head[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    head[4..].copy_from_slice(&id.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&head), bytes)
}

/// The header of the record of text `id` holding `bytes`.
pub fn record_header(id: u32, bytes: &[u8]) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    h[4..8].copy_from_slice(&id.to_le_bytes());
    h[8..].copy_from_slice(&record_crc(id, bytes).to_le_bytes());
    h
}

/// A record header read back: (length, id, crc32c).
pub fn parse_header(h: &[u8]) -> Option<(usize, u32, u32)> {
    let word = |i: usize| Some(u32::from_le_bytes(h.get(i..i + 4)?.try_into().ok()?));
    Some((word(0)? as usize, word(4)?, word(8)?))
}

/// A text directory row: (generation, offset).
pub fn dir_row(generation: u64, offset: u64) -> [u8; DIR_WIDTH] {
    let mut r = [0u8; DIR_WIDTH];
    r[..8].copy_from_slice(&generation.to_le_bytes());
    r[8..].copy_from_slice(&offset.to_le_bytes());
    r
}

/// A text directory row read back.
pub fn parse_dir_row(r: &[u8]) -> Option<(u64, u64)> {
    let word = |i: usize| Some(u64::from_le_bytes(r.get(i..i + 8)?.try_into().ok()?));
    Some((word(0)?, word(8)?))
}

/// The texts of one version that lie in checkpoint files: the directory and the mapped files
/// it points into. Cloning shares both.
#[derive(Clone)]
pub struct MappedTexts {
    dir: TableVersion,
    /// By generation, ascending.
    files: Arc<Vec<Arc<MappedFile>>>,
}

impl std::fmt::Debug for MappedTexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedTexts").field("texts", &self.dir.len()).field("files", &self.files.len()).finish()
    }
}

impl Default for MappedTexts {
    fn default() -> Self {
        MappedTexts { dir: TableWriter::new(DIR_WIDTH).current().clone(), files: Arc::default() }
    }
}

impl MappedTexts {
    /// Texts in `files` (any order) as `dir` places them.
    pub fn new(dir: TableVersion, mut files: Vec<Arc<MappedFile>>) -> MappedTexts {
        files.sort_by_key(|f| f.generation());
        MappedTexts { dir, files: Arc::new(files) }
    }

    /// The directory.
    pub fn dir(&self) -> &TableVersion {
        &self.dir
    }

    /// The mapped files, by generation.
    pub fn files(&self) -> &[Arc<MappedFile>] {
        &self.files
    }

    /// Where text `id` lies, if the directory has it: (generation, offset).
    pub fn place(&self, id: u32) -> Option<(u64, u64)> {
        parse_dir_row(self.dir.row(id)?)
    }

    /// The bytes of text `id` from its file, if the directory has it. The record was verified
    /// at open (or written by this process); the bounds and the id are checked again, since a
    /// read must never go outside the mapping.
    pub fn get(&self, id: u32) -> Option<&[u8]> {
        let (generation, offset) = self.place(id)?;
        let at = self.files.binary_search_by_key(&generation, |f| f.generation()).ok()?;
        let bytes = crate::table::StableBytes::bytes(&*self.files[at]);
        let start = usize::try_from(offset).ok()?;
        let (len, stored, _) = parse_header(bytes.get(start..start.checked_add(HEADER)?)?)?;
        if stored != id {
            return None;
        }
        let body = start + HEADER;
        bytes.get(body..body.checked_add(len)?)
    }
}
