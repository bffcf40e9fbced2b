//! The machine's floor, measured in the same run as the benchmark: what the clock itself costs,
//! how long a dependent load from DRAM takes, and what one durable 4 KB write costs on the
//! filesystem the databases live on.

use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::stats::Summary;

/// The machine's floor: clock overhead, memory latency and the cost of a durable write.
#[derive(Debug, Clone, Serialize)]
pub struct Floor {
    /// One timed sample around nothing (`Instant::now()` twice): the overhead included in
    /// every operation sample.
    pub empty_sample: Summary,
    /// One iteration of an empty (black-boxed) loop, in nanoseconds.
    pub empty_loop_ns: f64,
    /// Pointer chasing over a random cyclic permutation: nanoseconds per dependent load.
    pub memory_latency_ns: f64,
    /// The size of the buffer the memory-latency probe ran over, in bytes.
    pub memory_probe_bytes: usize,
    /// Write 4 KB at offset 0 of a file in the benchmark directory, then `fsync`.
    pub fsync_4k: Summary,
}

/// How much to measure for the floor.
pub struct FloorConfig {
    /// Timed empty samples for the clock overhead.
    pub samples: usize,
    /// The size of the buffer for the memory-latency probe, in bytes.
    pub memory_probe_bytes: usize,
    /// Dependent loads the memory-latency probe times.
    pub memory_loads: usize,
    /// Samples of the 4 KB write and `fsync`.
    pub fsyncs: usize,
    /// Seed of the RNG that makes the probe's random permutation.
    pub seed: u64,
}

/// Measures the floor, writing the `fsync` probe's file in `dir`.
pub fn measure(dir: &Path, cfg: &FloorConfig) -> std::io::Result<Floor> {
    // Timer overhead, with the same sample loop shape as the operations.
    let mut samples = Vec::with_capacity(cfg.samples);
    for _ in 0..cfg.samples {
        let t = Instant::now();
        black_box(());
        samples.push(t.elapsed());
    }
    let empty_sample = Summary::of(&mut samples);

    let iterations = 10_000_000u64;
    let t = Instant::now();
    for i in 0..iterations {
        black_box(i);
    }
    let empty_loop_ns = t.elapsed().as_nanos() as f64 / iterations as f64;

    let memory_latency_ns = memory_latency(cfg.memory_probe_bytes, cfg.memory_loads, cfg.seed);

    let path = dir.join("fsync-probe");
    let mut file = OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path)?;
    let block = [0xA5u8; 4096];
    file.write_all(&block)?;
    file.sync_all()?;
    let mut fsyncs = Vec::with_capacity(cfg.fsyncs);
    for _ in 0..cfg.fsyncs {
        use std::os::unix::fs::FileExt;
        let t = Instant::now();
        file.write_all_at(&block, 0)?;
        file.sync_all()?;
        fsyncs.push(t.elapsed());
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(Floor {
        empty_sample,
        empty_loop_ns,
        memory_latency_ns,
        memory_probe_bytes: cfg.memory_probe_bytes,
        fsync_4k: Summary::of(&mut fsyncs),
    })
}

/// Nanoseconds per load when every load's address depends on the previous one, over a single
/// random cycle (Sattolo's shuffle) through `bytes` of memory.
fn memory_latency(bytes: usize, loads: usize, seed: u64) -> f64 {
    let n = (bytes / std::mem::size_of::<usize>()).max(2);
    let mut next: Vec<usize> = (0..n).collect();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6d65_6d6f_7279);
    for i in (1..n).rev() {
        let j = rng.random_range(0..i);
        next.swap(i, j);
    }
    let mut at = 0usize;
    // Warm the TLB and page tables a little.
    for _ in 0..n.min(loads / 10 + 1) {
        at = next[at];
    }
    let t = Instant::now();
    for _ in 0..loads {
        at = next[at];
    }
    let elapsed = t.elapsed();
    black_box(at);
    elapsed.as_nanos() as f64 / loads.max(1) as f64
}

/// Keeps a duration printable in the shortest sensible unit.
pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1000.0)
    }
}
