//! Reading a checkpoint back: verifying every page, leaf and text record it names, mapping its
//! files, and the redo chunks of every format.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufReader, Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::Arc;

use super::catalog::{Catalog, Trailer, TRAILER};
use super::texts::TextState;
use super::{file_name, io, MAGIC, MAGIC_V1, MAGIC_V2, MAX_CHUNK};
use crate::key_index::{check_leaf, KeyIndex, KeyIndexWriter, MappedLeaf, NODE_BYTES};
use crate::mapping::MappedFile;
use crate::table::{Layout, Page, StableBytes, TableVersion, TableWriter, MAX_ROW};
use crate::tables::strings::{text_hash, COUNT_WIDTH};
use crate::tables::texts::{parse_dir_row, parse_header, record_crc, HEADER};
use crate::tables::TablesError;

/// Most words a leaf of a checkpoint may have: a full node plus its longest key, generously.
const MAX_LEAF_WORDS: u32 = (4 * NODE_BYTES as u32 + crate::key_index::MAX_KEY_LEN as u32) / 2;

/// Largest catalog read (24 bytes a page: about 170 GiB of pages).
const MAX_CATALOG: u64 = 1 << 30;

/// The structures a format-2 checkpoint holds, read in place from its mapped files.
pub struct Loaded {
    /// The tables, their pages mapped.
    pub tables: Vec<TableWriter>,
    /// The key indexes, their leaves mapped and their inner nodes built in memory.
    pub indexes: Vec<crate::key_index::KeyIndexWriter>,
    /// The checkpoint files it names (generations), its own included.
    pub files: Vec<u64>,
    /// Format 3: the string table, its texts mapped (format 2 gives them as operations).
    pub strings: Option<LoadedStrings>,
}

/// The string table of a format-3 checkpoint.
pub struct LoadedStrings {
    /// The counts, their pages mapped.
    pub counts: TableWriter,
    /// Where the texts lie (the text directory, its pages mapped, and the files).
    pub state: TextState,
    /// (hash, id) of every live text, for the writer's lookup.
    pub hashes: Vec<(u32, u32)>,
}

/// Bytes read at a time from a text region.
const TEXT_WINDOW: usize = 1 << 20;

/// Reads the checkpoint at `path`, verifying every chunk, and hands each chunk of redo
/// operations to `apply` (format 1: the whole snapshot; format 2: strings, meta values and
/// the version). Returns the log version it covers.
pub fn read(path: &Path, apply: &mut dyn FnMut(&[u8]) -> Result<(), String>) -> Result<u64, TablesError> {
    let damaged = |why: String| TablesError::Checkpoint { path: path.to_path_buf(), why };
    let mut file = File::open(path).map_err(io(path))?;
    let mut head = [0u8; 16];
    file.read_exact(&mut head).map_err(|e| damaged(format!("no header: {e}")))?;
    let log_version = u64::from_le_bytes(head[8..16].try_into().unwrap_or_default());
    let start = match &head[..8] {
        m if m == MAGIC_V1 => 16,
        m if m == MAGIC || m == MAGIC_V2 => trailer(&file, path)?.redo_offset,
        _ => return Err(damaged("not a checkpoint of a known format".into())),
    };
    read_chunks(&file, path, start, apply)?;
    Ok(log_version)
}

/// Reads the redo chunks of the checkpoint `file` (at `path`) from byte `start` to the zero
/// length that ends them, verifying each, and hands each to `apply`.
fn read_chunks(
    mut file: &File,
    path: &Path,
    start: u64,
    apply: &mut dyn FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), TablesError> {
    let damaged = |why: String| TablesError::Checkpoint { path: path.to_path_buf(), why };
    file.seek(SeekFrom::Start(start)).map_err(io(path))?;
    let mut input = BufReader::with_capacity(1 << 20, file);
    let mut chunk = Vec::new();
    let mut at = start;
    // Bounded by the file: every chunk consumes at least its 8-byte header.
    loop {
        let mut h = [0u8; 8];
        input.read_exact(&mut h).map_err(|e| damaged(format!("cut short at byte {at}: {e}")))?;
        let len = u32::from_le_bytes(h[..4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(h[4..].try_into().unwrap_or_default());
        if len == 0 {
            return Ok(());
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

/// A format-2 file's trailer.
fn trailer(file: &File, path: &Path) -> Result<Trailer, TablesError> {
    let damaged = |why: String| TablesError::Checkpoint { path: path.to_path_buf(), why };
    let len = file.metadata().map_err(io(path))?.len();
    let mut b = [0u8; TRAILER];
    if len < 16 + TRAILER as u64 {
        return Err(damaged(format!("{len} bytes, too short for a checkpoint")));
    }
    file.read_exact_at(&mut b, len - TRAILER as u64).map_err(io(path))?;
    Trailer::decode(&b, len).map_err(damaged)
}

/// Opens the checkpoint at `path` in `dir`: for format 2, verifies every page and leaf its
/// catalog names (in this file and older ones), maps the files, and builds the tables (rows
/// `widths[t]` wide) and the `indexes` key indexes on them; for format 1 returns no
/// structures. Either way the redo chunks go to `apply`. Returns the log version covered.
pub fn load(
    dir: &Path,
    path: &Path,
    widths: &[u32],
    indexes: u32,
    apply: &mut dyn FnMut(&[u8]) -> Result<(), String>,
) -> Result<(u64, Option<Loaded>), TablesError> {
    let damaged = |why: String| TablesError::Checkpoint { path: path.to_path_buf(), why };
    let file = File::open(path).map_err(io(path))?;
    let mut head = [0u8; 16];
    file.read_exact_at(&mut head, 0).map_err(|e| damaged(format!("no header: {e}")))?;
    let v3 = &head[..8] == MAGIC;
    if !v3 && &head[..8] != MAGIC_V2 {
        return Ok((read(path, apply)?, None));
    }
    // Format 3 has two tables after the schema's: the strings' counts and the text directory.
    let mut widths = widths.to_vec();
    if v3 {
        widths.extend([COUNT_WIDTH as u32, crate::tables::texts::DIR_WIDTH as u32]);
    }
    let generation = u64::from_le_bytes(head[8..16].try_into().unwrap_or_default());
    let t = trailer(&file, path)?;
    if t.catalog_len > MAX_CATALOG {
        return Err(damaged(format!("a catalog of {} bytes (at most {MAX_CATALOG})", t.catalog_len)));
    }
    let mut cat = vec![0u8; t.catalog_len as usize];
    file.read_exact_at(&mut cat, t.catalog_offset).map_err(io(path))?;
    if crc32c::crc32c(&cat) != t.catalog_crc {
        return Err(damaged("the catalog does not match its checksum".into()));
    }
    let catalog = Catalog::decode(&cat, v3).map_err(|why| damaged(format!("the catalog: {why}")))?;
    if catalog.tables.len() != widths.len() || catalog.indexes.len() != indexes as usize {
        return Err(damaged(format!(
            "{} tables and {} key indexes, the database has {} and {indexes}",
            catalog.tables.len(),
            catalog.indexes.len(),
            widths.len()
        )));
    }
    // Every file the catalog names: opened for verifying reads, and mapped.
    let mut files: HashMap<u64, (File, Arc<MappedFile>)> = HashMap::new();
    let own = MappedFile::open(path, generation).map_err(io(path))?;
    files.insert(generation, (file, own));
    for &(g, size) in &catalog.files {
        let p = dir.join(file_name(g));
        let f = File::open(&p).map_err(|e| damaged(format!("it names {} ({e})", p.display())))?;
        let len = f.metadata().map_err(io(&p))?.len();
        if len != size {
            return Err(damaged(format!("it names {} of {size} bytes, which has {len}", p.display())));
        }
        let m = MappedFile::open(&p, g).map_err(io(&p))?;
        files.insert(g, (f, m));
    }
    let region = |g: u64, offset: u64, len: usize, buf: &mut Vec<u8>| -> Result<Arc<MappedFile>, TablesError> {
        let (f, m) =
            files.get(&g).ok_or_else(|| damaged(format!("a place in generation {g}, which it does not name")))?;
        if !offset.is_multiple_of(8) || offset.checked_add(len as u64).is_none_or(|end| end > m.len() as u64) {
            return Err(damaged(format!("a place at {offset} of {len} bytes in generation {g}")));
        }
        buf.resize(len, 0);
        f.read_exact_at(buf, offset).map_err(|e| damaged(format!("reading generation {g} at {offset}: {e}")))?;
        Ok(m.clone())
    };

    let mut buf = Vec::new();
    let mut tables = Vec::with_capacity(widths.len());
    for (t, tc) in catalog.tables.iter().enumerate() {
        let width = (widths[t] as usize).max(1);
        if tc.width as usize != width {
            return Err(damaged(format!("table {t} has rows of {} bytes, the schema's are {width}", tc.width)));
        }
        let layout = Layout::new(width);
        let (mut live, mut highest) = (0u32, 0u32);
        let mut pages = Vec::with_capacity(tc.pages.len());
        let last_page = MAX_ROW >> layout.rows_per_page().trailing_zeros();
        for (i, pp) in tc.pages.iter().enumerate() {
            if pp.page > last_page || (i > 0 && tc.pages[i - 1].page >= pp.page) {
                return Err(damaged(format!("table {t}: page {} out of order or range", pp.page)));
            }
            let owner = region(pp.file, pp.offset, layout.page_bytes(), &mut buf)?;
            if crc32c::crc32c(&buf) != pp.crc {
                return Err(damaged(format!("table {t} page {}: the bytes do not match their checksum", pp.page)));
            }
            let (n, top) = live_rows(&buf, layout, pp.page).map_err(|why| damaged(format!("table {t}: {why}")))?;
            live += n;
            highest = highest.max(top);
            let owner: Arc<dyn StableBytes> = owner;
            let page = Page::mapped(owner, pp.offset as usize, layout, pp.crc)
                .ok_or_else(|| damaged(format!("table {t} page {} outside its file", pp.page)))?;
            pages.push((pp.page, page));
        }
        if live != tc.live || highest >= tc.end {
            return Err(damaged(format!(
                "table {t}: {live} live rows up to row {highest}, the catalog says {} below {}",
                tc.live, tc.end
            )));
        }
        tables.push(TableWriter::from_pages(width, tc.end, live, pages));
    }

    let mut built = Vec::with_capacity(catalog.indexes.len());
    for (i, ic) in catalog.indexes.iter().enumerate() {
        let mut leaves: Vec<MappedLeaf> = Vec::with_capacity(ic.leaves.len());
        for lp in &ic.leaves {
            if lp.words > MAX_LEAF_WORDS {
                return Err(damaged(format!("key index {i}: a leaf of {} words", lp.words)));
            }
            let owner = region(lp.file, lp.offset, lp.words as usize * 8, &mut buf)?;
            if crc32c::crc32c(&buf) != lp.crc {
                return Err(damaged(format!("key index {i}: a leaf at {} does not match its checksum", lp.offset)));
            }
            let words: Vec<u64> =
                buf.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default())).collect();
            let summary = check_leaf(&words, leaves.last().map(|l| &l.summary))
                .map_err(|why| damaged(format!("key index {i}: the leaf at {}: {why}", lp.offset)))?;
            leaves.push(MappedLeaf {
                owner,
                offset: lp.offset as usize,
                words: lp.words as usize,
                crc: lp.crc,
                summary,
            });
        }
        let index =
            KeyIndex::from_leaves(leaves).ok_or_else(|| damaged(format!("key index {i}: a leaf outside its file")))?;
        if index.len() != ic.len {
            return Err(damaged(format!("key index {i}: {} entries, the catalog says {}", index.len(), ic.len)));
        }
        built.push(KeyIndexWriter::from_index(index));
    }
    let strings = match (&catalog.texts, tables.pop(), tables.pop()) {
        (Some(regions), Some(dir), Some(counts)) if v3 => {
            let mut state = TextState { dir, ..TextState::default() };
            let (hashes, live) = scan_texts(regions, &files, counts.current(), state.dir.current())
                .map_err(|why| damaged(format!("the texts: {why}")))?;
            for &(g, offset, len) in regions {
                if live.contains_key(&g) {
                    state.regions.insert(g, (offset, len));
                    state.files.insert(g, files[&g].1.clone());
                }
            }
            state.live = live;
            Some(LoadedStrings { counts, state, hashes })
        }
        (_, dir, counts) => {
            // Format 2: the tables popped were the schema's.
            tables.extend(counts);
            tables.extend(dir);
            None
        }
    };
    read_chunks(&files[&generation].0, path, t.redo_offset, apply)?;
    let mut names: Vec<u64> = files.keys().copied().collect();
    names.sort_unstable();
    Ok((generation, Some(Loaded { tables, indexes: built, files: names, strings })))
}

/// Reads a text region through a window of [`TEXT_WINDOW`] bytes (`pread`: nothing stays
/// resident in the process).
struct Window<'a> {
    file: &'a File,
    start: u64,
    buf: Vec<u8>,
}

impl Window<'_> {
    /// The `n` bytes at `at`, none of them past `end`.
    fn get(&mut self, at: u64, n: usize, end: u64) -> Result<&[u8], String> {
        let want = at
            .checked_add(n as u64)
            .filter(|&e| e <= end)
            .ok_or_else(|| format!("a record at {at} of {n} bytes runs past the region's end at {end}"))?;
        if at < self.start || want > self.start + self.buf.len() as u64 {
            let len = (end - at).min(TEXT_WINDOW.max(n) as u64) as usize;
            self.buf.resize(len, 0);
            self.file.read_exact_at(&mut self.buf, at).map_err(|e| format!("reading at {at}: {e}"))?;
            self.start = at;
        }
        let from = (at - self.start) as usize;
        Ok(&self.buf[from..from + n])
    }
}

/// Verifies every record of the text `regions` (generation, offset, length) in `files`, and
/// returns the (hash, id) of every live text (the directory places it there and `counts` has
/// it live) and the bytes of live records per file; refuses a live string without its record.
fn scan_texts(
    regions: &[(u64, u64, u64)],
    files: &HashMap<u64, (File, Arc<MappedFile>)>,
    counts: &TableVersion,
    dir: &TableVersion,
) -> Result<(Vec<(u32, u32)>, BTreeMap<u64, u64>), String> {
    let mut hashes = Vec::with_capacity(counts.len() as usize);
    let mut live: BTreeMap<u64, u64> = BTreeMap::new();
    for &(g, offset, len) in regions {
        let (file, map) = files.get(&g).ok_or_else(|| format!("a region in generation {g}, which is not named"))?;
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= map.len() as u64)
            .ok_or_else(|| format!("a region at {offset} of {len} bytes in generation {g} of {} bytes", map.len()))?;
        let mut window = Window { file, start: 0, buf: Vec::new() };
        let mut at = offset;
        // Bounded by the region: every record takes at least its header.
        while at < end {
            let (n, id, crc) = parse_header(window.get(at, HEADER, end)?).ok_or("a short header")?;
            let bytes = window.get(at + HEADER as u64, n, end)?;
            if record_crc(id, bytes) != crc {
                return Err(format!("the record at {at} in generation {g} does not match its checksum"));
            }
            let placed = dir.row(id).and_then(parse_dir_row) == Some((g, at));
            if placed && counts.is_live(id) {
                hashes.push((text_hash(bytes), id));
                *live.entry(g).or_default() += (HEADER + n) as u64;
            }
            at += (HEADER + n) as u64;
        }
    }
    if hashes.len() != counts.len() as usize {
        return Err(format!("{} live strings, {} with their text", counts.len(), hashes.len()));
    }
    Ok((hashes, live))
}

/// The live rows of page `page` and the highest of them (0 if none); refuses live bits past
/// the page's rows and a live row 0.
fn live_rows(bytes: &[u8], layout: Layout, page: u32) -> Result<(u32, u32), String> {
    let rows = layout.rows_per_page();
    let mut live = 0;
    let mut highest = 0;
    for (i, &b) in bytes[..layout.bitmap_bytes()].iter().enumerate() {
        for bit in 0..8 {
            if b & (1 << bit) == 0 {
                continue;
            }
            let slot = i * 8 + bit;
            let row = (u64::from(page) << rows.trailing_zeros()) + slot as u64;
            if slot >= rows || row == 0 {
                return Err(format!("page {page} marks slot {slot} live"));
            }
            live += 1;
            highest = row as u32;
        }
    }
    Ok((live, highest))
}
