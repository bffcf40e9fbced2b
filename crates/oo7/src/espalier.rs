//! The operations in Espalier: pattern queries for the read-only ones (checked once, run as
//! many times as the benchmark asks), update instructions for the structural
//! modifications, and the data API (`Graph`, `WriteGraph`) for the traversals that update as
//! they go (T2, T3, CU) and for T1 written as navigation (the "one"/"many" variants): the
//! instruction language has no "update every node this walk reaches" form.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use espalier_data::index::{probe_each, IndexValue, Probe};
use espalier_data::{DataError, Graph, NodeId, NodeRef, WriteGraph};
use espalier_instruction::parse::ParseOptions;
use espalier_instruction::plan::Plan;
use espalier_instruction::{parse_instruction, Engine, InstructionError, ParamValue, RowValue};

use crate::model::{CompositePart, Document};
use crate::ops::{toggle_date, Answer, Draw, Fingerprint, Op, Q2_RANGE, Q3_RANGE};
use crate::schema::Props;
use crate::LoadError;

/// An operation that failed in Espalier.
#[derive(Debug, thiserror::Error)]
pub enum EspalierError {
    /// Checking or running a query or update instruction failed.
    #[error("{0}")]
    Instruction(#[from] InstructionError),
    /// Reading or writing through the data API failed.
    #[error("{0}")]
    Data(#[from] DataError),
    /// A query or update instruction did not parse.
    #[error("{0}")]
    Parse(#[from] espalier_instruction::ParseError),
    /// The schema is not OO7's.
    #[error("{0}")]
    Load(#[from] LoadError),
    /// A read or write transaction failed.
    #[error("{0}")]
    Transaction(#[from] espalier_transaction::TxError),
    /// A reply (what was asked, what came) of an unexpected shape.
    #[error("{0}: unexpected reply: {1}")]
    Reply(&'static str, String),
    /// The operation, or a query that was not checked, is not run by the function called.
    #[error("{0} is not run this way")]
    NotHere(&'static str),
}

type Result<T> = std::result::Result<T, EspalierError>;

/// T1's pattern: every atomic part reachable from the root part of every private composite
/// part of every base assembly under the design root, counted once per composite part visit.
pub const T1: &str = "collection match
    m in . 'Modules'
    ba in m > 'Design Root' repeat 0 to 1024 ( ? 'Kind' * 'Complex' > 'Sub Assemblies' )
    cp in ba ? 'Kind' * 'Base' > 'Components Private'
    ap in cp > 'Root Part' repeat 0 to 1024 ( > 'To' )
select 'visited' -> count ( )";

/// T6's pattern: T1 visiting only the root parts.
pub const T6: &str = "collection match
    m in . 'Modules'
    ba in m > 'Design Root' repeat 0 to 1024 ( ? 'Kind' * 'Complex' > 'Sub Assemblies' )
    cp in ba ? 'Kind' * 'Base' > 'Components Private'
    ap in cp > 'Root Part'
select 'visited' -> count ( )";

/// The manual's text (T8, T9 scan it as the application).
pub const MANUAL: &str = "collection match m in . 'Modules' select 'text' -> m + 'Manual' text : 'Text'";

/// Q1: one atomic part by id (through the index on 'Id').
pub const Q1: &str = "collection match ap in . 'Composite Parts' . 'Atomic Parts' where ap number : 'Id' == $id
select 'x' -> ap number : 'X' 'y' -> ap number : 'Y' 'date' -> ap number : 'Build Date'";

/// Q2 and Q3: atomic parts in a build-date range (through the range index).
pub const Q2: &str = "collection match ap in . 'Composite Parts' . 'Atomic Parts'
    where ap number : 'Build Date' >= $from and ap number : 'Build Date' <= $to
select 'id' -> ap number : 'Id'";

/// Q4: the base assemblies using the composite part of the document titled `$title`.
pub const Q4: &str = "collection match doc in . 'Documents' : $title
    ba in doc > 'Part' < 'Components Private' ?^
select 'id' -> ba number : 'Id'";

/// Q5: base assemblies using a composite part built later than themselves.
pub const Q5: &str = "collection match ba in . 'Modules' . 'Assemblies'
    cp in ba ? 'Kind' * 'Base' > 'Components Private'
    where cp number : 'Build Date' > ba number : 'Build Date'
select distinct 'id' -> ba number : 'Id'";

/// Q7: every atomic part.
pub const Q7: &str = "collection match ap in . 'Composite Parts' . 'Atomic Parts' select 'id' -> ap number : 'Id'";

/// Q8: pairs of a document and an atomic part naming it.
pub const Q8: &str = "collection match doc in . 'Documents' ap in . 'Composite Parts' . 'Atomic Parts'
    where ap number : 'Doc Id' == doc number : 'Id'
select 'pairs' -> count ( ) 'ids' -> sum ( ap number : 'Id' )";

const ATOMS: &str = "collection match ap in . 'Composite Parts' . 'Atomic Parts'
select 'id' -> ap number : 'Id' 'x' -> ap number : 'X' 'y' -> ap number : 'Y' 'd' -> ap number : 'Build Date'";
const PARTS: &str = "collection match cp in . 'Composite Parts' select 'n' -> count ( )";
const DOCUMENTS: &str = "collection match d in . 'Documents' select 'n' -> count ( )";
const LINKS: &str = "collection match a in . 'Modules' . 'Assemblies' cp in a ? 'Kind' * 'Base' > 'Components Private'
select 'n' -> count ( )";

/// An OO7 database in Espalier with its plans checked.
pub struct Oo7Espalier {
    engine: Engine,
    props: Props,
    plans: HashMap<&'static str, Plan>,
}

/// Column `i` of a row, a number.
fn int(r: &[RowValue<'_>], i: usize, what: &'static str) -> Result<i64> {
    r.get(i).and_then(RowValue::as_i64).ok_or_else(|| EspalierError::Reply(what, format!("column {i} of {r:?}")))
}

impl Oo7Espalier {
    /// Wraps an engine holding an OO7 database; checks every query once.
    pub fn new(engine: Engine) -> Result<Oo7Espalier> {
        let props = Props::resolve(engine.schema())?;
        let mut plans = HashMap::new();
        for text in [T1, T6, MANUAL, Q1, Q2, Q4, Q5, Q7, Q8, ATOMS, PARTS, DOCUMENTS, LINKS] {
            let instr = parse_instruction(text, ParseOptions::CLIENT)?;
            plans.insert(text, engine.check(&instr, Some(text))?);
        }
        Ok(Oo7Espalier { engine, props, plans })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Gives the engine back (to close the database).
    pub fn into_engine(self) -> Engine {
        self.engine
    }

    /// Runs a checked query and hands each row's values to `f`, as an embedded application
    /// reads a result ([`Engine::visit_rows`]: no result set is collected and texts are
    /// borrowed, as SQLite's statements hand out their columns). An error of `f` stops the
    /// scan and is returned.
    fn visit(
        &self,
        text: &'static str,
        params: &[(&str, ParamValue)],
        f: &mut dyn FnMut(&[RowValue<'_>]) -> Result<()>,
    ) -> Result<()> {
        let params: HashMap<String, ParamValue> = params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        self.visit_with(self.plan(text)?, &params, f)
    }

    /// The checked plan of a query.
    fn plan(&self, text: &'static str) -> Result<&Plan> {
        self.plans.get(text).ok_or(EspalierError::NotHere("an unchecked query"))
    }

    /// [`Oo7Espalier::visit`] with the plan and the parameters at hand: an operation that
    /// runs one query many times finds its plan and makes its parameter map once and sets
    /// the parameter for each run, as SQLite's side prepares a statement once and binds.
    fn visit_with(
        &self,
        plan: &Plan,
        params: &HashMap<String, ParamValue>,
        f: &mut dyn FnMut(&[RowValue<'_>]) -> Result<()>,
    ) -> Result<()> {
        let mut failed = None;
        self.engine.visit_rows(plan, params, None, &mut |_, values| match f(values) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failed = Some(e);
                ControlFlow::Break(())
            }
        })?;
        failed.map_or(Ok(()), Err)
    }

    /// [`Oo7Espalier::visit_with`] once for each of `values` of the plan's one parameter
    /// `name` (Q1's ids, Q4's titles): the map is made once and its one value set for each run
    /// without hashing the name, as SQLite's side binds by position.
    fn visit_each(
        &self,
        plan: &Plan,
        name: &str,
        values: impl Iterator<Item = ParamValue>,
        f: &mut dyn FnMut(&[RowValue<'_>]) -> Result<()>,
    ) -> Result<()> {
        let mut params = HashMap::from([(name.to_string(), ParamValue::Int(0))]);
        for value in values {
            if let Some(slot) = params.values_mut().next() {
                *slot = value;
            }
            self.visit_with(plan, &params, f)?;
        }
        Ok(())
    }

    fn one_number(&self, text: &'static str) -> Result<u64> {
        let mut n = None;
        self.visit(text, &[], &mut |r| {
            n = Some(int(r, 0, "a count")?);
            Ok(())
        })?;
        Ok(n.ok_or(EspalierError::Reply("a count", "no row".into()))? as u64)
    }

    /// Runs a read-only operation with the run's random choices.
    pub fn read(&self, op: Op, draw: &Draw) -> Result<Answer> {
        let mut a = Answer::default();
        match op {
            Op::T1 | Op::T6 => {
                a.count = self.one_number(if op == Op::T1 { T1 } else { T6 })?;
            }
            Op::T8 | Op::T9 => self.visit(MANUAL, &[], &mut |r| {
                let text = r.first().and_then(RowValue::as_str).ok_or(EspalierError::Reply("T8", "no text".into()))?;
                if op == Op::T8 {
                    a.count += crate::ops::count_byte(text.as_bytes(), b'I');
                } else {
                    a.count += u64::from(text.as_bytes().first() == text.as_bytes().last());
                }
                Ok(())
            })?,
            Op::Q1 => {
                let ids = draw.ids.iter().map(|&id| ParamValue::Int(id));
                self.visit_each(self.plan(Q1)?, "id", ids, &mut |r| {
                    let mut v = 0i64;
                    for i in 0..r.len() {
                        v = v.wrapping_add(int(r, i, "Q1")?);
                    }
                    a.add(v);
                    Ok(())
                })?;
            }
            Op::Q2 | Op::Q3 => {
                let (from, to) = if op == Op::Q2 { Q2_RANGE } else { Q3_RANGE };
                self.visit(Q2, &[("from", ParamValue::Int(from)), ("to", ParamValue::Int(to))], &mut |r| {
                    a.add(int(r, 0, "Q2")?);
                    Ok(())
                })?;
            }
            Op::Q4 => {
                let titles = draw.titles.iter().map(|t| ParamValue::Text(t.clone()));
                self.visit_each(self.plan(Q4)?, "title", titles, &mut |r| {
                    a.add(int(r, 0, "Q4")?);
                    Ok(())
                })?;
            }
            Op::Q5 | Op::Q7 => self.visit(if op == Op::Q5 { Q5 } else { Q7 }, &[], &mut |r| {
                a.add(int(r, 0, "Q5/Q7")?);
                Ok(())
            })?,
            Op::Q8 => {
                let mut rows = 0;
                self.visit(Q8, &[], &mut |r| {
                    rows += 1;
                    a.count = int(r, 0, "Q8")? as u64;
                    a.sum = if r.len() > 1 { int(r, 1, "Q8")? as u64 } else { 0 };
                    Ok(())
                })?;
                if rows != 1 {
                    return Err(EspalierError::Reply("Q8", format!("{rows} rows, not one")));
                }
            }
            Op::Q8Coded => {
                let snap = self.engine.database().snapshot()?;
                a = q8_coded(&snap.graph(), &self.props)?;
            }
            _ => return Err(EspalierError::NotHere(op.name())),
        }
        Ok(a)
    }

    /// T1 by navigation on a graph (a snapshot's, or a write's).
    pub fn t1_navigate(&self, g: &Graph<'_>) -> Result<Answer> {
        t1_navigate(g, &self.props)
    }

    /// T2a–c or T3a–c: one transaction that traverses as T1 and updates as it goes; the
    /// answer counts the updates. Nobody reads its change set (as SQLite's side keeps none):
    /// its changes are counted, not named, unless someone subscribes.
    pub fn update(&self, op: Op) -> Result<Answer> {
        let p = &self.props;
        Ok(self.engine.database().write_counting(|g| update_traversal(g, p, op))?.value)
    }

    /// CU: one transaction of T1, T1 again and T2a; the answer is T2a's, the duration the
    /// two T1s took inside (the benchmark subtracts it).
    pub fn cached_update(&self) -> Result<(Answer, Duration)> {
        let p = &self.props;
        let committed = self.engine.database().write_counting(|g| -> Result<(Answer, Duration)> {
            let start = Instant::now();
            t1_navigate(&g.graph(), p)?;
            t1_navigate(&g.graph(), p)?;
            let t1 = start.elapsed();
            Ok((update_traversal(g, p, Op::T2a)?, t1))
        })?;
        Ok(committed.value)
    }

    /// The structural insert: one update instruction (parsed, checked and run, as a client
    /// sends it); the answer counts the composite parts inserted.
    pub fn insert(&self, new: &[(CompositePart, Document, Vec<u64>)]) -> Result<Answer> {
        self.engine.execute_text(&insert_text(new), &HashMap::new())?;
        Ok(Answer { count: new.len() as u64, sum: new.iter().map(|(c, _, _)| c.id).sum() })
    }

    /// The structural delete of what [`Oo7Espalier::insert`] inserted.
    pub fn delete(&self, new: &[(CompositePart, Document, Vec<u64>)]) -> Result<Answer> {
        self.engine.execute_text(&delete_text(new), &HashMap::new())?;
        Ok(Answer { count: new.len() as u64, sum: new.iter().map(|(c, _, _)| c.id).sum() })
    }

    /// The database's state, to compare with SQLite's.
    pub fn fingerprint(&self) -> Result<Fingerprint> {
        let mut f = Fingerprint::default();
        self.visit(ATOMS, &[], &mut |r| {
            f.atom(
                int(r, 0, "fingerprint")?,
                int(r, 1, "fingerprint")?,
                int(r, 2, "fingerprint")?,
                int(r, 3, "fingerprint")?,
            );
            Ok(())
        })?;
        f.composite_parts = self.one_number(PARTS)?;
        f.documents = self.one_number(DOCUMENTS)?;
        f.private_links = self.one_number(LINKS)?;
        Ok(f)
    }
}

/// The composite parts T1 visits, in visiting order, once per base assembly using them.
fn visits(g: &Graph<'_>, p: &Props) -> Result<Vec<NodeRef>> {
    let mut out = Vec::new();
    for m in g.entries(NodeRef::ROOT, p.modules)? {
        let (_, m) = m?;
        let mut stack = vec![NodeRef { id: g.reference(m, p.design_root)?, ty: p.assembly_type }];
        while let Some(a) = stack.pop() {
            let (state, node) = g.state(a, p.kind)?;
            let (matrix, ty, into) =
                if state == p.complex { (p.subs, p.assembly_type, true) } else { (p.private, p.composite_type, false) };
            for e in g.entries(node, matrix)? {
                let (_, e) = e?;
                let target = NodeRef { id: g.matrix_target(e)?, ty };
                if into {
                    stack.push(target);
                } else {
                    out.push(target);
                }
            }
        }
    }
    Ok(out)
}

/// Depth-first search of a composite part's atomic parts from its root part: `out` gets
/// every reachable atomic part once, the root part first.
fn reach(g: &Graph<'_>, p: &Props, cp: NodeRef, seen: &mut HashSet<NodeId>, out: &mut Vec<NodeRef>) -> Result<()> {
    seen.clear();
    out.clear();
    let root = NodeRef { id: g.reference(cp, p.root_part)?, ty: p.atomic_type };
    seen.insert(root.id);
    let mut stack = vec![root];
    while let Some(a) = stack.pop() {
        out.push(a);
        for e in g.entries(a, p.to)? {
            let (_, e) = e?;
            let t = g.matrix_target(e)?;
            if seen.insert(t) {
                stack.push(NodeRef { id: t, ty: p.atomic_type });
            }
        }
    }
    Ok(())
}

/// Q8 as an indexed nested loop: every atomic part, its doc id probed in the documents' id
/// index; the pairs counted, their atomic part ids summed.
fn q8_coded(g: &Graph<'_>, p: &Props) -> Result<Answer> {
    let mut a = Answer::default();
    for cp in g.entries(NodeRef::ROOT, p.composite_parts)? {
        let (_, cp) = cp?;
        for ap in g.entry_views(cp, p.atomic_parts)? {
            let (_, ap) = ap?;
            let doc = ap.number(p.doc_id)?;
            // Each document found is handed over with its record: its id is read from it.
            probe_each::<DataError>(*g, p.document_id_index, Probe::Equal(IndexValue::Number(doc)), &mut |d| {
                // The probe is exact for numbers; the check keeps it honest if that changes.
                if d.number(p.doc_id_of_doc)? == doc {
                    a.add(ap.number(p.ap_id)?);
                }
                Ok(true)
            })?;
        }
    }
    Ok(a)
}

fn t1_navigate(g: &Graph<'_>, p: &Props) -> Result<Answer> {
    let (mut seen, mut atoms) = (HashSet::new(), Vec::new());
    let mut a = Answer::default();
    for cp in visits(g, p)? {
        reach(g, p, cp, &mut seen, &mut atoms)?;
        a.count += atoms.len() as u64;
    }
    Ok(a)
}

fn update_traversal(g: &mut WriteGraph<'_, '_>, p: &Props, op: Op) -> Result<Answer> {
    let (all, times, date) = match op {
        Op::T2a => (false, 1, false),
        Op::T2b => (true, 1, false),
        Op::T2c => (true, 4, false),
        Op::T3a => (false, 1, true),
        Op::T3b => (true, 1, true),
        Op::T3c => (true, 4, true),
        _ => return Err(EspalierError::NotHere(op.name())),
    };
    let cps = visits(&g.graph(), p)?;
    let (mut seen, mut atoms) = (HashSet::new(), Vec::new());
    let mut a = Answer::default();
    for cp in cps {
        reach(&g.graph(), p, cp, &mut seen, &mut atoms)?;
        let targets = if all { &atoms[..] } else { atoms.get(..1).unwrap_or(&[]) };
        for &t in targets {
            for _ in 0..times {
                if date {
                    let d = g.graph().number(t, p.ap_build_date)?;
                    g.set_number(t, p.ap_build_date, toggle_date(d))?;
                } else {
                    let (x, y) = (g.graph().number(t, p.x)?, g.graph().number(t, p.y)?);
                    g.set_number(t, p.x, y)?;
                    g.set_number(t, p.y, x)?;
                }
                a.count += 1;
            }
        }
    }
    Ok(a)
}

/// The insert as one update instruction: the new composite parts with their atomic parts,
/// then their connections (which name atomic parts added before them), the documents, and
/// the base assemblies' links to the new parts.
pub fn insert_text(new: &[(CompositePart, Document, Vec<u64>)]) -> String {
    let mut s = String::from("update (\n");
    for (c, _, _) in new {
        let _ = write!(
            s,
            "'Composite Parts' -> dictionary \"{}\" ( 'Id' -> number {} 'Type' -> text \"{}\" 'Build Date' -> number {}",
            c.id, c.id, c.kind, c.build_date
        );
        for a in &c.atoms {
            let _ = write!(
                s,
                " 'Atomic Parts' -> dictionary \"{}\" ( 'Id' -> number {} 'Type' -> text \"{}\" 'Build Date' -> number {} \
                 'X' -> number {} 'Y' -> number {} 'Doc Id' -> number {} )",
                a.id, a.id, a.kind, a.build_date, a.x, a.y, a.doc_id
            );
        }
        let _ = writeln!(s, " 'Root Part' -> reference \"{}\" )", c.root_part);
        let _ = write!(s, "'Composite Parts' -> dictionary \"{}\" update (", c.id);
        for a in &c.atoms {
            let _ = write!(s, " 'Atomic Parts' -> dictionary \"{}\" update (", a.id);
            for t in &a.to {
                let _ = write!(
                    s,
                    " 'To' -> matrix \"{}\" ( 'Type' -> text \"{}\" 'Length' -> number {} )",
                    t.to, t.kind, t.length
                );
            }
            s.push_str(" )");
        }
        s.push_str(" )\n");
    }
    for (c, d, users) in new {
        let _ = writeln!(
            s,
            "'Documents' -> dictionary \"{}\" ( 'Id' -> number {} 'Text' -> text \"{}\" 'Part' -> reference \"{}\" )",
            d.title, d.id, d.text, c.id
        );
        for b in users {
            let _ = writeln!(
                s,
                "'Modules' -> dictionary \"1\" update ( 'Assemblies' -> dictionary \"{b}\" update ( 'Kind' -> stategroup 'Base' \
                 ( 'Components Private' -> matrix \"{}\" ( ) ) ) )",
                c.id
            );
        }
    }
    s.push(')');
    s
}

/// The delete as one update instruction: the links first (nothing may refer to what goes),
/// then the documents, then the composite parts with everything in them.
pub fn delete_text(new: &[(CompositePart, Document, Vec<u64>)]) -> String {
    let mut s = String::from("update (\n");
    for (c, d, users) in new {
        for b in users {
            let _ = writeln!(
                s,
                "'Modules' -> dictionary \"1\" update ( 'Assemblies' -> dictionary \"{b}\" update ( 'Kind' -> stategroup 'Base' \
                 ( 'Components Private' -> matrix \"{}\" remove ) ) )",
                c.id
            );
        }
        let _ = writeln!(s, "'Documents' -> dictionary \"{}\" remove", d.title);
        let _ = writeln!(s, "'Composite Parts' -> dictionary \"{}\" remove", c.id);
    }
    s.push(')');
    s
}
