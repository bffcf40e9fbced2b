//! Running a suite: build the dataset in a temporary directory, then time every instruction
//! of every benchmark, hot and (optionally) cold.
//!
//! **Hot.** The data file is read once (so it is in the page cache), every instruction runs
//! `warmup` times untimed — mutations rolled back ([`Engine::run_rolled_back`]), so the data
//! the timed runs see is the data `initialize` made — and then the `repeat` loop runs, each
//! instruction timed on its own with [`Instant`] (the sample covers `Engine::run` of the
//! checked plan and dropping its reply; its `index` and `random` parameters are drawn before
//! the sample starts).
//!
//! **Cold.** Before the hot run a copy of the freshly built data file is made. The cold phase
//! runs on that copy the first `samples` iterations of every benchmark (same `index` and
//! `random` values as the hot run's first iterations); before each sample the database is
//! synced and closed, the file is dropped from the page cache ([`sys::drop_from_cache`]) and
//! the database is opened again — all outside the sample. [`SuiteRun::cold_method`] says
//! whether the cache could really be dropped and how much of the file was still cached.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use espalier_instruction::plan::Plan;
use espalier_instruction::{Engine, ParamValue, Reply};
use espalier_schema::PropertyId;
use espalier_transaction::{Database, DatabaseOptions, Durability};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use super::dataset::{mix, SplitMix};
use super::sys::{self, DropMethod, Memory};
use super::{create_dataset, BuildError, BuildOptions, DatasetStats, Draws, Scale, Suite};

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Seed of the generator of the data's values and the instructions' parameters.
    pub seed: u64,
    /// The factors the collection sizes are multiplied by.
    pub scale: Scale,
    /// Multiplies every `repeat` count (at least 1 repetition remains).
    pub repeat_scale: f64,
    /// Untimed runs of every instruction before the timed ones.
    pub warmup: u64,
    /// Also take cold samples (data dropped from the page cache), if set.
    pub cold: Option<ColdOptions>,
    /// `None` by default: commits reach the OS page cache, never fsync (as in `bench core`).
    pub durability: Durability,
    /// Where the temporary database directory is made (default: the system's temp dir).
    pub dir: Option<PathBuf>,
    /// Draw progress bars on stderr.
    pub progress: bool,
    /// Entries per write request while building.
    pub batch: u64,
    /// Run only these benchmarks (all when empty).
    pub only: Vec<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seed: 1,
            scale: Scale::default(),
            repeat_scale: 1.0,
            warmup: 20,
            cold: None,
            durability: Durability::None,
            dir: None,
            progress: false,
            batch: BuildOptions::default().batch,
            only: Vec::new(),
        }
    }
}

/// How to take cold samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColdOptions {
    /// Cold samples per instruction (at most the benchmark's repetitions).
    pub samples: u64,
}

/// Hot or cold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// With the data in memory.
    Hot,
    /// The database closed, its file dropped from the page cache where possible, and reopened before each sample.
    Cold,
}

impl Mode {
    /// The mode's name: `hot` or `cold`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Hot => "hot",
            Mode::Cold => "cold",
        }
    }
}

/// The timed runs of one instruction in one mode.
#[derive(Debug, Clone)]
pub struct InstructionRun {
    /// The benchmark's name.
    pub benchmark: String,
    /// The benchmark's name, or `benchmark[i]` for the i-th instruction of a `repeat` body.
    pub name: String,
    /// The instruction as written.
    pub text: String,
    /// Hot or cold.
    pub mode: Mode,
    /// The time of each timed run.
    pub samples: Vec<Duration>,
    /// Outcome counts: `"ok"` or an error code.
    pub outcomes: BTreeMap<String, u64>,
    /// `None`: every run should succeed; `Some(code)`: every run should fail with `code`.
    pub expected: Option<String>,
    /// Error codes that are not unexpected either.
    pub allowed: Vec<String>,
    /// Sum of the `total` of query replies, and how many there were.
    pub query_totals: (u64, u64),
}

impl InstructionRun {
    /// Runs that failed, whatever the error.
    pub fn failed(&self) -> u64 {
        self.outcomes.iter().filter(|(k, _)| k.as_str() != "ok").map(|(_, n)| n).sum()
    }

    /// Runs whose outcome differs from the expected one.
    pub fn unexpected(&self) -> u64 {
        let want = self.expected.as_deref().unwrap_or("ok");
        self.outcomes.iter().filter(|(k, _)| k.as_str() != want && !self.allowed.contains(k)).map(|(_, n)| n).sum()
    }
}

/// Everything measured for one suite.
#[derive(Debug, Clone)]
pub struct SuiteRun {
    /// The suite's name.
    pub suite: String,
    /// What building the data set made and how long it took.
    pub dataset: DatasetStats,
    /// Disk bytes of the database directory after the build, and after the hot run.
    pub disk_bytes_built: u64,
    /// Disk bytes of the database directory after the hot run.
    pub disk_bytes_after: u64,
    /// After the build (peak since the suite started).
    pub memory_build: Memory,
    /// After the hot run (peak since the run started; anon = idle heap with the database open).
    pub memory_run: Memory,
    /// Whether the peak could be reset between phases.
    pub peak_reset: bool,
    /// Fraction of the data file in the page cache when the hot run started (after reading
    /// it) and when it ended: below 1, the "hot" run did not have all data in memory.
    pub hot_cached: (Option<f64>, Option<f64>),
    /// Page faults (minor, major) during the hot run, warm-up included: minor faults map
    /// pages of the cached data file into the process on first touch.
    pub hot_faults: (u64, u64),
    /// How cold samples were made, and the cached fraction of the data file measured right
    /// after the first drop.
    pub cold_method: Option<(DropMethod, Option<f64>)>,
    /// Benchmarks that run fewer times than asked, and why (see [`super::fit_benchmarks`]).
    pub notes: Vec<String>,
    /// The timed runs of each instruction, hot then cold.
    pub runs: Vec<InstructionRun>,
}

/// A run failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunError {
    /// Building the data set failed.
    #[error("{0}")]
    Build(#[from] BuildError),
    /// The options cannot be used; says why.
    #[error("{0}")]
    Options(String),
    /// A file operation failed.
    #[error("{context}: {reason}")]
    Io {
        /// What the run was doing.
        context: String,
        /// The I/O error, as text.
        reason: String,
    },
    /// Opening or syncing the database failed.
    #[error("{context}: {reason}")]
    Engine {
        /// What the run was doing.
        context: String,
        /// The engine's error, as text.
        reason: String,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> RunError {
    let context = context.into();
    move |e| RunError::Io { context, reason: e.to_string() }
}

fn engine_err(context: impl Into<String>) -> impl FnOnce(espalier_instruction::InstructionError) -> RunError {
    let context = context.into();
    move |e| RunError::Engine { context, reason: e.to_string() }
}

/// The benchmark's `index` and `random`: the repetition, the generator, and the parameters
/// standing for them.
struct Values {
    index: u64,
    rng: SplitMix,
    params: HashMap<String, ParamValue>,
}

impl Values {
    fn new(rng: SplitMix) -> Values {
        Values { index: 0, rng, params: HashMap::new() }
    }

    /// Draws the values of one run of an instruction.
    fn fill(&mut self, draws: &Draws) {
        draws.fill(self.index, &mut self.rng, &mut self.params);
    }
}

fn name_hash(name: &str) -> u64 {
    // FNV-1a: stable across builds and platforms.
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A repeat count scaled by `f` (at least 1).
pub fn scaled_repeat(n: u64, f: f64) -> u64 {
    let r = (n as f64 * f).round();
    if r.is_nan() || r < 1.0 {
        1
    } else {
        (r as u64).min(super::parse::MAX_REPEAT)
    }
}

fn bar(show: bool, len: u64, prefix: String) -> ProgressBar {
    crate::progress::bar(show, len, &prefix, "{prefix:>28} [{bar:36}] {pos}/{len} {elapsed_precise} eta {eta}")
}

/// One benchmark ready to run.
struct Prepared<'s> {
    bench: &'s super::Benchmark,
    /// The checked plans, with how their `index` and `random` values are drawn.
    plans: Vec<(&'s Plan, Draws)>,
    repeat: u64,
}

/// Builds the suite's dataset in a temporary directory and measures every instruction.
pub fn run_suite(suite: &Suite, opts: &RunOptions) -> Result<SuiteRun, RunError> {
    opts.scale.validate().map_err(RunError::Options)?;
    if !(opts.repeat_scale.is_finite() && opts.repeat_scale > 0.0) {
        return Err(RunError::Options(format!(
            "the repeat scale must be a positive number, not {}",
            opts.repeat_scale
        )));
    }
    for name in &opts.only {
        if suite.benchmark(name).is_none() {
            let names: Vec<&str> = suite.benchmarks.iter().map(|b| b.name.as_str()).collect();
            return Err(RunError::Options(format!(
                "{} has no benchmark '{name}'; it has {}",
                suite.name,
                names.join(", ")
            )));
        }
    }
    let sizes = suite.collection_sizes();
    let fitted = super::fit_benchmarks(suite, opts.scale, opts.repeat_scale, &opts.only)
        .map_err(|e| RunError::Options(format!("{}: {e}", suite.name)))?;
    let notes: Vec<String> = fitted.iter().filter_map(|f| f.note.clone()).collect();
    let mut prepared: Vec<Prepared<'_>> = Vec::new();
    let chosen = suite.benchmarks.iter().filter(|b| opts.only.is_empty() || opts.only.contains(&b.name));
    for (bench, fit) in chosen.zip(&fitted) {
        let mut plans = Vec::with_capacity(bench.instructions.len());
        for i in &bench.instructions {
            let d = super::draws(&i.plan, &i.values, &suite.schema, &sizes, opts.scale)
                .map_err(|(_, m)| RunError::Options(format!("{}: {}: {m}", suite.name, i.name)))?;
            plans.push((&i.plan, d));
        }
        prepared.push(Prepared { bench, plans, repeat: fit.repeat });
    }

    let mut tmp = tempfile::Builder::new();
    tmp.prefix("espalier-bench-");
    let tmp = match &opts.dir {
        Some(d) => tmp.tempdir_in(d),
        None => tmp.tempdir(),
    }
    .map_err(io("making the temporary directory"))?;
    let _cleanup = crate::interrupt::on_interrupt(tmp.path().to_path_buf(), None);
    let db_dir = tmp.path().join("db");
    let db_options = DatabaseOptions { durability: opts.durability, ..DatabaseOptions::default() };

    let peak_reset = sys::reset_peak();
    let pb = bar(opts.progress, 0, format!("build {}", suite.name));
    let build = BuildOptions { seed: opts.seed, scale: opts.scale, batch: opts.batch };
    let (engine, dataset) = create_dataset(&db_dir, suite, db_options.clone(), &build, &pb)?;
    pb.finish_and_clear();
    let memory_build = sys::memory();
    let disk_bytes_built = engine.database().disk_size();
    let data_file = data_file(&db_dir);

    let cold_dir = tmp.path().join("cold");
    if opts.cold.is_some() {
        std::fs::create_dir_all(cold_dir.join("log")).map_err(io("making the cold copy's directory"))?;
        for file in Database::files(&db_dir) {
            let Ok(rel) = file.strip_prefix(&db_dir) else { continue };
            let copy = cold_dir.join(rel);
            sys::copy_sparse(&file, &copy).map_err(io("copying the database for the cold run"))?;
            // The copy is read cold later; out of the cache now, it leaves room for the hot run.
            sys::drop_from_cache(&copy).map_err(io("dropping the cold copy from the page cache"))?;
        }
    }

    // ---- hot ----
    sys::warm_file(&data_file).map_err(io("reading the data file into the page cache"))?;
    let hot_cached_start = sys::cached_fraction(&data_file);
    let faults_start = sys::page_faults();
    if peak_reset {
        sys::reset_peak();
    }
    let mut runs = Vec::new();
    let total: u64 = prepared.iter().map(|p| p.repeat * p.plans.len() as u64).sum();
    let pb = bar(opts.progress, total, format!("hot {}", suite.name));
    for p in &prepared {
        warm_up(&engine, p, opts)?;
        runs.extend(measure_hot(&engine, p, opts.seed, &pb));
    }
    pb.finish_and_clear();
    let memory_run = sys::memory();
    let hot_cached_end = sys::cached_fraction(&data_file);
    let faults_end = sys::page_faults();
    engine.database().sync().map_err(|e| RunError::Engine { context: "syncing".into(), reason: e.to_string() })?;
    let disk_bytes_after = engine.database().disk_size();
    drop(engine);

    // ---- cold ----
    let mut cold_method = None;
    if let Some(cold) = opts.cold {
        let total: u64 = prepared.iter().map(|p| p.repeat.min(cold.samples) * p.plans.len() as u64).sum();
        let pb = bar(opts.progress, total, format!("cold {}", suite.name));
        let mut engine =
            Some(Engine::open(&cold_dir, db_options.clone()).map_err(engine_err("opening the cold copy"))?);
        for p in &prepared {
            let (r, method) = measure_cold(&mut engine, &cold_dir, &db_options, p, opts.seed, cold.samples, &pb)?;
            runs.extend(r);
            if cold_method.is_none() {
                cold_method = method;
            }
        }
        pb.finish_and_clear();
    }
    Ok(SuiteRun {
        suite: suite.name.clone(),
        dataset,
        disk_bytes_built,
        disk_bytes_after,
        memory_build,
        memory_run,
        peak_reset,
        hot_cached: (hot_cached_start, hot_cached_end),
        hot_faults: (faults_end.0.saturating_sub(faults_start.0), faults_end.1.saturating_sub(faults_start.1)),
        cold_method,
        notes,
        runs,
    })
}

fn new_run(p: &Prepared<'_>, i: usize, mode: Mode, capacity: u64) -> InstructionRun {
    let instr = &p.bench.instructions[i];
    InstructionRun {
        benchmark: p.bench.name.clone(),
        name: instr.name.clone(),
        text: instr.text.clone(),
        mode,
        samples: Vec::with_capacity(capacity as usize),
        outcomes: BTreeMap::new(),
        expected: p.bench.expect.clone(),
        allowed: p.bench.allow.clone(),
        query_totals: (0, 0),
    }
}

fn seed_of(seed: u64, bench: &str) -> u64 {
    // Property 0 stands for no property: the stream is the benchmark's, not a collection's.
    mix(seed, PropertyId::new(0), name_hash(bench))
}

/// The generator behind `random` in benchmark `bench`'s timed runs with `seed`: each
/// repetition's instructions draw from it in order (`random N` and a key `random` take one
/// [`SplitMix::below`] each). Peers use it to replay the same choices.
pub fn benchmark_rng(seed: u64, bench: &str) -> SplitMix {
    SplitMix::new(seed_of(seed, bench))
}

fn warm_up(engine: &Engine, p: &Prepared<'_>, opts: &RunOptions) -> Result<(), RunError> {
    // A separate stream: the timed runs draw the same values with or without warm-up.
    let mut values = Values::new(SplitMix::new(seed_of(opts.seed, &p.bench.name) ^ 0x5741_524d));
    for i in 0..opts.warmup.min(p.repeat) {
        values.index = i;
        for (plan, draws) in &p.plans {
            values.fill(draws);
            // Outcomes do not matter here; mutations are rolled back, so the timed runs see
            // the data `initialize` made.
            let _ = engine.run_rolled_back(plan, &values.params);
        }
    }
    Ok(())
}

/// Records one sample's outcome.
fn record(run: &mut InstructionRun, elapsed: Duration, outcome: Result<Option<u64>, &'static str>) {
    run.samples.push(elapsed);
    let key = match outcome {
        Ok(total) => {
            if let Some(t) = total {
                run.query_totals.0 += t;
                run.query_totals.1 += 1;
            }
            "ok"
        }
        Err(code) => code,
    };
    *run.outcomes.entry(key.to_string()).or_insert(0) += 1;
}

/// Runs `plan` once, timed: the outcome is the query total (for queries) or the error code.
fn timed(
    engine: &Engine,
    plan: &Plan,
    params: &HashMap<String, ParamValue>,
) -> (Duration, Result<Option<u64>, &'static str>) {
    let start = Instant::now();
    let reply = engine.run(plan, params, None);
    let outcome = match &reply {
        Ok(Reply::Query(q)) => Ok(Some(q.total)),
        Ok(_) => Ok(None),
        Err(e) => Err(e.code()),
    };
    drop(reply);
    (start.elapsed(), outcome)
}

fn measure_hot(engine: &Engine, p: &Prepared<'_>, seed: u64, pb: &ProgressBar) -> Vec<InstructionRun> {
    let mut values = Values::new(benchmark_rng(seed, &p.bench.name));
    let mut runs: Vec<InstructionRun> = (0..p.plans.len()).map(|i| new_run(p, i, Mode::Hot, p.repeat)).collect();
    for i in 0..p.repeat {
        values.index = i;
        for ((plan, draws), run) in p.plans.iter().zip(runs.iter_mut()) {
            values.fill(draws);
            let (elapsed, outcome) = timed(engine, plan, &values.params);
            record(run, elapsed, outcome);
        }
        if i % 64 == 63 || i + 1 == p.repeat {
            pb.set_position(pb.position() + (i % 64 + 1) * p.plans.len() as u64);
        }
    }
    runs
}

#[allow(clippy::too_many_arguments)]
fn measure_cold(
    engine: &mut Option<Engine>,
    dir: &Path,
    db_options: &DatabaseOptions,
    p: &Prepared<'_>,
    seed: u64,
    samples: u64,
    pb: &ProgressBar,
) -> Result<(Vec<InstructionRun>, Option<(DropMethod, Option<f64>)>), RunError> {
    let n = p.repeat.min(samples);
    let mut values = Values::new(benchmark_rng(seed, &p.bench.name));
    let mut runs: Vec<InstructionRun> = (0..p.plans.len()).map(|i| new_run(p, i, Mode::Cold, n)).collect();
    let data_file = data_file(dir);
    let mut method = None;
    for i in 0..n {
        values.index = i;
        for ((plan, draws), run) in p.plans.iter().zip(runs.iter_mut()) {
            values.fill(draws);
            if let Some(e) = engine.take() {
                e.database()
                    .sync()
                    .map_err(|e| RunError::Engine { context: "syncing".into(), reason: e.to_string() })?;
                drop(e);
            }
            let dropped = sys::drop_from_cache(&data_file).map_err(io("dropping the data file from the page cache"))?;
            if method.is_none() {
                method = Some((dropped, sys::cached_fraction(&data_file)));
            }
            let e = Engine::open(dir, db_options.clone()).map_err(engine_err("reopening the database"))?;
            let (elapsed, outcome) = timed(&e, plan, &values.params);
            record(run, elapsed, outcome);
            *engine = Some(e);
            pb.inc(1);
        }
    }
    Ok((runs, method))
}

/// The file a database's data is read from when it opens: its checkpoint if it has one, else
/// its first log segment (recovery reads the checkpoint, then the log).
fn data_file(dir: &Path) -> PathBuf {
    let files = Database::files(dir);
    files.get(1).cloned().unwrap_or_else(|| dir.join("log"))
}
