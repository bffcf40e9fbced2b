//! The same network in SQLite and every query in SQL, written from the paper's descriptions
//! (not from the Espalier queries): the system beside Espalier in the in-process run, and the
//! independent computation every Espalier answer is checked against.
//!
//! The shortest path is a recursive common table expression that finds the distance (SQL has
//! no "one path" aggregate); the check compares it with the length of Espalier's path and
//! checks that every hop of that path is a friendship.

use rusqlite::{params, Connection, Statement};
use serde_json::{json, Value};

use crate::model::{address_key, group_key, message_key, organisation_key, person_key, Network};
use crate::queries::{Draw, Query, MAX_PATH};
use crate::Answer;

/// Why SQLite failed.
#[derive(Debug, thiserror::Error)]
#[error("SQLite: {context}: {source}")]
pub struct SqliteError {
    /// What was being done.
    pub context: String,
    /// The error.
    #[source]
    pub source: rusqlite::Error,
}

fn ctx(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> SqliteError {
    let context = context.into();
    move |source| SqliteError { context, source }
}

const TABLES: &str = "
CREATE TABLE organisation (id TEXT PRIMARY KEY, name TEXT NOT NULL, field TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE address (id TEXT PRIMARY KEY, street TEXT NOT NULL, city TEXT NOT NULL, country TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE grp (id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE person (id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, age INTEGER NOT NULL,
    address TEXT NOT NULL REFERENCES address, organisation TEXT NOT NULL REFERENCES organisation) WITHOUT ROWID;
CREATE TABLE friend (a TEXT NOT NULL, b TEXT NOT NULL, PRIMARY KEY (a, b)) WITHOUT ROWID;
CREATE TABLE member (person TEXT NOT NULL, grp TEXT NOT NULL, PRIMARY KEY (person, grp)) WITHOUT ROWID;
CREATE INDEX member_grp ON member (grp, person);
CREATE TABLE activity (person TEXT NOT NULL, id TEXT NOT NULL, title TEXT NOT NULL, created INTEGER NOT NULL,
    PRIMARY KEY (person, id)) WITHOUT ROWID;
CREATE TABLE message (id TEXT PRIMARY KEY, sender TEXT NOT NULL, title TEXT NOT NULL, sent INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE collection (person TEXT NOT NULL, name TEXT NOT NULL, message TEXT NOT NULL,
    PRIMARY KEY (person, name, message)) WITHOUT ROWID;
";

/// Creates the tables in `conn` and loads `net`, in one transaction.
pub fn load(conn: &mut Connection, net: &Network) -> Result<(), SqliteError> {
    conn.execute_batch(TABLES).map_err(ctx("creating the tables"))?;
    let tx = conn.transaction().map_err(ctx("beginning the load"))?;
    {
        let mut s = tx.prepare("INSERT INTO organisation VALUES (?1, ?2, ?3)").map_err(ctx("organisations"))?;
        for (i, o) in net.organisations.iter().enumerate() {
            s.execute(params![organisation_key(i), o.name, o.about]).map_err(ctx("an organisation"))?;
        }
        let mut s = tx.prepare("INSERT INTO address VALUES (?1, ?2, ?3, ?4)").map_err(ctx("addresses"))?;
        for (i, a) in net.addresses.iter().enumerate() {
            s.execute(params![address_key(i), a.street, a.city, a.country]).map_err(ctx("an address"))?;
        }
        let mut s = tx.prepare("INSERT INTO grp VALUES (?1, ?2, ?3)").map_err(ctx("groups"))?;
        for (i, g) in net.groups.iter().enumerate() {
            s.execute(params![group_key(i), g.name, g.about]).map_err(ctx("a group"))?;
        }
        let mut person = tx.prepare("INSERT INTO person VALUES (?1, ?2, ?3, ?4, ?5, ?6)").map_err(ctx("people"))?;
        let mut friend = tx.prepare("INSERT INTO friend VALUES (?1, ?2)").map_err(ctx("friends"))?;
        let mut member = tx.prepare("INSERT INTO member VALUES (?1, ?2)").map_err(ctx("members"))?;
        let mut activity = tx.prepare("INSERT INTO activity VALUES (?1, ?2, ?3, ?4)").map_err(ctx("activities"))?;
        let mut collection = tx.prepare("INSERT INTO collection VALUES (?1, ?2, ?3)").map_err(ctx("collections"))?;
        for (i, p) in net.people.iter().enumerate() {
            let key = person_key(i);
            person
                .execute(params![key, p.name, p.email, p.age, address_key(p.address), organisation_key(p.organisation)])
                .map_err(ctx("a person"))?;
            for &f in &p.friends {
                friend.execute(params![key, person_key(f)]).map_err(ctx("a friendship"))?;
            }
            for &g in &p.groups {
                member.execute(params![key, group_key(g)]).map_err(ctx("a membership"))?;
            }
            for a in &p.activities {
                activity.execute(params![key, a.key, a.title, a.created]).map_err(ctx("an activity"))?;
            }
            for (name, list) in [("inbox", &p.inbox), ("sent", &p.sent)] {
                for &m in list {
                    collection.execute(params![key, name, message_key(m)]).map_err(ctx("a collection entry"))?;
                }
            }
        }
        let mut s = tx.prepare("INSERT INTO message VALUES (?1, ?2, ?3, ?4)").map_err(ctx("messages"))?;
        for (i, m) in net.messages.iter().enumerate() {
            s.execute(params![message_key(i), person_key(m.from), m.title, m.sent]).map_err(ctx("a message"))?;
        }
    }
    tx.commit().map_err(ctx("committing the load"))?;
    conn.execute_batch("ANALYZE").map_err(ctx("ANALYZE"))?;
    Ok(())
}

/// The SQL of a query (for one person, group or pair; the batches run it ten times).
pub fn sql(q: Query) -> String {
    match q {
        Query::GroupMembers => "SELECT p.id, p.name FROM member m JOIN person p ON p.id = m.person
            WHERE m.grp = ?1 ORDER BY p.id"
            .into(),
        Query::PersonGroups => "SELECT g.id, g.name FROM member m JOIN grp g ON g.id = m.grp
            WHERE m.person = ?1 ORDER BY g.id"
            .into(),
        Query::FriendRecommendations => "SELECT f2.b, COUNT(*) AS n FROM friend f1 JOIN friend f2 ON f2.a = f1.b
            WHERE f1.a = ?1 AND f2.b <> ?1
              AND NOT EXISTS (SELECT 1 FROM friend x WHERE x.a = ?1 AND x.b = f2.b)
            GROUP BY f2.b ORDER BY n DESC, f2.b"
            .into(),
        Query::GroupRecommendations => "SELECT m.grp, COUNT(*) AS n FROM friend f JOIN member m ON m.person = f.b
            WHERE f.a = ?1 AND NOT EXISTS (SELECT 1 FROM member y WHERE y.person = ?1 AND y.grp = m.grp)
            GROUP BY m.grp ORDER BY n DESC, m.grp"
            .into(),
        Query::FriendsOfFriends2 => "SELECT p.id, p.name FROM person p WHERE p.id IN (
                SELECT f2.b FROM friend f1 JOIN friend f2 ON f2.a = f1.b WHERE f1.a = ?1)
              AND p.id <> ?1 AND NOT EXISTS (SELECT 1 FROM friend x WHERE x.a = ?1 AND x.b = p.id)
            ORDER BY p.id"
            .into(),
        Query::FriendsOfFriends3 => {
            "WITH two AS (SELECT DISTINCT f2.b AS id FROM friend f1 JOIN friend f2 ON f2.a = f1.b
                WHERE f1.a = ?1)
            SELECT p.id, p.name FROM person p WHERE p.id IN (SELECT f3.b FROM two JOIN friend f3 ON f3.a = two.id)
              AND p.id <> ?1 AND NOT EXISTS (SELECT 1 FROM friend x WHERE x.a = ?1 AND x.b = p.id)
            ORDER BY p.id"
                .into()
        }
        Query::ShortestPath => format!(
            "WITH RECURSIVE r(id, d) AS (SELECT ?1, 0 UNION SELECT f.b, r.d + 1 FROM r JOIN friend f ON f.a = r.id
                WHERE r.d < {MAX_PATH})
            SELECT MIN(d) FROM r WHERE id = ?2 HAVING MIN(d) IS NOT NULL"
        ),
        Query::Inbox => "SELECT m.id, m.sender, m.title, m.sent FROM collection c JOIN message m ON m.id = c.message
            WHERE c.person = ?1 AND c.name = 'inbox' ORDER BY m.sent DESC, m.id"
            .into(),
        Query::MessageCollections => "SELECT person, name, COUNT(*) FROM collection WHERE person = ?1
            GROUP BY name ORDER BY name"
            .into(),
        Query::Profile | Query::Profiles10 => "SELECT p.id, p.name, p.email, p.age, a.street, a.city, o.name
            FROM person p JOIN address a ON a.id = p.address JOIN organisation o ON o.id = p.organisation
            WHERE p.id = ?1"
            .into(),
        Query::Friends | Query::Friends10 => "SELECT p.id, p.name FROM friend f JOIN person p ON p.id = f.b
            WHERE f.a = ?1 ORDER BY p.id"
            .into(),
        Query::Activity | Query::ActivityList10 => {
            "SELECT title, created FROM activity WHERE person = ?1 AND id = ?2".into()
        }
        Query::Activities | Query::Activities10 => "SELECT person, id, title, created FROM activity WHERE person = ?1
            ORDER BY created DESC, id"
            .into(),
        Query::FriendsActivities => "SELECT a.person, a.id, a.title, a.created, COUNT(*) OVER ()
            FROM friend f JOIN activity a ON a.person = f.b WHERE f.a = ?1
            ORDER BY a.created DESC, a.person, a.id LIMIT 100"
            .into(),
    }
}

/// The network in SQLite with every query's statement prepared.
pub struct SocialSqlite<'c> {
    statements: Vec<(Query, Statement<'c>)>,
}

fn text(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Value> {
    Ok(Value::String(r.get::<_, String>(i)?))
}

fn int(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Value> {
    Ok(json!(r.get::<_, i64>(i)?))
}

impl<'c> SocialSqlite<'c> {
    /// Prepares every query on `conn`, which holds a loaded network.
    pub fn new(conn: &'c Connection) -> Result<SocialSqlite<'c>, SqliteError> {
        let mut statements = Vec::new();
        for q in Query::ALL {
            statements.push((q, conn.prepare(&sql(q)).map_err(ctx(format!("preparing {}", q.name())))?));
        }
        Ok(SocialSqlite { statements })
    }

    /// Runs `q` for `d`: the rows as Espalier's reply would hold them, and the total.
    pub fn run(&mut self, q: Query, d: &Draw) -> Result<Answer, SqliteError> {
        let st = self
            .statements
            .iter_mut()
            .find(|(x, _)| *x == q)
            .map(|(_, s)| s)
            .ok_or_else(|| SqliteError { context: q.name().into(), source: rusqlite::Error::InvalidQuery })?;
        let person = person_key(d.person);
        let e = ctx(q.name());
        let mut a = Answer::default();
        let mut push = |rows: Vec<Vec<Value>>, total: Option<u64>| {
            a.total += total.unwrap_or(rows.len() as u64);
            a.rows.extend(rows);
        };
        let two = |r: &rusqlite::Row<'_>| Ok(vec![text(r, 0)?, text(r, 1)?]);
        let counted = |r: &rusqlite::Row<'_>| Ok(vec![text(r, 0)?, int(r, 1)?]);
        let rows = match q {
            Query::GroupMembers => collect(st.query_map([group_key(d.group)], two)),
            Query::PersonGroups | Query::FriendsOfFriends2 | Query::FriendsOfFriends3 | Query::Friends => {
                collect(st.query_map([&person], two))
            }
            Query::FriendRecommendations | Query::GroupRecommendations => collect(st.query_map([&person], counted)),
            Query::ShortestPath => collect(st.query_map([&person, &person_key(d.other)], |r| Ok(vec![int(r, 0)?]))),
            Query::Inbox => {
                collect(st.query_map([&person], |r| Ok(vec![text(r, 0)?, text(r, 1)?, text(r, 2)?, int(r, 3)?])))
            }
            Query::MessageCollections => {
                collect(st.query_map([&person], |r| Ok(vec![json!([text(r, 0)?, text(r, 1)?]), int(r, 2)?])))
            }
            Query::Activity => {
                let key = d.activities.first().cloned().unwrap_or_default();
                collect(st.query_map([&person, &key], |r| Ok(vec![text(r, 0)?, int(r, 1)?])))
            }
            Query::Activities => collect(st.query_map([&person], activity_row)),
            Query::FriendsActivities => {
                let mut total = 0;
                let rows = collect(st.query_map([&person], |r| {
                    total = r.get::<_, i64>(4)? as u64;
                    activity_row(r)
                }))
                .map_err(e)?;
                push(rows, Some(total));
                return Ok(a);
            }
            Query::Profile => collect(st.query_map([&person], profile_row)),
            Query::Profiles10 | Query::Friends10 | Query::Activities10 | Query::ActivityList10 => {
                for (i, x) in d.people.iter().enumerate() {
                    let x = person_key(*x);
                    let rows = match q {
                        Query::Profiles10 => collect(st.query_map([&x], profile_row)),
                        Query::Friends10 => collect(st.query_map([&x], two)),
                        Query::Activities10 => collect(st.query_map([&x], activity_row)),
                        _ => {
                            let key = d.activities.get(i).cloned().unwrap_or_default();
                            collect(st.query_map([&person, &key], |r| Ok(vec![text(r, 0)?, int(r, 1)?])))
                        }
                    }
                    .map_err(ctx(q.name()))?;
                    push(rows, None);
                }
                return Ok(a);
            }
        }
        .map_err(e)?;
        push(rows, None);
        Ok(a)
    }
}

fn collect<I: Iterator<Item = rusqlite::Result<Vec<Value>>>>(
    it: rusqlite::Result<I>,
) -> rusqlite::Result<Vec<Vec<Value>>> {
    it?.collect()
}

fn activity_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Vec<Value>> {
    Ok(vec![json!([text(r, 0)?, text(r, 1)?]), text(r, 2)?, int(r, 3)?])
}

fn profile_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Vec<Value>> {
    Ok(vec![text(r, 0)?, text(r, 1)?, text(r, 2)?, int(r, 3)?, text(r, 4)?, text(r, 5)?, text(r, 6)?])
}
