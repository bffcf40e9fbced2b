//! `espalier bench remote`: the server under K concurrent clients beside PostgreSQL's pgbench
//! (see `espalier_bench::remote`).

use std::path::PathBuf;

use espalier_bench::peers::DurabilityPairing;
use espalier_bench::remote::{self, Compression, Config, Encoding, Stop, Transport, Workload};

use crate::{DurabilityArg, Global};

/// Options of `espalier bench remote`.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// CI size: K = 1, 4; 1 s per point after 0.2 s of warm-up; 200 demo rows, B6 at 0.05.
    /// Other options given override it.
    #[arg(long)]
    pub quick: bool,
    /// The clients, how they reach the server, and where the data goes.
    #[command(flatten)]
    pub clients: ClientOptions,
    /// Workloads, comma-separated: echo (the protocol's ping: the stack without the engine),
    /// get (one product node by key), query (the 100 lines of an order), command (the demo's
    /// 'pulse' command: one write), update (one-property update of a machine), or
    /// b6:search, b6:overview_subcollection, b6:get_big_items, b6:many_references (appendix B.6
    /// on the B6 data). Default echo,get,query,command,update.
    #[arg(long = "workload", value_name = "LIST", value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Messages shorter than this many bytes go uncompressed.
    #[arg(long, value_name = "BYTES")]
    pub compress_min: Option<usize>,
    /// WebSocket sessions shared by the clients, round robin (default: one per client).
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,
    /// Products and machines added to the demo data (default 100000, as many as pgbench's accounts
    /// at scale 1; --quick 200).
    #[arg(long, value_name = "N")]
    pub rows: Option<usize>,
    /// Scale of the B6 data for b6:<op> workloads (outermost collections; default 1, --quick 0.05).
    #[arg(long, value_name = "F")]
    pub b6_scale: Option<f64>,
    /// Scale of B6's nested collections (default 1; --quick 0.1).
    #[arg(long, value_name = "F")]
    pub b6_nested_scale: Option<f64>,
    /// Distinct prepared operations per workload, each with its expected reply.
    #[arg(long, value_name = "N")]
    pub pool: Option<usize>,
    /// Seed of the data and of the operations' parameters.
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
    /// Skip PostgreSQL (pgbench).
    #[arg(long)]
    pub no_pg: bool,
    /// pgbench's scale (100 000 accounts each).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub pg_scale: u32,
    /// pgbench's query mode (-M): simple, extended or prepared.
    #[arg(long, value_name = "MODE", default_value = "prepared")]
    pub pg_mode: String,
    /// PostgreSQL's shared_buffers.
    #[arg(long, value_name = "SIZE", default_value = "256MB")]
    pub pg_shared_buffers: String,
}

/// The options `bench remote` and `bench remote-model` share: the clients, how their requests
/// travel, the runtimes' threads and the directory of the temporary databases.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientOptions {
    /// Client counts, one point each (default 1,2,4,8,16,32,64).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub clients: Vec<usize>,
    /// Transports, comma-separated: ws (WebSocket sessions) and/or http (one-shot requests).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "ws")]
    pub transport: Vec<String>,
    /// Encodings, comma-separated: msgpack and/or json (both: every workload runs in each, and
    /// the report compares them).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "msgpack")]
    pub encoding: Vec<String>,
    /// Per-message compression of WebSocket sessions: none, zstd or deflate.
    #[arg(long, value_name = "C", default_value = "none")]
    pub compression: String,
    /// Seconds measured per point, after the warm-up (bench remote's default: 3; --quick 1).
    #[arg(long, value_name = "S", conflicts_with = "requests")]
    pub seconds: Option<f64>,
    /// Measure this many operations per point instead, shared by the clients as they go (seed
    /// 000's method: 1000, the default of bench remote-model); the warm-up is a tenth of it.
    #[arg(long, value_name = "N")]
    pub requests: Option<u64>,
    /// Seconds of untimed running before each point measured in seconds (default 1; bench
    /// remote --quick 0.2).
    #[arg(long, value_name = "S")]
    pub warmup: Option<f64>,
    /// Worker threads of the server's runtime (default: one per core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub server_threads: usize,
    /// Worker threads of the clients' runtime (default: one per core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub client_threads: usize,
    /// Directory for the temporary databases (and the PostgreSQL server of `bench remote`;
    /// default: the system's temp directory). Everything made there is deleted at the end.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Also draw throughput against the number of clients to FILE as SVG (a panel per
    /// workload or query, a line per transport and encoding).
    #[arg(long, value_name = "FILE")]
    pub throughput_svg: Option<PathBuf>,
}

impl ClientOptions {
    /// Sets these options in `c`; the error names the option.
    pub fn apply(&self, c: &mut Config) -> Result<(), String> {
        if !self.clients.is_empty() {
            c.clients = self.clients.clone();
        }
        c.transports = list(&self.transport, |s| Transport::parse(s).map_err(|e| e.to_string()))?;
        c.encodings = list(&self.encoding, |s| {
            Encoding::parse(s).ok_or_else(|| format!("--encoding: {s:?} is not msgpack or json"))
        })?;
        c.compression = Compression::parse(self.compression.trim())
            .ok_or_else(|| format!("--compression: {:?} is not none, zstd or deflate", self.compression))?;
        if let Some(s) = self.seconds {
            c.stop = Stop::Seconds(s);
        }
        if let Some(n) = self.requests {
            c.stop = Stop::Requests(n);
        }
        if let Some(w) = self.warmup {
            c.warmup_seconds = w;
        }
        c.server_threads = self.server_threads;
        c.client_threads = self.client_threads;
        c.dir = self.dir.clone();
        Ok(())
    }
}

/// The non-empty values of a comma-separated option, each parsed.
fn list<T>(values: &[String], parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    values.iter().filter(|v| !v.trim().is_empty()).map(|v| parse(v.trim())).collect()
}

/// The library configuration these options describe.
pub fn config(args: &RemoteArgs, global: &Global) -> Result<Config, String> {
    let mut c = if args.quick { Config::quick() } else { Config::full() };
    args.clients.apply(&mut c)?;
    if !args.workloads.is_empty() {
        c.workloads = list(&args.workloads, |s| Workload::parse(s).map_err(|e| e.to_string()))?;
    }
    if let Some(n) = args.compress_min {
        c.compress_min = n;
    }
    c.connections = args.connections;
    if let Some(n) = args.rows {
        c.demo_rows = n;
    }
    if let Some(f) = args.b6_scale {
        c.b6_scale = f;
    }
    if let Some(f) = args.b6_nested_scale {
        c.b6_nested_scale = f;
    }
    if let Some(n) = args.pool {
        c.pool = n;
    }
    c.seed = args.seed;
    c.postgres = !args.no_pg;
    c.pg_scale = args.pg_scale;
    c.pg_query_mode = args.pg_mode.clone();
    c.pg_shared_buffers = args.pg_shared_buffers.clone();
    c.durability = match global.durability_given().unwrap_or(DurabilityArg::Sync) {
        DurabilityArg::Sync => DurabilityPairing::Sync,
        DurabilityArg::Periodic => DurabilityPairing::Periodic,
        DurabilityArg::None => DurabilityPairing::None,
    };
    c.validate().map_err(|e| e.to_string())?;
    Ok(c)
}

/// Runs the benchmark: progress on stderr, the report on stdout (Markdown, or JSON with
/// `--json`). Fails if something cannot be built or started, or — after printing the report —
/// if any reply was wrong; never for a missed target.
pub fn run(args: &RemoteArgs, global: &Global) -> Result<(), String> {
    let mut config = config(args, global)?;
    config.progress = true;
    let report = remote::run(&config).map_err(|e| e.to_string())?;
    crate::output::write_svg(args.clients.throughput_svg.as_deref(), || report.throughput_svg())?;
    crate::output::print_report(global.json, || report.to_json(), || report.to_markdown())?;
    let wrong = report.wrong();
    if wrong > 0 {
        return Err(format!(
            "{wrong} wrong replies (see the report): the server answered something else than the engine"
        ));
    }
    Ok(())
}
