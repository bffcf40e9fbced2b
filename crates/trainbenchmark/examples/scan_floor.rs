//! How fast PosLength and SwitchMonitored could be on this substrate and layout, beside
//! SQLite's answers: the median of 30 runs each (after 5 warm-up) on one generated model,
//! durability none, with no query engine in the way:
//!
//! 1. `scan`: one LMDB prefix scan of every region's `'Track Elements'` (the rows both
//!    queries visit, because a segment or a switch is a state of a track element), reading
//!    nothing but the row: the floor of any plan that visits the elements;
//! 2. `scan + kind`: the same, reading each element's `'Kind'` slot from its record;
//! 3. `scan + length`: the same, then each segment's state record by id and its `'Length'`:
//!    PosLength by hand, the floor of the engine's plan;
//! 4. `switches by id`: each switch's record read by its id (its locator, then its row), as
//!    a plan would that found the switches in an index on `'Kind'`, without the index scan;
//! 5. `switches' Monitored By`: each switch's `'Monitored By'` probed by the switch's id (one
//!    descent; in id order, the best for LMDB), the least any plan for SwitchMonitored does per
//!    switch once it has the ids;
//! 6. SQLite's PosLength and SwitchMonitored (`Query::sql`: tables per element type).
//!
//! `cargo run --release -p espalier-trainbenchmark --example scan_floor -- [SIZE]`
//! (default 64).

use std::time::{Duration, Instant};

use espalier_data::{NodeRef, NodeView};
use espalier_trainbenchmark::load::{state, Railway};
use espalier_trainbenchmark::{create, generate, Query, Scenario};
use espalier_transaction::{DatabaseOptions, Durability};

const RUNS: usize = 30;
const WARMUP: usize = 5;

fn median_us(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

/// Runs `f` WARMUP + RUNS times; the median of the timed runs and the last answer.
fn time<T: PartialEq + std::fmt::Debug>(
    mut f: impl FnMut() -> Result<T, Box<dyn std::error::Error>>,
) -> Result<(f64, T), Box<dyn std::error::Error>> {
    let mut samples = Vec::with_capacity(RUNS);
    let mut last = None;
    for i in 0..WARMUP + RUNS {
        let t = Instant::now();
        let answer = f()?;
        let took = t.elapsed();
        if i >= WARMUP {
            samples.push(took);
        }
        if let Some(prev) = &last {
            assert_eq!(prev, &answer, "a read-only run changed its answer");
        }
        last = Some(answer);
    }
    Ok((median_us(samples), last.ok_or("no runs")?))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let size: u32 = std::env::args().nth(1).map_or(Ok(64), |s| s.parse())?;
    let dir = tempfile::tempdir()?;
    let model = generate(Scenario::Repair, size);
    let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = create(&dir.path().join("db"), &model, options)?;
    let conn = rusqlite::Connection::open(dir.path().join("sqlite.db"))?;
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
    conn.execute_batch("PRAGMA synchronous = OFF; PRAGMA cache_size = -1048576;")?;
    espalier_trainbenchmark::queries::create_tables(&conn, &model.tables())?;

    let schema = engine.schema();
    let r = Railway::resolve(schema)?;
    let (segment_state, _) = state(schema, r.kind, "Segment")?;
    let db = engine.database();
    let snapshot = db.snapshot()?;
    let g = snapshot.graph();
    let regions: Vec<NodeRef> =
        g.entries(NodeRef::ROOT, r.regions)?.map(|e| e.map(|(_, n)| n)).collect::<Result<_, _>>()?;

    // How many track elements `counts` says yes to, visiting them with one prefix scan per region.
    let count = |counts: &mut dyn FnMut(NodeView<'_>) -> Result<bool, Box<dyn std::error::Error>>| {
        let mut n = 0u64;
        for &region in &regions {
            for e in g.entry_views(region, r.elements)? {
                if counts(e?.1)? {
                    n += 1;
                }
            }
        }
        Ok::<u64, Box<dyn std::error::Error>>(n)
    };
    let (scan, rows) = time(|| count(&mut |_| Ok(true)))?;
    let (kind, segments) = time(|| count(&mut |view| Ok(view.state(r.kind)?.0 == segment_state)))?;
    let (length, by_hand) = time(|| {
        count(&mut |view| {
            let (index, node) = view.state(r.kind)?;
            Ok(index == segment_state && g.number(node, r.length)? <= 0)
        })
    })?;
    let mut pos_length = conn.prepare("SELECT id FROM Segment WHERE length <= 0")?;
    let (sqlite, sqlite_found) = time(|| {
        let ids = pos_length.query_map([], |row| row.get::<_, i64>(0))?.collect::<Result<Vec<_>, _>>()?;
        Ok(ids.len() as u64)
    })?;
    assert_eq!(by_hand, sqlite_found, "PosLength by hand and SQLite disagree");
    let mut switches = Vec::new();
    count(&mut |view| {
        if view.state(r.kind)?.0 != segment_state {
            switches.push(view.node);
        }
        Ok(false)
    })?;
    let (by_id, read) = time(|| {
        let mut read = 0u64;
        for &switch in &switches {
            g.view(switch)?;
            read += 1;
        }
        Ok(read)
    })?;
    // In id order, so that neighbouring probes share B+tree pages: the best order for LMDB.
    let mut by_id_order = switches.clone();
    by_id_order.sort_by_key(|n| n.id);
    let (probe, unmonitored) = time(|| {
        let mut unmonitored = 0u64;
        for &switch in &by_id_order {
            if g.entries(switch, r.monitored_by)?.next().is_none() {
                unmonitored += 1;
            }
        }
        Ok(unmonitored)
    })?;
    let mut monitored = conn.prepare(Query::SwitchMonitored.sql())?;
    let (sqlite_monitored, sqlite_unmonitored) = time(|| {
        let ids = monitored.query_map([], |row| row.get::<_, i64>(0))?.collect::<Result<Vec<_>, _>>()?;
        Ok(ids.len() as u64)
    })?;

    println!("size {size}: {rows} track elements, {segments} segments, {read} switches, {by_hand} PosLength matches");
    println!("medians of {RUNS} runs, µs (ns per track element)");
    let per = |us: f64| us * 1000.0 / rows as f64;
    for (label, us) in [
        ("Espalier scan", scan),
        ("Espalier scan + kind", kind),
        ("Espalier scan + length (PosLength by hand)", length),
        ("Espalier switches by id", by_id),
        ("Espalier switches' Monitored By", probe),
        ("SQLite PosLength", sqlite),
        ("SQLite SwitchMonitored", sqlite_monitored),
    ] {
        println!("{label:>44}: {us:>10.1} ({:.1} ns)", per(us));
    }
    println!("SQLite PosLength ÷ Espalier scan: {:.2}×; ÷ PosLength by hand: {:.2}×", sqlite / scan, sqlite / length);
    assert_eq!(unmonitored, sqlite_unmonitored, "SwitchMonitored by hand and SQLite disagree");
    println!(
        "SQLite SwitchMonitored ÷ Espalier scan + kind: {:.2}×; ÷ switches by id: {:.2}×; ÷ switches' Monitored By: {:.2}×",
        sqlite_monitored / kind,
        sqlite_monitored / by_id,
        sqlite_monitored / probe
    );
    Ok(())
}
