//! A pattern query's matches handed to a visitor one at a time ([`crate::Engine::visit_rows`]):
//! no row is collected and no text is copied, so a query returning a hundred thousand rows
//! allocates nothing per row. Only a plan that needs no row before it can give the first one
//! streams (no grouping, ordering or `distinct`); the others are answered by `run_match` and
//! visited from its result.

use std::borrow::Cow;
use std::ops::ControlFlow;

use super::{unbound, Exec, Flow, Leaf, Result, Val};
use crate::ast::LeafKind;
use crate::plan::{MatchColumn, MatchPlan, MatchTerm};
use crate::run::row_test::SlotRead;
use crate::run::{Bindings, RowValue};
use crate::InstructionError;

/// Whether [`visit_match`] streams `plan` (else its rows are collected first).
pub(crate) fn streams(plan: &MatchPlan) -> bool {
    !plan.grouped && plan.order.is_empty() && !plan.distinct && !plan.explain
}

/// Streams a plan that [`streams`] to `visit`: the rows [`super::run_match`] would return, in
/// its order, after its offset and up to its limit. Returns the number of matches (the
/// result's `total`: past the limit they are still counted, as `run_match` does), or, when
/// `visit` breaks, those counted so far.
pub(crate) fn visit_match(
    graph: espalier_data::Graph<'_>,
    plan: &MatchPlan,
    b: &mut Bindings<'_>,
    visit: &mut dyn FnMut(&[String], &[RowValue<'_>]) -> ControlFlow<()>,
) -> std::result::Result<u64, InstructionError> {
    debug_assert!(streams(plan), "only a plan that needs no row before the first streams");
    let exec = Exec::new(graph, plan, b)?;
    let env = unbound(plan);
    // One row (up to eight columns in place, not allocated), its values replaced in place: a
    // value that owns nothing is forgotten, not dropped (a drop is an out-of-line call per
    // value, as `RowValue::owns` says).
    let mut row: smallvec::SmallVec<[RowValue<'_>; 8]> = smallvec::SmallVec::new();
    row.resize_with(plan.columns.len(), || RowValue::Null);
    let (mut total, mut sent) = (0u64, 0u64);
    // Every column a number of a variable's own record (OO7's Q2 and Q7, say): each row is
    // those reads and nothing else, and no value in the row ever owns memory.
    let numbers = exec.column_slots.iter().all(|s| s.as_ref().is_some_and(|r| r.kind == LeafKind::Number));
    exec.block(&plan.block.ops, &env, &mut |_, env| {
        if numbers {
            for (value, slot) in row.iter_mut().zip(exec.column_slots.iter().flatten()) {
                // The value replaced is a number or the first row's `Null`: nothing to drop.
                std::mem::forget(std::mem::replace(value, RowValue::Int(exec.slot_word(slot, env)? as i64)));
            }
        } else {
            // A variable's own number or text is read at its byte position (`Exec::column_slots`).
            for ((value, col), slot) in row.iter_mut().zip(&plan.columns).zip(&exec.column_slots) {
                let v = match slot {
                    Some(r) => exec.slot_value(r, env)?,
                    None => match exec.row_value(col, env)? {
                        Some(v) => v,
                        None => return Ok(Flow::Go), // an undefined column leaves the match out
                    },
                };
                let old = std::mem::replace(value, v);
                if old.owns() {
                    drop(old);
                } else {
                    std::mem::forget(old);
                }
            }
        }
        total += 1;
        if total <= plan.offset || plan.limit.is_some_and(|l| sent >= l) {
            return Ok(Flow::Go);
        }
        sent += 1;
        Ok(match visit(&[], &row) {
            ControlFlow::Continue(()) => Flow::Go,
            ControlFlow::Break(()) => Flow::Stop,
        })
    })?;
    // The last row's values, as each row's: forgotten when they own nothing and sit in place
    // (a one-row lookup's run spent more on this drop than on its row).
    if !row.spilled() && !row.iter().any(RowValue::owns) {
        std::mem::forget(row);
    }
    Ok(total)
}

impl<'g> Exec<'g, '_> {
    /// The value of a number or text column read straight from its variable's record; the
    /// value [`Exec::row_value`] gives for it.
    #[inline]
    fn slot_value(&self, r: &SlotRead, env: &super::Env<'g>) -> Result<RowValue<'g>> {
        let id = self.slot_word(r, env)?;
        Ok(match r.kind {
            LeafKind::Number => RowValue::Int(id as i64),
            _ => RowValue::Text(Cow::Borrowed(self.graph.string_text(id)?)),
        })
    }

    /// A column's value in the match `env` binds, as [`Exec::row`] gives it, borrowing what
    /// it can; `None` when it is undefined.
    fn row_value<'s>(&'s self, col: &MatchColumn, env: &super::Env<'g>) -> Result<Option<RowValue<'s>>> {
        let MatchColumn::Term(t) = col else {
            // A shortest path (a list), or an aggregate (never outside a grouping).
            return Ok(self.column_value(col, env)?.map(|v| RowValue::Json(v.into_json())));
        };
        // The common columns without a `Leaf` between: a number through `Exec::number` (a
        // variable's own slot read straight from its record), a variable's own text and a
        // node's keys borrowed.
        match t {
            MatchTerm::Leaf { kind: LeafKind::Number, .. } => return Ok(self.number(t, env)?.map(RowValue::Int)),
            // A node's key path, its keys borrowed.
            MatchTerm::Key(v) => {
                let mut keys = Vec::new();
                self.graph.entry_keys_into(self.slot(env, *v).node, &mut keys)?;
                return Ok(Some(if keys.len() == 1 {
                    RowValue::Text(keys.swap_remove(0))
                } else {
                    RowValue::Key(keys)
                }));
            }
            MatchTerm::Leaf { var, steps, property, kind: LeafKind::Text } if steps.is_empty() => {
                let view = self.var_view(env, *var)?;
                return Ok(Some(RowValue::Text(Cow::Borrowed(self.graph.string_text(view.text_id(*property)?)?))));
            }
            _ => {}
        }
        Ok(self.leaf(t, env)?.map(|leaf| match leaf {
            Leaf::Number(n) => RowValue::Int(n),
            Leaf::Text(t) => RowValue::Text(t),
            Leaf::State(_, name) => RowValue::Text(Cow::Borrowed(name)),
            Leaf::Key(k) => match k {
                Cow::Borrowed([one]) => RowValue::Text(Cow::Borrowed(one)),
                k => match Val::key(k.into_owned()) {
                    Val::Text(one) => RowValue::Text(Cow::Owned(one)),
                    list => RowValue::Json(list.into_json()),
                },
            },
        }))
    }
}
