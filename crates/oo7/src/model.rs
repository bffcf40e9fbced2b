//! The OO7 database as plain Rust values: what the generator makes, the loaders write into
//! Espalier and SQLite, and the tests compute expected answers from.

use serde::Serialize;

/// The sizes of an OO7 database (the paper's table 1, one module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Params {
    /// NumAtomicPerComp.
    pub atomic_per_comp: usize,
    /// NumConnPerAtomic: the fanout, 3, 6 or 9.
    pub conn_per_atomic: usize,
    /// DocumentSize, bytes.
    pub document_size: usize,
    /// Manual size, bytes.
    pub manual_size: usize,
    /// NumCompPerModule.
    pub comp_per_module: usize,
    /// NumAssmPerAssm.
    pub assm_per_assm: usize,
    /// NumAssmLevels (level 1 is the base assemblies).
    pub assm_levels: u32,
    /// NumCompPerAssm: private (and as many shared) composite parts per base assembly.
    pub comp_per_assm: usize,
}

/// The configurations: `Tiny` for tests and CI, `Small` and `Medium` as in table 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    /// Not in the paper: 50 composite parts of 10 atomic parts, four assembly levels.
    Tiny,
    /// Table 1's small: 500 composite parts of 20 atomic parts, seven assembly levels.
    Small,
    /// Table 1's medium: 500 composite parts of 200 atomic parts, seven assembly levels.
    Medium,
}

impl Size {
    /// Every configuration.
    pub const ALL: [Size; 3] = [Size::Tiny, Size::Small, Size::Medium];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Size::Tiny => "tiny",
            Size::Small => "small",
            Size::Medium => "medium",
        }
    }

    /// The size called `s`, if any.
    pub fn parse(s: &str) -> Option<Size> {
        Size::ALL.into_iter().find(|z| z.name().eq_ignore_ascii_case(s))
    }

    /// The configuration's parameters at atomic-part fanout `fanout`. Tiny is not in the
    /// paper: 50 composite parts of 10 atomic parts and four assembly levels (40 assemblies).
    pub fn params(self, fanout: usize) -> Params {
        let (atomic_per_comp, document_size, manual_size, comp_per_module, assm_levels) = match self {
            Size::Tiny => (10, 200, 1_000, 50, 4),
            Size::Small => (20, 2_000, 100_000, 500, 7),
            Size::Medium => (200, 20_000, 1_000_000, 500, 7),
        };
        Params {
            atomic_per_comp,
            conn_per_atomic: fanout,
            document_size,
            manual_size,
            comp_per_module,
            assm_per_assm: 3,
            assm_levels,
            comp_per_assm: 3,
        }
    }
}

/// One generated OO7 database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oo7 {
    /// The parameters it was generated from.
    pub params: Params,
    /// The seed it was generated from (also the base of each run's random choices).
    pub seed: u64,
    /// The one module (small and medium have one).
    pub module: Module,
    /// The design library, by id (composite part `i` is at index `i - 1`).
    pub composites: Vec<CompositePart>,
    /// One document per composite part, same order.
    pub documents: Vec<Document>,
}

/// A module: its manual and its assembly hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The `DesignObj` id, as in every class below.
    pub id: u64,
    /// The `DesignObj` type (`type` is a Rust keyword), as in every class below.
    pub kind: String,
    /// The `DesignObj` build date, as in every class below.
    pub build_date: i64,
    /// The module's manual.
    pub manual: Manual,
    /// Base assemblies first (ids 1…), then each higher level.
    pub assemblies: Vec<Assembly>,
    /// The id of the assembly at the top of the hierarchy.
    pub design_root: u64,
}

/// A module's manual: a large text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manual {
    /// Its id.
    pub id: u64,
    /// Its title.
    pub title: String,
    /// Its text (`textLen` is the text's length).
    pub text: String,
}

/// An assembly of the hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembly {
    /// The `DesignObj` id.
    pub id: u64,
    /// The `DesignObj` type.
    pub kind: String,
    /// The `DesignObj` build date.
    pub build_date: i64,
    /// Base or complex, with what it is made of.
    pub shape: Shape,
}

/// What an assembly is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A base assembly: composite part ids (distinct within each list).
    Base {
        /// The private composite parts (the ones T1 visits).
        private: Vec<u64>,
        /// The shared composite parts.
        shared: Vec<u64>,
    },
    /// A complex assembly: its sub-assemblies' ids.
    Complex {
        /// The sub-assemblies' ids.
        subs: Vec<u64>,
    },
}

/// A composite part and its graph of atomic parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompositePart {
    /// The `DesignObj` id.
    pub id: u64,
    /// The `DesignObj` type.
    pub kind: String,
    /// The `DesignObj` build date.
    pub build_date: i64,
    /// The id of the atomic part the traversals start from.
    pub root_part: u64,
    /// Its atomic parts.
    pub atoms: Vec<AtomicPart>,
}

/// An atomic part and its outgoing connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtomicPart {
    /// The `DesignObj` id.
    pub id: u64,
    /// The `DesignObj` type.
    pub kind: String,
    /// The `DesignObj` build date.
    pub build_date: i64,
    /// The x coordinate (T2 swaps it with y).
    pub x: i64,
    /// The y coordinate.
    pub y: i64,
    /// The id of the document it names, if one has that id (Q8 joins on it).
    pub doc_id: i64,
    /// Its outgoing connections.
    pub to: Vec<Connection>,
}

/// A connection to another atomic part of the same composite part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// The target atomic part's id.
    pub to: u64,
    /// The connection's own type.
    pub kind: String,
    /// The connection's length.
    pub length: i64,
}

/// A composite part's document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Its id (the composite part's).
    pub id: u64,
    /// Its title (the key, [`title`]).
    pub title: String,
    /// Its text.
    pub text: String,
    /// The id of its composite part.
    pub part: u64,
}

/// The title of composite part `id`'s document (the documents' key).
pub fn title(id: u64) -> String {
    format!("Composite Part {id:08}")
}

impl Oo7 {
    /// Atomic parts in all.
    pub fn atomic_parts(&self) -> usize {
        self.composites.iter().map(|c| c.atoms.len()).sum()
    }

    /// Connections in all.
    pub fn connections(&self) -> usize {
        self.composites.iter().flat_map(|c| &c.atoms).map(|a| a.to.len()).sum()
    }

    /// The base assemblies.
    pub fn base_assemblies(&self) -> impl Iterator<Item = (&Assembly, &[u64])> {
        self.module.assemblies.iter().filter_map(|a| match &a.shape {
            Shape::Base { private, .. } => Some((a, private.as_slice())),
            Shape::Complex { .. } => None,
        })
    }

    /// The largest atomic part id.
    pub fn max_atomic_id(&self) -> u64 {
        self.composites.iter().flat_map(|c| &c.atoms).map(|a| a.id).max().unwrap_or(0)
    }
}
