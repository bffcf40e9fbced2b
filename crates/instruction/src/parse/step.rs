//! Path steps: the one grammar of `. 'd'`, `% 'm'`, `+ 'g'`, `? 'sg' * 's'` and `> 'r'` that
//! node, collection and projection paths and pattern paths share, and of the `kind : property`
//! a projection or a pattern's term ends at. What differs between them — an entry's key, and
//! the pattern's own steps (`.^`, `< 'r'`, `repeat`) — is read by the caller.

use espalier_schema::lexer::TokenKind;

use super::{ParseResult, Parser};
use crate::ast::{LeafKind, Located, Path, Step, Value};
use crate::validate::rule;

/// Which path a step is read in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum StepKind {
    /// Keys on dictionary and matrix steps.
    Node,
    /// No keys.
    Collection,
    /// Groups, states and references only.
    Projection,
    /// A pattern's: keys optional, and `^` may follow a step's symbol (`parse/pattern.rs`).
    Pattern,
}

/// A step as every path writes it, read up to an entry's key.
pub(super) enum Down {
    /// `. 'd'` or `% 'm'`
    Entry { matrix: bool, name: String },
    /// `+ 'g'`
    Group(String),
    /// `? 'sg' * 's'`
    State { stategroup: String, state: String },
    /// `> 'r'`
    Reference(String),
}

impl Parser<'_> {
    /// Steps from the root to one node: dictionary and matrix steps carry a key.
    pub(super) fn node_path(&mut self) -> ParseResult<Path> {
        let mut path = Vec::new();
        while let Some(step) = self.step(StepKind::Node)? {
            path.push(step);
        }
        Ok(path)
    }

    /// A step of a node, collection or projection path; `None`, with nothing read, at a token
    /// that starts none.
    pub(super) fn step(&mut self, kind: StepKind) -> ParseResult<Option<Located<Step>>> {
        let start = self.cur.peek().span;
        let Some(down) = self.down_step(kind)? else { return Ok(None) };
        let step = match down {
            Down::Entry { matrix, name } => {
                let key = self.entry_key(kind, matrix, &name)?;
                if matrix {
                    Step::Matrix { name, key }
                } else {
                    Step::Dictionary { name, key }
                }
            }
            Down::Group(name) => Step::Group(name),
            Down::State { stategroup, state } => Step::State { stategroup, state },
            Down::Reference(name) => Step::Reference(name),
        };
        Ok(Some(Located { item: step, span: start.to(self.cur.last()) }))
    }

    /// `: key` after an entry step of a node path; none after one of a collection path.
    fn entry_key(&mut self, kind: StepKind, matrix: bool, name: &str) -> ParseResult<Option<Value>> {
        let coll = if matrix { "matrix" } else { "dictionary" };
        if kind == StepKind::Node {
            if !self.cur.at(&TokenKind::Colon) {
                return Err(
                    self.expected(format_args!("`:` and a key after {coll} '{name}' (a node path picks one entry)"))
                );
            }
            self.cur.bump();
            return Ok(Some(self.value()?));
        }
        if self.cur.at(&TokenKind::Colon) {
            let at = self.cur.peek().span;
            return Err(self.error(at, rule::collection_key(coll, name)));
        }
        Ok(None)
    }

    /// `. 'd'`, `% 'm'`, `+ 'g'`, `? 'sg' * 's'` or `> 'r'`, read up to an entry's key; `None`,
    /// with nothing read, at any other token.
    pub(super) fn down_step(&mut self, kind: StepKind) -> ParseResult<Option<Down>> {
        let pattern = kind == StepKind::Pattern;
        // Where an up step could be meant, the messages offer it.
        let or_up = if pattern { " or `^`" } else { "" };
        let start = self.cur.peek().span;
        let step = match self.cur.peek().kind {
            TokenKind::Dot | TokenKind::Percent => {
                let matrix = *self.cur.bump().kind == TokenKind::Percent;
                let (sym, coll) = if matrix { ("`%`", "matrix") } else { ("`.`", "dictionary") };
                if kind == StepKind::Projection {
                    return Err(self.error(start, rule::projection_entry(coll)));
                }
                let name = self.name(format_args!("a {coll} name{or_up} after {sym}"))?;
                Down::Entry { matrix, name }
            }
            TokenKind::Plus => {
                self.cur.bump();
                Down::Group(self.name(format_args!("a group name{or_up} after `+`"))?)
            }
            TokenKind::Question => {
                self.cur.bump();
                let stategroup = self.name(format_args!("a stategroup name{or_up} after `?`"))?;
                self.cur.expect(TokenKind::Star, format_args!("`*` and a state after stategroup '{stategroup}'"))?;
                let state = self.name(format_args!("a state name after `?` '{stategroup}' `*`"))?;
                Down::State { stategroup, state }
            }
            TokenKind::Gt => {
                self.cur.bump();
                // A pattern also follows a matrix's `>` (to every entry's target).
                let what = if pattern { "a reference or matrix name after `>`" } else { "a reference name after `>`" };
                Down::Reference(self.name(what)?)
            }
            _ => return Ok(None),
        };
        Ok(Some(step))
    }

    /// Where a path ends at a property: `kind : property`; `None`, with nothing read, when no
    /// kind word is next.
    pub(super) fn leaf(&mut self) -> ParseResult<Option<(LeafKind, String)>> {
        let kind = match self.cur.peek().kind {
            TokenKind::Word(w) => match w.as_str() {
                "number" => LeafKind::Number,
                "text" => LeafKind::Text,
                "stategroup" => LeafKind::Stategroup,
                "reference" => LeafKind::Reference,
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        self.cur.bump();
        self.cur.expect(TokenKind::Colon, "`:` and the property name after the kind")?;
        // The thesis also writes the property as a bare word (`number : n`).
        let property = match self.cur.peek().kind {
            TokenKind::Name(n) | TokenKind::Word(n) => n.clone(),
            _ => return Err(self.expected("a property name after `:`")),
        };
        self.cur.bump();
        Ok(Some((kind, property)))
    }
}
