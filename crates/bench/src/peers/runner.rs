//! Runs a suite: builds the data in Espalier, loads the peers from it, checks the load, then
//! measures every operation on every system with the same parameters, cross-checking each
//! result against Espalier's.
//!
//! **What a sample contains.** Espalier: `Engine::run` of each pre-checked plan of the
//! operation with its parameter map (built before the clock starts), keeping the replies.
//! SQLite and PostgreSQL: the operation's SQL function — binding, running each cached
//! prepared statement, reading and converting the rows into the same result shape. Each
//! system runs all repetitions of an operation (warm-up, then timed) before the next system;
//! every system sees the same parameter sequence, so their data stays equal.
//!
//! **Cross-checks.** After each repetition (outside the sample): query results must equal
//! Espalier's (total, columns, keys, values, order); after a mutation, the touched node is
//! read back from each system ([`NodeReader`] on the SQL side) and must equal Espalier's `get`.
//! After the load, every table's row count must equal Espalier's entry count, and a sample of
//! entries of each top-level dictionary is compared node by node.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use espalier_instruction::parse::ParseOptions;
use espalier_instruction::plan::Plan;
use espalier_instruction::{parse_instruction, Engine, Reply};
use espalier_schema::PropertyKind;
use espalier_transaction::DatabaseOptions;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::Value;

use super::dataset;
use super::pg_server::{PgServer, ServerOptions};
use super::postgres::PgPeer;
use super::relational::{first_difference, ident, NodeReader, RelationalSchema, SqlConn, SqlValue, TableKind};
use super::sqlite::SqlitePeer;
use super::workload::{self, DataIndex, Op, Outcome, Params};
use super::{DurabilityPairing, PeerError, Suite, System};
use crate::stats::Summary;
use crate::suite::Scale;

/// Most repetitions (warm-up and timed) of one operation.
const MAX_REPETITIONS: usize = 10_000_000;

/// What a peer run measures and how.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// The benchmark set to run.
    pub suite: Suite,
    /// Multiplies the outermost collections of the benchmark file (B7 is B6 × 100).
    pub scale: f64,
    /// Multiplies the collections inside entries (modifications, added materials).
    pub nested_scale: f64,
    /// Timed repetitions per operation and system.
    pub ops: usize,
    /// Untimed repetitions before them.
    pub warmup: usize,
    /// Espalier first; it is the reference every peer is cross-checked against.
    pub systems: Vec<System>,
    /// How every system makes commits durable.
    pub durability: DurabilityPairing,
    /// Seed of the RNG that draws the operations' parameters.
    pub seed: u64,
    /// Where the temporary databases go (default: the system's temp directory).
    pub dir: Option<PathBuf>,
    /// Draw progress bars on stderr.
    pub progress: bool,
    /// Entries of each top-level dictionary compared node by node after the load.
    pub verify_sample: usize,
    /// PostgreSQL `shared_buffers`.
    pub pg_shared_buffers: String,
    /// Keep the directory with Espalier's and SQLite's databases (PostgreSQL's server is
    /// always stopped and deleted).
    pub keep: bool,
    /// Espalier's in-memory bound (`DatabaseOptions::memory_bytes`; `None`: the default).
    pub memory_bytes: Option<u64>,
}

impl Config {
    /// The defaults for `suite`: scale 1, 1 000 samples after 100 warm-up, all systems, no durability.
    pub fn new(suite: Suite) -> Config {
        Config {
            suite,
            scale: 1.0,
            nested_scale: 1.0,
            ops: 1000,
            warmup: 100,
            systems: System::ALL.to_vec(),
            durability: DurabilityPairing::None,
            seed: 42,
            dir: None,
            progress: true,
            verify_sample: 20,
            pg_shared_buffers: "1GB".into(),
            keep: false,
            memory_bytes: None,
        }
    }

    /// The outer and nested scale as a [`Scale`].
    pub fn scale(&self) -> Scale {
        Scale { outer: self.scale, nested: self.nested_scale }
    }

    fn validate(&self) -> Result<(), PeerError> {
        if self.systems.first() != Some(&System::Espalier) {
            return Err(PeerError::Invalid(
                "the systems must start with espalier: it is the reference every peer is cross-checked against".into(),
            ));
        }
        for (i, s) in self.systems.iter().enumerate() {
            if self.systems[..i].contains(s) {
                return Err(PeerError::Invalid(format!("system {s} is listed twice")));
            }
        }
        if self.ops == 0 {
            return Err(PeerError::Invalid("ops must be at least 1".into()));
        }
        self.scale().validate().map_err(PeerError::Invalid)?;
        if self.ops.saturating_add(self.warmup) > MAX_REPETITIONS {
            return Err(PeerError::Invalid(format!("ops + warmup must be at most {MAX_REPETITIONS}")));
        }
        Ok(())
    }
}

/// One operation on one system (the JSON record).
#[derive(Debug, Clone, Serialize)]
pub struct OpResult {
    /// The operation's name.
    pub op: String,
    /// The system it ran on.
    pub system: System,
    /// The order statistics of the timed samples.
    #[serde(flatten)]
    pub summary: Summary,
}

/// How one operation compares between a peer and Espalier.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// The operation's name.
    pub op: String,
    /// The peer compared with Espalier.
    pub peer: System,
    /// The peer's median over Espalier's: above 1 means Espalier is faster.
    pub peer_over_espalier: f64,
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

/// How long one system took to build or load the data.
#[derive(Debug, Clone, Serialize)]
pub struct Build {
    /// The system.
    pub system: System,
    /// The wall time of the build or load, in seconds.
    pub seconds: f64,
    /// The entries (Espalier) or rows (peers) written.
    pub rows: u64,
}

/// The size of one system's database on disk after the load.
#[derive(Debug, Clone, Serialize)]
pub struct DiskSize {
    /// The system.
    pub system: System,
    /// The size, in bytes.
    pub bytes: u64,
    /// What the size counts, in words.
    pub what: String,
}

/// Espalier's memory at one point of the run.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryPoint {
    /// The point of the run, in words.
    pub when: String,
    /// Resident anonymous memory of the process (`RssAnon`): Espalier's heap, and the peers'
    /// caches once they are loaded in this process (SQLite).
    pub rss_anon_bytes: u64,
    /// Resident pages of mapped files (`RssFile`): the parts of Espalier's checkpoint files in
    /// use, which the kernel can drop and read again.
    pub rss_file_bytes: u64,
    /// Espalier's storage heap: table pages and key index nodes not (yet) mapped.
    pub storage_heap_bytes: u64,
    /// Espalier's checkpoint files mapped (their size, not what is resident).
    pub mapped_bytes: u64,
}

impl MemoryPoint {
    fn now(when: &str) -> MemoryPoint {
        let m = crate::suite::sys::memory();
        MemoryPoint {
            when: when.into(),
            rss_anon_bytes: m.anon_bytes,
            rss_file_bytes: m.file_bytes,
            storage_heap_bytes: espalier_storage::heap_bytes() as u64,
            mapped_bytes: espalier_storage::mapping::mapped_bytes() as u64,
        }
    }
}

/// Entries of one collection (rows of its table), summed over all its instances.
#[derive(Debug, Clone, Serialize)]
pub struct Collection {
    /// The collection's name in the schema.
    pub collection: String,
    /// The name of its SQL table.
    pub table: String,
    /// Its entries, summed over all its instances.
    pub entries: u64,
}

/// The outcome of a peer run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The configuration the run used.
    pub config: Config,
    /// The size of each collection.
    pub collections: Vec<Collection>,
    /// The version of each system.
    pub versions: Vec<(System, String)>,
    /// The directory that held the databases.
    pub directory: String,
    /// The build or load time of each system.
    pub build: Vec<Build>,
    /// Each system's database size on disk.
    pub disk: Vec<DiskSize>,
    /// Espalier's memory after its build (before any peer is loaded) and after the run.
    pub memory: Vec<MemoryPoint>,
    /// Each measured operation on each system.
    pub results: Vec<OpResult>,
    /// Each peer's median over Espalier's, per operation.
    pub ratios: Vec<Ratio>,
    /// The performance goals and whether they were met.
    pub targets: Vec<Target>,
    /// Results and nodes compared between Espalier and a peer (all equal).
    pub cross_checks: u64,
    /// The machine's 1-minute load average before and after the measurements (other
    /// processes competing for the CPUs skew the medians, the client/server peer most).
    pub load_average: Vec<f64>,
}

impl Report {
    /// The result of operation `op` on `system`, if it was measured.
    pub fn result(&self, op: &str, system: System) -> Option<&OpResult> {
        self.results.iter().find(|r| r.op == op && r.system == system)
    }

    /// `peer`'s median over Espalier's for operation `op`, if it was measured.
    pub fn ratio(&self, op: &str, peer: System) -> Option<f64> {
        self.ratios.iter().find(|r| r.op == op && r.peer == peer).map(|r| r.peer_over_espalier)
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|e| Value::String(format!("report does not serialise: {e}")))
    }

    /// The report as Markdown.
    pub fn to_markdown(&self) -> String {
        let c = &self.config;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "## Espalier beside SQLite and PostgreSQL: {} at scale {} (nested {})\n",
            c.suite.name().to_uppercase(),
            c.scale,
            c.nested_scale
        );
        let entries: Vec<String> = self.collections.iter().map(|x| format!("{} {}", x.collection, x.entries)).collect();
        let _ = writeln!(
            s,
            "Entries: {} ({} in all); {} samples per op after {} warm-up; seed {}; durability {} \
             (SQLite synchronous={}, WAL); directory {}\n",
            entries.join(", "),
            self.collections.iter().map(|x| x.entries).sum::<u64>(),
            c.ops,
            c.warmup,
            c.seed,
            c.durability.name(),
            c.durability.sqlite(),
            self.directory
        );
        for (sys, v) in &self.versions {
            let _ = writeln!(s, "- {sys}: {v}");
        }
        if !self.load_average.is_empty() {
            let loads: Vec<String> = self.load_average.iter().map(|l| format!("{l:.2}")).collect();
            let _ = writeln!(
                s,
                "- load average (1 min) before and after the measurements: {} on {} CPUs",
                loads.join(" → "),
                std::thread::available_parallelism().map_or(0, |n| n.get())
            );
        }
        let _ =
            writeln!(s, "\n| op | system | count | min µs | q1 µs | median µs | q3 µs | p99 µs | max µs | mean µs |");
        let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
        for r in &self.results {
            let m = &r.summary;
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                r.op, r.system, m.count, m.min_us, m.q1_us, m.median_us, m.q3_us, m.p99_us, m.max_us, m.mean_us
            );
        }
        let _ = writeln!(s, "\n| op | peer | peer ÷ Espalier (medians) |\n|---|---|--:|");
        for r in &self.ratios {
            let _ = writeln!(s, "| {} | {} | {:.2}× |", r.op, r.peer, r.peer_over_espalier);
        }
        let _ = writeln!(s, "\n| system | on disk | what |\n|---|--:|---|");
        for d in &self.disk {
            let _ = writeln!(s, "| {} | {} | {} |", d.system, human_bytes(d.bytes), d.what);
        }
        let _ = writeln!(
            s,
            "\n| memory | RssAnon | RssFile | Espalier's storage heap | checkpoint files mapped |\n|---|--:|--:|--:|--:|"
        );
        for m in &self.memory {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                m.when,
                human_bytes(m.rss_anon_bytes),
                human_bytes(m.rss_file_bytes),
                human_bytes(m.storage_heap_bytes),
                human_bytes(m.mapped_bytes)
            );
        }
        let _ = writeln!(s, "\n| build / load | seconds | rows |\n|---|--:|--:|");
        for b in &self.build {
            let _ = writeln!(s, "| {} | {:.1} | {} |", b.system, b.seconds, b.rows);
        }
        let _ = writeln!(s, "\n| target (issue #3, defined for B7) | measured | |\n|---|---|---|");
        for t in &self.targets {
            let _ = writeln!(s, "| {} | {} | {} |", t.target, t.measured, if t.pass { "PASS" } else { "MISS" });
        }
        let _ = writeln!(
            s,
            "\nCross-checks: {} results and nodes equal between Espalier and each peer.",
            self.cross_checks
        );
        s
    }
}

/// `1.23 GiB`.
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", units[u])
    }
}

fn bar(progress: bool, len: u64, prefix: &str) -> ProgressBar {
    crate::progress::bar(
        progress,
        len,
        prefix,
        "{prefix:>18} [{bar:40}] {human_pos}/{human_len} {per_sec:>12} {elapsed_precise} eta {eta}",
    )
}

/// Espalier and the peers, loaded with the same data.
pub struct Bench {
    /// The Espalier engine, built from the benchmark file.
    pub engine: Engine,
    /// The tables the peers hold the data in.
    pub rs: RelationalSchema,
    /// SQLite, if it is among the systems.
    pub sqlite: Option<SqlitePeer>,
    /// PostgreSQL, if it is among the systems.
    pub postgres: Option<PgPeer>,
    /// Keys of the data the operations draw their parameters from.
    pub index: DataIndex,
    /// The build or load time of each system.
    pub build: Vec<Build>,
    /// Espalier's memory at points of the run.
    pub memory: Vec<MemoryPoint>,
    /// Espalier's entries per table (root: 1).
    pub counts: Vec<u64>,
    /// Results and nodes compared between Espalier and a peer so far.
    pub cross_checks: u64,
    progress: bool,
    keep: bool,
    /// Deletes `tmp` if the process is interrupted.
    _cleanup: crate::interrupt::Registration,
    // Last: the databases above live in it.
    tmp: tempfile::TempDir,
}

/// Parses and type-checks an instruction once.
fn plan(engine: &Engine, text: &str) -> Result<Plan, PeerError> {
    let instr =
        parse_instruction(text, ParseOptions::CLIENT).map_err(|e| PeerError::espalier(text.to_string(), e.into()))?;
    engine.check(&instr, Some(text)).map_err(|e| PeerError::espalier(text.to_string(), e))
}

fn mismatch(op: &str, system: System, run: usize, params: &Params, detail: String) -> PeerError {
    PeerError::Mismatch(format!("{op} on {system}, run {run} ({}): {detail}", params.describe()))
}

/// Describes how two outcomes differ (None if equal).
pub fn outcome_difference(espalier: &Outcome, peer: &Outcome, peer_name: &str) -> Option<String> {
    if espalier == peer {
        return None;
    }
    let (Outcome::Queries(a), Outcome::Queries(b)) = (espalier, peer) else {
        return Some(format!("espalier says {espalier:?}, {peer_name} says {peer:?}"));
    };
    if a.len() != b.len() {
        return Some(format!("espalier ran {} queries, {peer_name} {}", a.len(), b.len()));
    }
    let mut out = String::new();
    for (q, (x, y)) in a.iter().zip(b).enumerate() {
        if x == y {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        let _ = write!(out, "query {} of {}:", q + 1, a.len());
        if x.total != y.total {
            let _ = write!(out, " total {} (espalier) vs {} ({peer_name});", x.total, y.total);
        }
        if x.columns != y.columns {
            let _ = write!(out, " columns {:?} vs {:?};", x.columns, y.columns);
        }
        if x.rows.len() != y.rows.len() {
            let _ = write!(out, " {} rows vs {};", x.rows.len(), y.rows.len());
        }
        let mut shown = 0;
        for i in 0..x.rows.len().max(y.rows.len()) {
            let (rx, ry) = (x.rows.get(i), y.rows.get(i));
            if rx == ry {
                continue;
            }
            let show = |r: Option<&espalier_instruction::Row>| match r {
                Some(r) => format!("key {:?} values {}", r.key, Value::from(r.values.clone())),
                None => "(no row)".to_string(),
            };
            let _ = write!(out, " row {i}: espalier {} vs {peer_name} {};", show(rx), show(ry));
            shown += 1;
            if shown == 5 {
                out.push_str(" …");
                break;
            }
        }
    }
    Some(out)
}

impl Bench {
    /// Builds the suite's data in Espalier and loads every peer of `config.systems`.
    pub fn setup(config: &Config) -> Result<Bench, PeerError> {
        config.validate()?;
        let file = dataset::suite_file(config.suite)?;
        let base = config.dir.clone().unwrap_or_else(std::env::temp_dir);
        let tmp = tempfile::Builder::new()
            .prefix("espalier-bench-peers-")
            .tempdir_in(&base)
            .map_err(|e| PeerError::io(format!("making a temporary directory in {}", base.display()), e))?;
        let cleanup = crate::interrupt::on_interrupt(tmp.path().to_path_buf(), None);

        let t = Instant::now();
        let mut options = DatabaseOptions { durability: config.durability.espalier(), ..Default::default() };
        if let Some(bound) = config.memory_bytes {
            options.memory_bytes = bound;
        }
        let engine = Engine::create(&tmp.path().join("espalier"), &file.model, options)
            .map_err(|e| PeerError::espalier("creating the Espalier database", e))?;
        let pb = bar(config.progress, dataset::expected_entries(&file, config.scale()), "build espalier");
        let entries = dataset::build(&engine, &file, config.seed, config.scale(), &pb)?;
        pb.finish_and_clear();
        let mut build = vec![Build { system: System::Espalier, seconds: t.elapsed().as_secs_f64(), rows: entries }];
        let memory = vec![MemoryPoint::now("after Espalier's build")];

        let rs = RelationalSchema::new(engine.database().schema().clone())?;
        let mut bench = Bench {
            engine,
            rs,
            sqlite: None,
            postgres: None,
            index: DataIndex::default(),
            build: Vec::new(),
            memory,
            counts: Vec::new(),
            cross_checks: 0,
            progress: config.progress,
            keep: config.keep,
            _cleanup: cleanup,
            tmp,
        };
        {
            let snapshot = bench.engine.database().snapshot().map_err(|e| PeerError::data("opening a snapshot", e))?;
            let graph = snapshot.graph();
            let expected = bench.rs.espalier_counts(&graph)?;
            let total: u64 = expected.iter().sum();
            if config.systems.contains(&System::Sqlite) {
                let t = Instant::now();
                let mut peer = SqlitePeer::create(&bench.tmp.path().join("sqlite.db"), &bench.rs, config.durability)?;
                let pb = bar(config.progress, total, "load sqlite");
                let rows = peer.load(&bench.rs, &graph, &pb)?;
                pb.finish_and_clear();
                build.push(Build {
                    system: System::Sqlite,
                    seconds: t.elapsed().as_secs_f64(),
                    rows: rows.iter().sum(),
                });
                check_counts(&bench.rs, &mut peer, System::Sqlite, &expected, &rows)?;
                bench.sqlite = Some(peer);
            }
            if config.systems.contains(&System::Postgres) {
                let t = Instant::now();
                let mut settings: Vec<String> = config.durability.postgres().iter().map(|s| s.to_string()).collect();
                settings.push(format!("shared_buffers = '{}'", config.pg_shared_buffers));
                let server = PgServer::start(&ServerOptions { settings, dir: config.dir.clone() })?;
                let mut peer = PgPeer::create(server, &bench.rs)?;
                let pb = bar(config.progress, total, "load postgres");
                let rows = peer.load(&bench.rs, &graph, &pb)?;
                pb.finish_and_clear();
                build.push(Build {
                    system: System::Postgres,
                    seconds: t.elapsed().as_secs_f64(),
                    rows: rows.iter().sum(),
                });
                check_counts(&bench.rs, &mut peer, System::Postgres, &expected, &rows)?;
                bench.postgres = Some(peer);
            }
            bench.cross_checks += (expected.len() * (config.systems.len() - 1)) as u64;
            bench.counts = expected;
        }
        bench.build = build;
        bench.verify_sample(config.verify_sample, config.seed ^ 0x005a_3c1e)?;
        bench.index = DataIndex::read(&bench.engine)?;
        Ok(bench)
    }

    /// The directory holding Espalier's and SQLite's files.
    pub fn directory(&self) -> &std::path::Path {
        self.tmp.path()
    }

    fn peers(&mut self) -> Vec<(System, &mut dyn SqlConn)> {
        let mut v: Vec<(System, &mut dyn SqlConn)> = Vec::new();
        if let Some(p) = self.sqlite.as_mut() {
            v.push((System::Sqlite, p));
        }
        if let Some(p) = self.postgres.as_mut() {
            v.push((System::Postgres, p));
        }
        v
    }

    fn get(&self, plan: &Plan, params: &Params) -> Result<Value, PeerError> {
        match self.engine.run(plan, &params.map(), None).map_err(|e| PeerError::espalier(params.describe(), e))? {
            Reply::Node(v) => Ok(v),
            other => Err(PeerError::Invalid(format!("get replied {other:?}"))),
        }
    }

    /// Compares `per_table` random entries of every top-level dictionary node by node
    /// between Espalier and each peer. Returns the nodes compared.
    pub fn verify_sample(&mut self, per_table: usize, seed: u64) -> Result<u64, PeerError> {
        let mut rng = StdRng::seed_from_u64(seed);
        let schema = self.engine.database().schema().clone();
        let mut compared = 0;
        for &p in &schema.root().properties {
            let prop = schema.property(p);
            if !matches!(prop.kind, PropertyKind::Dictionary { .. }) || per_table == 0 {
                continue;
            }
            let Some(table) = self.rs.table_of(p) else { continue };
            let text = format!("get . {} : $key", quote_name(&prop.name));
            let plan = plan(&self.engine, &text)?;
            // Keys from Espalier, sampled with the seeded generator.
            let keys = {
                let snapshot =
                    self.engine.database().snapshot().map_err(|e| PeerError::data("opening a snapshot", e))?;
                let graph = snapshot.graph();
                let mut keys = Vec::new();
                for e in
                    graph.entries(espalier_data::NodeRef::ROOT, p).map_err(|e| PeerError::data("listing keys", e))?
                {
                    let (raw, _) = e.map_err(|e| PeerError::data("listing keys", e))?;
                    keys.push(String::from_utf8_lossy(raw).into_owned());
                }
                keys
            };
            if keys.is_empty() {
                continue;
            }
            for _ in 0..per_table.min(keys.len()) {
                let key = keys[rng.random_range(0..keys.len())].clone();
                let params = Params(vec![("key", espalier_instruction::ParamValue::Text(key.clone()))]);
                let expected = self.get(&plan, &params)?;
                let rs = self.rs.clone();
                for (system, conn) in self.peers() {
                    let mut reader = NodeReader::new(&rs, conn);
                    let id = reader.find(table, &key)?.ok_or_else(|| {
                        PeerError::Mismatch(format!("after the load, {system} has no {} entry {key:?}", prop.name))
                    })?;
                    let got = reader.entry(table, id)?;
                    if let Some(d) = first_difference(&expected, &got) {
                        return Err(PeerError::Mismatch(format!(
                            "after the load, {} entry {key:?} differs between espalier and {system}: {d}",
                            prop.name
                        )));
                    }
                    compared += 1;
                }
            }
        }
        self.cross_checks += compared;
        Ok(compared)
    }

    /// Compares the whole database (the root node) between Espalier and each peer. For small
    /// databases: the SQL side is read with a query per entry.
    pub fn verify_all(&mut self) -> Result<(), PeerError> {
        let expected = self.get(&plan(&self.engine, "get")?, &Params::default())?;
        let rs = self.rs.clone();
        for (system, conn) in self.peers() {
            let got = NodeReader::new(&rs, conn).root()?;
            if let Some(d) = first_difference(&expected, &got) {
                return Err(PeerError::Mismatch(format!("the database differs between espalier and {system}: {d}")));
            }
        }
        self.cross_checks += 1;
        Ok(())
    }

    /// Runs `op` with each of `params` on every system (the first `warmup` untimed),
    /// cross-checking every run. Returns one summary per system, Espalier first.
    pub fn run_op(&mut self, op: &Op, params: &[Params], warmup: usize) -> Result<Vec<OpResult>, PeerError> {
        if params.len() <= warmup {
            return Err(PeerError::Invalid(format!(
                "{}: {} runs leave none after {warmup} warm-up",
                op.name,
                params.len()
            )));
        }
        let plans: Vec<Plan> = op.instructions.iter().map(|t| plan(&self.engine, t)).collect::<Result<_, _>>()?;
        let verify = op.verify.map(|v| plan(&self.engine, v.espalier)).transpose()?;
        let reset = op.reset.map(|r| plan(&self.engine, r.espalier)).transpose()?;
        let verify_table = match op.verify {
            Some(v) => Some(
                self.rs
                    .table_at(v.collection)
                    .ok_or_else(|| PeerError::Invalid(format!("{}: no table for {:?}", op.name, v.collection)))?,
            ),
            None => None,
        };
        let systems = 1 + usize::from(self.sqlite.is_some()) + usize::from(self.postgres.is_some());
        let pb = bar(self.progress, (params.len() * systems) as u64, op.name);
        let mut results = Vec::with_capacity(systems);

        // Espalier: the reference outcomes and nodes.
        let maps: Vec<_> = params.iter().map(Params::map).collect();
        let mut expected: Vec<Outcome> = Vec::with_capacity(params.len());
        let mut expected_nodes: Vec<Value> = Vec::new();
        let mut samples = Vec::with_capacity(params.len() - warmup);
        for (i, map) in maps.iter().enumerate() {
            let t = Instant::now();
            let mut queries = Vec::new();
            let mut done = false;
            for plan in &plans {
                match self.engine.run(plan, map, None) {
                    Ok(Reply::Query(q)) => queries.push(q),
                    Ok(Reply::Done { .. }) => done = true,
                    Ok(other) => return Err(PeerError::Invalid(format!("{}: unexpected reply {other:?}", op.name))),
                    Err(e) => {
                        return Err(PeerError::espalier(format!("{} run {i} ({})", op.name, params[i].describe()), e))
                    }
                }
            }
            let elapsed = t.elapsed();
            let outcome = if done && queries.is_empty() { Outcome::Done } else { Outcome::Queries(queries) };
            if i >= warmup {
                samples.push(elapsed);
            }
            expected.push(black_box(outcome));
            if let Some(v) = &verify {
                expected_nodes.push(self.get(v, &params[i])?);
            }
            if let Some(r) = &reset {
                self.engine
                    .run(r, map, None)
                    .map_err(|e| PeerError::espalier(format!("{} reset after run {i}", op.name), e))?;
            }
            pb.inc(1);
        }
        results.push(OpResult {
            op: op.name.to_string(),
            system: System::Espalier,
            summary: Summary::of(&mut samples),
        });

        let rs = self.rs.clone();
        let mut compared = 0u64;
        for (system, conn) in self.peers() {
            let mut samples: Vec<Duration> = Vec::with_capacity(params.len() - warmup);
            for (i, p) in params.iter().enumerate() {
                let t = Instant::now();
                let outcome = (op.sql)(conn, p).map_err(|e| match e {
                    PeerError::Mismatch(m) => mismatch(op.name, system, i, p, m),
                    other => {
                        PeerError::Invalid(format!("{} on {system}, run {i} ({}): {other}", op.name, p.describe()))
                    }
                })?;
                let elapsed = t.elapsed();
                if i >= warmup {
                    samples.push(elapsed);
                }
                if let Some(d) = outcome_difference(&expected[i], &black_box(outcome), system.name()) {
                    return Err(mismatch(op.name, system, i, p, d));
                }
                compared += 1;
                if let (Some(v), Some(table)) = (op.verify, verify_table) {
                    let key = p.text(v.key_param)?;
                    let mut reader = NodeReader::new(&rs, &mut *conn);
                    let id = reader
                        .find(table, &key)?
                        .ok_or_else(|| mismatch(op.name, system, i, p, format!("no entry {key:?} to read back")))?;
                    let got = reader.entry(table, id)?;
                    if let Some(d) = first_difference(&expected_nodes[i], &got) {
                        return Err(mismatch(op.name, system, i, p, format!("node after the mutation differs {d}")));
                    }
                    compared += 1;
                }
                if let Some(r) = op.reset {
                    let n = conn.execute(r.sql, &[SqlValue::Text(p.text(r.key_param)?)])?;
                    if n != 1 {
                        return Err(mismatch(op.name, system, i, p, format!("the reset changed {n} rows, not 1")));
                    }
                }
                pb.inc(1);
            }
            results.push(OpResult { op: op.name.to_string(), system, summary: Summary::of(&mut samples) });
        }
        pb.finish_and_clear();
        self.cross_checks += compared;
        Ok(results)
    }

    /// Bytes on disk per system, after making everything durable and checkpointing each
    /// (as SQLite's WAL is checkpointed and truncated and PostgreSQL checkpoints).
    pub fn disk_sizes(&mut self) -> Result<Vec<DiskSize>, PeerError> {
        let db = self.engine.database();
        db.sync().map_err(|e| PeerError::Invalid(format!("syncing Espalier: {e}")))?;
        db.checkpoint().map_err(|e| PeerError::Invalid(format!("checkpointing Espalier: {e}")))?;
        let mut out = vec![DiskSize {
            system: System::Espalier,
            bytes: db.disk_size(),
            what: "checkpoint files, manifest and log after a checkpoint (which retires the log's \
                   segments; the next one, prepared ahead and pre-zeroed, counts whole), allocated blocks"
                .into(),
        }];
        if let Some(p) = self.sqlite.as_mut() {
            out.push(DiskSize {
                system: System::Sqlite,
                bytes: p.disk_size()?,
                what: "database file + WAL after wal_checkpoint(TRUNCATE)".into(),
            });
        }
        if let Some(p) = self.postgres.as_mut() {
            let bytes = p.disk_size()?;
            out.push(DiskSize {
                system: System::Postgres,
                bytes,
                what: format!(
                    "pg_database_size after CHECKPOINT (an empty database is {}; WAL not counted)",
                    human_bytes(p.empty_size())
                ),
            });
        }
        Ok(out)
    }

    /// Stops the PostgreSQL server and deletes every file of the run (but Espalier's and
    /// SQLite's when `keep` was asked for).
    pub fn finish(self) -> Result<(), PeerError> {
        let Bench { engine, sqlite, postgres, keep, tmp, .. } = self;
        drop(sqlite);
        drop(engine);
        if keep {
            let _ = tmp.keep();
        }
        match postgres {
            Some(p) => p.stop(),
            None => Ok(()),
        }
    }
}

/// `'Name'` with the instruction language's escapes.
fn quote_name(name: &str) -> String {
    format!("'{}'", name.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Fails unless every table holds as many rows as Espalier has entries.
fn check_counts(
    rs: &RelationalSchema,
    conn: &mut dyn SqlConn,
    system: System,
    expected: &[u64],
    loaded: &[u64],
) -> Result<(), PeerError> {
    for (t, table) in rs.tables.iter().enumerate() {
        let rows = conn.query(&format!("SELECT count(*) FROM {}", ident(&table.name)), &[])?;
        let n = rows.first().and_then(|r| r.first()).and_then(SqlValue::as_int).unwrap_or(-1);
        if n < 0 || n as u64 != expected[t] || loaded[t] != expected[t] {
            let what = match table.kind {
                TableKind::Root => "root".to_string(),
                _ => table.collection.map(|p| rs.schema.property(p).name.clone()).unwrap_or_default(),
            };
            return Err(PeerError::Mismatch(format!(
                "{system} table {} holds {n} rows ({} loaded), Espalier has {} entries of '{what}'",
                table.name, loaded[t], expected[t]
            )));
        }
    }
    Ok(())
}

/// The parameters of every run of `op` (warm-up first), from a generator seeded per operation.
pub fn draw_params(op: &Op, index: &DataIndex, runs: usize, seed: u64) -> Result<Vec<Params>, PeerError> {
    let op_seed = op.name.bytes().fold(seed, |h, b| h.rotate_left(5) ^ u64::from(b));
    let mut rng = StdRng::seed_from_u64(op_seed);
    (0..runs).map(|_| (op.params)(&mut rng, index)).collect()
}

/// Builds, loads, checks and measures a whole suite.
pub fn run(config: &Config) -> Result<Report, PeerError> {
    let mut bench = Bench::setup(config)?;
    let mut versions = vec![(System::Espalier, format!("espalier {}", env!("CARGO_PKG_VERSION")))];
    if bench.sqlite.is_some() {
        versions.push((System::Sqlite, format!("SQLite {}", SqlitePeer::version())));
    }
    if let Some(p) = &bench.postgres {
        versions.push((System::Postgres, p.server().version()));
    }
    let mut loads: Vec<f64> = load_average().into_iter().collect();
    let mut results = Vec::new();
    for op in workload::ops(config.suite) {
        let params = draw_params(&op, &bench.index, config.warmup + config.ops, config.seed)?;
        results.extend(bench.run_op(&op, &params, config.warmup)?);
    }
    loads.extend(load_average());
    let disk = bench.disk_sizes()?;
    bench.memory.push(MemoryPoint::now("after the run"));
    let mut ratios = Vec::new();
    for r in results.iter().filter(|r| r.system != System::Espalier) {
        if let Some(e) = results.iter().find(|e| e.op == r.op && e.system == System::Espalier) {
            ratios.push(Ratio {
                op: r.op.clone(),
                peer: r.system,
                peer_over_espalier: r.summary.median_us / e.summary.median_us,
            });
        }
    }
    let targets = targets(&ratios, &disk);
    let directory = bench.directory().display().to_string();
    let collections = bench
        .rs
        .tables
        .iter()
        .zip(&bench.counts)
        .filter_map(|(t, &entries)| {
            let p = t.collection?;
            Some(Collection { collection: bench.rs.schema.property(p).name.clone(), table: t.name.clone(), entries })
        })
        .collect();
    let report = Report {
        config: config.clone(),
        collections,
        versions,
        directory,
        build: bench.build.clone(),
        disk,
        memory: bench.memory.clone(),
        results,
        ratios,
        targets,
        cross_checks: bench.cross_checks,
        load_average: loads,
    };
    bench.finish()?;
    Ok(report)
}

/// The 1-minute load average (Linux), if the system says.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Issue #3's targets: many_references and task_start ≥ 3× faster than SQLite and ≥ 10×
/// faster than PostgreSQL; Espalier no larger on disk than SQLite.
fn targets(ratios: &[Ratio], disk: &[DiskSize]) -> Vec<Target> {
    let mut out = Vec::new();
    for op in ["many_references", "task_start"] {
        for (peer, want) in [(System::Sqlite, 3.0), (System::Postgres, 10.0)] {
            if let Some(r) = ratios.iter().find(|r| r.op == op && r.peer == peer) {
                out.push(Target {
                    target: format!("{op} ≥ {want}× faster than {peer}"),
                    measured: format!("{:.2}×", r.peer_over_espalier),
                    pass: r.peer_over_espalier >= want,
                });
            }
        }
    }
    let size = |s: System| disk.iter().find(|d| d.system == s).map(|d| d.bytes);
    if let (Some(e), Some(q)) = (size(System::Espalier), size(System::Sqlite)) {
        out.push(Target {
            target: "Espalier on disk ≤ SQLite".into(),
            measured: format!("{} vs {} ({:.2}×)", human_bytes(e), human_bytes(q), e as f64 / q.max(1) as f64),
            pass: e <= q,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_picks_a_unit() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(human_bytes(3 << 30), "3.00 GiB");
    }

    #[test]
    fn config_wants_espalier_first_and_no_duplicates() {
        let mut c = Config::new(Suite::B6);
        assert!(c.validate().is_ok());
        c.systems = vec![System::Sqlite, System::Espalier];
        assert!(c.validate().is_err());
        c.systems = vec![System::Espalier, System::Sqlite, System::Sqlite];
        assert!(c.validate().is_err());
    }

    #[test]
    fn draw_params_is_deterministic() {
        let index = DataIndex {
            client_names: vec!["Abc Def".into(), "Bcd".into()],
            machine_keys: vec!["0".into(), "1".into()],
            idle_machines: vec!["1".into()],
            order_keys: vec!["0".into()],
        };
        let a = draw_params(&workload::TASK_START, &index, 10, 7).expect("params");
        let b = draw_params(&workload::TASK_START, &index, 10, 7).expect("params");
        assert_eq!(a, b);
        assert!(a.iter().all(|p| p.text("machine").ok().as_deref() == Some("1")));
    }
}
