//! Change sets: what one committed instruction (or transaction) changed, in order, with old
//! and new values. Subscriptions, derived properties, indexes and the change log read these.

use std::fmt;

use espalier_schema::PropertyId;

use crate::record::NodeId;
use serde::{Deserialize, Serialize};

/// One step from the root towards a node, in instruction notation when displayed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathStep {
    /// `+ 'g'`
    Group(String),
    /// `. 'd' : "k"` (or `% 'm' : ["a", "b"]` for a matrix; `matrix` tells which)
    Entry {
        /// The dictionary's or matrix's name.
        collection: String,
        /// The entry's key: one text for a dictionary, the target's key for a matrix.
        key: Vec<String>,
        /// Whether the collection is a matrix (`%`) rather than a dictionary (`.`).
        matrix: bool,
    },
    /// `? 'sg' * 's'`
    State {
        /// The stategroup's name.
        stategroup: String,
        /// The state's name.
        state: String,
    },
}

/// The path of a node from the root. Displays as an instruction node path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodePath(pub Vec<PathStep>);

fn quote_name(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    write!(f, "'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Writes a key as the instruction language does: `"k"` or `["a", "b"]`.
pub fn fmt_key(f: &mut fmt::Formatter<'_>, key: &[String]) -> fmt::Result {
    let one = |f: &mut fmt::Formatter<'_>, k: &str| write!(f, "{}", serde_json::Value::from(k));
    match key {
        [single] => one(f, single),
        many => {
            write!(f, "[")?;
            for (i, k) in many.iter().enumerate() {
                if i > 0 {
                    write!(f, ", ")?;
                }
                one(f, k)?;
            }
            write!(f, "]")
        }
    }
}

impl fmt::Display for NodePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "root");
        }
        for (i, step) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, " ")?;
            }
            match step {
                PathStep::Group(g) => {
                    write!(f, "+ ")?;
                    quote_name(f, g)?;
                }
                PathStep::Entry { collection, key, matrix } => {
                    write!(f, "{} ", if *matrix { '%' } else { '.' })?;
                    quote_name(f, collection)?;
                    write!(f, " : ")?;
                    fmt_key(f, key)?;
                }
                PathStep::State { stategroup, state } => {
                    write!(f, "? ")?;
                    quote_name(f, stategroup)?;
                    write!(f, " * ")?;
                    quote_name(f, state)?;
                }
            }
        }
        Ok(())
    }
}

/// One change to the graph, with the old and new values where there are any. `node` is
/// the path of the node that holds the changed property.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "change")]
pub enum Change {
    /// A number property was set.
    Number {
        /// The node holding the property.
        node: NodePath,
        /// The property's name.
        property: String,
        /// The value before.
        old: i64,
        /// The value after.
        new: i64,
    },
    /// A text property was set.
    Text {
        /// The node holding the property.
        node: NodePath,
        /// The property's name.
        property: String,
        /// The text before.
        old: String,
        /// The text after.
        new: String,
    },
    /// `old` is `None` when the reference is set on a node created by the same instruction.
    Reference {
        /// The node holding the reference.
        node: NodePath,
        /// The reference's name.
        property: String,
        /// The old target's key, as the reference spells it.
        old: Option<Vec<String>>,
        /// The new target's key, as the reference spells it.
        new: Vec<String>,
    },
    /// An entry was added to a dictionary or matrix (with a default node).
    EntryAdded {
        /// The collection's owner.
        node: NodePath,
        /// The collection's name.
        collection: String,
        /// The new entry's key: one text for a dictionary, the target's key for a matrix.
        key: Vec<String>,
    },
    /// An entry was removed from a dictionary or matrix, with everything under it.
    EntryRemoved {
        /// The collection's owner.
        node: NodePath,
        /// The collection's name.
        collection: String,
        /// The removed entry's key: one text for a dictionary, the target's key for a matrix.
        key: Vec<String>,
    },
    /// A stategroup was switched to another state (with a default node).
    StateSwitched {
        /// The node holding the stategroup.
        node: NodePath,
        /// The stategroup's name.
        stategroup: String,
        /// The state it left.
        old: String,
        /// The state it entered.
        new: String,
    },
}

/// Everything one committed request changed, stamped with its version (commit order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeSet {
    /// The request's version: its place in commit order.
    pub version: u64,
    /// The changes, in the order they were made. Empty, with `count` saying how many there
    /// were, when the request's changes were only counted
    /// (`WriteGraph::set_spell_changes`): nobody was to read them.
    pub changes: Vec<Change>,
    /// How many changes the request made: `changes.len()` when they were spelt out. Read in
    /// process (a reply's change count), so never written out.
    #[serde(skip)]
    pub count: usize,
    /// The records the request touched (see [`Touched`]); read in process right after the
    /// commit by the incremental queries, so never written out.
    #[serde(skip)]
    pub touched: Touched,
    /// How the commit changed each registered query's matches (only on the last change set
    /// of a commit, which may hold several requests; only non-empty differences).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diffs: Vec<QueryDiff>,
}

/// Most record ids one request lists as touched; past it the request counts as touching
/// everything (a bulk load), and incremental queries run again whole.
pub const MAX_TOUCHED: usize = 1_000_000;

/// What a request changed, by record: every record created or deleted; every property
/// written (the record and the property: its slot); every collection that gained or lost an
/// entry (its owner, the collection, and for a matrix the entry's target); and every target
/// whose incoming links of a reference or matrix changed. A record in none of the lists reads
/// the same before and after the request (its slots, its entries and the links into it); a
/// record listed only by some of its slots reads the same in every other slot; a listed
/// collection changed only by the entries listed — the invariant incremental queries rest on.
/// An entry count is written without being listed as a slot: no query reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touched {
    /// Created or deleted; sorted, without repeats.
    pub records: Vec<NodeId>,
    /// (record, property) whose slot was written; sorted, without repeats.
    pub slots: Vec<(NodeId, PropertyId)>,
    /// (owner record, collection property, target record of a matrix entry or 0 for a
    /// dictionary), sorted, without repeats.
    pub entries: Vec<(NodeId, PropertyId, NodeId)>,
    /// (target record, property), sorted, without repeats.
    pub links: Vec<(NodeId, PropertyId)>,
    /// More than [`MAX_TOUCHED`] of any: assume everything changed.
    pub all: bool,
}

impl Touched {
    /// A set that counts as touching everything (`all` set): for a bulk load, or when what
    /// requests touch is not tracked.
    pub fn all() -> Touched {
        Touched { all: true, ..Touched::default() }
    }

    /// All of them: what a commit of several requests touched.
    pub fn union<'a>(sets: impl IntoIterator<Item = &'a Touched>) -> Touched {
        let mut out = Touched::default();
        for t in sets {
            if t.all {
                return Touched::all();
            }
            out.records.extend_from_slice(&t.records);
            out.slots.extend_from_slice(&t.slots);
            out.entries.extend_from_slice(&t.entries);
            out.links.extend_from_slice(&t.links);
            if out.longest() > MAX_TOUCHED {
                return Touched::all();
            }
        }
        out.normalize();
        out
    }

    /// The length of the longest list.
    fn longest(&self) -> usize {
        self.records.len().max(self.slots.len()).max(self.entries.len()).max(self.links.len())
    }

    /// Sorts each list and drops repeats.
    pub fn normalize(&mut self) {
        self.records.sort_unstable();
        self.records.dedup();
        self.slots.sort_unstable();
        self.slots.dedup();
        self.entries.sort_unstable();
        self.entries.dedup();
        self.links.sort_unstable();
        self.links.dedup();
    }
}

/// One commit's effect on a registered query's rows: rows that left and rows that came
/// (a match whose row values changed leaves with its old row and comes with its new one).
/// `error`: the query could not be kept up to date and is no longer registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryDiff {
    /// The id of the registered query.
    pub query: u64,
    /// Rows that left the query's matches.
    pub removed: Vec<Vec<serde_json::Value>>,
    /// Rows that came into the query's matches.
    pub added: Vec<Vec<serde_json::Value>>,
    /// Why the query could not be kept up to date (it is then no longer registered); `None`
    /// when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
