//! Node ids and the byte layout of a node's row.
//!
//! A node that has a record (the root, an entry, a state with properties) is a row of its node
//! type's table (`docs/storage.md`): its id is `type << 32 | row`, so following a reference is
//! an index into the target's table, never a search. A row is a 16-byte header, the fixed
//! layout the schema computes (property slots at their offsets), then, for an entry, an
//! 8-byte key slot: a dictionary entry's key text as a string id (counted like a text slot),
//! a matrix entry's target id.

use espalier_schema::{NodeTypeId, ParentLink, PropertyId, Schema, Storage};

use crate::DataError;

/// A node id: `type << 32 | row`, so following a reference is an index into the target's
/// table. [`NodeId::NONE`] (0) means "none"; the root is type 0, row 1. Slots, keys and the
/// log hold it as its number ([`NodeId::get`]); Debug and Display show the number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct NodeId(u64);

/// The root's id.
pub const ROOT_ID: NodeId = NodeId(1);

impl NodeId {
    /// No node: an unset reference, an empty state's record, a dictionary entry's target.
    pub const NONE: NodeId = NodeId(0);

    /// The id of row `row` of node type `ty`'s table.
    #[inline]
    pub const fn new(ty: NodeTypeId, row: u32) -> NodeId {
        NodeId(((ty.get() as u64) << 32) | row as u64)
    }

    /// The id with number `n`, as slots, keys and the log hold it.
    #[inline]
    pub const fn from_u64(n: u64) -> NodeId {
        NodeId(n)
    }

    /// The number, as slots, keys and the log hold it.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The node type, whose table holds the node.
    #[inline]
    pub const fn node_type(self) -> NodeTypeId {
        NodeTypeId::new((self.0 >> 32) as u32)
    }

    /// The node type's table, as storage numbers it.
    #[inline]
    pub const fn table(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The row in its table.
    #[inline]
    pub const fn row(self) -> u32 {
        self.0 as u32
    }

    /// Whether this is [`NodeId::NONE`].
    #[inline]
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// Whether this names a record (is not [`NodeId::NONE`]).
    #[inline]
    pub const fn is_some(self) -> bool {
        self.0 != 0
    }
}

impl std::fmt::Debug for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Bytes of a row's header.
pub const HEADER: usize = 16;
/// Bytes of an entry's key slot.
pub const KEY_SLOT: usize = 8;
/// Parent property of the root record.
pub const NO_PARENT: PropertyId = PropertyId::new(u32::MAX);

/// A logical node: the record that stores it and its node type. A group's node shares the
/// record of its host; an empty state has no record (`id` is [`NodeId::NONE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeRef {
    /// The record that stores the node (its host's, for a group; 0 for an empty state).
    pub id: NodeId,
    /// The node's type.
    pub ty: NodeTypeId,
}

impl NodeRef {
    /// The root node.
    pub const ROOT: NodeRef = NodeRef { id: ROOT_ID, ty: espalier_schema::ROOT };
}

/// The decoded header of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The node type of the record.
    pub ty: NodeTypeId,
    /// The parent's property that holds the node ([`NO_PARENT`] for the root).
    pub parent_property: PropertyId,
    /// The parent's record (0 for the root).
    pub parent: NodeId,
}

/// Decodes the header at the start of a record.
pub fn header(bytes: &[u8]) -> Result<Header, DataError> {
    if bytes.len() < HEADER {
        return Err(DataError::Corrupt(format!("record of {} bytes has no header", bytes.len())));
    }
    Ok(Header {
        ty: NodeTypeId::new(u32::from_le_bytes(bytes[0..4].try_into().unwrap_or_default())),
        parent_property: PropertyId::new(u32::from_le_bytes(bytes[4..8].try_into().unwrap_or_default())),
        parent: NodeId(u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_default())),
    })
}

/// Whether nodes of type `ty` are entries (and so have a key slot).
pub fn is_entry(schema: &Schema, ty: NodeTypeId) -> bool {
    matches!(schema.node_type(ty).parent, ParentLink::DictionaryEntry { .. } | ParentLink::MatrixEntry { .. })
}

/// Bytes of a row of type `ty`'s table (0 for a type without records).
pub fn row_width(schema: &Schema, ty: NodeTypeId) -> usize {
    match schema.node_type(ty).storage {
        Storage::Record { size } => HEADER + size as usize + if is_entry(schema, ty) { KEY_SLOT } else { 0 },
        _ => 0,
    }
}

/// A fresh record: header, zeroed layout (number 0, text "" = string 0, empty collections),
/// and the key slot (for an entry).
pub fn new_record(schema: &Schema, h: Header, key: u64) -> Vec<u8> {
    let mut r = vec![0u8; row_width(schema, h.ty)];
    r[0..4].copy_from_slice(&h.ty.get().to_le_bytes());
    r[4..8].copy_from_slice(&h.parent_property.get().to_le_bytes());
    r[8..16].copy_from_slice(&h.parent.get().to_le_bytes());
    if is_entry(schema, h.ty) {
        let at = r.len() - KEY_SLOT;
        r[at..].copy_from_slice(&key.to_le_bytes());
    }
    r
}

/// The key slot of an entry's record: its key's string id (dictionary) or target id (matrix).
pub fn key_slot(schema: &Schema, record: &[u8]) -> Result<u64, DataError> {
    let h = header(record)?;
    if !is_entry(schema, h.ty) {
        return Err(DataError::Corrupt(format!("a record of type {} has no key", h.ty)));
    }
    read_u64(record, HEADER + schema.record_size(h.ty) as usize)
}

/// Byte position of a property's slot in its host record.
pub fn slot(schema: &Schema, property: PropertyId) -> usize {
    HEADER + schema.property(property).offset as usize
}

/// Reads the 8-byte little-endian slot at byte `at` of `record`.
pub fn read_u64(record: &[u8], at: usize) -> Result<u64, DataError> {
    record
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| DataError::Corrupt(format!("record of {} bytes has no slot at {at}", record.len())))
}

/// Reads the node id in the 8-byte slot at byte `at` of `record` (a reference's target, a
/// state's record).
#[inline]
pub fn read_id(record: &[u8], at: usize) -> Result<NodeId, DataError> {
    read_u64(record, at).map(NodeId)
}

/// Writes node id `id` to the 8-byte slot at byte `at` of `record`.
#[inline]
pub fn write_id(record: &mut [u8], at: usize, id: NodeId) -> Result<(), DataError> {
    write_u64(record, at, id.0)
}

/// Writes `value` to the 8-byte little-endian slot at byte `at` of `record`.
pub fn write_u64(record: &mut [u8], at: usize, value: u64) -> Result<(), DataError> {
    let len = record.len();
    let b = record
        .get_mut(at..at + 8)
        .ok_or_else(|| DataError::Corrupt(format!("record of {len} bytes has no slot at {at}")))?;
    b.copy_from_slice(&value.to_le_bytes());
    Ok(())
}
