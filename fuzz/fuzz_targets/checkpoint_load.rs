//! Opening a checkpoint of the second format (`tables::checkpoint::load`, as `Tables::open`
//! does): page images and key index leaves named by a catalog, each with a valid crc32c, so
//! that the checks behind the checksums run (a page's live bits against the table's counts, a
//! leaf's structure, `key_index::check_leaf`) and a checkpoint that loads is read whole: every
//! row of both tables, every index entry, a lookup of each and a count per owner. A leaf that
//! passes the checks is read in place, through raw pointers: this target is what says those
//! checks are enough.
//!
//! The input, split at `|~`, gives the pieces in file order; a piece's first byte says what
//! it is:
//! - `% 3 == 0`: a page of table `(b >> 2) % 2` (rows of 16 or 40 bytes), page number the
//!   second byte, the rest its bytes (cut or zero-padded to a page);
//! - `% 3 == 1`: a leaf of key index 0, the rest its words (zero-padded to 8 bytes);
//! - `% 3 == 2`: leaves made by a real index from the rest (each pair of bytes an owner and a
//!   one-byte key), so that valid leaves sit among the fuzzer's.
//!
//! The catalog's counts are the pieces' own (live bits, header counts), so that a load gets
//! past them and into the index; a damaged count is the unit tests'. Only a panic, a hang or a
//! crash fails.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use espalier_fuzz::{pieces, push_chunk, scratch};
use espalier_storage::key_index::KeyIndexWriter;
use espalier_storage::table::Layout;
use espalier_storage::tables::checkpoint;
use espalier_storage::tables::redo::{Op, RedoBuf};
use libfuzzer_sys::fuzz_target;

const WIDTHS: [u32; 2] = [16, 40];
const GENERATION: u64 = 7;

fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| scratch().join(checkpoint::file_name(GENERATION)))
}

/// The file so far, with its regions at 64-byte boundaries.
struct File {
    bytes: Vec<u8>,
}

impl File {
    fn region(&mut self, b: &[u8]) -> (u64, u32) {
        self.bytes.resize(self.bytes.len().next_multiple_of(64), 0);
        let at = self.bytes.len() as u64;
        self.bytes.extend_from_slice(b);
        (at, crc32c::crc32c(b))
    }
}

fn u32s(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn u64s(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn word_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

fuzz_target!(|data: &[u8]| {
    let mut file = File { bytes: b"ESPCKP02".to_vec() };
    file.bytes.extend_from_slice(&GENERATION.to_le_bytes());
    // (page, offset, crc) per table; (offset, words, crc) of index 0's leaves; live rows and
    // the highest per table; the index's entries.
    let mut pages: [Vec<(u32, u64, u32)>; 2] = [Vec::new(), Vec::new()];
    let mut live = [(0u32, 0u32); 2];
    let mut leaves: Vec<(u64, u32, u32)> = Vec::new();
    let mut entries = 0u64;
    for piece in pieces(data, b"|~").into_iter().take(64) {
        let Some((&kind, rest)) = piece.split_first() else { continue };
        match kind % 3 {
            0 => {
                let t = usize::from((kind >> 2) % 2);
                let layout = Layout::new(WIDTHS[t] as usize);
                let Some((&page, rest)) = rest.split_first() else { continue };
                let mut b = rest.to_vec();
                b.resize(layout.page_bytes(), 0);
                let rows = layout.rows_per_page();
                for slot in 0..rows {
                    if b[slot / 8] & (1 << (slot % 8)) != 0 {
                        live[t].0 += 1;
                        live[t].1 = live[t].1.max((u32::from(page) << rows.trailing_zeros()) + slot as u32);
                    }
                }
                let (at, crc) = file.region(&b);
                pages[t].push((u32::from(page), at, crc));
            }
            1 => {
                let mut b = rest.to_vec();
                b.resize(b.len().next_multiple_of(8).max(16), 0);
                let words: Vec<u64> = b.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect();
                entries += u64::from(words[0] as u32);
                let (at, crc) = file.region(&b);
                leaves.push((at, words.len() as u32, crc));
            }
            _ => {
                let mut w = KeyIndexWriter::new();
                for pair in rest.chunks_exact(2) {
                    let _ = w.insert(u32::from(pair[0]), &pair[1..], 1 + u32::from(pair[1]));
                }
                for leaf in w.current().leaves() {
                    entries += u64::from(leaf.words[0] as u32);
                    let (at, crc) = file.region(&word_bytes(leaf.words));
                    leaves.push((at, leaf.words.len() as u32, crc));
                }
            }
        }
    }
    let redo_offset = file.bytes.len() as u64;
    let mut ops = RedoBuf::default();
    ops.push(Op::Version(1));
    for part in ops.parts() {
        push_chunk(&mut file.bytes, part);
    }
    file.bytes.extend_from_slice(&[0; 8]);
    let mut catalog = Vec::new();
    u32s(&mut catalog, 2);
    for t in 0..2 {
        for v in [WIDTHS[t], live[t].1 + 1, live[t].0, pages[t].len() as u32] {
            u32s(&mut catalog, v);
        }
        for &(page, at, crc) in &pages[t] {
            u32s(&mut catalog, page);
            u64s(&mut catalog, GENERATION);
            u64s(&mut catalog, at);
            u32s(&mut catalog, crc);
        }
    }
    u32s(&mut catalog, 1);
    u64s(&mut catalog, entries);
    u32s(&mut catalog, leaves.len() as u32);
    for &(at, words, crc) in &leaves {
        u64s(&mut catalog, GENERATION);
        u64s(&mut catalog, at);
        u32s(&mut catalog, words);
        u32s(&mut catalog, crc);
    }
    u32s(&mut catalog, 0);
    let catalog_offset = file.bytes.len() as u64;
    file.bytes.extend_from_slice(&catalog);
    u64s(&mut file.bytes, redo_offset);
    u64s(&mut file.bytes, catalog_offset);
    u64s(&mut file.bytes, catalog.len() as u64);
    u32s(&mut file.bytes, crc32c::crc32c(&catalog));
    u32s(&mut file.bytes, 0);
    file.bytes.extend_from_slice(b"ESPCKEND");
    std::fs::write(path(), &file.bytes).expect("the checkpoint file");

    let loaded = checkpoint::load(scratch(), path(), &WIDTHS, 1, &mut |_| Ok(()));
    let (_, Some(loaded)) = (match loaded {
        Ok(l) => l,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    }) else {
        return;
    };
    for t in &loaded.tables {
        let rows = t.current().rows().map(|(row, bytes)| u64::from(row) + bytes.len() as u64).sum::<u64>();
        std::hint::black_box(rows);
    }
    let index = loaded.indexes[0].current();
    let mut n = 0u64;
    for e in index.iter() {
        assert_eq!(index.get(e.owner, e.key), Some(e.row), "an entry the index iterates is found by its key");
        n += 1;
    }
    assert_eq!(n, index.len(), "the index iterates as many entries as it counts");
    for owner in 0..4 {
        std::hint::black_box(index.count(owner));
    }
});
