//! The summary: one table row per phase, the server's memory over time, the kills by kind,
//! and the verdict.

use std::time::Duration;

use crate::model::Stats;

/// Values shown in the "over time" line at most.
const OVER_TIME_POINTS: usize = 20;

/// The soak phase's results.
#[derive(Default)]
pub struct Soak {
    pub clients: usize,
    pub elapsed: Duration,
    pub stats: Stats,
    /// The server's RSS in KiB, sampled every second.
    pub rss: Vec<u64>,
    /// `espalier check` after the graceful stop: None if it did not run.
    pub check_ok: Option<bool>,
}

/// The crash rounds' results.
#[derive(Default)]
pub struct Crash {
    pub clients: usize,
    pub rounds: usize,
    /// The whole phase, restarts and checks included.
    pub elapsed: Duration,
    /// The time the clients wrote (from their start to the signal), summed over the rounds:
    /// the rate is over this.
    pub writing: Duration,
    pub stats: Stats,
    pub sigkill_sync: usize,
    pub sigkill_none: usize,
    pub sigterm: usize,
    /// SIGKILLs aimed at a batch transaction, and how many found one in flight.
    pub batch_rounds: usize,
    pub during_batch: usize,
    pub batch_rows: usize,
    pub batches_acked: u64,
    pub checks_ok: usize,
    pub checks_failed: usize,
    /// RSS in KiB once the restarted server had been verified, one per restart.
    pub rss_after_restart: Vec<u64>,
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// "min A  median B  max C" in MiB.
fn spread(samples: &[u64]) -> String {
    let mut s = samples.to_vec();
    s.sort_unstable();
    match (s.first(), s.get(s.len() / 2), s.last()) {
        (Some(&lo), Some(&mid), Some(&hi)) => format!("min {}  median {}  max {} MiB", mib(lo), mib(mid), mib(hi)),
        _ => "no samples".into(),
    }
}

/// At most `OVER_TIME_POINTS` samples, evenly spaced, in MiB (rounded).
fn over_time(samples: &[u64]) -> String {
    if samples.is_empty() {
        return String::new();
    }
    let step = samples.len().div_ceil(OVER_TIME_POINTS);
    samples.iter().step_by(step).map(|&k| format!("{:.0}", k as f64 / 1024.0)).collect::<Vec<_>>().join(" ")
}

fn check_cell(ok: usize, failed: usize) -> String {
    if ok + failed == 0 {
        "-".into()
    } else if failed == 0 {
        format!("{ok}/{ok} ok")
    } else {
        format!("{failed} FAILED of {}", ok + failed)
    }
}

/// Prints the summary and returns the reasons the run failed (empty: it passed).
pub fn print(soak: &Soak, crash: &Crash, error: Option<&str>) -> Vec<String> {
    let g = Stats::get;
    println!();
    println!("== soak summary");
    println!(
        "{:<8} {:>7} {:>10} {:>10} {:>9} {:>7} {:>6} {:>5}  check",
        "phase", "clients", "time", "requests", "req/s", "failed", "wrong", "lost"
    );
    let row = |name: &str, clients: usize, time: String, s: &Stats, elapsed: Duration, check: String| {
        let ops = g(&s.ops);
        let rate = if elapsed.as_secs_f64() > 0.0 { ops as f64 / elapsed.as_secs_f64() } else { 0.0 };
        println!(
            "{name:<8} {clients:>7} {time:>10} {ops:>10} {rate:>9.0} {:>7} {:>6} {:>5}  {check}",
            g(&s.failed),
            g(&s.wrong),
            g(&s.lost)
        );
    };
    let soak_check = match soak.check_ok {
        Some(true) => check_cell(1, 0),
        Some(false) => check_cell(0, 1),
        None => "-".into(),
    };
    row("soak", soak.clients, format!("{:.1} s", soak.elapsed.as_secs_f64()), &soak.stats, soak.elapsed, soak_check);
    row(
        "crash",
        crash.clients,
        format!("{} rounds", crash.rounds),
        &crash.stats,
        crash.writing,
        check_cell(crash.checks_ok, crash.checks_failed),
    );
    println!();
    if !soak.rss.is_empty() {
        println!("server RSS during the soak (every second): {}", spread(&soak.rss));
        println!("  over time (MiB): {}", over_time(&soak.rss));
    }
    if crash.rounds > 0 {
        println!(
            "signals: {} SIGKILL (sync), {} SIGKILL (durability none), {} SIGTERM; {} SIGKILLs aimed at a \
             {}-entry transaction, {} landed while one was in flight",
            crash.sigkill_sync,
            crash.sigkill_none,
            crash.sigterm,
            crash.batch_rounds,
            crash.batch_rows,
            crash.during_batch
        );
        println!(
            "crash rounds: {} writes acknowledged ({} batch transactions), {} requests cut off by the signal; \
             in flight at the signal: {} present after restart, {} absent",
            g(&crash.stats.writes),
            crash.batches_acked,
            g(&crash.stats.cut),
            g(&crash.stats.pending_present),
            g(&crash.stats.pending_absent)
        );
        println!(
            "crash phase: {:.1} s in all, {:.1} s of it with the clients writing (the rate above)",
            crash.elapsed.as_secs_f64(),
            crash.writing.as_secs_f64()
        );
        println!("server RSS after each restart: {}", spread(&crash.rss_after_restart));
        println!("  over the rounds (MiB): {}", over_time(&crash.rss_after_restart));
    }
    let mut reasons = Vec::new();
    for (phase, s) in [("soak", &soak.stats), ("crash", &crash.stats)] {
        for note in s.notes() {
            println!("{phase}: {note}");
        }
        for (what, n) in [("lost", g(&s.lost)), ("wrong", g(&s.wrong)), ("failed", g(&s.failed))] {
            if n > 0 {
                reasons.push(format!("{phase}: {n} {what}"));
            }
        }
    }
    if soak.check_ok == Some(false) || crash.checks_failed > 0 {
        reasons.push(format!(
            "espalier check failed {} times",
            crash.checks_failed + usize::from(soak.check_ok == Some(false))
        ));
    }
    if let Some(e) = error {
        reasons.push(format!("stopped early: {e}"));
    }
    if reasons.is_empty() {
        println!("result: PASS");
    } else {
        println!("result: FAIL ({})", reasons.join("; "));
    }
    reasons
}
