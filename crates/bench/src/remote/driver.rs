//! The clients of one point: K tasks in a closed loop (send an operation, wait for its reply,
//! check it, repeat), over WebSocket sessions (`espalier-client`, pipelined, one per client
//! unless `--connections` shares them) or HTTP one-shots (`reqwest`, one keep-alive connection
//! per client).
//!
//! **Measuring.** Seconds mode: every client runs from the start of the warm-up until the end
//! of the window; an operation counts for throughput and latency if it completed inside the
//! window, so throughput = those operations ÷ the window. Requests mode: clients take numbered
//! tickets; the first tickets are the warm-up, the rest are measured, and throughput = measured
//! operations ÷ (last completion − first start). Every reply, warm-up included, is checked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use espalier_client::{Client, ClientError, ClientOptions};
use espalier_protocol::{Codec, Encoding, Kind, Message, Reply};

use super::cpu::{self, CpuTimes};
use super::data::{Call, Expect, Prepared, ServedDatabase, WriteState};
use super::report::{Point, Verification};
use super::{secs, Config, RemoteError, Stop, Transport, Workload};
use crate::stats::Summary;

/// Examples of failed and wrong replies kept per point (the counts are exact).
const MAX_EXAMPLES: usize = 5;
/// A client stops after this many failures in a row (a dead connection must not spin).
const MAX_FAILURES_IN_A_ROW: u64 = 1000;
/// How long connecting all clients of a point may take.
const CONNECT_WAIT: Duration = Duration::from_secs(60);
/// Largest reply a client accepts.
const MAX_REPLY: usize = 256 << 20;

/// The clients' runtime: named threads (for [`cpu`]).
pub fn client_runtime(threads: usize) -> Result<tokio::runtime::Runtime, RemoteError> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.enable_all().thread_name(cpu::CLIENT_THREADS).thread_keep_alive(Duration::from_secs(24 * 3600));
    if threads > 0 {
        b.worker_threads(threads);
    }
    b.build().map_err(|e| RemoteError::io("starting the clients' runtime", e))
}

/// One point of the run.
#[derive(Debug, Clone, Copy)]
pub struct PointSpec<'a> {
    /// What each client sends.
    pub workload: &'a Workload,
    /// How the requests travel.
    pub transport: Transport,
    /// How messages are encoded.
    pub encoding: Encoding,
    /// The number of clients.
    pub clients: usize,
}

/// A request ready to send on one transport.
enum Wire {
    /// Boxed: a message is far bigger than a URL.
    Ws(Box<Message>),
    HttpGet(reqwest::Url),
    HttpPost(reqwest::Url, Vec<u8>),
}

struct WireStep {
    wire: Wire,
    expect: Expect,
}

enum Conn {
    Ws(Client),
    Http(reqwest::Client),
}

/// Why a request got no usable reply.
enum Failure {
    /// The server answered with an error.
    Reply(String),
    /// The connection failed; `closed` if it cannot carry more requests.
    Transport { message: String, closed: bool },
}

/// Per-client counts and samples.
#[derive(Default)]
struct Tally {
    samples: Vec<Duration>,
    /// Operations with right replies that completed inside the window (or were measured
    /// tickets).
    measured: u64,
    /// Replies checked (every request, warm-up included).
    checked: u64,
    failed: u64,
    wrong: u64,
    examples: Vec<String>,
    /// Versions of acknowledged writes.
    versions: Vec<u64>,
    /// Writes whose outcome is unknown (the connection failed while they were in flight).
    unknown: u64,
    first_start: Option<Instant>,
    last_end: Option<Instant>,
    /// Measured operations whose latency was not kept (over the sample bound).
    uncounted: u64,
}

impl Tally {
    fn example(&mut self, what: String) {
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(what);
        }
    }

    fn merge(&mut self, other: Tally) {
        self.samples.extend(other.samples);
        self.measured += other.measured;
        self.checked += other.checked;
        self.failed += other.failed;
        self.wrong += other.wrong;
        for e in other.examples {
            self.example(e);
        }
        self.versions.extend(other.versions);
        self.unknown += other.unknown;
        self.uncounted += other.uncounted;
        self.first_start = match (self.first_start, other.first_start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_end = match (self.last_end, other.last_end) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

/// The shared clock of a point.
struct Clock {
    stop: Stop,
    /// Seconds mode: the window.
    from: Instant,
    until: Instant,
    /// Requests mode: tickets taken, warm-up tickets, all tickets.
    tickets: AtomicU64,
    warm: u64,
    total: u64,
}

/// What the clients of a point measured, before the end-of-point checks.
pub struct PointOutcome {
    spec_workload: Workload,
    transport: Transport,
    encoding: Encoding,
    clients: usize,
    connections: usize,
    seconds: f64,
    tally: Tally,
    samples_capped: bool,
    cpu: Option<CpuTimes>,
    cpu_wall_s: f64,
    compression: espalier_protocol::Compression,
}

/// Whether `m` is the reply `expect` wants; Ok carries a write's version.
pub fn check(expect: &Expect, transport: Transport, m: &Message) -> Result<Option<u64>, String> {
    match expect {
        Expect::Echo => {
            let want = if transport == Transport::Ws { Kind::Pong } else { Kind::Ok };
            if m.kind == want {
                Ok(None)
            } else {
                Err(format!("expected {want}, got {}", m.kind))
            }
        }
        Expect::Node { version, node } => {
            if m.kind != Kind::Node {
                return Err(format!("expected node, got {}", m.kind));
            }
            if m.version != Some(*version) {
                return Err(format!("node read at version {:?}, expected {version}", m.version));
            }
            match &m.node {
                Some(n) if n == node => Ok(None),
                Some(n) => Err(format!("node differs: got {}, expected {}", clip(n), clip(node))),
                None => Err("a node reply without its node".into()),
            }
        }
        Expect::Rows(q) => match &m.result {
            Some(Reply::Query(got)) if got == q => Ok(None),
            Some(Reply::Query(got)) => Err(format!(
                "rows differ: got total {} and {} rows, expected total {} and {} rows{}",
                got.total,
                got.rows.len(),
                q.total,
                q.rows.len(),
                if got.total == q.total && got.rows.len() == q.rows.len() { " (values differ)" } else { "" }
            )),
            other => Err(format!("expected rows, got {} {}", m.kind, clip_reply(other.as_ref()))),
        },
        Expect::Replies(want) => match &m.result {
            Some(Reply::Transaction(got))
                if got.len() == want.len()
                    && got.iter().zip(want).all(|(g, w)| matches!(g, Reply::Query(g) if g == w)) =>
            {
                Ok(None)
            }
            Some(Reply::Transaction(got)) => {
                Err(format!("a transaction of {} replies differs from the {} results expected", got.len(), want.len()))
            }
            other => Err(format!("expected a transaction's replies, got {} {}", m.kind, clip_reply(other.as_ref()))),
        },
        Expect::Done { changes } => match &m.result {
            Some(Reply::Done { version, changes: c }) if c == changes => Ok(Some(*version)),
            Some(Reply::Done { changes: c, .. }) => Err(format!("the write made {c} changes, expected {changes}")),
            other => Err(format!("expected done, got {} {}", m.kind, clip_reply(other.as_ref()))),
        },
    }
}

fn clip(v: &serde_json::Value) -> String {
    let mut s = v.to_string();
    if s.len() > 160 {
        let mut end = 157;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

fn clip_reply(r: Option<&Reply>) -> String {
    match r {
        None => String::new(),
        Some(r) => clip(&serde_json::to_value(r).unwrap_or(serde_json::Value::Null)),
    }
}

fn wire(call: &Call, transport: Transport, encoding: Encoding, base: &str) -> Result<Wire, RemoteError> {
    let url = |path: &str, query: &[(String, String)]| {
        reqwest::Url::parse_with_params(&format!("{base}{path}"), query)
            .map_err(|e| RemoteError::Invalid(format!("building the URL for {path}: {e}")))
    };
    let params_opt = |p: &espalier_protocol::Params| if p.is_empty() { None } else { Some(p.clone()) };
    Ok(match (transport, call) {
        (Transport::Ws, Call::Ping) => Wire::Ws(Box::new(Message::ping(0))),
        (Transport::Ws, Call::Get { path, params }) => {
            Wire::Ws(Box::new(Message::get(0, path.clone(), params_opt(params))))
        }
        (Transport::Ws, Call::Execute { text, params }) => {
            Wire::Ws(Box::new(Message::execute_text(0, text.clone(), params_opt(params))))
        }
        (Transport::Http, Call::Ping) => Wire::HttpGet(url("/v1/health", &[])?),
        (Transport::Http, Call::Get { path, params }) => {
            let mut q = vec![("path".to_string(), path.clone())];
            q.extend(super::data::text_params(params).into_iter().map(|(k, v)| (format!("p.{k}"), v)));
            Wire::HttpGet(url("/v1/node", &q)?)
        }
        (Transport::Http, Call::Execute { text, params }) => {
            let mut m = Message::new(Kind::Execute);
            m.text = Some(text.clone());
            m.params = params_opt(params);
            let body = Codec::plain(encoding, MAX_REPLY)
                .to_bytes(&m)
                .map_err(|e| RemoteError::Invalid(format!("encoding an HTTP body: {e}")))?;
            Wire::HttpPost(url("/v1/execute", &[])?, body)
        }
    })
}

async fn send(conn: &Conn, wire: &Wire, codec: &Codec) -> Result<Message, Failure> {
    match (conn, wire) {
        (Conn::Ws(c), Wire::Ws(m)) => c.request(Message::clone(m)).await.map_err(|e| match e {
            ClientError::Server { .. } => Failure::Reply(e.to_string()),
            ClientError::Closed { .. } => Failure::Transport { message: e.to_string(), closed: true },
            other => Failure::Transport { message: other.to_string(), closed: false },
        }),
        (Conn::Http(c), Wire::HttpGet(url)) => http(c.get(url.clone()), codec).await,
        (Conn::Http(c), Wire::HttpPost(url, body)) => {
            let ct = codec.encoding.content_type();
            http(c.post(url.clone()).header(reqwest::header::CONTENT_TYPE, ct).body(body.clone()), codec).await
        }
        _ => Err(Failure::Transport { message: "a request prepared for another transport".into(), closed: true }),
    }
}

async fn http(rb: reqwest::RequestBuilder, codec: &Codec) -> Result<Message, Failure> {
    let transport = |e: reqwest::Error| Failure::Transport { message: e.to_string(), closed: false };
    let resp = rb.header(reqwest::header::ACCEPT, codec.encoding.content_type()).send().await.map_err(transport)?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(transport)?;
    let m = codec.decode_plain(&body).map_err(|u| Failure::Reply(format!("HTTP {status}: {}", u.error)))?;
    if !status.is_success() || m.kind == Kind::Error {
        return Err(Failure::Reply(format!(
            "HTTP {status}: error[{}]: {}",
            m.error_code(),
            m.message.unwrap_or_default()
        )));
    }
    Ok(m)
}

/// One client's closed loop.
async fn client(
    conn: Arc<Conn>,
    ops: Arc<Vec<Vec<WireStep>>>,
    clock: Arc<Clock>,
    index: usize,
    codec: Codec,
    transport: Transport,
    max_samples: usize,
) -> Tally {
    let mut t = Tally::default();
    // xorshift: picks operations without a shared generator.
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ ((index as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    let mut in_a_row = 0u64;
    loop {
        let measured_ticket = match clock.stop {
            Stop::Seconds(_) => {
                if Instant::now() >= clock.until {
                    break;
                }
                None
            }
            Stop::Requests(_) => {
                let ticket = clock.tickets.fetch_add(1, Ordering::Relaxed);
                if ticket >= clock.total {
                    break;
                }
                Some(ticket >= clock.warm)
            }
        };
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let op = &ops[(state % ops.len() as u64) as usize];
        let start = Instant::now();
        let mut ok = true;
        let mut closed = false;
        for step in op {
            t.checked += 1;
            match send(&conn, &step.wire, &codec).await {
                Ok(m) => match check(&step.expect, transport, &m) {
                    Ok(version) => t.versions.extend(version),
                    Err(why) => {
                        t.wrong += 1;
                        t.example(format!("wrong: {why}"));
                        ok = false;
                        break;
                    }
                },
                Err(Failure::Reply(why)) => {
                    t.failed += 1;
                    t.example(format!("failed: {why}"));
                    ok = false;
                    break;
                }
                Err(Failure::Transport { message, closed: c }) => {
                    t.failed += 1;
                    if matches!(step.expect, Expect::Done { .. }) {
                        t.unknown += 1;
                    }
                    t.example(format!("failed: {message}"));
                    ok = false;
                    closed = c;
                    break;
                }
            }
        }
        let end = Instant::now();
        in_a_row = if ok { 0 } else { in_a_row + 1 };
        let measured = match measured_ticket {
            Some(m) => m,
            None => end >= clock.from && end <= clock.until,
        };
        if measured {
            t.first_start = Some(t.first_start.map_or(start, |s| s.min(start)));
            t.last_end = Some(end);
            // Throughput counts right replies only; failed and wrong ones are counted apart.
            if ok {
                t.measured += 1;
                if t.samples.len() < max_samples {
                    t.samples.push(end - start);
                } else {
                    t.uncounted += 1;
                }
            }
        }
        if closed || in_a_row >= MAX_FAILURES_IN_A_ROW {
            break;
        }
    }
    t
}

async fn connect(
    server: &ServedDatabase,
    spec: &PointSpec<'_>,
    config: &Config,
    count: usize,
) -> Result<Vec<Arc<Conn>>, RemoteError> {
    let mut conns = Vec::with_capacity(count);
    for _ in 0..count {
        let conn = match spec.transport {
            Transport::Ws => {
                let opts = ClientOptions::default()
                    .encoding(spec.encoding)
                    .compression(config.compression)
                    .compress_min(config.compress_min);
                let c = Client::connect(&format!("ws://{}", server.addr()), opts)
                    .await
                    .map_err(|e| RemoteError::Server(format!("connecting a WebSocket session: {e}")))?;
                Conn::Ws(c)
            }
            Transport::Http => {
                let c = reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .tcp_nodelay(true)
                    .no_proxy()
                    .build()
                    .map_err(|e| RemoteError::Server(format!("building an HTTP client: {e}")))?;
                Conn::Http(c)
            }
        };
        conns.push(Arc::new(conn));
    }
    Ok(conns)
}

/// Runs one point: connects, runs the clients through warm-up and window, closes.
pub async fn run_point(
    server: &ServedDatabase,
    prepared: &Prepared,
    spec: PointSpec<'_>,
    config: &Config,
) -> Result<PointOutcome, RemoteError> {
    let k = spec.clients;
    let n_conns = match spec.transport {
        Transport::Ws => config.connections.unwrap_or(k).min(k),
        Transport::Http => k,
    };
    let base = format!("http://{}", server.addr());
    let mut ops = Vec::with_capacity(prepared.ops.len());
    for op in &prepared.ops {
        let mut steps = Vec::with_capacity(op.steps.len());
        for s in &op.steps {
            steps.push(WireStep {
                wire: wire(&s.call, spec.transport, spec.encoding, &base)?,
                expect: s.expect.clone(),
            });
        }
        ops.push(steps);
    }
    if ops.is_empty() {
        return Err(RemoteError::Invalid(format!("workload {} has no operations", spec.workload)));
    }
    let ops = Arc::new(ops);
    let conns = tokio::time::timeout(CONNECT_WAIT, connect(server, &spec, config, n_conns))
        .await
        .map_err(|_| RemoteError::Server(format!("connecting {n_conns} clients took over {CONNECT_WAIT:?}")))??;
    let codec = Codec::plain(spec.encoding, MAX_REPLY);

    let now = Instant::now();
    let (warm, total) = match config.stop {
        Stop::Requests(n) => {
            let warm = (n / 10).max(k as u64);
            (warm, warm + n)
        }
        Stop::Seconds(_) => (0, 0),
    };
    let window = match config.stop {
        Stop::Seconds(s) => secs(s),
        Stop::Requests(_) => Duration::ZERO,
    };
    let from = now + secs(config.warmup_seconds);
    let clock =
        Arc::new(Clock { stop: config.stop, from, until: from + window, tickets: AtomicU64::new(0), warm, total });
    let per_client_samples = (config.max_samples / k).max(1);
    let cpu_start = cpu::sample();
    let mut tasks = Vec::with_capacity(k);
    for i in 0..k {
        let conn = conns[i % conns.len()].clone();
        tasks.push(tokio::spawn(client(
            conn,
            ops.clone(),
            clock.clone(),
            i,
            codec,
            spec.transport,
            per_client_samples,
        )));
    }
    // CPU over the window (seconds mode) or the whole point (requests mode).
    let (cpu_from, cpu_from_t) = if matches!(config.stop, Stop::Seconds(_)) {
        tokio::time::sleep_until(from.into()).await;
        (cpu::sample(), Instant::now())
    } else {
        (cpu_start, now)
    };
    if matches!(config.stop, Stop::Seconds(_)) {
        tokio::time::sleep_until(clock.until.into()).await;
    }
    let cpu_until = if matches!(config.stop, Stop::Seconds(_)) { cpu::sample() } else { None };
    let cpu_until_t = Instant::now();
    let mut tally = Tally::default();
    for task in tasks {
        let t = task.await.map_err(|e| RemoteError::Server(format!("a client task failed: {e}")))?;
        tally.merge(t);
    }
    let (cpu_until, cpu_until_t) = match cpu_until {
        Some(c) => (Some(c), cpu_until_t),
        None => (cpu::sample(), Instant::now()),
    };
    let cpu = match (cpu_from, cpu_until) {
        (Some(a), Some(b)) => Some(b.since(&a)),
        _ => None,
    };
    for c in conns.iter() {
        if let Conn::Ws(c) = c.as_ref() {
            let _ = c.close().await;
        }
    }
    let seconds = match config.stop {
        Stop::Seconds(s) => s,
        Stop::Requests(_) => match (tally.first_start, tally.last_end) {
            (Some(a), Some(b)) => (b - a).as_secs_f64(),
            _ => 0.0,
        },
    };
    let samples_capped = tally.uncounted > 0;
    Ok(PointOutcome {
        spec_workload: spec.workload.clone(),
        transport: spec.transport,
        encoding: spec.encoding,
        clients: k,
        connections: n_conns,
        seconds,
        tally,
        samples_capped,
        cpu,
        cpu_wall_s: (cpu_until_t - cpu_from_t).as_secs_f64(),
        compression: config.compression,
    })
}

impl PointOutcome {
    /// The point, with the write checks against the counter before and after it.
    pub fn finish(self, before: Option<WriteState>, after: Option<WriteState>) -> (Point, Option<Verification>) {
        let PointOutcome { spec_workload, transport, encoding, clients, connections, seconds, mut tally, .. } = self;
        let mut verification = None;
        if let (Some(b), Some(a)) = (before, after) {
            // Every acknowledged version is new, inside the point, and acknowledged once.
            let mut versions = std::mem::take(&mut tally.versions);
            versions.sort_unstable();
            let outside = versions.iter().filter(|&&v| v <= b.version || v > a.version).count() as u64;
            let repeated = versions.windows(2).filter(|w| w[0] == w[1]).count() as u64;
            if outside > 0 {
                tally.wrong += outside;
                tally.example(format!("wrong: {outside} acknowledged versions outside ({}, {}]", b.version, a.version));
            }
            if repeated > 0 {
                tally.wrong += repeated;
                tally.example(format!("wrong: {repeated} versions acknowledged twice"));
            }
            let acknowledged = versions.len() as u64;
            let increments = a.pulses.wrapping_sub(b.pulses);
            let low = acknowledged as i64;
            let high = low + tally.unknown as i64;
            let ok = increments >= low && increments <= high;
            if !ok {
                let off = if increments < low { low - increments } else { increments - high };
                tally.wrong += off.unsigned_abs();
                tally.example(format!(
                    "wrong: the machines' 'Pulses' grew by {increments}, but {acknowledged} writes were acknowledged"
                ));
            }
            verification = Some(Verification {
                workload: spec_workload.name(),
                transport,
                encoding,
                clients,
                acknowledged,
                unknown_outcome: tally.unknown,
                increments,
                ok,
            });
        }
        let samples_kept = tally.samples.len();
        let latency = if tally.samples.is_empty() { None } else { Some(Summary::of(&mut tally.samples)) };
        let ops_per_sec = if seconds > 0.0 { tally.measured as f64 / seconds } else { 0.0 };
        let point = Point {
            workload: spec_workload.name(),
            transport,
            encoding,
            compression: self.compression,
            clients,
            connections,
            seconds,
            operations: tally.measured,
            ops_per_sec,
            latency,
            latency_samples: samples_kept,
            samples_capped: self.samples_capped,
            checked: tally.checked,
            failed: tally.failed,
            wrong: tally.wrong,
            examples: tally.examples,
            cpu: self.cpu,
            cpu_wall_s: self.cpu_wall_s,
        };
        (point, verification)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use espalier_instruction::{QueryResult, Row};

    fn rows(total: u64) -> QueryResult {
        QueryResult {
            total,
            columns: vec!["Price".into()],
            rows: vec![Row { key: vec!["p1".into()], values: vec![serde_json::json!(1)] }],
        }
    }

    #[test]
    fn the_checker_tells_right_from_wrong() {
        let result = |r: Reply| {
            let mut m = Message::new(Kind::Result);
            m.result = Some(r);
            m
        };
        assert_eq!(check(&Expect::Echo, Transport::Ws, &Message::pong(3)), Ok(None));
        assert!(check(&Expect::Echo, Transport::Http, &Message::pong(3)).is_err());
        assert_eq!(check(&Expect::Echo, Transport::Http, &Message::ok(None)), Ok(None));

        let node = serde_json::json!({"Price": 4});
        let want = Expect::Node { version: 7, node: node.clone() };
        assert_eq!(check(&want, Transport::Ws, &Message::node(Some(1), 7, node.clone())), Ok(None));
        assert!(check(&want, Transport::Ws, &Message::node(Some(1), 8, node)).unwrap_err().contains("version"));
        let other = serde_json::json!({"Price": 5});
        assert!(check(&want, Transport::Ws, &Message::node(Some(1), 7, other)).unwrap_err().contains("differs"));

        let want = Expect::Rows(rows(1));
        assert_eq!(check(&want, Transport::Ws, &result(Reply::Query(rows(1)))), Ok(None));
        assert!(check(&want, Transport::Ws, &result(Reply::Query(rows(2)))).is_err());
        let mut changed = rows(1);
        changed.rows[0].values[0] = serde_json::json!(2);
        assert!(check(&want, Transport::Ws, &result(Reply::Query(changed))).unwrap_err().contains("values differ"));

        // A transaction of queries: every member's rows, in order.
        let want = Expect::Replies(vec![rows(1), rows(2)]);
        let both = |a, b| result(Reply::Transaction(vec![Reply::Query(rows(a)), Reply::Query(rows(b))]));
        assert_eq!(check(&want, Transport::Ws, &both(1, 2)), Ok(None));
        assert!(check(&want, Transport::Ws, &both(2, 1)).is_err());
        assert!(check(&want, Transport::Ws, &result(Reply::Transaction(vec![Reply::Query(rows(1))]))).is_err());
        assert!(check(&want, Transport::Ws, &result(Reply::Query(rows(1)))).is_err());

        let want = Expect::Done { changes: 1 };
        assert_eq!(check(&want, Transport::Ws, &result(Reply::Done { version: 9, changes: 1 })), Ok(Some(9)));
        assert!(check(&want, Transport::Ws, &result(Reply::Done { version: 9, changes: 2 })).is_err());
        assert!(check(&want, Transport::Ws, &result(Reply::Query(rows(1)))).is_err());
    }
}
