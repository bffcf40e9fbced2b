//! The mix on PostgreSQL: a private server (`peers::pg_server`), a connection per client over
//! its unix socket, prepared statements; `usertable`'s key is `text COLLATE "C"` so that its
//! order is the bytes' order, as in Espalier and SQLite.
//!
//! - **Without transactions** every statement autocommits. A read-modify-write is a `SELECT`,
//!   then `UPDATE … SET count = count + 1` (the increment in the statement, so none is lost).
//! - **With transactions** the batch runs between `BEGIN ISOLATION LEVEL REPEATABLE READ` and
//!   `COMMIT` (snapshot isolation). A read-modify-write reads the count and writes the value
//!   read plus one, computed by the client: the dependent write a snapshot must protect. An
//!   update of a row another transaction changed since the snapshot fails with a
//!   serialization failure (SQLSTATE 40001; a deadlock, 40P01, likewise): the transaction is
//!   rolled back and run again from the start, and each such attempt is counted as retried.

use std::path::Path;

use postgres::error::SqlState;
use postgres::{Client, Statement};

use super::ops::{self, Op, FIELDS};
use super::{Config, Outcome, Session, State, System, SystemKind, MAX_ATTEMPTS};
use crate::peers::pg_server::{PgServer, ServerOptions};
use crate::peers::PeerError;
use crate::remote::RemoteError;

/// PostgreSQL running, loaded.
pub struct Pg {
    server: PgServer,
    last_key: String,
}

fn pg(context: &str, e: postgres::Error) -> RemoteError {
    RemoteError::Peer(PeerError::pg(context, e))
}

/// `f0, …, f9`.
fn field_list() -> String {
    (0..FIELDS).map(|f| format!("f{f}")).collect::<Vec<_>>().join(", ")
}

impl Pg {
    /// Starts a private server with the run's durability and loads `config.size` records.
    pub fn start(config: &Config, dir: &Path) -> Result<Pg, RemoteError> {
        std::fs::create_dir_all(dir).map_err(|e| RemoteError::io(format!("making {}", dir.display()), e))?;
        let mut settings: Vec<String> = config.durability.postgres().iter().map(|s| s.to_string()).collect();
        settings.push("shared_buffers = 256MB".into());
        settings.push(format!("max_connections = {}", config.clients.iter().max().copied().unwrap_or(1) + 10));
        let server = PgServer::start(&ServerOptions { settings, dir: Some(dir.to_path_buf()) })?;
        let mut c = server.connect()?;
        let columns: String = (0..FIELDS).map(|f| format!(", f{f} text NOT NULL")).collect();
        c.batch_execute(&format!(
            "CREATE TABLE usertable (ycsb_key text COLLATE \"C\" PRIMARY KEY{columns}, count bigint NOT NULL)"
        ))
        .map_err(|e| pg("creating usertable", e))?;
        let marks: String = (2..=FIELDS + 1).map(|i| format!(", ${i}")).collect();
        let mut tx = c.transaction().map_err(|e| pg("loading usertable", e))?;
        let insert = tx
            .prepare(&format!("INSERT INTO usertable (ycsb_key, {}, count) VALUES ($1{marks}, 0)", field_list()))
            .map_err(|e| pg("preparing the load", e))?;
        for r in 0..config.size {
            let values: Vec<String> = (0..FIELDS).map(|f| ops::loaded_value(r, f)).collect();
            let key = ops::key(r);
            let mut args: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![&key];
            args.extend(values.iter().map(|v| v as &(dyn postgres::types::ToSql + Sync)));
            tx.execute(&insert, &args).map_err(|e| pg("loading usertable", e))?;
        }
        tx.commit().map_err(|e| pg("loading usertable", e))?;
        c.batch_execute("VACUUM ANALYZE usertable").map_err(|e| pg("analyzing usertable", e))?;
        Ok(Pg { server, last_key: ops::key(config.size.saturating_sub(1)) })
    }
}

impl System for Pg {
    fn kind(&self) -> SystemKind {
        SystemKind::Postgres
    }

    fn version(&self) -> String {
        self.server.version()
    }

    fn isolation(&self, transactional: bool) -> &'static str {
        if transactional {
            "BEGIN ISOLATION LEVEL REPEATABLE READ … COMMIT per batch (snapshot isolation); serialization \
             failures rolled back and retried"
        } else {
            "autocommit: each statement its own transaction (READ COMMITTED)"
        }
    }

    fn session(&self) -> Result<Box<dyn Session>, RemoteError> {
        let mut client = self.server.connect()?;
        let prepared = Prepared::new(&mut client).map_err(|e| pg("preparing the statements", e))?;
        Ok(Box::new(PgSession { client, prepared, last_key: self.last_key.clone() }))
    }

    fn state(&self) -> Result<State, RemoteError> {
        let mut c = self.server.connect()?;
        let row = c
            .query_one("SELECT count(*), coalesce(sum(count), 0)::bigint FROM usertable", &[])
            .map_err(|e| pg("reading the counts", e))?;
        let records: i64 = row.get(0);
        Ok(State { records: u64::try_from(records).unwrap_or(0), counts: row.get(1) })
    }

    fn stop(self: Box<Self>) -> Result<(), RemoteError> {
        Ok(self.server.stop()?)
    }
}

/// A session's prepared statements.
struct Prepared {
    read: Statement,
    read_count: Statement,
    update: Vec<Statement>,
    write_count: Vec<Statement>,
    insert: Statement,
    scan: Statement,
}

impl Prepared {
    fn new(c: &mut Client) -> Result<Prepared, postgres::Error> {
        let marks: String = (2..=FIELDS + 1).map(|i| format!(", ${i}")).collect();
        Ok(Prepared {
            read: c.prepare("SELECT * FROM usertable WHERE ycsb_key = $1")?,
            read_count: c.prepare("SELECT count FROM usertable WHERE ycsb_key = $1")?,
            update: (0..FIELDS)
                .map(|f| c.prepare(&format!("UPDATE usertable SET f{f} = $2, count = count + 1 WHERE ycsb_key = $1")))
                .collect::<Result<_, _>>()?,
            write_count: (0..FIELDS)
                .map(|f| c.prepare(&format!("UPDATE usertable SET f{f} = $2, count = $3 WHERE ycsb_key = $1")))
                .collect::<Result<_, _>>()?,
            insert: c
                .prepare(&format!("INSERT INTO usertable (ycsb_key, {}, count) VALUES ($1{marks}, 0)", field_list()))?,
            scan: c.prepare("SELECT * FROM usertable WHERE ycsb_key >= $1 ORDER BY ycsb_key LIMIT $2")?,
        })
    }
}

struct PgSession {
    client: Client,
    prepared: Prepared,
    last_key: String,
}

/// Runs one operation; `dependent`: a read-modify-write writes the count it read plus one.
fn op(
    c: &mut Client,
    p: &Prepared,
    op: &Op,
    dependent: bool,
    last: &str,
    out: &mut Outcome,
) -> Result<(), postgres::Error> {
    match op {
        Op::Read { key } => {
            if c.query_opt(&p.read, &[key])?.is_none() {
                out.wrong(format!("read {key:?}: no record"));
            }
        }
        Op::Update { key, field, value } => match c.execute(&p.update[*field % FIELDS], &[key, value])? {
            1 => out.increments += 1,
            n => out.wrong(format!("update {key:?}: {n} rows")),
        },
        Op::Insert { key, value } => {
            let values: Vec<String> = (0..FIELDS).map(|_| value.clone()).collect();
            let mut args: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![key];
            args.extend(values.iter().map(|v| v as &(dyn postgres::types::ToSql + Sync)));
            c.execute(&p.insert, &args)?;
            out.inserts += 1;
        }
        Op::Scan { key, limit } => {
            let limit = i64::try_from(*limit).unwrap_or(i64::MAX);
            let rows = c.query(&p.scan, &[key, &limit])?;
            let keys: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
            if let Some(wrong) = ops::check_scan(key, limit.unsigned_abs(), &keys, last) {
                out.wrong(wrong);
            }
        }
        Op::ReadModifyWrite { key, field, value } => {
            let Some(row) = c.query_opt(&p.read_count, &[key])? else {
                out.wrong(format!("read-modify-write {key:?}: no record"));
                return Ok(());
            };
            let n = if dependent {
                let count: i64 = row.get(0);
                c.execute(&p.write_count[*field % FIELDS], &[key, value, &(count + 1)])?
            } else {
                c.execute(&p.update[*field % FIELDS], &[key, value])?
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

fn retryable(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
}

impl Session for PgSession {
    fn run(&mut self, batch: &[Op], transactional: bool) -> Result<Outcome, String> {
        let (c, p, last) = (&mut self.client, &self.prepared, self.last_key.as_str());
        if !transactional {
            let mut out = Outcome::default();
            for o in batch {
                op(c, p, o, false, last, &mut out).map_err(|e| e.to_string())?;
            }
            return Ok(out);
        }
        let mut retries = 0;
        for _ in 0..MAX_ATTEMPTS {
            let mut out = Outcome::default();
            let attempt = (|| {
                c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")?;
                for o in batch {
                    op(c, p, o, true, last, &mut out)?;
                }
                c.batch_execute("COMMIT")
            })();
            match attempt {
                Ok(()) => {
                    out.retries = retries;
                    return Ok(out);
                }
                Err(e) => {
                    c.batch_execute("ROLLBACK").map_err(|r| format!("{e}; then ROLLBACK: {r}"))?;
                    if !retryable(&e) {
                        return Err(e.to_string());
                    }
                    retries += 1;
                }
            }
        }
        Err(format!("a transaction was aborted {MAX_ATTEMPTS} times"))
    }
}
