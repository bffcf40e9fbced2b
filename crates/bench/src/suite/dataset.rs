//! Building the dataset a suite's `initialize` part describes.
//!
//! The work is a stack of collection fills (owner node, collection, next entry, end). Each
//! write request pops fills and creates entries until it has made [`BuildOptions::batch`]
//! entries; an entry's own nested collections are pushed on top, so the tree is filled depth
//! first in the order the file writes it (a reference can point at any collection written
//! earlier). A request's closure may run again after the map grows, so it works on a copy of
//! the stack and the copy replaces the stack only when the request has committed.
//!
//! Determinism: every node gets a random stream from its parent's stream, its collection and
//! its index ([`mix`]); its values, state choices and reference picks are drawn from that
//! stream in item order. The data therefore depends on the suite, the seed and the scale only.

use std::path::Path;
use std::time::Instant;

use espalier_data::EntryKey;
use espalier_instruction::Engine;
use espalier_schema::{Diagnostic, PropertyId, PropertyKind, Schema, Span};
use espalier_transaction::{DatabaseOptions, NodeRef, TxError, WriteGraph};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use super::{is_nested, key_dictionaries, InitItem, InitValue, Scale, Suite};

/// How to build.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Seed of the generator of the data's values.
    pub seed: u64,
    /// The factors the benchmark file's collection sizes are multiplied by.
    pub scale: Scale,
    /// Entries per write request (one commit each).
    pub batch: u64,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions { seed: 1, scale: Scale::default(), batch: 20_000 }
    }
}

/// What a build made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DatasetStats {
    /// Dictionary and matrix entries created.
    pub entries: u64,
    /// Write requests (commits) used.
    pub commits: u64,
    /// The wall time of the build, in seconds.
    pub seconds: f64,
}

/// A build failure; `Display` names the place in the benchmark file when there is one.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BuildError {
    /// A place in the benchmark file cannot be built.
    #[error("{file}:{}:{}: {}", .at.line, .at.column, .at.message)]
    At {
        /// The benchmark file.
        file: String,
        /// Where in the file, and why.
        at: Diagnostic,
    },
    /// The database refused a write or failed.
    #[error("building the dataset: {0}")]
    Database(String),
    /// The scale is out of range.
    #[error("the scale is invalid: {0}")]
    Scale(String),
}

impl From<TxError> for BuildError {
    fn from(e: TxError) -> BuildError {
        BuildError::Database(e.to_string())
    }
}

impl From<espalier_data::DataError> for BuildError {
    fn from(e: espalier_data::DataError) -> BuildError {
        BuildError::Database(e.to_string())
    }
}

/// SplitMix64: a tiny, fast generator whose output is fixed by its definition (not by a
/// library version), so datasets stay the same across builds.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator that starts from `seed`.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    /// The next value of the sequence.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (`bound > 0`), by Lemire's multiply-and-reject.
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "bound checked by the parser");
        // A draw is rejected with probability below 1/2, so 64 rounds practically never run
        // out; if they do, the last draw is used (a bias of at most 2^-64).
        let mut m = 0u128;
        for _ in 0..64 {
            m = u128::from(self.next_u64()) * u128::from(bound);
            if (m as u64) >= bound.wrapping_neg() % bound {
                break;
            }
        }
        (m >> 64) as u64
    }
}

/// The stream of entry `index` of collection `property` under a node with stream `parent`.
pub fn mix(parent: u64, property: PropertyId, index: u64) -> u64 {
    let mut g = SplitMix::new(parent ^ (u64::from(property.get()) << 40) ^ index.rotate_left(17));
    g.next_u64() ^ SplitMix::new(index).next_u64()
}

/// One collection being filled.
#[derive(Debug, Clone, Copy)]
struct Fill<'s> {
    owner: NodeRef,
    property: PropertyId,
    items: &'s [InitItem],
    /// Where the collection is initialised, for errors.
    span: Span,
    next: u64,
    end: u64,
    /// The owner's stream.
    stream: u64,
}

struct Ctx<'s> {
    suite: &'s Suite,
    schema: &'s Schema,
    scale: Scale,
    sizes: std::collections::HashMap<PropertyId, u64>,
}

/// Creates a database for `suite` at `dir` (which must not hold one) with `options`, and builds
/// the dataset into it.
pub fn create_dataset(
    dir: &Path,
    suite: &Suite,
    db_options: DatabaseOptions,
    options: &BuildOptions,
    progress: &ProgressBar,
) -> Result<(Engine, DatasetStats), BuildError> {
    let engine = Engine::create(dir, &suite.model, db_options).map_err(|e| BuildError::Database(e.to_string()))?;
    let stats = build_dataset(&engine, suite, options, progress)?;
    Ok((engine, stats))
}

/// Fills `engine`'s database (empty, created from `suite.model`) as `suite.init` says.
/// `progress` counts entries (its length is set to the expected total).
pub fn build_dataset(
    engine: &Engine,
    suite: &Suite,
    options: &BuildOptions,
    progress: &ProgressBar,
) -> Result<DatasetStats, BuildError> {
    options.scale.validate().map_err(BuildError::Scale)?;
    assert!(options.batch > 0, "batch size must be positive");
    let started = Instant::now();
    let ctx = Ctx { suite, schema: engine.schema(), scale: options.scale, sizes: suite.collection_sizes() };
    progress.set_length(suite.expected_entries(options.scale).round() as u64);
    let root_stream = SplitMix::new(options.seed).next_u64();
    let mut stats = DatasetStats::default();
    // First request: the root's own values and states; its collections become fills.
    let first = engine.database().write(|g: &mut WriteGraph<'_, '_>| -> Result<Vec<Fill<'_>>, BuildError> {
        // A build's change records are not needed by anyone (and would be as large as it).
        g.set_record_changes(false);
        let mut fills = Vec::new();
        let mut rng = SplitMix::new(root_stream);
        ctx.fill(g, NodeRef::ROOT, &suite.init, &mut rng, root_stream, &mut fills)?;
        fills.reverse();
        Ok(fills)
    })?;
    stats.commits += 1;
    let mut stack = first.value;
    // Each request makes at least one entry, so this ends; the bound guards against a bug.
    let max_requests = u64::MAX / 2;
    while !stack.is_empty() {
        assert!(stats.commits < max_requests, "dataset build does not progress");
        let committed =
            engine.database().write(|g: &mut WriteGraph<'_, '_>| -> Result<(Vec<Fill<'_>>, u64), BuildError> {
                g.set_record_changes(false);
                let mut work = stack.clone();
                let made = ctx.step(g, &mut work, options.batch)?;
                Ok((work, made))
            })?;
        let (rest, made) = committed.value;
        stack = rest;
        stats.entries += made;
        stats.commits += 1;
        progress.inc(made);
    }
    engine.database().sync().map_err(|e| BuildError::Database(e.to_string()))?;
    stats.seconds = started.elapsed().as_secs_f64();
    Ok(stats)
}

impl<'s> Ctx<'s> {
    fn at(&self, span: Span, message: impl Into<String>) -> BuildError {
        BuildError::At { file: self.suite.name.clone(), at: Diagnostic::new(&self.suite.source, span, message) }
    }

    fn data(&self, span: Span, e: impl std::fmt::Display) -> BuildError {
        self.at(span, e.to_string())
    }

    /// Creates entries from the top of `stack` until `budget` entries are made or the stack
    /// is empty; returns how many were made.
    fn step(&self, g: &mut WriteGraph<'_, '_>, stack: &mut Vec<Fill<'s>>, budget: u64) -> Result<u64, BuildError> {
        let mut made = 0u64;
        while made < budget {
            let Some(mut fill) = stack.pop() else { break };
            if fill.next >= fill.end {
                continue;
            }
            let index = fill.next;
            fill.next += 1;
            if fill.next < fill.end {
                stack.push(fill);
            }
            let key = index.to_string();
            let entry = match &self.schema.property(fill.property).kind {
                PropertyKind::Matrix { target, .. } => {
                    let t = g
                        .graph()
                        .resolve(fill.owner, target, std::slice::from_ref(&key))
                        .map_err(|e| self.data(fill.span, format!("matrix entry {key}: {e} (a matrix of N entries uses the target entries \"0\" … \"N-1\")")))?;
                    g.add_entry(fill.owner, fill.property, EntryKey::Target(t.id))
                }
                _ => g.add_entry(fill.owner, fill.property, EntryKey::Text(&key)),
            }
            .map_err(|e| self.data(fill.span, e))?;
            let stream = mix(fill.stream, fill.property, index);
            let mut rng = SplitMix::new(stream);
            let mut nested = Vec::new();
            self.fill(g, entry, fill.items, &mut rng, stream, &mut nested)?;
            g.require_references(entry).map_err(|e| self.data(fill.span, e))?;
            nested.reverse();
            stack.extend(nested);
            made += 1;
        }
        Ok(made)
    }

    /// Sets the values of `node` (an existing node) and chooses its states; its collections
    /// become fills in `fills`, in the order written.
    fn fill(
        &self,
        g: &mut WriteGraph<'_, '_>,
        node: NodeRef,
        items: &'s [InitItem],
        rng: &mut SplitMix,
        stream: u64,
        fills: &mut Vec<Fill<'s>>,
    ) -> Result<(), BuildError> {
        for item in items {
            let p = item.property;
            match &item.value {
                InitValue::Default => {}
                InitValue::Number(n) => {
                    g.set_number(node, p, *n).map_err(|e| self.data(item.span, e))?;
                }
                InitValue::RandomNumber(bound) => {
                    let n = rng.below(*bound) as i64;
                    g.set_number(node, p, n).map_err(|e| self.data(item.span, e))?;
                }
                InitValue::OneOfNumbers(values) => {
                    let n = values[rng.below(values.len() as u64) as usize];
                    g.set_number(node, p, n).map_err(|e| self.data(item.span, e))?;
                }
                InitValue::Text(t) => {
                    g.set_text(node, p, t).map_err(|e| self.data(item.span, e))?;
                }
                InitValue::OneOfTexts(values) => {
                    let t = &values[rng.below(values.len() as u64) as usize];
                    g.set_text(node, p, t).map_err(|e| self.data(item.span, e))?;
                }
                InitValue::ReferenceKey(key) => self.set_reference(g, node, item, key)?,
                InitValue::RandomReference(bound) => {
                    let dict = key_dictionaries(self.schema, p)[0];
                    let nested = is_nested(self.schema, dict);
                    let n = match bound {
                        Some(n) => self.scale.apply(*n, nested),
                        None => match self.sizes.get(&dict) {
                            Some(&size) if size > 0 => self.scale.apply(size, nested),
                            _ => {
                                return Err(self.at(
                                    item.span,
                                    format!(
                                        "`reference random` picks among the initialised entries of '{}', but \
                                         `initialize` gives it none; write `random N`",
                                        self.schema.property(dict).name
                                    ),
                                ))
                            }
                        },
                    };
                    let key = rng.below(n).to_string();
                    self.set_reference(g, node, item, &[key])?;
                }
                InitValue::Group(items) => {
                    let group = g.graph().group(node, p);
                    self.fill(g, group, items, rng, stream, fills)?;
                }
                InitValue::Collection { size, .. } if *size == 0 => {}
                InitValue::Collection { size, items } => {
                    let end = self.scale.apply(*size, is_nested(self.schema, p));
                    fills.push(Fill { owner: node, property: p, items, span: item.span, next: 0, end, stream });
                }
                InitValue::States(choices) => {
                    let total: u64 = choices.iter().map(|c| c.weight).sum();
                    let mut pick = rng.below(total);
                    let choice = choices
                        .iter()
                        .find(|c| {
                            if pick < c.weight {
                                true
                            } else {
                                pick -= c.weight;
                                false
                            }
                        })
                        .expect("a pick below the total weight falls in one state");
                    let (current, child) = g.graph().state(node, p).map_err(|e| self.data(item.span, e))?;
                    let child = if current == choice.state {
                        child
                    } else {
                        g.switch_state(node, p, choice.state).map_err(|e| self.data(choice.span, e))?
                    };
                    if !choice.items.is_empty() {
                        if child.id.is_none() {
                            return Err(self.at(choice.span, "this state has no properties to initialise"));
                        }
                        self.fill(g, child, &choice.items, rng, stream ^ u64::from(choice.state + 1) << 48, fills)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn set_reference(
        &self,
        g: &mut WriteGraph<'_, '_>,
        node: NodeRef,
        item: &InitItem,
        key: &[String],
    ) -> Result<(), BuildError> {
        let p = item.property;
        let PropertyKind::Reference { target } = &self.schema.property(p).kind else {
            unreachable!("the parser gives reference values to references only")
        };
        let t = g.graph().resolve(node, target, key).map_err(|e| {
            self.at(
                item.span,
                format!(
                    "reference '{}': {e} (the target must be initialised earlier in `initialize`, with \
                     enough entries)",
                    self.schema.property(p).name
                ),
            )
        })?;
        g.set_reference(node, p, t.id).map_err(|e| self.data(item.span, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_the_published_generator_and_below_is_uniform() {
        // The reference SplitMix64's first outputs for seed 0: datasets do not change with
        // library versions.
        let mut g = SplitMix::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut g = SplitMix::new(42);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[g.below(10) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_500..10_500).contains(&c)), "{counts:?}");
        assert_eq!(SplitMix::new(1).below(1), 0);
        let (two, three) = (PropertyId::new(2), PropertyId::new(3));
        assert_ne!(mix(1, two, 3), mix(1, two, 4));
        assert_ne!(mix(1, two, 3), mix(1, three, 3));
    }
}
