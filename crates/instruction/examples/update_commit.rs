//! What one embedded one-property update commit costs (`bench core`'s "update commit"):
//! `update . 'Items' : $key ( 'Value' -> number $v )` run through `Engine::run`, durability
//! `none`, one commit each. Prints the median time and the heap allocations per commit.
//!
//! ```text
//! cargo run --release -p espalier-instruction --example update_commit -- [ITEMS] [COMMITS]
//! valgrind --tool=callgrind --toggle-collect='*update_commit::commits*' \
//!     target/release/examples/update_commit 10000 20000
//! ```
//!
//! Under callgrind, the instructions collected divided by COMMITS are one commit's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use espalier_instruction::parse::ParseOptions;
use espalier_instruction::plan::Plan;
use espalier_instruction::{parse_instruction, Engine, ParamValue, Reply};
use espalier_transaction::{DatabaseOptions, Durability};

const SCHEMA: &str = "root ( 'Items' -> dictionary ( 'Value' -> number ) )";
const UPDATE: &str = "update . 'Items' : $key ( 'Value' -> number $v )";

/// Counts allocations (the system allocator does the work).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn key(i: usize) -> String {
    format!("item{i:08}")
}

/// The timed commits, by name for callgrind's `--toggle-collect`.
#[inline(never)]
fn commits(
    engine: &Engine,
    plan: &Plan,
    items: usize,
    count: usize,
    nanos: &mut Vec<u64>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut params = HashMap::new();
    params.insert("key".to_string(), ParamValue::Text(String::new()));
    params.insert("v".to_string(), ParamValue::Int(0));
    for n in 0..count {
        // A multiplicative step spreads the keys over the table, as the benchmark's random ones.
        let i = (n * 7919) % items;
        if let Some(ParamValue::Text(t)) = params.get_mut("key") {
            t.clear();
            let _ = write!(t, "item{i:08}");
        }
        if let Some(ParamValue::Int(v)) = params.get_mut("v") {
            *v = n as i64;
        }
        let t = Instant::now();
        let reply = engine.run(plan, &params, None)?;
        nanos.push(t.elapsed().as_nanos() as u64);
        if !matches!(reply, Reply::Done { changes: 1, .. }) {
            return Err(format!("unexpected reply {reply:?}").into());
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let items: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100_000);
    let count: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(200_000);
    let dir = tempfile::tempdir()?;
    let options = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = Engine::create(dir.path(), SCHEMA, options)?;
    let none = HashMap::new();
    for start in (0..items).step_by(10_000) {
        let mut text = String::from("update (");
        for i in start..(start + 10_000).min(items) {
            let _ = write!(text, " 'Items' -> dictionary \"{}\" ( 'Value' -> number {i} )", key(i));
        }
        text.push_str(" )");
        engine.execute_text(&text, &none)?;
    }
    let instr = parse_instruction(UPDATE, ParseOptions::CLIENT)?;
    let plan = engine.check(&instr, Some(UPDATE))?;
    let mut nanos = Vec::with_capacity(count);
    // Warm up: the pages the commits write are copied once, then reused.
    commits(&engine, &plan, items, count.min(10_000), &mut nanos)?;
    nanos.clear();
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    commits(&engine, &plan, items, count, &mut nanos)?;
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    nanos.sort_unstable();
    println!(
        "{count} update commits over {items} items: median {:.2} µs, p99 {:.2} µs, {:.2} allocations per commit",
        nanos[nanos.len() / 2] as f64 / 1000.0,
        nanos[nanos.len() * 99 / 100] as f64 / 1000.0,
        allocations as f64 / count as f64
    );
    Ok(())
}
