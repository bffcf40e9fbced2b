//! Checkpoints: a published snapshot written to files that are then mapped read-only, so
//! that recovery starts from it, the log before it can go, and data larger than memory lives
//! in the OS page cache (`docs/storage.md`, "Checkpoints").
//!
//! # File (format 3)
//!
//! `DIR/checkpoint-<log version, 20 digits>.ckpt`; the log version it covers is the file's
//! **generation**.
//!
//! - magic `ESPCKP03`, the log version (u64 LE);
//! - **page images**: every page of the tables, of the string table's counts (a table of
//!   8-byte rows, after the schema's tables) and every key index leaf that was on the heap
//!   (written since the last checkpoint), each at a 64-byte boundary. A page or leaf that is
//!   mapped from an older checkpoint file is not written again: the catalog names its place
//!   there. When less than half of the older files' bytes (pages, leaves and live texts) are
//!   still named, everything is written (the older files then go);
//! - the **text region**: a record ([`super::texts`]: length, id, crc32c, bytes) for each text
//!   stored since the last checkpoint (every text on a rewrite);
//! - the pages of the **text directory** (a table of 16-byte rows: id → generation, offset,
//!   the last table) that changed, as above;
//! - **redo chunks** ([`super::redo`] operations, as format 1 below): the meta values and the
//!   version;
//! - the **catalog**: per table (the schema's, the counts, the text directory) its row width,
//!   end, live rows and pages (page number, file, offset, crc32c of the page); per key index
//!   its entry count and leaves in key order (file, offset, words, crc32c); the older files it
//!   names, with their sizes; the text regions that hold live texts (file, offset, length);
//! - a trailer: the redo chunks' offset, the catalog's offset, length and crc32c, `ESPCKEND`.
//!
//! Recovery reads every page and leaf it names and every text region (a sequential read, not
//! through the mapping, so that it leaves nothing resident in the process), checks each
//! crc32c, a page's live bits, a leaf's structure ([`crate::key_index::check_leaf`]) and that
//! every live string has its record, hashes the live texts for the writer's lookup, then maps
//! the files and reads through the mappings from then on.
//!
//! Format 2 (`ESPCKP02`, earlier builds): as format 3 without the counts, the text region, the
//! text directory and the catalog's text regions; the strings (every text and its count) are
//! redo chunks. It is read, its strings loaded into memory, and the next checkpoint writes
//! format 3 (with every text, all being on the heap).
//!
//! Format 1 (`ESPCKP01`, earlier builds): the magic, the log version, then only redo chunks
//! (each a length u32 LE, its crc32c, the bytes; a zero length ends them) that rebuild the
//! snapshot from nothing; it is read, loaded into memory, and the next checkpoint writes
//! format 3.
//!
//! # Switching in
//!
//! Written to `.tmp`, fsynced, renamed, the directory fsynced; then the manifest is rewritten
//! (atomically: a temporary file, fsynced, renamed) to name it; only then are the log segments it covers
//! and the files no longer named deleted. A crash at any point leaves the previous manifest
//! with its files and log, or the new ones: both recover the same data.
//!
//! The writer never waits for a checkpoint to be written: it is written from an immutable
//! snapshot while commits go on. Afterwards the writer swaps each page and leaf that the
//! checkpoint wrote and that has not changed since for its mapped copy (a pointer swap each,
//! under the writer's lock), so that their heap memory goes once no snapshot holds it.

mod catalog;
mod load;
mod texts;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

use super::redo::{Op, RedoBuf};
use super::{Snapshot, TablesError};
use crate::key_index::{LeafCopy, LeafImage};
use crate::table::TableVersion;
use catalog::{Catalog, IndexCatalog, LeafPlace, PagePlace, TableCatalog, Trailer};

pub use load::{load, read, Loaded};
pub use texts::{SavedTexts, TextState};

/// Format 1's magic: redo chunks only.
const MAGIC_V1: &[u8; 8] = b"ESPCKP01";
/// Format 2's magic: page images, redo chunks (with the strings), catalog, trailer.
const MAGIC_V2: &[u8; 8] = b"ESPCKP02";
/// Format 3's magic: page images, texts, redo chunks, catalog with text regions, trailer.
const MAGIC: &[u8; 8] = b"ESPCKP03";
/// Bytes of operations per chunk.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Largest chunk a reader accepts (an operation past a chunk's budget still ends it).
const MAX_CHUNK: usize = 64 << 20;
/// Page images and leaves start at multiples of this (a cache line; the mapping is
/// page-aligned, so a leaf's words are 8-aligned in memory).
const ALIGN: u64 = 64;

/// The file name of the checkpoint covering the log through `log_version`.
pub fn file_name(log_version: u64) -> String {
    format!("checkpoint-{log_version:020}.ckpt")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TablesError + '_ {
    move |source| TablesError::Io { path: path.to_path_buf(), source }
}

/// What a checkpoint wrote: its file, and the pages and leaves it wrote there, which the
/// writer can swap for their mapped copies ([`super::Writer::swap_in_mapped_pages`]).
#[derive(Debug, Default)]
pub struct Written {
    /// The new checkpoint file.
    pub path: PathBuf,
    /// The file's size.
    pub bytes: u64,
    /// The file's generation (the log version it covers).
    pub generation: u64,
    /// Each page written to this file.
    pub pages: Vec<WrittenPage>,
    /// Each leaf written to this file: by key index, by the leaf's buffer address in the
    /// snapshot written, where its copy lies.
    pub leaves: BTreeMap<u32, HashMap<usize, LeafCopy>>,
    /// Every checkpoint file the new one names, itself included: the others can go.
    pub files: Vec<u64>,
    /// Pages of the text directory written to the file (table number: none), which the
    /// checkpoint swaps in its own [`TextState`].
    pub dir_pages: Vec<WrittenPage>,
}

/// A table page a checkpoint wrote to its own file.
#[derive(Debug, Clone, Copy)]
pub struct WrittenPage {
    /// The table.
    pub table: u32,
    /// The page number.
    pub page: u32,
    /// Where its copy starts in the file.
    pub offset: u64,
    /// The copy's crc32c.
    pub crc: u32,
}

impl Written {
    /// The pages and leaves written to the file.
    pub fn count(&self) -> usize {
        self.pages.len() + self.leaves.values().map(HashMap::len).sum::<usize>()
    }
}

/// Writes `snapshot` (covering the log through `log_version`) to its checkpoint file in `dir`,
/// durably: the pages and leaves that are not mapped from an older checkpoint file (all of
/// them when less than half of the older files is still in use) and the texts on the heap;
/// `texts` is updated to place them (and left as it was if the checkpoint fails).
pub fn write(
    dir: &Path,
    snapshot: &Snapshot,
    log_version: u64,
    shape_tables: usize,
    texts: &mut TextState,
) -> Result<Written, TablesError> {
    let tmp = dir.join(file_name(log_version)).with_extension("tmp");
    let saved = texts.save();
    write_file(dir, snapshot, log_version, shape_tables, texts).inspect_err(|_| {
        // A half-written checkpoint would hold space the next attempt needs (a full disk).
        let _ = std::fs::remove_file(&tmp);
        texts.restore(&saved);
    })
}

/// The checkpoint file being written, and where its end is.
struct Out {
    file: BufWriter<File>,
    at: u64,
    tmp: PathBuf,
}

impl Out {
    fn write(&mut self, b: &[u8]) -> Result<(), TablesError> {
        self.file.write_all(b).map_err(io(&self.tmp))?;
        self.at += b.len() as u64;
        Ok(())
    }

    /// Zeros up to the next [`ALIGN`] boundary; returns it.
    fn align(&mut self) -> Result<u64, TablesError> {
        let pad = (self.at.next_multiple_of(ALIGN) - self.at) as usize;
        self.write(&[0u8; ALIGN as usize][..pad])?;
        Ok(self.at)
    }

    /// Writes the operations in `buf` as chunks (length, crc32c, bytes; one per part of
    /// `buf`, each whole operations) if it holds at least [`CHUNK_BYTES`] or `force`.
    fn chunk(&mut self, buf: &mut RedoBuf, force: bool) -> Result<(), TablesError> {
        if buf.is_empty() || (!force && buf.len() < CHUNK_BYTES) {
            return Ok(());
        }
        for bytes in buf.parts() {
            self.write(&(bytes.len() as u32).to_le_bytes())?;
            self.write(&crc32c::crc32c(bytes).to_le_bytes())?;
            self.write(bytes)?;
        }
        buf.clear();
        Ok(())
    }
}

/// The bytes of `words` in memory order (native byte order), as a mapping reads them back.
fn word_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u8 has alignment 1 and every u64 is valid as bytes.
    let (_, bytes, _) = unsafe { words.align_to::<u8>() };
    bytes
}

/// The pages of `table` (table number `t`) into `out`, or their places in older files when
/// `keep` gives them; returns its catalog.
fn write_table(
    out: &mut Out,
    table: &TableVersion,
    pages: &[u32],
    t: u32,
    generation: u64,
    rewrite: bool,
    written: &mut Vec<WrittenPage>,
) -> Result<TableCatalog, TablesError> {
    let mut tc = TableCatalog { width: table.width() as u32, end: table.end(), live: table.len(), pages: Vec::new() };
    for &p in pages {
        let Some(page) = table.page(p) else { continue };
        let place = match page.file_place().filter(|_| !rewrite) {
            Some(pl) => PagePlace { page: p, file: pl.file, offset: pl.offset, crc: pl.crc },
            None => {
                let offset = out.align()?;
                let crc = crc32c::crc32c(page.bytes());
                out.write(page.bytes())?;
                written.push(WrittenPage { table: t, page: p, offset, crc });
                PagePlace { page: p, file: generation, offset, crc }
            }
        };
        tc.pages.push(place);
    }
    Ok(tc)
}

fn write_file(
    dir: &Path,
    snapshot: &Snapshot,
    log_version: u64,
    shape_tables: usize,
    texts: &mut TextState,
) -> Result<Written, TablesError> {
    let path = dir.join(file_name(log_version));
    let tmp = path.with_extension("tmp");
    // The schema's tables, then the string table's counts.
    let mut tables: Vec<&TableVersion> = snapshot.tables[..shape_tables.min(snapshot.tables.len())].iter().collect();
    tables.push(snapshot.strings.counts());
    // Which older files the snapshot's mapped pages, leaves and texts are in, and how much of
    // each is in use.
    let mut named: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    // Walked once: the sizes of the older files' parts in use decide what is written.
    let pages: Vec<Vec<u32>> = tables.iter().map(|t| t.present_pages()).collect();
    let leaves: Vec<Vec<LeafImage>> = snapshot.indexes.iter().map(|i| i.leaves()).collect();
    for (table, pages) in tables.iter().zip(&pages) {
        for &p in pages {
            if let Some(place) = table.page(p).and_then(|page| page.file_place()) {
                let e = named.entry(place.file).or_insert((0, place.file_len));
                e.0 += table.layout().page_bytes() as u64;
            }
        }
    }
    for index in &leaves {
        for leaf in index {
            if let Some(place) = leaf.place {
                let e = named.entry(place.file).or_insert((0, place.file_len));
                e.0 += leaf.words.len() as u64 * 8;
            }
        }
    }
    let dir_pages_before = texts.dir.current().present_pages();
    for &p in &dir_pages_before {
        if let Some(place) = texts.dir.current().page(p).and_then(|page| page.file_place()) {
            let e = named.entry(place.file).or_insert((0, place.file_len));
            e.0 += texts.dir.current().layout().page_bytes() as u64;
        }
    }
    for (&g, &live) in &texts.live {
        if let Some(file) = texts.files.get(&g) {
            named.entry(g).or_insert((0, file.len() as u64)).0 += live;
        }
    }
    let (live, size) = named.values().fold((0, 0), |(l, s), &(live, size)| (l + live, s + size));
    // Rewrite everything once the older files are mostly dead: disk stays within about twice
    // the data, and each byte is rewritten a bounded number of times.
    let rewrite = live * 2 < size;

    let file = File::create(&tmp).map_err(io(&tmp))?;
    let mut out = Out { file: BufWriter::with_capacity(1 << 20, file), at: 0, tmp: tmp.clone() };
    out.write(MAGIC)?;
    out.write(&log_version.to_le_bytes())?;
    let mut written = Written { generation: log_version, ..Written::default() };
    let mut catalog = Catalog::default();
    for (t, (table, pages)) in tables.iter().zip(&pages).enumerate() {
        catalog.tables.push(write_table(&mut out, table, pages, t as u32, log_version, rewrite, &mut written.pages)?);
    }
    for (i, (index, index_leaves)) in snapshot.indexes.iter().zip(&leaves).enumerate() {
        let mut ic = IndexCatalog { len: index.len(), leaves: Vec::new() };
        for leaf in index_leaves {
            let words = leaf.words.len() as u32;
            let place = match leaf.place.filter(|_| !rewrite) {
                Some(pl) => LeafPlace { file: pl.file, offset: pl.offset, words, crc: pl.crc },
                None => {
                    let offset = out.align()?;
                    let bytes = word_bytes(leaf.words);
                    let crc = crc32c::crc32c(bytes);
                    out.write(bytes)?;
                    let copy = LeafCopy { offset: offset as usize, words: leaf.words.len(), crc };
                    written.leaves.entry(i as u32).or_default().insert(leaf.words.as_ptr() as usize, copy);
                    LeafPlace { file: log_version, offset, words, crc }
                }
            };
            ic.leaves.push(place);
        }
        catalog.indexes.push(ic);
    }

    texts::write_texts(&mut out, snapshot, log_version, rewrite, texts)?;
    let dir_table = texts.dir.current().clone();
    let dir_pages = dir_table.present_pages();
    let dir_number = tables.len() as u32;
    catalog.tables.push(write_table(
        &mut out,
        &dir_table,
        &dir_pages,
        dir_number,
        log_version,
        rewrite,
        &mut written.dir_pages,
    )?);
    // The older files still named: by a page or leaf written in place, or by a live text.
    texts.live.retain(|_, live| *live > 0);
    texts.regions.retain(|g, _| texts.live.contains_key(g));
    if !rewrite {
        let mut in_use: BTreeMap<u64, u64> = BTreeMap::new();
        let places = catalog.tables.iter().flat_map(|t| t.pages.iter().map(|p| p.file));
        let leaf_places = catalog.indexes.iter().flat_map(|i| i.leaves.iter().map(|l| l.file));
        for g in places.chain(leaf_places).chain(texts.live.keys().copied()) {
            if let Some(&(_, size)) = named.get(&g) {
                in_use.insert(g, size);
            }
        }
        catalog.files = in_use.into_iter().collect();
    }
    catalog.texts = Some(texts.regions.iter().map(|(&g, &(offset, len))| (g, offset, len)).collect());
    written.files = catalog.files.iter().map(|&(f, _)| f).chain([log_version]).collect();

    let redo_offset = out.at;
    let mut buf = RedoBuf::default();
    for (name, value) in snapshot.meta.iter() {
        buf.push(Op::Meta { name, value });
        out.chunk(&mut buf, false)?;
    }
    buf.push(Op::Version(snapshot.version));
    out.chunk(&mut buf, true)?;
    out.write(&[0; 8])?;

    let catalog_bytes = catalog.encode();
    let trailer = Trailer {
        redo_offset,
        catalog_offset: out.at,
        catalog_len: catalog_bytes.len() as u64,
        catalog_crc: crc32c::crc32c(&catalog_bytes),
    };
    out.write(&catalog_bytes)?;
    out.write(&trailer.encode())?;
    written.bytes = out.at;
    let file = out.file.into_inner().map_err(|e| io(&tmp)(e.into_error()))?;
    file.sync_all().map_err(io(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))?;
    written.path = path;
    Ok(written)
}

/// Deletes the checkpoint files in `dir` whose generation is not in `keep` (older ones no
/// longer named, and `.tmp` leftovers).
pub fn remove_others(dir: &Path, keep: &[u64]) -> Result<usize, TablesError> {
    let names: Vec<String> = keep.iter().map(|&g| file_name(g)).collect();
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).map_err(io(dir))?.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("checkpoint-") && !names.iter().any(|k| *k == name) {
            std::fs::remove_file(entry.path()).map_err(io(&entry.path()))?;
            removed += 1;
        }
    }
    Ok(removed)
}
