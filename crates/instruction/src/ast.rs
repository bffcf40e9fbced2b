//! The typed form of every instruction, before it is checked against a schema.
//!
//! Clients build it as JSON (serde's externally tagged form of these types, see
//! `docs/instructions.md`); people type the text form, which [`crate::parse`] turns into the
//! same values. Names are property and state names as written in the schema.

use serde::{Deserialize, Serialize};

use espalier_schema::Span;

/// A key, a number or a text value, given literally or as a `$parameter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    Int(i64),
    Text(String),
    /// `["a", "b"]` — a compound key, one component per dictionary on the reference's path.
    Compound(Vec<Value>),
    /// `$name`
    Param(String),
    /// Not a value of the instruction language: no parser makes it, [`crate::validate`] and
    /// the checker refuse it ("`index` is only allowed in benchmark files"), and nothing runs
    /// it. The benchmark language's `index` is a `$parameter` (`crates/bench/src/suite/values.rs`).
    /// Kept in the serde form only so that a structured instruction naming it is refused with
    /// the text parser's message and code (`syntax`), not as an undecodable frame; it goes
    /// when the wire format gets types of its own (#19).
    #[doc(hidden)]
    Index,
    /// As [`Value::Index`], for the benchmark language's `random`.
    #[doc(hidden)]
    Random(Option<i64>),
}

/// One step of a node path, a collection path or a projection path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// `+ 'g'`
    Group(String),
    /// `. 'd' : key` in a node path; `. 'd'` (no key: every entry) in a collection path.
    Dictionary { name: String, key: Option<Value> },
    /// `% 'm' : key` / `% 'm'`
    Matrix { name: String, key: Option<Value> },
    /// `? 'sg' * 's'` — only while the stategroup is in that state.
    State { stategroup: String, state: String },
    /// `> 'r'` — follow a reference to its target entry.
    Reference(String),
}

/// A step with the place it was written (spans are empty for JSON input).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Located<T> {
    #[serde(flatten)]
    pub item: T,
    #[serde(skip, default)]
    pub span: Span,
}

pub type Path = Vec<Located<Step>>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Instruction {
    /// `update <node path> ( items )`
    Update { path: Path, items: Vec<Located<Item>> },
    /// `collection <node path> select <collection path> projections [where …] [limit N] [offset N]`
    Query(Query),
    /// `collection match <bindings and conditions> select <columns> …` — a pattern query.
    Match(Pattern),
    /// `get <node path>` — fine-grained read of one node and its subtree, as dump JSON.
    Get { path: Path },
    /// `command 'Name' ( 'param' -> value … )`
    Command { name: String, args: Vec<(String, Value)> },
    /// `transaction ( instruction , instruction … )` — all or nothing.
    Transaction(Vec<Located<Instruction>>),
}

/// `'name' -> …` inside an update or initialisation block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub name: String,
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `number 5` / `integer 5`
    SetNumber(Value),
    /// `number + 1` / `number - 1`
    AddNumber(Value),
    /// `text "x"`
    SetText(Value),
    /// `reference "key"`
    SetReference(Value),
    /// `group ( items )` (the word `group` is optional)
    Group(Vec<Located<Item>>),
    /// `dictionary KEY ( items )` / `matrix KEY ( items )` — add a new entry (fails if it exists).
    AddEntry { key: Value, items: Vec<Located<Item>> },
    /// `dictionary KEY update ( items )` — change an existing entry (fails if missing).
    UpdateEntry { key: Value, items: Vec<Located<Item>> },
    /// `dictionary KEY remove` — fails if missing or referred to.
    RemoveEntry { key: Value },
    /// `stategroup 'S' set to ( items )` — switch to S, initialising its node (fails if already
    /// in S). Inside a new node's initialisation `stategroup 'S' ( items )` means the same.
    SwitchState { state: Value, items: Vec<Located<Item>> },
    /// `stategroup 'S' ( items )` in an update: change the node of the current state, which
    /// must be S.
    UpdateState { state: String, items: Vec<Located<Item>> },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Query {
    /// From the root to the context node (entries chosen by key).
    pub path: Path,
    /// From the context node through collections (no keys): every entry reached is a row.
    /// Empty: the context node itself is the only candidate row.
    pub select: Path,
    pub projections: Vec<Located<Projection>>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

/// `'alias' -> steps kind : 'property' [filter]`
///
/// A row whose projection path crosses a state that is not selected does not match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Projection {
    pub alias: String,
    /// Group, state and reference steps from the row's node.
    pub path: Path,
    pub kind: LeafKind,
    pub property: String,
    pub filter: Option<Filter>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeafKind {
    Number,
    Text,
    Stategroup,
    Reference,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Comparison {
    /// Whether two values whose order is `o` (left against right) satisfy the comparison.
    pub fn holds(self, o: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Comparison::Eq => o == Equal,
            Comparison::Ne => o != Equal,
            Comparison::Lt => o == Less,
            Comparison::Le => o != Greater,
            Comparison::Gt => o == Greater,
            Comparison::Ge => o != Less,
        }
    }

    /// The comparison with its sides swapped: `a op b` is `b op.flipped() a`.
    pub fn flipped(self) -> Comparison {
        match self {
            Comparison::Lt => Comparison::Gt,
            Comparison::Le => Comparison::Ge,
            Comparison::Gt => Comparison::Lt,
            Comparison::Ge => Comparison::Le,
            same => same,
        }
    }
}

impl From<Comparison> for espalier_schema::CompareOp {
    fn from(c: Comparison) -> Self {
        use espalier_schema::CompareOp;
        match c {
            Comparison::Eq => CompareOp::Eq,
            Comparison::Ne => CompareOp::Ne,
            Comparison::Lt => CompareOp::Lt,
            Comparison::Le => CompareOp::Le,
            Comparison::Gt => CompareOp::Gt,
            Comparison::Ge => CompareOp::Ge,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Filter {
    /// `> 100`, `== "x"`, `== 'State'` (numbers, texts, states, reference keys)
    Compare { op: Comparison, value: Value },
    /// `( [ 'a' ] * )` — text starts with the prefix.
    Prefix(Value),
    /// `in ( 'S1' 'S2' )` — stategroup is in one of the states.
    In(Vec<String>),
}

// ---- pattern queries (`collection match …`, docs/instructions.md "Pattern queries") ----

/// `collection match <clause>+ select [distinct] <column>+ [order by …] [limit N] [offset N]`
///
/// Variables are bound to nodes (entries, or states and groups that store properties); a
/// match is one assignment of every variable that satisfies every condition. Columns are
/// computed per match, or per group when any column aggregates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    pub clauses: Vec<Located<Clause>>,
    pub distinct: bool,
    pub columns: Vec<Located<Column>>,
    pub order: Vec<OrderKey>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
    /// `explain collection match …`: run it, and answer with the plan and the rows each
    /// operation produced instead of the rows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub explain: bool,
}

/// One part of a pattern: a variable binding or a condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clause {
    /// `var in <steps>` (from the root) or `var in other <steps>` (from another variable).
    Bind { var: String, from: Option<String>, path: Vec<Located<PatternStep>> },
    /// `where <condition>`
    Where(Located<Condition>),
}

/// A step of a pattern path: the steps of collection paths, plus keys that name variables,
/// reverse and parent steps, and bounded repetition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternStep {
    /// `+ 'g'`
    Group(String),
    /// `. 'd'` (every entry) or `. 'd' : key`
    Dictionary { name: String, key: Option<PatternKey> },
    /// `% 'm'` (every entry) or `% 'm' : key` (a value, or a variable: the entry keyed by it)
    Matrix { name: String, key: Option<PatternKey> },
    /// `? 'sg' * 's'` — only while the stategroup is in that state.
    State { stategroup: String, state: String },
    /// `> 'r'` — a reference's target; on a matrix, every entry's target.
    Reference(String),
    /// `< 'r'` — backwards: every node whose reference (or matrix) `'r'` points here.
    Reverse(String),
    /// `.^` `%^` `+^` `?^` — up to the node that holds this entry, matrix entry, group or state.
    Up(UpKind),
    /// `repeat MIN to MAX ( steps )` — every node the steps reach in MIN to MAX repetitions,
    /// each once, at its shortest distance.
    Repeat { min: u32, max: u32, steps: Vec<Located<PatternStep>> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpKind {
    Dictionary,
    Matrix,
    Group,
    State,
}

/// The key of a keyed entry step in a pattern path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternKey {
    Value(Value),
    /// A variable: the matrix entry whose key is the variable's node.
    Var(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    And(Vec<Located<Condition>>),
    Or(Vec<Located<Condition>>),
    Not(Box<Located<Condition>>),
    /// `exists ( clauses )` — a sub-pattern with variables of its own has a match.
    Exists(Vec<Located<Clause>>),
    /// `var <steps>` — the steps lead somewhere; `var <steps> == other` — they reach `other`
    /// (with no steps: the two variables are the same node). `!=` is `not` of this.
    Path {
        var: String,
        path: Vec<Located<PatternStep>>,
        target: Option<String>,
    },
    /// `term op term`: numbers numerically, texts and keys by text, states by name.
    Compare {
        left: Located<Term>,
        op: Comparison,
        right: Located<Term>,
    },
    /// `term ( [ 'prefix' ] * )`
    Prefix {
        term: Located<Term>,
        prefix: Value,
    },
    /// `term in ( 'S1' 'S2' )`
    In {
        term: Located<Term>,
        states: Vec<String>,
    },
}

/// A value read from a match, or given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Term {
    /// `var` — the node's key: the keys of the entries from the root down to it.
    Var(String),
    /// `var <steps> kind : 'property'`
    Property { var: String, path: Vec<Located<PatternStep>>, kind: LeafKind, property: String },
    /// A literal, a `$parameter`, or a state `'Name'` (as text).
    Value(Value),
}

/// `'alias' -> expression`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub alias: String,
    pub expr: ColumnExpr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnExpr {
    Term(Located<Term>),
    /// `count ( )`, `count ( term )`, `count ( distinct term )`
    Count {
        distinct: bool,
        term: Option<Located<Term>>,
    },
    Sum(Located<Term>),
    Min(Located<Term>),
    Max(Located<Term>),
    Avg(Located<Term>),
    /// `shortest a ( steps ) to b max N` — the nodes of a shortest path from `a` to `b` along
    /// the steps (at most N repetitions); a match with no such path is left out.
    Shortest {
        from: String,
        steps: Vec<Located<PatternStep>>,
        to: String,
        max: u32,
    },
}

/// `order by 'alias' [asc | desc]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderKey {
    pub alias: String,
    pub descending: bool,
}
