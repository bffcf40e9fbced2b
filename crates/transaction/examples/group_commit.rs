//! Group commit with an `fdatasync` per batch (#20's durable writes): K threads each write
//! one-property update commits in a closed loop for a few seconds, waiting for each (the
//! embedded `write`), then K detached writers with at most K requests in flight (the server's
//! way: `write_detached`, whose batches the database's writer thread runs). Prints writes per
//! second, the mean batch and what a batch cost, so that group commit can be measured on its
//! own, without the server's stack around it (`docs/benchmarks.md`, "Durable writes at 64
//! clients").
//!
//! ```text
//! cargo run --release -p espalier-transaction --example group_commit -- [THREADS] [SECONDS]
//! ```
//!
//! Defaults: 64 threads, 3 seconds per phase; durability `sync`, in the system's temp
//! directory.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use espalier_data::{EntryKey, NodeRef};
use espalier_schema::{compile, PropertyKind};
use espalier_transaction::{CommitFigures, Database, DatabaseOptions, Durability, TxError};

const SCHEMA: &str = "root ( 'Items' -> dictionary ( 'Value' -> number ) )";
const ENTRIES: usize = 10_000;

fn report(label: &str, seconds: f64, before: CommitFigures, after: CommitFigures) {
    let commits = (after.commits - before.commits).max(1);
    let requests = after.requests - before.requests;
    println!(
        "{label:<22} {:>8.0} writes/s  batch {:>5.1}  per batch {:>6.1} µs (storage {:>6.1} µs)",
        requests as f64 / seconds,
        requests as f64 / commits as f64,
        (after.nanos - before.nanos) as f64 / commits as f64 / 1e3,
        (after.store_commit_nanos - before.store_commit_nanos) as f64 / commits as f64 / 1e3,
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(64);
    let seconds: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3);
    let dir = tempfile::tempdir()?;
    let schema = compile(SCHEMA).map_err(|d| format!("{d:?}"))?;
    let items = schema.find(espalier_schema::ROOT, "Items").ok_or("no Items")?.id;
    let PropertyKind::Dictionary { node } = schema.property(items).kind else { return Err("Items".into()) };
    let value = schema.find(node, "Value").ok_or("Value")?.id;
    let db =
        Database::create(dir.path(), schema, DatabaseOptions { durability: Durability::Sync, ..Default::default() })?;
    let nodes: Arc<Vec<NodeRef>> = Arc::new(
        db.write(|g| -> Result<Vec<NodeRef>, TxError> {
            (0..ENTRIES)
                .map(|i| Ok(g.add_entry(NodeRef::ROOT, items, EntryKey::Text(&format!("item{i:06}")))?))
                .collect()
        })?
        .value,
    );
    let window = Duration::from_secs(seconds);

    // Waiting writers: each thread leads batches when its turn comes.
    let before = db.commit_figures();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (db, nodes, stop) = (db.clone(), nodes.clone(), stop.clone());
            std::thread::spawn(move || -> Result<(), TxError> {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let node = nodes[i % nodes.len()];
                    db.write(|g| -> Result<i64, TxError> { Ok(g.set_number(node, value, i as i64)?) })?;
                    i += threads;
                }
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(window);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().map_err(|_| "a writer panicked")??;
    }
    report("waiting writers", started.elapsed().as_secs_f64(), before, db.commit_figures());

    // Detached writers: `threads` requests in flight, each replaced when it completes.
    let before = db.commit_figures();
    let in_flight = Arc::new((Mutex::new(0usize), Condvar::new()));
    let failed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut i = 0usize;
    while started.elapsed() < window {
        {
            let (count, freed) = &*in_flight;
            let mut n = count.lock().map_err(|_| "poisoned")?;
            while *n >= threads {
                n = freed.wait(n).map_err(|_| "poisoned")?;
            }
            *n += 1;
        }
        let node = nodes[i % nodes.len()];
        let (done, failed) = (in_flight.clone(), failed.clone());
        let v = i as i64;
        db.write_detached(
            move |g| -> Result<i64, TxError> { Ok(g.set_number(node, value, v)?) },
            false,
            move |r| {
                if r.is_err() {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                let (count, freed) = &*done;
                *count.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
                freed.notify_one();
            },
        );
        i += 1;
    }
    let (count, freed) = &*in_flight;
    let mut n = count.lock().map_err(|_| "poisoned")?;
    while *n > 0 {
        n = freed.wait(n).map_err(|_| "poisoned")?;
    }
    drop(n);
    report("detached writers", started.elapsed().as_secs_f64(), before, db.commit_figures());
    let failed = failed.load(Ordering::Relaxed);
    if failed > 0 {
        return Err(format!("{failed} writes failed").into());
    }
    Ok(())
}
