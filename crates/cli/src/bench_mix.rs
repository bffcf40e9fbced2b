//! `espalier bench mix`: seed 004's transactional mix — YCSB-style batches with and without
//! transactions on Espalier's server, PostgreSQL (REPEATABLE READ) and SQLite (see
//! `espalier_bench::mix`).

use std::path::PathBuf;

use espalier_bench::mix::{self, Config, Mix, SystemKind};
use espalier_bench::peers::DurabilityPairing;

use crate::{DurabilityArg, Global};

/// Options of `espalier bench mix`.
#[derive(Debug, Clone, clap::Args)]
pub struct MixArgs {
    /// CI size: 500 records, K = 1, 4, half a second per point, scans of up to 50. Other
    /// options given override it.
    #[arg(long)]
    pub quick: bool,
    /// Records loaded into each system (default 100000).
    #[arg(long, value_name = "N")]
    pub size: Option<u64>,
    /// Client counts, one point each per system and mode (default 1,2,4,8,16,32,64).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub clients: Vec<usize>,
    /// Peers beside Espalier, comma-separated: postgres, sqlite, or none (default both).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub peers: Vec<String>,
    /// Seconds measured per point, after the warm-up (default 3; --quick 0.5).
    #[arg(long, value_name = "S")]
    pub seconds: Option<f64>,
    /// Seconds run before each point is measured (default 1; --quick 0.1).
    #[arg(long, value_name = "S")]
    pub warmup: Option<f64>,
    /// Operations per batch or transaction (the seed: 10).
    #[arg(long, value_name = "N")]
    pub ops: Option<usize>,
    /// Most records a scan reads (the seed: 300; --quick 50).
    #[arg(long, value_name = "N")]
    pub scan: Option<u64>,
    /// Percentages of read, update, insert, scan and read-modify-write (the seed: 20,20,20,20,20).
    #[arg(long, value_name = "R,U,I,S,M")]
    pub mix: Option<String>,
    /// Seed of the operation streams.
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
    /// Worker threads of Espalier's server (default: one per core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub server_threads: usize,
    /// Directory for the temporary databases and the PostgreSQL server (default: the system's
    /// temp directory). Everything made there is deleted at the end.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Also write box plots of the batch latencies to FILE as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Also draw batches per second against the number of clients to FILE as SVG (without and
    /// with transactions, a line per system).
    #[arg(long, value_name = "FILE")]
    pub throughput_svg: Option<PathBuf>,
    /// Scans then run in process in Espalier, SQLite and DuckDB (embedded; DuckDB cannot serve
    /// the mix over the network), each scan's keys compared (default 1000, --quick 50; 0: none).
    #[arg(long, value_name = "N")]
    pub scans: Option<usize>,
    /// The peers directory with DuckDB's driver: the repository's peers/, where
    /// scripts/peers-setup installs it.
    #[arg(long, value_name = "DIR", env = "ESPALIER_PEERS_DIR", default_value = "peers")]
    pub peers_dir: PathBuf,
    /// Fail when DuckDB is not installed (otherwise the report says it did not run).
    #[arg(long)]
    pub require_peers: bool,
}

/// The library configuration these options describe.
pub fn config(args: &MixArgs, global: &Global) -> Result<Config, String> {
    let mut c = if args.quick { Config::quick() } else { Config::full() };
    if let Some(n) = args.size {
        c.size = n;
    }
    if !args.clients.is_empty() {
        c.clients = args.clients.clone();
    }
    let peers: Vec<&str> = args.peers.iter().map(|p| p.trim()).filter(|p| !p.is_empty()).collect();
    if !peers.is_empty() {
        c.systems = vec![SystemKind::Espalier];
        if peers != ["none"] {
            for p in peers {
                let kind = SystemKind::parse(p)?;
                if kind == SystemKind::Espalier {
                    return Err("--peers: Espalier always runs; name the peers beside it".into());
                }
                if !c.systems.contains(&kind) {
                    c.systems.push(kind);
                }
            }
        }
    }
    if let Some(s) = args.seconds {
        c.seconds = s;
    }
    if let Some(s) = args.warmup {
        c.warmup_seconds = s;
    }
    if let Some(n) = args.ops {
        c.ops_per_batch = n;
    }
    if let Some(n) = args.scan {
        c.max_scan = n;
    }
    if let Some(m) = &args.mix {
        c.mix = Mix::parse(m)?;
    }
    if let Some(n) = args.scans {
        c.scans = n;
    }
    c.peers_dir = args.peers_dir.clone();
    c.require_peers = args.require_peers;
    c.seed = args.seed;
    c.server_threads = args.server_threads;
    c.dir = args.dir.clone();
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
/// if any reply was wrong, a batch failed or a table's final state disagrees with what was
/// acknowledged; never for a missed target.
pub fn run(args: &MixArgs, global: &Global) -> Result<(), String> {
    let config = config(args, global)?;
    let report = mix::run(&config, &|m| eprintln!("mix: {m}")).map_err(|e| e.to_string())?;
    crate::output::write_svg(args.svg.as_deref(), || report.chart_svg())?;
    crate::output::write_svg(args.throughput_svg.as_deref(), || report.throughput_svg())?;
    crate::output::print_report(global.json, || report.to_json(), || report.to_markdown())?;
    let problems = report.problems();
    if problems > 0 {
        return Err(format!("{problems} problems (see the report): {}", report.problem_lines().join("; ")));
    }
    Ok(())
}
