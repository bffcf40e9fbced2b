//! The tokens of the Alan notation, shared by the schema, instruction and benchmark languages.
//!
//! `'Name'` is a quoted name (a property, state or declaration name), `"text"` a string literal,
//! `$name` a parameter; keywords are plain words. Comments are `// …` and `/* … */`.

use crate::diagnostic::{Diagnostic, Span};

/// Longest source a lexer accepts; bounds every loop below and keeps spans in `u32`.
pub const MAX_SOURCE_BYTES: usize = 256 * 1024 * 1024;

/// The kind of a token, with its value for names, strings, numbers, words and parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenKind {
    /// `'Name'` — quotes removed, `\'` and `\\` unescaped.
    Name(String),
    /// `"text"` — quotes removed, escapes `\" \\ \n \t \r \u{HEX}` applied.
    Str(String),
    /// A decimal integer, optionally negative; fits in `i64`.
    Int(i64),
    /// A bare word: keywords such as `root`, `dictionary`, `update`, `select`.
    Word(String),
    /// `$name`, a command or query parameter.
    Param(String),
    /// `->`
    Arrow,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `.` dictionary step
    Dot,
    /// `+` group step (also plus sign in `number + 1`)
    Plus,
    /// `-` (minus sign in `number - 1`, when not part of `->` or a number)
    Minus,
    /// `%` matrix step
    Percent,
    /// `?` stategroup step
    Question,
    /// `*` state step (also the wildcard in `( [ 'a' ] * )`)
    Star,
    /// `^` parent step
    Caret,
    /// `>` reference step, or greater-than in a filter
    Gt,
    /// `<` reverse reference step, or less-than in a filter
    Lt,
    /// `>=`
    Ge,
    /// `<=`
    Le,
    /// `==`
    EqEq,
    /// `!=`
    Ne,
    /// `=`
    Eq,
    /// `:`
    Colon,
    /// `,`
    Comma,
    /// `;`
    Semicolon,
    /// `/`
    Slash,
    /// The end of the source; always the last token.
    Eof,
}

impl TokenKind {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            TokenKind::Name(n) => format!("name '{n}'"),
            TokenKind::Str(s) => format!("string \"{s}\""),
            TokenKind::Int(i) => format!("number {i}"),
            TokenKind::Word(w) => format!("`{w}`"),
            TokenKind::Param(p) => format!("parameter ${p}"),
            TokenKind::Eof => "end of input".to_string(),
            other => format!("`{}`", other.symbol()),
        }
    }

    fn symbol(&self) -> &'static str {
        match self {
            TokenKind::Arrow => "->",
            TokenKind::LParen => "(",
            TokenKind::RParen => ")",
            TokenKind::LBracket => "[",
            TokenKind::RBracket => "]",
            TokenKind::LBrace => "{",
            TokenKind::RBrace => "}",
            TokenKind::Dot => ".",
            TokenKind::Plus => "+",
            TokenKind::Minus => "-",
            TokenKind::Percent => "%",
            TokenKind::Question => "?",
            TokenKind::Star => "*",
            TokenKind::Caret => "^",
            TokenKind::Gt => ">",
            TokenKind::Lt => "<",
            TokenKind::Ge => ">=",
            TokenKind::Le => "<=",
            TokenKind::EqEq => "==",
            TokenKind::Ne => "!=",
            TokenKind::Eq => "=",
            TokenKind::Colon => ":",
            TokenKind::Comma => ",",
            TokenKind::Semicolon => ";",
            TokenKind::Slash => "/",
            _ => "?",
        }
    }

    /// Is this the keyword `word`?
    pub fn is_word(&self, word: &str) -> bool {
        matches!(self, TokenKind::Word(w) if w == word)
    }
}

/// One token and where it is in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// What the token is.
    pub kind: TokenKind,
    /// The token's bytes in the source.
    pub span: Span,
}

/// Splits `source` into tokens, ending with one `Eof` token.
pub fn tokenize(source: &str) -> Result<Vec<Token>, Diagnostic> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(Diagnostic::new(
            source,
            Span::new(0, 0),
            format!("source is {} bytes; the limit is {MAX_SOURCE_BYTES}", source.len()),
        ));
    }
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0usize;
    let err = |start: usize, end: usize, msg: String| Diagnostic::new(source, Span::new(start, end), msg);
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        // Whitespace and comments.
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'*') {
            match source[i + 2..].find("*/") {
                Some(end) => i = i + 2 + end + 2,
                None => return Err(err(start, start + 2, "comment `/*` is never closed".into())),
            }
            continue;
        }
        let two = if i + 1 < bytes.len() { &bytes[i..i + 2] } else { &bytes[i..i + 1] };
        let (kind, len) = match two {
            b"->" => (TokenKind::Arrow, 2),
            b">=" => (TokenKind::Ge, 2),
            b"<=" => (TokenKind::Le, 2),
            b"==" => (TokenKind::EqEq, 2),
            b"!=" => (TokenKind::Ne, 2),
            _ => match c {
                b'(' => (TokenKind::LParen, 1),
                b')' => (TokenKind::RParen, 1),
                b'[' => (TokenKind::LBracket, 1),
                b']' => (TokenKind::RBracket, 1),
                b'{' => (TokenKind::LBrace, 1),
                b'}' => (TokenKind::RBrace, 1),
                b'.' => (TokenKind::Dot, 1),
                b'+' => (TokenKind::Plus, 1),
                b'%' => (TokenKind::Percent, 1),
                b'?' => (TokenKind::Question, 1),
                b'*' => (TokenKind::Star, 1),
                b'^' => (TokenKind::Caret, 1),
                b'>' => (TokenKind::Gt, 1),
                b'<' => (TokenKind::Lt, 1),
                b'=' => (TokenKind::Eq, 1),
                b':' => (TokenKind::Colon, 1),
                b',' => (TokenKind::Comma, 1),
                b';' => (TokenKind::Semicolon, 1),
                b'/' => (TokenKind::Slash, 1),
                _ => (TokenKind::Eof, 0),
            },
        };
        if len > 0 {
            tokens.push(Token { kind, span: Span::new(start, start + len) });
            i += len;
            continue;
        }
        if c == b'-' || c.is_ascii_digit() {
            let negative = c == b'-';
            let mut j = if negative { i + 1 } else { i };
            if negative && !bytes.get(j).is_some_and(u8::is_ascii_digit) {
                tokens.push(Token { kind: TokenKind::Minus, span: Span::new(i, i + 1) });
                i += 1;
                continue;
            }
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            let text = &source[i..j];
            let value: i64 = text
                .parse()
                .map_err(|_| err(i, j, format!("number {text} does not fit in a 64-bit signed integer")))?;
            tokens.push(Token { kind: TokenKind::Int(value), span: Span::new(i, j) });
            i = j;
            continue;
        }
        if c == b'\'' || c == b'"' {
            let (text, end) = quoted(source, i, c).map_err(|(s, e, m)| err(s, e, m))?;
            let kind = if c == b'\'' { TokenKind::Name(text) } else { TokenKind::Str(text) };
            tokens.push(Token { kind, span: Span::new(i, end) });
            i = end;
            continue;
        }
        if c == b'$' || c.is_ascii_alphabetic() || c == b'_' {
            let mut j = i + 1;
            while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
                j += 1;
            }
            let word = source[i..j].to_string();
            let kind = if c == b'$' {
                if word.len() == 1 {
                    return Err(err(i, j, "`$` must be followed by a parameter name".into()));
                }
                TokenKind::Param(word[1..].to_string())
            } else {
                TokenKind::Word(word)
            };
            tokens.push(Token { kind, span: Span::new(i, j) });
            i = j;
            continue;
        }
        let ch = source[i..].chars().next().unwrap_or('?');
        return Err(err(i, i + ch.len_utf8(), format!("unexpected character `{ch}`")));
    }
    tokens.push(Token { kind: TokenKind::Eof, span: Span::new(bytes.len(), bytes.len()) });
    Ok(tokens)
}

/// Reads a quoted literal starting at `start` (the opening quote); returns text and end offset.
fn quoted(source: &str, start: usize, quote: u8) -> Result<(String, usize), (usize, usize, String)> {
    let mut out = String::new();
    let mut chars = source[start + 1..].char_indices();
    while let Some((off, ch)) = chars.next() {
        let at = start + 1 + off;
        match ch {
            c if c as u32 == quote as u32 => return Ok((out, at + 1)),
            '\n' if quote == b'\'' => return Err((start, at, "name is not closed before the end of the line".into())),
            '\\' => match chars.next() {
                Some((_, '\\')) => out.push('\\'),
                Some((_, '\'')) => out.push('\''),
                Some((_, '"')) => out.push('"'),
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, 'u')) => {
                    let rest = &source[at + 2..];
                    let close = rest.find('}').filter(|_| rest.starts_with('{'));
                    let code = close.and_then(|c| u32::from_str_radix(&rest[1..c], 16).ok()).and_then(char::from_u32);
                    match (code, close) {
                        (Some(c), Some(close)) => {
                            out.push(c);
                            for _ in 0..=close {
                                chars.next();
                            }
                        }
                        _ => return Err((at, at + 2, "bad escape: expected \\u{HEX}".into())),
                    }
                }
                Some((_, other)) => return Err((at, at + 1 + other.len_utf8(), format!("unknown escape `\\{other}`"))),
                None => break,
            },
            c => out.push(c),
        }
    }
    let what = if quote == b'\'' { "name" } else { "string" };
    Err((start, source.len(), format!("{what} is never closed")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        tokenize(src).unwrap().into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn symbols_names_and_numbers() {
        use TokenKind::*;
        assert_eq!(
            kinds("'Order' -> reference ( +^ .^ . 'Orders' ) // c\n 'n' -> number : 'n' >= -5 $p"),
            vec![
                Name("Order".into()),
                Arrow,
                Word("reference".into()),
                LParen,
                Plus,
                Caret,
                Dot,
                Caret,
                Dot,
                Name("Orders".into()),
                RParen,
                Name("n".into()),
                Arrow,
                Word("number".into()),
                Colon,
                Name("n".into()),
                Ge,
                Int(-5),
                Param("p".into()),
                Eof
            ]
        );
    }

    #[test]
    fn strings_unescape_and_errors_name_the_place() {
        assert_eq!(kinds(r#""a\"b\u{e9}""#)[0], TokenKind::Str("a\"bé".into()));
        let e = tokenize("root ( 'a -> number\n)").unwrap_err();
        assert_eq!((e.line, e.column), (1, 8));
        let e = tokenize("x = 99999999999999999999").unwrap_err();
        assert!(e.message.contains("64-bit"), "{}", e.message);
        let e = tokenize("a # b").unwrap_err();
        assert_eq!(e.message, "unexpected character `#`");
    }
}
