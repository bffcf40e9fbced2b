//! `espalier bench oo7`: the OO7 benchmark's traversals, queries and structural
//! modifications beside SQLite (see `espalier_oo7::bench`).

use std::path::PathBuf;

use espalier_oo7::bench::{run, Config, SEED};
use espalier_oo7::{Op, Size};

/// Options of `espalier bench oo7`.
#[derive(Debug, Clone, clap::Args)]
pub struct Oo7Args {
    /// Database size: tiny (50 composite parts of 10 atomic parts, for CI), small (500 × 20,
    /// 1 093 assemblies, the paper's table 1) or medium (500 × 200).
    #[arg(long, value_name = "SIZE", default_value = "small")]
    pub size: String,
    /// Connections per atomic part: 3, 6 or 9 (the paper's NumConnPerAtomic).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub fanout: usize,
    /// Timed (hot) runs per operation and system, after the warm-up.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub runs: usize,
    /// Untimed runs before the timed ones.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub warmup: usize,
    /// Cold samples per read-only operation (each after closing both databases, dropping
    /// their files from the page cache and reopening them); 0 skips the cold runs.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub cold: usize,
    /// Seed of the generator (the same seed gives the same database).
    #[arg(long, value_name = "N", default_value_t = SEED)]
    pub seed: u64,
    /// Run only these operations (repeatable, or comma-separated): T1, T6, T8, T9, Q1, Q2, Q3, Q4, Q5, Q7, Q8,
    /// Q8-coded, T1-one, T1-many, T2a, T2b, T2c, T3a, T3b, T3c, CU, insert, delete (insert and
    /// delete run together). Useful under a profiler.
    #[arg(long, value_name = "OP", value_delimiter = ',')]
    pub only: Vec<String>,
    /// CI size: tiny, fanout 3, 1 warm-up, 3 timed runs, 1 cold sample (a few seconds).
    #[arg(long)]
    pub quick: bool,
    /// Also write box plots per operation (Espalier and SQLite, hot and cold) to FILE as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Directory to make the temporary databases in (default: the system's temp directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The embedded peers, which run the read-only operations hot (not Q8 coded).
    #[command(flatten)]
    pub peers: crate::bench_graph_peers::GraphPeerOptions,
}

/// Runs the benchmark: progress on stderr, the report on stdout (Markdown, or JSON with the
/// global `--json`). Fails if the systems disagree on an answer, never for a missed target.
pub fn run_oo7(args: &Oo7Args, json: bool) -> Result<(), String> {
    let size =
        Size::parse(&args.size).ok_or_else(|| format!("unknown size {:?}; use tiny, small or medium", args.size))?;
    if ![3, 6, 9].contains(&args.fanout) {
        return Err(format!("the fanout is 3, 6 or 9 (the paper's NumConnPerAtomic), not {}", args.fanout));
    }
    let mut only = Vec::with_capacity(args.only.len());
    for name in &args.only {
        let known: Vec<&str> = Op::ALL.iter().map(|op| op.name()).collect();
        only.push(
            Op::parse(name)
                .ok_or_else(|| format!("unknown operation {name:?}; the operations are {}", known.join(", ")))?,
        );
    }
    let peers = args.peers.peers()?;
    let mut config = if args.quick {
        Config { dir: args.dir.clone(), progress: !json, only, ..Config::quick() }
    } else {
        Config {
            size,
            fanout: args.fanout,
            seed: args.seed,
            warmup: args.warmup,
            runs: args.runs,
            cold: args.cold,
            only,
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
