//! Espalier's benchmarks.
//!
//! [`core`] is the in-process micro-benchmark that compares the engine's basic operations
//! (key lookup, one-property commit, reference navigation, a small collection query) with
//! SQLite on the same data, next to the machine's floor ([`floor`]).

pub mod core;
pub mod floor;
pub mod stats;
