//! What a registered query costs every write: the median of 20,000 single-request commits on
//! a size-8 railway (durability none), with nothing registered, with the registry hooked in
//! but empty (the writes record what they touch, and nothing reads it), and with SwitchSet
//! registered. Two writes: switching a route's `'Active'` (a state SwitchSet reads) and
//! adding or removing a route. `cargo run --release -p espalier-trainbenchmark --example
//! write_cost`.

use std::collections::HashMap;
use std::time::Instant;

use espalier_trainbenchmark::{create, generate, Query, Scenario};
use espalier_transaction::{DatabaseOptions, Durability};

const WRITES: usize = 20_000;

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Medians in µs: (state switch, one entry added or removed).
fn measure(mode: &str) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let model = generate(Scenario::Repair, 8);
    let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = create(&dir.path().join("db"), &model, options)?;
    let no_params = HashMap::new();
    match mode {
        "hooked" => {
            engine.registry();
        }
        "SwitchSet" => {
            engine.register_text(Query::SwitchSet.pattern(), &no_params)?;
        }
        _ => {}
    }
    let route = model.routes.first().ok_or("a model without routes")?;
    let (mut switches, mut entries) = (Vec::with_capacity(WRITES), Vec::with_capacity(WRITES));
    for i in 0..WRITES {
        let state = if (i % 2 == 0) == route.active { "No" } else { "Yes" };
        let t = Instant::now();
        engine.execute_text(
            &format!("update . 'Routes' : \"{}\" ( 'Active' -> stategroup '{state}' set to ( ) )", route.id),
            &no_params,
        )?;
        switches.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        engine.execute_text("update ( 'Routes' -> dictionary \"extra\" ( ) )", &no_params)?;
        engine.execute_text("update ( 'Routes' -> dictionary \"extra\" remove )", &no_params)?;
        entries.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    Ok((median(switches), median(entries)))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for round in 1..=3 {
        for (mode, label) in
            [("nothing", "no registry"), ("hooked", "empty registry"), ("SwitchSet", "SwitchSet registered")]
        {
            let (switch, entry) = measure(mode)?;
            println!("run {round}, {label:>20}: state switch {switch:.2} µs, entry added or removed {entry:.2} µs");
        }
    }
    Ok(())
}
