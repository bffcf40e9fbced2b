//! Checking and planning pattern queries (`collection match …`): the plan's types here, the
//! jobs in `check` (typing), `planner` (ordering) and `explain` (the plan in words).
//!
//! Every variable, step and term is typed against the schema, with errors at the offending
//! step. Then a greedy planner orders the work: it binds variables one at a time, each by the
//! cheapest way its bound neighbours allow — a key lookup, a scan of a collection, a reference
//! followed forwards, or one followed backwards through the reverse-link index — and puts each
//! condition right after the last variable it needs (early filters; `not`/`exists` as
//! anti-/semi-joins). Grouping, distinct, order, limit and offset come after matching.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use espalier_schema::{
    IndexKind, NodeTypeId, ParamKind, ParentLink, PropertyId, PropertyKind, Schema, Span, StateIndex, ROOT,
};

use super::{err, CheckError, Checker};
use crate::ast::{
    Clause, ColumnExpr, Comparison, Condition, LeafKind, Located, Pattern, PatternKey, PatternStep, Term, UpKind, Value,
};

/// A checked and planned pattern query.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchPlan {
    /// Every variable, including those local to `exists`; indexes are variable ids.
    pub vars: Vec<MatchVar>,
    pub block: Block,
    pub columns: Vec<MatchColumn>,
    pub aliases: Vec<String>,
    /// Some column aggregates: the others are the grouping keys.
    pub grouped: bool,
    pub distinct: bool,
    /// (column index, descending)
    pub order: Vec<(usize, bool)>,
    pub limit: Option<u64>,
    pub offset: u64,
    /// Literals and parameters, resolved once per run; [`MatchStepKind::EntryKey`] and terms
    /// refer to them by index.
    pub values: Vec<(Value, LitKind)>,
    /// Number of operations in all blocks (their ids are `0..op_count`).
    pub op_count: usize,
    /// `explain`: answer with the plan and the rows each operation produced.
    pub explain: bool,
    /// The variables of the top level (not those local to `exists`), in binding order of
    /// the text: a match is their nodes.
    pub top: Vec<usize>,
    /// For a registered (incremental) query only: per top variable, the plan with that
    /// variable bound before it starts (see `crate::incremental`).
    pub seeded: Vec<(usize, Block)>,
    /// For a registered query only: per pair of top variables joined by one matrix step
    /// (`b in a > 'M'`, `a > 'M' == b`, or backwards), the plan with both bound before it
    /// starts; keyed by the two variables, smaller first.
    pub paired: Vec<((usize, usize), Block)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MatchVar {
    pub name: String,
    pub ty: NodeTypeId,
}

/// What a literal must become when it is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LitKind {
    Number,
    Text,
    /// A key with this many components (a matrix key, a reference compared by key).
    Key(usize),
}

/// Operations in order: each binds a variable or filters the matches so far.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Block {
    pub ops: Vec<PlanOp>,
}

/// One operation, numbered in its plan (for counting what it produced), with the planner's
/// guess of how many rows leave it per run of its block.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOp {
    pub kind: MatchOp,
    pub id: usize,
    pub estimate: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MatchOp {
    /// Binds `var` to every node the steps reach from `from` (each node once if `dedupe`).
    Scan {
        var: usize,
        from: Anchor,
        steps: Vec<MatchStep>,
        dedupe: bool,
        backward: bool,
    },
    /// Binds `var` to the entries schema index `index` holds for `probe`. The conditions the
    /// probe serves follow it as filters: an index row is a candidate (texts past
    /// `espalier_data::index::MAX_TEXT_BYTES` are cut, bounds are inclusive).
    Index {
        var: usize,
        index: u32,
        probe: IndexProbe,
    },
    Filter(MatchCondition),
}

/// What an index is asked for; numbers are value slots (literals and parameters).
#[derive(Debug, Clone, PartialEq)]
pub enum IndexProbe {
    Equal(usize),
    States(Vec<StateIndex>),
    Prefix(usize),
    Range { low: Option<usize>, high: Option<usize> },
}

/// An index the planner may bind a variable by, with the conditions it serves.
#[derive(Debug, Clone)]
struct IndexChoice {
    index: u32,
    probe: IndexProbe,
    /// Positions in the level's pending conditions.
    served: Vec<usize>,
    /// Guessed rows it yields.
    rows: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Root,
    Var(usize),
}

/// A resolved step, the node type it leaves and the one it arrives at.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchStep {
    pub kind: MatchStepKind,
    pub from: NodeTypeId,
    pub to: NodeTypeId,
}

impl MatchStep {
    /// Whether the step goes down the tree (entries, a keyed entry, a group, a state): a
    /// path of such steps reaches a node exactly when walking it backwards, one parent per
    /// step, gets back, and the node sits there for its whole life.
    pub fn goes_down(&self) -> bool {
        matches!(
            self.kind,
            MatchStepKind::Entries(_)
                | MatchStepKind::EntryKey(..)
                | MatchStepKind::Group(_)
                | MatchStepKind::State(..)
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum MatchStepKind {
    Group(PropertyId),
    /// Every entry of a dictionary or matrix.
    Entries(PropertyId),
    /// The entry with the key in value slot `.1`.
    EntryKey(PropertyId, usize),
    /// The matrix entry keyed by variable `.1`'s node.
    EntryOf(PropertyId, usize),
    State(PropertyId, StateIndex),
    Reference(PropertyId),
    /// Every matrix entry's target.
    Targets(PropertyId),
    /// Backwards along a reference: every node whose reference points here.
    Referrers(PropertyId),
    /// Backwards along a matrix: every owner of such a matrix with an entry keyed here.
    Owners(PropertyId),
    /// To the parent, arriving through this link.
    Up(UpFrom),
    /// Up from an entry of `.0` whose key is value slot `.1`.
    UpIfKey(PropertyId, usize),
    /// Up from an entry of matrix `.0` keyed by variable `.1`'s node.
    UpIfTarget(PropertyId, usize),
    Repeat {
        min: u32,
        max: u32,
        body: Vec<MatchStep>,
    },
}

/// How a node hangs under the parent an up step goes to (what the reverse step is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpFrom {
    Entry(PropertyId),
    State(PropertyId, StateIndex),
    Group(PropertyId),
}

#[derive(Debug, Clone, PartialEq)]
pub enum MatchCondition {
    And(Vec<MatchCondition>),
    Or(Vec<MatchCondition>),
    Not(Box<MatchCondition>),
    Exists(Block),
    /// The steps from `from` reach `to` (any node when `None`).
    Reach {
        from: Anchor,
        steps: Vec<MatchStep>,
        to: Option<Anchor>,
    },
    Compare {
        left: MatchTerm,
        op: Comparison,
        right: MatchTerm,
        how: Compared,
    },
    Prefix {
        term: MatchTerm,
        prefix: usize,
    },
    States {
        term: MatchTerm,
        states: Vec<StateIndex>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compared {
    Number,
    Text,
    /// Stategroups of different properties: by state name.
    StateName,
    Key,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MatchTerm {
    /// The key path of a variable's node.
    Key(usize),
    Leaf {
        var: usize,
        steps: Vec<MatchStep>,
        property: PropertyId,
        kind: LeafKind,
    },
    Lit(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub enum MatchColumn {
    Term(MatchTerm),
    Count { distinct: bool, term: Option<MatchTerm> },
    Sum(MatchTerm),
    Min(MatchTerm),
    Max(MatchTerm),
    Avg(MatchTerm),
    Shortest { from: usize, body: Vec<MatchStep>, to: usize, max: u32 },
}

impl MatchColumn {
    pub fn is_aggregate(&self) -> bool {
        !matches!(self, MatchColumn::Term(_) | MatchColumn::Shortest { .. })
    }
}

/// Most steps in one path, variables in one pattern and operations in its plan: the executor
/// recurses once per step and per operation, so these bound its stack (the text parser's
/// nesting bound does the same for text; these hold for JSON too).
pub const MAX_STEPS: usize = 256;
pub const MAX_VARS: usize = 256;
pub const MAX_OPS: usize = 1024;

/// Guessed fan-out of a scan over a collection owned by the root, and by any other node.
const ROOT_ENTRIES: f64 = 1000.0;
const NESTED_ENTRIES: f64 = 20.0;
/// Guessed number of links a node has along one matrix or backwards along one reference.
const LINKS: f64 = 10.0;
/// [`PatternChecker::early_discount`]: how much each later condition is guessed to prune,
/// the fewest that count, and the most.
const TIE_DISCOUNT: f64 = 0.5;
const EARLY_TIES: usize = 2;
const MAX_TIES: usize = 8;

/// A link between two variables (or the root and a variable) that can bind either side.
#[derive(Debug, Clone)]
struct Edge {
    from: Anchor,
    steps: Vec<MatchStep>,
    to: usize,
}

/// A condition waiting for its variables.
#[derive(Clone)]
struct Pending {
    cond: MatchCondition,
    vars: BTreeSet<usize>,
    selectivity: f64,
}

/// One level of a pattern: the top, or the inside of an `exists`.
#[derive(Default, Clone)]
struct Level {
    locals: Vec<usize>,
    edges: Vec<Edge>,
    pending: Vec<Pending>,
}

pub(super) struct PatternChecker<'c, 's> {
    c: &'c Checker<'s>,
    vars: Vec<MatchVar>,
    values: Vec<(Value, LitKind)>,
    next_op: std::cell::Cell<usize>,
    /// Also plan the match once per top variable bound first (a registered query).
    seeded: bool,
}

impl<'c, 's> PatternChecker<'c, 's> {
    pub(super) fn new(c: &'c Checker<'s>) -> Self {
        PatternChecker { c, vars: Vec::new(), values: Vec::new(), next_op: std::cell::Cell::new(0), seeded: false }
    }

    /// Plans the seeded blocks of a registered query too.
    pub(super) fn seeded(mut self) -> Self {
        self.seeded = true;
        self
    }

    fn op(&self, kind: MatchOp, estimate: f64) -> PlanOp {
        let id = self.next_op.get();
        self.next_op.set(id + 1);
        PlanOp { kind, id, estimate }
    }

    fn schema(&self) -> &'s Schema {
        self.c.schema
    }
}

/// Variables a step list names as keys.
fn steps_vars(steps: &[MatchStep], out: &mut BTreeSet<usize>) {
    for s in steps {
        match &s.kind {
            MatchStepKind::EntryOf(_, v) | MatchStepKind::UpIfTarget(_, v) => {
                out.insert(*v);
            }
            MatchStepKind::Repeat { body, .. } => steps_vars(body, out),
            _ => {}
        }
    }
}

fn term_vars(t: &MatchTerm, out: &mut BTreeSet<usize>) {
    match t {
        MatchTerm::Key(v) => {
            out.insert(*v);
        }
        MatchTerm::Leaf { var, steps, .. } => {
            out.insert(*var);
            steps_vars(steps, out);
        }
        MatchTerm::Lit(_) => {}
    }
}

fn anchor_var(a: &Anchor, out: &mut BTreeSet<usize>) {
    if let Anchor::Var(v) = a {
        out.insert(*v);
    }
}

/// The variables a condition needs bound (for `exists`: the outer ones it uses).
fn cond_vars(c: &MatchCondition, out: &mut BTreeSet<usize>) {
    match c {
        MatchCondition::And(l) | MatchCondition::Or(l) => l.iter().for_each(|c| cond_vars(c, out)),
        MatchCondition::Not(c) => cond_vars(c, out),
        MatchCondition::Exists(block) => {
            let mut used = BTreeSet::new();
            let mut bound = BTreeSet::new();
            for op in &block.ops {
                match &op.kind {
                    MatchOp::Scan { var, from, steps, .. } => {
                        anchor_var(from, &mut used);
                        steps_vars(steps, &mut used);
                        bound.insert(*var);
                    }
                    MatchOp::Index { var, .. } => {
                        bound.insert(*var);
                    }
                    MatchOp::Filter(c) => cond_vars(c, &mut used),
                }
            }
            out.extend(used.difference(&bound));
        }
        MatchCondition::Reach { from, steps, to } => {
            anchor_var(from, out);
            steps_vars(steps, out);
            if let Some(to) = to {
                anchor_var(to, out);
            }
        }
        MatchCondition::Compare { left, right, .. } => {
            term_vars(left, out);
            term_vars(right, out);
        }
        MatchCondition::Prefix { term, .. } | MatchCondition::States { term, .. } => term_vars(term, out),
    }
}

fn level_vars(level: &Level, out: &mut BTreeSet<usize>) {
    for e in &level.edges {
        anchor_var(&e.from, out);
        steps_vars(&e.steps, out);
        out.insert(e.to);
    }
    for p in &level.pending {
        out.extend(p.vars.iter().copied());
    }
}

mod check;
mod explain;
mod planner;

pub use explain::PlanLine;
pub use planner::{reads_table, reverse};
