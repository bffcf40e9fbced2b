//! Where a collection query's walk puts the rows of its page: straight into a
//! [`QueryResult`] ([`JsonRows`], for reads on a snapshot), packed ([`PackedRows`], for
//! queries run inside the write transaction), or one at a time to an embedded reader
//! ([`VisitedRows`], for [`crate::Engine::visit_rows`]).
//!
//! The single writer runs every query of every transaction, so what it does per row bounds a
//! transactional workload's throughput. A packed page costs the writer one copy of each
//! text's bytes into buffers shared by the whole page (texts are borrowed from the write
//! transaction's graph until then) and a small cell per value, instead of an owned `String`
//! and a `serde_json::Value` per field; [`PackedRows::into_result`] checks the texts are UTF-8
//! and spells out the same [`QueryResult`] later, on whichever thread delivers the reply.

use std::borrow::Cow;
use std::ops::{ControlFlow, Range};

use espalier_data::DataError;

use crate::run::{QueryResult, Row, RowValue};
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
    /// Keeps a row of `numbers` alone, with the key parts given since the last row ended (no
    /// value given): what a [`Rows::value`] for each and [`Rows::keep_row`] do, unless a kind
    /// of rows has a shorter way (a collection query of numbers, `run::number_row`).
    fn keep_numbers(&mut self, numbers: &[i64]) -> Result<(), InstructionError> {
        for &n in numbers {
            if let Err(e) = self.value(Cell::Number(n)) {
                self.drop_row();
                return Err(e);
            }
        }
        self.keep_row();
        Ok(())
    }
    /// Counts a matching row (kept or not).
    fn count(&mut self);
    /// Whoever takes the rows wants no more: the walk ends.
    fn stopped(&self) -> bool {
        false
    }
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

/// Columns a visited row hands over from the stack.
const ON_STACK: usize = 8;

/// A value of the row being visited: its text as a range of the row's text buffer.
enum Visited {
    Number(i64),
    Text(Range<usize>),
    Value(serde_json::Value),
}

/// The value a visitor is handed for `cell`, its text borrowed from the row's `text`.
fn visited_value<'r>(text: &'r str, cell: &'r Visited) -> RowValue<'r> {
    match cell {
        Visited::Number(n) => RowValue::Int(*n),
        // Ranges of what was pushed: on character boundaries, so `get` always finds them.
        Visited::Text(r) => RowValue::Text(Cow::Borrowed(text.get(r.clone()).unwrap_or_default())),
        // A key of one component is a text, as `Engine::run`'s rows give it.
        Visited::Value(v) => RowValue::from_json(v),
    }
}

/// Rows handed one at a time to [`crate::Engine::visit_rows`]'s visitor, as they are kept:
/// a row's texts are copied into one text buffer and its key into one list of strings, both
/// reused from row to row, so a page of rows allocates nothing per row once the first has
/// sized them.
pub(crate) struct VisitedRows<'v> {
    visit: &'v mut dyn FnMut(&[String], &[RowValue<'_>]) -> ControlFlow<()>,
    total: u64,
    kept: usize,
    stopped: bool,
    /// The row's texts, checked as UTF-8 once, on the way in.
    text: String,
    cells: Vec<Visited>,
    key: Vec<String>,
    /// Key parts of the row being read (the first `key_len` of `key`).
    key_len: usize,
}

impl<'v> VisitedRows<'v> {
    pub(crate) fn new(visit: &'v mut dyn FnMut(&[String], &[RowValue<'_>]) -> ControlFlow<()>) -> Self {
        VisitedRows {
            visit,
            total: 0,
            kept: 0,
            stopped: false,
            text: String::new(),
            cells: Vec::new(),
            key: Vec::new(),
            key_len: 0,
        }
    }
}

impl Rows for VisitedRows<'_> {
    #[inline(always)]
    fn total(&self) -> u64 {
        self.total
    }

    #[inline(always)]
    fn kept(&self) -> usize {
        self.kept
    }

    #[inline(always)]
    fn value(&mut self, cell: Cell<'_>) -> Result<(), InstructionError> {
        // A push in each arm: a value built first, then pushed, was assembled on the stack in
        // pieces and copied with wider loads, which stalled store forwarding (about half of
        // `run::row`'s samples in `bench core`'s collection query).
        match cell {
            Cell::Number(n) => self.cells.push(Visited::Number(n)),
            Cell::Bytes(b) => {
                let start = self.text.len();
                self.text.push_str(utf8(b)?);
                self.cells.push(Visited::Text(start..self.text.len()));
            }
            Cell::Text(t) => {
                let start = self.text.len();
                self.text.push_str(t);
                self.cells.push(Visited::Text(start..self.text.len()));
            }
            Cell::Key(k) => self.cells.push(Visited::Value(key_json(k))),
        }
        Ok(())
    }

    #[inline(always)]
    fn key_part(&mut self, part: &str) {
        if self.key_len == self.key.len() {
            self.key.push(String::new());
        }
        let k = &mut self.key[self.key_len];
        k.clear();
        k.push_str(part);
        self.key_len += 1;
    }

    #[inline(always)]
    fn drop_row(&mut self) {
        self.text.clear();
        self.cells.clear();
        self.key_len = 0;
    }

    fn keep_row(&mut self) {
        self.kept += 1;
        let text = self.text.as_str();
        let value = |c| visited_value(text, c);
        // On the stack for the usual few columns: no allocation per row.
        let key = &self.key[..self.key_len];
        self.stopped = if self.cells.len() <= ON_STACK {
            let n = self.cells.len();
            let mut values = std::mem::ManuallyDrop::new([const { RowValue::Null }; ON_STACK]);
            for (slot, c) in values.iter_mut().zip(&self.cells) {
                // The `Null` replaced owns nothing: forgotten, not dropped (a call each).
                std::mem::forget(std::mem::replace(slot, value(c)));
            }
            let flow = (self.visit)(key, &values[..n]);
            // Numbers and borrowed texts own nothing (`RowValue::owns`).
            if values[..n].iter().any(RowValue::owns) {
                drop(std::mem::ManuallyDrop::into_inner(values));
            }
            flow
        } else {
            (self.visit)(key, &self.cells.iter().map(value).collect::<Vec<_>>())
        }
        .is_break();
        self.drop_row();
    }

    /// The numbers handed to the visitor from the stack as they are: no cell kept for each
    /// and turned into a value after.
    fn keep_numbers(&mut self, numbers: &[i64]) -> Result<(), InstructionError> {
        debug_assert!(self.cells.is_empty() && self.text.is_empty(), "no value given before");
        if numbers.len() > ON_STACK {
            for &n in numbers {
                self.cells.push(Visited::Number(n));
            }
            self.keep_row();
            return Ok(());
        }
        self.kept += 1;
        // Numbers own nothing: the array is forgotten, not dropped.
        let mut values = std::mem::ManuallyDrop::new([const { RowValue::Null }; ON_STACK]);
        for (slot, &n) in values.iter_mut().zip(numbers) {
            std::mem::forget(std::mem::replace(slot, RowValue::Int(n)));
        }
        self.stopped = (self.visit)(&self.key[..self.key_len], &values[..numbers.len()]).is_break();
        self.key_len = 0;
        Ok(())
    }

    #[inline(always)]
    fn count(&mut self) {
        self.total += 1;
    }

    #[inline(always)]
    fn stopped(&self) -> bool {
        self.stopped
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
