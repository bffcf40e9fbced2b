//! The six Train Benchmark queries, written twice: as Espalier pattern queries, and as SQL
//! over the official relational form (the independent route the tests and the benchmark
//! check the first against). A match is the ids of its elements, in the official order.

use std::collections::HashMap;
use std::ops::ControlFlow;

use espalier_instruction::parse::ParseOptions;
use espalier_instruction::plan::Plan;
use espalier_instruction::{parse_instruction, Engine, InstructionError, Reply};
use rusqlite::Connection;

use crate::model::Tables;

/// One of the six Train Benchmark queries; each matches a violation of a well-formedness
/// constraint of the railway model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Query {
    /// Segments whose length is 0 or less.
    PosLength,
    /// Switches that no sensor monitors.
    SwitchMonitored,
    /// A route, a switch position it follows, that position's switch, and a sensor monitoring
    /// the switch that the route does not require.
    RouteSensor,
    /// An active route whose entry semaphore shows GO, a switch position it follows, and that
    /// position's switch when it is not in the position required.
    SwitchSet,
    /// A sensor and six segments, each connected to the next, all monitored by that sensor.
    ConnectedSegments,
    /// An exit semaphore of one route and a second route whose entry it is not, where a track
    /// element monitored by a sensor the first route requires connects to one monitored by a
    /// sensor the second requires.
    SemaphoreNeighbor,
}

impl Query {
    /// The six queries, in the benchmark's order.
    pub const ALL: [Query; 6] = [
        Query::PosLength,
        Query::SwitchMonitored,
        Query::RouteSensor,
        Query::SwitchSet,
        Query::ConnectedSegments,
        Query::SemaphoreNeighbor,
    ];

    /// The query's name, as the benchmark spells it.
    pub fn name(self) -> &'static str {
        match self {
            Query::PosLength => "PosLength",
            Query::SwitchMonitored => "SwitchMonitored",
            Query::RouteSensor => "RouteSensor",
            Query::SwitchSet => "SwitchSet",
            Query::ConnectedSegments => "ConnectedSegments",
            Query::SemaphoreNeighbor => "SemaphoreNeighbor",
        }
    }

    /// The query called `s` (any case), if any.
    pub fn parse(s: &str) -> Option<Query> {
        Query::ALL.into_iter().find(|q| q.name().eq_ignore_ascii_case(s))
    }

    /// The query in Espalier's pattern language; every column is a variable (its key).
    pub fn pattern(self) -> &'static str {
        match self {
            Query::PosLength => {
                "collection match
                    segment in . 'Regions' . 'Track Elements' ? 'Kind' * 'Segment'
                    where segment number : 'Length' <= 0
                select 'segment' -> segment"
            }
            Query::SwitchMonitored => {
                "collection match
                    sw in . 'Regions' . 'Track Elements'
                    where sw ? 'Kind' * 'Switch' and not sw > 'Monitored By'
                select 'sw' -> sw"
            }
            Query::RouteSensor => {
                "collection match
                    route in . 'Routes'
                    swP in route . 'Follows'
                    sw in swP > 'Target'
                    sensor in sw > 'Monitored By'
                    where sw ? 'Kind' * 'Switch' and route > 'Requires' != sensor
                select 'route' -> route 'sensor' -> sensor 'swP' -> swP 'sw' -> sw"
            }
            Query::SwitchSet => {
                "collection match
                    route in . 'Routes'
                    semaphore in route ? 'Entry' * 'Set' > 'Semaphore'
                    swP in route . 'Follows'
                    sw in swP > 'Target' ? 'Kind' * 'Switch'
                    where route stategroup : 'Active' == 'Yes'
                      and semaphore stategroup : 'Signal' == 'GO'
                      and sw stategroup : 'Current Position' != swP stategroup : 'Position'
                select 'semaphore' -> semaphore 'route' -> route 'swP' -> swP 'sw' -> sw"
            }
            Query::ConnectedSegments => {
                "collection match
                    sensor in . 'Regions' . 'Sensors'
                    segment1 in . 'Regions' . 'Track Elements'
                    segment2 in segment1 > 'Connects To'
                    segment3 in segment2 > 'Connects To'
                    segment4 in segment3 > 'Connects To'
                    segment5 in segment4 > 'Connects To'
                    segment6 in segment5 > 'Connects To'
                    where segment1 > 'Monitored By' == sensor and segment2 > 'Monitored By' == sensor
                      and segment3 > 'Monitored By' == sensor and segment4 > 'Monitored By' == sensor
                      and segment5 > 'Monitored By' == sensor and segment6 > 'Monitored By' == sensor
                      and segment1 ? 'Kind' * 'Segment' and segment2 ? 'Kind' * 'Segment'
                      and segment3 ? 'Kind' * 'Segment' and segment4 ? 'Kind' * 'Segment'
                      and segment5 ? 'Kind' * 'Segment' and segment6 ? 'Kind' * 'Segment'
                select 'sensor' -> sensor 'segment1' -> segment1 'segment2' -> segment2 'segment3' -> segment3
                    'segment4' -> segment4 'segment5' -> segment5 'segment6' -> segment6"
            }
            Query::SemaphoreNeighbor => {
                "collection match
                    route1 in . 'Routes'
                    semaphore in route1 ? 'Exit' * 'Set' > 'Semaphore'
                    sensor1 in route1 > 'Requires'
                    te1 in . 'Regions' . 'Track Elements'
                    te2 in te1 > 'Connects To'
                    sensor2 in te2 > 'Monitored By'
                    route2 in . 'Routes'
                    where te1 > 'Monitored By' == sensor1
                      and route2 > 'Requires' == sensor2
                      and route1 != route2
                      and not route2 ? 'Entry' * 'Set' > 'Semaphore' == semaphore
                select 'semaphore' -> semaphore 'route1' -> route1 'route2' -> route2 'sensor1' -> sensor1
                    'sensor2' -> sensor2 'te1' -> te1 'te2' -> te2"
            }
        }
    }

    /// The same query in SQL over the tables of [`create_tables`], written from the
    /// benchmark's definitions (not translated from the pattern).
    pub fn sql(self) -> &'static str {
        match self {
            Query::PosLength => "SELECT id FROM Segment WHERE length <= 0",
            Query::SwitchMonitored => {
                "SELECT id FROM Switch WHERE NOT EXISTS (SELECT 1 FROM monitoredBy m WHERE m.te = Switch.id)"
            }
            Query::RouteSensor => {
                "SELECT f.route, m.sensor, f.swp, t.sw
                 FROM follows f
                 JOIN target t ON t.swp = f.swp
                 JOIN Switch s ON s.id = t.sw
                 JOIN monitoredBy m ON m.te = t.sw
                 WHERE NOT EXISTS (SELECT 1 FROM requires r WHERE r.route = f.route AND r.sensor = m.sensor)"
            }
            Query::SwitchSet => {
                "SELECT e.semaphore, r.id, f.swp, t.sw
                 FROM Route r
                 JOIN entry e ON e.route = r.id
                 JOIN Semaphore sem ON sem.id = e.semaphore
                 JOIN follows f ON f.route = r.id
                 JOIN SwitchPosition p ON p.id = f.swp
                 JOIN target t ON t.swp = f.swp
                 JOIN Switch s ON s.id = t.sw
                 WHERE r.active = 1 AND sem.signal = 'GO' AND s.currentPosition <> p.position"
            }
            Query::ConnectedSegments => {
                "SELECT m1.sensor, s1.id, s2.id, s3.id, s4.id, s5.id, s6.id
                 FROM Segment s1
                 JOIN monitoredBy m1 ON m1.te = s1.id
                 JOIN connectsTo c1 ON c1.src = s1.id JOIN Segment s2 ON s2.id = c1.dst
                 JOIN monitoredBy m2 ON m2.te = s2.id AND m2.sensor = m1.sensor
                 JOIN connectsTo c2 ON c2.src = s2.id JOIN Segment s3 ON s3.id = c2.dst
                 JOIN monitoredBy m3 ON m3.te = s3.id AND m3.sensor = m1.sensor
                 JOIN connectsTo c3 ON c3.src = s3.id JOIN Segment s4 ON s4.id = c3.dst
                 JOIN monitoredBy m4 ON m4.te = s4.id AND m4.sensor = m1.sensor
                 JOIN connectsTo c4 ON c4.src = s4.id JOIN Segment s5 ON s5.id = c4.dst
                 JOIN monitoredBy m5 ON m5.te = s5.id AND m5.sensor = m1.sensor
                 JOIN connectsTo c5 ON c5.src = s5.id JOIN Segment s6 ON s6.id = c5.dst
                 JOIN monitoredBy m6 ON m6.te = s6.id AND m6.sensor = m1.sensor"
            }
            Query::SemaphoreNeighbor => {
                "SELECT x.semaphore, x.route, r2.route, r1.sensor, m2.sensor, m1.te, c.dst
                 FROM exit x
                 JOIN requires r1 ON r1.route = x.route
                 JOIN monitoredBy m1 ON m1.sensor = r1.sensor
                 JOIN connectsTo c ON c.src = m1.te
                 JOIN monitoredBy m2 ON m2.te = c.dst
                 JOIN requires r2 ON r2.sensor = m2.sensor
                 WHERE r2.route <> x.route
                   AND NOT EXISTS (SELECT 1 FROM entry e WHERE e.route = r2.route AND e.semaphore = x.semaphore)"
            }
        }
    }
}

impl Query {
    /// The same query in Cypher for a property graph of the model: node tables `Route`,
    /// `Semaphore`, `Sensor`, `SwitchPosition` and `TrackElement` (with `kind` 'Segment' or
    /// 'Switch'), relationships named as the CSV files' link types (`peers/trainbenchmark.py`
    /// builds it in Kùzu). Written from the benchmark's definitions; columns as [`Query::sql`]'s.
    pub fn cypher(self) -> &'static str {
        match self {
            Query::PosLength => "MATCH (s:TrackElement) WHERE s.kind = 'Segment' AND s.length <= 0 RETURN s.id",
            Query::SwitchMonitored => {
                "MATCH (sw:TrackElement) WHERE sw.kind = 'Switch'
                   AND NOT EXISTS { MATCH (sw)-[:monitoredBy]->(:Sensor) }
                 RETURN sw.id"
            }
            Query::RouteSensor => {
                "MATCH (r:Route)-[:follows]->(p:SwitchPosition)-[:target]->(sw:TrackElement)-[:monitoredBy]->(s:Sensor)
                 WHERE sw.kind = 'Switch' AND NOT EXISTS { MATCH (r)-[:requires]->(s) }
                 RETURN r.id, s.id, p.id, sw.id"
            }
            Query::SwitchSet => {
                "MATCH (r:Route)-[:entry]->(sem:Semaphore), (r)-[:follows]->(p:SwitchPosition)-[:target]->(sw:TrackElement)
                 WHERE r.active AND sem.signal = 'GO' AND sw.kind = 'Switch' AND sw.currentPosition <> p.position
                 RETURN sem.id, r.id, p.id, sw.id"
            }
            Query::ConnectedSegments => {
                "MATCH (s1:TrackElement)-[:monitoredBy]->(sen:Sensor),
                       (s1)-[:connectsTo]->(s2:TrackElement)-[:connectsTo]->(s3:TrackElement)
                           -[:connectsTo]->(s4:TrackElement)-[:connectsTo]->(s5:TrackElement)
                           -[:connectsTo]->(s6:TrackElement),
                       (s2)-[:monitoredBy]->(sen), (s3)-[:monitoredBy]->(sen), (s4)-[:monitoredBy]->(sen),
                       (s5)-[:monitoredBy]->(sen), (s6)-[:monitoredBy]->(sen)
                 WHERE s1.kind = 'Segment' AND s2.kind = 'Segment' AND s3.kind = 'Segment'
                   AND s4.kind = 'Segment' AND s5.kind = 'Segment' AND s6.kind = 'Segment'
                 RETURN sen.id, s1.id, s2.id, s3.id, s4.id, s5.id, s6.id"
            }
            Query::SemaphoreNeighbor => {
                "MATCH (r1:Route)-[:exit]->(sem:Semaphore),
                       (r1)-[:requires]->(sen1:Sensor)<-[:monitoredBy]-(te1:TrackElement)
                           -[:connectsTo]->(te2:TrackElement)-[:monitoredBy]->(sen2:Sensor)<-[:requires]-(r2:Route)
                 WHERE r1.id <> r2.id AND NOT EXISTS { MATCH (r2)-[:entry]->(sem) }
                 RETURN sem.id, r1.id, r2.id, sen1.id, sen2.id, te1.id, te2.id"
            }
        }
    }
}

/// A query's matches, each the ids of its columns; sorted (unstably: equal matches are
/// equal), so match sets compare.
pub type Matches = Vec<Vec<u64>>;

/// Runs the query's pattern (its text, [`Query::pattern`]) on the engine and reads its
/// matches.
pub fn espalier_matches(engine: &Engine, q: Query) -> Result<Matches, InstructionError> {
    visit_matches(engine, &plan(engine, q)?)
}

/// The query's pattern parsed and checked against the engine's schema, once.
pub fn plan(engine: &Engine, q: Query) -> Result<Plan, InstructionError> {
    let instr = parse_instruction(q.pattern(), ParseOptions::CLIENT)?;
    engine.check(&instr, Some(q.pattern()))
}

/// Runs a query's plan and reads its matches as an embedded application reads rows
/// ([`Engine::visit_rows`]: nothing collected, each node's keys borrowed), each column's last
/// key parsed as the element's id: the same values SQLite's side reads from its columns.
pub fn visit_matches(engine: &Engine, plan: &Plan) -> Result<Matches, InstructionError> {
    let mut out = Vec::new();
    let mut bad = None;
    engine.visit_rows(plan, &HashMap::new(), None, &mut |_, values| match values
        .iter()
        .map(|v| v.last_key().and_then(|k| k.parse().ok()))
        .collect::<Option<Vec<u64>>>()
    {
        Some(ids) => {
            out.push(ids);
            ControlFlow::Continue(())
        }
        None => {
            bad = Some(format!("{values:?} are not element keys"));
            ControlFlow::Break(())
        }
    })?;
    if let Some(why) = bad {
        return Err(InstructionError::Value(why));
    }
    out.sort_unstable();
    Ok(out)
}

/// The matches of a query reply: the last component of every key is the element's id.
pub fn matches_of(reply: Reply) -> Result<Matches, InstructionError> {
    let Reply::Query(result) = reply else {
        return Err(InstructionError::Value("a pattern query replies with rows".into()));
    };
    let mut out = result.rows.iter().map(|row| ids_of(&row.values)).collect::<Result<Matches, _>>()?;
    out.sort_unstable();
    Ok(out)
}

/// The element ids of a match's row as a reply holds it: the last key of each column.
pub fn ids_of(values: &[serde_json::Value]) -> Result<Vec<u64>, InstructionError> {
    values
        .iter()
        .map(|v| {
            let last = match v {
                serde_json::Value::Array(parts) => parts.last().and_then(|p| p.as_str()),
                other => other.as_str(),
            };
            last.and_then(|s| s.parse().ok())
                .ok_or_else(|| InstructionError::Value(format!("{v} is not an element key")))
        })
        .collect()
}

/// An in-memory SQLite database holding `t` (see [`create_tables`]), for [`sql_matches`].
pub fn sqlite_of(t: &Tables) -> rusqlite::Result<Connection> {
    let conn = Connection::open_in_memory()?;
    create_tables(&conn, t)?;
    Ok(conn)
}

/// Creates the relational tables (as the official CSV files lay them out) and fills them.
pub fn create_tables(conn: &Connection, t: &Tables) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE Region (id INTEGER PRIMARY KEY);
         CREATE TABLE Route (id INTEGER PRIMARY KEY, active INTEGER NOT NULL);
         CREATE TABLE Segment (id INTEGER PRIMARY KEY, length INTEGER NOT NULL);
         CREATE TABLE Semaphore (id INTEGER PRIMARY KEY, signal TEXT NOT NULL);
         CREATE TABLE Sensor (id INTEGER PRIMARY KEY);
         CREATE TABLE Switch (id INTEGER PRIMARY KEY, currentPosition TEXT NOT NULL);
         CREATE TABLE SwitchPosition (id INTEGER PRIMARY KEY, position TEXT NOT NULL);
         CREATE TABLE connectsTo (src INTEGER NOT NULL, dst INTEGER NOT NULL, PRIMARY KEY (src, dst));
         CREATE TABLE entry (route INTEGER PRIMARY KEY, semaphore INTEGER NOT NULL);
         CREATE TABLE exit (route INTEGER PRIMARY KEY, semaphore INTEGER NOT NULL);
         CREATE TABLE follows (route INTEGER NOT NULL, swp INTEGER NOT NULL, PRIMARY KEY (route, swp));
         CREATE TABLE monitoredBy (te INTEGER NOT NULL, sensor INTEGER NOT NULL, PRIMARY KEY (te, sensor));
         CREATE TABLE requires (route INTEGER NOT NULL, sensor INTEGER NOT NULL, PRIMARY KEY (route, sensor));
         CREATE TABLE target (swp INTEGER PRIMARY KEY, sw INTEGER NOT NULL);
         CREATE INDEX monitoredBy_sensor ON monitoredBy (sensor, te);
         CREATE INDEX requires_sensor ON requires (sensor, route);
         CREATE INDEX connectsTo_dst ON connectsTo (dst);
         CREATE INDEX target_sw ON target (sw);
         CREATE INDEX follows_swp ON follows (swp);",
    )?;
    let tx = conn.unchecked_transaction()?;
    {
        let one = |sql: &str, ids: &mut dyn Iterator<Item = (i64, rusqlite::types::Value)>| -> rusqlite::Result<()> {
            let mut st = tx.prepare(sql)?;
            for (a, b) in ids {
                st.execute(rusqlite::params![a, b])?;
            }
            Ok(())
        };
        use rusqlite::types::Value as V;
        let mut st = tx.prepare("INSERT INTO Region (id) VALUES (?1)")?;
        for id in &t.regions {
            st.execute([*id as i64])?;
        }
        let mut st = tx.prepare("INSERT INTO Sensor (id) VALUES (?1)")?;
        for id in &t.sensors {
            st.execute([*id as i64])?;
        }
        one(
            "INSERT INTO Route VALUES (?1, ?2)",
            &mut t.routes.iter().map(|(i, a)| (*i as i64, V::Integer(*a as i64))),
        )?;
        one("INSERT INTO Segment VALUES (?1, ?2)", &mut t.segments.iter().map(|(i, l)| (*i as i64, V::Integer(*l))))?;
        one(
            "INSERT INTO Semaphore VALUES (?1, ?2)",
            &mut t.semaphores.iter().map(|(i, s)| (*i as i64, V::Text(s.name().into()))),
        )?;
        one(
            "INSERT INTO Switch VALUES (?1, ?2)",
            &mut t.switches.iter().map(|(i, p)| (*i as i64, V::Text(p.name().into()))),
        )?;
        one(
            "INSERT INTO SwitchPosition VALUES (?1, ?2)",
            &mut t.switch_positions.iter().map(|(i, p)| (*i as i64, V::Text(p.name().into()))),
        )?;
        for (table, set) in t.links() {
            one(
                &format!("INSERT INTO {table} VALUES (?1, ?2)"),
                &mut set.iter().map(|(a, b)| (*a as i64, V::Integer(*b as i64))),
            )?;
        }
    }
    tx.commit()?;
    conn.execute_batch("ANALYZE")
}

/// Runs the query's SQL and reads its matches.
pub fn sql_matches(conn: &Connection, q: Query) -> rusqlite::Result<Matches> {
    let mut st = conn.prepare_cached(q.sql())?;
    let n = st.column_count();
    let mut out: Matches = st
        .query_map([], |row| (0..n).map(|i| row.get::<_, i64>(i).map(|v| v as u64)).collect())?
        .collect::<rusqlite::Result<_>>()?;
    out.sort_unstable();
    Ok(out)
}
