//! Reading the typed graph: properties of nodes, entries of collections, states, references
//! forwards and backwards, and the path of any node.

use std::borrow::Cow;

use espalier_schema::{
    DownStep, NodeTypeId, ParentLink, PropertyId, PropertyKind, ReferenceTarget, Schema, StateIndex, UpStep,
};
use espalier_storage::{Reader, Table};

use crate::change::{NodePath, PathStep};
use crate::keys::{self, u64_be};
use crate::record::{self, Header, NodeId, NodeRef};
use crate::{strings, DataError, Result};

/// Longest walk up or down a path; schemas are far shallower, so hitting it means corruption.
const MAX_DEPTH: usize = 1024;

/// The key of an entry: a dictionary's text key, or the target record of a matrix entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKey<'k> {
    Text(&'k str),
    Target(NodeId),
}

impl EntryKey<'_> {
    pub fn bytes(&self) -> Cow<'_, [u8]> {
        match self {
            EntryKey::Text(t) => Cow::Borrowed(t.as_bytes()),
            EntryKey::Target(id) => Cow::Owned(id.to_be_bytes().to_vec()),
        }
    }
}

/// The slots of one node, read from its record (fetched once).
#[derive(Clone, Copy)]
pub struct NodeView<'a> {
    schema: &'a Schema,
    pub node: NodeRef,
    record: &'a [u8],
}

impl<'a> NodeView<'a> {
    /// A view of `record`, which must be `node`'s (or its host's, for a group).
    pub(crate) fn new(schema: &'a Schema, node: NodeRef, record: &'a [u8]) -> NodeView<'a> {
        NodeView { schema, node, record }
    }

    fn slot(&self, property: PropertyId, extra: usize) -> Result<u64> {
        debug_assert_eq!(self.schema.property(property).owner, self.node.ty, "property of another node type");
        record::read_u64(self.record, record::slot(self.schema, property) + extra)
    }

    pub fn number(&self, property: PropertyId) -> Result<i64> {
        Ok(self.slot(property, 0)? as i64)
    }

    pub fn text_id(&self, property: PropertyId) -> Result<u64> {
        self.slot(property, 0)
    }

    pub fn reference(&self, property: PropertyId) -> Result<NodeId> {
        self.slot(property, 0)
    }

    pub fn count(&self, property: PropertyId) -> Result<u64> {
        self.slot(property, 0)
    }

    pub fn state(&self, property: PropertyId) -> Result<(StateIndex, NodeRef)> {
        let index = self.slot(property, 0)?;
        let id = self.slot(property, 8)?;
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

/// The Entries key of an entry record, from its own header and key.
pub(crate) fn entries_key(schema: &Schema, rec: &[u8]) -> Result<Vec<u8>> {
    let h = record::header(rec)?;
    Ok(keys::entry(h.parent, h.parent_property, record::key(schema, rec)?))
}

/// The owner and key bytes in the `nodes` row `value` of record `id`, if it is a locator.
fn locator_parts(id: NodeId, value: &[u8]) -> Result<Option<(NodeId, &[u8])>> {
    let Some(entries_key) = record::as_locator(value) else {
        return Ok(None);
    };
    let short = || DataError::Corrupt(format!("short locator of record {id}"));
    let owner = u64_be(entries_key).ok_or_else(short)?;
    let raw = entries_key.get(12..).ok_or_else(short)?;
    Ok(Some((owner, raw)))
}

/// Read access to the graph in one snapshot (or in the write transaction).
#[derive(Clone, Copy)]
pub struct Graph<'a> {
    pub schema: &'a Schema,
    pub txn: &'a dyn Reader,
}

impl<'a> Graph<'a> {
    pub fn new(schema: &'a Schema, txn: &'a dyn Reader) -> Graph<'a> {
        Graph { schema, txn }
    }

    pub fn record(&self, id: NodeId) -> Result<&'a [u8]> {
        self.find_record(id)?.ok_or_else(|| DataError::Corrupt(format!("record {id} is referenced but missing")))
    }

    /// The record with id `id`, following the locator of an entry to its Entries row; `None`
    /// if there is none (or the locator leads to a row of another id).
    pub fn find_record(&self, id: NodeId) -> Result<Option<&'a [u8]>> {
        let Some(value) = self.txn.get(Table::Nodes, &keys::node(id))? else {
            return Ok(None);
        };
        let Some(entries_key) = record::as_locator(value) else {
            return Ok(Some(value));
        };
        Ok(match self.txn.get(Table::Entries, entries_key)?.and_then(record::split_entry_value) {
            Some((found, rec)) if found == id => Some(rec),
            _ => None,
        })
    }

    /// The header of record `id`, or `None` if there is no such record (one lookup where
    /// `exists` then `header` take two).
    pub fn find_header(&self, id: NodeId) -> Result<Option<Header>> {
        self.find_record(id)?.map(record::header).transpose()
    }

    pub fn exists(&self, id: NodeId) -> Result<bool> {
        Ok(self.find_record(id)?.is_some())
    }

    pub fn header(&self, id: NodeId) -> Result<Header> {
        record::header(self.record(id)?)
    }

    /// The record holding `node`'s slots.
    fn host(&self, node: NodeRef) -> Result<&'a [u8]> {
        if node.id == 0 {
            return Err(DataError::Corrupt(format!("node of type {} has no record", node.ty)));
        }
        self.record(node.id)
    }

    /// Reads several properties of one node with a single record lookup.
    pub fn view(&self, node: NodeRef) -> Result<NodeView<'a>> {
        Ok(NodeView { schema: self.schema, node, record: self.host(node)? })
    }

    pub fn number(&self, node: NodeRef, property: PropertyId) -> Result<i64> {
        self.view(node)?.number(property)
    }

    pub fn text_id(&self, node: NodeRef, property: PropertyId) -> Result<u64> {
        self.view(node)?.text_id(property)
    }

    pub fn text(&self, node: NodeRef, property: PropertyId) -> Result<String> {
        strings::get(self.txn, self.text_id(node, property)?)
    }

    pub fn string(&self, id: u64) -> Result<String> {
        strings::get(self.txn, id)
    }

    pub fn string_count(&self, id: u64) -> Result<u64> {
        strings::count(self.txn, id)
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

    pub fn find_entry(&self, owner: NodeRef, property: PropertyId, key: EntryKey<'_>) -> Result<Option<NodeRef>> {
        Ok(self.find_entry_view(owner, property, key)?.map(|v| v.node))
    }

    /// The entry with key `key` and its record, in one descent of the Entries table.
    pub fn find_entry_view(
        &self,
        owner: NodeRef,
        property: PropertyId,
        key: EntryKey<'_>,
    ) -> Result<Option<NodeView<'a>>> {
        let raw = key.bytes();
        if raw.len() > keys::MAX_KEY_BYTES {
            return Ok(None); // never stored: adding such a key fails
        }
        // The Entries key on the stack: this is the hot path of every lookup by key.
        let mut k = [0u8; 12 + keys::MAX_KEY_BYTES];
        k[..12].copy_from_slice(&keys::collection(owner.id, property));
        k[12..12 + raw.len()].copy_from_slice(&raw);
        match self.txn.get(Table::Entries, &k[..12 + raw.len()])? {
            Some(v) => Ok(Some(self.entry_view(v, self.entry_type(property))?)),
            None => Ok(None),
        }
    }

    /// Where the record of an entry found by key lives, for
    /// [`crate::WriteGraph::remember_location`]; `None` for other nodes.
    pub fn entry_location(&self, view: NodeView<'_>) -> Result<Option<(NodeId, Vec<u8>)>> {
        match self.schema.node_type(record::header(view.record)?.ty).parent {
            ParentLink::DictionaryEntry { .. } | ParentLink::MatrixEntry { .. } => {
                Ok(Some((view.node.id, entries_key(self.schema, view.record)?)))
            }
            _ => Ok(None),
        }
    }

    fn entry_view(&self, value: &'a [u8], ty: NodeTypeId) -> Result<NodeView<'a>> {
        let (id, record) =
            record::split_entry_value(value).ok_or_else(|| DataError::Corrupt("short entry value".into()))?;
        Ok(NodeView { schema: self.schema, node: NodeRef { id, ty }, record })
    }

    /// The entries of a collection in key order: (key bytes, entry node).
    pub fn entries(
        &self,
        owner: NodeRef,
        property: PropertyId,
    ) -> Result<impl Iterator<Item = Result<(&'a [u8], NodeRef)>> + 'a> {
        Ok(self.entry_views(owner, property)?.map(|item| item.map(|(k, v)| (k, v.node))))
    }

    /// The entries of a collection in key order with their records: (key bytes, entry view),
    /// read by one scan of the owner's Entries rows.
    pub fn entry_views(
        &self,
        owner: NodeRef,
        property: PropertyId,
    ) -> Result<impl Iterator<Item = Result<(&'a [u8], NodeView<'a>)>> + 'a> {
        let ty = self.entry_type(property);
        let iter = self.txn.prefix(Table::Entries, &keys::collection(owner.id, property))?;
        let g = *self;
        Ok(iter.map(move |item| {
            let (k, v) = item?;
            Ok((&k[12..], g.entry_view(v, ty)?))
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
        if node.id == 0 {
            return Err(DataError::Corrupt("cannot go up from a state that has no record".into()));
        }
        let owner_ty = self.schema.property(property).owner;
        // One descent in `nodes`: an entry's locator names its owner, any other record's
        // header its parent.
        let value = self.nodes_row(node.id)?;
        let parent = match locator_parts(node.id, value)? {
            Some((owner, _)) => owner,
            None => record::header(value)?.parent,
        };
        #[cfg(debug_assertions)]
        assert_eq!(self.header(node.id)?.parent, parent, "locator and record of {} disagree on the parent", node.id);
        Ok(Some(NodeRef { id: parent, ty: owner_ty }))
    }

    /// The `nodes` row of record `id`: the record itself, or an entry's locator.
    fn nodes_row(&self, id: NodeId) -> Result<&'a [u8]> {
        self.txn
            .get(Table::Nodes, &keys::node(id))?
            .ok_or_else(|| DataError::Corrupt(format!("record {id} is referenced but missing")))
    }

    /// [`Graph::entry_locator`] for a node known to be an entry: its owner and key bytes.
    fn entry_of_locator(&self, id: NodeId) -> Result<(NodeId, &'a [u8])> {
        self.entry_locator(id)?.ok_or_else(|| DataError::Corrupt(format!("entry record {id} has no locator")))
    }

    /// For an entry: its owner's record id and its key bytes, read from its locator in
    /// `nodes` (which holds the entry's `entries` key: owner, property, key) without reading
    /// the record. `None` for a record stored in `nodes` itself (the root, states).
    fn entry_locator(&self, id: NodeId) -> Result<Option<(NodeId, &'a [u8])>> {
        let Some((owner, raw)) = locator_parts(id, self.nodes_row(id)?)? else {
            return Ok(None);
        };
        // Debug builds (every test) check the shortcut against the record it stands for.
        #[cfg(debug_assertions)]
        {
            let rec = self.record(id)?;
            assert_eq!(record::key(self.schema, rec)?, raw, "locator and record of {id} disagree on the key");
            assert_eq!(record::header(rec)?.parent, owner, "locator and record of {id} disagree on the owner");
        }
        Ok(Some((owner, raw)))
    }

    /// The key of entry `node` as the instruction language writes it: one text for a
    /// dictionary entry, the target's (possibly compound) key for a matrix entry.
    pub fn entry_key(&self, node: NodeRef) -> Result<Vec<String>> {
        self.entry_key_in(node, self.record(node.id)?)
    }

    /// [`Graph::entry_key`] from the entry's record, already read.
    fn entry_key_in(&self, node: NodeRef, record: &[u8]) -> Result<Vec<String>> {
        let raw = record::key(self.schema, record)?;
        match self.schema.node_type(node.ty).parent {
            ParentLink::DictionaryEntry { .. } => Ok(vec![String::from_utf8_lossy(raw).into_owned()]),
            ParentLink::MatrixEntry { property } => {
                let PropertyKind::Matrix { target, .. } = &self.schema.property(property).kind else {
                    return Err(DataError::Corrupt("matrix entry of a non-matrix".into()));
                };
                let id = u64_be(raw).ok_or_else(|| DataError::Corrupt("short matrix key".into()))?;
                self.target_key(id, target)
            }
            _ => Err(DataError::Corrupt(format!("record {} is not an entry", node.id))),
        }
    }

    /// The target record a matrix entry's key names, from the key as [`Graph::entry_views`]
    /// gives it (no lookup).
    pub fn matrix_target_of(raw: &[u8]) -> Result<NodeId> {
        u64_be(raw).ok_or_else(|| DataError::Corrupt("short matrix key".into()))
    }

    /// The target record of a matrix entry.
    pub fn matrix_target(&self, node: NodeRef) -> Result<NodeId> {
        let raw = record::key(self.schema, self.record(node.id)?)?;
        u64_be(raw).ok_or_else(|| DataError::Corrupt("short matrix key".into()))
    }

    /// The path from the root to `node`.
    pub fn path(&self, node: NodeRef) -> Result<NodePath> {
        self.path_known(node, None)
    }

    /// [`Graph::path`] given the record that holds `node` (already read by the caller).
    /// The step a path takes into state `state` of stategroup `property`.
    pub(crate) fn state_step(&self, property: PropertyId, state: StateIndex) -> PathStep {
        PathStep::State {
            stategroup: self.schema.property(property).name.clone(),
            state: self.state_name(property, state).to_string(),
        }
    }

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
                ParentLink::DictionaryEntry { property } if !(known.is_some() && at.id == node.id) => {
                    // The locator gives both the key and the owner: one descent.
                    let (owner, raw) = self.entry_of_locator(at.id)?;
                    steps.push(PathStep::Entry {
                        collection: self.schema.property(property).name.clone(),
                        key: vec![String::from_utf8_lossy(raw).into_owned()],
                        matrix: false,
                    });
                    at = NodeRef { id: owner, ty: self.schema.property(property).owner };
                    continue;
                }
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
                    at = NodeRef { id: record::header(rec)?.parent, ty: self.schema.property(property).owner };
                    continue;
                }
                ParentLink::State { property, state } => self.state_step(property, state),
            };
            steps.push(step);
            at = self.parent(at)?.ok_or_else(|| DataError::Corrupt("path ended before the root".into()))?;
        }
        Err(DataError::Corrupt(format!("path of record {} deeper than {MAX_DEPTH}", node.id)))
    }

    /// Path of a node for messages; never fails (falls back to the record id).
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
        let mut at = NodeRef { id: target_id, ty: target.entry_type };
        for _ in 0..MAX_DEPTH {
            if key.len() == target.key_arity {
                key.reverse();
                return Ok(key);
            }
            if let ParentLink::DictionaryEntry { property } = self.schema.node_type(at.ty).parent {
                // The key and the owner, both from the locator: one descent per level.
                let (owner, raw) = self.entry_of_locator(at.id)?;
                key.push(String::from_utf8_lossy(raw).into_owned());
                at = NodeRef { id: owner, ty: self.schema.property(property).owner };
                continue;
            }
            at = self.parent(at)?.ok_or_else(|| DataError::Corrupt("reference key walk reached the root".into()))?;
        }
        Err(DataError::Corrupt("reference key walk too deep".into()))
    }

    /// Every (source record, property) that links to `target` (references and matrix keys).
    pub fn links_to(&self, target: NodeId) -> Result<impl Iterator<Item = Result<(NodeId, PropertyId)>> + 'a> {
        let iter = self.txn.prefix(Table::Links, &target.to_be_bytes())?;
        Ok(iter.map(|item| {
            let (k, _) = item?;
            let (_, source, property) = keys::parse_link(k).ok_or_else(|| DataError::Corrupt("bad link key".into()))?;
            Ok((source, property))
        }))
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
