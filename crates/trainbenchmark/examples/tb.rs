//! The benchmark without the command line, for profiling: `cargo run --release -p
//! espalier-trainbenchmark --example tb -- SIZE[,SIZE…] [RUNS] [QUERY]`.

use espalier_trainbenchmark::bench::{run, Config};
use espalier_trainbenchmark::Query;

/// The `espalier` binary's allocator, so that the profile is the one `espalier bench` runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let sizes = args.get(1).map_or(Ok(vec![1]), |s| s.split(',').map(str::parse).collect::<Result<Vec<u32>, _>>())?;
    let runs = args.get(2).map_or(Ok(20), |s| s.parse())?;
    let queries = match args.get(3).and_then(|q| Query::parse(q)) {
        Some(q) => vec![q],
        None => Query::ALL.to_vec(),
    };
    let config = Config { sizes, runs, queries, progress: true, ..Config::quick() };
    print!("{}", run(&config)?.to_markdown());
    Ok(())
}
