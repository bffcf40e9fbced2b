//! The B6/B7 data: the benchmark files `benchmarks/b6/use_case.bench` and
//! `benchmarks/b7/big_use_case.bench` (appendix B.6's model and `initialize` part; B7 is B6's
//! outermost collections × 100), built into Espalier by [`crate::suite::build_dataset`] — the
//! same data `espalier bench run` measures, for the same seed and scale.
//!
//! `scale` multiplies the outermost collections (clients, materials, products, orders,
//! machines), `nested_scale` the collections inside entries (5 modifications per order, 100
//! added materials per modification); key bounds scale with their collection.

use indicatif::ProgressBar;

use super::{PeerError, Suite};
use crate::suite::{self, BuildOptions, Scale};

/// Appendix B.6 as a benchmark file.
pub const B6_FILE: &str = include_str!("../../../../benchmarks/b6/use_case.bench");
/// Appendix B.7 as a benchmark file.
pub const B7_FILE: &str = include_str!("../../../../benchmarks/b7/big_use_case.bench");

/// Entries written per write request (one commit each) while building.
const BATCH_ENTRIES: u64 = 20_000;

/// The parsed benchmark file of a suite (its model, initialisation and benchmarks).
pub fn suite_file(s: Suite) -> Result<suite::Suite, PeerError> {
    let (source, name) = match s {
        Suite::B6 => (B6_FILE, "benchmarks/b6/use_case.bench"),
        Suite::B7 => (B7_FILE, "benchmarks/b7/big_use_case.bench"),
    };
    suite::parse_suite(source, name).map_err(|e| PeerError::Invalid(e.to_string()))
}

/// Fills an empty Espalier database created from `file.model`; returns the entries written.
pub fn build(
    engine: &espalier_instruction::Engine,
    file: &suite::Suite,
    seed: u64,
    scale: Scale,
    progress: &ProgressBar,
) -> Result<u64, PeerError> {
    scale.validate().map_err(PeerError::Invalid)?;
    let options = BuildOptions { seed, scale, batch: BATCH_ENTRIES };
    let stats = suite::build_dataset(engine, file, &options, progress)
        .map_err(|e| PeerError::Invalid(format!("building the {} data set: {e}", file.name)))?;
    Ok(stats.entries)
}

/// Entries the data set will hold (for progress bars), rounded.
pub fn expected_entries(file: &suite::Suite, scale: Scale) -> u64 {
    file.expected_entries(scale).round().max(0.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_files_parse_and_b7_is_b6_bigger() {
        let b6 = suite_file(Suite::B6).expect("B6 parses");
        let b7 = suite_file(Suite::B7).expect("B7 parses");
        let one = Scale { outer: 1.0, nested: 1.0 };
        assert_eq!(expected_entries(&b6, one), 61_030);
        assert!(expected_entries(&b7, one) > 50 * expected_entries(&b6, one));
        // The relational mapping and the workload's SQL rely on the two models being one.
        assert_eq!(b6.schema.types.len(), b7.schema.types.len());
    }
}
