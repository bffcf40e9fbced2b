//! `espalier bench remote`: the server under load, beside PostgreSQL — the method of seed 000
//! (Garcia-Dominguez et al., §3.2 and §4.1): K concurrent clients (1, 2, 4, … 64) run one
//! workload against a server as fast as they can after a warm-up; per K the report gives
//! throughput, latency quartiles and p99, failed replies (errors, broken connections) and
//! **wrong** replies — every reply is checked against the value the same request gives when
//! run on the engine directly, in process, without the network (seed 000's table 6 found a
//! peer returning wrong results under load; this counts them).
//!
//! The pieces:
//!
//! - [`data`] builds the databases (the demo model with more products and machines, or B6 at a
//!   scale), starts an Espalier server on each on a free 127.0.0.1 port in its own tokio
//!   runtime, and prepares each workload's operations with their expected replies;
//! - [`driver`] opens the connections (WebSocket sessions through `espalier-client`, or HTTP
//!   one-shots through `reqwest`) and runs the K clients, each in a closed loop;
//! - [`pgbench`] runs PostgreSQL's own `pgbench` (select-only, and a single-row `UPDATE`
//!   script) at the same client counts against a private server started by
//!   [`crate::peers::pg_server`];
//! - [`cpu`] splits this process's CPU time between the client threads and the server's, so
//!   the report can say whether the clients were the bottleneck;
//! - [`report`] holds the results, the targets of issue #4 and the Markdown/JSON forms.
//!
//! **Echo floor.** The `echo` workload is the protocol's `ping`: over WebSocket it goes through
//! the same session, framing, decoding, dispatch, encoding and writer as every request, minus
//! the engine; over HTTP it is `GET /v1/health` (same listener, router and reply encoding, no
//! engine and no request body).

pub mod cpu;
pub mod data;
pub mod driver;
pub mod grabats;
pub mod model;
pub mod pgbench;
pub mod report;

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use espalier_protocol::{Compression, Encoding};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::peers::{DurabilityPairing, PeerError};

pub use report::{PgPoint, Point, Report, Target};

/// Most concurrent clients a point may have (the server's default session limit).
pub const MAX_CLIENTS: usize = 1024;
/// Longest a point may be measured.
pub const MAX_SECONDS: f64 = 3600.0;
/// Most requests a point may be given in count mode.
pub const MAX_REQUESTS: u64 = 100_000_000;
/// Most rows the demo data may be given.
pub const MAX_DEMO_ROWS: usize = 1_000_000;

/// Why a remote run failed. Missed targets and wrong replies are not errors: they are in the
/// report.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// Bad options: names the option and the reason.
    #[error("{0}")]
    Invalid(String),
    /// An Espalier instruction failed while preparing the data or the operations.
    #[error("Espalier: {context}: {source}")]
    Espalier {
        /// What the run was doing.
        context: String,
        /// The instruction error.
        #[source]
        source: Box<espalier_instruction::InstructionError>,
    },
    /// Starting, running or stopping the Espalier server failed.
    #[error("the Espalier server: {0}")]
    Server(String),
    /// A file, process or runtime operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What the run was doing.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Code shared with the peer benchmarks failed: the PostgreSQL server or the B6 data and parameters.
    #[error(transparent)]
    Peer(#[from] PeerError),
    /// pgbench failed or printed something this run cannot read.
    #[error("pgbench: {0}")]
    Pgbench(String),
}

impl RemoteError {
    /// A [`RemoteError::Io`] with its context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> RemoteError {
        RemoteError::Io { context: context.into(), source }
    }

    /// A [`RemoteError::Espalier`] with its context.
    pub fn espalier(context: impl Into<String>, source: espalier_instruction::InstructionError) -> RemoteError {
        RemoteError::Espalier { context: context.into(), source: Box::new(source) }
    }
}

/// What each client sends, again and again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workload {
    /// `ping` (WebSocket) or `GET /v1/health` (HTTP): the stack without the engine.
    Echo,
    /// `get` of one product by key (a node read; the fine-grained operation).
    Get,
    /// A collection query with a parameter: one order's 100 lines (the coarse operation).
    Query,
    /// `command 'pulse'` on a machine: a one-property write through a schema command.
    Command,
    /// `update . 'Machines' : $m ( 'Pulses' -> number + 1 )`: a single-row update.
    Update,
    /// A read-only operation of appendix B.6 (search, overview_subcollection, get_big_items,
    /// many_references) on the B6 data.
    B6(String),
    /// A model query of `espalier bench remote-model` (`tb:PosLength`, `grabats:singleton`, …),
    /// prepared by its caller on a database it built ([`model::run`]); `--workload` of `bench
    /// remote` does not take it.
    Model(String),
}

/// The B6 operations a remote client can repeat (task_start needs a reset after each run).
pub const B6_OPS: [&str; 4] = ["search", "overview_subcollection", "get_big_items", "many_references"];

impl Workload {
    /// `echo`, `get`, `query`, `command`, `update` or `b6:<operation>`.
    pub fn parse(s: &str) -> Result<Workload, RemoteError> {
        let s = s.trim();
        Ok(match s {
            "echo" => Workload::Echo,
            "get" => Workload::Get,
            "query" => Workload::Query,
            "command" => Workload::Command,
            "update" => Workload::Update,
            _ => match s.strip_prefix("b6:") {
                Some(op) if B6_OPS.contains(&op) => Workload::B6(op.to_string()),
                Some("task_start") => {
                    return Err(RemoteError::Invalid(
                        "workload b6:task_start is not supported remotely: each run switches a machine to \
                         'Selected' and needs an untimed reset before the machine can be used again; use \
                         `update` or `command` for writes"
                            .into(),
                    ))
                }
                Some(op) => {
                    return Err(RemoteError::Invalid(format!(
                        "unknown B6 operation {op:?} in workload {s:?}: expected one of {}",
                        B6_OPS.join(", ")
                    )))
                }
                None => {
                    return Err(RemoteError::Invalid(format!(
                        "unknown workload {s:?}: expected echo, get, query, command, update or b6:<op> (b6:{})",
                        B6_OPS.join(", b6:")
                    )))
                }
            },
        })
    }

    /// The workload's name: `echo`, `get`, `query`, `command`, `update` or `b6:<op>`.
    pub fn name(&self) -> String {
        match self {
            Workload::Echo => "echo".into(),
            Workload::Get => "get".into(),
            Workload::Query => "query".into(),
            Workload::Command => "command".into(),
            Workload::Update => "update".into(),
            Workload::B6(op) => format!("b6:{op}"),
            Workload::Model(name) => name.clone(),
        }
    }

    /// Whether the workload commits (its replies are checked for distinct versions and its
    /// increments counted at the end).
    pub fn writes(&self) -> bool {
        matches!(self, Workload::Command | Workload::Update)
    }

    fn dataset(&self) -> data::DatasetKind {
        match self {
            Workload::B6(_) => data::DatasetKind::B6,
            Workload::Model(_) => data::DatasetKind::Model,
            _ => data::DatasetKind::Demo,
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for Workload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// How requests travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// WebSocket sessions at `/ws`: pipelined, replies matched by id.
    Ws,
    /// One-shot HTTP requests (`/v1/execute`, `/v1/node`, `/v1/health`) on keep-alive
    /// connections.
    Http,
}

impl Transport {
    /// Parses `ws` (also `websocket`) or `http`.
    pub fn parse(s: &str) -> Result<Transport, RemoteError> {
        match s.trim() {
            "ws" | "websocket" => Ok(Transport::Ws),
            "http" => Ok(Transport::Http),
            other => Err(RemoteError::Invalid(format!("unknown transport {other:?}: expected ws or http"))),
        }
    }

    /// The transport's name: `ws` or `http`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Ws => "ws",
            Transport::Http => "http",
        }
    }
}

/// When a point ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Measure for this long (after the warm-up); throughput counts replies completed in it.
    Seconds(f64),
    /// Measure this many operations in all, shared by the clients as they go (seed 000's
    /// producer/consumer design); the warm-up is a tenth of it, at least one per client.
    Requests(u64),
}

/// What a remote run measures and how.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Client counts, one point each.
    pub clients: Vec<usize>,
    /// When each point ends.
    pub stop: Stop,
    /// Untimed running before each point (seconds mode).
    pub warmup_seconds: f64,
    /// The workloads, each measured at every point.
    pub workloads: Vec<Workload>,
    /// The transports, each measured at every point.
    pub transports: Vec<Transport>,
    /// The message encodings, each measured at every point.
    pub encodings: Vec<Encoding>,
    /// The compression of messages (both sides).
    pub compression: Compression,
    /// Messages shorter than this go uncompressed (both sides).
    pub compress_min: usize,
    /// WebSocket sessions the clients share, round robin (None: one per client).
    pub connections: Option<usize>,
    /// Espalier's durability, and PostgreSQL's settings paired with it.
    pub durability: DurabilityPairing,
    /// Products and machines added to the demo data (keys `p000000`…, `m000000`…).
    pub demo_rows: usize,
    /// B6 scale of the outermost and of the nested collections (`b6:<op>` workloads).
    pub b6_scale: f64,
    /// B6 scale of the nested collections (`b6:<op>` workloads).
    pub b6_nested_scale: f64,
    /// Distinct prepared operations per workload (parameters drawn with the seed).
    pub pool: usize,
    /// Seed of the RNG that draws the operations' parameters.
    pub seed: u64,
    /// Run pgbench beside Espalier.
    pub postgres: bool,
    /// pgbench's scale: 100 000 accounts per unit.
    pub pg_scale: u32,
    /// pgbench's `-M`: simple, extended or prepared.
    pub pg_query_mode: String,
    /// PostgreSQL `shared_buffers`.
    pub pg_shared_buffers: String,
    /// Tokio worker threads of the server's runtime and of the clients' (0: one per core).
    pub server_threads: usize,
    /// Tokio worker threads of the clients' runtime (0: one per core).
    pub client_threads: usize,
    /// Latency samples kept per point (beyond it replies are still counted and checked).
    pub max_samples: usize,
    /// Where the temporary databases go (default: the system's temp directory).
    pub dir: Option<PathBuf>,
    /// Draw progress bars on stderr.
    pub progress: bool,
    /// For tests of the checker: every expected value is altered, so every reply that is
    /// otherwise right must be counted as wrong.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub corrupt_expected: bool,
}

impl Config {
    /// The full run: K = 1, 2, 4, … 64, 3 s per point after 1 s of warm-up.
    pub fn full() -> Config {
        Config {
            clients: vec![1, 2, 4, 8, 16, 32, 64],
            stop: Stop::Seconds(3.0),
            warmup_seconds: 1.0,
            workloads: vec![Workload::Echo, Workload::Get, Workload::Query, Workload::Command, Workload::Update],
            transports: vec![Transport::Ws],
            encodings: vec![Encoding::Msgpack],
            compression: Compression::None,
            compress_min: espalier_protocol::DEFAULT_COMPRESS_MIN,
            connections: None,
            durability: DurabilityPairing::Sync,
            // As many products (and machines) as pgbench's accounts at scale 1.
            demo_rows: 100_000,
            b6_scale: 1.0,
            b6_nested_scale: 1.0,
            pool: 1024,
            seed: 42,
            postgres: true,
            pg_scale: 1,
            pg_query_mode: "prepared".into(),
            pg_shared_buffers: "256MB".into(),
            server_threads: 0,
            client_threads: 0,
            max_samples: 2_000_000,
            dir: None,
            progress: true,
            corrupt_expected: false,
        }
    }

    /// CI size: K = 1, 4; about a second per point; tiny data.
    pub fn quick() -> Config {
        Config {
            clients: vec![1, 4],
            stop: Stop::Seconds(1.0),
            warmup_seconds: 0.2,
            demo_rows: 200,
            b6_scale: 0.05,
            b6_nested_scale: 0.1,
            pool: 64,
            ..Config::full()
        }
    }

    /// Checks the options' ranges; the error names the option.
    pub fn validate(&self) -> Result<(), RemoteError> {
        let bad = |m: String| Err(RemoteError::Invalid(m));
        if self.clients.is_empty() {
            return bad("--clients: give at least one client count".into());
        }
        for &k in &self.clients {
            if k == 0 || k > MAX_CLIENTS {
                return bad(format!("--clients: {k} is not between 1 and {MAX_CLIENTS}"));
            }
        }
        match self.stop {
            Stop::Seconds(s) if !(s > 0.0 && s <= MAX_SECONDS) => {
                return bad(format!("--seconds: {s} is not a duration between 0 and {MAX_SECONDS} seconds"))
            }
            Stop::Requests(n) if n == 0 || n > MAX_REQUESTS => {
                return bad(format!("--requests: {n} is not between 1 and {MAX_REQUESTS}"))
            }
            _ => {}
        }
        if !(self.warmup_seconds >= 0.0 && self.warmup_seconds <= MAX_SECONDS) {
            return bad(format!(
                "--warmup: {} is not a duration between 0 and {MAX_SECONDS} seconds",
                self.warmup_seconds
            ));
        }
        if self.workloads.is_empty() {
            return bad("--workload: give at least one workload".into());
        }
        if self.transports.is_empty() || self.encodings.is_empty() {
            return bad("--transport and --encoding need at least one value each".into());
        }
        if self.compression != Compression::None && self.transports.contains(&Transport::Http) {
            return bad(format!(
                "--compression {}: the server's HTTP endpoints do not compress (docs/protocol.md); compression \
                 applies to WebSocket sessions only",
                self.compression
            ));
        }
        if let Some(n) = self.connections {
            if n == 0 || n > MAX_CLIENTS {
                return bad(format!("--connections: {n} is not between 1 and {MAX_CLIENTS}"));
            }
            if self.transports.contains(&Transport::Http) {
                return bad("--connections shares WebSocket sessions; an HTTP/1.1 connection carries one request at \
                            a time, so every HTTP client has its own"
                    .into());
            }
        }
        if self.demo_rows > MAX_DEMO_ROWS {
            return bad(format!("--rows: at most {MAX_DEMO_ROWS}"));
        }
        crate::suite::Scale { outer: self.b6_scale, nested: self.b6_nested_scale }
            .validate()
            .map_err(RemoteError::Invalid)?;
        if self.pool == 0 || self.pool > 1 << 20 {
            return bad(format!("--pool: {} is not between 1 and {}", self.pool, 1 << 20));
        }
        if self.pg_scale == 0 || self.pg_scale > 10_000 {
            return bad(format!("--pg-scale: {} is not between 1 and 10000", self.pg_scale));
        }
        if !["simple", "extended", "prepared"].contains(&self.pg_query_mode.as_str()) {
            return bad(format!("--pg-mode {:?}: expected simple, extended or prepared", self.pg_query_mode));
        }
        if self.server_threads > 256 || self.client_threads > 256 {
            return bad("--server-threads and --client-threads are at most 256".into());
        }
        if self.max_samples == 0 {
            return bad("max samples must be at least 1".into());
        }
        Ok(())
    }

    /// The (transport, encoding) pairs every workload runs with.
    pub fn variants(&self) -> Vec<(Transport, Encoding)> {
        let mut v = Vec::new();
        for &t in &self.transports {
            for &e in &self.encodings {
                if !v.contains(&(t, e)) {
                    v.push((t, e));
                }
            }
        }
        v
    }
}

fn bar(progress: bool, len: u64) -> ProgressBar {
    crate::progress::bar(
        progress,
        len,
        "remote",
        "{prefix:>10} [{bar:30}] {pos}/{len} points {elapsed_precise} eta {eta}  {msg}",
    )
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Runs every workload at every client count (and pgbench, unless turned off) and returns
/// the report. Fails only when something cannot be built, started or read.
pub fn run(config: &Config) -> Result<Report, RemoteError> {
    config.validate()?;
    let started = Instant::now();
    let variants = config.variants();
    let pg_points = if config.postgres { 2 * config.clients.len() } else { 0 };
    let total = (config.workloads.len() * variants.len() * config.clients.len() + pg_points) as u64;
    let pb = bar(config.progress, total);
    let load_before = load_average();
    let base = config.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("espalier-bench-remote-")
        .tempdir_in(&base)
        .map_err(|e| RemoteError::io(format!("making a temporary directory in {}", base.display()), e))?;
    let _cleanup = crate::interrupt::on_interrupt(tmp.path().to_path_buf(), None);

    let client_rt = driver::client_runtime(config.client_threads)?;
    let mut points = Vec::new();
    let mut verifications = Vec::new();
    for kind in [data::DatasetKind::Demo, data::DatasetKind::B6] {
        let workloads: Vec<&Workload> = config.workloads.iter().filter(|w| w.dataset() == kind).collect();
        if workloads.is_empty() {
            continue;
        }
        pb.set_message(format!("building the {} data", kind.name()));
        let server = data::ServedDatabase::start(kind, config, &tmp.path().join(kind.name()), &pb)?;
        for workload in workloads {
            let prepared = server.prepare(workload, config)?;
            let measured = measure(&server, workload, &prepared, config, &client_rt, &pb)?;
            points.extend(measured.0);
            verifications.extend(measured.1);
        }
        server.stop()?;
    }
    drop(client_rt);

    let mut postgres = Vec::new();
    let mut versions = vec![("espalier".to_string(), format!("espalier {}", env!("CARGO_PKG_VERSION")))];
    if config.postgres {
        pb.set_message("starting PostgreSQL and pgbench -i");
        let pg = pgbench::Pgbench::start(config, tmp.path())?;
        versions.push(("postgres".into(), pg.server_version()));
        versions.push(("pgbench".into(), pg.pgbench_version()));
        pg.warm_up(config)?;
        for script in [pgbench::Script::SelectOnly, pgbench::Script::Update] {
            for &k in &config.clients {
                pb.set_message(format!("pgbench {} K={k}", script.name()));
                postgres.push(pg.run(script, k, config)?);
                pb.inc(1);
            }
        }
        pg.stop()?;
    }
    pb.finish_and_clear();
    let postgres_settings = if config.postgres { pgbench::settings(config) } else { Vec::new() };
    let machine = machine(started, load_before, versions, postgres_settings);
    Ok(Report::new(config.clone(), machine, points, postgres, verifications))
}

/// The machine a run took place on, at its end.
fn machine(
    started: Instant,
    load_before: Option<f64>,
    versions: Vec<(String, String)>,
    postgres_settings: Vec<String>,
) -> report::Machine {
    report::Machine {
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        load_before,
        load_after: load_average(),
        seconds: started.elapsed().as_secs_f64(),
        versions,
        postgres_settings,
    }
}

/// Measures one workload at every client count over every transport and encoding: the points,
/// and the checks of the write points.
fn measure(
    server: &data::ServedDatabase,
    workload: &Workload,
    prepared: &data::Prepared,
    config: &Config,
    client_rt: &tokio::runtime::Runtime,
    pb: &ProgressBar,
) -> Result<(Vec<Point>, Vec<report::Verification>), RemoteError> {
    let mut points = Vec::new();
    let mut verifications = Vec::new();
    for (transport, encoding) in config.variants() {
        for &k in &config.clients {
            pb.set_message(format!("{workload} {}/{encoding} K={k}", transport.name()));
            let before = server.write_counter(workload)?;
            let outcome = client_rt.block_on(driver::run_point(
                server,
                prepared,
                driver::PointSpec { workload, transport, encoding, clients: k },
                config,
            ))?;
            let after = server.write_counter(workload)?;
            let (point, verification) = outcome.finish(before, after);
            points.push(point);
            verifications.extend(verification);
            pb.inc(1);
        }
    }
    Ok((points, verifications))
}

/// `Duration` from seconds, for options already validated.
fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.0, MAX_SECONDS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_with_reasons() {
        assert_eq!(Workload::parse("get").unwrap(), Workload::Get);
        assert_eq!(Workload::parse("b6:search").unwrap(), Workload::B6("search".into()));
        assert_eq!(Workload::parse("b6:search").unwrap().name(), "b6:search");
        let e = Workload::parse("b6:task_start").unwrap_err().to_string();
        assert!(e.contains("reset"), "{e}");
        let e = Workload::parse("b6:nope").unwrap_err().to_string();
        assert!(e.contains("many_references"), "{e}");
        let e = Workload::parse("ping").unwrap_err().to_string();
        assert!(e.contains("expected echo, get"), "{e}");
    }

    #[test]
    fn configs_are_checked() {
        Config::full().validate().unwrap();
        Config::quick().validate().unwrap();
        let with = |f: &dyn Fn(&mut Config)| {
            let mut c = Config::quick();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(with(&|c| c.clients = vec![0]).contains("--clients"));
        assert!(with(&|c| c.clients = vec![]).contains("--clients"));
        assert!(with(&|c| c.stop = Stop::Seconds(0.0)).contains("--seconds"));
        assert!(with(&|c| c.stop = Stop::Requests(0)).contains("--requests"));
        assert!(with(&|c| {
            c.transports = vec![Transport::Http];
            c.compression = Compression::Zstd;
        })
        .contains("WebSocket sessions only"));
        assert!(with(&|c| {
            c.transports = vec![Transport::Http];
            c.connections = Some(2);
        })
        .contains("HTTP"));
        assert!(with(&|c| c.pg_query_mode = "fast".into()).contains("--pg-mode"));
        let mut c = Config::quick();
        c.transports = vec![Transport::Ws, Transport::Http, Transport::Ws];
        c.encodings = vec![Encoding::Json, Encoding::Msgpack];
        assert_eq!(c.variants().len(), 4);
    }
}
