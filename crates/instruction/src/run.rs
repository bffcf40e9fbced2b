//! Running checked plans: queries on a snapshot (or inside a transaction, seeing its own
//! writes), mutations inside a write transaction.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use espalier_data::{DataError, EntryKey, Graph, NodeId, NodeRef, NodeView, WriteGraph};
use espalier_schema::{PropertyId, PropertyKind, Schema, StateIndex};
use serde::Serialize;

use crate::ast::{Comparison, LeafKind, Value};
use crate::plan::{FilterPlan, ItemPlan, OpPlan, QueryPlan, StateChoice, StepPlan};
use crate::InstructionError;

pub(crate) mod pattern;
mod row_test;
mod row_value;
mod rows;
pub use pattern::MAX_PATTERN_ROWS;
pub(crate) use pattern::{run_match, streams, visit_match};
pub use row_value::RowValue;
pub(crate) use rows::PackedRows;
use rows::{Cell, JsonRows, Rows, VisitedRows};

/// Upper bound on rows a query may visit (also with a limit, because the total is counted).
pub const MAX_VISITED_ROWS: u64 = 100_000_000;

/// A parameter value supplied with an instruction or a command call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    /// A number.
    Int(i64),
    /// A text: a text value, a state name or a key (a compound key as a JSON array of strings).
    Text(String),
}

/// Values a plan refers to at run time.
pub struct Bindings<'p> {
    pub params: &'p HashMap<String, ParamValue>,
    /// Set by someone else to stop a read (the server, past its query time limit).
    pub cancel: Option<&'p AtomicBool>,
}

/// Rows (or pattern steps) between two looks at the cancel flag.
pub(crate) const CANCEL_CHECK_EVERY: u64 = 1024;

/// The error of a read stopped through its cancel flag.
pub(crate) fn cancelled() -> InstructionError {
    InstructionError::Limit("the read was stopped: it ran past the time it was given".into())
}

/// Whether a read looking at its flag after `visited` steps must stop.
pub(crate) fn must_stop(cancel: Option<&AtomicBool>, visited: u64) -> bool {
    visited.is_multiple_of(CANCEL_CHECK_EVERY) && cancel.is_some_and(|c| c.load(Ordering::Relaxed))
}

/// Up to this many parameters, [`Bindings::param`] compares names instead of hashing.
const FEW_PARAMS: usize = 8;

impl Bindings<'_> {
    fn param(&self, name: &str) -> Result<&ParamValue, InstructionError> {
        // A few parameters are found sooner by comparing names than by hashing one (SipHash
        // was a twentieth of a one-row lookup's run).
        let found = if self.params.len() <= FEW_PARAMS {
            self.params.iter().find_map(|(k, v)| (k == name).then_some(v))
        } else {
            self.params.get(name)
        };
        found.ok_or_else(|| InstructionError::value(format!("no value given for parameter ${name}")))
    }

    pub fn number(&mut self, v: &Value) -> Result<i64, InstructionError> {
        match v {
            Value::Int(i) => Ok(*i),
            Value::Param(p) => match self.param(p)? {
                ParamValue::Int(i) => Ok(*i),
                ParamValue::Text(t) => t
                    .parse()
                    .map_err(|_| InstructionError::value(format!("parameter ${p} must be a number, got {t:?}"))),
            },
            other => Err(InstructionError::value(format!("expected a number, found {other:?}"))),
        }
    }

    pub fn text(&mut self, v: &Value) -> Result<String, InstructionError> {
        match v {
            Value::Text(t) => Ok(t.clone()),
            Value::Param(p) => Ok(match self.param(p)? {
                ParamValue::Int(i) => i.to_string(),
                ParamValue::Text(t) => t.clone(),
            }),
            other => Ok(self.number(other)?.to_string()),
        }
    }

    /// A key: its components as text.
    pub fn key(&mut self, v: &Value) -> Result<Vec<String>, InstructionError> {
        match v {
            Value::Compound(parts) => parts.iter().map(|p| self.text(p)).collect(),
            Value::Param(p) => match self.param(p)? {
                ParamValue::Text(t) if t.starts_with('[') => serde_json::from_str(t).map_err(|_| {
                    InstructionError::value(format!("parameter ${p}: compound key must be a JSON array of strings"))
                }),
                _ => Ok(vec![self.text(v)?]),
            },
            other => Ok(vec![self.text(other)?]),
        }
    }
}

/// One row of a query result.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Row {
    /// The keys of the entries along the collection path (a matrix entry contributes its
    /// target's key components).
    pub key: Vec<String>,
    /// One value per column, in the order of the columns.
    pub values: Vec<serde_json::Value>,
}

/// The rows of a collection query or pattern query, with how many there are in all.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct QueryResult {
    /// Rows that match, before limit and offset.
    pub total: u64,
    /// The column names (aliases), in order.
    pub columns: Vec<String>,
    /// The rows returned, after offset and limit.
    pub rows: Vec<Row>,
}

/// Navigation shared by reads and writes.
pub(crate) struct Nav<'g> {
    pub graph: Graph<'g>,
}

impl<'g> Nav<'g> {
    fn schema(&self) -> &'g Schema {
        self.graph.schema
    }

    /// The key of an entry step as stored: text for a dictionary, the target record for a matrix.
    fn entry_key_target(
        &self,
        owner: NodeRef,
        property: PropertyId,
        key: &[String],
    ) -> Result<Option<NodeId>, InstructionError> {
        match &self.schema().property(property).kind {
            PropertyKind::Matrix { target, .. } => {
                // The matrix key is a reference declared in the matrix's owner node.
                match self.graph.resolve(owner, target, key) {
                    Ok(t) => Ok(Some(t.id)),
                    Err(DataError::KeyMissing { .. } | DataError::StateNotSelected { .. }) => Ok(None),
                    Err(e) => Err(e.into()),
                }
            }
            _ => Ok(None),
        }
    }

    /// Finds an existing entry by key.
    pub fn entry(
        &self,
        owner: NodeRef,
        property: PropertyId,
        key: &Value,
        b: &mut Bindings<'_>,
    ) -> Result<NodeRef, InstructionError> {
        Ok(self.entry_view(owner, property, key, b)?.node)
    }

    /// [`Nav::entry`] with the entry's record, which the lookup reads anyway.
    fn entry_view(
        &self,
        owner: NodeRef,
        property: PropertyId,
        key: &Value,
        b: &mut Bindings<'_>,
    ) -> Result<NodeView<'g>, InstructionError> {
        if !matches!(self.schema().property(property).kind, PropertyKind::Matrix { .. }) {
            // The common case — a dictionary key given literally or as a text parameter — is
            // looked up without copying the key.
            let text: Cow<'_, str> = match key {
                Value::Text(t) => Cow::Borrowed(t.as_str()),
                Value::Param(p) => match b.param(p)? {
                    ParamValue::Text(t) => Cow::Borrowed(t.as_str()),
                    ParamValue::Int(i) => Cow::Owned(i.to_string()),
                },
                other => Cow::Owned(b.text(other)?),
            };
            return self.graph.find_entry_view(owner, property, EntryKey::Text(&text))?.ok_or_else(|| {
                DataError::KeyMissing {
                    collection: self.graph.collection_path(owner, property),
                    key: format!("{text:?}"),
                }
                .into()
            });
        }
        let key = b.key(key)?;
        let found = match self.entry_key_target(owner, property, &key)? {
            Some(t) => self.graph.find_entry_view(owner, property, EntryKey::Target(t))?,
            None => None,
        };
        found.ok_or_else(|| {
            let shown = if key.len() == 1 { format!("{:?}", key[0]) } else { format!("{key:?}") };
            DataError::KeyMissing { collection: self.graph.collection_path(owner, property), key: shown }.into()
        })
    }

    fn state_step(&self, node: NodeRef, property: PropertyId, state: StateIndex) -> Result<NodeRef, InstructionError> {
        let (current, child) = self.graph.state(node, property)?;
        if current != state {
            return Err(DataError::StateNotSelected {
                node: self.graph.describe(node),
                stategroup: self.schema().property(property).name.clone(),
                expected: self.graph.state_name(property, state).to_string(),
                actual: self.graph.state_name(property, current).to_string(),
            }
            .into());
        }
        Ok(child)
    }

    /// Follows reference `property` of `node`, reading its slot from `view` when the caller
    /// already holds the node's record.
    fn reference_step(
        &self,
        node: NodeRef,
        view: Option<NodeView<'g>>,
        property: PropertyId,
    ) -> Result<NodeRef, InstructionError> {
        let PropertyKind::Reference { target } = &self.schema().property(property).kind else {
            unreachable!("checked: reference step on a reference")
        };
        let id = match view {
            Some(v) => v.reference(property)?,
            None => self.graph.reference(node, property)?,
        };
        if id.is_none() {
            return Err(
                DataError::Corrupt(format!("reference '{}' is unset", self.schema().property(property).name)).into()
            );
        }
        Ok(NodeRef { id, ty: target.entry_type })
    }

    /// Follows a node path from the root (a `get` asks it through [`crate::plan::Plan::get_node`]).
    pub fn walk(&self, path: &[StepPlan], b: &mut Bindings<'_>) -> Result<NodeRef, InstructionError> {
        Ok(self.walk_view(path, b)?.0)
    }

    /// [`Nav::walk`], also returning the node's record when the last steps had it at hand
    /// (an entry found by key, and groups in it), so the caller need not look it up again.
    pub(crate) fn walk_view(
        &self,
        path: &[StepPlan],
        b: &mut Bindings<'_>,
    ) -> Result<(NodeRef, Option<NodeView<'g>>), InstructionError> {
        let mut at = NodeRef::ROOT;
        let mut view: Option<NodeView<'g>> = None;
        for step in path {
            (at, view) = match step {
                StepPlan::Group(p) => match view {
                    Some(v) => (self.graph.group(at, *p), Some(v.group(*p))),
                    None => (self.graph.group(at, *p), None),
                },
                StepPlan::Entry { property, key: Some(key), .. } => {
                    let v = self.entry_view(at, *property, key, b)?;
                    (v.node, Some(v))
                }
                StepPlan::Entry { key: None, .. } => unreachable!("checked: node paths have keys"),
                StepPlan::State { property, state, .. } => (self.state_step(at, *property, *state)?, None),
                StepPlan::Reference { property } => (self.reference_step(at, view, *property)?, None),
            };
        }
        debug_assert!(view.is_none_or(|v| v.node == at), "a view of another node");
        Ok((at, view))
    }

    /// The value of a leaf, or `None` if the projection path crosses an unselected state.
    /// Starts from the row's already-fetched record, so reading several properties of a row
    /// costs one record lookup (plus one per state or reference crossed).
    #[inline(always)] // once per value of every row: as it was before `row` took two kinds of rows
    fn project(
        &self,
        row: NodeView<'g>,
        path: &[StepPlan],
        property: PropertyId,
        kind: LeafKind,
    ) -> Result<Option<Leaf<'g>>, InstructionError> {
        let mut at = row;
        for step in path {
            at = match step {
                StepPlan::Group(p) => at.group(*p),
                StepPlan::State { property, state, .. } => {
                    let (current, child) = at.state(*property)?;
                    if current != *state {
                        return Ok(None);
                    }
                    self.graph.view(child)?
                }
                StepPlan::Reference { property } => {
                    self.graph.view(self.reference_step(at.node, Some(at), *property)?)?
                }
                StepPlan::Entry { .. } => unreachable!("checked: no entry steps in projections"),
            };
        }
        Ok(Some(match kind {
            LeafKind::Number => Leaf::Number(at.number(property)?),
            // The bytes as stored, borrowed from the graph: a text only filtered on is compared
            // as bytes (the order of UTF-8 text), and one in the page is checked to be UTF-8
            // where it is spelt out.
            LeafKind::Text => Leaf::Text(self.graph.string_bytes(at.text_id(property)?)?),
            LeafKind::Stategroup => Leaf::State(at.state(property)?.0),
            LeafKind::Reference => {
                let PropertyKind::Reference { target } = &self.schema().property(property).kind else { unreachable!() };
                Leaf::Key(self.graph.target_key(at.reference(property)?, target)?)
            }
        }))
    }
}

enum Leaf<'g> {
    Number(i64),
    Text(&'g [u8]),
    State(StateIndex),
    Key(Vec<String>),
}

fn compare<T: Ord + ?Sized>(op: Comparison, a: &T, b: &T) -> bool {
    espalier_schema::CompareOp::from(op).holds(a, b)
}

/// Filter values resolved once per query (not per row).
enum Resolved {
    Number(Comparison, i64),
    Text(Comparison, String),
    Prefix(String),
    States(Vec<StateIndex>),
    Key(Comparison, Vec<String>),
}

/// Runs a collection query: its rows as a [`QueryResult`].
pub(crate) fn run_query(nav: &Nav<'_>, q: &QueryPlan, b: &mut Bindings<'_>) -> Result<QueryResult, InstructionError> {
    let mut out = JsonRows::new(q.projections.iter().map(|p| p.alias.clone()).collect());
    query_rows(nav, q, b, &mut out)?;
    Ok(out.out)
}

/// Runs a collection query, its rows packed (see [`PackedRows`]): what the write transaction
/// does, so that the rows are spelt out after the commit, off the writer.
pub(crate) fn run_query_packed(
    nav: &Nav<'_>,
    q: &QueryPlan,
    b: &mut Bindings<'_>,
) -> Result<PackedRows, InstructionError> {
    let mut out = PackedRows::new(q.projections.iter().map(|p| p.alias.clone()).collect());
    query_rows(nav, q, b, &mut out)?;
    Ok(out)
}

/// Hands a collection query's rows (in order, after its offset, up to its limit) to `visit`
/// one at a time ([`crate::Engine::visit_rows`]; see [`VisitedRows`]). Returns the query's
/// `total`, or the rows matched so far when `visit` breaks.
pub(crate) fn visit_query(
    nav: &Nav<'_>,
    q: &QueryPlan,
    b: &mut Bindings<'_>,
    visit: &mut dyn FnMut(&[String], &[RowValue<'_>]) -> std::ops::ControlFlow<()>,
) -> Result<u64, InstructionError> {
    let mut out = VisitedRows::new(visit);
    query_rows(nav, q, b, &mut out)?;
    Ok(out.total())
}

fn query_rows(nav: &Nav<'_>, q: &QueryPlan, b: &mut Bindings<'_>, out: &mut impl Rows) -> Result<(), InstructionError> {
    let (context, context_view) = nav.walk_view(&q.path, b)?;
    // Most queries filter nothing: then no per-query allocation for the filters.
    let filters: Vec<Option<Resolved>> = if q.projections.iter().all(|p| p.filter.is_none()) {
        Vec::new()
    } else {
        q.projections
            .iter()
            .map(|p| {
                Ok(match &p.filter {
                    None => None,
                    Some(FilterPlan::Number(op, v)) => Some(Resolved::Number(*op, b.number(v)?)),
                    Some(FilterPlan::Text(op, v)) => Some(Resolved::Text(*op, b.text(v)?)),
                    Some(FilterPlan::Prefix(v)) => Some(Resolved::Prefix(b.text(v)?)),
                    Some(FilterPlan::States(s)) => Some(Resolved::States(s.clone())),
                    Some(FilterPlan::Reference(op, v)) => Some(Resolved::Key(*op, b.key(v)?)),
                })
            })
            .collect::<Result<_, InstructionError>>()?
    };
    let start = match &q.start {
        None => None,
        Some(s) => Some(Begin { depth: s.depth, key: b.text(&s.key)?.into_bytes(), exclusive: s.exclusive }),
    };
    // Every projection a number of the row's own record, unfiltered (`bench core`'s order
    // lines): each row is read at those byte positions and nothing else.
    let schema = nav.graph.schema;
    let numbers = (filters.is_empty() && q.projections.iter().all(|p| p.path.is_empty() && p.kind == LeafKind::Number))
        .then(|| q.projections.iter().map(|p| espalier_data::record::slot(schema, p.property)).collect());
    let walk = Walk { filters, start, numbers };
    let mut visited = 0u64;
    let mut key: Vec<KeyPart<'_>> = Vec::new();
    visit(nav, q, &walk, context, context_view, 0, &mut key, out, &mut visited, b.cancel)
}

/// What a collection query's walk resolved before it began: filter values and the start key.
struct Walk {
    /// One slot per projection, or none at all when nothing is filtered.
    filters: Vec<Option<Resolved>>,
    /// `from` / `after`, its key resolved.
    start: Option<Begin>,
    /// When every projection is an unfiltered number of the row's own record: their byte
    /// positions in it ([`number_row`]).
    numbers: Option<Vec<usize>>,
}

/// A resolved `from` / `after`.
struct Begin {
    /// The index in the collection path of the dictionary step it starts.
    depth: usize,
    /// The key's bytes (the order of the key index).
    key: Vec<u8>,
    /// `after`: the key itself is left out.
    exclusive: bool,
}

impl Walk {
    /// A key-range read with a limit stops once its page is full: its total is then the
    /// matching rows read so far, not all of them.
    fn page_full(&self, q: &QueryPlan, out: &impl Rows) -> bool {
        out.stopped() || self.start.is_some() && q.limit.is_some_and(|l| out.kept() as u64 >= l)
    }
}

/// One part of a row's key while the walk is under it. A matrix entry's key is its target's
/// key, which takes lookups to spell out: it is only spelled out for rows in the page.
enum KeyPart<'g> {
    /// A dictionary key's bytes, borrowed from the snapshot: read as text only when the row
    /// is spelt out (a row outside the page never is).
    Text(&'g [u8]),
    /// The key of the entry `id` a matrix (`property`) entry points at.
    Target { id: espalier_data::NodeId, property: PropertyId },
}

/// Gives the row being read its key, part by part.
fn spell_key(graph: &Graph<'_>, parts: &[KeyPart<'_>], out: &mut impl Rows) -> Result<(), InstructionError> {
    for part in parts {
        match part {
            KeyPart::Text(t) => out.key_part(&espalier_data::lossy_text(t)),
            KeyPart::Target { id, property } => {
                let PropertyKind::Matrix { target, .. } = &graph.schema.property(*property).kind else {
                    unreachable!("a target key part comes from a matrix step");
                };
                for t in graph.target_key(*id, target)? {
                    out.key_part(&t);
                }
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)] // a recursive walk carrying its accumulators
fn visit<'g>(
    nav: &Nav<'g>,
    q: &QueryPlan,
    walk: &Walk,
    node: NodeRef,
    view: Option<NodeView<'g>>,
    depth: usize,
    key: &mut Vec<KeyPart<'g>>,
    out: &mut impl Rows,
    visited: &mut u64,
    cancel: Option<&AtomicBool>,
) -> Result<(), InstructionError> {
    debug_assert!(view.is_none_or(|v| v.node == node), "a view of another node");
    if depth == q.select.len() {
        *visited += 1;
        if *visited > MAX_VISITED_ROWS {
            return Err(InstructionError::Limit(format!("query visits more than {MAX_VISITED_ROWS} rows")));
        }
        if must_stop(cancel, *visited) {
            return Err(cancelled());
        }
        return match &walk.numbers {
            Some(slots) => number_row(nav, q, slots, node, view, key, out),
            None => row(nav, q, &walk.filters, node, view, key, out),
        };
    }
    match &q.select[depth] {
        StepPlan::Group(p) => {
            let group_view = view.map(|v| v.group(*p));
            visit(nav, q, walk, nav.graph.group(node, *p), group_view, depth + 1, key, out, visited, cancel)
        }
        StepPlan::State { property, state, .. } => {
            let (current, child) = match view {
                Some(v) => v.state(*property)?,
                None => nav.graph.state(node, *property)?,
            };
            if current == *state {
                visit(nav, q, walk, child, None, depth + 1, key, out, visited, cancel)?;
            }
            Ok(())
        }
        StepPlan::Reference { property } => {
            let target = nav.reference_step(node, view, *property)?;
            visit(nav, q, walk, target, None, depth + 1, key, out, visited, cancel)
        }
        StepPlan::Entry { property, .. } => {
            let matrix = matches!(nav.graph.schema.property(*property).kind, PropertyKind::Matrix { .. });
            // Each row's record comes with the scan of the owner's Entries rows; a key range
            // seeks its first key and stops once the page is full.
            let start = walk.start.as_ref().filter(|s| s.depth == depth);
            let from = start.map_or(&[][..], |s| s.key.as_slice());
            let mut entries = nav.graph.entry_views_from(node, *property, from)?;
            while !walk.page_full(q, out) {
                let Some(entry) = entries.next() else { break };
                let (raw, entry) = entry?;
                if start.is_some_and(|s| s.exclusive && raw == from) {
                    continue;
                }
                let before = key.len();
                if matrix {
                    key.push(KeyPart::Target { id: nav.graph.matrix_target_of(*property, raw)?, property: *property });
                } else {
                    // Borrowed from the snapshot: nothing done for rows outside the page.
                    key.push(KeyPart::Text(raw));
                }
                visit(nav, q, walk, entry.node, Some(entry), depth + 1, key, out, visited, cancel)?;
                key.truncate(before);
            }
            Ok(())
        }
    }
}

#[inline(never)] // kept out of the recursive `visit`, as the one kind of rows had it
fn row(
    nav: &Nav<'_>,
    q: &QueryPlan,
    filters: &[Option<Resolved>],
    node: NodeRef,
    view: Option<NodeView<'_>>,
    key: &[KeyPart<'_>],
    out: &mut impl Rows,
) -> Result<(), InstructionError> {
    debug_assert!(filters.is_empty() || filters.len() == q.projections.len(), "one filter slot per projection");
    let wanted = in_page(q, out);
    let mut view = view;
    for (i, proj) in q.projections.iter().enumerate() {
        let filter = filters.get(i).and_then(Option::as_ref);
        // Without a filter and outside the page, a projection only matters for state crossings.
        if filter.is_none() && !wanted && proj.path.iter().all(|s| !matches!(s, StepPlan::State { .. })) {
            continue;
        }
        let row_view = match view {
            Some(v) => v,
            None => *view.insert(nav.graph.view(node)?),
        };
        let projected = match nav.project(row_view, &proj.path, proj.property, proj.kind) {
            Ok(Some(leaf)) => leaf,
            Ok(None) => {
                out.drop_row();
                return Ok(());
            }
            Err(e) => {
                out.drop_row();
                return Err(e);
            }
        };
        let pass = match (filter, &projected) {
            (None, _) => true,
            (Some(Resolved::Number(op, v)), Leaf::Number(n)) => compare(*op, n, v),
            (Some(Resolved::Text(op, v)), Leaf::Text(t)) => compare(*op, *t, v.as_bytes()),
            (Some(Resolved::Prefix(p)), Leaf::Text(t)) => t.starts_with(p.as_bytes()),
            (Some(Resolved::States(set)), Leaf::State(s)) => set.contains(s),
            (Some(Resolved::Key(op, k)), Leaf::Key(key)) => compare(*op, key, k),
            _ => unreachable!("checked: filter kind matches leaf kind"),
        };
        if !pass {
            out.drop_row();
            return Ok(());
        }
        if wanted {
            let cell = match projected {
                Leaf::Number(n) => Cell::Number(n),
                Leaf::Text(t) => Cell::Bytes(t),
                Leaf::State(s) => Cell::Text(nav.graph.state_name(proj.property, s)),
                Leaf::Key(k) => Cell::Key(k),
            };
            if let Err(e) = out.value(cell) {
                out.drop_row();
                return Err(e);
            }
        }
    }
    end_row(nav, key, wanted, out)
}

/// Whether the row about to be read is in the page: past the offset, within the limit.
#[inline]
fn in_page(q: &QueryPlan, out: &impl Rows) -> bool {
    out.total() >= q.offset && q.limit.is_none_or(|l| (out.kept() as u64) < l)
}

/// Ends a row whose values are given: its key spelt and the row kept when it is `wanted` (in
/// the page), and counted either way.
#[inline]
fn end_row(nav: &Nav<'_>, key: &[KeyPart<'_>], wanted: bool, out: &mut impl Rows) -> Result<(), InstructionError> {
    if wanted {
        if let Err(e) = spell_key(&nav.graph, key, out) {
            out.drop_row();
            return Err(e);
        }
        out.keep_row();
    }
    out.count();
    Ok(())
}

/// Columns of numbers [`number_row`] reads onto the stack; a query with more hands them over
/// one by one.
const STACK_NUMBERS: usize = 8;

/// [`row`] for a query whose projections are all unfiltered numbers of the row's own record,
/// at byte positions `slots` of it: no projection path, leaf or filter to look at per row.
/// (Inlined into `visit`: kept out, as `row` is, it was 5% slower.)
fn number_row(
    nav: &Nav<'_>,
    q: &QueryPlan,
    slots: &[usize],
    node: NodeRef,
    view: Option<NodeView<'_>>,
    key: &[KeyPart<'_>],
    out: &mut impl Rows,
) -> Result<(), InstructionError> {
    debug_assert_eq!(slots.len(), q.projections.len(), "one slot per projection");
    let wanted = in_page(q, out);
    if wanted {
        let record = match view {
            Some(v) => v.record(),
            None => nav.graph.view(node)?.record(),
        };
        if slots.len() <= STACK_NUMBERS {
            // Read onto the stack and kept as one row of numbers (`Rows::keep_numbers`).
            let mut numbers = [0i64; STACK_NUMBERS];
            for (n, &at) in numbers.iter_mut().zip(slots) {
                *n = espalier_data::record::read_u64(record, at)? as i64;
            }
            if let Err(e) = spell_key(&nav.graph, key, out) {
                out.drop_row();
                return Err(e);
            }
            out.keep_numbers(&numbers[..slots.len()])?;
            out.count();
            return Ok(());
        }
        for &at in slots {
            let cell = espalier_data::record::read_u64(record, at).map_err(InstructionError::from);
            if let Err(e) = cell.and_then(|n| out.value(Cell::Number(n as i64))) {
                out.drop_row();
                return Err(e);
            }
        }
    }
    end_row(nav, key, wanted, out)
}

/// Applies update items to `node`. `init`: the node was just created by this instruction.
pub(crate) fn apply(
    g: &mut WriteGraph<'_, '_>,
    node: NodeRef,
    items: &[ItemPlan],
    init: bool,
    b: &mut Bindings<'_>,
) -> Result<(), InstructionError> {
    for item in items {
        apply_item(g, node, item, init, b)?;
    }
    Ok(())
}

fn apply_item(
    g: &mut WriteGraph<'_, '_>,
    node: NodeRef,
    item: &ItemPlan,
    init: bool,
    b: &mut Bindings<'_>,
) -> Result<(), InstructionError> {
    let p = item.property;
    match &item.op {
        OpPlan::SetNumber(v) => {
            let n = b.number(v)?;
            g.set_number(node, p, n)?;
        }
        OpPlan::AddNumber(v) => {
            let delta = b.number(v)?;
            let old = g.graph().number(node, p)?;
            let n = old.checked_add(delta).ok_or_else(|| {
                InstructionError::value(format!("'{}' would overflow: {old} + {delta}", g.schema.property(p).name))
            })?;
            g.set_number(node, p, n)?;
        }
        OpPlan::SetText(v) => {
            let t = b.text(v)?;
            g.set_text(node, p, &t)?;
        }
        OpPlan::SetReference(v) => {
            let PropertyKind::Reference { target } = &g.schema.property(p).kind else { unreachable!() };
            let key = b.key(v)?;
            let target = g.graph().resolve(node, target, &key)?;
            g.set_reference(node, p, target.id)?;
        }
        OpPlan::Group(items) => {
            let group = g.graph().group(node, p);
            apply(g, group, items, init, b)?;
        }
        OpPlan::AddEntry { key, items } => {
            let entry = match &g.schema.property(p).kind {
                PropertyKind::Matrix { target, .. } => {
                    let k = b.key(key)?;
                    let t = g.graph().resolve(node, target, &k)?;
                    g.add_entry(node, p, EntryKey::Target(t.id))?
                }
                _ => {
                    let k = b.key(key)?;
                    g.add_entry(node, p, EntryKey::Text(&k[0]))?
                }
            };
            apply(g, entry, items, true, b)?;
            g.require_references(entry)?;
        }
        OpPlan::UpdateEntry { key, items } => {
            let entry = Nav { graph: g.graph() }.entry(node, p, key, b)?;
            apply(g, entry, items, init, b)?;
        }
        OpPlan::RemoveEntry { key } => {
            let entry = Nav { graph: g.graph() }.entry(node, p, key, b)?;
            match &g.schema.property(p).kind {
                PropertyKind::Matrix { .. } => {
                    let t = g.graph().matrix_target(entry)?;
                    g.remove_entry(node, p, EntryKey::Target(t))?;
                }
                _ => {
                    let k = g.graph().entry_key(entry)?;
                    g.remove_entry(node, p, EntryKey::Text(&k[0]))?;
                }
            }
        }
        OpPlan::SwitchState { state, items } => {
            let index = match state {
                StateChoice::Fixed(i) => *i,
                StateChoice::Param(value) => {
                    let s = b.text(value)?;
                    g.schema.state_index(p, &s).ok_or_else(|| {
                        InstructionError::value(format!(
                            "stategroup '{}' has no state '{s}'",
                            g.schema.property(p).name
                        ))
                    })?
                }
            };
            choose_state(g, node, p, index, items, init, b)?;
        }
        OpPlan::UpdateState { state, items } => {
            if init {
                choose_state(g, node, p, *state, items, true, b)?;
            } else {
                let child = Nav { graph: g.graph() }.state_step(node, p, *state)?;
                apply(g, child, items, false, b)?;
            }
        }
    }
    Ok(())
}

/// Switches to `index` (an error if already there, unless the node is new and the state is
/// its default), then initialises the state's node.
fn choose_state(
    g: &mut WriteGraph<'_, '_>,
    node: NodeRef,
    p: PropertyId,
    index: StateIndex,
    items: &[ItemPlan],
    init: bool,
    b: &mut Bindings<'_>,
) -> Result<(), InstructionError> {
    let (current, child) = g.view(node)?.state(p)?;
    let child = if init && current == index { child } else { g.switch_state(node, p, index)? };
    apply(g, child, items, true, b)?;
    g.require_references(child)?;
    Ok(())
}

/// A node and its subtree in dump form (see `docs/dump-format.md`), for `get`: the data
/// layer's exporter writes it, so `get` and `espalier export` never disagree.
pub(crate) fn node_json(graph: &Graph<'_>, node: NodeRef) -> Result<serde_json::Value, InstructionError> {
    parse_node(&node_dump(graph, node)?)
}

/// [`node_json`]'s first half: the node in dump form, as JSON text (the write transaction
/// stops here, and the reply is parsed after the commit, off the writer).
pub(crate) fn node_dump(graph: &Graph<'_>, node: NodeRef) -> Result<Vec<u8>, InstructionError> {
    let mut bytes = Vec::new();
    espalier_data::dump::export_node(graph, node, &mut bytes).map_err(|e| match e {
        espalier_data::dump::DumpError::Data(d) => InstructionError::Data(d),
        other => InstructionError::Data(DataError::Corrupt(other.to_string())),
    })?;
    Ok(bytes)
}

/// [`node_json`]'s second half: the dump form's text as a value.
pub(crate) fn parse_node(bytes: &[u8]) -> Result<serde_json::Value, InstructionError> {
    serde_json::from_slice(bytes).map_err(|e| InstructionError::Data(DataError::Corrupt(format!("node JSON: {e}"))))
}
