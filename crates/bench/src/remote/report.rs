//! The results of a remote run, issue #4's targets, and the Markdown and JSON forms.

use std::fmt::Write as _;

use espalier_protocol::{Compression, Encoding};
use serde::Serialize;
use serde_json::Value;

use super::cpu::CpuTimes;
use super::pgbench::Script;
use super::{Config, Stop, Transport, Workload};
use crate::peers::DurabilityPairing;
use crate::stats::Summary;

/// One workload at one client count over one transport and encoding.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// The workload's name.
    pub workload: String,
    /// How the requests travelled.
    pub transport: Transport,
    /// How messages were encoded.
    pub encoding: Encoding,
    /// How messages were compressed.
    pub compression: Compression,
    /// The number of clients.
    pub clients: usize,
    /// WebSocket sessions (or HTTP clients) the clients used.
    pub connections: usize,
    /// The measured window (seconds mode) or first start to last reply (requests mode).
    pub seconds: f64,
    /// Operations with right replies in the window.
    pub operations: u64,
    /// Operations with right replies per second of the window.
    pub ops_per_sec: f64,
    /// Latency of those operations (µs).
    pub latency: Option<Summary>,
    /// Latency samples behind `latency`.
    pub latency_samples: usize,
    /// More operations than the sample bound: the latency is of the first ones per client.
    pub samples_capped: bool,
    /// Replies checked, warm-up included.
    pub checked: u64,
    /// Error replies and broken connections.
    pub failed: u64,
    /// Replies that arrived but were not what the engine gives in process.
    pub wrong: u64,
    /// A few failed or wrong replies, for people.
    pub examples: Vec<String>,
    /// CPU seconds by role over `cpu_wall_s` (the window; the whole point in requests mode).
    pub cpu: Option<CpuTimes>,
    /// The wall time the CPU seconds were measured over, in seconds.
    pub cpu_wall_s: f64,
}

/// A write point's check of the acknowledged writes against the data.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// The workload's name.
    pub workload: String,
    /// How the requests travelled.
    pub transport: Transport,
    /// How messages were encoded.
    pub encoding: Encoding,
    /// The number of clients.
    pub clients: usize,
    /// Writes acknowledged with `done` (warm-up included).
    pub acknowledged: u64,
    /// Writes whose connection failed before their reply (may or may not have committed).
    pub unknown_outcome: u64,
    /// How much the machines' 'Pulses' grew over the point.
    pub increments: i64,
    /// Whether `increments` lies between `acknowledged` and `acknowledged` plus `unknown_outcome`.
    pub ok: bool,
}

/// pgbench at one client count.
#[derive(Debug, Clone, Serialize)]
pub struct PgPoint {
    /// The transaction pgbench ran.
    pub script: Script,
    /// The number of pgbench clients.
    pub clients: usize,
    /// pgbench's worker threads.
    pub threads: usize,
    /// pgbench's `-M`: simple, extended or prepared.
    pub query_mode: String,
    /// Transactions completed.
    pub transactions: u64,
    /// pgbench's `tps` (without initial connection time).
    pub tps: f64,
    /// pgbench's mean latency, in ms, if it reported it.
    pub latency_average_ms: Option<f64>,
    /// From pgbench's per-transaction log (µs).
    pub latency: Option<Summary>,
    /// Transactions that failed.
    pub failed: u64,
    /// CPU seconds pgbench itself used.
    pub pgbench_cpu_s: Option<f64>,
    /// CPU seconds the PostgreSQL server used meanwhile.
    pub server_cpu_s: Option<f64>,
}

/// The machine the run was on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPU cores available.
    pub cores: usize,
    /// The 1-minute load average before the run.
    pub load_before: Option<f64>,
    /// The 1-minute load average after the run.
    pub load_after: Option<f64>,
    /// Wall time of the whole run.
    pub seconds: f64,
    /// (program, version) of Espalier and, when it ran, PostgreSQL and pgbench.
    pub versions: Vec<(String, String)>,
    /// The `postgresql.conf` lines of the run.
    pub postgres_settings: Vec<String>,
}

/// One of issue #4's targets and whether this run met it.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// The target, in words.
    pub target: String,
    /// What this run measured for it, with its unit.
    pub measured: String,
    /// None: this run did not measure it (the reason is in `measured`).
    pub met: Option<bool>,
}

/// The outcome of a remote run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The options the run used.
    pub config: Config,
    /// The machine the run was on.
    pub machine: Machine,
    /// Every measured point of Espalier.
    pub points: Vec<Point>,
    /// Every pgbench point.
    pub postgres: Vec<PgPoint>,
    /// The checks of the write points.
    pub verifications: Vec<Verification>,
    /// Issue #4's targets and whether they were met.
    pub targets: Vec<Target>,
}

impl Report {
    /// A report of these results, with the targets evaluated on them.
    pub fn new(
        config: Config,
        machine: Machine,
        points: Vec<Point>,
        postgres: Vec<PgPoint>,
        verifications: Vec<Verification>,
    ) -> Report {
        let targets = targets(&config, &points, &postgres, &verifications);
        Report { config, machine, points, postgres, verifications, targets }
    }

    /// The point of `workload` over `transport` and `encoding` with `k` clients, if measured.
    pub fn point(&self, workload: &str, transport: Transport, encoding: Encoding, k: usize) -> Option<&Point> {
        find(&self.points, workload, transport, encoding, k)
    }

    /// Wrong replies over the whole run.
    pub fn wrong(&self) -> u64 {
        self.points.iter().map(|p| p.wrong).sum()
    }

    /// Failed replies over the whole run.
    pub fn failed(&self) -> u64 {
        self.points.iter().map(|p| p.failed).sum()
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|e| Value::String(format!("report does not serialise: {e}")))
    }

    /// The report as Markdown.
    pub fn to_markdown(&self) -> String {
        markdown(self)
    }

    /// Box plots of the latencies (`crate::suite::chart`): one panel per transport and
    /// encoding, one box per workload and client count (a colour per K).
    pub fn chart_svg(&self) -> String {
        use crate::suite::chart::{svg, Series};
        use crate::suite::report::InstructionResult;
        let series: Vec<(String, Vec<InstructionResult>)> = self
            .config
            .clients
            .iter()
            .map(|&k| {
                let boxes = self
                    .points
                    .iter()
                    .filter(|p| p.clients == k)
                    .filter_map(|p| {
                        let group = format!("{} {}", p.transport.name(), p.encoding);
                        p.latency.as_ref().map(|l| InstructionResult::of_summary(&group, "remote", &p.workload, l))
                    })
                    .collect();
                (format!("K = {k}"), boxes)
            })
            .collect();
        let series: Vec<Series<'_>> = series
            .iter()
            .map(|(label, results)| Series { label: label.clone(), results: results.iter().collect() })
            .collect();
        svg(&series, "Latency by workload and number of clients")
    }
}

impl Report {
    /// Throughput against clients (`crate::suite::chart::throughput`): a panel per workload,
    /// a line per transport, encoding and compression.
    pub fn throughput_svg(&self) -> String {
        use crate::suite::chart::throughput::{svg, Line, Panel};
        let mut panels: Vec<Panel> = Vec::new();
        for p in &self.points {
            let label = format!("{} {} {}", p.transport.name(), p.encoding, p.compression.as_str());
            let at = match panels.iter().position(|x| x.title == p.workload) {
                Some(i) => i,
                None => {
                    panels.push(Panel { title: p.workload.clone(), lines: Vec::new() });
                    panels.len() - 1
                }
            };
            let lines = &mut panels[at].lines;
            match lines.iter_mut().find(|l| l.label == label) {
                Some(l) => l.points.push((p.clients, p.ops_per_sec)),
                None => lines.push(Line { label, points: vec![(p.clients, p.ops_per_sec)] }),
            }
        }
        svg(&panels, "Throughput by number of clients", "requests")
    }
}

fn find<'a>(points: &'a [Point], workload: &str, t: Transport, e: Encoding, k: usize) -> Option<&'a Point> {
    points.iter().find(|p| p.workload == workload && p.transport == t && p.encoding == e && p.clients == k)
}

fn pg_find(pg: &[PgPoint], script: Script, k: usize) -> Option<&PgPoint> {
    pg.iter().find(|p| p.script == script && p.clients == k)
}

fn median(p: &Point) -> Option<f64> {
    p.latency.as_ref().map(|l| l.median_us)
}

/// Issue #4, item 5 (for a model run, only the count of wrong replies: the others need the
/// demo workloads).
fn targets(config: &Config, points: &[Point], pg: &[PgPoint], verifications: &[Verification]) -> Vec<Target> {
    let mut out = Vec::new();
    if is_model_run(config) {
        out.push(zero_wrong(points, verifications));
        return out;
    }
    let durability = config.durability.name();
    let not_measured = |target: String, why: String| Target { target, measured: why, met: None };
    for (t, e) in config.variants() {
        let variant = format!("{}/{e}", t.name());
        // 1. One client's simple command within 1.3× the echo floor.
        let target = format!("one client's `command` round trip ≤ 1.3× the echo floor ({variant})");
        match (find(points, "echo", t, e, 1).and_then(median), find(points, "command", t, e, 1).and_then(median)) {
            (Some(echo), Some(cmd)) => {
                let r = cmd / echo;
                out.push(Target {
                    target,
                    measured: format!(
                        "median {cmd:.1} µs ÷ echo {echo:.1} µs = {r:.2}× (durability {durability}{})",
                        if config.durability == DurabilityPairing::Sync {
                            ": includes an fsync per commit"
                        } else {
                            ""
                        }
                    ),
                    met: Some(r <= 1.3),
                });
            }
            _ => out.push(not_measured(target, "needs workloads echo and command at K = 1".into())),
        }
        // 2. 64 clients: at least 2× PostgreSQL select-only.
        let target = format!("64 clients: `get` ≥ 2× PostgreSQL select-only throughput ({variant})");
        match (find(points, "get", t, e, 64), pg_find(pg, Script::SelectOnly, 64)) {
            (Some(g), Some(p)) if p.tps > 0.0 => {
                let r = g.ops_per_sec / p.tps;
                out.push(Target {
                    target,
                    measured: format!("{:.0} ops/s ÷ {:.0} tps = {r:.2}×", g.ops_per_sec, p.tps),
                    met: Some(r >= 2.0),
                });
            }
            _ => out.push(not_measured(target, "needs workload get and PostgreSQL at K = 64".into())),
        }
        // 4. Durable single-update commands at 64 clients: at least 5× PostgreSQL's UPDATE.
        let target = format!("64 clients, durable: `command` ≥ 5× PostgreSQL single-row UPDATE ({variant})");
        match (find(points, "command", t, e, 64), pg_find(pg, Script::Update, 64)) {
            (Some(c), Some(p)) if p.tps > 0.0 => {
                let r = c.ops_per_sec / p.tps;
                let measured =
                    format!("{:.0} ops/s ÷ {:.0} tps = {r:.2}× (durability {durability})", c.ops_per_sec, p.tps);
                if config.durability == DurabilityPairing::Sync {
                    out.push(Target { target, measured, met: Some(r >= 5.0) });
                } else {
                    out.push(not_measured(target, format!("{measured}; the target needs --durability sync")));
                }
            }
            _ => out.push(not_measured(target, "needs workload command and PostgreSQL at K = 64".into())),
        }
    }
    // 3. Zero wrong replies, and every write accounted for.
    out.push(zero_wrong(points, verifications));
    // 5. MessagePack measurably faster than JSON.
    for &t in &config.transports {
        let target = format!(
            "MessagePack measurably faster than JSON: `query` (≤ 100 rows) median ≥ 5% lower at K = 1 ({})",
            t.name()
        );
        match (
            find(points, "query", t, Encoding::Json, 1).and_then(median),
            find(points, "query", t, Encoding::Msgpack, 1).and_then(median),
        ) {
            (Some(json), Some(mp)) => {
                let gain = 1.0 - mp / json;
                out.push(Target {
                    target,
                    measured: format!("JSON {json:.1} µs, MessagePack {mp:.1} µs: {:.1}% lower", gain * 100.0),
                    met: Some(gain >= 0.05),
                });
            }
            _ => out.push(not_measured(target, "needs workload query with --encoding json,msgpack at K = 1".into())),
        }
    }
    out
}

/// Whether every workload is a model query (`bench remote-model`).
fn is_model_run(config: &Config) -> bool {
    config.workloads.iter().all(|w| matches!(w, Workload::Model(_)))
}

/// Issue #4's third target (seed 000's table 6): no wrong reply, every write in the data.
fn zero_wrong(points: &[Point], verifications: &[Verification]) -> Target {
    let wrong: u64 = points.iter().map(|p| p.wrong).sum();
    let checked: u64 = points.iter().map(|p| p.checked).sum();
    let bad_verifications = verifications.iter().filter(|v| !v.ok).count();
    Target {
        target: "zero wrong replies, every acknowledged write found in the data".into(),
        measured: format!(
            "{wrong} wrong of {checked} replies checked; {} of {} write checks passed",
            verifications.len() - bad_verifications,
            verifications.len()
        ),
        met: Some(wrong == 0 && bad_verifications == 0),
    }
}

/// Seed 000's tables 1–4: per query, the median in ms and the coefficient of dispersion at
/// each client count.
fn model_table(s: &mut String, r: &Report) {
    let c = &r.config;
    for (t, e) in c.variants() {
        let _ = writeln!(
            s,
            "### Medians in ms (coefficient of dispersion) by clients ({}, {e})
",
            t.name()
        );
        let head: Vec<String> = c.clients.iter().map(|k| format!("K = {k}")).collect();
        let _ = writeln!(s, "| query | {} | failed | wrong |", head.join(" | "));
        let _ = writeln!(s, "|---|{}---:|---:|", "---:|".repeat(c.clients.len()));
        for w in &c.workloads {
            let name = w.name();
            let mut failed = 0;
            let mut wrong = 0;
            let cells: Vec<String> = c
                .clients
                .iter()
                .map(|&k| match find(&r.points, &name, t, e, k) {
                    Some(p) => {
                        failed += p.failed;
                        wrong += p.wrong;
                        match &p.latency {
                            Some(l) => format!("{:.3} ({:.2})", l.median_us / 1000.0, l.dispersion),
                            None => "–".into(),
                        }
                    }
                    None => "–".into(),
                })
                .collect();
            let _ = writeln!(s, "| {name} | {} | {failed} | {wrong} |", cells.join(" | "));
        }
        s.push('\n');
    }
}

fn us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn latency_cells(l: Option<&Summary>) -> String {
    match l {
        Some(l) => format!(
            "{} | {} | {} | {} | {} | {}",
            us(l.min_us),
            us(l.q1_us),
            us(l.median_us),
            us(l.q3_us),
            us(l.p99_us),
            us(l.max_us)
        ),
        None => "– | – | – | – | – | –".into(),
    }
}

/// "client % / server % (client / server µs per operation)": the share of one core over the
/// window, and the CPU each side spent per operation done.
fn cpu_cell(p: &Point) -> String {
    match &p.cpu {
        Some(c) if p.cpu_wall_s > 0.0 => {
            let pct = |s: f64| 100.0 * s / p.cpu_wall_s;
            // Operations completed while the CPU was measured (the window, or the whole point).
            let ops = p.ops_per_sec * p.cpu_wall_s;
            let per = |s: f64| if ops > 0.0 { format!("{:.0}", s * 1e6 / ops) } else { "–".into() };
            format!("{:.0}% / {:.0}% ({} / {})", pct(c.client_s), pct(c.server_s), per(c.client_s), per(c.server_s))
        }
        _ => "–".into(),
    }
}

fn markdown(r: &Report) -> String {
    let c = &r.config;
    let m = &r.machine;
    let mut s = String::new();
    // Without PostgreSQL (`--no-pg`) the title does not claim it.
    let beside = if c.postgres { " beside PostgreSQL" } else { "" };
    let _ = writeln!(s, "## Espalier server under load{beside}\n");
    let load = |l: Option<f64>| l.map_or("?".to_string(), |l| format!("{l:.2}"));
    let stop = match c.stop {
        Stop::Seconds(secs) => format!("{secs} s per point after {} s of warm-up", c.warmup_seconds),
        Stop::Requests(n) => format!("{n} operations per point after {} of warm-up", (n / 10).max(1)),
    };
    let _ = writeln!(
        s,
        "One machine, loopback TCP: {} cores shared by the clients, the server and PostgreSQL \
         (the clients and the Espalier server run in one process, in separate runtimes); load average \
         {} before, {} after; {stop}; durability **{}**; the run took {:.0} s.\n",
        m.cores,
        load(m.load_before),
        load(m.load_after),
        c.durability.name(),
        m.seconds
    );
    let versions: Vec<String> = m.versions.iter().map(|(_, v)| v.clone()).collect();
    let _ = writeln!(s, "Versions: {}.", versions.join("; "));
    if !m.postgres_settings.is_empty() {
        let _ = writeln!(s, "PostgreSQL settings: `{}`.", m.postgres_settings.join("`, `"));
    }
    let conns = match c.connections {
        Some(n) => format!("{n} WebSocket sessions shared round robin"),
        None => "one connection per client".into(),
    };
    let _ = writeln!(
        s,
        "Clients: {conns}; compression {} (messages under {} bytes uncompressed). Latencies in µs. CPU: \
         the clients' and the server's share of one core over the window (200% = both cores), and in \
         brackets the CPU microseconds each spent per operation; for PostgreSQL the same for pgbench and \
         the server's processes.\n",
        c.compression, c.compress_min
    );

    let workloads: Vec<String> = c.workloads.iter().map(Workload::name).collect();
    if is_model_run(c) {
        model_table(&mut s, r);
    }
    for w in &workloads {
        for (t, e) in c.variants() {
            let rows: Vec<&Point> =
                r.points.iter().filter(|p| &p.workload == w && p.transport == t && p.encoding == e).collect();
            if rows.is_empty() {
                continue;
            }
            let _ = writeln!(s, "### {w} ({}, {e})\n", t.name());
            let _ = writeln!(
                s,
                "| K | ops/s | min | q1 | median | q3 | p99 | max | failed | wrong | CPU client / server (µs/op) |"
            );
            let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for p in rows {
                let _ = writeln!(
                    s,
                    "| {} | {:.0} | {} | {} | {} | {} |",
                    p.clients,
                    p.ops_per_sec,
                    latency_cells(p.latency.as_ref()),
                    p.failed,
                    p.wrong,
                    cpu_cell(p)
                );
            }
            let checks: Vec<&Verification> =
                r.verifications.iter().filter(|v| &v.workload == w && v.transport == t && v.encoding == e).collect();
            if !checks.is_empty() {
                let all_ok = checks.iter().all(|v| v.ok);
                let acked: u64 = checks.iter().map(|v| v.acknowledged).sum();
                let grew: i64 = checks.iter().map(|v| v.increments).sum();
                let _ = writeln!(
                    s,
                    "\nWrites acknowledged: {acked}; 'Pulses' grew by {grew}: {}.",
                    if all_ok { "every acknowledged write is in the data" } else { "**MISMATCH** (see JSON)" }
                );
            }
            s.push('\n');
        }
    }

    for script in [Script::SelectOnly, Script::Update] {
        let rows: Vec<&PgPoint> = r.postgres.iter().filter(|p| p.script == script).collect();
        if rows.is_empty() {
            continue;
        }
        let what = match script {
            Script::SelectOnly => "pgbench select-only (`-S`)",
            Script::Update => "pgbench single-row UPDATE (custom script)",
        };
        let _ = writeln!(s, "### PostgreSQL: {what}, `-M {}`, `-j min(K, 2)`, TCP 127.0.0.1\n", rows[0].query_mode);
        let _ = writeln!(s, "| K | tps | min | q1 | median | q3 | p99 | max | failed | CPU pgbench / server (µs/tx) |");
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for p in rows {
            // pgbench's run time from its own figures (it also covers -t runs).
            let wall = if p.tps > 0.0 { p.transactions as f64 / p.tps } else { 0.0 };
            let pct = |c: Option<f64>| match c {
                Some(c) if wall > 0.0 => format!("{:.0}%", 100.0 * c / wall),
                _ => "–".to_string(),
            };
            let per = |c: Option<f64>| match c {
                Some(c) if p.transactions > 0 => format!("{:.0}", c * 1e6 / p.transactions as f64),
                _ => "–".to_string(),
            };
            let cpu = format!(
                "{} / {} ({} / {})",
                pct(p.pgbench_cpu_s),
                pct(p.server_cpu_s),
                per(p.pgbench_cpu_s),
                per(p.server_cpu_s)
            );
            let _ = writeln!(
                s,
                "| {} | {:.0} | {} | {} | {cpu} |",
                p.clients,
                p.tps,
                latency_cells(p.latency.as_ref()),
                p.failed
            );
        }
        s.push('\n');
    }

    // Throughput against PostgreSQL at each K.
    if !r.postgres.is_empty() {
        for (t, e) in c.variants() {
            let pairs = [("get", Script::SelectOnly), ("update", Script::Update), ("command", Script::Update)];
            let present: Vec<_> = pairs.iter().filter(|(w, _)| workloads.iter().any(|x| x == w)).collect();
            if present.is_empty() {
                continue;
            }
            let _ = writeln!(s, "### Throughput ÷ PostgreSQL's ({}, {e})\n", t.name());
            let head: Vec<String> = present.iter().map(|(w, sc)| format!("{w} ÷ {}", sc.name())).collect();
            let _ = writeln!(s, "| K | {} |", head.join(" | "));
            let _ = writeln!(s, "|---:|{}", "---:|".repeat(present.len()));
            for &k in &c.clients {
                let cells: Vec<String> = present
                    .iter()
                    .map(|(w, sc)| match (find(&r.points, w, t, e, k), pg_find(&r.postgres, *sc, k)) {
                        (Some(p), Some(g)) if g.tps > 0.0 => format!("{:.2}×", p.ops_per_sec / g.tps),
                        _ => "–".into(),
                    })
                    .collect();
                let _ = writeln!(s, "| {k} | {} |", cells.join(" | "));
            }
            s.push('\n');
        }
    }

    // Every workload's K = 1 median over the echo floor.
    for (t, e) in c.variants() {
        let Some(echo) = find(&r.points, "echo", t, e, 1).and_then(median) else { continue };
        let others: Vec<String> = workloads
            .iter()
            .filter(|w| w.as_str() != "echo")
            .filter_map(|w| find(&r.points, w, t, e, 1).and_then(median).map(|m| format!("{w} {:.2}×", m / echo)))
            .collect();
        if !others.is_empty() {
            let _ = writeln!(
                s,
                "One client's median over the echo floor ({} µs, {}/{e}): {}.\n",
                us(echo),
                t.name(),
                others.join(", ")
            );
        }
    }

    // MessagePack against JSON, where both ran.
    if c.encodings.contains(&Encoding::Json) && c.encodings.contains(&Encoding::Msgpack) {
        let _ = writeln!(s, "### MessagePack against JSON\n");
        let _ = writeln!(s, "| workload | transport | K | JSON median | MessagePack median | median lower by | JSON ops/s | MessagePack ops/s |");
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|");
        for w in &workloads {
            for &t in &c.transports {
                for &k in &c.clients {
                    let (Some(j), Some(mp)) =
                        (find(&r.points, w, t, Encoding::Json, k), find(&r.points, w, t, Encoding::Msgpack, k))
                    else {
                        continue;
                    };
                    let (Some(jm), Some(mm)) = (median(j), median(mp)) else { continue };
                    let _ = writeln!(
                        s,
                        "| {w} | {} | {k} | {} | {} | {:.1}% | {:.0} | {:.0} |",
                        t.name(),
                        us(jm),
                        us(mm),
                        100.0 * (1.0 - mm / jm),
                        j.ops_per_sec,
                        mp.ops_per_sec
                    );
                }
            }
        }
        s.push('\n');
    }

    let _ = writeln!(s, "### Targets{}\n", if is_model_run(c) { "" } else { " (issue #4)" });
    let _ = writeln!(s, "| target | measured | met |");
    let _ = writeln!(s, "|---|---|---|");
    for t in &r.targets {
        let met = match t.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "not measured",
        };
        let _ = writeln!(s, "| {} | {} | {met} |", t.target, t.measured);
    }

    let troubled: Vec<&Point> = r.points.iter().filter(|p| !p.examples.is_empty()).collect();
    if !troubled.is_empty() {
        let _ = writeln!(s, "\n### Failed and wrong replies (examples)\n");
        for p in troubled {
            let _ = writeln!(
                s,
                "- {} {}/{} K={}: {} failed, {} wrong; e.g. {}",
                p.workload,
                p.transport.name(),
                p.encoding,
                p.clients,
                p.failed,
                p.wrong,
                p.examples.join("; ")
            );
        }
    }
    s
}
