//! The string table's cost at checkpoint and open (`docs/benchmarks.md`, "Larger than
//! memory"): `build DIR N` stores N distinct texts (about 60 bytes each) in a new database and
//! checkpoints it; `open DIR` opens it in a fresh process, reads every text, stores 1,000 more
//! and checkpoints again. Each step prints its time and the process's memory (RssAnon and
//! RssFile from `/proc/self/status`) and the storage heap (`espalier_storage::heap_bytes`).
//!
//! `cargo run --release -p espalier-storage --example strings_floor -- build /tmp/sf 2000000`,
//! then `... -- open /tmp/sf`.

use std::path::Path;
use std::time::Instant;

use espalier_storage::tables::{Shape, Tables, TablesOptions};
use espalier_storage::Durability;

fn shape() -> Shape {
    Shape { tables: vec![16], indexes: 0 }
}

fn options() -> TablesOptions {
    TablesOptions { durability: Durability::None, ..TablesOptions::default() }
}

fn text(i: u64) -> Vec<u8> {
    format!("material {i:012} of the larger-than-memory test, {}", i % 977).into_bytes()
}

/// RssAnon and RssFile in MiB.
fn rss() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0.0, |kb| kb as f64 / 1024.0)
    };
    let heap = espalier_storage::heap_bytes() as f64 / (1 << 20) as f64;
    format!("RssAnon {:.1} MiB, RssFile {:.1} MiB, storage heap {heap:.1} MiB", field("RssAnon:"), field("RssFile:"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (mode, dir) = match (args.get(1), args.get(2)) {
        (Some(m), Some(d)) => (m.as_str(), Path::new(d)),
        _ => return Err("usage: strings_floor build DIR N | open DIR".into()),
    };
    match mode {
        "build" => {
            let n: u64 = args.get(3).ok_or("N")?.parse()?;
            let db = Tables::create(dir, shape(), b"", options())?;
            let started = Instant::now();
            for chunk in 0..n.div_ceil(10_000) {
                let mut w = db.writer();
                for i in chunk * 10_000..((chunk + 1) * 10_000).min(n) {
                    w.acquire(&text(i))?;
                }
                w.commit(chunk + 1)?;
            }
            println!("stored {n} texts in {:.2} s; {}", started.elapsed().as_secs_f64(), rss());
            let started = Instant::now();
            let done = db.checkpoint()?.ok_or("nothing to checkpoint")?;
            println!(
                "checkpoint: {:.2} s, {:.1} MiB written; {}",
                started.elapsed().as_secs_f64(),
                done.bytes as f64 / (1 << 20) as f64,
                rss()
            );
        }
        "open" => {
            println!("before open: {}", rss());
            let started = Instant::now();
            let db = Tables::open(dir, shape(), options())?;
            println!("open: {:.2} s; {}", started.elapsed().as_secs_f64(), rss());
            let started = Instant::now();
            let snap = db.snapshot();
            let (mut count, mut bytes) = (0u64, 0u64);
            for (_, _, b) in snap.strings().iter() {
                count += 1;
                bytes += b.len() as u64;
            }
            drop(snap);
            println!(
                "read {count} texts ({:.1} MiB) in {:.2} s; {}",
                bytes as f64 / (1 << 20) as f64,
                started.elapsed().as_secs_f64(),
                rss()
            );
            let started = Instant::now();
            {
                let mut w = db.writer();
                for i in 0..1000 {
                    w.acquire(&text(u64::MAX / 2 + i))?;
                }
                // Interning a stored text finds it by its hash.
                let again = w.acquire(&text(7))?;
                w.release(again)?;
                w.commit(u64::MAX / 2)?;
            }
            let stored = started.elapsed().as_secs_f64();
            let started = Instant::now();
            let done = db.checkpoint()?.ok_or("nothing to checkpoint")?;
            println!(
                "1,000 more texts in {stored:.3} s; checkpoint: {:.3} s, {:.1} MiB written; {}",
                started.elapsed().as_secs_f64(),
                done.bytes as f64 / (1 << 20) as f64,
                rss()
            );
        }
        _ => return Err("usage: strings_floor build DIR N | open DIR".into()),
    }
    Ok(())
}
