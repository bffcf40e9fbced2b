//! The server's own figures for the console's dashboard (`GET /v1/figures`): requests by kind
//! with a latency histogram each, and the database's commit counters. Counting is a few
//! relaxed atomic adds per request; nothing waits.
//!
//! A request is timed from the moment it holds its in-flight slot until its reply is queued:
//! [`InFlight`] holds the slot and the timer, and is dropped where the slot used to be. A
//! request answered with an error is marked so ([`Timer::fail`], [`InFlight::fail`]) and
//! counted as an error of its kind.
//!
//! The same counters are rendered in Prometheus's text format for `GET /metrics`
//! ([`Figures::prometheus`]).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use espalier_transaction::Database;
use serde_json::{json, Value};

use crate::config::log::{self, LogLevel};
use tokio::sync::OwnedSemaphorePermit;

/// What the figures count requests by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Execute,
    Get,
    Subscribe,
    Unsubscribe,
    Status,
    Ping,
    Shutdown,
}

const KINDS: [Kind; 7] =
    [Kind::Execute, Kind::Get, Kind::Subscribe, Kind::Unsubscribe, Kind::Status, Kind::Ping, Kind::Shutdown];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Execute => "execute",
            Kind::Get => "get",
            Kind::Subscribe => "subscribe",
            Kind::Unsubscribe => "unsubscribe",
            Kind::Status => "status",
            Kind::Ping => "ping",
            Kind::Shutdown => "shutdown",
        }
    }
}

/// The kind a WebSocket request is counted as.
pub fn kind_of(body: &espalier_protocol::RequestBody) -> Kind {
    use espalier_protocol::RequestBody as B;
    match body {
        B::Execute { .. } => Kind::Execute,
        B::Get { .. } => Kind::Get,
        B::Subscribe { .. } => Kind::Subscribe,
        B::Unsubscribe { .. } => Kind::Unsubscribe,
        B::Status => Kind::Status,
        B::Ping => Kind::Ping,
        B::Shutdown => Kind::Shutdown,
    }
}

/// Latency buckets: bucket `i` counts requests that took less than `2^(i + 4)` µs (16 µs …
/// about 17 s); the last one also counts everything longer.
pub const BUCKETS: usize = 21;

#[derive(Default)]
struct Counter {
    count: AtomicU64,
    errors: AtomicU64,
    micros: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

impl Counter {
    fn record(&self, micros: u64, failed: bool) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.micros.fetch_add(micros, Ordering::Relaxed);
        let bucket = (64 - micros.leading_zeros()).saturating_sub(4) as usize;
        self.buckets[bucket.min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    fn json(&self) -> Value {
        let buckets: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        json!({
            "count": self.count.load(Ordering::Relaxed),
            "errors": self.errors.load(Ordering::Relaxed),
            "micros": self.micros.load(Ordering::Relaxed),
            "buckets": buckets,
        })
    }
}

/// The counters, one per request kind; cumulative since the server started.
pub struct Figures {
    started: Instant,
    by_kind: [Counter; KINDS.len()],
}

impl Default for Figures {
    fn default() -> Self {
        Figures { started: Instant::now(), by_kind: Default::default() }
    }
}

/// The server's state now, as the figures show it beside their counters.
#[derive(Debug, Clone, Copy)]
pub struct Gauges {
    /// The version of the last commit.
    pub version: u64,
    /// Open sessions plus HTTP requests in progress.
    pub sessions: usize,
    pub subscriptions: usize,
    /// The oldest `since` a subscription can resume after.
    pub history_from: u64,
    /// The history's (approximate) bytes.
    pub history_bytes: usize,
    /// Replies and pushes encoded and not yet written.
    pub queued_bytes: usize,
}

impl Figures {
    /// Starts timing a request of `kind`; the time is recorded when the timer is dropped.
    pub fn start(self: &Arc<Self>, kind: Kind) -> Timer {
        Timer { figures: self.clone(), kind, started: Instant::now(), failed: false }
    }

    fn counter(&self, kind: Kind) -> &Counter {
        &self.by_kind[KINDS.iter().position(|k| *k == kind).unwrap_or(0)]
    }

    /// The figures as `GET /v1/figures` answers them (docs/protocol.md, "Console endpoints").
    pub fn json(&self, db: &Database, gauges: &Gauges) -> Value {
        let requests: serde_json::Map<String, Value> =
            KINDS.iter().map(|k| (k.name().to_string(), self.counter(*k).json())).collect();
        let commits = db.commit_figures();
        let bounds: Vec<u64> = (0..BUCKETS as u32).map(|i| 1u64 << (i + 4)).collect();
        json!({
            "kind": "figures",
            "uptime_ms": u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "version": gauges.version,
            "sessions": gauges.sessions,
            "subscriptions": gauges.subscriptions,
            "history_from": gauges.history_from,
            "requests": requests,
            "bucket_bounds_us": bounds,
            "commits": {
                "commits": commits.commits,
                "requests": commits.requests,
                "nanos": commits.nanos,
            },
        })
    }
}

impl Figures {
    /// The figures in Prometheus's text exposition format (version 0.0.4), for `GET /metrics`
    /// (docs/server.md, "Watch it"). Every counter is cumulative since the server started.
    pub fn prometheus(&self, db: &Database, gauges: &Gauges) -> String {
        let mut out = String::with_capacity(16 * 1024);
        let commits = db.commit_figures();
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (suffix, value) in samples {
                let _ = writeln!(out, "{name}{suffix} {value}");
            }
        };
        metric(
            "espalier_uptime_seconds",
            "gauge",
            "Seconds since the server started.",
            &[(String::new(), self.started.elapsed().as_secs_f64())],
        );
        metric(
            "espalier_database_version",
            "gauge",
            "The version of the last commit.",
            &[(String::new(), db.version() as f64)],
        );
        let mut requests = Vec::new();
        for k in KINDS {
            let c = self.counter(k);
            let count = c.count.load(Ordering::Relaxed);
            let errors = c.errors.load(Ordering::Relaxed);
            requests.push((format!("{{kind=\"{}\",outcome=\"ok\"}}", k.name()), count.saturating_sub(errors) as f64));
            requests.push((format!("{{kind=\"{}\",outcome=\"error\"}}", k.name()), errors as f64));
        }
        metric(
            "espalier_requests_total",
            "counter",
            "Requests answered, by kind and outcome (error: answered with an error message).",
            &requests,
        );
        let mut latency = Vec::new();
        for k in KINDS {
            let c = self.counter(k);
            let name = k.name();
            let mut cumulative = 0u64;
            // The last bucket also holds everything longer: it is only in +Inf.
            for (i, b) in c.buckets.iter().enumerate().take(BUCKETS - 1) {
                cumulative += b.load(Ordering::Relaxed);
                let le = (1u64 << (i + 4)) as f64 / 1e6;
                latency.push((format!("_bucket{{kind=\"{name}\",le=\"{le}\"}}"), cumulative as f64));
            }
            let count = c.count.load(Ordering::Relaxed);
            latency.push((format!("_bucket{{kind=\"{name}\",le=\"+Inf\"}}"), count as f64));
            latency.push((format!("_sum{{kind=\"{name}\"}}"), c.micros.load(Ordering::Relaxed) as f64 / 1e6));
            latency.push((format!("_count{{kind=\"{name}\"}}"), count as f64));
        }
        metric(
            "espalier_request_duration_seconds",
            "histogram",
            "Time from a request holding its in-flight slot until its reply is queued, by kind.",
            &latency,
        );
        metric(
            "espalier_commits_total",
            "counter",
            "Commits (group-commit batches that committed at least one request).",
            &[(String::new(), commits.commits as f64)],
        );
        metric(
            "espalier_committed_requests_total",
            "counter",
            "Write requests committed.",
            &[(String::new(), commits.requests as f64)],
        );
        metric(
            "espalier_commit_seconds_total",
            "counter",
            "Time spent in committed batches: running their requests, committing, and any fsync.",
            &[(String::new(), commits.nanos as f64 / 1e9)],
        );
        metric(
            "espalier_store_commit_seconds_total",
            "counter",
            "Of that, time spent in the storage commit (writing pages and, with durability sync, the fsync).",
            &[(String::new(), commits.store_commit_nanos as f64 / 1e9)],
        );
        let mut batches = Vec::new();
        let mut cumulative = 0u64;
        for (i, n) in commits.batch_sizes.iter().enumerate().take(commits.batch_sizes.len() - 1) {
            cumulative += n;
            batches.push((format!("_bucket{{le=\"{}\"}}", 1u64 << i), cumulative as f64));
        }
        batches.push(("_bucket{le=\"+Inf\"}".to_string(), commits.commits as f64));
        batches.push(("_sum".to_string(), commits.requests as f64));
        batches.push(("_count".to_string(), commits.commits as f64));
        metric(
            "espalier_commit_batch_requests",
            "histogram",
            "Requests per commit (group-commit batch size).",
            &batches,
        );
        metric(
            "espalier_sessions",
            "gauge",
            "Open WebSocket sessions plus HTTP requests in progress.",
            &[(String::new(), gauges.sessions as f64)],
        );
        metric(
            "espalier_subscriptions",
            "gauge",
            "Active subscriptions.",
            &[(String::new(), gauges.subscriptions as f64)],
        );
        metric(
            "espalier_queued_bytes",
            "gauge",
            "Replies and pushes encoded for WebSocket sessions and not yet written, in bytes.",
            &[(String::new(), gauges.queued_bytes as f64)],
        );
        metric(
            "espalier_history_bytes",
            "gauge",
            "Bytes (approximate) of the commit history kept for resuming subscribers.",
            &[(String::new(), gauges.history_bytes as f64)],
        );
        if let Some(rss) = resident_bytes() {
            metric(
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory of the server process, in bytes (includes mapped database pages).",
                &[(String::new(), rss as f64)],
            );
        }
        out
    }
}

/// The process's resident set size, on Linux (`VmRSS` in `/proc/self/status`); None elsewhere.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// Records a request's time (and whether it failed) when dropped.
pub struct Timer {
    figures: Arc<Figures>,
    kind: Kind,
    started: Instant,
    failed: bool,
}

impl Timer {
    /// Counts the request as answered with an error.
    pub fn fail(&mut self) {
        self.failed = true;
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        let micros = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.figures.counter(self.kind).record(micros, self.failed);
        if log::enabled(LogLevel::Debug) {
            let outcome = if self.failed { "error" } else { "ok" };
            log::event(
                LogLevel::Debug,
                "request",
                &[("kind", &self.kind.name()), ("outcome", &outcome), ("micros", &micros)],
            );
        }
    }
}

/// A request's in-flight slot and its timer: both end when the request has its reply.
pub struct InFlight {
    _permit: OwnedSemaphorePermit,
    timer: Timer,
}

impl InFlight {
    pub fn new(permit: OwnedSemaphorePermit, timer: Timer) -> InFlight {
        InFlight { _permit: permit, timer }
    }

    /// Counts the request as answered with an error.
    pub fn fail(&mut self) {
        self.timer.fail();
    }

    /// Counts the request as answered with an error if `failed`.
    pub fn fail_if(&mut self, failed: bool) {
        if failed {
            self.timer.fail();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_from_16_microseconds() {
        let c = Counter::default();
        for micros in [0, 15, 16, 31, 32, 1000, u64::MAX] {
            c.record(micros, false);
        }
        let b: Vec<u64> = c.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        assert_eq!(b[0], 2, "0 and 15 µs are under 16");
        assert_eq!(b[1], 2, "16 and 31 µs are under 32");
        assert_eq!(b[2], 1, "32 µs");
        assert_eq!(b[6], 1, "1000 µs is under 1024");
        assert_eq!(b[BUCKETS - 1], 1, "the longest go in the last bucket");
        assert_eq!(c.count.load(Ordering::Relaxed), 7);
    }
}
