//! The mix's report: a point per system, client count and mode; the cost of transactions per
//! system and client count (throughput loss, median latency increase); JSON, Markdown and an
//! SVG chart.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Config, SystemKind};
use crate::stats::Summary;

/// The target of issue #15 item 3: transactions cost at most this much throughput.
pub const TARGET_LOSS_PERCENT: f64 = 10.0;

/// One system, client count and mode.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// The system.
    pub system: SystemKind,
    /// Whether each batch was one transaction.
    pub transactions: bool,
    /// Concurrent clients.
    pub clients: usize,
    /// Seconds measured: the window, or up to the first batch's end when none ended inside it.
    pub seconds: f64,
    /// Batches (or transactions) that began and ended inside the measured seconds.
    pub batches: u64,
    /// Batches per second.
    pub batches_per_s: f64,
    /// Operations per second (batches × operations per batch).
    pub ops_per_s: f64,
    /// Batch latency (from the first operation sent to the last reply or the commit).
    pub latency: Option<Summary>,
    /// Transactions aborted and run again (serialization failures, a busy database), over the
    /// whole point (warm-up included).
    pub retries: u64,
    /// Batches that failed.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// Wrong replies.
    pub wrong: u64,
    /// The first wrong reply.
    pub first_wrong: Option<String>,
    /// `None` when the table changed by exactly what was acknowledged, else what differs.
    pub state: Option<String>,
}

/// What transactions cost one system at one client count.
#[derive(Debug, Clone, Serialize)]
pub struct Cost {
    /// The system.
    pub system: SystemKind,
    /// Concurrent clients.
    pub clients: usize,
    /// Batches per second without transactions.
    pub without_per_s: f64,
    /// Transactions per second.
    pub with_per_s: f64,
    /// Throughput lost to transactions, in percent (negative: transactions were faster).
    pub loss_percent: f64,
    /// Median latency added by transactions, in percent.
    pub latency_increase_percent: Option<f64>,
}

/// A system, its version and the isolation each mode gets.
#[derive(Debug, Clone, Serialize)]
pub struct SystemInfo {
    /// The system.
    pub system: SystemKind,
    /// Its version.
    pub version: String,
    /// What a batch without transactions gets.
    pub without: String,
    /// What a transaction gets.
    pub with: String,
}

/// The machine the run took place on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Cores available to this process.
    pub cores: usize,
    /// 1-minute load average before the run.
    pub load_before: Option<f64>,
    /// 1-minute load average after it.
    pub load_after: Option<f64>,
    /// Seconds the run took, loading included.
    pub seconds: f64,
}

/// Everything a mix run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// What was run.
    pub config: Config,
    /// Where.
    pub machine: Machine,
    /// The systems.
    pub systems: Vec<SystemInfo>,
    /// Every point.
    pub points: Vec<Point>,
    /// The cost of transactions per system and client count.
    pub costs: Vec<Cost>,
    /// The scans in process beside DuckDB (None when not run).
    pub scans: Option<super::scans::ScanReport>,
}

impl Report {
    /// The report of `points`, with the costs computed.
    pub fn new(config: Config, machine: Machine, systems: Vec<SystemInfo>, points: Vec<Point>) -> Report {
        let mut costs = Vec::new();
        for without in points.iter().filter(|p| !p.transactions) {
            let Some(with) =
                points.iter().find(|p| p.transactions && p.system == without.system && p.clients == without.clients)
            else {
                continue;
            };
            let loss_percent = if without.batches_per_s > 0.0 {
                (1.0 - with.batches_per_s / without.batches_per_s) * 100.0
            } else {
                0.0
            };
            let latency_increase_percent = match (&without.latency, &with.latency) {
                (Some(a), Some(b)) if a.median_us > 0.0 => Some((b.median_us / a.median_us - 1.0) * 100.0),
                _ => None,
            };
            costs.push(Cost {
                system: without.system,
                clients: without.clients,
                without_per_s: without.batches_per_s,
                with_per_s: with.batches_per_s,
                loss_percent,
                latency_increase_percent,
            });
        }
        Report { config, machine, systems, points, costs, scans: None }
    }

    /// Wrong replies, failed batches and state mismatches, over every point.
    pub fn problems(&self) -> u64 {
        self.points.iter().map(|p| p.wrong + p.errors + u64::from(p.state.is_some())).sum()
    }

    /// Each problem's first description, one line each.
    pub fn problem_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.points {
            let at = format!("{} K={} {}", p.system.name(), p.clients, mode(p.transactions));
            for what in [&p.first_wrong, &p.first_error, &p.state].into_iter().flatten() {
                out.push(format!("{at}: {what}"));
            }
        }
        out
    }

    /// The JSON form.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self)
            .unwrap_or_else(|e| serde_json::Value::String(format!("report does not serialise: {e}")))
    }

    /// The Markdown form: the setup, the points side by side, the cost of transactions.
    pub fn to_markdown(&self) -> String {
        let c = &self.config;
        let m = &self.machine;
        let mut s = String::new();
        let _ = writeln!(s, "# Transactional mix (seed 004)\n");
        let _ = writeln!(
            s,
            "{} records of 10 × 100-byte fields; batches of {} operations (read {}%, update {}%, insert {}%, scan {}% \
             of up to {} records, read-modify-write {}%); {} s per point after {} s; durability {}; {} cores, load \
             {} before, {} after; {:.0} s in all.\n",
            c.size,
            c.ops_per_batch,
            c.mix.read,
            c.mix.update,
            c.mix.insert,
            c.mix.scan,
            c.max_scan,
            c.mix.rmw,
            c.seconds,
            c.warmup_seconds,
            c.durability.name(),
            m.cores,
            load(m.load_before),
            load(m.load_after),
            m.seconds
        );
        let _ = writeln!(s, "| system | version | without transactions | with transactions |\n|---|---|---|---|");
        for i in &self.systems {
            let _ = writeln!(s, "| {} | {} | {} | {} |", i.system.name(), i.version, i.without, i.with);
        }
        let _ = writeln!(
            s,
            "\n| system | K | mode | batches/s | ops/s | median ms | q1–q3 ms | p99 ms | retried | failed | wrong | state |"
        );
        let _ = writeln!(s, "|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---|");
        for p in &self.points {
            let (median, iqr, p99) = match &p.latency {
                Some(l) => (
                    format!("{:.2}", l.median_us / 1000.0),
                    format!("{:.2}–{:.2}", l.q1_us / 1000.0, l.q3_us / 1000.0),
                    format!("{:.2}", l.p99_us / 1000.0),
                ),
                None => ("–".into(), "–".into(), "–".into()),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.1} | {:.0} | {median} | {iqr} | {p99} | {} | {} | {} | {} |",
                p.system.name(),
                p.clients,
                mode(p.transactions),
                p.batches_per_s,
                p.ops_per_s,
                p.retries,
                p.errors,
                p.wrong,
                if p.state.is_none() { "ok" } else { "MISMATCH" }
            );
        }
        let _ = writeln!(
            s,
            "\n## What transactions cost (target: at most {TARGET_LOSS_PERCENT:.0}% of throughput)\n\n| system | K | \
             batches/s without | with | throughput loss | median latency increase | target |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---|");
        for cost in &self.costs {
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} | {:.1} | {:+.1}% | {} | {} |",
                cost.system.name(),
                cost.clients,
                cost.without_per_s,
                cost.with_per_s,
                cost.loss_percent,
                cost.latency_increase_percent.map_or("–".into(), |v| format!("{v:+.1}%")),
                if cost.loss_percent <= TARGET_LOSS_PERCENT { "met" } else { "missed" }
            );
        }
        let ratios = self.ratios();
        if !ratios.is_empty() {
            let _ = writeln!(s, "\n## Espalier beside its peers (batches/s, Espalier ÷ peer)\n");
            let _ = writeln!(s, "| peer | K | without transactions | with transactions |\n|---|---:|---:|---:|");
            for (peer, k, a, b) in ratios {
                let _ = writeln!(s, "| {} | {k} | {a:.2}× | {b:.2}× |", peer.name());
            }
        }
        let problems = self.problem_lines();
        if let Some(scans) = &self.scans {
            s.push_str(&scans.to_markdown());
        }
        if !problems.is_empty() {
            let _ = writeln!(s, "\n## Problems\n");
            for line in problems {
                let _ = writeln!(s, "- {line}");
            }
        }
        s
    }

    /// (peer, K, Espalier ÷ peer without transactions, with).
    fn ratios(&self) -> Vec<(SystemKind, usize, f64, f64)> {
        let ours = |k: usize| self.costs.iter().find(|c| c.system == SystemKind::Espalier && c.clients == k);
        self.costs
            .iter()
            .filter(|c| c.system != SystemKind::Espalier)
            .filter_map(|c| {
                let e = ours(c.clients)?;
                let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
                Some((c.system, c.clients, ratio(e.without_per_s, c.without_per_s), ratio(e.with_per_s, c.with_per_s)))
            })
            .collect()
    }

    /// Box plots of the batch latencies: a panel per system and mode, a box per client count.
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
                        let name = format!("{} {}", p.system.name(), mode(p.transactions));
                        p.latency.as_ref().map(|l| InstructionResult::of_summary(p.system.name(), "mix", &name, l))
                    })
                    .collect();
                (format!("K = {k}"), boxes)
            })
            .collect();
        let series: Vec<Series<'_>> = series
            .iter()
            .map(|(label, results)| Series { label: label.clone(), results: results.iter().collect() })
            .collect();
        svg(&series, "Batch latency, without and with transactions, by number of clients")
    }
}

impl Report {
    /// Throughput against clients (`crate::suite::chart::throughput`): a panel without and
    /// one with transactions, a line per system.
    pub fn throughput_svg(&self) -> String {
        use crate::suite::chart::throughput::{svg, Line, Panel};
        let panels: Vec<Panel> = [false, true]
            .into_iter()
            .map(|transactions| {
                let mut lines: Vec<Line> = Vec::new();
                for p in self.points.iter().filter(|p| p.transactions == transactions) {
                    let label = p.system.name().to_string();
                    match lines.iter_mut().find(|l| l.label == label) {
                        Some(l) => l.points.push((p.clients, p.batches_per_s)),
                        None => lines.push(Line { label, points: vec![(p.clients, p.batches_per_s)] }),
                    }
                }
                Panel { title: mode(transactions).to_string(), lines }
            })
            .collect();
        svg(&panels, "Transactional mix: batches per second by number of clients", "batches")
    }
}

fn mode(transactions: bool) -> &'static str {
    if transactions {
        "transactions"
    } else {
        "batches"
    }
}

fn load(v: Option<f64>) -> String {
    v.map_or("?".into(), |v| format!("{v:.2}"))
}
