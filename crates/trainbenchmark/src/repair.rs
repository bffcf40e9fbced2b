//! The repair step of the Train Benchmark's repair scenario: fix some of a query's matches,
//! the same way in Espalier (one transaction of instructions) and in SQLite, so that a
//! re-check must find the same smaller match set in both.
//!
//! The fixes are the benchmark's: PosLength sets `length = -length + 1`; SwitchMonitored adds
//! a new sensor monitoring the switch; RouteSensor makes the route require the sensor;
//! SwitchSet sets the switch's position to the one the route wants; ConnectedSegments removes
//! segment2 and connects segment1 to segment3; SemaphoreNeighbor makes the semaphore route2's
//! entry.

use std::collections::{BTreeSet, HashMap};

use rusqlite::{params, Connection};

use crate::model::{ElementKind, Model, Position};
use crate::queries::Query;

/// Where every element sits (its keys) and the values a fix needs, from the model.
pub struct Index {
    region_of: HashMap<u64, u64>,
    /// semaphore -> (region, segment)
    semaphore_at: HashMap<u64, (u64, u64)>,
    length: HashMap<u64, i64>,
    position: HashMap<u64, Position>,
    has_entry: HashMap<u64, bool>,
    next_id: u64,
}

impl Index {
    /// Indexes `model`; the ids of new sensors start above its largest id.
    pub fn new(model: &Model) -> Index {
        let mut ix = Index {
            region_of: HashMap::new(),
            semaphore_at: HashMap::new(),
            length: HashMap::new(),
            position: HashMap::new(),
            has_entry: HashMap::new(),
            next_id: 0,
        };
        let mut max = 0;
        for r in &model.regions {
            max = max.max(r.id);
            for s in &r.sensors {
                ix.region_of.insert(*s, r.id);
                max = max.max(*s);
            }
            for e in &r.elements {
                ix.region_of.insert(e.id, r.id);
                max = max.max(e.id);
                if let ElementKind::Segment { length, semaphores } = &e.kind {
                    ix.length.insert(e.id, *length);
                    for s in semaphores {
                        ix.semaphore_at.insert(s.id, (r.id, e.id));
                        max = max.max(s.id);
                    }
                }
            }
        }
        for r in &model.routes {
            ix.has_entry.insert(r.id, r.entry.is_some());
            max = max.max(r.id);
            for p in &r.follows {
                ix.position.insert(p.id, p.position);
                max = max.max(p.id);
            }
        }
        ix.next_id = max + 1;
        ix
    }

    fn region(&self, id: u64) -> Result<u64, String> {
        self.region_of.get(&id).copied().ok_or_else(|| format!("element {id} is not in the model"))
    }

    /// `. 'Regions' : "r" . 'Track Elements' : "e"`
    fn element_path(&self, id: u64) -> Result<String, String> {
        Ok(format!(". 'Regions' : \"{}\" . 'Track Elements' : \"{id}\"", self.region(id)?))
    }

    /// The compound key of a sensor or track element: `[ "region", "id" ]`.
    fn key(&self, id: u64) -> Result<String, String> {
        Ok(format!("[ \"{}\", \"{id}\" ]", self.region(id)?))
    }
}

/// The matches a repair step fixes: the first `share` of them (at least one if there are
/// any), without two fixes of one thing (one route–sensor pair, one switch, one route2).
pub fn pick(q: Query, matches: &[Vec<u64>], share: f64) -> Vec<Vec<u64>> {
    let want = if matches.is_empty() { 0 } else { ((matches.len() as f64 * share).ceil() as usize).max(1) };
    pick_count(q, matches, want)
}

/// The first `want` matches (the benchmark's "fixed" strategy), as [`pick`] chooses them.
pub fn pick_count(q: Query, matches: &[Vec<u64>], want: usize) -> Vec<Vec<u64>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for m in matches {
        let thing = match q {
            Query::RouteSensor => vec![m[0], m[1]],
            Query::SwitchSet => vec![m[3]],
            Query::SemaphoreNeighbor => vec![m[2]],
            // Two chains may share elements: fix chains that touch none fixed before.
            Query::ConnectedSegments => m[1..].to_vec(),
            _ => m.clone(),
        };
        if thing.iter().any(|t| seen.contains(t)) {
            continue;
        }
        seen.extend(thing);
        out.push(m.clone());
        if out.len() == want {
            break;
        }
    }
    out
}

/// One fix, with every value it needs, so both databases get exactly the same change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fix {
    /// PosLength: `length = -length + 1`.
    Length {
        /// The segment.
        segment: u64,
        /// Its length before the fix.
        length: i64,
    },
    /// SwitchMonitored: a new sensor in the switch's region monitors it.
    Monitor {
        /// The switch.
        switch: u64,
        /// The new sensor's id.
        sensor: u64,
    },
    /// RouteSensor: the route requires the sensor.
    Require {
        /// The route.
        route: u64,
        /// The sensor.
        sensor: u64,
    },
    /// SwitchSet: the switch takes the position the route wants.
    Position {
        /// The switch.
        switch: u64,
        /// The position the route's switch position requires.
        position: Position,
    },
    /// ConnectedSegments: `s2` is removed and `s1` connected to `s3`.
    Bypass {
        /// The first segment of the chain (segment1).
        s1: u64,
        /// The segment removed (segment2).
        s2: u64,
        /// The segment `s1` is connected to instead (segment3).
        s3: u64,
    },
    /// SemaphoreNeighbor: the semaphore becomes the route's entry.
    Entry {
        /// The route (route2 of the match).
        route: u64,
        /// The semaphore.
        semaphore: u64,
    },
}

/// The fixes of the matches `pick` chose; new sensors get fresh ids from `index`.
pub fn fixes(index: &mut Index, q: Query, chosen: &[Vec<u64>]) -> Result<Vec<Fix>, String> {
    chosen
        .iter()
        .map(|m| {
            Ok(match q {
                Query::PosLength => Fix::Length {
                    segment: m[0],
                    length: index.length.get(&m[0]).copied().ok_or_else(|| format!("segment {} unknown", m[0]))?,
                },
                Query::SwitchMonitored => {
                    let sensor = index.next_id;
                    index.next_id += 1;
                    index.region_of.insert(sensor, index.region(m[0])?);
                    Fix::Monitor { switch: m[0], sensor }
                }
                Query::RouteSensor => Fix::Require { route: m[0], sensor: m[1] },
                Query::SwitchSet => Fix::Position {
                    switch: m[3],
                    position: index
                        .position
                        .get(&m[2])
                        .copied()
                        .ok_or_else(|| format!("switch position {} unknown", m[2]))?,
                },
                Query::ConnectedSegments => Fix::Bypass { s1: m[1], s2: m[2], s3: m[3] },
                Query::SemaphoreNeighbor => Fix::Entry { route: m[2], semaphore: m[0] },
            })
        })
        .collect()
}

/// The fixes as one Espalier transaction.
pub fn espalier_text(index: &mut Index, fixes: &[Fix]) -> Result<String, String> {
    let mut list = Vec::with_capacity(fixes.len());
    for f in fixes {
        match *f {
            Fix::Length { segment, length } => list.push(format!(
                "update {} ? 'Kind' * 'Segment' ( 'Length' -> number {} )",
                index.element_path(segment)?,
                1 - length
            )),
            Fix::Monitor { switch, sensor } => list.push(format!(
                "update . 'Regions' : \"{}\" ( 'Sensors' -> dictionary \"{sensor}\" ( ) \
                 'Track Elements' -> dictionary \"{switch}\" update ( 'Monitored By' -> matrix {} ( ) ) )",
                index.region(switch)?,
                index.key(sensor)?
            )),
            Fix::Require { route, sensor } => list
                .push(format!("update . 'Routes' : \"{route}\" ( 'Requires' -> matrix {} ( ) )", index.key(sensor)?)),
            Fix::Position { switch, position } => list.push(format!(
                "update {} ? 'Kind' * 'Switch' ( 'Current Position' -> stategroup '{}' set to ( ) )",
                index.element_path(switch)?,
                position.name()
            )),
            Fix::Bypass { s1, s2, s3 } => {
                list.push(format!(
                    "update {} ( 'Connects To' -> dictionary {} remove 'Connects To' -> matrix {} ( ) )",
                    index.element_path(s1)?,
                    index.key(s2)?,
                    index.key(s3)?
                ));
                list.push(format!(
                    "update . 'Regions' : \"{}\" ( 'Track Elements' -> dictionary \"{s2}\" remove )",
                    index.region(s2)?
                ));
            }
            Fix::Entry { route, semaphore } => {
                let &(region, segment) =
                    index.semaphore_at.get(&semaphore).ok_or_else(|| format!("semaphore {semaphore} unknown"))?;
                // Switch to 'Set' when the route has no entry; else change the one it has.
                let had = index.has_entry.insert(route, true).unwrap_or(false);
                let how = if had { "( " } else { "set to ( " };
                list.push(format!(
                    "update . 'Routes' : \"{route}\" ( 'Entry' -> stategroup 'Set' {how}'Semaphore' -> reference \
                     [ \"{region}\", \"{segment}\", \"{semaphore}\" ] ) )"
                ));
            }
        }
    }
    Ok(format!("transaction ( {} )", list.join(" , ")))
}

/// The same fixes in SQLite (the caller wraps them in a transaction).
pub fn sql_apply(conn: &Connection, fixes: &[Fix]) -> rusqlite::Result<()> {
    for f in fixes {
        match *f {
            Fix::Length { segment, length } => {
                conn.execute("UPDATE Segment SET length = ?1 WHERE id = ?2", params![1 - length, segment as i64])?;
            }
            Fix::Monitor { switch, sensor } => {
                conn.execute("INSERT INTO Sensor (id) VALUES (?1)", [sensor as i64])?;
                conn.execute("INSERT INTO monitoredBy (te, sensor) VALUES (?1, ?2)", [switch as i64, sensor as i64])?;
            }
            Fix::Require { route, sensor } => {
                conn.execute("INSERT INTO requires (route, sensor) VALUES (?1, ?2)", [route as i64, sensor as i64])?;
            }
            Fix::Position { switch, position } => {
                conn.execute(
                    "UPDATE Switch SET currentPosition = ?1 WHERE id = ?2",
                    params![position.name(), switch as i64],
                )?;
            }
            Fix::Bypass { s1, s2, s3 } => {
                conn.execute("DELETE FROM connectsTo WHERE src = ?1 OR dst = ?1", [s2 as i64])?;
                conn.execute("DELETE FROM monitoredBy WHERE te = ?1", [s2 as i64])?;
                conn.execute("DELETE FROM Segment WHERE id = ?1", [s2 as i64])?;
                conn.execute("INSERT INTO connectsTo (src, dst) VALUES (?1, ?2)", [s1 as i64, s3 as i64])?;
            }
            Fix::Entry { route, semaphore } => {
                conn.execute(
                    "INSERT OR REPLACE INTO entry (route, semaphore) VALUES (?1, ?2)",
                    [route as i64, semaphore as i64],
                )?;
            }
        }
    }
    Ok(())
}
