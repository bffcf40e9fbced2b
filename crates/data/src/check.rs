//! `check`: verifies that the stored graph is consistent — the records form one tree under
//! the root that agrees with the schema, and every derived structure (entry counts, the
//! collections' key indexes, the reverse-link key indexes, the schema indexes and the string
//! counts) matches the data.
//!
//! Derived properties are computed again from scratch and compared with their stored values.
//!
//! Two passes: a walk from the root that checks every slot, then a scan of every table and key
//! index that checks each row stands for something the walk reached. Both directions use point lookups,
//! so memory is bounded by one map of string id → (count, first holder) (about 40 bytes per
//! distinct stored string), the recursion depth of the schema, and at most [`MAX_PROBLEMS`]
//! problem sentences.

use std::collections::HashMap;

use espalier_schema::{NodeTypeId, ParentLink, PropertyId, PropertyKind, Storage};
use espalier_storage::key_index::KeyIndex;
use xxhash_rust::xxh3::xxh3_64;

use crate::graph::Graph;
use crate::keys::{self, meta};
use crate::record::{self, Header, NodeId, NodeRef, ROOT_ID};
use crate::{DataError, Result};

/// Problems described in a report; the rest are only counted.
pub const MAX_PROBLEMS: usize = 1000;
/// Progress is reported every this many records or table rows.
pub const PROGRESS_EVERY: u64 = 10_000;
const MAX_DEPTH: usize = 1024;

/// What `check` saw. The database is consistent when `problems` is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Rows of the tables (records).
    pub records: u64,
    /// Keys of the collections' key indexes (entries).
    pub entries: u64,
    /// Keys of the reverse-link key indexes.
    pub links: u64,
    /// Stored strings.
    pub strings: u64,
    /// Keys of the schema indexes.
    pub index_rows: u64,
    /// One sentence per problem, naming the node path where there is one.
    pub problems: Vec<String>,
}

impl CheckReport {
    /// True when the check found no problem.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

struct Checker<'g, 'p> {
    g: Graph<'g>,
    progress: &'p mut dyn FnMut(u64),
    done: u64,
    problems: Vec<String>,
    more_problems: u64,
    /// Records the walk reached (each through the one slot its header names).
    reached: u64,
    /// Entries rows the walk found consistent.
    entries_reached: u64,
    /// Reference slots and matrix entries the walk found with their Links row.
    links_reached: u64,
    /// Index rows the walk found for the entries of indexed collections.
    index_rows_reached: u64,
    /// string id → (text slots holding it, first holder).
    strings: HashMap<u64, (u64, NodeRef, PropertyId)>,
    /// Some record has an unreadable header or unknown type.
    damaged: bool,
    report: CheckReport,
}

/// Checks the whole graph in `graph`'s snapshot. Returns `Err` only when storage fails;
/// inconsistencies are listed in the report. `progress` is called with the number of records
/// and table rows checked so far every [`PROGRESS_EVERY`].
pub fn check(graph: &Graph, progress: &mut dyn FnMut(u64)) -> Result<CheckReport> {
    let mut c = Checker {
        g: *graph,
        progress,
        done: 0,
        problems: Vec::new(),
        more_problems: 0,
        reached: 0,
        entries_reached: 0,
        links_reached: 0,
        index_rows_reached: 0,
        strings: HashMap::new(),
        damaged: false,
        report: CheckReport::default(),
    };
    // Nodes first: it finds records of unknown types, which the graph's path and key walks
    // cannot read; when there are any, messages name records by id instead of by path.
    let attached = c.scan_nodes()?;
    c.walk_root()?;
    if attached != c.reached {
        c.problem(format!(
            "{attached} records hang under the root by their headers but the walk from the root reached {}",
            c.reached
        ));
    }
    c.scan_entries()?;
    c.scan_links()?;
    c.scan_indexes()?;
    c.scan_strings()?;
    c.check_meta()?;
    let mut report = std::mem::take(&mut c.report);
    report.problems = std::mem::take(&mut c.problems);
    if c.more_problems > 0 {
        report.problems.push(format!("… and {} more problems", c.more_problems));
    }
    Ok(report)
}

/// Splits an error into storage failure (returned) and anything else (a problem).
fn soft<T>(r: Result<T>) -> Result<std::result::Result<T, String>> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(DataError::Tables(e)) => Err(DataError::Tables(e)),
        Err(DataError::Corrupt(m)) => Ok(Err(m)),
        Err(e) => Ok(Err(e.to_string())),
    }
}

fn show_key(raw: &[u8]) -> String {
    match std::str::from_utf8(raw) {
        Ok(s) => serde_json::Value::from(s).to_string(),
        Err(_) => format!("{raw:?}"),
    }
}

fn show_compound(key: &[String]) -> String {
    match key {
        [one] => serde_json::Value::from(one.as_str()).to_string(),
        many => serde_json::Value::from(many.to_vec()).to_string(),
    }
}

impl<'g> Checker<'g, '_> {
    fn problem(&mut self, sentence: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(sentence);
        } else {
            self.more_problems += 1;
        }
    }

    fn tick(&mut self) {
        self.done += 1;
        if self.done == self.done / PROGRESS_EVERY * PROGRESS_EVERY {
            (self.progress)(self.done);
        }
    }

    fn describe(&self, node: NodeRef) -> String {
        describe(self.g, self.damaged, node)
    }

    fn place(&self, node: NodeRef, p: PropertyId) -> String {
        format!("{}, property '{}'", self.describe(node), self.g.schema.property(p).name)
    }

    fn valid_type(&self, ty: NodeTypeId) -> bool {
        ty.index() < self.g.schema.types.len()
    }

    // --- walk ---------------------------------------------------------------------------------

    fn walk_root(&mut self) -> Result<()> {
        let Some(rec) = self.g.find_record(ROOT_ID)? else {
            self.problem("the root record (1) is missing".into());
            return Ok(());
        };
        match record::parent_row(rec) {
            Ok(0) => {}
            Ok(row) => {
                self.problem(format!("the root record's header names parent row {row}, expected 0"));
                return Ok(());
            }
            Err(e) => {
                self.problem(format!("the root record is unreadable: {e}"));
                return Ok(());
            }
        }
        self.record(NodeRef::ROOT, rec, None, &|| "root".into())
    }

    /// Checks a record reached through a slot whose header fields were already verified,
    /// then its slots. `key` is the entry key its collection's key index has, for entries.
    fn record(&mut self, node: NodeRef, rec: &[u8], key: Option<&[u8]>, place: &dyn Fn() -> String) -> Result<()> {
        let width = record::row_width(self.g.schema, node.ty);
        if rec.len() != width {
            self.problem(format!(
                "{}: record {} is {} bytes, but its type's rows are {width}",
                place(),
                node.id,
                rec.len()
            ));
            return Ok(());
        }
        if let Some(want) = key {
            match self.stored_key(node, rec) {
                Ok(k) if k == want => {}
                Ok(k) => {
                    self.problem(format!(
                        "{}: record {} stores key {} but its collection's key index has key {}",
                        place(),
                        node.id,
                        show_key(&k),
                        show_key(want)
                    ));
                    return Ok(());
                }
                Err(m) => {
                    self.problem(format!("{}: record {}: {m}", place(), node.id));
                    return Ok(());
                }
            }
        }
        self.reached += 1;
        self.tick();
        self.slots(node, rec)
    }

    /// The key entry `node` (record `rec`) stores, as its collection's key index orders it: a
    /// dictionary key's text (a string is counted as held), a matrix key's target row.
    fn stored_key(&mut self, node: NodeRef, rec: &[u8]) -> std::result::Result<Vec<u8>, String> {
        if let ParentLink::DictionaryEntry { property } = self.g.schema.node_type(node.ty).parent {
            if let Ok(record::DictionaryKey::String(id)) = record::dictionary_key(self.g.schema, node.ty, rec) {
                if id != 0 {
                    self.strings.entry(id).or_insert((0, node, property)).0 += 1;
                }
            }
        }
        self.key_of(node.ty, rec)
    }

    /// The key bytes (as the collection's key index orders them) of `rec`, an entry of type
    /// `ty`: a dictionary key's text (inline, or a string that must be stored), a matrix key's
    /// target row; else why not. Counts nothing.
    fn key_of(&self, ty: NodeTypeId, rec: &[u8]) -> std::result::Result<Vec<u8>, String> {
        let schema = self.g.schema;
        match schema.node_type(ty).parent {
            ParentLink::DictionaryEntry { .. } => match record::dictionary_key(schema, ty, rec) {
                Ok(record::DictionaryKey::Inline(key)) => Ok(key.to_vec()),
                Ok(record::DictionaryKey::String(id)) => self
                    .g
                    .txn
                    .string(id)
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| format!("its key is string {id}, which is not stored")),
                Err(e) => Err(e.to_string()),
            },
            _ => {
                record::matrix_target(schema, ty, rec).map(|t| keys::target_key(t).to_vec()).map_err(|e| e.to_string())
            }
        }
    }

    /// Whether the reverse-link key index of `p` has the link `source → target` with `value`
    /// (the source for a reference, the matrix entry's owner for a matrix).
    fn has_link(&self, target: NodeId, source: NodeId, p: PropertyId, value: NodeId) -> bool {
        self.g.txn.index(keys::links_index(self.g.schema, p)).and_then(|i| i.get(target.row(), &keys::link_key(source)))
            == Some(value.row())
    }

    /// Checks the slots of logical node `node` (stored in `rec`, the record `node.id`).
    fn slots(&mut self, node: NodeRef, rec: &[u8]) -> Result<()> {
        let schema = self.g.schema;
        for &p in &schema.node_type(node.ty).properties {
            let at = record::slot(schema, p);
            let value = match record::read_u64(rec, at) {
                Ok(v) => v,
                Err(e) => {
                    self.problem(format!("{}: {e}", self.place(node, p)));
                    continue;
                }
            };
            if schema.property(p).derived.is_some() {
                match soft(self.g.derived_value(node.id, p))? {
                    Ok(fresh) if fresh == value as i64 => {}
                    Ok(fresh) => self.problem(format!(
                        "{}: the derived value is {} but computed from the data it is {fresh}",
                        self.place(node, p),
                        value as i64
                    )),
                    Err(m) => self.problem(format!("{}: {m}", self.place(node, p))),
                }
            }
            match &schema.property(p).kind {
                PropertyKind::Number => {}
                PropertyKind::Text => {
                    if value != 0 {
                        self.strings.entry(value).or_insert((0, node, p)).0 += 1;
                    }
                }
                PropertyKind::Group { node: ty } => self.slots(NodeRef { id: node.id, ty: *ty }, rec)?,
                PropertyKind::Reference { target } => {
                    if value == 0 {
                        self.problem(format!("{}: the reference is not set", self.place(node, p)));
                        continue;
                    }
                    let value = NodeId::from_u64(value);
                    if self.link_target(node, p, value, target)? {
                        if self.has_link(value, node.id, p, node.id) {
                            self.links_reached += 1;
                        } else {
                            self.problem(format!(
                                "{}: the reference points to {} but the reverse-link index (Links) has no row for it",
                                self.place(node, p),
                                self.describe(NodeRef { id: value, ty: target.entry_type })
                            ));
                        }
                    }
                }
                PropertyKind::StateGroup { states } => {
                    let Some(state) = states.get(value as usize) else {
                        self.problem(format!(
                            "{}: state index {value} is out of range ({} states)",
                            self.place(node, p),
                            states.len()
                        ));
                        continue;
                    };
                    let child = match record::read_u64(rec, at + 8) {
                        Ok(v) => v,
                        Err(e) => {
                            self.problem(format!("{}: {e}", self.place(node, p)));
                            continue;
                        }
                    };
                    let empty = schema.node_type(state.node).storage == Storage::Empty;
                    match (empty, child) {
                        (true, 0) => {}
                        (true, id) => self.problem(format!(
                            "{}: state '{}' has no properties but the slot names record {id}",
                            self.place(node, p),
                            state.name
                        )),
                        (false, 0) => self.problem(format!(
                            "{}: state '{}' has properties but the slot names no record",
                            self.place(node, p),
                            state.name
                        )),
                        (false, id) => {
                            let (g, damaged) = (self.g, self.damaged);
                            let place = || {
                                format!(
                                    "{} ? '{}' * '{}'",
                                    describe(g, damaged, node),
                                    schema.property(p).name,
                                    state.name
                                )
                            };
                            self.child(NodeRef { id: NodeId::from_u64(id), ty: state.node }, node.id, p, None, &place)?;
                        }
                    }
                }
                PropertyKind::Dictionary { .. } | PropertyKind::Matrix { .. } => {
                    self.collection(node, p, value)?;
                }
            }
        }
        Ok(())
    }

    /// Reaches record `node` from the slot (`parent`, `property`): checks its header and goes in.
    fn child(
        &mut self,
        node: NodeRef,
        parent: NodeId,
        property: PropertyId,
        key: Option<&[u8]>,
        place: &dyn Fn() -> String,
    ) -> Result<()> {
        let Some(rec) = self.g.find_record(node.id)? else {
            self.problem(format!("{}: record {} is missing", place(), node.id));
            return Ok(());
        };
        let want = Header { ty: node.ty, parent_property: property, parent };
        match record::header(self.g.schema, node.id.node_type(), rec) {
            Ok(h) if h == want => self.record(node, rec, key, place),
            Ok(h) => {
                self.problem(format!(
                    "{}: record {}'s header names parent record {}, expected {}",
                    place(),
                    node.id,
                    h.parent,
                    want.parent
                ));
                Ok(())
            }
            Err(e) => {
                self.problem(format!("{}: {e}", place()));
                Ok(())
            }
        }
    }

    /// Checks that `target_id` is an entry of the reference target's dictionary and that its
    /// key resolves back to it from `from`. True when it does.
    fn link_target(
        &mut self,
        from: NodeRef,
        p: PropertyId,
        target_id: NodeId,
        target: &espalier_schema::ReferenceTarget,
    ) -> Result<bool> {
        let schema = self.g.schema;
        if self.g.find_record(target_id)?.is_none() {
            self.problem(format!("{}: points to record {target_id}, which does not exist", self.place(from, p)));
            return Ok(false);
        }
        if target_id.node_type() != target.entry_type {
            self.problem(format!(
                "{}: points to record {target_id}, which is not an entry of '{}'",
                self.place(from, p),
                schema.property(target.dictionary).name
            ));
            return Ok(false);
        }
        if self.damaged {
            if let Err(why) = self.attachment(target_id)? {
                self.problem(format!("{}: points to record {target_id}, which is damaged: {why}", self.place(from, p)));
                return Ok(false);
            }
        }
        let key = match soft(self.g.target_key(target_id, target))? {
            Ok(k) => k,
            Err(m) => {
                self.problem(format!("{}: the key of its target {target_id} cannot be read: {m}", self.place(from, p)));
                return Ok(false);
            }
        };
        match soft(self.g.resolve(from, target, &key))? {
            Ok(t) if t.id == target_id => Ok(true),
            Ok(t) => {
                self.problem(format!(
                    "{}: points to record {target_id}, but its key {} leads to record {} from here",
                    self.place(from, p),
                    show_compound(&key),
                    t.id
                ));
                Ok(false)
            }
            Err(m) => {
                self.problem(format!(
                    "{}: points to record {target_id}, but its key {} does not resolve from here: {m}",
                    self.place(from, p),
                    show_compound(&key)
                ));
                Ok(false)
            }
        }
    }

    fn collection(&mut self, owner: NodeRef, p: PropertyId, count: u64) -> Result<()> {
        let schema = self.g.schema;
        let (entry_ty, matrix) = match &schema.property(p).kind {
            PropertyKind::Dictionary { node } => (*node, None),
            PropertyKind::Matrix { node, target } => (*node, Some(target)),
            _ => unreachable!("called for collections"),
        };
        let mut rows = 0u64;
        let entries: Vec<(Vec<u8>, u32)> = match self.g.txn.index(keys::entries_index(p)) {
            Some(index) => index.entries(owner.id.row()).map(|e| (e.key.to_vec(), e.row)).collect(),
            None => {
                self.problem(format!("{}: the collection has no key index", self.place(owner, p)));
                return Ok(());
            }
        };
        for (key, row) in entries {
            let key = &key[..];
            rows += 1;
            let id = NodeId::new(entry_ty, row);
            let entry = NodeRef { id, ty: entry_ty };
            if let Some(target) = matrix {
                let Ok(target_id) = self.g.matrix_target_of(p, key) else {
                    self.problem(format!("{}: a matrix key has {} bytes", self.place(owner, p), key.len()));
                    continue;
                };
                // A matrix key is resolved from the node that declares the matrix.
                if self.link_target(owner, p, target_id, target)? {
                    if self.has_link(target_id, id, p, owner.id) {
                        self.links_reached += 1;
                    } else {
                        self.problem(format!(
                            "{}: the reverse-link index (Links) has no row for this matrix entry",
                            self.describe(entry)
                        ));
                    }
                }
            }
            if let Some(rec) = self.g.find_record(id)? {
                self.entry_indexes(entry, p, rec)?;
            }
            let before = self.reached;
            let (g, damaged) = (self.g, self.damaged);
            let place = || format!("{} entry {}", collection_name(g, damaged, owner, p), show_key(key));
            self.child(entry, owner.id, p, Some(key), &place)?;
            if self.reached > before {
                self.entries_reached += 1;
            }
        }
        if rows != count {
            self.problem(format!(
                "{}: the entry count says {count} but there are {rows} entries",
                collection_name(self.g, self.damaged, owner, p)
            ));
        }
        Ok(())
    }

    // --- table scans --------------------------------------------------------------------------

    /// Every record must hang under the root through slots that point back at it.
    /// Returns how many records hang under the root through their headers.
    fn scan_nodes(&mut self) -> Result<u64> {
        let mut attached = 0u64;
        for t in (0..self.g.schema.types.len() as u32).map(NodeTypeId::new) {
            let Some(table) = self.g.txn.table(t.get()) else { continue };
            if record::row_width(self.g.schema, t) == 0 {
                if !table.is_empty() {
                    self.problem(format!("the table of node type {t} has rows, but the type has no records"));
                }
                continue;
            }
            for (row, rec) in table.rows() {
                let id = NodeId::new(t, row);
                self.report.records += 1;
                self.tick();
                if record::parent_row(rec).is_err() {
                    self.damaged = true;
                }
                match self.attachment(id)? {
                    Ok(()) => attached += 1,
                    Err(why) => self.problem(format!("record {id} is not reachable from the root: {why}")),
                }
            }
        }
        Ok(attached)
    }

    /// Follows record `id`'s parents to the root, checking each parent's slot points back.
    fn attachment(&self, id: NodeId) -> Result<std::result::Result<(), String>> {
        let schema = self.g.schema;
        let mut at = id;
        for _ in 0..MAX_DEPTH {
            let Some(rec) = self.g.find_record(at)? else {
                return Ok(Err(self.missing(at)?));
            };
            // A record's type is its table's; its header holds only the parent's row.
            if !self.valid_type(at.node_type()) {
                return Ok(Err(format!("record {at} is in the table of unknown type {}", at.node_type())));
            }
            let h = match record::header(schema, at.node_type(), rec) {
                Ok(h) => h,
                Err(e) => return Ok(Err(e.to_string())),
            };
            let property = match schema.node_type(h.ty).parent {
                ParentLink::Root if at == ROOT_ID => return Ok(Ok(())),
                ParentLink::Root => return Ok(Err(format!("record {at} has the root's type"))),
                ParentLink::Group { .. } => return Ok(Err(format!("record {at} has the type of a group"))),
                ParentLink::DictionaryEntry { property }
                | ParentLink::MatrixEntry { property }
                | ParentLink::State { property, .. } => property,
            };
            let Some(parent) = self.g.find_record(h.parent)? else {
                return Ok(Err(format!("record {at}'s parent record {} is missing", h.parent)));
            };
            match schema.node_type(h.ty).parent {
                ParentLink::State { state, .. } => {
                    let slot = record::slot(schema, property);
                    let index = record::read_u64(parent, slot).ok();
                    let node = record::read_id(parent, slot + 8).ok();
                    if index != Some(u64::from(state)) || node != Some(at) {
                        return Ok(Err(format!(
                            "record {at} is a state node but its parent's stategroup slot does not select it"
                        )));
                    }
                }
                _ => {
                    let key = match self.key_of(h.ty, rec) {
                        Ok(key) => key,
                        Err(why) => return Ok(Err(format!("record {at}: {why}"))),
                    };
                    let row = self.g.txn.index(keys::entries_index(property)).and_then(|i| i.get(h.parent.row(), &key));
                    if row != Some(at.row()) {
                        return Ok(Err(format!(
                            "record {at} is an entry with key {} of '{}' in record {}, but that collection has no \
                             Entries row for it",
                            show_key(&key),
                            schema.property(property).name,
                            h.parent
                        )));
                    }
                }
            }
            at = h.parent;
        }
        Ok(Err(format!("its ancestry is deeper than {MAX_DEPTH}")))
    }

    /// Why record `id` cannot be read.
    fn missing(&self, id: NodeId) -> Result<String> {
        Ok(format!("its ancestor record {id} is missing"))
    }

    fn owner_name(&self, owner: NodeId, p: PropertyId) -> String {
        collection_name(self.g, self.damaged, NodeRef { id: owner, ty: self.g.schema.property(p).owner }, p)
    }

    /// Key index `index` of the snapshot (borrowed from it, not from the checker), or a
    /// problem saying it is missing.
    fn key_index(&mut self, index: u32, what: &str) -> Option<&'g KeyIndex> {
        let found = self.g.txn.index(index);
        if found.is_none() {
            self.problem(format!("the key index of {what} is missing"));
        }
        found
    }

    fn scan_entries(&mut self) -> Result<()> {
        let schema = self.g.schema;
        let mut valid = 0u64;
        for prop in &schema.properties {
            let p = prop.id;
            let entry_ty = match prop.kind {
                PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => node,
                _ => continue,
            };
            let Some(index) = self.key_index(keys::entries_index(p), &format!("collection '{}'", prop.name)) else {
                continue;
            };
            for e in index.iter() {
                self.report.entries += 1;
                self.tick();
                let owner = NodeId::new(prop.host, e.owner);
                let owner_ok = match self.g.find_record(owner)? {
                    Some(_) => owner.node_type() == prop.host,
                    None => false,
                };
                if !owner_ok {
                    self.problem(format!(
                        "an Entries row with key {} of '{}' belongs to record {owner}, which does not exist or has no \
                         such collection",
                        show_key(e.key),
                        prop.name
                    ));
                    continue;
                }
                let id = NodeId::new(entry_ty, e.row);
                let ok = match self.g.find_record(id)? {
                    Some(rec) => {
                        matches!(record::header(self.g.schema, entry_ty, rec), Ok(h) if h == Header { ty: entry_ty, parent_property: p, parent: owner })
                            && self.key_of(entry_ty, rec).ok().as_deref() == Some(e.key)
                    }
                    None => false,
                };
                if ok {
                    valid += 1;
                } else {
                    self.problem(format!(
                        "{}: the Entries row for key {} points to record {id}, which is missing or is not that entry",
                        self.owner_name(owner, p),
                        show_key(e.key)
                    ));
                }
            }
        }
        if valid != self.entries_reached {
            self.problem(format!(
                "{valid} Entries rows are consistent but the walk from the root reached {} entries",
                self.entries_reached
            ));
        }
        Ok(())
    }

    fn scan_links(&mut self) -> Result<()> {
        let schema = self.g.schema;
        let mut valid = 0u64;
        for prop in &schema.properties {
            let p = prop.id;
            let target_ty = match &prop.kind {
                PropertyKind::Reference { target } | PropertyKind::Matrix { target, .. } => target.entry_type,
                _ => continue,
            };
            let Some(index) = self.key_index(keys::links_index(schema, p), &format!("the links of '{}'", prop.name))
            else {
                continue;
            };
            for e in index.iter() {
                self.report.links += 1;
                self.tick();
                let target = NodeId::new(target_ty, e.owner);
                let source_ty = keys::source_type(schema, p);
                let Some(source) = keys::row_be(e.key).map(|r| NodeId::new(source_ty, r)) else {
                    self.problem(format!("the links of '{}' have a malformed key {:?}", prop.name, e.key));
                    continue;
                };
                let rec = self.g.find_record(source)?;
                let header = rec.and_then(|r| record::header(schema, source_ty, r).ok());
                let (ok, referrer) = match &prop.kind {
                    PropertyKind::Reference { .. } => {
                        let node = NodeRef { id: source, ty: prop.owner };
                        let ok = header.is_some_and(|h| h.ty == prop.host)
                            && e.row == source.row()
                            && rec.and_then(|r| record::read_id(r, record::slot(schema, p)).ok()) == Some(target);
                        (ok, node)
                    }
                    PropertyKind::Matrix { node: ty, .. } => {
                        let node = NodeRef { id: source, ty: *ty };
                        // The row is the entry's owner's.
                        let ok = header
                            .is_some_and(|h| h.ty == *ty && h.parent_property == p && h.parent.row() == e.row)
                            && rec.and_then(|r| record::matrix_target(schema, *ty, r).ok()) == Some(target);
                        (ok, node)
                    }
                    _ => continue,
                };
                if ok {
                    valid += 1;
                } else {
                    let what = if rec.is_some() { self.describe(referrer) } else { format!("record {source}") };
                    self.problem(format!(
                        "the reverse-link index (Links) says {what} refers to record {target} through '{}', but it does \
                         not",
                        prop.name
                    ));
                }
            }
        }
        if valid != self.links_reached {
            self.problem(format!(
                "{valid} Links rows match a reference or matrix entry but the walk from the root found {}",
                self.links_reached
            ));
        }
        Ok(())
    }

    /// Every index of collection `p` must hold entry `entry` (record `rec`) under its value.
    fn entry_indexes(&mut self, entry: NodeRef, p: PropertyId, rec: &[u8]) -> Result<()> {
        let schema = self.g.schema;
        for (n, decl) in schema.indexes_of_collection(p) {
            let value = match soft(crate::index::value_in(schema, self.g.txn, decl, rec))? {
                Ok(v) => v,
                Err(m) => {
                    self.problem(format!("{}: index '{}': {m}", self.describe(entry), decl.name));
                    continue;
                }
            };
            let key = crate::index::row(value.as_value(), entry.id);
            let index = self.g.txn.index(keys::schema_index(schema, n));
            if index.and_then(|i| i.get(0, &key)) == Some(entry.id.row()) {
                self.index_rows_reached += 1;
            } else {
                self.problem(format!(
                    "{}: index '{}' has no row for its '{}' {:?}",
                    self.describe(entry),
                    decl.name,
                    schema.property(decl.property).name,
                    value
                ));
            }
        }
        Ok(())
    }

    /// Every index row must stand for an entry the walk found under it (counted there).
    fn scan_indexes(&mut self) -> Result<()> {
        let schema = self.g.schema;
        for n in 0..schema.indexes.len() as u32 {
            let Some(index) = self.key_index(keys::schema_index(schema, n), &format!("index {n}")) else { continue };
            for e in index.iter() {
                self.report.index_rows += 1;
                self.tick();
                if e.owner != 0 || crate::index::row_entry(e.key).ok() != Some(e.row) {
                    self.problem(format!("index {n} has a malformed row {:?}", e.key));
                }
            }
        }
        if self.report.index_rows != self.index_rows_reached {
            self.problem(format!(
                "the Indexes table has {} rows but the entries of indexed collections need {}",
                self.report.index_rows, self.index_rows_reached
            ));
        }
        Ok(())
    }

    fn scan_strings(&mut self) -> Result<()> {
        let strings = self.g.txn.string_table();
        // Equal texts must share one copy: ids by the hash of their text.
        let mut by_hash: HashMap<u64, Vec<u64>> = HashMap::new();
        for (id, count, bytes) in strings.iter() {
            self.report.strings += 1;
            self.tick();
            let text = String::from_utf8_lossy(bytes);
            if std::str::from_utf8(bytes).is_err() {
                self.problem(format!("string {id} is not UTF-8"));
            }
            let (holders, first) = match self.strings.remove(&id) {
                Some((n, node, p)) => (n, Some((node, p))),
                None => (0, None),
            };
            if count == 0 {
                self.problem(format!("string {id} {:?} is stored with reference count 0", text));
            }
            if count != holders {
                let held = match first {
                    Some((node, p)) if holders == 1 => format!(" (held by {})", self.place(node, p)),
                    Some((node, p)) => format!(" (held by {} and {} more)", self.place(node, p), holders - 1),
                    None => String::new(),
                };
                self.problem(format!(
                    "string {id} {:?} has reference count {count} but {holders} text slots hold it{held}",
                    text
                ));
            }
            let twins = by_hash.entry(xxh3_64(bytes)).or_default();
            if let Some(other) = twins.iter().find(|&&o| strings.get(o) == Some(bytes)) {
                self.problem(format!(
                    "strings {other} and {id} hold the same text {:?}; equal texts must share one copy",
                    text
                ));
            }
            twins.push(id);
        }
        let mut missing: Vec<(u64, (u64, NodeRef, PropertyId))> = self.strings.drain().collect();
        missing.sort_by_key(|(id, _)| *id);
        for (id, (n, node, p)) in missing {
            let place = self.place(node, p);
            let more = if n > 1 { format!(" (and {} more text slots)", n - 1) } else { String::new() };
            self.problem(format!("{place}: holds string {id}, which is not stored{more}"));
        }
        Ok(())
    }

    fn check_meta(&mut self) -> Result<()> {
        match self.g.txn.meta(meta::FORMAT) {
            Some(v) if v == meta::FORMAT_VERSION.to_le_bytes() => {}
            Some(v) => self.problem(format!("the stored format is {v:?}, expected {}", meta::FORMAT_VERSION)),
            None => self.problem("no format version is stored".into()),
        }
        Ok(())
    }
}

/// A node's path for messages; only record ids once some record is too damaged to walk.
fn describe(g: Graph<'_>, damaged: bool, node: NodeRef) -> String {
    if damaged {
        format!("record {}", node.id)
    } else {
        g.describe(node)
    }
}

fn collection_name(g: Graph<'_>, damaged: bool, owner: NodeRef, p: PropertyId) -> String {
    if damaged {
        format!("record {} '{}'", owner.id, g.schema.property(p).name)
    } else {
        g.collection_path(owner, p)
    }
}
