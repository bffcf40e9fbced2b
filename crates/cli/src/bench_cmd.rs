//! `espalier bench core`: the in-process micro-benchmark against SQLite
//! (see `espalier_bench::core`).

use std::path::PathBuf;

/// Options of `espalier bench core`.
#[derive(Debug, Clone, clap::Args)]
pub struct CoreArgs {
    /// CI size: 10 000 items, 100 orders, 500 samples per operation after 50 warm-up
    /// (default: 100 000 items, 1 000 orders, 20 000 samples after 1 000 warm-up).
    #[arg(long)]
    pub quick: bool,
    /// Timed repetitions per operation and system (overrides the mode's default).
    #[arg(long, value_name = "N")]
    pub ops: Option<usize>,
    /// Seed of the data and key generator.
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
    /// Run SQLite with locking_mode=EXCLUSIVE (no file-lock syscalls per transaction).
    #[arg(long)]
    pub sqlite_exclusive: bool,
    /// Measure only these operations (repeatable): key_lookup, update_commit,
    /// two_hop_navigation, collection_query. Useful under a profiler.
    #[arg(long, value_name = "OP")]
    pub only: Vec<String>,
    /// Directory to make the temporary databases in (default: the system's temp directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Runs the benchmark: progress on stderr, the report on stdout (Markdown, or JSON with the
/// global `--json`).
/// Fails only if a database cannot be built or the systems disagree — never for a missed
/// target.
pub fn run_core(args: &CoreArgs, json: bool) -> Result<(), String> {
    let mut config =
        if args.quick { espalier_bench::core::Config::quick() } else { espalier_bench::core::Config::full() };
    if let Some(ops) = args.ops {
        config.ops = ops;
    }
    config.seed = args.seed;
    config.dir = args.dir.clone();
    config.sqlite_exclusive = args.sqlite_exclusive;
    config.only = args.only.clone();
    let report = espalier_bench::core::run(&config).map_err(|e| e.to_string())?;
    crate::output::print_report(json, || report.to_json(), || report.to_markdown())
}
