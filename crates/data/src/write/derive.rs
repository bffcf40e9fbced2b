//! Keeping derived properties (`count`, `sum`, `min`, `max`, `condition`) from each change,
//! inside the write that makes it: a member joining or leaving an aggregate, a member's value
//! changing, a number a condition tests changing. Sums and counts move by the difference;
//! `min` and `max` move by the difference too, except when the member holding the extreme
//! leaves or grows past it (or the set is about to be empty), when that one holder's members
//! are read again. [`Graph::derived_value`] computes the same values from scratch; `check`
//! compares the two.

use espalier_schema::{Aggregate, Derivation, Over, PropertyId, PropertyKind};

use super::WriteGraph;
use crate::change::Change;
use crate::index::IndexValue;
use crate::record::{self, NodeId, NodeRef};
use crate::{DataError, Result};

/// How a member of an aggregate changed: its value before and after (`None`: not a member).
#[derive(Debug, Clone, Copy)]
struct Move {
    before: Option<i64>,
    after: Option<i64>,
}

impl WriteGraph<'_, '_> {
    /// A stored or derived number `property` of record `record` went from `old` to `new`.
    pub(super) fn number_changed(&mut self, record: NodeId, property: PropertyId, old: i64, new: i64) -> Result<()> {
        if old == new || self.schema.derived_ids.is_empty() {
            return Ok(());
        }
        let schema = self.schema;
        for (d, derivation) in schema.derived() {
            match derivation {
                Derivation::Condition { number, op, value } if *number == property => {
                    let (was, is) = (op.holds(&old, value), op.holds(&new, value));
                    if was != is {
                        self.write_condition(record, d, is)?;
                    }
                }
                Derivation::Aggregate { function, over, value: Some(v) } if *v == property => {
                    if let Some(holder) = self.holder(record, *over)? {
                        let m = Move { before: Some(old), after: Some(new) };
                        self.aggregate_moved(holder, d, *function, *over, m)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A member (record `member`, as it is) joined (`joined`) or left the members of `over`
    /// in `holder`; called once the Entries or Links row that makes it a member is written
    /// or deleted, and only while `holder` exists.
    pub(super) fn member(&mut self, holder: NodeId, over: Over, member: &[u8], joined: bool) -> Result<()> {
        let schema = self.schema;
        for (d, function, value) in schema.aggregates_over(over) {
            let v = match value {
                Some(v) => record::read_u64(member, record::slot(schema, v))? as i64,
                None => 0,
            };
            let m = if joined { Move { before: None, after: Some(v) } } else { Move { before: Some(v), after: None } };
            self.aggregate_moved(holder, d, function, over, m)?;
        }
        Ok(())
    }

    /// Whose aggregate over `over` record `member` counts in: its owner (an entry of the
    /// collection) or the target of its reference (0 while unset, or removed earlier in this
    /// request: nobody's).
    fn holder(&self, member: NodeId, over: Over) -> Result<Option<NodeId>> {
        let rec = self.record_by_id(member)?;
        Ok(match over {
            Over::Collection(c) => {
                let h = record::header(self.schema, member.node_type(), rec)?;
                (h.parent_property == c).then_some(h.parent)
            }
            Over::Referrers(r) => {
                let target = record::read_id(rec, record::slot(self.schema, r))?;
                // A target removed earlier in this request holds no aggregate any more.
                self.target_alive(target)?.then_some(target)
            }
        })
    }

    fn aggregate_moved(
        &mut self,
        holder: NodeId,
        d: PropertyId,
        function: Aggregate,
        over: Over,
        m: Move,
    ) -> Result<()> {
        let at = record::slot(self.schema, d);
        let current = record::read_u64(self.record_by_id(holder)?, at)? as i64;
        let next = match function {
            Aggregate::Count => current + i64::from(m.after.is_some()) - i64::from(m.before.is_some()),
            Aggregate::Sum => current.wrapping_sub(m.before.unwrap_or(0)).wrapping_add(m.after.unwrap_or(0)),
            Aggregate::Min | Aggregate::Max => {
                let better = |a: i64, b: i64| if function == Aggregate::Min { a < b } else { a > b };
                match (m.before, m.after) {
                    (Some(b), Some(a)) if b == current && !better(current, a) => a,
                    // The extreme itself left or worsened: read this holder's members again.
                    (Some(b), _) if b == current => self.graph().derived_value(holder, d)?,
                    // Into an empty set `current` is 0, not a member's value.
                    (None, Some(a)) if self.graph().one_member(holder, over)? => a,
                    (_, Some(a)) if better(a, current) => a,
                    _ => current,
                }
            }
        };
        self.write_derived_number(holder, d, current, next)
    }

    fn write_derived_number(&mut self, holder: NodeId, d: PropertyId, old: i64, new: i64) -> Result<()> {
        if old == new {
            return Ok(());
        }
        self.write_number(holder, d, new)?;
        self.index_move(d, holder, IndexValue::Number(old), IndexValue::Number(new))?;
        if self.count_change() {
            let node = NodeRef { id: holder, ty: self.schema.property(d).owner };
            let change =
                Change::Number { node: self.path(node)?, property: self.schema.property(d).name.clone(), old, new };
            self.changes.push(change);
        }
        // Conditions may test this number; aggregates go over stored numbers only.
        self.number_changed(holder, d, old, new)
    }

    fn write_condition(&mut self, holder: NodeId, d: PropertyId, yes: bool) -> Result<()> {
        let schema = self.schema;
        let PropertyKind::StateGroup { states } = &schema.property(d).kind else {
            return Err(DataError::Corrupt(format!("condition {d} is not a stategroup")));
        };
        let (old, new) = if yes { (0u32, 1u32) } else { (1, 0) };
        let mut rec = self.load(holder)?;
        let at = record::slot(self.schema, d);
        debug_assert_eq!(record::read_u64(&rec, at)?, u64::from(old), "condition state out of step");
        record::write_u64(&mut rec, at, u64::from(new))?;
        self.store(holder, d, &rec)?;
        self.index_move(d, holder, IndexValue::State(old), IndexValue::State(new))?;
        if self.count_change() {
            let node = NodeRef { id: holder, ty: self.schema.property(d).owner };
            let path = self.path(node)?;
            self.changes.push(Change::StateSwitched {
                node: path,
                stategroup: self.schema.property(d).name.clone(),
                old: states[old as usize].name.clone(),
                new: states[new as usize].name.clone(),
            });
        }
        Ok(())
    }

    /// A new node's conditions, from its default numbers (all 0): the state each starts in.
    pub(super) fn condition_default(&self, d: PropertyId) -> u64 {
        match &self.schema.property(d).derived {
            Some(Derivation::Condition { op, value, .. }) => u64::from(op.holds(&0, value)),
            _ => 0,
        }
    }
}
