//! `espalier bench peers`: the B6/B7 benchmarks on Espalier, SQLite and PostgreSQL, with
//! every result cross-checked (see `espalier_bench::peers`).

use std::path::PathBuf;

use espalier_bench::peers::{self, Config, DurabilityPairing, Suite, System};

use crate::{DurabilityArg, Global};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SuiteArg {
    /// Appendix B.6: search, overview_subcollection, task_start, get_big_items, many_references.
    B6,
    /// Appendix B.7: the B.6 model with far bigger collections; many_references, search, task_start.
    B7,
}

/// Options of `espalier bench peers`.
#[derive(Debug, Clone, clap::Args)]
pub struct PeersArgs {
    /// The benchmark set.
    #[arg(long, value_enum)]
    pub suite: SuiteArg,
    /// Multiplies the outermost collections (clients, materials, products, orders, machines).
    /// B6 at 1 is the appendix's size (61,030 entries); B7 at 1 is B6's outermost collections
    /// × 100 (6.1 million entries, about 1 GiB in Espalier).
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub scale: f64,
    /// Multiplies the collections inside entries (5 modifications per order, 100 added
    /// materials per modification).
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub nested_scale: f64,
    /// Commit with fsync everywhere (the same as `--durability sync`): Espalier `sync`, SQLite
    /// `synchronous=FULL`, PostgreSQL `fsync=on, synchronous_commit=on`. Without it or
    /// `--durability`, no system fsyncs on commit (Espalier `none`, SQLite `synchronous=OFF`,
    /// PostgreSQL `fsync=off, synchronous_commit=off`); `--durability periodic` pairs Espalier's
    /// 100 ms flush with SQLite `synchronous=NORMAL` and PostgreSQL's WAL writer.
    #[arg(long)]
    pub fsync: bool,
    /// Timed repetitions per operation and system.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub ops: usize,
    /// Untimed repetitions before them.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub warmup: usize,
    /// Systems to run, comma-separated; espalier comes first (the reference of the cross-checks).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "espalier,sqlite,postgres")]
    pub systems: Vec<String>,
    /// Seed of the data and of the parameter generators.
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
    /// Directory for the temporary databases and the PostgreSQL server (default: the system's
    /// temp directory). Everything in it is deleted at the end.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// PostgreSQL's shared_buffers (SQLite gets a cache of up to 1 GiB).
    #[arg(long, value_name = "SIZE", default_value = "1GB")]
    pub pg_shared_buffers: String,
    /// Entries of each top-level collection compared node by node after the load.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub verify_sample: usize,
    /// Keep the Espalier and SQLite databases for inspection (the report names the directory);
    /// the PostgreSQL server is always stopped and deleted.
    #[arg(long)]
    pub keep: bool,
}

/// Runs the suite: progress on stderr, the report on stdout (Markdown, or JSON with `--json`).
/// Fails if a system cannot be built or started, or if the systems disagree — never for a
/// missed target.
pub fn run(args: &PeersArgs, global: &Global) -> Result<(), String> {
    let suite = match args.suite {
        SuiteArg::B6 => Suite::B6,
        SuiteArg::B7 => Suite::B7,
    };
    let systems =
        args.systems.iter().map(|s| System::parse(s)).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    let durability = match global.bench_durability(args.fsync)? {
        DurabilityArg::Sync => DurabilityPairing::Sync,
        DurabilityArg::Periodic => DurabilityPairing::Periodic,
        DurabilityArg::None => DurabilityPairing::None,
    };
    let config = Config {
        scale: args.scale,
        nested_scale: args.nested_scale,
        ops: args.ops,
        warmup: args.warmup,
        systems,
        durability,
        seed: args.seed,
        dir: args.dir.clone(),
        progress: true,
        verify_sample: args.verify_sample,
        pg_shared_buffers: args.pg_shared_buffers.clone(),
        keep: args.keep,
        // The global --memory-bound: with a bound well below the data (B7 with 64, say) the run
        // shows data larger than the bound built, queried and updated, every result
        // cross-checked; the report gives Espalier's memory after the build and the run.
        memory_bytes: global.memory_bytes_given(),
        ..Config::new(suite)
    };
    let report = peers::run(&config).map_err(|e| e.to_string())?;
    crate::output::print_report(global.json, || report.to_json(), || report.to_markdown())
}
