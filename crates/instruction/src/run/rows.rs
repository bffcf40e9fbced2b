//! Where a collection query's walk puts the rows of its page: straight into a
//! [`QueryResult`] ([`JsonRows`], for reads on a snapshot), or packed ([`PackedRows`], for
//! queries run inside the write transaction).
//!
//! The single writer runs every query of every transaction, so what it does per row bounds a
//! transactional workload's throughput. A packed page costs the writer one copy of each
//! text's bytes into buffers shared by the whole page (texts are borrowed from the write
//! transaction's graph until then) and a small cell per value, instead of an owned `String`
//! and a `serde_json::Value` per field; [`PackedRows::into_result`] checks the texts are UTF-8
//! and spells out the same [`QueryResult`] later, on whichever thread delivers the reply.

use std::ops::Range;

use espalier_data::DataError;

use crate::run::{QueryResult, Row};
use crate::InstructionError;

/// One value of a row as read, borrowed from the graph.
pub(crate) enum Cell<'a> {
    Number(i64),
    /// A text's bytes as stored (not yet checked to be UTF-8).
    Bytes(&'a [u8]),
    /// A text known to be UTF-8 (a state's name).
    Text(&'a str),
    /// A reference's target key: its one component as a text, or several as an array.
    Key(Vec<String>),
}

/// A stored text as text; one that is not UTF-8 is corruption.
#[inline(always)]
fn utf8(bytes: &[u8]) -> Result<&str, InstructionError> {
    std::str::from_utf8(bytes)
        .map_err(|_| InstructionError::Data(DataError::Corrupt("a text read by a query is not UTF-8".into())))
}

fn key_json(mut k: Vec<String>) -> serde_json::Value {
    if k.len() == 1 {
        serde_json::Value::from(k.swap_remove(0))
    } else {
        serde_json::Value::from(k)
    }
}

/// The rows a query's walk keeps: a row's values and key parts come one by one, then the
/// row is kept or dropped (a filter on a later column failed).
pub(crate) trait Rows {
    /// Rows that matched so far (before offset and limit): the result's `total`.
    fn total(&self) -> u64;
    /// Rows kept so far (after offset and limit).
    fn kept(&self) -> usize;
    /// The next value of the row being read.
    fn value(&mut self, cell: Cell<'_>) -> Result<(), InstructionError>;
    /// The next part of the key of the row being read.
    fn key_part(&mut self, part: &str);
    /// Forgets the values and key parts given since the last row was kept or dropped.
    fn drop_row(&mut self);
    /// Keeps the values and key parts given since the last row ended as a row.
    fn keep_row(&mut self);
    /// Counts a matching row (kept or not).
    fn count(&mut self);
}

/// Rows straight into a [`QueryResult`].
pub(crate) struct JsonRows {
    pub(crate) out: QueryResult,
    values: Vec<serde_json::Value>,
    key: Vec<String>,
}

impl JsonRows {
    pub(crate) fn new(columns: Vec<String>) -> JsonRows {
        JsonRows { out: QueryResult { total: 0, columns, rows: Vec::new() }, values: Vec::new(), key: Vec::new() }
    }
}

impl Rows for JsonRows {
    #[inline(always)]
    fn total(&self) -> u64 {
        self.out.total
    }

    #[inline(always)]
    fn kept(&self) -> usize {
        self.out.rows.len()
    }

    #[inline(always)]
    fn value(&mut self, cell: Cell<'_>) -> Result<(), InstructionError> {
        if self.values.capacity() == 0 {
            self.values.reserve_exact(self.out.columns.len());
        }
        self.values.push(match cell {
            Cell::Number(n) => serde_json::Value::from(n),
            Cell::Bytes(b) => serde_json::Value::from(utf8(b)?),
            Cell::Text(t) => serde_json::Value::from(t),
            Cell::Key(k) => key_json(k),
        });
        Ok(())
    }

    #[inline(always)]
    fn key_part(&mut self, part: &str) {
        self.key.push(part.to_string());
    }

    #[inline(always)]
    fn drop_row(&mut self) {
        self.values.clear();
        self.key.clear();
    }

    #[inline(always)]
    fn keep_row(&mut self) {
        let row = Row { key: std::mem::take(&mut self.key), values: std::mem::take(&mut self.values) };
        self.out.rows.push(row);
    }

    #[inline(always)]
    fn count(&mut self) {
        self.out.total += 1;
    }
}

/// Bytes of text per buffer of a packed page: a page of 300 records of ten 100-byte fields
/// takes some 20 of them, none so large that the allocator hands it back to the system
/// between two pages (a page fault per 4 KiB when it is taken again).
const CHUNK: usize = 16 << 10;

/// Where a packed text is: buffer `chunk`, bytes `range`.
#[derive(Debug, Clone, PartialEq)]
struct Span {
    chunk: usize,
    range: Range<usize>,
}

/// A packed value: a number, a text's bytes, or (rare: a compound reference key) a value built
/// whole.
#[derive(Debug, Clone, PartialEq)]
enum Packed {
    Number(i64),
    Text(Span),
    Value(serde_json::Value),
}

/// Where one kept row's values and key parts end.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RowEnd {
    values: usize,
    key: usize,
}

/// Where the row being read began.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Mark {
    cells: usize,
    keys: usize,
    /// Buffers in use, and the length of the last one.
    chunks: usize,
    last: usize,
}

/// A page of rows packed for later: the texts' bytes in buffers of [`CHUNK`] bytes, each value
/// a small cell, each key part a span of the buffers. Spelt out as the [`QueryResult`]
/// [`JsonRows`] would have built by [`PackedRows::into_result`].
#[derive(Debug, Clone, PartialEq)]
pub struct PackedRows {
    total: u64,
    columns: Vec<String>,
    chunks: Vec<Vec<u8>>,
    cells: Vec<Packed>,
    keys: Vec<Span>,
    rows: Vec<RowEnd>,
    row_start: Mark,
}

impl PackedRows {
    pub(crate) fn new(columns: Vec<String>) -> PackedRows {
        PackedRows {
            total: 0,
            columns,
            chunks: Vec::new(),
            cells: Vec::new(),
            keys: Vec::new(),
            rows: Vec::new(),
            row_start: Mark::default(),
        }
    }

    #[inline(always)]
    fn push_bytes(&mut self, bytes: &[u8]) -> Span {
        let room = self.chunks.last().is_some_and(|c| c.capacity() - c.len() >= bytes.len());
        if !room {
            self.chunks.push(Vec::with_capacity(CHUNK.max(bytes.len())));
        }
        let chunk = self.chunks.len() - 1;
        let buf = &mut self.chunks[chunk];
        let start = buf.len();
        buf.extend_from_slice(bytes);
        Span { chunk, range: start..buf.len() }
    }

    fn mark(&self) -> Mark {
        Mark {
            cells: self.cells.len(),
            keys: self.keys.len(),
            chunks: self.chunks.len(),
            last: self.chunks.last().map_or(0, Vec::len),
        }
    }

    /// The page as the query's result; an error if a text is not UTF-8 (corruption).
    pub fn into_result(self) -> Result<QueryResult, InstructionError> {
        let PackedRows { total, columns, chunks, cells, keys, rows: ends, .. } = self;
        let text = |s: &Span| -> Result<&str, InstructionError> {
            let bytes = chunks.get(s.chunk).and_then(|c| c.get(s.range.clone()));
            utf8(bytes.ok_or_else(|| InstructionError::Data(DataError::Corrupt("a packed text out of range".into())))?)
        };
        let mut rows = Vec::with_capacity(ends.len());
        let mut cells = cells.into_iter();
        let mut keys = keys.iter();
        let mut at = RowEnd { values: 0, key: 0 };
        for end in ends {
            let mut values = Vec::with_capacity(end.values - at.values);
            for cell in cells.by_ref().take(end.values - at.values) {
                values.push(match cell {
                    Packed::Number(n) => serde_json::Value::from(n),
                    Packed::Text(s) => serde_json::Value::from(text(&s)?),
                    Packed::Value(v) => v,
                });
            }
            let mut key = Vec::with_capacity(end.key - at.key);
            for s in keys.by_ref().take(end.key - at.key) {
                key.push(text(s)?.to_string());
            }
            at = end;
            rows.push(Row { key, values });
        }
        Ok(QueryResult { total, columns, rows })
    }
}

impl Rows for PackedRows {
    #[inline(always)]
    fn total(&self) -> u64 {
        self.total
    }

    #[inline(always)]
    fn kept(&self) -> usize {
        self.rows.len()
    }

    #[inline(always)]
    fn value(&mut self, cell: Cell<'_>) -> Result<(), InstructionError> {
        let packed = match cell {
            Cell::Number(n) => Packed::Number(n),
            // Checked to be UTF-8 when spelt out, off the writer.
            Cell::Bytes(b) => Packed::Text(self.push_bytes(b)),
            Cell::Text(t) => Packed::Text(self.push_bytes(t.as_bytes())),
            Cell::Key(k) => Packed::Value(key_json(k)),
        };
        self.cells.push(packed);
        Ok(())
    }

    #[inline(always)]
    fn key_part(&mut self, part: &str) {
        let span = self.push_bytes(part.as_bytes());
        self.keys.push(span);
    }

    #[inline(always)]
    fn drop_row(&mut self) {
        let m = self.row_start;
        self.cells.truncate(m.cells);
        self.keys.truncate(m.keys);
        self.chunks.truncate(m.chunks);
        if let Some(last) = self.chunks.last_mut() {
            last.truncate(m.last);
        }
    }

    #[inline(always)]
    fn keep_row(&mut self) {
        self.rows.push(RowEnd { values: self.cells.len(), key: self.keys.len() });
        self.row_start = self.mark();
    }

    #[inline(always)]
    fn count(&mut self) {
        self.total += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same calls made on both kinds of rows.
    fn fill(rows: &mut impl Rows) {
        rows.value(Cell::Number(1)).unwrap();
        rows.value(Cell::Bytes("é a".as_bytes())).unwrap();
        rows.key_part("k1");
        rows.keep_row();
        rows.count();
        // A row dropped half way (a filter failed on a later column) leaves nothing.
        rows.value(Cell::Bytes(&[b'x'; CHUNK])).unwrap();
        rows.key_part("gone");
        rows.drop_row();
        rows.count();
        rows.value(Cell::Text("Yes")).unwrap();
        rows.value(Cell::Key(vec!["a".into(), "b".into()])).unwrap();
        rows.value(Cell::Bytes(&[b'y'; CHUNK + 1])).unwrap();
        rows.key_part("k2");
        rows.key_part("t");
        rows.keep_row();
        rows.count();
    }

    #[test]
    fn packed_rows_spell_out_what_json_rows_build() {
        let columns = vec!["a".to_string(), "b".to_string()];
        let mut json = JsonRows::new(columns.clone());
        let mut packed = PackedRows::new(columns);
        fill(&mut json);
        fill(&mut packed);
        assert_eq!(packed.kept(), 2);
        assert_eq!(packed.total(), 3);
        assert_eq!(packed.into_result().unwrap(), json.out);
        assert_eq!(json.out.rows[1].key, vec!["k2".to_string(), "t".to_string()]);
        assert_eq!(json.out.rows[1].values[1], serde_json::json!(["a", "b"]));
    }

    #[test]
    fn a_text_that_is_not_utf8_is_an_error_not_a_panic() {
        let mut packed = PackedRows::new(vec!["a".into()]);
        packed.value(Cell::Bytes(&[0xff, 0xfe])).unwrap();
        packed.keep_row();
        assert!(matches!(packed.into_result(), Err(InstructionError::Data(DataError::Corrupt(_)))));
        let mut json = JsonRows::new(vec!["a".into()]);
        assert!(json.value(Cell::Bytes(&[0xff])).is_err());
    }
}
