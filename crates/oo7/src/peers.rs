//! OO7's read-only operations on the embedded peers DuckDB, Kùzu and Neo4j
//! ([`espalier_bench::graph_peer`]; their drivers are `peers/graph.py` and
//! `peers/neo4j/src/main/java/espalier/peers/Graph.java`, which the social network uses too).
//!
//! The database goes to them as one CSV file per SQL table, read back out of the SQLite
//! database the benchmark loaded ([`write_tables`]), so every system holds the same rows.
//! DuckDB gets SQLite's tables and runs SQLite's SQL (T8 and T9, which SQLite answers in code,
//! as SQL). Kùzu and Neo4j get a property graph built from the tables ([`graph`]) and run the
//! Cypher below, written from the paper like the SQL: the assembly hierarchy as `SUB` edges,
//! `PRIV` from a base assembly to its private composite parts, `ROOT` to a composite part's root
//! part, `CONN` between atomic parts, `DOC` from a document to its composite part, Q8 a join
//! on values. Each run's answer (count and checksum, [`Answer`]) must equal Espalier's for the
//! same run and random choices, or the benchmark fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use espalier_bench::graph_peer::{self, GraphPeer, PeerError};
use rusqlite::Connection;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::model::Oo7;
use crate::ops::{Answer, Draw, Op, Q2_RANGE, Q3_RANGE};
use crate::sqlite;

/// The operations the peers run: the read-only ones, without the hand-coded Q8 (each
/// system's own code, not a query).
pub const OPS: [Op; 11] = [Op::T1, Op::T6, Op::T8, Op::T9, Op::Q1, Op::Q2, Op::Q3, Op::Q4, Op::Q5, Op::Q7, Op::Q8];

/// The tables written for the peers, in SQLite's schema ([`sqlite::TABLES`]).
const TABLES: [&str; 9] = [
    "module",
    "manual",
    "assembly",
    "components_priv",
    "components_shar",
    "composite_part",
    "atomic_part",
    "connection",
    "document",
];

/// The assembly hierarchy from the module's design root down to the base assemblies, each
/// with its private composite parts and their root parts (T1 and T6 start here). Seven
/// levels in the paper's configurations; the bound is generous.
const HIERARCHY: &str = "MATCH (:Module)-[:DESIGN_ROOT]->(:Assembly)-[:SUB*0..16]->(b:Assembly)-[:PRIV]->(c:CompositePart)-[:ROOT]->(r:AtomicPart)";

/// How far Kùzu's shortest-path search from a root part goes in T1 (Kùzu needs a bound). A
/// composite part's atomic parts form a ring with random chords, so every part is a few steps
/// from the root; a part left unreached would make the answer differ, and the run fail.
const KUZU_DEPTH: u32 = 30;

/// One operation's texts for the peers: (SQL, Cypher, Kùzu's Cypher where it differs,
/// whether the answer is one aggregate row).
fn texts(op: Op) -> Option<(String, String, Option<String>, bool)> {
    let s = |t: &str| t.to_string();
    Some(match op {
        Op::T1 => (
            s(sqlite::T1),
            format!(
                "{HIERARCHY} CALL (r) {{ MATCH (r)-[:CONN*0..]->(a:AtomicPart) WITH DISTINCT a RETURN count(a) AS n }} \
                 RETURN sum(n)"
            ),
            // One shortest path to each part reachable from the root, the root itself apart.
            Some(format!(
                "{HIERARCHY} OPTIONAL MATCH (r)-[:CONN* SHORTEST 1..{KUZU_DEPTH}]->(a:AtomicPart) WHERE a.id <> r.id \
                 WITH b, c, r, count(a) AS n RETURN sum(n + 1)"
            )),
            true,
        ),
        Op::T6 => (s(sqlite::T6), format!("{HIERARCHY} RETURN count(r)"), None, true),
        Op::T8 => (
            s("SELECT length(text) - length(replace(text, 'I', '')) FROM manual"),
            s("MATCH (m:Manual) RETURN size(m.text) - size(replace(m.text, 'I', ''))"),
            Some(s("MATCH (m:Manual) RETURN size(m.text) - size(regexp_replace(m.text, 'I', '', 'g'))")),
            true,
        ),
        Op::T9 => (
            s("SELECT CASE WHEN left(text, 1) = right(text, 1) THEN 1 ELSE 0 END FROM manual"),
            s("MATCH (m:Manual) RETURN CASE WHEN left(m.text, 1) = right(m.text, 1) THEN 1 ELSE 0 END"),
            None,
            true,
        ),
        Op::Q1 => (s(sqlite::Q1), s("MATCH (a:AtomicPart {id: $p0}) RETURN a.x, a.y, a.build_date"), None, false),
        Op::Q2 | Op::Q3 => (
            s(sqlite::Q2),
            s("MATCH (a:AtomicPart) WHERE a.build_date >= $p0 AND a.build_date <= $p1 RETURN a.id"),
            None,
            false,
        ),
        Op::Q4 => (
            s(sqlite::Q4),
            s("MATCH (d:Document {title: $p0})-[:DOC]->(:CompositePart)<-[:PRIV]-(b:Assembly) RETURN b.id"),
            None,
            false,
        ),
        Op::Q5 => (
            s(sqlite::Q5),
            s("MATCH (b:Assembly)-[:PRIV]->(c:CompositePart) WHERE c.build_date > b.build_date RETURN DISTINCT b.id"),
            None,
            false,
        ),
        Op::Q7 => (s(sqlite::Q7), s("MATCH (a:AtomicPart) RETURN a.id"), None, false),
        Op::Q8 => (
            s(sqlite::Q8),
            s("MATCH (a:AtomicPart), (d:Document) WHERE d.id = a.doc_id RETURN count(*), coalesce(sum(a.id), 0)"),
            None,
            true,
        ),
        _ => return None,
    })
}

/// The executions of run `run` of `op`, each with its positional parameters.
fn executions(db: &Oo7, op: Op, run: u64) -> Vec<Vec<Value>> {
    let draw = Draw::new(db, op, run);
    match op {
        Op::Q1 => draw.ids.iter().map(|id| vec![json!(id)]).collect(),
        Op::Q4 => draw.titles.iter().map(|t| vec![json!(t)]).collect(),
        Op::Q2 => vec![vec![json!(Q2_RANGE.0), json!(Q2_RANGE.1)]],
        Op::Q3 => vec![vec![json!(Q3_RANGE.0), json!(Q3_RANGE.1)]],
        _ => vec![Vec::new()],
    }
}

/// The property graph the Cypher peers build from the tables: node labels (the first
/// property is the key), relationship types (source and target columns), extra indexes.
pub fn graph() -> Value {
    let int = |c: &str| json!([c, "INT64"]);
    let text = |c: &str| json!([c, "STRING"]);
    json!({
        "nodes": [
            {"label": "Module", "table": "module", "properties": [int("id")]},
            {"label": "Manual", "table": "manual", "properties": [int("id"), text("text")]},
            {"label": "Assembly", "table": "assembly", "properties": [int("id"), int("build_date")]},
            {"label": "CompositePart", "table": "composite_part", "properties": [int("id"), int("build_date")]},
            {"label": "AtomicPart", "table": "atomic_part",
             "properties": [int("id"), int("build_date"), int("x"), int("y"), int("doc_id")]},
            {"label": "Document", "table": "document", "properties": [int("id"), text("title")]},
        ],
        "rels": [
            {"type": "DESIGN_ROOT", "table": "module", "from": ["Module", "id"], "to": ["Assembly", "design_root"]},
            {"type": "SUB", "table": "assembly", "from": ["Assembly", "super"], "to": ["Assembly", "id"]},
            {"type": "PRIV", "table": "components_priv", "from": ["Assembly", "assembly"], "to": ["CompositePart", "part"]},
            {"type": "ROOT", "table": "composite_part", "from": ["CompositePart", "id"], "to": ["AtomicPart", "root_part"]},
            {"type": "CONN", "table": "connection", "from": ["AtomicPart", "src"], "to": ["AtomicPart", "dst"]},
            {"type": "DOC", "table": "document", "from": ["Document", "id"], "to": ["CompositePart", "part"]},
        ],
        "indexes": [["AtomicPart", "build_date"], ["AtomicPart", "doc_id"], ["Document", "title"]],
    })
}

/// Writes SQLite's tables as CSV files with a header row into `dir`: (table, file).
pub fn write_tables(conn: &Connection, dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    espalier_bench::peers::sqlite::write_csv_tables(conn, dir, &TABLES)
}

/// One operation on a peer: the timed runs and every run's answer (warm-up first).
#[derive(Debug, Clone)]
pub struct PeerOp {
    /// The operation.
    pub op: Op,
    /// Each timed run.
    pub times: Vec<Duration>,
    /// Each run's answer, the warm-up runs included.
    pub answers: Vec<Answer>,
}

/// A peer's run.
#[derive(Debug, Clone)]
pub struct PeerRun {
    /// The peer.
    pub peer: GraphPeer,
    /// The peer's name and version as it reports them.
    pub version: String,
    /// Loading the tables into a new database, in ms.
    pub load_ms: f64,
    /// The operations, in the order asked.
    pub ops: Vec<PeerOp>,
}

#[derive(Deserialize)]
struct Reply {
    version: String,
    load_ms: f64,
    queries: Vec<ReplyQuery>,
}

#[derive(Deserialize)]
struct ReplyQuery {
    name: String,
    times_us: Vec<f64>,
    answers: Vec<(i64, i64)>,
}

/// Runs `ops` (of [`OPS`]) on `peer` (its driver in the peers directory `peers`) over the
/// tables `files` of database `db`: `warmup` untimed and `runs` timed runs each, with the
/// random choices of [`Draw`] for runs 0, 1, …. The peer's database goes in `dir`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    peer: GraphPeer,
    peers: &Path,
    db: &Oo7,
    files: &[(String, PathBuf)],
    dir: &Path,
    ops: &[Op],
    warmup: usize,
    runs: usize,
) -> Result<PeerRun, PeerError> {
    let failed = |reason: String| PeerError::Failed { peer: peer.name(), reason };
    let mut queries = Vec::with_capacity(ops.len());
    for &op in ops {
        let (sql, cypher, kuzu, aggregate) =
            texts(op).ok_or_else(|| failed(format!("{} is not run on the peers", op.name())))?;
        let params: Vec<_> = (0..(warmup + runs) as u64).map(|i| executions(db, op, i)).collect();
        queries.push(json!({
            "name": op.name(), "sql": sql, "cypher": cypher, "kuzu": kuzu,
            "answer": if aggregate { "aggregate" } else { "sum" }, "params": params,
        }));
    }
    let mut request = graph();
    if let Value::Object(m) = &mut request {
        m.insert("system".into(), json!(peer.name()));
        m.insert("dir".into(), json!(dir));
        m.insert("ddl".into(), json!(sqlite::TABLES));
        m.insert("tables".into(), files.iter().map(|(t, f)| json!({"name": t, "file": f})).collect());
        m.insert("warmup".into(), json!(warmup));
        m.insert("runs".into(), json!(runs));
        m.insert("queries".into(), Value::Array(queries));
    }
    let reply: Reply = graph_peer::call(peer, peers, "graph", &request)?;
    if reply.queries.len() != ops.len() {
        return Err(failed(format!("{} operations answered of {}", reply.queries.len(), ops.len())));
    }
    let mut out = Vec::with_capacity(ops.len());
    for (&op, q) in ops.iter().zip(reply.queries) {
        if q.name != op.name() || q.times_us.len() != runs || q.answers.len() != warmup + runs {
            return Err(failed(format!(
                "{}: answered as {} with {} timed runs and {} answers",
                op.name(),
                q.name,
                q.times_us.len(),
                q.answers.len()
            )));
        }
        out.push(PeerOp {
            op,
            times: q.times_us.iter().map(|&us| Duration::from_secs_f64(us.max(0.0) / 1e6)).collect(),
            answers: q.answers.iter().map(|&(count, sum)| Answer { count: count as u64, sum: sum as u64 }).collect(),
        });
    }
    Ok(PeerRun { peer, version: reply.version, load_ms: reply.load_ms, ops: out })
}
