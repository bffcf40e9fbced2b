//! The indexes declared in the schema (`index 'Name' ( path ) 'property' kind [unique]`).
//!
//! Every entry of an indexed collection has one row in the Indexes table:
//! `index number (u32) · encoded value · entry record id (u64)`, all big-endian, so that the
//! rows of one index are ordered by value and, within a value, by entry. [`crate::WriteGraph`]
//! keeps the rows in the same write transaction as the entries (on creation with the
//! defaults, on every change of the property, on removal), so an index is never behind.
//!
//! Encodings keep byte order equal to value order:
//! - number: the i64 with its sign bit flipped, big-endian;
//! - state: the state's u32 index, big-endian (indexes only test equality of states);
//! - text: the UTF-8 bytes with `00` escaped as `00 FF`, then `00 00`. A text longer than
//!   [`MAX_TEXT_BYTES`] keeps only its first bytes and ends with `00 01` instead, so the key
//!   stays under LMDB's 511-byte limit; such rows are candidates, and readers check the value
//!   on the entry itself (the query executor always re-checks the condition an index served).

use espalier_schema::{IndexDecl, PropertyKind, Schema, StateIndex};
use espalier_storage::{Reader, Table};

use crate::record::{self, NodeId};
use crate::{strings, DataError, Result};

/// Longest text prefix stored in an index key (escaped it is at most twice as long).
pub const MAX_TEXT_BYTES: usize = 200;

/// A value as an index orders it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexValue<'v> {
    Number(i64),
    Text(&'v str),
    State(StateIndex),
}

/// What to look up in an index. Bounds are inclusive: a caller wanting `<` re-checks.
#[derive(Debug, Clone, Copy)]
pub enum Probe<'v> {
    Equal(IndexValue<'v>),
    Range { low: Option<IndexValue<'v>>, high: Option<IndexValue<'v>> },
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

/// Appends the encoding of `value` (see the module documentation).
pub fn encode_value(value: IndexValue<'_>, out: &mut Vec<u8>) {
    match value {
        IndexValue::Number(n) => out.extend_from_slice(&((n as u64) ^ (1 << 63)).to_be_bytes()),
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

/// `index · value`: the prefix of every row of entries with this value.
pub fn value_prefix(index: u32, value: IndexValue<'_>) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + 16);
    k.extend_from_slice(&index.to_be_bytes());
    encode_value(value, &mut k);
    k
}

/// The row of `entry` with `value` in `index`.
pub fn row(index: u32, value: IndexValue<'_>, entry: NodeId) -> Vec<u8> {
    let mut k = value_prefix(index, value);
    k.extend_from_slice(&entry.to_be_bytes());
    debug_assert!(k.len() <= 4 + 2 * MAX_TEXT_BYTES + 2 + 8, "index row of {} bytes", k.len());
    k
}

/// The entry record id at the end of an index row.
pub fn row_entry(key: &[u8]) -> Result<NodeId> {
    key.len()
        .checked_sub(8)
        .filter(|&at| at >= 4)
        .and_then(|at| crate::keys::u64_be(&key[at..]))
        .ok_or_else(|| DataError::Corrupt(format!("index row of {} bytes", key.len())))
}

/// The value of an index's property in an entry's record (texts resolved through the strings
/// table). `rec` is the record of an entry of the index's collection.
pub fn value_in(schema: &Schema, txn: &dyn Reader, decl: &IndexDecl, rec: &[u8]) -> Result<OwnedValue> {
    let at = record::slot(schema, decl.property);
    let raw = record::read_u64(rec, at)?;
    Ok(match schema.property(decl.property).kind {
        PropertyKind::Number => OwnedValue::Number(raw as i64),
        PropertyKind::Text => OwnedValue::Text(strings::get(txn, raw)?),
        PropertyKind::StateGroup { .. } => {
            OwnedValue::State(StateIndex::try_from(raw).map_err(|_| DataError::Corrupt(format!("state index {raw}")))?)
        }
        ref other => unreachable!("the schema compiler allows no index on a {}", other.keyword()),
    })
}

/// An [`IndexValue`] that owns its text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum OwnedValue {
    Number(i64),
    Text(String),
    State(StateIndex),
}

impl OwnedValue {
    pub fn as_value(&self) -> IndexValue<'_> {
        match self {
            OwnedValue::Number(n) => IndexValue::Number(*n),
            OwnedValue::Text(t) => IndexValue::Text(t),
            OwnedValue::State(s) => IndexValue::State(*s),
        }
    }
}

/// The entries an index holds for `probe`, in index order: a superset of the entries whose
/// value satisfies it (exact except for long texts, see the module documentation).
pub fn probe<'t>(txn: &'t dyn Reader, index: u32, probe: Probe<'_>) -> Result<IndexEntries<'t>> {
    let (start, end) = match probe {
        Probe::Equal(v) => {
            let p = value_prefix(index, v);
            let end = after_prefix(&p);
            (p, end)
        }
        Probe::Prefix(text) => {
            let cut = &text.as_bytes()[..text.len().min(MAX_TEXT_BYTES)];
            let mut p = index.to_be_bytes().to_vec();
            escape_into(cut, &mut p);
            let end = after_prefix(&p);
            (p, end)
        }
        Probe::Range { low, high } => {
            let start = match low {
                Some(v) => value_prefix(index, v),
                None => index.to_be_bytes().to_vec(),
            };
            let end = match high {
                Some(v) => after_prefix(&value_prefix(index, v)),
                None => after_prefix(&index.to_be_bytes()),
            };
            (start, end)
        }
    };
    Ok(IndexEntries { scan: txn.scan(Table::Indexes, &start)?, end })
}

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

/// Entry record ids from an index scan, up to an exclusive end key.
pub struct IndexEntries<'t> {
    scan: espalier_storage::Scan<'t>,
    end: Option<Vec<u8>>,
}

impl Iterator for IndexEntries<'_> {
    type Item = Result<NodeId>;
    fn next(&mut self) -> Option<Result<NodeId>> {
        match self.scan.next()? {
            Ok((k, _)) => {
                if self.end.as_deref().is_some_and(|end| k >= end) {
                    return None;
                }
                Some(row_entry(k))
            }
            Err(e) => Some(Err(e.into())),
        }
    }
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
    fn number_order_is_byte_order() {
        let values = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for w in values.windows(2) {
            assert!(enc(IndexValue::Number(w[0])) < enc(IndexValue::Number(w[1])), "{w:?}");
        }
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
        assert!(row(9, IndexValue::Text(&nuls), u64::MAX).len() <= 511);
    }

    #[test]
    fn row_entry_reads_the_id_back() {
        let r = row(3, IndexValue::Text("héllo"), 0x0102_0304_0506_0708);
        assert_eq!(row_entry(&r).unwrap(), 0x0102_0304_0506_0708);
        assert!(row_entry(&[1, 2, 3]).is_err());
    }

    #[test]
    fn after_prefix_is_the_next_key() {
        assert_eq!(after_prefix(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(after_prefix(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(after_prefix(&[0xFF, 0xFF]), None);
    }
}
