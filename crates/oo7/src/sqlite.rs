//! The operations in SQLite, written from the paper (not translated from the Espalier
//! code): one table per class, a table per many-to-many relationship, an index on every
//! column a lookup or join uses (the paper's `with extent … indexed` and the inverse
//! relationships). T1 and T6 are recursive SQL; the traversals that update (T2, T3, CU) and
//! T1's "one"/"many" variants are code stepping prepared statements object to object, as the
//! paper's implementations navigate.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, OptionalExtension};

use crate::model::{CompositePart, Document, Oo7, Shape};
use crate::ops::{toggle_date, Answer, Draw, Fingerprint, Op, Q2_RANGE, Q3_RANGE};

/// An operation that failed in SQLite.
#[derive(Debug, thiserror::Error)]
pub enum SqliteError {
    /// A statement failed.
    #[error("{0}")]
    Sql(#[from] rusqlite::Error),
    /// A column's value could not be read as the type asked for.
    #[error("{0}")]
    Value(#[from] rusqlite::types::FromSqlError),
    /// The operation is not run by the function called.
    #[error("{0} is not run this way")]
    NotHere(&'static str),
}

type Result<T> = std::result::Result<T, SqliteError>;

pub(crate) const TABLES: &str = "
CREATE TABLE module (id INTEGER PRIMARY KEY, type TEXT NOT NULL, build_date INTEGER NOT NULL,
    design_root INTEGER NOT NULL);
CREATE TABLE manual (id INTEGER PRIMARY KEY, module INTEGER NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL,
    text_len INTEGER NOT NULL);
CREATE TABLE assembly (id INTEGER PRIMARY KEY, module INTEGER NOT NULL, type TEXT NOT NULL,
    build_date INTEGER NOT NULL, super INTEGER, base INTEGER NOT NULL);
CREATE INDEX assembly_super ON assembly (super);
CREATE TABLE components_priv (assembly INTEGER NOT NULL, part INTEGER NOT NULL, PRIMARY KEY (assembly, part));
CREATE INDEX components_priv_part ON components_priv (part, assembly);
CREATE TABLE components_shar (assembly INTEGER NOT NULL, part INTEGER NOT NULL, PRIMARY KEY (assembly, part));
CREATE INDEX components_shar_part ON components_shar (part, assembly);
CREATE TABLE composite_part (id INTEGER PRIMARY KEY, type TEXT NOT NULL, build_date INTEGER NOT NULL,
    root_part INTEGER NOT NULL);
CREATE TABLE atomic_part (id INTEGER PRIMARY KEY, part_of INTEGER NOT NULL, type TEXT NOT NULL,
    build_date INTEGER NOT NULL, x INTEGER NOT NULL, y INTEGER NOT NULL, doc_id INTEGER NOT NULL);
CREATE INDEX atomic_part_build_date ON atomic_part (build_date);
CREATE INDEX atomic_part_part_of ON atomic_part (part_of);
CREATE TABLE connection (src INTEGER NOT NULL, dst INTEGER NOT NULL, type TEXT NOT NULL, length INTEGER NOT NULL,
    PRIMARY KEY (src, dst));
CREATE INDEX connection_dst ON connection (dst);
CREATE TABLE document (id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, text TEXT NOT NULL,
    part INTEGER NOT NULL);
CREATE INDEX document_part ON document (part);
";

/// T1: the assembly tree, each base assembly's private composite parts, and every atomic
/// part reachable from each one's root part (UNION: once per visit of a composite part).
pub const T1: &str = "
WITH RECURSIVE asm(id) AS (
    SELECT design_root FROM module
    UNION ALL SELECT a.id FROM assembly a JOIN asm ON a.super = asm.id),
visit(ba, cp, root) AS (
    SELECT c.assembly, c.part, p.root_part FROM asm
    JOIN components_priv c ON c.assembly = asm.id JOIN composite_part p ON p.id = c.part),
reach(ba, cp, ap) AS (
    SELECT ba, cp, root FROM visit
    UNION SELECT r.ba, r.cp, c.dst FROM reach r JOIN connection c ON c.src = r.ap)
SELECT count(*) FROM reach";

/// T6: as T1, the root parts only.
pub const T6: &str = "
WITH RECURSIVE asm(id) AS (
    SELECT design_root FROM module
    UNION ALL SELECT a.id FROM assembly a JOIN asm ON a.super = asm.id)
SELECT count(p.root_part) FROM asm JOIN components_priv c ON c.assembly = asm.id
JOIN composite_part p ON p.id = c.part";

const MANUAL: &str = "SELECT text FROM manual";
pub(crate) const Q1: &str = "SELECT x, y, build_date FROM atomic_part WHERE id = ?1";
pub(crate) const Q2: &str = "SELECT id FROM atomic_part WHERE build_date BETWEEN ?1 AND ?2";
pub(crate) const Q4: &str =
    "SELECT c.assembly FROM document d JOIN components_priv c ON c.part = d.part WHERE d.title = ?1";
pub(crate) const Q5: &str = "SELECT DISTINCT a.id FROM assembly a JOIN components_priv c ON c.assembly = a.id
    JOIN composite_part p ON p.id = c.part WHERE p.build_date > a.build_date";
pub(crate) const Q7: &str = "SELECT id FROM atomic_part";
pub(crate) const Q8: &str =
    "SELECT count(*), coalesce(sum(a.id), 0) FROM atomic_part a JOIN document d ON d.id = a.doc_id";

/// Creates the tables and fills them with `db`, in one transaction, then `ANALYZE`.
pub fn create_tables(conn: &Connection, db: &Oo7) -> Result<()> {
    conn.execute_batch(TABLES)?;
    let tx = conn.unchecked_transaction()?;
    let m = &db.module;
    tx.execute(
        "INSERT INTO module VALUES (?1, ?2, ?3, ?4)",
        params![m.id as i64, m.kind, m.build_date, m.design_root as i64],
    )?;
    tx.execute(
        "INSERT INTO manual VALUES (?1, ?2, ?3, ?4, ?5)",
        params![m.manual.id as i64, m.id as i64, m.manual.title, m.manual.text, m.manual.text.len() as i64],
    )?;
    {
        let mut asm = tx.prepare("INSERT INTO assembly VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?;
        let mut sup = std::collections::HashMap::new();
        for a in &m.assemblies {
            if let Shape::Complex { subs } = &a.shape {
                for s in subs {
                    sup.insert(*s, a.id);
                }
            }
        }
        let mut priv_ = tx.prepare("INSERT INTO components_priv VALUES (?1, ?2)")?;
        let mut shar = tx.prepare("INSERT INTO components_shar VALUES (?1, ?2)")?;
        for a in &m.assemblies {
            let base = matches!(a.shape, Shape::Base { .. });
            let up = sup.get(&a.id).map(|&s| s as i64);
            asm.execute(params![a.id as i64, m.id as i64, a.kind, a.build_date, up, base])?;
            if let Shape::Base { private, shared } = &a.shape {
                for c in private {
                    priv_.execute(params![a.id as i64, *c as i64])?;
                }
                for c in shared {
                    shar.execute(params![a.id as i64, *c as i64])?;
                }
            }
        }
    }
    insert_parts(&tx, db.composites.iter().zip(&db.documents))?;
    tx.commit()?;
    conn.execute_batch("ANALYZE")?;
    Ok(())
}

fn insert_parts<'a>(conn: &Connection, parts: impl Iterator<Item = (&'a CompositePart, &'a Document)>) -> Result<()> {
    let mut cp = conn.prepare_cached("INSERT INTO composite_part VALUES (?1, ?2, ?3, ?4)")?;
    let mut ap = conn.prepare_cached("INSERT INTO atomic_part VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?;
    let mut cn = conn.prepare_cached("INSERT INTO connection VALUES (?1, ?2, ?3, ?4)")?;
    let mut doc = conn.prepare_cached("INSERT INTO document VALUES (?1, ?2, ?3, ?4)")?;
    for (c, d) in parts {
        cp.execute(params![c.id as i64, c.kind, c.build_date, c.root_part as i64])?;
        for a in &c.atoms {
            ap.execute(params![a.id as i64, c.id as i64, a.kind, a.build_date, a.x, a.y, a.doc_id])?;
            for t in &a.to {
                cn.execute(params![a.id as i64, t.to as i64, t.kind, t.length])?;
            }
        }
        doc.execute(params![d.id as i64, d.title, d.text, d.part as i64])?;
    }
    Ok(())
}

/// Runs a read-only operation with the run's random choices.
pub fn read(conn: &Connection, op: Op, draw: &Draw) -> Result<Answer> {
    let mut a = Answer::default();
    let ids = |sql: &str, a: &mut Answer, p: &[&dyn rusqlite::ToSql]| -> Result<()> {
        let mut st = conn.prepare_cached(sql)?;
        let mut rows = st.query(p)?;
        while let Some(r) = rows.next()? {
            a.add(r.get(0)?);
        }
        Ok(())
    };
    match op {
        Op::T1 | Op::T6 => {
            let mut st = conn.prepare_cached(if op == Op::T1 { T1 } else { T6 })?;
            a.count = st.query_row([], |r| r.get::<_, i64>(0))? as u64;
        }
        Op::T8 | Op::T9 => {
            let mut st = conn.prepare_cached(MANUAL)?;
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                let text = r.get_ref(0)?.as_str()?;
                if op == Op::T8 {
                    a.count += crate::ops::count_byte(text.as_bytes(), b'I');
                } else {
                    a.count += u64::from(text.as_bytes().first() == text.as_bytes().last());
                }
            }
        }
        Op::Q1 => {
            let mut st = conn.prepare_cached(Q1)?;
            for id in &draw.ids {
                let found = st
                    .query_row([id], |r| Ok(r.get::<_, i64>(0)?.wrapping_add(r.get(1)?).wrapping_add(r.get(2)?)))
                    .optional()?;
                if let Some(v) = found {
                    a.add(v);
                }
            }
        }
        Op::Q2 | Op::Q3 => {
            let (from, to) = if op == Op::Q2 { Q2_RANGE } else { Q3_RANGE };
            ids(Q2, &mut a, &[&from, &to])?;
        }
        Op::Q4 => {
            for t in &draw.titles {
                ids(Q4, &mut a, &[t])?;
            }
        }
        Op::Q5 => ids(Q5, &mut a, &[])?,
        Op::Q7 => ids(Q7, &mut a, &[])?,
        Op::Q8 => {
            let mut st = conn.prepare_cached(Q8)?;
            let (n, s) = st.query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
            a = Answer { count: n as u64, sum: s as u64 };
        }
        Op::Q8Coded => {
            let mut parts = conn.prepare_cached("SELECT id, doc_id FROM atomic_part")?;
            let mut doc = conn.prepare_cached("SELECT id FROM document WHERE id = ?1")?;
            let mut rows = parts.query([])?;
            while let Some(r) = rows.next()? {
                let (id, doc_id): (i64, i64) = (r.get(0)?, r.get(1)?);
                let mut found = doc.query([doc_id])?;
                while found.next()?.is_some() {
                    a.add(id);
                }
            }
        }
        _ => return Err(SqliteError::NotHere(op.name())),
    }
    Ok(a)
}

/// The composite parts T1 visits, once per base assembly using them.
fn visits(conn: &Connection) -> Result<Vec<i64>> {
    let mut roots = conn.prepare_cached("SELECT design_root FROM module")?;
    let mut stack: Vec<i64> = roots.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    let mut kind = conn.prepare_cached("SELECT base FROM assembly WHERE id = ?1")?;
    let mut subs = conn.prepare_cached("SELECT id FROM assembly WHERE super = ?1")?;
    let mut parts = conn.prepare_cached("SELECT part FROM components_priv WHERE assembly = ?1")?;
    let mut out = Vec::new();
    while let Some(a) = stack.pop() {
        let base: bool = kind.query_row([a], |r| r.get(0))?;
        let st = if base { &mut parts } else { &mut subs };
        let mut rows = st.query([a])?;
        while let Some(r) = rows.next()? {
            if base {
                out.push(r.get(0)?);
            } else {
                stack.push(r.get(0)?);
            }
        }
    }
    Ok(out)
}

/// Depth-first search of composite part `cp`'s atomic parts from its root part.
fn reach(conn: &Connection, cp: i64, seen: &mut HashSet<i64>, out: &mut Vec<i64>) -> Result<()> {
    seen.clear();
    out.clear();
    let mut root = conn.prepare_cached("SELECT root_part FROM composite_part WHERE id = ?1")?;
    let mut to = conn.prepare_cached("SELECT dst FROM connection WHERE src = ?1")?;
    let r: i64 = root.query_row([cp], |r| r.get(0))?;
    seen.insert(r);
    let mut stack = vec![r];
    while let Some(a) = stack.pop() {
        out.push(a);
        let mut rows = to.query([a])?;
        while let Some(row) = rows.next()? {
            let t: i64 = row.get(0)?;
            if seen.insert(t) {
                stack.push(t);
            }
        }
    }
    Ok(())
}

/// T1 by navigation, inside whatever transaction is open.
pub fn t1_navigate(conn: &Connection) -> Result<Answer> {
    let (mut seen, mut atoms) = (HashSet::new(), Vec::new());
    let mut a = Answer::default();
    for cp in visits(conn)? {
        reach(conn, cp, &mut seen, &mut atoms)?;
        a.count += atoms.len() as u64;
    }
    Ok(a)
}

fn update_traversal(conn: &Connection, op: Op) -> Result<Answer> {
    let (all, times, date) = match op {
        Op::T2a => (false, 1, false),
        Op::T2b => (true, 1, false),
        Op::T2c => (true, 4, false),
        Op::T3a => (false, 1, true),
        Op::T3b => (true, 1, true),
        Op::T3c => (true, 4, true),
        _ => return Err(SqliteError::NotHere(op.name())),
    };
    let mut get_date = conn.prepare_cached("SELECT build_date FROM atomic_part WHERE id = ?1")?;
    let mut set_date = conn.prepare_cached("UPDATE atomic_part SET build_date = ?2 WHERE id = ?1")?;
    let mut swap = conn.prepare_cached("UPDATE atomic_part SET x = y, y = x WHERE id = ?1")?;
    let (mut seen, mut atoms) = (HashSet::new(), Vec::new());
    let mut a = Answer::default();
    for cp in visits(conn)? {
        reach(conn, cp, &mut seen, &mut atoms)?;
        let targets = if all { &atoms[..] } else { atoms.get(..1).unwrap_or(&[]) };
        for &t in targets {
            for _ in 0..times {
                if date {
                    let d: i64 = get_date.query_row([t], |r| r.get(0))?;
                    set_date.execute([t, toggle_date(d)])?;
                } else {
                    swap.execute([t])?;
                }
                a.count += 1;
            }
        }
    }
    Ok(a)
}

/// T2a–c or T3a–c as one transaction.
pub fn update(conn: &Connection, op: Op) -> Result<Answer> {
    let tx = conn.unchecked_transaction()?;
    let a = update_traversal(&tx, op)?;
    tx.commit()?;
    Ok(a)
}

/// CU: T1, T1 and T2a in one transaction; T2a's answer and the time the T1s took.
pub fn cached_update(conn: &Connection) -> Result<(Answer, Duration)> {
    let tx = conn.unchecked_transaction()?;
    let start = Instant::now();
    t1_navigate(&tx)?;
    t1_navigate(&tx)?;
    let t1 = start.elapsed();
    let a = update_traversal(&tx, Op::T2a)?;
    tx.commit()?;
    Ok((a, t1))
}

/// The structural insert, one transaction.
pub fn insert(conn: &Connection, new: &[(CompositePart, Document, Vec<u64>)]) -> Result<Answer> {
    let tx = conn.unchecked_transaction()?;
    insert_parts(&tx, new.iter().map(|(c, d, _)| (c, d)))?;
    {
        let mut link = tx.prepare_cached("INSERT INTO components_priv VALUES (?1, ?2)")?;
        for (c, _, users) in new {
            for b in users {
                link.execute([*b as i64, c.id as i64])?;
            }
        }
    }
    tx.commit()?;
    Ok(Answer { count: new.len() as u64, sum: new.iter().map(|(c, _, _)| c.id).sum() })
}

/// The structural delete of what [`insert`] inserted, one transaction.
pub fn delete(conn: &Connection, new: &[(CompositePart, Document, Vec<u64>)]) -> Result<Answer> {
    let tx = conn.unchecked_transaction()?;
    for (c, _, _) in new {
        let id = c.id as i64;
        tx.execute("DELETE FROM components_priv WHERE part = ?1", [id])?;
        tx.execute("DELETE FROM components_shar WHERE part = ?1", [id])?;
        tx.execute("DELETE FROM document WHERE part = ?1", [id])?;
        tx.execute("DELETE FROM connection WHERE src IN (SELECT id FROM atomic_part WHERE part_of = ?1)", [id])?;
        tx.execute("DELETE FROM atomic_part WHERE part_of = ?1", [id])?;
        tx.execute("DELETE FROM composite_part WHERE id = ?1", [id])?;
    }
    tx.commit()?;
    Ok(Answer { count: new.len() as u64, sum: new.iter().map(|(c, _, _)| c.id).sum() })
}

/// The database's state, to compare with Espalier's.
pub fn fingerprint(conn: &Connection) -> Result<Fingerprint> {
    let mut f = Fingerprint::default();
    let mut st = conn.prepare_cached("SELECT id, x, y, build_date FROM atomic_part")?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        f.atom(r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
    }
    let count = |sql: &str| -> Result<u64> { Ok(conn.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64) };
    f.composite_parts = count("SELECT count(*) FROM composite_part")?;
    f.documents = count("SELECT count(*) FROM document")?;
    f.private_links = count("SELECT count(*) FROM components_priv")?;
    Ok(f)
}
