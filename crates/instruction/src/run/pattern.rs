//! Running pattern plans: nested loops over the planned bindings, filters as soon as their
//! variables are bound, `exists` as a semi-join that stops at the first match; then grouping,
//! distinct, order, offset and limit over the matches.
//!
//! Every loop is bounded: nodes visited count against [`MAX_VISITED_ROWS`], rows kept against
//! [`MAX_PATTERN_ROWS`], repetitions by the plan's `max` (at most
//! [`crate::parse::MAX_REPEAT`]), and walks up the tree by the data layer's depth bound.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use espalier_data::index::{self, IndexValue, Probe};
use espalier_data::{DataError, EntryKey, Graph, NodeId, NodeRef, NodeView};
use espalier_schema::{PropertyKind, StateIndex};
use smallvec::SmallVec;

use super::row_test::{RowTest, SlotCompare, SlotRead};
use super::{Bindings, QueryResult, Row, MAX_VISITED_ROWS};
use crate::ast::{Comparison, LeafKind};
use crate::plan::{
    Anchor, Block, Compared, IndexProbe, LitKind, MatchColumn, MatchCondition, MatchOp, MatchPlan, MatchStep,
    MatchStepKind, MatchTerm, PlanOp, UpFrom,
};
use crate::InstructionError;

pub(crate) mod fast_hash;
mod index_set;
mod link_set;
mod visit;

use fast_hash::{FastMap, FastSet};
use index_set::IndexSets;
use link_set::{LinkSets, Links, Side};
pub(crate) use visit::{streams, visit_match};

/// Most rows a pattern query keeps before ordering or grouping (the page alone when it has
/// neither order nor distinct nor grouping).
pub const MAX_PATTERN_ROWS: usize = 1_000_000;

type Result<T> = std::result::Result<T, InstructionError>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    Go,
    Stop,
}

/// A node reached by a walk; its record is read only when a step or a value needs it.
#[derive(Clone, Copy)]
struct Cur<'g> {
    node: NodeRef,
    view: Option<NodeView<'g>>,
}

impl<'g> Cur<'g> {
    fn bare(node: NodeRef) -> Cur<'g> {
        Cur { node, view: None }
    }

    fn of(view: NodeView<'g>) -> Cur<'g> {
        Cur { node: view.node, view: Some(view) }
    }
}

/// A bound variable; the record, once read, is kept for the other terms that read it.
///
/// `repr(C)` with the view first: in Rust's layout a binding was copied through a stack
/// temporary shifted by `NodeRef`'s 4 bytes of padding, and the reloads across two stores
/// stalled store forwarding (`perf annotate`: a third of OO7 Q7's time, 1.84 → 1.29 ms).
#[derive(Clone, Copy)]
#[repr(C)]
struct Slot<'g> {
    view: Option<NodeView<'g>>,
    node: NodeRef,
}

/// The variables' bindings. Cells, so that a scan can bind its variable while the walk that
/// produces the candidates still reads the others (streaming: no candidate lists).
type Env<'g> = [Cell<Option<Slot<'g>>>];

/// A literal or parameter, resolved once per run.
pub(crate) enum Lit {
    Int(i64),
    Text(String),
    Key(Vec<String>),
}

/// A value read from a leaf, borrowed from the snapshot or the literals where it can be: a
/// condition on every row of a scan allocates nothing.
enum Leaf<'a> {
    Number(i64),
    Text(Cow<'a, str>),
    State(StateIndex, &'a str),
    Key(Cow<'a, [String]>),
}

/// A result value: a column, a grouping key, a sort key.
#[derive(Debug, Clone)]
enum Val {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
    List(Vec<Val>),
}

impl Val {
    fn rank(&self) -> u8 {
        match self {
            Val::Null => 0,
            Val::Int(_) | Val::Float(_) => 1,
            Val::Text(_) => 2,
            Val::List(_) => 3,
        }
    }

    fn cmp_total(&self, other: &Val) -> Ordering {
        match (self, other) {
            (Val::Int(a), Val::Int(b)) => a.cmp(b),
            (Val::Int(a), Val::Float(b)) => (*a as f64).total_cmp(b),
            (Val::Float(a), Val::Int(b)) => a.total_cmp(&(*b as f64)),
            (Val::Float(a), Val::Float(b)) => a.total_cmp(b),
            (Val::Text(a), Val::Text(b)) => a.cmp(b),
            (Val::List(a), Val::List(b)) => {
                for (x, y) in a.iter().zip(b) {
                    let o = x.cmp_total(y);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                a.len().cmp(&b.len())
            }
            _ => self.rank().cmp(&other.rank()),
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Val::Null => serde_json::Value::Null,
            Val::Int(i) => serde_json::Value::from(*i),
            Val::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, serde_json::Value::Number)
            }
            Val::Text(t) => serde_json::Value::from(t.clone()),
            Val::List(l) => serde_json::Value::Array(l.iter().map(Val::json).collect()),
        }
    }

    /// [`Val::json`], moving the texts instead of copying them (a result's rows).
    fn into_json(self) -> serde_json::Value {
        match self {
            Val::Text(t) => serde_json::Value::String(t),
            Val::List(l) => serde_json::Value::Array(l.into_iter().map(Val::into_json).collect()),
            other => other.json(),
        }
    }

    /// A key path as the instruction language shows keys: one component as text, several as
    /// a list.
    fn key(mut parts: Vec<String>) -> Val {
        if parts.len() == 1 {
            Val::Text(parts.pop().unwrap_or_default())
        } else {
            Val::List(parts.into_iter().map(Val::Text).collect())
        }
    }
}

impl PartialEq for Val {
    fn eq(&self, other: &Val) -> bool {
        self.cmp_total(other) == Ordering::Equal
    }
}

impl Eq for Val {}

impl Hash for Val {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match self {
            Val::Null => 0u8.hash(h),
            // Equal numbers hash alike whether integer or not.
            Val::Int(i) => (*i as f64).to_bits().hash(h),
            Val::Float(f) => f.to_bits().hash(h),
            Val::Text(t) => t.hash(h),
            Val::List(l) => l.hash(h),
        }
    }
}

struct Exec<'g, 'p> {
    graph: Graph<'g>,
    /// Set by someone else to stop the run.
    cancel: Option<&'p std::sync::atomic::AtomicBool>,
    plan: &'p MatchPlan,
    lits: Vec<Lit>,
    visited: Cell<u64>,
    /// By operation id: what the run keeps for each operation (one allocation for all three:
    /// a lookup's run is a few microseconds, and each allocation a tenth of one).
    ops: Vec<OpRun>,
    /// By column: the number or text the column reads (or aggregates), when it is a
    /// variable's own, compiled to its byte position.
    column_slots: Vec<Option<SlotRead>>,
    /// Links of the starts that reach filters ask about again and again.
    link_sets: RefCell<LinkSets>,
    /// Number indexes a join probes often, read whole.
    index_sets: RefCell<IndexSets>,
}

/// What a run keeps for one operation of its plan.
#[derive(Default)]
struct OpRun {
    /// Rows the operation let through (for `explain`).
    produced: Cell<u64>,
    /// The filter compiled to a test of one variable's record, if it is one.
    test: Option<RowTest>,
    /// The filter compiled to a comparison of two variables' numbers, if it is one (and no
    /// [`RowTest`]).
    compare: Option<SlotCompare>,
    /// An index probe's joined number compiled to its slot, if it is one (OO7 Q8 probes the
    /// documents' `'Id'` with every atomic part's `'Doc Id'`).
    joined: Option<SlotRead>,
    /// The filter compiled to one variable's links asked for another, if it is one (and no
    /// [`RowTest`] or [`SlotCompare`]).
    reach: Option<ReachTest>,
}

/// A filter whether one matrix step from a variable arrives at another variable, or not
/// (RouteSensor's `not route > 'Requires' reaches sensor`, asked for every sensor bound inside
/// one route): answered by [`Exec::reach_one`] without going through the condition's tree.
#[derive(Clone, Copy)]
struct ReachTest {
    from: usize,
    property: espalier_schema::PropertyId,
    /// The side of the links `from` is on.
    side: Side,
    to: usize,
    /// A `not` around it.
    negated: bool,
}

impl ReachTest {
    fn compile(c: &MatchCondition) -> Option<ReachTest> {
        match c {
            MatchCondition::Not(inner) => ReachTest::compile(inner).map(|r| ReachTest { negated: !r.negated, ..r }),
            MatchCondition::Reach { from: Anchor::Var(from), steps, to: Some(Anchor::Var(to)) } => {
                let [step] = &steps[..] else { return None };
                let (property, side) = match step.kind {
                    MatchStepKind::Targets(p) => (p, Side::Owner),
                    MatchStepKind::Owners(p) => (p, Side::Target),
                    _ => return None,
                };
                Some(ReachTest { from: *from, property, side, to: *to, negated: false })
            }
            _ => None,
        }
    }
}

pub(crate) fn run_match(
    graph: Graph<'_>,
    plan: &MatchPlan,
    b: &mut Bindings<'_>,
) -> std::result::Result<QueryResult, InstructionError> {
    let exec = Exec::new(graph, plan, b)?;
    let mut acc = Accumulator::new(&exec);
    let env = unbound(plan);
    exec.block(&plan.block.ops, &env, &mut |ex, env| {
        acc.add(ex, env)?;
        Ok(Flow::Go)
    })?;
    let result = acc.finish(plan)?;
    if plan.explain {
        return Ok(explain(&exec, graph, &result));
    }
    Ok(result)
}

/// One matrix's links in a snapshot, as [`LinkSets`] reads them.
struct MatrixLinks<'g> {
    graph: Graph<'g>,
    property: espalier_schema::PropertyId,
    side: Side,
}

impl Links for MatrixLinks<'_> {
    fn count(&self) -> Result<u64> {
        Ok(self.graph.matrix_len(self.property)?)
    }

    fn read(&self, start: NodeId, sink: &mut dyn FnMut(NodeId) -> Result<bool>) -> Result<()> {
        let (g, p) = (&self.graph, self.property);
        match self.side {
            Side::Owner => {
                for entry in g.entries(NodeRef { id: start, ty: start.node_type() }, p)? {
                    if !sink(g.matrix_target_of(p, entry?.0)?)? {
                        break;
                    }
                }
            }
            Side::Target => {
                for owner in g.owners(start, p)? {
                    if !sink(owner)? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn read_all(&self, sink: &mut dyn FnMut(u32, NodeId) -> bool) -> Result<()> {
        for link in self.graph.matrix_links(self.property, self.side == Side::Target)? {
            let (row, link) = link?;
            if !sink(row, link) {
                break;
            }
        }
        Ok(())
    }
}

/// A number index in a snapshot, as [`IndexSets`] reads it.
struct NumberIndexOf<'g> {
    graph: Graph<'g>,
    index: u32,
}

impl index_set::NumberIndex for NumberIndexOf<'_> {
    fn count(&self) -> Result<u64> {
        Ok(index::len(self.graph, self.index)?)
    }

    fn read_all(&self, sink: &mut dyn FnMut(i64, NodeId) -> bool) -> Result<()> {
        for entry in index::number_rows(self.graph, self.index)? {
            let (value, id) = entry?;
            if !sink(value, id) {
                break;
            }
        }
        Ok(())
    }
}

/// Bindings with no variable bound yet; up to eight in place, not allocated (OO7 Q1's ten
/// one-row lookups: the run's allocations were a tenth of its instructions).
fn unbound<'g>(plan: &MatchPlan) -> SmallVec<[Cell<Option<Slot<'g>>>; 8]> {
    (0..plan.vars.len()).map(|_| Cell::new(None)).collect()
}

/// A match of a registered query: its top variables' nodes (in `plan.top` order) and its row.
pub(crate) type Found = (Vec<NodeRef>, Vec<serde_json::Value>);

/// Runs a registered query's plan in pieces, on one snapshot (see `crate::incremental`).
pub(crate) struct Matcher<'g, 'p> {
    exec: Exec<'g, 'p>,
}

impl<'g, 'p> Matcher<'g, 'p> {
    pub(crate) fn new<'b: 'p>(graph: Graph<'g>, plan: &'p MatchPlan, b: &mut Bindings<'b>) -> Result<Self> {
        Ok(Matcher { exec: Exec::new(graph, plan, b)? })
    }

    /// Every match of `block` with the `seeds` bound before it starts (the main block with
    /// none), leaving out those a column has no value for, as a query does.
    pub(crate) fn matches(
        &self,
        block: &crate::plan::Block,
        seeds: &[(usize, NodeRef)],
        found: &mut dyn FnMut(Found) -> Result<()>,
    ) -> Result<()> {
        let plan = self.exec.plan;
        let env = unbound(plan);
        for &(var, node) in seeds {
            assert_eq!(node.ty, plan.vars[var].ty, "a seed has its variable's type");
            env[var].set(Some(Slot { node, view: None }));
        }
        self.exec.block(&block.ops, &env, &mut |ex, env| {
            if let Some(row) = ex.row(env, None)? {
                let nodes = plan.top.iter().map(|&v| ex.slot(env, v).node).collect();
                found((nodes, row.into_iter().map(Val::into_json).collect()))?;
            }
            Ok(Flow::Go)
        })?;
        Ok(())
    }

    /// Every node the steps reach from `start` (each once).
    pub(crate) fn walk(&self, start: NodeRef, steps: &[MatchStep], sink: &mut dyn FnMut(NodeRef)) -> Result<()> {
        let env = unbound(self.exec.plan);
        let mut seen = FastSet::default();
        self.exec.walk(Cur::bare(start), steps, &env, &mut |c| {
            if seen.insert(c.node) {
                sink(c.node);
            }
            Ok(Flow::Go)
        })?;
        Ok(())
    }
}

impl<'g, 'p> Exec<'g, 'p> {
    /// An executor for `plan`, its literals and parameters resolved.
    fn new<'b: 'p>(graph: Graph<'g>, plan: &'p MatchPlan, b: &mut Bindings<'b>) -> Result<Self> {
        let mut lits = Vec::with_capacity(plan.values.len());
        for (v, kind) in &plan.values {
            lits.push(match kind {
                LitKind::Number => Lit::Int(b.number(v)?),
                LitKind::Text => Lit::Text(b.text(v)?),
                LitKind::Key(arity) => {
                    let k = b.key(v)?;
                    if k.len() != *arity {
                        return Err(InstructionError::value(format!(
                            "key {k:?} has {} components; {arity} are needed here",
                            k.len()
                        )));
                    }
                    Lit::Key(k)
                }
            });
        }
        let mut ops: Vec<OpRun> = (0..plan.op_count).map(|_| OpRun::default()).collect();
        let blocks = std::iter::once(&plan.block)
            .chain(plan.seeded.iter().map(|(_, b)| b))
            .chain(plan.paired.iter().map(|(_, b)| b));
        for block in blocks {
            compile_tests(block, &lits, graph.schema, &mut ops);
        }
        let column_slots = plan
            .columns
            .iter()
            .map(|col| match col {
                MatchColumn::Term(t)
                | MatchColumn::Count { term: Some(t), .. }
                | MatchColumn::Sum(t)
                | MatchColumn::Min(t)
                | MatchColumn::Max(t)
                | MatchColumn::Avg(t) => SlotRead::compile(t, graph.schema),
                MatchColumn::Count { term: None, .. } | MatchColumn::Shortest { .. } => None,
            })
            .collect();
        Ok(Exec {
            graph,
            plan,
            ops,
            column_slots,
            link_sets: RefCell::default(),
            index_sets: RefCell::default(),
            lits,
            visited: Cell::new(0),
            cancel: b.cancel,
        })
    }
}

/// Compiles every filter of `block` (and of the blocks inside its conditions) that reads one
/// variable's record alone into its operation's test, and each that compares two variables'
/// own numbers into its comparison, by operation id.
fn compile_tests(block: &Block, lits: &[Lit], schema: &espalier_schema::Schema, ops: &mut [OpRun]) {
    for op in &block.ops {
        if let MatchOp::Index { probe: IndexProbe::EqualTerm(t), .. } = &op.kind {
            if let Some(run) = ops.get_mut(op.id) {
                run.joined = SlotRead::compile(t, schema).filter(|r| r.kind == LeafKind::Number);
            }
        }
        if let MatchOp::Filter(c) = &op.kind {
            if let Some(run) = ops.get_mut(op.id) {
                let number = |i: usize| match lits.get(i) {
                    Some(Lit::Int(n)) => Some(*n),
                    _ => None,
                };
                run.test = RowTest::compile(c, &number, schema);
                if run.test.is_none() {
                    run.compare = SlotCompare::compile(c, schema);
                }
                if run.test.is_none() && run.compare.is_none() {
                    run.reach = ReachTest::compile(c);
                }
            }
            compile_inner(c, lits, schema, ops);
        }
    }
}

/// [`compile_tests`] for the blocks inside a condition (`exists`).
fn compile_inner(c: &MatchCondition, lits: &[Lit], schema: &espalier_schema::Schema, ops: &mut [OpRun]) {
    match c {
        MatchCondition::And(list) | MatchCondition::Or(list) => {
            list.iter().for_each(|c| compile_inner(c, lits, schema, ops))
        }
        MatchCondition::Not(c) => compile_inner(c, lits, schema, ops),
        MatchCondition::Exists(b) => compile_tests(b, lits, schema, ops),
        _ => {}
    }
}

/// The plan, one row per operation: what it does, the planner's estimate of its rows (per
/// run of its block) and the rows it produced in this run (over all runs of its block); the
/// last row is the output stage with the rows of the result.
fn explain(exec: &Exec<'_, '_>, graph: Graph<'_>, result: &QueryResult) -> QueryResult {
    let rows = exec
        .plan
        .lines(graph.schema)
        .into_iter()
        .map(|line| {
            let estimate = line.estimate.map_or(serde_json::Value::Null, |e| {
                let rounded = (e * 10.0).round() / 10.0;
                serde_json::Number::from_f64(rounded).map_or(serde_json::Value::Null, serde_json::Value::Number)
            });
            let actual = match line.op {
                Some(id) => exec.ops.get(id).map_or(0, |o| o.produced.get()),
                None => result.total,
            };
            Row {
                key: Vec::new(),
                values: vec![serde_json::Value::from(line.text), estimate, serde_json::Value::from(actual)],
            }
        })
        .collect::<Vec<_>>();
    QueryResult {
        total: rows.len() as u64,
        columns: vec!["operation".into(), "estimated rows".into(), "actual rows".into()],
        rows,
    }
}

impl<'g> Exec<'g, '_> {
    fn tick(&self) -> Result<()> {
        let n = self.visited.get() + 1;
        self.visited.set(n);
        if n > MAX_VISITED_ROWS {
            return Err(InstructionError::Limit(format!("pattern query visits more than {MAX_VISITED_ROWS} nodes")));
        }
        if super::must_stop(self.cancel, n) {
            return Err(super::cancelled());
        }
        Ok(())
    }

    fn load(&self, cur: &mut Cur<'g>) -> Result<NodeView<'g>> {
        match cur.view {
            Some(v) => Ok(v),
            None => {
                let v = self.view(cur.node)?;
                cur.view = Some(v);
                Ok(v)
            }
        }
    }

    /// A node's record: a row read by id (a page lookup), cheaper than any cache of it.
    fn view(&self, node: NodeRef) -> Result<NodeView<'g>> {
        Ok(self.graph.view(node)?)
    }

    /// The record id of an entry's or state's parent, from its row's header.
    fn parent_id(&self, id: NodeId) -> Result<NodeId> {
        Ok(self.graph.header(id)?.parent)
    }

    #[inline]
    fn slot(&self, env: &Env<'g>, var: usize) -> Slot<'g> {
        env[var].get().expect("planned: variables are bound before use")
    }

    fn var_cur(&self, env: &Env<'g>, var: usize) -> Cur<'g> {
        let s = self.slot(env, var);
        Cur { node: s.node, view: s.view }
    }

    /// The 8-byte slot a compiled column reads in its variable's record: a number, or a
    /// text's string id.
    #[inline]
    fn slot_word(&self, r: &SlotRead, env: &Env<'g>) -> Result<u64> {
        Ok(espalier_data::record::read_u64(self.var_view(env, r.var)?.record(), r.at)?)
    }

    #[inline]
    fn var_view(&self, env: &Env<'g>, var: usize) -> Result<NodeView<'g>> {
        let s = self.slot(env, var);
        match s.view {
            Some(v) => Ok(v),
            None => {
                let v = self.view(s.node)?;
                env[var].set(Some(Slot { view: Some(v), ..s }));
                Ok(v)
            }
        }
    }

    fn anchor(&self, a: &Anchor, env: &Env<'g>) -> Cur<'g> {
        match a {
            Anchor::Root => Cur::bare(NodeRef::ROOT),
            Anchor::Var(v) => self.var_cur(env, *v),
        }
    }

    fn text_lit(&self, i: usize) -> &str {
        match &self.lits[i] {
            Lit::Text(t) => t,
            _ => unreachable!("checked: text literal"),
        }
    }

    // ---- blocks ----

    fn block(
        &self,
        ops: &[PlanOp],
        env: &Env<'g>,
        emit: &mut dyn FnMut(&Self, &Env<'g>) -> Result<Flow>,
    ) -> Result<Flow> {
        let Some((op, rest)) = ops.split_first() else {
            return emit(self, env);
        };
        let run = &self.ops[op.id];
        let produced = &run.produced;
        match &op.kind {
            MatchOp::Filter(c) => {
                let fast = match (&run.test, &run.compare, &run.reach) {
                    (Some(t), _, _) => t.holds(self.var_view(env, t.var)?.record()),
                    (None, Some(c), _) => {
                        c.holds(self.var_view(env, c.left.var)?.record(), self.var_view(env, c.right.var)?.record())
                    }
                    (None, None, Some(r)) => {
                        let (start, goal) = (self.slot(env, r.from).node, self.slot(env, r.to).node);
                        Some(self.reach_one(r.property, r.side, start, goal)? != r.negated)
                    }
                    (None, None, None) => None,
                };
                let holds = match fast {
                    Some(h) => h,
                    None => self.holds(c, env)?,
                };
                if holds {
                    produced.set(produced.get() + 1);
                    self.block(rest, env, emit)
                } else {
                    Ok(Flow::Go)
                }
            }
            MatchOp::Index { var, index, probe } => {
                let ty = self.plan.vars[*var].ty;
                let flow = self.index_probes(*index, probe, run.joined.as_ref(), env, &mut |id, view| {
                    self.tick()?;
                    env[*var].set(Some(Slot { node: NodeRef { id, ty }, view }));
                    produced.set(produced.get() + 1);
                    // A probe is often the block's last operation (OO7's Q2 and Q3): each match
                    // straight to `emit`, as `table_scan` does.
                    if rest.is_empty() {
                        emit(self, env)
                    } else {
                        self.block(rest, env, emit)
                    }
                })?;
                env[*var].set(None);
                Ok(flow)
            }
            MatchOp::Scan { var, from, steps, dedupe, .. } => {
                if crate::plan::reads_table(from, steps) {
                    let ty = steps.last().map_or(espalier_schema::ROOT, |s| s.to);
                    if let Some(flow) = self.table_scan(op, *var, ty, rest, env, emit)? {
                        return Ok(flow);
                    }
                }
                let start = self.anchor(from, env);
                // Each candidate is bound and the rest of the block runs on it right away.
                let mut seen: Option<FastSet<NodeRef>> = dedupe.then(FastSet::default);
                let flow = self.walk(start, steps, env, &mut |c| {
                    if let Some(seen) = seen.as_mut() {
                        if !seen.insert(c.node) {
                            return Ok(Flow::Go);
                        }
                    }
                    env[*var].set(Some(Slot { node: c.node, view: c.view }));
                    produced.set(produced.get() + 1);
                    self.block(rest, env, emit)
                })?;
                env[*var].set(None);
                Ok(flow)
            }
        }
    }

    /// Binds `var` to every node of type `ty` by reading a table, running the rest of the
    /// block on each; `None` if the type has no table (the caller walks instead). The filters
    /// right after that test the variable's record alone run on its bytes before it is
    /// bound. When one of them asks for a state whose node has a table, that (smaller) table
    /// is read and each row's parent is the candidate: every node in that state has exactly
    /// one row there, and the filters still run on the parent's record.
    fn table_scan(
        &self,
        op: &PlanOp,
        var: usize,
        ty: espalier_schema::NodeTypeId,
        rest: &[PlanOp],
        env: &Env<'g>,
        emit: &mut dyn FnMut(&Self, &Env<'g>) -> Result<Flow>,
    ) -> Result<Option<Flow>> {
        let tested = rest.iter().take_while(|f| self.ops[f.id].test.as_ref().is_some_and(|t| t.var == var)).count();
        let (filters, rest) = rest.split_at(tested);
        let produced = &self.ops[op.id].produced;
        let mut one = |view: NodeView<'g>| -> Result<Flow> {
            self.tick()?;
            produced.set(produced.get() + 1);
            for f in filters {
                let filter = &self.ops[f.id];
                let test = filter.test.as_ref().expect("counted above");
                match test.holds(view.record()) {
                    Some(true) => filter.produced.set(filter.produced.get() + 1),
                    Some(false) => return Ok(Flow::Go),
                    None => return Err(DataError::Corrupt(format!("record {} is too short", view.node.id)).into()),
                }
            }
            env[var].set(Some(Slot { node: view.node, view: Some(view) }));
            // The scan is often the block's last operation: each match straight to `emit`.
            if rest.is_empty() {
                emit(self, env)
            } else {
                self.block(rest, env, emit)
            }
        };
        let g = &self.graph;
        let mut flow = Flow::Go;
        let asked = filters.iter().find_map(|f| self.state_asked(f, var));
        if let Some((st, states)) = asked.and_then(|st| Some((st, g.nodes_of(st)?))) {
            for state in states {
                let parent = espalier_data::record::parent(g.schema, st, state.record())?;
                flow = one(g.view(NodeRef { id: parent, ty })?)?;
                if flow == Flow::Stop {
                    break;
                }
            }
        } else if let Some(nodes) = g.nodes_of(ty) {
            for view in nodes {
                flow = one(view)?;
                if flow == Flow::Stop {
                    break;
                }
            }
        } else {
            return Ok(None);
        }
        env[var].set(None);
        Ok(Some(flow))
    }

    /// The node type of the state filter `f` asks `var`'s own stategroup to be in
    /// (`var ? 'G' * 'S'`, or `var stategroup : 'G' == 'S'`), if it is one.
    fn state_asked(&self, f: &PlanOp, var: usize) -> Option<espalier_schema::NodeTypeId> {
        let (p, s) = match &f.kind {
            MatchOp::Filter(MatchCondition::Reach { from: Anchor::Var(v), steps, to: None }) if *v == var => {
                match steps.as_slice() {
                    [MatchStep { kind: MatchStepKind::State(p, s), .. }] => (*p, *s),
                    _ => return None,
                }
            }
            MatchOp::Filter(MatchCondition::States {
                term: MatchTerm::Leaf { var: v, steps, property, .. },
                states,
            }) if *v == var && steps.is_empty() && states.len() == 1 => (*property, states[0]),
            _ => return None,
        };
        match &self.graph.schema.property(p).kind {
            PropertyKind::StateGroup { states } => states.get(s as usize).map(|st| st.node),
            _ => None,
        }
    }

    /// Sends every entry record id index `index` holds for `probe` to `sink`, with a view of
    /// its record where the index read found it; `joined`: the probe's joined number compiled
    /// to its slot.
    fn index_probes(
        &self,
        index: u32,
        probe: &IndexProbe,
        joined: Option<&SlotRead>,
        env: &Env<'g>,
        sink: &mut dyn FnMut(NodeId, Option<NodeView<'g>>) -> Result<Flow>,
    ) -> Result<Flow> {
        // A join's value, read from the variables bound before; none matches nothing (the
        // condition's filter, which follows, would refuse every row).
        let joined = match (probe, joined) {
            (IndexProbe::EqualTerm(_), Some(r)) => Some(Leaf::Number(self.slot_word(r, env)? as i64)),
            (IndexProbe::EqualTerm(t), None) => match self.leaf(t, env)? {
                Some(leaf) => Some(leaf),
                None => return Ok(Flow::Go),
            },
            _ => None,
        };
        let value = |i: usize| match &self.lits[i] {
            Lit::Int(n) => IndexValue::Number(*n),
            Lit::Text(t) => IndexValue::Text(t),
            Lit::Key(_) => unreachable!("planned: an index is probed with a number or a text"),
        };
        // The rows go to `sink` as the index is read: no list per probe.
        let mut run = |p: Probe<'_>| -> Result<Flow> {
            let mut flow = Flow::Go;
            index::probe_each::<InstructionError>(self.graph, index, p, &mut |view| {
                flow = sink(view.node.id, Some(view))?;
                Ok(flow == Flow::Go)
            })?;
            Ok(flow)
        };
        match probe {
            IndexProbe::Equal(v) => run(Probe::Equal(value(*v))),
            IndexProbe::EqualTerm(_) => match &joined {
                Some(Leaf::Number(n)) => {
                    let source = NumberIndexOf { graph: self.graph, index };
                    let Some(rows) = self.index_sets.borrow_mut().probe(index, *n, &source)? else {
                        return run(Probe::Equal(IndexValue::Number(*n)));
                    };
                    for i in 0..rows.1 as usize {
                        let id = self.index_sets.borrow().row(rows, i);
                        if sink(id, None)? == Flow::Stop {
                            return Ok(Flow::Stop);
                        }
                    }
                    Ok(Flow::Go)
                }
                Some(Leaf::Text(t)) => run(Probe::Equal(IndexValue::Text(t))),
                // Planned for numbers and texts only.
                Some(Leaf::State(..) | Leaf::Key(_)) | None => Ok(Flow::Go),
            },
            IndexProbe::States(list) => {
                for &s in list {
                    if run(Probe::Equal(IndexValue::State(s)))? == Flow::Stop {
                        return Ok(Flow::Stop);
                    }
                }
                Ok(Flow::Go)
            }
            IndexProbe::Prefix(v) => run(Probe::Prefix(self.text_lit(*v))),
            IndexProbe::Range { low, high } => run(Probe::Range { low: low.map(value), high: high.map(value) }),
        }
    }

    fn holds(&self, c: &MatchCondition, env: &Env<'g>) -> Result<bool> {
        Ok(match c {
            MatchCondition::And(list) => {
                for c in list {
                    if !self.holds(c, env)? {
                        return Ok(false);
                    }
                }
                true
            }
            MatchCondition::Or(list) => {
                for c in list {
                    if self.holds(c, env)? {
                        return Ok(true);
                    }
                }
                false
            }
            MatchCondition::Not(c) => !self.holds(c, env)?,
            MatchCondition::Exists(block) => self.block(&block.ops, env, &mut |_, _| Ok(Flow::Stop))? == Flow::Stop,
            MatchCondition::Reach { from, steps, to } => {
                let start = self.anchor(from, env);
                let goal = to.map(|a| self.anchor(&a, env).node);
                self.reaches(start, steps, env, goal)?
            }
            MatchCondition::Compare { left, op, right, how: Compared::Number } => {
                // Numbers without a `Leaf` between: the filter on every row of a scan.
                let (Some(l), Some(r)) = (self.number(left, env)?, self.number(right, env)?) else {
                    return Ok(false);
                };
                op.holds(l.cmp(&r))
            }
            MatchCondition::Compare {
                left: MatchTerm::Leaf { var: lv, steps: ls, property: lp, .. },
                op,
                right: MatchTerm::Leaf { var: rv, steps: rs, property: rp, .. },
                how: Compared::StateName,
            } if ls.is_empty() && rs.is_empty() => {
                // Two variables' own stategroups (a switch's position against the one a route
                // asks for): their names from the indexes in the records, no `Leaf` between.
                let g = &self.graph;
                let l = g.state_name(*lp, self.var_view(env, *lv)?.state_index(*lp)?);
                let r = g.state_name(*rp, self.var_view(env, *rv)?.state_index(*rp)?);
                op.holds(l.cmp(r))
            }
            MatchCondition::Compare { left, op, right, how } => {
                let (Some(l), Some(r)) = (self.leaf(left, env)?, self.leaf(right, env)?) else {
                    return Ok(false);
                };
                compare(&l, *op, &r, *how)
            }
            MatchCondition::Prefix { term, prefix } => match self.leaf(term, env)? {
                Some(Leaf::Text(t)) => t.starts_with(self.text_lit(*prefix)),
                _ => false,
            },
            MatchCondition::States { term, states } => match self.leaf(term, env)? {
                Some(Leaf::State(s, _)) => states.contains(&s),
                _ => false,
            },
        })
    }

    // ---- walks ----

    /// Sends every node the steps reach from `cur` to `sink`, until it says stop.
    fn walk(
        &self,
        mut cur: Cur<'g>,
        steps: &[MatchStep],
        env: &Env<'g>,
        sink: &mut dyn FnMut(Cur<'g>) -> Result<Flow>,
    ) -> Result<Flow> {
        let Some((step, rest)) = steps.split_first() else {
            return sink(cur);
        };
        let g = &self.graph;
        match &step.kind {
            MatchStepKind::Group(p) => {
                let node = NodeRef { id: cur.node.id, ty: step.to };
                let view = cur.view.map(|v| v.group(*p));
                self.walk(Cur { node, view }, rest, env, sink)
            }
            MatchStepKind::Entries(p) => {
                for entry in g.entry_views(cur.node, *p)? {
                    let (_, v) = entry?;
                    self.tick()?;
                    if self.walk(Cur::of(v), rest, env, sink)? == Flow::Stop {
                        return Ok(Flow::Stop);
                    }
                }
                Ok(Flow::Go)
            }
            MatchStepKind::EntryKey(p, k) => match self.entry_by_key(cur.node, *p, *k)? {
                Some(v) => self.walk(Cur::of(v), rest, env, sink),
                None => Ok(Flow::Go),
            },
            MatchStepKind::EntryOf(p, var) => {
                let target = self.slot(env, *var).node.id;
                match g.find_entry_view(cur.node, *p, EntryKey::Target(target))? {
                    Some(v) => self.walk(Cur::of(v), rest, env, sink),
                    None => Ok(Flow::Go),
                }
            }
            MatchStepKind::State(p, s) => {
                let (current, child) = self.load(&mut cur)?.state(*p)?;
                if current != *s {
                    return Ok(Flow::Go);
                }
                self.walk(Cur::bare(child), rest, env, sink)
            }
            MatchStepKind::Reference(p) => {
                let id = self.load(&mut cur)?.reference(*p)?;
                if id.is_none() {
                    return Err(
                        DataError::Corrupt(format!("reference '{}' is unset", g.schema.property(*p).name)).into()
                    );
                }
                self.walk(Cur::bare(NodeRef { id, ty: step.to }), rest, env, sink)
            }
            MatchStepKind::Targets(p) | MatchStepKind::Owners(p) => {
                let side = if let MatchStepKind::Targets(_) = step.kind { Side::Owner } else { Side::Target };
                if let Some(list) = self.links(*p, side, cur.node)? {
                    for i in 0..list.len() {
                        self.tick()?;
                        let id = self.link_sets.borrow().link(list, i);
                        if self.walk(Cur::bare(NodeRef { id, ty: step.to }), rest, env, sink)? == Flow::Stop {
                            return Ok(Flow::Stop);
                        }
                    }
                    return Ok(Flow::Go);
                }
                // Not kept: read from the key index as the walk goes (the target is in the
                // matrix key, the owner in the link index's row: no entry row is read).
                let mut flow = Flow::Go;
                MatrixLinks { graph: *g, property: *p, side }.read(cur.node.id, &mut |id| {
                    self.tick()?;
                    flow = self.walk(Cur::bare(NodeRef { id, ty: step.to }), rest, env, sink)?;
                    Ok(flow == Flow::Go)
                })?;
                Ok(flow)
            }
            MatchStepKind::Referrers(p) => {
                for source in g.referrers(cur.node.id, *p)? {
                    self.tick()?;
                    let node = NodeRef { id: source?, ty: step.to };
                    if self.walk(Cur::bare(node), rest, env, sink)? == Flow::Stop {
                        return Ok(Flow::Stop);
                    }
                }
                Ok(Flow::Go)
            }
            MatchStepKind::Up(from) => {
                let id = match from {
                    UpFrom::Group(_) => cur.node.id,
                    UpFrom::Entry(_) | UpFrom::State(..) => self.parent_id(cur.node.id)?,
                };
                self.walk(Cur::bare(NodeRef { id, ty: step.to }), rest, env, sink)
            }
            MatchStepKind::UpIfKey(p, k) => {
                let parent = NodeRef { id: self.parent_id(cur.node.id)?, ty: step.to };
                match self.entry_by_key(parent, *p, *k)? {
                    Some(v) if v.node.id == cur.node.id => self.walk(Cur::bare(parent), rest, env, sink),
                    _ => Ok(Flow::Go),
                }
            }
            MatchStepKind::UpIfTarget(_, var) => {
                if g.matrix_target(cur.node)? != self.slot(env, *var).node.id {
                    return Ok(Flow::Go);
                }
                let parent = NodeRef { id: self.parent_id(cur.node.id)?, ty: step.to };
                self.walk(Cur::bare(parent), rest, env, sink)
            }
            MatchStepKind::Repeat { min, max, body } => self.walk_repeat(cur, (*min, *max), body, rest, env, sink),
        }
    }

    /// A `repeat` step, breadth first: each node once, at its shortest distance, then `rest`
    /// from it. Out of [`Exec::walk`], whose other steps are its hot path: its sets and lists
    /// would make every walk call pay for their stack frame.
    #[inline(never)]
    fn walk_repeat(
        &self,
        cur: Cur<'g>,
        (min, max): (u32, u32),
        body: &[MatchStep],
        rest: &[MatchStep],
        env: &Env<'g>,
        sink: &mut dyn FnMut(Cur<'g>) -> Result<Flow>,
    ) -> Result<Flow> {
        let mut seen: FastSet<NodeRef> = FastSet::from_iter([cur.node]);
        if min == 0 && self.walk(cur, rest, env, sink)? == Flow::Stop {
            return Ok(Flow::Stop);
        }
        let mut frontier = vec![cur];
        for depth in 1..=max {
            let mut next = Vec::new();
            for n in frontier {
                self.walk(n, body, env, &mut |c| {
                    if seen.insert(c.node) {
                        next.push(c);
                    }
                    Ok(Flow::Go)
                })?;
            }
            if depth >= min {
                for c in &next {
                    if self.walk(*c, rest, env, sink)? == Flow::Stop {
                        return Ok(Flow::Stop);
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        Ok(Flow::Go)
    }

    /// `node`'s links through matrix `p` on `side`, kept by the run (see [`LinkSets`]);
    /// `None` when they are not kept.
    fn links(&self, p: espalier_schema::PropertyId, side: Side, node: NodeRef) -> Result<Option<link_set::List>> {
        self.link_sets.borrow_mut().list(p, side, node.id, &MatrixLinks { graph: self.graph, property: p, side })
    }

    /// The entry of `p` under `owner` with the key in literal `k`.
    fn entry_by_key(&self, owner: NodeRef, p: espalier_schema::PropertyId, k: usize) -> Result<Option<NodeView<'g>>> {
        let g = &self.graph;
        match (&g.schema.property(p).kind, &self.lits[k]) {
            (PropertyKind::Matrix { target, .. }, Lit::Key(key)) => match g.resolve(owner, target, key) {
                Ok(t) => Ok(g.find_entry_view(owner, p, EntryKey::Target(t.id))?),
                Err(DataError::KeyMissing { .. } | DataError::StateNotSelected { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            },
            (_, Lit::Text(t)) => Ok(g.find_entry_view(owner, p, EntryKey::Text(t))?),
            _ => unreachable!("checked: keys fit their collection"),
        }
    }

    /// Whether one step of matrix `p` from `start` (on `side` of its links) arrives at `goal`:
    /// a search in the start's links, or one lookup when they are not kept.
    fn reach_one(&self, p: espalier_schema::PropertyId, side: Side, start: NodeRef, goal: NodeRef) -> Result<bool> {
        let source = MatrixLinks { graph: self.graph, property: p, side };
        // The borrow ends here: the search below borrows again.
        let list = self.link_sets.borrow_mut().list_repeated(p, side, start.id, &source)?;
        match list {
            Some(list) => Ok(self.link_sets.borrow().contains(list, goal.id)),
            None => self.link_lookup(p, side, start, goal),
        }
    }

    /// Whether `start` (on `side` of matrix `p`'s links) is linked to `goal`: one lookup of
    /// the matrix entry, under the owner and keyed by the target.
    fn link_lookup(&self, p: espalier_schema::PropertyId, side: Side, start: NodeRef, goal: NodeRef) -> Result<bool> {
        let g = &self.graph;
        Ok(match side {
            Side::Owner => g.find_entry(start, p, EntryKey::Target(goal.id))?.is_some(),
            Side::Target => g.find_entry(goal, p, EntryKey::Target(start.id))?.is_some(),
        })
    }

    /// Whether the steps from `start` reach `goal` (anywhere, when `None`). When the last
    /// step is a link or an entry step, it is checked from the goal's side with one lookup.
    fn reaches(&self, start: Cur<'g>, steps: &[MatchStep], env: &Env<'g>, goal: Option<NodeRef>) -> Result<bool> {
        let mut found = false;
        let last = steps.last().map(|s| &s.kind);
        match (goal, last) {
            (
                Some(goal),
                Some(
                    MatchStepKind::Targets(p)
                    | MatchStepKind::Owners(p)
                    | MatchStepKind::Referrers(p)
                    | MatchStepKind::Entries(p),
                ),
            ) => {
                let p = *p;
                let kind = last.cloned();
                let prefix = &steps[..steps.len() - 1];
                let hit = |c: Cur<'g>| -> Result<bool> {
                    Ok(match kind {
                        Some(MatchStepKind::Targets(_)) => self.link_lookup(p, Side::Owner, c.node, goal)?,
                        Some(MatchStepKind::Owners(_)) => self.link_lookup(p, Side::Target, c.node, goal)?,
                        Some(MatchStepKind::Referrers(_)) => self.view(goal)?.reference(p)? == c.node.id,
                        // The goal's type is the collection's entry type (checked), so
                        // its parent is reached through `p`.
                        Some(MatchStepKind::Entries(_)) => self.parent_id(goal.id)? == c.node.id,
                        _ => unreachable!(),
                    })
                };
                if prefix.is_empty() {
                    return match kind {
                        Some(MatchStepKind::Targets(_)) => self.reach_one(p, Side::Owner, start.node, goal),
                        Some(MatchStepKind::Owners(_)) => self.reach_one(p, Side::Target, start.node, goal),
                        _ => hit(start),
                    };
                }
                self.walk(start, prefix, env, &mut |c| {
                    found = hit(c)?;
                    Ok(if found { Flow::Stop } else { Flow::Go })
                })?;
            }
            _ => {
                self.walk(start, steps, env, &mut |c| {
                    found = goal.is_none_or(|goal| c.node == goal);
                    Ok(if found { Flow::Stop } else { Flow::Go })
                })?;
            }
        }
        Ok(found)
    }

    // ---- values ----

    /// A number term's value: [`Exec::leaf`] for numbers, reading a variable's own slot and a
    /// literal directly.
    fn number(&self, t: &MatchTerm, env: &Env<'g>) -> Result<Option<i64>> {
        match t {
            MatchTerm::Lit(i) => match &self.lits[*i] {
                Lit::Int(n) => Ok(Some(*n)),
                _ => unreachable!("checked: a number literal"),
            },
            MatchTerm::Leaf { var, steps, property, kind: LeafKind::Number } if steps.is_empty() => {
                Ok(Some(self.var_view(env, *var)?.number(*property)?))
            }
            _ => match self.leaf(t, env)? {
                Some(Leaf::Number(n)) => Ok(Some(n)),
                Some(_) => unreachable!("checked: a number term"),
                None => Ok(None),
            },
        }
    }

    fn leaf<'s>(&'s self, t: &MatchTerm, env: &Env<'g>) -> Result<Option<Leaf<'s>>> {
        match t {
            MatchTerm::Lit(i) => Ok(Some(match &self.lits[*i] {
                Lit::Int(n) => Leaf::Number(*n),
                Lit::Text(s) => Leaf::Text(Cow::Borrowed(s)),
                Lit::Key(k) => Leaf::Key(Cow::Borrowed(k)),
            })),
            MatchTerm::Key(v) => Ok(Some(Leaf::Key(Cow::Owned(self.key_path(self.slot(env, *v).node)?)))),
            MatchTerm::Leaf { var, steps, property, kind } => {
                let view = if steps.is_empty() {
                    // The variable's own property: no walk.
                    self.var_view(env, *var)?
                } else {
                    let mut at: Option<Cur<'g>> = None;
                    self.walk(self.var_cur(env, *var), steps, env, &mut |c| {
                        at = Some(c);
                        Ok(Flow::Stop)
                    })?;
                    let Some(mut at) = at else { return Ok(None) };
                    self.load(&mut at)?
                };
                let g = &self.graph;
                Ok(Some(match kind {
                    LeafKind::Number => Leaf::Number(view.number(*property)?),
                    LeafKind::Text => Leaf::Text(Cow::Borrowed(g.string_text(view.text_id(*property)?)?)),
                    LeafKind::Stategroup => {
                        let s = view.state_index(*property)?;
                        Leaf::State(s, g.state_name(*property, s))
                    }
                    LeafKind::Reference => {
                        let PropertyKind::Reference { target } = &g.schema.property(*property).kind else {
                            unreachable!("checked: reference leaf")
                        };
                        Leaf::Key(Cow::Owned(g.target_key(view.reference(*property)?, target)?))
                    }
                }))
            }
        }
    }

    /// The keys of the entries from the root down to `node` (each entry's record read once,
    /// for its key and its parent).
    fn key_path(&self, node: NodeRef) -> Result<Vec<String>> {
        Ok(self.graph.entry_keys(node)?)
    }

    fn value(&self, t: &MatchTerm, env: &Env<'g>) -> Result<Option<Val>> {
        Ok(self.leaf(t, env)?.map(|l| match l {
            Leaf::Number(n) => Val::Int(n),
            Leaf::Text(t) => Val::Text(t.into_owned()),
            Leaf::State(_, name) => Val::Text(name.to_string()),
            Leaf::Key(k) => Val::key(k.into_owned()),
        }))
    }

    /// The key paths of the nodes of a shortest path from `from` to `to`, or `None`.
    fn shortest(
        &self,
        from: NodeRef,
        body: &[MatchStep],
        back: Option<&[MatchStep]>,
        to: NodeRef,
        max: u32,
        env: &Env<'g>,
    ) -> Result<Option<Val>> {
        let Some(path) = self.shortest_path(from, body, back, to, max, env)? else { return Ok(None) };
        let keys = path.into_iter().map(|n| Ok(Val::key(self.key_path(n)?))).collect::<Result<Vec<_>>>()?;
        Ok(Some(Val::List(keys)))
    }

    /// The nodes of the first shortest path from `from` to `to` of at most `max` repetitions of
    /// `body`, or `None`. "First": of all shortest paths, the one whose first hop goes to the
    /// node `body` lists first from `from`, among those the one whose second hop does, and so
    /// on (the order of a walk: a dictionary's entries by key, a matrix's targets and a `<`
    /// step's nodes by record). The answer is that, whichever way it is found.
    ///
    /// Breadth first from both ends when `back` (the body walked backwards) is given, else from
    /// `from` only: each round grows the side with the smaller frontier by one repetition
    /// (ties and `back == None`: forwards), until a node is reached from both sides. Each side
    /// keeps the nodes it has reached; forwards with the node each was first reached from
    /// (the frontier in the order reached), backwards with its distance to `to`.
    ///
    /// After `f` forward and `b` backward rounds with no meeting, every path is longer than
    /// `f + b`; so the round that meets gives the length, `f + b` counting that round, and the
    /// nodes met are exactly those on a shortest path at that round's depth. A forward round
    /// takes the first node met in walk order (the frontier is in walk order, each node listed
    /// as reached along its first path) and stops; a backward round is finished, and the first
    /// node of the forward frontier it met is taken. From the meeting node the path goes back to
    /// `from` along the first-reached links, and on to `to` by the first node in walk order one
    /// step nearer to `to` at each hop. With a frontier empty, or `f + b` at `max`, there is no
    /// path.
    fn shortest_path(
        &self,
        from: NodeRef,
        body: &[MatchStep],
        back: Option<&[MatchStep]>,
        to: NodeRef,
        max: u32,
        env: &Env<'g>,
    ) -> Result<Option<Vec<NodeRef>>> {
        if from == to {
            return Ok(Some(vec![from]));
        }
        // Forwards: each node reached and the node it was first reached from (`from`: itself).
        let mut parent: FastMap<NodeRef, NodeRef> = FastMap::from_iter([(from, from)]);
        // Backwards: each node reached and its distance to `to`.
        let mut dist: FastMap<NodeRef, u32> = FastMap::from_iter([(to, 0)]);
        let mut ahead = vec![Cur::bare(from)];
        let mut behind = vec![Cur::bare(to)];
        let (mut f, mut b) = (0u32, 0u32);
        let met = loop {
            if f + b >= max || ahead.is_empty() || behind.is_empty() {
                return Ok(None);
            }
            match back.filter(|_| behind.len() < ahead.len()) {
                None => {
                    let mut next = Vec::new();
                    let mut met = None;
                    for n in &ahead {
                        self.walk(*n, body, env, &mut |c| {
                            self.tick()?;
                            if let Entry::Vacant(e) = parent.entry(c.node) {
                                e.insert(n.node);
                                if dist.contains_key(&c.node) {
                                    met = Some(c.node);
                                    return Ok(Flow::Stop);
                                }
                                next.push(c);
                            }
                            Ok(Flow::Go)
                        })?;
                        if met.is_some() {
                            break;
                        }
                    }
                    f += 1;
                    if let Some(m) = met {
                        break m;
                    }
                    ahead = next;
                }
                Some(back) => {
                    let mut next = Vec::new();
                    let mut met = FastSet::default();
                    for n in &behind {
                        self.walk(*n, back, env, &mut |c| {
                            self.tick()?;
                            if let Entry::Vacant(e) = dist.entry(c.node) {
                                e.insert(b + 1);
                                if parent.contains_key(&c.node) {
                                    met.insert(c.node);
                                }
                                next.push(c);
                            }
                            Ok(Flow::Go)
                        })?;
                    }
                    b += 1;
                    if !met.is_empty() {
                        // Only the forward frontier can be met (anything nearer `from` would
                        // make a shorter path), unless the links disagree with their index.
                        break ahead.iter().map(|c| c.node).find(|n| met.contains(n)).ok_or_else(disagree)?;
                    }
                    behind = next;
                }
            }
        };
        // Back to `from` along the first-reached links: one hop per forward round. `met` is a
        // key of `parent` (put there by a forward round, or found in the forward frontier), and
        // so is each node's parent, put there before it: an invariant of this search.
        let mut path = vec![met];
        let mut at = met;
        for _ in 0..f {
            if at == from {
                break;
            }
            at = *parent.get(&at).expect("every node reached forwards has the node it was reached from");
            path.push(at);
        }
        path.reverse();
        // On to `to`: at each hop the first node listed one step nearer.
        let mut at = Cur::bare(met);
        let mut left = dist.get(&met).copied().unwrap_or(0);
        while left > 0 {
            let mut hop = None;
            self.walk(at, body, env, &mut |c| {
                self.tick()?;
                if dist.get(&c.node) == Some(&(left - 1)) {
                    hop = Some(c);
                    return Ok(Flow::Stop);
                }
                Ok(Flow::Go)
            })?;
            at = hop.ok_or_else(disagree)?;
            path.push(at.node);
            left -= 1;
        }
        Ok(Some(path))
    }

    /// A match's column values; `None` when one is undefined (the match is left out).
    fn row(&self, env: &Env<'g>, only: Option<bool>) -> Result<Option<Vec<Val>>> {
        let mut out = Vec::with_capacity(self.plan.columns.len());
        Ok(self.row_into(env, only, &mut out)?.then_some(out))
    }

    /// [`Exec::row`] into `out` (cleared first), so that a grouping reuses one buffer for
    /// every match; `false` when a value is undefined.
    fn row_into(&self, env: &Env<'g>, only: Option<bool>, out: &mut Vec<Val>) -> Result<bool> {
        out.clear();
        for (col, slot) in self.plan.columns.iter().zip(&self.column_slots) {
            // `only`: Some(false) = the grouping keys, Some(true) = the aggregated terms.
            if only.is_some_and(|aggs| aggs != col.is_aggregate()) {
                continue;
            }
            if let Some(r) = slot.filter(|r| r.kind == LeafKind::Number) {
                // Read at its byte position and pushed where it is made: a value returned
                // through `column_value` was copied across the stores that built it (a
                // store-forwarding stall per match, OO7 Q8).
                out.push(Val::Int(self.slot_word(&r, env)? as i64));
                continue;
            }
            match self.column_value(col, env)? {
                Some(v) => out.push(v),
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// For a plan of aggregates only, each column's read where every one is `count ( )`
    /// (`None`) or of a number read at its byte position, which is always defined; `None`
    /// if a column needs more (a value that may be undefined, a text).
    fn direct_reads(&self) -> Option<Vec<Option<SlotRead>>> {
        let read = |(col, slot): (&MatchColumn, &Option<SlotRead>)| match (col, slot) {
            (MatchColumn::Count { term: None, .. }, _) => Some(None),
            (c, Some(r)) if c.is_aggregate() && r.kind == LeafKind::Number => Some(Some(*r)),
            _ => None,
        };
        self.plan.columns.iter().zip(&self.column_slots).map(read).collect()
    }

    /// A column's value in the match `env` binds (an aggregate's: the value it aggregates);
    /// `None` when it is undefined.
    fn column_value(&self, col: &MatchColumn, env: &Env<'g>) -> Result<Option<Val>> {
        match col {
            MatchColumn::Term(t) => self.value(t, env),
            MatchColumn::Count { term: None, .. } => Ok(Some(Val::Null)),
            MatchColumn::Count { term: Some(t), .. }
            | MatchColumn::Sum(t)
            | MatchColumn::Min(t)
            | MatchColumn::Max(t)
            | MatchColumn::Avg(t) => self.value(t, env),
            MatchColumn::Shortest { from, body, back, to, max } => {
                self.shortest(self.slot(env, *from).node, body, back.as_deref(), self.slot(env, *to).node, *max, env)
            }
        }
    }
}

/// A search from both ends that does not join up: the links of a property and its link index
/// disagree (the data is corrupt).
fn disagree() -> InstructionError {
    DataError::Corrupt("a shortest path's two searches do not join: a link and its link index disagree".into()).into()
}

fn compare(l: &Leaf, op: Comparison, r: &Leaf, how: Compared) -> bool {
    let o = match (how, l, r) {
        (Compared::Number, Leaf::Number(a), Leaf::Number(b)) => a.cmp(b),
        (Compared::Text, Leaf::Text(a), Leaf::Text(b)) => a.cmp(b),
        (Compared::StateName, Leaf::State(_, a), Leaf::State(_, b)) => a.cmp(b),
        (Compared::Key, Leaf::Key(a), Leaf::Key(b)) => a.cmp(b),
        _ => unreachable!("checked: both sides of a comparison are of one kind"),
    };
    op.holds(o)
}

// ---- grouping, distinct, order, page ----

enum Agg {
    Count(u64),
    CountDistinct(HashSet<Val>),
    Sum(i128),
    Min(Option<Val>),
    Max(Option<Val>),
    Avg(i128, u64),
}

impl Agg {
    fn new(col: &MatchColumn) -> Agg {
        match col {
            MatchColumn::Count { distinct: true, .. } => Agg::CountDistinct(HashSet::new()),
            MatchColumn::Count { .. } => Agg::Count(0),
            MatchColumn::Sum(_) => Agg::Sum(0),
            MatchColumn::Min(_) => Agg::Min(None),
            MatchColumn::Max(_) => Agg::Max(None),
            MatchColumn::Avg(_) => Agg::Avg(0, 0),
            MatchColumn::Term(_) | MatchColumn::Shortest { .. } => unreachable!("not an aggregate"),
        }
    }

    fn add(&mut self, v: Val) {
        match self {
            Agg::Count(n) => *n += 1,
            Agg::CountDistinct(set) => {
                set.insert(v);
            }
            Agg::Sum(s) => {
                if let Val::Int(i) = v {
                    *s += i as i128;
                }
            }
            Agg::Min(m) => {
                if m.as_ref().is_none_or(|m| v.cmp_total(m) == Ordering::Less) {
                    *m = Some(v);
                }
            }
            Agg::Max(m) => {
                if m.as_ref().is_none_or(|m| v.cmp_total(m) == Ordering::Greater) {
                    *m = Some(v);
                }
            }
            Agg::Avg(s, n) => {
                if let Val::Int(i) = v {
                    *s += i as i128;
                    *n += 1;
                }
            }
        }
    }

    fn result(self) -> Result<Val> {
        Ok(match self {
            Agg::Count(n) => Val::Int(n as i64),
            Agg::CountDistinct(set) => Val::Int(set.len() as i64),
            Agg::Sum(s) => Val::Int(
                i64::try_from(s).map_err(|_| InstructionError::value(format!("sum {s} does not fit in 64 bits")))?,
            ),
            Agg::Min(m) | Agg::Max(m) => m.unwrap_or(Val::Null),
            Agg::Avg(_, 0) => Val::Null,
            Agg::Avg(s, n) => Val::Float(s as f64 / n as f64),
        })
    }
}

struct Accumulator {
    /// Without grouping: the rows kept (all of them, or just the page when nothing reorders
    /// or merges rows).
    rows: Vec<Vec<Val>>,
    seen: HashSet<Vec<Val>>,
    total: u64,
    streaming: bool,
    groups: HashMap<Vec<Val>, usize>,
    group_rows: Vec<(Vec<Val>, Vec<Agg>)>,
    /// A grouped match's key and aggregated values, reused for every match.
    key: Vec<Val>,
    vals: Vec<Val>,
    /// Whether a grouped query has grouping columns. Without, every match is of one group,
    /// `group_rows[0]`, made at the start (OO7 Q8's `count ( )` and `sum`): no key to build
    /// or hash, and with no match at all it is the one row of aggregates over nothing.
    keyed: bool,
    /// Without grouping columns, when every column is `count ( )` or aggregates a number
    /// read at its byte position: each column's read (`None`: nothing to read). A match then
    /// adds to the aggregates with no row built.
    direct: Option<Vec<Option<SlotRead>>>,
}

impl Accumulator {
    fn new(ex: &Exec<'_, '_>) -> Accumulator {
        let plan = ex.plan;
        let keyed = plan.columns.iter().any(|c| !c.is_aggregate());
        let one = plan.grouped && !keyed;
        Accumulator {
            rows: Vec::new(),
            seen: HashSet::new(),
            total: 0,
            streaming: !plan.grouped && plan.order.is_empty(),
            groups: HashMap::new(),
            group_rows: if one { vec![(Vec::new(), plan.columns.iter().map(Agg::new).collect())] } else { Vec::new() },
            key: Vec::new(),
            vals: Vec::new(),
            keyed,
            direct: one.then(|| ex.direct_reads()).flatten(),
        }
    }

    fn add<'g>(&mut self, ex: &Exec<'g, '_>, env: &Env<'g>) -> Result<()> {
        let plan = ex.plan;
        if plan.grouped {
            if let Some(reads) = &self.direct {
                for (agg, read) in self.group_rows[0].1.iter_mut().zip(reads) {
                    // Counts and sums inline: `Agg::add` takes a `Val` it then drops.
                    match (agg, read) {
                        (Agg::Count(n), _) => *n += 1,
                        (Agg::Sum(sum), Some(r)) => *sum += i128::from(ex.slot_word(r, env)? as i64),
                        (agg, Some(r)) => agg.add(Val::Int(ex.slot_word(r, env)? as i64)),
                        (agg, None) => agg.add(Val::Null),
                    }
                }
                return Ok(());
            }
            // The key and values go into buffers kept across matches: a match of a known
            // group (every match of a `count ( )` alone) allocates nothing.
            if (self.keyed && !ex.row_into(env, Some(false), &mut self.key)?)
                || !ex.row_into(env, Some(true), &mut self.vals)?
            {
                return Ok(());
            }
            let i = match if self.keyed { self.groups.get(self.key.as_slice()) } else { Some(&0) } {
                Some(&i) => i,
                None => {
                    if self.group_rows.len() >= MAX_PATTERN_ROWS {
                        return Err(InstructionError::Limit(format!("more than {MAX_PATTERN_ROWS} groups")));
                    }
                    let aggs = plan.columns.iter().filter(|c| c.is_aggregate()).map(Agg::new).collect();
                    self.group_rows.push((self.key.clone(), aggs));
                    self.groups.insert(self.key.clone(), self.group_rows.len() - 1);
                    self.group_rows.len() - 1
                }
            };
            for (agg, v) in self.group_rows[i].1.iter_mut().zip(self.vals.drain(..)) {
                agg.add(v);
            }
            return Ok(());
        }
        let Some(row) = ex.row(env, None)? else { return Ok(()) };
        if plan.distinct {
            if self.seen.contains(&row) {
                return Ok(());
            }
            if self.seen.len() >= MAX_PATTERN_ROWS {
                return Err(InstructionError::Limit(format!("more than {MAX_PATTERN_ROWS} distinct rows")));
            }
            self.seen.insert(row.clone());
        }
        self.total += 1;
        if self.streaming {
            let start = plan.offset;
            let wanted = self.total > start && plan.limit.is_none_or(|l| (self.rows.len() as u64) < l);
            if wanted {
                self.rows.push(row);
            }
            return Ok(());
        }
        if self.rows.len() >= MAX_PATTERN_ROWS {
            return Err(InstructionError::Limit(format!(
                "more than {MAX_PATTERN_ROWS} rows to order; add conditions or group them"
            )));
        }
        self.rows.push(row);
        Ok(())
    }

    fn finish(mut self, plan: &MatchPlan) -> Result<QueryResult> {
        if plan.grouped {
            for (key, aggs) in std::mem::take(&mut self.group_rows) {
                let mut key = key.into_iter();
                let mut aggs = aggs.into_iter();
                let mut row = Vec::with_capacity(plan.columns.len());
                for col in &plan.columns {
                    row.push(if col.is_aggregate() {
                        aggs.next().expect("one aggregate per aggregate column").result()?
                    } else {
                        key.next().expect("one key per grouping column")
                    });
                }
                self.rows.push(row);
            }
            self.total = self.rows.len() as u64;
        }
        if !self.streaming {
            if !plan.order.is_empty() {
                self.rows.sort_by(|a, b| {
                    for &(i, desc) in &plan.order {
                        let o = a[i].cmp_total(&b[i]);
                        if o != Ordering::Equal {
                            return if desc { o.reverse() } else { o };
                        }
                    }
                    Ordering::Equal
                });
            }
            let start = (plan.offset as usize).min(self.rows.len());
            let end = match plan.limit {
                Some(l) => start.saturating_add(l as usize).min(self.rows.len()),
                None => self.rows.len(),
            };
            self.rows = self.rows.drain(start..end).collect();
        }
        Ok(QueryResult {
            total: self.total,
            columns: plan.aliases.clone(),
            rows: self
                .rows
                .into_iter()
                .map(|r| Row { key: Vec::new(), values: r.into_iter().map(Val::into_json).collect() })
                .collect(),
        })
    }
}
