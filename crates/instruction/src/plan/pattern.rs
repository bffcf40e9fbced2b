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
    /// The operations of the top level, in the order they run.
    pub block: Block,
    /// The columns, in order.
    pub columns: Vec<MatchColumn>,
    /// The columns' names, one per column.
    pub aliases: Vec<String>,
    /// Some column aggregates: the others are the grouping keys.
    pub grouped: bool,
    /// `select distinct`: keep one of equal rows.
    pub distinct: bool,
    /// (column index, descending)
    pub order: Vec<(usize, bool)>,
    /// At most this many rows are returned.
    pub limit: Option<u64>,
    /// This many rows are skipped first (0 when not given).
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

/// A pattern variable: its name and the type of the nodes it binds.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchVar {
    /// The name, as written.
    pub name: String,
    /// The type of every node it binds.
    pub ty: NodeTypeId,
}

/// What a literal must become when it is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LitKind {
    /// A number.
    Number,
    /// A text.
    Text,
    /// A key with this many components (a matrix key, a reference compared by key).
    Key(usize),
}

/// Operations in order: each binds a variable or filters the matches so far.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Block {
    /// The operations, in the order they run.
    pub ops: Vec<PlanOp>,
}

/// One operation, numbered in its plan (for counting what it produced), with the planner's
/// guess of how many rows leave it per run of its block.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOp {
    /// What the operation does.
    pub kind: MatchOp,
    /// Its number in the plan, from 0 (below [`MatchPlan::op_count`]).
    pub id: usize,
    /// The planner's guess of the rows leaving it per run of its block.
    pub estimate: f64,
}

/// What an operation of a plan does: bind a variable or filter the matches so far.
#[derive(Debug, Clone, PartialEq)]
pub enum MatchOp {
    /// Binds `var` to every node the steps reach from `from` (each node once if `dedupe`).
    Scan {
        /// The variable to bind.
        var: usize,
        /// Where the steps start.
        from: Anchor,
        /// The steps to the nodes to bind.
        steps: Vec<MatchStep>,
        /// Give each node at most once.
        dedupe: bool,
        /// The link was written from the bound variable's side and is followed the other way
        /// (`(backwards)` in `explain`).
        backward: bool,
    },
    /// Binds `var` to the entries schema index `index` holds for `probe`. The conditions the
    /// probe serves follow it as filters: an index row is a candidate (texts past
    /// `espalier_data::index::MAX_TEXT_BYTES` are cut, bounds are inclusive).
    Index {
        /// The variable to bind.
        var: usize,
        /// The schema index, by its position in the schema's indexes.
        index: u32,
        /// What to look up.
        probe: IndexProbe,
    },
    /// Keep the matches so far for which the condition holds.
    Filter(MatchCondition),
}

/// What an index is asked for; numbers are value slots (literals and parameters).
#[derive(Debug, Clone, PartialEq)]
pub enum IndexProbe {
    /// Values equal to the value in this slot.
    Equal(usize),
    /// Values equal to this term's value on variables bound before (a join: each bound row
    /// probes the index once instead of the other side being scanned for it).
    EqualTerm(MatchTerm),
    /// Stategroups in one of these states.
    States(Vec<StateIndex>),
    /// Texts starting with the text in this slot.
    Prefix(usize),
    /// Values between two bounds, both inclusive.
    Range {
        /// The slot of the least value, if bounded below.
        low: Option<usize>,
        /// The slot of the greatest value, if bounded above.
        high: Option<usize>,
    },
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
    /// Whether the probe yields exactly the entries its conditions hold for (an equality on
    /// a number), so that they need no filter after it.
    exact: bool,
}

/// Where a path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// The root.
    Root,
    /// The node bound to this variable.
    Var(usize),
}

/// A resolved step, the node type it leaves and the one it arrives at.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchStep {
    /// What the step does.
    pub kind: MatchStepKind,
    /// The type of the node it leaves.
    pub from: NodeTypeId,
    /// The type of the node it arrives at.
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

/// What a resolved pattern step does.
#[derive(Debug, Clone, PartialEq)]
pub enum MatchStepKind {
    /// Into a group.
    Group(PropertyId),
    /// Every entry of a dictionary or matrix.
    Entries(PropertyId),
    /// The entry with the key in value slot `.1`.
    EntryKey(PropertyId, usize),
    /// The matrix entry keyed by variable `.1`'s node.
    EntryOf(PropertyId, usize),
    /// Into a state's node, only while the stategroup is in that state.
    State(PropertyId, StateIndex),
    /// Follow a reference to its target.
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
    /// Every node the body reaches in `min` to `max` repetitions, each once, at its shortest
    /// distance.
    Repeat {
        /// The fewest repetitions (0 includes the start).
        min: u32,
        /// The most repetitions.
        max: u32,
        /// The steps to repeat.
        body: Vec<MatchStep>,
    },
}

/// How a node hangs under the parent an up step goes to (what the reverse step is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpFrom {
    /// An entry of this dictionary or matrix.
    Entry(PropertyId),
    /// The node of this state of this stategroup.
    State(PropertyId, StateIndex),
    /// This group.
    Group(PropertyId),
}

/// A checked condition of a pattern query.
#[derive(Debug, Clone, PartialEq)]
pub enum MatchCondition {
    /// Every part holds.
    And(Vec<MatchCondition>),
    /// Some part holds.
    Or(Vec<MatchCondition>),
    /// The condition does not hold (an anti-join for `not exists`).
    Not(Box<MatchCondition>),
    /// The sub-pattern has a match (a semi-join).
    Exists(Block),
    /// The steps from `from` reach `to` (any node when `None`).
    Reach {
        /// Where the steps start.
        from: Anchor,
        /// The steps to follow.
        steps: Vec<MatchStep>,
        /// Where they must arrive; `None`: anywhere.
        to: Option<Anchor>,
    },
    /// Two terms compared.
    Compare {
        /// The left side.
        left: MatchTerm,
        /// The operator.
        op: Comparison,
        /// The right side.
        right: MatchTerm,
        /// How the two sides are compared.
        how: Compared,
    },
    /// A text term starts with a prefix.
    Prefix {
        /// The text to test.
        term: MatchTerm,
        /// The value slot of the prefix.
        prefix: usize,
    },
    /// A stategroup term is in one of the states.
    States {
        /// The stategroup to test.
        term: MatchTerm,
        /// The states it may be in.
        states: Vec<StateIndex>,
    },
}

/// How a comparison orders its two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compared {
    /// Numerically.
    Number,
    /// Texts, by their bytes.
    Text,
    /// Stategroups of different properties: by state name.
    StateName,
    /// Reference keys or node keys, by their components.
    Key,
}

/// A checked term: a value read from a match, or given.
#[derive(Debug, Clone, PartialEq)]
pub enum MatchTerm {
    /// The key path of a variable's node.
    Key(usize),
    /// A leaf property read from a variable's node.
    Leaf {
        /// The variable the steps start at.
        var: usize,
        /// The steps to the node holding the property.
        steps: Vec<MatchStep>,
        /// The property.
        property: PropertyId,
        /// What kind of property it is.
        kind: LeafKind,
    },
    /// The literal or parameter in this value slot.
    Lit(usize),
}

/// A checked column of a pattern query (see [`crate::ast::ColumnExpr`]).
#[derive(Debug, Clone, PartialEq)]
pub enum MatchColumn {
    /// The term's value in each match.
    Term(MatchTerm),
    /// The number of matches, or of (distinct) values of a term.
    Count {
        /// Count distinct values, not matches.
        distinct: bool,
        /// The term whose values are counted; `None`: count the matches.
        term: Option<MatchTerm>,
    },
    /// The sum of a number term.
    Sum(MatchTerm),
    /// The least value of the term.
    Min(MatchTerm),
    /// The greatest value of the term.
    Max(MatchTerm),
    /// The average of a number term, as a fraction.
    Avg(MatchTerm),
    /// The nodes of a shortest path between two variables' nodes; a match with none is left
    /// out.
    Shortest {
        /// The variable the path starts at.
        from: usize,
        /// The steps to repeat.
        body: Vec<MatchStep>,
        /// The same steps walked backwards ([`inverse`]): with them the path is searched from
        /// both ends; `None` (a body that cannot be walked backwards), from the start only.
        back: Option<Vec<MatchStep>>,
        /// The variable the path must reach.
        to: usize,
        /// The most repetitions of the steps.
        max: u32,
    },
}

impl MatchColumn {
    /// Whether the column aggregates over the matches of a group (the others are its keys).
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

pub use planner::{inverse, reads_table, reverse};
