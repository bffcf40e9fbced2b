//! The benchmark language of the thesis (§6.1) and the runner of benchmark files (suites B1–B7
//! live in `benchmarks/`; the language is documented in `docs/benchmark-language.md`).
//!
//! A benchmark file holds an application model (`root ( … )`, the schema notation), an
//! `initialize ( … )` part that says how to fill it, and one or more `repeat N ( … )` parts with
//! comma-separated instructions that may use `index` and `random`.
//!
//! The library API, in the order a caller uses it:
//!
//! - [`parse_suite`]`(source, name) -> Result<`[`Suite`]`, `[`SuiteError`]`>` parses and checks a
//!   file (model, initialisation and every instruction against the model); errors carry
//!   line:column and render with a caret. [`load_suite`] reads a file first.
//! - [`build_dataset`]`(&engine, &suite, &`[`BuildOptions`]`, &progress) -> Result<`[`DatasetStats`]`, `[`BuildError`]`>`
//!   fills an empty database (made from `suite.model`) in batched write requests. The data is a
//!   function of the suite, the seed and the [`Scale`] only: every node draws its random values
//!   from its own stream (derived from the seed and its place in the tree), so batch sizes and
//!   machines do not change it. Entry keys are `"0"` … `"N-1"`, as in the thesis.
//!   [`create_dataset`] makes the database directory and builds it in one call.
//! - [`run_suite`]`(&suite, &`[`RunOptions`]`) -> Result<`[`SuiteRun`]`, `[`RunError`]`>` builds the dataset in a
//!   temporary directory and measures every instruction hot (after warm-up) and, if asked, cold
//!   (page cache dropped before every sample).
//! - [`report`]: statistics per instruction, the JSON and Markdown reports, `--compare`;
//!   [`chart`]: box-plot SVGs like the thesis's figures 7.1–7.4.
//! - For peers that replay a suite on another system: [`draws`] gives how an instruction's
//!   `index` and `random` values are drawn at a scale (each stands as a `$parameter` in its
//!   checked plan; [`Draws::fill`] sets them), and [`benchmark_rng`] the generator they are
//!   drawn from.
//!
//! **Scaling.** [`Scale::outer`] multiplies the sizes of the outermost collections (those not
//! inside an entry of another collection), so the data grows linearly with it; B7 is B6 at a
//! larger `outer`. [`Scale::nested`] multiplies the sizes of nested collections (for quick
//! runs). A key bound (`random N` used as a key, in `initialize` or in an instruction) scales
//! with the collection whose key it is; `random` without a bound on an entry step means "one of
//! the initialised keys" and becomes `random <scaled size>`.
//! [`fit_benchmarks`] keeps the rest consistent: an `index` that keys existing entries
//! ("once per entry") runs at most as many times as the scaled collection has entries, and a
//! literal key the scaled data lacks refuses the benchmark before anything is built.

mod dataset;
mod fit;
pub mod parse;
pub mod report;
mod run;
pub mod sys;
mod values;

pub mod chart;

pub use dataset::{build_dataset, create_dataset, mix, BuildError, BuildOptions, DatasetStats, SplitMix};
pub use fit::{fit_benchmarks, Fitted};
pub use parse::{load_suite, parse_suite, SuiteError};
pub use run::{
    benchmark_rng, run_suite, scaled_repeat, ColdOptions, InstructionRun, Mode, RunError, RunOptions, SuiteRun,
};
pub use values::{draws, BenchValue, BenchWord, Draw, Draws};

use espalier_instruction::plan::Plan;
use espalier_schema::{ParentLink, PropertyId, PropertyKind, Schema, Span, StateIndex};

/// One benchmark file: the model, its initialisation and its benchmarks.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The name given to [`parse_suite`] (the file's stem for files).
    pub name: String,
    /// The whole file; every span in the suite points into it.
    pub source: String,
    /// The application model: the file up to `initialize` (comments included), as stored in
    /// the database.
    pub model: String,
    /// The model checked into a schema.
    pub schema: Schema,
    /// The `initialize ( … )` items of the root node.
    pub init: Vec<InitItem>,
    /// The benchmarks, in file order.
    pub benchmarks: Vec<Benchmark>,
}

/// `'name' -> …` in `initialize`.
#[derive(Debug, Clone, PartialEq)]
pub struct InitItem {
    /// The property being initialised.
    pub property: PropertyId,
    /// Its value.
    pub value: InitValue,
    /// Where the item is in the file.
    pub span: Span,
}

/// How one property is initialised.
#[derive(Debug, Clone, PartialEq)]
pub enum InitValue {
    /// `'n' -> number` without a value: the default (0, "").
    Default,
    /// `'n' -> number N`: this number.
    Number(i64),
    /// `number random N`: uniform in 0 … N-1.
    RandomNumber(u64),
    /// `random ( 1 5 9 )`: one of these, uniformly.
    OneOfNumbers(Vec<i64>),
    /// `'t' -> text "x"`: this text.
    Text(String),
    /// `random ( 'a' 'b' )`: one of these, uniformly.
    OneOfTexts(Vec<String>),
    /// `reference "key"` (one component per dictionary on the reference's path).
    ReferenceKey(Vec<String>),
    /// `reference random N` (key uniform in 0 … N-1, scaled with the target), or `reference
    /// random` (any initialised entry of the target).
    RandomReference(Option<u64>),
    /// A group: the items of its node.
    Group(Vec<InitItem>),
    /// `dictionary N ( … )` / `matrix N ( … )`: entries `"0"` … `"N-1"` (a matrix entry's key is
    /// the target entry with that key).
    Collection {
        /// The number of entries, before scaling.
        size: u64,
        /// The items of each entry.
        items: Vec<InitItem>,
    },
    /// `stategroup 'S' ( … )` (one choice of weight 1) or `stategroup ( 'S' -> W ( … ) … )`.
    States(Vec<StateInit>),
}

/// One state of a stategroup's initialisation and how often it is chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct StateInit {
    /// The state.
    pub state: StateIndex,
    /// Its weight: it is chosen with probability weight / (sum of the weights).
    pub weight: u64,
    /// The items of the state's node.
    pub items: Vec<InitItem>,
    /// Where the state is in the file.
    pub span: Span,
}

/// `[benchmark 'name'] repeat N [expect error 'code' | allow error 'code' …] ( instructions )`.
#[derive(Debug, Clone)]
pub struct Benchmark {
    /// The benchmark's name.
    pub name: String,
    /// Repetitions as written (before `--repeat-scale`).
    pub repeat: u64,
    /// `expect error 'code'`: every run of every instruction must fail with this code.
    pub expect: Option<String>,
    /// `allow error 'code'`: runs may also fail with these codes without being unexpected.
    pub allow: Vec<String>,
    /// The instructions of the `repeat` body, in order.
    pub instructions: Vec<BenchInstruction>,
    /// Where the benchmark is in the file.
    pub span: Span,
}

/// One instruction of a `repeat` body, checked against the model.
#[derive(Debug, Clone)]
pub struct BenchInstruction {
    /// The benchmark's name, or `name[i]` (1-based) when the body has several instructions.
    pub name: String,
    /// The instruction as written.
    pub text: String,
    /// Checked once, with a `$parameter` standing for each `index` and `random`.
    pub plan: Plan,
    /// The `index` and `random` values written in it, by the parameter standing for each.
    pub values: Vec<BenchValue>,
    /// Where the instruction is in the file.
    pub span: Span,
}

/// Size multipliers; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scale {
    /// Outermost collections (and key bounds into them).
    pub outer: f64,
    /// Collections inside entries of other collections (and key bounds into them).
    pub nested: f64,
}

impl Default for Scale {
    fn default() -> Self {
        Scale { outer: 1.0, nested: 1.0 }
    }
}

/// Most entries one collection may be given (after scaling): keeps keys and counters sane.
pub const MAX_COLLECTION_SIZE: u64 = 1 << 40;

impl Scale {
    /// `n` scaled by the factor for a collection (`nested` or not): 0 stays 0, anything else is
    /// at least 1.
    pub fn apply(&self, n: u64, nested: bool) -> u64 {
        if n == 0 {
            return 0;
        }
        let f = if nested { self.nested } else { self.outer };
        let scaled = (n as f64 * f).round();
        if scaled.is_nan() || scaled < 1.0 {
            1
        } else {
            (scaled as u64).min(MAX_COLLECTION_SIZE)
        }
    }

    /// Checks the factors: finite and positive.
    pub fn validate(&self) -> Result<(), String> {
        for (what, f) in [("scale", self.outer), ("nested scale", self.nested)] {
            if !(f.is_finite() && f > 0.0) {
                return Err(format!("the {what} must be a positive number, not {f}"));
            }
        }
        Ok(())
    }
}

/// Is collection `p` inside an entry of another collection?
pub fn is_nested(schema: &Schema, p: PropertyId) -> bool {
    let mut ty = schema.property(p).owner;
    // Every step goes to a node type declared further out, so the walk ends at the root; the
    // bound is the number of node types.
    for _ in 0..=schema.types.len() {
        ty = match schema.node_type(ty).parent {
            ParentLink::Root => return false,
            ParentLink::DictionaryEntry { .. } | ParentLink::MatrixEntry { .. } => return true,
            ParentLink::Group { property } | ParentLink::State { property, .. } => schema.property(property).owner,
        };
    }
    unreachable!("node type parents form a tree")
}

/// The dictionaries whose keys make up a key of collection or reference `p`, in order: the
/// dictionary itself, or the dictionaries on a matrix's or reference's target path.
pub fn key_dictionaries(schema: &Schema, p: PropertyId) -> Vec<PropertyId> {
    match &schema.property(p).kind {
        PropertyKind::Matrix { target, .. } | PropertyKind::Reference { target } => target
            .down
            .iter()
            .filter_map(|s| match s {
                espalier_schema::DownStep::Dictionary(d) => Some(*d),
                _ => None,
            })
            .collect(),
        _ => vec![p],
    }
}

impl Suite {
    /// The written size of every initialised collection (dictionaries and matrices), by
    /// property. A collection initialised in several places (inside different states) keeps
    /// its largest size.
    pub fn collection_sizes(&self) -> std::collections::HashMap<PropertyId, u64> {
        fn walk(items: &[InitItem], out: &mut std::collections::HashMap<PropertyId, u64>) {
            for item in items {
                match &item.value {
                    InitValue::Collection { size, items } => {
                        let e = out.entry(item.property).or_insert(0);
                        *e = (*e).max(*size);
                        walk(items, out);
                    }
                    InitValue::Group(items) => walk(items, out),
                    InitValue::States(choices) => choices.iter().for_each(|c| walk(&c.items, out)),
                    _ => {}
                }
            }
        }
        let mut out = std::collections::HashMap::new();
        walk(&self.init, &mut out);
        out
    }

    /// Expected number of entries the initialisation creates at `scale` (states count with
    /// their weights), for progress bars.
    pub fn expected_entries(&self, scale: Scale) -> f64 {
        fn walk(schema: &Schema, items: &[InitItem], scale: Scale) -> f64 {
            let mut total = 0.0;
            for item in items {
                total += match &item.value {
                    InitValue::Collection { size, items } => {
                        let n = scale.apply(*size, is_nested(schema, item.property)) as f64;
                        n * (1.0 + walk(schema, items, scale))
                    }
                    InitValue::Group(items) => walk(schema, items, scale),
                    InitValue::States(choices) => {
                        let sum: u64 = choices.iter().map(|c| c.weight).sum();
                        if sum == 0 {
                            0.0
                        } else {
                            choices.iter().map(|c| c.weight as f64 / sum as f64 * walk(schema, &c.items, scale)).sum()
                        }
                    }
                    _ => 0.0,
                };
            }
            total
        }
        walk(&self.schema, &self.init, scale)
    }

    /// The benchmark named `name`, if any.
    pub fn benchmark(&self, name: &str) -> Option<&Benchmark> {
        self.benchmarks.iter().find(|b| b.name == name)
    }
}
