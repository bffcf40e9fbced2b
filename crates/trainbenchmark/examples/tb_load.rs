//! Espalier alone loading the Train Benchmark's model, for profiling the load: the model is
//! generated once, then loaded into a new database RUNS times, each timed.
//! `cargo run --release -p espalier-trainbenchmark --example tb_load -- SIZE [RUNS]`.

use std::time::Instant;

use espalier_trainbenchmark::{generate, Scenario};
use espalier_transaction::{DatabaseOptions, Durability};

/// The `espalier` binary's allocator, so that the profile is the one `espalier bench` runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let size: u32 = args.get(1).map_or(Ok(64), |s| s.parse())?;
    let runs: usize = args.get(2).map_or(Ok(10), |s| s.parse())?;
    let model = generate(Scenario::Batch, size);
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let dir = tempfile::tempdir()?;
        let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
        let start = Instant::now();
        let engine = espalier_trainbenchmark::create(&dir.path().join("db"), &model, opts)?;
        times.push(start.elapsed().as_micros());
        drop(engine);
    }
    println!("loads (µs): {times:?}");
    times.sort();
    println!("median {} µs", times[runs / 2]);
    Ok(())
}
