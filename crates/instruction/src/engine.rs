//! `Engine`: a database plus its compiled commands; the entry point for running instructions.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use espalier_data::WriteGraph;
use espalier_schema::{ParamKind, Schema, Span};
use espalier_transaction::{Database, DatabaseOptions, TxError};
use serde::Serialize;

use crate::ast::{Instruction, Value};
use crate::incremental::{Registered, Registry};
use crate::parse::{parse_instruction, parse_instructions, ParseOptions};
use crate::plan::{CheckError, Checker, Plan, PlanKind};
use crate::run::{
    apply, run_match, run_query, run_query_packed, streams, visit_match, visit_query, Bindings, Nav, PackedRows,
    ParamValue, QueryResult, RowValue,
};
use crate::InstructionError;

/// The reply to one instruction.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// A collection query's or pattern query's rows.
    Query(QueryResult),
    /// `get`: the node and its subtree in dump form.
    Node(serde_json::Value),
    /// A committed mutation, command or transaction: its version and how many changes it made.
    Done {
        /// The version of the commit that made the changes.
        version: u64,
        /// How many changes it made.
        changes: usize,
    },
    /// The replies of a transaction's instructions, in order (mutations say `done` with the
    /// transaction's version).
    Transaction(Vec<Reply>),
}

/// A write request's reply as the write transaction left it: the rows of its collection
/// queries still packed, to be spelt out by [`Written::into_reply`] after the commit, on the
/// thread that delivers the reply rather than on the single writer (see `run/rows.rs`).
#[derive(Debug)]
pub struct Written(Built);

#[derive(Debug)]
enum Built {
    Reply(Reply),
    /// A collection query's rows.
    Rows(PackedRows),
    /// A `get`'s node in dump form, as JSON text.
    Node(Vec<u8>),
    Transaction(Vec<Built>),
}

impl Written {
    /// The reply, its rows spelt out; an error if a text of them is not UTF-8 (corruption:
    /// checked here rather than by the writer).
    pub fn into_reply(self) -> Result<Reply, InstructionError> {
        self.0.into_reply()
    }

    /// Whether it holds a query's rows or a node: a reply that costs more to spell out and
    /// encode than a hand-off to another thread (a transaction that only writes answers
    /// `done`s).
    pub fn is_large(&self) -> bool {
        self.0.is_large()
    }
}

impl Built {
    fn into_reply(self) -> Result<Reply, InstructionError> {
        Ok(match self {
            Built::Reply(r) => r,
            Built::Rows(rows) => Reply::Query(rows.into_result()?),
            Built::Node(bytes) => Reply::Node(crate::run::parse_node(&bytes)?),
            Built::Transaction(list) => {
                Reply::Transaction(list.into_iter().map(Built::into_reply).collect::<Result<_, _>>()?)
            }
        })
    }

    fn is_large(&self) -> bool {
        match self {
            Built::Reply(Reply::Query(_) | Reply::Node(_)) | Built::Rows(_) | Built::Node(_) => true,
            Built::Reply(_) => false,
            Built::Transaction(list) => list.iter().any(Built::is_large),
        }
    }
}

/// A command body, checked once when the database opens.
struct CompiledCommand {
    plans: Vec<Plan>,
}

/// A database with its schema's commands checked once: runs instructions, text or structured,
/// and keeps registered queries up to date.
pub struct Engine {
    db: Arc<Database>,
    commands: HashMap<String, CompiledCommand>,
    /// Registered incremental queries; hooked into the database's commits on first use.
    registry: std::sync::OnceLock<Arc<Registry>>,
}

/// A query registered with [`Engine::register`]: its id, the commit its rows are of, and
/// its rows.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The registration's id, with which it is ended.
    pub id: u64,
    /// The version of the commit the rows are of.
    pub version: u64,
    /// The query's rows.
    pub result: QueryResult,
}

impl espalier_transaction::CommitHook for Registry {
    fn committed(
        &self,
        graph: Option<espalier_data::Graph<'_>>,
        version: u64,
        touched: &espalier_data::Touched,
    ) -> Vec<espalier_data::QueryDiff> {
        Registry::committed(self, graph, version, touched)
    }
}

/// Where a checked instruction came from, for rendering its errors.
fn located(source: Option<&str>, e: CheckError) -> InstructionError {
    match source {
        Some(src) if e.span != Span::default() => {
            InstructionError::Check(espalier_schema::Diagnostic::new(src, e.span, e.message))
        }
        _ => InstructionError::Check(espalier_schema::Diagnostic {
            span: e.span,
            line: 0,
            column: 0,
            message: e.message,
        }),
    }
}

/// A broken rule of [`crate::validate`] as a syntax error, placed in `source` if there is one.
fn invalid(source: Option<&str>, e: crate::Invalid) -> InstructionError {
    match source {
        Some(src) => InstructionError::Parse(crate::parse::invalid_at(src, e)),
        None => InstructionError::Parse(crate::ParseError(espalier_schema::Diagnostic {
            span: e.span,
            line: 0,
            column: 0,
            message: e.message,
        })),
    }
}

/// Parses and checks every command body of `schema`; errors point into the schema source.
pub fn compile_commands(schema: &Schema) -> Result<HashMap<String, Vec<Plan>>, espalier_schema::Diagnostics> {
    let mut out = HashMap::new();
    let mut errors = Vec::new();
    for cmd in &schema.commands {
        let shift = |span: Span| Span { start: span.start + cmd.body_span.start, end: span.end + cmd.body_span.start };
        let list = match parse_instructions(&cmd.body, ParseOptions::CLIENT) {
            Ok(list) => list,
            Err(e) => {
                errors.push(espalier_schema::Diagnostic::new(
                    &schema.source,
                    shift(e.0.span),
                    format!("in command '{}': {}", cmd.name, e.0.message),
                ));
                continue;
            }
        };
        let params: Option<HashMap<String, ParamKind>> = Some(cmd.params.iter().cloned().collect());
        let checker = Checker { schema, params: &params };
        let mut plans = Vec::new();
        for instr in &list {
            match checker.check(&instr.item, instr.span) {
                Ok(Plan { kind: PlanKind::Command { .. } }) => errors.push(espalier_schema::Diagnostic::new(
                    &schema.source,
                    shift(instr.span),
                    format!("command '{}' calls a command; commands do not nest", cmd.name),
                )),
                Ok(plan) => plans.push(plan),
                Err(e) => errors.push(espalier_schema::Diagnostic::new(
                    &schema.source,
                    shift(e.span),
                    format!("in command '{}': {}", cmd.name, e.message),
                )),
            }
        }
        out.insert(cmd.name.clone(), plans);
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(espalier_schema::Diagnostics(errors))
    }
}

impl Engine {
    /// An engine over an open database; fails if a command body of its schema does not check.
    pub fn new(db: Arc<Database>) -> Result<Engine, InstructionError> {
        let commands = compile_commands(db.schema())
            .map_err(|d| InstructionError::Schema(d.render(&db.schema().source, "schema")))?
            .into_iter()
            .map(|(name, plans)| (name, CompiledCommand { plans }))
            .collect();
        Ok(Engine { db, commands, registry: std::sync::OnceLock::new() })
    }

    /// Creates a database at `path` from schema text.
    pub fn create(path: &Path, schema_source: &str, options: DatabaseOptions) -> Result<Engine, InstructionError> {
        let schema = espalier_schema::compile(schema_source)
            .map_err(|d| InstructionError::Schema(d.render(schema_source, "schema")))?;
        compile_commands(&schema).map_err(|d| InstructionError::Schema(d.render(schema_source, "schema")))?;
        let db = Database::create(path, schema, options)?;
        Engine::new(db)
    }

    /// Opens the database at `path`.
    pub fn open(path: &Path, options: DatabaseOptions) -> Result<Engine, InstructionError> {
        Engine::new(Database::open(path, options)?)
    }

    /// The database the engine runs on.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// The database's schema.
    pub fn schema(&self) -> &Schema {
        self.db.schema()
    }

    /// Validates (the rules of the text form, [`crate::validate`]: a structured instruction has
    /// met no parser) and type-checks an instruction against the schema.
    pub fn check(&self, instr: &Instruction, source: Option<&str>) -> Result<Plan, InstructionError> {
        crate::validate(instr).map_err(|e| invalid(source, e))?;
        let params = None;
        let checker = Checker { schema: self.db.schema(), params: &params };
        let mut plan = checker.check(instr, Span::default()).map_err(|e| located(source, e))?;
        // A command whose body only reads is a stored procedure: it runs on a snapshot and
        // answers with rows, as its queries would (only the engine knows the bodies).
        if let PlanKind::Command { name, read_only, .. } = &mut plan.kind {
            *read_only = self
                .commands
                .get(name.as_str())
                .is_some_and(|c| !c.plans.is_empty() && c.plans.iter().all(Plan::is_read_only));
        }
        Ok(plan)
    }

    /// The registered queries (hooked into the commits from the first call).
    pub fn registry(&self) -> &Arc<Registry> {
        self.registry.get_or_init(|| {
            let registry = Arc::new(Registry::default());
            self.db.add_commit_hook(registry.clone());
            registry
        })
    }

    /// Registers a pattern query (`collection match …`, text or JSON as `source` says) whose
    /// matches every later commit updates from its change set; each commit's differences
    /// come on its last change set (`ChangeSet::diffs`, by the returned id).
    pub fn register(
        &self,
        instr: &Instruction,
        source: Option<&str>,
        params: &HashMap<String, ParamValue>,
    ) -> Result<Registration, InstructionError> {
        crate::validate(instr).map_err(|e| invalid(source, e))?;
        let Instruction::Match(pattern) = instr else {
            return Err(InstructionError::value(
                "only a pattern query (`collection match …`) can be registered for incremental results",
            ));
        };
        let no_params = None;
        let checker = Checker { schema: self.db.schema(), params: &no_params };
        let plan = checker.check_registered(pattern, Span::default()).map_err(|e| located(source, e))?;
        let query = Registered::new(plan, params.clone(), self.db.schema())?;
        let (id, version, result) = self.registry().add(query, &self.db)?;
        Ok(Registration { id, version, result })
    }

    /// [`Engine::register`] for instruction text.
    pub fn register_text(
        &self,
        text: &str,
        params: &HashMap<String, ParamValue>,
    ) -> Result<Registration, InstructionError> {
        let instr = parse_instruction(text, ParseOptions::CLIENT)?;
        self.register(&instr, Some(text), params)
    }

    /// Ends a registration; false if there was none with that id.
    pub fn unregister(&self, id: u64) -> bool {
        self.registry.get().is_some_and(|r| r.remove(id))
    }

    /// Parses (text), checks and runs one instruction.
    pub fn execute_text(&self, text: &str, params: &HashMap<String, ParamValue>) -> Result<Reply, InstructionError> {
        let instr = parse_instruction(text, ParseOptions::CLIENT)?;
        let plan = self.check(&instr, Some(text))?;
        self.run(&plan, params, None)
    }

    /// Runs a checked plan with values for its `$parameters`. Read-only plans read a snapshot
    /// and stop with a `limit` error soon after `cancel` is set; anything that writes runs as
    /// one atomic request through group commit (and is not cancelled once started).
    pub fn run(
        &self,
        plan: &Plan,
        params: &HashMap<String, ParamValue>,
        cancel: Option<&AtomicBool>,
    ) -> Result<Reply, InstructionError> {
        if plan.is_read_only() {
            return self.read_snapshot(plan, &mut Bindings { params, cancel });
        }
        // The reply says only how many changes there were: named only for subscribers.
        let committed = self.db.write_counting(|g: &mut WriteGraph<'_, '_>| -> Result<Built, InstructionError> {
            let mut b = Bindings { params, cancel: None };
            self.write_request(g, plan, &mut b)
        })?;
        stamped(committed).into_reply()
    }

    /// Runs a checked plan as [`Engine::run`] does, then rolls its writes back: the reply (or
    /// error) says what the plan would have done, and nothing of it stays (no version is
    /// used). The benchmark runner warms mutations up with it.
    pub fn run_rolled_back(
        &self,
        plan: &Plan,
        params: &HashMap<String, ParamValue>,
    ) -> Result<Reply, InstructionError> {
        if plan.is_read_only() {
            return self.run(plan, params, None);
        }
        let mut outcome = None;
        let rolled_back = self.db.write(|g: &mut WriteGraph<'_, '_>| -> Result<(), InstructionError> {
            let mut b = Bindings { params, cancel: None };
            outcome = Some(self.write_request(g, plan, &mut b).and_then(Built::into_reply));
            // An error rolls the request back; this one is only a signal.
            Err(InstructionError::value("rolled back"))
        });
        match (outcome, rolled_back) {
            (Some(reply), Err(_)) => reply,
            // The write queue failed before (or instead of) running the closure.
            (None, Err(e)) => Err(e),
            (_, Ok(_)) => Err(InstructionError::value("a rolled-back request committed")),
        }
    }

    /// Runs a read-only query (a pattern query, a collection query, or a command that only
    /// reads) on a fresh snapshot and hands its rows to `visit` one at a time — each row's
    /// key path (empty for a pattern query's rows) and values — in the order, offset and limit
    /// [`Engine::run`] would return them. A collection query, and a pattern query that needs no
    /// row before it can give the first (no grouping, ordering or `distinct`), streams: no row
    /// is collected and texts are borrowed from the snapshot, so an embedded application reads
    /// a large result without an allocation per row. Other queries are run whole and visited
    /// from their result.
    ///
    /// Returns the number of matching rows (the result's `total`), or, when `visit` breaks on
    /// a streamed query, those matched so far. A plan that writes, `get` and transactions
    /// answer no rows: they are refused, and nothing runs.
    pub fn visit_rows(
        &self,
        plan: &Plan,
        params: &HashMap<String, ParamValue>,
        cancel: Option<&AtomicBool>,
        visit: &mut dyn FnMut(&[String], &[RowValue<'_>]) -> ControlFlow<()>,
    ) -> Result<u64, InstructionError> {
        match &plan.kind {
            _ if !plan.is_read_only() => {
                return Err(InstructionError::value("only a query's rows can be visited: this instruction writes"))
            }
            PlanKind::Get { .. } | PlanKind::Transaction(_) => {
                return Err(InstructionError::value(
                    "only a query's rows can be visited: `get` and transactions answer no rows",
                ))
            }
            _ => {}
        }
        let snap = self.db.snapshot()?;
        let nav = Nav { graph: snap.graph() };
        let mut b = Bindings { params, cancel };
        match &plan.kind {
            PlanKind::Match(m) if streams(m) => return visit_match(nav.graph, m, &mut b, visit),
            PlanKind::Query(q) => return visit_query(&nav, q, &mut b, visit),
            _ => {}
        }
        let Reply::Query(result) = self.read(&nav, plan, &mut b)? else {
            return Err(InstructionError::value("only a query's rows can be visited: this instruction answers none"));
        };
        let mut values = Vec::with_capacity(result.columns.len());
        for row in &result.rows {
            values.clear();
            values.extend(row.values.iter().map(RowValue::from_json));
            if visit(&row.key, &values).is_break() {
                break;
            }
        }
        Ok(result.total)
    }

    /// Runs a read-only plan on a fresh snapshot.
    fn read_snapshot(&self, plan: &Plan, b: &mut Bindings<'_>) -> Result<Reply, InstructionError> {
        let snap = self.db.snapshot()?;
        self.read(&Nav { graph: snap.graph() }, plan, b)
    }

    /// Runs a read-only plan that stops with a `limit` error soon after `cancel` is set (the
    /// walk looks at it every `CANCEL_CHECK_EVERY` (1024) rows or pattern steps).
    pub fn read_cancellable(
        &self,
        plan: &Plan,
        params: &HashMap<String, ParamValue>,
        cancel: &AtomicBool,
    ) -> Result<Reply, InstructionError> {
        assert!(plan.is_read_only(), "writes are never cancelled once started");
        self.read_snapshot(plan, &mut Bindings { params, cancel: Some(cancel) })
    }

    /// Runs a mutating `plan` without waiting for its commit: `done` gets the reply on the
    /// thread that ran its batch (see [`Database::write_detached`] for `lead_here`), with the
    /// rows of its queries still packed: [`Written::into_reply`] spells them out, where the
    /// caller chooses (the server does it off the writer when there are rows).
    pub fn run_detached(
        self: &Arc<Self>,
        plan: Plan,
        params: HashMap<String, ParamValue>,
        lead_here: bool,
        done: impl FnOnce(Result<Written, InstructionError>) + Send + 'static,
    ) {
        assert!(!plan.is_read_only(), "reads need no commit");
        let engine = self.clone();
        let write = move |g: &mut WriteGraph<'_, '_>| -> Result<Built, InstructionError> {
            let mut b = Bindings { params: &params, cancel: None };
            engine.write_request(g, &plan, &mut b)
        };
        let finish = move |r: Result<espalier_transaction::Committed<Built>, InstructionError>| done(r.map(stamped));
        self.db.write_detached(write, lead_here, finish);
    }

    fn read(&self, nav: &Nav<'_>, plan: &Plan, b: &mut Bindings<'_>) -> Result<Reply, InstructionError> {
        match &plan.kind {
            PlanKind::Query(q) => Ok(Reply::Query(run_query(nav, q, b)?)),
            PlanKind::Match(m) => Ok(Reply::Query(run_match(nav.graph, m, b)?)),
            PlanKind::Get { path, .. } => {
                let node = nav.walk(path, b)?;
                Ok(Reply::Node(crate::run::node_json(&nav.graph, node)?))
            }
            PlanKind::Transaction(list) => Ok(Reply::Transaction(
                list.iter()
                    .enumerate()
                    .map(|(i, m)| self.read(nav, &m.plan, b).map_err(|e| e.in_member(i, &m.text)))
                    .collect::<Result<_, _>>()?,
            )),
            PlanKind::Command { name, args, read_only: true } => {
                let cmd = self
                    .commands
                    .get(name)
                    .ok_or_else(|| InstructionError::value(format!("unknown command '{name}'")))?;
                let params = command_params(args, b)?;
                let mut inner = Bindings { params: &params, cancel: b.cancel };
                let mut last = None;
                for plan in &cmd.plans {
                    last = Some(self.read(nav, plan, &mut inner)?);
                }
                last.ok_or_else(|| InstructionError::value(format!("command '{name}' has no body")))
            }
            PlanKind::Update { .. } | PlanKind::Command { .. } => unreachable!("read-only plans only"),
        }
    }

    /// One request's writes, then what is checked when it ends: references into removed nodes
    /// (so the order of a transaction's members does not matter; the error names the member
    /// whose removal is still referred to), then unique indexes (a violation answers
    /// `not_unique`). On an error the write queue rolls the request back.
    fn write_request(
        &self,
        g: &mut WriteGraph<'_, '_>,
        plan: &Plan,
        b: &mut Bindings<'_>,
    ) -> Result<Built, InstructionError> {
        let reply = match &plan.kind {
            PlanKind::Transaction(list) => {
                let mut replies = Vec::with_capacity(list.len());
                for (i, m) in list.iter().enumerate() {
                    g.begin_member(i);
                    replies.push(self.write(g, &m.plan, b).map_err(|e| e.in_member(i, &m.text))?);
                }
                Built::Transaction(replies)
            }
            _ => self.write(g, plan, b)?,
        };
        g.check_references().map_err(|e| match &plan.kind {
            PlanKind::Transaction(list) => {
                let text = list.get(e.member).map_or("", |m| m.text.as_str());
                InstructionError::from(e.error).in_member(e.member, text)
            }
            _ => InstructionError::from(e.error),
        })?;
        g.check_unique()?;
        Ok(reply)
    }

    /// Runs `plan` inside the write transaction; mutations reply `Done` with version 0, which
    /// [`stamp`] fills in after commit. A collection query's rows are packed (the writer runs
    /// every transaction's queries; see `run/rows.rs`).
    fn write(&self, g: &mut WriteGraph<'_, '_>, plan: &Plan, b: &mut Bindings<'_>) -> Result<Built, InstructionError> {
        match &plan.kind {
            PlanKind::Query(q) => Ok(Built::Rows(run_query_packed(&Nav { graph: g.graph() }, q, b)?)),
            PlanKind::Get { path, .. } => {
                let nav = Nav { graph: g.graph() };
                let node = nav.walk(path, b)?;
                Ok(Built::Node(crate::run::node_dump(&nav.graph, node)?))
            }
            PlanKind::Match(_) => Ok(Built::Reply(self.read(&Nav { graph: g.graph() }, plan, b)?)),
            PlanKind::Update { path, items, .. } => {
                let (node, _) = Nav { graph: g.graph() }.walk_view(path, b)?;
                apply(g, node, items, false, b)?;
                Ok(Built::Reply(Reply::Done { version: 0, changes: 0 }))
            }
            PlanKind::Command { name, args, .. } => {
                let cmd = self
                    .commands
                    .get(name)
                    .ok_or_else(|| InstructionError::value(format!("unknown command '{name}'")))?;
                let params = command_params(args, b)?;
                let mut inner = Bindings { params: &params, cancel: None };
                for plan in &cmd.plans {
                    self.write(g, plan, &mut inner)?;
                }
                Ok(Built::Reply(Reply::Done { version: 0, changes: 0 }))
            }
            PlanKind::Transaction(list) => Ok(Built::Transaction(
                list.iter()
                    .enumerate()
                    .map(|(i, m)| self.write(g, &m.plan, b).map_err(|e| e.in_member(i, &m.text)))
                    .collect::<Result<_, _>>()?,
            )),
        }
    }
}

/// A command call's arguments as the parameters of its body.
fn command_params(
    args: &[(String, Value)],
    b: &mut Bindings<'_>,
) -> Result<HashMap<String, ParamValue>, InstructionError> {
    let mut params = HashMap::with_capacity(args.len());
    for (arg, value) in args {
        let v = match value {
            Value::Text(t) => ParamValue::Text(t.clone()),
            Value::Param(_) => b.text(value).map(ParamValue::Text)?,
            other => ParamValue::Int(b.number(other)?),
        };
        params.insert(arg.clone(), v);
    }
    Ok(params)
}

/// A committed request's reply with its version and change count.
fn stamped(c: espalier_transaction::Committed<Built>) -> Written {
    Written(stamp(c.value, c.version, c.changes.count))
}

/// Fills in the commit's version and change count in every `done` of a reply. A transaction's
/// members are `Built::Transaction` (`Engine::write`), never a `Reply::Transaction` inside
/// `Built::Reply`, so one recursion covers them.
fn stamp(reply: Built, version: u64, changes: usize) -> Built {
    match reply {
        Built::Reply(Reply::Done { .. }) => Built::Reply(Reply::Done { version, changes }),
        Built::Transaction(list) => Built::Transaction(list.into_iter().map(|r| stamp(r, version, changes)).collect()),
        other => other,
    }
}

impl From<TxError> for InstructionError {
    fn from(e: TxError) -> InstructionError {
        InstructionError::Transaction(e)
    }
}
