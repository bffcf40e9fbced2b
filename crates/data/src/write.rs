//! Changing the typed graph inside the write transaction, keeping the reverse-link index,
//! string counts and entry counts exact, enforcing the integrity rule (nothing referred to
//! can be removed), and recording every change for the change set.

mod derive;

use std::collections::BTreeSet;

use espalier_schema::{NodeTypeId, Over, ParentLink, PropertyId, PropertyKind, Schema, StateIndex, Storage};
use espalier_storage::tables::{Savepoint, Writer};

use crate::change::{Change, ChangeSet, Touched, MAX_TOUCHED};
use crate::graph::{EntryKey, Graph, NodeView};
use crate::index::{self, IndexValue, OwnedValue};
use crate::keys::{self, MAX_KEY_BYTES};
use crate::record::{self, NodeId, NodeRef, NO_PARENT, ROOT_ID};
use crate::{DataError, Result};

/// Deepest ancestry walk when checking whether a referrer lies inside a removed subtree.
const MAX_DEPTH: usize = 1024;

/// Most unique-index values one request remembers for its end-of-request check; past it the
/// check goes over every unique index whole (bounds memory on a bulk load).
const MAX_UNIQUE_PENDING: usize = 4096;

/// Links into removed nodes one request may leave open until it ends (see `WriteGraph::check_references`):
/// past it the request fails with a `limit` error rather than growing without bound.
pub const MAX_DEFERRED: usize = 1 << 16;

/// Paths a batch keeps for its change sets (see `WriteGraph::paths`): an update names the same
/// few nodes (an entry, the states below it) in several changes.
const PATHS_KEPT: usize = 8;

/// Write access to the typed graph inside one write transaction: it keeps the indexes,
/// string counts and entry counts exact, checks integrity and uniqueness when a request ends
/// ([`WriteGraph::check_end`]), and records every change for the change set.
pub struct WriteGraph<'a, 's> {
    /// The schema the graph follows.
    pub schema: &'a Schema,
    txn: &'a mut Writer,
    /// The second lifetime is the storage transaction's of the earlier engine; callers still
    /// name it.
    _txn: std::marker::PhantomData<&'s ()>,
    changes: Vec<Change>,
    /// Whether each write records its change ([`WriteGraph::set_record_changes`]).
    record_changes: bool,
    /// Whether a recorded change is spelt out with names ([`WriteGraph::set_spell_changes`])
    /// or only counted.
    spell_changes: bool,
    /// Changes recorded since [`WriteGraph::take_changes`], spelt out or not.
    counted: usize,
    /// The last paths named in changes, oldest first. A record's path never changes while
    /// it exists and ids are never reused, so an entry is never stale.
    paths: Vec<(NodeRef, crate::NodePath)>,
    /// Unique-index values (index, encoded value) written by the current request. They are
    /// checked when it ends ([`WriteGraph::check_unique`]), not when written: a new entry holds
    /// its default until the instruction sets its value, so two can share it for a moment.
    unique_pending: BTreeSet<(u32, Vec<u8>)>,
    /// More than [`MAX_UNIQUE_PENDING`] were written: check every unique index whole.
    unique_overflow: bool,
    /// What this request touched (see [`Touched`]), unsorted; `None` past [`MAX_TOUCHED`]
    /// or when not tracked.
    touched: Option<Touched>,
    /// Whether to record what requests touch (see [`WriteGraph::track_touched`]).
    tracking: bool,
    /// Links from outside into nodes this request removed: allowed while the request runs
    /// (a later member of a transaction may remove or re-point their sources), an error if
    /// still there when it ends ([`WriteGraph::check_references`]). At most [`MAX_DEFERRED`].
    deferred: Vec<Deferred>,
    /// The member of a transaction now running, as the caller numbers them
    /// ([`WriteGraph::begin_member`]); kept with each deferred link to name it in the error.
    member: usize,
}

/// A link `source → target` of `property` whose target this request removed while the link
/// was still there. Row ids freed in a request are not reused before it commits, so the
/// link index still holding `(target, source)` at the end means the source still refers to
/// the removed node.
#[derive(Debug, Clone)]
struct Deferred {
    target: NodeId,
    source: NodeId,
    property: PropertyId,
    /// The removed node as the error names it (it cannot be described once gone).
    shown: String,
    /// For a reference: the removed target's key as the reference spells it (a later
    /// re-point's change set names the old target by it).
    key: Option<Vec<String>>,
    member: usize,
}

/// A deferred integrity failure ([`WriteGraph::check_references`]): the error, and the member
/// of the transaction whose removal left the link (as numbered by
/// [`WriteGraph::begin_member`]; 0 outside transactions).
#[derive(Debug)]
pub struct MemberError {
    /// The member that left the link (0 outside transactions).
    pub member: usize,
    /// The failure.
    pub error: DataError,
}

/// Where to roll one instruction back to.
#[derive(Debug, Clone)]
pub struct GraphSavepoint {
    storage: Savepoint,
    changes: usize,
    counted: usize,
    /// Lengths of the touched records, slots, entries and links.
    touched: [usize; 4],
    deferred: usize,
}

/// A schema index without the row an entry's value says it has: the index and the table
/// disagree.
fn missing_index_row(n: u32, entry: NodeId, value: IndexValue<'_>) -> DataError {
    DataError::Corrupt(format!("index {n} has no row for entry record {entry} ({value:?})"))
}

/// A storage failure, as the data layer's error.
fn storage(e: espalier_storage::tables::TablesError) -> DataError {
    DataError::Tables(e)
}

impl<'a, 's> WriteGraph<'a, 's> {
    /// Write access to the graph of `schema` through `txn`, with nothing changed yet.
    pub fn new(schema: &'a Schema, txn: &'a mut Writer) -> Result<WriteGraph<'a, 's>> {
        Ok(WriteGraph {
            schema,
            txn,
            _txn: std::marker::PhantomData,
            changes: Vec::new(),
            record_changes: true,
            spell_changes: true,
            counted: 0,
            // Grown on the first spelt change: a request that only counts names nothing.
            paths: Vec::new(),
            unique_pending: BTreeSet::new(),
            unique_overflow: false,
            touched: Some(Touched::default()),
            tracking: true,
            deferred: Vec::new(),
            member: 0,
        })
    }

    /// Read access that sees this transaction's own writes.
    pub fn graph(&self) -> Graph<'_> {
        Graph::new(self.schema, &*self.txn)
    }

    /// The storage writer (for tests that damage data on purpose, and for meta values).
    pub fn txn(&mut self) -> &mut Writer {
        self.txn
    }

    /// Marks this point of the transaction, to roll one instruction back to with
    /// [`WriteGraph::rollback_to`].
    pub fn savepoint(&mut self) -> GraphSavepoint {
        let touched =
            self.touched.as_ref().map_or([0; 4], |t| [t.records.len(), t.slots.len(), t.entries.len(), t.links.len()]);
        GraphSavepoint {
            storage: self.txn.savepoint(),
            changes: self.changes.len(),
            counted: self.counted,
            touched,
            deferred: self.deferred.len(),
        }
    }

    /// Undoes every write and forgets every change since `sp`.
    pub fn rollback_to(&mut self, sp: GraphSavepoint) -> Result<()> {
        self.txn.rollback_to(&sp.storage);
        self.changes.truncate(sp.changes);
        self.counted = sp.counted;
        self.deferred.truncate(sp.deferred);
        if let Some(t) = self.touched.as_mut() {
            let [records, slots, entries, links] = sp.touched;
            t.records.truncate(records);
            t.slots.truncate(slots);
            t.entries.truncate(entries);
            t.links.truncate(links);
        }
        // Only the request rolled back has unchecked values (each request checks its own).
        self.unique_pending.clear();
        self.unique_overflow = false;
        Ok(())
    }

    /// Takes the changes recorded since the last call (one request's change set).
    pub fn take_changes(&mut self, version: u64) -> ChangeSet {
        let fresh = self.tracking.then(Touched::default);
        let touched = match std::mem::replace(&mut self.touched, fresh) {
            Some(mut t) => {
                t.normalize();
                t
            }
            None => Touched::all(),
        };
        ChangeSet {
            version,
            changes: std::mem::take(&mut self.changes),
            count: std::mem::take(&mut self.counted),
            touched,
            diffs: Vec::new(),
        }
    }

    /// Records every change for the change set (the default), or not. A bulk load into a new
    /// database drops its changes anyway (its change set would be as large as the data); with
    /// recording off it does not name every node it writes (paths, keys, property names),
    /// which was a fifth of a Train Benchmark load's time. What touched tracking sees is
    /// unchanged.
    pub fn set_record_changes(&mut self, on: bool) {
        self.record_changes = on;
        if !on {
            self.changes.clear();
            self.counted = 0;
        }
    }

    /// Spells out every recorded change with the names of its node, property and values (the
    /// default), or only counts it ([`ChangeSet::count`]). Naming a change is most of an
    /// update commit's allocations; a request whose change set nobody reads skips it. Set it
    /// before a request's first write: the changes it records are spelt out or not as a whole.
    pub fn set_spell_changes(&mut self, on: bool) {
        self.spell_changes = on;
    }

    /// Counts a change the request made (while changes are recorded); true if it is also
    /// to be spelt out.
    fn count_change(&mut self) -> bool {
        if self.record_changes {
            self.counted += 1;
        }
        self.spelling()
    }

    /// Whether changes are spelt out now: what a write names before it changes anything (an
    /// old target's key, a removed entry's key) is wanted only then.
    fn spelling(&self) -> bool {
        self.record_changes && self.spell_changes
    }

    /// Records what requests touch (the default), or not: then every change set says it
    /// touched everything ([`Touched::all`]), which is always true.
    pub fn track_touched(&mut self, on: bool) {
        self.tracking = on;
        self.touched = on.then(Touched::default);
    }

    /// Notes that record `id` was created or deleted; 0 is no record (an empty state).
    fn touch(&mut self, id: NodeId) {
        if id.is_none() {
            return;
        }
        self.note(|t| &mut t.records, id);
    }

    /// Notes that the slot of `property` in record `id` was written.
    fn touch_slot(&mut self, id: NodeId, property: PropertyId) {
        self.note(|t| &mut t.slots, (id, property));
    }

    /// Notes that collection `property` of record `owner` gained or lost an entry (for a
    /// matrix, the one with `target`; 0 for a dictionary).
    fn touch_entry(&mut self, owner: NodeId, property: PropertyId, target: NodeId) {
        self.note(|t| &mut t.entries, (owner, property, target));
    }

    /// Notes that the links of `property` into record `target` changed.
    fn touch_link(&mut self, target: NodeId, property: PropertyId) {
        self.note(|t| &mut t.links, (target, property));
    }

    /// Adds `item` to one list of what the request touched; past [`MAX_TOUCHED`] in a list
    /// the request counts as touching everything (and stops listing).
    fn note<T>(&mut self, list: impl FnOnce(&mut Touched) -> &mut Vec<T>, item: T) {
        let Some(t) = self.touched.as_mut() else { return };
        let list = list(t);
        if list.len() < MAX_TOUCHED {
            list.push(item);
            return;
        }
        self.touched = None;
    }

    /// The changes recorded since [`WriteGraph::take_changes`] was last called.
    pub fn pending_changes(&self) -> &[Change] {
        &self.changes
    }

    /// Creates the root record of an empty database (id 1) with default values.
    pub fn init_root(&mut self) -> Result<NodeRef> {
        if self.graph().exists(ROOT_ID)? {
            return Err(DataError::Corrupt("the root exists already".into()));
        }
        let id = self.create_node(espalier_schema::ROOT, NodeId::NONE, NO_PARENT, 0)?;
        if id != ROOT_ID {
            return Err(DataError::Corrupt(format!("the root was made as record {id}, not {ROOT_ID}")));
        }
        Ok(NodeRef::ROOT)
    }

    /// Allocates and stores a record for a node of type `ty` (0 for an empty state), with
    /// defaults: numbers 0, texts "", collections empty, each stategroup in its first state
    /// (whose node is created likewise). References stay 0 until the caller sets them.
    fn create_node(&mut self, ty: NodeTypeId, parent: NodeId, parent_property: PropertyId, key: u64) -> Result<NodeId> {
        if self.schema.node_type(ty).storage == Storage::Empty {
            return Ok(NodeId::NONE);
        }
        if !matches!(self.schema.node_type(ty).storage, Storage::Record { .. }) {
            return Err(DataError::Corrupt(format!("node type {ty} has no record of its own")));
        }
        // The row first (zeroed), so that the node's id exists for its states' parent field.
        let mut rec = record::new_record(self.schema, ty, parent, key);
        let row = self.txn.insert(ty.get(), &rec).map_err(storage)?;
        let id = NodeId::new(ty, row);
        self.touch(id);
        if self.fill_defaults(&mut rec, id, ty)? {
            self.txn.put(ty.get(), row, &rec).map_err(storage)?;
        }
        if record::is_entry(self.schema, ty) {
            self.index_defaults(parent_property, id, &rec)?;
        }
        Ok(id)
    }

    /// Creates the first state of each stategroup of the node's type (and its groups'), with
    /// its slots in `rec`; whether there was any (else `rec` is unchanged).
    fn fill_defaults(&mut self, rec: &mut [u8], id: NodeId, logical: NodeTypeId) -> Result<bool> {
        let schema = self.schema;
        let mut filled = false;
        for &p in &schema.node_type(logical).properties {
            match &schema.property(p).kind {
                PropertyKind::StateGroup { states } => {
                    let first = states.first().ok_or_else(|| DataError::Corrupt("stategroup without states".into()))?;
                    let child = self.create_node(first.node, id, p, 0)?;
                    let at = record::slot(schema, p);
                    // A condition starts in the state its default number (0) gives.
                    record::write_u64(rec, at, self.condition_default(p))?;
                    record::write_id(rec, at + 8, child)?;
                    filled = true;
                }
                PropertyKind::Group { node } => filled |= self.fill_defaults(rec, id, *node)?,
                _ => {}
            }
        }
        Ok(filled)
    }

    /// Record `id`.
    fn record_by_id(&self, id: NodeId) -> Result<&[u8]> {
        self.graph().record(id)
    }

    fn load(&self, id: NodeId) -> Result<Vec<u8>> {
        Ok(self.record_by_id(id)?.to_vec())
    }

    /// Writes `value` into the 8-byte slot at byte `at` of record `id`, in place (a number
    /// set, a count bumped: no copy of the record in and out); the value it held. Does not
    /// note the record as touched.
    fn swap_u64(&mut self, id: NodeId, at: usize, value: u64) -> Result<u64> {
        let mut bytes = value.to_le_bytes();
        self.txn.swap_at(id.table(), id.row(), at, &mut bytes).map_err(storage)?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Writes number `property` of record `id` in place and notes the slot as touched; the
    /// number it held. Indexes, changes and what depends on it are the caller's.
    fn write_number(&mut self, id: NodeId, property: PropertyId, value: i64) -> Result<i64> {
        let old = self.swap_u64(id, record::slot(self.schema, property), value as u64)? as i64;
        self.touch_slot(id, property);
        Ok(old)
    }

    /// The record of `node` as a view.
    pub fn view(&self, node: NodeRef) -> Result<NodeView<'_>> {
        if node.id.is_none() {
            return Err(DataError::Corrupt(format!("node of type {} has no record", node.ty)));
        }
        Ok(NodeView::new(self.schema, node, self.record_by_id(node.id)?))
    }

    /// Writes record `id` whose slot of `property` changed.
    fn store(&mut self, id: NodeId, property: PropertyId, rec: &[u8]) -> Result<()> {
        self.touch_slot(id, property);
        self.put_record(id, rec)
    }

    /// Writes a record without noting it as touched (see [`WriteGraph::bump_count`]).
    fn put_record(&mut self, id: NodeId, rec: &[u8]) -> Result<()> {
        self.txn.put(id.table(), id.row(), rec).map_err(storage)
    }

    /// Adds the link `source → target` of `property` to its key index, with `value` (the
    /// source's row for a reference, the matrix entry's owner's row for a matrix: see
    /// [`keys`]).
    fn put_link(&mut self, target: NodeId, source: NodeId, property: PropertyId, value: NodeId) -> Result<()> {
        let index = keys::links_index(self.schema, property);
        let (owner, row) = (target.row(), value.row());
        self.txn.index_put(index, owner, &keys::link_key(source), row).map_err(storage)?;
        Ok(())
    }

    /// Removes the link `source → target` of `property` from its key index.
    fn delete_link(&mut self, target: NodeId, source: NodeId, property: PropertyId) -> Result<()> {
        let index = keys::links_index(self.schema, property);
        self.txn.index_remove(index, target.row(), &keys::link_key(source)).map_err(storage)?;
        Ok(())
    }

    /// The string id of `text`, holding it once more.
    fn acquire(&mut self, text: &str) -> Result<u64> {
        self.txn.acquire(text.as_bytes()).map_err(storage)
    }

    /// Lets go of string `id` once.
    fn release(&mut self, id: u64) -> Result<()> {
        self.txn.release(id).map_err(storage)
    }

    /// The path of `node` for a change. A state's path is its owner's (kept, most often)
    /// and one step, so naming the states of one update does not walk to the root each time.
    fn path(&mut self, node: NodeRef) -> Result<crate::NodePath> {
        self.path_at(node, 0)
    }

    fn path_at(&mut self, node: NodeRef, depth: usize) -> Result<crate::NodePath> {
        if node.id.is_none() {
            return self.graph().path(node);
        }
        if let Some((_, path)) = self.paths.iter().rev().find(|(n, _)| *n == node) {
            return Ok(path.clone());
        }
        if depth >= MAX_DEPTH {
            return Err(DataError::Corrupt(format!("path of record {} deeper than {MAX_DEPTH}", node.id)));
        }
        let path = match self.schema.node_type(node.ty).parent {
            ParentLink::State { property, state } => {
                let parent = record::parent(self.schema, node.ty, self.record_by_id(node.id)?)?;
                let owner = NodeRef { id: parent, ty: self.schema.property(property).owner };
                let mut path = self.path_at(owner, depth + 1)?;
                path.0.push(self.graph().state_step(property, state));
                path
            }
            _ => self.graph().path_from(node, self.record_by_id(node.id)?)?,
        };
        debug_assert_eq!(path, self.graph().path(node)?, "kept path of record {} differs", node.id);
        if self.paths.len() == PATHS_KEPT {
            self.paths.remove(0);
        }
        self.paths.push((node, path.clone()));
        Ok(path)
    }

    /// Sets number `property` of `node` (not a derived one: those are kept, never set) and
    /// updates the indexes and derived numbers that depend on it; returns the old value.
    pub fn set_number(&mut self, node: NodeRef, property: PropertyId, value: i64) -> Result<i64> {
        debug_assert!(matches!(self.schema.property(property).kind, PropertyKind::Number));
        assert!(self.schema.property(property).derived.is_none(), "derived numbers are kept, not set");
        let old = self.write_number(node.id, property, value)?;
        self.index_move(property, node.id, IndexValue::Number(old), IndexValue::Number(value))?;
        if self.count_change() {
            let change = Change::Number {
                node: self.path(node)?,
                property: self.schema.property(property).name.clone(),
                old,
                new: value,
            };
            self.changes.push(change);
        }
        self.number_changed(node.id, property, old, value)?;
        Ok(old)
    }

    /// Sets text `property` of `node`, keeping the string counts and its indexes exact;
    /// returns the old text.
    pub fn set_text(&mut self, node: NodeRef, property: PropertyId, value: &str) -> Result<String> {
        debug_assert!(matches!(self.schema.property(property).kind, PropertyKind::Text));
        let mut rec = self.load(node.id)?;
        let at = record::slot(self.schema, property);
        let old_id = record::read_u64(&rec, at)?;
        let old = self.graph().string(old_id)?;
        // Acquire before release: setting the same text must not free it in between.
        let new_id = self.acquire(value)?;
        self.release(old_id)?;
        record::write_u64(&mut rec, at, new_id)?;
        self.store(node.id, property, &rec)?;
        self.index_move(property, node.id, IndexValue::Text(&old), IndexValue::Text(value))?;
        if self.count_change() {
            let change = Change::Text {
                node: self.path(node)?,
                property: self.schema.property(property).name.clone(),
                old: old.clone(),
                new: value.to_string(),
            };
            self.changes.push(change);
        }
        Ok(old)
    }

    /// Points a reference at `target` (an entry the caller resolved); returns the old target.
    pub fn set_reference(&mut self, node: NodeRef, property: PropertyId, target: NodeId) -> Result<NodeId> {
        let PropertyKind::Reference { target: path } = &self.schema.property(property).kind else {
            panic!("property {property} is not a reference");
        };
        assert!(target.is_some(), "reference set to no record");
        let mut rec = self.load(node.id)?;
        let at = record::slot(self.schema, property);
        let old = record::read_id(&rec, at)?;
        let old_alive = self.target_alive(old)?;
        let old_key = if !self.spelling() {
            None
        } else if old_alive {
            Some(self.graph().target_key(old, path)?)
        } else if old.is_some() {
            self.removed_target_key(old, node.id, property)
        } else {
            None
        };
        if old.is_some() {
            self.delete_link(old, node.id, property)?;
            self.touch_link(old, property);
        }
        self.put_link(target, node.id, property, node.id)?;
        self.touch_link(target, property);
        record::write_id(&mut rec, at, target)?;
        self.store(node.id, property, &rec)?;
        if old_alive {
            self.member(old, Over::Referrers(property), &rec, false)?;
        }
        self.member(target, Over::Referrers(property), &rec, true)?;
        if self.count_change() {
            let change = Change::Reference {
                node: self.path(node)?,
                property: self.schema.property(property).name.clone(),
                old: old_key,
                new: self.graph().target_key(target, path)?,
            };
            self.changes.push(change);
        }
        Ok(old)
    }

    fn bump_count(&mut self, owner: NodeRef, property: PropertyId, delta: i64) -> Result<()> {
        let at = record::slot(self.schema, property);
        let count = record::read_u64(self.record_by_id(owner.id)?, at)?;
        let next = count
            .checked_add_signed(delta)
            .ok_or_else(|| DataError::Corrupt(format!("entry count {count} {delta:+}")))?;
        // Touched as a collection by the caller (`touch_entry`): no query reads the count.
        self.swap_u64(owner.id, at, next)?;
        Ok(())
    }

    /// Adds an entry with a default node; fails if the key exists.
    pub fn add_entry(&mut self, owner: NodeRef, property: PropertyId, key: EntryKey<'_>) -> Result<NodeRef> {
        let raw = key.bytes();
        if raw.len() > MAX_KEY_BYTES {
            return Err(DataError::KeyTooLong { len: raw.len(), max: MAX_KEY_BYTES });
        }
        let ty = self.graph().entry_type(property);
        if self.graph().find_entry(owner, property, key)?.is_some() {
            let g = self.graph();
            return Err(DataError::KeyExists {
                collection: g.collection_path(owner, property),
                key: g.shown_key(property, key),
            });
        }
        // A dictionary key is a text slot of the entry; a matrix key the target's id.
        let key_slot = match key {
            EntryKey::Text(t) => match record::inline_key(t.as_bytes()) {
                Some(inline) => inline,
                None => self.acquire(t)?,
            },
            EntryKey::Target(target) => target.get(),
        };
        let id = self.create_node(ty, owner.id, property, key_slot)?;
        self.txn.index_put(keys::entries_index(property), owner.id.row(), &raw, id.row()).map_err(storage)?;
        let mut target_id = NodeId::NONE;
        if let EntryKey::Target(target) = key {
            self.put_link(target, id, property, owner.id)?;
            self.touch_link(target, property);
            target_id = target;
        }
        self.bump_count(owner, property, 1)?;
        self.touch_entry(owner.id, property, target_id);
        if self.schema.is_aggregated(Over::Collection(property)) {
            let rec = self.load(id)?;
            self.member(owner.id, Over::Collection(property), &rec, true)?;
        }
        let entry = NodeRef { id, ty };
        if self.count_change() {
            let change = Change::EntryAdded {
                node: self.path(owner)?,
                collection: self.schema.property(property).name.clone(),
                key: self.graph().entry_key(entry)?,
            };
            self.changes.push(change);
        }
        Ok(entry)
    }

    /// Removes an entry and everything under it; fails if it is missing or if anything outside
    /// it refers to it or to anything under it.
    pub fn remove_entry(&mut self, owner: NodeRef, property: PropertyId, key: EntryKey<'_>) -> Result<()> {
        let Some(entry) = self.graph().find_entry(owner, property, key)? else {
            let g = self.graph();
            return Err(DataError::KeyMissing {
                collection: g.collection_path(owner, property),
                key: g.shown_key(property, key),
            });
        };
        // Named before the entry goes.
        let named = if self.count_change() { Some((self.graph().entry_key(entry)?, self.path(owner)?)) } else { None };
        let aggregated = self.schema.is_aggregated(Over::Collection(property));
        let rec = if aggregated { Some(self.load(entry.id)?) } else { None };
        self.delete_subtree(entry, entry.id)?;
        self.bump_count(owner, property, -1)?;
        self.touch_entry(owner.id, property, if let EntryKey::Target(t) = key { t } else { NodeId::NONE });
        if let Some(rec) = rec {
            self.member(owner.id, Over::Collection(property), &rec, false)?;
        }
        if let Some((key, node)) = named {
            self.changes.push(Change::EntryRemoved {
                node,
                collection: self.schema.property(property).name.clone(),
                key,
            });
        }
        Ok(())
    }

    /// Switches a stategroup to `state` with a default node; fails if it is in that state
    /// already or if anything refers into the node of the state it leaves.
    pub fn switch_state(&mut self, node: NodeRef, property: PropertyId, state: StateIndex) -> Result<NodeRef> {
        let (current, current_node) = self.view(node)?.state(property)?;
        let g = self.graph();
        let name = |i| g.state_name(property, i).to_string();
        if current == state {
            return Err(DataError::AlreadyInState {
                node: g.describe(node),
                stategroup: self.schema.property(property).name.clone(),
                state: name(state),
            });
        }
        let (old_name, new_name) = (name(current), name(state));
        if current_node.id.is_some() {
            self.delete_subtree(current_node, current_node.id)?;
        }
        let PropertyKind::StateGroup { states } = &self.schema.property(property).kind else {
            panic!("property {property} is not a stategroup");
        };
        let ty = states[state as usize].node;
        let child = self.create_node(ty, node.id, property, 0)?;
        let mut rec = self.load(node.id)?;
        let at = record::slot(self.schema, property);
        record::write_u64(&mut rec, at, u64::from(state))?;
        record::write_id(&mut rec, at + 8, child)?;
        self.store(node.id, property, &rec)?;
        self.index_move(property, node.id, IndexValue::State(current), IndexValue::State(state))?;
        if self.count_change() {
            let path = self.path(node)?;
            self.changes.push(Change::StateSwitched {
                node: path,
                stategroup: self.schema.property(property).name.clone(),
                old: old_name,
                new: new_name,
            });
        }
        Ok(NodeRef { id: child, ty })
    }

    /// Is record `source` inside the subtree rooted at record `boundary`?
    fn is_within(&self, source: NodeId, boundary: NodeId) -> Result<bool> {
        let g = self.graph();
        let mut at = source;
        for _ in 0..MAX_DEPTH {
            if at == boundary {
                return Ok(true);
            }
            if at.is_none() || at == ROOT_ID {
                return Ok(false);
            }
            at = g.header(at)?.parent;
        }
        Err(DataError::Corrupt(format!("ancestry of record {source} deeper than {MAX_DEPTH}")))
    }

    /// Deletes record `node` and all below it, releasing strings and links. Fails (leaving a
    /// partial deletion for the caller's savepoint to undo) if something outside `boundary`
    /// refers to any of it.
    fn delete_subtree(&mut self, node: NodeRef, boundary: NodeId) -> Result<()> {
        assert!(node.id.is_some(), "delete of a node without record");
        let incoming: Vec<(NodeId, PropertyId)> = self.graph().links_to(node.id)?.collect::<Result<_>>()?;
        for (source, property) in incoming {
            if !self.is_within(source, boundary)? {
                self.defer(node, source, property)?;
            }
        }
        let rec = self.load(node.id)?;
        if let ParentLink::DictionaryEntry { property } | ParentLink::MatrixEntry { property } =
            self.schema.node_type(node.ty).parent
        {
            // Before the slots are released: a text's bytes are still in the strings table.
            self.index_remove(property, node.id, &rec)?;
        }
        self.release_slots(&rec, node.id, node.ty, boundary)?;
        match self.schema.node_type(node.ty).parent {
            ParentLink::MatrixEntry { property } => {
                let target = record::matrix_target(self.schema, node.ty, &rec)?;
                self.delete_link(target, node.id, property)?;
                self.touch_link(target, property);
                let owner = record::parent(self.schema, node.ty, &rec)?.row();
                self.txn
                    .index_remove(keys::entries_index(property), owner, &keys::target_key(target))
                    .map_err(storage)?;
            }
            ParentLink::DictionaryEntry { property } => {
                let owner = record::parent(self.schema, node.ty, &rec)?.row();
                let key = record::dictionary_key(self.schema, node.ty, &rec)?;
                let bytes = self.graph().key_bytes(key)?.to_vec();
                self.txn.index_remove(keys::entries_index(property), owner, &bytes).map_err(storage)?;
                if let record::DictionaryKey::String(key_id) = key {
                    self.release(key_id)?;
                }
            }
            _ => {}
        }
        self.txn.free(node.id.table(), node.id.row()).map_err(storage)?;
        self.touch(node.id);
        Ok(())
    }

    /// Notes that `source` still refers to `target`, which is being removed: the request may
    /// still remove or re-point `source`; [`WriteGraph::check_references`] fails if not.
    fn defer(&mut self, target: NodeRef, source: NodeId, property: PropertyId) -> Result<()> {
        if self.deferred.len() >= MAX_DEFERRED {
            return Err(DataError::Limit(format!(
                "one request may remove at most {MAX_DEFERRED} nodes that are still referred to when removed"
            )));
        }
        let g = self.graph();
        let key = match &self.schema.property(property).kind {
            PropertyKind::Reference { target: path } => Some(g.target_key(target.id, path)?),
            _ => None,
        };
        let shown = g.describe(target);
        self.deferred.push(Deferred { target: target.id, source, property, shown, key, member: self.member });
        Ok(())
    }

    /// Numbers the member of a transaction about to run, for the errors of
    /// [`WriteGraph::check_references`]. Outside transactions it stays 0.
    pub fn begin_member(&mut self, member: usize) {
        self.member = member;
    }

    /// Fails if a node this request removed is still referred to: integrity is checked when
    /// the whole request is done, so the order of a transaction's members does not matter.
    /// The error names the first such link in the order the removals happened.
    pub fn check_references(&mut self) -> Result<(), MemberError> {
        let deferred = std::mem::take(&mut self.deferred);
        self.member = 0;
        let g = self.graph();
        for d in deferred {
            let member = d.member;
            let fail = |error: DataError| MemberError { member, error };
            if g.has_link(d.target, d.source, d.property).map_err(fail)? {
                let referrer = g.declaring_node(d.source, d.property).map_err(fail)?;
                return Err(fail(DataError::Referenced {
                    target: d.shown,
                    referrer: g.describe(referrer),
                    property: self.schema.property(d.property).name.clone(),
                }));
            }
        }
        Ok(())
    }

    /// Everything checked when a request ends: references into removed nodes
    /// ([`WriteGraph::check_references`]), then unique indexes ([`WriteGraph::check_unique`]).
    /// The write queue calls it before it keeps a request's changes; on failure the request is
    /// rolled back.
    pub fn check_end(&mut self) -> Result<()> {
        self.check_references().map_err(|e| e.error)?;
        self.check_unique()
    }

    /// Whether reference target `target` (0: unset) is still there: it may have been removed
    /// earlier in this request, its links left for `check_references` at the end. Without
    /// deferred links nothing was removed under a reference, so nothing is read.
    pub(crate) fn target_alive(&self, target: NodeId) -> Result<bool> {
        Ok(target.is_some() && (self.deferred.is_empty() || self.graph().exists(target)?))
    }

    /// The key a deferred link of `source` to removed `target` recorded (see [`Deferred`]).
    fn removed_target_key(&self, target: NodeId, source: NodeId, property: PropertyId) -> Option<Vec<String>> {
        self.deferred
            .iter()
            .rev()
            .find(|d| d.target == target && d.source == source && d.property == property)
            .and_then(|d| d.key.clone())
    }

    /// Releases what the slots of logical node `logical` (in record `rec`) hold.
    fn release_slots(&mut self, rec: &[u8], id: NodeId, logical: NodeTypeId, boundary: NodeId) -> Result<()> {
        let schema = self.schema;
        for &p in &schema.node_type(logical).properties {
            let at = record::slot(schema, p);
            match &schema.property(p).kind {
                PropertyKind::Number => {}
                PropertyKind::Text => self.release(record::read_u64(rec, at)?)?,
                PropertyKind::Reference { .. } => {
                    let target = record::read_id(rec, at)?;
                    if target.is_some() {
                        self.delete_link(target, id, p)?;
                        self.touch_link(target, p);
                        // A target inside the subtree being deleted may be gone already.
                        let aggregated = self.schema.is_aggregated(Over::Referrers(p));
                        if aggregated && self.graph().exists(target)? {
                            self.member(target, Over::Referrers(p), rec, false)?;
                        }
                    }
                }
                PropertyKind::Group { node } => self.release_slots(rec, id, *node, boundary)?,
                PropertyKind::StateGroup { states } => {
                    let index = record::read_u64(rec, at)? as usize;
                    let child = record::read_id(rec, at + 8)?;
                    if child.is_some() {
                        let ty = states
                            .get(index)
                            .map(|s| s.node)
                            .ok_or_else(|| DataError::Corrupt("state index".into()))?;
                        self.delete_subtree(NodeRef { id: child, ty }, boundary)?;
                    }
                }
                PropertyKind::Dictionary { .. } | PropertyKind::Matrix { .. } => {
                    let owner = NodeRef { id, ty: logical };
                    let entries: Vec<NodeRef> =
                        self.graph().entries(owner, p)?.map(|e| e.map(|(_, n)| n)).collect::<Result<_>>()?;
                    for entry in entries {
                        self.delete_subtree(entry, boundary)?;
                    }
                }
            }
        }
        Ok(())
    }

    // ---- indexes (see crate::index) ----

    fn index_put(&mut self, n: u32, unique: bool, value: IndexValue<'_>, entry: NodeId) -> Result<()> {
        let key = index::row(value, entry);
        let ki = keys::schema_index(self.schema, n);
        self.txn.index_put(ki, 0, &key, entry.row()).map_err(storage)?;
        self.note_unique(n, unique, value);
        Ok(())
    }

    /// Remembers that unique index `n` got `value`, for [`WriteGraph::check_unique`].
    fn note_unique(&mut self, n: u32, unique: bool, value: IndexValue<'_>) {
        if unique && !self.unique_overflow {
            if self.unique_pending.len() >= MAX_UNIQUE_PENDING {
                self.unique_pending.clear();
                self.unique_overflow = true;
            } else {
                self.unique_pending.insert((n, index::value_prefix(value)));
            }
        }
    }

    fn index_delete(&mut self, n: u32, value: IndexValue<'_>, entry: NodeId) -> Result<()> {
        let ki = keys::schema_index(self.schema, n);
        if self.txn.index_remove(ki, 0, &index::row(value, entry)).map_err(storage)?.is_none() {
            return Err(missing_index_row(n, entry, value));
        }
        Ok(())
    }

    /// A new entry of `collection` (record `rec`) enters its indexes with its defaults.
    fn index_defaults(&mut self, collection: PropertyId, entry: NodeId, rec: &[u8]) -> Result<()> {
        let schema = self.schema;
        for (n, decl) in schema.indexes_of_collection(collection) {
            let value = index::value_in(schema, &*self.txn, decl, rec)?;
            self.index_put(n, decl.unique, value.as_value(), entry)?;
        }
        Ok(())
    }

    /// `property` of entry record `entry` changed from `old` to `new`.
    fn index_move(
        &mut self,
        property: PropertyId,
        entry: NodeId,
        old: IndexValue<'_>,
        new: IndexValue<'_>,
    ) -> Result<()> {
        let schema = self.schema;
        for (n, decl) in schema.indexes_of_property(property) {
            // One storage call: a small change of value moves the entry within its leaf.
            let ki = keys::schema_index(schema, n);
            let (from, to) = (index::row(old, entry), index::row(new, entry));
            if self.txn.index_move(ki, 0, &from, &to, entry.row()).map_err(storage)?.is_none() {
                return Err(missing_index_row(n, entry, old));
            }
            self.note_unique(n, decl.unique, new);
        }
        Ok(())
    }

    /// Entry record `entry` (record `rec`) of `collection` is being deleted.
    fn index_remove(&mut self, collection: PropertyId, entry: NodeId, rec: &[u8]) -> Result<()> {
        let schema = self.schema;
        for (n, decl) in schema.indexes_of_collection(collection) {
            let value = index::value_in(schema, &*self.txn, decl, rec)?;
            self.index_delete(n, value.as_value(), entry)?;
        }
        Ok(())
    }

    /// Fails if a unique index holds one value twice among the values this request wrote.
    /// Called when a request's writes are done (the engine does, and so does the write queue
    /// before it keeps a request's changes); on failure the caller rolls the request back.
    pub fn check_unique(&mut self) -> Result<()> {
        if self.unique_overflow {
            self.unique_overflow = false;
            self.unique_pending.clear();
            let schema = self.schema;
            for (n, decl) in schema.indexes.iter().enumerate() {
                if decl.unique {
                    self.check_unique_whole(n as u32)?;
                }
            }
            return Ok(());
        }
        let pending = std::mem::take(&mut self.unique_pending);
        for (n, prefix) in pending {
            let ids = index::rows_with_prefix(self.schema, &*self.txn, n, &prefix)?;
            self.check_unique_group(n, &prefix, &ids)?;
        }
        Ok(())
    }

    /// Every group of equal keys in unique index `n`.
    fn check_unique_whole(&self, n: u32) -> Result<()> {
        let mut group: Vec<u8> = Vec::new();
        let mut ids = Vec::new();
        for (k, id) in index::all_rows(self.schema, &*self.txn, n)? {
            let value = &k[..k.len().saturating_sub(index::ROW_BYTES)];
            if value != group.as_slice() {
                self.check_unique_group(n, &group, &ids)?;
                group = value.to_vec();
                ids.clear();
            }
            ids.push(id);
        }
        self.check_unique_group(n, &group, &ids)
    }

    /// `ids` share the index key `prefix`; for a cut text (see [`index`]) the texts decide.
    fn check_unique_group(&self, n: u32, prefix: &[u8], ids: &[NodeId]) -> Result<()> {
        if ids.len() < 2 {
            return Ok(());
        }
        let decl = &self.schema.indexes[n as usize];
        let g = self.graph();
        let cut = prefix.ends_with(&[0, 1]) && matches!(self.schema.property(decl.property).kind, PropertyKind::Text);
        let mut seen: Vec<(OwnedValue, NodeId)> = Vec::with_capacity(ids.len());
        for &id in ids {
            let value = index::value_in(self.schema, &*self.txn, decl, g.record(id)?)?;
            let twin = if cut {
                seen.iter().find(|(v, _)| *v == value).map(|&(_, t)| t)
            } else {
                seen.first().map(|&(_, t)| t)
            };
            if let Some(first) = twin {
                let ty = g.entry_type(decl.collection);
                let shown = match &value {
                    OwnedValue::Number(v) => v.to_string(),
                    OwnedValue::Text(t) => format!("{t:?}"),
                    OwnedValue::State(s) => format!("'{}'", g.state_name(decl.property, *s)),
                };
                return Err(DataError::NotUnique(Box::new(crate::error::UniqueViolation {
                    index: decl.name.clone(),
                    property: self.schema.property(decl.property).name.clone(),
                    value: shown,
                    first: g.describe(NodeRef { id: first, ty }),
                    second: g.describe(NodeRef { id, ty }),
                })));
            }
            seen.push((value, id));
        }
        Ok(())
    }

    /// The first reference in `node` (through groups and states, not collections) that was
    /// never set — a new node must have all of them set before its instruction ends.
    pub fn unset_reference(&self, node: NodeRef) -> Result<Option<(NodeRef, PropertyId)>> {
        if node.id.is_none() {
            return Ok(None);
        }
        self.unset_reference_in(self.view(node)?)
    }

    /// [`WriteGraph::unset_reference`] in a record already read (a group shares it).
    fn unset_reference_in(&self, view: NodeView<'_>) -> Result<Option<(NodeRef, PropertyId)>> {
        for &p in &self.schema.node_type(view.node.ty).properties {
            match &self.schema.property(p).kind {
                PropertyKind::Reference { .. } if view.reference(p)?.is_none() => return Ok(Some((view.node, p))),
                PropertyKind::Group { .. } => {
                    if let Some(found) = self.unset_reference_in(view.group(p))? {
                        return Ok(Some(found));
                    }
                }
                PropertyKind::StateGroup { .. } => {
                    let (_, state) = view.state(p)?;
                    if let Some(found) = self.unset_reference(state)? {
                        return Ok(Some(found));
                    }
                }
                _ => {}
            }
        }
        Ok(None)
    }

    /// `unset_reference` as an error.
    pub fn require_references(&self, node: NodeRef) -> Result<()> {
        match self.unset_reference(node)? {
            None => Ok(()),
            Some((at, p)) => Err(DataError::ReferenceUnset {
                node: self.graph().describe(at),
                property: self.schema.property(p).name.clone(),
            }),
        }
    }
}
