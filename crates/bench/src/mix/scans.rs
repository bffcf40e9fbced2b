//! The mix's scans in process, beside the embedded analytical peer: the same `usertable`
//! in Espalier's engine, in SQLite and in DuckDB (through the generic driver
//! `peers/graph.py`, [`crate::graph_peer`]), and the same list of scans — from a loaded key,
//! 1 to `max_scan` records, every field — timed one by one in each. Every scan's keys must be
//! the same in all three, or the run fails. DuckDB is not a server, so it cannot take part in
//! the mix over the network; this is the part of the mix it can run.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use espalier_instruction::{parse_instruction, Engine, ParamValue, Reply};
use espalier_transaction::{DatabaseOptions, Durability};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::ops::{self, Generator, Mix, Op, FIELDS};
use super::Config;
use crate::graph_peer::{self, GraphPeer, PeerError};
use crate::remote::RemoteError;
use crate::stats::Summary;

/// Most scans one run may ask for (their keys are held in memory, the peer's rows too).
pub const MAX_SCANS: usize = 100_000;

/// One system's scans.
#[derive(Debug, Clone, Serialize)]
pub struct ScanSystem {
    /// `espalier`, `sqlite` or `duckdb`.
    pub system: String,
    /// Its name and version (None if it did not run).
    pub version: Option<String>,
    /// Loading the records, in ms (None if it did not run).
    pub load_ms: Option<f64>,
    /// Time per scan (None if it did not run).
    pub timings: Option<Summary>,
    /// Why it did not run.
    pub unavailable: Option<String>,
}

/// The scans' report.
#[derive(Debug, Clone, Serialize)]
pub struct ScanReport {
    /// Scans timed in each system.
    pub scans: usize,
    /// Records they returned, in all.
    pub rows: u64,
    /// Espalier, SQLite, DuckDB.
    pub systems: Vec<ScanSystem>,
}

#[derive(Deserialize)]
struct Reply1 {
    version: String,
    load_ms: f64,
    queries: Vec<ReplyQuery>,
}

#[derive(Deserialize)]
struct ReplyQuery {
    times_us: Vec<f64>,
    answers: Vec<Vec<Vec<Value>>>,
}

/// The scans of a run: (start key, limit), from the mix's generator with scans only.
fn scans(config: &Config) -> Vec<(String, u64)> {
    let only = Mix { read: 0, update: 0, insert: 0, scan: 100, rmw: 0 };
    let mut g = Generator::new(config.seed, u64::MAX, 0, config.size, config.max_scan, only);
    (0..config.scans.min(MAX_SCANS))
        .filter_map(|_| match g.next_op() {
            Op::Scan { key, limit } => Some((key, limit)),
            _ => None,
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs the scans in Espalier, SQLite and (if installed, or required) DuckDB under `dir`.
pub fn run(config: &Config, dir: &Path) -> Result<ScanReport, RemoteError> {
    let list = scans(config);
    let fail = |m: String| RemoteError::Server(m);
    // Espalier, in process.
    let t = Instant::now();
    let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = Engine::create(&dir.join("espalier"), super::espalier::SCHEMA, options)
        .map_err(|e| RemoteError::espalier("creating the scans' database", e))?;
    super::espalier::load(&engine, config.size)?;
    let load_espalier = ms(t.elapsed());
    let mut plans = HashMap::new();
    let mut ours = Vec::with_capacity(list.len());
    let mut times = Vec::with_capacity(list.len());
    for (key, limit) in &list {
        if !plans.contains_key(limit) {
            let text = super::espalier::scan_text("k", *limit);
            let instr = parse_instruction(&text, espalier_instruction::parse::ParseOptions::CLIENT)
                .map_err(|e| fail(format!("the scan does not parse: {e}")))?;
            let plan = engine.check(&instr, Some(&text)).map_err(|e| RemoteError::espalier("the scan", e))?;
            plans.insert(*limit, plan);
        }
        let plan = plans.get(limit).ok_or_else(|| fail("a scan without its plan".into()))?;
        let params = HashMap::from([("k".to_string(), ParamValue::Text(key.clone()))]);
        let t = Instant::now();
        let reply = engine.run(plan, &params, None).map_err(|e| RemoteError::espalier("a scan", e))?;
        times.push(t.elapsed());
        let Reply::Query(q) = reply else { return Err(fail(format!("a scan answered {reply:?}"))) };
        let keys: Vec<String> = q.rows.iter().filter_map(|r| r.key.first().cloned()).collect();
        if let Some(wrong) = ops::check_scan(key, *limit, &keys, &ops::key(config.size.saturating_sub(1))) {
            return Err(fail(format!("Espalier's scan is wrong: {wrong}")));
        }
        ours.push(keys);
    }
    let rows = ours.iter().map(|k| k.len() as u64).sum();
    let mut systems = vec![ScanSystem {
        system: "espalier".into(),
        version: Some(format!("espalier {}", env!("CARGO_PKG_VERSION"))),
        load_ms: Some(load_espalier),
        timings: Some(Summary::of(&mut times)),
        unavailable: None,
    }];
    drop(engine);

    // SQLite, a file in WAL mode (the mix's loader), one connection.
    let t = Instant::now();
    let lite = super::sqlite::Lite::start(config, &dir.join("sqlite"))?;
    let load_sqlite = ms(t.elapsed());
    let conn = lite.connection()?;
    let lite_err = |e: rusqlite::Error| fail(format!("SQLite: {e}"));
    let mut st = conn.prepare(super::sqlite::SCAN).map_err(lite_err)?;
    let mut times = Vec::with_capacity(list.len());
    for ((key, limit), want) in list.iter().zip(&ours) {
        let t = Instant::now();
        let keys = st
            .query_map(rusqlite::params![key, *limit as i64], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>())
            .map_err(lite_err)?;
        times.push(t.elapsed());
        if &keys != want {
            return Err(fail(format!(
                "scan from {key:?}: SQLite returns {} keys, Espalier {}",
                keys.len(),
                want.len()
            )));
        }
    }
    systems.push(ScanSystem {
        system: "sqlite".into(),
        version: Some(format!("SQLite {}", rusqlite::version())),
        load_ms: Some(load_sqlite),
        timings: Some(Summary::of(&mut times)),
        unavailable: None,
    });

    // DuckDB: the table as CSV read back out of SQLite, the same SQL.
    let csv = dir.join("csv");
    std::fs::create_dir_all(&csv).map_err(|e| RemoteError::io(format!("making {}", csv.display()), e))?;
    let files = crate::peers::sqlite::write_csv_tables(&conn, &csv, &["usertable"]).map_err(fail)?;
    drop(st);
    let work = dir.join("duckdb");
    std::fs::create_dir_all(&work).map_err(|e| RemoteError::io(format!("making {}", work.display()), e))?;
    match duckdb(config, &files, &work, &list) {
        Ok((version, load_ms, keys, mut times)) => {
            for ((key, _), (got, want)) in list.iter().zip(keys.iter().zip(&ours)) {
                if got != want {
                    return Err(fail(format!(
                        "scan from {key:?}: {version} returns {} keys, Espalier {}",
                        got.len(),
                        want.len()
                    )));
                }
            }
            systems.push(ScanSystem {
                system: "duckdb".into(),
                version: Some(version),
                load_ms: Some(load_ms),
                timings: Some(Summary::of(&mut times)),
                unavailable: None,
            });
        }
        Err(e) => systems.push(ScanSystem {
            system: "duckdb".into(),
            version: None,
            load_ms: None,
            timings: None,
            unavailable: Some(e.skipped(config.require_peers).map_err(|e| fail(e.to_string()))?),
        }),
    }
    Ok(ScanReport { scans: list.len(), rows, systems })
}

/// DuckDB's run: (version, load ms, each scan's keys, each scan's time).
#[allow(clippy::type_complexity)]
fn duckdb(
    config: &Config,
    files: &[(String, PathBuf)],
    work: &Path,
    list: &[(String, u64)],
) -> Result<(String, f64, Vec<Vec<String>>, Vec<Duration>), PeerError> {
    let failed = |reason: String| PeerError::Failed { peer: "duckdb", reason };
    let fields: String = (0..FIELDS).map(|f| format!(", f{f} VARCHAR NOT NULL")).collect();
    let params: Vec<Value> = list.iter().map(|(k, n)| json!([[k, n]])).collect();
    let request = json!({
        "system": "duckdb",
        "dir": work,
        "ddl": format!("CREATE TABLE usertable (ycsb_key VARCHAR PRIMARY KEY{fields}, count BIGINT NOT NULL)"),
        "tables": files.iter().map(|(t, f)| json!({"name": t, "file": f})).collect::<Vec<_>>(),
        "nodes": [], "rels": [], "indexes": [],
        "warmup": 0, "runs": list.len(),
        "queries": [{"name": "scan", "sql": super::sqlite::SCAN, "cypher": Value::Null, "kuzu": Value::Null,
                     "answer": "rows", "params": params}],
    });
    let reply: Reply1 = graph_peer::call(GraphPeer::DuckDb, &config.peers_dir, "graph", &request)?;
    let q = reply.queries.into_iter().next().ok_or_else(|| failed("no answer".into()))?;
    if q.answers.len() != list.len() || q.times_us.len() != list.len() {
        return Err(failed(format!(
            "{} answers and {} times for {} scans",
            q.answers.len(),
            q.times_us.len(),
            list.len()
        )));
    }
    let keys = q
        .answers
        .iter()
        .map(|rows| rows.iter().map(|r| r.first().and_then(Value::as_str).unwrap_or_default().to_string()).collect())
        .collect();
    let times = q.times_us.iter().map(|&us| Duration::from_secs_f64(us.max(0.0) / 1e6)).collect();
    Ok((reply.version, reply.load_ms, keys, times))
}

impl ScanReport {
    /// The scans as Markdown.
    pub fn to_markdown(&self) -> String {
        use crate::suite::report::us;
        let mut out = format!(
            "\n### The scans in process, beside DuckDB\n\n{} scans from a loaded key ({} records in all), every \
             field, timed one by one; every scan's keys equal in each system.\n\n| system | load ms | median µs | \
             q1–q3 µs | p99 µs |\n|---|--:|--:|---|--:|\n",
            self.scans, self.rows
        );
        for s in &self.systems {
            match (&s.timings, &s.version) {
                (Some(t), Some(v)) => {
                    let _ = writeln!(
                        out,
                        "| {v} | {:.0} | {} | {}–{} | {} |",
                        s.load_ms.unwrap_or(f64::NAN),
                        us(t.median_us),
                        us(t.q1_us),
                        us(t.q3_us),
                        us(t.p99_us)
                    );
                }
                _ => {
                    let _ = writeln!(
                        out,
                        "| {} | did not run: {} | | | |",
                        s.system,
                        s.unavailable.as_deref().unwrap_or("")
                    );
                }
            }
        }
        out.push_str(
            "\nEspalier: the key-range query through its engine in this process (plans kept per limit); SQLite: a \
             prepared statement; DuckDB: the same SQL through its Python driver (the time includes fetching \
             the rows into Python).\n",
        );
        out
    }
}
