//! The databases a remote run serves, the servers on them, and each workload's operations
//! with their expected replies.
//!
//! **Expected replies.** Before a workload runs, every operation of its pool is run on the
//! engine directly (in process, no network): that reply is what the server must send. Reads
//! are compared whole (a node's dump and the version it was read at, a query's total, columns
//! and rows). Writes must say `done` with one change and a version after the point began and
//! no later than its end, and no version may be acknowledged twice; after the point, the
//! machines' 'Pulses' must have grown by exactly the number of acknowledged writes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use espalier_instruction::parse::{parse_instructions, ParseOptions};
use espalier_instruction::{Engine, ParamValue, QueryResult, Reply};
use espalier_protocol::Params;
use espalier_server::{Server, ServerConfig, ServerError, ShutdownHandle};
use espalier_transaction::DatabaseOptions;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use super::{Config, RemoteError, Workload};
use crate::peers::workload::{self as b6, DataIndex};
use crate::peers::{dataset, Suite};
use crate::suite::Scale;

/// The demo schema (`demo/factory.alan`): the model `espalier init --demo` creates.
pub const DEMO_SCHEMA: &str = include_str!("../../../../demo/factory.alan");
/// The demo data (`demo/data.alan`).
pub const DEMO_DATA: &str = include_str!("../../../../demo/data.alan");

/// Entries per update instruction while adding rows to the demo data.
const ROWS_PER_COMMIT: usize = 1000;
/// How long stopping a server may take before the run gives up on it.
const STOP_WAIT: Duration = Duration::from_secs(60);

/// The `get` workload's path: one product by key.
pub const GET_PATH: &str = ". 'Products' : $p";
/// The `query` workload's instruction: one order's lines.
pub const QUERY_TEXT: &str = "collection . 'Orders' : $o select % 'Lines' 'Amount' -> number : 'Amount'";
/// Orders added to the demo data for the query workload (`q000`…), each with a line for each of
/// the first [`LINES_PER_ORDER`] products: a query reads one order's lines.
pub const QUERY_ORDERS: usize = 100;
/// Lines of each query order: one for each of the first this many products.
pub const LINES_PER_ORDER: usize = 100;
/// The `command` workload's instruction: the demo's `pulse` command on one machine.
pub const COMMAND_TEXT: &str = "command 'pulse' ( 'machine' -> $m )";
/// The `update` workload's instruction: adds 1 to one machine's 'Pulses'.
pub const UPDATE_TEXT: &str = "update . 'Machines' : $m ( 'Pulses' -> number + 1 )";
/// Reads every machine's counter (in process, before and after a write point).
const PULSES_QUERY: &str = "collection select . 'Machines' 'Pulses' -> number : 'Pulses'";

/// The data set a workload runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetKind {
    /// `demo/factory.alan` with its data, plus `--rows` products and machines.
    Demo,
    /// Appendix B.6 (`benchmarks/b6/use_case.bench`) at `--b6-scale`.
    B6,
    /// A database its caller built, with operations its caller prepared (`bench remote-model`).
    Model,
}

impl DatasetKind {
    /// The data set's name in reports: `demo` or `b6`.
    pub fn name(self) -> &'static str {
        match self {
            DatasetKind::Demo => "demo",
            DatasetKind::B6 => "b6",
            DatasetKind::Model => "model",
        }
    }
}

/// One request of an operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// A `ping` (WebSocket) or health check (HTTP).
    Ping,
    /// A node read.
    Get {
        /// The node's path.
        path: String,
        /// The values of the path's `$` parameters.
        params: Params,
    },
    /// An instruction: a query, command or update.
    Execute {
        /// The instruction.
        text: String,
        /// The values of its `$` parameters.
        params: Params,
    },
}

/// What the reply to a call must be.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// `pong` (WebSocket) or `ok` (HTTP health).
    Echo,
    /// The node in dump form, read at this version.
    Node {
        /// The version the node was read at.
        version: u64,
        /// The node's dump.
        node: Value,
    },
    /// A query's whole result.
    Rows(QueryResult),
    /// A transaction of queries: each member's whole result, in order.
    Replies(Vec<QueryResult>),
    /// A committed write with this many changes.
    Done {
        /// The number of changes.
        changes: usize,
    },
}

impl Expect {
    /// The same expectation with its value altered (the checker must then call every reply
    /// wrong). `Echo` carries no value; it stays.
    fn corrupted(self) -> Expect {
        match self {
            Expect::Echo => Expect::Echo,
            Expect::Node { version, node } => Expect::Node { version: version.wrapping_add(1), node },
            Expect::Rows(mut q) => {
                q.total = q.total.wrapping_add(1);
                Expect::Rows(q)
            }
            Expect::Replies(mut list) => {
                list.push(QueryResult { total: 0, columns: Vec::new(), rows: Vec::new() });
                Expect::Replies(list)
            }
            Expect::Done { changes } => Expect::Done { changes: changes + 1 },
        }
    }
}

/// One request of an operation and what its reply must be.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The request.
    pub call: Call,
    /// What the reply must be.
    pub expect: Expect,
}

/// What one client does once: one request, or several in order (B6 search types five
/// prefixes). Its latency is the time of all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// The requests, sent in order.
    pub steps: Vec<Step>,
}

/// A workload's operations; clients pick among them at random.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The operations, prepared with their parameters and expected replies.
    pub ops: Vec<Operation>,
}

impl Prepared {
    /// The operations as `config` wants them: with every expected value altered when it asks
    /// for that (`corrupt_expected`, for tests of the checker).
    pub fn for_config(mut self, config: &Config) -> Prepared {
        if config.corrupt_expected {
            for op in &mut self.ops {
                for step in &mut op.steps {
                    step.expect = std::mem::replace(&mut step.expect, Expect::Echo).corrupted();
                }
            }
        }
        self
    }
}

/// What a write point is checked against afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteState {
    /// Sum of every machine's 'Pulses'.
    pub pulses: i64,
    /// The database's version.
    pub version: u64,
}

/// A database with a server on it, in its own runtime.
pub struct ServedDatabase {
    kind: DatasetKind,
    engine: Arc<Engine>,
    runtime: tokio::runtime::Runtime,
    addr: SocketAddr,
    handle: ShutdownHandle,
    task: tokio::task::JoinHandle<Result<(), ServerError>>,
    products: Vec<String>,
    machines: Vec<String>,
    b6_index: Option<DataIndex>,
}

fn params_of(pairs: &[(&str, ParamValue)]) -> Params {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn engine_params(p: &Params) -> std::collections::HashMap<String, ParamValue> {
    p.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The server's runtime: named threads (for [`super::cpu`]) that stay alive for the run.
fn server_runtime(threads: usize) -> Result<tokio::runtime::Runtime, RemoteError> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.enable_all().thread_name(super::cpu::SERVER_THREADS).thread_keep_alive(Duration::from_secs(24 * 3600));
    if threads > 0 {
        b.worker_threads(threads);
    }
    b.build().map_err(|e| RemoteError::io("starting the server's runtime", e))
}

fn run_text(engine: &Engine, text: &str, params: &Params) -> Result<Reply, RemoteError> {
    engine.execute_text(text, &engine_params(params)).map_err(|e| RemoteError::espalier(text.to_string(), e))
}

/// Fills the demo database: its data, `rows` products (`p000000`…, price = number) and `rows`
/// machines (`m000000`…), then [`QUERY_ORDERS`] orders with a line per product (at most
/// [`LINES_PER_ORDER`]).
fn build_demo(engine: &Engine, rows: usize, pb: &ProgressBar) -> Result<(), RemoteError> {
    let parsed = parse_instructions(DEMO_DATA, ParseOptions::CLIENT)
        .map_err(|e| RemoteError::espalier("demo/data.alan", e.into()))?;
    for instr in parsed {
        let plan =
            engine.check(&instr.item, Some(DEMO_DATA)).map_err(|e| RemoteError::espalier("demo/data.alan", e))?;
        engine.run(&plan, &Default::default(), None).map_err(|e| RemoteError::espalier("loading demo/data.alan", e))?;
    }
    for start in (0..rows).step_by(ROWS_PER_COMMIT) {
        let end = (start + ROWS_PER_COMMIT).min(rows);
        let mut text = String::from("update (");
        for i in start..end {
            text.push_str(&format!(
                " 'Products' -> dictionary \"{}\" ( 'Description' -> text \"part {i}\" 'Price' -> number {i} )",
                product_key(i)
            ));
            text.push_str(&format!(
                " 'Machines' -> dictionary \"{}\" ( 'Costs per Hour' -> number {} )",
                machine_key(i),
                50 + i % 200
            ));
        }
        text.push(')');
        run_text(engine, &text, &Params::new())?;
        pb.set_message(format!("building the demo data: {end}/{rows} rows"));
    }
    let lines = rows.min(LINES_PER_ORDER);
    for start in (0..QUERY_ORDERS).step_by(10) {
        let mut text = String::from("update (");
        for i in start..(start + 10).min(QUERY_ORDERS) {
            text.push_str(&format!(
                " 'Orders' -> dictionary \"{}\" ( 'Client' -> reference \"c1\" 'Quantity' -> number {i}",
                order_key(i)
            ));
            for j in 0..lines {
                text.push_str(&format!(
                    " 'Lines' -> matrix \"{}\" ( 'Amount' -> number {} )",
                    product_key(j),
                    i * 1000 + j
                ));
            }
            text.push_str(" 'Status' -> stategroup 'Planned' ( 'Scheduled Start Date' -> number 20260101 ) )");
        }
        text.push(')');
        run_text(engine, &text, &Params::new())?;
    }
    Ok(())
}

fn order_key(i: usize) -> String {
    format!("q{i:03}")
}

fn product_key(i: usize) -> String {
    format!("p{i:06}")
}

fn machine_key(i: usize) -> String {
    format!("m{i:06}")
}

/// Keys in the first column of a query's rows.
fn keys(engine: &Engine, text: &str) -> Result<Vec<String>, RemoteError> {
    match run_text(engine, text, &Params::new())? {
        Reply::Query(q) => Ok(q.rows.into_iter().filter_map(|r| r.key.into_iter().next()).collect()),
        other => Err(RemoteError::Invalid(format!("{text}: expected rows, got {other:?}"))),
    }
}

impl ServedDatabase {
    /// Builds the data set in `dir` and starts a server on it on a free 127.0.0.1 port.
    pub fn start(
        kind: DatasetKind,
        config: &Config,
        dir: &Path,
        pb: &ProgressBar,
    ) -> Result<ServedDatabase, RemoteError> {
        let options = DatabaseOptions { durability: config.durability.espalier(), ..Default::default() };
        let (engine, b6_index) = match kind {
            DatasetKind::Demo => {
                let engine = Engine::create(dir, DEMO_SCHEMA, options)
                    .map_err(|e| RemoteError::espalier("creating the demo database", e))?;
                build_demo(&engine, config.demo_rows, pb)?;
                (engine, None)
            }
            DatasetKind::B6 => {
                let file = dataset::suite_file(Suite::B6)?;
                let engine = Engine::create(dir, &file.model, options)
                    .map_err(|e| RemoteError::espalier("creating the B6 database", e))?;
                let scale = Scale { outer: config.b6_scale, nested: config.b6_nested_scale };
                dataset::build(&engine, &file, config.seed, scale, &ProgressBar::hidden())?;
                let index = DataIndex::read(&engine)?;
                (engine, Some(index))
            }
            DatasetKind::Model => {
                return Err(RemoteError::Invalid(
                    "the model data sets are built by their callers (ServedDatabase::serve)".into(),
                ))
            }
        };
        let products = if kind == DatasetKind::Demo {
            keys(&engine, "collection select . 'Products' 'Price' -> number : 'Price'")?
        } else {
            Vec::new()
        };
        let machines = if kind == DatasetKind::Demo {
            keys(&engine, "collection select . 'Machines' 'Pulses' -> number : 'Pulses'")?
        } else {
            Vec::new()
        };
        let mut served = ServedDatabase::serve(kind, engine, config)?;
        served.products = products;
        served.machines = machines;
        served.b6_index = b6_index;
        Ok(served)
    }

    /// Starts a server on `engine`, a database built by the caller, on a free 127.0.0.1 port.
    pub fn serve(kind: DatasetKind, engine: Engine, config: &Config) -> Result<ServedDatabase, RemoteError> {
        let engine = Arc::new(engine);
        let runtime = server_runtime(config.server_threads)?;
        let mut server_config = ServerConfig::local(0);
        // A shared session carries one request per client at a time.
        let max_k = config.clients.iter().copied().max().unwrap_or(1);
        server_config.limits.max_in_flight = server_config.limits.max_in_flight.max(max_k);
        let server = runtime
            .block_on(Server::bind(engine.clone(), server_config))
            .map_err(|e| RemoteError::Server(e.to_string()))?;
        let addr = server.local_addr().map_err(|e| RemoteError::Server(e.to_string()))?;
        let handle = server.shutdown_handle();
        let task = runtime.spawn(server.serve());
        Ok(ServedDatabase {
            kind,
            engine,
            runtime,
            addr,
            handle,
            task,
            products: Vec::new(),
            machines: Vec::new(),
            b6_index: None,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Shuts the server down gracefully and waits for it (bounded).
    pub fn stop(self) -> Result<(), RemoteError> {
        self.handle.shutdown();
        let task = self.task;
        let r = self.runtime.block_on(async move { tokio::time::timeout(STOP_WAIT, task).await });
        match r {
            Err(_) => Err(RemoteError::Server(format!("the server did not stop within {STOP_WAIT:?}"))),
            Ok(Err(e)) => Err(RemoteError::Server(format!("the server task failed: {e}"))),
            Ok(Ok(Err(e))) => Err(RemoteError::Server(format!("the server stopped with an error: {e}"))),
            Ok(Ok(Ok(()))) => Ok(()),
        }
    }

    /// The state a write workload is checked against (None for reads).
    pub fn write_counter(&self, workload: &Workload) -> Result<Option<WriteState>, RemoteError> {
        if !workload.writes() {
            return Ok(None);
        }
        let Reply::Query(q) = run_text(&self.engine, PULSES_QUERY, &Params::new())? else {
            return Err(RemoteError::Invalid(format!("{PULSES_QUERY}: expected rows")));
        };
        let mut pulses = 0i64;
        for row in &q.rows {
            let v = row.values.first().and_then(Value::as_i64).ok_or_else(|| {
                RemoteError::Invalid(format!("machine {:?} has no number in 'Pulses': {:?}", row.key, row.values))
            })?;
            pulses = pulses.wrapping_add(v);
        }
        Ok(Some(WriteState { pulses, version: self.engine.database().version() }))
    }

    /// The workload's operations with their expected replies, from the engine in process.
    pub fn prepare(&self, workload: &Workload, config: &Config) -> Result<Prepared, RemoteError> {
        let seed = workload.name().bytes().fold(config.seed, |h, b| h.rotate_left(5) ^ u64::from(b));
        let mut rng = StdRng::seed_from_u64(seed);
        let pick = |rng: &mut StdRng, keys: &[String], what: &str| -> Result<String, RemoteError> {
            if keys.is_empty() {
                return Err(RemoteError::Invalid(format!("the {} data has no {what}", self.kind.name())));
            }
            Ok(keys[rng.random_range(0..keys.len())].clone())
        };
        let version = self.engine.database().version();
        let mut ops = Vec::new();
        match workload {
            Workload::Echo => ops.push(Operation { steps: vec![Step { call: Call::Ping, expect: Expect::Echo }] }),
            Workload::Get => {
                for _ in 0..config.pool {
                    let key = pick(&mut rng, &self.products, "products")?;
                    let params = params_of(&[("p", ParamValue::Text(key))]);
                    let node = match run_text(&self.engine, &format!("get {GET_PATH}"), &params)? {
                        Reply::Node(n) => n,
                        other => return Err(RemoteError::Invalid(format!("get: expected a node, got {other:?}"))),
                    };
                    let call = Call::Get { path: GET_PATH.into(), params };
                    ops.push(Operation { steps: vec![Step { call, expect: Expect::Node { version, node } }] });
                }
            }
            Workload::Query => {
                for _ in 0..config.pool {
                    let order = order_key(rng.random_range(0..QUERY_ORDERS));
                    let params = params_of(&[("o", ParamValue::Text(order))]);
                    let rows = match run_text(&self.engine, QUERY_TEXT, &params)? {
                        Reply::Query(q) => q,
                        other => return Err(RemoteError::Invalid(format!("query: expected rows, got {other:?}"))),
                    };
                    let call = Call::Execute { text: QUERY_TEXT.into(), params };
                    ops.push(Operation { steps: vec![Step { call, expect: Expect::Rows(rows) }] });
                }
            }
            Workload::Command | Workload::Update => {
                let text = if *workload == Workload::Command { COMMAND_TEXT } else { UPDATE_TEXT };
                for _ in 0..config.pool {
                    let key = pick(&mut rng, &self.machines, "machines")?;
                    let call = Call::Execute { text: text.into(), params: params_of(&[("m", ParamValue::Text(key))]) };
                    ops.push(Operation { steps: vec![Step { call, expect: Expect::Done { changes: 1 } }] });
                }
            }
            Workload::Model(_) => {
                return Err(RemoteError::Invalid(format!(
                    "workload {workload} is prepared by `bench remote-model`, which built its data"
                )))
            }
            Workload::B6(name) => {
                let index = self.b6_index.as_ref().ok_or_else(|| {
                    RemoteError::Invalid(format!("workload {workload} needs the B6 data, not the {}", self.kind.name()))
                })?;
                let op = b6::ops(Suite::B6)
                    .into_iter()
                    .find(|o| o.name == name)
                    .ok_or_else(|| RemoteError::Invalid(format!("B6 has no operation {name:?}")))?;
                let drawn = crate::peers::runner::draw_params(&op, index, config.pool, config.seed)?;
                for p in drawn {
                    let params: Params = p.0.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
                    let mut steps = Vec::with_capacity(op.instructions.len());
                    for text in op.instructions {
                        let rows = match run_text(&self.engine, text, &params)? {
                            Reply::Query(q) => q,
                            other => {
                                return Err(RemoteError::Invalid(format!("{workload}: expected rows, got {other:?}")))
                            }
                        };
                        steps.push(Step {
                            call: Call::Execute { text: text.to_string(), params: params.clone() },
                            expect: Expect::Rows(rows),
                        });
                    }
                    ops.push(Operation { steps });
                }
            }
        }
        Ok(Prepared { ops }.for_config(config))
    }
}

/// A parameter map from `name=value` pairs of text (the HTTP node endpoint's `p.<name>`).
pub fn text_params(p: &Params) -> BTreeMap<String, String> {
    p.iter()
        .map(|(k, v)| {
            let s = match v {
                ParamValue::Text(t) => t.clone(),
                ParamValue::Int(i) => i.to_string(),
            };
            (k.clone(), s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_operations_carry_real_expected_replies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = Config { demo_rows: 10, pool: 32, clients: vec![1], ..Config::quick() };
        let db = ServedDatabase::start(DatasetKind::Demo, &config, &dir.path().join("db"), &ProgressBar::hidden())
            .expect("starts");
        let query = db.prepare(&Workload::Query, &config).expect("query");
        assert_eq!(query.ops.len(), 32);
        let sizes: Vec<(u64, usize)> = query
            .ops
            .iter()
            .map(|op| match &op.steps[0].expect {
                Expect::Rows(q) => (q.total, q.rows.len()),
                other => panic!("{other:?}"),
            })
            .collect();
        // Ten products: ten lines per order.
        assert!(sizes.iter().all(|&s| s == (10, 10)), "{sizes:?}");
        let get = db.prepare(&Workload::Get, &config).expect("get");
        match &get.ops[0].steps[0].expect {
            Expect::Node { node, .. } => assert!(node.get("Price").is_some_and(|p| p.is_i64()), "{node}"),
            other => panic!("{other:?}"),
        }
        let before = db.write_counter(&Workload::Update).expect("counter").expect("a write workload");
        assert_eq!(before.pulses, 2, "the demo data pulses M1 twice");
        assert_eq!(db.write_counter(&Workload::Get).expect("counter"), None);
        db.stop().expect("stops");
    }
}
