//! `check`: verifies that the stored graph is consistent — the records form one tree under
//! the root that agrees with the schema, and every derived structure (entry counts, the
//! Entries and Links tables, string reference counts and the string index) matches the data.
//!
//! Derived properties are computed again from scratch and compared with their stored values.
//!
//! Two passes: a walk from the root that checks every slot, then a scan of every table that
//! checks each row stands for something the walk reached. Both directions use point lookups,
//! so memory is bounded by one map of string id → (count, first holder) (about 40 bytes per
//! distinct stored string), the recursion depth of the schema, and at most [`MAX_PROBLEMS`]
//! problem sentences.

use std::collections::HashMap;

use espalier_schema::{NodeTypeId, ParentLink, PropertyId, PropertyKind, Storage};
use espalier_storage::Table;
use xxhash_rust::xxh3::xxh3_64;

use crate::graph::Graph;
use crate::keys::{self, meta, u64_be, u64_le};
use crate::record::{self, Header, NodeId, NodeRef, HEADER, NO_PARENT, ROOT_ID};
use crate::{DataError, Result};

/// Problems described in a report; the rest are only counted.
pub const MAX_PROBLEMS: usize = 1000;
/// Progress is reported every this many records or table rows.
pub const PROGRESS_EVERY: u64 = 10_000;
const MAX_DEPTH: usize = 1024;
/// Start key of a whole-table scan (LMDB rejects an empty key; no stored key is empty).
const FIRST: &[u8] = &[0];

/// What `check` saw. The database is consistent when `problems` is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Rows of the Nodes table.
    pub records: u64,
    /// Rows of the Entries table.
    pub entries: u64,
    /// Rows of the Links table.
    pub links: u64,
    /// Rows of the Strings table.
    pub strings: u64,
    /// Rows of the Indexes table.
    pub index_rows: u64,
    /// One sentence per problem, naming the node path where there is one.
    pub problems: Vec<String>,
}

impl CheckReport {
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
    c.scan_string_index()?;
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
        Err(DataError::Storage(e)) => Err(DataError::Storage(e)),
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

impl Checker<'_, '_> {
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
        (ty as usize) < self.g.schema.types.len()
    }

    // --- walk ---------------------------------------------------------------------------------

    fn walk_root(&mut self) -> Result<()> {
        let Some(rec) = self.g.find_record(ROOT_ID)? else {
            self.problem("the root record (1) is missing".into());
            return Ok(());
        };
        let want = Header { ty: espalier_schema::ROOT, parent_property: NO_PARENT, parent: 0 };
        match record::header(rec) {
            Ok(h) if h == want => {}
            Ok(h) => {
                self.problem(format!("the root record's header is {h:?}, expected {want:?}"));
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
    /// then its slots. `key` is the entry key the slot expects, for entries.
    fn record(&mut self, node: NodeRef, rec: &[u8], key: Option<&[u8]>, place: &dyn Fn() -> String) -> Result<()> {
        let size = self.g.schema.record_size(node.ty) as usize;
        let stored_key = rec.get(HEADER + size..);
        match (stored_key, key) {
            (None, _) => {
                self.problem(format!(
                    "{}: record {} is {} bytes, shorter than its type's layout",
                    place(),
                    node.id,
                    rec.len()
                ));
                return Ok(());
            }
            (Some(k), None) if !k.is_empty() => {
                self.problem(format!(
                    "{}: record {} has {} bytes after its layout but is no entry",
                    place(),
                    node.id,
                    k.len()
                ));
            }
            (Some(k), Some(want)) if k != want => {
                self.problem(format!(
                    "{}: record {} stores key {} but its Entries row has key {}",
                    place(),
                    node.id,
                    show_key(k),
                    show_key(want)
                ));
                return Ok(());
            }
            _ => {}
        }
        self.reached += 1;
        self.tick();
        self.slots(node, rec)
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
                    if self.link_target(node, p, value, target)? {
                        if self.g.txn.get(Table::Links, &keys::link(value, node.id, p))?.is_some() {
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
                            self.child(NodeRef { id, ty: state.node }, node.id, p, None, &place)?;
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
        match record::header(rec) {
            Ok(h) if h == want => self.record(node, rec, key, place),
            Ok(h) => {
                self.problem(format!(
                    "{}: record {} has header (type {}, parent {} through property {}), expected (type {}, parent {} \
                     through property {})",
                    place(),
                    node.id,
                    h.ty,
                    h.parent,
                    h.parent_property,
                    want.ty,
                    want.parent,
                    want.parent_property
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
        let Some(rec) = self.g.find_record(target_id)? else {
            self.problem(format!("{}: points to record {target_id}, which does not exist", self.place(from, p)));
            return Ok(false);
        };
        match record::header(rec) {
            Ok(h) if h.ty == target.entry_type => {}
            _ => {
                self.problem(format!(
                    "{}: points to record {target_id}, which is not an entry of '{}'",
                    self.place(from, p),
                    schema.property(target.dictionary).name
                ));
                return Ok(false);
            }
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
        let prefix = keys::collection(owner.id, p);
        for item in self.g.txn.prefix(Table::Entries, &prefix)? {
            let (k, v) = item?;
            rows += 1;
            let key = &k[prefix.len()..];
            let Some(id) = u64_le(v) else {
                self.problem(format!(
                    "{}: the Entries row for key {} has a short value",
                    self.place(owner, p),
                    show_key(key)
                ));
                continue;
            };
            let entry = NodeRef { id, ty: entry_ty };
            if let Some(target) = matrix {
                let Some(target_id) = u64_be(key).filter(|_| key.len() == 8) else {
                    self.problem(format!(
                        "{}: a matrix Entries row has a key of {} bytes",
                        self.place(owner, p),
                        key.len()
                    ));
                    continue;
                };
                // A matrix key is resolved from the node that declares the matrix.
                if self.link_target(owner, p, target_id, target)? {
                    if self.g.txn.get(Table::Links, &keys::link(target_id, id, p))?.is_some() {
                        self.links_reached += 1;
                    } else {
                        self.problem(format!(
                            "{}: the reverse-link index (Links) has no row for this matrix entry",
                            self.describe(entry)
                        ));
                    }
                }
            }
            if let Some((_, rec)) = record::split_entry_value(v) {
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
        let mut max_id = 0;
        for item in self.g.txn.scan(Table::Nodes, FIRST)? {
            let (k, _) = item?;
            self.report.records += 1;
            self.tick();
            let Some(id) = u64_be(k).filter(|_| k.len() == 8) else {
                self.problem(format!("the Nodes table has a malformed key {k:?}"));
                continue;
            };
            max_id = max_id.max(id);
            if let Some(rec) = self.g.find_record(id)? {
                if !matches!(record::header(rec), Ok(h) if self.valid_type(h.ty)) {
                    self.damaged = true;
                }
            }
            match self.attachment(id)? {
                Ok(()) => attached += 1,
                Err(why) => self.problem(format!("record {id} is not reachable from the root: {why}")),
            }
        }
        if let Some(next) = self.meta_counter(meta::NEXT_NODE)? {
            if next <= max_id {
                self.problem(format!("the next record id is {next} but record {max_id} exists"));
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
            let h = match record::header(rec) {
                Ok(h) if self.valid_type(h.ty) => h,
                Ok(h) => return Ok(Err(format!("record {at} has unknown type {}", h.ty))),
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
            if h.parent_property != property {
                return Ok(Err(format!(
                    "record {at} names parent property {} but its type belongs to property {property}",
                    h.parent_property
                )));
            }
            let Some(parent) = self.g.find_record(h.parent)? else {
                return Ok(Err(format!("record {at}'s parent record {} is missing", h.parent)));
            };
            match record::header(parent) {
                Ok(ph) if ph.ty == schema.property(property).host => {}
                _ => {
                    return Ok(Err(format!(
                        "record {at}'s parent record {} does not hold property {property}",
                        h.parent
                    )))
                }
            }
            match schema.node_type(h.ty).parent {
                ParentLink::State { state, .. } => {
                    let slot = record::slot(schema, property);
                    let index = record::read_u64(parent, slot).ok();
                    let node = record::read_u64(parent, slot + 8).ok();
                    if index != Some(u64::from(state)) || node != Some(at) {
                        return Ok(Err(format!(
                            "record {at} is a state node but its parent's stategroup slot does not select it"
                        )));
                    }
                }
                _ => {
                    let key = match record::key(schema, rec) {
                        Ok(k) => k,
                        Err(e) => return Ok(Err(e.to_string())),
                    };
                    let row = self.g.txn.get(Table::Entries, &keys::entry(h.parent, property, key))?;
                    if row.and_then(u64_le) != Some(at) {
                        return Ok(Err(format!(
                            "record {at} is an entry with key {} of '{}' in record {}, but that collection has no \
                             Entries row for it",
                            show_key(key),
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

    /// Why record `id` cannot be read: absent, or an entry whose Entries row (which holds
    /// its record) is gone or belongs to another id.
    fn missing(&self, id: NodeId) -> Result<String> {
        Ok(match self.g.txn.get(Table::Nodes, &keys::node(id))?.and_then(record::as_locator) {
            Some(entries_key) => {
                let (owner, property, key) = (
                    u64_be(entries_key).unwrap_or(0),
                    entries_key.get(8..12).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
                    entries_key.get(12..).unwrap_or_default(),
                );
                let name = self.g.schema.properties.get(property as usize).map_or("?", |p| p.name.as_str());
                format!(
                    "record {id} is the entry with key {} of '{name}' in record {owner}, but the Entries row that holds \
                     it is missing or holds another record",
                    show_key(key)
                )
            }
            None => format!("its ancestor record {id} is missing"),
        })
    }

    fn owner_name(&self, owner: NodeId, p: PropertyId) -> String {
        collection_name(self.g, self.damaged, NodeRef { id: owner, ty: self.g.schema.property(p).owner }, p)
    }

    fn scan_entries(&mut self) -> Result<()> {
        let schema = self.g.schema;
        let mut valid = 0u64;
        for item in self.g.txn.scan(Table::Entries, FIRST)? {
            let (k, v) = item?;
            self.report.entries += 1;
            self.tick();
            let (Some(owner), Some(p)) =
                (u64_be(k), k.get(8..12).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
            else {
                self.problem(format!("the Entries table has a malformed key {k:?}"));
                continue;
            };
            let key = &k[12..];
            let Some(prop) = schema.properties.get(p as usize) else {
                self.problem(format!("an Entries row of record {owner} names unknown property {p}"));
                continue;
            };
            let entry_ty = match prop.kind {
                PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => node,
                _ => {
                    self.problem(format!(
                        "an Entries row of record {owner} names '{}', which is no collection",
                        prop.name
                    ));
                    continue;
                }
            };
            let owner_ok = match self.g.find_record(owner)? {
                Some(rec) => matches!(record::header(rec), Ok(h) if h.ty == prop.host),
                None => false,
            };
            if !owner_ok {
                self.problem(format!(
                    "an Entries row with key {} of '{}' belongs to record {owner}, which does not exist or has no such \
                     collection",
                    show_key(key),
                    prop.name
                ));
                continue;
            }
            let (id, row_record) = record::split_entry_value(v).unwrap_or((0, &[]));
            // The row's record must be the one its id's locator leads to (no two rows share an id).
            let ok = match self.g.find_record(id)? {
                Some(rec) if std::ptr::eq(rec, row_record) || rec == row_record => {
                    matches!(record::header(rec), Ok(h) if h == Header { ty: entry_ty, parent_property: p, parent: owner })
                        && record::key(schema, rec).ok() == Some(key)
                }
                _ => false,
            };
            if ok {
                valid += 1;
            } else {
                self.problem(format!(
                    "{}: the Entries row for key {} points to record {id}, which is missing or is not that entry",
                    self.owner_name(owner, p),
                    show_key(key)
                ));
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
        for item in self.g.txn.scan(Table::Links, FIRST)? {
            let (k, _) = item?;
            self.report.links += 1;
            self.tick();
            let Some((target, source, p)) = keys::parse_link(k) else {
                self.problem(format!("the Links table has a malformed key {k:?}"));
                continue;
            };
            let Some(prop) = schema.properties.get(p as usize) else {
                self.problem(format!("a Links row from record {source} names unknown property {p}"));
                continue;
            };
            let rec = self.g.find_record(source)?;
            let header = rec.and_then(|r| record::header(r).ok());
            let (ok, referrer) = match &prop.kind {
                PropertyKind::Reference { .. } => {
                    let node = NodeRef { id: source, ty: prop.owner };
                    let ok = header.is_some_and(|h| h.ty == prop.host)
                        && rec.and_then(|r| record::read_u64(r, record::slot(schema, p)).ok()) == Some(target);
                    (ok, node)
                }
                PropertyKind::Matrix { node: ty, .. } => {
                    let node = NodeRef { id: source, ty: *ty };
                    let ok = header.is_some_and(|h| h.ty == *ty && h.parent_property == p)
                        && rec.and_then(|r| record::key(schema, r).ok()) == Some(&target.to_be_bytes()[..]);
                    (ok, node)
                }
                _ => {
                    self.problem(format!(
                        "a Links row from record {source} names '{}', which is no reference",
                        prop.name
                    ));
                    continue;
                }
            };
            if ok {
                valid += 1;
            } else {
                let what = if rec.is_some() { self.describe(referrer) } else { format!("record {source}") };
                self.problem(format!(
                    "the reverse-link index (Links) says {what} refers to record {target} through '{}', but it does not",
                    prop.name
                ));
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
            if self.g.txn.get(Table::Indexes, &crate::index::row(n, value.as_value(), entry.id))?.is_some() {
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
        let indexes = self.g.schema.indexes.len();
        for item in self.g.txn.scan(Table::Indexes, FIRST)? {
            let (k, _) = item?;
            self.report.index_rows += 1;
            self.tick();
            let n = k.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            if n.is_none_or(|n| (n as usize) >= indexes) || crate::index::row_entry(k).is_err() {
                self.problem(format!("the Indexes table has a row {k:?} of no declared index"));
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
        let mut max_id = 0;
        for item in self.g.txn.scan(Table::Strings, FIRST)? {
            let (k, v) = item?;
            self.report.strings += 1;
            self.tick();
            let Some(id) = u64_be(k).filter(|_| k.len() == 8) else {
                self.problem(format!("the Strings table has a malformed key {k:?}"));
                continue;
            };
            max_id = max_id.max(id);
            let (Some(count), Some(bytes)) = (u64_le(v), v.get(8..)) else {
                self.problem(format!("string {id} has no reference count"));
                continue;
            };
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
            if self.g.txn.get(Table::StringIndex, &string_index_key(xxh3_64(bytes), id))?.is_none() {
                self.problem(format!("string {id} {:?} is missing from the string index", text));
            }
        }
        let mut missing: Vec<(u64, (u64, NodeRef, PropertyId))> = self.strings.drain().collect();
        missing.sort_by_key(|(id, _)| *id);
        for (id, (n, node, p)) in missing {
            let place = self.place(node, p);
            let more = if n > 1 { format!(" (and {} more text slots)", n - 1) } else { String::new() };
            self.problem(format!("{place}: holds string {id}, which is not stored{more}"));
        }
        if let Some(next) = self.meta_counter(meta::NEXT_STRING)? {
            if next <= max_id {
                self.problem(format!("the next string id is {next} but string {max_id} exists"));
            }
        }
        Ok(())
    }

    fn scan_string_index(&mut self) -> Result<()> {
        // Rows of one hash are adjacent; equal texts must not be stored twice.
        let mut group: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut group_hash = None;
        for item in self.g.txn.scan(Table::StringIndex, FIRST)? {
            let (k, _) = item?;
            self.tick();
            let (Some(hash), Some(id)) = (u64_be(k), k.get(8..).and_then(u64_be)) else {
                self.problem(format!("the string index has a malformed key {k:?}"));
                continue;
            };
            let Some(v) = self.g.txn.get(Table::Strings, &id.to_be_bytes())? else {
                self.problem(format!("the string index lists string {id}, which is not stored"));
                continue;
            };
            let bytes = v.get(8..).unwrap_or_default();
            if xxh3_64(bytes) != hash {
                self.problem(format!("the string index lists string {id} under a hash that is not its text's"));
                continue;
            }
            if group_hash != Some(hash) {
                group.clear();
                group_hash = Some(hash);
            }
            if let Some((other, _)) = group.iter().find(|(_, b)| b == bytes) {
                self.problem(format!(
                    "strings {other} and {id} hold the same text {:?}; equal texts must share one copy",
                    String::from_utf8_lossy(bytes)
                ));
            }
            group.push((id, bytes.to_vec()));
        }
        Ok(())
    }

    fn meta_counter(&mut self, name: &[u8]) -> Result<Option<u64>> {
        match self.g.txn.get(Table::Meta, name)? {
            Some(v) => match u64_le(v) {
                Some(n) => Ok(Some(n)),
                None => {
                    self.problem(format!("the meta counter {:?} is unreadable", String::from_utf8_lossy(name)));
                    Ok(None)
                }
            },
            None => Ok(None),
        }
    }

    fn check_meta(&mut self) -> Result<()> {
        match self.g.txn.get(Table::Meta, meta::SCHEMA)? {
            Some(s) if s == self.g.schema.source.as_bytes() => {}
            Some(_) => self.problem("the stored schema text differs from the schema in use".into()),
            None => self.problem("no schema text is stored".into()),
        }
        for prefix in [crate::dump::PENDING_PREFIX, crate::dump::DEFERRED_PREFIX] {
            if self.g.txn.any_with_prefix(Table::Meta, prefix)? {
                self.problem(format!(
                    "the Meta table holds leftover import rows under {:?}",
                    String::from_utf8_lossy(prefix)
                ));
            }
        }
        Ok(())
    }
}

fn string_index_key(hash: u64, id: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&hash.to_be_bytes());
    k[8..].copy_from_slice(&id.to_be_bytes());
    k
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
