//! Crash safety: a child process appends entries from several threads (so group commit batches
//! form) and prints each acknowledged commit; the test kills it with SIGKILL at a random moment,
//! reopens the database and checks that nothing acknowledged was lost and that the database is
//! consistent. Rounds: `ESPALIER_CRASH_ROUNDS` (default 30) with durability Sync, and a few with
//! durability None (a process kill keeps the OS page cache, so nothing acknowledged may be
//! lost either). Deterministic timings from a fixed seed (`ESPALIER_CRASH_SEED` overrides).

use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use espalier_instruction::{Engine, Reply};
use espalier_transaction::{DatabaseOptions, Durability, NodeRef};
use rand::{Rng, SeedableRng};

/// Must match the child's schema (`src/bin/espalier-crash-child.rs`).
/// Held while this process has a database open (`verify`, the initial create) and while it
/// forks a child. The two tests run on two threads of one process: a fork copies every open
/// descriptor, the database lock's too, until the child's `exec` closes it (`O_CLOEXEC`), so a
/// fork on one thread while the other has its database open would keep that database locked
/// for a moment after it closes, and the next child there would be refused. `spawn` returns
/// after the `exec`, so holding this around both is enough.
static OPEN_OR_FORK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn open_or_fork() -> std::sync::MutexGuard<'static, ()> {
    OPEN_OR_FORK.lock().unwrap_or_else(|e| e.into_inner())
}

const SCHEMA: &str = "root ( 'Log' -> dictionary ( 'n' -> number ) 'Count' -> number )";

fn rounds() -> usize {
    std::env::var("ESPALIER_CRASH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(30)
}

fn seed() -> u64 {
    std::env::var("ESPALIER_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0xc4a5_0001)
}

/// Runs the child for `ms` milliseconds, kills it, and returns the keys it acknowledged.
fn run_child(dir: &Path, mode: &str, ms: u64) -> BTreeSet<u64> {
    let mut child = {
        let _forking = open_or_fork();
        Command::new(env!("CARGO_BIN_EXE_espalier-crash-child"))
            .arg(dir)
            .arg(mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn espalier-crash-child")
    };
    std::thread::sleep(Duration::from_millis(ms));
    let early = child.try_wait().expect("try_wait");
    // SIGKILL on Unix: no destructors, no flushes beyond what the child already did.
    child.kill().expect("kill");
    let status = child.wait().expect("wait");
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(early.is_none(), "the child exited by itself ({status:?}) before the kill: {err}");
    assert!(err.is_empty(), "the child reported an error: {err}");
    // A line cut short by the kill is not an acknowledgement; every complete line is.
    let complete = match out.rfind('\n') {
        Some(end) => &out[..end],
        None => "",
    };
    complete.lines().map(|l| l.parse().unwrap_or_else(|_| panic!("bad line {l:?} from the child"))).collect()
}

/// Reopens the database and checks it against everything acknowledged so far. Returns the keys
/// present.
fn verify(dir: &Path, acknowledged: &BTreeSet<u64>, round: usize) -> BTreeSet<u64> {
    let options = DatabaseOptions { durability: Durability::None, log_segment_size: 1 << 20, ..Default::default() };
    let e = Engine::open(dir, options).unwrap_or_else(|err| panic!("round {round}: reopening failed: {err}"));
    let none = HashMap::new();
    let q = match e.execute_text("collection select . 'Log' 'n' -> number : 'n'", &none) {
        Ok(Reply::Query(q)) => q,
        other => panic!("round {round}: query failed: {other:?}"),
    };
    let mut present = BTreeSet::new();
    for row in &q.rows {
        let k: u64 = row.key[0].parse().unwrap_or_else(|_| panic!("round {round}: stray key {:?}", row.key));
        assert_eq!(row.values, [serde_json::json!(k)], "round {round}: entry {k} holds the wrong number");
        assert!(present.insert(k), "round {round}: key {k} listed twice");
    }
    assert_eq!(q.total as usize, present.len(), "round {round}: query total vs rows");
    let lost: Vec<_> = acknowledged.difference(&present).collect();
    assert!(
        lost.is_empty(),
        "round {round}: acknowledged commits lost: {lost:?} ({} acknowledged)",
        acknowledged.len()
    );
    // The stored entry count and the counter bumped in the same commits agree with the entries.
    let snap = e.database().snapshot().expect("snapshot");
    let graph = snap.graph();
    let prop = |name: &str| graph.schema.find(NodeRef::ROOT.ty, name).expect("property").id;
    let stored = graph.count(NodeRef::ROOT, prop("Log")).expect("count");
    assert_eq!(stored as usize, present.len(), "round {round}: stored entry count vs entries");
    let counter = graph.number(NodeRef::ROOT, prop("Count")).expect("Count");
    assert_eq!(counter as usize, present.len(), "round {round}: 'Count' (bumped in each commit) vs entries");
    // The whole graph is consistent (records, entry counts, links, strings).
    let report = espalier_data::check(&graph, &mut |_| {}).expect("check");
    assert!(report.is_ok(), "round {round}: check found problems: {:#?}", report.problems);
    // Each entry is individually reachable by key.
    for k in present.iter().rev().take(20) {
        let got = e.execute_text(&format!("get . 'Log' : \"{k}\""), &none);
        assert!(matches!(got, Ok(Reply::Node(_))), "round {round}: get {k}: {got:?}");
    }
    // The database still takes writes: a key past everything ever attempted.
    let probe = present.last().map_or(0, |m| m + 1_000_000);
    let text = format!("update ( 'Log' -> dictionary \"{probe}\" ( 'n' -> number {probe} ) 'Count' -> number + 1 )");
    e.execute_text(&text, &none).unwrap_or_else(|err| panic!("round {round}: write after recovery: {err}"));
    e.execute_text(&format!("update ( 'Log' -> dictionary \"{probe}\" remove 'Count' -> number - 1 )"), &none)
        .unwrap_or_else(|err| panic!("round {round}: remove after recovery: {err}"));
    present
}

fn crash_rounds(mode: &str, rounds: usize, seed: u64) {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let durability = if mode == "sync" { Durability::Sync } else { Durability::None };
    {
        let _open = open_or_fork();
        drop(
            Engine::create(
                &dir,
                SCHEMA,
                DatabaseOptions { durability, log_segment_size: 1 << 20, ..Default::default() },
            )
            .expect("create"),
        );
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut acknowledged = BTreeSet::new();
    let mut previous = BTreeSet::new();
    for round in 0..rounds {
        let ms = rng.random_range(20..=300);
        let acked = run_child(&dir, mode, ms);
        assert!(
            acked.is_disjoint(&previous),
            "round {round}: the child acknowledged keys already present before it ran"
        );
        acknowledged.extend(acked);
        let present = {
            let _open = open_or_fork();
            verify(&dir, &acknowledged, round)
        };
        assert!(present.is_superset(&previous), "round {round}: entries present after an earlier round vanished");
        previous = present;
    }
    assert!(!acknowledged.is_empty(), "no round acknowledged anything: the test tested nothing");
    eprintln!(
        "{mode}: {rounds} rounds, {} commits acknowledged, {} entries, {:.1?}",
        acknowledged.len(),
        previous.len(),
        started.elapsed()
    );
}

#[test]
fn killed_child_loses_no_acknowledged_commit_durability_sync() {
    crash_rounds("sync", rounds(), seed());
}

#[test]
fn killed_child_loses_no_acknowledged_commit_durability_none() {
    crash_rounds("none", rounds().div_ceil(6), seed() ^ 0xffff);
}
