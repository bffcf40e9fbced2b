//! Parsing a benchmark file: the model (handed to the schema compiler), the `initialize` part
//! (checked against the compiled model as it is read) and the `repeat` parts (handed to the
//! instruction parser token by token, then type-checked). Every error is a [`Diagnostic`]
//! pointing into the file.

use std::collections::HashSet;
use std::path::Path;

use espalier_instruction::parse::{ParseOptions, Parser};
use espalier_instruction::plan::Checker;
use espalier_schema::cursor::{Cursor, TokenRef};
use espalier_schema::lexer::{tokenize, TokenKind};
use espalier_schema::{Diagnostic, NodeTypeId, PropertyKind, Schema, Span, ROOT};

use super::values::{self, Words};
use super::{BenchInstruction, Benchmark, InitItem, InitValue, StateInit, Suite};

/// Deepest nesting of `( … )` in `initialize` (the schema's own nesting is bounded likewise).
const MAX_INIT_DEPTH: usize = espalier_schema::MAX_DEPTH;
/// Most benchmarks in one file.
pub const MAX_BENCHMARKS: usize = 1_000;
/// Most instructions in one `repeat` body.
pub const MAX_INSTRUCTIONS: usize = 1_000;
/// Largest `repeat` count.
pub const MAX_REPEAT: u64 = 100_000_000;
/// Most values in `random ( … )`.
const MAX_CHOICES: usize = 10_000;

/// A benchmark file that did not parse or check. `Display` renders every diagnostic with the
/// file name, line:column, the source line and a caret.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SuiteError {
    /// The file does not parse or check.
    #[error("{}", render(.file, .source_text, .diagnostics))]
    Invalid {
        /// The file's name.
        file: String,
        /// The file's text, which the diagnostics point into.
        source_text: String,
        /// What is wrong, and where.
        diagnostics: Vec<Diagnostic>,
    },
    /// The file cannot be read.
    #[error("cannot read {file}: {reason}")]
    Read {
        /// The file's name.
        file: String,
        /// Why it cannot be read.
        reason: String,
    },
}

fn render(file: &str, source: &str, diagnostics: &[Diagnostic]) -> String {
    diagnostics.iter().map(|d| d.render(source, file)).collect::<Vec<_>>().join("\n").trim_end().to_string()
}

impl SuiteError {
    /// The diagnostics (empty for read errors).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            SuiteError::Invalid { diagnostics, .. } => diagnostics,
            SuiteError::Read { .. } => &[],
        }
    }
}

/// Reads and parses a benchmark file; the suite is named after the file's stem.
pub fn load_suite(path: &Path) -> Result<Suite, SuiteError> {
    let file = path.display().to_string();
    let source =
        std::fs::read_to_string(path).map_err(|e| SuiteError::Read { file: file.clone(), reason: e.to_string() })?;
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "benchmark".into());
    parse_suite(&source, &name).map_err(|e| match e {
        SuiteError::Invalid { source_text, diagnostics, .. } => SuiteError::Invalid { file, source_text, diagnostics },
        other => other,
    })
}

/// Parses and checks a benchmark file's text. `name` names the suite and its unnamed
/// benchmarks (and the file in error messages).
pub fn parse_suite(source: &str, name: &str) -> Result<Suite, SuiteError> {
    let fail = |d: Diagnostic| SuiteError::Invalid {
        file: name.to_string(),
        source_text: source.to_string(),
        diagnostics: vec![d],
    };
    let tokens = tokenize(source).map_err(fail)?;
    // The model ends where `initialize` starts at the outermost level.
    let mut depth = 0i64;
    let mut init_at = None;
    let mut repeat_at = None;
    for (i, t) in tokens.iter().enumerate() {
        match &t.kind {
            TokenKind::LParen => depth += 1,
            TokenKind::RParen => depth -= 1,
            TokenKind::Word(w) if depth == 0 && w == "initialize" => {
                init_at = Some(i);
                break;
            }
            TokenKind::Word(w) if depth == 0 && (w == "repeat" || w == "benchmark") && repeat_at.is_none() => {
                repeat_at = Some(t);
            }
            _ => {}
        }
    }
    let Some(init_at) = init_at else {
        let (at, place) = match repeat_at {
            Some(t) => (t.span, format!(" before `{}`", t.kind.describe().trim_matches('`'))),
            None => (tokens.last().map_or(Span::default(), |t| t.span), " after the application model".to_string()),
        };
        return Err(fail(Diagnostic::new(
            source,
            at,
            format!(
                "expected `initialize ( … )`{place} (a benchmark file is a model, an `initialize` \
                 part and `repeat` parts)"
            ),
        )));
    };
    let model = &source[..tokens[init_at].span.start as usize];
    let schema = espalier_schema::compile(model).map_err(|d| SuiteError::Invalid {
        file: name.to_string(),
        source_text: source.to_string(),
        // The model is a prefix of the file, so its spans and line:columns are the file's.
        diagnostics: d.0,
    })?;
    let mut cur = Cursor::new(source, &tokens);
    cur.set_pos(init_at + 1);
    let mut p = SuiteParser { cur, schema: &schema, depth: 0 };
    let init = p.init_block(ROOT, "`initialize`").map_err(fail)?;
    let benchmarks = p.benchmarks(name).map_err(fail)?;
    let suite = Suite {
        name: name.to_string(),
        source: source.to_string(),
        model: model.to_string(),
        schema,
        init,
        benchmarks,
    };
    // Every `index` and `random` can be drawn (at the written sizes; scaling keeps that).
    let sizes = suite.collection_sizes();
    for i in suite.benchmarks.iter().flat_map(|b| &b.instructions) {
        values::draws(&i.plan, &i.values, &suite.schema, &sizes, super::Scale::default())
            .map_err(|(span, message)| fail(Diagnostic::new(source, span, message)))?;
    }
    Ok(suite)
}

struct SuiteParser<'a> {
    cur: Cursor<'a>,
    schema: &'a Schema,
    depth: usize,
}

type PResult<T> = Result<T, Diagnostic>;

impl<'a> SuiteParser<'a> {
    fn count(&mut self, what: &str) -> PResult<(u64, Span)> {
        let t = self.cur.peek();
        match *t.kind {
            TokenKind::Int(n) if n >= 0 => {
                self.cur.bump();
                Ok((n as u64, t.span))
            }
            TokenKind::Int(n) => Err(self.cur.error(t.span, format!("{what} cannot be negative ({n})"))),
            _ => Err(self.cur.expected(what)),
        }
    }

    fn describe_node(&self, node: NodeTypeId) -> String {
        use espalier_schema::ParentLink::*;
        match self.schema.node_type(node).parent {
            Root => "the root".into(),
            Group { property } => format!("group '{}'", self.schema.property(property).name),
            DictionaryEntry { property } | MatrixEntry { property } => {
                format!("the entries of '{}'", self.schema.property(property).name)
            }
            State { property, state } => match &self.schema.property(property).kind {
                PropertyKind::StateGroup { states } => format!(
                    "state '{}' of '{}'",
                    states.get(state as usize).map_or("?", |s| s.name.as_str()),
                    self.schema.property(property).name
                ),
                _ => "a state".into(),
            },
        }
    }

    // ---- initialize ----

    /// `( item* )` for a node of type `node`.
    fn init_block(&mut self, node: NodeTypeId, what: &str) -> PResult<Vec<InitItem>> {
        let open = self.cur.expect(TokenKind::LParen, format_args!("`(` to open {what}"))?.span;
        if self.depth >= MAX_INIT_DEPTH {
            return Err(self.cur.error(open, format!("`initialize` is nested more than {MAX_INIT_DEPTH} levels deep")));
        }
        self.depth += 1;
        let mut items = Vec::new();
        let mut seen = HashSet::new();
        loop {
            let t = self.cur.peek();
            match t.kind {
                TokenKind::RParen => {
                    self.cur.bump();
                    break;
                }
                TokenKind::Name(name) => {
                    let item = self.init_item(node)?;
                    if !seen.insert(item.property) {
                        return Err(self.cur.error(t.span, format!("'{name}' is initialised twice in {what}")));
                    }
                    items.push(item);
                }
                TokenKind::Eof => return Err(self.cur.error(open, format!("`(` opening {what} is never closed"))),
                _ => return Err(self.cur.expected(format_args!("a property name like 'Name' or `)` closing {what}"))),
            }
        }
        self.depth -= 1;
        self.require_references(node, &items, open)?;
        Ok(items)
    }

    /// Every reference of a node that `initialize` creates must get a value (the root's may
    /// stay unset: the root exists before any instruction).
    fn require_references(&self, node: NodeTypeId, items: &[InitItem], at: Span) -> PResult<()> {
        if node == ROOT {
            return Ok(());
        }
        for &p in &self.schema.node_type(node).properties {
            let prop = self.schema.property(p);
            let given = items.iter().find(|i| i.property == p);
            match (&prop.kind, given) {
                (PropertyKind::Reference { .. }, None) => {
                    return Err(self.cur.error(
                        at,
                        format!(
                            "{} have reference '{}' but this block gives it no value (every reference \
                             must point at an entry: `'{}' -> reference random N` or `reference \"key\"`)",
                            self.describe_node(node),
                            prop.name,
                            prop.name
                        ),
                    ))
                }
                (PropertyKind::Group { node: g }, None) => self.require_references(*g, &[], at)?,
                (PropertyKind::StateGroup { states }, None) => {
                    // The default is the first state.
                    if let Some(first) = states.first() {
                        self.require_references(first.node, &[], at)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn init_item(&mut self, node: NodeTypeId) -> PResult<InitItem> {
        let name_tok = self.cur.bump();
        let TokenKind::Name(name) = name_tok.kind else { unreachable!("caller peeked a name") };
        let Some(prop) = self.schema.find(node, name) else {
            let names: Vec<String> = self
                .schema
                .node_type(node)
                .properties
                .iter()
                .map(|&p| format!("'{}'", self.schema.property(p).name))
                .collect();
            let has = if names.is_empty() { "it has none".to_string() } else { format!("it has {}", names.join(", ")) };
            return Err(self
                .cur
                .error(name_tok.span, format!("no property '{name}' in {}; {has}", self.describe_node(node))));
        };
        let property = prop.id;
        self.cur.expect(TokenKind::Arrow, format_args!("`->` after '{name}'"))?;
        let kind = prop.kind.clone();
        // The kind word is optional for leaves (`'t' -> random ( … )`) and groups; when given it
        // must match the model.
        let word_tok = self.cur.peek();
        let word = match word_tok.kind {
            TokenKind::Word(w) => Some(w.as_str()),
            _ => None,
        };
        let kind_word = kind.keyword();
        if let Some(w) = word {
            let known = ["number", "integer", "text", "reference", "group", "dictionary", "matrix", "stategroup"];
            let fits = w == kind_word || (w == "integer" && kind_word == "number");
            if known.contains(&w) {
                if !fits {
                    return Err(self
                        .cur
                        .error(word_tok.span, format!("'{name}' is a {kind_word} in the model, not a {w}")));
                }
                self.cur.bump();
            }
        }
        let value = match &kind {
            PropertyKind::Number => self.number_value(name)?,
            PropertyKind::Text => self.text_value(name)?,
            PropertyKind::Reference { target } => self.reference_value(name, target.key_arity)?,
            PropertyKind::Group { node } => InitValue::Group(self.init_block(*node, &format!("group '{name}'"))?),
            PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => {
                if word != Some(kind_word) {
                    return Err(self.cur.error(
                        word_tok.span,
                        format!("expected `{kind_word} N ( … )` for '{name}' (N entries, keys \"0\" … \"N-1\")"),
                    ));
                }
                let (size, _) = self.count(&format!("the number of entries of '{name}'"))?;
                if let PropertyKind::Matrix { target, .. } = &kind {
                    if target.key_arity != 1 && size > 0 {
                        return Err(self.cur.error(
                            name_tok.span,
                            format!(
                                "matrix '{name}' has keys of {} components; `initialize` can fill only \
                                 matrices into a dictionary that is not nested",
                                target.key_arity
                            ),
                        ));
                    }
                }
                let items = self.init_block(*node, &format!("the entries of '{name}'"))?;
                InitValue::Collection { size, items }
            }
            PropertyKind::StateGroup { states } => {
                if word != Some(kind_word) {
                    return Err(self.cur.error(
                        word_tok.span,
                        format!("expected `stategroup 'State' ( … )` or `stategroup ( 'State' -> weight ( … ) … )` for '{name}'"),
                    ));
                }
                self.states_value(name, states)?
            }
        };
        let span = Span { start: name_tok.span.start, end: self.cur.last().end };
        Ok(InitItem { property, value, span })
    }

    /// Is the next token the start of the next item or the end of the block (so a leaf has
    /// no value)?
    fn at_item_end(&self) -> bool {
        matches!(self.cur.peek().kind, TokenKind::Name(_) | TokenKind::RParen)
    }

    fn number_value(&mut self, name: &str) -> PResult<InitValue> {
        if self.at_item_end() {
            return Ok(InitValue::Default);
        }
        let t = self.cur.peek();
        match t.kind {
            TokenKind::Int(n) => {
                self.cur.bump();
                Ok(InitValue::Number(*n))
            }
            TokenKind::Word(w) if w == "random" => {
                self.cur.bump();
                if self.cur.at(&TokenKind::LParen) {
                    let open = self.cur.bump().span;
                    let mut values = Vec::new();
                    loop {
                        let t = self.cur.peek();
                        match *t.kind {
                            TokenKind::Int(n) if values.len() < MAX_CHOICES => {
                                self.cur.bump();
                                values.push(n);
                            }
                            TokenKind::RParen if !values.is_empty() => {
                                self.cur.bump();
                                return Ok(InitValue::OneOfNumbers(values));
                            }
                            TokenKind::Eof => return Err(self.cur.unclosed(open)),
                            _ if values.len() >= MAX_CHOICES => {
                                return Err(self.cur.error(t.span, format!("more than {MAX_CHOICES} choices")))
                            }
                            _ => return Err(self.cur.expected("a number or `)` in `random ( … )`")),
                        }
                    }
                }
                let t = self.cur.peek();
                match *t.kind {
                    TokenKind::Int(n) if n > 0 => {
                        self.cur.bump();
                        Ok(InitValue::RandomNumber(n as u64))
                    }
                    TokenKind::Int(n) => {
                        Err(self.cur.error(t.span, format!("`random` needs a positive bound, not {n}")))
                    }
                    _ => Err(self.cur.expected(format_args!(
                        "a bound after `random` for number '{name}' (`random 1000`: 0 … 999) or `( values )`"
                    ))),
                }
            }
            _ => Err(self
                .cur
                .expected(format_args!("a value for number '{name}' (`5`, `random 1000` or `random ( 1 2 3 )`)"))),
        }
    }

    fn text_literal(&self, t: TokenRef) -> Option<String> {
        match t.kind {
            TokenKind::Str(s) | TokenKind::Name(s) => Some(s.clone()),
            _ => None,
        }
    }

    fn text_value(&mut self, name: &str) -> PResult<InitValue> {
        // A quoted 'name' is a text here only in `random ( … )`; elsewhere it starts the next item.
        if matches!(self.cur.peek().kind, TokenKind::RParen | TokenKind::Name(_)) {
            return Ok(InitValue::Default);
        }
        let t = self.cur.peek();
        match t.kind {
            TokenKind::Str(s) => {
                self.cur.bump();
                Ok(InitValue::Text(s.clone()))
            }
            TokenKind::Word(w) if w == "random" => {
                self.cur.bump();
                let open = self
                    .cur
                    .expect(TokenKind::LParen, format_args!("`(` with the texts '{name}' is chosen from"))?
                    .span;
                let mut values = Vec::new();
                loop {
                    let t = self.cur.peek();
                    if let Some(s) = self.text_literal(t) {
                        if values.len() >= MAX_CHOICES {
                            return Err(self.cur.error(t.span, format!("more than {MAX_CHOICES} choices")));
                        }
                        self.cur.bump();
                        values.push(s);
                        continue;
                    }
                    match t.kind {
                        TokenKind::RParen if !values.is_empty() => {
                            self.cur.bump();
                            return Ok(InitValue::OneOfTexts(values));
                        }
                        TokenKind::Eof => return Err(self.cur.unclosed(open)),
                        _ => return Err(self.cur.expected("a text (\"x\" or 'x') or `)` in `random ( … )`")),
                    }
                }
            }
            _ => Err(self.cur.expected(format_args!("a value for text '{name}' (\"text\" or `random ( 'a' 'b' )`)"))),
        }
    }

    fn reference_value(&mut self, name: &str, arity: usize) -> PResult<InitValue> {
        let t = self.cur.peek();
        let compound_hint =
            if arity > 1 { format!(" (its key has {arity} components: [\"a\", \"b\"])") } else { String::new() };
        match t.kind {
            TokenKind::Str(s) if arity == 1 => {
                self.cur.bump();
                Ok(InitValue::ReferenceKey(vec![s.clone()]))
            }
            TokenKind::Int(n) if arity == 1 => {
                self.cur.bump();
                Ok(InitValue::ReferenceKey(vec![n.to_string()]))
            }
            TokenKind::LBracket => {
                let open = self.cur.bump().span;
                let mut parts = Vec::new();
                loop {
                    let t = self.cur.peek();
                    match t.kind {
                        TokenKind::Str(s) => parts.push(s.clone()),
                        TokenKind::Int(n) => parts.push(n.to_string()),
                        TokenKind::Eof => return Err(self.cur.unclosed(open)),
                        _ => return Err(self.cur.expected("a key component (\"key\")")),
                    }
                    self.cur.bump();
                    if parts.len() > arity {
                        return Err(self
                            .cur
                            .error(t.span, format!("reference '{name}' has keys of {arity} components")));
                    }
                    match self.cur.peek().kind {
                        TokenKind::Comma => {
                            self.cur.bump();
                        }
                        TokenKind::RBracket => {
                            self.cur.bump();
                            break;
                        }
                        _ => return Err(self.cur.expected("`,` or `]`")),
                    }
                }
                if parts.len() != arity {
                    return Err(self.cur.error(open, format!("reference '{name}' has keys of {arity} components")));
                }
                Ok(InitValue::ReferenceKey(parts))
            }
            TokenKind::Word(w) if w == "random" => {
                if arity != 1 {
                    return Err(self.cur.error(
                        t.span,
                        format!(
                            "`random` cannot pick a key of {arity} components for reference '{name}'; give the key"
                        ),
                    ));
                }
                self.cur.bump();
                let t = self.cur.peek();
                match *t.kind {
                    TokenKind::Int(n) if n > 0 => {
                        self.cur.bump();
                        Ok(InitValue::RandomReference(Some(n as u64)))
                    }
                    TokenKind::Int(n) => {
                        Err(self.cur.error(t.span, format!("`random` needs a positive bound, not {n}")))
                    }
                    _ => Ok(InitValue::RandomReference(None)),
                }
            }
            _ => Err(self.cur.expected(format_args!(
                "a target for reference '{name}' (`\"key\"`, `random N` or `random`){compound_hint}"
            ))),
        }
    }

    fn states_value(&mut self, name: &str, states: &[espalier_schema::State]) -> PResult<InitValue> {
        let state_index = |p: &Self, s: &str, span: Span| -> PResult<u32> {
            states.iter().position(|st| st.name == s).map(|i| i as u32).ok_or_else(|| {
                let names: Vec<String> = states.iter().map(|s| format!("'{}'", s.name)).collect();
                p.cur
                    .error(span, format!("stategroup '{name}' has no state '{s}'; its states are {}", names.join(", ")))
            })
        };
        let t = self.cur.peek();
        match t.kind {
            TokenKind::Name(s) => {
                self.cur.bump();
                let state = state_index(self, s, t.span)?;
                let node = states[state as usize].node;
                let items = self.init_block(node, &format!("state '{s}'"))?;
                Ok(InitValue::States(vec![StateInit { state, weight: 1, items, span: t.span }]))
            }
            TokenKind::LParen => {
                let open = self.cur.bump().span;
                let mut choices: Vec<StateInit> = Vec::new();
                loop {
                    let t = self.cur.peek();
                    match t.kind {
                        TokenKind::Name(s) => {
                            self.cur.bump();
                            let state = state_index(self, s, t.span)?;
                            if choices.iter().any(|c| c.state == state) {
                                return Err(self.cur.error(t.span, format!("state '{s}' is given twice")));
                            }
                            self.cur.expect(TokenKind::Arrow, format_args!("`->` and a weight after state '{s}'"))?;
                            let (weight, _) = self.count(&format!("a weight for state '{s}' (`'{s}' -> 3 ( )`)"))?;
                            let node = states[state as usize].node;
                            let items = self.init_block(node, &format!("state '{s}'"))?;
                            choices.push(StateInit { state, weight, items, span: t.span });
                        }
                        TokenKind::RParen if !choices.is_empty() => {
                            self.cur.bump();
                            break;
                        }
                        TokenKind::Eof => return Err(self.cur.unclosed(open)),
                        _ => return Err(self.cur.expected("a state name with a weight (`'S' -> 3 ( )`) or `)`")),
                    }
                }
                if choices.iter().map(|c| c.weight).try_fold(0u64, |a, w| a.checked_add(w)).is_none_or(|s| s == 0) {
                    return Err(self
                        .cur
                        .error(open, format!("the weights of stategroup '{name}' must add up to more than 0")));
                }
                Ok(InitValue::States(choices))
            }
            _ => Err(self.cur.expected(format_args!(
                "a state ('State' ( … )) or weighted states (( 'State' -> 3 ( … ) … )) for '{name}'"
            ))),
        }
    }

    // ---- benchmarks ----

    fn benchmarks(&mut self, default_name: &str) -> PResult<Vec<Benchmark>> {
        let mut out: Vec<Benchmark> = Vec::new();
        let mut unnamed = 0usize;
        while !self.cur.at(&TokenKind::Eof) {
            if out.len() >= MAX_BENCHMARKS {
                return Err(self
                    .cur
                    .error(self.cur.peek().span, format!("more than {MAX_BENCHMARKS} benchmarks in one file")));
            }
            let start = self.cur.peek().span;
            let name = if self.cur.eat_word("benchmark") {
                let t = self.cur.peek();
                match t.kind {
                    TokenKind::Name(n) => {
                        self.cur.bump();
                        if out.iter().any(|b| &b.name == n) {
                            return Err(self
                                .cur
                                .error(t.span, format!("a benchmark named '{n}' comes earlier in the file")));
                        }
                        n.clone()
                    }
                    _ => return Err(self.cur.expected("the benchmark's 'name' after `benchmark`")),
                }
            } else {
                unnamed += 1;
                let mut n = if unnamed == 1 { default_name.to_string() } else { format!("{default_name}_{unnamed}") };
                while out.iter().any(|b| b.name == n) {
                    n.push('_');
                }
                n
            };
            if !self.cur.eat_word("repeat") {
                return Err(self.cur.expected("`repeat N ( … )` (or `benchmark 'name' repeat N ( … )`)"));
            }
            let (repeat, repeat_span) = self.count("the number of repetitions after `repeat`")?;
            if repeat == 0 || repeat > MAX_REPEAT {
                return Err(self
                    .cur
                    .error(repeat_span, format!("`repeat` needs 1 … {MAX_REPEAT} repetitions, not {repeat}")));
            }
            // `expect error 'code'` (every run fails so) or `allow error 'code'` (repeatable: runs may
            // also fail so).
            let mut expect: Option<String> = None;
            let mut allow: Vec<String> = Vec::new();
            loop {
                let t = self.cur.peek();
                let word = match t.kind {
                    TokenKind::Word(w) if w == "expect" || w == "allow" => w.clone(),
                    _ => break,
                };
                self.cur.bump();
                if !self.cur.eat_word("error") {
                    return Err(self
                        .cur
                        .expected(format_args!("`error` after `{word}` (`{word} error 'key_exists'`)")));
                }
                let code = match &self.cur.peek().kind {
                    TokenKind::Name(code) | TokenKind::Str(code) => code.clone(),
                    _ => return Err(self.cur.expected("the error code, like 'key_exists'")),
                };
                self.cur.bump();
                if word == "expect" {
                    if expect.is_some() || !allow.is_empty() {
                        return Err(self
                            .cur
                            .error(t.span, "`expect error` excludes other `expect` and `allow` clauses"));
                    }
                    expect = Some(code);
                } else {
                    if expect.is_some() {
                        return Err(self
                            .cur
                            .error(t.span, "`expect error` excludes other `expect` and `allow` clauses"));
                    }
                    allow.push(code);
                }
            }
            let open = self.cur.expect(TokenKind::LParen, "`(` with the instructions to repeat")?.span;
            let words = Words::default();
            let mut parser = Parser::new(self.cur.source(), self.cur.tokens(), ParseOptions { values: Some(&words) });
            parser.set_pos(self.cur.pos());
            let list = parser.instruction_list().map_err(|e| e.0)?;
            self.cur.set_pos(parser.pos());
            let mut read = words.take();
            if list.is_empty() {
                return Err(self.cur.error(open, "a `repeat` needs at least one instruction"));
            }
            if list.len() > MAX_INSTRUCTIONS {
                return Err(self.cur.error(open, format!("more than {MAX_INSTRUCTIONS} instructions in one `repeat`")));
            }
            match self.cur.peek().kind {
                TokenKind::RParen => {
                    self.cur.bump();
                }
                TokenKind::Eof => return Err(self.cur.unclosed(open)),
                _ => return Err(self.cur.expected("`,` between instructions or `)` closing the `repeat`")),
            }
            let params = None;
            let checker = Checker { schema: self.schema, params: &params };
            let several = list.len() > 1;
            let mut instructions = Vec::with_capacity(list.len());
            for (i, instr) in list.into_iter().enumerate() {
                espalier_instruction::validate(&instr.item).map_err(|e| {
                    let span = if e.span == Span::default() { instr.span } else { e.span };
                    self.cur.error(span, e.message)
                })?;
                let plan = checker.check(&instr.item, instr.span).map_err(|e| {
                    let span = if e.span == Span::default() { instr.span } else { e.span };
                    self.cur.error(span, e.message)
                })?;
                let text = self
                    .cur
                    .source()
                    .get(instr.span.start as usize..instr.span.end as usize)
                    .unwrap_or_default()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                let iname = if several { format!("{name}[{}]", i + 1) } else { name.clone() };
                // The values written inside this instruction (they were read in order).
                let inside = read.iter().take_while(|v| v.span.end <= instr.span.end).count();
                let values = read.drain(..inside).collect();
                instructions.push(BenchInstruction { name: iname, text, plan, values, span: instr.span });
            }
            let span = start.to(self.cur.last());
            out.push(Benchmark { name, repeat, expect, allow, instructions, span });
        }
        if out.is_empty() {
            return Err(self
                .cur
                .error(self.cur.peek().span, "expected at least one `repeat N ( … )` after `initialize`"));
        }
        Ok(out)
    }
}
