//! Interned strings with reference counts (thesis §4.3.2): a text slot holds a string id; equal
//! texts share one stored copy; the copy is deleted when its last user lets go.
//! The empty string is id 0 and is never stored, so fresh records need no string writes.

use espalier_storage::{Reader, Table, WriteTxn};
use xxhash_rust::xxh3::xxh3_64;

use crate::keys::{u64_be, u64_le};
use crate::{DataError, Result};

pub type StringId = u64;

fn index_key(hash: u64, id: StringId) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&hash.to_be_bytes());
    k[8..].copy_from_slice(&id.to_be_bytes());
    k
}

/// The id of `text` if it is stored.
pub fn find(txn: &dyn Reader, text: &str) -> Result<Option<StringId>> {
    if text.is_empty() {
        return Ok(Some(0));
    }
    let hash = xxh3_64(text.as_bytes());
    let prefix = hash.to_be_bytes();
    for item in txn.prefix(Table::StringIndex, &prefix)? {
        let (k, _) = item?;
        let id = u64_be(&k[8..]).ok_or_else(|| DataError::Corrupt("short string index key".into()))?;
        if get_bytes(txn, id)? == text.as_bytes() {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

fn get_bytes(txn: &dyn Reader, id: StringId) -> Result<&[u8]> {
    let v = txn
        .get(Table::Strings, &id.to_be_bytes())?
        .ok_or_else(|| DataError::Corrupt(format!("string {id} is referenced but not stored")))?;
    v.get(8..).ok_or_else(|| DataError::Corrupt(format!("string {id} has no count")))
}

pub fn get(txn: &dyn Reader, id: StringId) -> Result<String> {
    if id == 0 {
        return Ok(String::new());
    }
    let b = get_bytes(txn, id)?;
    String::from_utf8(b.to_vec()).map_err(|_| DataError::Corrupt(format!("string {id} is not UTF-8")))
}

/// Stored reference count of a string (for `check`).
pub fn count(txn: &dyn Reader, id: StringId) -> Result<u64> {
    let v = txn
        .get(Table::Strings, &id.to_be_bytes())?
        .ok_or_else(|| DataError::Corrupt(format!("string {id} missing")))?;
    u64_le(v).ok_or_else(|| DataError::Corrupt(format!("string {id} has no count")))
}

/// Takes one more reference to `text`, storing it if new. `next_id` is the id counter.
pub fn acquire(txn: &mut WriteTxn<'_>, text: &str, next_id: &mut u64) -> Result<StringId> {
    if text.is_empty() {
        return Ok(0);
    }
    if let Some(id) = find(txn, text)? {
        let mut v = txn.get(Table::Strings, &id.to_be_bytes())?.map(<[u8]>::to_vec).unwrap_or_default();
        let c = u64_le(&v).ok_or_else(|| DataError::Corrupt(format!("string {id} has no count")))?;
        v[..8].copy_from_slice(&(c + 1).to_le_bytes());
        txn.put(Table::Strings, &id.to_be_bytes(), &v)?;
        return Ok(id);
    }
    let id = *next_id;
    *next_id += 1;
    let mut v = Vec::with_capacity(8 + text.len());
    v.extend_from_slice(&1u64.to_le_bytes());
    v.extend_from_slice(text.as_bytes());
    txn.put(Table::Strings, &id.to_be_bytes(), &v)?;
    txn.put(Table::StringIndex, &index_key(xxh3_64(text.as_bytes()), id), &[])?;
    Ok(id)
}

/// Drops one reference; deletes the string when none is left.
pub fn release(txn: &mut WriteTxn<'_>, id: StringId) -> Result<()> {
    if id == 0 {
        return Ok(());
    }
    let mut v = txn
        .get(Table::Strings, &id.to_be_bytes())?
        .map(<[u8]>::to_vec)
        .ok_or_else(|| DataError::Corrupt(format!("released string {id} is not stored")))?;
    let c = u64_le(&v).ok_or_else(|| DataError::Corrupt(format!("string {id} has no count")))?;
    assert!(c > 0, "string {id} stored with count 0");
    if c == 1 {
        let hash = xxh3_64(&v[8..]);
        txn.delete(Table::Strings, &id.to_be_bytes())?;
        txn.delete(Table::StringIndex, &index_key(hash, id))?;
    } else {
        v[..8].copy_from_slice(&(c - 1).to_le_bytes());
        txn.put(Table::Strings, &id.to_be_bytes(), &v)?;
    }
    Ok(())
}
