//! The Train Benchmark beside SQLite: batch evaluation of the six queries on the same model
//! in both systems, and the repair scenario's re-check after each repair step.
//!
//! **Data.** Each size's model comes from [`crate::generate()`] (size 1 is the official model);
//! Espalier gets it through the loader, SQLite through the relational tables of the official
//! CSV form, with an index on every join column. Both are file-backed in one temporary
//! directory: Espalier with durability none, SQLite with `journal_mode=WAL`,
//! `synchronous=OFF` and a page cache large enough for the whole model (as `bench core`).
//!
//! **Batch.** Each query runs `warmup` times untimed, then `runs` times, each run timed on
//! its own: Espalier runs the plan checked once (`Engine::run` on a fresh snapshot, building
//! the reply rows); SQLite steps a cached prepared statement and reads every row. The match
//! sets must be equal, or the run fails.
//!
//! **Repair.** Then (after every query's batch runs), per query, rounds of: fix a share of
//! the current matches in both systems (one transaction each, see [`crate::repair`]), then
//! re-check once in each, timed; the re-checked match sets must be equal again. Each system's
//! re-checks follow its own fix, as in a run of that system alone (the other's work in
//! between would evict what the fix left in the caches). Espalier re-checks twice:
//! incrementally — the query is registered before the rounds (`Engine::register`), each fix's
//! commit updates its matches from the change set, and the incremental re-check is the time
//! that update took (measured inside the commit) plus reading the match set out — and by
//! running the query again (batch); the two match sets must be equal.
//!
//! **Peers.** With `peers` (DuckDB, Kùzu, Neo4j; [`crate::peers`]), after the batch runs the model
//! is written as the official CSV files, each peer loads it into a new database of its own
//! and runs every query `warmup` + `runs` times in its own process; its match sets must equal
//! Espalier's, or the run fails. A peer that is not installed is reported as such (and fails
//! the run only with `require_peers`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use espalier_bench::progress;
use espalier_bench::stats::Summary;
use espalier_instruction::plan::Plan;
use espalier_instruction::Engine;
use espalier_transaction::{DatabaseOptions, Durability};
use indicatif::ProgressBar;
use rusqlite::Connection;
use serde::Serialize;

use crate::peers::GraphPeer;
use crate::queries::{create_tables, ids_of, sql_matches, visit_matches, Matches, Query};
use crate::repair::{espalier_text, fixes, pick, pick_count, sql_apply, Index};
use crate::{generate, Scenario};

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The model sizes, in order (size 1 is the official model).
    pub sizes: Vec<u32>,
    /// Which start model to generate.
    pub scenario: Scenario,
    /// The queries, in order.
    pub queries: Vec<Query>,
    /// Untimed runs per query before the timed ones.
    pub warmup: usize,
    /// Timed batch runs per query and system.
    pub runs: usize,
    /// Repair rounds per query (0: no repair phase).
    pub repair_rounds: usize,
    /// Share of the matches each round fixes (at least one): the benchmark's "proportional"
    /// strategy.
    pub repair_share: f64,
    /// Instead, this many matches per round (the benchmark's "fixed" strategy).
    pub repair_count: Option<usize>,
    /// Directory for the temporary databases (default: the system's temp directory).
    pub dir: Option<PathBuf>,
    /// Progress bars on stderr.
    pub progress: bool,
    /// The embedded peers to run beside SQLite.
    pub peers: Vec<GraphPeer>,
    /// The peers directory, with their drivers installed (`peers/` after `scripts/peers-setup`).
    pub peers_dir: PathBuf,
    /// Fail the run when a peer is not installed (otherwise the report says so).
    pub require_peers: bool,
}

impl Config {
    /// A short run: size 1 of the repair scenario, every query, two warm-up and ten timed
    /// runs, three repair rounds fixing 10% each.
    pub fn quick() -> Config {
        Config {
            sizes: vec![1],
            scenario: Scenario::Repair,
            queries: Query::ALL.to_vec(),
            warmup: 2,
            runs: 10,
            repair_rounds: 3,
            repair_share: 0.1,
            repair_count: None,
            dir: None,
            progress: false,
            peers: Vec::new(),
            peers_dir: PathBuf::from("peers"),
            require_peers: false,
        }
    }
}

/// A failed run: a database that could not be built, a repair that could not be applied, or
/// the two systems disagreeing.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BenchError(pub String);

fn err(what: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError(format!("{what}: {e}"))
}

/// One run's report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// Untimed runs per query.
    pub warmup: usize,
    /// Timed batch runs per query and system.
    pub runs: usize,
    /// Share of the matches each repair round fixes (the proportional strategy).
    pub repair_share: f64,
    /// Matches each repair round fixes, when the fixed strategy ran instead.
    pub repair_count: Option<usize>,
    /// Each model size's results.
    pub sizes: Vec<SizeReport>,
}

/// One model size's results.
#[derive(Debug, Serialize)]
pub struct SizeReport {
    /// The size.
    pub size: u32,
    /// The model's elements, as the benchmark counts its size.
    pub elements: usize,
    /// Creating the Espalier database with the model, in ms.
    pub load_espalier_ms: f64,
    /// Creating and filling SQLite's tables, in ms.
    pub load_sqlite_ms: f64,
    /// Espalier's bytes on disk after the run (the model and its repairs), synced and
    /// checkpointed (allocated blocks of its files, the log's segment prepared ahead included).
    pub disk_espalier_bytes: u64,
    /// SQLite's bytes on disk after the run (allocated blocks, after a checkpoint that empties
    /// the WAL).
    pub disk_sqlite_bytes: u64,
    /// The peers asked for: loaded, or why not.
    pub peers: Vec<PeerLoad>,
    /// Each query's results.
    pub queries: Vec<QueryReport>,
}

/// A peer at one size: its version and load time, or why it did not run.
#[derive(Debug, Serialize)]
pub struct PeerLoad {
    /// `duckdb` or `kuzu`.
    pub system: String,
    /// The version it reported (None if it did not run).
    pub version: Option<String>,
    /// Loading the model's CSV files into a new database, in ms.
    pub load_ms: Option<f64>,
    /// Why it did not run.
    pub unavailable: Option<String>,
}

/// A peer's batch timings of one query.
#[derive(Debug, Serialize)]
pub struct PeerTiming {
    /// `duckdb` or `kuzu`.
    pub system: String,
    /// Its timed runs.
    pub timings: Summary,
    /// Its median over Espalier's: above 1, Espalier is faster.
    pub speedup: f64,
}

/// One query's results at one size.
#[derive(Debug, Serialize)]
pub struct QueryReport {
    /// The query's name.
    pub query: String,
    /// Its matches on the model as generated.
    pub matches: usize,
    /// Espalier's batch timings.
    pub espalier: Summary,
    /// SQLite's batch timings.
    pub sqlite: Summary,
    /// SQLite's median over Espalier's: above 1, Espalier is faster.
    pub speedup: f64,
    /// The peers' batch timings, in the order of [`SizeReport::peers`] (those that ran).
    pub peers: Vec<PeerTiming>,
    /// The repair phase (none without repair rounds or without matches).
    pub repair: Option<RepairReport>,
}

/// One query's repair phase at one size.
#[derive(Debug, Serialize)]
pub struct RepairReport {
    /// Rounds run (fewer than asked if no matches were left).
    pub rounds: usize,
    /// Matches fixed, over all rounds.
    pub fixed: usize,
    /// Matches left after the last round.
    pub matches_after: usize,
    /// Applying the fixes in Espalier (one transaction per round).
    pub espalier_fix: Summary,
    /// Applying the fixes in SQLite (one transaction per round).
    pub sqlite_fix: Summary,
    /// The re-check after each round in Espalier: a full re-run.
    pub espalier_recheck: Summary,
    /// The re-check after each round in SQLite: a full re-run.
    pub sqlite_recheck: Summary,
    /// SQLite's re-run median over Espalier's: above 1, Espalier is faster.
    pub speedup: f64,
    /// Espalier's re-run over its own batch median.
    pub recheck_over_batch: f64,
    /// The incremental re-check: updating the registered query's matches in the commit,
    /// plus reading them out.
    pub espalier_incremental: Summary,
    /// The part of [`RepairReport::espalier_incremental`] spent inside the commit, updating
    /// the matches (the rest is reading them out).
    pub espalier_refresh: Summary,
    /// Espalier's re-run over its incremental re-check (the target is at least 10).
    pub incremental_speedup: f64,
    /// Seeds the incremental updates evaluated, over all rounds.
    pub seeds: usize,
    /// Rounds whose update ran the query again whole instead.
    pub whole: usize,
}

/// Two match sets of query `q` that should be equal and are not: what each side found.
fn disagree(size: u32, q: Query, when: &str, (a, ours): (&str, &Matches), (b, theirs): (&str, &Matches)) -> BenchError {
    BenchError(format!("size {size} {}{when}: {a} {} matches, {b} {}", q.name(), ours.len(), theirs.len()))
}

fn bar(c: &Config, len: u64, prefix: String) -> ProgressBar {
    progress::bar(c.progress, len, &prefix, progress::STEPS)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn open_sqlite(path: &Path) -> Result<Connection, BenchError> {
    espalier_bench::peers::sqlite::open_benchmark_file(path).map_err(BenchError)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ratio(slow: &Summary, fast: &Summary) -> f64 {
    if fast.median_us > 0.0 {
        slow.median_us / fast.median_us
    } else {
        f64::INFINITY
    }
}

/// Runs the benchmark; fails if a database cannot be built, a repair cannot be applied, or
/// the two systems disagree on a match set — never for a missed target.
pub fn run(c: &Config) -> Result<Report, BenchError> {
    if c.runs == 0 {
        return Err(BenchError("runs must be at least 1".into()));
    }
    if !(c.repair_share > 0.0 && c.repair_share <= 1.0) {
        return Err(BenchError(format!("the repair share {} is not in (0, 1]", c.repair_share)));
    }
    let mut sizes = Vec::with_capacity(c.sizes.len());
    for &size in &c.sizes {
        if !(1..=generate::MAX_SIZE).contains(&size) {
            return Err(BenchError(format!("size {size} is outside 1..={}", generate::MAX_SIZE)));
        }
        sizes.push(run_size(c, size)?);
    }
    Ok(Report {
        scenario: c.scenario.name().to_string(),
        warmup: c.warmup,
        runs: c.runs,
        repair_share: c.repair_share,
        repair_count: c.repair_count,
        sizes,
    })
}

fn plan_of(engine: &Engine, q: Query) -> Result<Plan, BenchError> {
    crate::queries::plan(engine, q).map_err(|e| err(q.name(), e))
}

/// A run of the query in Espalier, its matches read as SQLite's side reads them
/// (`time_sqlite`): ids of every match, sorted, inside the timing.
fn time_espalier(engine: &Engine, plan: &Plan) -> Result<(Duration, Matches), BenchError> {
    let start = Instant::now();
    let matches = visit_matches(engine, plan).map_err(|e| err("Espalier", e))?;
    Ok((start.elapsed(), matches))
}

fn time_sqlite(conn: &Connection, q: Query) -> Result<(Duration, Matches), BenchError> {
    let start = Instant::now();
    let m = sql_matches(conn, q).map_err(|e| err("SQLite", e))?;
    Ok((start.elapsed(), m))
}

fn run_size(c: &Config, size: u32) -> Result<SizeReport, BenchError> {
    let pb = bar(c, 1, format!("generate size {size}"));
    let model = generate(c.scenario, size);
    pb.finish_and_clear();
    let tmp = match &c.dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .map_err(|e| err("making a temporary directory", e))?;

    let pb = bar(c, 2, format!("load size {size}"));
    let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let start = Instant::now();
    let engine = crate::create(&tmp.path().join("espalier"), &model, opts).map_err(|e| err("loading Espalier", e))?;
    let load_espalier = start.elapsed();
    pb.inc(1);
    let conn = open_sqlite(&tmp.path().join("sqlite.db"))?;
    let start = Instant::now();
    create_tables(&conn, &model.tables()).map_err(|e| err("loading SQLite", e))?;
    let load_sqlite = start.elapsed();
    pb.finish_and_clear();

    // Every batch run first, on the model as generated; then the repairs, which change it.
    let mut queries = Vec::with_capacity(c.queries.len());
    let mut found = Vec::with_capacity(c.queries.len());
    for &q in &c.queries {
        let plan = plan_of(&engine, q)?;
        let pb = bar(c, ((c.warmup + c.runs) * 2) as u64, format!("size {size} {}", q.name()));
        let mut ours = Vec::with_capacity(c.runs);
        let mut theirs = Vec::with_capacity(c.runs);
        let (mut m_ours, mut m_theirs) = (Vec::new(), Vec::new());
        // Alternate the systems so that neither always runs on a cooler machine.
        for i in 0..c.warmup + c.runs {
            let (t, m) = time_espalier(&engine, &plan)?;
            let (u, n) = time_sqlite(&conn, q)?;
            if i >= c.warmup {
                ours.push(t);
                theirs.push(u);
            }
            (m_ours, m_theirs) = (m, n);
            pb.inc(2);
        }
        pb.finish_and_clear();
        if m_ours != m_theirs {
            return Err(disagree(size, q, "", ("Espalier finds", &m_ours), ("SQLite", &m_theirs)));
        }
        let espalier = Summary::of(&mut ours);
        let sqlite = Summary::of(&mut theirs);
        let speedup = ratio(&sqlite, &espalier);
        queries.push(QueryReport {
            query: q.name().to_string(),
            matches: m_ours.len(),
            espalier,
            sqlite,
            speedup,
            peers: Vec::new(),
            repair: None,
        });
        found.push((q, plan, m_ours));
    }
    let peers = run_peers(c, size, &model.tables(), tmp.path(), &found, &mut queries)?;
    let mut index = Index::new(&model);
    for (report, (q, plan, matches)) in queries.iter_mut().zip(found) {
        report.repair = repair(c, size, q, &engine, &plan, &conn, &mut index, matches, &report.espalier)?;
    }
    // Last: a checkpoint maps the tables from files, which the timings above did not read.
    let db = engine.database();
    db.sync().map_err(|e| err("syncing Espalier", e))?;
    db.checkpoint().map_err(|e| err("checkpointing Espalier", e))?;
    let disk_espalier_bytes = db.disk_size();
    let disk_sqlite_bytes = espalier_bench::peers::sqlite::disk_size(&conn, &tmp.path().join("sqlite.db"))
        .map_err(|e| err("measuring SQLite's file", e))?;
    Ok(SizeReport {
        size,
        elements: model.size(),
        load_espalier_ms: ms(load_espalier),
        load_sqlite_ms: ms(load_sqlite),
        disk_espalier_bytes,
        disk_sqlite_bytes,
        peers,
        queries,
    })
}

/// Runs every peer of `c` on the model of `tables` and checks its matches against Espalier's
/// (`found`); adds each query's timings to `queries`.
fn run_peers(
    c: &Config,
    size: u32,
    tables: &crate::model::Tables,
    tmp: &Path,
    found: &[(Query, Plan, Matches)],
    queries: &mut [QueryReport],
) -> Result<Vec<PeerLoad>, BenchError> {
    if c.peers.is_empty() {
        return Ok(Vec::new());
    }
    let prefix = format!("railway-{}-{size}", c.scenario.name());
    let csv = tmp.join("csv");
    std::fs::create_dir(&csv).map_err(|e| err("making the CSV directory", e))?;
    crate::csv::write(&csv, &prefix, tables).map_err(|e| err("writing the model as CSV", e))?;
    let asked: Vec<Query> = found.iter().map(|(q, _, _)| *q).collect();
    let mut loads = Vec::with_capacity(c.peers.len());
    for &peer in &c.peers {
        let pb = bar(c, 1, format!("size {size} {}", peer.name()));
        // Each peer makes its database in a directory of its own beside the CSV files.
        let result = crate::peers::run(peer, &c.peers_dir, &csv, &prefix, c.warmup, c.runs, &asked);
        pb.finish_and_clear();
        let run = match result {
            Ok(run) => run,
            Err(e) => {
                let reason = e.skipped(c.require_peers).map_err(|e| BenchError(format!("size {size}: {e}")))?;
                loads.push(PeerLoad {
                    system: peer.name().into(),
                    version: None,
                    load_ms: None,
                    unavailable: Some(reason),
                });
                continue;
            }
        };
        for ((report, (q, _, ours)), mut theirs) in queries.iter_mut().zip(found).zip(run.queries) {
            if theirs.matches != *ours {
                return Err(BenchError(format!(
                    "size {size} {}: Espalier finds {} matches, {} {}",
                    q.name(),
                    ours.len(),
                    run.version,
                    theirs.matches.len()
                )));
            }
            let timings = Summary::of(&mut theirs.times);
            let speedup = ratio(&timings, &report.espalier);
            report.peers.push(PeerTiming { system: peer.name().into(), timings, speedup });
        }
        loads.push(PeerLoad {
            system: peer.name().into(),
            version: Some(run.version),
            load_ms: Some(run.load_ms),
            unavailable: None,
        });
    }
    Ok(loads)
}

/// The query registered for incremental results while its repair rounds run.
struct Registered<'e> {
    engine: &'e Engine,
    id: u64,
}

impl<'e> Registered<'e> {
    fn new(engine: &'e Engine, q: Query) -> Result<Registered<'e>, BenchError> {
        let r = engine.register_text(q.pattern(), &Default::default()).map_err(|e| err("registering", e))?;
        Ok(Registered { engine, id: r.id })
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.engine.unregister(self.id);
    }
}

#[allow(clippy::too_many_arguments)] // one query's repair phase needs both systems and its state
fn repair(
    c: &Config,
    size: u32,
    q: Query,
    engine: &Engine,
    plan: &Plan,
    conn: &Connection,
    index: &mut Index,
    mut matches: Matches,
    batch: &Summary,
) -> Result<Option<RepairReport>, BenchError> {
    if c.repair_rounds == 0 || matches.is_empty() {
        return Ok(None);
    }
    // The repairs of the queries before this one may have changed its matches.
    matches = time_espalier(engine, plan)?.1;
    let registered = Registered::new(engine, q)?;
    let (mut incremental, mut refreshes, mut seeds, mut whole) = (Vec::new(), Vec::new(), 0, 0);
    let pb = bar(c, c.repair_rounds as u64, format!("size {size} {} repair", q.name()));
    let (mut fix_ours, mut fix_theirs, mut ours, mut theirs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut fixed = 0;
    for _ in 0..c.repair_rounds {
        if matches.is_empty() {
            break;
        }
        let chosen = match c.repair_count {
            Some(n) => pick_count(q, &matches, n),
            None => pick(q, &matches, c.repair_share),
        };
        let plan_fixes = fixes(index, q, &chosen).map_err(|e| err("planning the repair", e))?;
        let text = espalier_text(index, &plan_fixes).map_err(|e| err("writing the repair", e))?;
        fixed += chosen.len();

        // Each system's re-checks follow its own repair, as in a run of one tool: the other
        // system's work in between would evict what the repair left in the caches.
        let start = Instant::now();
        engine
            .execute_text(&text, &Default::default())
            .map_err(|e| err(&format!("repairing {} in Espalier", q.name()), e))?;
        fix_ours.push(start.elapsed());
        // The registered query's matches read out as the re-run's are: every match's ids,
        // sorted; the rows are borrowed, not copied.
        let start = Instant::now();
        let mut kept = engine
            .registry()
            .with(registered.id, |r| r.rows().map(ids_of).collect::<Result<Matches, _>>())
            .ok_or_else(|| BenchError(format!("{}: the registered query stopped", q.name())))?
            .map_err(|e| err("Espalier", e))?;
        kept.sort_unstable();
        let read = start.elapsed();
        let (refresh, stats) = engine
            .registry()
            .with(registered.id, |r| r.last_refresh())
            .flatten()
            .ok_or_else(|| BenchError(format!("{}: the repair's commit did not refresh the query", q.name())))?;
        let (t, m) = time_espalier(engine, plan)?;

        let start = Instant::now();
        let tx = conn.unchecked_transaction().map_err(|e| err("SQLite", e))?;
        sql_apply(&tx, &plan_fixes).map_err(|e| err(&format!("repairing {} in SQLite", q.name()), e))?;
        tx.commit().map_err(|e| err("SQLite", e))?;
        fix_theirs.push(start.elapsed());
        let (u, n) = time_sqlite(conn, q)?;

        if m != n {
            return Err(disagree(size, q, " after a repair", ("Espalier finds", &m), ("SQLite", &n)));
        }
        if kept != m {
            return Err(disagree(
                size,
                q,
                " after a repair",
                ("the incremental result has", &kept),
                ("the re-run", &m),
            ));
        }
        incremental.push(refresh + read);
        refreshes.push(refresh);
        seeds += stats.seeds;
        whole += usize::from(stats.whole);
        ours.push(t);
        theirs.push(u);
        matches = m;
        pb.inc(1);
    }
    pb.finish_and_clear();
    let espalier_recheck = Summary::of(&mut ours);
    let sqlite_recheck = Summary::of(&mut theirs);
    let espalier_incremental = Summary::of(&mut incremental);
    Ok(Some(RepairReport {
        incremental_speedup: ratio(&espalier_recheck, &espalier_incremental),
        espalier_incremental,
        espalier_refresh: Summary::of(&mut refreshes),
        seeds,
        whole,
        rounds: ours.len(),
        fixed,
        matches_after: matches.len(),
        espalier_fix: Summary::of(&mut fix_ours),
        sqlite_fix: Summary::of(&mut fix_theirs),
        speedup: ratio(&sqlite_recheck, &espalier_recheck),
        recheck_over_batch: espalier_recheck.median_us / batch.median_us.max(f64::MIN_POSITIVE),
        espalier_recheck,
        sqlite_recheck,
    }))
}

/// The peers' table of one size: each query's median and Espalier's speedup over each peer.
fn peers_markdown(out: &mut String, s: &SizeReport) {
    use std::fmt::Write as _;
    for p in s.peers.iter().filter(|p| p.unavailable.is_some()) {
        let _ = writeln!(out, "{} did not run: {}\n", p.system, p.unavailable.as_deref().unwrap_or(""));
    }
    let ran: Vec<&PeerLoad> = s.peers.iter().filter(|p| p.version.is_some()).collect();
    if ran.is_empty() {
        return;
    }
    let names: Vec<String> = ran.iter().map(|p| p.version.clone().unwrap_or_default()).collect();
    let loads: Vec<String> =
        ran.iter().map(|p| format!("{} {:.0} ms", p.system, p.load_ms.unwrap_or(f64::NAN))).collect();
    let _ = writeln!(
        out,
        "Peers at size {} ({}; loaded from the CSV files: {}):\n",
        s.size,
        names.join(", "),
        loads.join(", ")
    );
    let head: Vec<String> = ran.iter().map(|p| format!("{} | speedup", p.system)).collect();
    let _ = writeln!(out, "| query | Espalier | {} |", head.join(" | "));
    let _ = writeln!(out, "|---|---:|{}", "---:|---:|".repeat(ran.len()));
    for q in &s.queries {
        let cells: Vec<String> =
            q.peers.iter().map(|t| format!("{:.1} | {:.2}×", t.timings.median_us, t.speedup)).collect();
        let _ = writeln!(out, "| {} | {:.1} | {} |", q.query, q.espalier.median_us, cells.join(" | "));
    }
    out.push('\n');
}

impl Report {
    /// Box plots per query (`espalier_bench::suite::chart`): one panel per size, one box per
    /// query and system (Espalier, SQLite and every peer that ran).
    pub fn chart_svg(&self) -> String {
        use espalier_bench::suite::chart::{svg, Series};
        use espalier_bench::suite::report::InstructionResult;
        let mut systems: Vec<(String, Vec<InstructionResult>)> =
            vec![("Espalier".into(), Vec::new()), ("SQLite".into(), Vec::new())];
        let mut add = |system: &str, group: &str, query: &str, timings: &Summary| {
            let i = match systems.iter().position(|(name, _)| name == system) {
                Some(i) => i,
                None => {
                    systems.push((system.to_string(), Vec::new()));
                    systems.len() - 1
                }
            };
            systems[i].1.push(InstructionResult::of_summary(group, "trainbenchmark", query, timings));
        };
        for s in &self.sizes {
            let group = format!("size {}", s.size);
            for q in &s.queries {
                add("Espalier", &group, &q.query, &q.espalier);
                add("SQLite", &group, &q.query, &q.sqlite);
                for p in &q.peers {
                    add(&p.system, &group, &q.query, &p.timings);
                }
            }
        }
        let series: Vec<Series<'_>> = systems
            .iter()
            .map(|(name, results)| Series { label: name.clone(), results: results.iter().collect() })
            .collect();
        svg(&series, &format!("Train Benchmark, {} scenario: batch runs", self.scenario))
    }

    /// The report as Markdown: a table per size, with a line on what the columns mean.
    pub fn to_markdown(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Train Benchmark, {} scenario: Espalier (durability none) beside SQLite (WAL, synchronous=OFF), \
             the same model in both; {} timed runs after {} warm-up; medians in µs; \
             speedup = SQLite / Espalier; each repair round fixes {}.\n",
            self.scenario,
            self.runs,
            self.warmup,
            match self.repair_count {
                Some(n) => format!("{n} matches (fixed strategy)"),
                None => format!("{}% of the matches (proportional strategy)", self.repair_share * 100.0),
            }
        );
        for s in &self.sizes {
            let _ = writeln!(
                out,
                "### Size {} ({} elements; loaded in {:.0} ms into Espalier, {:.0} ms into SQLite; on disk \
                 after the run {:.2} MiB and {:.2} MiB, {:.2}×)\n",
                s.size,
                s.elements,
                s.load_espalier_ms,
                s.load_sqlite_ms,
                mib(s.disk_espalier_bytes),
                mib(s.disk_sqlite_bytes),
                s.disk_espalier_bytes as f64 / s.disk_sqlite_bytes.max(1) as f64
            );
            let _ = writeln!(
                out,
                "| query | matches | Espalier | SQLite | speedup | re-run Espalier | re-run SQLite | speedup \
                 | incremental Espalier | of which refresh | re-run / incremental | fixed → left |"
            );
            let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for q in &s.queries {
                let (re_e, re_s, re_x, inc, refresh, inc_x, left) = match &q.repair {
                    Some(r) => (
                        format!("{:.1}", r.espalier_recheck.median_us),
                        format!("{:.1}", r.sqlite_recheck.median_us),
                        format!("{:.2}×", r.speedup),
                        format!("{:.1}", r.espalier_incremental.median_us),
                        format!("{:.1}", r.espalier_refresh.median_us),
                        format!("{:.1}×", r.incremental_speedup),
                        format!("{} → {}", r.fixed, r.matches_after),
                    ),
                    None => {
                        let none = || "–".to_string();
                        (none(), none(), none(), none(), none(), none(), none())
                    }
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {:.1} | {:.1} | {:.2}× | {re_e} | {re_s} | {re_x} | {inc} | {refresh} | {inc_x} | {left} |",
                    q.query, q.matches, q.espalier.median_us, q.sqlite.median_us, q.speedup
                );
            }
            out.push('\n');
            peers_markdown(&mut out, s);
        }
        out.push_str(
            "Re-run: the query run again after the repair's commit, in both systems. Incremental: the \
             registered query's update inside that commit (from its change set: the refresh) plus reading \
             the match set out (every match's ids, sorted, as the re-run's); it must equal the re-run's. \
             Each system re-checks right after its own repair.\n",
        );
        out
    }
}
