//! The graph queries of the social network on the embedded graph peers Kùzu and Neo4j
//! ([`espalier_bench::graph_peer`], through the generic drivers `peers/graph.py` and
//! `peers/neo4j/.../Graph.java`).
//!
//! The people, groups, friendships and memberships go to them as CSV read back out of the
//! SQLite database the benchmark loaded; each builds a property graph of `Person` and `Grp`
//! nodes with `FRIEND` and `MEMBER` edges and runs the Cypher below, written from the paper's
//! descriptions like the SQL. Each invocation's rows must equal SQLite's for the same draw, in
//! the same order, or the run fails. The queries are the eight that walk the graph (members,
//! groups, friends, friends of friends at two and three levels, the two recommendations, the
//! shortest path); the profile, message and activity reads are lookups the peers are not built
//! for here. Neo4j over Bolt ([`crate::bolt`]) runs the same Cypher on the same graph.

use std::path::{Path, PathBuf};
use std::time::Duration;

use espalier_bench::graph_peer::{self, GraphPeer, PeerError};
use rusqlite::Connection;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::model::{group_key, person_key};
use crate::queries::{Draw, Query, MAX_PATH};

/// The queries the graph peers run.
pub const QUERIES: [Query; 8] = [
    Query::GroupMembers,
    Query::PersonGroups,
    Query::FriendRecommendations,
    Query::GroupRecommendations,
    Query::FriendsOfFriends3,
    Query::FriendsOfFriends2,
    Query::ShortestPath,
    Query::Friends,
];

/// The SQLite tables the graph is made from.
const TABLES: [&str; 4] = ["person", "grp", "friend", "member"];

/// The Cypher of `q`, and Kùzu's where it differs; `None` for a query the peers do not run.
pub(crate) fn cypher(q: Query) -> Option<(String, Option<String>)> {
    // Not already a friend, and not the person: friends of friends and recommendations.
    const NEW: &str = "c.id <> $p0 AND NOT EXISTS { MATCH (x)-[:FRIEND]->(c) }";
    Some(match q {
        Query::GroupMembers => {
            ("MATCH (p:Person)-[:MEMBER]->(g:Grp {id: $p0}) RETURN p.id, p.name ORDER BY p.id".into(), None)
        }
        Query::PersonGroups => {
            ("MATCH (p:Person {id: $p0})-[:MEMBER]->(g:Grp) RETURN g.id, g.name ORDER BY g.id".into(), None)
        }
        Query::Friends => {
            ("MATCH (x:Person {id: $p0})-[:FRIEND]->(p:Person) RETURN p.id, p.name ORDER BY p.id".into(), None)
        }
        Query::FriendRecommendations => (
            format!(
                "MATCH (x:Person {{id: $p0}})-[:FRIEND]->(:Person)-[:FRIEND]->(c:Person) WHERE {NEW} \
                 RETURN c.id, count(*) AS n ORDER BY n DESC, c.id"
            ),
            None,
        ),
        Query::GroupRecommendations => (
            "MATCH (x:Person {id: $p0})-[:FRIEND]->(:Person)-[:MEMBER]->(g:Grp) \
             WHERE NOT EXISTS { MATCH (x)-[:MEMBER]->(g) } RETURN g.id, count(*) AS n ORDER BY n DESC, g.id"
                .into(),
            None,
        ),
        Query::FriendsOfFriends2 => (
            format!(
                "MATCH (x:Person {{id: $p0}})-[:FRIEND]->(:Person)-[:FRIEND]->(c:Person) WHERE {NEW} \
                 RETURN DISTINCT c.id, c.name ORDER BY c.id"
            ),
            None,
        ),
        Query::FriendsOfFriends3 => (
            format!(
                "MATCH (x:Person {{id: $p0}})-[:FRIEND]->(:Person)-[:FRIEND]->(:Person)-[:FRIEND]->(c:Person) \
                 WHERE {NEW} RETURN DISTINCT c.id, c.name ORDER BY c.id"
            ),
            None,
        ),
        // The length of a shortest path, as SQL's distance (no row when none within the bound).
        Query::ShortestPath => (
            format!(
                "MATCH p = shortestPath((x:Person {{id: $p0}})-[:FRIEND*..{MAX_PATH}]->(y:Person {{id: $p1}})) \
                 RETURN length(p)"
            ),
            Some(format!(
                "MATCH p = (x:Person)-[:FRIEND* SHORTEST 1..{MAX_PATH}]->(y:Person) \
                 WHERE x.id = $p0 AND y.id = $p1 RETURN length(p)"
            )),
        ),
        _ => return None,
    })
}

/// The one execution of `q` for draw `d`: its positional parameters.
pub(crate) fn params(q: Query, d: &Draw) -> Vec<Value> {
    match q {
        Query::GroupMembers => vec![json!(group_key(d.group))],
        Query::ShortestPath => vec![json!(person_key(d.person)), json!(person_key(d.other))],
        _ => vec![json!(person_key(d.person))],
    }
}

/// Whether a graph peer runs `q` for draw `d`: not a shortest path from a person to themself
/// (SQL's distance is 0; a graph database's shortest path needs a first step).
pub fn runs(q: Query, d: &Draw) -> bool {
    q != Query::ShortestPath || d.person != d.other
}

/// The property graph the peers build from the tables.
fn graph() -> Value {
    let text = |c: &str| json!([c, "STRING"]);
    json!({
        "nodes": [
            {"label": "Person", "table": "person", "properties": [text("id"), text("name")]},
            {"label": "Grp", "table": "grp", "properties": [text("id"), text("name")]},
        ],
        "rels": [
            {"type": "FRIEND", "table": "friend", "from": ["Person", "a"], "to": ["Person", "b"]},
            {"type": "MEMBER", "table": "member", "from": ["Person", "person"], "to": ["Grp", "grp"]},
        ],
        "indexes": [],
    })
}

/// A graph request's common part for `system` (`peers/graph.py`): its work directory `dir`,
/// the tables `files` and the property graph to build from them.
pub(crate) fn request(system: &str, files: &[(String, PathBuf)], dir: &Path) -> Value {
    let mut request = graph();
    if let Value::Object(m) = &mut request {
        m.insert("system".into(), json!(system));
        m.insert("dir".into(), json!(dir));
        m.insert("tables".into(), files.iter().map(|(t, f)| json!({"name": t, "file": f})).collect());
    }
    request
}

/// Writes the tables the peers read into `dir`.
pub fn write_tables(conn: &Connection, dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    espalier_bench::peers::sqlite::write_csv_tables(conn, dir, &TABLES)
}

/// One query on a peer: each timed invocation, and every invocation's rows (untimed first).
#[derive(Debug, Clone)]
pub struct PeerQuery {
    /// The query.
    pub query: Query,
    /// Each timed invocation.
    pub times: Vec<Duration>,
    /// Each invocation's rows.
    pub rows: Vec<Vec<Vec<Value>>>,
}

/// A peer's run.
#[derive(Debug, Clone)]
pub struct PeerRun {
    /// The peer's name and version as it reports them.
    pub version: String,
    /// Loading the tables, in ms.
    pub load_ms: f64,
    /// The queries, in the order asked.
    pub queries: Vec<PeerQuery>,
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
    answers: Vec<Vec<Vec<Value>>>,
}

/// Runs each of `asked` (query, its draws, the first `untimed` of them untimed) on `peer`
/// (its driver in the peers directory `peers`) over the tables `files`; its database goes in
/// `dir`.
pub fn run(
    peer: GraphPeer,
    peers: &Path,
    files: &[(String, PathBuf)],
    dir: &Path,
    asked: &[(Query, &[Draw])],
    untimed: usize,
) -> Result<PeerRun, PeerError> {
    let failed = |reason: String| PeerError::Failed { peer: peer.name(), reason };
    let mut queries = Vec::with_capacity(asked.len());
    for &(q, draws) in asked {
        let (text, kuzu) = cypher(q).ok_or_else(|| failed(format!("{} is not run on the peers", q.name())))?;
        let runs: Vec<Vec<Vec<Value>>> = draws.iter().map(|d| vec![params(q, d)]).collect();
        queries.push(json!({
            "name": q.name(), "sql": Value::Null, "cypher": text, "kuzu": kuzu, "answer": "rows", "params": runs,
        }));
    }
    let mut request = request(peer.name(), files, dir);
    if let Value::Object(m) = &mut request {
        m.insert("ddl".into(), Value::Null);
        m.insert("warmup".into(), json!(untimed));
        m.insert("runs".into(), Value::Null);
        m.insert("queries".into(), Value::Array(queries));
    }
    let reply: Reply = graph_peer::call(peer, peers, "graph", &request)?;
    if reply.queries.len() != asked.len() {
        return Err(failed(format!("{} queries answered of {}", reply.queries.len(), asked.len())));
    }
    let mut out = Vec::with_capacity(asked.len());
    for (&(q, draws), r) in asked.iter().zip(reply.queries) {
        let timed = draws.len().saturating_sub(untimed);
        if r.name != q.name() || r.answers.len() != draws.len() || r.times_us.len() != timed {
            return Err(failed(format!(
                "{}: answered as {} with {} answers and {} times",
                q.name(),
                r.name,
                r.answers.len(),
                r.times_us.len()
            )));
        }
        let times = r.times_us.iter().map(|&us| Duration::from_secs_f64(us.max(0.0) / 1e6)).collect();
        out.push(PeerQuery { query: q, times, rows: r.answers });
    }
    Ok(PeerRun { version: reply.version, load_ms: reply.load_ms, queries: out })
}
