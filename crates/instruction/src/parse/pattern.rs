//! The text form of pattern queries: `collection match <clauses> select <columns> …`.
//!
//! A child of the instruction parser: same tokens, same error style, same nesting bound.
//! Variables are bare words that are not keywords ([`RESERVED`]).

use espalier_schema::lexer::TokenKind;

use super::step::{Down, StepKind};
use super::{ParseResult, Parser};
use crate::ast::{
    Clause, Column, ColumnExpr, Comparison, Condition, Located, OrderKey, Pattern, PatternKey, PatternStep, Term,
    UpKind, Value,
};
use crate::validate::{rule, MAX_REPEAT, RESERVED};

fn is_variable(kind: &TokenKind) -> bool {
    matches!(kind, TokenKind::Word(w) if !RESERVED.contains(&w.as_str()))
}

impl Parser<'_> {
    /// After `collection` (the next token is `match`).
    pub(super) fn pattern(&mut self) -> ParseResult<Pattern> {
        self.cur.bump(); // `collection`
        self.cur.bump(); // `match`
        let clauses = self.clauses()?;
        if clauses.is_empty() {
            return Err(self.expected("a variable binding (`name in …`) after `match`"));
        }
        if !self.cur.eat_word("select") {
            return Err(self.expected("a binding (`name in …`), `where` or `select`"));
        }
        let distinct = self.cur.eat_word("distinct");
        let mut columns = Vec::new();
        while matches!(self.cur.peek().kind, TokenKind::Name(_)) {
            columns.push(self.column()?);
        }
        if columns.is_empty() {
            return Err(self.expected("a column ('name' -> …) after `select`"));
        }
        let mut order = Vec::new();
        if self.cur.eat_word("order") {
            if !self.cur.eat_word("by") {
                return Err(self.expected("`by` after `order`"));
            }
            while let TokenKind::Name(alias) = self.cur.peek().kind {
                let alias = alias.clone();
                self.cur.bump();
                let descending = if self.cur.eat_word("desc") {
                    true
                } else {
                    self.cur.eat_word("asc");
                    false
                };
                order.push(OrderKey { alias, descending });
            }
            if order.is_empty() {
                return Err(self.expected("a column name ('name') after `order by`"));
            }
        }
        let limit = if self.cur.eat_word("limit") { Some(self.count("limit")?) } else { None };
        let offset = if self.cur.eat_word("offset") { Some(self.count("offset")?) } else { None };
        Ok(Pattern { clauses, distinct, columns, order, limit, offset, explain: false })
    }

    /// Bindings and `where` conditions, up to whatever cannot start one.
    fn clauses(&mut self) -> ParseResult<Vec<Located<Clause>>> {
        let mut clauses = Vec::new();
        loop {
            let start = self.cur.peek().span;
            if self.cur.eat_word("where") {
                let cond = self.condition()?;
                clauses.push(Located { item: Clause::Where(cond), span: start.to(self.cur.last()) });
                continue;
            }
            let binds = is_variable(self.cur.peek().kind) && self.cur.peek_at(1).kind.is_word("in");
            if !binds {
                return Ok(clauses);
            }
            let var = self.variable("a variable")?;
            self.cur.bump(); // `in`
            let from = if is_variable(self.cur.peek().kind) { Some(self.variable("a variable")?) } else { None };
            let path = self.pattern_steps()?;
            if path.is_empty() {
                let what = match &from {
                    Some(f) => format!("a step (`.`, `%`, `+`, `?`, `>`, `<`, `repeat`) after variable {f}"),
                    None => "a variable or a step (`.`, `%`, `+`, `?`, `>`) after `in`".to_string(),
                };
                return Err(self.expected(&what));
            }
            clauses.push(Located { item: Clause::Bind { var, from, path }, span: start.to(self.cur.last()) });
        }
    }

    fn variable(&mut self, what: &str) -> ParseResult<String> {
        let tok = self.cur.peek();
        match tok.kind {
            TokenKind::Word(w) if RESERVED.contains(&w.as_str()) => {
                Err(self.error(tok.span, rule::keyword_variable(w)))
            }
            TokenKind::Word(w) => {
                self.cur.bump();
                Ok(w.clone())
            }
            _ => Err(self.expected(what)),
        }
    }

    fn pattern_steps(&mut self) -> ParseResult<Vec<Located<PatternStep>>> {
        let mut steps = Vec::new();
        while let Some(step) = self.pattern_step()? {
            steps.push(step);
        }
        Ok(steps)
    }

    fn pattern_step(&mut self) -> ParseResult<Option<Located<PatternStep>>> {
        let start = self.cur.peek().span;
        let up_next = *self.cur.peek_at(1).kind == TokenKind::Caret;
        let step = match self.cur.peek().kind {
            TokenKind::Dot | TokenKind::Percent | TokenKind::Plus | TokenKind::Question if up_next => {
                let kind = match self.cur.bump().kind {
                    TokenKind::Dot => UpKind::Dictionary,
                    TokenKind::Percent => UpKind::Matrix,
                    TokenKind::Plus => UpKind::Group,
                    _ => UpKind::State,
                };
                self.cur.bump(); // `^`
                PatternStep::Up(kind)
            }
            TokenKind::Lt => {
                self.cur.bump();
                PatternStep::Reverse(self.name("a reference or matrix name after `<` (followed backwards)")?)
            }
            TokenKind::Word(w) if w == "repeat" => {
                self.cur.bump();
                let min = self.repetitions("`repeat`")?;
                if !self.cur.eat_word("to") {
                    return Err(self.expected("`to` and the most repetitions after `repeat MIN`"));
                }
                let max = self.repetitions("`to`")?;
                if max < min {
                    return Err(self.error(start.to(self.cur.last()), rule::repeat_order(min, max)));
                }
                let steps = self.step_block("`repeat MIN to MAX`")?;
                PatternStep::Repeat { min, max, steps }
            }
            _ => match self.down_step(StepKind::Pattern)? {
                None => return Ok(None),
                Some(Down::Entry { matrix, name }) => {
                    let key = self.pattern_key()?;
                    if matrix {
                        PatternStep::Matrix { name, key }
                    } else {
                        PatternStep::Dictionary { name, key }
                    }
                }
                Some(Down::Group(name)) => PatternStep::Group(name),
                Some(Down::State { stategroup, state }) => PatternStep::State { stategroup, state },
                Some(Down::Reference(name)) => PatternStep::Reference(name),
            },
        };
        Ok(Some(Located { item: step, span: start.to(self.cur.last()) }))
    }

    /// After an entry step, `: key` (a value, or a variable) or nothing (every entry).
    fn pattern_key(&mut self) -> ParseResult<Option<PatternKey>> {
        if !self.cur.at(&TokenKind::Colon) {
            return Ok(None);
        }
        self.cur.bump();
        Ok(Some(if is_variable(self.cur.peek().kind) {
            PatternKey::Var(self.variable("a key")?)
        } else {
            PatternKey::Value(self.value()?)
        }))
    }

    /// `( step+ )`
    fn step_block(&mut self, after: &str) -> ParseResult<Vec<Located<PatternStep>>> {
        let open = self.cur.expect(TokenKind::LParen, format_args!("`(` and the steps to repeat after {after}"))?.span;
        self.nested(open, |p| {
            let steps = p.pattern_steps()?;
            if steps.is_empty() {
                return Err(p.expected("a step to repeat"));
            }
            match p.cur.peek().kind {
                TokenKind::RParen => {
                    p.cur.bump();
                    Ok(steps)
                }
                TokenKind::Eof => Err(p.cur.unclosed(open).into()),
                _ => Err(p.expected("a step or `)`")),
            }
        })
    }

    fn repetitions(&mut self, after: &str) -> ParseResult<u32> {
        let tok = self.cur.peek();
        match *tok.kind {
            TokenKind::Int(n) if (0..=MAX_REPEAT as i64).contains(&n) => {
                self.cur.bump();
                Ok(n as u32)
            }
            TokenKind::Int(n) => Err(self.error(tok.span, rule::repetitions(n, after != "`max`"))),
            _ => Err(self.expected(format_args!("a number of repetitions after {after}"))),
        }
    }

    // ---- conditions: `or` binds loosest, then `and`, then `not` ----

    fn condition(&mut self) -> ParseResult<Located<Condition>> {
        let start = self.cur.peek().span;
        let first = self.conjunction()?;
        if !self.cur.at_word("or") {
            return Ok(first);
        }
        let mut list = vec![first];
        while self.cur.eat_word("or") {
            list.push(self.conjunction()?);
        }
        Ok(Located { item: Condition::Or(list), span: start.to(self.cur.last()) })
    }

    fn conjunction(&mut self) -> ParseResult<Located<Condition>> {
        let start = self.cur.peek().span;
        let first = self.unary()?;
        if !self.cur.at_word("and") {
            return Ok(first);
        }
        let mut list = vec![first];
        while self.cur.eat_word("and") {
            list.push(self.unary()?);
        }
        Ok(Located { item: Condition::And(list), span: start.to(self.cur.last()) })
    }

    fn unary(&mut self) -> ParseResult<Located<Condition>> {
        let start = self.cur.peek().span;
        if self.cur.eat_word("not") {
            let inner = self.nested(start, |p| p.unary())?;
            return Ok(Located { item: Condition::Not(Box::new(inner)), span: start.to(self.cur.last()) });
        }
        self.atom()
    }

    fn atom(&mut self) -> ParseResult<Located<Condition>> {
        let start = self.cur.peek().span;
        let item = match self.cur.peek().kind {
            TokenKind::LParen => {
                let open = self.cur.bump().span;
                let inner = self.nested(open, |p| p.condition())?;
                match self.cur.peek().kind {
                    TokenKind::RParen => {
                        self.cur.bump();
                    }
                    TokenKind::Eof => return Err(self.cur.unclosed(open).into()),
                    _ => return Err(self.expected("`and`, `or` or `)`")),
                }
                return Ok(Located { item: inner.item, span: start.to(self.cur.last()) });
            }
            TokenKind::Word(w) if w == "exists" => {
                self.cur.bump();
                let open = self.cur.expect(TokenKind::LParen, "`(` and a sub-pattern after `exists`")?.span;
                let clauses = self.nested(open, |p| p.clauses())?;
                if clauses.is_empty() {
                    return Err(self.expected("a binding (`name in …`) or `where` in `exists ( … )`"));
                }
                match self.cur.peek().kind {
                    TokenKind::RParen => {
                        self.cur.bump();
                    }
                    TokenKind::Eof => return Err(self.cur.unclosed(open).into()),
                    _ => return Err(self.expected("a binding (`name in …`), `where` or `)`")),
                }
                Condition::Exists(clauses)
            }
            k if is_variable(k) => {
                let var = self.variable("a variable")?;
                let path = self.pattern_steps()?;
                if let Some((kind, property)) = self.leaf()? {
                    let left = Term::Property { var, path, kind, property };
                    self.comparison(Located { item: left, span: start.to(self.cur.last()) })?
                } else {
                    let negate = match self.cur.peek().kind {
                        TokenKind::EqEq => false,
                        TokenKind::Ne => true,
                        _ => {
                            return Ok(Located {
                                item: Condition::Path { var, path, target: None },
                                span: start.to(self.cur.last()),
                            })
                        }
                    };
                    self.cur.bump();
                    let target = self.variable("a variable after `==` / `!=` (nodes compare with nodes; compare values with `var kind : 'property'`)")?;
                    let path = Condition::Path { var, path, target: Some(target) };
                    if negate {
                        Condition::Not(Box::new(Located { item: path, span: start.to(self.cur.last()) }))
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
        Ok(Located { item, span: start.to(self.cur.last()) })
    }

    /// After the left term: `op term`, `( [ 'p' ] * )` or `in ( 'S' … )`.
    fn comparison(&mut self, left: Located<Term>) -> ParseResult<Condition> {
        if self.cur.at_word("in") {
            let crate::ast::Filter::In(states) = self.in_filter()? else { unreachable!("in_filter gives In") };
            return Ok(Condition::In { term: left, states });
        }
        let op = match self.cur.peek().kind {
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
        self.cur.bump();
        let right = self.term()?;
        Ok(Condition::Compare { left, op, right })
    }

    /// `var steps kind : 'property'`, `var`, a value, or a state `'Name'`.
    fn term(&mut self) -> ParseResult<Located<Term>> {
        let start = self.cur.peek().span;
        let item = self.bare_term()?;
        Ok(Located { item, span: start.to(self.cur.last()) })
    }

    fn bare_term(&mut self) -> ParseResult<Term> {
        match self.cur.peek().kind {
            k if is_variable(k) => {
                let var = self.variable("a variable")?;
                let path = self.pattern_steps()?;
                if let Some((kind, property)) = self.leaf()? {
                    Ok(Term::Property { var, path, kind, property })
                } else if path.is_empty() {
                    Ok(Term::Var(var))
                } else {
                    Err(self.expected(format_args!(
                        "a property kind (`number`, `text`, `stategroup`, `reference`) after the steps from {var}"
                    )))
                }
            }
            TokenKind::Name(n) => {
                let n = n.clone();
                self.cur.bump();
                Ok(Term::Value(Value::Text(n)))
            }
            _ => Ok(Term::Value(self.value()?)),
        }
    }

    // ---- columns ----

    fn column(&mut self) -> ParseResult<Located<Column>> {
        let start = self.cur.peek().span;
        let alias = self.name("a column name")?;
        self.cur.expect(TokenKind::Arrow, format_args!("`->` after column name '{alias}'"))?;
        let aggregate = match self.cur.peek().kind {
            TokenKind::Word(w) if (*self.cur.peek_at(1).kind == TokenKind::LParen) => match w.as_str() {
                "count" | "sum" | "min" | "max" | "avg" => Some(w.clone()),
                _ => None,
            },
            _ => None,
        };
        let expr = if let Some(agg) = aggregate {
            self.cur.bump();
            let open = self.cur.bump().span; // `(`
            let expr = self.nested(open, |p| {
                if agg == "count" {
                    let distinct = p.cur.eat_word("distinct");
                    let term = if p.cur.at(&TokenKind::RParen) && !distinct { None } else { Some(p.term()?) };
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
            match self.cur.peek().kind {
                TokenKind::RParen => {
                    self.cur.bump();
                }
                TokenKind::Eof => return Err(self.cur.unclosed(open).into()),
                _ => return Err(self.expected(format_args!("`)` to end `{agg} ( … )`"))),
            }
            expr
        } else if self.cur.eat_word("shortest") {
            let from = self.variable("the variable a shortest path starts from")?;
            let steps = self.step_block("`shortest` and its start")?;
            if !self.cur.eat_word("to") {
                return Err(self.expected("`to` and the variable the shortest path ends at"));
            }
            let to = self.variable("the variable a shortest path ends at")?;
            if !self.cur.eat_word("max") {
                return Err(self.expected("`max` and the longest path to look for"));
            }
            let max = self.repetitions("`max`")?;
            ColumnExpr::Shortest { from, steps, to, max }
        } else {
            ColumnExpr::Term(self.term()?)
        };
        Ok(Located { item: Column { alias, expr }, span: start.to(self.cur.last()) })
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
