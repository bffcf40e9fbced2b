//! `espalier bench social`: seed 001's social network (see `espalier_social`): the appendix's
//! queries in process beside SQLite, every answer cross-checked, then over the server under K
//! clients — each query, and the three declared commands — for each encoding and compression
//! asked for; with `--peers neo4j-bolt`, the graph queries on Neo4j over Bolt at the same points.

use std::path::{Path, PathBuf};

use espalier_bench::remote::model;
use espalier_bench::remote::{Config, Stop};
use espalier_social::bench::{self as social, Config as LocalConfig};
use espalier_social::bolt::{self, BoltReport};
use espalier_social::remote::{database, Pool, POOL};
use espalier_social::{Query, Size};

use crate::bench_remote::ClientOptions;
use crate::Global;

/// The peers that run beside Espalier here: SQLite always, the graph peers when asked.
const PEERS: [&str; 4] = ["sqlite", "kuzu", "neo4j", bolt::NAME];

/// Options of `espalier bench social`.
#[derive(Debug, Clone, clap::Args)]
pub struct SocialArgs {
    /// CI size: the tiny network (60 people), a twentieth of the paper's invocations (at least
    /// 5); remotely K = 1, 4 with 20 requests per point. Other options given override it.
    #[arg(long)]
    pub quick: bool,
    /// The network: tiny (60 people) or paper (2,011 people, 26,982 messages, 25,365 activities,
    /// 2,000 addresses, 200 groups, 100 organisations; the default).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Seed of the generator and of every invocation's parameters.
    #[arg(long, value_name = "N", default_value_t = espalier_social::SEED)]
    pub seed: u64,
    /// Systems beside Espalier, comma-separated: sqlite (in process, always: it checks every
    /// answer), kuzu and neo4j (embedded, the eight graph queries), neo4j-bolt (Neo4j over Bolt
    /// on 127.0.0.1: the eight graph queries from K clients of its Java driver, beside the runs
    /// over the server, at the same K); scripts/peers-setup installs all three.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "sqlite")]
    pub peers: Vec<String>,
    /// The peers directory: the repository's peers/, where scripts/peers-setup installs the
    /// graph peers' drivers.
    #[arg(long, value_name = "DIR", env = "ESPALIER_PEERS_DIR", default_value = "peers")]
    pub peers_dir: PathBuf,
    /// Fail when a graph peer asked for is not installed (otherwise the report says it did not
    /// run).
    #[arg(long)]
    pub require_peers: bool,
    /// Seconds neo4j-bolt runs every graph query's pool untimed (at least once) before its first
    /// point, so the JVM has compiled the code they run (Espalier is compiled ahead of time).
    /// Default 30; with --quick 0.
    #[arg(long, value_name = "S")]
    pub jvm_warmup: Option<f64>,
    /// Invocations per query in process (default: the paper's 2000, 200 or 20 at paper size).
    #[arg(long, value_name = "N")]
    pub invocations: Option<usize>,
    /// Untimed invocations per query and system before the timed ones, in process (--warmup
    /// is the remote runs' warm-up).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub untimed: usize,
    /// Only these queries, comma-separated (group-members, person-groups,
    /// friend-recommendations, group-recommendations, fof-3, fof-2, shortest-path, inbox,
    /// message-collections, profile, profiles-10, friends-10, friends, activity, activities,
    /// activities-10, activity-list-10, friends-activities).
    #[arg(long = "query", value_name = "LIST", value_delimiter = ',')]
    pub queries: Vec<String>,
    /// Skip the runs over the server.
    #[arg(long)]
    pub no_remote: bool,
    /// Compressions of the remote runs, comma-separated: none, zstd, deflate (one run each;
    /// the paper compared none with zlib's deflate).
    #[arg(long = "compressions", value_name = "LIST", value_delimiter = ',', default_value = "none,deflate")]
    pub compressions: Vec<String>,
    /// Distinct invocations per remote workload, each with its checked reply.
    #[arg(long, value_name = "N", default_value_t = POOL)]
    pub pool: usize,
    /// The clients, how they reach the server (--encoding msgpack,json compares the two), and
    /// where the data goes. --compression is replaced by --compressions.
    #[command(flatten)]
    pub clients: ClientOptions,
    /// Also write box plots to FILE as SVG (in process), and FILE's stem with
    /// `-remote-<compression>.svg` for each remote run.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// The queries asked for.
fn chosen(args: &SocialArgs) -> Result<Vec<Query>, String> {
    let mut out = Vec::new();
    for name in args.queries.iter().map(|q| q.trim()).filter(|q| !q.is_empty()) {
        let q = Query::parse(name).ok_or_else(|| {
            let names: Vec<&str> = Query::ALL.iter().map(|q| q.name()).collect();
            format!("--query: unknown query {name:?}; the queries are {}", names.join(", "))
        })?;
        out.push(q);
    }
    Ok(out)
}

/// The remote configuration for one compression.
fn remote_config(args: &SocialArgs, compression: &str) -> Result<Config, String> {
    let mut c = if args.quick { Config::quick() } else { Config::full() };
    c.stop = Stop::Requests(if args.quick { 20 } else { 1000 });
    let mut clients = args.clients.clone();
    clients.compression = compression.to_string();
    clients.apply(&mut c)?;
    c.seed = args.seed;
    c.postgres = false;
    c.progress = true;
    Ok(c)
}

/// `FILE`'s stem with `-remote-<compression>.svg`, beside it.
fn remote_svg(svg: &Path, compression: &str) -> PathBuf {
    let stem = svg.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "social".into());
    svg.with_file_name(format!("{stem}-remote-{compression}.svg"))
}

/// Runs the benchmark: progress on stderr, the report on stdout (Markdown, or JSON with
/// `--json`). Fails if something cannot be built, if the systems disagree on an answer, or —
/// after printing the report — if any reply over the server was wrong.
pub fn run(args: &SocialArgs, global: &Global) -> Result<(), String> {
    let mut graph_peers = Vec::new();
    let mut over_bolt = false;
    for p in args.peers.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        if !PEERS.contains(&p.to_ascii_lowercase().as_str()) {
            return Err(format!("--peers: {p:?} does not run the social network; the peers are {}", PEERS.join(", ")));
        }
        if p.eq_ignore_ascii_case(bolt::NAME) {
            over_bolt = true;
        } else if let Some(g) = espalier_bench::graph_peer::GraphPeer::parse(p) {
            graph_peers.push(g);
        }
    }
    let size_name = args.size.clone().unwrap_or_else(|| if args.quick { "tiny" } else { "paper" }.into());
    let size = Size::parse(&size_name).ok_or_else(|| format!("--size: {size_name:?} is not tiny or paper"))?;
    let only = chosen(args)?;
    if args.invocations.is_some_and(|n| n > social::MAX_INVOCATIONS) || args.untimed > social::MAX_INVOCATIONS {
        return Err(format!("--invocations and --untimed: at most {}", social::MAX_INVOCATIONS));
    }
    if args.pool == 0 || args.pool > espalier_social::remote::MAX_POOL {
        return Err(format!("--pool: {} is not between 1 and {}", args.pool, espalier_social::remote::MAX_POOL));
    }
    // Every remote configuration is checked before the in-process run spends its time.
    let mut configs = Vec::new();
    if !args.no_remote {
        for compression in args.compressions.iter().map(|c| c.trim()).filter(|c| !c.is_empty()) {
            configs.push((compression.to_string(), remote_config(args, compression)?));
        }
    }
    if over_bolt && configs.is_empty() {
        return Err(format!(
            "--peers {}: Neo4j over Bolt runs beside the runs over the server; drop --no-remote and give \
             --compressions",
            bolt::NAME
        ));
    }
    let jvm_warmup = args.jvm_warmup.unwrap_or(if args.quick { 0.0 } else { 30.0 });
    if !(0.0..=bolt::MAX_JVM_WARMUP).contains(&jvm_warmup) {
        return Err(format!("--jvm-warmup: {jvm_warmup} is not between 0 and {} seconds", bolt::MAX_JVM_WARMUP));
    }
    // Neo4j over Bolt runs once, beside the run without compression (else the first).
    let bolt_beside = configs.iter().position(|(c, _)| c.eq_ignore_ascii_case("none")).unwrap_or(0);
    let local = LocalConfig {
        size,
        seed: args.seed,
        invocations: args.invocations,
        warmup: args.untimed,
        only: only.clone(),
        dir: args.clients.dir.clone(),
        progress: !global.json,
        peers: graph_peers,
        peers_dir: args.peers_dir.clone(),
        require_peers: args.require_peers,
    };
    let report = social::run(&local).map_err(|e| e.to_string())?;
    crate::output::write_svg(args.svg.as_deref(), || report.chart_svg())?;
    let mut remote = Vec::new();
    let mut over_bolt_report = None;
    if !configs.is_empty() {
        let queries = local.queries();
        for (i, (compression, config)) in configs.into_iter().enumerate() {
            let compression = compression.as_str();
            let base = config.dir.clone().unwrap_or_else(std::env::temp_dir);
            let tmp = tempfile::Builder::new()
                .prefix("espalier-bench-social-")
                .tempdir_in(&base)
                .map_err(|e| format!("making a temporary directory in {}: {e}", base.display()))?;
            let _cleanup = espalier_bench::interrupt::on_interrupt(tmp.path().to_path_buf(), None);
            let built = social::build(size, args.seed, tmp.path()).map_err(|e| e.to_string())?;
            let (db, pools) = database(built.espalier, &built.net, &built.sqlite, &queries, args.pool, args.seed)
                .map_err(|e| e.to_string())?;
            eprintln!("{}: {} workloads, every reply checked (compression {compression})", db.name, db.queries.len());
            let r = model::run(&config, vec![db]).map_err(|e| e.to_string())?;
            if let Some(svg) = &args.svg {
                crate::output::write_svg(Some(&remote_svg(svg, compression)), || r.chart_svg())?;
            }
            if over_bolt && i == bolt_beside {
                let pb = bolt_bar(&config, &pools, !global.json);
                let result = bolt::run(&args.peers_dir, &built.sqlite, tmp.path(), &pools, &config, jvm_warmup);
                pb.finish_and_clear();
                over_bolt_report = Some(bolt_report(result, &r, args.require_peers)?);
            }
            remote.push((compression.to_string(), r));
        }
    }
    let json = || {
        serde_json::json!({
            "in_process": &report,
            "remote": remote.iter().map(|(c, r)| serde_json::json!({ "compression": c, "report": r.to_json() })).collect::<Vec<_>>(),
            "neo4j_bolt": &over_bolt_report,
        })
    };
    let markdown = || {
        let mut out = report.to_markdown();
        for (c, r) in &remote {
            out.push_str(&format!("\n## Over the server (compression {c})\n\n"));
            out.push_str(&r.to_markdown());
        }
        if let Some(b) = &over_bolt_report {
            out.push_str("\n## Beside Neo4j over Bolt\n\n");
            out.push_str(&b.to_markdown());
        }
        out
    };
    crate::output::print_report(global.json, json, markdown)?;
    let wrong: u64 = remote.iter().map(|(_, r)| r.wrong()).sum();
    if wrong > 0 {
        return Err(format!(
            "{wrong} wrong replies (see the report): the server answered something else than the engine"
        ));
    }
    let wrong = over_bolt_report.as_ref().map_or(0, BoltReport::wrong);
    if wrong > 0 {
        return Err(format!("{wrong} wrong replies from Neo4j over Bolt (see the report): rows other than SQLite's"));
    }
    Ok(())
}

/// A spinner while Neo4j over Bolt runs (one call to its driver): what it measures.
fn bolt_bar(config: &espalier_bench::remote::Config, pools: &[Pool], show: bool) -> indicatif::ProgressBar {
    let graph = pools.iter().filter(|p| espalier_social::peers::QUERIES.contains(&p.query)).count();
    let pb = espalier_bench::progress::bar(show, 1, bolt::NAME, "{prefix:>10} {spinner} {elapsed_precise}  {msg}");
    let ks: Vec<String> = config.clients.iter().map(|k| k.to_string()).collect();
    pb.set_message(format!("{graph} graph queries × K = {}, every reply checked", ks.join(", ")));
    if show {
        pb.enable_steady_tick(std::time::Duration::from_millis(250));
    }
    pb
}

/// Neo4j over Bolt's run beside Espalier's remote run `espalier`; a peer not installed is
/// reported as not run (and said on standard error), unless `required`.
fn bolt_report(
    result: Result<bolt::BoltRun, espalier_bench::graph_peer::PeerError>,
    espalier: &espalier_bench::remote::Report,
    required: bool,
) -> Result<BoltReport, String> {
    match result {
        Ok(run) => Ok(BoltReport::new(run, espalier)),
        Err(e) => {
            let reason = e.skipped(required).map_err(|e| e.to_string())?;
            eprintln!("{reason}");
            Ok(BoltReport::skipped(reason))
        }
    }
}
