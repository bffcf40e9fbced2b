//! Espalier's benchmarks.
//!
//! [`core`] is the in-process micro-benchmark that compares the engine's basic operations
//! (key lookup, one-property commit, reference navigation, a small collection query) with
//! SQLite on the same data, next to the machine's floor ([`floor`]). [`suite`] is the
//! benchmark language of the thesis (§6.1) and the runner of benchmark files such as the
//! suites B1–B7 in `benchmarks/`.
//!
//! The modules that drive other systems ([`core`], [`floor`], [`peers`], [`remote`]) are in
//! the `peers` feature (on by default); without it the crate is [`suite`] and what it needs,
//! so a lean `espalier` binary links no SQLite, PostgreSQL or HTTP client.

#![warn(missing_docs)]

#[cfg(feature = "peers")]
pub mod core;
#[cfg(feature = "peers")]
pub mod floor;
pub mod graph_peer;
pub mod interrupt;
#[cfg(feature = "peers")]
pub mod mix;
#[cfg(feature = "peers")]
pub mod peers;
pub mod progress;
#[cfg(feature = "peers")]
pub mod remote;
pub mod stats;
pub mod suite;
pub mod table_floor;
