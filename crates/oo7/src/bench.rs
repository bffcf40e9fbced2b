//! OO7 beside SQLite: the same generated database in both systems, every operation timed in
//! both in the same run, every answer compared (a difference fails the run).
//!
//! **Data.** [`crate::generate()`] makes the database; Espalier gets it through the loader
//! (durability none, then a checkpoint, so that a reopen reads the checkpoint), SQLite through
//! [`crate::sqlite::create_tables`] (file-backed, WAL, `synchronous=OFF`, a page cache large
//! enough for the whole database, as `bench trainbenchmark`). Both live in one temporary
//! directory.
//!
//! **Hot.** Each read-only operation runs `warmup` times untimed, then `runs` times timed,
//! the two systems alternating run by run; Q1 and Q4 draw their ids and titles per run, the
//! same for both. T1 "one" runs every run in one read transaction (a snapshot held across the
//! runs in Espalier, `BEGIN … COMMIT` around them in SQLite); "many" gives each run its own.
//! The update traversals (T2a–c, T3a–c, CU) are one committed transaction per run; after each
//! operation's runs the two databases' states are compared whole ([`crate::ops::Fingerprint`]).
//! Insert and delete alternate: each run inserts five composite parts and deletes them again.
//!
//! **Cold.** Before each cold sample both databases are closed, their files dropped from the
//! OS page cache (`fdatasync` + `posix_fadvise(DONTNEED)`, [`espalier_bench::suite::sys`]),
//! and reopened; then the operation runs once in each. Cold here means: no process cache
//! (Espalier's tables are loaded again from the checkpoint, SQLite's page cache is empty) and,
//! where the kernel honours the advice, no file pages cached; it cannot evict what the
//! kernel keeps elsewhere (the disk's own cache, a VM host's cache), so it is colder than
//! the paper's hot runs but not necessarily a cold disk.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use espalier_bench::progress;
use espalier_bench::stats::Summary;
use espalier_bench::suite::sys::{drop_from_cache, DropMethod};
use espalier_instruction::Engine;
use espalier_transaction::{Database, DatabaseOptions, Durability};
use indicatif::ProgressBar;
use rusqlite::Connection;
use serde::Serialize;

use crate::espalier::Oo7Espalier;
use crate::generate::new_composites;
use crate::model::{Oo7, Params, Size};
use crate::ops::{Answer, Draw, Fingerprint, Op, INSERTED};
use crate::peers::PeerRun;
use crate::sqlite;
use espalier_bench::graph_peer::GraphPeer;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The database configuration (table 1).
    pub size: Size,
    /// Atomic-part fanout: 3, 6 or 9.
    pub fanout: usize,
    /// Seed of the generator and of the operations' random choices.
    pub seed: u64,
    /// Untimed runs per operation before the timed ones.
    pub warmup: usize,
    /// Timed (hot) runs per operation and system.
    pub runs: usize,
    /// Cold samples per read-only operation (0: no cold runs).
    pub cold: usize,
    /// Only these operations (empty: every one); insert and delete always run together.
    pub only: Vec<Op>,
    /// Directory for the temporary databases (default: the system's temp directory).
    pub dir: Option<PathBuf>,
    /// Progress bars on stderr.
    pub progress: bool,
    /// The embedded peers to run the read-only operations on, hot ([`crate::peers`]).
    pub peers: Vec<GraphPeer>,
    /// The peers directory, with their drivers installed (`peers/` after `scripts/peers-setup`).
    pub peers_dir: PathBuf,
    /// Fail when a peer asked for is not installed (otherwise the report says it did not run).
    pub require_peers: bool,
}

/// The default seed.
pub const SEED: u64 = 0x007;

impl Config {
    /// The CI run: tiny, fanout 3, one warm-up, three timed runs, one cold sample.
    pub fn quick() -> Config {
        Config {
            size: Size::Tiny,
            fanout: 3,
            seed: SEED,
            warmup: 1,
            runs: 3,
            cold: 1,
            only: Vec::new(),
            dir: None,
            progress: false,
            peers: Vec::new(),
            peers_dir: PathBuf::from("peers"),
            require_peers: false,
        }
    }
}

/// A failed run: a database that could not be built, an operation that failed, or the two
/// systems disagreeing.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BenchError(pub String);

fn err(what: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError(format!("{what}: {e}"))
}

/// One run's report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The configuration generated (table 1).
    pub size: Size,
    /// The atomic-part fanout.
    pub fanout: usize,
    /// The generator's seed.
    pub seed: u64,
    /// The parameters the configuration and fanout give.
    pub params: Params,
    /// Untimed runs per operation.
    pub warmup: usize,
    /// Timed (hot) runs per operation and system.
    pub runs: usize,
    /// Cold samples per read-only operation.
    pub cold_samples: usize,
    /// How the cold samples were made cold.
    pub cold: String,
    /// Composite parts in the database.
    pub composite_parts: usize,
    /// Atomic parts in the database.
    pub atomic_parts: usize,
    /// Connections in the database.
    pub connections: usize,
    /// Assemblies in the database.
    pub assemblies: usize,
    /// Loading Espalier, including its checkpoint, in ms.
    pub load_espalier_ms: f64,
    /// Loading SQLite, in ms.
    pub load_sqlite_ms: f64,
    /// Espalier's files at the end of the run, in bytes.
    pub disk_espalier_bytes: u64,
    /// SQLite's files at the end of the run, in bytes.
    pub disk_sqlite_bytes: u64,
    /// Reopening the closed Espalier database before a cold sample (none without cold runs).
    pub reopen_espalier: Option<Summary>,
    /// Reopening the closed SQLite database before a cold sample (none without cold runs).
    pub reopen_sqlite: Option<Summary>,
    /// Every operation, hot, then cold, then the updates and the structural modifications.
    pub ops: Vec<OpReport>,
    /// The embedded peers asked for: their hot timings of the read-only operations, or why
    /// they did not run.
    pub peers: Vec<PeerReport>,
}

/// A peer's run of the read-only operations, hot.
#[derive(Debug, Serialize)]
pub struct PeerReport {
    /// `duckdb`, `kuzu` or `neo4j`.
    pub system: String,
    /// The version it reported (None if it did not run).
    pub version: Option<String>,
    /// Loading the tables, in ms (None if it did not run).
    pub load_ms: Option<f64>,
    /// Why it did not run.
    pub unavailable: Option<String>,
    /// Each operation's timings, in the order of the hot runs.
    pub ops: Vec<PeerOpReport>,
}

/// One operation on a peer.
#[derive(Debug, Serialize)]
pub struct PeerOpReport {
    /// The operation's name ([`Op::name`]).
    pub op: String,
    /// The peer's timings.
    pub timings: Summary,
    /// The peer's median over Espalier's hot median: above 1, Espalier is faster.
    pub speedup: f64,
}

/// One operation in one mode.
#[derive(Debug, Serialize)]
pub struct OpReport {
    /// The operation's name ([`Op::name`]).
    pub op: String,
    /// `hot` or `cold`.
    pub mode: &'static str,
    /// The answer of the last run (equal in both systems).
    pub answer: Answer,
    /// Espalier's timings.
    pub espalier: Summary,
    /// SQLite's timings.
    pub sqlite: Summary,
    /// SQLite's median over Espalier's: above 1, Espalier is faster.
    pub speedup: f64,
}

fn bar(c: &Config, len: u64, prefix: String) -> ProgressBar {
    progress::bar(c.progress, len, &prefix, progress::STEPS)
}

/// Opens (or creates) the SQLite file as the benchmark uses it.
pub fn open_sqlite(path: &Path) -> Result<Connection, BenchError> {
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

fn options() -> DatabaseOptions {
    DatabaseOptions { durability: Durability::None, ..Default::default() }
}

/// The two systems, open.
struct Pair {
    ours: Oo7Espalier,
    theirs: Connection,
    dir: PathBuf,
}

impl Pair {
    fn sqlite_path(&self) -> PathBuf {
        self.dir.join("sqlite.db")
    }

    fn agree(&self, what: &str, a: Answer, b: Answer) -> Result<(), BenchError> {
        if a != b {
            return Err(BenchError(format!(
                "{what}: Espalier answers {} (checksum {}), SQLite {} (checksum {})",
                a.count, a.sum, b.count, b.sum
            )));
        }
        Ok(())
    }

    fn same_state(&self, what: &str) -> Result<Fingerprint, BenchError> {
        let a = self.ours.fingerprint().map_err(|e| err("Espalier", e))?;
        let b = sqlite::fingerprint(&self.theirs).map_err(|e| err("SQLite", e))?;
        if a != b {
            return Err(BenchError(format!("after {what} the databases differ: Espalier {a:?}, SQLite {b:?}")));
        }
        Ok(a)
    }
}

/// Times one run of a read-only operation in Espalier.
fn espalier_read(p: &Pair, op: Op, draw: &Draw) -> Result<(Duration, Answer), BenchError> {
    let start = Instant::now();
    let a = p.ours.read(op, draw).map_err(|e| err(&format!("Espalier {}", op.name()), e))?;
    Ok((start.elapsed(), a))
}

fn sqlite_read(p: &Pair, op: Op, draw: &Draw) -> Result<(Duration, Answer), BenchError> {
    let start = Instant::now();
    let a = sqlite::read(&p.theirs, op, draw).map_err(|e| err(&format!("SQLite {}", op.name()), e))?;
    Ok((start.elapsed(), a))
}

fn report(op: Op, mode: &'static str, answer: Answer, ours: &mut [Duration], theirs: &mut [Duration]) -> OpReport {
    let espalier = Summary::of(ours);
    let sqlite = Summary::of(theirs);
    OpReport { op: op.name().to_string(), mode, answer, speedup: ratio(&sqlite, &espalier), espalier, sqlite }
}

/// Runs the benchmark; fails if a database cannot be built, an operation fails, or the two
/// systems disagree — never for a missed target.
pub fn run(c: &Config) -> Result<Report, BenchError> {
    if c.runs == 0 {
        return Err(BenchError("runs must be at least 1".into()));
    }
    let pb = bar(c, 1, format!("generate {} f{}", c.size.name(), c.fanout));
    let db = crate::generate(c.size, c.fanout, c.seed).map_err(|e| err("generating", e))?;
    pb.finish_and_clear();
    let tmp = match &c.dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .map_err(|e| err("making a temporary directory", e))?;
    let dir = tmp.path().to_path_buf();
    // Ctrl-C deletes the temporary databases (a medium run leaves hundreds of MB otherwise).
    let _cleanup = espalier_bench::interrupt::on_interrupt(dir.clone(), None);

    let pb = bar(c, 2, "load".into());
    let start = Instant::now();
    let engine = crate::create(&dir.join("espalier"), &db, options()).map_err(|e| err("loading Espalier", e))?;
    engine.database().checkpoint().map_err(|e| err("checkpointing Espalier", e))?;
    let load_espalier = start.elapsed();
    pb.inc(1);
    let theirs = open_sqlite(&dir.join("sqlite.db"))?;
    let start = Instant::now();
    sqlite::create_tables(&theirs, &db).map_err(|e| err("loading SQLite", e))?;
    let load_sqlite = start.elapsed();
    pb.finish_and_clear();
    let ours = Oo7Espalier::new(engine).map_err(|e| err("Espalier", e))?;
    let mut p = Pair { ours, theirs, dir };
    p.same_state("loading")?;

    let wanted = |op: &Op| c.only.is_empty() || c.only.contains(op);
    let mut ops = Vec::new();
    let mut answers = Vec::new();
    for op in Op::READS.iter().filter(|op| wanted(op)) {
        let (report, seen) = hot_read(c, &p, &db, *op)?;
        ops.push(report);
        answers.push((*op, seen));
    }
    // Before anything updates: the peers get the database as loaded.
    let peers = run_peers(c, &p, &db, &ops, &answers)?;
    for op in Op::VARIANTS.iter().filter(|op| wanted(op)) {
        ops.push(variant(c, &p, *op)?);
    }
    let mut reopened = (Vec::new(), Vec::new());
    let mut cold_method = None;
    if c.cold > 0 {
        for op in Op::READS.iter().filter(|op| wanted(op)) {
            let (q, r, method) = cold_read(c, p, &db, *op, &mut reopened)?;
            p = q;
            cold_method = Some(method);
            ops.push(r);
        }
    }
    for op in Op::UPDATES.iter().filter(|op| wanted(op)) {
        ops.push(update(c, &p, *op)?);
    }
    if wanted(&Op::Insert) || wanted(&Op::Delete) {
        ops.extend(structural(c, &p, &db)?);
    }

    let disk_espalier_bytes = p.ours.engine().database().disk_size();
    let disk_sqlite_bytes = [p.sqlite_path(), p.dir.join("sqlite.db-wal")]
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    let summary = |v: &mut Vec<Duration>| if v.is_empty() { None } else { Some(Summary::of(v)) };
    Ok(Report {
        size: c.size,
        fanout: c.fanout,
        seed: c.seed,
        params: db.params,
        warmup: c.warmup,
        runs: c.runs,
        cold_samples: c.cold,
        cold: match cold_method {
            Some(m) => m.describe().to_string(),
            None => "no cold runs".into(),
        },
        composite_parts: db.composites.len(),
        atomic_parts: db.atomic_parts(),
        connections: db.connections(),
        assemblies: db.module.assemblies.len(),
        load_espalier_ms: ms(load_espalier),
        load_sqlite_ms: ms(load_sqlite),
        disk_espalier_bytes,
        disk_sqlite_bytes,
        reopen_espalier: summary(&mut reopened.0),
        reopen_sqlite: summary(&mut reopened.1),
        ops,
        peers,
    })
}

/// Runs the read-only operations that ran hot on each peer asked for, each run's answer
/// checked against Espalier's for the same run.
fn run_peers(
    c: &Config,
    p: &Pair,
    db: &Oo7,
    hot: &[OpReport],
    answers: &[(Op, Vec<Answer>)],
) -> Result<Vec<PeerReport>, BenchError> {
    if c.peers.is_empty() {
        return Ok(Vec::new());
    }
    let ops: Vec<Op> = answers.iter().map(|(op, _)| *op).filter(|op| crate::peers::OPS.contains(op)).collect();
    let tables = p.dir.join("peers-csv");
    std::fs::create_dir_all(&tables).map_err(|e| err("making the peers' directory", e))?;
    let files = crate::peers::write_tables(&p.theirs, &tables).map_err(BenchError)?;
    let mut out = Vec::with_capacity(c.peers.len());
    for &peer in &c.peers {
        let pb = bar(c, 1, format!("peer {}", peer.name()));
        let work = p.dir.join(format!("peer-{}", peer.name()));
        std::fs::create_dir_all(&work).map_err(|e| err("making the peers' directory", e))?;
        let result = crate::peers::run(peer, &c.peers_dir, db, &files, &work, &ops, c.warmup, c.runs);
        pb.finish_and_clear();
        let run: PeerRun = match result {
            Ok(run) => run,
            Err(e) => {
                let reason = e.skipped(c.require_peers).map_err(|e| err("peer", e))?;
                out.push(PeerReport {
                    system: peer.name().into(),
                    version: None,
                    load_ms: None,
                    unavailable: Some(reason),
                    ops: Vec::new(),
                });
                continue;
            }
        };
        let mut reports = Vec::with_capacity(run.ops.len());
        for mut r in run.ops {
            let ours = answers.iter().find(|(op, _)| *op == r.op).map(|(_, a)| a.as_slice()).unwrap_or_default();
            for (i, (a, b)) in ours.iter().zip(&r.answers).enumerate() {
                if a != b {
                    return Err(BenchError(format!(
                        "{} run {i}: Espalier answers {} (checksum {}), {} {} (checksum {})",
                        r.op.name(),
                        a.count,
                        a.sum,
                        run.version,
                        b.count,
                        b.sum
                    )));
                }
            }
            let timings = Summary::of(&mut r.times);
            let espalier = hot.iter().find(|h| h.op == r.op.name()).map(|h| &h.espalier);
            let speedup = espalier.map_or(f64::NAN, |e| ratio(&timings, e));
            reports.push(PeerOpReport { op: r.op.name().to_string(), timings, speedup });
        }
        out.push(PeerReport {
            system: peer.name().into(),
            version: Some(run.version),
            load_ms: Some(run.load_ms),
            unavailable: None,
            ops: reports,
        });
    }
    Ok(out)
}

/// The hot runs of a read-only operation in both systems; every run's answer, warm-up first.
fn hot_read(c: &Config, p: &Pair, db: &Oo7, op: Op) -> Result<(OpReport, Vec<Answer>), BenchError> {
    let pb = bar(c, (c.warmup + c.runs) as u64, format!("hot {}", op.name()));
    let (mut ours, mut theirs) = (Vec::with_capacity(c.runs), Vec::with_capacity(c.runs));
    let mut answer = Answer::default();
    let mut answers = Vec::with_capacity(c.warmup + c.runs);
    for i in 0..c.warmup + c.runs {
        let draw = Draw::new(db, op, i as u64);
        // Alternate which system goes first, so that neither always runs on a cooler machine.
        let ((t, a), (u, b)) = if i % 2 == 0 {
            let x = espalier_read(p, op, &draw)?;
            (x, sqlite_read(p, op, &draw)?)
        } else {
            let y = sqlite_read(p, op, &draw)?;
            (espalier_read(p, op, &draw)?, y)
        };
        p.agree(&format!("{} run {i}", op.name()), a, b)?;
        answer = a;
        answers.push(a);
        if i >= c.warmup {
            ours.push(t);
            theirs.push(u);
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok((report(op, "hot", answer, &mut ours, &mut theirs), answers))
}

/// T1 "one" (every run in one read transaction) or "many" (each run its own).
fn variant(c: &Config, p: &Pair, op: Op) -> Result<OpReport, BenchError> {
    let pb = bar(c, (c.warmup + c.runs) as u64, format!("hot {}", op.name()));
    let one = op == Op::T1One;
    let db: &Database = p.ours.engine().database();
    let en = format!("Espalier {}", op.name());
    let sn = format!("SQLite {}", op.name());
    let (mut ours, mut theirs) = (Vec::with_capacity(c.runs), Vec::with_capacity(c.runs));
    let mut answer = Answer::default();
    let held = if one { Some(db.snapshot().map_err(|x| err(&en, x))?) } else { None };
    if one {
        p.theirs.execute_batch("BEGIN").map_err(|x| err(&sn, x))?;
    }
    let outcome = (|| -> Result<(), BenchError> {
        for i in 0..c.warmup + c.runs {
            let start = Instant::now();
            let a = match &held {
                Some(snap) => p.ours.t1_navigate(&snap.graph()).map_err(|x| err(&en, x))?,
                None => {
                    let snap = db.snapshot().map_err(|x| err(&en, x))?;
                    p.ours.t1_navigate(&snap.graph()).map_err(|x| err(&en, x))?
                }
            };
            let t = start.elapsed();
            let start = Instant::now();
            let b = if one {
                sqlite::t1_navigate(&p.theirs).map_err(|x| err(&sn, x))?
            } else {
                let tx = p.theirs.unchecked_transaction().map_err(|x| err(&sn, x))?;
                let b = sqlite::t1_navigate(&tx).map_err(|x| err(&sn, x))?;
                tx.commit().map_err(|x| err(&sn, x))?;
                b
            };
            let u = start.elapsed();
            p.agree(&format!("{} run {i}", op.name()), a, b)?;
            answer = a;
            if i >= c.warmup {
                ours.push(t);
                theirs.push(u);
            }
            pb.inc(1);
        }
        Ok(())
    })();
    if one {
        p.theirs.execute_batch("COMMIT").map_err(|x| err(&sn, x))?;
    }
    outcome?;
    pb.finish_and_clear();
    Ok(report(op, "hot", answer, &mut ours, &mut theirs))
}

/// Closes both databases, drops their files from the page cache, reopens them (timing each
/// open).
fn reopen(p: Pair, times: &mut (Vec<Duration>, Vec<Duration>)) -> Result<(Pair, DropMethod), BenchError> {
    let Pair { ours, theirs, dir } = p;
    let path = dir.join("espalier");
    let sqlite_path = dir.join("sqlite.db");
    // Both closed before the cache is dropped: no mapping or handle keeps pages in use.
    drop(ours.into_engine());
    theirs.close().map_err(|(_, e)| err("closing SQLite", e))?;
    let mut method = DropMethod::Fadvise;
    let mut files = Database::files(&path);
    files.push(sqlite_path.clone());
    files.extend([dir.join("sqlite.db-wal"), dir.join("sqlite.db-shm")].into_iter().filter(|f| f.exists()));
    for f in &files {
        if drop_from_cache(f).map_err(|e| err(&format!("dropping {} from the page cache", f.display()), e))?
            == DropMethod::ReopenOnly
        {
            method = DropMethod::ReopenOnly;
        }
    }
    let start = Instant::now();
    let engine = Engine::open(&path, options()).map_err(|e| err("reopening Espalier", e))?;
    times.0.push(start.elapsed());
    let start = Instant::now();
    let theirs = open_sqlite(&sqlite_path)?;
    times.1.push(start.elapsed());
    let ours = Oo7Espalier::new(engine).map_err(|e| err("Espalier", e))?;
    Ok((Pair { ours, theirs, dir }, method))
}

/// Cold samples of a read-only operation: reopen, then one run in each system.
fn cold_read(
    c: &Config,
    mut p: Pair,
    db: &Oo7,
    op: Op,
    times: &mut (Vec<Duration>, Vec<Duration>),
) -> Result<(Pair, OpReport, DropMethod), BenchError> {
    let pb = bar(c, c.cold as u64, format!("cold {}", op.name()));
    let (mut ours, mut theirs) = (Vec::with_capacity(c.cold), Vec::with_capacity(c.cold));
    let mut answer = Answer::default();
    let mut method = DropMethod::Fadvise;
    for i in 0..c.cold {
        let (q, m) = reopen(p, times)?;
        p = q;
        method = m;
        let draw = Draw::new(db, op, (c.warmup + c.runs + i) as u64);
        let (t, a) = espalier_read(&p, op, &draw)?;
        let (u, b) = sqlite_read(&p, op, &draw)?;
        p.agree(&format!("{} cold run {i}", op.name()), a, b)?;
        answer = a;
        ours.push(t);
        theirs.push(u);
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok((p, report(op, "cold", answer, &mut ours, &mut theirs), method))
}

/// An update traversal: one committed transaction per run in each system; the states are
/// compared after the runs.
fn update(c: &Config, p: &Pair, op: Op) -> Result<OpReport, BenchError> {
    let pb = bar(c, (c.warmup + c.runs) as u64, format!("hot {}", op.name()));
    let en = format!("Espalier {}", op.name());
    let sn = format!("SQLite {}", op.name());
    let (mut ours, mut theirs) = (Vec::with_capacity(c.runs), Vec::with_capacity(c.runs));
    let mut answer = Answer::default();
    for i in 0..c.warmup + c.runs {
        let (t, a, u, b);
        if op == Op::Cu {
            // The time of the T1s inside the transaction is left out (the paper's definition).
            let start = Instant::now();
            let (x, t1) = p.ours.cached_update().map_err(|x| err(&en, x))?;
            (t, a) = (start.elapsed().saturating_sub(t1), x);
            let start = Instant::now();
            let (y, t1) = sqlite::cached_update(&p.theirs).map_err(|x| err(&sn, x))?;
            (u, b) = (start.elapsed().saturating_sub(t1), y);
        } else {
            let start = Instant::now();
            a = p.ours.update(op).map_err(|x| err(&en, x))?;
            t = start.elapsed();
            let start = Instant::now();
            b = sqlite::update(&p.theirs, op).map_err(|x| err(&sn, x))?;
            u = start.elapsed();
        }
        p.agree(&format!("{} run {i}", op.name()), a, b)?;
        answer = a;
        if i >= c.warmup {
            ours.push(t);
            theirs.push(u);
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    p.same_state(op.name())?;
    Ok(report(op, "hot", answer, &mut ours, &mut theirs))
}

/// Insert and delete, alternating: each run inserts five composite parts and deletes them.
fn structural(c: &Config, p: &Pair, db: &Oo7) -> Result<[OpReport; 2], BenchError> {
    let pb = bar(c, (c.warmup + c.runs) as u64, "insert, delete".into());
    let first_part = db.composites.len() as u64 + 1;
    let first_atom = db.max_atomic_id() + 1;
    let mut times: [(Vec<Duration>, Vec<Duration>); 2] = Default::default();
    let mut answers = [Answer::default(); 2];
    for i in 0..c.warmup + c.runs {
        let new = new_composites(
            db,
            db.seed ^ (i as u64).wrapping_add(1).wrapping_mul(0xD1B5_4A32_D192_ED03),
            first_part,
            first_atom,
            INSERTED,
        );
        for (k, op) in [Op::Insert, Op::Delete].into_iter().enumerate() {
            let en = format!("Espalier {}", op.name());
            let sn = format!("SQLite {}", op.name());
            let start = Instant::now();
            let a = if k == 0 { p.ours.insert(&new) } else { p.ours.delete(&new) }.map_err(|x| err(&en, x))?;
            let t = start.elapsed();
            let start = Instant::now();
            let b = if k == 0 { sqlite::insert(&p.theirs, &new) } else { sqlite::delete(&p.theirs, &new) }
                .map_err(|x| err(&sn, x))?;
            let u = start.elapsed();
            p.agree(&format!("{} run {i}", op.name()), a, b)?;
            if i + 1 == c.warmup + c.runs {
                p.same_state(op.name())?;
            }
            if let (Some(slot), Some(ans)) = (times.get_mut(k), answers.get_mut(k)) {
                *ans = a;
                if i >= c.warmup {
                    slot.0.push(t);
                    slot.1.push(u);
                }
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let [(mut a0, mut b0), (mut a1, mut b1)] = times;
    let [inserted, deleted] = answers;
    Ok([report(Op::Insert, "hot", inserted, &mut a0, &mut b0), report(Op::Delete, "hot", deleted, &mut a1, &mut b1)])
}

impl Report {
    /// The report as Markdown: the database, then one table row per operation and mode.
    pub fn to_markdown(&self) -> String {
        use espalier_bench::suite::report::{bytes, us};
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "OO7 {} database, atomic-part fanout {} (seed {}): {} composite parts, {} atomic parts, {} connections, \
             {} assemblies. Espalier (durability none) beside SQLite (WAL, synchronous=OFF), the same database in \
             both; {} timed runs after {} warm-up (hot), {} cold sample(s); medians in µs; speedup = SQLite / \
             Espalier. Every answer is cross-checked.\n",
            self.size.name(),
            self.fanout,
            self.seed,
            self.composite_parts,
            self.atomic_parts,
            self.connections,
            self.assemblies,
            self.runs,
            self.warmup,
            self.cold_samples
        );
        let _ = writeln!(
            out,
            "Loaded in {:.0} ms into Espalier ({} on disk), {:.0} ms into SQLite ({}).",
            self.load_espalier_ms,
            bytes(self.disk_espalier_bytes),
            self.load_sqlite_ms,
            bytes(self.disk_sqlite_bytes)
        );
        if let (Some(a), Some(b)) = (&self.reopen_espalier, &self.reopen_sqlite) {
            let _ = writeln!(
                out,
                "Cold: {}. Reopening took {} µs (Espalier) and {} µs (SQLite), medians.",
                self.cold,
                us(a.median_us),
                us(b.median_us)
            );
        }
        out.push_str("\n| operation | mode | answer | Espalier | SQLite | speedup |\n|---|---|---:|---:|---:|---:|\n");
        for r in &self.ops {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:.2}× |",
                r.op,
                r.mode,
                r.answer.count,
                us(r.espalier.median_us),
                us(r.sqlite.median_us),
                r.speedup
            );
        }
        out.push_str(
            "\nAnswer: atomic parts visited (T1, T6), updates made (T2, T3, CU), 'I's in the manual (T8), \
             first = last character (T9), parts or assemblies found (Q1–Q7), document–part pairs (Q8), composite \
             parts inserted or deleted. T1 and T6 run as a pattern query in Espalier and recursive SQL in SQLite; \
             T1 one/many, T2, T3 and CU navigate object to object (Espalier's data API, SQLite's prepared \
             statements); CU's time leaves out its two T1s. Q8 coded is the paper's hand-coded indexed nested \
             loop (each atomic part's doc id probed in the documents' id index) in both.\n",
        );
        self.peers_markdown(&mut out);
        out
    }

    /// The peers' table: each read-only operation's hot median and Espalier's speedup.
    fn peers_markdown(&self, out: &mut String) {
        use espalier_bench::suite::report::us;
        use std::fmt::Write as _;
        if self.peers.is_empty() {
            return;
        }
        out.push_str("\n### Beside the embedded peers (hot)\n\n");
        for p in self.peers.iter().filter(|p| p.unavailable.is_some()) {
            let _ = writeln!(out, "{} did not run: {}\n", p.system, p.unavailable.as_deref().unwrap_or(""));
        }
        let ran: Vec<&PeerReport> = self.peers.iter().filter(|p| p.version.is_some()).collect();
        if ran.is_empty() {
            return;
        }
        for p in &ran {
            let _ = writeln!(
                out,
                "{} loaded the tables in {:.0} ms.",
                p.version.as_deref().unwrap_or(&p.system),
                p.load_ms.unwrap_or(f64::NAN)
            );
        }
        out.push_str("\n| operation | Espalier |");
        for p in &ran {
            let _ = write!(out, " {} | speedup |", p.version.as_deref().unwrap_or(&p.system));
        }
        out.push_str("\n|---|---:|");
        out.push_str(&"---:|---:|".repeat(ran.len()));
        out.push('\n');
        for r in self.ops.iter().filter(|r| r.mode == "hot") {
            let cells: Vec<String> = ran
                .iter()
                .filter_map(|p| p.ops.iter().find(|o| o.op == r.op))
                .map(|o| format!("{} | {:.2}×", us(o.timings.median_us), o.speedup))
                .collect();
            if cells.len() == ran.len() {
                let _ = writeln!(out, "| {} | {} | {} |", r.op, us(r.espalier.median_us), cells.join(" | "));
            }
        }
        out.push_str(
            "\nMedians in µs; speedup = the peer's median / Espalier's. Every run's answer was compared with \
             Espalier's. DuckDB runs SQLite's SQL on the same tables; Kùzu and Neo4j run Cypher on a property \
             graph built from them (crates/oo7/src/peers.rs); each peer's time includes its driver's fetching \
             of the rows (Python for DuckDB and Kùzu, Java for Neo4j).\n",
        );
    }
}

impl Report {
    /// Box plots per operation (`espalier_bench::suite::chart`): one panel per mode, one box
    /// per operation and system.
    pub fn chart_svg(&self) -> String {
        use espalier_bench::suite::chart::{svg, Series};
        use espalier_bench::suite::report::InstructionResult;
        use espalier_bench::suite::Mode;
        let result = |r: &OpReport, s: &Summary| InstructionResult {
            mode: if r.mode == "cold" { Mode::Cold } else { Mode::Hot },
            ..InstructionResult::of_summary(r.mode, "oo7", &r.op, s)
        };
        let ours: Vec<InstructionResult> = self.ops.iter().map(|r| result(r, &r.espalier)).collect();
        let theirs: Vec<InstructionResult> = self.ops.iter().map(|r| result(r, &r.sqlite)).collect();
        let peers: Vec<(String, Vec<InstructionResult>)> = self
            .peers
            .iter()
            .filter_map(|p| Some((p.version.clone()?, p)))
            .map(|(v, p)| {
                (v, p.ops.iter().map(|o| InstructionResult::of_summary("hot", "oo7", &o.op, &o.timings)).collect())
            })
            .collect();
        let mut series = vec![
            Series { label: "Espalier".into(), results: ours.iter().collect() },
            Series { label: "SQLite".into(), results: theirs.iter().collect() },
        ];
        series.extend(
            peers.iter().map(|(label, results)| Series { label: label.clone(), results: results.iter().collect() }),
        );
        let peers = if self.peers.iter().any(|p| p.version.is_some()) { " and the embedded peers" } else { "" };
        svg(&series, &format!("OO7 {}, fanout {}: Espalier beside SQLite{peers}", self.size.name(), self.fanout))
    }
}
