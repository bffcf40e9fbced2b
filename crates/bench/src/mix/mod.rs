//! `espalier bench mix`: seed 004's evaluation of what transactions cost (CoherentPaaS D10.4,
//! §3; the Sparksee workload of §3.5.3): a YCSB-style mix of reads, updates, inserts, scans of
//! up to 300 records from a key and read-modify-writes, grouped into batches of
//! `ops_per_batch` operations that each client runs in a closed loop, once **without
//! transactions** (every operation its own request or autocommit statement) and once **with**
//! (the batch is one transaction), at K = 1 … 64 clients, on Espalier (its server on a free
//! 127.0.0.1 port), PostgreSQL at REPEATABLE READ (a private server) and SQLite (a file in
//! WAL mode, one connection per client). The report gives batches per second, batch latency,
//! the throughput loss and latency increase of transactions, and the transactions aborted and
//! retried.
//!
//! Every reply is checked as it comes (a read finds its record, a scan starts at its key and
//! returns keys in order, at most its limit, fewer only at the end of the table), and after
//! each point the table is: its records must have grown by the inserts acknowledged and the
//! sum of its counts by the updates and read-modify-writes acknowledged (each adds one).
//!
//! The pieces: [`ops`] (the operations and their checks), [`espalier`], [`postgres`] and
//! [`sqlite`] (each system's sessions, and what isolation each mode gets), [`report`].

pub mod espalier;
pub mod ops;
pub mod postgres;
pub mod report;
pub mod scans;
pub mod sqlite;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::peers::DurabilityPairing;
use crate::remote::RemoteError;
use crate::stats::Summary;
pub use ops::{Mix, Op};
pub use report::{Point, Report};

/// Most records the table may be loaded with.
pub const MAX_SIZE: u64 = 10_000_000;
/// Most clients a point may have.
pub const MAX_CLIENTS: usize = 256;
/// Most attempts at one transaction (a serialization failure or a busy database is retried).
pub const MAX_ATTEMPTS: u64 = 10_000;
/// Most failed batches a client tolerates before it stops (the point reports them).
const MAX_CLIENT_ERRORS: u64 = 100;
/// Latency samples kept per client.
const MAX_SAMPLES_PER_CLIENT: usize = 1_000_000;
/// How many measured windows a point may run over while it has no batch done: on a loaded
/// machine a transaction that retries can outlast a short window, and a point without a
/// batch says nothing. The point's seconds then stretch to its last batch.
const MAX_OVERTIME_WINDOWS: f64 = 10.0;

/// A system the mix runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SystemKind {
    /// Espalier's server, over WebSocket.
    Espalier,
    /// PostgreSQL, a private server, REPEATABLE READ.
    Postgres,
    /// SQLite, one file in WAL mode, a connection per client.
    Sqlite,
}

impl SystemKind {
    /// `espalier`, `postgres` (also `postgresql`, `pg`) or `sqlite`.
    pub fn parse(s: &str) -> Result<SystemKind, String> {
        match s.trim() {
            "espalier" => Ok(SystemKind::Espalier),
            "postgres" | "postgresql" | "pg" => Ok(SystemKind::Postgres),
            "sqlite" => Ok(SystemKind::Sqlite),
            other => Err(format!("--peers: unknown system {other:?}: expected postgres or sqlite")),
        }
    }

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            SystemKind::Espalier => "espalier",
            SystemKind::Postgres => "postgres",
            SystemKind::Sqlite => "sqlite",
        }
    }
}

/// What a mix run measures and how.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Config {
    /// Records loaded before the first point.
    pub size: u64,
    /// Client counts, one point each per system and mode.
    pub clients: Vec<usize>,
    /// Espalier and its peers, in order.
    pub systems: Vec<SystemKind>,
    /// Seconds measured per point, after the warm-up.
    pub seconds: f64,
    /// Seconds run before each point's measurement (counted in the final-state check).
    pub warmup_seconds: f64,
    /// Operations per batch or transaction (the seed's Sparksee run: 10).
    pub ops_per_batch: usize,
    /// Most records a scan reads (the seed: 300).
    pub max_scan: u64,
    /// The proportions of the operations.
    pub mix: Mix,
    /// Durability of every system (paired as in `bench peers`).
    pub durability: DurabilityPairing,
    /// Seed of the operation streams.
    pub seed: u64,
    /// Tokio worker threads of Espalier's server (0: one per core).
    pub server_threads: usize,
    /// Where the temporary databases go (default: the system's temp directory).
    pub dir: Option<PathBuf>,
    /// Scans run in process afterwards beside DuckDB ([`scans`]; 0: none).
    pub scans: usize,
    /// The peers directory with DuckDB's driver (`peers/` after `scripts/peers-setup`).
    pub peers_dir: PathBuf,
    /// Fail when DuckDB is not installed (otherwise the report says it did not run).
    pub require_peers: bool,
}

impl Config {
    /// The full run: 100 000 records, K = 1 … 64, 3 s per point after 1 s.
    pub fn full() -> Config {
        Config {
            size: 100_000,
            clients: vec![1, 2, 4, 8, 16, 32, 64],
            systems: vec![SystemKind::Espalier, SystemKind::Postgres, SystemKind::Sqlite],
            seconds: 3.0,
            warmup_seconds: 1.0,
            ops_per_batch: 10,
            max_scan: 300,
            mix: Mix::SEED,
            durability: DurabilityPairing::Sync,
            seed: 42,
            server_threads: 0,
            dir: None,
            scans: 1000,
            peers_dir: PathBuf::from("peers"),
            require_peers: false,
        }
    }

    /// CI size: 500 records, K = 1, 4, half a second per point.
    pub fn quick() -> Config {
        Config {
            size: 500,
            clients: vec![1, 4],
            seconds: 0.5,
            warmup_seconds: 0.1,
            max_scan: 50,
            scans: 50,
            ..Config::full()
        }
    }

    /// Checks the options' ranges; the error names the option.
    pub fn validate(&self) -> Result<(), RemoteError> {
        let bad = |m: String| Err(RemoteError::Invalid(m));
        if self.size == 0 || self.size > MAX_SIZE {
            return bad(format!("--size: {} is not between 1 and {MAX_SIZE}", self.size));
        }
        if self.clients.is_empty() || self.clients.iter().any(|&k| k == 0 || k > MAX_CLIENTS) {
            return bad(format!("--clients: give client counts between 1 and {MAX_CLIENTS}"));
        }
        if !(self.seconds > 0.0 && self.seconds <= 3600.0) {
            return bad(format!("--seconds: {} is not between 0 and 3600", self.seconds));
        }
        if !(self.warmup_seconds >= 0.0 && self.warmup_seconds <= 3600.0) {
            return bad(format!("--warmup: {} is not between 0 and 3600", self.warmup_seconds));
        }
        if self.ops_per_batch == 0 || self.ops_per_batch > 1000 {
            return bad(format!("--ops: {} is not between 1 and 1000", self.ops_per_batch));
        }
        if self.max_scan == 0 || self.max_scan > 100_000 {
            return bad(format!("--scan: {} is not between 1 and 100000", self.max_scan));
        }
        if self.systems.is_empty() {
            return bad("no system to run".into());
        }
        if self.scans > scans::MAX_SCANS {
            return bad(format!("--scans: {} is more than {}", self.scans, scans::MAX_SCANS));
        }
        Ok(())
    }
}

/// What one batch did, as its system acknowledged it.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// Attempts that were aborted and retried (serialization failures, a busy database).
    pub retries: u64,
    /// Replies that were wrong, with the first one's description.
    pub wrong: u64,
    /// The first wrong reply.
    pub first_wrong: Option<String>,
    /// Counts added (acknowledged updates and read-modify-writes).
    pub increments: u64,
    /// Records added (acknowledged inserts).
    pub inserts: u64,
}

impl Outcome {
    /// Counts a wrong reply.
    pub fn wrong(&mut self, what: String) {
        self.wrong += 1;
        self.first_wrong.get_or_insert(what);
    }
}

/// One client's connection to a system.
pub trait Session: Send {
    /// Runs `batch`, as one transaction when `transactional` (retried until it commits, at
    /// most [`MAX_ATTEMPTS`] times), else each operation on its own. An error is a batch that
    /// failed (its effects, without a transaction, may be partly there).
    fn run(&mut self, batch: &[Op], transactional: bool) -> Result<Outcome, String>;
}

/// The table's state, for the check after each point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Records in the table.
    pub records: u64,
    /// Sum of their counts.
    pub counts: i64,
}

/// A loaded system that opens sessions.
pub trait System {
    /// The system's kind.
    fn kind(&self) -> SystemKind;
    /// Its version, for the report.
    fn version(&self) -> String;
    /// What each mode gets, for the report.
    fn isolation(&self, transactional: bool) -> &'static str;
    /// A new client session.
    fn session(&self) -> Result<Box<dyn Session>, RemoteError>;
    /// The table's state now.
    fn state(&self) -> Result<State, RemoteError>;
    /// Stops the system (deletes nothing the temporary directory does not).
    fn stop(self: Box<Self>) -> Result<(), RemoteError>;
}

/// Runs every system at every client count, without and with transactions, and returns the
/// report. Fails only when something cannot be built, started or read; wrong replies and
/// state mismatches are in the report.
pub fn run(config: &Config, progress: &dyn Fn(&str)) -> Result<Report, RemoteError> {
    config.validate()?;
    let started = Instant::now();
    let load_before = load_average();
    let base = config.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("espalier-bench-mix-")
        .tempdir_in(&base)
        .map_err(|e| RemoteError::io(format!("making a temporary directory in {}", base.display()), e))?;
    let _cleanup = crate::interrupt::on_interrupt(tmp.path().to_path_buf(), None);
    let mut points = Vec::new();
    let mut systems = Vec::new();
    let mut round = 0u64;
    for &kind in &config.systems {
        progress(&format!("loading {} records into {}", config.size, kind.name()));
        let dir = tmp.path().join(kind.name());
        let system: Box<dyn System> = match kind {
            SystemKind::Espalier => Box::new(espalier::Served::start(config, &dir)?),
            SystemKind::Postgres => Box::new(postgres::Pg::start(config, &dir)?),
            SystemKind::Sqlite => Box::new(sqlite::Lite::start(config, &dir)?),
        };
        systems.push(report::SystemInfo {
            system: kind,
            version: system.version(),
            without: system.isolation(false).to_string(),
            with: system.isolation(true).to_string(),
        });
        for &k in &config.clients {
            for transactional in [false, true] {
                progress(&format!("{} K={k} {}", kind.name(), if transactional { "transactions" } else { "batches" }));
                round += 1;
                points.push(point(system.as_ref(), config, k, transactional, round)?);
            }
        }
        system.stop()?;
    }
    let machine = report::Machine {
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        load_before,
        load_after: load_average(),
        seconds: started.elapsed().as_secs_f64(),
    };
    let mut report = Report::new(config.clone(), machine, systems, points);
    if config.scans > 0 {
        progress(&format!("{} scans in process: Espalier, SQLite, DuckDB", config.scans));
        report.scans = Some(scans::run(config, &tmp.path().join("scans"))?);
    }
    Ok(report)
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// What one client thread counted.
#[derive(Default)]
struct Tally {
    samples: Vec<Duration>,
    /// When the last measured batch ended (past the window only while the point had none).
    last_done: Option<Instant>,
    batches: u64,
    errors: u64,
    first_error: Option<String>,
    total: Outcome,
}

/// One point: `k` clients in a closed loop for the warm-up and the measured seconds.
fn point(
    system: &dyn System,
    config: &Config,
    k: usize,
    transactional: bool,
    round: u64,
) -> Result<Point, RemoteError> {
    let mut sessions = Vec::with_capacity(k);
    for _ in 0..k {
        sessions.push(system.session()?);
    }
    let before = system.state()?;
    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(config.warmup_seconds);
    let end = measure_from + Duration::from_secs_f64(config.seconds);
    let overtime_end = end + Duration::from_secs_f64(config.seconds * MAX_OVERTIME_WINDOWS);
    let measured = AtomicU64::new(0);
    let tallies = Mutex::new(Vec::with_capacity(k));
    std::thread::scope(|scope| {
        for (client, mut session) in sessions.into_iter().enumerate() {
            let (tallies, measured) = (&tallies, &measured);
            scope.spawn(move || {
                let mut generator =
                    ops::Generator::new(config.seed, round, client, config.size, config.max_scan, config.mix);
                let mut tally = Tally::default();
                loop {
                    let now = Instant::now();
                    let idle = measured.load(Ordering::Relaxed) == 0;
                    if tally.errors >= MAX_CLIENT_ERRORS || !(now < end || (idle && now < overtime_end)) {
                        break;
                    }
                    let batch = generator.batch(config.ops_per_batch);
                    let t = Instant::now();
                    match session.run(&batch, transactional) {
                        Ok(outcome) => {
                            let done = Instant::now();
                            let idle = measured.load(Ordering::Relaxed) == 0;
                            if t >= measure_from && (done <= end || idle) {
                                measured.fetch_add(1, Ordering::Relaxed);
                                tally.last_done = tally.last_done.max(Some(done));
                                tally.batches += 1;
                                if tally.samples.len() < MAX_SAMPLES_PER_CLIENT {
                                    tally.samples.push(done - t);
                                }
                            }
                            let total = &mut tally.total;
                            total.retries += outcome.retries;
                            total.increments += outcome.increments;
                            total.inserts += outcome.inserts;
                            total.wrong += outcome.wrong;
                            if total.first_wrong.is_none() {
                                total.first_wrong = outcome.first_wrong;
                            }
                        }
                        Err(e) => {
                            tally.errors += 1;
                            tally.first_error.get_or_insert(e);
                        }
                    }
                }
                if let Ok(mut all) = tallies.lock() {
                    all.push(tally);
                }
            });
        }
    });
    let tallies = tallies.into_inner().map_err(|_| RemoteError::Invalid("a client thread panicked".into()))?;
    let after = system.state()?;
    let mut samples = Vec::new();
    let mut p = Point {
        system: system.kind(),
        transactions: transactional,
        clients: k,
        seconds: config.seconds,
        batches: 0,
        batches_per_s: 0.0,
        ops_per_s: 0.0,
        latency: None,
        retries: 0,
        errors: 0,
        first_error: None,
        wrong: 0,
        first_wrong: None,
        state: None,
    };
    let mut acknowledged = Outcome::default();
    for t in tallies {
        if let Some(done) = t.last_done {
            p.seconds = p.seconds.max(done.duration_since(measure_from).as_secs_f64());
        }
        samples.extend(t.samples);
        p.batches += t.batches;
        p.errors += t.errors;
        if p.first_error.is_none() {
            p.first_error = t.first_error;
        }
        acknowledged.retries += t.total.retries;
        acknowledged.increments += t.total.increments;
        acknowledged.inserts += t.total.inserts;
        p.wrong += t.total.wrong;
        if p.first_wrong.is_none() {
            p.first_wrong = t.total.first_wrong;
        }
    }
    p.retries = acknowledged.retries;
    p.batches_per_s = p.batches as f64 / p.seconds;
    p.ops_per_s = p.batches_per_s * config.ops_per_batch as f64;
    if !samples.is_empty() {
        p.latency = Some(Summary::of(&mut samples));
    }
    p.state = state_check(before, after, &acknowledged, transactional || p.errors == 0);
    Ok(p)
}

/// `None` when the table grew by what was acknowledged, else what differs. A failed batch
/// without a transaction may have left part of its effects: then nothing can be said.
fn state_check(before: State, after: State, acked: &Outcome, decidable: bool) -> Option<String> {
    let records = after.records.wrapping_sub(before.records);
    let counts = after.counts.wrapping_sub(before.counts);
    let want_counts = i64::try_from(acked.increments).unwrap_or(i64::MAX);
    if records == acked.inserts && counts == want_counts {
        return None;
    }
    let what = format!(
        "the table gained {records} records and {counts} counts; {} inserts and {} increments were acknowledged",
        acked.inserts, acked.increments
    );
    Some(if decidable { what } else { format!("undecided (batches failed): {what}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A system each of whose batches takes `batch`: what a loaded machine makes of a
    /// transaction that retries.
    struct Slow {
        batch: Duration,
    }

    struct SlowSession(Duration);

    impl Session for SlowSession {
        fn run(&mut self, _: &[Op], _: bool) -> Result<Outcome, String> {
            std::thread::sleep(self.0);
            Ok(Outcome::default())
        }
    }

    impl System for Slow {
        fn kind(&self) -> SystemKind {
            SystemKind::Sqlite
        }
        fn version(&self) -> String {
            "slow".into()
        }
        fn isolation(&self, _: bool) -> &'static str {
            "none"
        }
        fn session(&self) -> Result<Box<dyn Session>, RemoteError> {
            Ok(Box::new(SlowSession(self.batch)))
        }
        fn state(&self) -> Result<State, RemoteError> {
            Ok(State { records: 0, counts: 0 })
        }
        fn stop(self: Box<Self>) -> Result<(), RemoteError> {
            Ok(())
        }
    }

    #[test]
    fn a_point_whose_batches_outlast_its_window_runs_on_until_one_is_done() {
        let config = Config { seconds: 0.05, warmup_seconds: 0.0, ..Config::quick() };
        let p = point(&Slow { batch: Duration::from_millis(120) }, &config, 2, true, 0).expect("the point runs");
        assert!(p.batches >= 1, "{p:?}");
        // Measured to the end of the batch that ended last, past the 50 ms window.
        assert!(p.seconds >= 0.12 && p.seconds < 1.0, "{p:?}");
        assert!((p.batches_per_s - p.batches as f64 / p.seconds).abs() < 1e-9, "{p:?}");
        assert_eq!(p.state, None, "{p:?}");
    }

    #[test]
    fn a_point_with_batches_inside_its_window_measures_the_window() {
        let config = Config { seconds: 0.2, warmup_seconds: 0.0, ..Config::quick() };
        let p = point(&Slow { batch: Duration::from_millis(5) }, &config, 1, false, 0).expect("the point runs");
        assert!(p.batches >= 10, "{p:?}");
        assert_eq!(p.seconds, 0.2, "{p:?}");
    }

    #[test]
    fn the_state_check_counts_what_was_acknowledged() {
        let before = State { records: 10, counts: 5 };
        let acked = Outcome { inserts: 2, increments: 3, ..Outcome::default() };
        assert_eq!(state_check(before, State { records: 12, counts: 8 }, &acked, true), None);
        let lost = state_check(before, State { records: 12, counts: 7 }, &acked, true).expect("a lost update");
        assert!(lost.contains("7") || lost.contains("2 counts"), "{lost}");
        assert!(state_check(before, State { records: 11, counts: 8 }, &acked, false).unwrap().starts_with("undecided"));
    }

    #[test]
    fn configs_are_checked() {
        Config::full().validate().unwrap();
        Config::quick().validate().unwrap();
        let bad = |f: &dyn Fn(&mut Config)| {
            let mut c = Config::quick();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(&|c| c.size = 0).contains("--size"));
        assert!(bad(&|c| c.clients = vec![0]).contains("--clients"));
        assert!(bad(&|c| c.ops_per_batch = 0).contains("--ops"));
        assert!(bad(&|c| c.max_scan = 0).contains("--scan"));
        assert!(SystemKind::parse("mysql").unwrap_err().contains("postgres or sqlite"));
    }
}
