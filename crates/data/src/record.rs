//! Node ids and the byte layout of a node's row.
//!
//! A node that has a record (the root, an entry, a state with properties) is a row of its node
//! type's table (`docs/storage.md`): its id is `type << 32 | row`, so following a reference is
//! an index into the target's table, never a search. A row is a 4-byte header (the parent's
//! row: the parent's type and the property that holds the node follow from the node's type,
//! so they are not stored), the fixed layout the schema computes (property slots at their
//! offsets), then, for an entry, its key slot: a dictionary entry's key in 8 bytes (inline
//! when at most 7 bytes long, else a string id counted like a text slot), a matrix entry's
//! target row (4 bytes).

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

/// Bytes of a row's header: the parent's row (u32, little-endian; 0 for the root).
pub const HEADER: usize = 4;
/// Bytes of a dictionary entry's key slot: the key inline, or its string id.
pub const KEY_SLOT: usize = 8;
/// Bytes of a matrix entry's key slot: the target's row (its type is the matrix's target).
pub const MATRIX_KEY_SLOT: usize = 4;
/// Parent property of the root record.
pub const NO_PARENT: PropertyId = PropertyId::new(u32::MAX);

/// A logical node: the record that stores it and its node type. A group's node shares the
/// record of its host; an empty state has no record (`id` is [`NodeId::NONE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

/// The decoded header of a record, with what its node type says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The node type of the record.
    pub ty: NodeTypeId,
    /// The parent's property that holds the node ([`NO_PARENT`] for the root).
    pub parent_property: PropertyId,
    /// The parent's record (0 for the root, and for a row whose parent row is 0: corrupt).
    pub parent: NodeId,
}

/// Where a record of type `ty` hangs: the property holding it (a dictionary, matrix or
/// stategroup) and the node type whose record holds that property; `None` for the root and
/// for types without records of their own.
#[inline]
pub fn parent_link(schema: &Schema, ty: NodeTypeId) -> Option<(PropertyId, NodeTypeId)> {
    match schema.node_type(ty).parent {
        ParentLink::DictionaryEntry { property }
        | ParentLink::MatrixEntry { property }
        | ParentLink::State { property, .. } => Some((property, schema.property(property).host)),
        ParentLink::Root | ParentLink::Group { .. } => None,
    }
}

/// Decodes the header of `bytes`, a record of type `ty`.
pub fn header(schema: &Schema, ty: NodeTypeId, bytes: &[u8]) -> Result<Header, DataError> {
    Ok(match parent_link(schema, ty) {
        None => Header { ty, parent_property: NO_PARENT, parent: NodeId::NONE },
        Some((parent_property, host)) => Header { ty, parent_property, parent: parent_of(host, bytes)? },
    })
}

/// The parent's row that the header of `bytes` holds (0 for the root).
#[inline]
pub fn parent_row(bytes: &[u8]) -> Result<u32, DataError> {
    bytes
        .get(..HEADER)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| DataError::Corrupt(format!("record of {} bytes has no header", bytes.len())))
}

/// The parent's record of `bytes`, a record whose parent is of type `host`.
#[inline]
fn parent_of(host: NodeTypeId, bytes: &[u8]) -> Result<NodeId, DataError> {
    let row = parent_row(bytes)?;
    Ok(if row == 0 { NodeId::NONE } else { NodeId::new(host, row) })
}

/// The parent's record of `bytes`, a record of type `ty` ([`NodeId::NONE`] for the root).
#[inline]
pub fn parent(schema: &Schema, ty: NodeTypeId, bytes: &[u8]) -> Result<NodeId, DataError> {
    match parent_link(schema, ty) {
        None => Ok(NodeId::NONE),
        Some((_, host)) => parent_of(host, bytes),
    }
}

/// Whether nodes of type `ty` are entries (and so have a key slot).
pub fn is_entry(schema: &Schema, ty: NodeTypeId) -> bool {
    matches!(schema.node_type(ty).parent, ParentLink::DictionaryEntry { .. } | ParentLink::MatrixEntry { .. })
}

/// What an entry of type `ty` keeps in its key slot, at the end of its row.
enum KeyKind {
    /// A dictionary key, inline or as a string id, 8 bytes.
    Text,
    /// A matrix key's target row, 4 bytes; the target is of this type.
    Row(NodeTypeId),
}

fn key_kind(schema: &Schema, ty: NodeTypeId) -> Option<KeyKind> {
    match schema.node_type(ty).parent {
        ParentLink::DictionaryEntry { .. } => Some(KeyKind::Text),
        ParentLink::MatrixEntry { property } => match &schema.property(property).kind {
            espalier_schema::PropertyKind::Matrix { target, .. } => Some(KeyKind::Row(target.entry_type)),
            _ => None,
        },
        _ => None,
    }
}

/// Bytes of a row of type `ty`'s table (0 for a type without records).
pub fn row_width(schema: &Schema, ty: NodeTypeId) -> usize {
    match schema.node_type(ty).storage {
        Storage::Record { size } => {
            HEADER
                + size as usize
                + match key_kind(schema, ty) {
                    Some(KeyKind::Text) => KEY_SLOT,
                    Some(KeyKind::Row(_)) => MATRIX_KEY_SLOT,
                    None => 0,
                }
        }
        _ => 0,
    }
}

/// A fresh record of type `ty` under `parent` (a record of the type [`parent_link`] names;
/// [`NodeId::NONE`] for the root): header, zeroed layout (number 0, text "" = string 0,
/// empty collections), and the key slot (for an entry).
pub fn new_record(schema: &Schema, ty: NodeTypeId, parent: NodeId, key: u64) -> Vec<u8> {
    debug_assert_eq!(parent_link(schema, ty).map(|(_, host)| host), parent.is_some().then(|| parent.node_type()));
    let mut r = vec![0u8; row_width(schema, ty)];
    r[..HEADER].copy_from_slice(&parent.row().to_le_bytes());
    match key_kind(schema, ty) {
        Some(KeyKind::Text) => {
            let at = r.len() - KEY_SLOT;
            r[at..].copy_from_slice(&key.to_le_bytes());
        }
        Some(KeyKind::Row(target)) => {
            let key = NodeId::from_u64(key);
            debug_assert!(key.is_none() || key.node_type() == target, "a matrix key {key} not of type {target}");
            let at = r.len() - MATRIX_KEY_SLOT;
            r[at..].copy_from_slice(&key.row().to_le_bytes());
        }
        None => {}
    }
    r
}

/// Longest dictionary key kept in its entry's key slot rather than in the string table: most
/// keys are short ids, and interning each only added a string, its count and its text.
pub const INLINE_KEY_BYTES: usize = 7;
/// Bit 63 of a dictionary key slot: the key is inline, its length in bits 56..59 and its bytes
/// the slot's first bytes (string ids are table rows, below 2^32).
const INLINE_KEY: u64 = 1 << 63;

/// The key slot value of dictionary key `bytes` when it fits in the slot.
pub fn inline_key(bytes: &[u8]) -> Option<u64> {
    if bytes.len() > INLINE_KEY_BYTES {
        return None;
    }
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    b[7] = 0x80 | bytes.len() as u8;
    Some(u64::from_le_bytes(b))
}

/// What a dictionary entry's key slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DictionaryKey<'r> {
    /// The key's bytes, in the record.
    Inline(&'r [u8]),
    /// The key's string id (0: the empty string).
    String(u64),
}

/// The key of `record`, a dictionary entry of type `ty`.
pub fn dictionary_key<'r>(schema: &Schema, ty: NodeTypeId, record: &'r [u8]) -> Result<DictionaryKey<'r>, DataError> {
    if !matches!(key_kind(schema, ty), Some(KeyKind::Text)) {
        return Err(DataError::Corrupt(format!("a record of type {ty} is not a dictionary entry")));
    }
    let at = HEADER + schema.record_size(ty) as usize;
    let slot = read_u64(record, at)?;
    if slot & INLINE_KEY == 0 {
        return Ok(DictionaryKey::String(slot));
    }
    let len = (slot >> 56) as usize & 0x7f;
    if len > INLINE_KEY_BYTES {
        return Err(DataError::Corrupt(format!("an inline key of {len} bytes (at most {INLINE_KEY_BYTES})")));
    }
    Ok(DictionaryKey::Inline(&record[at..at + len]))
}

/// The target of `record`, a matrix entry of type `ty` (its key slot holds only the row).
pub fn matrix_target(schema: &Schema, ty: NodeTypeId, record: &[u8]) -> Result<NodeId, DataError> {
    let Some(KeyKind::Row(target)) = key_kind(schema, ty) else {
        return Err(DataError::Corrupt(format!("a record of type {ty} is not a matrix entry")));
    };
    let at = HEADER + schema.record_size(ty) as usize;
    let row = record
        .get(at..at + MATRIX_KEY_SLOT)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| DataError::Corrupt(format!("record of {} bytes has no key slot at {at}", record.len())))?;
    Ok(if row == 0 { NodeId::NONE } else { NodeId::new(target, row) })
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
