//! The typed form of every instruction, before it is checked against a schema.
//!
//! People type the text form, which [`crate::parse`] turns into these values; clients may send
//! the structured (JSON or MessagePack) form instead, whose types are the protocol's
//! (`espalier_protocol::instruction`, `docs/instructions.md`) and are converted to these at the
//! boundary. The tree has no serde form of its own, so it can change without changing the wire
//! format. Names are property and state names as written in the schema.

use espalier_schema::Span;

/// A key, a number or a text value, given literally or as a `$parameter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A number; as a key, its decimal text.
    Int(i64),
    /// A text value or key.
    Text(String),
    /// `["a", "b"]` — a compound key, one component per dictionary on the reference's path.
    Compound(Vec<Value>),
    /// `$name`
    Param(String),
}

/// One step of a node path, a collection path or a projection path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `+ 'g'`
    Group(String),
    /// `. 'd' : key` in a node path; `. 'd'` (no key: every entry) in a collection path.
    Dictionary {
        /// The dictionary's name.
        name: String,
        /// The entry's key; `None` for every entry.
        key: Option<Value>,
    },
    /// `% 'm' : key` / `% 'm'`
    Matrix {
        /// The matrix's name.
        name: String,
        /// The entry's key; `None` for every entry.
        key: Option<Value>,
    },
    /// `? 'sg' * 's'` — only while the stategroup is in that state.
    State {
        /// The stategroup's name.
        stategroup: String,
        /// The state the stategroup must be in.
        state: String,
    },
    /// `> 'r'` — follow a reference to its target entry.
    Reference(String),
}

/// A part of an instruction (a step, an update item, a clause, …) with the place it was written
/// (spans are empty for structured input).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<T> {
    /// The part itself.
    pub item: T,
    /// Where the part was written in the source text.
    pub span: Span,
}

/// A node path, collection path or projection path: steps in the order they are walked.
pub type Path = Vec<Located<Step>>;

/// One instruction: an update, a query, a `get`, a command call or a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    /// `update <node path> ( items )`
    Update {
        /// The node path to the node to change.
        path: Path,
        /// The changes to make to it.
        items: Vec<Located<Item>>,
    },
    /// `collection <node path> select <collection path> projections [where …] [limit N] [offset N]`
    Query(Query),
    /// `collection match <bindings and conditions> select <columns> …` — a pattern query.
    Match(Pattern),
    /// `get <node path>` — fine-grained read of one node and its subtree, as dump JSON.
    Get {
        /// The node path to the node to read.
        path: Path,
    },
    /// `command 'Name' ( 'param' -> value … )`
    Command {
        /// The command's name, as declared in the schema.
        name: String,
        /// Each parameter's name and value, in the order written.
        args: Vec<(String, Value)>,
    },
    /// `transaction ( instruction , instruction … )` — all or nothing.
    Transaction(Vec<Located<Instruction>>),
}

/// `'name' -> …` inside an update or initialisation block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The property to set or change.
    pub name: String,
    /// What to do to it.
    pub op: Op,
}

/// The change an update item makes to its property.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    AddEntry {
        /// The new entry's key.
        key: Value,
        /// The new entry's initial contents.
        items: Vec<Located<Item>>,
    },
    /// `dictionary KEY update ( items )` — change an existing entry (fails if missing).
    UpdateEntry {
        /// The entry's key.
        key: Value,
        /// The changes to make to the entry.
        items: Vec<Located<Item>>,
    },
    /// `dictionary KEY remove` — fails if missing or referred to.
    RemoveEntry {
        /// The entry's key.
        key: Value,
    },
    /// `stategroup 'S' set to ( items )` — switch to S, initialising its node (fails if already
    /// in S). Inside a new node's initialisation `stategroup 'S' ( items )` means the same.
    SwitchState {
        /// The state to switch to: a state name or a `$parameter`.
        state: Value,
        /// The initial contents of the state's node.
        items: Vec<Located<Item>>,
    },
    /// `stategroup 'S' ( items )` in an update: change the node of the current state, which
    /// must be S.
    UpdateState {
        /// The state the stategroup must be in.
        state: String,
        /// The changes to make to the state's node.
        items: Vec<Located<Item>>,
    },
}

/// `collection <node path> select <collection path> projections …` — a collection query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// From the root to the context node (entries chosen by key).
    pub path: Path,
    /// From the context node through collections (no keys): every entry reached is a row.
    /// Empty: the context node itself is the only candidate row.
    pub select: Path,
    /// `from "k"` / `after "k"`: a key-range read of the collection path's first dictionary
    /// that starts at a key and, with a `limit`, stops once the page is full.
    pub start: Option<Start>,
    /// The columns of each row, with their filters.
    pub projections: Vec<Located<Projection>>,
    /// `limit N`: at most this many rows are returned.
    pub limit: Option<u64>,
    /// `offset N`: this many matching rows are skipped first.
    pub offset: Option<u64>,
}

/// Where a key-range read starts in the collection path's first dictionary (keys compare as
/// bytes, the order entries are read in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// `from "k"`: the entries whose key is `k` or after it.
    From(Located<Value>),
    /// `after "k"`: the entries whose key comes after `k` (the next page after a row's key).
    After(Located<Value>),
}

impl Start {
    /// The key the range starts at.
    pub fn key(&self) -> &Located<Value> {
        match self {
            Start::From(k) | Start::After(k) => k,
        }
    }

    /// Whether an entry with the key itself is left out (`after`).
    pub fn exclusive(&self) -> bool {
        matches!(self, Start::After(_))
    }
}

/// `'alias' -> steps kind : 'property' [filter]`
///
/// A row whose projection path crosses a state that is not selected does not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    /// The column's name in the result.
    pub alias: String,
    /// Group, state and reference steps from the row's node.
    pub path: Path,
    /// What kind of property the leaf is.
    pub kind: LeafKind,
    /// The name of the leaf property to read.
    pub property: String,
    /// A condition the value must meet for the row to be returned.
    pub filter: Option<Filter>,
}

/// The kind of leaf property a projection or term reads, as written before `:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafKind {
    /// `number`
    Number,
    /// `text`
    Text,
    /// `stategroup`: the name of its current state.
    Stategroup,
    /// `reference`: the key of the entry it refers to.
    Reference,
}

/// A comparison operator of a filter or condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
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

/// A projection's condition on the value it reads; a row is returned only if it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// `> 100`, `== "x"`, `== 'State'` (numbers, texts, states, reference keys)
    Compare {
        /// The operator, with the property on its left.
        op: Comparison,
        /// The value to compare with.
        value: Value,
    },
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The variable bindings and `where` conditions, in the order written.
    pub clauses: Vec<Located<Clause>>,
    /// `select distinct`: keep one of equal rows.
    pub distinct: bool,
    /// The result's columns.
    pub columns: Vec<Located<Column>>,
    /// `order by`: the columns to sort by, most significant first.
    pub order: Vec<OrderKey>,
    /// `limit N`: at most this many rows are returned.
    pub limit: Option<u64>,
    /// `offset N`: this many rows are skipped first.
    pub offset: Option<u64>,
    /// `explain collection match …`: run it, and answer with the plan and the rows each
    /// operation produced instead of the rows.
    pub explain: bool,
}

/// One part of a pattern: a variable binding or a condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clause {
    /// `var in <steps>` (from the root) or `var in other <steps>` (from another variable).
    Bind {
        /// The variable being bound.
        var: String,
        /// The variable the path starts at; `None` for the root.
        from: Option<String>,
        /// The steps to the nodes to bind.
        path: Vec<Located<PatternStep>>,
    },
    /// `where <condition>`
    Where(Located<Condition>),
}

/// A step of a pattern path: the steps of collection paths, plus keys that name variables,
/// reverse and parent steps, and bounded repetition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternStep {
    /// `+ 'g'`
    Group(String),
    /// `. 'd'` (every entry) or `. 'd' : key`
    Dictionary {
        /// The dictionary's name.
        name: String,
        /// The entry's key; `None` for every entry.
        key: Option<PatternKey>,
    },
    /// `% 'm'` (every entry) or `% 'm' : key` (a value, or a variable: the entry keyed by it)
    Matrix {
        /// The matrix's name.
        name: String,
        /// The entry's key; `None` for every entry.
        key: Option<PatternKey>,
    },
    /// `? 'sg' * 's'` — only while the stategroup is in that state.
    State {
        /// The stategroup's name.
        stategroup: String,
        /// The state the stategroup must be in.
        state: String,
    },
    /// `> 'r'` — a reference's target; on a matrix, every entry's target.
    Reference(String),
    /// `< 'r'` — backwards: every node whose reference (or matrix) `'r'` points here.
    Reverse(String),
    /// `.^` `%^` `+^` `?^` — up to the node that holds this entry, matrix entry, group or state.
    Up(UpKind),
    /// `repeat MIN to MAX ( steps )` — every node the steps reach in MIN to MAX repetitions,
    /// each once, at its shortest distance.
    Repeat {
        /// The fewest repetitions (0 includes the start).
        min: u32,
        /// The most repetitions.
        max: u32,
        /// The steps to repeat.
        steps: Vec<Located<PatternStep>>,
    },
}

/// What an up step (`.^` `%^` `+^` `?^`) climbs out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpKind {
    /// `.^`: a dictionary entry.
    Dictionary,
    /// `%^`: a matrix entry.
    Matrix,
    /// `+^`: a group.
    Group,
    /// `?^`: a state.
    State,
}

/// The key of a keyed entry step in a pattern path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternKey {
    /// A literal key or a `$parameter`.
    Value(Value),
    /// A variable: the matrix entry whose key is the variable's node.
    Var(String),
}

/// A `where` condition of a pattern query, or one of its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `c and c`: every part holds.
    And(Vec<Located<Condition>>),
    /// `c or c`: some part holds.
    Or(Vec<Located<Condition>>),
    /// `not c`
    Not(Box<Located<Condition>>),
    /// `exists ( clauses )` — a sub-pattern with variables of its own has a match.
    Exists(Vec<Located<Clause>>),
    /// `var <steps>` — the steps lead somewhere; `var <steps> == other` — they reach `other`
    /// (with no steps: the two variables are the same node). `!=` is `not` of this.
    Path {
        /// The variable the steps start at.
        var: String,
        /// The steps to follow.
        path: Vec<Located<PatternStep>>,
        /// The variable the steps must reach; `None`: they need only lead somewhere.
        target: Option<String>,
    },
    /// `term op term`: numbers numerically, texts and keys by text, states by name.
    Compare {
        /// The left side.
        left: Located<Term>,
        /// The operator.
        op: Comparison,
        /// The right side.
        right: Located<Term>,
    },
    /// `term ( [ 'prefix' ] * )`
    Prefix {
        /// The text term to test.
        term: Located<Term>,
        /// The prefix the text must start with.
        prefix: Value,
    },
    /// `term in ( 'S1' 'S2' )`
    In {
        /// The stategroup term to test.
        term: Located<Term>,
        /// The names of the states it may be in.
        states: Vec<String>,
    },
}

/// A value read from a match, or given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// `var` — the node's key: the keys of the entries from the root down to it.
    Var(String),
    /// `var <steps> kind : 'property'`
    Property {
        /// The variable the steps start at.
        var: String,
        /// The steps from the variable's node to the one holding the property.
        path: Vec<Located<PatternStep>>,
        /// What kind of property it is.
        kind: LeafKind,
        /// The property's name.
        property: String,
    },
    /// A literal, a `$parameter`, or a state `'Name'` (as text).
    Value(Value),
}

/// `'alias' -> expression`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column's name in the result.
    pub alias: String,
    /// What the column holds.
    pub expr: ColumnExpr,
}

/// What a column of a pattern query holds: a term, or an aggregate over the matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnExpr {
    /// The term's value in each match.
    Term(Located<Term>),
    /// `count ( )`, `count ( term )`, `count ( distinct term )`
    Count {
        /// `count ( distinct term )`: count distinct values, not matches.
        distinct: bool,
        /// The term to count; `None` in `count ( )`.
        term: Option<Located<Term>>,
    },
    /// `sum ( term )`: the sum of a number term.
    Sum(Located<Term>),
    /// `min ( term )`: the least value of the term.
    Min(Located<Term>),
    /// `max ( term )`: the greatest value of the term.
    Max(Located<Term>),
    /// `avg ( term )`: the average of a number term, as a fraction.
    Avg(Located<Term>),
    /// `shortest a ( steps ) to b max N` — the nodes of a shortest path from `a` to `b` along
    /// the steps (at most N repetitions); a match with no such path is left out.
    Shortest {
        /// The variable the path starts at.
        from: String,
        /// The steps to repeat.
        steps: Vec<Located<PatternStep>>,
        /// The variable the path must reach.
        to: String,
        /// The most repetitions of the steps.
        max: u32,
    },
}

/// `order by 'alias' [asc | desc]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderKey {
    /// The name of the column to sort by.
    pub alias: String,
    /// `desc`: largest first.
    pub descending: bool,
}
