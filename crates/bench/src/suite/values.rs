//! The benchmark language's values, `index` and `random`, which the instruction language does
//! not have: the parser hands each one to [`Words`] (the instruction parser's
//! [`ValueWords`] hook), which stands a fresh `$parameter` in its place; the instruction is
//! checked as any other, and before each run the runner gives every such parameter its value
//! ([`Draws::fill`]). Plans are built by the checker and never changed afterwards.
//!
//! What a value means depends on where it is used, which the checked plan says
//! ([`Plan::value_uses`]): `random` without a bound on an entry key is one of the initialised
//! keys (`"0"` … `"N-1"` at the scaled size), on a state a random state; `random N` as a key
//! scales with the collection whose key it is; as a number it is left alone.

use std::cell::RefCell;
use std::collections::HashMap;

use espalier_instruction::ast::Value;
use espalier_instruction::parse::ValueWords;
use espalier_instruction::plan::{Plan, ValueRole};
use espalier_instruction::ParamValue;
use espalier_schema::lexer::{Token, TokenKind};
use espalier_schema::{PropertyId, PropertyKind, Schema, Span};

use super::dataset::SplitMix;
use super::{is_nested, key_dictionaries, Scale};

/// Parameter names of the benchmark values start so (`$__bench_0`, …); benchmark files give
/// no values for parameters of their own, so none of theirs is meant.
const PREFIX: &str = "__bench_";

/// One `index` or `random` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BenchWord {
    /// `index`: the repetition counter, 0 … N-1.
    Index,
    /// `random` (`None`) or `random N`.
    Random(Option<u64>),
}

/// A benchmark value: the parameter standing in its place, what was written, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchValue {
    /// The parameter's name (without `$`).
    pub param: String,
    /// What was written.
    pub word: BenchWord,
    /// Where, in the benchmark file.
    pub span: Span,
}

/// The [`ValueWords`] of benchmark files; collects what it reads.
#[derive(Default)]
pub(crate) struct Words {
    read: RefCell<Vec<BenchValue>>,
}

impl Words {
    /// Everything read since the last call.
    pub(crate) fn take(&self) -> Vec<BenchValue> {
        std::mem::take(&mut self.read.borrow_mut())
    }
}

impl ValueWords for Words {
    fn value(&self, tokens: &[Token]) -> Result<Option<(Value, usize)>, (usize, String)> {
        let Some(first) = tokens.first() else { return Ok(None) };
        let (word, taken, span) = match &first.kind {
            TokenKind::Word(w) if w == "index" => (BenchWord::Index, 1, first.span),
            TokenKind::Word(w) if w == "random" => match tokens.get(1) {
                Some(Token { kind: TokenKind::Int(n), span }) if *n > 0 => {
                    (BenchWord::Random(Some(*n as u64)), 2, first.span.to(*span))
                }
                Some(Token { kind: TokenKind::Int(n), .. }) => {
                    return Err((1, format!("`random` needs a positive bound, not {n}")))
                }
                _ => (BenchWord::Random(None), 1, first.span),
            },
            _ => return Ok(None),
        };
        let mut read = self.read.borrow_mut();
        let param = format!("{PREFIX}{}", read.len());
        read.push(BenchValue { param: param.clone(), word, span });
        Ok(Some((Value::Param(param), taken)))
    }

    fn describe(&self) -> &str {
        "`index` or `random`"
    }
}

/// How one benchmark value is drawn before each run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Draw {
    /// The repetition counter.
    Index,
    /// A number uniform in `0 … n-1` (as a key: its decimal text).
    Below(u64),
    /// One of these state names, uniformly.
    State(Vec<String>),
}

/// The draws of one instruction, by parameter, in the order the executor reads the values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Draws(pub Vec<(String, Draw)>);

impl Draws {
    /// Sets every parameter for repetition `index`, drawing from `rng` in order.
    pub fn fill(&self, index: u64, rng: &mut SplitMix, params: &mut HashMap<String, ParamValue>) {
        for (param, draw) in &self.0 {
            let value = match draw {
                Draw::Index => ParamValue::Int(index as i64),
                Draw::Below(n) => ParamValue::Int(rng.below(*n) as i64),
                Draw::State(names) => ParamValue::Text(names[rng.below(names.len() as u64) as usize].clone()),
            };
            params.insert(param.clone(), value);
        }
    }
}

/// The word standing behind parameter value `v`, if it is one of `values`.
pub fn word_of<'v>(values: &'v [BenchValue], v: &Value) -> Option<&'v BenchValue> {
    match v {
        Value::Param(p) => values.iter().find(|b| &b.param == p),
        _ => None,
    }
}

/// The draws of an instruction's benchmark values at `scale`, given the written sizes of the
/// initialised collections; the error names the value's place and why it cannot be drawn.
pub fn draws(
    plan: &Plan,
    values: &[BenchValue],
    schema: &Schema,
    sizes: &HashMap<PropertyId, u64>,
    scale: Scale,
) -> Result<Draws, (Span, String)> {
    let binder = Binder { schema, sizes, scale };
    let mut out = Vec::with_capacity(values.len());
    for u in plan.value_uses(schema) {
        let parts: Vec<&Value> = match u.value {
            Value::Compound(parts) => parts.iter().collect(),
            v => vec![v],
        };
        let compound = matches!(u.value, Value::Compound(_));
        for (i, part) in parts.into_iter().enumerate() {
            let Some(b) = word_of(values, part) else { continue };
            let draw = binder.draw(&b.word, u.role, compound.then_some(i)).map_err(|m| (b.span, m))?;
            out.push((b.param.clone(), draw));
        }
    }
    // A value no use lists sits in a pattern query, whose literals are not drawn.
    if let Some(b) = values.iter().find(|b| !out.iter().any(|(p, _)| p == &b.param)) {
        return Err((b.span, "`index` and `random` cannot be used in a pattern query".into()));
    }
    Ok(Draws(out))
}

struct Binder<'a> {
    schema: &'a Schema,
    sizes: &'a HashMap<PropertyId, u64>,
    scale: Scale,
}

impl Binder<'_> {
    /// `component`: the place of the value in a compound key.
    fn draw(&self, word: &BenchWord, role: ValueRole, component: Option<usize>) -> Result<Draw, String> {
        let bound = match word {
            BenchWord::Index => return Ok(Draw::Index),
            BenchWord::Random(n) => *n,
        };
        match role {
            ValueRole::Number | ValueRole::Text => match bound {
                Some(n) => Ok(Draw::Below(n)),
                None => Err("`random` needs an upper bound here: `random 100`".into()),
            },
            ValueRole::State { stategroup } => match (&self.schema.property(stategroup).kind, bound) {
                // A draw needs one state at least (`SplitMix::below` takes no 0).
                (PropertyKind::StateGroup { states }, None) if !states.is_empty() => {
                    Ok(Draw::State(states.iter().map(|s| s.name.clone()).collect()))
                }
                _ => Err("a state is named by its 'Name' or `random`".into()),
            },
            ValueRole::EntryKey { collection } | ValueRole::NewKey { collection } => match component {
                None => self.key(collection, collection, bound),
                Some(i) => self.component(collection, i, bound),
            },
            ValueRole::TargetKey { reference } | ValueRole::ComparedKey { reference } => {
                let dicts = key_dictionaries(self.schema, reference);
                match (component, dicts.as_slice()) {
                    (Some(i), _) => self.component(reference, i, bound),
                    (None, [d]) => self.key(*d, reference, bound),
                    (None, _) => match bound {
                        Some(n) => Ok(Draw::Below(self.scaled_bound(dicts.first().copied(), n))),
                        None => Err(format!(
                            "`random` on '{}' needs a key of {} components: write [ random N, … ]",
                            self.schema.property(reference).name,
                            dicts.len()
                        )),
                    },
                }
            }
        }
    }

    /// A whole key of `collection` (`random`: one of its initialised keys); `random N` scales
    /// with the first dictionary of `keyed`'s key.
    fn key(&self, collection: PropertyId, keyed: PropertyId, bound: Option<u64>) -> Result<Draw, String> {
        match bound {
            Some(n) => Ok(Draw::Below(self.scaled_bound(key_dictionaries(self.schema, keyed).first().copied(), n))),
            None => self.scaled_size(collection).map(Draw::Below).ok_or_else(|| self.no_size(collection)),
        }
    }

    /// Component `i` of a compound key of `keyed`: a key of the `i`-th dictionary on its path.
    fn component(&self, keyed: PropertyId, i: usize, bound: Option<u64>) -> Result<Draw, String> {
        let dict = key_dictionaries(self.schema, keyed).get(i).copied();
        match (bound, dict) {
            (Some(n), d) => Ok(Draw::Below(self.scaled_bound(d, n))),
            (None, Some(d)) => self.scaled_size(d).map(Draw::Below).ok_or_else(|| self.no_size(d)),
            (None, None) => Err("`random` needs an upper bound here: `random 100`".into()),
        }
    }

    fn scaled_size(&self, collection: PropertyId) -> Option<u64> {
        let n = *self.sizes.get(&collection).filter(|&&n| n > 0)?;
        Some(self.scale.apply(n, is_nested(self.schema, collection)))
    }

    /// A key bound `n` scaled with dictionary `d` (left alone without one).
    fn scaled_bound(&self, d: Option<PropertyId>, n: u64) -> u64 {
        match d {
            Some(d) => self.scale.apply(n, is_nested(self.schema, d)).max(1),
            None => n,
        }
    }

    fn no_size(&self, collection: PropertyId) -> String {
        format!(
            "`random` picks one of the keys `initialize` gives '{}', and it gives none: write `random N`",
            self.schema.property(collection).name
        )
    }
}
