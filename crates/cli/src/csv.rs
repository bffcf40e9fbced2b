//! `espalier import --csv` and `espalier export --csv`: one root collection per CSV file.
//!
//! A file's header names the columns: `key` (the entry's key) and properties of the
//! collection's entries (numbers, texts, references by the target's key, stategroups by state
//! name). Each row becomes one entry. Everything is read and checked first — the header, every
//! value, keys that already exist or repeat, references to keys that exist neither in the
//! database nor in the files — and errors name `file:line:column`; then all rows of all files
//! are written as one instruction, so either everything is imported or nothing is.
//!
//! Built on instructions (updates and collection queries through the engine), not on the
//! storage layout. The CSV reader is RFC 4180 (quoted fields, `""` escapes, line breaks inside
//! quotes, CRLF or LF) and tracks the line and column where each field starts.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use espalier_instruction::ast::{Instruction, Item, LeafKind, Located, Op, Projection, Query, Start, Step, Value};
use espalier_instruction::{Engine, Reply};
use espalier_schema::{PropertyKind, Schema};

use crate::{db, Failure, Global};

/// An entry count per query page of `export --csv`.
const PAGE: u64 = 10_000;

/// Why a CSV import or export failed; `file:line:column: reason` where there is a place.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("{file}:{line}:{column}: {reason}")]
    At { file: String, line: u64, column: u64, reason: String },
    #[error("{file}: {reason}")]
    File { file: String, reason: String },
    #[error("{0}")]
    Other(String),
}

fn at(file: &str, line: u64, column: u64, reason: impl Into<String>) -> CsvError {
    CsvError::At { file: file.to_string(), line, column, reason: reason.into() }
}

/// One field and where it started (1-based).
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub text: String,
    pub line: u64,
    pub column: u64,
}

/// A streaming RFC 4180 reader.
pub struct Reader<R> {
    input: io::Bytes<R>,
    peeked: Option<u8>,
    line: u64,
    column: u64,
    bytes: u64,
    file: String,
}

impl<R: BufRead> Reader<R> {
    pub fn new(input: R, file: &str) -> Self {
        Reader { input: input.bytes(), peeked: None, line: 1, column: 1, bytes: 0, file: file.to_string() }
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn next_byte(&mut self) -> Result<Option<u8>, CsvError> {
        let b = match self.peeked.take() {
            Some(b) => Some(b),
            None => match self.input.next() {
                None => None,
                Some(Ok(b)) => Some(b),
                Some(Err(e)) => return Err(CsvError::File { file: self.file.clone(), reason: e.to_string() }),
            },
        };
        if let Some(b) = b {
            self.bytes += 1;
            if b == b'\n' {
                self.line += 1;
                self.column = 1;
            } else if b & 0xC0 != 0x80 {
                // Columns count characters: continuation bytes of UTF-8 do not advance it.
                self.column += 1;
            }
        }
        Ok(b)
    }

    fn peek(&mut self) -> Result<Option<u8>, CsvError> {
        if self.peeked.is_none() {
            self.peeked = match self.input.next() {
                None => None,
                Some(Ok(b)) => Some(b),
                Some(Err(e)) => return Err(CsvError::File { file: self.file.clone(), reason: e.to_string() }),
            };
        }
        Ok(self.peeked)
    }

    /// The next record, or None at the end of the input. Blank lines are skipped.
    pub fn record(&mut self) -> Result<Option<Vec<Field>>, CsvError> {
        loop {
            match self.peek()? {
                None => return Ok(None),
                Some(b'\n') => {
                    self.next_byte()?;
                }
                Some(b'\r') => {
                    self.next_byte()?;
                }
                Some(_) => break,
            }
        }
        let mut fields = Vec::new();
        loop {
            let (line, column) = (self.line, self.column);
            let mut raw = Vec::new();
            if self.peek()? == Some(b'"') {
                self.next_byte()?;
                loop {
                    match self.next_byte()? {
                        None => return Err(at(&self.file, line, column, "a quoted field is not closed")),
                        Some(b'"') if self.peek()? == Some(b'"') => {
                            self.next_byte()?;
                            raw.push(b'"');
                        }
                        Some(b'"') => break,
                        Some(b) => raw.push(b),
                    }
                }
                match self.peek()? {
                    None | Some(b',') | Some(b'\n') | Some(b'\r') => {}
                    Some(_) => {
                        return Err(at(
                            &self.file,
                            self.line,
                            self.column,
                            "text after a closing quote (a quote inside a quoted field is written \"\")",
                        ))
                    }
                }
            } else {
                loop {
                    match self.peek()? {
                        None | Some(b',') | Some(b'\n') | Some(b'\r') => break,
                        Some(b'"') => {
                            return Err(at(
                                &self.file,
                                self.line,
                                self.column,
                                "a quote inside an unquoted field (quote the whole field)",
                            ))
                        }
                        Some(b) => {
                            self.next_byte()?;
                            raw.push(b);
                        }
                    }
                }
            }
            let text = String::from_utf8(raw).map_err(|_| at(&self.file, line, column, "the field is not UTF-8"))?;
            fields.push(Field { text, line, column });
            match self.next_byte()? {
                Some(b',') => continue,
                Some(b'\r') => {
                    if self.peek()? == Some(b'\n') {
                        self.next_byte()?;
                    }
                    return Ok(Some(fields));
                }
                None | Some(b'\n') => return Ok(Some(fields)),
                Some(_) => return Ok(Some(fields)),
            }
        }
    }
}

/// How a column's cells become an item.
#[derive(Debug, Clone)]
enum Column {
    Number,
    Text,
    /// A reference into the root collection of this name, by key.
    Reference(String),
    StateGroup(Vec<String>),
}

/// The root collections that CSV can fill: dictionaries of the root.
fn root_collection<'s>(schema: &'s Schema, name: &str) -> Option<&'s espalier_schema::Property> {
    let p = schema.find(schema.root().id, name)?;
    matches!(p.kind, PropertyKind::Dictionary { .. }).then_some(p)
}

/// The columns of a collection's entries that CSV can hold, in declaration order, or why a
/// property cannot be a column.
fn column_of(schema: &Schema, p: &espalier_schema::Property) -> Result<Column, String> {
    if p.derived.is_some() {
        return Err(format!("'{}' is derived: its value is computed, not imported", p.name));
    }
    match &p.kind {
        PropertyKind::Number => Ok(Column::Number),
        PropertyKind::Text => Ok(Column::Text),
        PropertyKind::Reference { target } => {
            let d = schema.property(target.dictionary);
            if target.key_arity == 1 && d.owner == schema.root().id {
                Ok(Column::Reference(d.name.clone()))
            } else {
                Err(format!("'{}' refers into a nested collection: CSV takes references into root collections", p.name))
            }
        }
        PropertyKind::StateGroup { states } => Ok(Column::StateGroup(states.iter().map(|s| s.name.clone()).collect())),
        PropertyKind::Group { .. } | PropertyKind::Dictionary { .. } | PropertyKind::Matrix { .. } => Err(format!(
            "'{}' is a {}: a CSV column holds a number, text, reference or state",
            p.name,
            p.kind.keyword()
        )),
    }
}

/// `[COLLECTION=]FILE`: the collection is the file's name without `.csv` unless given.
pub fn parse_spec(spec: &str) -> (String, PathBuf) {
    if let Some((name, file)) = spec.split_once('=') {
        if !name.is_empty() && !file.is_empty() {
            return (name.to_string(), PathBuf::from(file));
        }
    }
    let path = PathBuf::from(spec);
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    (name, path)
}

fn loc<T>(item: T) -> Located<T> {
    Located { item, span: Default::default() }
}

/// The keys of a root collection now in the database.
fn existing_keys(engine: &Engine, collection: &str) -> Result<HashSet<String>, CsvError> {
    let mut keys = HashSet::new();
    let mut last: Option<String> = None;
    loop {
        let rows = query_page(engine, collection, &[], last.as_deref())?;
        let n = rows.rows.len() as u64;
        let before = keys.len();
        for key in rows.rows.into_iter().filter_map(|r| r.key.into_iter().next()) {
            last = Some(key.clone());
            keys.insert(key);
        }
        // A page that adds no key would repeat forever: entries have distinct keys.
        if n < PAGE || keys.len() == before {
            return Ok(keys);
        }
    }
}

/// One page of a root collection's entries after key `after` (from the first without one): a
/// key-range read, so each page costs its own rows, not the rows before it.
fn query_page(
    engine: &Engine,
    collection: &str,
    projections: &[(String, LeafKind)],
    after: Option<&str>,
) -> Result<espalier_instruction::QueryResult, CsvError> {
    let query = Instruction::Query(Query {
        path: vec![],
        select: vec![loc(Step::Dictionary { name: collection.to_string(), key: None })],
        projections: projections
            .iter()
            .map(|(name, kind)| {
                loc(Projection { alias: name.clone(), path: vec![], kind: *kind, property: name.clone(), filter: None })
            })
            .collect(),
        limit: Some(PAGE),
        offset: None,
        start: after.map(|k| Start::After(loc(Value::Text(k.to_string())))),
    });
    let plan = engine.check(&query, None).map_err(|e| CsvError::Other(format!("reading '{collection}': {e}")))?;
    match engine.run(&plan, &HashMap::new(), None) {
        Ok(Reply::Query(rows)) => Ok(rows),
        Ok(_) => Err(CsvError::Other(format!("reading '{collection}': not a query reply"))),
        Err(e) => Err(CsvError::Other(format!("reading '{collection}': {e}"))),
    }
}

/// A file read and checked: its entries as items of the root's update.
struct Parsed {
    collection: String,
    items: Vec<Located<Item>>,
    references: Vec<(String, String, String, u64, u64)>, // (target collection, key, file, line, column)
}

/// Imports every `[COLLECTION=]FILE` into the database at `--db`, all or nothing.
pub fn import(g: &Global, specs: &[String]) -> Result<(), Failure> {
    let engine = db::open(g)?;
    let total: u64 = specs.iter().filter_map(|s| std::fs::metadata(parse_spec(s).1).ok()).map(|m| m.len()).sum();
    let progress = crate::dump::bar(
        Some(total),
        "{spinner} importing CSV: {bar:30} {bytes}/{total_bytes} ({bytes_per_sec}) {elapsed}",
    );
    let result = import_files(&engine, specs, &mut |n| progress.set_position(n));
    progress.finish_and_clear();
    let (entries, version) = result.map_err(|e| Failure::other(format!("{e}; nothing was imported")))?;
    if g.json {
        println!(
            "{}",
            serde_json::json!({"database": g.db.display().to_string(), "entries": entries, "version": version})
        );
    } else {
        eprintln!(
            "imported {entries} entries from {} file(s) into {} (version {version})",
            specs.len(),
            g.db.display()
        );
    }
    Ok(())
}

/// The import itself: entries imported and the commit's version.
pub fn import_files(engine: &Engine, specs: &[String], progress: &mut dyn FnMut(u64)) -> Result<(u64, u64), CsvError> {
    let schema = engine.schema();
    let mut parsed = Vec::new();
    let mut new_keys: HashMap<String, HashSet<String>> = HashMap::new();
    let mut existing: HashMap<String, HashSet<String>> = HashMap::new();
    let mut done_bytes = 0;
    let mut seen_collections = HashMap::new();
    for spec in specs {
        let (collection, path) = parse_spec(spec);
        let file = path.display().to_string();
        if let Some(other) = seen_collections.insert(collection.clone(), file.clone()) {
            return Err(CsvError::File { file, reason: format!("'{collection}' is also imported from {other}") });
        }
        let p = root_collection(schema, &collection).ok_or_else(|| CsvError::File {
            file: file.clone(),
            reason: format!(
                "the root has no collection '{collection}' (name the file after it, or write 'Collection'=FILE)"
            ),
        })?;
        let PropertyKind::Dictionary { node } = p.kind else {
            return Err(CsvError::File { file, reason: format!("'{collection}' is not a dictionary") });
        };
        if !existing.contains_key(&collection) {
            existing.insert(collection.clone(), existing_keys(engine, &collection)?);
        }
        let input = File::open(&path).map_err(|e| CsvError::File { file: file.clone(), reason: e.to_string() })?;
        let mut reader = Reader::new(BufReader::with_capacity(1 << 16, input), &file);
        let header = reader.record()?.ok_or_else(|| at(&file, 1, 1, "the file is empty: it needs a header line"))?;
        let mut columns: Vec<Option<(String, Column)>> = Vec::new();
        let mut key_column = None;
        let mut names = HashSet::new();
        for (i, h) in header.iter().enumerate() {
            if !names.insert(h.text.clone()) {
                return Err(at(&file, h.line, h.column, format!("column '{}' is named twice", h.text)));
            }
            if h.text == "key" {
                key_column = Some(i);
                columns.push(None);
                continue;
            }
            let node_type = schema.node_type(node);
            let prop = node_type.by_name.get(&h.text).map(|id| schema.property(*id)).ok_or_else(|| {
                let known: Vec<&str> =
                    node_type.properties.iter().map(|id| schema.property(*id).name.as_str()).collect();
                at(
                    &file,
                    h.line,
                    h.column,
                    format!(
                        "'{collection}' entries have no property '{}' (they have key, {})",
                        h.text,
                        known.join(", ")
                    ),
                )
            })?;
            let column = column_of(schema, prop).map_err(|reason| at(&file, h.line, h.column, reason))?;
            columns.push(Some((h.text.clone(), column)));
        }
        let key_column =
            key_column.ok_or_else(|| at(&file, 1, 1, "the header has no `key` column (the entries' keys)"))?;
        let mut items = Vec::new();
        let mut references = Vec::new();
        let mut keys: HashMap<String, u64> = HashMap::new();
        while let Some(record) = reader.record()? {
            progress(done_bytes + reader.bytes());
            let line = record[0].line;
            if record.len() != header.len() {
                let last = &record[record.len() - 1];
                return Err(at(
                    &file,
                    line,
                    last.column,
                    format!("the row has {} fields; the header has {}", record.len(), header.len()),
                ));
            }
            let key = &record[key_column];
            if key.text.is_empty() {
                return Err(at(&file, key.line, key.column, "the key is empty"));
            }
            if let Some(first) = keys.insert(key.text.clone(), key.line) {
                return Err(at(
                    &file,
                    key.line,
                    key.column,
                    format!("duplicate key \"{}\" (first on line {first})", key.text),
                ));
            }
            if existing.get(&collection).is_some_and(|k| k.contains(&key.text)) {
                return Err(at(
                    &file,
                    key.line,
                    key.column,
                    format!("key \"{}\" already exists in '{collection}'", key.text),
                ));
            }
            let mut entry = Vec::new();
            for (field, column) in record.iter().zip(&columns) {
                let Some((name, column)) = column else { continue };
                if field.text.is_empty() {
                    continue; // the property keeps its default
                }
                let op = match column {
                    Column::Number => {
                        let n: i64 = field.text.trim().parse().map_err(|_| {
                            at(
                                &file,
                                field.line,
                                field.column,
                                format!("'{name}' is a number: \"{}\" is not a whole number", field.text),
                            )
                        })?;
                        Op::SetNumber(Value::Int(n))
                    }
                    Column::Text => Op::SetText(Value::Text(field.text.clone())),
                    Column::Reference(target) => {
                        references.push((target.clone(), field.text.clone(), file.clone(), field.line, field.column));
                        Op::SetReference(Value::Text(field.text.clone()))
                    }
                    Column::StateGroup(states) => {
                        if !states.contains(&field.text) {
                            return Err(at(
                                &file,
                                field.line,
                                field.column,
                                format!("'{name}' has no state '{}' (its states: {})", field.text, states.join(", ")),
                            ));
                        }
                        Op::SwitchState { state: Value::Text(field.text.clone()), items: vec![] }
                    }
                };
                entry.push(loc(Item { name: name.clone(), op }));
            }
            items.push(loc(Item {
                name: collection.clone(),
                op: Op::AddEntry { key: Value::Text(key.text.clone()), items: entry },
            }));
        }
        done_bytes += reader.bytes();
        new_keys.insert(collection.clone(), keys.into_keys().collect());
        parsed.push(Parsed { collection, items, references });
    }
    // Every reference names a key that exists or is imported now.
    for p in &parsed {
        for (target, key, file, line, column) in &p.references {
            if !existing.contains_key(target) {
                existing.insert(target.clone(), existing_keys(engine, target)?);
            }
            let known = existing.get(target).is_some_and(|k| k.contains(key))
                || new_keys.get(target).is_some_and(|k| k.contains(key));
            if !known {
                return Err(at(file, *line, *column, format!("unknown key \"{key}\": '{target}' has no such entry")));
            }
        }
    }
    // Collections that others refer to go first, so references find their targets.
    let order = dependency_order(&parsed);
    let mut items = Vec::new();
    let mut entries = 0u64;
    for i in order {
        entries += parsed[i].items.len() as u64;
        items.append(&mut parsed[i].items);
    }
    if items.is_empty() {
        return Ok((0, engine.database().version()));
    }
    let update = Instruction::Update { path: vec![], items };
    let plan = engine.check(&update, None).map_err(|e| CsvError::Other(format!("checking the import: {e}")))?;
    match engine.run(&plan, &HashMap::new(), None) {
        Ok(Reply::Done { version, .. }) => Ok((entries, version)),
        Ok(_) => Err(CsvError::Other("the import's write did not answer `done`".into())),
        Err(e) => Err(CsvError::Other(format!("writing the import: {e}"))),
    }
}

/// Files in an order where each collection comes after the collections it refers to (in the
/// files' order where there is no dependency, or a cycle).
fn dependency_order(parsed: &[Parsed]) -> Vec<usize> {
    let mut order = Vec::new();
    let mut placed = vec![false; parsed.len()];
    while order.len() < parsed.len() {
        let mut progress = false;
        for i in 0..parsed.len() {
            if placed[i] {
                continue;
            }
            let waits = parsed[i].references.iter().any(|(target, ..)| {
                target != &parsed[i].collection
                    && parsed.iter().enumerate().any(|(j, p)| !placed[j] && j != i && &p.collection == target)
            });
            if !waits {
                placed[i] = true;
                order.push(i);
                progress = true;
            }
        }
        if !progress {
            // A cycle: the rest in the files' order.
            for (i, p) in placed.iter_mut().enumerate() {
                if !*p {
                    *p = true;
                    order.push(i);
                }
            }
        }
    }
    order
}

/// Writes one `COLLECTION.csv` per root collection (or those named) into `dir`.
pub fn export(g: &Global, dir: &Path, only: &[String]) -> Result<(), Failure> {
    let engine = db::open(g)?;
    let progress = crate::dump::bar(None, "{spinner} exporting CSV: {human_pos} entries ({per_sec}) {elapsed}");
    let result = export_dir(&engine, dir, only, &mut |n| progress.set_position(n));
    progress.finish_and_clear();
    let written = result.map_err(|e| Failure::other(e.to_string()))?;
    for (file, rows, skipped) in &written {
        if !skipped.is_empty() {
            eprintln!("{file}: not written (CSV holds numbers, texts, references and states): {}", skipped.join(", "));
        }
        if !g.json {
            eprintln!("exported {rows} entries to {file}");
        }
    }
    if g.json {
        let files: Vec<_> = written
            .iter()
            .map(|(f, rows, skipped)| serde_json::json!({"file": f, "entries": rows, "skipped": skipped}))
            .collect();
        println!("{}", serde_json::json!({ "files": files }));
    }
    Ok(())
}

/// The export: per file written, its name, its entry count and the properties left out.
pub fn export_dir(
    engine: &Engine,
    dir: &Path,
    only: &[String],
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<(String, u64, Vec<String>)>, CsvError> {
    let schema = engine.schema();
    std::fs::create_dir_all(dir)
        .map_err(|e| CsvError::File { file: dir.display().to_string(), reason: e.to_string() })?;
    let root = schema.root();
    let collections: Vec<&espalier_schema::Property> = root
        .properties
        .iter()
        .map(|id| schema.property(*id))
        .filter(|p| matches!(p.kind, PropertyKind::Dictionary { .. }))
        .filter(|p| only.is_empty() || only.contains(&p.name))
        .collect();
    for name in only {
        if !collections.iter().any(|p| &p.name == name) {
            return Err(CsvError::Other(format!("the root has no collection '{name}'")));
        }
    }
    let mut written = Vec::new();
    let mut exported = 0u64;
    for p in collections {
        let PropertyKind::Dictionary { node } = p.kind else { continue };
        let mut columns = Vec::new();
        let mut skipped = Vec::new();
        for id in &schema.node_type(node).properties {
            let q = schema.property(*id);
            match column_of(schema, q) {
                Ok(Column::Number) => columns.push((q.name.clone(), LeafKind::Number)),
                Ok(Column::Text) => columns.push((q.name.clone(), LeafKind::Text)),
                Ok(Column::Reference(_)) => columns.push((q.name.clone(), LeafKind::Reference)),
                Ok(Column::StateGroup(_)) => {
                    columns.push((q.name.clone(), LeafKind::Stategroup));
                    if let PropertyKind::StateGroup { states } = &q.kind {
                        if states.iter().any(|st| !schema.node_type(st.node).properties.is_empty()) {
                            skipped.push(format!("the properties of '{}''s states (the state is written)", q.name));
                        }
                    }
                }
                Err(_) => skipped.push(q.name.clone()),
            }
        }
        let path = dir.join(format!("{}.csv", p.name));
        let file = path.display().to_string();
        let fail = |e: io::Error| CsvError::File { file: file.clone(), reason: e.to_string() };
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
        let mut rows = 0u64;
        {
            let mut out = BufWriter::with_capacity(1 << 16, tmp.as_file_mut());
            let header: Vec<&str> = std::iter::once("key").chain(columns.iter().map(|(n, _)| n.as_str())).collect();
            write_record(&mut out, header.iter().copied()).map_err(fail)?;
            let mut last: Option<String> = None;
            loop {
                let page = query_page(engine, &p.name, &columns, last.as_deref())?;
                let n = page.rows.len() as u64;
                let previous = last.clone();
                for row in page.rows {
                    let key = row.key.into_iter().next().unwrap_or_default();
                    last = Some(key.clone());
                    let values: Vec<String> = row.values.iter().map(cell).collect();
                    write_record(&mut out, std::iter::once(key.as_str()).chain(values.iter().map(String::as_str)))
                        .map_err(fail)?;
                }
                rows += n;
                exported += n;
                progress(exported);
                // A full page whose last key did not move on would repeat forever.
                if n < PAGE || last == previous {
                    break;
                }
            }
            out.flush().map_err(fail)?;
        }
        tmp.as_file_mut().sync_all().map_err(fail)?;
        tmp.persist(&path).map_err(|e| fail(e.error))?;
        written.push((file, rows, skipped));
    }
    Ok(written)
}

/// A query cell as CSV text: absent (null) is empty.
fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts.iter().map(cell).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn write_record<'a>(out: &mut impl Write, fields: impl Iterator<Item = &'a str>) -> io::Result<()> {
    for (i, f) in fields.enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        if f.contains([',', '"', '\n', '\r']) {
            out.write_all(b"\"")?;
            out.write_all(f.replace('"', "\"\"").as_bytes())?;
            out.write_all(b"\"")?;
        } else {
            out.write_all(f.as_bytes())?;
        }
    }
    out.write_all(b"\r\n")
}

/// Reads a whole CSV text (for tests).
#[cfg(test)]
fn records(text: &str) -> Result<Vec<Vec<String>>, CsvError> {
    let mut r = Reader::new(text.as_bytes(), "t.csv");
    let mut out = Vec::new();
    while let Some(rec) = r.record()? {
        out.push(rec.into_iter().map(|f| f.text).collect());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4180_fields() {
        let rows = records("key,Name\r\nc1,\"Acme, \"\"Tools\"\"\"\nc2,\"two\nlines\"\n\nc3,\n").unwrap();
        assert_eq!(rows[0], ["key", "Name"]);
        assert_eq!(rows[1], ["c1", "Acme, \"Tools\""]);
        assert_eq!(rows[2], ["c2", "two\nlines"]);
        assert_eq!(rows[3], ["c3", ""]);
        assert_eq!(rows.len(), 4);
    }

    #[test]
    fn places_and_errors() {
        let mut r = Reader::new("a,bé,c\nx,\"y\"z\n".as_bytes(), "t.csv");
        let h = r.record().unwrap().unwrap();
        assert_eq!((h[2].line, h[2].column), (1, 6));
        let e = r.record().unwrap_err().to_string();
        assert_eq!(e, "t.csv:2:6: text after a closing quote (a quote inside a quoted field is written \"\")");
        assert!(records("a,\"b\n").unwrap_err().to_string().starts_with("t.csv:1:3: a quoted field is not closed"));
        assert!(records("a,b\"c\n").unwrap_err().to_string().starts_with("t.csv:1:4: a quote inside"));
    }

    #[test]
    fn written_records_read_back() {
        let mut out = Vec::new();
        write_record(&mut out, ["k", "a,b", "say \"hi\"", "x\ny", ""].into_iter()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(records(&text).unwrap(), vec![vec!["k", "a,b", "say \"hi\"", "x\ny", ""]]);
    }

    #[test]
    fn specs() {
        assert_eq!(parse_spec("data/Clients.csv"), ("Clients".into(), PathBuf::from("data/Clients.csv")));
        assert_eq!(parse_spec("Order Lines=x.csv"), ("Order Lines".into(), PathBuf::from("x.csv")));
    }
}
