//! The text form of instructions, turned into [`crate::ast`] values; and back to canonical
//! text with [`to_text`]. (The JSON form is the protocol's: `espalier_protocol::instruction`.)
//!
//! The grammar is documented in `docs/instructions.md`. The parser is a hand-written recursive
//! descent over the shared Alan tokens, read with the schema crate's [`Cursor`] like the schema
//! and benchmark languages; path steps are in `parse/step.rs`. Nesting is bounded by
//! [`MAX_DEPTH`] so no input can exhaust the stack, and every loop consumes a token per round.

use espalier_schema::cursor::Cursor;
use espalier_schema::lexer::{tokenize, Token, TokenKind};
use espalier_schema::{Diagnostic, Span};

use crate::ast::{Comparison, Filter, Instruction, Item, Located, Op, Path, Projection, Query, Start, Value};
use crate::validate::{rule, validate, Invalid};
use step::StepKind;

mod pattern;
mod step;
// The bounds and keywords are rules of the language, kept with the other rules.
pub use crate::print::to_text;
pub use crate::validate::{MAX_DEPTH, MAX_REPEAT, RESERVED};

/// Words that a language built on this one adds as values, such as the benchmark files'
/// `index` and `random` (`crates/bench`, `docs/benchmark-language.md`). The instruction
/// language itself has none: what such a word stands for reaches the AST as an ordinary
/// value (the benchmark runner uses `$parameters`).
pub trait ValueWords {
    /// At a value whose first token, `tokens[0]`, is a word: the value and how many tokens it
    /// took (at least one), `Ok(None)` if the word is not one of these, or the index of the
    /// offending token and the message.
    fn value(&self, tokens: &[Token]) -> Result<Option<(Value, usize)>, (usize, String)>;

    /// The words, for "expected a value" messages: e.g. "`index` or `random`".
    fn describe(&self) -> &str;
}

/// What the parser accepts beyond the client language.
#[derive(Clone, Copy, Default)]
pub struct ParseOptions<'w> {
    /// Extra value words (none for instructions sent by clients).
    pub values: Option<&'w dyn ValueWords>,
}

impl ParseOptions<'static> {
    /// Instructions sent by clients: the instruction language only.
    pub const CLIENT: ParseOptions<'static> = ParseOptions { values: None };
}

impl std::fmt::Debug for ParseOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParseOptions").field("values", &self.values.map(|v| v.describe())).finish()
    }
}

/// A syntax error; `Display` gives `line:column: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub Diagnostic);

/// Parses exactly one instruction (a `transaction ( … )` counts as one).
pub fn parse_instruction(source: &str, opts: ParseOptions) -> Result<Instruction, ParseError> {
    let tokens = tokenize(source).map_err(ParseError)?;
    let mut parser = Parser::new(source, &tokens, opts);
    let instr = parser.instruction()?;
    let next = parser.cur.peek();
    if *next.kind != TokenKind::Eof {
        let what = if *next.kind == TokenKind::Comma {
            "expected one instruction, found `,` after it".to_string()
        } else {
            format!("expected the end of the instruction, found {}", next.kind.describe())
        };
        return Err(parser.error(next.span, what));
    }
    validate(&instr.item).map_err(|e| invalid_at(source, e))?;
    Ok(instr.item)
}

/// Parses a comma- or line-break-separated list of instructions (possibly empty).
pub fn parse_instructions(source: &str, opts: ParseOptions) -> Result<Vec<Located<Instruction>>, ParseError> {
    let tokens = tokenize(source).map_err(ParseError)?;
    let mut parser = Parser::new(source, &tokens, opts);
    let list = parser.instruction_list()?;
    let next = parser.cur.peek();
    if *next.kind != TokenKind::Eof {
        return Err(parser.error(next.span, format!("unexpected {}", next.kind.describe())));
    }
    for instr in &list {
        validate(&instr.item).map_err(|e| invalid_at(source, e))?;
    }
    Ok(list)
}

/// A broken rule of [`crate::validate`] as a syntax error in `source`.
pub(crate) fn invalid_at(source: &str, e: Invalid) -> ParseError {
    ParseError(Diagnostic::new(source, e.span, e.message))
}

/// A token-level parser, public so the benchmark language can hand over mid-stream: build it
/// over the whole token list, [`Parser::set_pos`] to the instruction, call
/// [`Parser::instruction`] or [`Parser::instruction_list`], then continue at [`Parser::pos`].
pub struct Parser<'a> {
    /// The tokens (a slice need not end with `Eof`) and where the parser is in them.
    cur: Cursor<'a>,
    opts: ParseOptions<'a>,
    depth: usize,
}

type ParseResult<T> = std::result::Result<T, ParseError>;

impl From<Diagnostic> for ParseError {
    fn from(d: Diagnostic) -> ParseError {
        ParseError(d)
    }
}

const STEP_EXPECTED: &str = "a step (`.`, `%`, `+`, `?`, `>`)";

impl<'a> Parser<'a> {
    /// A parser over `tokens`, lexed from `source`, starting at the first token.
    pub fn new(source: &'a str, tokens: &'a [Token], opts: ParseOptions<'a>) -> Parser<'a> {
        Parser { cur: Cursor::new(source, tokens), opts, depth: 0 }
    }

    /// Index of the next unread token.
    pub fn pos(&self) -> usize {
        self.cur.pos()
    }

    /// Continues at token index `pos` (clamped to the token list).
    pub fn set_pos(&mut self, pos: usize) {
        self.cur.set_pos(pos);
    }

    /// One instruction; stops before whatever follows it.
    pub fn instruction(&mut self) -> Result<Located<Instruction>, ParseError> {
        let start = self.cur.peek().span;
        let keyword = match self.cur.peek().kind {
            TokenKind::Word(w) => w.as_str(),
            _ => return Err(self.expected_instruction()),
        };
        let item = match keyword {
            "update" => {
                self.cur.bump();
                let path = self.node_path()?;
                if !self.cur.at(&TokenKind::LParen) {
                    return Err(self.expected(format_args!("{STEP_EXPECTED} or `(`")));
                }
                let items = self.block()?;
                Instruction::Update { path, items }
            }
            "collection" if self.cur.peek_at(1).kind.is_word("match") => Instruction::Match(self.pattern()?),
            "collection" => Instruction::Query(self.query()?),
            "explain" => {
                let pattern_follows =
                    self.cur.peek_at(1).kind.is_word("collection") && self.cur.peek_at(2).kind.is_word("match");
                self.cur.bump();
                if !pattern_follows {
                    return Err(self.expected("`collection match …` after `explain` (it explains pattern queries)"));
                }
                let mut p = self.pattern()?;
                p.explain = true;
                Instruction::Match(p)
            }
            "get" => {
                self.cur.bump();
                Instruction::Get { path: self.node_path()? }
            }
            "command" => self.command()?,
            "transaction" => self.transaction()?,
            _ => return Err(self.expected_instruction()),
        };
        Ok(Located { item, span: start.to(self.cur.last()) })
    }

    /// Instructions separated by `,` or line breaks, up to (not including) `)` or the end.
    pub fn instruction_list(&mut self) -> Result<Vec<Located<Instruction>>, ParseError> {
        let mut list = Vec::new();
        while !self.at_list_end() {
            list.push(self.instruction()?);
            let next = self.cur.peek();
            match next.kind {
                TokenKind::Comma => {
                    self.cur.bump();
                    if self.at_list_end() {
                        return Err(self.expected("an instruction after `,`"));
                    }
                }
                TokenKind::Eof | TokenKind::RParen => break,
                _ => {
                    let gap = self.cur.source().get(self.cur.last().end as usize..next.span.start as usize);
                    if !gap.is_some_and(|g| g.contains('\n')) {
                        return Err(self.expected("`,` or a line break between instructions"));
                    }
                }
            }
        }
        Ok(list)
    }

    // ---- token helpers ----

    fn at_list_end(&self) -> bool {
        matches!(self.cur.peek().kind, TokenKind::Eof | TokenKind::RParen)
    }

    fn error(&self, span: Span, message: impl Into<String>) -> ParseError {
        ParseError(self.cur.error(span, message))
    }

    /// "expected {what}, found {next token}" at the next token.
    fn expected(&self, what: impl std::fmt::Display) -> ParseError {
        ParseError(self.cur.expected(what))
    }

    fn expected_instruction(&self) -> ParseError {
        self.expected("an instruction (`update`, `collection`, `get`, `command` or `transaction`)")
    }

    /// A `'quoted'` name; `what` says which, e.g. "a dictionary name after `.`".
    fn name(&mut self, what: impl std::fmt::Display) -> ParseResult<String> {
        Ok(self.cur.expect_name(what)?.0)
    }

    /// Runs `f` one nesting level deeper; `open` is the token that opened the level.
    fn nested<T>(&mut self, open: Span, f: impl FnOnce(&mut Self) -> ParseResult<T>) -> ParseResult<T> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(open, rule::too_deep()));
        }
        self.depth += 1;
        let out = f(self);
        self.depth -= 1;
        out
    }

    // ---- values ----

    fn value(&mut self) -> ParseResult<Value> {
        let tok = self.cur.peek();
        let value = match tok.kind {
            TokenKind::Str(s) => Value::Text(s.clone()),
            TokenKind::Int(i) => Value::Int(*i),
            TokenKind::Param(p) => Value::Param(p.clone()),
            TokenKind::LBracket => return self.compound(),
            TokenKind::Word(w) => {
                if let Some(v) = self.word_value()? {
                    return Ok(v);
                }
                if w == "index" || w == "random" {
                    return Err(self.error(tok.span, rule::bench_value(w)));
                }
                return Err(self.expected(self.what_value()));
            }
            TokenKind::Name(n) => {
                return Err(self.error(
                    tok.span,
                    format!(
                        "expected a value, found name '{n}' (texts and keys are written in \
                         double quotes: \"{n}\")"
                    ),
                ))
            }
            _ => return Err(self.expected(self.what_value())),
        };
        self.cur.bump();
        Ok(value)
    }

    /// "a value (…)" with the words of [`ParseOptions::values`].
    fn what_value(&self) -> String {
        match self.opts.values {
            Some(words) => format!("a value (a \"string\", a number, a $parameter, `[ … ]`, {})", words.describe()),
            None => "a value (a \"string\", a number, a $parameter or `[ … ]`)".to_string(),
        }
    }

    /// The value of an extra word ([`ParseOptions::values`]) at the next token, if it is one.
    fn word_value(&mut self) -> ParseResult<Option<Value>> {
        let Some(words) = self.opts.values else { return Ok(None) };
        let rest = self.cur.rest();
        match words.value(rest) {
            Ok(Some((value, taken))) => {
                for _ in 0..taken.max(1) {
                    self.cur.bump();
                }
                Ok(Some(value))
            }
            Ok(None) => Ok(None),
            Err((at, message)) => {
                let span = rest.get(at).map_or(self.cur.peek().span, |t| t.span);
                Err(self.error(span, message))
            }
        }
    }

    /// `[ value , value … ]`
    fn compound(&mut self) -> ParseResult<Value> {
        let open = self.cur.bump().span;
        self.nested(open, |p| {
            let mut parts = vec![p.value()?];
            loop {
                match p.cur.peek().kind {
                    TokenKind::Comma => {
                        p.cur.bump();
                        parts.push(p.value()?);
                    }
                    TokenKind::RBracket => {
                        p.cur.bump();
                        return Ok(Value::Compound(parts));
                    }
                    TokenKind::Eof => return Err(p.cur.unclosed(open).into()),
                    _ => return Err(p.expected("`,` or `]` in a compound key")),
                }
            }
        })
    }

    // ---- update items ----

    /// `( item* )`
    fn block(&mut self) -> ParseResult<Vec<Located<Item>>> {
        let open = self.cur.expect(TokenKind::LParen, "`(`")?.span;
        self.nested(open, |p| {
            let mut items = Vec::new();
            loop {
                match p.cur.peek().kind {
                    TokenKind::RParen => {
                        p.cur.bump();
                        return Ok(items);
                    }
                    TokenKind::Name(_) => items.push(p.item()?),
                    TokenKind::Eof => return Err(p.cur.unclosed(open).into()),
                    _ => return Err(p.expected("a property name ('name' -> …) or `)`")),
                }
            }
        })
    }

    /// `'name' -> op`
    fn item(&mut self) -> ParseResult<Located<Item>> {
        let start = self.cur.peek().span;
        let name = self.name("a property name")?;
        self.cur.expect(TokenKind::Arrow, format_args!("`->` after property name '{name}'"))?;
        let op = self.op(&name)?;
        Ok(Located { item: Item { name, op }, span: start.to(self.cur.last()) })
    }

    fn op(&mut self, name: &str) -> ParseResult<Op> {
        let word = match self.cur.peek().kind {
            TokenKind::LParen => return Ok(Op::Group(self.block()?)),
            TokenKind::Word(w) => w.as_str(),
            _ => return Err(self.expected_op(name)),
        };
        match word {
            "number" | "integer" => {
                self.cur.bump();
                match self.cur.peek().kind {
                    TokenKind::Plus => {
                        self.cur.bump();
                        match self.cur.peek().kind {
                            TokenKind::Int(_) | TokenKind::Param(_) => Ok(Op::AddNumber(self.value()?)),
                            _ => Err(self.expected("a number or $parameter after `+`")),
                        }
                    }
                    TokenKind::Minus => {
                        self.cur.bump();
                        let tok = self.cur.peek();
                        match tok.kind {
                            TokenKind::Int(n) => {
                                let neg = n
                                    .checked_neg()
                                    .ok_or_else(|| self.error(tok.span, format!("cannot negate {n}")))?;
                                self.cur.bump();
                                Ok(Op::AddNumber(Value::Int(neg)))
                            }
                            _ => Err(self.expected("a number after `-`")),
                        }
                    }
                    _ => Ok(Op::SetNumber(self.value()?)),
                }
            }
            "text" => {
                self.cur.bump();
                Ok(Op::SetText(self.value()?))
            }
            "reference" => {
                self.cur.bump();
                Ok(Op::SetReference(self.value()?))
            }
            "group" => {
                self.cur.bump();
                if !self.cur.at(&TokenKind::LParen) {
                    return Err(self.expected(format_args!("`(` after `group` for '{name}'")));
                }
                Ok(Op::Group(self.block()?))
            }
            "dictionary" | "matrix" => {
                self.cur.bump();
                let key = self.value()?;
                if self.cur.at(&TokenKind::LParen) {
                    Ok(Op::AddEntry { key, items: self.block()? })
                } else if self.cur.eat_word("remove") {
                    Ok(Op::RemoveEntry { key })
                } else if self.cur.eat_word("update") {
                    if !self.cur.at(&TokenKind::LParen) {
                        return Err(self.expected("`(` after `update`"));
                    }
                    Ok(Op::UpdateEntry { key, items: self.block()? })
                } else {
                    Err(self.expected(format_args!("`(`, `remove` or `update` after the key of {word} '{name}'")))
                }
            }
            "stategroup" => {
                self.cur.bump();
                self.stategroup_op(name)
            }
            _ => Err(self.expected_op(name)),
        }
    }

    fn expected_op(&self, name: &str) -> ParseError {
        self.expected(format_args!(
            "an operation for '{name}' (`number`, `integer`, `text`, `reference`, `group`, `(`, \
             `dictionary`, `matrix` or `stategroup`)"
        ))
    }

    /// After `stategroup`: `'S' set to ( … )`, `set to 'S' ( … )`, `random set to ( … )`, or
    /// `'S' ( … )`.
    fn stategroup_op(&mut self, name: &str) -> ParseResult<Op> {
        if self.cur.eat_word("set") {
            self.expect_to()?;
            let state = self.state_value(name)?;
            return Ok(Op::SwitchState { state, items: self.state_block()? });
        }
        let state = self.state_value(name)?;
        if self.cur.eat_word("set") {
            self.expect_to()?;
            return Ok(Op::SwitchState { state, items: self.state_block()? });
        }
        match state {
            Value::Text(state) if self.cur.at(&TokenKind::LParen) => {
                Ok(Op::UpdateState { state, items: self.block()? })
            }
            Value::Text(_) => Err(self.expected("`set to` or `(` after the state")),
            _ => Err(self.expected("`set to` after the state")),
        }
    }

    fn expect_to(&mut self) -> ParseResult<()> {
        if self.cur.eat_word("to") {
            Ok(())
        } else {
            Err(self.expected("`to` after `set`"))
        }
    }

    fn state_block(&mut self) -> ParseResult<Vec<Located<Item>>> {
        if !self.cur.at(&TokenKind::LParen) {
            return Err(self.expected("`(` with the state's properties (may be empty: `( )`)"));
        }
        self.block()
    }

    /// A state: a `'Name'`, or a value (a `$parameter` in commands; an extra word of
    /// [`ParseOptions::values`], such as a benchmark's `random`).
    fn state_value(&mut self, stategroup: &str) -> ParseResult<Value> {
        match self.cur.peek().kind {
            TokenKind::Name(n) => {
                let n = n.clone();
                self.cur.bump();
                Ok(Value::Text(n))
            }
            TokenKind::Word(w) => {
                let w = w.clone();
                if let Some(v) = self.word_value()? {
                    return Ok(v);
                }
                if w == "index" || w == "random" {
                    let at = self.cur.peek().span;
                    return Err(self.error(at, rule::bench_value(&w)));
                }
                Err(self.expected(format_args!("a state name for '{stategroup}'")))
            }
            TokenKind::Str(_) | TokenKind::Param(_) | TokenKind::Int(_) | TokenKind::LBracket => self.value(),
            _ => Err(self.expected(format_args!("a state name for '{stategroup}'"))),
        }
    }

    // ---- queries ----

    fn query(&mut self) -> ParseResult<Query> {
        self.cur.bump(); // `collection`
        let path = self.node_path()?;
        if !self.cur.eat_word("select") {
            return Err(self.expected(format_args!("{STEP_EXPECTED} or `select`")));
        }
        let mut select = Vec::new();
        while let Some(step) = self.step(StepKind::Collection)? {
            select.push(step);
        }
        let start = self.start()?;
        let mut projections = Vec::new();
        while matches!(self.cur.peek().kind, TokenKind::Name(_)) {
            projections.push(self.projection()?);
        }
        let limit = if self.cur.eat_word("limit") { Some(self.count("limit")?) } else { None };
        let offset = if self.cur.eat_word("offset") { Some(self.count("offset")?) } else { None };
        Ok(Query { path, select, start, projections, limit, offset })
    }

    /// `[from value | after value]` after a collection path.
    fn start(&mut self) -> ParseResult<Option<Start>> {
        let exclusive = if self.cur.eat_word("from") {
            false
        } else if self.cur.eat_word("after") {
            true
        } else {
            return Ok(None);
        };
        let at = self.cur.peek().span;
        let key = Located { item: self.value()?, span: at };
        Ok(Some(if exclusive { Start::After(key) } else { Start::From(key) }))
    }

    fn count(&mut self, what: &str) -> ParseResult<u64> {
        let tok = self.cur.peek();
        match *tok.kind {
            TokenKind::Int(n) => {
                let n = u64::try_from(n).map_err(|_| self.error(tok.span, format!("`{what}` cannot be negative")))?;
                self.cur.bump();
                Ok(n)
            }
            _ => Err(self.expected(format_args!("a number after `{what}`"))),
        }
    }

    /// `'alias' -> steps kind : property [filter]`
    fn projection(&mut self) -> ParseResult<Located<Projection>> {
        let start = self.cur.peek().span;
        let alias = self.name("a projection name")?;
        self.cur.expect(TokenKind::Arrow, format_args!("`->` after projection name '{alias}'"))?;
        let mut path = Vec::new();
        while let Some(step) = self.step(StepKind::Projection)? {
            path.push(step);
        }
        let Some((kind, property)) = self.leaf()? else {
            return Err(self.expected(format_args!(
                "a step (`?`, `+`, `>`) or a property kind (`number`, `text`, `stategroup`, \
                 `reference`) in projection '{alias}'"
            )));
        };
        let filter = self.filter()?;
        Ok(Located { item: Projection { alias, path, kind, property, filter }, span: start.to(self.cur.last()) })
    }

    fn filter(&mut self) -> ParseResult<Option<Filter>> {
        if self.cur.at_word("in") {
            return self.in_filter().map(Some);
        }
        let op = match self.cur.peek().kind {
            TokenKind::EqEq => Comparison::Eq,
            TokenKind::Ne => Comparison::Ne,
            TokenKind::Lt => Comparison::Lt,
            TokenKind::Le => Comparison::Le,
            TokenKind::Gt => Comparison::Gt,
            TokenKind::Ge => Comparison::Ge,
            TokenKind::LParen => return self.prefix_filter().map(Some),
            _ => return Ok(None),
        };
        self.cur.bump();
        // States are compared by name: `== 'Yes'`.
        let value = match self.cur.peek().kind {
            TokenKind::Name(n) => {
                let n = n.clone();
                self.cur.bump();
                Value::Text(n)
            }
            _ => self.value()?,
        };
        Ok(Some(Filter::Compare { op, value }))
    }

    /// `in ( 'S1' 'S2' … )`
    fn in_filter(&mut self) -> ParseResult<Filter> {
        self.cur.bump(); // `in`
        let open = self.cur.expect(TokenKind::LParen, "`(` and state names after `in`")?.span;
        let mut states = Vec::new();
        loop {
            match self.cur.peek().kind {
                TokenKind::Name(n) => {
                    states.push(n.clone());
                    self.cur.bump();
                }
                TokenKind::RParen if !states.is_empty() => {
                    self.cur.bump();
                    return Ok(Filter::In(states));
                }
                TokenKind::Eof => return Err(self.cur.unclosed(open).into()),
                _ => {
                    let what = if states.is_empty() { "a state name" } else { "a state name or `)`" };
                    return Err(self.expected(what));
                }
            }
        }
    }

    /// `( [ 'prefix' ] * )`
    fn prefix_filter(&mut self) -> ParseResult<Filter> {
        let open = self.cur.bump().span;
        self.cur.expect(TokenKind::LBracket, "`[` in a prefix filter `( [ 'prefix' ] * )`")?;
        let value = match self.cur.peek().kind {
            TokenKind::Name(s) | TokenKind::Str(s) => Value::Text(s.clone()),
            TokenKind::Param(p) => Value::Param(p.clone()),
            _ => return Err(self.expected("a prefix ('text' or \"text\") after `[`")),
        };
        self.cur.bump();
        self.cur.expect(TokenKind::RBracket, "`]` after the prefix")?;
        self.cur.expect(TokenKind::Star, "`*` after `]` in a prefix filter")?;
        if self.cur.at(&TokenKind::Eof) {
            return Err(self.cur.unclosed(open).into());
        }
        self.cur.expect(TokenKind::RParen, "`)` to end the prefix filter")?;
        Ok(Filter::Prefix(value))
    }

    // ---- command and transaction ----

    fn command(&mut self) -> ParseResult<Instruction> {
        self.cur.bump(); // `command`
        let name = self.name("the command's 'name' after `command`")?;
        let open = self.cur.expect(TokenKind::LParen, "`(` with the command's arguments")?.span;
        let mut args = Vec::new();
        loop {
            match self.cur.peek().kind {
                TokenKind::RParen => {
                    self.cur.bump();
                    return Ok(Instruction::Command { name, args });
                }
                TokenKind::Name(arg) => {
                    let arg = arg.clone();
                    self.cur.bump();
                    self.cur.expect(TokenKind::Arrow, format_args!("`->` after argument name '{arg}'"))?;
                    args.push((arg, self.value()?));
                }
                TokenKind::Eof => return Err(self.cur.unclosed(open).into()),
                _ => return Err(self.expected("an argument ('name' -> value) or `)`")),
            }
        }
    }

    fn transaction(&mut self) -> ParseResult<Instruction> {
        self.cur.bump(); // `transaction`
        let open = self.cur.expect(TokenKind::LParen, "`(` after `transaction`")?.span;
        self.nested(open, |p| {
            let list = p.instruction_list()?;
            match p.cur.peek().kind {
                TokenKind::RParen if list.is_empty() => {
                    let at = p.cur.peek().span;
                    Err(p.error(at, rule::EMPTY_TRANSACTION))
                }
                TokenKind::RParen => {
                    p.cur.bump();
                    Ok(Instruction::Transaction(list))
                }
                _ => Err(p.cur.unclosed(open).into()),
            }
        })
    }
}

/// Sets every span in `instr` to the empty span, so parses of different texts compare equal.
pub fn clear_spans(instr: &mut Instruction) {
    fn path(p: &mut Path) {
        p.iter_mut().for_each(|s| s.span = Span::default());
    }
    fn items(list: &mut [Located<Item>]) {
        for i in list {
            i.span = Span::default();
            match &mut i.item.op {
                Op::Group(is)
                | Op::UpdateState { items: is, .. }
                | Op::AddEntry { items: is, .. }
                | Op::UpdateEntry { items: is, .. }
                | Op::SwitchState { items: is, .. } => items(is),
                Op::SetNumber(_) | Op::AddNumber(_) | Op::SetText(_) | Op::SetReference(_) | Op::RemoveEntry { .. } => {
                }
            }
        }
    }
    match instr {
        Instruction::Update { path: p, items: is } => {
            path(p);
            items(is);
        }
        Instruction::Query(q) => {
            path(&mut q.path);
            path(&mut q.select);
            if let Some(Start::From(k) | Start::After(k)) = &mut q.start {
                k.span = Span::default();
            }
            for pr in &mut q.projections {
                pr.span = Span::default();
                path(&mut pr.item.path);
            }
        }
        Instruction::Match(p) => pattern::clear_spans(p),
        Instruction::Get { path: p } => path(p),
        Instruction::Command { .. } => {}
        Instruction::Transaction(list) => {
            for i in list {
                i.span = Span::default();
                clear_spans(&mut i.item);
            }
        }
    }
}
