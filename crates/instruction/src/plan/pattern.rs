//! Checking and planning pattern queries (`collection match …`).
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
    pub vars: Vec<PVar>,
    pub block: Block,
    pub columns: Vec<PColumn>,
    pub aliases: Vec<String>,
    /// Some column aggregates: the others are the grouping keys.
    pub grouped: bool,
    pub distinct: bool,
    /// (column index, descending)
    pub order: Vec<(usize, bool)>,
    pub limit: Option<u64>,
    pub offset: u64,
    /// Literals and parameters, resolved once per run; [`MStepKind::EntryKey`] and terms
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
pub struct PVar {
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
    pub kind: MOp,
    pub id: usize,
    pub estimate: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MOp {
    /// Binds `var` to every node the steps reach from `from` (each node once if `dedupe`).
    Scan {
        var: usize,
        from: Anchor,
        steps: Vec<MStep>,
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
    Filter(MCond),
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
pub struct MStep {
    pub kind: MStepKind,
    pub from: NodeTypeId,
    pub to: NodeTypeId,
}

impl MStep {
    /// Whether the step goes down the tree (entries, a keyed entry, a group, a state): a
    /// path of such steps reaches a node exactly when walking it backwards, one parent per
    /// step, gets back, and the node sits there for its whole life.
    pub fn goes_down(&self) -> bool {
        matches!(
            self.kind,
            MStepKind::Entries(_) | MStepKind::EntryKey(..) | MStepKind::Group(_) | MStepKind::State(..)
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum MStepKind {
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
        body: Vec<MStep>,
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
pub enum MCond {
    And(Vec<MCond>),
    Or(Vec<MCond>),
    Not(Box<MCond>),
    Exists(Block),
    /// The steps from `from` reach `to` (any node when `None`).
    Reach {
        from: Anchor,
        steps: Vec<MStep>,
        to: Option<Anchor>,
    },
    Compare {
        left: MTerm,
        op: Comparison,
        right: MTerm,
        how: Compared,
    },
    Prefix {
        term: MTerm,
        prefix: usize,
    },
    States {
        term: MTerm,
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
pub enum MTerm {
    /// The key path of a variable's node.
    Key(usize),
    Leaf {
        var: usize,
        steps: Vec<MStep>,
        property: PropertyId,
        kind: LeafKind,
    },
    Lit(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub enum PColumn {
    Term(MTerm),
    Count { distinct: bool, term: Option<MTerm> },
    Sum(MTerm),
    Min(MTerm),
    Max(MTerm),
    Avg(MTerm),
    Shortest { from: usize, body: Vec<MStep>, to: usize, max: u32 },
}

impl PColumn {
    pub fn is_aggregate(&self) -> bool {
        !matches!(self, PColumn::Term(_) | PColumn::Shortest { .. })
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
    steps: Vec<MStep>,
    to: usize,
}

/// A condition waiting for its variables.
#[derive(Clone)]
struct Pending {
    cond: MCond,
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
    vars: Vec<PVar>,
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

    fn op(&self, kind: MOp, estimate: f64) -> PlanOp {
        let id = self.next_op.get();
        self.next_op.set(id + 1);
        PlanOp { kind, id, estimate }
    }

    fn schema(&self) -> &'s Schema {
        self.c.schema
    }

    pub(super) fn check(mut self, p: &Pattern, span: Span) -> Result<MatchPlan, CheckError> {
        let mut scope: HashMap<String, usize> = HashMap::new();
        let level = self.level(&p.clauses, &mut scope)?;
        let top = level.locals.clone();
        let again = self.seeded.then(|| level.clone());
        let block = self.plan_level(level, &BTreeSet::new());
        let (seeded, paired) = match again {
            Some(level) => {
                let seeded = top.iter().map(|&v| (v, self.plan_level(level.clone(), &BTreeSet::from([v])))).collect();
                let paired = matrix_pairs(&level)
                    .into_iter()
                    .map(|(a, b)| ((a, b), self.plan_level(level.clone(), &BTreeSet::from([a, b]))))
                    .collect();
                (seeded, paired)
            }
            None => (Vec::new(), Vec::new()),
        };
        let mut columns = Vec::with_capacity(p.columns.len());
        let mut aliases: Vec<String> = Vec::with_capacity(p.columns.len());
        for col in &p.columns {
            if aliases.contains(&col.item.alias) {
                return err(col.span, format!("column '{}' is named twice", col.item.alias));
            }
            aliases.push(col.item.alias.clone());
            columns.push(self.column(&col.item.expr, &scope, col.span)?);
        }
        if self.next_op.get() > MAX_OPS * (seeded.len() + paired.len() + 1) {
            return err(span, format!("the pattern plans into more than {MAX_OPS} operations"));
        }
        let grouped = columns.iter().any(PColumn::is_aggregate);
        let mut order = Vec::with_capacity(p.order.len());
        for key in &p.order {
            let Some(i) = aliases.iter().position(|a| *a == key.alias) else {
                let known: Vec<String> = aliases.iter().map(|a| format!("'{a}'")).collect();
                return err(
                    span,
                    format!("`order by '{}'`: no such column; the columns are {}", key.alias, known.join(", ")),
                );
            };
            order.push((i, key.descending));
        }
        Ok(MatchPlan {
            vars: self.vars,
            block,
            columns,
            aliases,
            grouped,
            distinct: p.distinct,
            order,
            limit: p.limit,
            offset: p.offset.unwrap_or(0),
            values: self.values,
            op_count: self.next_op.get(),
            explain: p.explain,
            top,
            seeded,
            paired,
        })
    }

    // ---- names and types ----

    fn var(&self, scope: &HashMap<String, usize>, name: &str, span: Span) -> Result<usize, CheckError> {
        match scope.get(name) {
            Some(&v) => Ok(v),
            None => {
                let mut known: Vec<&String> = scope.keys().collect();
                known.sort();
                let known: Vec<String> = known.iter().map(|k| k.to_string()).collect();
                let hint =
                    if known.is_empty() { String::new() } else { format!("; in scope here: {}", known.join(", ")) };
                err(span, format!("unknown variable {name} (bind it first with `{name} in …`){hint}"))
            }
        }
    }

    fn describe(&self, ty: NodeTypeId) -> String {
        self.c.describe_type(ty)
    }

    fn lit(&mut self, v: &Value, kind: LitKind, span: Span, what: &str) -> Result<usize, CheckError> {
        match kind {
            LitKind::Number => self.c.value_fits(v, ParamKind::Number, span, what)?,
            LitKind::Text => self.c.value_fits(v, ParamKind::Text, span, what)?,
            LitKind::Key(arity) => self.c.key_arity_fits(v, arity, span)?,
        }
        if let Value::Index | Value::Random(_) = v {
            return err(span, format!("{what}: `index` and `random` cannot be used in a pattern query"));
        }
        self.values.push((v.clone(), kind));
        Ok(self.values.len() - 1)
    }

    /// Types a path from `ty`; `single`: value paths, which must not fan out.
    /// The steps of a `repeat` or a `shortest` (`what`), which must lead back to the kind of
    /// node they start from.
    fn loop_steps(
        &mut self,
        ty: NodeTypeId,
        steps: &[Located<PatternStep>],
        scope: &HashMap<String, usize>,
        span: Span,
        what: &str,
    ) -> Result<Vec<MStep>, CheckError> {
        let (body, end) = self.steps(ty, steps, scope, false)?;
        if end != ty {
            return err(
                span,
                format!(
                    "the steps of `{what}` must lead back to the kind of node they start from: they start at {} \
                     and end at {}",
                    self.describe(ty),
                    self.describe(end)
                ),
            );
        }
        Ok(body)
    }

    fn steps(
        &mut self,
        mut ty: NodeTypeId,
        steps: &[Located<PatternStep>],
        scope: &HashMap<String, usize>,
        single: bool,
    ) -> Result<(Vec<MStep>, NodeTypeId), CheckError> {
        if steps.len() > MAX_STEPS {
            let at = steps.first().map_or(Span::default(), |s| s.span);
            return err(at, format!("a path of {} steps; at most {MAX_STEPS} are allowed", steps.len()));
        }
        let mut out = Vec::with_capacity(steps.len());
        for step in steps {
            let s = self.step(ty, step, scope, single)?;
            ty = s.to;
            out.push(s);
        }
        Ok((out, ty))
    }

    fn step(
        &mut self,
        ty: NodeTypeId,
        step: &Located<PatternStep>,
        scope: &HashMap<String, usize>,
        single: bool,
    ) -> Result<MStep, CheckError> {
        let span = step.span;
        let schema = self.schema();
        let fans = |what: &str| -> Result<MStep, CheckError> {
            err(
                span,
                format!(
                    "{what} reaches many nodes, but a value path must reach one; bind a variable to them \
                     (`x in …`) and read the value from it"
                ),
            )
        };
        Ok(match &step.item {
            PatternStep::Group(name) => {
                let p = self.c.property(ty, name, span)?;
                self.c.expect_kind(p, "group", "+", span)?;
                let PropertyKind::Group { node } = schema.property(p).kind else { unreachable!() };
                MStep { kind: MStepKind::Group(p), from: ty, to: node }
            }
            PatternStep::Dictionary { name, key } | PatternStep::Matrix { name, key } => {
                let matrix = matches!(step.item, PatternStep::Matrix { .. });
                let p = self.c.property(ty, name, span)?;
                let (want, sym) = if matrix { ("matrix", "%") } else { ("dictionary", ".") };
                self.c.expect_kind(p, want, sym, span)?;
                let (node, arity) = match &schema.property(p).kind {
                    PropertyKind::Dictionary { node } => (*node, None),
                    PropertyKind::Matrix { node, target } => (*node, Some(target)),
                    _ => unreachable!(),
                };
                let kind = match (key, arity) {
                    (None, _) if single => return fans(&format!("`{sym} '{name}'` without a key")),
                    (None, _) => MStepKind::Entries(p),
                    (Some(PatternKey::Value(v)), None) => {
                        MStepKind::EntryKey(p, self.lit(v, LitKind::Text, span, &format!("key of '{name}'"))?)
                    }
                    (Some(PatternKey::Value(v)), Some(target)) => {
                        MStepKind::EntryKey(p, self.lit(v, LitKind::Key(target.key_arity), span, "matrix key")?)
                    }
                    (Some(PatternKey::Var(var)), Some(target)) => {
                        let v = self.var(scope, var, span)?;
                        if self.vars[v].ty != target.entry_type {
                            return err(
                                span,
                                format!(
                                    "matrix '{name}' is keyed by {}, but {var} is {}",
                                    self.describe(target.entry_type),
                                    self.describe(self.vars[v].ty)
                                ),
                            );
                        }
                        MStepKind::EntryOf(p, v)
                    }
                    (Some(PatternKey::Var(var)), None) => {
                        return err(
                            span,
                            format!(
                                "dictionary '{name}' is keyed by text, not by a node: write its key as a value \
                                 (\"key\" or $param), or link {var} with `… == {var}`"
                            ),
                        )
                    }
                };
                MStep { kind, from: ty, to: node }
            }
            PatternStep::State { stategroup, state } => {
                let p = self.c.property(ty, stategroup, span)?;
                self.c.expect_kind(p, "stategroup", "?", span)?;
                let s = self.c.state_index(p, state, span)?;
                let PropertyKind::StateGroup { states } = &schema.property(p).kind else { unreachable!() };
                MStep { kind: MStepKind::State(p, s), from: ty, to: states[s as usize].node }
            }
            PatternStep::Reference(name) => {
                let p = self.c.property(ty, name, span)?;
                match &schema.property(p).kind {
                    PropertyKind::Reference { target } => {
                        MStep { kind: MStepKind::Reference(p), from: ty, to: target.entry_type }
                    }
                    PropertyKind::Matrix { target, .. } if !single => {
                        MStep { kind: MStepKind::Targets(p), from: ty, to: target.entry_type }
                    }
                    PropertyKind::Matrix { .. } => return fans(&format!("`> '{name}'` over a matrix")),
                    other => {
                        return err(
                            span,
                            format!("'{name}' is a {}, but `>` follows a reference or a matrix", other.keyword()),
                        )
                    }
                }
            }
            PatternStep::Reverse(name) => {
                if single {
                    return fans(&format!("`< '{name}'`"));
                }
                let found: Vec<PropertyId> = schema
                    .properties
                    .iter()
                    .filter(|p| p.name == *name)
                    .filter(|p| match &p.kind {
                        PropertyKind::Reference { target } | PropertyKind::Matrix { target, .. } => {
                            target.entry_type == ty
                        }
                        _ => false,
                    })
                    .map(|p| p.id)
                    .collect();
                let p = match found.as_slice() {
                    [p] => *p,
                    [] => {
                        return err(
                            span,
                            format!("no reference or matrix named '{name}' points at {}", self.describe(ty)),
                        )
                    }
                    many => {
                        let places: Vec<String> =
                            many.iter().map(|&p| self.describe(schema.property(p).owner)).collect();
                        return err(
                            span,
                            format!(
                                "`< '{name}'` is ambiguous: references named '{name}' in {} point here; \
                                 follow one forwards from a variable instead (`x > '{name}' == y`)",
                                places.join(" and ")
                            ),
                        );
                    }
                };
                let owner = schema.property(p).owner;
                let kind = match schema.property(p).kind {
                    PropertyKind::Matrix { .. } => MStepKind::Owners(p),
                    _ => MStepKind::Referrers(p),
                };
                MStep { kind, from: ty, to: owner }
            }
            PatternStep::Up(kind) => {
                let nt = schema.node_type(ty);
                let (from, parent_of, ok) = match (kind, nt.parent) {
                    (UpKind::Dictionary, ParentLink::DictionaryEntry { property })
                    | (UpKind::Matrix, ParentLink::MatrixEntry { property }) => {
                        (UpFrom::Entry(property), property, true)
                    }
                    (UpKind::Group, ParentLink::Group { property }) => (UpFrom::Group(property), property, true),
                    (UpKind::State, ParentLink::State { property, state }) => {
                        (UpFrom::State(property, state), property, true)
                    }
                    _ => (UpFrom::Group(0), 0, false),
                };
                if !ok {
                    let sym = match kind {
                        UpKind::Dictionary => ".^",
                        UpKind::Matrix => "%^",
                        UpKind::Group => "+^",
                        UpKind::State => "?^",
                    };
                    let what = match nt.parent {
                        ParentLink::Root => "the root has no parent".to_string(),
                        ParentLink::DictionaryEntry { .. } => format!("{} is left with `.^`", self.describe(ty)),
                        ParentLink::MatrixEntry { .. } => format!("{} is left with `%^`", self.describe(ty)),
                        ParentLink::Group { .. } => format!("{} is left with `+^`", self.describe(ty)),
                        ParentLink::State { .. } => format!("{} is left with `?^`", self.describe(ty)),
                    };
                    return err(span, format!("`{sym}` does not apply here: {what}"));
                }
                if schema.record_of(ty).is_none() {
                    return err(span, format!("cannot go up from {}: it stores nothing", self.describe(ty)));
                }
                MStep { kind: MStepKind::Up(from), from: ty, to: schema.property(parent_of).owner }
            }
            PatternStep::Repeat { min, max, steps } => {
                if single {
                    return fans("`repeat`");
                }
                if min > max || *max > crate::parse::MAX_REPEAT {
                    return err(
                        span,
                        format!("`repeat {min} to {max}`: need MIN <= MAX <= {}", crate::parse::MAX_REPEAT),
                    );
                }
                let body = self.loop_steps(ty, steps, scope, span, "repeat")?;
                MStep { kind: MStepKind::Repeat { min: *min, max: *max, body }, from: ty, to: ty }
            }
        })
    }

    // ---- clauses ----

    /// Checks one level's clauses, adding its variables to `scope` (the caller removes the
    /// locals of an `exists` afterwards).
    fn level(&mut self, clauses: &[Located<Clause>], scope: &mut HashMap<String, usize>) -> Result<Level, CheckError> {
        let mut level = Level::default();
        let mut conditions = Vec::new();
        for clause in clauses {
            match &clause.item {
                Clause::Bind { var, from, path } => {
                    if scope.contains_key(var) {
                        return err(clause.span, format!("variable {var} is already bound; choose another name"));
                    }
                    let (anchor, start) = match from {
                        None => (Anchor::Root, ROOT),
                        Some(f) => {
                            let v = self.var(scope, f, clause.span)?;
                            (Anchor::Var(v), self.vars[v].ty)
                        }
                    };
                    let (steps, ty) = self.steps(start, path, scope, false)?;
                    if self.schema().record_of(ty).is_none() {
                        let at = path.last().map_or(clause.span, |s| s.span);
                        return err(
                            at,
                            format!(
                                "{var} would be bound to {}, which stores nothing; bind it to the node that holds \
                                 the stategroup and test the state with `where {var} ? 'stategroup' * 'state'`",
                                self.describe(ty)
                            ),
                        );
                    }
                    if self.vars.len() >= MAX_VARS {
                        return err(clause.span, format!("a pattern may bind at most {MAX_VARS} variables"));
                    }
                    self.vars.push(PVar { name: var.clone(), ty });
                    let id = self.vars.len() - 1;
                    scope.insert(var.clone(), id);
                    level.locals.push(id);
                    level.edges.push(Edge { from: anchor, steps, to: id });
                }
                Clause::Where(cond) => conditions.push(cond),
            }
        }
        // Conditions see every variable of their level, wherever they are written.
        for cond in conditions {
            self.conjuncts(cond, scope, &mut level)?;
        }
        Ok(level)
    }

    /// Splits a `where` into conjuncts: positive links become edges the planner may bind by;
    /// the rest wait for their variables.
    fn conjuncts(
        &mut self,
        cond: &Located<Condition>,
        scope: &mut HashMap<String, usize>,
        level: &mut Level,
    ) -> Result<(), CheckError> {
        match &cond.item {
            Condition::And(list) => {
                for c in list {
                    self.conjuncts(c, scope, level)?;
                }
                Ok(())
            }
            Condition::Path { var, path, target: Some(target) } => {
                let from = self.var(scope, var, cond.span)?;
                let to = self.var(scope, target, cond.span)?;
                let (steps, ty) = self.steps(self.vars[from].ty, path, scope, false)?;
                self.same_type(ty, to, var, target, cond.span)?;
                let mut vars = BTreeSet::new();
                steps_vars(&steps, &mut vars);
                if vars.is_empty() || vars.iter().all(|&v| v == from || v == to) {
                    level.edges.push(Edge { from: Anchor::Var(from), steps, to });
                } else {
                    // A step keyed by a third variable: a check once all are bound.
                    vars.insert(from);
                    vars.insert(to);
                    let cond = self.reach(Anchor::Var(from), steps, Some(Anchor::Var(to)));
                    level.pending.push(Pending { cond, vars, selectivity: 0.3 });
                }
                Ok(())
            }
            _ => {
                let (cond, selectivity) = self.condition(cond, scope)?;
                let mut vars = BTreeSet::new();
                cond_vars(&cond, &mut vars);
                level.pending.push(Pending { cond, vars, selectivity });
                Ok(())
            }
        }
    }

    fn same_type(&self, ty: NodeTypeId, to: usize, var: &str, target: &str, span: Span) -> Result<(), CheckError> {
        if ty != self.vars[to].ty {
            return err(
                span,
                format!(
                    "these steps from {var} reach {}, but {target} is {}: they can never be the same node",
                    self.describe(ty),
                    self.describe(self.vars[to].ty)
                ),
            );
        }
        Ok(())
    }

    /// A condition and a guess of the share of matches it keeps.
    fn condition(
        &mut self,
        cond: &Located<Condition>,
        scope: &mut HashMap<String, usize>,
    ) -> Result<(MCond, f64), CheckError> {
        let span = cond.span;
        Ok(match &cond.item {
            Condition::And(list) => {
                let mut parts = Vec::with_capacity(list.len());
                let mut sel = 1.0;
                for c in list {
                    let (m, s) = self.condition(c, scope)?;
                    parts.push(m);
                    sel *= s;
                }
                (MCond::And(parts), sel)
            }
            Condition::Or(list) => {
                let mut parts = Vec::with_capacity(list.len());
                let mut keep = 0.0;
                for c in list {
                    let (m, s) = self.condition(c, scope)?;
                    parts.push(m);
                    keep += s;
                }
                (MCond::Or(parts), f64::min(keep, 1.0))
            }
            Condition::Not(inner) => {
                let (m, s) = self.condition(inner, scope)?;
                (MCond::Not(Box::new(m)), f64::max(1.0 - s, 0.3))
            }
            Condition::Exists(clauses) => {
                let before: Vec<String> = scope.keys().cloned().collect();
                let level = self.level(clauses, scope)?;
                // The sub-pattern is planned from the outer variables it uses.
                let mut outer = BTreeSet::new();
                level_vars(&level, &mut outer);
                for l in &level.locals {
                    outer.remove(l);
                }
                let block = self.plan_level(level, &outer);
                scope.retain(|k, _| before.contains(k));
                (MCond::Exists(block), 0.5)
            }
            Condition::Path { var, path, target } => {
                let from = self.var(scope, var, span)?;
                let (steps, ty) = self.steps(self.vars[from].ty, path, scope, false)?;
                let to = match target {
                    Some(t) => {
                        let to = self.var(scope, t, span)?;
                        self.same_type(ty, to, var, t, span)?;
                        Some(Anchor::Var(to))
                    }
                    None => None,
                };
                (self.reach(Anchor::Var(from), steps, to), 0.5)
            }
            Condition::Compare { left, op, right } => self.compare(left, *op, right, scope, span)?,
            Condition::Prefix { term, prefix } => {
                let (t, kind) = self.term(term, scope, span)?;
                if kind != Some(LeafKind::Text) {
                    return err(span, "a prefix `( [ 'p' ] * )` applies to a text property");
                }
                let prefix = self.lit(prefix, LitKind::Text, span, "prefix")?;
                (MCond::Prefix { term: t, prefix }, 0.2)
            }
            Condition::In { term, states } => {
                let (t, kind) = self.term(term, scope, span)?;
                let (MTerm::Leaf { property, .. }, Some(LeafKind::Stategroup)) = (&t, kind) else {
                    return err(span, "`in ( 'S' … )` applies to a stategroup property");
                };
                let set =
                    states.iter().map(|s| self.c.state_index(*property, s, span)).collect::<Result<Vec<_>, _>>()?;
                (MCond::States { term: t, states: set }, 0.5)
            }
        })
    }

    fn compare(
        &mut self,
        left: &Located<Term>,
        op: Comparison,
        right: &Located<Term>,
        scope: &HashMap<String, usize>,
        span: Span,
    ) -> Result<(MCond, f64), CheckError> {
        if let (Term::Value(_), Term::Property { .. }) = (&left.item, &right.item) {
            // `5 < x number : 'n'` is `x number : 'n' > 5`.
            return self.compare(right, op.flipped(), left, scope, span);
        }
        let (l, lk) = self.term(left, scope, span)?;
        let Some(lk) = lk else {
            return err(span, "compare a property (`x number : 'n' > 5`); nodes are compared with `x == y` / `x != y`");
        };
        let eq = if op == Comparison::Eq { 0.1 } else { 0.3 };
        let span = located(right.span, span);
        match &right.item {
            Term::Value(v) => {
                let MTerm::Leaf { property, .. } = &l else { unreachable!("a leaf kind comes with a leaf term") };
                let property = *property;
                let cond = match lk {
                    LeafKind::Number => {
                        let r = self.lit(v, LitKind::Number, span, "the compared value")?;
                        MCond::Compare { left: l, op, right: MTerm::Lit(r), how: Compared::Number }
                    }
                    LeafKind::Text => {
                        let r = self.lit(v, LitKind::Text, span, "the compared value")?;
                        MCond::Compare { left: l, op, right: MTerm::Lit(r), how: Compared::Text }
                    }
                    LeafKind::Reference => {
                        if !matches!(op, Comparison::Eq | Comparison::Ne) {
                            return err(span, "references compare with `==` and `!=` only");
                        }
                        let PropertyKind::Reference { target } = &self.schema().property(property).kind else {
                            unreachable!()
                        };
                        let r = self.lit(v, LitKind::Key(target.key_arity), span, "the compared key")?;
                        MCond::Compare { left: l, op, right: MTerm::Lit(r), how: Compared::Key }
                    }
                    LeafKind::Stategroup => {
                        let Value::Text(name) = v else {
                            return err(span, "a stategroup compares with a state 'Name'");
                        };
                        if !matches!(op, Comparison::Eq | Comparison::Ne) {
                            return err(span, "states compare with `==` and `!=` only");
                        }
                        let i = self.c.state_index(property, name, span)?;
                        let PropertyKind::StateGroup { states } = &self.schema().property(property).kind else {
                            unreachable!()
                        };
                        let set = if op == Comparison::Eq {
                            vec![i]
                        } else {
                            (0..states.len() as StateIndex).filter(|&j| j != i).collect()
                        };
                        MCond::States { term: l, states: set }
                    }
                };
                Ok((cond, eq))
            }
            _ => {
                let (r, rk) = self.term(right, scope, span)?;
                let Some(rk) = rk else {
                    return err(span, "compare with a property (`y number : 'n'`) or a value");
                };
                if rk != lk {
                    return err(
                        span,
                        format!("cannot compare a {lk:?} with a {rk:?}; both sides must be of one kind").to_lowercase(),
                    );
                }
                let how = match lk {
                    LeafKind::Number => Compared::Number,
                    LeafKind::Text => Compared::Text,
                    LeafKind::Stategroup => Compared::StateName,
                    LeafKind::Reference => Compared::Key,
                };
                if matches!(how, Compared::StateName | Compared::Key) && !matches!(op, Comparison::Eq | Comparison::Ne)
                {
                    return err(span, "states and references compare with `==` and `!=` only");
                }
                Ok((MCond::Compare { left: l, op, right: r, how }, 0.3))
            }
        }
    }

    /// A term and, for a property, its kind (`None` for a variable's key or a value).
    fn term(
        &mut self,
        t: &Located<Term>,
        scope: &HashMap<String, usize>,
        span: Span,
    ) -> Result<(MTerm, Option<LeafKind>), CheckError> {
        let span = located(t.span, span);
        Ok(match &t.item {
            Term::Var(name) => (MTerm::Key(self.var(scope, name, span)?), None),
            Term::Property { var, path, kind, property } => {
                let v = self.var(scope, var, span)?;
                let (steps, ty) = self.steps(self.vars[v].ty, path, scope, true)?;
                let p = self.c.property(ty, property, span)?;
                super::check_leaf_kind(self.schema().property(p), *kind, span)?;
                (MTerm::Leaf { var: v, steps, property: p, kind: *kind }, Some(*kind))
            }
            Term::Value(v) => {
                let kind = match v {
                    Value::Int(_) => LitKind::Number,
                    _ => LitKind::Text,
                };
                (MTerm::Lit(self.lit(v, kind, span, "value")?), None)
            }
        })
    }

    fn column(&mut self, e: &ColumnExpr, scope: &HashMap<String, usize>, span: Span) -> Result<PColumn, CheckError> {
        let number = |me: &mut Self, t: &Located<Term>, what: &str| -> Result<MTerm, CheckError> {
            let (m, k) = me.term(t, scope, span)?;
            if k != Some(LeafKind::Number) {
                return err(
                    located(t.span, span),
                    format!("`{what}` adds numbers: give it a number property (`x number : 'n'`)"),
                );
            }
            Ok(m)
        };
        Ok(match e {
            ColumnExpr::Term(t) => PColumn::Term(self.term(t, scope, span)?.0),
            ColumnExpr::Count { distinct: true, term: None } => {
                return err(span, "`count ( distinct … )` counts the distinct values of a term: name one")
            }
            ColumnExpr::Count { distinct, term } => PColumn::Count {
                distinct: *distinct,
                term: match term {
                    Some(t) => Some(self.term(t, scope, span)?.0),
                    None => None,
                },
            },
            ColumnExpr::Sum(t) => PColumn::Sum(number(self, t, "sum")?),
            ColumnExpr::Avg(t) => PColumn::Avg(number(self, t, "avg")?),
            ColumnExpr::Min(t) => PColumn::Min(self.term(t, scope, span)?.0),
            ColumnExpr::Max(t) => PColumn::Max(self.term(t, scope, span)?.0),
            ColumnExpr::Shortest { from, steps, to, max } => {
                if *max > crate::parse::MAX_REPEAT {
                    return err(span, format!("`shortest … max {max}`: at most {}", crate::parse::MAX_REPEAT));
                }
                let f = self.var(scope, from, span)?;
                let t = self.var(scope, to, span)?;
                let ty = self.vars[f].ty;
                let body = self.loop_steps(ty, steps, scope, span, "shortest")?;
                if self.vars[t].ty != ty {
                    return err(span, format!("{from} and {to} are different kinds of node: no path joins them"));
                }
                PColumn::Shortest { from: f, body, to: t, max: *max }
            }
        })
    }

    // ---- planning ----

    fn reach(&self, from: Anchor, steps: Vec<MStep>, to: Option<Anchor>) -> MCond {
        // With both ends known, walk from the end whose walk is cheaper; from a variable up to
        // the root rather than from the root down.
        if let Some(to) = to {
            let back = reverse(&steps);
            if from == Anchor::Root || check_cost(&back, self.schema()) < check_cost(&steps, self.schema()) {
                return MCond::Reach { from: to, steps: back, to: Some(from) };
            }
        }
        MCond::Reach { from, steps, to }
    }

    /// The best schema index to bind `e.to` by, when `e` leads from the root to every entry
    /// of an indexed collection and a waiting condition on that variable alone is one the
    /// index answers (equality, states, prefix, or range bounds, by the index's kind).
    fn index_choice(&self, e: &Edge, bound: &BTreeSet<usize>, pending: &[Pending]) -> Option<IndexChoice> {
        let schema = self.schema();
        if e.from != Anchor::Root || bound.contains(&e.to) || schema.indexes.is_empty() {
            return None;
        }
        // Unkeyed entry, group and state steps reach every entry of the last collection: a
        // node type has one place in the tree, and a state's collections exist only in it.
        let all = e
            .steps
            .iter()
            .all(|s| matches!(s.kind, MStepKind::Entries(_) | MStepKind::Group(_) | MStepKind::State(..)));
        let Some(MStepKind::Entries(collection)) = e.steps.last().map(|s| &s.kind) else { return None };
        if !all {
            return None;
        }
        let var = e.to;
        let every = scan_cost(&e.steps, schema);
        let mut best: Option<IndexChoice> = None;
        for (n, decl) in schema.indexes_of_collection(*collection) {
            let mut equal = None;
            let mut states = None;
            let mut prefix = None;
            let (mut low, mut high) = (None, None);
            for (j, p) in pending.iter().enumerate() {
                if p.vars.len() != 1 || !p.vars.contains(&var) {
                    continue;
                }
                let Some(use_) = index_use(&p.cond, var, decl.property) else { continue };
                let fits = matches!(
                    (&use_, decl.kind),
                    (IndexUse::Equal(_) | IndexUse::States(_), _)
                        | (IndexUse::Prefix(_), IndexKind::Prefix | IndexKind::Range)
                        | (IndexUse::Low(_) | IndexUse::High(_), IndexKind::Range)
                );
                if !fits {
                    continue;
                }
                match use_ {
                    IndexUse::Equal(v) if equal.is_none() => equal = Some((v, j)),
                    IndexUse::States(list) if states.is_none() => states = Some((list, j)),
                    IndexUse::Prefix(v) if prefix.is_none() => prefix = Some((v, j)),
                    IndexUse::Low(v) if low.is_none() => low = Some((v, j)),
                    IndexUse::High(v) if high.is_none() => high = Some((v, j)),
                    _ => {}
                }
            }
            // The most selective use: equality, then states, then a prefix, then a range.
            let (probe, served) = if let Some((v, j)) = equal {
                (IndexProbe::Equal(v), vec![j])
            } else if let Some((list, j)) = states {
                (IndexProbe::States(list), vec![j])
            } else if let Some((v, j)) = prefix {
                (IndexProbe::Prefix(v), vec![j])
            } else if low.is_some() || high.is_some() {
                let served = low.iter().chain(high.iter()).map(|&(_, j)| j).collect();
                (IndexProbe::Range { low: low.map(|(v, _)| v), high: high.map(|(v, _)| v) }, served)
            } else {
                continue;
            };
            let rows = if decl.unique && matches!(probe, IndexProbe::Equal(_)) {
                1.0
            } else {
                (every * served.iter().map(|&j| pending[j].selectivity).product::<f64>()).max(1.0)
            };
            let choice = IndexChoice { index: n, probe, served, rows };
            if best.as_ref().is_none_or(|b| choice.rows < b.rows) {
                best = Some(choice);
            }
        }
        best
    }

    /// A variable reached from a bound one by following links forwards (at most one matrix
    /// step), that several later conditions or links tie to variables not yet bound, is
    /// worth binding early: each of them then filters where the other variable is bound
    /// (ConnectedSegments' sensor, tested at every segment). The factor scales its cost.
    #[allow(clippy::too_many_arguments)]
    fn early_discount(
        &self,
        var: usize,
        edge: usize,
        backward: bool,
        edges: &[Edge],
        pending: &[Pending],
        used: &[bool],
        with: &BTreeSet<usize>,
    ) -> f64 {
        let e = &edges[edge];
        let forward = e.steps.iter().all(|s| {
            matches!(
                s.kind,
                MStepKind::Group(_) | MStepKind::State(..) | MStepKind::Reference(_) | MStepKind::Targets(_)
            )
        }) && e.steps.iter().filter(|s| matches!(s.kind, MStepKind::Targets(_))).count() <= 1;
        if backward || e.from == Anchor::Root || !forward {
            return 1.0;
        }
        let ties = pending.iter().filter(|p| p.vars.contains(&var) && p.vars.iter().any(|v| !with.contains(v))).count()
            + edges
                .iter()
                .enumerate()
                .filter(|&(j, o)| {
                    let ends = [anchor_var_of(o.from), Some(o.to)];
                    j != edge
                        && !used[j]
                        && ends.contains(&Some(var))
                        && ends.iter().flatten().any(|v| !with.contains(v))
                })
                .count();
        if ties < EARLY_TIES {
            return 1.0;
        }
        TIE_DISCOUNT.powi(ties.min(MAX_TIES) as i32)
    }

    fn plan_level(&self, level: Level, outer: &BTreeSet<usize>) -> Block {
        let Level { locals, edges, mut pending } = level;
        let schema = self.schema();
        let mut bound: BTreeSet<usize> = outer.clone();
        let mut used = vec![false; edges.len()];
        let mut ops = Vec::new();
        // The guessed number of rows so far in one run of this block.
        let mut rows = 1.0;
        let ready = |bound: &BTreeSet<usize>,
                     used: &mut Vec<bool>,
                     pending: &mut Vec<Pending>,
                     ops: &mut Vec<PlanOp>,
                     rows: &mut f64| {
            for (i, e) in edges.iter().enumerate() {
                let from_bound = match e.from {
                    Anchor::Root => true,
                    Anchor::Var(v) => bound.contains(&v),
                };
                if !used[i] && from_bound && bound.contains(&e.to) {
                    used[i] = true;
                    if e.from == Anchor::Root && implied_by_type(&e.steps) {
                        continue; // a node of this type can only sit at the end of this path
                    }
                    *rows *= 0.5;
                    let check = if e.from == Anchor::Root && e.steps.iter().all(MStep::goes_down) {
                        // Up from the node: one parent read per step, not a scan from the root.
                        self.reach(Anchor::Var(e.to), reverse(&e.steps), Some(Anchor::Root))
                    } else {
                        self.reach(e.from, e.steps.clone(), Some(Anchor::Var(e.to)))
                    };
                    ops.push(self.op(MOp::Filter(check), *rows));
                }
            }
            let mut i = 0;
            while i < pending.len() {
                if pending[i].vars.iter().all(|v| bound.contains(v)) {
                    let p = pending.remove(i);
                    *rows *= p.selectivity;
                    ops.push(self.op(MOp::Filter(p.cond), *rows));
                } else {
                    i += 1;
                }
            }
        };
        ready(&bound, &mut used, &mut pending, &mut ops, &mut rows);
        while locals.iter().any(|v| !bound.contains(v)) {
            // (cost, var, edge, backward, index)
            let mut best: Option<(f64, usize, usize, bool, Option<IndexChoice>)> = None;
            for (i, e) in edges.iter().enumerate() {
                if used[i] {
                    continue;
                }
                if let Some(choice) = self.index_choice(e, &bound, &pending) {
                    let mut with = bound.clone();
                    with.insert(e.to);
                    let others: f64 = pending
                        .iter()
                        .enumerate()
                        .filter(|(j, p)| {
                            !choice.served.contains(j)
                                && p.vars.contains(&e.to)
                                && p.vars.iter().all(|v| with.contains(v))
                        })
                        .map(|(_, p)| p.selectivity)
                        .product();
                    // Half: reading only the matching entries beats scanning for the same rows.
                    let cost = choice.rows * others * 0.5;
                    if best.as_ref().is_none_or(|(c, bv, ..)| cost < *c || (cost == *c && e.to < *bv)) {
                        best = Some((cost, e.to, i, false, Some(choice)));
                    }
                }
                let from_bound = match e.from {
                    Anchor::Root => true,
                    Anchor::Var(v) => bound.contains(&v),
                };
                let option = match (from_bound, bound.contains(&e.to), e.from) {
                    (true, false, _) if keys_bound(&e.steps, &bound) => {
                        Some((e.to, false, scan_cost(&e.steps, schema)))
                    }
                    (false, true, Anchor::Var(v)) if keys_bound(&e.steps, &bound) => {
                        Some((v, true, scan_cost(&reverse(&e.steps), schema)))
                    }
                    _ => None,
                };
                let Some((var, backward, cost)) = option else { continue };
                let mut with = bound.clone();
                with.insert(var);
                let keep: f64 = pending
                    .iter()
                    .filter(|p| p.vars.contains(&var) && p.vars.iter().all(|v| with.contains(v)))
                    .map(|p| p.selectivity)
                    .product();
                let cost = cost * keep * self.early_discount(var, i, backward, &edges, &pending, &used, &with);
                if best.as_ref().is_none_or(|(c, bv, ..)| cost < *c || (cost == *c && var < *bv)) {
                    best = Some((cost, var, i, backward, None));
                }
            }
            let Some((_, var, i, backward, index)) = best else {
                unreachable!("every variable is bound from the root or an earlier variable")
            };
            used[i] = true;
            if let Some(choice) = index {
                rows *= choice.rows;
                ops.push(self.op(MOp::Index { var, index: choice.index, probe: choice.probe }, rows));
                let mut served = choice.served;
                served.sort_unstable();
                for j in served.into_iter().rev() {
                    let p = pending.remove(j);
                    ops.push(self.op(MOp::Filter(p.cond), rows));
                }
                bound.insert(var);
                ready(&bound, &mut used, &mut pending, &mut ops, &mut rows);
                continue;
            }
            let e = &edges[i];
            let (from, steps) = match (backward, e.from) {
                (false, from) => (from, e.steps.clone()),
                (true, _) => (Anchor::Var(e.to), reverse(&e.steps)),
            };
            let dedupe = needs_dedupe(&steps);
            rows *= scan_cost(&steps, schema);
            ops.push(self.op(MOp::Scan { var, from, steps, dedupe, backward }, rows));
            bound.insert(var);
            ready(&bound, &mut used, &mut pending, &mut ops, &mut rows);
        }
        debug_assert!(pending.is_empty(), "every condition's variables are bound at the end");
        Block { ops }
    }
}

/// The variable an anchor names (`None` for the root).
fn anchor_var_of(a: Anchor) -> Option<usize> {
    match a {
        Anchor::Root => None,
        Anchor::Var(v) => Some(v),
    }
}

/// How a condition on `var` alone could be answered by an index on `property`.
enum IndexUse {
    Equal(usize),
    States(Vec<StateIndex>),
    Prefix(usize),
    Low(usize),
    High(usize),
}

/// Is `t` the value of `property` on `var` itself (or in a group of it)?
fn is_leaf_of(t: &MTerm, var: usize, property: PropertyId) -> bool {
    matches!(t, MTerm::Leaf { var: v, steps, property: p, .. }
        if *v == var && *p == property && steps.iter().all(|s| matches!(s.kind, MStepKind::Group(_))))
}

fn index_use(c: &MCond, var: usize, property: PropertyId) -> Option<IndexUse> {
    match c {
        MCond::Compare { left, op, right: MTerm::Lit(v), how: Compared::Number | Compared::Text }
            if is_leaf_of(left, var, property) =>
        {
            match op {
                Comparison::Eq => Some(IndexUse::Equal(*v)),
                Comparison::Gt | Comparison::Ge => Some(IndexUse::Low(*v)),
                Comparison::Lt | Comparison::Le => Some(IndexUse::High(*v)),
                Comparison::Ne => None,
            }
        }
        MCond::Prefix { term, prefix } if is_leaf_of(term, var, property) => Some(IndexUse::Prefix(*prefix)),
        MCond::States { term, states } if is_leaf_of(term, var, property) => Some(IndexUse::States(states.clone())),
        // `where x ? 'sg' * 's'` (through groups of x).
        MCond::Reach { from: Anchor::Var(v), steps, to: None } if *v == var => match steps.split_last() {
            Some((MStep { kind: MStepKind::State(p, s), .. }, groups))
                if *p == property && groups.iter().all(|g| matches!(g.kind, MStepKind::Group(_))) =>
            {
                Some(IndexUse::States(vec![*s]))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The span of a part, or of its whole when the part has none (JSON input).
fn located(part: Span, whole: Span) -> Span {
    if part == Span::default() {
        whole
    } else {
        part
    }
}

/// Variables a step list names as keys.
fn steps_vars(steps: &[MStep], out: &mut BTreeSet<usize>) {
    for s in steps {
        match &s.kind {
            MStepKind::EntryOf(_, v) | MStepKind::UpIfTarget(_, v) => {
                out.insert(*v);
            }
            MStepKind::Repeat { body, .. } => steps_vars(body, out),
            _ => {}
        }
    }
}

fn keys_bound(steps: &[MStep], bound: &BTreeSet<usize>) -> bool {
    let mut vars = BTreeSet::new();
    steps_vars(steps, &mut vars);
    vars.iter().all(|v| bound.contains(v))
}

fn term_vars(t: &MTerm, out: &mut BTreeSet<usize>) {
    match t {
        MTerm::Key(v) => {
            out.insert(*v);
        }
        MTerm::Leaf { var, steps, .. } => {
            out.insert(*var);
            steps_vars(steps, out);
        }
        MTerm::Lit(_) => {}
    }
}

fn anchor_var(a: &Anchor, out: &mut BTreeSet<usize>) {
    if let Anchor::Var(v) = a {
        out.insert(*v);
    }
}

/// The variables a condition needs bound (for `exists`: the outer ones it uses).
fn cond_vars(c: &MCond, out: &mut BTreeSet<usize>) {
    match c {
        MCond::And(l) | MCond::Or(l) => l.iter().for_each(|c| cond_vars(c, out)),
        MCond::Not(c) => cond_vars(c, out),
        MCond::Exists(block) => {
            let mut used = BTreeSet::new();
            let mut bound = BTreeSet::new();
            for op in &block.ops {
                match &op.kind {
                    MOp::Scan { var, from, steps, .. } => {
                        anchor_var(from, &mut used);
                        steps_vars(steps, &mut used);
                        bound.insert(*var);
                    }
                    MOp::Index { var, .. } => {
                        bound.insert(*var);
                    }
                    MOp::Filter(c) => cond_vars(c, &mut used),
                }
            }
            out.extend(used.difference(&bound));
        }
        MCond::Reach { from, steps, to } => {
            anchor_var(from, out);
            steps_vars(steps, out);
            if let Some(to) = to {
                anchor_var(to, out);
            }
        }
        MCond::Compare { left, right, .. } => {
            term_vars(left, out);
            term_vars(right, out);
        }
        MCond::Prefix { term, .. } | MCond::States { term, .. } => term_vars(term, out),
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

/// The same path walked from its end to its start.
pub fn reverse(steps: &[MStep]) -> Vec<MStep> {
    steps
        .iter()
        .rev()
        .map(|s| {
            let kind = match &s.kind {
                MStepKind::Group(p) => MStepKind::Up(UpFrom::Group(*p)),
                MStepKind::Entries(p) => MStepKind::Up(UpFrom::Entry(*p)),
                MStepKind::EntryKey(p, k) => MStepKind::UpIfKey(*p, *k),
                MStepKind::EntryOf(p, v) => MStepKind::UpIfTarget(*p, *v),
                MStepKind::State(p, st) => MStepKind::Up(UpFrom::State(*p, *st)),
                MStepKind::Reference(p) => MStepKind::Referrers(*p),
                MStepKind::Targets(p) => MStepKind::Owners(*p),
                MStepKind::Referrers(p) => MStepKind::Reference(*p),
                MStepKind::Owners(p) => MStepKind::Targets(*p),
                MStepKind::Up(UpFrom::Entry(p)) => MStepKind::Entries(*p),
                MStepKind::Up(UpFrom::Group(p)) => MStepKind::Group(*p),
                MStepKind::Up(UpFrom::State(p, st)) => MStepKind::State(*p, *st),
                MStepKind::UpIfKey(p, k) => MStepKind::EntryKey(*p, *k),
                MStepKind::UpIfTarget(p, v) => MStepKind::EntryOf(*p, *v),
                MStepKind::Repeat { min, max, body } => MStepKind::Repeat { min: *min, max: *max, body: reverse(body) },
            };
            MStep { kind, from: s.to, to: s.from }
        })
        .collect()
}

/// Whether a scan reads the final node type's table instead of walking: from the root, down
/// through every entry of at least two collections or through a state. Every node of that
/// type sits at the end of such a path (the tree has one path per type), so its table holds
/// exactly the nodes the walk would reach, without the key index descents on the way; the
/// order differs (row order, not key order), which a match without `order by` does not fix.
pub fn reads_table(from: &Anchor, steps: &[MStep]) -> bool {
    let full =
        steps.iter().all(|s| matches!(s.kind, MStepKind::Entries(_) | MStepKind::Group(_) | MStepKind::State(..)));
    let entries = steps.iter().filter(|s| matches!(s.kind, MStepKind::Entries(_))).count();
    let states = steps.iter().any(|s| matches!(s.kind, MStepKind::State(..)));
    *from == Anchor::Root && full && (entries >= 2 || states)
}

/// True when a root path's steps are all unkeyed entries and groups: every node of the
/// final type is at the end of such a path, so checking it is needless.
fn implied_by_type(steps: &[MStep]) -> bool {
    steps.iter().all(|s| matches!(s.kind, MStepKind::Entries(_) | MStepKind::Group(_)))
}

fn fanout(s: &MStep, schema: &Schema) -> f64 {
    match &s.kind {
        MStepKind::Entries(p) => {
            if schema.property(*p).owner == ROOT {
                ROOT_ENTRIES
            } else {
                NESTED_ENTRIES
            }
        }
        MStepKind::Targets(_) | MStepKind::Referrers(_) | MStepKind::Owners(_) => LINKS,
        MStepKind::State(..) => 0.5,
        MStepKind::Repeat { max, body, .. } => {
            let one: f64 = body.iter().map(|s| fanout(s, schema)).product();
            f64::min(one.max(1.0).powi((*max).min(6) as i32), 1e6)
        }
        _ => 1.0,
    }
}

fn scan_cost(steps: &[MStep], schema: &Schema) -> f64 {
    steps.iter().map(|s| fanout(s, schema)).product()
}

/// Cost of checking that a walk reaches a known node: the last step is a lookup when it is
/// a link or an entry step (the goal's slot, its parent, or the matrix entry keyed by it).
fn check_cost(steps: &[MStep], schema: &Schema) -> f64 {
    match steps.split_last() {
        None => 1.0,
        Some((last, rest)) => {
            let last = match last.kind {
                MStepKind::Targets(_) | MStepKind::Referrers(_) | MStepKind::Owners(_) | MStepKind::Entries(_) => 1.0,
                _ => fanout(last, schema),
            };
            scan_cost(rest, schema) * last
        }
    }
}

/// A walk can reach one node twice when a step that can merge paths (a link, an up step, a
/// repetition) comes after a step that fans out.
fn needs_dedupe(steps: &[MStep]) -> bool {
    let mut fanned = false;
    for s in steps {
        let (fans, merges) = match s.kind {
            MStepKind::Entries(_) => (true, false),
            MStepKind::Referrers(_) => (true, false),
            MStepKind::Targets(_) | MStepKind::Owners(_) | MStepKind::Repeat { .. } => (true, true),
            MStepKind::Reference(_) | MStepKind::Up(_) | MStepKind::UpIfKey(..) | MStepKind::UpIfTarget(..) => {
                (false, true)
            }
            _ => (false, false),
        };
        if merges && fanned {
            return true;
        }
        fanned |= fans;
    }
    false
}

// ---- explain ----

/// One line of a plan in words: the operation, the planner's estimate of the rows leaving it
/// (per run of its block) and its id (to look up the rows it actually produced).
#[derive(Debug, Clone, PartialEq)]
pub struct PlanLine {
    pub text: String,
    pub estimate: Option<f64>,
    pub op: Option<usize>,
}

impl MatchPlan {
    /// The plan in words, one line per operation (for `explain` and tests).
    pub fn describe(&self, schema: &Schema) -> Vec<String> {
        self.lines(schema).into_iter().map(|l| l.text).collect()
    }

    /// [`MatchPlan::describe`] with estimates and operation ids; the last line is the output
    /// stage (grouping, distinct, order, page).
    pub fn lines(&self, schema: &Schema) -> Vec<PlanLine> {
        let mut out = Vec::new();
        self.describe_block(&self.block, schema, 0, &mut out);
        let mut tail = String::new();
        if self.grouped {
            let keys: Vec<&str> = self
                .columns
                .iter()
                .zip(&self.aliases)
                .filter(|(c, _)| !c.is_aggregate())
                .map(|(_, a)| a.as_str())
                .collect();
            let _ = write!(tail, "group by [{}]; ", keys.join(", "));
        }
        if self.distinct {
            tail.push_str("distinct; ");
        }
        if !self.order.is_empty() {
            let keys: Vec<String> = self
                .order
                .iter()
                .map(|&(i, d)| format!("{}{}", self.aliases[i], if d { " desc" } else { "" }))
                .collect();
            let _ = write!(tail, "order by {}; ", keys.join(", "));
        }
        if let Some(l) = self.limit {
            let _ = write!(tail, "limit {l}; ");
        }
        if self.offset > 0 {
            let _ = write!(tail, "offset {}; ", self.offset);
        }
        let _ = write!(tail, "columns {}", self.aliases.join(", "));
        out.push(PlanLine { text: tail, estimate: None, op: None });
        out
    }

    fn describe_block(&self, block: &Block, schema: &Schema, depth: usize, out: &mut Vec<PlanLine>) {
        let pad = "  ".repeat(depth);
        for op in &block.ops {
            let (estimate, id) = (Some(op.estimate), Some(op.id));
            match &op.kind {
                MOp::Scan { var, from, steps, dedupe, backward } => {
                    let dir = if *backward { " (backwards)" } else { "" };
                    let uniq = if *dedupe { ", each node once" } else { "" };
                    let table = if reads_table(from, steps) { " (reads its table)" } else { "" };
                    let text = format!(
                        "{pad}bind {} from {}{}{dir}{uniq}{table}",
                        self.vars[*var].name,
                        self.anchor(from),
                        self.describe_steps(steps, schema)
                    );
                    out.push(PlanLine { text, estimate, op: id });
                }
                MOp::Index { var, index, probe } => {
                    let decl = &schema.indexes[*index as usize];
                    let property = &schema.property(decl.property).name;
                    let lookup = match probe {
                        IndexProbe::Equal(v) => format!("'{property}' == {}", self.lit_text(*v)),
                        IndexProbe::States(list) => {
                            let names: Vec<String> =
                                list.iter().map(|&s| format!("'{}'", schema.state_name(decl.property, s))).collect();
                            format!("'{property}' in state {}", names.join(" or "))
                        }
                        IndexProbe::Prefix(v) => format!("'{property}' starts with {}", self.lit_text(*v)),
                        IndexProbe::Range { low, high } => {
                            let low = low.map_or("…".to_string(), |v| self.lit_text(v));
                            let high = high.map_or("…".to_string(), |v| self.lit_text(v));
                            format!("'{property}' from {low} to {high}")
                        }
                    };
                    let text = format!("{pad}bind {} by index '{}' ({lookup})", self.vars[*var].name, decl.name);
                    out.push(PlanLine { text, estimate, op: id });
                }
                MOp::Filter(c) => self.describe_cond(c, schema, depth, estimate, id, out),
            }
        }
    }

    fn anchor(&self, a: &Anchor) -> String {
        match a {
            Anchor::Root => "root".into(),
            Anchor::Var(v) => self.vars[*v].name.clone(),
        }
    }

    fn describe_cond(
        &self,
        c: &MCond,
        schema: &Schema,
        depth: usize,
        estimate: Option<f64>,
        op: Option<usize>,
        out: &mut Vec<PlanLine>,
    ) {
        let pad = "  ".repeat(depth);
        match c {
            MCond::Exists(block) => {
                out.push(PlanLine { text: format!("{pad}semi-join (exists):"), estimate, op });
                self.describe_block(block, schema, depth + 1, out);
            }
            MCond::Not(inner) if matches!(**inner, MCond::Exists(_)) => {
                let MCond::Exists(block) = &**inner else { unreachable!() };
                out.push(PlanLine { text: format!("{pad}anti-join (not exists):"), estimate, op });
                self.describe_block(block, schema, depth + 1, out);
            }
            other => {
                out.push(PlanLine { text: format!("{pad}filter {}", self.cond_text(other, schema)), estimate, op })
            }
        }
    }

    fn cond_text(&self, c: &MCond, schema: &Schema) -> String {
        match c {
            MCond::And(l) => l.iter().map(|c| self.cond_text(c, schema)).collect::<Vec<_>>().join(" and "),
            MCond::Or(l) => {
                format!("({})", l.iter().map(|c| self.cond_text(c, schema)).collect::<Vec<_>>().join(" or "))
            }
            MCond::Not(c) => format!("not {}", self.cond_text(c, schema)),
            MCond::Exists(_) => "exists ( … )".into(),
            MCond::Reach { from, steps, to } => match (to, steps.split_last()) {
                // Checked from the goal's side with one lookup (see the executor's `reaches`).
                (Some(goal), Some((last, rest))) if Self::goal_lookup(last).is_some() => {
                    let (sym, p, how) = Self::goal_lookup(last).unwrap_or(("", 0, ""));
                    let goal = self.anchor(goal);
                    format!(
                        "{}{} {sym} '{}' reaches {goal} (one lookup: {how} {goal})",
                        self.anchor(from),
                        self.describe_steps(rest, schema),
                        schema.property(p).name
                    )
                }
                (Some(goal), _) => {
                    format!("{}{} reaches {}", self.anchor(from), self.describe_steps(steps, schema), self.anchor(goal))
                }
                (None, _) => format!("{}{} leads somewhere", self.anchor(from), self.describe_steps(steps, schema)),
            },
            MCond::Compare { left, op, right, .. } => {
                let op = match op {
                    Comparison::Eq => "==",
                    Comparison::Ne => "!=",
                    Comparison::Lt => "<",
                    Comparison::Le => "<=",
                    Comparison::Gt => ">",
                    Comparison::Ge => ">=",
                };
                format!("{} {op} {}", self.term_text(left, schema), self.term_text(right, schema))
            }
            MCond::Prefix { term, prefix } => {
                format!("{} starts with {}", self.term_text(term, schema), self.lit_text(*prefix))
            }
            MCond::States { term, states } => {
                let MTerm::Leaf { property, .. } = term else { return "?".into() };
                let PropertyKind::StateGroup { states: all } = &schema.property(*property).kind else {
                    return "?".into();
                };
                let names: Vec<String> =
                    states.iter().filter_map(|&s| all.get(s as usize)).map(|s| format!("'{}'", s.name)).collect();
                format!("{} in ( {} )", self.term_text(term, schema), names.join(" "))
            }
        }
    }

    /// How a last step is checked against a known goal, if by one lookup: its symbol, its
    /// property and what is looked up.
    fn goal_lookup(last: &MStep) -> Option<(&'static str, PropertyId, &'static str)> {
        match last.kind {
            MStepKind::Targets(p) => Some((">", p, "the matrix entry keyed by")),
            MStepKind::Owners(p) => Some(("<", p, "the matrix entry keyed here, in")),
            MStepKind::Referrers(p) => Some(("<", p, "the reference slot of")),
            MStepKind::Entries(p) => Some((".", p, "the parent of")),
            _ => None,
        }
    }

    fn lit_text(&self, i: usize) -> String {
        match &self.values[i].0 {
            Value::Int(n) => n.to_string(),
            Value::Text(t) => format!("{t:?}"),
            Value::Param(p) => format!("${p}"),
            other => format!("{other:?}"),
        }
    }

    fn term_text(&self, t: &MTerm, schema: &Schema) -> String {
        match t {
            MTerm::Key(v) => self.vars[*v].name.clone(),
            MTerm::Leaf { var, steps, property, .. } => format!(
                "{}{} '{}'",
                self.vars[*var].name,
                self.describe_steps(steps, schema),
                schema.property(*property).name
            ),
            MTerm::Lit(i) => self.lit_text(*i),
        }
    }

    fn describe_steps(&self, steps: &[MStep], schema: &Schema) -> String {
        let mut s = String::new();
        for step in steps {
            let name = |p: &PropertyId| schema.property(*p).name.clone();
            let _ = match &step.kind {
                MStepKind::Group(p) => write!(s, " + '{}'", name(p)),
                MStepKind::Entries(p) => {
                    let sym = if matches!(schema.property(*p).kind, PropertyKind::Matrix { .. }) { '%' } else { '.' };
                    write!(s, " {sym} '{}' (scan)", name(p))
                }
                MStepKind::EntryKey(p, k) => write!(s, " . '{}' : {} (lookup by key)", name(p), self.lit_text(*k)),
                MStepKind::EntryOf(p, v) => write!(s, " % '{}' : {} (lookup by key)", name(p), self.vars[*v].name),
                MStepKind::State(p, st) => {
                    let state = match &schema.property(*p).kind {
                        PropertyKind::StateGroup { states } => {
                            states.get(*st as usize).map_or("?".to_string(), |x| x.name.clone())
                        }
                        _ => "?".into(),
                    };
                    write!(s, " ? '{}' * '{state}'", name(p))
                }
                MStepKind::Reference(p) => write!(s, " > '{}'", name(p)),
                MStepKind::Targets(p) => write!(s, " > '{}' (matrix, forwards)", name(p)),
                MStepKind::Referrers(p) => write!(s, " < '{}' (reference, backwards by the link index)", name(p)),
                MStepKind::Owners(p) => write!(s, " < '{}' (matrix, backwards by the link index)", name(p)),
                MStepKind::Up(_) => write!(s, " ^"),
                MStepKind::UpIfKey(_, k) => write!(s, " ^ (if key {})", self.lit_text(*k)),
                MStepKind::UpIfTarget(_, v) => write!(s, " ^ (if keyed by {})", self.vars[*v].name),
                MStepKind::Repeat { min, max, body } => {
                    write!(s, " repeat {min} to {max} ({} )", self.describe_steps(body, schema))
                }
            };
        }
        s
    }
}

/// The pairs of a level's variables that one matrix step joins, by an edge or a condition
/// (not inside `exists`), each once, smaller variable first.
fn matrix_pairs(level: &Level) -> BTreeSet<(usize, usize)> {
    fn one_matrix_step(steps: &[MStep]) -> bool {
        matches!(steps, [s] if matches!(s.kind, MStepKind::Targets(_) | MStepKind::Owners(_)))
    }
    fn from_cond(c: &MCond, out: &mut BTreeSet<(usize, usize)>) {
        match c {
            MCond::And(list) | MCond::Or(list) => list.iter().for_each(|c| from_cond(c, out)),
            MCond::Not(c) => from_cond(c, out),
            MCond::Reach { from: Anchor::Var(a), steps, to: Some(Anchor::Var(b)) }
                if a != b && one_matrix_step(steps) =>
            {
                out.insert((*a.min(b), *a.max(b)));
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    for e in &level.edges {
        if let Anchor::Var(a) = e.from {
            if a != e.to && one_matrix_step(&e.steps) {
                out.insert((a.min(e.to), a.max(e.to)));
            }
        }
    }
    for p in &level.pending {
        from_cond(&p.cond, &mut out);
    }
    out
}
