//! Espalier alone on the Train Benchmark's batch model, for profiling the pattern executor:
//! each query's plan (`explain`) and the median of its runs. `cargo run --release -p
//! espalier-trainbenchmark --example tb_plan -- SIZE [RUNS] [QUERY] [SCENARIO]` (the
//! scenario's model: `batch`, without matches, by default; `repair` has thousands).

use std::collections::HashMap;
use std::time::Instant;

use espalier_trainbenchmark::queries::espalier_matches;
use espalier_trainbenchmark::{generate, Query, Scenario};
use espalier_transaction::{DatabaseOptions, Durability};

/// The `espalier` binary's allocator, so that the profile is the one `espalier bench` runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let size: u32 = args.get(1).map_or(Ok(64), |s| s.parse())?;
    let runs: usize = args.get(2).map_or(Ok(20), |s| s.parse())?;
    let queries = match args.get(3).and_then(|q| Query::parse(q)) {
        Some(q) => vec![q],
        None => Query::ALL.to_vec(),
    };
    let scenario = match args.get(4) {
        Some(s) => Scenario::parse(s).ok_or_else(|| format!("no scenario {s:?}: batch, inject or repair"))?,
        None => Scenario::Batch,
    };
    let model = generate(scenario, size);
    let dir = tempfile::tempdir()?;
    let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = espalier_trainbenchmark::create(&dir.path().join("db"), &model, opts)?;
    // TB_EVICT=1: write 64 MiB between runs.
    let mut evict = std::env::var_os("TB_EVICT").map(|_| vec![0u8; 64 << 20]);
    for q in queries {
        let explain = engine.execute_text(&format!("explain {}", q.pattern()), &HashMap::new())?;
        println!("## {}\n{}", q.name(), serde_json::to_string(&explain)?);
        let mut times = Vec::with_capacity(runs);
        let mut found = 0;
        for _ in 0..runs {
            if let Some(buf) = evict.as_mut() {
                // Another system's run in between, as the side-by-side benchmark has: caches cold.
                for (i, b) in buf.iter_mut().enumerate().step_by(64) {
                    *b = b.wrapping_add(i as u8);
                }
            }
            let start = Instant::now();
            found = espalier_matches(&engine, q)?.len();
            times.push(start.elapsed().as_micros());
        }
        times.sort();
        println!("{}: {} matches, median {} µs", q.name(), found, times[runs / 2]);
    }
    Ok(())
}
