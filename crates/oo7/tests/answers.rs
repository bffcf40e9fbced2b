//! Every operation's answer on a tiny fixed database, checked against answers computed here
//! in plain Rust over the generated values (not the query code), in Espalier and in SQLite;
//! and the generator's determinism and sizes.

use std::collections::{BTreeSet, HashMap, HashSet};

use espalier_oo7::bench::open_sqlite;
use espalier_oo7::espalier::Oo7Espalier;
use espalier_oo7::generate::{generate, new_composites};
use espalier_oo7::model::{title, CompositePart, Oo7, Shape, Size};
use espalier_oo7::ops::{toggle_date, Answer, Draw, Fingerprint, Op, Q2_RANGE, Q3_RANGE};
use espalier_oo7::sqlite;
use espalier_transaction::{DatabaseOptions, Durability};

const SEED: u64 = 2024;

fn tiny() -> Oo7 {
    generate(Size::Tiny, 3, SEED).unwrap()
}

/// The composite parts T1 visits: one per (base assembly under the design root, private part).
fn visits(db: &Oo7) -> Vec<u64> {
    let by_id: HashMap<u64, _> = db.module.assemblies.iter().map(|a| (a.id, a)).collect();
    let mut out = Vec::new();
    let mut todo = vec![db.module.design_root];
    while let Some(a) = todo.pop() {
        match &by_id[&a].shape {
            Shape::Complex { subs } => todo.extend(subs),
            Shape::Base { private, .. } => out.extend(private),
        }
    }
    out
}

/// The atomic parts reachable from a composite part's root part (breadth first here; the
/// implementations search depth first).
fn reachable(c: &CompositePart) -> Vec<u64> {
    let to: HashMap<u64, Vec<u64>> = c.atoms.iter().map(|a| (a.id, a.to.iter().map(|t| t.to).collect())).collect();
    let mut seen = vec![c.root_part];
    let mut i = 0;
    while i < seen.len() {
        for t in &to[&seen[i]] {
            if !seen.contains(t) {
                seen.push(*t);
            }
        }
        i += 1;
    }
    seen
}

fn part(db: &Oo7, id: u64) -> &CompositePart {
    db.composites.iter().find(|c| c.id == id).unwrap()
}

fn sum_ids(ids: impl IntoIterator<Item = u64>) -> Answer {
    let mut a = Answer::default();
    for id in ids {
        a.add(id as i64);
    }
    a
}

/// The expected answer of a read-only operation.
fn expected(db: &Oo7, op: Op, draw: &Draw) -> Answer {
    let atoms = || db.composites.iter().flat_map(|c| &c.atoms);
    match op {
        Op::T1 | Op::T1One | Op::T1Many => {
            Answer { count: visits(db).iter().map(|&c| reachable(part(db, c)).len() as u64).sum(), sum: 0 }
        }
        Op::T6 => Answer { count: visits(db).len() as u64, sum: 0 },
        Op::T8 => Answer { count: db.module.manual.text.matches('I').count() as u64, sum: 0 },
        Op::T9 => {
            let t = &db.module.manual.text;
            Answer { count: u64::from(t.chars().next() == t.chars().last()), sum: 0 }
        }
        Op::Q1 => {
            let mut a = Answer::default();
            for id in &draw.ids {
                for x in atoms().filter(|x| x.id as i64 == *id) {
                    a.add(x.x + x.y + x.build_date);
                }
            }
            a
        }
        Op::Q2 | Op::Q3 => {
            let (from, to) = if op == Op::Q2 { Q2_RANGE } else { Q3_RANGE };
            sum_ids(atoms().filter(|x| (from..=to).contains(&x.build_date)).map(|x| x.id))
        }
        Op::Q4 => {
            let mut ids = Vec::new();
            for t in &draw.titles {
                let d = db.documents.iter().find(|d| &d.title == t).unwrap();
                ids.extend(db.base_assemblies().filter(|(_, p)| p.contains(&d.part)).map(|(a, _)| a.id));
            }
            sum_ids(ids)
        }
        Op::Q5 => sum_ids(
            db.base_assemblies()
                .filter(|(a, p)| p.iter().any(|c| part(db, *c).build_date > a.build_date))
                .map(|(a, _)| a.id),
        ),
        Op::Q7 => sum_ids(atoms().map(|x| x.id)),
        Op::Q8 | Op::Q8Coded => {
            let docs: HashSet<i64> = db.documents.iter().map(|d| d.id as i64).collect();
            sum_ids(atoms().filter(|x| docs.contains(&x.doc_id)).map(|x| x.id))
        }
        _ => unreachable!("{op:?} is not read-only"),
    }
}

fn fingerprint(db: &Oo7) -> Fingerprint {
    let mut f = Fingerprint::default();
    for a in db.composites.iter().flat_map(|c| &c.atoms) {
        f.atom(a.id as i64, a.x, a.y, a.build_date);
    }
    f.composite_parts = db.composites.len() as u64;
    f.documents = db.documents.len() as u64;
    f.private_links = db.base_assemblies().map(|(_, p)| p.len() as u64).sum();
    f
}

/// Applies an update traversal to the values, as the paper defines it; returns the updates.
fn apply(db: &mut Oo7, op: Op) -> u64 {
    let (all, times, date) = match op {
        Op::T2a => (false, 1, false),
        Op::T2b => (true, 1, false),
        Op::T2c => (true, 4, false),
        Op::T3a => (false, 1, true),
        Op::T3b => (true, 1, true),
        Op::T3c => (true, 4, true),
        _ => unreachable!(),
    };
    let mut n = 0;
    for c in visits(db) {
        let cp = db.composites.iter_mut().find(|p| p.id == c).unwrap();
        let mut targets = reachable(cp);
        if !all {
            targets.truncate(1);
        }
        for t in targets {
            let a = cp.atoms.iter_mut().find(|a| a.id == t).unwrap();
            for _ in 0..times {
                if date {
                    a.build_date = toggle_date(a.build_date);
                } else {
                    std::mem::swap(&mut a.x, &mut a.y);
                }
                n += 1;
            }
        }
    }
    n
}

#[test]
fn the_same_seed_gives_the_same_database() {
    for size in [Size::Tiny, Size::Small] {
        for fanout in [3, 6, 9] {
            let a = generate(size, fanout, SEED).unwrap();
            assert_eq!(a, generate(size, fanout, SEED).unwrap(), "{size:?} fanout {fanout}");
            assert_ne!(a, generate(size, fanout, SEED + 1).unwrap(), "another seed, another database");
        }
    }
    // Pinned, so that a change to the generator shows: seed 2024, tiny, fanout 3.
    let db = tiny();
    let f = fingerprint(&db);
    assert_eq!((f.atomic_parts, f.composite_parts, f.private_links), (500, 50, 81));
    assert_eq!(expected(&db, Op::T1, &Draw::default()).count, 810);
    assert_eq!(f.checksum, 13_974_589_743_358_444_126, "the values' checksum");
}

#[test]
fn sizes_follow_table_1() {
    for (size, atoms) in [(Size::Small, 20), (Size::Medium, 200)] {
        for fanout in [3, 6, 9] {
            let db = generate(size, fanout, SEED).unwrap();
            assert_eq!(db.composites.len(), 500);
            assert_eq!(db.module.assemblies.len(), 1093, "(3^7 - 1) / 2 assemblies");
            assert_eq!(db.base_assemblies().count(), 729);
            assert_eq!(db.atomic_parts(), 500 * atoms);
            assert_eq!(db.connections(), 500 * atoms * fanout);
            assert!(db.composites.iter().all(|c| c.atoms.iter().all(|a| {
                let to: BTreeSet<u64> = a.to.iter().map(|t| t.to).collect();
                to.len() == fanout && !to.contains(&a.id) && (1000..2000).contains(&a.build_date)
            })));
            let young = db.composites.iter().filter(|c| c.build_date >= 2000).count();
            assert!((20..=80).contains(&young), "about one in ten young composite parts, got {young}");
            let doc = if size == Size::Small { 2_000 } else { 20_000 };
            assert!(db.documents.iter().all(|d| d.text.len() == doc));
            assert_eq!(db.module.manual.text.len(), if size == Size::Small { 100_000 } else { 1_000_000 });
        }
    }
    assert!(generate(Size::Tiny, 10, SEED).is_err(), "tiny has 10 atomic parts: fanout 10 cannot be met");
}

#[test]
fn every_operation_answers_as_computed_independently_in_both_systems() {
    let mut db = tiny();
    let dir = tempfile::tempdir().unwrap();
    let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let ours = Oo7Espalier::new(espalier_oo7::create(&dir.path().join("e"), &db, options).unwrap()).unwrap();
    let theirs = open_sqlite(&dir.path().join("s.db")).unwrap();
    sqlite::create_tables(&theirs, &db).unwrap();
    assert_eq!(ours.fingerprint().unwrap(), fingerprint(&db));
    assert_eq!(sqlite::fingerprint(&theirs).unwrap(), fingerprint(&db));

    for op in Op::READS {
        for run in 0..3 {
            let draw = Draw::new(&db, op, run);
            let want = expected(&db, op, &draw);
            assert_eq!(ours.read(op, &draw).unwrap(), want, "Espalier {op:?} run {run}");
            assert_eq!(sqlite::read(&theirs, op, &draw).unwrap(), want, "SQLite {op:?} run {run}");
        }
    }
    // Q1 finds all ten; Q4 finds some assemblies; Q5 and Q8 leave some out.
    assert_eq!(expected(&db, Op::Q1, &Draw::new(&db, Op::Q1, 0)).count, 10);
    assert!(expected(&db, Op::Q4, &Draw::new(&db, Op::Q4, 0)).count > 0);
    let q5 = expected(&db, Op::Q5, &Draw::default()).count;
    assert!(q5 > 0 && q5 < 27, "Q5: {q5} of 27 base assemblies");
    let q8 = expected(&db, Op::Q8, &Draw::default()).count;
    assert!(q8 > 0 && q8 < 500, "Q8: {q8} of 500 atomic parts");
    let t1 = expected(&db, Op::T1, &Draw::default());
    let snap = ours.engine().database().snapshot().unwrap();
    assert_eq!(ours.t1_navigate(&snap.graph()).unwrap(), t1);
    drop(snap);
    assert_eq!(sqlite::t1_navigate(&theirs).unwrap(), t1);

    for op in [Op::T2a, Op::T2b, Op::T2c, Op::T3a, Op::T3b, Op::T3c] {
        let n = apply(&mut db, op);
        assert_eq!(ours.update(op).unwrap().count, n, "Espalier {op:?}");
        assert_eq!(sqlite::update(&theirs, op).unwrap().count, n, "SQLite {op:?}");
        assert_eq!(ours.fingerprint().unwrap(), fingerprint(&db), "Espalier after {op:?}");
        assert_eq!(sqlite::fingerprint(&theirs).unwrap(), fingerprint(&db), "SQLite after {op:?}");
    }
    let n = apply(&mut db, Op::T2a);
    assert_eq!(ours.cached_update().unwrap().0.count, n);
    assert_eq!(sqlite::cached_update(&theirs).unwrap().0.count, n);
    assert_eq!(ours.fingerprint().unwrap(), fingerprint(&db), "Espalier after CU");
    assert_eq!(sqlite::fingerprint(&theirs).unwrap(), fingerprint(&db), "SQLite after CU");

    // Insert five composite parts (each used by two base assemblies), then delete them.
    let before = fingerprint(&db);
    let new = new_composites(&db, 1, 51, db.max_atomic_id() + 1, 5);
    ours.insert(&new).unwrap();
    sqlite::insert(&theirs, &new).unwrap();
    let mut grown = db.clone();
    for (c, d, users) in &new {
        grown.composites.push(c.clone());
        grown.documents.push(d.clone());
        for a in grown.module.assemblies.iter_mut().filter(|a| users.contains(&a.id)) {
            if let Shape::Base { private, .. } = &mut a.shape {
                private.push(c.id);
            }
        }
    }
    assert_eq!(ours.fingerprint().unwrap(), fingerprint(&grown));
    assert_eq!(sqlite::fingerprint(&theirs).unwrap(), fingerprint(&grown));
    assert_eq!(fingerprint(&grown).private_links, before.private_links + 10);
    let draw = Draw { ids: Vec::new(), titles: new.iter().map(|(c, _, _)| title(c.id)).collect() };
    assert_eq!(ours.read(Op::Q4, &draw).unwrap(), expected(&grown, Op::Q4, &draw));
    assert_eq!(ours.read(Op::T1, &draw).unwrap(), expected(&grown, Op::T1, &draw));
    ours.delete(&new).unwrap();
    sqlite::delete(&theirs, &new).unwrap();
    assert_eq!(ours.fingerprint().unwrap(), before);
    assert_eq!(sqlite::fingerprint(&theirs).unwrap(), before);
}

/// Q8 joins every atomic part to the document its doc id names through the documents' id
/// index (one probe per part), not by reading every part for each document.
#[test]
fn q8_probes_the_documents_index_once_per_atomic_part() {
    let db = tiny();
    let dir = tempfile::tempdir().unwrap();
    let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = espalier_oo7::create(&dir.path().join("e"), &db, options).unwrap();
    let instr = espalier_instruction::parse_instruction(
        espalier_oo7::espalier::Q8,
        espalier_instruction::parse::ParseOptions::CLIENT,
    )
    .unwrap();
    let lines = engine.check(&instr, None).unwrap().explain(engine.schema()).unwrap();
    let text = lines.join("\n");
    assert!(lines[0].starts_with("bind ap from root") && lines[0].ends_with("(reads its table)"), "{text}");
    assert!(lines[1].starts_with("bind doc by index") && lines[1].contains("== ap"), "{text}");
}
