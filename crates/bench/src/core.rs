//! The core micro-benchmark: Espalier and SQLite on the same data, operation by operation.
//!
//! Both systems get the same generated data (from one seeded RNG) and the same sequence of
//! random keys. Each operation runs `warmup` times untimed, then `ops` times, each run timed
//! on its own with [`Instant`] into a pre-allocated vector. Percentiles are nearest-rank
//! ([`crate::stats`]) for both systems.
//!
//! **Durability pairing.** Espalier runs with `Durability::None` (commits are written to the log
//! in the OS page cache, never `fsync`ed). SQLite runs file-backed in the same directory with
//! `journal_mode=WAL` and `synchronous=OFF` — the same promise: a process crash loses nothing,
//! a power loss may lose recent commits, and no commit waits for the disk. SQLite gets a page
//! cache large enough for the whole data set (`cache_size`), as Espalier's tables are held in memory from the
//! OS page cache; foreign keys are not enforced by SQLite (its default), while Espalier keeps
//! its reference index — it is not asked to check anything in these operations either.
//!
//! **What each sample contains.** Both sides read their answer into the same Rust values, as
//! an embedded application does: the lookup's number, the navigation's region name (a
//! `String`), the collection's lines as `Vec<(String, i64, i64)>`. Espalier: a plan parsed and
//! checked once, with the `$key` parameter already in the parameter map (setting it is
//! outside the sample), its rows read through `Engine::visit_rows` (the engine collects
//! nothing; the update runs through `Engine::run`, `$v` set outside the sample too). SQLite: a
//! cached prepared statement, binding the parameters, stepping it and reading the columns.
//!
//! **SQLite schema** (the strongest natural mapping): `items` is a `WITHOUT ROWID` table keyed
//! by its text key; groups and regions have integer primary keys which `items.group_id` and
//! `groups.region_id` refer to (so the two-hop join is two rowid lookups); `lines` is a
//! `WITHOUT ROWID` table with primary key `(order_id, key)`, `order_id` being the order's text
//! key, so the 100 lines of an order are one contiguous range in key order — the same input
//! (the order's key) and the same output order as Espalier's sub-dictionary.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use espalier_instruction::plan::Plan;
use espalier_instruction::{parse::ParseOptions, parse_instruction, Engine, ParamValue, RowValue};
use espalier_transaction::{DatabaseOptions, Durability};
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rusqlite::{params, Connection};
use serde::Serialize;

use crate::floor::{self, Floor, FloorConfig};
use crate::stats::Summary;

/// Sizes and repetitions of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Items in the `items` table, the keys of the lookups and commits.
    pub items: usize,
    /// Groups the items refer to (the first hop of the navigation).
    pub groups: usize,
    /// Regions the groups refer to (the second hop of the navigation).
    pub regions: usize,
    /// Orders, each with `lines_per_order` lines (the collection query).
    pub orders: usize,
    /// Lines per order.
    pub lines_per_order: usize,
    /// Timed repetitions per operation and system.
    pub ops: usize,
    /// Untimed repetitions before them.
    pub warmup: usize,
    /// Seed of the RNG that generates the data and the keys.
    pub seed: u64,
    /// Keys (and orders) compared between the systems, before and after the timed runs.
    pub cross_check_samples: usize,
    /// Entries per build instruction (Espalier) and per progress step.
    pub build_batch: usize,
    /// Draw progress bars on stderr.
    pub progress: bool,
    /// Where the temporary directory with both databases is made (default: the system's).
    pub dir: Option<PathBuf>,
    /// Size of the buffer the floor's memory-latency probe chases pointers through, in bytes.
    pub memory_probe_bytes: usize,
    /// Dependent loads the memory-latency probe times.
    pub memory_loads: usize,
    /// Samples of the floor's 4 KB write and `fsync`.
    pub fsyncs: usize,
    /// SQLite `locking_mode=EXCLUSIVE` (off by default): the connection keeps its file locks
    /// instead of taking and releasing them with `fcntl` around every transaction — a
    /// single-process tuning that Espalier's snapshot readers do not need.
    pub sqlite_exclusive: bool,
    /// Measure only these operations (names from [`OPS`]); empty means all. For profiling one
    /// operation without the others in the samples.
    pub only: Vec<String>,
}

impl Config {
    /// The full run: 100 000 items, 1 000 orders × 100 lines, 20 000 samples after 1 000 warm-up.
    pub fn full() -> Config {
        Config {
            items: 100_000,
            groups: 1_000,
            regions: 50,
            orders: 1_000,
            lines_per_order: 100,
            ops: 20_000,
            warmup: 1_000,
            seed: 42,
            cross_check_samples: 500,
            build_batch: 5_000,
            progress: true,
            dir: None,
            memory_probe_bytes: 64 << 20,
            memory_loads: 10_000_000,
            fsyncs: 20,
            sqlite_exclusive: false,
            only: Vec::new(),
        }
    }

    /// CI size: 10 000 items, 100 orders × 100 lines, 500 samples after 50 warm-up.
    pub fn quick() -> Config {
        Config {
            items: 10_000,
            orders: 100,
            ops: 500,
            warmup: 50,
            cross_check_samples: 200,
            memory_loads: 2_000_000,
            ..Config::full()
        }
    }
}

impl Config {
    /// Whether operation `name` is measured in this run.
    pub fn runs(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == name)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::full()
    }
}

/// Why a core benchmark run failed, as a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchError(pub String);

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

fn err(context: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError(format!("{context}: {e}"))
}

/// The operations, in the order they run.
pub const OPS: [&str; 4] = ["key_lookup", "update_commit", "two_hop_navigation", "collection_query"];
/// The system name of Espalier in the results.
pub const ESPALIER: &str = "espalier";
/// The system name of SQLite in the results.
pub const SQLITE: &str = "sqlite";

/// One operation on one system (the JSON record).
#[derive(Debug, Clone, Serialize)]
pub struct OpResult {
    /// The operation, one of [`OPS`].
    pub name: String,
    /// The system, [`ESPALIER`] or [`SQLITE`].
    pub system: String,
    /// The order statistics of the timed samples.
    #[serde(flatten)]
    pub summary: Summary,
}

/// How one operation compares between SQLite and Espalier.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// The operation, one of [`OPS`].
    pub name: String,
    /// SQLite's median over Espalier's: above 1 means Espalier is faster.
    pub sqlite_over_espalier: f64,
}

/// A performance goal and whether this run met it.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// The goal, in words.
    pub target: String,
    /// What this run measured for it, with its unit.
    pub measured: String,
    /// Whether the measurement meets the goal.
    pub pass: bool,
}

/// How long one system took to load the data set.
#[derive(Debug, Clone, Serialize)]
pub struct Build {
    /// The system, [`ESPALIER`] or [`SQLITE`].
    pub system: String,
    /// The wall time of the load, in seconds.
    pub seconds: f64,
}

/// The outcome of a core benchmark run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The sizes and repetitions the run used.
    pub config: Config,
    /// The version of the SQLite library linked.
    pub sqlite_version: String,
    /// The directory that held both databases.
    pub directory: String,
    /// The load time of each system.
    pub build: Vec<Build>,
    /// Each measured operation on each system.
    pub results: Vec<OpResult>,
    /// SQLite's median over Espalier's, per operation.
    pub ratios: Vec<Ratio>,
    /// The performance goals and whether they were met.
    pub targets: Vec<Target>,
    /// The machine's floor, measured in the same run.
    pub floor: Floor,
    /// Values compared between the systems (each cross-check pass), all equal.
    pub cross_checked: usize,
}

impl Report {
    /// The result of operation `name` on `system`, if it was measured.
    pub fn result(&self, name: &str, system: &str) -> Option<&OpResult> {
        self.results.iter().find(|r| r.name == name && r.system == system)
    }

    /// SQLite's median over Espalier's for operation `name`, if it was measured.
    pub fn ratio(&self, name: &str) -> Option<f64> {
        self.ratios.iter().find(|r| r.name == name).map(|r| r.sqlite_over_espalier)
    }

    /// The report as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report serialises")
    }

    /// The report as Markdown: results, ratios, targets, floor, build.
    pub fn to_markdown(&self) -> String {
        let c = &self.config;
        let mut s = String::new();
        let _ = writeln!(s, "## Espalier core benchmark\n");
        let _ = writeln!(
            s,
            "{} items, {} groups, {} regions, {} orders × {} lines; {} samples per op after {} warm-up; seed {}; \
             SQLite {} (WAL, synchronous=OFF{}) vs Espalier (durability None); directory {}\n",
            c.items,
            c.groups,
            c.regions,
            c.orders,
            c.lines_per_order,
            c.ops,
            c.warmup,
            c.seed,
            self.sqlite_version,
            if c.sqlite_exclusive { ", locking_mode=EXCLUSIVE" } else { "" },
            self.directory
        );
        let _ = writeln!(s, "| op | system | count | min µs | q1 µs | median µs | q3 µs | p99 µs | max µs | mean µs |");
        let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
        for r in &self.results {
            let m = &r.summary;
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                r.name, r.system, m.count, m.min_us, m.q1_us, m.median_us, m.q3_us, m.p99_us, m.max_us, m.mean_us
            );
        }
        let _ = writeln!(s, "\n| op | SQLite / Espalier (medians) |\n|---|--:|");
        for r in &self.ratios {
            let _ = writeln!(s, "| {} | {:.2}× |", r.name, r.sqlite_over_espalier);
        }
        let _ = writeln!(s, "\n| target | measured | |\n|---|---|---|");
        for t in &self.targets {
            let _ = writeln!(s, "| {} | {} | {} |", t.target, t.measured, if t.pass { "PASS" } else { "MISS" });
        }
        let f = &self.floor;
        let _ = writeln!(s, "\n| machine floor | value |\n|---|--:|");
        let _ = writeln!(s, "| empty timed sample (Instant × 2), median | {:.3} µs |", f.empty_sample.median_us);
        let _ = writeln!(s, "| empty loop iteration | {:.2} ns |", f.empty_loop_ns);
        let _ = writeln!(
            s,
            "| memory latency (pointer chase, {} MB) | {:.1} ns/load |",
            f.memory_probe_bytes >> 20,
            f.memory_latency_ns
        );
        let _ = writeln!(
            s,
            "| 4 KB write + fsync, median of {} (min {:.1}, max {:.1}) | {:.1} µs |",
            f.fsync_4k.count, f.fsync_4k.min_us, f.fsync_4k.max_us, f.fsync_4k.median_us
        );
        let _ = writeln!(s, "\n| build | seconds |\n|---|--:|");
        for b in &self.build {
            let _ = writeln!(s, "| {} | {:.2} |", b.system, b.seconds);
        }
        let _ = writeln!(s, "\nCross-check: {} values equal in both systems.", self.cross_checked);
        s
    }
}

/// The generated data set, shared by both builds and the cross-check.
struct Data {
    item_keys: Vec<String>,
    item_value: Vec<i64>,
    item_group: Vec<usize>,
    group_keys: Vec<String>,
    group_region: Vec<usize>,
    region_keys: Vec<String>,
    region_names: Vec<String>,
    order_keys: Vec<String>,
    line_keys: Vec<String>,
    /// `[order][line] = (a, b)`
    lines: Vec<Vec<(i64, i64)>>,
}

impl Data {
    fn generate(c: &Config) -> Data {
        let mut rng = StdRng::seed_from_u64(c.seed);
        let regions = c.regions.max(1);
        let groups = c.groups.max(1);
        Data {
            item_keys: (0..c.items).map(|i| format!("k{i}")).collect(),
            item_value: (0..c.items).map(|_| rng.random_range(0..1_000_000)).collect(),
            item_group: (0..c.items).map(|_| rng.random_range(0..groups)).collect(),
            group_keys: (0..groups).map(|i| format!("g{i}")).collect(),
            group_region: (0..groups).map(|_| rng.random_range(0..regions)).collect(),
            region_keys: (0..regions).map(|i| format!("r{i}")).collect(),
            region_names: (0..regions).map(|i| format!("Region {i} \"{}\"", i * 37 % 101)).collect(),
            order_keys: (0..c.orders).map(|i| format!("o{i}")).collect(),
            line_keys: (0..c.lines_per_order).map(|j| format!("l{j:03}")).collect(),
            lines: (0..c.orders)
                .map(|_| {
                    (0..c.lines_per_order)
                        .map(|_| (rng.random_range(-1_000..1_000_000), rng.random_range(0..1_000)))
                        .collect()
                })
                .collect(),
        }
    }

    fn total(&self) -> u64 {
        (self.item_keys.len()
            + self.group_keys.len()
            + self.region_keys.len()
            + self.lines.len() * self.line_keys.len()) as u64
    }
}

const SCHEMA: &str = r#"
root (
    'Regions' -> dictionary ( 'Name' -> text )
    'Groups' -> dictionary ( 'Region' -> reference ( .^ . 'Regions' ) )
    'Items' -> dictionary (
        'Value' -> number
        'Group' -> reference ( .^ . 'Groups' )
    )
    'Orders' -> dictionary (
        'Lines' -> dictionary ( 'A' -> number 'B' -> number )
    )
)
"#;

const Q_LOOKUP: &str = "collection . 'Items' : $key select 'v' -> number : 'Value'";
const Q_UPDATE: &str = "update . 'Items' : $key ( 'Value' -> number $v )";
const Q_NAVIGATE: &str = "collection . 'Items' : $key select 'r' -> > 'Group' > 'Region' text : 'Name'";
const Q_COLLECTION: &str = "collection . 'Orders' : $key select . 'Lines' 'a' -> number : 'A' 'b' -> number : 'B'";

const S_LOOKUP: &str = "SELECT value FROM items WHERE key = ?1";
const S_UPDATE: &str = "UPDATE items SET value = ?1 WHERE key = ?2";
const S_NAVIGATE: &str = "SELECT r.name FROM items i JOIN groups g ON g.id = i.group_id \
                          JOIN regions r ON r.id = g.region_id WHERE i.key = ?1";
const S_COLLECTION: &str = "SELECT key, a, b FROM lines WHERE order_id = ?1 ORDER BY key";

/// Text literal in the instruction language.
fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn bar(c: &Config, len: u64, prefix: &str) -> ProgressBar {
    crate::progress::bar(c.progress, len, prefix, "{prefix:>18} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}")
}

struct Espalier {
    engine: Engine,
    lookup: Plan,
    update: Plan,
    navigate: Plan,
    collection: Plan,
    params: HashMap<String, ParamValue>,
}

impl Espalier {
    fn plan(engine: &Engine, text: &str) -> Result<Plan, BenchError> {
        let instr = parse_instruction(text, ParseOptions::CLIENT).map_err(|e| err(text, e))?;
        engine.check(&instr, Some(text)).map_err(|e| err(text, e))
    }

    fn build(path: &Path, data: &Data, c: &Config) -> Result<Espalier, BenchError> {
        let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
        let engine = Engine::create(path, SCHEMA, opts).map_err(|e| err("creating the Espalier database", e))?;
        let pb = bar(c, data.total(), "build espalier");
        let none = HashMap::new();
        let exec = |text: &str| -> Result<(), BenchError> {
            engine.execute_text(text, &none).map(drop).map_err(|e| {
                let shown: String = text.chars().take(200).collect();
                err(&format!("building Espalier data ({shown} …)"), e)
            })
        };
        let mut text = String::from("update (");
        for (k, name) in data.region_keys.iter().zip(&data.region_names) {
            let _ = write!(text, " 'Regions' -> dictionary {} ( 'Name' -> text {} )", lit(k), lit(name));
        }
        text.push_str(" )");
        exec(&text)?;
        pb.inc(data.region_keys.len() as u64);
        for chunk in data.group_keys.iter().zip(&data.group_region).collect::<Vec<_>>().chunks(c.build_batch.max(1)) {
            let mut text = String::from("update (");
            for (k, &r) in chunk {
                let _ = write!(
                    text,
                    " 'Groups' -> dictionary {} ( 'Region' -> reference {} )",
                    lit(k),
                    lit(&data.region_keys[r])
                );
            }
            text.push_str(" )");
            exec(&text)?;
            pb.inc(chunk.len() as u64);
        }
        for start in (0..data.item_keys.len()).step_by(c.build_batch.max(1)) {
            let end = (start + c.build_batch.max(1)).min(data.item_keys.len());
            let mut text = String::from("update (");
            for i in start..end {
                let _ = write!(
                    text,
                    " 'Items' -> dictionary {} ( 'Value' -> number {} 'Group' -> reference {} )",
                    lit(&data.item_keys[i]),
                    data.item_value[i],
                    lit(&data.group_keys[data.item_group[i]])
                );
            }
            text.push_str(" )");
            exec(&text)?;
            pb.inc((end - start) as u64);
        }
        let orders_per_batch = (c.build_batch / data.line_keys.len().max(1)).max(1);
        for start in (0..data.order_keys.len()).step_by(orders_per_batch) {
            let end = (start + orders_per_batch).min(data.order_keys.len());
            let mut text = String::from("update (");
            for o in start..end {
                let _ = write!(text, " 'Orders' -> dictionary {} (", lit(&data.order_keys[o]));
                for (l, &(a, b)) in data.line_keys.iter().zip(&data.lines[o]) {
                    let _ = write!(text, " 'Lines' -> dictionary {} ( 'A' -> number {a} 'B' -> number {b} )", lit(l));
                }
                text.push_str(" )");
            }
            text.push_str(" )");
            exec(&text)?;
            pb.inc(((end - start) * data.line_keys.len()) as u64);
        }
        pb.finish_and_clear();
        let mut params = HashMap::new();
        params.insert("key".to_string(), ParamValue::Text(String::new()));
        params.insert("v".to_string(), ParamValue::Int(0));
        Ok(Espalier {
            lookup: Self::plan(&engine, Q_LOOKUP)?,
            update: Self::plan(&engine, Q_UPDATE)?,
            navigate: Self::plan(&engine, Q_NAVIGATE)?,
            collection: Self::plan(&engine, Q_COLLECTION)?,
            engine,
            params,
        })
    }

    fn set_key(&mut self, key: &str) {
        if let Some(ParamValue::Text(t)) = self.params.get_mut("key") {
            t.clear();
            t.push_str(key);
        }
    }

    fn set_v(&mut self, v: i64) {
        self.params.insert("v".to_string(), ParamValue::Int(v));
    }

    /// Reads the rows of `plan` (for the key set before) as an embedded application does,
    /// each handed to `row` with its key path and values ([`Engine::visit_rows`]: the engine
    /// collects nothing), as SQLite's side steps its statement.
    fn visit(&self, plan: &Plan, row: &mut dyn FnMut(&[String], &[RowValue<'_>])) -> Result<u64, String> {
        self.engine
            .visit_rows(plan, &self.params, None, &mut |key, values| {
                row(key, values);
                ControlFlow::Continue(())
            })
            .map_err(|e| e.to_string())
    }

    /// The one value of the one row of `plan`, as `read` takes it.
    fn one<T>(&self, plan: &Plan, read: impl Fn(&RowValue<'_>) -> Option<T>) -> Result<T, String> {
        let (mut value, mut rows) = (None, 0);
        self.visit(plan, &mut |_, values| {
            rows += 1;
            value = values.first().and_then(&read);
        })?;
        match value {
            Some(v) if rows == 1 => Ok(v),
            _ => Err(format!("expected one row with one value, got {rows} rows")),
        }
    }

    /// The value of the item (the key lookup).
    fn value(&self) -> Result<i64, String> {
        self.one(&self.lookup, |v| v.as_i64())
    }

    /// The name of the item's group's region (the two-hop navigation).
    fn region(&self) -> Result<String, String> {
        self.one(&self.navigate, |v| v.as_str().map(str::to_string))
    }

    /// The order's lines: key, `'A'`, `'B'` (the collection query).
    fn lines(&self) -> Result<Vec<(String, i64, i64)>, String> {
        let mut lines = Vec::new();
        let mut wrong = None;
        self.visit(&self.collection, &mut |key, values| match (key, values) {
            ([k], [a, b]) => lines.push((k.clone(), a.as_i64().unwrap_or(i64::MIN), b.as_i64().unwrap_or(i64::MIN))),
            _ => wrong = Some(format!("a row of key {key:?} and values {values:?}")),
        })?;
        wrong.map_or(Ok(lines), Err)
    }
}

struct Sqlite {
    conn: Connection,
}

impl Sqlite {
    fn build(path: &Path, data: &Data, c: &Config) -> Result<Sqlite, BenchError> {
        let e = |x: rusqlite::Error| err("building SQLite data", x);
        let conn = Connection::open(path).map_err(e)?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(e)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(BenchError(format!("SQLite refused WAL mode (got {mode})")));
        }
        if c.sqlite_exclusive {
            // Keeps the file locks for the connection's lifetime: no fcntl per transaction.
            let mode: String = conn.query_row("PRAGMA locking_mode = EXCLUSIVE", [], |r| r.get(0)).map_err(e)?;
            if !mode.eq_ignore_ascii_case("exclusive") {
                return Err(BenchError(format!("SQLite refused exclusive locking (got {mode})")));
            }
        }
        conn.execute_batch(
            "PRAGMA synchronous = OFF;
             PRAGMA cache_size = -1048576;
             CREATE TABLE regions (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, name TEXT NOT NULL);
             CREATE TABLE groups (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE,
                                  region_id INTEGER NOT NULL REFERENCES regions(id));
             CREATE TABLE items (key TEXT PRIMARY KEY, value INTEGER NOT NULL,
                                 group_id INTEGER NOT NULL REFERENCES groups(id)) WITHOUT ROWID;
             CREATE TABLE orders (key TEXT PRIMARY KEY) WITHOUT ROWID;
             CREATE TABLE lines (order_id TEXT NOT NULL REFERENCES orders(key), key TEXT NOT NULL,
                                 a INTEGER NOT NULL, b INTEGER NOT NULL,
                                 PRIMARY KEY (order_id, key)) WITHOUT ROWID;",
        )
        .map_err(e)?;
        let pb = bar(c, data.total(), "build sqlite");
        let tx = conn.unchecked_transaction().map_err(e)?;
        {
            let mut ins = tx.prepare("INSERT INTO regions (id, key, name) VALUES (?1, ?2, ?3)").map_err(e)?;
            for (i, (k, n)) in data.region_keys.iter().zip(&data.region_names).enumerate() {
                ins.execute(params![i as i64, k, n]).map_err(e)?;
            }
            pb.inc(data.region_keys.len() as u64);
            let mut ins = tx.prepare("INSERT INTO groups (id, key, region_id) VALUES (?1, ?2, ?3)").map_err(e)?;
            for (i, (k, &r)) in data.group_keys.iter().zip(&data.group_region).enumerate() {
                ins.execute(params![i as i64, k, r as i64]).map_err(e)?;
            }
            pb.inc(data.group_keys.len() as u64);
            let mut ins = tx.prepare("INSERT INTO items (key, value, group_id) VALUES (?1, ?2, ?3)").map_err(e)?;
            for i in 0..data.item_keys.len() {
                ins.execute(params![data.item_keys[i], data.item_value[i], data.item_group[i] as i64]).map_err(e)?;
                if i % 1000 == 999 {
                    pb.inc(1000);
                }
            }
            pb.inc((data.item_keys.len() % 1000) as u64);
            let mut ins_o = tx.prepare("INSERT INTO orders (key) VALUES (?1)").map_err(e)?;
            let mut ins_l = tx.prepare("INSERT INTO lines (order_id, key, a, b) VALUES (?1, ?2, ?3, ?4)").map_err(e)?;
            for (o, ok) in data.order_keys.iter().enumerate() {
                ins_o.execute(params![ok]).map_err(e)?;
                for (l, &(a, b)) in data.line_keys.iter().zip(&data.lines[o]) {
                    ins_l.execute(params![ok, l, a, b]).map_err(e)?;
                }
                pb.inc(data.line_keys.len() as u64);
            }
        }
        tx.commit().map_err(e)?;
        // No ANALYZE: the plans are right without statistics (primary-key searches), and with
        // STAT4 statistics SQLite re-prepares a join statement on every new parameter value
        // (sqlite3Reprepare from sqlite3_step), which cost the navigation query ~7 µs.
        pb.finish_and_clear();
        conn.set_prepared_statement_cache_capacity(16);
        Ok(Sqlite { conn })
    }

    fn lookup(&self, key: &str) -> rusqlite::Result<i64> {
        self.conn.prepare_cached(S_LOOKUP)?.query_row([key], |r| r.get(0))
    }

    fn navigate(&self, key: &str) -> rusqlite::Result<String> {
        self.conn.prepare_cached(S_NAVIGATE)?.query_row([key], |r| r.get(0))
    }

    fn collection(&self, order: &str) -> rusqlite::Result<Vec<(String, i64, i64)>> {
        let mut stmt = self.conn.prepare_cached(S_COLLECTION)?;
        let rows = stmt.query_map([order], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect()
    }
}

/// Compares what both systems say for a sample of items and orders; returns how many values
/// were compared.
fn cross_check(
    esp: &mut Espalier,
    sql: &Sqlite,
    data: &Data,
    c: &Config,
    seed: u64,
    when: &str,
) -> Result<usize, BenchError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut compared = 0;
    let mismatch = |what: &str, key: &str, e: String, s: String| {
        BenchError(format!("cross-check {when}: {what} of {key:?}: Espalier says {e}, SQLite says {s}"))
    };
    for _ in 0..c.cross_check_samples.min(data.item_keys.len()) {
        let key = &data.item_keys[rng.random_range(0..data.item_keys.len())];
        esp.set_key(key);
        let e = esp.value().map_err(|x| err(key, x))?;
        let s = sql.lookup(key).map_err(|x| err("SQLite lookup", x))?;
        if e != s {
            return Err(mismatch("value", key, e.to_string(), s.to_string()));
        }
        let e = esp.region().map_err(|x| err(key, x))?;
        let s = sql.navigate(key).map_err(|x| err("SQLite navigation", x))?;
        if e != s {
            return Err(mismatch("region name", key, format!("{e:?}"), format!("{s:?}")));
        }
        compared += 2;
    }
    for _ in 0..c.cross_check_samples.min(data.order_keys.len()) {
        let key = &data.order_keys[rng.random_range(0..data.order_keys.len())];
        esp.set_key(key);
        let e = esp.lines().map_err(|x| err(key, x))?;
        let s = sql.collection(key).map_err(|x| err("SQLite collection", x))?;
        if e.len() != data.line_keys.len() || e != s {
            return Err(mismatch("lines", key, format!("{e:?}"), format!("{s:?}")));
        }
        compared += e.len() * 3;
    }
    Ok(compared)
}

/// Runs `op` for every index in `warm` untimed, then for every index in `timed` timed.
/// `op(i, timed)` returns the sample when `timed`.
fn measure(
    warm: &[usize],
    timed: &[usize],
    pb: &ProgressBar,
    mut op: impl FnMut(usize) -> Result<Duration, BenchError>,
) -> Result<Summary, BenchError> {
    for &i in warm {
        op(i)?;
    }
    let mut samples = Vec::with_capacity(timed.len());
    for (n, &i) in timed.iter().enumerate() {
        samples.push(op(i)?);
        if n % 256 == 255 {
            pb.inc(256);
        }
    }
    pb.inc((timed.len() % 256) as u64);
    if samples.is_empty() {
        return Err(BenchError("no samples (ops = 0)".into()));
    }
    Ok(Summary::of(&mut samples))
}

/// Times one call to `f`, dropping its result inside the sample; fails on an error.
#[inline(always)]
fn time<T, E: std::fmt::Display>(what: &str, f: impl FnOnce() -> Result<T, E>) -> Result<Duration, BenchError> {
    let t = Instant::now();
    let r = black_box(f()).map(drop);
    let d = t.elapsed();
    r.map(|()| d).map_err(|e| err(what, e))
}

/// Builds both databases, cross-checks them, measures every operation, measures the floor.
pub fn run(c: &Config) -> Result<Report, BenchError> {
    if c.items == 0 || c.orders == 0 || c.lines_per_order == 0 {
        return Err(BenchError("items, orders and lines per order must be at least 1".into()));
    }
    if let Some(unknown) = c.only.iter().find(|o| !OPS.contains(&o.as_str())) {
        return Err(BenchError(format!("unknown operation {unknown:?}: the operations are {}", OPS.join(", "))));
    }
    let base = c.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("espalier-bench-core-")
        .tempdir_in(&base)
        .map_err(|e| err(&format!("making a temporary directory in {}", base.display()), e))?;
    let _cleanup = crate::interrupt::on_interrupt(tmp.path().to_path_buf(), None);
    let data = Data::generate(c);

    let t = Instant::now();
    let mut esp = Espalier::build(&tmp.path().join("espalier"), &data, c)?;
    let esp_build = t.elapsed();
    let t = Instant::now();
    let sql = Sqlite::build(&tmp.path().join("sqlite.db"), &data, c)?;
    let sql_build = t.elapsed();
    if c.progress {
        eprintln!("built: Espalier {}, SQLite {}", floor::fmt_duration(esp_build), floor::fmt_duration(sql_build));
    }

    let mut cross_checked = cross_check(&mut esp, &sql, &data, c, c.seed ^ 0xc0ff_ee00, "after build")?;

    // Key and value sequences, one per operation, the same for both systems.
    let mut rng = StdRng::seed_from_u64(c.seed ^ 0x5eed);
    let mut draw = |n: usize, bound: usize| -> Vec<usize> { (0..n).map(|_| rng.random_range(0..bound)).collect() };
    let n_items = data.item_keys.len();
    let n_orders = data.order_keys.len();
    let keys: Vec<(Vec<usize>, Vec<usize>)> = OPS
        .iter()
        .map(|&op| {
            let bound = if op == "collection_query" { n_orders } else { n_items };
            (draw(c.warmup, bound), draw(c.ops, bound))
        })
        .collect();
    let new_values: Vec<i64> = {
        let mut rng = StdRng::seed_from_u64(c.seed ^ 0x7a1e);
        (0..c.warmup + c.ops).map(|_| rng.random_range(0..1_000_000)).collect()
    };
    // Both systems write the same values to the same keys in the same order, so they still
    // agree afterwards.
    let measured_ops = OPS.iter().filter(|o| c.runs(o)).count();
    let pb = bar(c, (measured_ops * 2 * c.ops) as u64, "measure");
    let mut results = Vec::new();

    let sample_result = |name: &str, system: &str, summary: Summary| OpResult {
        name: name.to_string(),
        system: system.to_string(),
        summary,
    };

    // 1. key lookup
    if c.runs(OPS[0]) {
        let (warm, timed) = &keys[0];
        let s = measure(warm, timed, &pb, |i| {
            esp.set_key(&data.item_keys[i]);
            time("Espalier lookup", || esp.value())
        })?;
        results.push(sample_result(OPS[0], ESPALIER, s));
        let mut stmt = sql.conn.prepare_cached(S_LOOKUP).map_err(|e| err(S_LOOKUP, e))?;
        let s = measure(warm, timed, &pb, |i| {
            let key = data.item_keys[i].as_str();
            time("SQLite lookup", || stmt.query_row([key], |r| r.get::<_, i64>(0)))
        })?;
        results.push(sample_result(OPS[0], SQLITE, s));
    }
    // 2. one-property update, one commit each
    if c.runs(OPS[1]) {
        let (warm, timed) = &keys[1];
        let plan = esp.update.clone();
        let mut n = 0;
        let s = measure(warm, timed, &pb, |i| {
            esp.set_key(&data.item_keys[i]);
            esp.set_v(new_values[n]);
            n += 1;
            time("Espalier update", || esp.engine.run(&plan, &esp.params, None))
        })?;
        results.push(sample_result(OPS[1], ESPALIER, s));
        let mut stmt = sql.conn.prepare_cached(S_UPDATE).map_err(|e| err(S_UPDATE, e))?;
        let mut n = 0;
        let s = measure(warm, timed, &pb, |i| {
            let key = data.item_keys[i].as_str();
            let v = new_values[n];
            n += 1;
            time("SQLite update", || match stmt.execute(params![v, key]) {
                Ok(1) => Ok(()),
                Ok(n) => Err(format!("updated {n} rows")),
                Err(e) => Err(e.to_string()),
            })
        })?;
        results.push(sample_result(OPS[1], SQLITE, s));
    }
    // 3. two-hop reference navigation
    if c.runs(OPS[2]) {
        let (warm, timed) = &keys[2];
        let s = measure(warm, timed, &pb, |i| {
            esp.set_key(&data.item_keys[i]);
            time("Espalier navigation", || esp.region())
        })?;
        results.push(sample_result(OPS[2], ESPALIER, s));
        let mut stmt = sql.conn.prepare_cached(S_NAVIGATE).map_err(|e| err(S_NAVIGATE, e))?;
        let s = measure(warm, timed, &pb, |i| {
            let key = data.item_keys[i].as_str();
            time("SQLite navigation", || stmt.query_row([key], |r| r.get::<_, String>(0)))
        })?;
        results.push(sample_result(OPS[2], SQLITE, s));
    }
    // 4. one order's lines
    if c.runs(OPS[3]) {
        let (warm, timed) = &keys[3];
        let expected = data.line_keys.len();
        let s = measure(warm, timed, &pb, |i| {
            esp.set_key(&data.order_keys[i]);
            time("Espalier collection", || match esp.lines() {
                Ok(lines) if lines.len() == expected => Ok(lines),
                Ok(lines) => Err(format!("{} lines, not {expected}", lines.len())),
                Err(e) => Err(e),
            })
        })?;
        results.push(sample_result(OPS[3], ESPALIER, s));
        let mut stmt = sql.conn.prepare_cached(S_COLLECTION).map_err(|e| err(S_COLLECTION, e))?;
        let s = measure(warm, timed, &pb, |i| {
            let key = data.order_keys[i].as_str();
            time("SQLite collection", || {
                let rows =
                    stmt.query_map([key], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)))?;
                let rows: Vec<_> = rows.collect::<rusqlite::Result<_>>()?;
                if rows.len() == expected {
                    Ok(rows)
                } else {
                    Err(rusqlite::Error::InvalidQuery)
                }
            })
        })?;
        results.push(sample_result(OPS[3], SQLITE, s));
    }
    pb.finish_and_clear();

    cross_checked += cross_check(&mut esp, &sql, &data, c, c.seed ^ 0xdead_beef, "after the timed runs")?;

    let floor = floor::measure(
        tmp.path(),
        &FloorConfig {
            samples: c.ops.max(1),
            memory_probe_bytes: c.memory_probe_bytes,
            memory_loads: c.memory_loads,
            fsyncs: c.fsyncs.max(1),
            seed: c.seed,
        },
    )
    .map_err(|e| err("measuring the machine floor", e))?;

    let median = |name: &str, system: &str| {
        results.iter().find(|r| r.name == name && r.system == system).map(|r| r.summary.median_us).unwrap_or(f64::NAN)
    };
    let ratios: Vec<Ratio> = OPS
        .iter()
        .filter(|o| c.runs(o))
        .map(|&name| Ratio {
            name: name.to_string(),
            sqlite_over_espalier: median(name, SQLITE) / median(name, ESPALIER),
        })
        .collect();
    let ratio = |name: &str| ratios.iter().find(|r| r.name == name).map(|r| r.sqlite_over_espalier).unwrap_or(f64::NAN);
    let mut targets = vec![
        Target {
            target: "update commit median ≤ 5 µs".into(),
            measured: format!("{:.2} µs", median("update_commit", ESPALIER)),
            pass: median("update_commit", ESPALIER) <= 5.0,
        },
        Target {
            target: "update commit ≥ 2× faster than SQLite".into(),
            measured: format!("{:.2}×", ratio("update_commit")),
            pass: ratio("update_commit") >= 2.0,
        },
        Target {
            target: "key lookup median ≤ 1 µs".into(),
            measured: format!("{:.2} µs", median("key_lookup", ESPALIER)),
            pass: median("key_lookup", ESPALIER) <= 1.0,
        },
        Target {
            target: "key lookup ≥ 2× faster than SQLite".into(),
            measured: format!("{:.2}×", ratio("key_lookup")),
            pass: ratio("key_lookup") >= 2.0,
        },
    ];
    // A target about an operation this run skipped (`only`) is left out rather than failed.
    targets.retain(|t| OPS.iter().any(|o| c.runs(o) && t.target.starts_with(&o.replace('_', " "))));

    let directory = tmp.path().display().to_string();
    drop(esp);
    drop(sql);
    Ok(Report {
        config: c.clone(),
        sqlite_version: rusqlite::version().to_string(),
        directory,
        build: vec![
            Build { system: ESPALIER.into(), seconds: esp_build.as_secs_f64() },
            Build { system: SQLITE.into(), seconds: sql_build.as_secs_f64() },
        ],
        results,
        ratios,
        targets,
        floor,
        cross_checked,
    })
}
