//! A checkpoint's catalog and trailer (formats 2 and 3; see the parent module for the file):
//! where every page and leaf of the snapshot lies, in this file or an older one, and (format 3)
//! where the text records are.

/// The trailer's magic, the file's last eight bytes.
pub(super) const TRAILER_MAGIC: &[u8; 8] = b"ESPCKEND";
/// Bytes of the trailer.
pub(super) const TRAILER: usize = 40;

/// One table page's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PagePlace {
    pub page: u32,
    pub file: u64,
    pub offset: u64,
    pub crc: u32,
}

/// One table: its geometry, counts and pages in page order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct TableCatalog {
    pub width: u32,
    pub end: u32,
    pub live: u32,
    pub pages: Vec<PagePlace>,
}

/// One key index leaf's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LeafPlace {
    pub file: u64,
    pub offset: u64,
    pub words: u32,
    pub crc: u32,
}

/// One key index: its entry count and leaves in key order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct IndexCatalog {
    pub len: u64,
    pub leaves: Vec<LeafPlace>,
}

/// The whole catalog.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Catalog {
    pub tables: Vec<TableCatalog>,
    pub indexes: Vec<IndexCatalog>,
    /// The older checkpoint files it names (generation, size).
    pub files: Vec<(u64, u64)>,
    /// Format 3: the text regions holding live texts (generation, offset, length), this file's
    /// among them if it wrote texts.
    /// `None` in format 2, which kept the strings as redo chunks.
    pub texts: Option<Vec<(u64, u64, u64)>>,
}

/// Where the parts of a format-2 file are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Trailer {
    pub redo_offset: u64,
    pub catalog_offset: u64,
    pub catalog_len: u64,
    pub catalog_crc: u32,
}

impl Trailer {
    pub fn encode(&self) -> [u8; TRAILER] {
        let mut b = [0u8; TRAILER];
        b[..8].copy_from_slice(&self.redo_offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.catalog_offset.to_le_bytes());
        b[16..24].copy_from_slice(&self.catalog_len.to_le_bytes());
        b[24..28].copy_from_slice(&self.catalog_crc.to_le_bytes());
        b[32..].copy_from_slice(TRAILER_MAGIC);
        b
    }

    /// The trailer of a file of `file_len` bytes ending in `b`, if its parts lie in order
    /// inside the file.
    pub fn decode(b: &[u8; TRAILER], file_len: u64) -> Result<Trailer, String> {
        if &b[32..] != TRAILER_MAGIC {
            return Err("no trailer (the file is cut short or not a checkpoint)".into());
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let t = Trailer {
            redo_offset: u64_at(0),
            catalog_offset: u64_at(8),
            catalog_len: u64_at(16),
            catalog_crc: u32::from_le_bytes(b[24..28].try_into().unwrap_or_default()),
        };
        let body_end = file_len.saturating_sub(TRAILER as u64);
        let ordered = 16 <= t.redo_offset
            && t.redo_offset <= t.catalog_offset
            && t.catalog_offset.checked_add(t.catalog_len) == Some(body_end);
        if !ordered {
            return Err(format!(
                "a trailer naming redo at {}, a catalog at {} of {} bytes, in a file of {file_len}",
                t.redo_offset, t.catalog_offset, t.catalog_len
            ));
        }
        Ok(t)
    }
}

impl Catalog {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        let u32s = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        let u64s = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
        u32s(&mut b, self.tables.len() as u32);
        for t in &self.tables {
            for v in [t.width, t.end, t.live, t.pages.len() as u32] {
                u32s(&mut b, v);
            }
            for p in &t.pages {
                u32s(&mut b, p.page);
                u64s(&mut b, p.file);
                u64s(&mut b, p.offset);
                u32s(&mut b, p.crc);
            }
        }
        u32s(&mut b, self.indexes.len() as u32);
        for i in &self.indexes {
            u64s(&mut b, i.len);
            u32s(&mut b, i.leaves.len() as u32);
            for l in &i.leaves {
                u64s(&mut b, l.file);
                u64s(&mut b, l.offset);
                u32s(&mut b, l.words);
                u32s(&mut b, l.crc);
            }
        }
        u32s(&mut b, self.files.len() as u32);
        for &(file, size) in &self.files {
            u64s(&mut b, file);
            u64s(&mut b, size);
        }
        if let Some(texts) = &self.texts {
            u32s(&mut b, texts.len() as u32);
            for &(g, offset, len) in texts {
                for v in [g, offset, len] {
                    u64s(&mut b, v);
                }
            }
        }
        b
    }

    /// The catalog in `b` (with text regions if `texts`: format 3); every count is bounded by
    /// the bytes left, so a damaged count cannot make a large allocation.
    pub fn decode(b: &[u8], texts: bool) -> Result<Catalog, String> {
        let mut r = Reader { b, at: 0 };
        let mut c = Catalog::default();
        let n = r.count(16)?;
        for _ in 0..n {
            let (width, end, live) = (r.u32()?, r.u32()?, r.u32()?);
            let pages = r.count(24)?;
            let mut t = TableCatalog { width, end, live, pages: Vec::with_capacity(pages) };
            for _ in 0..pages {
                t.pages.push(PagePlace { page: r.u32()?, file: r.u64()?, offset: r.u64()?, crc: r.u32()? });
            }
            c.tables.push(t);
        }
        let n = r.count(12)?;
        for _ in 0..n {
            let len = r.u64()?;
            let leaves = r.count(24)?;
            let mut i = IndexCatalog { len, leaves: Vec::with_capacity(leaves) };
            for _ in 0..leaves {
                i.leaves.push(LeafPlace { file: r.u64()?, offset: r.u64()?, words: r.u32()?, crc: r.u32()? });
            }
            c.indexes.push(i);
        }
        let n = r.count(16)?;
        for _ in 0..n {
            c.files.push((r.u64()?, r.u64()?));
        }
        if texts {
            let n = r.count(24)?;
            let mut regions = Vec::with_capacity(n);
            for _ in 0..n {
                regions.push((r.u64()?, r.u64()?, r.u64()?));
            }
            c.texts = Some(regions);
        }
        if r.at != b.len() {
            return Err(format!("{} bytes after the catalog's end", b.len() - r.at));
        }
        Ok(c)
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let s = self.b.get(self.at..self.at + n).ok_or_else(|| format!("cut short at byte {}", self.at))?;
        self.at += n;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap_or_default()))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default()))
    }

    /// A count of items of at least `each` bytes, no more than the bytes left allow.
    fn count(&mut self, each: usize) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n > (self.b.len() - self.at) / each {
            return Err(format!("a count of {n} at byte {} in a catalog of {} bytes", self.at - 4, self.b.len()));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_round_trips_and_a_damaged_count_is_refused() {
        let c = Catalog {
            tables: vec![TableCatalog {
                width: 24,
                end: 300,
                live: 2,
                pages: vec![PagePlace { page: 0, file: 7, offset: 64, crc: 9 }],
            }],
            indexes: vec![IndexCatalog {
                len: 3,
                leaves: vec![LeafPlace { file: 7, offset: 4160, words: 12, crc: 1 }],
            }],
            files: vec![(3, 8192)],
            texts: Some(vec![(3, 128, 40)]),
        };
        let b = c.encode();
        assert_eq!(Catalog::decode(&b, true).unwrap(), c);
        assert!(Catalog::decode(&b, false).is_err(), "format 2 has no text regions");
        let mut bad = b.clone();
        bad[0] = 0xff;
        assert!(Catalog::decode(&bad, true).unwrap_err().contains("a count of"));
        assert!(Catalog::decode(&b[..b.len() - 1], true).is_err());
        let t = Trailer { redo_offset: 16, catalog_offset: 100, catalog_len: 20, catalog_crc: 5 };
        assert_eq!(Trailer::decode(&t.encode(), 160).unwrap(), t);
        assert!(Trailer::decode(&t.encode(), 161).is_err());
    }
}
