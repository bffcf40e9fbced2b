//! Tab completion for `espalier shell`: instruction verbs and keywords, the schema's property
//! and command names (quoted as the language writes them: `'Orders'`), and the entry keys of
//! the collection a path names (`get . 'Orders' : "o` → `"o1"`, `"o2"`, …), read from a
//! snapshot: the first [`MAX_KEYS`] in key order, of which those starting with what is typed.
//!
//! [`complete`] is the whole logic as a function of the line, the cursor, the schema's names
//! and a key reader; [`ShellHelper`] hands it to rustyline with the engine as the key reader.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use espalier_instruction::{Engine, Reply};
use espalier_schema::{PropertyKind, Schema};
use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

/// Most entry keys offered for one collection.
pub const MAX_KEYS: usize = 200;

/// Words that start an instruction (and the shell's `help`).
pub const VERBS: &[&str] = &["collection", "command", "explain", "get", "help", "transaction", "update"];

/// The other words of the instruction language.
pub const KEYWORDS: &[&str] = &[
    "after",
    "and",
    "asc",
    "avg",
    "by",
    "count",
    "desc",
    "dictionary",
    "distinct",
    "exists",
    "from",
    "group",
    "in",
    "index",
    "integer",
    "limit",
    "match",
    "matrix",
    "max",
    "min",
    "not",
    "number",
    "offset",
    "or",
    "order",
    "random",
    "reference",
    "remove",
    "select",
    "set",
    "shortest",
    "stategroup",
    "sum",
    "text",
    "to",
    "where",
];

/// The shell's own commands.
pub const DOT_COMMANDS: &[&str] = &[".describe", ".exit", ".format", ".help", ".param", ".quit", ".schema"];

/// The names a schema offers: its properties and commands, with each command's parameters.
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    /// Property names, sorted, each once.
    pub properties: Vec<String>,
    /// Command name → parameter names.
    pub commands: HashMap<String, Vec<String>>,
    /// Collections whose entries a matrix key names with more than one key (not completed).
    pub compound: BTreeSet<String>,
}

impl Vocabulary {
    pub fn of(schema: &Schema) -> Vocabulary {
        let properties: BTreeSet<String> = schema.properties.iter().map(|p| p.name.clone()).collect();
        let commands = schema
            .commands
            .iter()
            .map(|c| (c.name.clone(), c.params.iter().map(|(n, _)| n.clone()).collect()))
            .collect();
        let compound = schema
            .properties
            .iter()
            .filter(|p| match &p.kind {
                PropertyKind::Matrix { target, .. } => {
                    target.down.iter().filter(|s| matches!(s, espalier_schema::DownStep::Dictionary(_))).count() > 1
                }
                _ => false,
            })
            .map(|p| p.name.clone())
            .collect();
        Vocabulary { properties: properties.into_iter().collect(), commands, compound }
    }
}

/// One token of a line: where it starts and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// `'…'`; `closed` is false for a name still being typed.
    Name {
        text: String,
        closed: bool,
    },
    /// `"…"`.
    Str {
        text: String,
        closed: bool,
    },
    Word(String),
    Arrow,
    Punct(char),
}

fn tokens(line: &str) -> Vec<(usize, Tok)> {
    let mut out = Vec::new();
    let mut it = line.char_indices().peekable();
    while let Some((at, c)) = it.next() {
        match c {
            '\'' | '"' => {
                let mut text = String::new();
                let mut closed = false;
                while let Some((_, d)) = it.next() {
                    if d == '\\' {
                        if let Some((_, e)) = it.next() {
                            text.push(e);
                        }
                    } else if d == c {
                        closed = true;
                        break;
                    } else {
                        text.push(d);
                    }
                }
                out.push((at, if c == '\'' { Tok::Name { text, closed } } else { Tok::Str { text, closed } }));
            }
            '-' if it.peek().is_some_and(|(_, d)| *d == '>') => {
                it.next();
                out.push((at, Tok::Arrow));
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let mut text = String::from(c);
                while let Some(&(_, d)) = it.peek() {
                    if d.is_alphanumeric() || d == '_' {
                        text.push(d);
                        it.next();
                    } else {
                        break;
                    }
                }
                out.push((at, Tok::Word(text)));
            }
            c if c.is_whitespace() => {}
            c => out.push((at, Tok::Punct(c))),
        }
    }
    out
}

/// The path that ends just before `colon` (an index into `toks`), if the tokens before it
/// are a node path whose last step is `. 'collection'` or `% 'collection'`: its text, and the
/// collection's name.
fn path_before<'l>(line: &'l str, toks: &[(usize, Tok)], colon: usize) -> Option<(&'l str, String)> {
    // The last step: a name after `.` or `%`.
    let (_, Tok::Name { text: collection, closed: true }) = toks.get(colon.checked_sub(1)?)? else { return None };
    let (_, Tok::Punct('.' | '%')) = toks.get(colon.checked_sub(2)?)? else { return None };
    // Walk back over steps: `. 'n'`, `% 'n'`, `+ 'n'`, `> 'n'`, `? 'n' * 'n'`, `: key`.
    let mut start = colon - 2;
    while let Some(i) = start.checked_sub(1) {
        match &toks[i].1 {
            Tok::Name { closed: true, .. }
                if i >= 1 && matches!(toks[i - 1].1, Tok::Punct('.' | '%' | '+' | '>' | '?' | '*')) =>
            {
                start = i - 1
            }
            // A key: `: "k"`, `: $p`, `: 5`, `: index`, `: random`.
            Tok::Str { closed: true, .. } | Tok::Word(_) if i >= 1 && toks[i - 1].1 == Tok::Punct(':') => start = i - 1,
            // A compound key `: [ … ]`.
            Tok::Punct(']') => {
                let open = (0..i).rev().find(|&j| toks[j].1 == Tok::Punct('['))?;
                if open >= 1 && toks[open - 1].1 == Tok::Punct(':') {
                    start = open - 1;
                } else {
                    break;
                }
            }
            _ => break,
        }
    }
    if !matches!(toks[start].1, Tok::Punct('.' | '%' | '+' | '?')) {
        return None;
    }
    Some((line[toks[start].0..toks[colon].0].trim_end(), collection.clone()))
}

/// A query reading the keys of the collection at the end of `path` (`. 'Orders' : "o1" %
/// 'Lines'`): the last step is selected from the node the rest names.
pub fn keys_query(path: &str) -> Option<String> {
    let toks = tokens(path);
    let n = toks.len();
    if n < 2 || !matches!(toks[n - 2].1, Tok::Punct('.' | '%')) {
        return None;
    }
    let (node, last) = path.split_at(toks[n - 2].0);
    let node = node.trim();
    Some(if node.is_empty() {
        format!("collection select {last} limit {MAX_KEYS}")
    } else {
        format!("collection {node} select {last} limit {MAX_KEYS}")
    })
}

/// A key as the language writes it: `"o1"`.
fn quote_key(k: &str) -> String {
    format!("\"{}\"", k.replace('\\', "\\\\").replace('"', "\\\""))
}

fn quote_name(n: &str) -> String {
    format!("'{}'", n.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// The candidates for the word at `pos` in `line`: where the word starts (a byte offset) and
/// the texts that may replace it. `keys(path)` gives the entry keys of the collection a path
/// names (the text of the path, e.g. `. 'Orders'`).
pub fn complete(
    line: &str,
    pos: usize,
    vocab: &Vocabulary,
    keys: &dyn Fn(&str) -> Vec<String>,
) -> (usize, Vec<String>) {
    let pos = pos.min(line.len());
    let before = &line[..pos];
    let toks = tokens(before);
    let trimmed = before.trim_start();
    // Shell commands.
    if trimmed.starts_with('.') && !trimmed.contains(char::is_whitespace) {
        let start = pos - trimmed.len();
        return (start, DOT_COMMANDS.iter().filter(|c| c.starts_with(trimmed)).map(|c| c.to_string()).collect());
    }
    // The word being typed: an open name or string, or a bare word, or nothing.
    let (start, partial, kind) = match toks.last() {
        Some((at, Tok::Name { text, closed: false })) => (*at, text.clone(), '\''),
        Some((at, Tok::Str { text, closed: false })) => (*at, text.clone(), '"'),
        Some((at, Tok::Word(w))) if *at + w.len() == pos => (*at, w.clone(), 'w'),
        _ => (pos, String::new(), ' '),
    };
    // The tokens before that word.
    let prior = if kind == ' ' { &toks[..] } else { &toks[..toks.len() - 1] };
    let matching = |items: Vec<String>| -> Vec<String> {
        let mut v: Vec<String> = items.into_iter().filter(|c| c.starts_with(&partial) || partial.is_empty()).collect();
        v.sort();
        v.dedup();
        v
    };
    // After `: ` a key of the collection the path names.
    if matches!(prior.last(), Some((_, Tok::Punct(':')))) && kind != '\'' {
        if let Some((path, collection)) = path_before(before, prior, prior.len() - 1) {
            if vocab.compound.contains(&collection) {
                return (start, Vec::new());
            }
            let found: Vec<String> =
                keys(path).into_iter().filter(|k| k.starts_with(&partial)).take(MAX_KEYS).collect();
            return (start, found.iter().map(|k| quote_key(k)).collect());
        }
    }
    // The first word: a verb.
    if prior.is_empty() && kind != '\'' && kind != '"' {
        return (start, matching(VERBS.iter().map(|v| v.to_string()).collect()));
    }
    if kind == '"' {
        return (start, Vec::new());
    }
    // After `command`, its name; inside `command 'name' ( …`, its parameters.
    let names: Vec<String> = match prior {
        [.., (_, Tok::Word(w))] if w == "command" => vocab.commands.keys().cloned().collect(),
        _ => match open_command(prior) {
            Some(c) => vocab.commands.get(&c).cloned().unwrap_or_default(),
            None => vocab.properties.clone(),
        },
    };
    match kind {
        '\'' => (start, matching(names).into_iter().map(|n| quote_name(&n)).collect()),
        'w' => (start, matching(KEYWORDS.iter().map(|k| k.to_string()).collect())),
        _ => (start, names.iter().map(|n| quote_name(n)).collect::<BTreeSet<_>>().into_iter().collect()),
    }
}

/// Inside the parentheses of `command 'name' ( …`: the command's name.
fn open_command(toks: &[(usize, Tok)]) -> Option<String> {
    let mut depth = 0i32;
    for i in (0..toks.len()).rev() {
        match &toks[i].1 {
            Tok::Punct(')') => depth += 1,
            Tok::Punct('(') if depth > 0 => depth -= 1,
            Tok::Punct('(') => {
                return match (toks.get(i.checked_sub(2)?).map(|t| &t.1), toks.get(i - 1).map(|t| &t.1)) {
                    (Some(Tok::Word(w)), Some(Tok::Name { text, closed: true })) if w == "command" => {
                        Some(text.clone())
                    }
                    _ => None,
                };
            }
            _ => {}
        }
    }
    None
}

/// The entry keys of the collection `path` names, from a snapshot (at most [`MAX_KEYS`]).
pub fn read_keys(engine: &Engine, path: &str) -> Vec<String> {
    let Some(query) = keys_query(path) else { return Vec::new() };
    match engine.execute_text(&query, &HashMap::new()) {
        Ok(Reply::Query(q)) => q.rows.into_iter().filter_map(|r| r.key.last().cloned()).collect(),
        _ => Vec::new(),
    }
}

/// rustyline's helper: completion only (no hints, highlighting or validation).
pub struct ShellHelper {
    pub engine: Arc<Engine>,
    pub vocab: Vocabulary,
}

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, found) = complete(line, pos, &self.vocab, &|path| read_keys(&self.engine, path));
        Ok((start, found.into_iter().map(|c| Pair { display: c.clone(), replacement: c }).collect()))
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {}

impl Validator for ShellHelper {}

impl Helper for ShellHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vocabulary {
        let mut commands = HashMap::new();
        commands.insert("pulse".to_string(), vec!["machine".to_string()]);
        commands.insert("start task".to_string(), vec!["machine".into(), "order".into(), "time".into()]);
        Vocabulary {
            properties: ["Client", "Clients", "Lines", "Machines", "Name", "Orders", "Quantity"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            commands,
            compound: BTreeSet::new(),
        }
    }

    /// Completes `line` at its end (or at `|`), with keys `o1 o2 o3` for `. 'Orders'` and
    /// `bolt nut` for the lines of an order.
    fn at(line: &str) -> (usize, Vec<String>) {
        let (line, pos) = match line.find('|') {
            Some(p) => (line.replacen('|', "", 1), p),
            None => (line.to_string(), line.len()),
        };
        let keys = |path: &str| -> Vec<String> {
            match path {
                ". 'Orders'" => vec!["o1".into(), "o2".into(), "o3".into()],
                ". 'Orders' : \"o1\" % 'Lines'" => vec!["bolt".into(), "nut".into()],
                other => panic!("keys of {other:?}"),
            }
        };
        complete(&line, pos, &vocab(), &keys)
    }

    fn texts(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn verbs_first_then_keywords() {
        assert_eq!(at(""), (0, texts(VERBS)));
        assert_eq!(at("up"), (0, texts(&["update"])));
        assert_eq!(at("  co"), (2, texts(&["collection", "command"])));
        assert_eq!(at("he"), (0, texts(&["help"])));
        assert_eq!(at("collection sel"), (11, texts(&["select"])));
        assert_eq!(at("collection select . 'Orders' li"), (29, texts(&["limit"])));
        assert_eq!(at(".f"), (0, texts(&[".format"])));
        assert_eq!(at(".q"), (0, texts(&[".quit"])));
    }

    #[test]
    fn names_quoted_as_the_language_writes_them() {
        assert_eq!(at("get . 'Or"), (6, texts(&["'Orders'"])));
        assert_eq!(at("get . 'Cl"), (6, texts(&["'Client'", "'Clients'"])));
        assert_eq!(
            at("get . '"),
            (6, texts(&["'Client'", "'Clients'", "'Lines'", "'Machines'", "'Name'", "'Orders'", "'Quantity'"]))
        );
        // Without an opening quote, after a step: every name.
        assert_eq!(at("get . ").1.len(), 7);
        // In the middle of a line, the word before the cursor.
        assert_eq!(at("get . 'Or| : \"o1\""), (6, texts(&["'Orders'"])));
        // Commands, and their parameters inside the parentheses.
        assert_eq!(at("command '"), (8, texts(&["'pulse'", "'start task'"])));
        assert_eq!(at("command 'pulse' ( '"), (18, texts(&["'machine'"])));
        assert_eq!(at("command 'start task' ( 'machine' -> \"M1\" 'o"), (41, texts(&["'order'"])));
    }

    #[test]
    fn keys_of_the_collection_the_path_names() {
        assert_eq!(at("get . 'Orders' : "), (17, texts(&["\"o1\"", "\"o2\"", "\"o3\""])));
        assert_eq!(at("get . 'Orders' : \"o"), (17, texts(&["\"o1\"", "\"o2\"", "\"o3\""])));
        assert_eq!(at("update . 'Orders' : \"o2"), (20, texts(&["\"o2\""])));
        assert_eq!(at("get . 'Orders' : \"o1\" % 'Lines' : \"n"), (34, texts(&["\"nut\""])));
        assert_eq!(at("collection . 'Orders' : "), (24, texts(&["\"o1\"", "\"o2\"", "\"o3\""])));
        // Not a path: a projection's `:` offers names, not keys.
        assert_eq!(at("collection select . 'Orders' 'q' -> number : '").1.len(), 7);
        // A string elsewhere: nothing.
        assert_eq!(at("update . 'Orders' : \"o1\" ( 'Name' -> text \"A").1, Vec::<String>::new());
    }

    /// On the demo database: the schema's names, and keys read from a snapshot.
    #[test]
    fn the_demo_database_completes_its_names_and_keys() {
        let dir = tempfile::tempdir().unwrap();
        let options = espalier_transaction::DatabaseOptions {
            durability: espalier_transaction::Durability::None,
            ..Default::default()
        };
        let engine = Engine::create(&dir.path().join("db"), crate::db::DEMO_SCHEMA, options).unwrap();
        crate::db::run_all(&engine, crate::db::DEMO_DATA, &HashMap::new(), |_| {}).unwrap();
        let vocab = Vocabulary::of(engine.schema());
        let keys = |path: &str| read_keys(&engine, path);
        let run = |line: &str| complete(line, line.len(), &vocab, &keys);
        assert_eq!(run("get . 'Ord"), (6, texts(&["'Orders'"])));
        assert_eq!(run("get . 'Orders' : \"o"), (17, texts(&["\"o1\"", "\"o2\"", "\"o3\""])));
        assert_eq!(run("get . 'Orders' : \"o1\" % 'Lines' : "), (34, texts(&["\"bolt-m8\"", "\"nut-m8\""])));
        assert_eq!(run("update . 'Machines' : \"M").1, texts(&["\"M1\"", "\"M2\"", "\"M3\""]));
        assert_eq!(run("command 'pu"), (8, texts(&["'pulse'"])));
        assert_eq!(run("command 'pulse' ( '"), (18, texts(&["'machine'"])));
        // A path that names no collection, or a missing entry: nothing, no error.
        assert!(run("get . 'Orders' : \"nope\" % 'Lines' : ").1.is_empty());
        assert!(run("get . 'Nope' : ").1.is_empty());
        // Bounded: of a collection of 1003 entries the first MAX_KEYS are read (then those
        // with the prefix typed are offered).
        let adds: Vec<String> =
            (0..1000).map(|i| format!("update ( 'Products' -> dictionary \"x{i:04}\" ( ) )")).collect();
        crate::db::run_all(&engine, &format!("transaction ( {} )", adds.join(" , ")), &HashMap::new(), |_| {}).unwrap();
        assert_eq!(run("get . 'Products' : ").1.len(), MAX_KEYS);
        assert_eq!(run("get . 'Products' : \"x").1.len(), MAX_KEYS - 3);
    }

    #[test]
    fn key_queries_select_the_last_step() {
        assert_eq!(keys_query(". 'Orders'").as_deref(), Some("collection select . 'Orders' limit 200"));
        assert_eq!(
            keys_query(". 'Orders' : \"o1\" % 'Lines'").as_deref(),
            Some("collection . 'Orders' : \"o1\" select % 'Lines' limit 200")
        );
        assert_eq!(keys_query("'Orders'"), None);
    }
}
