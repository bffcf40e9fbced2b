//! The mix on SQLite: one database file in WAL mode, a connection per client (each client
//! thread opens its own, in this process), `synchronous` paired with the run's durability.
//!
//! - **Without transactions** every statement autocommits. A read-modify-write is a `SELECT`,
//!   then `UPDATE … SET count = count + 1`.
//! - **With transactions** the batch runs between `BEGIN` (deferred) and `COMMIT`. SQLite has
//!   one writer: in WAL mode a transaction reads a snapshot, and a write is allowed only if no
//!   other connection committed since that snapshot was taken — otherwise `SQLITE_BUSY`
//!   (`SQLITE_BUSY_SNAPSHOT`), which is SQLite's serializable isolation refusing a write on a
//!   stale snapshot. The transaction is then rolled back and run again (counted as retried)
//!   with `BEGIN IMMEDIATE`, which takes the write lock first and so cannot be refused again
//!   (retried deferred, a transaction starved under four clients). Waiting for the write lock
//!   is left to a 5 s busy timeout. A read-modify-write writes the count it read plus one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode};

use super::ops::{self, Op, FIELDS};
use super::{Config, Outcome, Session, State, System, SystemKind, MAX_ATTEMPTS};
use crate::peers::PeerError;
use crate::remote::RemoteError;

/// How long a connection waits for a lock before `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// SQLite's file, loaded.
pub struct Lite {
    path: PathBuf,
    synchronous: &'static str,
    last_key: String,
}

fn lite(context: &str, e: rusqlite::Error) -> RemoteError {
    RemoteError::Peer(PeerError::sqlite(context, e))
}

fn fields() -> String {
    (0..FIELDS).map(|f| format!("f{f}")).collect::<Vec<_>>().join(", ")
}

/// A scan: every field of at most `?2` records from key `?1` (SQLite's, and DuckDB's in
/// `super::scans`).
pub(super) const SCAN: &str = "SELECT * FROM usertable WHERE ycsb_key >= ?1 ORDER BY ycsb_key LIMIT ?2";

impl Lite {
    /// Creates the file in `dir` and loads `config.size` records.
    pub fn start(config: &Config, dir: &Path) -> Result<Lite, RemoteError> {
        std::fs::create_dir_all(dir).map_err(|e| RemoteError::io(format!("making {}", dir.display()), e))?;
        let lite_db = Lite {
            path: dir.join("mix.sqlite"),
            synchronous: config.durability.sqlite(),
            last_key: ops::key(config.size.saturating_sub(1)),
        };
        let mut c = lite_db.open()?;
        let columns: String = (0..FIELDS).map(|f| format!(", f{f} TEXT NOT NULL")).collect();
        c.execute_batch(&format!(
            "CREATE TABLE usertable (ycsb_key TEXT PRIMARY KEY{columns}, count INTEGER NOT NULL) WITHOUT ROWID"
        ))
        .map_err(|e| lite("creating usertable", e))?;
        let tx = c.transaction().map_err(|e| lite("loading usertable", e))?;
        {
            let marks: String = (0..FIELDS).map(|_| ", ?").collect();
            let mut insert = tx
                .prepare(&format!("INSERT INTO usertable (ycsb_key, {}, count) VALUES (?{marks}, 0)", fields()))
                .map_err(|e| lite("preparing the load", e))?;
            for r in 0..config.size {
                let mut values = vec![ops::key(r)];
                values.extend((0..FIELDS).map(|f| ops::loaded_value(r, f)));
                insert.execute(rusqlite::params_from_iter(values.iter())).map_err(|e| lite("loading usertable", e))?;
            }
        }
        tx.commit().map_err(|e| lite("loading usertable", e))?;
        Ok(lite_db)
    }

    /// A connection of its own to the loaded file (the in-process scans, `super::scans`).
    pub(super) fn connection(&self) -> Result<Connection, RemoteError> {
        self.open()
    }

    fn open(&self) -> Result<Connection, RemoteError> {
        let c = Connection::open(&self.path).map_err(|e| lite(&format!("opening {}", self.path.display()), e))?;
        c.busy_timeout(BUSY_TIMEOUT).map_err(|e| lite("setting the busy timeout", e))?;
        c.execute_batch(&format!("PRAGMA journal_mode = WAL; PRAGMA synchronous = {};", self.synchronous))
            .map_err(|e| lite("setting WAL mode", e))?;
        Ok(c)
    }
}

impl System for Lite {
    fn kind(&self) -> SystemKind {
        SystemKind::Sqlite
    }

    fn version(&self) -> String {
        format!("SQLite {}", rusqlite::version())
    }

    fn isolation(&self, transactional: bool) -> &'static str {
        if transactional {
            "BEGIN (deferred) … COMMIT per batch, WAL: serializable; a write on a stale snapshot \
             (SQLITE_BUSY) rolled back and retried with BEGIN IMMEDIATE"
        } else {
            "autocommit: each statement its own transaction"
        }
    }

    fn session(&self) -> Result<Box<dyn Session>, RemoteError> {
        Ok(Box::new(LiteSession { conn: self.open()?, last_key: self.last_key.clone() }))
    }

    fn state(&self) -> Result<State, RemoteError> {
        let c = self.open()?;
        let (records, counts): (i64, i64) = c
            .query_row("SELECT count(*), coalesce(sum(count), 0) FROM usertable", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| lite("reading the counts", e))?;
        Ok(State { records: u64::try_from(records).unwrap_or(0), counts })
    }

    fn stop(self: Box<Self>) -> Result<(), RemoteError> {
        Ok(())
    }
}

struct LiteSession {
    conn: Connection,
    last_key: String,
}

/// Runs one operation; `dependent`: a read-modify-write writes the count it read plus one.
fn op(c: &Connection, op: &Op, dependent: bool, last: &str, out: &mut Outcome) -> rusqlite::Result<()> {
    let update =
        |field: usize| format!("UPDATE usertable SET f{} = ?2, count = count + 1 WHERE ycsb_key = ?1", field % FIELDS);
    match op {
        Op::Read { key } => {
            let mut s = c.prepare_cached("SELECT * FROM usertable WHERE ycsb_key = ?1")?;
            if !s.exists([key])? {
                out.wrong(format!("read {key:?}: no record"));
            }
        }
        Op::Update { key, field, value } => match c.prepare_cached(&update(*field))?.execute([key, value])? {
            1 => out.increments += 1,
            n => out.wrong(format!("update {key:?}: {n} rows")),
        },
        Op::Insert { key, value } => {
            let marks: String = (0..FIELDS).map(|_| ", ?2").collect();
            let text = format!("INSERT INTO usertable (ycsb_key, {}, count) VALUES (?1{marks}, 0)", fields());
            c.prepare_cached(&text)?.execute([key, value])?;
            out.inserts += 1;
        }
        Op::Scan { key, limit } => {
            let mut s = c.prepare_cached(SCAN)?;
            let n = i64::try_from(*limit).unwrap_or(i64::MAX);
            let keys: Vec<String> =
                s.query_map(rusqlite::params![key, n], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
            if let Some(wrong) = ops::check_scan(key, *limit, &keys, last) {
                out.wrong(wrong);
            }
        }
        Op::ReadModifyWrite { key, field, value } => {
            let count: Option<i64> = c
                .prepare_cached("SELECT count FROM usertable WHERE ycsb_key = ?1")?
                .query_row([key], |r| r.get(0))
                .map(Some)
                .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(e) })?;
            let Some(count) = count else {
                out.wrong(format!("read-modify-write {key:?}: no record"));
                return Ok(());
            };
            let n = if dependent {
                let text = format!("UPDATE usertable SET f{} = ?2, count = ?3 WHERE ycsb_key = ?1", field % FIELDS);
                c.prepare_cached(&text)?.execute(rusqlite::params![key, value, count + 1])?
            } else {
                c.prepare_cached(&update(*field))?.execute([key, value])?
            };
            if n == 1 {
                out.increments += 1;
            } else {
                out.wrong(format!("read-modify-write {key:?}: {n} rows"));
            }
        }
    }
    Ok(())
}

fn busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

impl Session for LiteSession {
    fn run(&mut self, batch: &[Op], transactional: bool) -> Result<Outcome, String> {
        let (c, last) = (&self.conn, self.last_key.as_str());
        if !transactional {
            let mut out = Outcome::default();
            for o in batch {
                op(c, o, false, last, &mut out).map_err(|e| e.to_string())?;
            }
            return Ok(out);
        }
        let mut retries = 0;
        for _ in 0..MAX_ATTEMPTS {
            let mut out = Outcome::default();
            let begin = if retries == 0 { "BEGIN" } else { "BEGIN IMMEDIATE" };
            let attempt = (|| {
                c.execute_batch(begin)?;
                for o in batch {
                    op(c, o, true, last, &mut out)?;
                }
                c.execute_batch("COMMIT")
            })();
            match attempt {
                Ok(()) => {
                    out.retries = retries;
                    return Ok(out);
                }
                Err(e) => {
                    if !c.is_autocommit() {
                        c.execute_batch("ROLLBACK").map_err(|r| format!("{e}; then ROLLBACK: {r}"))?;
                    }
                    if !busy(&e) {
                        return Err(e.to_string());
                    }
                    retries += 1;
                }
            }
        }
        Err(format!("a transaction was aborted {MAX_ATTEMPTS} times"))
    }
}
