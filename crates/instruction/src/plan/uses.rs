//! What each value of a checked plan stands for, as the checker resolved it: read-only, for
//! callers that supply `$parameters` and need to know what a parameter is used as (the
//! benchmark runner draws its `index` and `random` values by it, and fits repetitions to the
//! keys a benchmark names).

use espalier_schema::{ParamKind, PropertyId, Schema};

use super::{FilterPlan, ItemPlan, OpPlan, Plan, PlanKind, StateChoice, StepPlan};
use crate::ast::Value;

/// How a value is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRole {
    /// A number: set, added, compared, or a command's number argument.
    Number,
    /// A text: set, compared, a prefix, or a command's text argument.
    Text,
    /// The key of an existing entry of dictionary or matrix `collection`: a path step, an entry
    /// update or removal (for a matrix, the key of the entry's target).
    EntryKey {
        /// The dictionary or matrix.
        collection: PropertyId,
    },
    /// The key of a new entry of `collection` (for a matrix, the key of the new entry's
    /// target, which must exist).
    NewKey {
        /// The dictionary or matrix.
        collection: PropertyId,
    },
    /// The key of the target of reference `reference`, as its new value.
    TargetKey {
        /// The reference property.
        reference: PropertyId,
    },
    /// A key compared with reference `reference`'s target in a query filter.
    ComparedKey {
        /// The reference property.
        reference: PropertyId,
    },
    /// A state of stategroup `stategroup`, named at run time.
    State {
        /// The stategroup property.
        stategroup: PropertyId,
    },
}

/// One value of a plan and its role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueUse<'p> {
    /// The value as the plan holds it (a literal, a `$parameter`, a compound key).
    pub value: &'p Value,
    /// What the checker resolved it to.
    pub role: ValueRole,
}

impl Plan {
    /// Every value of the plan with its role, in the order the executor reads them (a compound
    /// key is one value). The values of pattern queries are not listed: their literals are
    /// typed by the pattern's conditions, not by one property.
    pub fn value_uses<'p>(&'p self, schema: &Schema) -> Vec<ValueUse<'p>> {
        let mut out = Vec::new();
        plan(schema, self, &mut out);
        out
    }
}

fn plan<'p>(schema: &Schema, p: &'p Plan, out: &mut Vec<ValueUse<'p>>) {
    match &p.kind {
        PlanKind::Update { path, items: is, .. } => {
            steps(path, out);
            items(is, out);
        }
        PlanKind::Query(q) => {
            steps(&q.path, out);
            steps(&q.select, out);
            for proj in &q.projections {
                steps(&proj.path, out);
                let (value, role) = match &proj.filter {
                    None | Some(FilterPlan::States(_)) => continue,
                    Some(FilterPlan::Number(_, v)) => (v, ValueRole::Number),
                    Some(FilterPlan::Text(_, v)) | Some(FilterPlan::Prefix(v)) => (v, ValueRole::Text),
                    Some(FilterPlan::Reference(_, v)) => (v, ValueRole::ComparedKey { reference: proj.property }),
                };
                out.push(ValueUse { value, role });
            }
        }
        PlanKind::Get { path, .. } => steps(path, out),
        PlanKind::Match(_) => {}
        PlanKind::Command { name, args, .. } => {
            let declared = schema.command(name).map(|c| c.params.as_slice()).unwrap_or_default();
            for (arg, value) in args {
                let kind = declared.iter().find(|(p, _)| p == arg).map(|(_, k)| *k);
                let role = if kind == Some(ParamKind::Number) { ValueRole::Number } else { ValueRole::Text };
                out.push(ValueUse { value, role });
            }
        }
        PlanKind::Transaction(list) => list.iter().for_each(|m| plan(schema, &m.plan, out)),
    }
}

fn steps<'p>(steps: &'p [StepPlan], out: &mut Vec<ValueUse<'p>>) {
    for s in steps {
        if let StepPlan::Entry { property, key: Some(value), .. } = s {
            out.push(ValueUse { value, role: ValueRole::EntryKey { collection: *property } });
        }
    }
}

fn items<'p>(list: &'p [ItemPlan], out: &mut Vec<ValueUse<'p>>) {
    for it in list {
        let p = it.property;
        match &it.op {
            OpPlan::SetNumber(value) | OpPlan::AddNumber(value) => {
                out.push(ValueUse { value, role: ValueRole::Number })
            }
            OpPlan::SetText(value) => out.push(ValueUse { value, role: ValueRole::Text }),
            OpPlan::SetReference(value) => out.push(ValueUse { value, role: ValueRole::TargetKey { reference: p } }),
            OpPlan::Group(is) | OpPlan::UpdateState { items: is, .. } => items(is, out),
            OpPlan::AddEntry { key, items: is } => {
                out.push(ValueUse { value: key, role: ValueRole::NewKey { collection: p } });
                items(is, out);
            }
            OpPlan::UpdateEntry { key, items: is } => {
                out.push(ValueUse { value: key, role: ValueRole::EntryKey { collection: p } });
                items(is, out);
            }
            OpPlan::RemoveEntry { key } => {
                out.push(ValueUse { value: key, role: ValueRole::EntryKey { collection: p } })
            }
            OpPlan::SwitchState { state, items: is } => {
                if let StateChoice::Param(value) = state {
                    out.push(ValueUse { value, role: ValueRole::State { stategroup: p } });
                }
                items(is, out);
            }
        }
    }
}
