//! The soak and crash test of a whole `espalier serve` process (`scripts/soak`, docs/soak.md).
//!
//! Phase 1, **soak**: `--clients` WebSocket sessions for `--seconds`, each in a closed loop of
//! durable increments of its own counter, inserts into its own dictionary and reads of what it
//! wrote; at the end every counter and dictionary must equal what the client was
//! acknowledged, then the server is stopped with SIGTERM and `espalier check` runs.
//!
//! Phase 2, **crash**: `--kills` rounds on the same database. Each round restarts the server,
//! verifies every acknowledged write of the rounds before, lets the clients write again and
//! signals the server at a random (seeded) moment: mostly SIGKILL with `--durability sync`,
//! every fifth round SIGKILL with `--durability none` (a process kill keeps the page cache,
//! so nothing acknowledged may be lost either), every tenth SIGTERM, and about every third a
//! SIGKILL aimed at a batch of `--batch-rows` entries written by one transaction (all or
//! nothing).
//! `espalier check` runs on the directory after every signal, with the server down.
//!
//! Usage: `soak --bin ESPALIER --dir WORK [--pidfile F] [--clients N] [--seconds S]
//! [--kills K] [--seed N] [--batch-rows N] [--kill-min-ms MS] [--kill-max-ms MS]`.
//! Exit status 0 when nothing was lost or wrong, no request failed unexpectedly and every
//! check passed; 1 otherwise; 2 for bad arguments.

mod model;
mod report;
mod server;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use espalier_client::protocol::{Compression, Encoding};
use espalier_client::{Client, ClientOptions};

use model::{Batches, Model, Rng, Stats, Stop};
use server::{Env, Server};

/// Why the soak could not go on (the report still prints what it counted).
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Process(String),
    #[error("cannot connect to the server: {0}")]
    Connect(String),
    #[error("verification could not read the server: {0}")]
    Verify(String),
}

/// Bounds on the options, so a typo cannot start a run that never ends.
const MAX_CLIENTS: usize = 1000;
const MAX_SECONDS: f64 = 86_400.0;
const MAX_KILLS: usize = 100_000;
const MAX_BATCH_ROWS: usize = 100_000;
/// How long a round's clients may take to notice the signal.
const JOIN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a batch round waits for a batch to be in flight before it signals anyway.
const BATCH_WAIT: Duration = Duration::from_secs(60);
/// Lines of the servers' log shown when the run stops early.
const LOG_LINES: usize = 30;

#[derive(Debug, Clone)]
struct Options {
    bin: PathBuf,
    dir: PathBuf,
    pidfile: Option<PathBuf>,
    clients: usize,
    seconds: f64,
    kills: usize,
    seed: u64,
    batch_rows: usize,
    kill_min_ms: u64,
    kill_max_ms: u64,
}

fn parse_args() -> Result<Options, SoakError> {
    let mut o = Options {
        bin: PathBuf::new(),
        dir: PathBuf::new(),
        pidfile: None,
        clients: 64,
        seconds: 60.0,
        kills: 20,
        seed: 1,
        batch_rows: 5000,
        kill_min_ms: 100,
        kill_max_ms: 1500,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| SoakError::Usage(format!("{flag} needs a value")));
        fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, SoakError> {
            v.parse().map_err(|_| SoakError::Usage(format!("{flag} {v:?}: not a number")))
        }
        match flag.as_str() {
            "--bin" => o.bin = value()?.into(),
            "--dir" => o.dir = value()?.into(),
            "--pidfile" => o.pidfile = Some(value()?.into()),
            "--clients" => o.clients = num(&flag, value()?)?,
            "--seconds" => o.seconds = num(&flag, value()?)?,
            "--kills" => o.kills = num(&flag, value()?)?,
            "--seed" => o.seed = num(&flag, value()?)?,
            "--batch-rows" => o.batch_rows = num(&flag, value()?)?,
            "--kill-min-ms" => o.kill_min_ms = num(&flag, value()?)?,
            "--kill-max-ms" => o.kill_max_ms = num(&flag, value()?)?,
            other => return Err(SoakError::Usage(format!("unknown argument {other:?} (scripts/soak --help)"))),
        }
    }
    if o.bin.as_os_str().is_empty() || o.dir.as_os_str().is_empty() {
        return Err(SoakError::Usage("--bin and --dir are required (scripts/soak builds and passes them)".into()));
    }
    if !(1..=MAX_CLIENTS).contains(&o.clients) {
        return Err(SoakError::Usage(format!("--clients must be 1 to {MAX_CLIENTS}")));
    }
    if !(0.0..=MAX_SECONDS).contains(&o.seconds) {
        return Err(SoakError::Usage(format!("--seconds must be 0 to {MAX_SECONDS}")));
    }
    if o.kills > MAX_KILLS || !(1..=MAX_BATCH_ROWS).contains(&o.batch_rows) {
        return Err(SoakError::Usage(format!(
            "--kills must be at most {MAX_KILLS}, --batch-rows 1 to {MAX_BATCH_ROWS}"
        )));
    }
    if o.kill_min_ms > o.kill_max_ms || o.kill_max_ms > 3_600_000 {
        return Err(SoakError::Usage("--kill-min-ms must not exceed --kill-max-ms (at most an hour)".into()));
    }
    Ok(o)
}

fn main() -> ExitCode {
    let options = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("soak: starting the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let mut soak = report::Soak { clients: options.clients, ..Default::default() };
    let mut crash = report::Crash { clients: options.clients, batch_rows: options.batch_rows, ..Default::default() };
    let outcome = runtime.block_on(run(&options, &mut soak, &mut crash));
    let error = outcome.as_ref().err().map(|e| e.to_string());
    if let Some(e) = &error {
        let log = options.dir.join("server.log");
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = tail.lines().rev().take(LOG_LINES).collect();
        eprintln!("soak: {e}");
        eprintln!("soak: the servers' log ({}) ends:", log.display());
        for line in tail.iter().rev() {
            eprintln!("  {line}");
        }
    }
    let reasons = report::print(&soak, &crash, error.as_deref());
    if reasons.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Runs a blocking process call (start, signal, wait, check) without stalling the clients'
/// runtime.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

async fn run(o: &Options, soak: &mut report::Soak, crash: &mut report::Crash) -> Result<(), SoakError> {
    std::fs::create_dir_all(&o.dir).map_err(|e| SoakError::Process(format!("creating {}: {e}", o.dir.display())))?;
    let env = Env {
        bin: o.bin.clone(),
        work: o.dir.clone(),
        db: o.dir.join("db"),
        log: o.dir.join("server.log"),
        pidfile: o.pidfile.clone(),
    };
    let schema = o.dir.join("soak.alan");
    std::fs::write(&schema, model::SCHEMA).map_err(|e| SoakError::Process(format!("writing the schema: {e}")))?;
    blocking(|| env.init(&schema))?;
    eprintln!("soak: database {}, server log {}", env.db.display(), env.log.display());

    let mut models: Vec<Model> = (0..o.clients).map(|i| Model::new(i, o.seed)).collect();
    let mut server = blocking(|| Server::start(&env, "sync"))?;
    let admin = connect(&server.addr, ClientOptions::default()).await?;
    admin
        .execute(&model::create_clients(&models), None)
        .await
        .map_err(|e| SoakError::Process(format!("creating the clients' entries: {e}")))?;
    drop(admin);

    if o.seconds > 0.0 {
        models = soak_phase(o, &server, models, soak).await?;
    }
    if let Some(status) = server.exited() {
        return Err(SoakError::Process(format!("the server exited by itself during the soak ({status})")));
    }
    let status = blocking(|| server.terminate())?;
    if !status.success() {
        soak.stats.fail(format!("the server exited with {status} after SIGTERM"));
    }
    let check = blocking(|| env.check())?;
    soak.check_ok = Some(check.is_none());
    if let Some(out) = check {
        eprintln!("soak: espalier check after the soak:\n{out}");
    }

    if o.kills > 0 {
        crash_phase(o, &env, models, crash).await?;
    }
    Ok(())
}

/// Session options by client number: both encodings, with and without compression (of every
/// message: the soak's messages are all below the default threshold).
fn options_for(i: usize) -> ClientOptions {
    let o = ClientOptions::default();
    match i % 4 {
        0 => o.encoding(Encoding::Msgpack),
        1 => o.encoding(Encoding::Json),
        2 => o.encoding(Encoding::Msgpack).compression(Compression::Zstd).compress_min(0),
        _ => o.encoding(Encoding::Json).compression(Compression::Deflate).compress_min(0),
    }
}

async fn connect(addr: &str, opts: ClientOptions) -> Result<Client, SoakError> {
    Client::connect(&format!("ws://{addr}"), opts).await.map_err(|e| SoakError::Connect(e.to_string()))
}

/// One session per client, opened before any of them starts.
async fn connect_all(addr: &str, n: usize) -> Result<Vec<Client>, SoakError> {
    let mut clients = Vec::with_capacity(n);
    for i in 0..n {
        clients.push(connect(addr, options_for(i)).await?);
    }
    Ok(clients)
}

/// Waits for the clients' loops; one that hangs past `JOIN_TIMEOUT` is a failure.
async fn join(tasks: Vec<tokio::task::JoinHandle<Model>>, stats: &Stats) -> Result<Vec<Model>, SoakError> {
    let mut models = Vec::with_capacity(tasks.len());
    for (i, task) in tasks.into_iter().enumerate() {
        match tokio::time::timeout(JOIN_TIMEOUT, task).await {
            Ok(Ok(m)) => models.push(m),
            Ok(Err(e)) => return Err(SoakError::Process(format!("client c{i} panicked: {e}"))),
            Err(_) => {
                stats.fail(format!("c{i}: still waiting for a reply {JOIN_TIMEOUT:?} after the end"));
                return Err(SoakError::Process(format!("client c{i} hangs")));
            }
        }
    }
    Ok(models)
}

async fn soak_phase(
    o: &Options,
    server: &Server,
    models: Vec<Model>,
    soak: &mut report::Soak,
) -> Result<Vec<Model>, SoakError> {
    let clients = connect_all(&server.addr, o.clients).await?;
    let stats = Arc::new(Stats::default());
    let started = Instant::now();
    let stop = Arc::new(Stop::at(started + Duration::from_secs_f64(o.seconds)));
    let tasks: Vec<_> = clients
        .into_iter()
        .zip(models)
        .map(|(c, m)| tokio::spawn(model::work(c, m, stop.clone(), stats.clone())))
        .collect();
    eprintln!("soak: {} clients for {} s against {}", o.clients, o.seconds, server.addr);
    // RSS every second, a progress line every tenth of the run (at least every 10 s).
    let report_every = (o.seconds / 10.0).max(10.0) as u64;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut second = 0u64;
    while Instant::now() < stop.deadline.unwrap_or(started) {
        tick.tick().await;
        if let Some(kib) = server.rss_kib() {
            soak.rss.push(kib);
        }
        second += 1;
        if second.is_multiple_of(report_every) {
            eprintln!(
                "soak: {second} s, {} requests, {} failed, {} wrong, RSS {} MiB",
                Stats::get(&stats.ops),
                Stats::get(&stats.failed),
                Stats::get(&stats.wrong),
                soak.rss.last().map_or(0, |k| k / 1024)
            );
        }
    }
    let models = join(tasks, &stats).await;
    soak.elapsed = started.elapsed();
    let mut models = models?;
    let verifier = connect(&server.addr, ClientOptions::default()).await?;
    let verified = model::verify_clients(&verifier, &mut models, &stats).await;
    soak.stats = Arc::try_unwrap(stats).unwrap_or_else(|s| copy(&s));
    verified?;
    Ok(models)
}

/// The counters of `s` (when a task still holds it; it cannot, after `join`).
fn copy(s: &Stats) -> Stats {
    let c = Stats::default();
    for (to, from) in [
        (&c.ops, &s.ops),
        (&c.writes, &s.writes),
        (&c.failed, &s.failed),
        (&c.wrong, &s.wrong),
        (&c.lost, &s.lost),
        (&c.cut, &s.cut),
        (&c.pending_present, &s.pending_present),
        (&c.pending_absent, &s.pending_absent),
    ] {
        to.store(Stats::get(from), Ordering::Relaxed);
    }
    c
}

/// How a round ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    KillSync,
    KillNone,
    Term,
    /// SIGKILL (sync) aimed at a batch transaction in flight.
    KillBatch,
}

/// The round's signal. The pattern puts every kind into the first five rounds (CI's run):
/// sync, sync, batch, SIGTERM, none.
fn kind_of(round: usize) -> Kind {
    if round % 10 == 3 {
        Kind::Term
    } else if round % 5 == 4 {
        Kind::KillNone
    } else if round % 3 == 2 {
        Kind::KillBatch
    } else {
        Kind::KillSync
    }
}

/// A batch writer's progress, read by the round's signaller.
#[derive(Default)]
struct BatchRun {
    in_flight: AtomicBool,
    /// How long the last acknowledged batch took, in ms (0: none yet).
    last_ms: AtomicU64,
    acked: Mutex<Vec<String>>,
    pending: Mutex<Option<String>>,
}

async fn write_batches(
    client: Client,
    round: usize,
    rows: usize,
    run: Arc<BatchRun>,
    stop: Arc<Stop>,
    stats: Arc<Stats>,
) {
    for j in 0.. {
        let name = format!("r{round}b{j}");
        let text = model::batch(&name, rows);
        *run.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(name.clone());
        run.in_flight.store(true, Ordering::SeqCst);
        let started = Instant::now();
        let result = client.execute(&text, None).await;
        run.in_flight.store(false, Ordering::SeqCst);
        match result {
            Ok(reply) if model::is_done(&reply) => {
                run.last_ms.store(started.elapsed().as_millis().max(1) as u64, Ordering::SeqCst);
                run.acked.lock().unwrap_or_else(|e| e.into_inner()).push(name);
                *run.pending.lock().unwrap_or_else(|e| e.into_inner()) = None;
                stats.writes.fetch_add(1, Ordering::Relaxed);
                stats.ops.fetch_add(1, Ordering::Relaxed);
            }
            Ok(other) => {
                stats.wrong(format!("batch {name}: reply {other:?}"));
                return;
            }
            Err(e) => {
                if model::refused(&e) {
                    *run.pending.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
                if stop.signalled() && model::expected_after_signal(&e) {
                    stats.cut.fetch_add(1, Ordering::Relaxed);
                } else {
                    stats.fail(format!("batch {name}: {e}"));
                }
                return;
            }
        }
    }
}

async fn crash_phase(
    o: &Options,
    env: &Env,
    mut models: Vec<Model>,
    crash: &mut report::Crash,
) -> Result<(), SoakError> {
    let stats = Arc::new(Stats::default());
    let started = Instant::now();
    let mut rng = Rng::new(o.seed ^ 0xc4a5_4000);
    let mut batches = Batches::default();
    let result = async {
        // One more start than rounds: the last restart verifies the last round.
        for round in 0..=o.kills {
            let kind = kind_of(round);
            let durability = if kind == Kind::KillNone { "none" } else { "sync" };
            let mut server = blocking(|| Server::start(env, durability))?;
            let verifier = connect(&server.addr, ClientOptions::default()).await?;
            model::verify_clients(&verifier, &mut models, &stats).await?;
            model::verify_batches(&verifier, &mut batches, o.batch_rows, &stats).await?;
            drop(verifier);
            if let Some(kib) = server.rss_kib() {
                crash.rss_after_restart.push(kib);
            }
            if round == o.kills {
                let status = blocking(|| server.terminate())?;
                if !status.success() {
                    stats.fail(format!("the server exited with {status} after the final SIGTERM"));
                }
                break;
            }
            let clients = connect_all(&server.addr, o.clients).await?;
            let writing = Instant::now();
            let stop = Arc::new(Stop::default());
            let tasks: Vec<_> = clients
                .into_iter()
                .zip(models.drain(..))
                .map(|(c, m)| tokio::spawn(model::work(c, m, stop.clone(), stats.clone())))
                .collect();
            let run = Arc::new(BatchRun::default());
            let writer = if kind == Kind::KillBatch {
                let c = connect(&server.addr, ClientOptions::default()).await?;
                Some(tokio::spawn(write_batches(c, round, o.batch_rows, run.clone(), stop.clone(), stats.clone())))
            } else {
                None
            };
            if kind == Kind::KillBatch {
                // Wait for one batch to finish (how long they take), then for the next to be
                // in flight, and signal within the first three quarters of its expected time.
                let waited = Instant::now();
                while (run.last_ms.load(Ordering::SeqCst) == 0 || !run.in_flight.load(Ordering::SeqCst))
                    && waited.elapsed() < BATCH_WAIT
                    && !writer.as_ref().is_some_and(|w| w.is_finished())
                {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let last = run.last_ms.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(rng.range(0, last * 3 / 4))).await;
            } else {
                tokio::time::sleep(Duration::from_millis(rng.range(o.kill_min_ms, o.kill_max_ms))).await;
            }
            if let Some(status) = server.exited() {
                stats.fail(format!("round {round}: the server exited by itself ({status}) before the signal"));
                return Err(SoakError::Process(format!("round {round}: the server exited by itself ({status})")));
            }
            stop.signal();
            crash.writing += writing.elapsed();
            let batch_in_flight = run.in_flight.load(Ordering::SeqCst);
            match kind {
                Kind::Term => {
                    crash.sigterm += 1;
                    // The clients go on being answered while the server drains (they run on the
                    // runtime's workers, not on this thread).
                    let status = blocking(|| server.terminate())?;
                    if !status.success() {
                        stats.fail(format!("round {round}: the server exited with {status} after SIGTERM"));
                    }
                }
                Kind::KillSync | Kind::KillNone | Kind::KillBatch => {
                    match kind {
                        Kind::KillNone => crash.sigkill_none += 1,
                        Kind::KillBatch => {
                            crash.sigkill_sync += 1;
                            crash.batch_rounds += 1;
                            crash.during_batch += usize::from(batch_in_flight);
                        }
                        _ => crash.sigkill_sync += 1,
                    }
                    blocking(|| server.kill())?;
                }
            }
            models = join(tasks, &stats).await?;
            if let Some(w) = writer {
                tokio::time::timeout(JOIN_TIMEOUT, w)
                    .await
                    .map_err(|_| SoakError::Process("the batch writer hangs".into()))?
                    .map_err(|e| SoakError::Process(format!("the batch writer panicked: {e}")))?;
            }
            let acked = std::mem::take(&mut *run.acked.lock().unwrap_or_else(|e| e.into_inner()));
            crash.batches_acked += acked.len() as u64;
            batches.acked.extend(acked);
            batches.pending = run.pending.lock().unwrap_or_else(|e| e.into_inner()).take();
            crash.rounds += 1;
            match blocking(|| env.check())? {
                None => crash.checks_ok += 1,
                Some(out) => {
                    crash.checks_failed += 1;
                    eprintln!("soak: round {round}: espalier check found problems:\n{out}");
                }
            }
            if (round + 1) % 10 == 0 || round + 1 == o.kills {
                eprintln!(
                    "crash: {} rounds, {} writes acknowledged, {} lost, {} wrong, {} failed, {} checks failed",
                    round + 1,
                    Stats::get(&stats.writes),
                    Stats::get(&stats.lost),
                    Stats::get(&stats.wrong),
                    Stats::get(&stats.failed),
                    crash.checks_failed
                );
            }
        }
        Ok::<(), SoakError>(())
    }
    .await;
    crash.elapsed = started.elapsed();
    crash.stats = Arc::try_unwrap(stats).unwrap_or_else(|s| copy(&s));
    result
}
