//! The indexes declared in the schema (`index 'Name' ( path ) 'property' kind [unique]`).
//!
//! Every entry of an indexed collection has one key in the index's key index (owner 0):
//! `encoded value · entry row (u32, big-endian)`, so that the keys of one index are ordered
//! by value and, within a value, by entry; the key index's value is that row too. The entry's
//! type is the collection's, so the row is its whole id, and a small value and its row fit
//! in the eight bytes a key index compares as one word: entries with one value (OO7's ~100
//! atomic parts of one build date) are told apart without comparing key bytes. [`crate::WriteGraph`]
//! keeps the rows in the same write transaction as the entries (on creation with the
//! defaults, on every change of the property, on removal), so an index is never behind.
//!
//! Encodings keep byte order equal to value order:
//! - number: a tag byte, then the number's significant bytes, big-endian ([`encode_number`]):
//!   `0x80 + n` and the `n` bytes of a number ≥ 0, `0x7F − n` and the low `n` bytes of a
//!   negative one (`n` counted on `-v − 1`). Small numbers (ids, dates) then differ in the
//!   first four bytes, which a key index compares as one integer before any key bytes: a
//!   fixed 8-byte form shared them (`0x80 00 00 00`), and every lookup compared key bytes;
//! - state: the state's u32 index, big-endian (indexes only test equality of states);
//! - text: the UTF-8 bytes with `00` escaped as `00 FF`, then `00 00`. A text longer than
//!   [`MAX_TEXT_BYTES`] keeps only its first bytes and ends with `00 01` instead, so the key
//!   stays short; such rows are candidates, and readers check the value
//!   on the entry itself (the query executor always re-checks the condition an index served).

use espalier_schema::{IndexDecl, NodeTypeId, PropertyKind, Schema, StateIndex};
use espalier_storage::key_index::{KeyIndex, Range};
use espalier_storage::tables::Read;

use crate::record::{self, NodeId, NodeRef};
use crate::{DataError, Graph, NodeView, Result};

/// Longest text prefix stored in an index key (escaped it is at most twice as long).
pub const MAX_TEXT_BYTES: usize = 200;

/// A value as an index orders it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexValue<'v> {
    /// A number.
    Number(i64),
    /// A text.
    Text(&'v str),
    /// A state, by its index in the stategroup.
    State(StateIndex),
}

/// What to look up in an index. Bounds are inclusive: a caller wanting `<` re-checks.
#[derive(Debug, Clone, Copy)]
pub enum Probe<'v> {
    /// The entries with this value.
    Equal(IndexValue<'v>),
    /// The entries with a value between the bounds, both inclusive; `None` leaves a side open.
    Range {
        /// The lower bound, if any.
        low: Option<IndexValue<'v>>,
        /// The upper bound, if any.
        high: Option<IndexValue<'v>>,
    },
    /// The entries whose text starts with this prefix.
    Prefix(&'v str),
}

fn escape_into(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
}

/// Longest encoding of a number: the tag and eight bytes.
pub const MAX_NUMBER_BYTES: usize = 9;

/// Writes the encoding of number `v` at the start of `out` (see the module documentation) and
/// returns its length.
pub fn encode_number(v: i64, out: &mut [u8; MAX_NUMBER_BYTES]) -> usize {
    let bits = v as u64;
    // A negative number is stored as its low bytes, counted on its complement (-v - 1).
    let magnitude = if v < 0 { !bits } else { bits };
    let n = 8 - (magnitude.leading_zeros() / 8) as usize;
    out[0] = if v < 0 { 0x7F - n as u8 } else { 0x80 + n as u8 };
    out[1..=n].copy_from_slice(&bits.to_be_bytes()[8 - n..]);
    n + 1
}

/// The number encoded at the start of `b` and the bytes it takes; `None` if it is not one.
pub fn decode_number(b: &[u8]) -> Option<(i64, usize)> {
    let tag = *b.first()?;
    let (negative, n) = match tag {
        0x80..=0x88 => (false, usize::from(tag - 0x80)),
        0x77..=0x7F => (true, usize::from(0x7F - tag)),
        _ => return None,
    };
    let mut bytes = if negative { [0xFF; 8] } else { [0; 8] };
    bytes[8 - n..].copy_from_slice(b.get(1..=n)?);
    Some((i64::from_be_bytes(bytes), n + 1))
}

/// Appends the encoding of `value` (see the module documentation).
pub fn encode_value(value: IndexValue<'_>, out: &mut Vec<u8>) {
    match value {
        IndexValue::Number(v) => {
            let mut b = [0u8; MAX_NUMBER_BYTES];
            let n = encode_number(v, &mut b);
            out.extend_from_slice(&b[..n]);
        }
        IndexValue::State(s) => out.extend_from_slice(&s.to_be_bytes()),
        IndexValue::Text(t) => {
            let bytes = t.as_bytes();
            if bytes.len() <= MAX_TEXT_BYTES {
                escape_into(bytes, out);
                out.extend_from_slice(&[0, 0]);
            } else {
                escape_into(&bytes[..MAX_TEXT_BYTES], out);
                out.extend_from_slice(&[0, 1]);
            }
        }
    }
}

/// Is this value stored in full in its key (so equal keys mean equal values)?
pub fn exact(value: IndexValue<'_>) -> bool {
    match value {
        IndexValue::Text(t) => t.len() <= MAX_TEXT_BYTES,
        _ => true,
    }
}

/// The encoded value: the prefix of the keys of every entry with this value.
pub fn value_prefix(value: IndexValue<'_>) -> Vec<u8> {
    let mut k = Vec::with_capacity(16);
    encode_value(value, &mut k);
    k
}

/// The bytes of the entry's row at the end of an index key.
pub const ROW_BYTES: usize = 4;

/// The key of `entry` with `value` in an index's key index.
pub fn row(value: IndexValue<'_>, entry: NodeId) -> Vec<u8> {
    let mut k = value_prefix(value);
    k.extend_from_slice(&entry.row().to_be_bytes());
    debug_assert!(k.len() <= 2 * MAX_TEXT_BYTES + 2 + ROW_BYTES, "index row of {} bytes", k.len());
    k
}

/// The entry row at the end of an index key.
pub fn row_entry(key: &[u8]) -> Result<u32> {
    key.len()
        .checked_sub(ROW_BYTES)
        .filter(|&at| at >= 1)
        .and_then(|at| key[at..].try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| DataError::Corrupt(format!("index row of {} bytes", key.len())))
}

/// The node type of index `n`'s entries: its collection's entry type.
pub fn entry_type(schema: &Schema, n: u32) -> Result<NodeTypeId> {
    let decl = schema.indexes.get(n as usize).ok_or_else(|| DataError::Corrupt(format!("no index {n}")))?;
    match schema.property(decl.collection).kind {
        PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => Ok(node),
        ref other => Err(DataError::Corrupt(format!("index {n} is on a {}", other.keyword()))),
    }
}

/// The key index of schema index `n`.
fn key_index<'t>(schema: &Schema, txn: &'t dyn Read, n: u32) -> Result<&'t KeyIndex> {
    txn.index(crate::keys::schema_index(schema, n))
        .ok_or_else(|| DataError::Corrupt(format!("no key index for index {n}")))
}

/// The entries of index `n` whose key starts with `prefix`.
pub fn rows_with_prefix(schema: &Schema, txn: &dyn Read, n: u32, prefix: &[u8]) -> Result<Vec<NodeId>> {
    let ty = entry_type(schema, n)?;
    Ok(key_index(schema, txn, n)?.prefix(0, prefix).map(|e| NodeId::new(ty, e.row)).collect())
}

/// Every (key, entry) of index `n`, in order.
pub fn all_rows<'t>(schema: &Schema, txn: &'t dyn Read, n: u32) -> Result<Vec<(&'t [u8], NodeId)>> {
    let ty = entry_type(schema, n)?;
    Ok(key_index(schema, txn, n)?.entries(0).map(|e| (e.key, NodeId::new(ty, e.row))).collect())
}

/// How many entries index `n` has.
pub fn len(graph: Graph<'_>, n: u32) -> Result<u64> {
    Ok(key_index(graph.schema, graph.txn, n)?.len())
}

/// Every (number, entry) of number index `n`, in index order (by number, then entry): one
/// walk along its key index's leaves. A key that is not a number's fails.
pub fn number_rows<'t>(graph: Graph<'t>, n: u32) -> Result<impl Iterator<Item = Result<(i64, NodeId)>> + 't> {
    let ty = entry_type(graph.schema, n)?;
    Ok(key_index(graph.schema, graph.txn, n)?.entries(0).map(move |e| match decode_number(e.key) {
        Some((value, len)) if e.key.len() == len + ROW_BYTES => Ok((value, NodeId::new(ty, e.row))),
        _ => Err(DataError::Corrupt(format!("index row {:?} in a number index", e.key))),
    }))
}

/// The value of an index's property in an entry's record (texts resolved through the strings
/// table). `rec` is the record of an entry of the index's collection.
pub fn value_in(schema: &Schema, txn: &dyn Read, decl: &IndexDecl, rec: &[u8]) -> Result<OwnedValue> {
    let at = record::slot(schema, decl.property);
    let raw = record::read_u64(rec, at)?;
    Ok(match schema.property(decl.property).kind {
        PropertyKind::Number => OwnedValue::Number(raw as i64),
        PropertyKind::Text => {
            let b = txn.string(raw).ok_or_else(|| DataError::Corrupt(format!("string {raw} is not stored")))?;
            OwnedValue::Text(String::from_utf8_lossy(b).into_owned())
        }
        PropertyKind::StateGroup { .. } => {
            OwnedValue::State(StateIndex::try_from(raw).map_err(|_| DataError::Corrupt(format!("state index {raw}")))?)
        }
        ref other => unreachable!("the schema compiler allows no index on a {}", other.keyword()),
    })
}

/// An [`IndexValue`] that owns its text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum OwnedValue {
    /// A number.
    Number(i64),
    /// A text.
    Text(String),
    /// A state, by its index in the stategroup.
    State(StateIndex),
}

impl OwnedValue {
    /// The value borrowed, as lookups and encodings take it.
    pub fn as_value(&self) -> IndexValue<'_> {
        match self {
            OwnedValue::Number(n) => IndexValue::Number(*n),
            OwnedValue::Text(t) => IndexValue::Text(t),
            OwnedValue::State(s) => IndexValue::State(*s),
        }
    }
}

/// The entries index `n` holds for `probe`, in index order: a superset of the entries whose
/// value satisfies it (exact except for long texts, see the module documentation). Each is
/// handed to `sink` as a view of its record as the index is read, until it answers `false`;
/// no list is collected, and an equal probe of a number or a state allocates nothing (a join
/// probes once per row it extends). Returns whether `sink` never stopped it. An entry whose
/// row is not live is corruption.
pub fn probe_each<'g, E: From<DataError>>(
    graph: Graph<'g>,
    n: u32,
    probe: Probe<'_>,
    sink: &mut dyn FnMut(NodeView<'g>) -> std::result::Result<bool, E>,
) -> std::result::Result<bool, E> {
    let index = key_index(graph.schema, graph.txn, n)?;
    let ty = entry_type(graph.schema, n)?;
    // `entry_type` found the declaration.
    let name = graph.schema.indexes.get(n as usize).map_or("", |d| d.name.as_str());
    let table = graph
        .txn
        .table(NodeId::new(ty, 0).table())
        .ok_or_else(|| DataError::Corrupt(format!("no table for the entries of index '{name}'")))?;
    let view = |row: u32, record| NodeView::new(graph.schema, NodeRef { id: NodeId::new(ty, row), ty }, record);
    let not_live = |row: u32| DataError::Corrupt(format!("index '{name}' holds row {row}, which is not live"));
    let mut each = |mut entries: Range<'_>| -> std::result::Result<bool, E> {
        // The rows an index hands out are scattered over their table, and the sink reads each
        // one: each is found (one descent, its view handed on) and its load started `AHEAD`
        // entries before the sink sees it, so that the cache misses overlap, not queue. The
        // index hands over its rows a batch at a time, without their keys.
        let mut rows = [0u32; BATCH];
        // The rows located ahead, by their place in the batch modulo `AHEAD`.
        let mut ats = [None; AHEAD];
        let locate = |row: u32| {
            let at = table.locate(row).ok_or_else(|| not_live(row))?;
            at.prefetch();
            Ok(at)
        };
        loop {
            let n = entries.next_rows(&mut rows);
            for i in 0..n.min(AHEAD) {
                ats[i] = Some(locate(rows[i])?);
            }
            for i in 0..n {
                let (row, at) = (rows[i], ats[i % AHEAD].take());
                if i + AHEAD < n {
                    ats[i % AHEAD] = Some(locate(rows[i + AHEAD])?);
                }
                let record = at.and_then(|at| at.get()).ok_or_else(|| not_live(row))?;
                if !sink(view(row, record))? {
                    return Ok(false);
                }
            }
            if n < BATCH {
                return Ok(true);
            }
        }
    };
    match probe {
        Probe::Equal(v @ (IndexValue::Number(_) | IndexValue::State(_))) => {
            let mut buf = [0u8; MAX_NUMBER_BYTES];
            let len = match v {
                IndexValue::Number(n) => encode_number(n, &mut buf),
                IndexValue::State(s) => {
                    let b = s.to_be_bytes();
                    buf[..b.len()].copy_from_slice(&b);
                    b.len()
                }
                IndexValue::Text(_) => unreachable!("matched above"),
            };
            debug_assert_eq!(buf[..len], value_prefix(v)[..], "the one encoding of a value");
            each(index.prefix(0, &buf[..len]))
        }
        Probe::Equal(v) => each(index.prefix(0, &value_prefix(v))),
        Probe::Prefix(text) => {
            let cut = &text.as_bytes()[..text.len().min(MAX_TEXT_BYTES)];
            let mut p = Vec::new();
            escape_into(cut, &mut p);
            each(index.prefix(0, &p))
        }
        Probe::Range { low, high } => {
            let start = low.map(value_prefix).unwrap_or_default();
            let end = high.and_then(|v| after_prefix(&value_prefix(v)));
            // The key index stops the read itself, with one search in each leaf: a comparison
            // per key was a fifth of a range read's work.
            each(index.between(0, &start, end.as_deref()))
        }
    }
}

/// How far ahead of the sink an index read starts loading rows.
const AHEAD: usize = 8;
/// How many rows an index read takes from the index at once.
const BATCH: usize = 64;

/// The smallest key greater than every key starting with `prefix` (`None`: no such key).
fn after_prefix(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: IndexValue<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        encode_value(v, &mut out);
        out
    }

    #[test]
    fn number_order_is_byte_order_and_decodes_back() {
        // Every length's edges, both signs.
        let mut values = vec![i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];
        for bytes in 1..8 {
            let edge = 1i64 << (8 * bytes);
            values.extend([edge - 2, edge - 1, edge, edge + 1, -edge - 2, -edge - 1, -edge, -edge + 1]);
        }
        values.sort_unstable();
        values.dedup();
        for w in values.windows(2) {
            assert!(enc(IndexValue::Number(w[0])) < enc(IndexValue::Number(w[1])), "{w:?}");
        }
        for &v in &values {
            let e = enc(IndexValue::Number(v));
            assert_eq!(decode_number(&e), Some((v, e.len())), "{v}");
            // The tag gives the length: no encoding is a prefix of another.
            let mut longer = e.clone();
            longer.extend_from_slice(&[0xAB; 8]);
            assert_eq!(decode_number(&longer), Some((v, e.len())), "{v}");
        }
        // Ids and dates differ in their first four bytes.
        assert_eq!(enc(IndexValue::Number(100_000)), [0x83, 0x01, 0x86, 0xA0]);
        assert_eq!(enc(IndexValue::Number(0)), [0x80]);
        assert_eq!(enc(IndexValue::Number(-1)), [0x7F]);
        assert_eq!(decode_number(&[0x90]), None);
        assert_eq!(decode_number(&[0x82, 1]), None);
    }

    #[test]
    fn text_order_is_byte_order_and_prefixes_nest() {
        let values = ["", "\0", "\0\0", "a", "a\0", "a\0b", "ab", "b"];
        for w in values.windows(2) {
            assert!(enc(IndexValue::Text(w[0])) < enc(IndexValue::Text(w[1])), "{w:?}");
        }
        // Every text starting with "a" has keys starting with the escaped "a".
        for t in ["a", "a\0", "ab", "a\0b"] {
            assert!(enc(IndexValue::Text(t)).starts_with(b"a"));
        }
        // Equality prefixes do not capture longer texts.
        assert!(!enc(IndexValue::Text("a\0")).starts_with(&enc(IndexValue::Text("a"))));
    }

    #[test]
    fn long_texts_are_cut_and_marked() {
        let long = "x".repeat(MAX_TEXT_BYTES + 50);
        let e = enc(IndexValue::Text(&long));
        assert_eq!(e.len(), MAX_TEXT_BYTES + 2);
        assert_eq!(&e[MAX_TEXT_BYTES..], &[0, 1]);
        assert!(!exact(IndexValue::Text(&long)));
        let nuls = "\0".repeat(MAX_TEXT_BYTES * 2);
        assert!(row(IndexValue::Text(&nuls), NodeId::from_u64(u64::MAX)).len() <= 511);
    }

    #[test]
    fn row_entry_reads_the_id_back() {
        let id = NodeId::from_u64(0x0102_0304_0506_0708);
        let r = row(IndexValue::Text("héllo"), id);
        assert_eq!(row_entry(&r).unwrap(), 0x0506_0708);
        assert_eq!(r.len(), value_prefix(IndexValue::Text("héllo")).len() + ROW_BYTES);
        assert!(row_entry(&[1, 2, 3]).is_err());
        // A date and its row fit in one search word (no key bytes compared between them).
        assert_eq!(row(IndexValue::Number(1999), NodeId::from_u64(7 << 32 | 100_000)).len(), 7);
    }

    #[test]
    fn after_prefix_is_the_next_key() {
        assert_eq!(after_prefix(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(after_prefix(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(after_prefix(&[0xFF, 0xFF]), None);
    }
}
