//! The canonical text form of a pattern query (`collection match …`).

use std::fmt::Write as _;

use super::{write_name, write_value};
use crate::ast::*;

pub(super) fn write_pattern(out: &mut String, p: &Pattern) {
    if p.explain {
        out.push_str("explain ");
    }
    out.push_str("collection match");
    write_clauses(out, &p.clauses);
    out.push_str(" select");
    if p.distinct {
        out.push_str(" distinct");
    }
    for c in &p.columns {
        out.push(' ');
        write_name(out, &c.item.alias);
        out.push_str(" -> ");
        write_column(out, &c.item.expr);
    }
    if !p.order.is_empty() {
        out.push_str(" order by");
        for k in &p.order {
            out.push(' ');
            write_name(out, &k.alias);
            if k.descending {
                out.push_str(" desc");
            }
        }
    }
    if let Some(n) = p.limit {
        let _ = write!(out, " limit {n}");
    }
    if let Some(n) = p.offset {
        let _ = write!(out, " offset {n}");
    }
}

fn write_clauses(out: &mut String, clauses: &[Located<Clause>]) {
    for c in clauses {
        match &c.item {
            Clause::Bind { var, from, path } => {
                let _ = write!(out, " {var} in");
                if let Some(f) = from {
                    let _ = write!(out, " {f}");
                }
                write_steps(out, path);
            }
            Clause::Where(cond) => {
                out.push_str(" where ");
                write_condition(out, &cond.item, 0);
            }
        }
    }
}

fn write_steps(out: &mut String, steps: &[Located<PatternStep>]) {
    for s in steps {
        out.push(' ');
        match &s.item {
            PatternStep::Group(g) => {
                out.push_str("+ ");
                write_name(out, g);
            }
            PatternStep::Dictionary { name, key } | PatternStep::Matrix { name, key } => {
                out.push_str(if matches!(s.item, PatternStep::Dictionary { .. }) { ". " } else { "% " });
                write_name(out, name);
                match key {
                    None => {}
                    Some(PatternKey::Var(v)) => {
                        let _ = write!(out, " : {v}");
                    }
                    Some(PatternKey::Value(v)) => {
                        out.push_str(" : ");
                        write_value(out, v);
                    }
                }
            }
            PatternStep::State { stategroup, state } => {
                out.push_str("? ");
                write_name(out, stategroup);
                out.push_str(" * ");
                write_name(out, state);
            }
            PatternStep::Reference(r) => {
                out.push_str("> ");
                write_name(out, r);
            }
            PatternStep::Reverse(r) => {
                out.push_str("< ");
                write_name(out, r);
            }
            PatternStep::Up(k) => out.push_str(match k {
                UpKind::Dictionary => ".^",
                UpKind::Matrix => "%^",
                UpKind::Group => "+^",
                UpKind::State => "?^",
            }),
            PatternStep::Repeat { min, max, steps } => {
                let _ = write!(out, "repeat {min} to {max} (");
                write_steps(out, steps);
                out.push_str(" )");
            }
        }
    }
}

/// `level`: 0 top, 1 inside `or`, 2 inside `and`, 3 operand of `not` — parenthesised when
/// the condition binds looser than its place needs.
fn write_condition(out: &mut String, c: &Condition, level: u8) {
    let wrap = |out: &mut String, needed: bool, f: &dyn Fn(&mut String)| {
        if needed {
            out.push_str("( ");
            f(out);
            out.push_str(" )");
        } else {
            f(out);
        }
    };
    match c {
        Condition::Or(list) => wrap(out, level > 0, &|out| {
            for (i, x) in list.iter().enumerate() {
                if i > 0 {
                    out.push_str(" or ");
                }
                write_condition(out, &x.item, 1);
            }
        }),
        Condition::And(list) => wrap(out, level > 1, &|out| {
            for (i, x) in list.iter().enumerate() {
                if i > 0 {
                    out.push_str(" and ");
                }
                write_condition(out, &x.item, 2);
            }
        }),
        Condition::Not(inner) => {
            out.push_str("not ");
            write_condition(out, &inner.item, 3);
        }
        Condition::Exists(clauses) => {
            out.push_str("exists (");
            write_clauses(out, clauses);
            out.push_str(" )");
        }
        Condition::Path { var, path, target } => {
            out.push_str(var);
            write_steps(out, path);
            if let Some(t) = target {
                let _ = write!(out, " == {t}");
            }
        }
        Condition::Compare { left, op, right } => {
            write_term(out, &left.item);
            out.push_str(match op {
                Comparison::Eq => " == ",
                Comparison::Ne => " != ",
                Comparison::Lt => " < ",
                Comparison::Le => " <= ",
                Comparison::Gt => " > ",
                Comparison::Ge => " >= ",
            });
            write_term(out, &right.item);
        }
        Condition::Prefix { term, prefix } => {
            write_term(out, &term.item);
            out.push_str(" ( [ ");
            match prefix {
                Value::Text(s) => write_name(out, s),
                v => write_value(out, v),
            }
            out.push_str(" ] * )");
        }
        Condition::In { term, states } => {
            write_term(out, &term.item);
            out.push_str(" in (");
            for s in states {
                out.push(' ');
                write_name(out, s);
            }
            out.push_str(" )");
        }
    }
}

fn write_term(out: &mut String, t: &Term) {
    match t {
        Term::Var(v) => out.push_str(v),
        Term::Property { var, path, kind, property } => {
            out.push_str(var);
            write_steps(out, path);
            out.push_str(match kind {
                LeafKind::Number => " number : ",
                LeafKind::Text => " text : ",
                LeafKind::Stategroup => " stategroup : ",
                LeafKind::Reference => " reference : ",
            });
            write_name(out, property);
        }
        Term::Value(v) => write_value(out, v),
    }
}

fn write_column(out: &mut String, e: &ColumnExpr) {
    let agg = |out: &mut String, name: &str, t: &Located<Term>| {
        let _ = write!(out, "{name} ( ");
        write_term(out, &t.item);
        out.push_str(" )");
    };
    match e {
        ColumnExpr::Term(t) => write_term(out, &t.item),
        ColumnExpr::Count { distinct, term } => {
            out.push_str("count (");
            if *distinct {
                out.push_str(" distinct");
            }
            if let Some(t) = term {
                out.push(' ');
                write_term(out, &t.item);
            }
            out.push_str(" )");
        }
        ColumnExpr::Sum(t) => agg(out, "sum", t),
        ColumnExpr::Min(t) => agg(out, "min", t),
        ColumnExpr::Max(t) => agg(out, "max", t),
        ColumnExpr::Avg(t) => agg(out, "avg", t),
        ColumnExpr::Shortest { from, steps, to, max } => {
            let _ = write!(out, "shortest {from} (");
            write_steps(out, steps);
            let _ = write!(out, " ) to {to} max {max}");
        }
    }
}
