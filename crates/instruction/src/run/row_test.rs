//! Conditions that read only one variable's own record, compiled once per run to byte
//! positions in it: a filter over every row of a scan then tests the row's bytes, with no
//! term, leaf or view built on the way. Likewise a comparison of two variables' own numbers
//! ([`SlotCompare`]) and a streamed column of a variable's own number or text ([`SlotRead`]).
//! Anything else stays with the general evaluator (`Exec::holds`, `Exec::row_value`), which
//! gives the same answers.

use espalier_data::record;
use espalier_schema::{Schema, StateIndex};

use crate::ast::{Comparison, LeafKind};
use crate::plan::{Anchor, Compared, MatchCondition, MatchStep, MatchStepKind, MatchTerm};

/// Most parts a compiled test has (an `and` of many conditions stays general past it).
const MAX_PARTS: usize = 16;

/// A condition on variable `var` that its record alone answers.
#[derive(Debug)]
pub(crate) struct RowTest {
    pub(crate) var: usize,
    test: Test,
}

#[derive(Debug)]
enum Test {
    /// The number in the slot at `at`, compared with `value`: `slot op value`.
    Number {
        at: usize,
        op: Comparison,
        value: i64,
    },
    /// The stategroup at `at` is in one of `states`.
    State {
        at: usize,
        states: Vec<StateIndex>,
    },
    /// The collection whose entry count is at `at` has an entry.
    NonEmpty {
        at: usize,
    },
    Not(Box<Test>),
    And(Vec<Test>),
}

impl RowTest {
    /// The test for `c`, if it reads one variable's own slots only.
    /// `number(i)` is literal `i` of the run if it is a number.
    pub(crate) fn compile(
        c: &MatchCondition,
        number: &dyn Fn(usize) -> Option<i64>,
        schema: &Schema,
    ) -> Option<RowTest> {
        let mut var = None;
        let mut parts = 0;
        let test = compile(c, number, schema, &mut var, &mut parts)?;
        Some(RowTest { var: var?, test })
    }

    /// Whether the condition holds for the variable's record; `None` when the record is too
    /// short for a slot (damage: the general evaluator reports it).
    #[inline]
    pub(crate) fn holds(&self, record: &[u8]) -> Option<bool> {
        self.test.holds(record)
    }
}

impl Test {
    fn holds(&self, record: &[u8]) -> Option<bool> {
        Some(match self {
            Test::Number { at, op, value } => op.holds((slot(record, *at)? as i64).cmp(value)),
            Test::State { at, states } => {
                let s = slot(record, *at)?;
                states.iter().any(|&x| u64::from(x) == s)
            }
            Test::NonEmpty { at } => slot(record, *at)? > 0,
            Test::Not(t) => !t.holds(record)?,
            Test::And(list) => {
                for t in list {
                    if !t.holds(record)? {
                        return Some(false);
                    }
                }
                true
            }
        })
    }
}

/// A number or text term that reads one variable's own record, compiled to its slot's byte
/// position (a streamed column, `pattern::visit`): the same slot [`RowTest`] and
/// `NodeView::number` read, found once per run instead of once per row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotRead {
    /// The variable whose record holds the slot.
    pub(crate) var: usize,
    /// The slot's byte position in that record.
    pub(crate) at: usize,
    /// A number, or a text's string id.
    pub(crate) kind: LeafKind,
}

impl SlotRead {
    /// The read for `term` if it is a number or text of its variable's own record (through
    /// groups only).
    pub(crate) fn compile(term: &MatchTerm, schema: &Schema) -> Option<SlotRead> {
        match term {
            MatchTerm::Leaf { var, steps, property, kind: kind @ (LeafKind::Number | LeafKind::Text) }
                if in_record(steps) =>
            {
                Some(SlotRead { var: *var, at: record::slot(schema, *property), kind: *kind })
            }
            _ => None,
        }
    }
}

/// A comparison of two numbers each read from its variable's own record (`cp 'Date' >
/// ba 'Date'`, a join's condition), compiled once per run to their byte positions: the
/// general evaluator would build a leaf of each side for every pair of rows.
#[derive(Debug)]
pub(crate) struct SlotCompare {
    pub(crate) left: SlotRead,
    op: Comparison,
    pub(crate) right: SlotRead,
}

impl SlotCompare {
    /// The compiled form of `c`, if it compares two such numbers.
    pub(crate) fn compile(c: &MatchCondition, schema: &Schema) -> Option<SlotCompare> {
        let MatchCondition::Compare { left, op, right, how: Compared::Number } = c else { return None };
        let (left, right) = (SlotRead::compile(left, schema)?, SlotRead::compile(right, schema)?);
        (left.kind == LeafKind::Number && right.kind == LeafKind::Number).then_some(SlotCompare {
            left,
            op: *op,
            right,
        })
    }

    /// Whether the comparison holds for the left and right variables' records; `None` when a
    /// record is too short for its slot (damage: the general evaluator reports it).
    #[inline]
    pub(crate) fn holds(&self, left: &[u8], right: &[u8]) -> Option<bool> {
        let (l, r) = (slot(left, self.left.at)? as i64, slot(right, self.right.at)? as i64);
        Some(self.op.holds(l.cmp(&r)))
    }
}

#[inline]
fn slot(record: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(record.get(at..at + 8)?.try_into().ok()?))
}

/// Notes that the condition reads variable `v`; false if it already read another.
fn one_var(var: &mut Option<usize>, v: usize) -> bool {
    match var {
        Some(w) => *w == v,
        None => {
            *var = Some(v);
            true
        }
    }
}

/// Steps that stay in the variable's own record: groups.
fn in_record(steps: &[MatchStep]) -> bool {
    steps.iter().all(|s| matches!(s.kind, MatchStepKind::Group(_)))
}

fn compile(
    c: &MatchCondition,
    number: &dyn Fn(usize) -> Option<i64>,
    schema: &Schema,
    var: &mut Option<usize>,
    parts: &mut usize,
) -> Option<Test> {
    *parts += 1;
    if *parts > MAX_PARTS {
        return None;
    }
    match c {
        MatchCondition::And(list) => {
            Some(Test::And(list.iter().map(|c| compile(c, number, schema, var, parts)).collect::<Option<Vec<_>>>()?))
        }
        MatchCondition::Not(c) => Some(Test::Not(Box::new(compile(c, number, schema, var, parts)?))),
        MatchCondition::Compare { left, op, right, .. } => {
            let (leaf, op, lit) = match (left, right) {
                (MatchTerm::Leaf { .. }, MatchTerm::Lit(i)) => (left, *op, *i),
                (MatchTerm::Lit(i), MatchTerm::Leaf { .. }) => (right, op.flipped(), *i),
                _ => return None,
            };
            let MatchTerm::Leaf { var: v, steps, property, kind: LeafKind::Number } = leaf else { return None };
            let value = number(lit)?;
            (in_record(steps) && one_var(var, *v)).then(|| Test::Number {
                at: record::slot(schema, *property),
                op,
                value,
            })
        }
        MatchCondition::States {
            term: MatchTerm::Leaf { var: v, steps, property, kind: LeafKind::Stategroup },
            states,
        } => (in_record(steps) && one_var(var, *v))
            .then(|| Test::State { at: record::slot(schema, *property), states: states.clone() }),
        MatchCondition::Reach { from: Anchor::Var(v), steps, to: None } => {
            let (last, before) = steps.split_last()?;
            if !in_record(before) || !one_var(var, *v) {
                return None;
            }
            match last.kind {
                MatchStepKind::State(p, s) => Some(Test::State { at: record::slot(schema, p), states: vec![s] }),
                MatchStepKind::Entries(p) | MatchStepKind::Targets(p) => {
                    Some(Test::NonEmpty { at: record::slot(schema, p) })
                }
                _ => None,
            }
        }
        _ => None,
    }
}
