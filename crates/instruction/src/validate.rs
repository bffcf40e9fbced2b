//! The rules every instruction obeys whichever form it came in: the text parser enforces
//! them while it reads (with the same messages, from [`rule`]), and [`validate`] enforces them
//! on a structured instruction (JSON, MessagePack, or built in code), which no parser has seen.
//! [`crate::Engine::check`] calls it (and the protocol's `parse_json`), so nothing reaches the
//! checker that the text form could not have said.
//!
//! Rules that the checker enforces anyway (a node path's steps need keys, a collection path's
//! take none, …) are left to the checker: both forms get its error.

use espalier_schema::Span;

use crate::ast::{
    Clause, ColumnExpr, Condition, Filter, Instruction, Item, Located, Op, Path, Pattern, PatternKey, PatternStep,
    Step, Term, Value,
};

/// Deepest nesting of `( … )` blocks, `[ … ]` keys and transactions that the parser accepts.
pub const MAX_DEPTH: usize = 64;

/// Words that cannot name a variable.
pub const RESERVED: &[&str] = &[
    "and",
    "asc",
    "avg",
    "by",
    "collection",
    "command",
    "count",
    "desc",
    "distinct",
    "exists",
    "get",
    "in",
    "index",
    "limit",
    "match",
    "max",
    "min",
    "not",
    "number",
    "offset",
    "or",
    "order",
    "random",
    "reference",
    "repeat",
    "select",
    "shortest",
    "stategroup",
    "sum",
    "text",
    "to",
    "transaction",
    "update",
    "where",
];

/// Most repetitions a `repeat` step or a `shortest` path may ask for.
pub const MAX_REPEAT: u32 = 1024;

/// A rule broken: where (empty for structured input) and which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Invalid {
    /// The offending part, when the instruction was parsed from text.
    pub span: Span,
    /// The rule's message, the same as the text parser's.
    pub message: String,
}

/// The messages of the rules, shared by the text parser and [`validate`].
pub(crate) mod rule {
    use super::{MAX_DEPTH, MAX_REPEAT};

    pub fn too_deep() -> String {
        format!("nesting is deeper than {MAX_DEPTH} levels")
    }

    pub const EMPTY_TRANSACTION: &str = "a transaction needs at least one instruction";

    pub fn bench_value(word: &str) -> String {
        format!("`{word}` is only allowed in benchmark files")
    }

    /// `in_repeat`: the bound of a `repeat MIN to MAX` step (not of `shortest … max N`).
    pub fn repetitions(n: impl std::fmt::Display, in_repeat: bool) -> String {
        let rule = if in_repeat { format!(" (need MIN <= MAX <= {MAX_REPEAT})") } else { String::new() };
        format!("repetitions must be between 0 and {MAX_REPEAT}, not {n}{rule}")
    }

    pub fn repeat_order(min: u32, max: u32) -> String {
        format!("`repeat {min} to {max}`: the most is below the least (need MIN <= MAX <= {MAX_REPEAT})")
    }

    pub const START_KEY: &str =
        "`from` / `after` takes one key of the collection path's first dictionary: a text, a number or a $parameter";

    /// `collection`: "dictionary" or "matrix".
    pub fn collection_key(collection: &str, name: &str) -> String {
        format!(
            "a collection path takes every entry: no key after {collection} '{name}' (pick entries in the node \
             path before `select`)"
        )
    }

    pub fn projection_entry(collection: &str) -> String {
        format!("a projection path cannot enter a {collection}; put it in the collection path after `select`")
    }

    pub fn keyword_variable(word: &str) -> String {
        format!("the keyword `{word}` cannot name a variable (keywords cannot name variables)")
    }
}

/// The message that refuses a word of the benchmark language (`index`, `random`) where a
/// value is expected: the text parser's, and the protocol's for a structured instruction
/// naming one (the syntax tree has no such values).
pub fn benchmark_word(word: &str) -> String {
    rule::bench_value(word)
}

/// Checks the rules of the text form on `instr`; the first broken one is the error.
pub fn validate(instr: &Instruction) -> std::result::Result<(), Invalid> {
    Validator { depth: 0 }.instruction(instr, Span::default())
}

type Result<T = ()> = std::result::Result<T, Invalid>;

fn invalid<T>(span: Span, message: impl Into<String>) -> Result<T> {
    Err(Invalid { span, message: message.into() })
}

/// "dictionary" or "matrix", as the rules name an entry step.
fn collection_word(step: &Step) -> &'static str {
    if matches!(step, Step::Matrix { .. }) {
        "matrix"
    } else {
        "dictionary"
    }
}

/// Whether `name` is what the lexer reads as a word: a letter or `_`, then letters, digits, `_`.
fn is_word(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

struct Validator {
    depth: usize,
}

impl Validator {
    /// Runs `f` one nesting level deeper, as the parser counts `( … )`, `[ … ]` and
    /// transactions.
    fn nested(&mut self, span: Span, f: impl FnOnce(&mut Self) -> Result) -> Result {
        if self.depth >= MAX_DEPTH {
            return invalid(span, rule::too_deep());
        }
        self.depth += 1;
        let out = f(self);
        self.depth -= 1;
        out
    }

    fn instruction(&mut self, instr: &Instruction, span: Span) -> Result {
        match instr {
            Instruction::Update { path, items } => {
                self.path(path)?;
                self.items(items, span)
            }
            Instruction::Query(q) => {
                self.path(&q.path)?;
                for s in &q.select {
                    if let Step::Dictionary { name, key: Some(_) } | Step::Matrix { name, key: Some(_) } = &s.item {
                        return invalid(s.span, rule::collection_key(collection_word(&s.item), name));
                    }
                }
                if let Some(start) = &q.start {
                    let key = start.key();
                    match &key.item {
                        Value::Compound(_) => return invalid(key.span, rule::START_KEY),
                        v => self.value(v, key.span)?,
                    }
                }
                for p in &q.projections {
                    for s in &p.item.path {
                        if let Step::Dictionary { .. } | Step::Matrix { .. } = &s.item {
                            return invalid(s.span, rule::projection_entry(collection_word(&s.item)));
                        }
                    }
                    match &p.item.filter {
                        None => Ok(()),
                        Some(Filter::Compare { value, .. }) => self.value(value, p.span),
                        Some(Filter::Prefix(v)) => self.prefix(v, p.span),
                        Some(Filter::In(states)) => self.states(states, p.span),
                    }?;
                }
                Ok(())
            }
            Instruction::Match(p) => self.pattern(p, span),
            Instruction::Get { path } => self.path(path),
            Instruction::Command { args, .. } => args.iter().try_for_each(|(_, v)| self.value(v, span)),
            Instruction::Transaction(list) => {
                if list.is_empty() {
                    return invalid(span, rule::EMPTY_TRANSACTION);
                }
                self.nested(span, |v| list.iter().try_for_each(|i| v.instruction(&i.item, i.span)))
            }
        }
    }

    fn path(&mut self, path: &Path) -> Result {
        for step in path {
            if let Step::Dictionary { key: Some(k), .. } | Step::Matrix { key: Some(k), .. } = &step.item {
                self.value(k, step.span)?;
            }
        }
        Ok(())
    }

    fn items(&mut self, items: &[Located<Item>], span: Span) -> Result {
        self.nested(span, |v| items.iter().try_for_each(|i| v.op(&i.item.op, i.span)))
    }

    fn op(&mut self, op: &Op, span: Span) -> Result {
        match op {
            Op::SetNumber(x) | Op::AddNumber(x) | Op::SetText(x) | Op::SetReference(x) => self.value(x, span),
            Op::Group(items) | Op::UpdateState { items, .. } => self.items(items, span),
            Op::AddEntry { key, items } | Op::UpdateEntry { key, items } => {
                self.value(key, span)?;
                self.items(items, span)
            }
            Op::RemoveEntry { key } => self.value(key, span),
            Op::SwitchState { state, items } => {
                self.value(state, span)?;
                self.items(items, span)
            }
        }
    }

    fn value(&mut self, value: &Value, span: Span) -> Result {
        match value {
            Value::Int(_) | Value::Text(_) => Ok(()),
            // The lexer reads `$` and then letters, digits and `_`.
            Value::Param(name) if name.is_empty() => invalid(span, "`$` must be followed by a parameter name"),
            Value::Param(name) if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                invalid(span, format!("${name} is not a parameter name (letters, digits and `_` after the `$`)"))
            }
            Value::Param(_) => Ok(()),
            Value::Compound(parts) => {
                if parts.is_empty() {
                    return invalid(span, "a compound key `[ … ]` needs at least one component");
                }
                self.nested(span, |v| parts.iter().try_for_each(|p| v.value(p, span)))
            }
        }
    }

    /// A prefix is written as a text or a `$parameter`.
    fn prefix(&mut self, value: &Value, span: Span) -> Result {
        match value {
            Value::Text(_) | Value::Param(_) => self.value(value, span),
            _ => invalid(span, "a prefix `( [ 'prefix' ] * )` is a text or a $parameter"),
        }
    }

    fn states(&mut self, states: &[String], span: Span) -> Result {
        if states.is_empty() {
            return invalid(span, "`in ( … )` needs at least one state name");
        }
        Ok(())
    }

    // ---- pattern queries ----

    fn pattern(&mut self, p: &Pattern, span: Span) -> Result {
        if p.clauses.is_empty() {
            return invalid(span, "a pattern query needs a variable binding (`name in …`) after `match`");
        }
        if p.columns.is_empty() {
            return invalid(span, "a pattern query needs a column ('name' -> …) after `select`");
        }
        self.clauses(&p.clauses)?;
        for c in &p.columns {
            match &c.item.expr {
                ColumnExpr::Term(t)
                | ColumnExpr::Sum(t)
                | ColumnExpr::Min(t)
                | ColumnExpr::Max(t)
                | ColumnExpr::Avg(t) => self.term(t)?,
                ColumnExpr::Count { term, .. } => {
                    if let Some(t) = term {
                        self.term(t)?;
                    }
                }
                ColumnExpr::Shortest { from, steps, to, max } => {
                    self.variable(from, c.span)?;
                    self.variable(to, c.span)?;
                    if *max > MAX_REPEAT {
                        return invalid(c.span, rule::repetitions(max, false));
                    }
                    self.step_block(steps, c.span)?;
                }
            }
        }
        Ok(())
    }

    fn clauses(&mut self, clauses: &[Located<Clause>]) -> Result {
        for c in clauses {
            match &c.item {
                Clause::Bind { var, from, path } => {
                    self.variable(var, c.span)?;
                    if let Some(f) = from {
                        self.variable(f, c.span)?;
                    }
                    if path.is_empty() {
                        return invalid(c.span, format!("the binding of {var} needs a step after `in`"));
                    }
                    self.steps(path)?;
                }
                Clause::Where(cond) => self.condition(cond)?,
            }
        }
        Ok(())
    }

    fn variable(&mut self, name: &str, span: Span) -> Result {
        if RESERVED.contains(&name) {
            return invalid(span, rule::keyword_variable(name));
        }
        if !is_word(name) {
            return invalid(
                span,
                format!("{name:?} is not a variable name (a letter or `_`, then letters, digits or `_`)"),
            );
        }
        Ok(())
    }

    fn steps(&mut self, steps: &[Located<PatternStep>]) -> Result {
        for s in steps {
            match &s.item {
                PatternStep::Dictionary { key: Some(k), .. } | PatternStep::Matrix { key: Some(k), .. } => match k {
                    PatternKey::Value(v) => self.value(v, s.span)?,
                    PatternKey::Var(var) => self.variable(var, s.span)?,
                },
                PatternStep::Repeat { min, max, steps } => {
                    for n in [min, max] {
                        if *n > MAX_REPEAT {
                            return invalid(s.span, rule::repetitions(n, true));
                        }
                    }
                    if max < min {
                        return invalid(s.span, rule::repeat_order(*min, *max));
                    }
                    self.step_block(steps, s.span)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The steps of `repeat` or `shortest`: at least one, one level deeper.
    fn step_block(&mut self, steps: &[Located<PatternStep>], span: Span) -> Result {
        if steps.is_empty() {
            return invalid(span, "`repeat` and `shortest` need a step to repeat");
        }
        self.nested(span, |v| v.steps(steps))
    }

    fn condition(&mut self, c: &Located<Condition>) -> Result {
        let span = c.span;
        match &c.item {
            Condition::And(list) | Condition::Or(list) => {
                if list.len() < 2 {
                    return invalid(span, "`and` and `or` join two conditions or more");
                }
                self.nested(span, |v| list.iter().try_for_each(|c| v.condition(c)))
            }
            Condition::Not(inner) => self.nested(span, |v| v.condition(inner)),
            Condition::Exists(clauses) => {
                if clauses.is_empty() {
                    return invalid(span, "`exists ( … )` needs a binding (`name in …`) or `where` in it");
                }
                self.nested(span, |v| v.clauses(clauses))
            }
            Condition::Path { var, path, target } => {
                self.variable(var, span)?;
                if let Some(t) = target {
                    self.variable(t, span)?;
                }
                self.steps(path)
            }
            Condition::Compare { left, right, .. } => {
                self.term(left)?;
                self.term(right)
            }
            Condition::Prefix { term, prefix } => {
                self.term(term)?;
                self.prefix(prefix, span)
            }
            Condition::In { term, states } => {
                self.term(term)?;
                self.states(states, span)
            }
        }
    }

    fn term(&mut self, t: &Located<Term>) -> Result {
        match &t.item {
            Term::Var(var) => self.variable(var, t.span),
            Term::Property { var, path, .. } => {
                self.variable(var, t.span)?;
                self.steps(path)
            }
            Term::Value(v) => self.value(v, t.span),
        }
    }
}
