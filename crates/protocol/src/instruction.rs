//! The structured instruction as the protocol defines it: the `instruction` field of `execute`
//! and `subscribe`, and the JSON form of `docs/instructions.md`. These types are the wire
//! format; the syntax tree (`espalier_instruction::ast`) has no serde form of its own, so a
//! change to it cannot change the protocol unnoticed.
//!
//! The shape is serde's externally tagged form, field names as written here (JSON and
//! MessagePack alike; `protocol/vectors/` holds examples). [`Instruction::to_ast`] turns a
//! decoded instruction into the syntax tree, [`Instruction::from`] the other way; the wire form
//! can also name the benchmark language's `index` and `random`, which the conversion refuses
//! with the text parser's message, so a client sending one gets a `syntax` error rather than
//! an undecodable frame.

use serde::{Deserialize, Serialize};

use espalier_instruction::ast;
use espalier_instruction::ParseError;
use espalier_schema::{Diagnostic, Span};

mod convert;

/// A key, a number or a text value, given literally or as a `$parameter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    /// A number; as a key, its decimal text.
    Int(i64),
    /// A text value or key.
    Text(String),
    /// `["a", "b"]` — a compound key, one component per dictionary on the reference's path.
    Compound(Vec<Value>),
    /// `$name`
    Param(String),
    /// The benchmark language's `index`: decoded so that it is refused with the text parser's
    /// message and code (`syntax`); no instruction can hold it.
    Index,
    /// The benchmark language's `random` (with its bound), refused as [`Value::Index`] is.
    Random(Option<i64>),
}

/// One step of a node path, a collection path or a projection path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
    /// `? 'sg' * 's'`
    State {
        /// The stategroup's name.
        stategroup: String,
        /// The state the stategroup must be in.
        state: String,
    },
    /// `> 'r'`
    Reference(String),
}

/// A part of an instruction that the syntax tree places (a step, an item, a clause, …). On the
/// wire it is the part itself: the wrapper only keeps serde's handling of it (a flattened map)
/// as it always was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Located<T> {
    /// The part itself.
    #[serde(flatten)]
    pub item: T,
}

/// A node path, collection path or projection path.
pub type Path = Vec<Located<Step>>;

/// One instruction: an update, a query, a `get`, a command call or a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Instruction {
    /// `update <node path> ( items )`
    Update {
        /// The node path to the node to change.
        path: Path,
        /// The changes to make to it.
        items: Vec<Located<Item>>,
    },
    /// `collection <node path> select …`
    Query(Query),
    /// `collection match …`
    Match(Pattern),
    /// `get <node path>`
    Get {
        /// The node path to the node to read.
        path: Path,
    },
    /// `command 'Name' ( 'param' -> value … )`
    Command {
        /// The command's name.
        name: String,
        /// Each parameter's name and value, in the order written.
        args: Vec<(String, Value)>,
    },
    /// `transaction ( instruction , … )`
    Transaction(Vec<Located<Instruction>>),
}

/// `'name' -> …` inside an update or initialisation block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// The property to set or change.
    pub name: String,
    /// What to do to it.
    pub op: Op,
}

/// The change an update item makes to its property.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `number 5`
    SetNumber(Value),
    /// `number + 1`
    AddNumber(Value),
    /// `text "x"`
    SetText(Value),
    /// `reference "key"`
    SetReference(Value),
    /// `group ( items )`
    Group(Vec<Located<Item>>),
    /// `dictionary KEY ( items )`
    AddEntry {
        /// The new entry's key.
        key: Value,
        /// The new entry's initial contents.
        items: Vec<Located<Item>>,
    },
    /// `dictionary KEY update ( items )`
    UpdateEntry {
        /// The entry's key.
        key: Value,
        /// The changes to make to the entry.
        items: Vec<Located<Item>>,
    },
    /// `dictionary KEY remove`
    RemoveEntry {
        /// The entry's key.
        key: Value,
    },
    /// `stategroup 'S' set to ( items )`
    SwitchState {
        /// The state to switch to: a state name or a `$parameter`.
        state: Value,
        /// The initial contents of the state's node.
        items: Vec<Located<Item>>,
    },
    /// `stategroup 'S' ( items )` in an update.
    UpdateState {
        /// The state the stategroup must be in.
        state: String,
        /// The changes to make to the state's node.
        items: Vec<Located<Item>>,
    },
}

/// `collection <node path> select <collection path> projections …`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Query {
    /// From the root to the context node.
    pub path: Path,
    /// From the context node through collections.
    pub select: Path,
    /// `from "k"` / `after "k"`: where the read of the collection path's first dictionary
    /// starts (absent: at its first key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Start>,
    /// The columns of each row, with their filters.
    pub projections: Vec<Located<Projection>>,
    /// `limit N`
    pub limit: Option<u64>,
    /// `offset N`
    pub offset: Option<u64>,
}

/// Where a key-range read starts: `{"from": value}` or `{"after": value}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// `from "k"`: the key itself and the keys after it.
    From(Value),
    /// `after "k"`: the keys after it.
    After(Value),
}

/// `'alias' -> steps kind : 'property' [filter]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// The kind of leaf property a projection or term reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeafKind {
    /// `number`
    Number,
    /// `text`
    Text,
    /// `stategroup`
    Stategroup,
    /// `reference`
    Reference,
}

/// A comparison operator of a filter or condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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

/// A projection's condition on the value it reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Filter {
    /// `> 100`, `== "x"`, …
    Compare {
        /// The operator, with the property on its left.
        op: Comparison,
        /// The value to compare with.
        value: Value,
    },
    /// `( [ 'a' ] * )`
    Prefix(Value),
    /// `in ( 'S1' 'S2' )`
    In(Vec<String>),
}

/// `collection match <clause>+ select [distinct] <column>+ …`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    /// The variable bindings and `where` conditions, in the order written.
    pub clauses: Vec<Located<Clause>>,
    /// `select distinct`
    pub distinct: bool,
    /// The result's columns.
    pub columns: Vec<Located<Column>>,
    /// `order by`
    pub order: Vec<OrderKey>,
    /// `limit N`
    pub limit: Option<u64>,
    /// `offset N`
    pub offset: Option<u64>,
    /// `explain collection match …` (left out when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub explain: bool,
}

/// One part of a pattern: a variable binding or a condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clause {
    /// `var in <steps>` or `var in other <steps>`
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

/// A step of a pattern path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternStep {
    /// `+ 'g'`
    Group(String),
    /// `. 'd'` or `. 'd' : key`
    Dictionary {
        /// The dictionary's name.
        name: String,
        /// The entry's key; `None` for every entry.
        key: Option<PatternKey>,
    },
    /// `% 'm'` or `% 'm' : key`
    Matrix {
        /// The matrix's name.
        name: String,
        /// The entry's key; `None` for every entry.
        key: Option<PatternKey>,
    },
    /// `? 'sg' * 's'`
    State {
        /// The stategroup's name.
        stategroup: String,
        /// The state the stategroup must be in.
        state: String,
    },
    /// `> 'r'`
    Reference(String),
    /// `< 'r'`
    Reverse(String),
    /// `.^` `%^` `+^` `?^`
    Up(UpKind),
    /// `repeat MIN to MAX ( steps )`
    Repeat {
        /// The fewest repetitions.
        min: u32,
        /// The most repetitions.
        max: u32,
        /// The steps to repeat.
        steps: Vec<Located<PatternStep>>,
    },
}

/// What an up step climbs out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpKind {
    /// `.^`
    Dictionary,
    /// `%^`
    Matrix,
    /// `+^`
    Group,
    /// `?^`
    State,
}

/// The key of a keyed entry step in a pattern path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternKey {
    /// A literal key or a `$parameter`.
    Value(Value),
    /// A variable.
    Var(String),
}

/// A `where` condition of a pattern query, or one of its parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// `c and c`
    And(Vec<Located<Condition>>),
    /// `c or c`
    Or(Vec<Located<Condition>>),
    /// `not c`
    Not(Box<Located<Condition>>),
    /// `exists ( clauses )`
    Exists(Vec<Located<Clause>>),
    /// `var <steps>` or `var <steps> == other`
    Path {
        /// The variable the steps start at.
        var: String,
        /// The steps to follow.
        path: Vec<Located<PatternStep>>,
        /// The variable the steps must reach, if any.
        target: Option<String>,
    },
    /// `term op term`
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Term {
    /// `var`
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
    /// A literal, a `$parameter`, or a state `'Name'`.
    Value(Value),
}

/// `'alias' -> expression`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    /// The column's name in the result.
    pub alias: String,
    /// What the column holds.
    pub expr: ColumnExpr,
}

/// What a column of a pattern query holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnExpr {
    /// The term's value in each match.
    Term(Located<Term>),
    /// `count ( )`, `count ( term )`, `count ( distinct term )`
    Count {
        /// Count distinct values, not matches.
        distinct: bool,
        /// The term to count; `None` in `count ( )`.
        term: Option<Located<Term>>,
    },
    /// `sum ( term )`
    Sum(Located<Term>),
    /// `min ( term )`
    Min(Located<Term>),
    /// `max ( term )`
    Max(Located<Term>),
    /// `avg ( term )`
    Avg(Located<Term>),
    /// `shortest a ( steps ) to b max N`
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderKey {
    /// The name of the column to sort by.
    pub alias: String,
    /// `desc`: largest first.
    pub descending: bool,
}

/// A structured instruction the syntax tree cannot hold: it names a word of the benchmark
/// language (`index`, `random`). `message` is the text parser's for the same word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct Refused {
    /// Where in the instruction, as field names and list positions
    /// (`update.items[0].op.set_number`).
    pub place: String,
    /// Why, in the text parser's words.
    pub message: String,
}

impl Refused {
    /// The syntax error this is, as the engine reports a broken rule of a structured
    /// instruction; placed at the start of `source` (the JSON text) if there is one.
    pub fn into_parse_error(self, source: Option<&str>) -> ParseError {
        ParseError(match source {
            Some(src) => Diagnostic::new(src, Span::default(), self.message),
            None => Diagnostic { span: Span::default(), line: 0, column: 0, message: self.message },
        })
    }
}

impl Instruction {
    /// The instruction as the syntax tree holds it (spans empty), or why it cannot be.
    pub fn to_ast(&self) -> Result<ast::Instruction, Refused> {
        convert::ToAst::to_ast(self)
    }
}

impl TryFrom<&Instruction> for ast::Instruction {
    type Error = Refused;

    fn try_from(wire: &Instruction) -> Result<ast::Instruction, Refused> {
        wire.to_ast()
    }
}

impl From<&ast::Instruction> for Instruction {
    fn from(instr: &ast::Instruction) -> Instruction {
        convert::ToWire::to_wire(instr)
    }
}

impl From<ast::Instruction> for Instruction {
    fn from(instr: ast::Instruction) -> Instruction {
        Instruction::from(&instr)
    }
}

/// Reads the JSON form of an instruction (`docs/instructions.md`) and checks the rules of the
/// text form on it (`espalier_instruction::validate`); spans of the result are empty. Errors
/// are syntax errors placed in `json`: serde's (`invalid JSON instruction: …`), a benchmark
/// word, or a broken rule, each with the text parser's message.
pub fn parse_json(json: &str) -> Result<ast::Instruction, ParseError> {
    let wire: Instruction = serde_json::from_str(json).map_err(|e| {
        // serde reports line and byte column; turn them into an offset so the diagnostic
        // reports the same place in characters, like every other error.
        let offset = line_column_offset(json, e.line(), e.column());
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let reason = full.strip_suffix(&suffix).unwrap_or(&full);
        ParseError(Diagnostic::new(json, Span::new(offset, offset), format!("invalid JSON instruction: {reason}")))
    })?;
    let instr = wire.to_ast().map_err(|e| e.into_parse_error(Some(json)))?;
    espalier_instruction::validate(&instr).map_err(|e| ParseError(Diagnostic::new(json, e.span, e.message)))?;
    Ok(instr)
}

/// Byte offset of serde_json's 1-based line and 1-based byte column (clamped to the text).
fn line_column_offset(text: &str, line: usize, column: usize) -> usize {
    let mut start = 0usize;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            let mut off = (start + column.saturating_sub(1)).min(start + l.len());
            while off > 0 && !text.is_char_boundary(off) {
                off -= 1;
            }
            return off;
        }
        start += l.len();
    }
    text.len()
}
