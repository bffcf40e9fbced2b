//! The SQLite peer: a file-backed database in WAL mode, loaded from an Espalier snapshot.
//!
//! Settings: `journal_mode=WAL`, `synchronous` from the durability pairing, a page cache of
//! up to 1 GiB (`cache_size`; Espalier is served from the OS page cache the same way),
//! `foreign_keys=ON` after the load (checked with `foreign_key_check` first) and
//! `case_sensitive_like=ON` (Espalier's prefix filter is case-sensitive; SQLite's `LIKE` is not
//! by default), and the query planner stability guarantee (`SQLITE_DBCONFIG_ENABLE_QPSG`), so a
//! cached statement is never re-prepared because a bound value changed. No `ANALYZE`: every statement of the workload has one good plan through the
//! primary key and unique indexes, and with STAT4 statistics SQLite re-prepares join
//! statements whenever a bound value changes (see `crate::core`).

use std::path::{Path, PathBuf};

use espalier_data::Graph;
use indicatif::ProgressBar;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ToSql};

use super::relational::{ident, Cell, Dialect, RelationalSchema, RowSink, SqlConn, SqlValue, TableId};
use super::{DurabilityPairing, PeerError};

/// Prepared statements kept per connection (the workload uses a handful).
const STATEMENT_CACHE: usize = 64;

/// A SQLite database file and one connection to it.
pub struct SqlitePeer {
    conn: Connection,
    path: PathBuf,
}

impl SqlitePeer {
    /// Creates a new database file at `path` with the tables of `rs`.
    pub fn create(path: &Path, rs: &RelationalSchema, durability: DurabilityPairing) -> Result<SqlitePeer, PeerError> {
        let ctx = |what: &str| format!("{what} ({})", path.display());
        if path.exists() {
            return Err(PeerError::Invalid(format!("{} already exists", path.display())));
        }
        let conn = Connection::open(path).map_err(|e| PeerError::sqlite(ctx("opening"), e))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| PeerError::sqlite(ctx("setting WAL mode"), e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(PeerError::Invalid(format!("SQLite refused WAL mode for {} (got {mode})", path.display())));
        }
        // Plans stay fixed once prepared: without this, SQLite (built with STAT4) marks statements
        // whose plan could depend on a bound value for re-preparing on every new binding, which
        // cost ~20 µs per statement here — a DBA running prepared OLTP statements turns it on.
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
            .map_err(|e| PeerError::sqlite(ctx("enabling the query planner stability guarantee"), e))?;
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {};
             PRAGMA cache_size = -1048576;
             PRAGMA case_sensitive_like = ON;
             PRAGMA foreign_keys = OFF;",
            durability.sqlite()
        ))
        .map_err(|e| PeerError::sqlite(ctx("setting pragmas"), e))?;
        for stmt in rs.create_tables(Dialect::Sqlite) {
            conn.execute_batch(&stmt).map_err(|e| PeerError::sqlite(format!("creating a table: {stmt}"), e))?;
        }
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(SqlitePeer { conn, path: path.to_path_buf() })
    }

    /// Copies the snapshot into the tables in one transaction, then builds the indexes, checks
    /// the foreign keys and turns their enforcement on. Returns the rows per table.
    pub fn load(
        &mut self,
        rs: &RelationalSchema,
        graph: &Graph<'_>,
        progress: &ProgressBar,
    ) -> Result<Vec<u64>, PeerError> {
        let tx = self.conn.unchecked_transaction().map_err(|e| PeerError::sqlite("beginning the load", e))?;
        let inserts: Vec<String> = rs
            .tables
            .iter()
            .map(|t| {
                let names = t.column_names();
                let marks: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
                format!(
                    "INSERT INTO {} ({}) VALUES ({})",
                    ident(&t.name),
                    names.iter().map(|n| ident(n)).collect::<Vec<_>>().join(", "),
                    marks.join(", ")
                )
            })
            .collect();
        let rows = {
            let mut sink = Inserter { conn: &tx, inserts: &inserts };
            rs.load(graph, &mut sink, progress)?
        };
        for stmt in rs.after_load(Dialect::Sqlite) {
            tx.execute_batch(&stmt).map_err(|e| PeerError::sqlite(format!("creating an index: {stmt}"), e))?;
        }
        tx.commit().map_err(|e| PeerError::sqlite("committing the load", e))?;
        let violations: i64 = self
            .conn
            .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0))
            .map_err(|e| PeerError::sqlite("checking foreign keys", e))?;
        if violations != 0 {
            return Err(PeerError::Mismatch(format!("the loaded SQLite data has {violations} foreign key violations")));
        }
        self.conn
            .execute_batch("PRAGMA foreign_keys = ON")
            .map_err(|e| PeerError::sqlite("enabling foreign keys", e))?;
        Ok(rows)
    }

    /// Bytes on disk: the database file after a checkpoint that empties the WAL, plus what
    /// is left in the WAL (allocated blocks).
    pub fn disk_size(&mut self) -> Result<u64, PeerError> {
        disk_size(&self.conn, &self.path)
    }

    /// The version of the SQLite library linked.
    pub fn version() -> String {
        rusqlite::version().to_string()
    }

    /// The connection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

/// Bytes on disk of the SQLite database at `path`, open as `conn`: the file after a
/// checkpoint that empties the WAL, plus what is left in the WAL (allocated blocks).
pub fn disk_size(conn: &Connection, path: &Path) -> Result<u64, PeerError> {
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .map_err(|e| PeerError::sqlite("checkpointing the WAL", e))?;
    let mut total = 0;
    for suffix in ["", "-wal"] {
        let p = PathBuf::from(format!("{}{suffix}", path.display()));
        total += allocated(&p)?;
    }
    Ok(total)
}

/// Bytes a file occupies on disk (0 if it does not exist).
pub(crate) fn allocated(path: &Path) -> Result<u64, PeerError> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.blocks() * 512),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(PeerError::io(format!("reading the size of {}", path.display()), e)),
    }
}

struct Inserter<'c> {
    conn: &'c Connection,
    inserts: &'c [String],
}

impl RowSink for Inserter<'_> {
    fn row(&mut self, table: TableId, cells: &[Cell]) -> Result<(), PeerError> {
        let sql = &self.inserts[table];
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| PeerError::sqlite(format!("preparing {sql}"), e))?;
        for (i, c) in cells.iter().enumerate() {
            let r = match c {
                Cell::Null => stmt.raw_bind_parameter(i + 1, rusqlite::types::Null),
                Cell::Int(v) => stmt.raw_bind_parameter(i + 1, v),
                Cell::Text(t) => stmt.raw_bind_parameter(i + 1, &**t),
            };
            r.map_err(|e| PeerError::sqlite(format!("binding a value of {sql}"), e))?;
        }
        stmt.raw_execute().map_err(|e| PeerError::sqlite(format!("loading a row: {sql}"), e))?;
        Ok(())
    }
}

fn to_sql(v: &SqlValue) -> &dyn ToSql {
    match v {
        SqlValue::Null => &rusqlite::types::Null,
        SqlValue::Int(i) => i,
        SqlValue::Text(t) => t,
    }
}

fn from_sql(v: ValueRef<'_>) -> Result<SqlValue, PeerError> {
    match v {
        ValueRef::Null => Ok(SqlValue::Null),
        ValueRef::Integer(i) => Ok(SqlValue::Int(i)),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .map(|s| SqlValue::Text(s.to_string()))
            .map_err(|_| PeerError::Invalid("SQLite returned text that is not UTF-8".into())),
        ValueRef::Real(r) => {
            Err(PeerError::Invalid(format!("SQLite returned a real number {r}; the mapping has none")))
        }
        ValueRef::Blob(_) => Err(PeerError::Invalid("SQLite returned a blob; the mapping has none".into())),
    }
}

impl SqlConn for SqlitePeer {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn batch(&mut self, sql: &str) -> Result<(), PeerError> {
        self.conn.execute_batch(sql).map_err(|e| PeerError::sqlite(sql.to_string(), e))
    }

    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Vec<SqlValue>>, PeerError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| PeerError::sqlite(sql.to_string(), e))?;
        let bound: Vec<&dyn ToSql> = params.iter().map(to_sql).collect();
        let width = stmt.column_count();
        let mut rows = stmt.query(bound.as_slice()).map_err(|e| PeerError::sqlite(sql.to_string(), e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| PeerError::sqlite(sql.to_string(), e))? {
            let mut r = Vec::with_capacity(width);
            for i in 0..width {
                r.push(from_sql(row.get_ref(i).map_err(|e| PeerError::sqlite(sql.to_string(), e))?)?);
            }
            out.push(r);
        }
        Ok(out)
    }

    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, PeerError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| PeerError::sqlite(sql.to_string(), e))?;
        let bound: Vec<&dyn ToSql> = params.iter().map(to_sql).collect();
        let n = stmt.execute(bound.as_slice()).map_err(|e| PeerError::sqlite(sql.to_string(), e))?;
        Ok(n as u64)
    }
}

/// Opens (or creates) a suite's SQLite file as the in-process benchmarks (OO7, the Train
/// Benchmark, the social network) use it: WAL, `synchronous=OFF` (beside Espalier's durability
/// `none`), a page cache of up to 1 GiB. The error says what failed.
pub fn open_benchmark_file(path: &Path) -> Result<Connection, String> {
    let e = |x: rusqlite::Error| format!("opening SQLite at {}: {x}", path.display());
    let conn = Connection::open(path).map_err(e)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(e)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(format!("SQLite refused WAL mode (got {mode})"));
    }
    conn.execute_batch("PRAGMA synchronous = OFF; PRAGMA cache_size = -1048576;").map_err(e)?;
    Ok(conn)
}

/// Writes the SQLite tables `tables` of `conn` as CSV files with a header row into `dir`, the
/// form the embedded graph peers load (`crate::graph_peer`): (table, file).
pub fn write_csv_tables(conn: &Connection, dir: &Path, tables: &[&str]) -> Result<Vec<(String, PathBuf)>, String> {
    let mut files = Vec::with_capacity(tables.len());
    for &table in tables {
        let path = dir.join(format!("{table}.csv"));
        let fail = |e: &dyn std::fmt::Display| format!("writing {table} to {}: {e}", path.display());
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).map_err(|e| fail(&e))?);
        let mut st = conn.prepare(&format!("SELECT * FROM {table}")).map_err(|e| fail(&e))?;
        let names: Vec<String> = st.column_names().map(str::to_string).collect();
        crate::graph_peer::write_csv_record(&mut out, names.iter().map(String::as_str)).map_err(|e| fail(&e))?;
        let mut rows = st.query([]).map_err(|e| fail(&e))?;
        let mut fields = vec![String::new(); names.len()];
        while let Some(r) = rows.next().map_err(|e| fail(&e))? {
            for (i, f) in fields.iter_mut().enumerate() {
                *f = match r.get_ref(i).map_err(|e| fail(&e))? {
                    rusqlite::types::ValueRef::Null => String::new(),
                    rusqlite::types::ValueRef::Integer(v) => v.to_string(),
                    rusqlite::types::ValueRef::Real(v) => v.to_string(),
                    rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                        String::from_utf8_lossy(t).into_owned()
                    }
                };
            }
            crate::graph_peer::write_csv_record(&mut out, fields.iter().map(String::as_str)).map_err(|e| fail(&e))?;
        }
        std::io::Write::flush(&mut out).map_err(|e| fail(&e))?;
        files.push((table.to_string(), path));
    }
    Ok(files)
}
