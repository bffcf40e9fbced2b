//! A cursor over the tokens of a source: what the schema, instruction and benchmark parsers
//! share to read them — look ahead, consume, and say "expected X, found Y" where it went wrong.
//!
//! Each parser keeps its own grammar and its own error type; the cursor's errors are plain
//! [`Diagnostic`]s for them to wrap.

use std::fmt::Display;

use crate::diagnostic::{Diagnostic, Span};
use crate::lexer::{Token, TokenKind};

/// What the cursor reads past the last token, when the list does not end with `Eof`.
static EOF: TokenKind = TokenKind::Eof;

/// A token as the cursor hands it out: borrowed from the token list, not from the cursor, so a
/// parser may hold it while it reads on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenRef<'a> {
    /// What the token is.
    pub kind: &'a TokenKind,
    /// The token's bytes in the source.
    pub span: Span,
}

/// A position in a token list and the source it was lexed from.
///
/// The list normally ends with `Eof`, as [`crate::lexer::tokenize`] returns it; a slice of it
/// need not (a parser may be handed part of a file): past its last token the cursor reads an
/// `Eof` at the end of that token. It never moves past an `Eof`, so a loop that stops at `Eof`
/// ends.
#[derive(Debug, Clone, Copy)]
pub struct Cursor<'a> {
    source: &'a str,
    tokens: &'a [Token],
    pos: usize,
    /// The span of the last consumed token; before any, the next token's, so that a span
    /// `start.to(last)` never reaches back before the cursor started.
    last: Span,
    /// Where the input ends: the span of the `Eof` read past the last token.
    end: Span,
}

impl<'a> Cursor<'a> {
    /// A cursor at the first of `tokens`, which were lexed from `source`.
    pub fn new(source: &'a str, tokens: &'a [Token]) -> Cursor<'a> {
        let end = tokens.last().map_or(0, |t| t.span.end);
        let end = Span { start: end, end };
        let last = tokens.first().map_or(end, |t| t.span);
        Cursor { source, tokens, pos: 0, last, end }
    }

    /// The source the tokens point into.
    pub fn source(&self) -> &'a str {
        self.source
    }

    /// The whole token list, for handing over to another parser mid-stream.
    pub fn tokens(&self) -> &'a [Token] {
        self.tokens
    }

    /// Index of the next unread token.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Continues at token index `pos` (clamped to the token list), as if nothing had been
    /// consumed yet.
    pub fn set_pos(&mut self, pos: usize) {
        self.pos = pos.min(self.tokens.len());
        if let Some(t) = self.tokens.get(self.pos) {
            self.last = t.span;
        }
    }

    /// The tokens from the next one on.
    pub fn rest(&self) -> &'a [Token] {
        self.tokens.get(self.pos..).unwrap_or_default()
    }

    /// The next token (`Eof` at the end).
    pub fn peek(&self) -> TokenRef<'a> {
        self.peek_at(0)
    }

    /// The token `n` after the next one (`Eof` at and past the end).
    pub fn peek_at(&self, n: usize) -> TokenRef<'a> {
        match self.tokens.get(self.pos.saturating_add(n)) {
            Some(t) => TokenRef { kind: &t.kind, span: t.span },
            None => TokenRef { kind: &EOF, span: self.end },
        }
    }

    /// Is the next token of `kind`?
    pub fn at(&self, kind: &TokenKind) -> bool {
        self.peek().kind == kind
    }

    /// Is the next token the keyword `word`?
    pub fn at_word(&self, word: &str) -> bool {
        self.peek().kind.is_word(word)
    }

    /// The span of the last consumed token (see [`Cursor::set_pos`] for before any).
    pub fn last(&self) -> Span {
        self.last
    }

    /// Consumes and returns the next token; at `Eof` returns it and stays.
    pub fn bump(&mut self) -> TokenRef<'a> {
        let t = self.peek();
        if self.pos < self.tokens.len() && *t.kind != TokenKind::Eof {
            self.pos += 1;
            self.last = t.span;
        }
        t
    }

    /// Consumes the next token if it is the keyword `word`.
    pub fn eat_word(&mut self, word: &str) -> bool {
        let at = self.at_word(word);
        if at {
            self.bump();
        }
        at
    }

    /// An error at `span`.
    pub fn error(&self, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(self.source, span, message)
    }

    /// "expected {what}, found {the next token}", at the next token. `what` is only formatted
    /// here, so a caller may pass `format_args!` and pay nothing while the input is right.
    pub fn expected(&self, what: impl Display) -> Diagnostic {
        let next = self.peek();
        self.error(next.span, format!("expected {what}, found {}", next.kind.describe()))
    }

    /// "`(` is never closed" (or `[`): the input ended inside the bracket at `open`.
    pub fn unclosed(&self, open: Span) -> Diagnostic {
        let bracket = self.source.get(open.start as usize..open.end as usize).unwrap_or("(");
        self.error(open, format!("`{bracket}` is never closed"))
    }

    /// Consumes a token of `kind`, or fails with [`Cursor::expected`]`(what)`.
    pub fn expect(&mut self, kind: TokenKind, what: impl Display) -> Result<TokenRef<'a>, Diagnostic> {
        if self.at(&kind) {
            Ok(self.bump())
        } else {
            Err(self.expected(what))
        }
    }

    /// Consumes a `'quoted'` name, or fails with [`Cursor::expected`]`(what)`; `what` says
    /// which name, e.g. "a dictionary name after `.`".
    pub fn expect_name(&mut self, what: impl Display) -> Result<(String, Span), Diagnostic> {
        let t = self.peek();
        match t.kind {
            TokenKind::Name(n) => {
                self.bump();
                Ok((n.clone(), t.span))
            }
            _ => Err(self.expected(what)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::tokenize;

    #[test]
    fn reads_eof_past_a_slice_and_never_moves_past_eof() {
        let src = "get . 'd'";
        let tokens = tokenize(src).unwrap();
        let mut c = Cursor::new(src, &tokens[..2]);
        assert!(c.eat_word("get"));
        assert_eq!(c.bump().kind, &TokenKind::Dot);
        assert_eq!(c.last(), Span::new(4, 5));
        let end = c.bump();
        assert_eq!((end.kind, end.span, c.pos()), (&TokenKind::Eof, Span::new(5, 5), 2));
        let e = c.expected("a name");
        assert_eq!((e.message.as_str(), e.column), ("expected a name, found end of input", 6));

        let mut c = Cursor::new(src, &tokens);
        c.set_pos(2);
        assert_eq!(c.expect_name("a name").unwrap(), ("d".to_string(), Span::new(6, 9)));
        for _ in 0..3 {
            assert_eq!(c.bump().kind, &TokenKind::Eof);
        }
        assert_eq!(c.pos(), 3);
        assert_eq!(c.peek_at(usize::MAX).kind, &TokenKind::Eof);
        let e = c.expect(TokenKind::Colon, "`:`").unwrap_err();
        assert_eq!(e.message, "expected `:`, found end of input");
        assert_eq!(c.unclosed(Span::new(4, 5)).message, "`.` is never closed");

        let c = Cursor::new("", &[]);
        assert_eq!((c.peek().kind, c.peek().span), (&TokenKind::Eof, Span::new(0, 0)));
    }
}
