//! The byte layout of a node record: a 16-byte header, the fixed layout computed by the
//! schema (property slots at their offsets), then the entry key for entry records.

use espalier_schema::{NodeTypeId, PropertyId, Schema};

use crate::DataError;

/// A record id. 0 means "none"; the root is always 1.
pub type NodeId = u64;
pub const ROOT_ID: NodeId = 1;

pub const HEADER: usize = 16;
/// Parent property of the root record.
pub const NO_PARENT: PropertyId = u32::MAX;

/// First bytes of a Nodes value that is not a record but a locator: entry records live in
/// the Entries table, clustered under their owner and found by key in one descent; the Nodes
/// table maps their id to that Entries key for everything that goes by id (references,
/// parents, links). A record starts with its type id, which is never `u32::MAX`.
pub const LOCATOR_TAG: [u8; 4] = [0xFF; 4];

/// A Nodes value pointing at the Entries row `entries_key`.
pub fn locator(entries_key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(LOCATOR_TAG.len() + entries_key.len());
    v.extend_from_slice(&LOCATOR_TAG);
    v.extend_from_slice(entries_key);
    v
}

/// The Entries key in a Nodes value, if it is a locator.
pub fn as_locator(value: &[u8]) -> Option<&[u8]> {
    value.strip_prefix(&LOCATOR_TAG[..])
}

/// An Entries value: the entry's id, then its record.
pub fn entry_value(id: NodeId, record: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + record.len());
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(record);
    v
}

/// Splits an Entries value into the entry's id and record.
pub fn split_entry_value(value: &[u8]) -> Option<(NodeId, &[u8])> {
    let (id, record) = value.split_at_checked(8)?;
    Some((u64::from_le_bytes(id.try_into().ok()?), record))
}

/// A logical node: the record that stores it and its node type. A group's node shares the
/// record of its host; an empty state has no record (`id == 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeRef {
    pub id: NodeId,
    pub ty: NodeTypeId,
}

impl NodeRef {
    pub const ROOT: NodeRef = NodeRef { id: ROOT_ID, ty: espalier_schema::ROOT };
}

/// The decoded header of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub ty: NodeTypeId,
    pub parent_property: PropertyId,
    pub parent: NodeId,
}

pub fn header(bytes: &[u8]) -> Result<Header, DataError> {
    if bytes.len() < HEADER {
        return Err(DataError::Corrupt(format!("record of {} bytes has no header", bytes.len())));
    }
    Ok(Header {
        ty: u32::from_le_bytes(bytes[0..4].try_into().unwrap_or_default()),
        parent_property: u32::from_le_bytes(bytes[4..8].try_into().unwrap_or_default()),
        parent: u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_default()),
    })
}

/// A fresh record: header, zeroed layout (number 0, text "" = string 0, empty collections),
/// and the entry key.
pub fn new_record(schema: &Schema, h: Header, key: &[u8]) -> Vec<u8> {
    let size = schema.record_size(h.ty) as usize;
    let mut r = vec![0u8; HEADER + size + key.len()];
    r[0..4].copy_from_slice(&h.ty.to_le_bytes());
    r[4..8].copy_from_slice(&h.parent_property.to_le_bytes());
    r[8..16].copy_from_slice(&h.parent.to_le_bytes());
    r[HEADER + size..].copy_from_slice(key);
    r
}

/// The entry key stored after the layout.
pub fn key<'r>(schema: &Schema, record: &'r [u8]) -> Result<&'r [u8], DataError> {
    let h = header(record)?;
    let at = HEADER + schema.record_size(h.ty) as usize;
    record.get(at..).ok_or_else(|| DataError::Corrupt(format!("record of type {} too short", h.ty)))
}

/// Byte position of a property's slot in its host record.
pub fn slot(schema: &Schema, property: PropertyId) -> usize {
    HEADER + schema.property(property).offset as usize
}

pub fn read_u64(record: &[u8], at: usize) -> Result<u64, DataError> {
    record
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| DataError::Corrupt(format!("record of {} bytes has no slot at {at}", record.len())))
}

pub fn write_u64(record: &mut [u8], at: usize, value: u64) -> Result<(), DataError> {
    let len = record.len();
    let b = record
        .get_mut(at..at + 8)
        .ok_or_else(|| DataError::Corrupt(format!("record of {len} bytes has no slot at {at}")))?;
    b.copy_from_slice(&value.to_le_bytes());
    Ok(())
}
