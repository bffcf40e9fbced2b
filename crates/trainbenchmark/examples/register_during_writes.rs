//! How long commits wait while pattern queries are registered: one thread commits (a route
//! added, then removed) in a loop on a size-64 railway while the main thread registers
//! ConnectedSegments and SemaphoreNeighbor (each loads its matches, a few hundred ms). Prints
//! the slowest pair of commits meanwhile. `cargo run --release -p espalier-trainbenchmark
//! --example register_during_writes`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use espalier_trainbenchmark::{create, generate, Query, Scenario};
use espalier_transaction::{DatabaseOptions, Durability};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let model = generate(Scenario::Repair, 64);
    let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
    // Large enough that no commit has to grow the map (which waits for every snapshot).
    let engine = create(&dir.path().join("db"), &model, options)?;
    let stop = AtomicBool::new(false);
    let no_params = HashMap::new();
    let (registering, worst, commits) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let (mut worst, mut commits) = (Duration::ZERO, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                for text in
                    ["update ( 'Routes' -> dictionary \"zz\" ( ) )", "update ( 'Routes' -> dictionary \"zz\" remove )"]
                {
                    engine.execute_text(text, &no_params).expect("the writer's commit");
                }
                worst = worst.max(t.elapsed());
                commits += 2;
            }
            (worst, commits)
        });
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        for q in [Query::ConnectedSegments, Query::SemaphoreNeighbor] {
            engine.register_text(q.pattern(), &no_params).expect("registers");
        }
        let registering = t.elapsed();
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        let (worst, commits) = writer.join().expect("the writer");
        (registering, worst, commits)
    });
    let (caught_up, reloaded) = engine.registry().catch_ups();
    println!(
        "registering two queries took {registering:?}; {commits} commits meanwhile; the slowest pair of commits \
         {worst:?}; {caught_up} registrations caught up from touched sets, {reloaded} loaded again under the lock"
    );
    Ok(())
}
