//! Neo4j over Bolt beside Espalier's server: issue #15's remote target (≥ 2× Neo4j's
//! throughput over Bolt at 64 clients, 0 wrong replies).
//!
//! The eight graph queries ([`crate::peers::QUERIES`], their Cypher from [`crate::peers`]) run
//! on Neo4j Community with its Bolt connector on 127.0.0.1 at a free port, sent by K threads of
//! the official Java driver: `peers/neo4j/src/main/java/espalier/peers/Bolt.java`, started
//! through [`espalier_bench::graph_peer`] as `peers/neo4j/run bolt`. Neo4j builds the graph the
//! embedded peers build (the same tables, loaded by the same Java code) and gets the pools of
//! invocations Espalier's remote run picks among ([`crate::remote::Pool`]): the same draws, with
//! SQLite's rows for each, which Espalier's in-process answers equal. Every reply is compared
//! with those rows by the client that received it; a different one is wrong, and a wrong reply
//! fails the run. A shortest path from a person to themself is left out of Neo4j's pool (SQL's
//! distance is 0; Cypher's `shortestPath` needs a first step).
//!
//! The points are measured as Espalier's are (`espalier_bench::remote::driver`): the same client
//! counts, warm-up and window (or shared request count), the same pseudo-random picks per
//! client, throughput over right replies only. [`BoltReport`] puts the two side by side.

use std::path::Path;
use std::time::Duration;

use espalier_bench::graph_peer::{self, GraphPeer, PeerError};
use espalier_bench::remote::{Config, Encoding, Report, Stop, Transport};
use espalier_bench::stats::Summary;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::peers::{cypher, params, runs, QUERIES};
use crate::remote::Pool;

/// The peer's name in `--peers` and reports.
pub const NAME: &str = "neo4j-bolt";

/// Issue #15's target: Espalier's throughput over Neo4j's over Bolt, at [`TARGET_CLIENTS`].
pub const TARGET_RATIO: f64 = 2.0;

/// The client count the target is set at.
pub const TARGET_CLIENTS: usize = 64;

/// One point of Neo4j over Bolt: one query, K clients.
#[derive(Debug, Clone, Serialize)]
pub struct BoltPoint {
    /// The query's name.
    pub query: String,
    /// The number of clients.
    pub clients: usize,
    /// Invocations in the pool the clients picked among.
    pub pool: usize,
    /// The measured window (seconds mode) or first start to last reply (requests mode).
    pub seconds: f64,
    /// Right replies measured.
    pub operations: u64,
    /// Right replies per second.
    pub ops_per_sec: f64,
    /// Latency of those replies (µs).
    pub latency: Option<Summary>,
    /// Latency samples behind `latency`.
    pub latency_samples: usize,
    /// More replies than the sample bound: the latency is of the first ones per client.
    pub samples_capped: bool,
    /// Replies checked, warm-up included (the first point of a query also counts the untimed
    /// pass over its pool).
    pub checked: u64,
    /// Errors and broken connections.
    pub failed: u64,
    /// Replies whose rows differ from SQLite's.
    pub wrong: u64,
    /// A few failed or wrong replies, for people.
    pub examples: Vec<String>,
}

/// What the Bolt peer measured.
#[derive(Debug, Clone)]
pub struct BoltRun {
    /// Neo4j's version, as it reports it.
    pub version: String,
    /// The driver's version.
    pub driver: String,
    /// Where its Bolt connector listened.
    pub address: String,
    /// Loading the tables, in ms.
    pub load_ms: f64,
    /// The untimed runs of every pool before the first point, in seconds.
    pub jvm_warmup_s: f64,
    /// Every point, query by query, K by K.
    pub points: Vec<BoltPoint>,
}

#[derive(Deserialize)]
struct Reply {
    version: String,
    driver: String,
    address: String,
    load_ms: f64,
    jvm_warmup_s: f64,
    points: Vec<ReplyPoint>,
}

#[derive(Deserialize)]
struct ReplyPoint {
    query: String,
    clients: usize,
    seconds: f64,
    operations: u64,
    checked: u64,
    failed: u64,
    wrong: u64,
    examples: Vec<String>,
    latency_ns: Vec<u64>,
    samples_capped: bool,
}

/// Most seconds of untimed running before the first point.
pub const MAX_JVM_WARMUP: f64 = 3600.0;

/// Runs the graph queries among `pools` on Neo4j over Bolt (its driver in the peers directory
/// `peers`), on the graph made from the tables of `sqlite` (the remote run's), at the client
/// counts, stop and warm-up of `config`, after running every pool untimed for `jvm_warmup`
/// seconds (at least once): the JVM compiles its hot code as it runs, Espalier is compiled
/// ahead. The tables as CSV and its database go in `dir`.
pub fn run(
    peers: &Path,
    sqlite: &Connection,
    dir: &Path,
    pools: &[Pool],
    config: &Config,
    jvm_warmup: f64,
) -> Result<BoltRun, PeerError> {
    let failed = |reason: String| PeerError::Failed { peer: NAME, reason };
    if config.clients.is_empty() {
        return Err(failed("no client counts".into()));
    }
    if !(0.0..=MAX_JVM_WARMUP).contains(&jvm_warmup) {
        return Err(failed(format!("a warm-up of {jvm_warmup} s is not between 0 and {MAX_JVM_WARMUP}")));
    }
    graph_peer::check(GraphPeer::Neo4j, peers).map_err(|e| named(e, &failed))?;
    let made = |d: &Path| std::fs::create_dir_all(d).map_err(|e| failed(format!("making {}: {e}", d.display())));
    let (tables, work) = (dir.join("peers-csv"), dir.join(format!("peer-{NAME}")));
    made(&tables)?;
    made(&work)?;
    let files = crate::peers::write_tables(sqlite, &tables).map_err(failed)?;
    let mut queries = Vec::new();
    let mut sizes = Vec::new();
    for p in pools.iter().filter(|p| QUERIES.contains(&p.query)) {
        let q = p.query;
        let (text, _) = cypher(q).ok_or_else(|| failed(format!("{} is not run on the peers", q.name())))?;
        let mut invocations = Vec::with_capacity(p.draws.len());
        for (d, a) in p.draws.iter().zip(&p.answers).filter(|(d, _)| runs(q, d)) {
            invocations.push(json!({"params": params(q, d), "rows": a.rows}));
        }
        if invocations.is_empty() {
            continue;
        }
        sizes.push((q.name(), invocations.len()));
        queries.push(json!({"name": q.name(), "cypher": text, "pool": invocations}));
    }
    if queries.is_empty() {
        return Err(failed("none of the queries asked for is a graph query with an invocation to run".into()));
    }
    let (seconds, requests) = match config.stop {
        Stop::Seconds(s) => (json!(s), Value::Null),
        Stop::Requests(n) => (Value::Null, json!(n)),
    };
    let mut request = crate::peers::request(NAME, &files, &work);
    if let Value::Object(m) = &mut request {
        m.insert("clients".into(), json!(config.clients));
        m.insert("seconds".into(), seconds);
        m.insert("requests".into(), requests);
        m.insert("warmup_seconds".into(), json!(config.warmup_seconds));
        m.insert("jvm_warmup_seconds".into(), json!(jvm_warmup));
        m.insert("max_samples".into(), json!(config.max_samples));
        m.insert("queries".into(), Value::Array(queries));
    }
    let reply: Reply = graph_peer::call(GraphPeer::Neo4j, peers, "bolt", &request).map_err(|e| named(e, &failed))?;
    let want = sizes.len() * config.clients.len();
    if reply.points.len() != want {
        return Err(failed(format!("{} points measured of {want}", reply.points.len())));
    }
    let expected = sizes.iter().flat_map(|&(q, n)| config.clients.iter().map(move |&k| (q, n, k)));
    let mut points = Vec::with_capacity(want);
    for ((q, pool, k), p) in expected.zip(reply.points) {
        if p.query != q || p.clients != k {
            return Err(failed(format!("measured {} at K = {} where {q} at K = {k} was due", p.query, p.clients)));
        }
        let mut samples: Vec<Duration> = p.latency_ns.iter().map(|&ns| Duration::from_nanos(ns)).collect();
        let latency = if samples.is_empty() { None } else { Some(Summary::of(&mut samples)) };
        let ops_per_sec = if p.seconds > 0.0 { p.operations as f64 / p.seconds } else { 0.0 };
        points.push(BoltPoint {
            query: p.query,
            clients: k,
            pool,
            seconds: p.seconds,
            operations: p.operations,
            ops_per_sec,
            latency,
            latency_samples: samples.len(),
            samples_capped: p.samples_capped,
            checked: p.checked,
            failed: p.failed,
            wrong: p.wrong,
            examples: p.examples,
        });
    }
    Ok(BoltRun {
        version: reply.version,
        driver: reply.driver,
        address: reply.address,
        load_ms: reply.load_ms,
        jvm_warmup_s: reply.jvm_warmup_s,
        points,
    })
}

/// An error of Neo4j's driver program, asked for its Bolt mode, named after this peer.
fn named(e: PeerError, failed: &impl Fn(String) -> PeerError) -> PeerError {
    match e {
        PeerError::Failed { reason, .. } => failed(reason),
        PeerError::Unavailable { reason, .. } => PeerError::Unavailable { peer: NAME, reason },
    }
}

/// One query at one client count: Espalier's throughput beside Neo4j's over Bolt.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The query's name.
    pub query: String,
    /// The number of clients.
    pub clients: usize,
    /// Espalier's right replies per second (None if that point was not measured).
    pub espalier_ops_per_sec: Option<f64>,
    /// Neo4j's right replies per second over Bolt.
    pub neo4j_ops_per_sec: f64,
    /// Espalier's throughput over Neo4j's: above 1, Espalier serves more.
    pub ratio: Option<f64>,
    /// Espalier's median latency, in µs.
    pub espalier_median_us: Option<f64>,
    /// Neo4j's median latency, in µs.
    pub neo4j_median_us: Option<f64>,
    /// Espalier's 99th percentile, in µs.
    pub espalier_p99_us: Option<f64>,
    /// Neo4j's 99th percentile, in µs.
    pub neo4j_p99_us: Option<f64>,
    /// Measured for a time (`--seconds`), a side had fewer right replies in the window than
    /// clients: a reply takes about as long as the window or longer, and the throughput is a
    /// count of the few that happened to end inside it (a longer window, or `--requests`,
    /// measures it).
    pub few_replies: bool,
}

/// Neo4j over Bolt beside Espalier's server, or why it did not run.
#[derive(Debug, Clone, Serialize)]
pub struct BoltReport {
    /// `neo4j-bolt`.
    pub system: &'static str,
    /// Neo4j's version (None if it did not run).
    pub version: Option<String>,
    /// The Java driver's version.
    pub driver: Option<String>,
    /// Where its Bolt connector listened.
    pub address: Option<String>,
    /// Loading the tables, in ms.
    pub load_ms: Option<f64>,
    /// The untimed runs of every pool before the first point, in seconds.
    pub jvm_warmup_s: Option<f64>,
    /// Why it did not run.
    pub unavailable: Option<String>,
    /// The Espalier points compared with: transport, encoding and compression.
    pub espalier: String,
    /// Each query at each client count, side by side.
    pub comparisons: Vec<Comparison>,
    /// Neo4j's points in full.
    pub points: Vec<BoltPoint>,
}

impl BoltReport {
    /// The report of a peer that did not run, and why.
    pub fn skipped(reason: String) -> BoltReport {
        BoltReport {
            system: NAME,
            version: None,
            driver: None,
            address: None,
            load_ms: None,
            jvm_warmup_s: None,
            unavailable: Some(reason),
            espalier: String::new(),
            comparisons: Vec::new(),
            points: Vec::new(),
        }
    }

    /// `run` beside Espalier's remote run `espalier`: its points over WebSocket with
    /// MessagePack if it measured those, else over its first transport and encoding.
    pub fn new(run: BoltRun, espalier: &Report) -> BoltReport {
        let variants = espalier.config.variants();
        let (transport, encoding) = if variants.contains(&(Transport::Ws, Encoding::Msgpack)) {
            (Transport::Ws, Encoding::Msgpack)
        } else {
            variants.first().copied().unwrap_or((Transport::Ws, Encoding::Msgpack))
        };
        let timed = matches!(espalier.config.stop, Stop::Seconds(_));
        let comparisons = run
            .points
            .iter()
            .map(|b| {
                let e = espalier.point(&b.query, transport, encoding, b.clients);
                let e_ops = e.map(|p| p.ops_per_sec);
                let few = |operations: u64| timed && operations < b.clients as u64;
                Comparison {
                    query: b.query.clone(),
                    clients: b.clients,
                    espalier_ops_per_sec: e_ops,
                    neo4j_ops_per_sec: b.ops_per_sec,
                    ratio: e_ops.map(|ours| if b.ops_per_sec > 0.0 { ours / b.ops_per_sec } else { f64::INFINITY }),
                    espalier_median_us: e.and_then(|p| p.latency.as_ref()).map(|l| l.median_us),
                    neo4j_median_us: b.latency.as_ref().map(|l| l.median_us),
                    espalier_p99_us: e.and_then(|p| p.latency.as_ref()).map(|l| l.p99_us),
                    neo4j_p99_us: b.latency.as_ref().map(|l| l.p99_us),
                    few_replies: few(b.operations) || e.is_some_and(|p| few(p.operations)),
                }
            })
            .collect();
        BoltReport {
            system: NAME,
            version: Some(run.version),
            driver: Some(run.driver),
            address: Some(run.address),
            load_ms: Some(run.load_ms),
            jvm_warmup_s: Some(run.jvm_warmup_s),
            unavailable: None,
            espalier: format!(
                "{}, {}, compression {}",
                transport.name(),
                encoding,
                espalier.config.compression.as_str()
            ),
            comparisons,
            points: run.points,
        }
    }

    /// Wrong replies over Bolt.
    pub fn wrong(&self) -> u64 {
        self.points.iter().map(|p| p.wrong).sum()
    }

    /// Failed replies over Bolt.
    pub fn failed(&self) -> u64 {
        self.points.iter().map(|p| p.failed).sum()
    }

    /// Per query at [`TARGET_CLIENTS`] clients: whether Espalier's throughput is at least
    /// [`TARGET_RATIO`] times Neo4j's (None: a side was not measured there, or had fewer replies
    /// in the window than clients).
    pub fn target(&self) -> Vec<(String, Option<bool>)> {
        self.comparisons
            .iter()
            .filter(|c| c.clients == TARGET_CLIENTS)
            .map(|c| (c.query.clone(), c.ratio.filter(|_| !c.few_replies).map(|r| r >= TARGET_RATIO)))
            .collect()
    }

    /// The report as Markdown: a table row per query and client count.
    pub fn to_markdown(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        if let Some(why) = &self.unavailable {
            let _ = writeln!(out, "{NAME} did not run: {why}");
            return out;
        }
        let ms = |us: Option<f64>| us.map_or_else(|| "–".to_string(), |v| format!("{:.2}", v / 1000.0));
        let ops = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{v:.0}"));
        let checked: u64 = self.points.iter().map(|p| p.checked).sum();
        let _ = writeln!(
            out,
            "{} over Bolt on {} ({}, a session per client, auto-commit queries), loaded in {:.0} ms, every \
             pool run untimed for {:.0} s before the first point; beside Espalier over {}. The same pools of \
             invocations (the same draws), each reply compared with SQLite's rows: **{} wrong and {} failed of \
             {checked} replies**.\n",
            self.version.as_deref().unwrap_or("Neo4j"),
            self.address.as_deref().unwrap_or("127.0.0.1"),
            self.driver.as_deref().unwrap_or("the Java driver"),
            self.load_ms.unwrap_or(f64::NAN),
            self.jvm_warmup_s.unwrap_or(f64::NAN),
            self.espalier,
            self.wrong(),
            self.failed(),
        );
        out.push_str(
            "| query | K | Espalier ops/s | Neo4j ops/s | ratio | Espalier median ms | Neo4j median ms | Espalier p99 ms \
             | Neo4j p99 ms |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        );
        for c in &self.comparisons {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                c.query,
                c.clients,
                ops(c.espalier_ops_per_sec),
                ops(Some(c.neo4j_ops_per_sec)),
                c.ratio
                    .map_or_else(|| "–".to_string(), |r| format!("{r:.2}×{}", if c.few_replies { " †" } else { "" })),
                ms(c.espalier_median_us),
                ms(c.neo4j_median_us),
                ms(c.espalier_p99_us),
                ms(c.neo4j_p99_us),
            );
        }
        out.push_str("\nRatio = Espalier's throughput / Neo4j's (above 1, Espalier serves more).");
        if self.comparisons.iter().any(|c| c.few_replies) {
            out.push_str(
                " † Fewer right replies inside the window than clients on a side: a reply takes about as long as the \
                 window or longer, so that throughput counts the few that happened to end inside it; a longer \
                 `--seconds`, or `--requests`, measures it.",
            );
        }
        let target = self.target();
        if target.is_empty() {
            let _ = writeln!(
                out,
                " Issue #15's target (≥ {TARGET_RATIO}× at {TARGET_CLIENTS} clients) is not measured here."
            );
        } else {
            let met: Vec<&str> = target.iter().filter(|t| t.1 == Some(true)).map(|t| t.0.as_str()).collect();
            let missed: Vec<&str> = target.iter().filter(|t| t.1 == Some(false)).map(|t| t.0.as_str()).collect();
            let unmeasured: Vec<&str> = target.iter().filter(|t| t.1.is_none()).map(|t| t.0.as_str()).collect();
            let _ = write!(
                out,
                " Issue #15's target, ≥ {TARGET_RATIO}× at {TARGET_CLIENTS} clients: met on {} of {} queries",
                met.len(),
                target.len()
            );
            if !missed.is_empty() {
                let _ = write!(out, "; not on {}", missed.join(", "));
            }
            if !unmeasured.is_empty() {
                let _ = write!(out, "; not measured on {} (†)", unmeasured.join(", "));
            }
            out.push_str(".\n");
        }
        for p in self.points.iter().filter(|p| !p.examples.is_empty()) {
            let _ = writeln!(out, "\n{} at K = {}: {}", p.query, p.clients, p.examples.join("; "));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use espalier_bench::remote::report::Machine;
    use espalier_bench::remote::{Compression, Point};

    fn espalier(query: &str, clients: usize, operations: u64) -> Point {
        Point {
            workload: query.into(),
            transport: Transport::Ws,
            encoding: Encoding::Msgpack,
            compression: Compression::None,
            clients,
            connections: clients,
            seconds: 2.0,
            operations,
            ops_per_sec: operations as f64 / 2.0,
            latency: None,
            latency_samples: 0,
            samples_capped: false,
            checked: operations,
            failed: 0,
            wrong: 0,
            examples: Vec::new(),
            cpu: None,
            cpu_wall_s: 2.0,
        }
    }

    fn neo4j(query: &str, clients: usize, operations: u64) -> BoltPoint {
        BoltPoint {
            query: query.into(),
            clients,
            pool: 64,
            seconds: 2.0,
            operations,
            ops_per_sec: operations as f64 / 2.0,
            latency: None,
            latency_samples: 0,
            samples_capped: false,
            checked: operations,
            failed: 0,
            wrong: 0,
            examples: Vec::new(),
        }
    }

    #[test]
    fn the_report_sets_the_throughputs_side_by_side_and_judges_the_target() {
        let mut config = Config::quick();
        config.clients = vec![1, 64];
        config.stop = Stop::Seconds(2.0);
        let machine = Machine {
            cores: 2,
            load_before: None,
            load_after: None,
            seconds: 1.0,
            versions: Vec::new(),
            postgres_settings: Vec::new(),
        };
        let points = vec![espalier("friends", 1, 2000), espalier("friends", 64, 6000), espalier("fof-3", 64, 100)];
        let ours = Report::new(config, machine, points, Vec::new(), Vec::new());
        let run = BoltRun {
            version: "Neo4j 5.26.0".into(),
            driver: "Neo4j Java driver 5.26.0".into(),
            address: "127.0.0.1:7687".into(),
            load_ms: 1.0,
            jvm_warmup_s: 0.0,
            // fof-3 at 64 clients: 10 replies ended in the window, fewer than the clients.
            points: vec![neo4j("friends", 1, 1000), neo4j("friends", 64, 2000), neo4j("fof-3", 64, 10)],
        };
        let r = BoltReport::new(run, &ours);
        assert_eq!(r.espalier, "ws, msgpack, compression none");
        let ratios: Vec<Option<f64>> = r.comparisons.iter().map(|c| c.ratio).collect();
        assert_eq!(ratios, [Some(2.0), Some(3.0), Some(10.0)]);
        assert_eq!(r.target(), [("friends".to_string(), Some(true)), ("fof-3".to_string(), None)]);
        let md = r.to_markdown();
        assert!(md.contains("| friends | 64 | 3000 | 1000 | 3.00× |"), "{md}");
        assert!(md.contains("| fof-3 | 64 | 50 | 5 | 10.00× † |"), "{md}");
        assert!(md.contains("met on 1 of 2 queries; not measured on fof-3 (†)."), "{md}");
        assert!(md.contains("**0 wrong and 0 failed of 3010 replies**"), "{md}");

        let skipped = BoltReport::skipped("neo4j-bolt is not available: …".into());
        assert!(skipped.to_markdown().starts_with("neo4j-bolt did not run: neo4j-bolt is not available"));
    }
}
