//! Engine work for requests. Everything here blocks (snapshot reads, group commit) and runs on
//! tokio's blocking pool, never on a runtime worker.

use std::collections::HashMap;

use espalier_data::dump::{export_node, DumpError};
use espalier_data::{DataError, EntryKey, Graph, NodePath, NodeRef, PathStep};
use espalier_instruction::ast::Instruction;
use espalier_instruction::parse::{parse_instruction, ParseOptions};
use espalier_instruction::plan::Plan;
use espalier_instruction::{Engine, InstructionError, ParamValue, QueryResult, Reply};
use espalier_protocol::{ErrorCode, RequestError, Source};
use espalier_schema::{PropertyId, PropertyKind};

use crate::hub::Filter;

/// An instruction's failure as the protocol reports it.
pub fn instruction_error(e: &InstructionError) -> RequestError {
    RequestError::new(ErrorCode::parse(e.code()), e.to_string())
}

/// A parsed and type-checked instruction.
pub struct Checked {
    pub plan: Plan,
}

impl Checked {
    pub fn is_read_only(&self) -> bool {
        self.plan.is_read_only()
    }
}

/// Parses (text) and checks an instruction.
pub fn check(engine: &Engine, source: &Source) -> Result<Checked, RequestError> {
    let (instr, text) = parsed(source)?;
    let plan = engine.check(&instr, text).map_err(|e| instruction_error(&e))?;
    Ok(Checked { plan })
}

/// The instruction of a source (parsed, if text) and its text, for errors that point into it.
fn parsed(source: &Source) -> Result<(std::borrow::Cow<'_, Instruction>, Option<&str>), RequestError> {
    match source {
        Source::Text(text) => {
            let instr = parse_instruction(text, ParseOptions::CLIENT)
                .map_err(|e| instruction_error(&InstructionError::Parse(e)))?;
            Ok((std::borrow::Cow::Owned(instr), Some(text)))
        }
        // The wire form becomes the syntax tree here, where text is parsed: a benchmark word
        // (`index`, `random`) is refused as the text parser refuses it.
        Source::Structured(wire) => {
            let instr =
                wire.to_ast().map_err(|e| instruction_error(&InstructionError::Parse(e.into_parse_error(None))))?;
            Ok((std::borrow::Cow::Owned(instr), None))
        }
    }
}

/// Runs a checked instruction (a snapshot read, or one atomic write through group commit).
pub fn run(engine: &Engine, checked: &Checked, params: &HashMap<String, ParamValue>) -> Result<Reply, RequestError> {
    engine.run(&checked.plan, params, None).map_err(|e| instruction_error(&e))
}

/// Runs a checked read that stops (with a `limit` error) soon after `cancel` is set.
pub fn read(
    engine: &Engine,
    checked: &Checked,
    params: &HashMap<String, ParamValue>,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<Reply, RequestError> {
    engine.read_cancellable(&checked.plan, params, cancel).map_err(|e| instruction_error(&e))
}

/// The checked plan of `get <path>` (always a `get`).
pub(crate) fn get_plan(engine: &Engine, path: &str) -> Result<Plan, RequestError> {
    let text = format!("get {path}");
    let instr = parse_instruction(&text, ParseOptions::CLIENT).map_err(|e| {
        RequestError::new(ErrorCode::Syntax, format!("the node path {path:?} does not parse: {}", e.0.message))
    })?;
    let plan = engine.check(&instr, Some(&text)).map_err(|e| instruction_error(&e))?;
    if !plan.is_get() {
        return Err(RequestError::bad_request(format!("{path:?} is not a node path")));
    }
    Ok(plan)
}

fn data_error(e: DataError) -> RequestError {
    instruction_error(&InstructionError::Data(e))
}

/// The node a checked `get` reaches from the root, with `params` for `$name` keys (the
/// engine's walk, [`Plan::get_node`]).
pub(crate) fn walk(
    graph: &Graph<'_>,
    get: &Plan,
    params: &HashMap<String, ParamValue>,
) -> Result<NodeRef, RequestError> {
    match get.get_node(*graph, params) {
        Some(node) => node.map_err(|e| instruction_error(&e)),
        None => Err(RequestError::new(ErrorCode::Internal, "a node read was given a plan that is not a `get`")),
    }
}

/// The entry of a matrix whose key designates `key` (the target's key components).
fn find_matrix_entry(
    graph: &Graph<'_>,
    owner: NodeRef,
    property: PropertyId,
    target: &espalier_schema::ReferenceTarget,
    key: &[String],
) -> Result<Option<NodeRef>, DataError> {
    // `resolve` asserts the arity; a client's key must be checked here.
    if key.len() != target.key_arity {
        return Ok(None);
    }
    match graph.resolve(owner, target, key) {
        Ok(t) => graph.find_entry(owner, property, EntryKey::Target(t.id)),
        Err(DataError::KeyMissing { .. } | DataError::StateNotSelected { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Follows a stored node path (as change sets and subscriptions name nodes); `None` if the
/// node does not exist (an entry is missing or another state is selected).
pub fn walk_node_path(graph: &Graph<'_>, path: &NodePath) -> Result<Option<NodeRef>, RequestError> {
    let schema = graph.schema;
    let mut at = NodeRef::ROOT;
    for step in &path.0 {
        let name = match step {
            PathStep::Group(g) => g,
            PathStep::Entry { collection, .. } => collection,
            PathStep::State { stategroup, .. } => stategroup,
        };
        let Some(property) = schema.find(at.ty, name) else {
            return Ok(None);
        };
        let id = property.id;
        at = match (step, &property.kind) {
            (PathStep::Group(_), PropertyKind::Group { .. }) => graph.group(at, id),
            (PathStep::Entry { key, .. }, PropertyKind::Dictionary { .. }) => {
                let [k] = key.as_slice() else { return Ok(None) };
                match graph.find_entry(at, id, EntryKey::Text(k)).map_err(data_error)? {
                    Some(n) => n,
                    None => return Ok(None),
                }
            }
            (PathStep::Entry { key, .. }, PropertyKind::Matrix { target, .. }) => {
                match find_matrix_entry(graph, at, id, target, key).map_err(data_error)? {
                    Some(n) => n,
                    None => return Ok(None),
                }
            }
            (PathStep::State { state, .. }, PropertyKind::StateGroup { states }) => {
                let Some(index) = states.iter().position(|s| &s.name == state) else { return Ok(None) };
                let (current, child) = graph.state(at, id).map_err(data_error)?;
                if current as usize != index {
                    return Ok(None);
                }
                child
            }
            _ => return Ok(None),
        };
    }
    Ok(Some(at))
}

/// Stops a dump once it has written `limit` bytes, so that reading a large subtree costs at
/// most that much time and memory.
struct Bounded {
    bytes: Vec<u8>,
    limit: usize,
}

#[derive(Debug)]
struct OverLimit;

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the node is larger than allowed here")
    }
}

impl std::error::Error for OverLimit {}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > self.limit {
            return Err(std::io::Error::other(OverLimit));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A node and its subtree in dump form, or `None` if its dump is over `limit` bytes.
pub fn node_json(graph: &Graph<'_>, node: NodeRef, limit: usize) -> Result<Option<serde_json::Value>, RequestError> {
    let mut out = Bounded { bytes: Vec::new(), limit };
    match export_node(graph, node, &mut out) {
        Ok(_) => {}
        Err(DumpError::Io(e)) if e.get_ref().is_some_and(|inner| inner.is::<OverLimit>()) => return Ok(None),
        Err(DumpError::Data(d)) => return Err(data_error(d)),
        Err(other) => return Err(RequestError::new(ErrorCode::Internal, format!("writing the node: {other}"))),
    }
    serde_json::from_slice(&out.bytes)
        .map(Some)
        .map_err(|e| RequestError::new(ErrorCode::Internal, format!("reading back the node JSON: {e}")))
}

/// Room for a node's dump: it is indented JSON and the reply compact, so 4× the reply limit.
pub fn dump_limit(max_result_bytes: usize) -> usize {
    max_result_bytes.saturating_mul(4)
}

fn too_large(limit: usize) -> RequestError {
    RequestError::new(
        ErrorCode::ResultTooLarge,
        format!("the node's subtree is over the server's reply limit (its dump passed {limit} bytes)"),
    )
}

/// `get`: the node at a (text) path, with the version of the snapshot it was read from.
/// `Ok(None)` if its dump passes `limit` bytes and `over_limit_is_error` is false.
pub fn get(
    engine: &Engine,
    path: &str,
    params: &HashMap<String, ParamValue>,
    limit: usize,
    over_limit_is_error: bool,
) -> Result<Option<(u64, serde_json::Value)>, RequestError> {
    let get = get_plan(engine, path)?;
    let snap = engine.database().snapshot().map_err(data_error)?;
    let graph = snap.graph();
    let node = walk(&graph, &get, params)?;
    let version = snap.version().map_err(data_error)?;
    match node_json(&graph, node, limit)? {
        Some(n) => Ok(Some((version, n))),
        None if over_limit_is_error => Err(too_large(limit)),
        None => Ok(None),
    }
}

/// Runs a checked `get` instruction as a bounded node read: `None` if the plan is something
/// else, `Some(Ok(None))` if the node's dump passes `limit` bytes.
pub fn node_read(
    engine: &Engine,
    checked: &Checked,
    params: &HashMap<String, ParamValue>,
    limit: usize,
) -> Option<Result<Option<Reply>, RequestError>> {
    if !checked.plan.is_get() {
        return None;
    }
    let read = || {
        let snap = engine.database().snapshot().map_err(data_error)?;
        let graph = snap.graph();
        let node = walk(&graph, &checked.plan, params)?;
        Ok(node_json(&graph, node, limit)?.map(Reply::Node))
    };
    Some(read())
}

/// What a subscription watches, resolved against the current data.
pub enum Resolved {
    /// A node, by its stored path.
    Node(NodePath),
    /// A query: its plan and the part of the tree it can see.
    Query { plan: Box<Plan>, scope: Filter },
    /// A pattern query, registered for incremental results.
    Registered(espalier_instruction::Registration),
}

/// Resolves a node path (following references now) to the node's stored path.
pub fn resolve_node(
    engine: &Engine,
    path: &str,
    params: &HashMap<String, ParamValue>,
) -> Result<NodePath, RequestError> {
    let get = get_plan(engine, path)?;
    let snap = engine.database().snapshot().map_err(data_error)?;
    let graph = snap.graph();
    let node = walk(&graph, &get, params)?;
    graph.path(node).map_err(data_error)
}

/// Checks a subscription's query and finds what part of the tree it depends on
/// ([`Plan::query_scope`]).
pub fn resolve_query(
    engine: &Engine,
    source: &Source,
    params: &HashMap<String, ParamValue>,
) -> Result<Resolved, RequestError> {
    let (instr, text) = parsed(source)?;
    match &*instr {
        Instruction::Query(_) => {}
        // Kept incrementally: each commit's difference comes with its change set.
        Instruction::Match(_) => {
            return engine.register(&instr, text, params).map(Resolved::Registered).map_err(|e| instruction_error(&e));
        }
        _ => {
            return Err(RequestError::bad_request(
                "only collection queries (`collection … select …`) and pattern queries (`collection match …`) \
                 can be subscribed to; subscribe to a node with `path`",
            ))
        }
    }
    let plan = engine.check(&instr, text).map_err(|e| instruction_error(&e))?;
    let snap = engine.database().snapshot().map_err(data_error)?;
    let Some(scope) = plan.query_scope(snap.graph(), params) else {
        return Err(RequestError::bad_request(
            "only collection queries (`collection … select …`) can be subscribed to; subscribe to a node with `path`",
        ));
    };
    let scope = scope.map_err(|e| instruction_error(&e))?;
    Ok(Resolved::Query { plan: Box::new(plan), scope: Filter::from(scope) })
}

/// The node at a stored path and the version it was read at (`None`: it does not exist).
pub fn node_at(
    engine: &Engine,
    path: &NodePath,
    limit: usize,
) -> Result<(u64, Option<serde_json::Value>), RequestError> {
    let snap = engine.database().snapshot().map_err(data_error)?;
    let graph = snap.graph();
    let version = snap.version().map_err(data_error)?;
    match walk_node_path(&graph, path)? {
        Some(node) => match node_json(&graph, node, limit)? {
            Some(n) => Ok((version, Some(n))),
            None => Err(too_large(limit)),
        },
        None => Ok((version, None)),
    }
}

/// Runs a subscription's query. The version is a lower bound of what the rows reflect (the
/// engine reads its own snapshot): re-running for a commit at or below it is harmless.
pub fn run_query(
    engine: &Engine,
    plan: &Plan,
    params: &HashMap<String, ParamValue>,
) -> Result<(u64, QueryResult), RequestError> {
    let version = engine.database().version();
    match engine.run(plan, params, None).map_err(|e| instruction_error(&e))? {
        Reply::Query(q) => Ok((version, q)),
        _ => Err(RequestError::new(ErrorCode::Internal, "a query plan gave another kind of reply")),
    }
}
