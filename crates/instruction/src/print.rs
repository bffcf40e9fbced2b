//! The canonical text form of an instruction: [`to_text`] prints what the parser
//! ([`crate::parse`]) reads back to the same instruction.

use std::fmt::Write as _;

use crate::ast::{Comparison, Filter, Instruction, Item, LeafKind, Located, Op, Path, Projection, Step, Value};

mod pattern;

/// The canonical one-line text form: `parse_instruction(&to_text(x), …)` gives `x` back (up to
/// spans) for every instruction the text grammar can express. Forms only JSON can build (a
/// keyless step in a node path, `[ ]`, …) are printed as closely as the grammar allows.
/// Entry operations print as `dictionary` (the AST does not record `matrix`).
pub fn to_text(instr: &Instruction) -> String {
    let mut out = String::new();
    write_instruction(&mut out, instr);
    out
}

fn write_instruction(out: &mut String, instr: &Instruction) {
    match instr {
        Instruction::Update { path, items } => {
            out.push_str("update");
            write_path(out, path);
            write_items(out, items);
        }
        Instruction::Query(q) => {
            out.push_str("collection");
            write_path(out, &q.path);
            out.push_str(" select");
            write_path(out, &q.select);
            if let Some(start) = &q.start {
                out.push_str(if start.exclusive() { " after " } else { " from " });
                write_value(out, &start.key().item);
            }
            for p in &q.projections {
                write_projection(out, &p.item);
            }
            if let Some(n) = q.limit {
                let _ = write!(out, " limit {n}");
            }
            if let Some(n) = q.offset {
                let _ = write!(out, " offset {n}");
            }
        }
        Instruction::Match(p) => pattern::write_pattern(out, p),
        Instruction::Get { path } => {
            out.push_str("get");
            write_path(out, path);
        }
        Instruction::Command { name, args } => {
            out.push_str("command ");
            write_name(out, name);
            out.push_str(" (");
            for (arg, v) in args {
                out.push(' ');
                write_name(out, arg);
                out.push_str(" -> ");
                write_value(out, v);
            }
            out.push_str(" )");
        }
        Instruction::Transaction(list) => {
            out.push_str("transaction (");
            for (i, instr) in list.iter().enumerate() {
                out.push_str(if i == 0 { " " } else { " , " });
                write_instruction(out, &instr.item);
            }
            out.push_str(" )");
        }
    }
}

fn write_path(out: &mut String, path: &Path) {
    for step in path {
        out.push(' ');
        match &step.item {
            Step::Group(g) => {
                out.push_str("+ ");
                write_name(out, g);
            }
            Step::Dictionary { name, key } | Step::Matrix { name, key } => {
                out.push_str(if matches!(step.item, Step::Dictionary { .. }) { ". " } else { "% " });
                write_name(out, name);
                if let Some(k) = key {
                    out.push_str(" : ");
                    write_value(out, k);
                }
            }
            Step::State { stategroup, state } => {
                out.push_str("? ");
                write_name(out, stategroup);
                out.push_str(" * ");
                write_name(out, state);
            }
            Step::Reference(r) => {
                out.push_str("> ");
                write_name(out, r);
            }
        }
    }
}

fn write_items(out: &mut String, items: &[Located<Item>]) {
    out.push_str(" (");
    for item in items {
        out.push(' ');
        write_name(out, &item.item.name);
        out.push_str(" -> ");
        write_op(out, &item.item.op);
    }
    out.push_str(" )");
}

fn write_op(out: &mut String, op: &Op) {
    match op {
        Op::SetNumber(v) => {
            out.push_str("number ");
            write_value(out, v);
        }
        Op::AddNumber(Value::Int(n)) if *n < 0 && *n != i64::MIN => {
            let _ = write!(out, "number - {}", n.unsigned_abs());
        }
        Op::AddNumber(v) => {
            out.push_str("number + ");
            write_value(out, v);
        }
        Op::SetText(v) => {
            out.push_str("text ");
            write_value(out, v);
        }
        Op::SetReference(v) => {
            out.push_str("reference ");
            write_value(out, v);
        }
        Op::Group(items) => {
            out.push_str("group");
            write_items(out, items);
        }
        Op::AddEntry { key, items } => {
            out.push_str("dictionary ");
            write_value(out, key);
            write_items(out, items);
        }
        Op::UpdateEntry { key, items } => {
            out.push_str("dictionary ");
            write_value(out, key);
            out.push_str(" update");
            write_items(out, items);
        }
        Op::RemoveEntry { key } => {
            out.push_str("dictionary ");
            write_value(out, key);
            out.push_str(" remove");
        }
        Op::SwitchState { state, items } => {
            out.push_str("stategroup ");
            match state {
                Value::Text(s) => write_name(out, s),
                other => write_value(out, other),
            }
            out.push_str(" set to");
            write_items(out, items);
        }
        Op::UpdateState { state, items } => {
            out.push_str("stategroup ");
            write_name(out, state);
            write_items(out, items);
        }
    }
}

fn write_projection(out: &mut String, p: &Projection) {
    out.push(' ');
    write_name(out, &p.alias);
    out.push_str(" ->");
    write_path(out, &p.path);
    out.push_str(match p.kind {
        LeafKind::Number => " number : ",
        LeafKind::Text => " text : ",
        LeafKind::Stategroup => " stategroup : ",
        LeafKind::Reference => " reference : ",
    });
    write_name(out, &p.property);
    match &p.filter {
        None => {}
        Some(Filter::Compare { op, value }) => {
            out.push_str(match op {
                Comparison::Eq => " == ",
                Comparison::Ne => " != ",
                Comparison::Lt => " < ",
                Comparison::Le => " <= ",
                Comparison::Gt => " > ",
                Comparison::Ge => " >= ",
            });
            match value {
                Value::Text(s) if p.kind == LeafKind::Stategroup => write_name(out, s),
                v => write_value(out, v),
            }
        }
        Some(Filter::Prefix(v)) => {
            out.push_str(" ( [ ");
            match v {
                Value::Text(s) => write_name(out, s),
                v => write_value(out, v),
            }
            out.push_str(" ] * )");
        }
        Some(Filter::In(states)) => {
            out.push_str(" in (");
            for s in states {
                out.push(' ');
                write_name(out, s);
            }
            out.push_str(" )");
        }
    }
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Text(s) => write_quoted(out, s, '"'),
        Value::Compound(parts) => {
            out.push('[');
            for (i, p) in parts.iter().enumerate() {
                out.push_str(if i == 0 { " " } else { ", " });
                write_value(out, p);
            }
            out.push_str(" ]");
        }
        Value::Param(p) => {
            out.push('$');
            out.push_str(p);
        }
    }
}

fn write_name(out: &mut String, name: &str) {
    write_quoted(out, name, '\'');
}

/// Quotes `s` with the escapes the lexer understands.
fn write_quoted(out: &mut String, s: &str, quote: char) {
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}
