//! How long a checkpoint holds up the writer (#20 item 7): one-property update commits, timed
//! one by one, first with no checkpoint running, then while another thread writes checkpoints
//! back to back (the worst case: one is always in progress). Prints both latency
//! distributions and the checkpoints' own durations.
//!
//! ```text
//! cargo run --release -p espalier-transaction --example checkpoint_pause -- [ENTRIES] [SECONDS]
//! ```
//!
//! Defaults: 500,000 entries (a checkpoint of about 40 MB), 5 seconds per phase. Durability
//! `none`, so that the log's fdatasync does not hide the pauses.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use espalier_data::{DataError, EntryKey, NodeRef};
use espalier_schema::{compile, PropertyKind};
use espalier_transaction::{Database, DatabaseOptions, Durability, TxError};

const SCHEMA: &str = "root ( 'Items' -> dictionary ( 'Name' -> text 'Value' -> number ) )";
/// Entries added per commit while loading.
const LOAD_BATCH: usize = 10_000;
/// Most commits timed per phase (bounds the samples kept).
const MAX_SAMPLES: usize = 5_000_000;

#[derive(Debug, thiserror::Error)]
enum E {
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Tx(#[from] TxError),
}

/// Latencies in microseconds, sorted.
fn summary(name: &str, mut us: Vec<f64>) {
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us[((us.len() - 1) as f64 * q) as usize];
    println!(
        "{name:<34} {:>9} commits  median {:>6.2} µs  p99 {:>7.2} µs  p99.9 {:>8.2} µs  p99.99 {:>8.2} µs  max {:>9.1} µs",
        us.len(),
        at(0.5),
        at(0.99),
        at(0.999),
        at(0.9999),
        us[us.len() - 1]
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let entries: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(500_000);
    let seconds: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    let dir = tempfile::tempdir()?;
    let schema = compile(SCHEMA).map_err(|d| format!("{d:?}"))?;
    let items = schema.find(espalier_schema::ROOT, "Items").ok_or("no Items")?.id;
    let PropertyKind::Dictionary { node } = schema.property(items).kind else { return Err("Items".into()) };
    let (name, value) = (schema.find(node, "Name").ok_or("Name")?.id, schema.find(node, "Value").ok_or("Value")?.id);
    // No automatic checkpoints: phase 2 runs its own, back to back.
    let options = DatabaseOptions {
        durability: Durability::None,
        checkpoint_log_bytes: u64::MAX,
        memory_bytes: u64::MAX,
        ..Default::default()
    };
    let db = Database::create(dir.path(), schema, options)?;
    let t = Instant::now();
    for start in (0..entries).step_by(LOAD_BATCH) {
        db.write(|g| -> Result<(), E> {
            for i in start..(start + LOAD_BATCH).min(entries) {
                let key = format!("item{i:08}");
                let e = g.add_entry(NodeRef::ROOT, items, EntryKey::Text(&key))?;
                g.set_text(e, name, &format!("name of item {i}"))?;
                g.set_number(e, value, i as i64)?;
            }
            Ok(())
        })?;
    }
    println!("loaded {entries} entries in {:.2} s", t.elapsed().as_secs_f64());
    let first = db.checkpoint()?.ok_or("nothing to checkpoint")?;
    println!("one checkpoint: {} bytes", first.bytes);
    let nodes: Vec<NodeRef> = {
        let snap = db.snapshot()?;
        let g = snap.graph();
        let nodes = g.entries(NodeRef::ROOT, items)?.map(|e| e.map(|(_, n)| n)).collect::<Result<_, _>>()?;
        nodes
    };

    let phase = |label: &str| -> Result<(), Box<dyn std::error::Error>> {
        let mut us = Vec::with_capacity(1 << 20);
        let until = Instant::now() + Duration::from_secs(seconds);
        let mut i = 0usize;
        while Instant::now() < until && us.len() < MAX_SAMPLES {
            let node = nodes[(i * 7919) % nodes.len()];
            let t = Instant::now();
            db.write(|g| -> Result<i64, E> { Ok(g.set_number(node, value, i as i64)?) })?;
            us.push(t.elapsed().as_secs_f64() * 1e6);
            i += 1;
        }
        summary(label, us);
        Ok(())
    };
    phase("no checkpoint running")?;

    let stop = Arc::new(AtomicBool::new(false));
    let checkpointer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || -> Result<(Vec<f64>, usize, Duration), TxError> {
            let (mut took, mut written, mut longest_swap) = (Vec::new(), 0, Duration::ZERO);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                if let Some(done) = db.checkpoint()? {
                    took.push(t.elapsed().as_secs_f64() * 1e3);
                    written += done.written;
                    longest_swap = longest_swap.max(done.swap_pause);
                }
            }
            Ok((took, written, longest_swap))
        })
    };
    phase("checkpoints back to back")?;
    stop.store(true, Ordering::Relaxed);
    let (took, written, longest_swap) = checkpointer.join().map_err(|_| "the checkpoint thread panicked")??;
    let mean = took.iter().sum::<f64>() / took.len().max(1) as f64;
    println!(
        "checkpoints written meanwhile: {} (mean {mean:.0} ms each, {} pages and leaves each on average; longest swap slice {:.2} ms)",
        took.len(),
        written / took.len().max(1),
        longest_swap.as_secs_f64() * 1e3
    );
    Ok(())
}
