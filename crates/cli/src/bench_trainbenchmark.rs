//! `espalier bench trainbenchmark`: the Train Benchmark's six queries beside SQLite, batch and
//! repair re-checks (see `espalier_trainbenchmark::bench`).

use std::path::PathBuf;

use espalier_trainbenchmark::bench::{run, Config};
use espalier_trainbenchmark::{Query, Scenario};

/// Options of `espalier bench trainbenchmark`.
#[derive(Debug, Clone, clap::Args)]
pub struct TrainBenchmarkArgs {
    /// Model sizes (repeatable, or comma-separated). Size 1 is the official model (about 750
    /// elements); size N has about N times as many.
    #[arg(long, value_name = "N", value_delimiter = ',', default_values_t = [1, 4, 16])]
    pub size: Vec<u32>,
    /// Which model: batch (no faults), inject or repair (the default: faults to find and fix).
    #[arg(long, value_name = "SCENARIO", default_value = "repair")]
    pub scenario: String,
    /// Only these queries (repeatable): PosLength, SwitchMonitored, RouteSensor, SwitchSet,
    /// ConnectedSegments, SemaphoreNeighbor.
    #[arg(long, value_name = "QUERY")]
    pub query: Vec<String>,
    /// Timed runs per query and system, after the warm-up.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub runs: usize,
    /// Untimed runs before the timed ones.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub warmup: usize,
    /// Repair rounds per query (each fixes a share of the matches, then re-checks); 0 skips them.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub repair_rounds: usize,
    /// Share of the current matches each repair round fixes (at least one): the benchmark's
    /// proportional strategy.
    #[arg(long, value_name = "SHARE", default_value_t = 0.1)]
    pub repair_share: f64,
    /// Fix this many matches per repair round instead of a share (the benchmark's fixed
    /// strategy): the incremental re-check's cost then stays flat as the model grows.
    #[arg(long, value_name = "N")]
    pub repair_count: Option<usize>,
    /// CI size: size 1 only, 3 warm-up and 10 timed runs, 3 repair rounds.
    #[arg(long)]
    pub quick: bool,
    /// Directory to make the temporary databases in (default: the system's temp directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The embedded peers.
    #[command(flatten)]
    pub peers: crate::bench_graph_peers::GraphPeerOptions,
    /// Also write box plots of the timings to FILE as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<std::path::PathBuf>,
}

/// Runs the benchmark: progress on stderr, the report on stdout (Markdown, or JSON with the
/// global `--json`). Fails if the systems disagree on a match set, never for a missed target.
pub fn run_trainbenchmark(args: &TrainBenchmarkArgs, json: bool) -> Result<(), String> {
    let scenario = Scenario::parse(&args.scenario)
        .ok_or_else(|| format!("unknown scenario {:?}; use batch, inject or repair", args.scenario))?;
    let mut queries = Vec::new();
    for q in &args.query {
        let known: Vec<&str> = Query::ALL.iter().map(|q| q.name()).collect();
        queries
            .push(Query::parse(q).ok_or_else(|| format!("unknown query {q:?}; the queries are {}", known.join(", ")))?);
    }
    if queries.is_empty() {
        queries = Query::ALL.to_vec();
    }
    let peers = args.peers.peers()?;
    let mut config = if args.quick {
        Config { scenario, queries, dir: args.dir.clone(), progress: !json, ..Config::quick() }
    } else {
        Config {
            sizes: args.size.clone(),
            scenario,
            queries,
            warmup: args.warmup,
            runs: args.runs,
            repair_rounds: args.repair_rounds,
            repair_share: args.repair_share,
            repair_count: args.repair_count,
            dir: args.dir.clone(),
            progress: !json,
            ..Config::quick()
        }
    };
    config.peers = peers;
    config.peers_dir = args.peers.peers_dir.clone();
    config.require_peers = args.peers.require_peers;
    let report = run(&config).map_err(|e| e.to_string())?;
    crate::output::write_svg(args.svg.as_deref(), || report.chart_svg())?;
    crate::output::print_report(json, || &report, || report.to_markdown())
}
