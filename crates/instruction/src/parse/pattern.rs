//! The text form of pattern queries: `collection match <clauses> select <columns> …`.
//!
//! A child of the instruction parser: same tokens, same error style, same nesting bound.
//! Variables are bare words that are not keywords ([`RESERVED`]).

use std::fmt::Write as _;

use espalier_schema::lexer::TokenKind;

use super::{write_name, write_value, PResult, Parser};
use crate::ast::{
    Clause, Column, ColumnExpr, Comparison, Condition, LeafKind, Located, OrderKey, Pattern, PatternKey, PatternStep,
    Term, UpKind, Value,
};
use crate::validate::{rule, MAX_REPEAT, RESERVED};

fn is_variable(kind: &TokenKind) -> bool {
    matches!(kind, TokenKind::Word(w) if !RESERVED.contains(&w.as_str()))
}

fn leaf_kind(kind: &TokenKind) -> Option<LeafKind> {
    match kind {
        TokenKind::Word(w) => match w.as_str() {
            "number" => Some(LeafKind::Number),
            "text" => Some(LeafKind::Text),
            "stategroup" => Some(LeafKind::Stategroup),
            "reference" => Some(LeafKind::Reference),
            _ => None,
        },
        _ => None,
    }
}

impl Parser<'_> {
    /// After `collection` (the next token is `match`).
    pub(super) fn pattern(&mut self) -> PResult<Pattern> {
        self.bump(); // `collection`
        self.bump(); // `match`
        let clauses = self.clauses()?;
        if clauses.is_empty() {
            return Err(self.expected("a variable binding (`name in …`) after `match`"));
        }
        if !self.eat_word("select") {
            return Err(self.expected("a binding (`name in …`), `where` or `select`"));
        }
        let distinct = self.eat_word("distinct");
        let mut columns = Vec::new();
        while matches!(self.peek().kind, TokenKind::Name(_)) {
            columns.push(self.column()?);
        }
        if columns.is_empty() {
            return Err(self.expected("a column ('name' -> …) after `select`"));
        }
        let mut order = Vec::new();
        if self.eat_word("order") {
            if !self.eat_word("by") {
                return Err(self.expected("`by` after `order`"));
            }
            while let TokenKind::Name(alias) = &self.peek().kind {
                let alias = alias.clone();
                self.bump();
                let descending = if self.eat_word("desc") {
                    true
                } else {
                    self.eat_word("asc");
                    false
                };
                order.push(OrderKey { alias, descending });
            }
            if order.is_empty() {
                return Err(self.expected("a column name ('name') after `order by`"));
            }
        }
        let limit = if self.eat_word("limit") { Some(self.count("limit")?) } else { None };
        let offset = if self.eat_word("offset") { Some(self.count("offset")?) } else { None };
        Ok(Pattern { clauses, distinct, columns, order, limit, offset, explain: false })
    }

    /// Bindings and `where` conditions, up to whatever cannot start one.
    fn clauses(&mut self) -> PResult<Vec<Located<Clause>>> {
        let mut clauses = Vec::new();
        loop {
            let start = self.peek().span;
            if self.eat_word("where") {
                let cond = self.condition()?;
                clauses.push(Located { item: Clause::Where(cond), span: start.to(self.last) });
                continue;
            }
            let binds =
                is_variable(&self.peek().kind) && self.tokens.get(self.pos + 1).is_some_and(|t| t.kind.is_word("in"));
            if !binds {
                return Ok(clauses);
            }
            let var = self.variable("a variable")?;
            self.bump(); // `in`
            let from = if is_variable(&self.peek().kind) { Some(self.variable("a variable")?) } else { None };
            let path = self.pattern_steps()?;
            if path.is_empty() {
                let what = match &from {
                    Some(f) => format!("a step (`.`, `%`, `+`, `?`, `>`, `<`, `repeat`) after variable {f}"),
                    None => "a variable or a step (`.`, `%`, `+`, `?`, `>`) after `in`".to_string(),
                };
                return Err(self.expected(&what));
            }
            clauses.push(Located { item: Clause::Bind { var, from, path }, span: start.to(self.last) });
        }
    }

    fn variable(&mut self, what: &str) -> PResult<String> {
        let tok = self.peek().clone();
        match &tok.kind {
            TokenKind::Word(w) if RESERVED.contains(&w.as_str()) => {
                Err(self.error(tok.span, rule::keyword_variable(w)))
            }
            TokenKind::Word(w) => {
                self.bump();
                Ok(w.clone())
            }
            _ => Err(self.expected(what)),
        }
    }

    fn pattern_steps(&mut self) -> PResult<Vec<Located<PatternStep>>> {
        let mut steps = Vec::new();
        while let Some(step) = self.pattern_step()? {
            steps.push(step);
        }
        Ok(steps)
    }

    fn pattern_step(&mut self) -> PResult<Option<Located<PatternStep>>> {
        let start = self.peek().span;
        let up_next = self.tokens.get(self.pos + 1).is_some_and(|t| t.kind == TokenKind::Caret);
        let step = match self.peek().kind {
            TokenKind::Dot | TokenKind::Percent | TokenKind::Plus | TokenKind::Question if up_next => {
                let kind = match self.bump().kind {
                    TokenKind::Dot => UpKind::Dictionary,
                    TokenKind::Percent => UpKind::Matrix,
                    TokenKind::Plus => UpKind::Group,
                    _ => UpKind::State,
                };
                self.bump(); // `^`
                PatternStep::Up(kind)
            }
            TokenKind::Dot | TokenKind::Percent => {
                let is_dict = self.bump().kind == TokenKind::Dot;
                let (sym, coll) = if is_dict { ("`.`", "dictionary") } else { ("`%`", "matrix") };
                let name = self.name(&format!("a {coll} name or `^` after {sym}"))?;
                let key = if self.peek().kind == TokenKind::Colon {
                    self.bump();
                    Some(if is_variable(&self.peek().kind) {
                        PatternKey::Var(self.variable("a key")?)
                    } else {
                        PatternKey::Value(self.value()?)
                    })
                } else {
                    None
                };
                if is_dict {
                    PatternStep::Dictionary { name, key }
                } else {
                    PatternStep::Matrix { name, key }
                }
            }
            TokenKind::Plus => {
                self.bump();
                PatternStep::Group(self.name("a group name or `^` after `+`")?)
            }
            TokenKind::Question => {
                self.bump();
                let stategroup = self.name("a stategroup name or `^` after `?`")?;
                self.expect(&TokenKind::Star, &format!("`*` and a state after stategroup '{stategroup}'"))?;
                let state = self.name(&format!("a state name after `?` '{stategroup}' `*`"))?;
                PatternStep::State { stategroup, state }
            }
            TokenKind::Gt => {
                self.bump();
                PatternStep::Reference(self.name("a reference or matrix name after `>`")?)
            }
            TokenKind::Lt => {
                self.bump();
                PatternStep::Reverse(self.name("a reference or matrix name after `<` (followed backwards)")?)
            }
            TokenKind::Word(ref w) if w == "repeat" => {
                self.bump();
                let min = self.repetitions("`repeat`")?;
                if !self.eat_word("to") {
                    return Err(self.expected("`to` and the most repetitions after `repeat MIN`"));
                }
                let max = self.repetitions("`to`")?;
                if max < min {
                    return Err(self.error(start.to(self.last), rule::repeat_order(min, max)));
                }
                let steps = self.step_block("`repeat MIN to MAX`")?;
                PatternStep::Repeat { min, max, steps }
            }
            _ => return Ok(None),
        };
        Ok(Some(Located { item: step, span: start.to(self.last) }))
    }

    /// `( step+ )`
    fn step_block(&mut self, after: &str) -> PResult<Vec<Located<PatternStep>>> {
        let open = self.expect(&TokenKind::LParen, &format!("`(` and the steps to repeat after {after}"))?.span;
        self.nested(open, |p| {
            let steps = p.pattern_steps()?;
            if steps.is_empty() {
                return Err(p.expected("a step to repeat"));
            }
            match p.peek().kind {
                TokenKind::RParen => {
                    p.bump();
                    Ok(steps)
                }
                TokenKind::Eof => Err(p.error(open, "`(` is never closed")),
                _ => Err(p.expected("a step or `)`")),
            }
        })
    }

    fn repetitions(&mut self, after: &str) -> PResult<u32> {
        let tok = self.peek().clone();
        match tok.kind {
            TokenKind::Int(n) if (0..=MAX_REPEAT as i64).contains(&n) => {
                self.bump();
                Ok(n as u32)
            }
            TokenKind::Int(n) => Err(self.error(tok.span, rule::repetitions(n, after != "`max`"))),
            _ => Err(self.expected(&format!("a number of repetitions after {after}"))),
        }
    }

    // ---- conditions: `or` binds loosest, then `and`, then `not` ----

    fn condition(&mut self) -> PResult<Located<Condition>> {
        let start = self.peek().span;
        let first = self.conjunction()?;
        if !self.peek().kind.is_word("or") {
            return Ok(first);
        }
        let mut list = vec![first];
        while self.eat_word("or") {
            list.push(self.conjunction()?);
        }
        Ok(Located { item: Condition::Or(list), span: start.to(self.last) })
    }

    fn conjunction(&mut self) -> PResult<Located<Condition>> {
        let start = self.peek().span;
        let first = self.unary()?;
        if !self.peek().kind.is_word("and") {
            return Ok(first);
        }
        let mut list = vec![first];
        while self.eat_word("and") {
            list.push(self.unary()?);
        }
        Ok(Located { item: Condition::And(list), span: start.to(self.last) })
    }

    fn unary(&mut self) -> PResult<Located<Condition>> {
        let start = self.peek().span;
        if self.eat_word("not") {
            let inner = self.nested(start, |p| p.unary())?;
            return Ok(Located { item: Condition::Not(Box::new(inner)), span: start.to(self.last) });
        }
        self.atom()
    }

    fn atom(&mut self) -> PResult<Located<Condition>> {
        let start = self.peek().span;
        let item = match self.peek().kind.clone() {
            TokenKind::LParen => {
                let open = self.bump().span;
                let inner = self.nested(open, |p| p.condition())?;
                match self.peek().kind {
                    TokenKind::RParen => {
                        self.bump();
                    }
                    TokenKind::Eof => return Err(self.error(open, "`(` is never closed")),
                    _ => return Err(self.expected("`and`, `or` or `)`")),
                }
                return Ok(Located { item: inner.item, span: start.to(self.last) });
            }
            TokenKind::Word(w) if w == "exists" => {
                self.bump();
                let open = self.expect(&TokenKind::LParen, "`(` and a sub-pattern after `exists`")?.span;
                let clauses = self.nested(open, |p| p.clauses())?;
                if clauses.is_empty() {
                    return Err(self.expected("a binding (`name in …`) or `where` in `exists ( … )`"));
                }
                match self.peek().kind {
                    TokenKind::RParen => {
                        self.bump();
                    }
                    TokenKind::Eof => return Err(self.error(open, "`(` is never closed")),
                    _ => return Err(self.expected("a binding (`name in …`), `where` or `)`")),
                }
                Condition::Exists(clauses)
            }
            ref k if is_variable(k) => {
                let var = self.variable("a variable")?;
                let path = self.pattern_steps()?;
                if leaf_kind(&self.peek().kind).is_some() {
                    let left = self.property_term(var, path)?;
                    self.comparison(Located { item: left, span: start.to(self.last) })?
                } else {
                    let negate = match self.peek().kind {
                        TokenKind::EqEq => false,
                        TokenKind::Ne => true,
                        _ => {
                            return Ok(Located {
                                item: Condition::Path { var, path, target: None },
                                span: start.to(self.last),
                            })
                        }
                    };
                    self.bump();
                    let target = self.variable("a variable after `==` / `!=` (nodes compare with nodes; compare values with `var kind : 'property'`)")?;
                    let path = Condition::Path { var, path, target: Some(target) };
                    if negate {
                        Condition::Not(Box::new(Located { item: path, span: start.to(self.last) }))
                    } else {
                        path
                    }
                }
            }
            TokenKind::Word(w) if RESERVED.contains(&w.as_str()) && !matches!(w.as_str(), "index" | "random") => {
                return Err(self.expected("a condition (a variable, `not`, `exists` or `(`)"));
            }
            _ => {
                let left = self.term()?;
                self.comparison(left)?
            }
        };
        Ok(Located { item, span: start.to(self.last) })
    }

    /// After the left term: `op term`, `( [ 'p' ] * )` or `in ( 'S' … )`.
    fn comparison(&mut self, left: Located<Term>) -> PResult<Condition> {
        if self.peek().kind.is_word("in") {
            let crate::ast::Filter::In(states) = self.in_filter()? else { unreachable!("in_filter gives In") };
            return Ok(Condition::In { term: left, states });
        }
        let op = match self.peek().kind {
            TokenKind::EqEq => Comparison::Eq,
            TokenKind::Ne => Comparison::Ne,
            TokenKind::Lt => Comparison::Lt,
            TokenKind::Le => Comparison::Le,
            TokenKind::Gt => Comparison::Gt,
            TokenKind::Ge => Comparison::Ge,
            TokenKind::LParen => {
                let crate::ast::Filter::Prefix(prefix) = self.prefix_filter()? else {
                    unreachable!("prefix_filter gives Prefix")
                };
                return Ok(Condition::Prefix { term: left, prefix });
            }
            _ => {
                return Err(self.expected(
                    "a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`), a prefix `( [ 'p' ] * )` or `in ( … )`",
                ))
            }
        };
        self.bump();
        let right = self.term()?;
        Ok(Condition::Compare { left, op, right })
    }

    /// `var steps kind : 'property'`, `var`, a value, or a state `'Name'`.
    fn term(&mut self) -> PResult<Located<Term>> {
        let start = self.peek().span;
        let item = self.bare_term()?;
        Ok(Located { item, span: start.to(self.last) })
    }

    fn bare_term(&mut self) -> PResult<Term> {
        match &self.peek().kind {
            k if is_variable(k) => {
                let var = self.variable("a variable")?;
                let path = self.pattern_steps()?;
                if leaf_kind(&self.peek().kind).is_some() {
                    self.property_term(var, path)
                } else if path.is_empty() {
                    Ok(Term::Var(var))
                } else {
                    Err(self.expected(&format!(
                        "a property kind (`number`, `text`, `stategroup`, `reference`) after the steps from {var}"
                    )))
                }
            }
            TokenKind::Name(n) => {
                let n = n.clone();
                self.bump();
                Ok(Term::Value(Value::Text(n)))
            }
            _ => Ok(Term::Value(self.value()?)),
        }
    }

    fn property_term(&mut self, var: String, path: Vec<Located<PatternStep>>) -> PResult<Term> {
        let kind = leaf_kind(&self.bump().kind).expect("caller saw a kind word");
        self.expect(&TokenKind::Colon, "`:` and the property name after the kind")?;
        let property = match &self.peek().kind {
            TokenKind::Name(n) | TokenKind::Word(n) => n.clone(),
            _ => return Err(self.expected("a property name after `:`")),
        };
        self.bump();
        Ok(Term::Property { var, path, kind, property })
    }

    // ---- columns ----

    fn column(&mut self) -> PResult<Located<Column>> {
        let start = self.peek().span;
        let alias = self.name("a column name")?;
        self.expect(&TokenKind::Arrow, &format!("`->` after column name '{alias}'"))?;
        let aggregate = match &self.peek().kind {
            TokenKind::Word(w) if self.tokens.get(self.pos + 1).is_some_and(|t| t.kind == TokenKind::LParen) => {
                match w.as_str() {
                    "count" | "sum" | "min" | "max" | "avg" => Some(w.clone()),
                    _ => None,
                }
            }
            _ => None,
        };
        let expr = if let Some(agg) = aggregate {
            self.bump();
            let open = self.bump().span; // `(`
            let expr = self.nested(open, |p| {
                if agg == "count" {
                    let distinct = p.eat_word("distinct");
                    let term = if p.peek().kind == TokenKind::RParen && !distinct { None } else { Some(p.term()?) };
                    return Ok(ColumnExpr::Count { distinct, term });
                }
                let term = p.term()?;
                Ok(match agg.as_str() {
                    "sum" => ColumnExpr::Sum(term),
                    "min" => ColumnExpr::Min(term),
                    "max" => ColumnExpr::Max(term),
                    _ => ColumnExpr::Avg(term),
                })
            })?;
            match self.peek().kind {
                TokenKind::RParen => {
                    self.bump();
                }
                TokenKind::Eof => return Err(self.error(open, "`(` is never closed")),
                _ => return Err(self.expected(&format!("`)` to end `{agg} ( … )`"))),
            }
            expr
        } else if self.eat_word("shortest") {
            let from = self.variable("the variable a shortest path starts from")?;
            let steps = self.step_block("`shortest` and its start")?;
            if !self.eat_word("to") {
                return Err(self.expected("`to` and the variable the shortest path ends at"));
            }
            let to = self.variable("the variable a shortest path ends at")?;
            if !self.eat_word("max") {
                return Err(self.expected("`max` and the longest path to look for"));
            }
            let max = self.repetitions("`max`")?;
            ColumnExpr::Shortest { from, steps, to, max }
        } else {
            ColumnExpr::Term(self.term()?)
        };
        Ok(Located { item: Column { alias, expr }, span: start.to(self.last) })
    }
}

// ---- canonical text ----

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

// ---- walks over the AST ----

/// Empties every span in a pattern (see [`super::clear_spans`]).
pub(super) fn clear_spans(p: &mut Pattern) {
    use espalier_schema::Span;
    fn steps(list: &mut [Located<PatternStep>]) {
        for s in list {
            s.span = Span::default();
            if let PatternStep::Repeat { steps: inner, .. } = &mut s.item {
                steps(inner);
            }
        }
    }
    fn term(t: &mut Located<Term>) {
        t.span = Span::default();
        if let Term::Property { path, .. } = &mut t.item {
            steps(path);
        }
    }
    fn condition(c: &mut Located<Condition>) {
        c.span = Span::default();
        match &mut c.item {
            Condition::And(list) | Condition::Or(list) => list.iter_mut().for_each(condition),
            Condition::Not(inner) => condition(inner),
            Condition::Exists(list) => clauses(list),
            Condition::Path { path, .. } => steps(path),
            Condition::Compare { left, right, .. } => {
                term(left);
                term(right);
            }
            Condition::Prefix { term: t, .. } | Condition::In { term: t, .. } => term(t),
        }
    }
    fn clauses(list: &mut [Located<Clause>]) {
        for c in list {
            c.span = Span::default();
            match &mut c.item {
                Clause::Bind { path, .. } => steps(path),
                Clause::Where(cond) => condition(cond),
            }
        }
    }
    clauses(&mut p.clauses);
    for c in &mut p.columns {
        c.span = Span::default();
        match &mut c.item.expr {
            ColumnExpr::Term(t)
            | ColumnExpr::Sum(t)
            | ColumnExpr::Min(t)
            | ColumnExpr::Max(t)
            | ColumnExpr::Avg(t)
            | ColumnExpr::Count { term: Some(t), .. } => term(t),
            ColumnExpr::Count { term: None, .. } => {}
            ColumnExpr::Shortest { steps: s, .. } => steps(s),
        }
    }
}
