//! Errors that point into source text: `line:column`, the offending line, a caret under the
//! offending text, and the reason. Shared by the schema, instruction and benchmark languages.

use std::fmt;

/// A half-open byte range into a source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: u32,
    /// Byte offset just past the last byte.
    pub end: u32,
}

impl Span {
    /// The span from byte `start` to byte `end` (panics if `start > end`); offsets past
    /// `u32::MAX` are clamped to it.
    pub fn new(start: usize, end: usize) -> Span {
        assert!(start <= end, "span start {start} after end {end}");
        let start = u32::try_from(start).unwrap_or(u32::MAX);
        let end = u32::try_from(end).unwrap_or(u32::MAX);
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

/// One error in a source text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct Diagnostic {
    /// The offending text.
    pub span: Span,
    /// 1-based line of `span.start`.
    pub line: u32,
    /// 1-based column (in characters) of `span.start`.
    pub column: u32,
    /// The reason, in words.
    pub message: String,
}

impl Diagnostic {
    /// Builds a diagnostic, computing line and column from `source`.
    pub fn new(source: &str, span: Span, message: impl Into<String>) -> Diagnostic {
        let (line, column) = line_column(source, span.start as usize);
        Diagnostic { span, line, column, message: message.into() }
    }

    /// Renders like rustc: `file:line:column: reason`, the source line, and carets under the span.
    pub fn render(&self, source: &str, file: &str) -> String {
        let start = (self.span.start as usize).min(source.len());
        let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[start..].find('\n').map_or(source.len(), |i| start + i);
        let text = &source[line_start..line_end];
        let pad: String = source[line_start..start].chars().map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
        let end = (self.span.end as usize).clamp(start, line_end);
        let width = source[start..end].chars().count().max(1);
        let gutter = self.line.to_string();
        let blank = " ".repeat(gutter.len());
        format!(
            "{file}:{}:{}: error: {}\n{blank} |\n{gutter} | {text}\n{blank} | {pad}{}\n",
            self.line,
            self.column,
            self.message,
            "^".repeat(width)
        )
    }
}

/// Several diagnostics from one source; `Display` shows them one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl Diagnostics {
    /// Renders every diagnostic (see [`Diagnostic::render`]), separated by blank lines.
    pub fn render(&self, source: &str, file: &str) -> String {
        self.0.iter().map(|d| d.render(source, file)).collect::<Vec<_>>().join("\n")
    }
}

/// Most diagnostics reported for one source; a note marks the cut.
pub const MAX_ERRORS: usize = 100;

/// Records an error unless the cap is reached; at the cap, records a note instead.
pub(crate) fn push_error(errors: &mut Vec<Diagnostic>, source: &str, span: Span, message: String) {
    match errors.len() {
        n if n < MAX_ERRORS => errors.push(Diagnostic::new(source, span, message)),
        n if n == MAX_ERRORS => errors.push(Diagnostic::new(
            source,
            span,
            format!("too many errors: only the first {MAX_ERRORS} found are reported"),
        )),
        _ => {}
    }
}

/// 1-based line and character column of a byte offset.
pub fn line_column(source: &str, offset: usize) -> (u32, u32) {
    let offset = offset.min(source.len());
    let mut offset = offset;
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (u32::try_from(line).unwrap_or(u32::MAX), u32::try_from(column).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_caret_under_span() {
        let src = "root (\n  'a' -> nmber\n)";
        let at = src.find("nmber").unwrap();
        let d = Diagnostic::new(src, Span::new(at, at + 5), "unknown property kind `nmber`");
        assert_eq!((d.line, d.column), (2, 10));
        let out = d.render(src, "m.alan");
        assert!(out.contains("m.alan:2:10: error: unknown property kind `nmber`"), "{out}");
        assert!(out.contains("2 |   'a' -> nmber\n  |          ^^^^^"), "{out}");
    }
}
