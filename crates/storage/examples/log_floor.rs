//! The floor of a durable commit on this machine, and what the redo log (`log::LogWriter`)
//! adds to it. Prints Markdown tables of medians over three runs (each run's median, then the
//! median of the three; p99 likewise), since the machine is shared and noisy:
//!
//! 1. **floor**: `pwrite` of 100 bytes + `fdatasync`, at consecutive offsets, on a segment
//!    prepared three ways: pre-zeroed (64 MiB of zeros written and synced first), `fallocate`d
//!    (unwritten extents), and appending (the file grows with each write);
//! 2. **one client** through `LogWriter::append` in `sync` mode: one 150-byte record per batch,
//!    for each way of preparing segments, sampled alternately with the floor of the same
//!    preparation (so both see the same moments); the target is ≤ 1.3× the pre-zeroed floor;
//! 3. **group commit**: 1, 4, 16, 64 threads (and 64 on fallocate'd and appending segments) each submitting a 150-byte record and waiting for
//!    it to be durable, through a small leader/follower queue (the shape of
//!    `crates/transaction/src/group_commit.rs`: the first waiter leads a batch — one write, one
//!    `fdatasync` — wakes the batch's waiters and hands leadership to the next waiter);
//!    commits/s, mean batch size, latency;
//! 4. **recovery**: reading and verifying a 64 MiB and a 256 MiB log (100–400-byte records),
//!    from the page cache (warm) and after `posix_fadvise(DONTNEED)` dropped its pages (cold).
//!
//! `cargo run --release -p espalier-storage --example log_floor [-- --dir PATH ...]`
//!
//! By default it measures in a temporary directory under the workspace's `target/` (the
//! filesystem of the repository), and in `/tmp` too when that is another filesystem.

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use espalier_storage::log::{LogBatch, LogError, LogOptions, LogReader, LogWriter, Preparation};
use espalier_storage::Durability;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const RUNS: usize = 3;
/// Samples per latency measurement.
const SAMPLES: usize = 2000;
const SEGMENT: u64 = 64 << 20;
const GROUP_SECONDS: f64 = 2.0;
/// Group-commit points: clients and segment preparation. Every client count on pre-zeroed
/// segments; 64 clients on the others too, where each batch writes into fresh blocks.
const GROUPS: [(usize, Preparation); 6] = [
    (1, Preparation::PreZeroed),
    (4, Preparation::PreZeroed),
    (16, Preparation::PreZeroed),
    (64, Preparation::PreZeroed),
    (64, Preparation::Fallocate),
    (64, Preparation::Append),
];
const PREPARATIONS: [Preparation; 3] = [Preparation::PreZeroed, Preparation::Fallocate, Preparation::Append];

fn name(p: Preparation) -> &'static str {
    match p {
        Preparation::PreZeroed => "pre-zeroed",
        Preparation::Fallocate => "fallocate",
        Preparation::Append => "append",
    }
}

/// Median, 99th percentile and mean of samples, in µs.
#[derive(Clone, Copy, Default)]
struct Stats {
    median: f64,
    p99: f64,
    mean: f64,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let n = samples.len().max(1);
    Stats {
        median: samples.get(samples.len() / 2).map_or(0.0, |d| us(*d)),
        p99: samples.get((samples.len() * 99 / 100).min(samples.len().saturating_sub(1))).map_or(0.0, |d| us(*d)),
        mean: samples.iter().map(|d| us(*d)).sum::<f64>() / n as f64,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The file of a floor measurement, prepared `how`.
fn floor_file(path: &Path, how: Preparation) -> Res<std::fs::File> {
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
    match how {
        Preparation::PreZeroed => {
            let zeros = vec![0u8; 1 << 20];
            for i in 0..SEGMENT / (1 << 20) {
                file.write_all_at(&zeros, i << 20)?;
            }
        }
        Preparation::Fallocate => {
            // SAFETY: a plain syscall on a descriptor we own.
            if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, SEGMENT as libc::off_t) } != 0 {
                return Err(std::io::Error::last_os_error().into());
            }
        }
        Preparation::Append => {}
    }
    file.sync_all()?;
    Ok(file)
}

fn log_options(durability: Durability, how: Preparation) -> LogOptions {
    LogOptions { durability, segment_size: SEGMENT, preparation: how }
}

/// The floor and one client's durable commit, sampled alternately so that both see the same
/// moments of a noisy machine: `pwrite` of 100 bytes + `fdatasync` at consecutive 104-byte
/// steps (a record's 8-byte alignment) of a file prepared `how`, and `LogWriter::append` of
/// one 150-byte record in `sync` mode into a log whose segments are prepared `how`.
fn floor_and_one_client(dir: &Path, how: Preparation) -> Res<(Stats, Stats)> {
    let path = dir.join(format!("floor-{}", name(how)));
    let file = floor_file(&path, how)?;
    let db = dir.join(format!("one-{}", name(how)));
    let mut writer = LogWriter::open(&db, log_options(Durability::Sync, how), 1)?;
    let record = [0x5au8; 100];
    let payload = [0x33u8; 150];
    let mut batch = LogBatch::new();
    let (mut floor, mut log) = (Vec::with_capacity(SAMPLES), Vec::with_capacity(SAMPLES));
    // The first appends wait for the first segment to be prepared: not timed.
    for i in 0..SAMPLES + 20 {
        let t = Instant::now();
        file.write_all_at(&record, i as u64 * 104)?;
        file.sync_data()?;
        let floor_sample = t.elapsed();
        batch.clear();
        batch.push(writer.next_version(), &payload)?;
        let t = Instant::now();
        writer.append(&mut batch)?;
        let log_sample = t.elapsed();
        if i >= 20 {
            floor.push(floor_sample);
            log.push(log_sample);
        }
    }
    drop((file, writer));
    std::fs::remove_file(&path)?;
    std::fs::remove_dir_all(&db)?;
    Ok((stats(floor), stats(log)))
}

/// A request waiting in the group-commit queue.
struct Request {
    payload: Vec<u8>,
    tx: SyncSender<Signal>,
}

enum Signal {
    Done(Result<u64, String>),
    Lead,
}

#[derive(Default)]
struct QueueState {
    pending: VecDeque<Request>,
    leading: bool,
}

/// The example's group commit: leader/follower as in `transaction::group_commit`.
struct GroupCommit {
    state: Mutex<QueueState>,
    log: Mutex<(LogWriter, LogBatch)>,
    batches: AtomicU64,
    commits: AtomicU64,
}

/// Most requests in one batch (the engine's default `max_batch`).
const MAX_BATCH: usize = 256;

impl GroupCommit {
    /// Queues `payload` and returns its version once it is durable, leading batches when
    /// asked to.
    fn submit(&self, payload: Vec<u8>) -> Result<u64, String> {
        let (tx, rx) = sync_channel(1);
        let lead_now = {
            let mut s = self.state.lock().map_err(|e| e.to_string())?;
            s.pending.push_back(Request { payload, tx });
            !std::mem::replace(&mut s.leading, true)
        };
        if lead_now {
            self.lead();
        }
        loop {
            match rx.recv() {
                Ok(Signal::Done(result)) => return result,
                Ok(Signal::Lead) => self.lead(),
                Err(_) => return Err("request dropped".into()),
            }
        }
    }

    /// One batch: one write and one `fdatasync` for every request queued; then wakes them and
    /// hands leadership to the next waiter, or gives it up.
    fn lead(&self) {
        let requests: Vec<Request> = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let n = s.pending.len().min(MAX_BATCH);
            s.pending.drain(..n).collect()
        };
        if !requests.is_empty() {
            let outcome = {
                let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
                let (writer, batch) = &mut *log;
                batch.clear();
                let first = writer.next_version();
                let pushed: Result<(), LogError> =
                    requests.iter().enumerate().try_for_each(|(i, r)| batch.push(first + i as u64, &r.payload));
                pushed.and_then(|()| writer.append(batch)).map(|a| a.first_version).map_err(|e| e.to_string())
            };
            self.batches.fetch_add(1, Ordering::Relaxed);
            self.commits.fetch_add(requests.len() as u64, Ordering::Relaxed);
            for (i, r) in requests.into_iter().enumerate() {
                let _ = r.tx.send(Signal::Done(outcome.clone().map(|first| first + i as u64)));
            }
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match s.pending.front() {
            None => s.leading = false,
            // A waiter's channel is empty while it waits: the hand-over always fits.
            Some(next) => {
                let _ = next.tx.try_send(Signal::Lead);
            }
        }
    }
}

/// Group commit with `threads` clients for `GROUP_SECONDS`, segments prepared `how`:
/// (commits/s, mean batch, latency).
fn group(dir: &Path, threads: usize, how: Preparation) -> Res<(f64, f64, Stats)> {
    let db = dir.join(format!("group-{threads}-{}", name(how)));
    let writer = LogWriter::open(&db, log_options(Durability::Sync, how), 1)?;
    let gc = Arc::new(GroupCommit {
        state: Mutex::new(QueueState::default()),
        log: Mutex::new((writer, LogBatch::new())),
        batches: AtomicU64::new(0),
        commits: AtomicU64::new(0),
    });
    // Warm up: the first segment is prepared before the clock starts.
    gc.submit(vec![0; 150])?;
    gc.batches.store(0, Ordering::Relaxed);
    gc.commits.store(0, Ordering::Relaxed);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(GROUP_SECONDS);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let gc = gc.clone();
            std::thread::spawn(move || -> Result<Vec<Duration>, String> {
                let mut samples = Vec::new();
                while Instant::now() < deadline {
                    let t0 = Instant::now();
                    gc.submit(vec![t as u8; 150])?;
                    samples.push(t0.elapsed());
                }
                Ok(samples)
            })
        })
        .collect();
    let mut samples = Vec::new();
    for h in handles {
        samples.extend(h.join().map_err(|_| "client thread panicked")??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let commits = gc.commits.load(Ordering::Relaxed) as f64;
    let batches = gc.batches.load(Ordering::Relaxed).max(1) as f64;
    drop(gc);
    std::fs::remove_dir_all(&db)?;
    Ok((commits / elapsed, commits / batches, stats(samples)))
}

/// Writes a log of about `mib` MiB of 100–400-byte records (`none` mode, then one sync).
fn build_log(db: &Path, mib: u64) -> Res<u64> {
    let mut writer = LogWriter::open(db, log_options(Durability::None, Preparation::PreZeroed), 1)?;
    let mut batch = LogBatch::new();
    let payload: Vec<u8> = (0..400u32).map(|i| (i * 7) as u8).collect();
    let mut bytes = 0u64;
    let mut n = 0u64;
    while bytes < mib << 20 {
        batch.clear();
        for _ in 0..64 {
            let len = 100 + (n * 37 % 301) as usize;
            batch.push(writer.next_version() + batch.len() as u64, &payload[..len])?;
            n += 1;
        }
        bytes += batch.encoded_len() as u64;
        writer.append(&mut batch)?;
    }
    writer.close()?;
    Ok(bytes)
}

/// Drops the log's pages from the page cache (they are clean: the log was synced).
fn evict(db: &Path) -> Res<()> {
    for entry in std::fs::read_dir(db.join("log"))? {
        let file = std::fs::File::open(entry?.path())?;
        // SAFETY: a plain syscall on a descriptor we own.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    Ok(())
}

/// Reads and verifies the whole log: (MB/s of verified bytes, records).
fn replay(db: &Path) -> Res<(f64, u64)> {
    let t = Instant::now();
    let mut reader = LogReader::open(db, 0)?;
    let mut sum = 0u64;
    while let Some(r) = reader.next_record()? {
        sum = sum.wrapping_add(r.payload.len() as u64 ^ r.version);
    }
    let end = reader.end()?;
    let secs = t.elapsed().as_secs_f64();
    std::hint::black_box(sum);
    if end.tail != espalier_storage::log::Tail::Clean {
        return Err(format!("replay ended {:?}", end.tail).into());
    }
    Ok((end.bytes as f64 / 1e6 / secs, end.records))
}

/// The results of one run.
#[derive(Default)]
struct Run {
    floors: Vec<Stats>,
    one: Vec<Stats>,
    /// One per entry of `GROUPS`.
    group: Vec<(f64, f64, Stats)>,
    /// (size MiB, warm MB/s, cold MB/s, records)
    replay: Vec<(u64, f64, f64, u64)>,
}

fn run_once(dir: &Path, logs: &[(u64, PathBuf)]) -> Res<Run> {
    let mut run = Run::default();
    for how in PREPARATIONS {
        let (floor, one) = floor_and_one_client(dir, how)?;
        run.floors.push(floor);
        run.one.push(one);
    }
    for (threads, how) in GROUPS {
        run.group.push(group(dir, threads, how)?);
    }
    for (mib, db) in logs {
        let (warm, records) = replay(db)?;
        evict(db)?;
        let (cold, _) = replay(db)?;
        run.replay.push((*mib, warm, cold, records));
    }
    Ok(run)
}

fn runs_of(runs: &[Run], f: impl Fn(&Run) -> f64) -> (f64, String) {
    let v: Vec<f64> = runs.iter().map(f).collect();
    let shown: Vec<String> = v.iter().map(|x| format!("{x:.0}")).collect();
    (median(v), shown.join(" / "))
}

fn report(dir: &Path, runs: &[Run]) {
    println!("\n### `{}`\n", dir.display());
    println!("| durable write | median µs | p99 µs | mean µs | medians of the {RUNS} runs (µs) |");
    println!("|---|---:|---:|---:|---|");
    for (i, how) in PREPARATIONS.iter().enumerate() {
        let (m, shown) = runs_of(runs, |r| r.floors[i].median);
        let (p99, _) = runs_of(runs, |r| r.floors[i].p99);
        let (mean, _) = runs_of(runs, |r| r.floors[i].mean);
        println!("| floor: pwrite 100 B + fdatasync, {} | {m:.1} | {p99:.1} | {mean:.1} | {shown} |", name(*how));
    }
    for (i, how) in PREPARATIONS.iter().enumerate() {
        let (m, shown) = runs_of(runs, |r| r.one[i].median);
        let (p99, _) = runs_of(runs, |r| r.one[i].p99);
        let (mean, _) = runs_of(runs, |r| r.one[i].mean);
        println!(
            "| LogWriter::append, 1 client, 150 B record, sync, {} | {m:.1} | {p99:.1} | {mean:.1} | {shown} |",
            name(*how)
        );
    }
    let ratio = median(runs.iter().map(|r| r.one[0].median / r.floors[0].median).collect());
    println!(
        "\nOne client through the log (pre-zeroed) ÷ the pre-zeroed floor, median of the per-run ratios \
         of medians sampled alternately: **{ratio:.2}×** (target ≤ 1.3×)"
    );

    println!("\n| group commit (sync, 150 B records) | commits/s | mean batch | median µs | p99 µs | commits/s of the {RUNS} runs |");
    println!("|---|---:|---:|---:|---:|---|");
    for (i, (threads, how)) in GROUPS.iter().enumerate() {
        let (rate, shown) = runs_of(runs, |r| r.group[i].0);
        let batch = median(runs.iter().map(|r| r.group[i].1).collect());
        let m = median(runs.iter().map(|r| r.group[i].2.median).collect());
        let p99 = median(runs.iter().map(|r| r.group[i].2.p99).collect());
        println!("| {threads} threads, {} | {rate:.0} | {batch:.1} | {m:.0} | {p99:.0} | {shown} |", name(*how));
    }

    println!("\n| recovery: read + verify | records | warm MB/s | cold MB/s | warm MB/s of the {RUNS} runs |");
    println!("|---|---:|---:|---:|---|");
    for i in 0..runs.first().map_or(0, |r| r.replay.len()) {
        let (mib, _, _, records) = runs[0].replay[i];
        let (warm, shown) = runs_of(runs, |r| r.replay[i].1);
        let cold = median(runs.iter().map(|r| r.replay[i].2).collect());
        println!("| {mib} MiB log | {records} | {warm:.0} | {cold:.0} | {shown} |");
    }
}

fn measure(base: &Path) -> Res<()> {
    let dir = tempfile::Builder::new().prefix("log_floor").tempdir_in(base)?;
    eprintln!("measuring in {}", dir.path().display());
    let mut logs = Vec::new();
    for mib in [64u64, 256] {
        let db = dir.path().join(format!("replay-{mib}"));
        build_log(&db, mib)?;
        logs.push((mib, db));
    }
    let mut runs = Vec::new();
    for i in 0..RUNS {
        eprintln!("run {} of {RUNS}", i + 1);
        runs.push(run_once(dir.path(), &logs)?);
    }
    report(dir.path(), &runs);
    Ok(())
}

fn device(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.dev())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut dirs: Vec<PathBuf> = args.windows(2).filter(|w| w[0] == "--dir").map(|w| PathBuf::from(&w[1])).collect();
    if dirs.is_empty() {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
        std::fs::create_dir_all(&target)?;
        let target = target.canonicalize()?;
        let tmp = std::env::temp_dir();
        dirs.push(target.clone());
        if device(&tmp) != device(&target) {
            dirs.push(tmp);
        } else {
            println!(
                "`{}` is on the same filesystem as `{}` (same device): measured once.",
                tmp.display(),
                target.display()
            );
        }
    }
    println!("Medians over {RUNS} runs; {SAMPLES} samples per latency, {GROUP_SECONDS} s per group-commit point.");
    for dir in dirs {
        measure(&dir)?;
    }
    Ok(())
}
