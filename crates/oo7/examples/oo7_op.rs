//! Espalier alone on OO7 operations, for profiling: loads a configuration once, then runs
//! each operation asked for and prints its median. `cargo run --release -p espalier-oo7
//! --example oo7_op -- [small|medium] [RUNS] [OP ...]` (default: medium, 20 runs, every read;
//! an update traversal such as `T2c` runs as one transaction; `insert` or `delete` runs both,
//! alternating).

use std::time::Instant;

use espalier_oo7::espalier::Oo7Espalier;
use espalier_oo7::ops::{Draw, INSERTED};
use espalier_oo7::{Op, Size};
use espalier_transaction::{DatabaseOptions, Durability};

/// The `espalier` binary's allocator, so that the profile is the one `espalier bench` runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let size = match args.get(1).map(String::as_str) {
        Some("small") => Size::Small,
        _ => Size::Medium,
    };
    let runs: usize = args.get(2).map_or(Ok(20), |s| s.parse())?;
    let asked: Vec<Op> = args.iter().skip(3).filter_map(|a| Op::parse(a)).collect();
    let ops = if asked.is_empty() { Op::READS.to_vec() } else { asked };
    let db = espalier_oo7::generate(size, 3, 42)?;
    let dir = tempfile::tempdir()?;
    let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let ours = Oo7Espalier::new(espalier_oo7::create(&dir.path().join("db"), &db, opts)?)?;
    for op in ops {
        if matches!(op, Op::Insert | Op::Delete) {
            // Both, alternating, as the benchmark runs them: five composite parts in, then out.
            let (first_part, first_atom) = (db.composites.len() as u64 + 1, db.max_atomic_id() + 1);
            let mut times = [Vec::with_capacity(runs), Vec::with_capacity(runs)];
            for i in 0..runs {
                let new = espalier_oo7::generate::new_composites(&db, i as u64, first_part, first_atom, INSERTED);
                let start = Instant::now();
                ours.insert(&new)?;
                times[0].push(start.elapsed().as_micros());
                let start = Instant::now();
                ours.delete(&new)?;
                times[1].push(start.elapsed().as_micros());
            }
            for (name, t) in ["insert", "delete"].iter().zip(&mut times) {
                t.sort();
                println!("{name}: median {} µs", t[runs / 2]);
            }
            continue;
        }
        let mut times = Vec::with_capacity(runs);
        let mut count = 0;
        for i in 0..runs {
            let draw = Draw::new(&db, op, i as u64);
            let start = Instant::now();
            count = if Op::UPDATES.contains(&op) { ours.update(op)?.count } else { ours.read(op, &draw)?.count };
            times.push(start.elapsed().as_micros());
        }
        times.sort();
        println!("{}: answer {count}, median {} µs", op.name(), times[runs / 2]);
    }
    Ok(())
}
