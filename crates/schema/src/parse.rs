//! Syntax: tokens → a small syntax tree, before any name is resolved.
//!
//! The parser recovers from the errors a person typically makes in one property (an unknown
//! or missing kind, a collection size copied from a benchmark, an up step after a down step)
//! and keeps going, so one run reports several of them; anything that breaks the structure
//! (a missing `->`, an unclosed `(`) stops it.

use std::fmt::Display;

use crate::cursor::{Cursor, TokenRef};
use crate::diagnostic::{Diagnostic, Span};
use crate::lexer::{Token, TokenKind};

/// Deepest nesting of node definitions `( … )` accepted; bounds the recursion of every pass.
pub const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone)]
pub struct SynFile {
    pub root: SynNode,
    pub commands: Vec<SynCommand>,
    pub indexes: Vec<SynIndex>,
}

/// `( property* )`
#[derive(Debug, Clone)]
pub struct SynNode {
    /// The `(`.
    pub open: Span,
    pub properties: Vec<SynProperty>,
}

#[derive(Debug, Clone)]
pub struct SynProperty {
    pub name: String,
    pub name_span: Span,
    /// The kind keyword.
    pub kind_span: Span,
    pub kind: SynKind,
}

#[derive(Debug, Clone)]
pub enum SynKind {
    Number,
    Text,
    Group(SynNode),
    Dictionary(SynNode),
    Matrix(SynPath, SynNode),
    Reference(SynPath),
    StateGroup(Vec<SynState>),
    /// `count ( step )`, `sum|min|max ( step ) 'value'`
    Aggregate {
        function: crate::model::Aggregate,
        step: SynOver,
        value: Option<(String, Span)>,
    },
    /// `condition ( 'number' op N )`
    Condition {
        number: (String, Span),
        op: crate::model::CompareOp,
        value: i64,
    },
}

/// The one step an aggregate goes over, as written.
#[derive(Debug, Clone)]
pub enum SynOver {
    /// `.` or `%` and the collection's name
    Collection(String, Span),
    /// `<` and the reference's name
    Referrers(String, Span),
}

#[derive(Debug, Clone)]
pub struct SynState {
    pub name: String,
    pub span: Span,
    pub node: SynNode,
}

/// `( up* down* )` as written; checked in `compile`.
#[derive(Debug, Clone)]
pub struct SynPath {
    /// From the `(` to the `)`.
    pub span: Span,
    pub up: Vec<SynUp>,
    pub down: Vec<SynDown>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpSymbol {
    Plus,
    Dot,
    Percent,
    Question,
    Star,
}

impl UpSymbol {
    pub fn text(self) -> &'static str {
        match self {
            UpSymbol::Plus => "+^",
            UpSymbol::Dot => ".^",
            UpSymbol::Percent => "%^",
            UpSymbol::Question => "?^",
            UpSymbol::Star => "*^",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct SynUp {
    pub symbol: UpSymbol,
    /// Covers the symbol and the `^`.
    pub span: Span,
}

#[derive(Debug, Clone)]
pub enum SynDown {
    /// `+ 'g'`; `span` is the name's.
    Group { name: String, span: Span },
    /// `. 'd'`
    Dictionary { name: String, span: Span },
    /// `% 'm'`; `symbol` is the `%`, rejected in reference paths.
    Matrix { name: String, symbol: Span, span: Span },
    /// `? 'sg' * 's'`
    State { stategroup: String, span: Span, state: String, state_span: Span },
}

impl SynDown {
    /// The span of the (first) name in the step.
    pub fn name_span(&self) -> Span {
        match self {
            SynDown::Group { span, .. }
            | SynDown::Dictionary { span, .. }
            | SynDown::Matrix { span, .. }
            | SynDown::State { span, .. } => *span,
        }
    }
}

#[derive(Debug, Clone)]
pub struct SynCommand {
    pub name: String,
    pub span: Span,
    pub params: Vec<(String, Span, crate::model::ParamKind)>,
    pub body: String,
    pub body_span: Span,
}

#[derive(Debug, Clone)]
pub struct SynIndex {
    pub name: String,
    pub span: Span,
    pub path: SynPath,
    pub property: String,
    pub property_span: Span,
    pub kind: crate::model::IndexKind,
    pub unique: Option<Span>,
}

/// A structural error was recorded; parsing cannot go on.
struct Stop;

type PResult<T> = Result<T, Stop>;

struct Parser<'a> {
    cur: Cursor<'a>,
    errors: Vec<Diagnostic>,
}

/// Parses a token stream (ending with `Eof`, as `lexer::tokenize` returns it).
pub fn parse(source: &str, tokens: &[Token]) -> Result<SynFile, Vec<Diagnostic>> {
    let mut p = Parser { cur: Cursor::new(source, tokens), errors: Vec::new() };
    let file = p.file();
    match file {
        Ok(file) if p.errors.is_empty() => Ok(file),
        _ => {
            debug_assert!(!p.errors.is_empty(), "parse stopped without an error");
            Err(p.errors)
        }
    }
}

const KINDS: &str =
    "number, text, group, dictionary, matrix, reference, stategroup, or derived count, sum, min, max or condition";
const STEPS: &str = "a path step (`+^`, `.^`, `%^`, `?^`, `+ 'Group'`, `. 'Dictionary'`, `? 'Stategroup' * 'State'`)";

impl<'a> Parser<'a> {
    fn error(&mut self, span: Span, message: impl Into<String>) {
        crate::diagnostic::push_error(&mut self.errors, self.cur.source(), span, message.into());
    }

    fn stop<T>(&mut self, span: Span, message: impl Into<String>) -> PResult<T> {
        self.error(span, message);
        Err(Stop)
    }

    /// Records a diagnostic of the cursor's and stops.
    fn fail<T>(&mut self, d: Diagnostic) -> PResult<T> {
        self.stop(d.span, d.message)
    }

    /// Where `span` starts, as `line:column`, for messages that mention another place.
    fn at(&self, span: Span) -> String {
        // Past the cap the message is dropped; skip the O(source) line count.
        if self.errors.len() >= crate::diagnostic::MAX_ERRORS {
            return String::new();
        }
        let (l, c) = crate::diagnostic::line_column(self.cur.source(), span.start as usize);
        format!("{l}:{c}")
    }

    fn unclosed<T>(&mut self, open: Span, what: &str) -> PResult<T> {
        self.stop(
            open,
            format!("this `(`, which opens {what}, is never closed; expected `)` before the end of the input"),
        )
    }

    fn expect(&mut self, kind: TokenKind, what: impl Display) -> PResult<TokenRef<'a>> {
        let found = self.cur.expect(kind, what);
        found.or_else(|d| self.fail(d))
    }

    /// A `'quoted'` name; an empty one is reported, and parsing goes on.
    fn expect_name(&mut self, what: impl Display) -> PResult<(String, Span)> {
        let (name, span) = match self.cur.expect_name(format_args!("{what} in quotes, like 'Name'")) {
            Ok(found) => found,
            Err(d) => return self.fail(d),
        };
        if name.is_empty() {
            self.error(span, format!("{what} cannot be empty"));
        }
        Ok((name, span))
    }

    fn file(&mut self) -> PResult<SynFile> {
        let t = self.cur.peek();
        if !t.kind.is_word("root") {
            return self.stop(t.span, format!("expected `root` to start the schema, found {}", t.kind.describe()));
        }
        self.cur.bump();
        let root = self.node(0, "the root node")?;
        let mut commands = Vec::new();
        let mut indexes = Vec::new();
        loop {
            let t = self.cur.peek();
            match t.kind {
                TokenKind::Eof => break,
                TokenKind::Word(w) if w == "command" => commands.push(self.command()?),
                TokenKind::Word(w) if w == "index" => indexes.push(self.index()?),
                other => {
                    return self.stop(
                        t.span,
                        format!(
                            "unexpected {} after the root node; expected `command`, `index` or the end of the input",
                            other.describe()
                        ),
                    )
                }
            }
        }
        Ok(SynFile { root, commands, indexes })
    }

    /// `( property* )`; `depth` counts the node definitions around this one.
    fn node(&mut self, depth: usize, what: &str) -> PResult<SynNode> {
        let open = self.expect(TokenKind::LParen, format_args!("`(` to open {what}"))?.span;
        if depth >= MAX_DEPTH {
            return self.stop(open, format!("node definitions are nested more than {MAX_DEPTH} levels deep"));
        }
        let mut properties = Vec::new();
        loop {
            let t = self.cur.peek();
            match t.kind {
                TokenKind::RParen => {
                    self.cur.bump();
                    return Ok(SynNode { open, properties });
                }
                TokenKind::Name(_) => {
                    if let Some(p) = self.property(depth)? {
                        properties.push(p);
                    }
                }
                TokenKind::Eof => return self.unclosed(open, what),
                other => {
                    return self.stop(
                        t.span,
                        format!(
                            "expected a property name like 'Name' or `)` closing the node opened at {}, found {}",
                            self.at(open),
                            other.describe()
                        ),
                    )
                }
            }
        }
    }

    /// `'name' -> kind`; `None` when the kind was wrong but parsing could go on.
    fn property(&mut self, depth: usize) -> PResult<Option<SynProperty>> {
        let (name, name_span) = self.expect_name("a property name")?;
        self.expect(TokenKind::Arrow, format_args!("`->` after the property name '{name}'"))?;
        let kt = self.cur.peek();
        let word = match kt.kind {
            TokenKind::Word(w) => w.as_str(),
            other => {
                self.error(
                    kt.span,
                    format!("expected a property kind ({KINDS}) for '{name}', found {}", other.describe()),
                );
                self.skip_garbage()?;
                return Ok(None);
            }
        };
        self.cur.bump();
        let what = format!("the node of '{name}'");
        let kind = match word {
            "number" => SynKind::Number,
            "text" => SynKind::Text,
            "group" => {
                self.no_size("group")?;
                SynKind::Group(self.node(depth + 1, &what)?)
            }
            "dictionary" => {
                self.no_size("dictionary")?;
                SynKind::Dictionary(self.node(depth + 1, &what)?)
            }
            "matrix" => {
                self.no_size("matrix")?;
                let path = self.path(&format!("the path of the matrix '{name}'"))?;
                SynKind::Matrix(path, self.node(depth + 1, &what)?)
            }
            "reference" => SynKind::Reference(self.path(&format!("the path of the reference '{name}'"))?),
            "stategroup" => SynKind::StateGroup(self.states(depth, &name)?),
            "count" | "sum" | "min" | "max" => {
                let function = match word {
                    "count" => crate::model::Aggregate::Count,
                    "sum" => crate::model::Aggregate::Sum,
                    "min" => crate::model::Aggregate::Min,
                    _ => crate::model::Aggregate::Max,
                };
                self.expect(TokenKind::LParen, format_args!("`(` after `{word}` in '{name}'"))?;
                let t = self.cur.bump();
                let referrers = match t.kind {
                    TokenKind::Dot | TokenKind::Percent => false,
                    TokenKind::Lt => true,
                    _ => {
                        self.error(
                            t.span,
                            format!("expected `. 'collection'`, `% 'matrix'` or `< 'reference'` in '{name}'"),
                        );
                        self.skip_garbage()?;
                        return Ok(None);
                    }
                };
                let (over, span) = self.expect_name("the name of the collection or reference")?;
                self.expect(TokenKind::RParen, format_args!("`)` after the step of '{name}'"))?;
                let step = if referrers { SynOver::Referrers(over, span) } else { SynOver::Collection(over, span) };
                let value = if function == crate::model::Aggregate::Count {
                    None
                } else {
                    Some(self.expect_name(format_args!("the number property `{word}` adds up in '{name}'"))?)
                };
                SynKind::Aggregate { function, step, value }
            }
            "condition" => {
                self.expect(TokenKind::LParen, format_args!("`(` after `condition` in '{name}'"))?;
                let number = self.expect_name("the number property the condition tests")?;
                let t = self.cur.bump();
                let op = match t.kind {
                    TokenKind::EqEq => crate::model::CompareOp::Eq,
                    TokenKind::Ne => crate::model::CompareOp::Ne,
                    TokenKind::Lt => crate::model::CompareOp::Lt,
                    TokenKind::Le => crate::model::CompareOp::Le,
                    TokenKind::Gt => crate::model::CompareOp::Gt,
                    TokenKind::Ge => crate::model::CompareOp::Ge,
                    _ => {
                        self.error(t.span, "expected a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`)");
                        self.skip_garbage()?;
                        return Ok(None);
                    }
                };
                let t = self.cur.bump();
                let TokenKind::Int(value) = t.kind else {
                    self.error(t.span, "expected an integer to compare with");
                    self.skip_garbage()?;
                    return Ok(None);
                };
                self.expect(TokenKind::RParen, format_args!("`)` after the condition of '{name}'"))?;
                SynKind::Condition { number, op, value: *value }
            }
            other => {
                self.error(kt.span, format!("unknown property kind `{other}`; expected {KINDS}"));
                self.skip_garbage()?;
                return Ok(None);
            }
        };
        Ok(Some(SynProperty { name, name_span, kind_span: kt.span, kind }))
    }

    /// Benchmark files give collection sizes (`dictionary 1000 ( … )`); a model must not.
    fn no_size(&mut self, keyword: &str) -> PResult<()> {
        let t = self.cur.peek();
        if let TokenKind::Int(n) = t.kind {
            self.cur.bump();
            self.error(
                t.span,
                format!(
                    "unexpected number {n} after `{keyword}`: collection sizes belong in a benchmark's `initialize`, not in the schema; expected `(`"
                ),
            );
        }
        Ok(())
    }

    /// After a bad kind: skips numbers and balanced `( … )` groups so the next property parses.
    fn skip_garbage(&mut self) -> PResult<()> {
        loop {
            let t = self.cur.peek();
            match t.kind {
                TokenKind::Int(_) | TokenKind::Word(_) => {
                    self.cur.bump();
                }
                TokenKind::LParen => {
                    self.balanced("a parenthesised group")?;
                }
                _ => return Ok(()),
            }
        }
    }

    /// Consumes `( … )` with any tokens inside; returns the spans of both parentheses.
    fn balanced(&mut self, what: &str) -> PResult<(Span, Span)> {
        let open = self.expect(TokenKind::LParen, "`(`")?.span;
        let mut depth = 1usize;
        loop {
            let t = self.cur.bump();
            match t.kind {
                TokenKind::LParen => depth += 1,
                TokenKind::RParen => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok((open, t.span));
                    }
                }
                TokenKind::Eof => return self.unclosed(open, what),
                _ => {}
            }
        }
    }

    /// `( ('State' -> node)* )`; an empty list is reported by `compile`.
    fn states(&mut self, depth: usize, name: &str) -> PResult<Vec<SynState>> {
        let open = self.expect(TokenKind::LParen, format_args!("`(` to open the states of '{name}'"))?.span;
        let mut states = Vec::new();
        loop {
            let t = self.cur.peek();
            match t.kind {
                TokenKind::RParen => {
                    self.cur.bump();
                    return Ok(states);
                }
                TokenKind::Name(_) => {
                    let (state, span) = self.expect_name("a state name")?;
                    self.expect(TokenKind::Arrow, format_args!("`->` after the state name '{state}'"))?;
                    let node = self.node(depth + 1, &format!("the node of the state '{state}'"))?;
                    states.push(SynState { name: state, span, node });
                }
                TokenKind::Eof => return self.unclosed(open, &format!("the states of '{name}'")),
                other => {
                    return self.stop(
                        t.span,
                        format!(
                            "expected a state like 'State' -> ( … ) or `)` closing the states of '{name}', found {}",
                            other.describe()
                        ),
                    )
                }
            }
        }
    }

    /// `( up* down* )`
    fn path(&mut self, what: &str) -> PResult<SynPath> {
        let open = self.expect(TokenKind::LParen, format_args!("`(` to open {what}"))?.span;
        let mut up: Vec<SynUp> = Vec::new();
        let mut down: Vec<SynDown> = Vec::new();
        loop {
            let t = self.cur.peek();
            let symbol = match t.kind {
                TokenKind::RParen => {
                    self.cur.bump();
                    return Ok(SynPath { span: open.to(t.span), up, down });
                }
                TokenKind::Eof => return self.unclosed(open, what),
                TokenKind::Plus => UpSymbol::Plus,
                TokenKind::Dot => UpSymbol::Dot,
                TokenKind::Percent => UpSymbol::Percent,
                TokenKind::Question => UpSymbol::Question,
                TokenKind::Star => UpSymbol::Star,
                other => return self.stop(t.span, format!("expected {STEPS} or `)`, found {}", other.describe())),
            };
            self.cur.bump();
            let next = self.cur.peek();
            if *next.kind == TokenKind::Caret {
                self.cur.bump();
                let span = t.span.to(next.span);
                if let Some(d) = down.last() {
                    self.error(
                        span,
                        format!(
                            "`{}` goes up, but the path already went down at {}; all `^` steps come first",
                            symbol.text(),
                            self.at(d.name_span())
                        ),
                    );
                }
                up.push(SynUp { symbol, span });
                continue;
            }
            let step = match symbol {
                UpSymbol::Plus => {
                    let (name, span) = self.expect_name("a group name after `+`")?;
                    SynDown::Group { name, span }
                }
                UpSymbol::Dot => {
                    let (name, span) = self.expect_name("a dictionary name after `.`")?;
                    SynDown::Dictionary { name, span }
                }
                UpSymbol::Percent => {
                    let (name, span) = self.expect_name("a matrix name after `%`")?;
                    SynDown::Matrix { name, symbol: t.span, span }
                }
                UpSymbol::Question => {
                    let (stategroup, span) = self.expect_name("a stategroup name after `?`")?;
                    self.expect(TokenKind::Star, format_args!("`*` and a state name after `? '{stategroup}'`"))?;
                    let (state, state_span) = self.expect_name("a state name after `*`")?;
                    SynDown::State { stategroup, span, state, state_span }
                }
                UpSymbol::Star => {
                    return self.stop(t.span, "a state step `* 'State'` must follow a stategroup step `? 'Stategroup'`")
                }
            };
            down.push(step);
        }
    }

    /// `command 'Name' ( 'p' -> number|text … ) ( body )`
    fn command(&mut self) -> PResult<SynCommand> {
        self.cur.bump();
        let (name, span) = self.expect_name("a command name")?;
        let open = self.expect(TokenKind::LParen, format_args!("`(` to open the parameters of command '{name}'"))?.span;
        let mut params = Vec::new();
        loop {
            let t = self.cur.peek();
            match t.kind {
                TokenKind::RParen => {
                    self.cur.bump();
                    break;
                }
                TokenKind::Name(_) => {
                    let (p, pspan) = self.expect_name("a parameter name")?;
                    self.expect(TokenKind::Arrow, format_args!("`->` after the parameter name '{p}'"))?;
                    let k = self.cur.peek();
                    let kind = if k.kind.is_word("number") {
                        crate::model::ParamKind::Number
                    } else if k.kind.is_word("text") {
                        crate::model::ParamKind::Text
                    } else {
                        return self.stop(
                            k.span,
                            format!("expected the parameter kind `number` or `text` for '{p}', found {}", k.kind.describe()),
                        );
                    };
                    self.cur.bump();
                    params.push((p, pspan, kind));
                }
                TokenKind::Eof => return self.unclosed(open, &format!("the parameters of command '{name}'")),
                other => {
                    return self.stop(
                        t.span,
                        format!(
                            "expected a parameter like 'name' -> number, or `)` closing the parameters of command '{name}', found {}",
                            other.describe()
                        ),
                    )
                }
            }
        }
        if !self.cur.at(&TokenKind::LParen) {
            let t = self.cur.peek();
            return self.stop(
                t.span,
                format!("expected `(` to open the body of command '{name}', found {}", t.kind.describe()),
            );
        }
        let (open, close) = self.balanced(&format!("the body of command '{name}'"))?;
        let (start, end) = (open.end as usize, close.start as usize);
        debug_assert!(start <= end && end <= self.cur.source().len());
        let body = self.cur.source().get(start..end).unwrap_or_default().to_string();
        Ok(SynCommand { name, span, params, body, body_span: Span::new(start, end) })
    }

    /// `index 'Name' ( collection-path ) 'property' equality|range|prefix [unique]`
    fn index(&mut self) -> PResult<SynIndex> {
        self.cur.bump();
        let (name, span) = self.expect_name("an index name")?;
        let path = self.path(&format!("the path of index '{name}'"))?;
        let (property, property_span) = self.expect_name(format_args!("the indexed property of index '{name}'"))?;
        let t = self.cur.peek();
        let kind = match t.kind {
            TokenKind::Word(w) if w == "equality" => crate::model::IndexKind::Equality,
            TokenKind::Word(w) if w == "range" => crate::model::IndexKind::Range,
            TokenKind::Word(w) if w == "prefix" => crate::model::IndexKind::Prefix,
            other => {
                return self.stop(
                    t.span,
                    format!("expected the index kind `equality`, `range` or `prefix`, found {}", other.describe()),
                )
            }
        };
        self.cur.bump();
        let unique = if self.cur.at_word("unique") { Some(self.cur.bump().span) } else { None };
        Ok(SynIndex { name, span, path, property, property_span, kind, unique })
    }
}
