//! The server's own figures for the console's dashboard (`GET /v1/figures`): requests by kind
//! with a latency histogram each, and the database's commit counters. Counting is a few
//! relaxed atomic adds per request; nothing waits.
//!
//! A request is timed from the moment it holds its in-flight slot until its reply is queued:
//! [`InFlight`] holds the slot and the timer, and is dropped where the slot used to be.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
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
    micros: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

impl Counter {
    fn record(&self, micros: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(micros, Ordering::Relaxed);
        let bucket = (64 - micros.leading_zeros()).saturating_sub(4) as usize;
        self.buckets[bucket.min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    fn json(&self) -> Value {
        let buckets: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        json!({
            "count": self.count.load(Ordering::Relaxed),
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

impl Figures {
    /// Starts timing a request of `kind`; the time is recorded when the timer is dropped.
    pub fn start(self: &Arc<Self>, kind: Kind) -> Timer {
        Timer { figures: self.clone(), kind, started: Instant::now() }
    }

    fn counter(&self, kind: Kind) -> &Counter {
        &self.by_kind[KINDS.iter().position(|k| *k == kind).unwrap_or(0)]
    }

    /// The figures as `GET /v1/figures` answers them (docs/protocol.md, "Console endpoints").
    pub fn json(&self, shared: &crate::server::Shared) -> Value {
        let requests: serde_json::Map<String, Value> =
            KINDS.iter().map(|k| (k.name().to_string(), self.counter(*k).json())).collect();
        let commits = shared.engine.database().commit_figures();
        let bounds: Vec<u64> = (0..BUCKETS as u32).map(|i| 1u64 << (i + 4)).collect();
        json!({
            "kind": "figures",
            "uptime_ms": u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "version": shared.engine.database().version(),
            "sessions": shared.open_sessions(),
            "subscriptions": shared.hub.subscriptions(),
            "history_from": shared.hub.history_from(),
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

/// Records a request's time when dropped.
pub struct Timer {
    figures: Arc<Figures>,
    kind: Kind,
    started: Instant,
}

impl Drop for Timer {
    fn drop(&mut self) {
        let micros = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.figures.counter(self.kind).record(micros);
    }
}

/// A request's in-flight slot and its timer: both end when the request has its reply.
pub struct InFlight {
    _permit: OwnedSemaphorePermit,
    _timer: Timer,
}

impl InFlight {
    pub fn new(permit: OwnedSemaphorePermit, timer: Timer) -> InFlight {
        InFlight { _permit: permit, _timer: timer }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_from_16_microseconds() {
        let c = Counter::default();
        for micros in [0, 15, 16, 31, 32, 1000, u64::MAX] {
            c.record(micros);
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
