//! The PostgreSQL peer: a connection (over the unix socket) to a private server started by
//! [`PgServer`], loaded from an Espalier snapshot with `COPY`.
//!
//! The load runs in one transaction: `CREATE TABLE`s, `COPY … FROM STDIN` per table (rows are
//! buffered per table and sent a buffer at a time), then the indexes and foreign keys, as
//! `pg_restore` does it; then `VACUUM ANALYZE` so the planner has statistics and index-only
//! scans work. Server settings: the durability pairing, `shared_buffers` (1 GiB by default,
//! like SQLite's cache), C collation (keys compare byte by byte, as in Espalier).

use std::collections::HashMap;
use std::io::Write as _;

use espalier_data::Graph;
use indicatif::ProgressBar;
use postgres::types::{ToSql, Type};
use postgres::{Client, Statement};

use super::pg_server::PgServer;
use super::relational::{ident, Cell, Dialect, RelationalSchema, RowSink, SqlConn, SqlValue, TableId};
use super::PeerError;

/// Bytes of `COPY` text buffered per table before it is sent.
const COPY_BUFFER: usize = 1 << 20;
/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 64;

/// A PostgreSQL server started for the run and one connection to it.
pub struct PgPeer {
    // Declared before `server` so that the connection closes before the server stops.
    client: Client,
    statements: HashMap<String, Statement>,
    /// `pg_database_size` of the benchmark database before any table existed.
    empty_size: u64,
    server: PgServer,
}

impl PgPeer {
    /// Connects to `server`'s benchmark database and creates the tables of `rs`.
    pub fn create(server: PgServer, rs: &RelationalSchema) -> Result<PgPeer, PeerError> {
        let mut client = server.connect()?;
        let empty_size = database_size(&mut client)?;
        let mut peer = PgPeer { client, statements: HashMap::new(), empty_size, server };
        for stmt in rs.create_tables(Dialect::Postgres) {
            peer.client.batch_execute(&stmt).map_err(|e| PeerError::pg(format!("creating a table: {stmt}"), e))?;
        }
        Ok(peer)
    }

    /// Copies the snapshot into the tables, builds indexes and foreign keys, then vacuums and
    /// analyzes. Returns the rows per table.
    pub fn load(
        &mut self,
        rs: &RelationalSchema,
        graph: &Graph<'_>,
        progress: &ProgressBar,
    ) -> Result<Vec<u64>, PeerError> {
        let copies: Vec<String> = rs
            .tables
            .iter()
            .map(|t| {
                let cols: Vec<String> = t.column_names().iter().map(|c| ident(c)).collect();
                format!("COPY {} ({}) FROM STDIN", ident(&t.name), cols.join(", "))
            })
            .collect();
        let mut tx = self.client.transaction().map_err(|e| PeerError::pg("beginning the load", e))?;
        let rows = {
            let mut sink = Copier { tx: &mut tx, copies: &copies, buffers: vec![Vec::new(); copies.len()] };
            let rows = rs.load(graph, &mut sink, progress)?;
            for t in 0..copies.len() {
                sink.flush(t)?;
            }
            rows
        };
        for stmt in rs.after_load(Dialect::Postgres) {
            tx.batch_execute(&stmt).map_err(|e| PeerError::pg(format!("after the load: {stmt}"), e))?;
        }
        tx.commit().map_err(|e| PeerError::pg("committing the load", e))?;
        self.client.batch_execute("VACUUM ANALYZE").map_err(|e| PeerError::pg("VACUUM ANALYZE after the load", e))?;
        Ok(rows)
    }

    /// `pg_database_size` of the benchmark database (tables, indexes, catalog; not the WAL).
    pub fn disk_size(&mut self) -> Result<u64, PeerError> {
        self.client.batch_execute("CHECKPOINT").map_err(|e| PeerError::pg("CHECKPOINT", e))?;
        database_size(&mut self.client)
    }

    /// The size of the benchmark database before the tables were made (its catalog).
    pub fn empty_size(&self) -> u64 {
        self.empty_size
    }

    /// The server this peer runs on.
    pub fn server(&self) -> &PgServer {
        &self.server
    }

    /// The connection, for statements the peer does not wrap.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Closes the connection and stops the server.
    pub fn stop(self) -> Result<(), PeerError> {
        let PgPeer { client, server, .. } = self;
        drop(client);
        server.stop()
    }

    fn statement(&mut self, sql: &str) -> Result<Statement, PeerError> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).map_err(|e| PeerError::pg(format!("preparing {sql}"), e))?;
        if self.statements.len() >= STATEMENT_CACHE {
            self.statements.clear();
        }
        self.statements.insert(sql.to_string(), s.clone());
        Ok(s)
    }
}

fn database_size(client: &mut Client) -> Result<u64, PeerError> {
    let row = client
        .query_one("SELECT pg_database_size(current_database())", &[])
        .map_err(|e| PeerError::pg("reading pg_database_size", e))?;
    let size: i64 = row.get(0);
    Ok(size.max(0) as u64)
}

struct Copier<'t, 'c> {
    tx: &'t mut postgres::Transaction<'c>,
    copies: &'t [String],
    buffers: Vec<Vec<u8>>,
}

impl Copier<'_, '_> {
    fn flush(&mut self, table: TableId) -> Result<(), PeerError> {
        if self.buffers[table].is_empty() {
            return Ok(());
        }
        let sql = &self.copies[table];
        let mut w = self.tx.copy_in(sql.as_str()).map_err(|e| PeerError::pg(sql.clone(), e))?;
        w.write_all(&self.buffers[table]).map_err(|e| PeerError::io(format!("sending rows: {sql}"), e))?;
        w.finish().map_err(|e| PeerError::pg(sql.clone(), e))?;
        self.buffers[table].clear();
        Ok(())
    }
}

/// Appends `s` in `COPY` text format.
fn copy_text(out: &mut Vec<u8>, s: &str) {
    for b in s.bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => out.push(b),
        }
    }
}

impl RowSink for Copier<'_, '_> {
    fn row(&mut self, table: TableId, cells: &[Cell]) -> Result<(), PeerError> {
        let buf = &mut self.buffers[table];
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                buf.push(b'\t');
            }
            match c {
                Cell::Null => buf.extend_from_slice(b"\\N"),
                Cell::Int(v) => {
                    let _ = write!(buf, "{v}");
                }
                Cell::Text(t) => copy_text(buf, t),
            }
        }
        buf.push(b'\n');
        if buf.len() >= COPY_BUFFER {
            self.flush(table)?;
        }
        Ok(())
    }
}

fn params(values: &[SqlValue]) -> Result<Vec<&(dyn ToSql + Sync)>, PeerError> {
    values
        .iter()
        .map(|v| match v {
            SqlValue::Int(i) => Ok(i as &(dyn ToSql + Sync)),
            SqlValue::Text(t) => Ok(t as &(dyn ToSql + Sync)),
            SqlValue::Null => Err(PeerError::Invalid("a NULL parameter has no type; write NULL in the SQL".into())),
        })
        .collect()
}

fn cell(row: &postgres::Row, i: usize) -> Result<SqlValue, PeerError> {
    let ty = row.columns()[i].type_().clone();
    let bad = |e: postgres::Error| PeerError::pg(format!("reading column {i}"), e);
    Ok(match ty {
        Type::INT2 => {
            row.try_get::<_, Option<i16>>(i).map_err(bad)?.map_or(SqlValue::Null, |v| SqlValue::Int(v.into()))
        }
        Type::INT4 => {
            row.try_get::<_, Option<i32>>(i).map_err(bad)?.map_or(SqlValue::Null, |v| SqlValue::Int(v.into()))
        }
        Type::INT8 => row.try_get::<_, Option<i64>>(i).map_err(bad)?.map_or(SqlValue::Null, SqlValue::Int),
        Type::BOOL => {
            row.try_get::<_, Option<bool>>(i).map_err(bad)?.map_or(SqlValue::Null, |v| SqlValue::Int(v.into()))
        }
        Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR => {
            row.try_get::<_, Option<String>>(i).map_err(bad)?.map_or(SqlValue::Null, SqlValue::Text)
        }
        other => {
            return Err(PeerError::Invalid(format!(
                "PostgreSQL returned a column of type {other}; the mapping has none"
            )))
        }
    })
}

impl SqlConn for PgPeer {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn batch(&mut self, sql: &str) -> Result<(), PeerError> {
        self.client.batch_execute(sql).map_err(|e| PeerError::pg(sql.to_string(), e))
    }

    fn query(&mut self, sql: &str, values: &[SqlValue]) -> Result<Vec<Vec<SqlValue>>, PeerError> {
        let stmt = self.statement(sql)?;
        let p = params(values)?;
        let rows = self.client.query(&stmt, &p).map_err(|e| PeerError::pg(sql.to_string(), e))?;
        rows.iter().map(|r| (0..r.len()).map(|i| cell(r, i)).collect()).collect()
    }

    fn execute(&mut self, sql: &str, values: &[SqlValue]) -> Result<u64, PeerError> {
        let stmt = self.statement(sql)?;
        let p = params(values)?;
        self.client.execute(&stmt, &p).map_err(|e| PeerError::pg(sql.to_string(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_text_escapes_the_format_characters() {
        let mut out = Vec::new();
        copy_text(&mut out, "a\\b\tc\nd\re é");
        assert_eq!(String::from_utf8(out).expect("utf-8"), "a\\\\b\\tc\\nd\\re é");
    }
}
