//! Where each collection, reverse link and schema index lives: the numbering of the key
//! indexes, the tables' shape, and the byte forms of keys.
//!
//! | key index | for | owner | key | row |
//! |---|---|---|---|---|
//! | `p` | the entries of collection `p` | owner's row | dictionary: the key's UTF-8; matrix: the target's row, big-endian | entry's row |
//! | `P + p` | the links of reference or matrix `p` (P: the schema's property count) | target's row | source's row, big-endian | reference: source's row; matrix: the owner's row (the entry's parent: going backwards over a matrix reads no entry) |
//! | `2P + n` | schema index `n` ([`crate::index`]) | 0 | encoded value · entry id, big-endian | entry's row |
//!
//! Table `t` holds the records of node type `t` ([`crate::record::row_width`]; types without
//! records have an unused table).

use espalier_schema::{NodeTypeId, PropertyId, Schema};
use espalier_storage::tables::Shape;

use crate::record::{self, NodeId};

/// Longest entry key (dictionary key text) accepted.
pub const MAX_KEY_BYTES: usize = 480;

/// The key index of collection `property`'s entries.
#[inline]
pub fn entries_index(property: PropertyId) -> u32 {
    property.get()
}

/// The key index of the links of reference or matrix `property`.
#[inline]
pub fn links_index(schema: &Schema, property: PropertyId) -> u32 {
    schema.properties.len() as u32 + property.get()
}

/// The key index of schema index `n`.
#[inline]
pub fn schema_index(schema: &Schema, n: u32) -> u32 {
    2 * schema.properties.len() as u32 + n
}

/// The tables and key indexes a database for `schema` has.
pub fn shape(schema: &Schema) -> Shape {
    Shape {
        tables: (0..schema.types.len() as u32).map(|t| record::row_width(schema, NodeTypeId::new(t)) as u32).collect(),
        indexes: 2 * schema.properties.len() as u32 + schema.indexes.len() as u32,
    }
}

/// A link's key: the source's row, big-endian (the sources of one property are of one type,
/// [`source_type`]; four bytes keep the key index's search words apart, see
/// `espalier_storage::key_index`).
#[inline]
pub fn link_key(source: NodeId) -> [u8; 4] {
    source.row().to_be_bytes()
}

/// A matrix entry's key: its target's row, big-endian (the targets of one matrix are of one
/// type, the matrix's target entry type).
#[inline]
pub fn target_key(target: NodeId) -> [u8; 4] {
    target.row().to_be_bytes()
}

/// The row in a four-byte key ([`link_key`], [`target_key`]); `None` if it is not four bytes.
#[inline]
pub fn row_be(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.try_into().ok()?))
}

/// The node type whose records hold the links of reference or matrix `property`: the matrix's
/// entry type, or the record holding the reference (its owner's host, past groups).
pub fn source_type(schema: &Schema, property: PropertyId) -> NodeTypeId {
    match schema.property(property).kind {
        espalier_schema::PropertyKind::Matrix { node, .. } => node,
        _ => schema.property(property).host,
    }
}

/// The node type a matrix's keys name (its target entry type); `None` if `property` is not a
/// matrix.
pub fn target_type(schema: &Schema, property: PropertyId) -> Option<NodeTypeId> {
    match &schema.property(property).kind {
        espalier_schema::PropertyKind::Matrix { target, .. } => Some(target.entry_type),
        _ => None,
    }
}

/// The u64 in the first 8 bytes of `b`, big-endian (a record id in an index key); `None` if
/// `b` is shorter.
pub fn u64_be(b: &[u8]) -> Option<NodeId> {
    Some(NodeId::from_u64(u64::from_be_bytes(b.get(..8)?.try_into().ok()?)))
}

/// Meta values kept beside the tables.
pub mod meta {
    /// Bumped when the layout of rows and key indexes changes incompatibly (4: tables; 5:
    /// matrix and link keys are four-byte rows; 6: a row's header is its parent's row alone;
    /// 7: a matrix entry's key slot is its target's row, 4 bytes; 8: a dictionary key of at
    /// most 7 bytes is inline in its key slot; 9: a number in a schema index is a tag and its
    /// significant bytes; 10: a schema index key ends in its entry's four-byte row, not its
    /// eight-byte id).
    pub const FORMAT_VERSION: u64 = 10;
    /// The name the format version is kept under.
    pub const FORMAT: &[u8] = b"format";
}
