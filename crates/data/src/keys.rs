//! Byte encodings of keys. Big-endian integers so byte order equals numeric order.

use espalier_schema::PropertyId;

use crate::record::NodeId;

/// Longest entry key (dictionary key text) accepted; keeps Entries keys under LMDB's 511.
pub const MAX_KEY_BYTES: usize = 480;

pub fn node(id: NodeId) -> [u8; 8] {
    id.to_be_bytes()
}

/// `owner | property` — the prefix of every entry of one collection.
pub fn collection(owner: NodeId, property: PropertyId) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&owner.to_be_bytes());
    k[8..].copy_from_slice(&property.to_be_bytes());
    k
}

pub fn entry(owner: NodeId, property: PropertyId, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(12 + key.len());
    k.extend_from_slice(&collection(owner, property));
    k.extend_from_slice(key);
    k
}

pub fn link(target: NodeId, source: NodeId, property: PropertyId) -> [u8; 20] {
    let mut k = [0u8; 20];
    k[..8].copy_from_slice(&target.to_be_bytes());
    k[8..16].copy_from_slice(&source.to_be_bytes());
    k[16..].copy_from_slice(&property.to_be_bytes());
    k
}

/// Splits a Links key into (target, source, property).
pub fn parse_link(k: &[u8]) -> Option<(NodeId, NodeId, PropertyId)> {
    if k.len() != 20 {
        return None;
    }
    Some((u64_be(&k[..8])?, u64_be(&k[8..16])?, u32::from_be_bytes(k[16..20].try_into().ok()?)))
}

pub fn u64_be(b: &[u8]) -> Option<NodeId> {
    Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}

pub fn u64_le(b: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(..8)?.try_into().ok()?))
}

/// Names in the Meta table.
pub mod meta {
    pub const FORMAT: &[u8] = b"format";
    pub const SCHEMA: &[u8] = b"schema";
    pub const NEXT_NODE: &[u8] = b"next_node";
    pub const NEXT_STRING: &[u8] = b"next_string";
    pub const VERSION: &[u8] = b"version";
    /// Bumped when the on-disk layout changes incompatibly (3: the Indexes table).
    pub const FORMAT_VERSION: u64 = 3;
}
