//! Reading the typed graph: properties of nodes, entries of collections, states, references
//! forwards and backwards, and the path of any node.

use std::borrow::Cow;

use espalier_schema::{
    DownStep, NodeTypeId, ParentLink, PropertyId, PropertyKind, ReferenceTarget, Schema, StateIndex, UpStep,
};
use espalier_storage::key_index::KeyIndex;
use espalier_storage::tables::Read;

use crate::change::{NodePath, PathStep};
use crate::keys;
use crate::record::{self, Header, NodeId, NodeRef};
use crate::{DataError, Result};

/// Whether a property of kind `kind` links to nodes of type `ty` (a reference into its
/// dictionary, or a matrix keyed by it).
pub(crate) fn links_into(kind: &PropertyKind, ty: NodeTypeId) -> bool {
    match kind {
        PropertyKind::Reference { target } | PropertyKind::Matrix { target, .. } => target.entry_type == ty,
        _ => false,
    }
}

/// Longest walk up or down a path; schemas are far shallower, so hitting it means corruption.
const MAX_DEPTH: usize = 1024;

/// The key of an entry: a dictionary's text key, or the target record of a matrix entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKey<'k> {
    /// A dictionary entry's key text.
    Text(&'k str),
    /// A matrix entry's target record.
    Target(NodeId),
}

impl EntryKey<'_> {
    /// The key as the collection's key index holds it (no allocation: a lookup by key is on
    /// every join's path).
    pub fn bytes(&self) -> KeyBytes<'_> {
        match self {
            EntryKey::Text(t) => KeyBytes::Text(t.as_bytes()),
            EntryKey::Target(id) => KeyBytes::Target(keys::target_key(*id)),
        }
    }
}

/// The bytes of an [`EntryKey`]: borrowed text, or a target id big-endian.
pub enum KeyBytes<'k> {
    Text(&'k [u8]),
    Target([u8; 4]),
}

impl std::ops::Deref for KeyBytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            KeyBytes::Text(t) => t,
            KeyBytes::Target(b) => b,
        }
    }
}

/// The slots of one node, read from its record (fetched once).
#[derive(Clone, Copy)]
pub struct NodeView<'a> {
    schema: &'a Schema,
    /// The node the view reads.
    pub node: NodeRef,
    record: &'a [u8],
}

impl<'a> NodeView<'a> {
    /// A view of `record`, which must be `node`'s (or its host's, for a group).
    pub(crate) fn new(schema: &'a Schema, node: NodeRef, record: &'a [u8]) -> NodeView<'a> {
        NodeView { schema, node, record }
    }

    /// The record the view reads (its host's, for a group).
    #[inline]
    pub fn record(&self) -> &'a [u8] {
        self.record
    }

    #[inline]
    fn slot(&self, property: PropertyId, extra: usize) -> Result<u64> {
        debug_assert_eq!(self.schema.property(property).owner, self.node.ty, "property of another node type");
        record::read_u64(self.record, record::slot(self.schema, property) + extra)
    }

    /// The value of number `property`.
    #[inline]
    pub fn number(&self, property: PropertyId) -> Result<i64> {
        Ok(self.slot(property, 0)? as i64)
    }

    /// The string id in text slot `property` (resolve it with [`Graph::string`]).
    #[inline]
    pub fn text_id(&self, property: PropertyId) -> Result<u64> {
        self.slot(property, 0)
    }

    /// The target record of reference `property` (0 only while the creating instruction runs).
    #[inline]
    pub fn reference(&self, property: PropertyId) -> Result<NodeId> {
        self.slot(property, 0).map(NodeId::from_u64)
    }

    /// Number of entries in dictionary or matrix `property`.
    pub fn count(&self, property: PropertyId) -> Result<u64> {
        self.slot(property, 0)
    }

    /// The index of the selected state of stategroup `property`: [`NodeView::state`] without
    /// reading the state's node.
    #[inline]
    pub fn state_index(&self, property: PropertyId) -> Result<StateIndex> {
        let index = self.slot(property, 0)?;
        match &self.schema.property(property).kind {
            PropertyKind::StateGroup { states } if index < states.len() as u64 => Ok(index as StateIndex),
            PropertyKind::StateGroup { .. } => Err(DataError::Corrupt(format!("state index {index} out of range"))),
            _ => Err(DataError::Corrupt(format!("property {property} is not a stategroup"))),
        }
    }

    /// The selected state of stategroup `property` and its node.
    #[inline]
    pub fn state(&self, property: PropertyId) -> Result<(StateIndex, NodeRef)> {
        let index = self.slot(property, 0)?;
        let id = NodeId::from_u64(self.slot(property, 8)?);
        let PropertyKind::StateGroup { states } = &self.schema.property(property).kind else {
            return Err(DataError::Corrupt(format!("property {property} is not a stategroup")));
        };
        let state = states
            .get(index as usize)
            .ok_or_else(|| DataError::Corrupt(format!("state index {index} out of range")))?;
        Ok((index as StateIndex, NodeRef { id, ty: state.node }))
    }

    /// The same record seen as another logical node in it (an inline group's node).
    pub fn group(&self, property: PropertyId) -> NodeView<'a> {
        match self.schema.property(property).kind {
            PropertyKind::Group { node: ty } => NodeView { node: NodeRef { id: self.node.id, ty }, ..*self },
            _ => panic!("property {property} is not a group"),
        }
    }
}

/// Read access to the graph in one snapshot (or in the write transaction).
#[derive(Clone, Copy)]
pub struct Graph<'a> {
    /// The schema the graph follows.
    pub schema: &'a Schema,
    /// The snapshot or write transaction read from.
    pub txn: &'a dyn Read,
}

/// Stored bytes as text, borrowed when they are UTF-8, else owned with each bad sequence
/// replaced (what `String::from_utf8_lossy` gives). Keys are written as text, so only a
/// corrupt one takes the lossy walk; `str::from_utf8`'s ASCII fast path checks the rest
/// several times faster than the lossy chunk walk does.
pub fn lossy_text(bytes: &[u8]) -> Cow<'_, str> {
    // Most keys are a few ASCII bytes, which `is_ascii` checks inline, where `from_utf8` is a
    // call: a tenth of a collection query's row (`bench core`).
    if bytes.is_ascii() {
        // SAFETY: ASCII bytes are valid UTF-8.
        return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes).map_or_else(|_| String::from_utf8_lossy(bytes), Cow::Borrowed)
}

impl<'a> Graph<'a> {
    /// Read access to the graph of `schema` through `txn`.
    pub fn new(schema: &'a Schema, txn: &'a dyn Read) -> Graph<'a> {
        Graph { schema, txn }
    }

    /// The record with id `id`; a missing one is corruption (something referred to it).
    #[inline]
    pub fn record(&self, id: NodeId) -> Result<&'a [u8]> {
        self.find_record(id)?.ok_or_else(|| DataError::Corrupt(format!("record {id} is referenced but missing")))
    }

    /// The record with id `id`: row `id.row()` of table `id.table()`; `None` if there is
    /// no such row.
    #[inline]
    pub fn find_record(&self, id: NodeId) -> Result<Option<&'a [u8]>> {
        Ok(self.txn.row(id.table(), id.row()))
    }

    /// The header of record `id`, or `None` if there is no such record.
    pub fn find_header(&self, id: NodeId) -> Result<Option<Header>> {
        self.find_record(id)?.map(|r| record::header(self.schema, id.node_type(), r)).transpose()
    }

    /// Whether there is a record with id `id`.
    pub fn exists(&self, id: NodeId) -> Result<bool> {
        Ok(self.find_record(id)?.is_some())
    }

    /// The header of record `id`; a missing record is corruption.
    pub fn header(&self, id: NodeId) -> Result<Header> {
        record::header(self.schema, id.node_type(), self.record(id)?)
    }

    /// The record holding `node`'s slots.
    #[inline]
    fn host(&self, node: NodeRef) -> Result<&'a [u8]> {
        if node.id.is_none() {
            return Err(DataError::Corrupt(format!("node of type {} has no record", node.ty)));
        }
        self.record(node.id)
    }

    /// Reads several properties of one node with a single record lookup.
    #[inline]
    pub fn view(&self, node: NodeRef) -> Result<NodeView<'a>> {
        Ok(NodeView { schema: self.schema, node, record: self.host(node)? })
    }

    /// The value of number `property` of `node`.
    pub fn number(&self, node: NodeRef, property: PropertyId) -> Result<i64> {
        self.view(node)?.number(property)
    }

    /// The string id in text slot `property` of `node`.
    pub fn text_id(&self, node: NodeRef, property: PropertyId) -> Result<u64> {
        self.view(node)?.text_id(property)
    }

    /// The value of text `property` of `node`.
    pub fn text(&self, node: NodeRef, property: PropertyId) -> Result<String> {
        self.string(self.text_id(node, property)?)
    }

    /// The bytes of string `id` as stored.
    pub fn string_bytes(&self, id: u64) -> Result<&'a [u8]> {
        self.txn.string(id).ok_or_else(|| DataError::Corrupt(format!("string {id} is referenced but not stored")))
    }

    /// String `id` as text, borrowed from the snapshot; one that is not UTF-8 is corruption.
    /// (`str::from_utf8` checks a megabyte of ASCII several times faster than
    /// `String::from_utf8_lossy`'s chunks do.)
    pub fn string_text(&self, id: u64) -> Result<&'a str> {
        std::str::from_utf8(self.string_bytes(id)?).map_err(|_| DataError::Corrupt(format!("string {id} is not UTF-8")))
    }

    /// String `id` as an owned text; one that is not UTF-8 is corruption.
    pub fn string(&self, id: u64) -> Result<String> {
        self.string_text(id).map(str::to_owned)
    }

    /// How many slots hold string `id`.
    pub fn string_count(&self, id: u64) -> Result<u64> {
        self.txn.string_count(id).ok_or_else(|| DataError::Corrupt(format!("string {id} missing")))
    }

    /// The target record of a reference (0 only while the creating instruction runs).
    pub fn reference(&self, node: NodeRef, property: PropertyId) -> Result<NodeId> {
        self.view(node)?.reference(property)
    }

    /// Number of entries in a dictionary or matrix.
    pub fn count(&self, node: NodeRef, property: PropertyId) -> Result<u64> {
        self.view(node)?.count(property)
    }

    /// The selected state and its node.
    pub fn state(&self, node: NodeRef, property: PropertyId) -> Result<(StateIndex, NodeRef)> {
        self.view(node)?.state(property)
    }

    /// The name of state `index` of stategroup `property`; `?` if there is no such state.
    pub fn state_name(&self, property: PropertyId, index: StateIndex) -> &'a str {
        match &self.schema.property(property).kind {
            PropertyKind::StateGroup { states } => states.get(index as usize).map_or("?", |s| s.name.as_str()),
            _ => "?",
        }
    }

    /// The node of a group property.
    pub fn group(&self, node: NodeRef, property: PropertyId) -> NodeRef {
        match self.schema.property(property).kind {
            PropertyKind::Group { node: ty } => NodeRef { id: node.id, ty },
            _ => panic!("property {property} is not a group"),
        }
    }

    /// The node type of the entries of a dictionary or matrix.
    pub fn entry_type(&self, property: PropertyId) -> NodeTypeId {
        match self.schema.property(property).kind {
            PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => node,
            _ => panic!("property {property} is not a collection"),
        }
    }

    /// The key index of collection `property` (empty if the database lacks it: corruption).
    fn entries_of(&self, property: PropertyId) -> Result<&'a KeyIndex> {
        self.txn
            .index(keys::entries_index(property))
            .ok_or_else(|| DataError::Corrupt(format!("no key index for collection {property}")))
    }

    /// The entry of collection `property` of `owner` with key `key`, or `None`: one descent of
    /// the collection's key index (a key too long to store is never found).
    pub fn find_entry(&self, owner: NodeRef, property: PropertyId, key: EntryKey<'_>) -> Result<Option<NodeRef>> {
        let raw = key.bytes();
        if raw.len() > keys::MAX_KEY_BYTES {
            return Ok(None); // never stored: adding such a key fails
        }
        let ty = self.entry_type(property);
        Ok(self.entries_of(property)?.get(owner.id.row(), &raw).map(|row| NodeRef { id: NodeId::new(ty, row), ty }))
    }

    /// The entry with key `key` and its record: one descent of the collection's key index,
    /// then its row.
    pub fn find_entry_view(
        &self,
        owner: NodeRef,
        property: PropertyId,
        key: EntryKey<'_>,
    ) -> Result<Option<NodeView<'a>>> {
        match self.find_entry(owner, property, key)? {
            Some(node) => Ok(Some(NodeView { schema: self.schema, node, record: self.record(node.id)? })),
            None => Ok(None),
        }
    }

    /// The entries of a collection in key order: (key bytes, entry node).
    pub fn entries(
        &self,
        owner: NodeRef,
        property: PropertyId,
    ) -> Result<impl Iterator<Item = Result<(&'a [u8], NodeRef)>> + 'a> {
        let ty = self.entry_type(property);
        let iter = self.entries_of(property)?.entries(owner.id.row());
        Ok(iter.map(move |e| Ok((e.key, NodeRef { id: NodeId::new(ty, e.row), ty }))))
    }

    /// The entries of a collection in key order with their records: (key bytes, entry view).
    pub fn entry_views(
        &self,
        owner: NodeRef,
        property: PropertyId,
    ) -> Result<impl Iterator<Item = Result<(&'a [u8], NodeView<'a>)>> + 'a> {
        self.entry_views_from(owner, property, &[])
    }

    /// The entries of a collection whose key is `from` or after it (as bytes), in key order
    /// with their records: one descent of the key index, then a walk along its leaves that
    /// reads only as far as the caller takes.
    pub fn entry_views_from(
        &self,
        owner: NodeRef,
        property: PropertyId,
        from: &[u8],
    ) -> Result<impl Iterator<Item = Result<(&'a [u8], NodeView<'a>)>> + 'a> {
        let g = *self;
        let ty = self.entry_type(property);
        let iter = self.entries_of(property)?.entries_from(owner.id.row(), from);
        Ok(iter.map(move |e| {
            let node = NodeRef { id: NodeId::new(ty, e.row), ty };
            Ok((e.key, NodeView { schema: g.schema, node, record: g.record(node.id)? }))
        }))
    }

    /// The node `node` hangs under, or `None` for the root.
    pub fn parent(&self, node: NodeRef) -> Result<Option<NodeRef>> {
        let nt = self.schema.node_type(node.ty);
        let property = match nt.parent {
            ParentLink::Root => return Ok(None),
            ParentLink::Group { property } => {
                return Ok(Some(NodeRef { id: node.id, ty: self.schema.property(property).owner }))
            }
            ParentLink::DictionaryEntry { property }
            | ParentLink::MatrixEntry { property }
            | ParentLink::State { property, .. } => property,
        };
        if node.id.is_none() {
            return Err(DataError::Corrupt("cannot go up from a state that has no record".into()));
        }
        let owner_ty = self.schema.property(property).owner;
        Ok(Some(NodeRef { id: record::parent(self.schema, node.ty, self.record(node.id)?)?, ty: owner_ty }))
    }

    /// The key of entry `node` as the instruction language writes it: one text for a
    /// dictionary entry, the target's (possibly compound) key for a matrix entry.
    pub fn entry_key(&self, node: NodeRef) -> Result<Vec<String>> {
        self.entry_key_in(node, self.record(node.id)?)
    }

    /// [`Graph::entry_key`] from the entry's record, already read.
    fn entry_key_in(&self, node: NodeRef, record: &[u8]) -> Result<Vec<String>> {
        match self.schema.node_type(node.ty).parent {
            ParentLink::DictionaryEntry { .. } => {
                Ok(vec![self.key_text(record::dictionary_key(self.schema, node.ty, record)?)?.into_owned()])
            }
            ParentLink::MatrixEntry { property } => self
                .target_key(record::matrix_target(self.schema, node.ty, record)?, self.matrix_target_type(property)?),
            _ => Err(DataError::Corrupt(format!("record {} is not an entry", node.id))),
        }
    }

    /// The target record a key of matrix `property` names, from the key as
    /// [`Graph::entry_views`] gives it (no lookup).
    pub fn matrix_target_of(&self, property: PropertyId, raw: &[u8]) -> Result<NodeId> {
        match (keys::target_type(self.schema, property), keys::row_be(raw)) {
            (Some(ty), Some(row)) => Ok(NodeId::new(ty, row)),
            _ => Err(DataError::Corrupt(format!("matrix key {raw:?} of property {property} is not a row"))),
        }
    }

    /// The target record of a matrix entry.
    pub fn matrix_target(&self, node: NodeRef) -> Result<NodeId> {
        record::matrix_target(self.schema, node.ty, self.record(node.id)?)
    }

    /// Every node of type `ty` in the snapshot with its record, in row order: a sequential
    /// scan of its table (for a group type, of its host's). `None` for a type without records
    /// (an empty state), which a caller reaches by walking instead.
    pub fn nodes_of(&self, ty: NodeTypeId) -> Option<impl Iterator<Item = NodeView<'a>> + 'a> {
        let mut host = ty;
        for _ in 0..MAX_DEPTH {
            match self.schema.node_type(host).parent {
                ParentLink::Group { property } => host = self.schema.property(property).owner,
                _ => break,
            }
        }
        if record::row_width(self.schema, host) == 0 {
            return None;
        }
        let table = self.txn.table(host.get())?;
        let schema = self.schema;
        Some(table.rows().map(move |(row, record)| NodeView {
            schema,
            node: NodeRef { id: NodeId::new(host, row), ty },
            record,
        }))
    }

    /// The keys of the entries from the root down to `node`, as a key path spells them (a
    /// matrix entry's key is its target's keys): [`Graph::path`]'s entry keys without its
    /// names, each entry's record read once.
    pub fn entry_keys(&self, node: NodeRef) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        self.entry_keys_into(node, &mut keys)?;
        Ok(keys.into_iter().map(Cow::into_owned).collect())
    }

    /// [`Graph::entry_keys`] into `out` (cleared first), each key borrowed from the snapshot
    /// (one that is not UTF-8 comes owned, its bad bytes replaced, as `entry_keys` gives it):
    /// what a streamed row's node column reads without an allocation per key.
    pub fn entry_keys_into(&self, node: NodeRef, out: &mut Vec<Cow<'a, str>>) -> Result<()> {
        // Collected from the node up, each entry's keys last first, then all turned around.
        out.clear();
        let mut at = node;
        for _ in 0..MAX_DEPTH {
            let nt = self.schema.node_type(at.ty);
            match nt.parent {
                ParentLink::Root => {
                    out.reverse();
                    return Ok(());
                }
                ParentLink::DictionaryEntry { property } => {
                    let rec = self.record(at.id)?;
                    out.push(self.key_text(record::dictionary_key(self.schema, at.ty, rec)?)?);
                    at = NodeRef {
                        id: record::parent(self.schema, at.ty, rec)?,
                        ty: self.schema.property(property).owner,
                    };
                }
                ParentLink::MatrixEntry { property } => {
                    let rec = self.record(at.id)?;
                    let target = self.matrix_target_type(property)?;
                    self.target_keys_up(record::matrix_target(self.schema, at.ty, rec)?, target, out)?;
                    at = NodeRef {
                        id: record::parent(self.schema, at.ty, rec)?,
                        ty: self.schema.property(property).owner,
                    };
                }
                _ => at = self.parent(at)?.ok_or_else(|| DataError::Corrupt("path ended before the root".into()))?,
            }
        }
        Err(DataError::Corrupt(format!("path of record {} deeper than {MAX_DEPTH}", node.id)))
    }

    /// A dictionary key's text, borrowed unless it is not UTF-8.
    fn key_text(&self, key: record::DictionaryKey<'a>) -> Result<Cow<'a, str>> {
        Ok(lossy_text(self.key_bytes(key)?))
    }

    /// A dictionary key's bytes: in its record, or its string's.
    pub fn key_bytes<'k>(&self, key: record::DictionaryKey<'k>) -> Result<&'k [u8]>
    where
        'a: 'k,
    {
        match key {
            record::DictionaryKey::Inline(bytes) => Ok(bytes),
            record::DictionaryKey::String(id) => self.string_bytes(id),
        }
    }

    /// What matrix `property`'s keys name.
    fn matrix_target_type(&self, property: PropertyId) -> Result<&'a ReferenceTarget> {
        match &self.schema.property(property).kind {
            PropertyKind::Matrix { target, .. } => Ok(target),
            _ => Err(DataError::Corrupt("matrix entry of a non-matrix".into())),
        }
    }

    /// The path from the root to `node`.
    pub fn path(&self, node: NodeRef) -> Result<NodePath> {
        self.path_known(node, None)
    }

    /// The step a path takes into state `state` of stategroup `property`.
    pub(crate) fn state_step(&self, property: PropertyId, state: StateIndex) -> PathStep {
        PathStep::State {
            stategroup: self.schema.property(property).name.clone(),
            state: self.state_name(property, state).to_string(),
        }
    }

    /// [`Graph::path`] given the record that holds `node` (already read by the caller).
    pub fn path_from(&self, node: NodeRef, record: &'a [u8]) -> Result<NodePath> {
        self.path_known(node, Some(record))
    }

    fn path_known(&self, node: NodeRef, known: Option<&'a [u8]>) -> Result<NodePath> {
        let mut steps = Vec::new();
        let mut at = node;
        for _ in 0..MAX_DEPTH {
            let nt = self.schema.node_type(at.ty);
            let step = match nt.parent {
                ParentLink::Root => {
                    steps.reverse();
                    return Ok(NodePath(steps));
                }
                ParentLink::Group { property } => PathStep::Group(self.schema.property(property).name.clone()),
                ParentLink::DictionaryEntry { property } | ParentLink::MatrixEntry { property } => {
                    // One record read gives both the key and the parent.
                    let rec = match known {
                        Some(rec) if at.id == node.id => rec,
                        _ => self.record(at.id)?,
                    };
                    steps.push(PathStep::Entry {
                        collection: self.schema.property(property).name.clone(),
                        key: self.entry_key_in(at, rec)?,
                        matrix: matches!(nt.parent, ParentLink::MatrixEntry { .. }),
                    });
                    at = NodeRef {
                        id: record::parent(self.schema, at.ty, rec)?,
                        ty: self.schema.property(property).owner,
                    };
                    continue;
                }
                ParentLink::State { property, state } => self.state_step(property, state),
            };
            steps.push(step);
            at = self.parent(at)?.ok_or_else(|| DataError::Corrupt("path ended before the root".into()))?;
        }
        Err(DataError::Corrupt(format!("path of record {} deeper than {MAX_DEPTH}", node.id)))
    }

    /// Entry key `key` of collection `property` as errors show it: a dictionary's text quoted,
    /// a matrix's target by its path (not its record number).
    pub fn shown_key(&self, property: PropertyId, key: EntryKey<'_>) -> String {
        match (key, keys::target_type(self.schema, property)) {
            (EntryKey::Text(t), _) => format!("{t:?}"),
            (EntryKey::Target(id), Some(ty)) => self.describe(NodeRef { id, ty }),
            (EntryKey::Target(id), None) => format!("record {id}"),
        }
    }

    /// The path of `node` for messages; never fails (falls back to the record id).
    pub fn describe(&self, node: NodeRef) -> String {
        match self.path(node) {
            Ok(p) => p.to_string(),
            Err(_) => format!("record {}", node.id),
        }
    }

    /// Finds the entry a reference or matrix key designates, starting from `from` (the node
    /// that declares the reference). `key` has one component per dictionary on the path.
    pub fn resolve(&self, from: NodeRef, target: &ReferenceTarget, key: &[String]) -> Result<NodeRef> {
        assert_eq!(key.len(), target.key_arity, "key arity checked by the caller");
        let mut at = from;
        for step in &target.up {
            let parent_ok = matches!(
                (step, self.schema.node_type(at.ty).parent),
                (UpStep::Group, ParentLink::Group { .. })
                    | (UpStep::DictionaryEntry, ParentLink::DictionaryEntry { .. })
                    | (UpStep::MatrixEntry, ParentLink::MatrixEntry { .. })
                    | (UpStep::State, ParentLink::State { .. })
            );
            assert!(parent_ok, "schema checked up step {step:?} from type {}", at.ty);
            at = self.parent(at)?.ok_or_else(|| DataError::Corrupt("up step from the root".into()))?;
        }
        let mut components = key.iter();
        for step in &target.down {
            at = match *step {
                DownStep::Group(p) => self.group(at, p),
                DownStep::State { stategroup, state } => {
                    let (current, node) = self.state(at, stategroup)?;
                    if current != state {
                        return Err(DataError::StateNotSelected {
                            node: self.describe(at),
                            stategroup: self.schema.property(stategroup).name.clone(),
                            expected: self.state_name(stategroup, state).to_string(),
                            actual: self.state_name(stategroup, current).to_string(),
                        });
                    }
                    node
                }
                DownStep::Dictionary(p) => {
                    let k = components.next().map(String::as_str).unwrap_or_default();
                    match self.find_entry(at, p, EntryKey::Text(k))? {
                        Some(entry) => entry,
                        None => {
                            return Err(DataError::KeyMissing {
                                collection: self.collection_path(at, p),
                                key: format!("{:?}", k),
                            })
                        }
                    }
                }
            };
        }
        Ok(at)
    }

    /// `<owner path> . 'name'` for messages.
    pub fn collection_path(&self, owner: NodeRef, property: PropertyId) -> String {
        let p = self.schema.property(property);
        let sym = if matches!(p.kind, PropertyKind::Matrix { .. }) { '%' } else { '.' };
        let owner = self.describe(owner);
        if owner == "root" {
            format!("{sym} '{}'", p.name)
        } else {
            format!("{owner} {sym} '{}'", p.name)
        }
    }

    /// The key a reference holds when it points at `target_id`.
    pub fn target_key(&self, target_id: NodeId, target: &ReferenceTarget) -> Result<Vec<String>> {
        let mut key = Vec::with_capacity(target.key_arity);
        self.target_keys_up(target_id, target, &mut key)?;
        Ok(key.into_iter().rev().map(Cow::into_owned).collect())
    }

    /// The keys [`Graph::target_key`] gives, pushed onto `out` last first, borrowed.
    fn target_keys_up(&self, target_id: NodeId, target: &ReferenceTarget, out: &mut Vec<Cow<'a, str>>) -> Result<()> {
        let base = out.len();
        let mut at = NodeRef { id: target_id, ty: target.entry_type };
        for _ in 0..MAX_DEPTH {
            if out.len() - base == target.key_arity {
                return Ok(());
            }
            if let ParentLink::DictionaryEntry { property } = self.schema.node_type(at.ty).parent {
                // The key and the owner, both from the entry's record.
                let rec = self.record(at.id)?;
                out.push(self.key_text(record::dictionary_key(self.schema, at.ty, rec)?)?);
                at = NodeRef { id: record::parent(self.schema, at.ty, rec)?, ty: self.schema.property(property).owner };
                continue;
            }
            at = self.parent(at)?.ok_or_else(|| DataError::Corrupt("reference key walk reached the root".into()))?;
        }
        Err(DataError::Corrupt("reference key walk too deep".into()))
    }

    /// The sources whose reference or matrix `property` links to `target`, in id order: one
    /// seek in that property's link index.
    pub fn referrers(&self, target: NodeId, property: PropertyId) -> Result<impl Iterator<Item = Result<NodeId>> + 'a> {
        let index = self
            .txn
            .index(keys::links_index(self.schema, property))
            .ok_or_else(|| DataError::Corrupt(format!("no key index for the links of {property}")))?;
        let ty = keys::source_type(self.schema, property);
        Ok(index.entries(target.row()).map(move |e| match keys::row_be(e.key) {
            Some(row) => Ok(NodeId::new(ty, row)),
            None => Err(DataError::Corrupt(format!("link key {:?} of property {property} is not a row", e.key))),
        }))
    }

    /// Whether `source` links to `target` through `property` (one lookup in its link index).
    pub fn has_link(&self, target: NodeId, source: NodeId, property: PropertyId) -> Result<bool> {
        let index = self
            .txn
            .index(keys::links_index(self.schema, property))
            .ok_or_else(|| DataError::Corrupt(format!("no key index for the links of {property}")))?;
        Ok(index.get(target.row(), &keys::link_key(source)).is_some())
    }

    /// The nodes holding matrix `property` with an entry keyed by `target`, in the order of
    /// their entries' ids: one seek in its link index, whose rows are the owners (no entry is
    /// read).
    pub fn owners(&self, target: NodeId, property: PropertyId) -> Result<impl Iterator<Item = NodeId> + 'a> {
        let index = self
            .txn
            .index(keys::links_index(self.schema, property))
            .ok_or_else(|| DataError::Corrupt(format!("no key index for the links of {property}")))?;
        let host = self.schema.property(property).host;
        Ok(index.entries(target.row()).map(move |e| NodeId::new(host, e.row)))
    }

    /// How many links matrix `property` has (its entries, in all owners).
    pub fn matrix_len(&self, property: PropertyId) -> Result<u64> {
        Ok(self.entries_of(property)?.len())
    }

    /// Every link of matrix `property`, in key order: (owner row, target) forwards, by its
    /// entries; (target row, owner) `backwards`, by its link index. One walk along the leaves
    /// of one key index, so by the first row.
    pub fn matrix_links(
        &self,
        property: PropertyId,
        backwards: bool,
    ) -> Result<impl Iterator<Item = Result<(u32, NodeId)>> + 'a> {
        let schema = self.schema;
        let index = if backwards {
            self.txn
                .index(keys::links_index(schema, property))
                .ok_or_else(|| DataError::Corrupt(format!("no key index for the links of {property}")))?
        } else {
            self.entries_of(property)?
        };
        let host = schema.property(property).host;
        let g = *self;
        Ok(index.iter().map(move |e| match backwards {
            true => Ok((e.owner, NodeId::new(host, e.row))),
            false => Ok((e.owner, g.matrix_target_of(property, e.key)?)),
        }))
    }

    /// Every (source record, property) that links to `target` (references and matrix keys):
    /// the links of every property that can point at `target`'s type, from their key indexes.
    pub fn links_to(&self, target: NodeId) -> Result<impl Iterator<Item = Result<(NodeId, PropertyId)>> + 'a> {
        let ty = match self.find_header(target)? {
            Some(h) => h.ty,
            None => return Ok(Vec::new().into_iter()),
        };
        let mut links = Vec::new();
        for p in self.schema.properties.iter().filter(|p| links_into(&p.kind, ty)) {
            let index = self
                .txn
                .index(keys::links_index(self.schema, p.id))
                .ok_or_else(|| DataError::Corrupt(format!("no key index for the links of {}", p.id)))?;
            let source = keys::source_type(self.schema, p.id);
            for e in index.entries(target.row()) {
                let row = keys::row_be(e.key).ok_or_else(|| DataError::Corrupt("link key is not a row".into()))?;
                links.push(Ok((NodeId::new(source, row), p.id)));
            }
        }
        Ok(links.into_iter())
    }

    /// A derived property's value in record `holder`, computed from scratch (the write path
    /// keeps it from each change; `check` and tests compare the two). For a condition: its
    /// state index (1 'Yes', 0 'No').
    pub fn derived_value(&self, holder: NodeId, property: PropertyId) -> Result<i64> {
        use espalier_schema::{Aggregate, Derivation};
        let schema = self.schema;
        let (function, over, value) = match schema.property(property).derived {
            Some(Derivation::Condition { number, op, value }) => {
                let n = record::read_u64(self.record(holder)?, record::slot(schema, number))? as i64;
                return Ok(i64::from(op.holds(&n, &value)));
            }
            Some(Derivation::Aggregate { function, over, value }) => (function, over, value),
            None => return Err(DataError::Corrupt(format!("property {property} is not derived"))),
        };
        let mut values = Vec::new();
        self.members(holder, over, &mut |rec| {
            values.push(match value {
                Some(v) => record::read_u64(rec, record::slot(schema, v))? as i64,
                None => 0,
            });
            Ok(true)
        })?;
        Ok(match function {
            Aggregate::Count => values.len() as i64,
            Aggregate::Sum => values.iter().fold(0i64, |a, &b| a.wrapping_add(b)),
            Aggregate::Min => values.iter().copied().min().unwrap_or(0),
            Aggregate::Max => values.iter().copied().max().unwrap_or(0),
        })
    }

    /// Does `holder` have exactly one member in `over` now?
    pub fn one_member(&self, holder: NodeId, over: espalier_schema::Over) -> Result<bool> {
        let mut n = 0;
        self.members(holder, over, &mut |_| {
            n += 1;
            Ok(n < 2)
        })?;
        Ok(n == 1)
    }

    /// Sends the record of every member of `over` in `holder` (the entries of its
    /// collection, or the records whose reference points at it) to `visit`, until it says
    /// stop (`false`).
    fn members(
        &self,
        holder: NodeId,
        over: espalier_schema::Over,
        visit: &mut dyn FnMut(&[u8]) -> Result<bool>,
    ) -> Result<()> {
        match over {
            espalier_schema::Over::Collection(c) => {
                let owner = NodeRef { id: holder, ty: self.schema.property(c).owner };
                for item in self.entry_views(owner, c)? {
                    if !visit(item?.1.record)? {
                        break;
                    }
                }
            }
            espalier_schema::Over::Referrers(r) => {
                for item in self.links_to(holder)? {
                    let (source, p) = item?;
                    if p == r && !visit(self.record(source)?)? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// The node that declares property `property` inside record `source` (for messages and
    /// backwards navigation): the record's node, or one of its inline groups.
    pub fn declaring_node(&self, source: NodeId, property: PropertyId) -> Result<NodeRef> {
        let p = self.schema.property(property);
        if let PropertyKind::Matrix { node, .. } = p.kind {
            // A matrix link's source is the matrix entry itself.
            return Ok(NodeRef { id: source, ty: node });
        }
        Ok(NodeRef { id: source, ty: p.owner })
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::lossy_text;

    #[test]
    fn stored_text_is_borrowed_when_it_is_utf8_and_mended_when_it_is_not() {
        assert!(matches!(lossy_text(b"l042"), Cow::Borrowed("l042")));
        assert!(matches!(lossy_text(b""), Cow::Borrowed("")));
        assert!(matches!(lossy_text("Näme ✓".as_bytes()), Cow::Borrowed("Näme ✓")));
        // A byte above 0x7F alone is not UTF-8: replaced, as `String::from_utf8_lossy` does.
        assert_eq!(lossy_text(b"ab\xFFc"), Cow::<str>::Owned("ab\u{FFFD}c".to_string()));
        assert_eq!(lossy_text(b"\xC3"), Cow::<str>::Owned("\u{FFFD}".to_string()));
    }
}
