//! Where each collection, reverse link and schema index lives: the numbering of the key
//! indexes, the tables' shape, and the byte forms of keys.
//!
//! | key index | for | owner | key | row |
//! |---|---|---|---|---|
//! | `p` | the entries of collection `p` | owner's row | dictionary: the key's UTF-8; matrix: the target id, big-endian | entry's row |
//! | `P + p` | the links of reference or matrix `p` (P: the schema's property count) | target's row | source id, big-endian | source's row |
//! | `2P + n` | schema index `n` ([`crate::index`]) | 0 | encoded value · entry id, big-endian | entry's row |
//!
//! Table `t` holds the records of node type `t` ([`crate::record::row_width`]; types without
//! records have an unused table).

use espalier_schema::{PropertyId, Schema};
use espalier_storage::tables::Shape;

use crate::record::{self, NodeId};

/// Longest entry key (dictionary key text) accepted.
pub const MAX_KEY_BYTES: usize = 480;

/// The key index of collection `property`'s entries.
#[inline]
pub fn entries_index(property: PropertyId) -> u32 {
    property
}

/// The key index of the links of reference or matrix `property`.
#[inline]
pub fn links_index(schema: &Schema, property: PropertyId) -> u32 {
    schema.properties.len() as u32 + property
}

/// The key index of schema index `n`.
#[inline]
pub fn schema_index(schema: &Schema, n: u32) -> u32 {
    2 * schema.properties.len() as u32 + n
}

/// The tables and key indexes a database for `schema` has.
pub fn shape(schema: &Schema) -> Shape {
    Shape {
        tables: (0..schema.types.len() as u32).map(|t| record::row_width(schema, t) as u32).collect(),
        indexes: 2 * schema.properties.len() as u32 + schema.indexes.len() as u32,
    }
}

/// A link's key: the source id, big-endian.
#[inline]
pub fn link_key(source: NodeId) -> [u8; 8] {
    source.to_be_bytes()
}

pub fn u64_be(b: &[u8]) -> Option<NodeId> {
    Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}

/// Meta values kept beside the tables.
pub mod meta {
    /// Bumped when the layout of rows and key indexes changes incompatibly (4: tables).
    pub const FORMAT_VERSION: u64 = 4;
    /// The name the format version is kept under.
    pub const FORMAT: &[u8] = b"format";
}
