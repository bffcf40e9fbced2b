//! The dump format: a lossless, deterministic JSON image of a database's schema and data,
//! written and read as a stream (see `docs/dump-format.md`).
//!
//! ```text
//! {"espalier_dump": 1, "schema": "<schema source>", "version": N, "root": NODE}
//! ```
//!
//! A NODE is an object with one member per property, in declaration order. Export writes it
//! piece by piece; import validates and writes each node while serde_json reads it, so
//! neither side holds the document in memory. The only buffers that grow with the data are
//! listed in the docs: one matrix's keys while it is exported (they are sorted by key, not by
//! record id, so that output does not depend on record ids), and the node of a matrix entry
//! whose key points forward in the dump while it waits (in the transaction, not in memory).

use std::cell::Cell;
use std::fmt;
use std::io::{BufReader, BufWriter, Read, Write};

use espalier_schema::{PropertyId, PropertyKind, ReferenceTarget, StateIndex};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::graph::{EntryKey, Graph};
use crate::keys::{u64_be, MAX_KEY_BYTES};
use crate::record::{NodeId, NodeRef};
use crate::{DataError, WriteGraph};

/// The value of the `espalier_dump` member this build writes and reads.
pub const FORMAT: u64 = 1;

/// Progress is reported every this many nodes (export) or bytes (import).
pub const PROGRESS_NODES: u64 = 10_000;
/// Bytes of input read between two progress reports of [`import`].
pub const PROGRESS_BYTES: u64 = 1 << 20;

/// Meta-table prefix of references waiting to be resolved during an import:
/// `pending/ · record id (BE) · property id (BE)` → the key as a JSON array of strings.
pub const PENDING_PREFIX: &[u8] = b"pending/";
/// Meta-table prefix of matrix entries whose key points forward in the dump:
/// `deferred/ · sequence (BE)` → JSON `{"owner", "property", "key", "node"}`.
pub const DEFERRED_PREFIX: &[u8] = b"deferred/";

/// Unresolved references listed in one error.
const MAX_LISTED: usize = 20;

/// What can go wrong exporting or importing a dump.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// Reading the input or writing the output failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The data layer failed while reading or writing the graph.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The dump is not valid for this schema: `message` names the node path and property.
    /// `line` and `column` are 0 when the problem has no single place in the text (such as a
    /// reference that resolves nowhere, found after the whole dump was read).
    #[error("{message}{}", Position(*line, *column))]
    Invalid {
        /// What is wrong, naming the node path and property.
        message: String,
        /// The line of the problem in the dump (from 1), or 0 (see above).
        line: usize,
        /// The column of the problem in its line (from 1).
        column: usize,
    },
}

struct Position(usize, usize);

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 > 0 {
            write!(f, " (line {}, column {})", self.0, self.1)
        } else {
            Ok(())
        }
    }
}

impl From<espalier_storage::tables::TablesError> for DumpError {
    fn from(e: espalier_storage::tables::TablesError) -> DumpError {
        DumpError::Data(e.into())
    }
}

impl DumpError {
    fn invalid(message: impl Into<String>) -> DumpError {
        DumpError::Invalid { message: message.into(), line: 0, column: 0 }
    }
}

// ---------------------------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------------------------

struct Exporter<'g, 'p, W: Write> {
    g: Graph<'g>,
    out: W,
    nodes: u64,
    progress: &'p mut dyn FnMut(u64),
}

fn corrupt(msg: String) -> DumpError {
    DumpError::Data(DataError::Corrupt(msg))
}

/// Writes the dump of the graph (as of `graph`'s snapshot, whose commit version is `version`)
/// to `out`. Calls `progress` with the number of nodes written every [`PROGRESS_NODES`] nodes;
/// returns the number of nodes written. The same data always gives the same bytes.
pub fn export(
    graph: &Graph,
    version: u64,
    out: &mut impl Write,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, DumpError> {
    let mut e = Exporter { g: *graph, out: BufWriter::with_capacity(1 << 16, out), nodes: 0, progress };
    write!(e.out, "{{\n\"espalier_dump\": {FORMAT},\n\"schema\": ")?;
    e.string(&graph.schema.source)?;
    write!(e.out, ",\n\"version\": {version},\n\"root\": ")?;
    e.node(NodeRef::ROOT, 0)?;
    writeln!(e.out, "\n}}")?;
    e.out.flush()?;
    Ok(e.nodes)
}

/// Writes one node and its subtree in dump form (the `NODE` of the format) — what `get`
/// returns. Same encoding and order as [`export`]. Returns the number of nodes written.
pub fn export_node(graph: &Graph, node: NodeRef, out: &mut impl Write) -> Result<u64, DumpError> {
    let mut progress = |_| {};
    let mut e = Exporter { g: *graph, out: BufWriter::new(out), nodes: 0, progress: &mut progress };
    e.node(node, 0)?;
    e.out.flush()?;
    Ok(e.nodes)
}

impl<W: Write> Exporter<'_, '_, W> {
    fn string(&mut self, s: &str) -> Result<(), DumpError> {
        serde_json::to_writer(&mut self.out, s).map_err(|e| DumpError::Io(e.into()))
    }

    fn indent(&mut self, depth: usize) -> Result<(), DumpError> {
        self.out.write_all(b"\n")?;
        for _ in 0..depth {
            self.out.write_all(b"  ")?;
        }
        Ok(())
    }

    fn key(&mut self, key: &[String]) -> Result<(), DumpError> {
        match key {
            [one] => self.string(one),
            many => {
                self.out.write_all(b"[")?;
                for (i, k) in many.iter().enumerate() {
                    if i > 0 {
                        self.out.write_all(b", ")?;
                    }
                    self.string(k)?;
                }
                self.out.write_all(b"]")?;
                Ok(())
            }
        }
    }

    fn node(&mut self, node: NodeRef, depth: usize) -> Result<(), DumpError> {
        self.nodes += 1;
        if self.nodes == self.nodes / PROGRESS_NODES * PROGRESS_NODES {
            (self.progress)(self.nodes);
        }
        let g = self.g;
        let schema = g.schema;
        let properties = &schema.node_type(node.ty).properties;
        if properties.is_empty() {
            self.out.write_all(b"{}")?;
            return Ok(());
        }
        self.out.write_all(b"{")?;
        for (i, &p) in properties.iter().enumerate() {
            if i > 0 {
                self.out.write_all(b",")?;
            }
            self.indent(depth + 1)?;
            let prop = schema.property(p);
            self.string(&prop.name)?;
            self.out.write_all(b": ")?;
            match &prop.kind {
                PropertyKind::Number => write!(self.out, "{}", g.number(node, p)?)?,
                PropertyKind::Text => {
                    let text = g.text(node, p)?;
                    self.string(&text)?;
                }
                PropertyKind::Group { .. } => self.node(g.group(node, p), depth + 1)?,
                PropertyKind::Reference { target } => {
                    let id = g.reference(node, p)?;
                    if id.is_none() {
                        return Err(corrupt(format!("reference '{}' of {} is not set", prop.name, g.describe(node))));
                    }
                    let key = g.target_key(id, target)?;
                    self.key(&key)?;
                }
                PropertyKind::StateGroup { .. } => {
                    let (index, state) = g.state(node, p)?;
                    self.out.write_all(b"{")?;
                    self.string(g.state_name(p, index))?;
                    self.out.write_all(b": ")?;
                    self.node(state, depth + 1)?;
                    self.out.write_all(b"}")?;
                }
                PropertyKind::Dictionary { .. } => {
                    let mut first = true;
                    self.out.write_all(b"{")?;
                    for item in g.entries(node, p)? {
                        let (k, entry) = item?;
                        let k = std::str::from_utf8(k)
                            .map_err(|_| corrupt(format!("a key of {} is not UTF-8", g.collection_path(node, p))))?;
                        if !first {
                            self.out.write_all(b",")?;
                        }
                        first = false;
                        self.indent(depth + 2)?;
                        self.string(k)?;
                        self.out.write_all(b": ")?;
                        self.node(entry, depth + 2)?;
                    }
                    if !first {
                        self.indent(depth + 1)?;
                    }
                    self.out.write_all(b"}")?;
                }
                PropertyKind::Matrix { target, .. } => {
                    // Entries are stored in target-record-id order; write them in key order so
                    // that the output does not depend on record ids. Holds one matrix's keys.
                    let mut entries = Vec::new();
                    for item in g.entries(node, p)? {
                        let (k, entry) = item?;
                        let target_id = g.matrix_target_of(p, k)?;
                        entries.push((g.target_key(target_id, target)?, entry));
                    }
                    entries.sort_by(|a, b| a.0.cmp(&b.0));
                    self.out.write_all(b"[")?;
                    for (i, (key, entry)) in entries.iter().enumerate() {
                        if i > 0 {
                            self.out.write_all(b",")?;
                        }
                        self.indent(depth + 2)?;
                        self.out.write_all(b"[")?;
                        self.key(key)?;
                        self.out.write_all(b", ")?;
                        self.node(*entry, depth + 2)?;
                        self.out.write_all(b"]")?;
                    }
                    if !entries.is_empty() {
                        self.indent(depth + 1)?;
                    }
                    self.out.write_all(b"]")?;
                }
            }
        }
        self.indent(depth)?;
        self.out.write_all(b"}")?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------------------------

/// What an import wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportStats {
    /// NODE objects read (root, groups, entries and states), as [`export`] counts them.
    pub nodes: u64,
    /// References set (not counting matrix keys).
    pub references: u64,
    /// Bytes read from the input.
    pub bytes: u64,
    /// The `version` member of the dump (the version of the exported snapshot).
    pub version: u64,
}

/// Reads a dump into the graph of a freshly created database (root only, no entries) whose
/// schema source equals the dump's byte for byte.
///
/// Streams: each node is validated and written as serde_json reads it. References are parked
/// in the Meta table under [`PENDING_PREFIX`] (in memory) and resolved after the whole dump is read, so
/// they may point forward. A matrix entry whose key points forward is parked (with its node)
/// under [`DEFERRED_PREFIX`] and added once its target exists.
///
/// Calls `progress` with the number of input bytes read, every [`PROGRESS_BYTES`] and at
/// the end. On any error nothing is meant to be kept: the caller aborts the transaction.
///
/// The change records of the import are dropped as it goes (a change set describing a whole
/// database would be as large as the database), so the committed change set is empty.
///
/// Run inside `Database::write`, the closure may be re-run after the map grows; the caller
/// must then give it the input from the start again (re-open the file in the closure).
pub fn import(
    graph: &mut WriteGraph,
    input: impl Read,
    progress: &mut dyn FnMut(u64),
) -> Result<ImportStats, DumpError> {
    let not_empty = graph.graph().txn.string_table().iter().next().is_some()
        || (1..graph.schema.types.len() as u32).any(|t| graph.graph().txn.table(t).is_some_and(|t| !t.is_empty()));
    if not_empty {
        return Err(DumpError::invalid(
            "the database is not empty: a dump can only be imported into a freshly created database",
        ));
    }
    // An import's change set would be as large as the dump, and nobody reads it.
    graph.set_record_changes(false);
    let bytes = Cell::new(0u64);
    let counting = Counting { inner: input, count: &bytes, next_report: PROGRESS_BYTES, progress };
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 16, counting));
    let mut ctx = Ctx {
        g: graph,
        nodes: 0,
        references: 0,
        deferred: 0,
        failure: None,
        context: None,
        parked: std::collections::BTreeMap::new(),
    };
    let version = match (DumpSeed { ctx: &mut ctx }).deserialize(&mut de).and_then(|v| de.end().map(|()| v)) {
        Ok(v) => v,
        Err(e) => return Err(ctx.error(e)),
    };
    drop(de);
    ctx.place_deferred()?;
    ctx.resolve_pending()?;
    ctx.g.set_record_changes(true);
    let stats = ImportStats { nodes: ctx.nodes, references: ctx.references, bytes: bytes.get(), version };
    Ok(stats)
}

/// Counts the bytes read from the input and reports progress.
struct Counting<'c, 'p, R> {
    inner: R,
    count: &'c Cell<u64>,
    next_report: u64,
    progress: &'p mut dyn FnMut(u64),
}

impl<R: Read> Read for Counting<'_, '_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let total = self.count.get() + n as u64;
        self.count.set(total);
        if total >= self.next_report || (n == 0 && !buf.is_empty()) {
            (self.progress)(total);
            self.next_report = total + PROGRESS_BYTES;
        }
        Ok(n)
    }
}

/// Import state shared by the visitors.
struct Ctx<'w, 'a, 's> {
    g: &'w mut WriteGraph<'a, 's>,
    nodes: u64,
    references: u64,
    deferred: u64,
    /// A storage failure or corruption hidden behind a serde error.
    failure: Option<DataError>,
    /// Where the first error happened (node path and property), set by the innermost visitor.
    context: Option<String>,
    /// References and matrix entries waiting for the end of the dump, under
    /// [`PENDING_PREFIX`] and [`DEFERRED_PREFIX`] keys (in memory: about a hundred bytes each).
    parked: std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Ctx<'_, '_, '_> {
    fn graph(&self) -> Graph<'_> {
        self.g.graph()
    }

    /// `<node path>, property 'name'`.
    fn place(&self, node: NodeRef, property: PropertyId) -> String {
        format!("{}, property '{}'", self.graph().describe(node), self.g.schema.property(property).name)
    }

    fn note(&mut self, place: impl FnOnce(&Self) -> String) {
        if self.context.is_none() {
            self.context = Some(place(self));
        }
    }

    /// An error at `place`.
    fn fail<E: de::Error>(&mut self, place: String, message: impl fmt::Display) -> E {
        if self.context.is_none() {
            self.context = Some(place);
        }
        E::custom(message)
    }

    /// A data-layer error at `place`: a user error (duplicate key, …) becomes a message;
    /// storage failure and corruption are kept to be returned as they are.
    fn data<E: de::Error>(&mut self, place: String, e: DataError) -> E {
        let message = match &e {
            DataError::KeyExists { key, .. } => format!("duplicate key {key}"),
            e => e.to_string(),
        };
        if !e.is_user_error() && self.failure.is_none() {
            self.failure = Some(e);
        }
        self.fail(place, message)
    }

    fn error(&mut self, e: serde_json::Error) -> DumpError {
        if let Some(f) = self.failure.take() {
            return DumpError::Data(f);
        }
        if e.is_io() {
            return DumpError::Io(e.into());
        }
        let (line, column) = (e.line(), e.column());
        let full = e.to_string();
        let suffix = format!(" at line {line} column {column}");
        let problem = full.strip_suffix(&suffix).unwrap_or(&full);
        let message = match self.context.take() {
            Some(place) => format!("{place}: {problem}"),
            None => problem.to_string(),
        };
        DumpError::Invalid { message, line, column }
    }

    /// Adds the matrix entries parked because their keys pointed forward. Repeats while it
    /// makes progress (an entry's target may itself be inside a parked entry).
    fn place_deferred(&mut self) -> Result<(), DumpError> {
        loop {
            let mut placed = false;
            let mut waiting = 0usize;
            let mut start = DEFERRED_PREFIX.to_vec();
            while let Some((k, v)) = first_with_prefix(&self.parked, &start, DEFERRED_PREFIX) {
                start = k.clone();
                start.push(0);
                let d: Deferred = serde_json::from_slice(&v)
                    .map_err(|e| corrupt(format!("parked matrix entry is not readable: {e}")))?;
                let (owner, property, target) = self.deferred_parts(&d)?;
                match self.graph().resolve(owner, target, &d.key) {
                    Ok(t) => {
                        self.parked.remove(&k);
                        let entry = match self.g.add_entry(owner, property, EntryKey::Target(t.id)) {
                            Ok(entry) => entry,
                            Err(e) if e.is_user_error() => {
                                let place = self.graph().collection_path(owner, property);
                                let message = match e {
                                    DataError::KeyExists { .. } => format!("duplicate key {}", show_key(&d.key)),
                                    e => e.to_string(),
                                };
                                return Err(DumpError::invalid(format!("{place}: {message}")));
                            }
                            Err(e) => return Err(e.into()),
                        };
                        let seed = NodeSeed { ctx: &mut *self, node: entry, empty_state: None };
                        if let Err(e) = seed.deserialize(d.node) {
                            return Err(self.error(e));
                        }
                        placed = true;
                    }
                    Err(DataError::KeyMissing { .. } | DataError::StateNotSelected { .. }) => waiting += 1,
                    Err(e) => return Err(e.into()),
                }
            }
            if waiting == 0 {
                return Ok(());
            }
            if !placed {
                return Err(self.unresolved_deferred());
            }
        }
    }

    fn deferred_parts(&self, d: &Deferred) -> Result<(NodeRef, PropertyId, &ReferenceTarget), DumpError> {
        let schema = self.g.schema;
        let prop = schema
            .properties
            .get(d.property.index())
            .ok_or_else(|| corrupt(format!("parked matrix entry of property {}", d.property)))?;
        let PropertyKind::Matrix { target, .. } = &prop.kind else {
            return Err(corrupt(format!("parked matrix entry of non-matrix property {}", prop.name)));
        };
        Ok((NodeRef { id: d.owner, ty: prop.owner }, prop.id, target))
    }

    fn unresolved_deferred(&mut self) -> DumpError {
        let mut lines = Vec::new();
        let mut total = 0usize;
        let mut start = DEFERRED_PREFIX.to_vec();
        while let Some((k, v)) = first_with_prefix(&self.parked, &start, DEFERRED_PREFIX) {
            start = k;
            start.push(0);
            total += 1;
            if lines.len() >= MAX_LISTED {
                continue;
            }
            let Ok(d) = serde_json::from_slice::<Deferred>(&v) else { continue };
            let Ok((owner, property, target)) = self.deferred_parts(&d) else { continue };
            let why = match self.graph().resolve(owner, target, &d.key) {
                Err(e) => e.to_string(),
                Ok(_) => "its target is inside another unplaced entry".into(),
            };
            lines.push(format!(
                "{}: matrix key {} does not resolve: {why}",
                self.graph().collection_path(owner, property),
                show_key(&d.key)
            ));
        }
        unresolved(lines, total, "matrix key")
    }

    /// Sets every parked reference; fails listing those that resolve nowhere.
    fn resolve_pending(&mut self) -> Result<(), DumpError> {
        let mut lines = Vec::new();
        let mut total = 0usize;
        let mut start = PENDING_PREFIX.to_vec();
        while let Some((k, v)) = first_with_prefix(&self.parked, &start, PENDING_PREFIX) {
            let rest = &k[PENDING_PREFIX.len()..];
            let (id, property) = match (u64_be(rest), rest.get(8..12)) {
                (Some(id), Some(p)) if rest.len() == 12 => {
                    (id, PropertyId::new(u32::from_be_bytes([p[0], p[1], p[2], p[3]])))
                }
                _ => return Err(corrupt("malformed pending reference key".into())),
            };
            let key: Vec<String> =
                serde_json::from_slice(&v).map_err(|e| corrupt(format!("pending reference is not readable: {e}")))?;
            let schema = self.g.schema;
            let prop = schema
                .properties
                .get(property.index())
                .ok_or_else(|| corrupt(format!("pending reference of property {property}")))?;
            let PropertyKind::Reference { target } = &prop.kind else {
                return Err(corrupt(format!("pending reference of non-reference property {}", prop.name)));
            };
            let node = NodeRef { id, ty: prop.owner };
            match self.graph().resolve(node, target, &key) {
                Ok(t) if lines.is_empty() => {
                    self.g.set_reference(node, property, t.id)?;
                    self.parked.remove(&k);
                }
                Ok(_) => {
                    start = k;
                    start.push(0);
                }
                Err(e @ (DataError::KeyMissing { .. } | DataError::StateNotSelected { .. })) => {
                    total += 1;
                    if lines.len() < MAX_LISTED {
                        lines.push(format!(
                            "{}: reference {} does not resolve: {e}",
                            self.place(node, property),
                            show_key(&key)
                        ));
                    }
                    start = k;
                    start.push(0);
                }
                Err(e) => return Err(e.into()),
            }
        }
        if total > 0 {
            return Err(unresolved(lines, total, "reference"));
        }
        Ok(())
    }
}

fn unresolved(lines: Vec<String>, total: usize, what: &str) -> DumpError {
    let mut message =
        if total == 1 { format!("1 {what} does not resolve:") } else { format!("{total} {what}s do not resolve:") };
    for l in &lines {
        message.push_str("\n  ");
        message.push_str(l);
    }
    if total > lines.len() {
        message.push_str(&format!("\n  … and {} more", total - lines.len()));
    }
    DumpError::invalid(message)
}

fn show_key(key: &[String]) -> String {
    match key {
        [one] => Value::from(one.as_str()).to_string(),
        many => Value::from(many.to_vec()).to_string(),
    }
}

/// The first parked row at or after `start` that has `prefix`, copied out.
fn first_with_prefix(
    parked: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    start: &[u8],
    prefix: &[u8],
) -> Option<(Vec<u8>, Vec<u8>)> {
    match parked.range(start.to_vec()..).next() {
        Some((k, v)) if k.starts_with(prefix) => Some((k.clone(), v.clone())),
        _ => None,
    }
}

fn pending_key(id: NodeId, property: PropertyId) -> Vec<u8> {
    let mut k = PENDING_PREFIX.to_vec();
    k.extend_from_slice(&id.get().to_be_bytes());
    k.extend_from_slice(&property.get().to_be_bytes());
    k
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Deferred {
    owner: NodeId,
    property: PropertyId,
    key: Vec<String>,
    node: Value,
}

/// The top-level object.
struct DumpSeed<'c, 'w, 'a, 's> {
    ctx: &'c mut Ctx<'w, 'a, 's>,
}

impl<'de> DeserializeSeed<'de> for DumpSeed<'_, '_, '_, '_> {
    type Value = u64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_map(self)
    }
}

const MEMBERS: [&str; 4] = ["espalier_dump", "schema", "version", "root"];

impl<'de> Visitor<'de> for DumpSeed<'_, '_, '_, '_> {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an Espalier dump (a JSON object starting with \"espalier_dump\")")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<u64, A::Error> {
        let ctx = self.ctx;
        let mut version = 0;
        for expected in MEMBERS {
            let Some(name) = map.next_key::<String>()? else {
                return Err(ctx.fail("the dump".into(), format!("member \"{expected}\" is missing")));
            };
            if name != expected {
                return Err(ctx.fail(
                    "the dump".into(),
                    format!(
                        "expected member \"{expected}\", found \"{name}\" (members are \"espalier_dump\", \"schema\", \
                         \"version\" and \"root\", in that order)"
                    ),
                ));
            }
            match expected {
                "espalier_dump" => {
                    let format: u64 = map.next_value()?;
                    if format != FORMAT {
                        return Err(ctx.fail(
                            "the dump".into(),
                            format!("dump format {format} is not supported (this build reads format {FORMAT})"),
                        ));
                    }
                }
                "schema" => {
                    let source: String = map.next_value()?;
                    if source != ctx.g.schema.source {
                        return Err(de::Error::custom("dump schema differs from the database schema"));
                    }
                }
                "version" => version = map.next_value()?,
                _ => map.next_value_seed(NodeSeed { ctx: &mut *ctx, node: NodeRef::ROOT, empty_state: None })?,
            }
        }
        if let Some(name) = map.next_key::<String>()? {
            return Err(ctx.fail("the dump".into(), format!("unexpected member \"{name}\" after \"root\"")));
        }
        Ok(version)
    }
}

/// One NODE object. `node.id` is the record holding its slots (0 for an empty state, which
/// then names its place through `empty_state`).
struct NodeSeed<'c, 'w, 'a, 's> {
    ctx: &'c mut Ctx<'w, 'a, 's>,
    node: NodeRef,
    empty_state: Option<(NodeRef, PropertyId, StateIndex)>,
}

impl NodeSeed<'_, '_, '_, '_> {
    fn describe(&self) -> String {
        let g = self.ctx.graph();
        match self.empty_state {
            Some((host, p, state)) => {
                format!("{} ? '{}' * '{}'", g.describe(host), g.schema.property(p).name, g.state_name(p, state))
            }
            None => g.describe(self.node),
        }
    }
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_, '_, '_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_, '_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a node (a JSON object with one member per property)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.ctx.nodes += 1;
        let schema = self.ctx.g.schema;
        let nt = schema.node_type(self.node.ty);
        let mut seen = vec![false; nt.properties.len()];
        loop {
            let name = match map.next_key::<String>() {
                Ok(Some(name)) => name,
                Ok(None) => break,
                Err(e) => {
                    let place = self.describe();
                    self.ctx.note(|_| place);
                    return Err(e);
                }
            };
            let Some(index) = nt.properties.iter().position(|&p| schema.property(p).name == name) else {
                let names: Vec<String> =
                    nt.properties.iter().map(|&p| format!("'{}'", schema.property(p).name)).collect();
                let known =
                    if names.is_empty() { "it has none".to_string() } else { format!("it has {}", names.join(", ")) };
                return Err(self.ctx.fail(self.describe(), format!("unknown property '{name}' ({known})")));
            };
            let p = nt.properties[index];
            if seen[index] {
                return Err(self.ctx.fail(self.describe(), format!("property '{name}' appears twice")));
            }
            seen[index] = true;
            let seed = PropertySeed { ctx: &mut *self.ctx, node: self.node, property: p };
            if let Err(e) = map.next_value_seed(seed) {
                let place = format!("{}, property '{name}'", self.describe());
                self.ctx.note(|_| place);
                return Err(e);
            }
        }
        let missing: Vec<String> = nt
            .properties
            .iter()
            .zip(&seen)
            .filter(|(_, seen)| !**seen)
            .map(|(&p, _)| format!("'{}'", schema.property(p).name))
            .collect();
        if !missing.is_empty() {
            let what = if missing.len() == 1 { "property" } else { "properties" };
            return Err(self.ctx.fail(
                self.describe(),
                format!("missing {what} {} (a dump lists every property)", missing.join(", ")),
            ));
        }
        Ok(())
    }
}

/// The value of one property of `node`.
struct PropertySeed<'c, 'w, 'a, 's> {
    ctx: &'c mut Ctx<'w, 'a, 's>,
    node: NodeRef,
    property: PropertyId,
}

impl<'de> DeserializeSeed<'de> for PropertySeed<'_, '_, '_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        let PropertySeed { ctx, node, property: p } = self;
        let schema = ctx.g.schema;
        if schema.property(p).derived.is_some() {
            // Exported for readers; recomputed as the members arrive.
            d.deserialize_ignored_any(de::IgnoredAny)?;
            return Ok(());
        }
        match &schema.property(p).kind {
            PropertyKind::Number => {
                let v = d.deserialize_any(NumberVisitor)?;
                ctx.g.set_number(node, p, v).map_err(|e| ctx.data(ctx.place(node, p), e))?;
            }
            PropertyKind::Text => {
                let v = d.deserialize_string(TextVisitor)?;
                ctx.g.set_text(node, p, &v).map_err(|e| ctx.data(ctx.place(node, p), e))?;
            }
            PropertyKind::Group { node: ty } => {
                NodeSeed { ctx, node: NodeRef { id: node.id, ty: *ty }, empty_state: None }.deserialize(d)?;
            }
            PropertyKind::Reference { target } => {
                let key = d.deserialize_any(KeyVisitor { arity: target.key_arity })?;
                let v = serde_json::to_vec(&key).map_err(de::Error::custom)?;
                ctx.parked.insert(pending_key(node.id, p), v);
                ctx.references += 1;
            }
            PropertyKind::StateGroup { .. } => d.deserialize_map(StateVisitor { ctx, node, property: p })?,
            PropertyKind::Dictionary { .. } => d.deserialize_map(DictionaryVisitor { ctx, node, property: p })?,
            PropertyKind::Matrix { .. } => d.deserialize_seq(MatrixVisitor { ctx, node, property: p })?,
        }
        Ok(())
    }
}

struct NumberVisitor;

impl<'de> Visitor<'de> for NumberVisitor {
    type Value = i64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number (a JSON integer)")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        i64::try_from(v).map_err(|_| E::custom(format!("number {v} is out of range (numbers are 64-bit signed)")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        Err(E::custom(format!("number {v} is not a 64-bit signed integer")))
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a text (a JSON string)")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
}

/// A reference or matrix key: a string for one component, an array of strings for more.
struct KeyVisitor {
    arity: usize,
}

fn check_component<E: de::Error>(k: &str) -> Result<(), E> {
    if k.len() > MAX_KEY_BYTES {
        return Err(E::custom(format!("key of {} bytes is too long (the limit is {MAX_KEY_BYTES} bytes)", k.len())));
    }
    Ok(())
}

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Vec<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.arity == 1 {
            f.write_str("a key (a JSON string)")
        } else {
            write!(f, "a compound key (a JSON array of {} strings)", self.arity)
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<String>, E> {
        if self.arity != 1 {
            return Err(E::invalid_type(de::Unexpected::Str(v), &self));
        }
        check_component(v)?;
        Ok(vec![v.to_string()])
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
        if self.arity == 1 {
            return Err(de::Error::invalid_type(de::Unexpected::Seq, &self));
        }
        let mut key = Vec::with_capacity(self.arity);
        while let Some(k) = seq.next_element::<String>()? {
            check_component(&k)?;
            key.push(k);
        }
        if key.len() != self.arity {
            return Err(de::Error::invalid_length(key.len(), &self));
        }
        Ok(key)
    }
}

struct StateVisitor<'c, 'w, 'a, 's> {
    ctx: &'c mut Ctx<'w, 'a, 's>,
    node: NodeRef,
    property: PropertyId,
}

impl<'de> Visitor<'de> for StateVisitor<'_, '_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a state (a JSON object with exactly one member, {\"State\": NODE})")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let StateVisitor { ctx, node, property: p } = self;
        let schema = ctx.g.schema;
        let PropertyKind::StateGroup { states } = &schema.property(p).kind else { unreachable!("checked by caller") };
        let Some(name) = map.next_key::<String>()? else {
            return Err(ctx.fail(ctx.place(node, p), "a stategroup needs exactly one member (its state); found none"));
        };
        let Some(index) = states.iter().position(|s| s.name == name) else {
            let names: Vec<String> = states.iter().map(|s| format!("'{}'", s.name)).collect();
            return Err(ctx.fail(ctx.place(node, p), format!("unknown state '{name}' (states: {})", names.join(", "))));
        };
        let index = index as StateIndex;
        let (current, mut child) = ctx.graph().state(node, p).map_err(|e| ctx.data(ctx.place(node, p), e))?;
        if current != index {
            child = ctx.g.switch_state(node, p, index).map_err(|e| ctx.data(ctx.place(node, p), e))?;
        }
        let empty_state = if child.id.is_none() { Some((node, p, index)) } else { None };
        map.next_value_seed(NodeSeed { ctx: &mut *ctx, node: child, empty_state })?;
        if let Some(other) = map.next_key::<String>()? {
            return Err(ctx.fail(
                ctx.place(node, p),
                format!("a stategroup needs exactly one member (its state); found a second one, \"{other}\""),
            ));
        }
        Ok(())
    }
}

struct DictionaryVisitor<'c, 'w, 'a, 's> {
    ctx: &'c mut Ctx<'w, 'a, 's>,
    node: NodeRef,
    property: PropertyId,
}

impl<'de> Visitor<'de> for DictionaryVisitor<'_, '_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a dictionary (a JSON object of key: NODE)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let DictionaryVisitor { ctx, node, property: p } = self;
        while let Some(key) = map.next_key::<String>()? {
            let entry = ctx
                .g
                .add_entry(node, p, EntryKey::Text(&key))
                .map_err(|e| ctx.data(ctx.graph().collection_path(node, p), e))?;
            map.next_value_seed(NodeSeed { ctx: &mut *ctx, node: entry, empty_state: None })?;
        }
        Ok(())
    }
}

struct MatrixVisitor<'c, 'w, 'a, 's> {
    ctx: &'c mut Ctx<'w, 'a, 's>,
    node: NodeRef,
    property: PropertyId,
}

impl<'de> Visitor<'de> for MatrixVisitor<'_, '_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a matrix (a JSON array of [KEY, NODE] pairs)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let MatrixVisitor { ctx, node, property } = self;
        while let Some(()) = seq.next_element_seed(MatrixEntrySeed { ctx: &mut *ctx, node, property })? {}
        Ok(())
    }
}

struct MatrixEntrySeed<'c, 'w, 'a, 's> {
    ctx: &'c mut Ctx<'w, 'a, 's>,
    node: NodeRef,
    property: PropertyId,
}

impl<'de> DeserializeSeed<'de> for MatrixEntrySeed<'_, '_, '_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for MatrixEntrySeed<'_, '_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a matrix entry (a JSON array [KEY, NODE])")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let MatrixEntrySeed { ctx, node, property: p } = self;
        let schema = ctx.g.schema;
        let PropertyKind::Matrix { target, .. } = &schema.property(p).kind else { unreachable!("checked by caller") };
        let collection = |ctx: &Ctx| ctx.graph().collection_path(node, p);
        let Some(key) = seq.next_element_seed(KeySeed { arity: target.key_arity })? else {
            return Err(ctx.fail(collection(ctx), "a matrix entry is [KEY, NODE]; found an empty array"));
        };
        let resolved = ctx.graph().resolve(node, target, &key);
        match resolved {
            Ok(t) => {
                let entry = ctx.g.add_entry(node, p, EntryKey::Target(t.id)).map_err(|e| match e {
                    DataError::KeyExists { .. } => {
                        ctx.fail(collection(ctx), format!("duplicate key {}", show_key(&key)))
                    }
                    e => ctx.data(collection(ctx), e),
                })?;
                if seq.next_element_seed(NodeSeed { ctx: &mut *ctx, node: entry, empty_state: None })?.is_none() {
                    return Err(ctx.fail(collection(ctx), "a matrix entry is [KEY, NODE]; the node is missing"));
                }
            }
            Err(DataError::KeyMissing { .. } | DataError::StateNotSelected { .. }) => {
                // The target comes later in the dump: park the entry until the end.
                let Some(value) = seq.next_element::<Value>()? else {
                    return Err(ctx.fail(collection(ctx), "a matrix entry is [KEY, NODE]; the node is missing"));
                };
                let parked = Deferred { owner: node.id, property: p, key, node: value };
                let bytes = serde_json::to_vec(&parked).map_err(de::Error::custom)?;
                let mut k = DEFERRED_PREFIX.to_vec();
                k.extend_from_slice(&ctx.deferred.to_be_bytes());
                ctx.deferred += 1;
                ctx.parked.insert(k, bytes);
            }
            Err(e) => return Err(ctx.data(collection(ctx), e)),
        }
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(ctx.fail(collection(ctx), "a matrix entry is [KEY, NODE]; found more than two elements"));
        }
        Ok(())
    }
}

struct KeySeed {
    arity: usize,
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Vec<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_any(KeyVisitor { arity: self.arity })
    }
}
