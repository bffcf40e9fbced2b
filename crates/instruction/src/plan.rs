//! Type-checking: an [`ast::Instruction`] checked against the schema becomes a [`Plan`] whose
//! names are resolved to property ids and whose values are known to fit. Nothing runs before
//! this succeeds; errors point at the offending step.

use std::collections::HashMap;

use espalier_schema::{NodeTypeId, ParamKind, PropertyId, PropertyKind, Schema, Span, StateIndex, ROOT};

use crate::ast::{self, Comparison, Filter, Instruction, Item, LeafKind, Located, Op, Step, Value};

mod pattern;
mod uses;
pub(crate) use pattern::{
    reads_table, reverse, Anchor, Block, Compared, IndexProbe, LitKind, MatchColumn, MatchCondition, MatchOp,
    MatchPlan, MatchStep, MatchStepKind, MatchTerm, MatchVar, PlanOp, UpFrom,
};
pub use uses::{ValueRole, ValueUse};

/// A check failure: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CheckError {
    /// Where in the source the problem is (empty for JSON input).
    pub span: Span,
    /// What is wrong, in words.
    pub message: String,
}

fn err<T>(span: Span, message: impl Into<String>) -> Result<T, CheckError> {
    Err(CheckError { span, message: message.into() })
}

/// Declared parameters in scope (a command's), or `None` for free-standing instructions whose
/// `$params` are typed by the values supplied at run time.
pub type ParamTypes = Option<HashMap<String, ParamKind>>;

/// A checked instruction: names resolved to property ids, values known to fit. Only
/// [`Checker`] builds one, and only this crate looks inside it: other crates run it
/// ([`crate::Engine::run`]) and ask it what they need by its methods ([`Plan::is_read_only`],
/// [`Plan::value_uses`], [`Plan::explain`], [`Plan::get_node`], [`Plan::query_scope`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub(crate) kind: PlanKind,
}

/// What a [`Plan`] does, by the kind of instruction checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PlanKind {
    /// An update.
    Update {
        /// The node path to the node to change.
        path: Vec<StepPlan>,
        /// The type of the node the path reaches.
        node: NodeTypeId,
        /// The changes to make to it.
        items: Vec<ItemPlan>,
    },
    /// A collection query.
    Query(QueryPlan),
    /// A pattern query (`collection match …`), planned (boxed: it is much larger than the
    /// other plans).
    Match(Box<MatchPlan>),
    /// A `get`.
    Get {
        /// The node path to the node to read.
        path: Vec<StepPlan>,
        /// The type of the node the path reaches.
        node: NodeTypeId,
    },
    /// A command call, run by the command's compiled body.
    Command {
        /// The command's name.
        name: String,
        /// Each parameter's name and value.
        args: Vec<(String, Value)>,
        /// Whether every instruction of the body only reads (set by `Engine::check`, which
        /// knows the compiled bodies): such a command runs on a snapshot, like a query, and
        /// answers with its last instruction's reply (a stored procedure).
        read_only: bool,
    },
    /// A transaction: its members, run in order, all or nothing.
    Transaction(Vec<Member>),
}

/// One member of a checked transaction: its plan, and its canonical text, with which an error
/// names the member that caused it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Member {
    /// The member's plan.
    pub plan: Plan,
    /// The member's canonical text.
    pub text: String,
}

impl Plan {
    /// Whether the plan only reads (queries and `get`, a command whose body only reads, or a
    /// transaction of nothing else).
    pub fn is_read_only(&self) -> bool {
        match &self.kind {
            PlanKind::Query(_) | PlanKind::Match(_) | PlanKind::Get { .. } => true,
            PlanKind::Transaction(list) => list.iter().all(|m| m.plan.is_read_only()),
            PlanKind::Command { read_only, .. } => *read_only,
            PlanKind::Update { .. } => false,
        }
    }

    /// Whether the plan is a `get` (one node read by its path; see [`Plan::get_node`]).
    pub fn is_get(&self) -> bool {
        matches!(self.kind, PlanKind::Get { .. })
    }

    /// For a pattern query, its plan in words, one line per operation and a last line for the
    /// output stage (what `explain` answers with, without the rows counted); `None` for every
    /// other plan.
    pub fn explain(&self, schema: &Schema) -> Option<Vec<String>> {
        match &self.kind {
            PlanKind::Match(m) => Some(m.describe(schema)),
            _ => None,
        }
    }
}

/// A resolved step of a node path or collection path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StepPlan {
    /// A group.
    Group(PropertyId),
    /// A dictionary or matrix entry; `key` is `None` in a collection path (every entry).
    Entry {
        /// The dictionary or matrix.
        property: PropertyId,
        /// The entry's key.
        key: Option<Value>,
        /// Where the step was written.
        span: Span,
    },
    /// A state: the path continues only while the stategroup is in it.
    State {
        /// The stategroup.
        property: PropertyId,
        /// The state it must be in.
        state: StateIndex,
        /// Where the step was written.
        span: Span,
    },
    /// Follow a reference to its target entry.
    Reference {
        /// The reference.
        property: PropertyId,
    },
}

/// A checked update item: the property it changes and how.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ItemPlan {
    /// The property to set or change.
    pub property: PropertyId,
    /// What to do to it.
    pub op: OpPlan,
    /// Where the item was written.
    pub span: Span,
}

/// A checked change to one property (see [`ast::Op`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OpPlan {
    /// Set a number.
    SetNumber(Value),
    /// Add a value to a number.
    AddNumber(Value),
    /// Set a text.
    SetText(Value),
    /// Set a reference to the entry with this key.
    SetReference(Value),
    /// Change the properties of a group.
    Group(Vec<ItemPlan>),
    /// Add an entry; fails if it exists.
    AddEntry {
        /// The new entry's key.
        key: Value,
        /// The new entry's initial contents.
        items: Vec<ItemPlan>,
    },
    /// Change an existing entry; fails if it is missing.
    UpdateEntry {
        /// The entry's key.
        key: Value,
        /// The changes to make to the entry.
        items: Vec<ItemPlan>,
    },
    /// Remove an entry; fails if it is missing or referred to.
    RemoveEntry {
        /// The entry's key.
        key: Value,
    },
    /// Switch (in an update) or choose (in a new node) the state.
    SwitchState {
        /// The state to switch to.
        state: StateChoice,
        /// The initial contents of the state's node.
        items: Vec<ItemPlan>,
    },
    /// In an update: change the current state's node, which must be `state`. In a new node's
    /// initialisation: choose `state` (as `SwitchState`).
    UpdateState {
        /// The state the stategroup must be in (or is to be in).
        state: StateIndex,
        /// The changes to make to the state's node.
        items: Vec<ItemPlan>,
    },
}

/// The state a switch goes to: known when checked, or named by a parameter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StateChoice {
    /// A state named in the instruction.
    Fixed(StateIndex),
    /// `$p` naming the state at run time (always a [`Value::Param`]).
    Param(Value),
}

/// A checked collection query.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QueryPlan {
    /// The node path to the context node.
    pub path: Vec<StepPlan>,
    /// The collection path from the context node to the rows.
    pub select: Vec<StepPlan>,
    /// The node type of every row.
    pub row_type: NodeTypeId,
    /// The columns of each row, with their filters.
    pub projections: Vec<ProjectionPlan>,
    /// At most this many rows are returned.
    pub limit: Option<u64>,
    /// This many matching rows are skipped first (0 when not given).
    pub offset: u64,
    /// `from` / `after`: where the read of the first dictionary of `select` starts.
    pub start: Option<StartPlan>,
}

/// A checked `from "k"` / `after "k"`: the walk seeks `key` in the key index of the
/// dictionary at `select[depth]` and, with a limit, stops once the page is full.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StartPlan {
    /// The index in `select` of the collection path's first dictionary step.
    pub depth: usize,
    /// The key (a text, a number as its decimal text, or a parameter).
    pub key: Value,
    /// `after`: an entry with the key itself is left out.
    pub exclusive: bool,
}

/// A checked projection: the leaf it reads and the filter on it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProjectionPlan {
    /// The column's name in the result.
    pub alias: String,
    /// The group, state and reference steps from the row's node to the leaf's node.
    pub path: Vec<StepPlan>,
    /// The leaf property.
    pub property: PropertyId,
    /// What kind of property the leaf is.
    pub kind: LeafKind,
    /// A condition the value must meet for the row to be returned.
    pub filter: Option<FilterPlan>,
}

/// A checked filter, by the kind of leaf it tests.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FilterPlan {
    /// A number compared with a value.
    Number(Comparison, Value),
    /// A text compared with a value.
    Text(Comparison, Value),
    /// A text starts with this prefix.
    Prefix(Value),
    /// Stategroup in one of these states (`== 'S'` is a one-state set; `!=` its complement).
    States(Vec<StateIndex>),
    /// A reference's key compared with a key.
    Reference(Comparison, Value),
}

/// Checks instructions against one schema.
pub struct Checker<'s> {
    /// The schema to check against.
    pub schema: &'s Schema,
    /// The declared parameters in scope; `None`: typed by the values given at run time.
    pub params: &'s ParamTypes,
}

/// Checks that a leaf of `kind` (as a projection or a pattern term names it) can be read from
/// property `prop`.
pub(crate) fn check_leaf_kind(prop: &espalier_schema::Property, kind: LeafKind, span: Span) -> Result<(), CheckError> {
    let fits = matches!(
        (kind, &prop.kind),
        (LeafKind::Number, PropertyKind::Number)
            | (LeafKind::Text, PropertyKind::Text)
            | (LeafKind::Stategroup, PropertyKind::StateGroup { .. })
            | (LeafKind::Reference, PropertyKind::Reference { .. })
    );
    if !fits {
        return err(span, format!("'{}' is a {}, not a {:?}", prop.name, prop.kind.keyword(), kind).to_lowercase());
    }
    Ok(())
}

impl<'s> Checker<'s> {
    /// Checks a pattern query to be registered: planned also once per top variable bound
    /// first, for the incremental updates (see `crate::incremental`).
    pub(crate) fn check_registered(
        &self,
        p: &crate::ast::Pattern,
        span: Span,
    ) -> Result<pattern::MatchPlan, CheckError> {
        pattern::PatternChecker::new(self).seeded().check(p, span)
    }

    /// Checks one instruction, written at `span`, and plans it.
    pub fn check(&self, instr: &Instruction, span: Span) -> Result<Plan, CheckError> {
        match instr {
            Instruction::Update { path, items } => {
                let (path, node) = self.node_path(path, span)?;
                let items = self.items(node, items, false)?;
                Ok(Plan { kind: PlanKind::Update { path, node, items } })
            }
            Instruction::Query(q) => self.query(q, span).map(|q| Plan { kind: PlanKind::Query(q) }),
            Instruction::Match(p) => {
                pattern::PatternChecker::new(self).check(p, span).map(|m| Plan { kind: PlanKind::Match(Box::new(m)) })
            }
            Instruction::Get { path } => {
                let (path, node) = self.node_path(path, span)?;
                Ok(Plan { kind: PlanKind::Get { path, node } })
            }
            Instruction::Command { name, args } => {
                let Some(cmd) = self.schema.command(name) else {
                    let known: Vec<String> = self.schema.commands.iter().map(|c| format!("'{}'", c.name)).collect();
                    let known = if known.is_empty() {
                        "the schema declares none".to_string()
                    } else {
                        format!("declared: {}", known.join(", "))
                    };
                    return err(span, format!("unknown command '{name}'; {known}"));
                };
                for (arg, value) in args {
                    let Some((_, kind)) = cmd.params.iter().find(|(p, _)| p == arg) else {
                        return err(span, format!("command '{name}' has no parameter '{arg}'"));
                    };
                    self.value_fits(value, *kind, span, &format!("parameter '{arg}'"))?;
                }
                for (p, _) in &cmd.params {
                    if !args.iter().any(|(a, _)| a == p) {
                        return err(span, format!("command '{name}' needs parameter '{p}'"));
                    }
                }
                Ok(Plan { kind: PlanKind::Command { name: name.clone(), args: args.clone(), read_only: false } })
            }
            Instruction::Transaction(list) => {
                let members = list
                    .iter()
                    .map(|i| Ok(Member { plan: self.check(&i.item, i.span)?, text: crate::parse::to_text(&i.item) }))
                    .collect::<Result<_, _>>()?;
                Ok(Plan { kind: PlanKind::Transaction(members) })
            }
        }
    }

    fn property(&self, node: NodeTypeId, name: &str, span: Span) -> Result<PropertyId, CheckError> {
        match self.schema.find(node, name) {
            Some(p) => Ok(p.id),
            None => {
                let nt = self.schema.node_type(node);
                let names: Vec<String> =
                    nt.properties.iter().map(|&p| format!("'{}'", self.schema.property(p).name)).collect();
                let has = if names.is_empty() {
                    "it has no properties".to_string()
                } else {
                    format!("it has {}", names.join(", "))
                };
                err(span, format!("no property '{name}' in {}; {has}", self.describe_type(node)))
            }
        }
    }

    fn describe_type(&self, node: NodeTypeId) -> String {
        if node == ROOT {
            return "the root".into();
        }
        let nt = self.schema.node_type(node);
        use espalier_schema::ParentLink::*;
        match nt.parent {
            Root => "the root".into(),
            Group { property } => format!("group '{}'", self.schema.property(property).name),
            DictionaryEntry { property } => format!("an entry of '{}'", self.schema.property(property).name),
            MatrixEntry { property } => format!("an entry of matrix '{}'", self.schema.property(property).name),
            State { property, state } => match &self.schema.property(property).kind {
                PropertyKind::StateGroup { states } => format!(
                    "state '{}' of '{}'",
                    states.get(state as usize).map_or("?", |s| s.name.as_str()),
                    self.schema.property(property).name
                ),
                _ => "a state".into(),
            },
        }
    }

    fn state_index(&self, stategroup: PropertyId, name: &str, span: Span) -> Result<StateIndex, CheckError> {
        let PropertyKind::StateGroup { states } = &self.schema.property(stategroup).kind else {
            return err(span, "not a stategroup");
        };
        match states.iter().position(|s| s.name == name) {
            Some(i) => Ok(i as StateIndex),
            None => {
                let names: Vec<String> = states.iter().map(|s| format!("'{}'", s.name)).collect();
                err(
                    span,
                    format!(
                        "stategroup '{}' has no state '{name}'; its states are {}",
                        self.schema.property(stategroup).name,
                        names.join(", ")
                    ),
                )
            }
        }
    }

    fn expect_kind(&self, p: PropertyId, want: &str, step: &str, span: Span) -> Result<(), CheckError> {
        let prop = self.schema.property(p);
        if prop.kind.keyword() != want {
            return err(
                span,
                format!("'{}' is a {}, but `{step}` steps into a {want}", prop.name, prop.kind.keyword()),
            );
        }
        Ok(())
    }

    /// Resolves one step from `node`; `keyed` says whether entry steps carry keys.
    fn step(&self, node: NodeTypeId, step: &Located<Step>, keyed: bool) -> Result<(StepPlan, NodeTypeId), CheckError> {
        let span = step.span;
        match &step.item {
            Step::Group(name) => {
                let p = self.property(node, name, span)?;
                self.expect_kind(p, "group", "+", span)?;
                let PropertyKind::Group { node: next } = self.schema.property(p).kind else { unreachable!() };
                Ok((StepPlan::Group(p), next))
            }
            Step::Dictionary { name, key } | Step::Matrix { name, key } => {
                let matrix = matches!(step.item, Step::Matrix { .. });
                let p = self.property(node, name, span)?;
                let (want, sym) = if matrix { ("matrix", "%") } else { ("dictionary", ".") };
                self.expect_kind(p, want, sym, span)?;
                let next = match &self.schema.property(p).kind {
                    PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => *node,
                    _ => unreachable!(),
                };
                match (keyed, key) {
                    (true, None) => {
                        return err(
                            span,
                            format!("`{sym} '{name}'` in a node path needs a key: `{sym} '{name}' : \"key\"`"),
                        )
                    }
                    (false, Some(_)) => {
                        return err(
                            span,
                            format!("`{sym} '{name}'` in a collection path takes no key; it selects every entry"),
                        )
                    }
                    _ => {}
                }
                if let Some(k) = key {
                    self.key_fits(p, k, span)?;
                }
                Ok((StepPlan::Entry { property: p, key: key.clone(), span }, next))
            }
            Step::State { stategroup, state } => {
                let p = self.property(node, stategroup, span)?;
                self.expect_kind(p, "stategroup", "?", span)?;
                let s = self.state_index(p, state, span)?;
                let PropertyKind::StateGroup { states } = &self.schema.property(p).kind else { unreachable!() };
                Ok((StepPlan::State { property: p, state: s, span }, states[s as usize].node))
            }
            Step::Reference(name) => {
                let p = self.property(node, name, span)?;
                self.expect_kind(p, "reference", ">", span)?;
                let PropertyKind::Reference { target } = &self.schema.property(p).kind else { unreachable!() };
                Ok((StepPlan::Reference { property: p }, target.entry_type))
            }
        }
    }

    fn node_path(&self, path: &[Located<Step>], _span: Span) -> Result<(Vec<StepPlan>, NodeTypeId), CheckError> {
        self.path_from(ROOT, path, true)
    }

    fn path_from(
        &self,
        mut node: NodeTypeId,
        path: &[Located<Step>],
        keyed: bool,
    ) -> Result<(Vec<StepPlan>, NodeTypeId), CheckError> {
        let mut out = Vec::with_capacity(path.len());
        for step in path {
            let (s, next) = self.step(node, step, keyed)?;
            out.push(s);
            node = next;
        }
        Ok((out, node))
    }

    /// The key of an entry of collection `p` (dictionary: one text; matrix: the target's key).
    fn key_fits(&self, p: PropertyId, key: &Value, span: Span) -> Result<(), CheckError> {
        let arity = match &self.schema.property(p).kind {
            PropertyKind::Matrix { target, .. } | PropertyKind::Reference { target } => target.key_arity,
            _ => 1,
        };
        self.key_arity_fits(key, arity, span)
    }

    fn key_arity_fits(&self, key: &Value, arity: usize, span: Span) -> Result<(), CheckError> {
        match key {
            Value::Compound(parts) if parts.len() != arity => {
                err(span, format!("key has {} components; this one needs {arity}", parts.len()))
            }
            Value::Compound(parts) => {
                for part in parts {
                    self.key_arity_fits(part, 1, span)?;
                }
                Ok(())
            }
            Value::Int(_) | Value::Text(_) if arity == 1 => Ok(()),
            Value::Param(p) => self.param_fits(p, ParamKind::Text, span),
            _ => err(span, format!("key needs {arity} components: write [\"a\", \"b\"]")),
        }
    }

    fn param_fits(&self, name: &str, kind: ParamKind, span: Span) -> Result<(), CheckError> {
        match self.params {
            None => Ok(()),
            Some(declared) => match declared.get(name) {
                None => err(span, format!("unknown parameter ${name}")),
                Some(k) if *k == kind || kind == ParamKind::Text && *k == ParamKind::Number => Ok(()),
                Some(k) => {
                    err(span, format!("parameter ${name} is a {k:?} but a {kind:?} is needed here").to_lowercase())
                }
            },
        }
    }

    fn value_fits(&self, value: &Value, kind: ParamKind, span: Span, what: &str) -> Result<(), CheckError> {
        match (value, kind) {
            (Value::Int(_), _) => Ok(()),
            (Value::Text(_), ParamKind::Text) => Ok(()),
            (Value::Text(t), ParamKind::Number) => err(span, format!("{what} is a number, not the text {t:?}")),
            (Value::Param(p), k) => self.param_fits(p, k, span),
            (Value::Compound(_), _) => err(span, format!("{what} takes one value, not a compound key")),
        }
    }

    fn items(&self, node: NodeTypeId, items: &[Located<Item>], init: bool) -> Result<Vec<ItemPlan>, CheckError> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            out.push(self.item(node, item, init)?);
        }
        Ok(out)
    }

    fn item(&self, node: NodeTypeId, item: &Located<Item>, init: bool) -> Result<ItemPlan, CheckError> {
        let span = item.span;
        let p = self.property(node, &item.item.name, span)?;
        let prop = self.schema.property(p);
        if prop.derived.is_some() {
            return err(
                span,
                format!("'{}' is derived: the database computes it from other data, so it cannot be set", prop.name),
            );
        }
        let mismatch =
            |op: &str| err(span, format!("'{}' is a {}; `{op}` does not apply to it", prop.name, prop.kind.keyword()));
        let op = match (&item.item.op, &prop.kind) {
            (Op::SetNumber(v), PropertyKind::Number) => {
                self.value_fits(v, ParamKind::Number, span, &format!("'{}'", prop.name))?;
                OpPlan::SetNumber(v.clone())
            }
            (Op::AddNumber(v), PropertyKind::Number) => {
                self.value_fits(v, ParamKind::Number, span, &format!("'{}'", prop.name))?;
                OpPlan::AddNumber(v.clone())
            }
            (Op::SetText(v), PropertyKind::Text) => {
                self.value_fits(v, ParamKind::Text, span, &format!("'{}'", prop.name))?;
                OpPlan::SetText(v.clone())
            }
            (Op::SetReference(v), PropertyKind::Reference { target }) => {
                self.key_arity_fits(v, target.key_arity, span)?;
                OpPlan::SetReference(v.clone())
            }
            (Op::Group(items), PropertyKind::Group { node }) => OpPlan::Group(self.items(*node, items, init)?),
            (Op::AddEntry { key, items }, PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. }) => {
                self.key_fits(p, key, span)?;
                OpPlan::AddEntry { key: key.clone(), items: self.items(*node, items, true)? }
            }
            (Op::UpdateEntry { key, items }, PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. }) => {
                self.key_fits(p, key, span)?;
                OpPlan::UpdateEntry { key: key.clone(), items: self.items(*node, items, init)? }
            }
            (Op::RemoveEntry { key }, PropertyKind::Dictionary { .. } | PropertyKind::Matrix { .. }) => {
                if init {
                    return err(span, "cannot remove an entry from a node that is being created");
                }
                self.key_fits(p, key, span)?;
                OpPlan::RemoveEntry { key: key.clone() }
            }
            (Op::SwitchState { state, items }, PropertyKind::StateGroup { states }) => {
                let (choice, node) = match state {
                    Value::Text(name) => {
                        let i = self.state_index(p, name, span)?;
                        (StateChoice::Fixed(i), Some(states[i as usize].node))
                    }
                    Value::Param(name) => {
                        self.param_fits(name, ParamKind::Text, span)?;
                        (StateChoice::Param(state.clone()), None)
                    }
                    _ => return err(span, "a state is named by its 'Name'"),
                };
                let items = match node {
                    Some(node) => self.items(node, items, true)?,
                    None if items.is_empty() => Vec::new(),
                    None => return err(span, "a state chosen at run time cannot be initialised with properties"),
                };
                OpPlan::SwitchState { state: choice, items }
            }
            (Op::UpdateState { state, items }, PropertyKind::StateGroup { states }) => {
                let i = self.state_index(p, state, span)?;
                OpPlan::UpdateState { state: i, items: self.items(states[i as usize].node, items, init)? }
            }
            (Op::SetNumber(_), _) => return mismatch("number"),
            (Op::AddNumber(_), _) => return mismatch("number +"),
            (Op::SetText(_), _) => return mismatch("text"),
            (Op::SetReference(_), _) => return mismatch("reference"),
            (Op::Group(_), _) => return mismatch("group ( … )"),
            (Op::AddEntry { .. } | Op::UpdateEntry { .. } | Op::RemoveEntry { .. }, _) => {
                return mismatch("dictionary / matrix")
            }
            (Op::SwitchState { .. } | Op::UpdateState { .. }, _) => return mismatch("stategroup"),
        };
        Ok(ItemPlan { property: p, op, span })
    }

    fn query(&self, q: &ast::Query, span: Span) -> Result<QueryPlan, CheckError> {
        let (path, context) = self.node_path(&q.path, span)?;
        let (select, row_type) = self.path_from(context, &q.select, false)?;
        if let Some(last) = select.last() {
            if !matches!(last, StepPlan::Entry { .. }) {
                let at = q.select.last().map_or(span, |s| s.span);
                return err(at, "a collection path ends with a dictionary (`.`) or matrix (`%`) step");
            }
        }
        let mut projections = Vec::with_capacity(q.projections.len());
        for proj in &q.projections {
            projections.push(self.projection(row_type, &proj.item, proj.span)?);
        }
        let start = match &q.start {
            None => None,
            Some(start) => Some(self.start(start, &select, span)?),
        };
        Ok(QueryPlan { path, select, row_type, projections, limit: q.limit, offset: q.offset.unwrap_or(0), start })
    }

    /// `from` / `after` applies to the first collection step of the collection path, which
    /// must be a dictionary (a matrix's keys are rows, not texts in order).
    fn start(&self, start: &ast::Start, select: &[StepPlan], span: Span) -> Result<StartPlan, CheckError> {
        let key = start.key();
        let word = if start.exclusive() { "after" } else { "from" };
        let Some((depth, property)) = select.iter().enumerate().find_map(|(i, s)| match s {
            StepPlan::Entry { property, .. } => Some((i, *property)),
            _ => None,
        }) else {
            return err(span, format!("`{word}` needs a collection path with a dictionary (`.`) step to start in"));
        };
        if !matches!(self.schema.property(property).kind, PropertyKind::Dictionary { .. }) {
            return err(
                key.span,
                format!("`{word}` starts a dictionary's keys; the collection path's first collection is a matrix"),
            );
        }
        self.value_fits(&key.item, ParamKind::Text, key.span, &format!("`{word}`"))?;
        Ok(StartPlan { depth, key: key.item.clone(), exclusive: start.exclusive() })
    }

    fn projection(&self, row: NodeTypeId, proj: &ast::Projection, span: Span) -> Result<ProjectionPlan, CheckError> {
        for step in &proj.path {
            if matches!(step.item, Step::Dictionary { .. } | Step::Matrix { .. }) {
                return err(step.span, "a projection path goes through groups, states and references only");
            }
        }
        let (path, node) = self.path_from(row, &proj.path, false)?;
        let p = self.property(node, &proj.property, span)?;
        check_leaf_kind(self.schema.property(p), proj.kind, span)?;
        let filter = match &proj.filter {
            None => None,
            Some(f) => Some(self.filter(p, proj.kind, f, span)?),
        };
        Ok(ProjectionPlan { alias: proj.alias.clone(), path, property: p, kind: proj.kind, filter })
    }

    fn filter(&self, p: PropertyId, kind: LeafKind, f: &Filter, span: Span) -> Result<FilterPlan, CheckError> {
        let name = &self.schema.property(p).name;
        Ok(match (kind, f) {
            (LeafKind::Number, Filter::Compare { op, value }) => {
                self.value_fits(value, ParamKind::Number, span, &format!("filter on '{name}'"))?;
                FilterPlan::Number(*op, value.clone())
            }
            (LeafKind::Text, Filter::Compare { op, value }) => {
                self.value_fits(value, ParamKind::Text, span, &format!("filter on '{name}'"))?;
                FilterPlan::Text(*op, value.clone())
            }
            (LeafKind::Text, Filter::Prefix(v)) => {
                self.value_fits(v, ParamKind::Text, span, &format!("prefix filter on '{name}'"))?;
                FilterPlan::Prefix(v.clone())
            }
            (
                LeafKind::Stategroup,
                Filter::Compare { op: op @ (Comparison::Eq | Comparison::Ne), value: Value::Text(s) },
            ) => {
                let i = self.state_index(p, s, span)?;
                let PropertyKind::StateGroup { states } = &self.schema.property(p).kind else { unreachable!() };
                let set = if *op == Comparison::Eq {
                    vec![i]
                } else {
                    (0..states.len() as StateIndex).filter(|&j| j != i).collect()
                };
                FilterPlan::States(set)
            }
            (LeafKind::Stategroup, Filter::In(names)) => {
                FilterPlan::States(names.iter().map(|n| self.state_index(p, n, span)).collect::<Result<_, _>>()?)
            }
            (LeafKind::Reference, Filter::Compare { op: op @ (Comparison::Eq | Comparison::Ne), value }) => {
                let PropertyKind::Reference { target } = &self.schema.property(p).kind else { unreachable!() };
                self.key_arity_fits(value, target.key_arity, span)?;
                FilterPlan::Reference(*op, value.clone())
            }
            (k, f) => return err(span, format!("filter {f:?} does not apply to a {k:?} property '{name}'")),
        })
    }
}
