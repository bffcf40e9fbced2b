//! The compiled schema: node types, properties with their byte offsets in a node record,
//! resolved reference paths, commands and indexes. Built by [`crate::compile`]; everything
//! above this layer reads it and never re-parses the schema text.
//!
//! Storage model (see ARCHITECTURE.md): a *record* is the fixed-size byte layout of one stored
//! node. Root, dictionary entries, matrix entries and non-empty states each get a record;
//! a group's properties live inline in the record of the node that holds the group.

use std::collections::HashMap;

use crate::diagnostic::Span;

/// A schema id: a `u32` newtype, stored and serialized as its number. Debug and Display show
/// the bare number, as the ids printed before they were types (in `espalier check`'s reports
/// and errors).
macro_rules! id {
    ($(#[$doc:meta])* $name:ident, $vec:literal, $held:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(u32);

        impl $name {
            #[doc = concat!("The id with number `n` (as ", $held, " hold it).")]
            pub const fn new(n: u32) -> $name {
                $name(n)
            }

            #[doc = concat!("The number, as ", $held, " hold it.")]
            pub const fn get(self) -> u32 {
                self.0
            }

            #[doc = concat!("The position in [`Schema::", $vec, "`].")]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id!(
    /// Index of a node type in [`Schema::types`]; also the number of its table and what a
    /// record header holds (as [`NodeTypeId::get`]).
    NodeTypeId,
    "types",
    "tables and record headers"
);

id!(
    /// Index of a property in [`Schema::properties`]; also the number of its key indexes and
    /// what a record header holds as the parent property (as [`PropertyId::get`]).
    PropertyId,
    "properties",
    "key indexes and record headers"
);

/// Position of a state in its stategroup's `states`, in declaration order.
pub type StateIndex = u32;

/// The root node type always has this id.
pub const ROOT: NodeTypeId = NodeTypeId(0);

/// Byte sizes of the fixed slots in a record.
pub mod slot {
    /// `number`: i64, little endian.
    pub const NUMBER: u32 = 8;
    /// `text`: the u64 id of an interned string.
    pub const TEXT: u32 = 8;
    /// `reference`: the u64 node id of the target entry.
    pub const REFERENCE: u32 = 8;
    /// `stategroup`: u64 state index, then u64 node id of the state's record (0 if it has none).
    pub const STATEGROUP: u32 = 16;
    /// `dictionary` / `matrix`: u64 entry count.
    pub const COLLECTION: u32 = 8;
}

/// A compiled schema: every node type and property of the model, its commands and indexes.
#[derive(Debug, Clone)]
pub struct Schema {
    /// The schema text this was compiled from (kept for dumps and error rendering).
    pub source: String,
    /// Indexed by `NodeTypeId`; `types[ROOT]` is the root.
    pub types: Vec<NodeType>,
    /// Indexed by `PropertyId`.
    pub properties: Vec<Property>,
    /// The declared commands, in declaration order.
    pub commands: Vec<CommandDecl>,
    /// The declared indexes, in declaration order; an index's number is its position here.
    pub indexes: Vec<IndexDecl>,
    /// The properties with a [`Derivation`], in declaration order.
    pub derived_ids: Vec<PropertyId>,
}

/// Where a node type's data is stored (decided by the record layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// Has a record of its own of `size` bytes (root, entries, states with properties).
    Record {
        /// The record's size in bytes.
        size: u32,
    },
    /// A group: its properties live in the record of `host`.
    Inline {
        /// The node type whose record holds the group's properties.
        host: NodeTypeId,
    },
    /// A state with no properties at all: nothing is stored.
    Empty,
}

/// How a node type hangs under its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentLink {
    /// The root node type.
    Root,
    /// The node of a group property.
    Group {
        /// The group property.
        property: PropertyId,
    },
    /// The node of each entry of a dictionary.
    DictionaryEntry {
        /// The dictionary property.
        property: PropertyId,
    },
    /// The node of each entry of a matrix.
    MatrixEntry {
        /// The matrix property.
        property: PropertyId,
    },
    /// The node of one state of a stategroup.
    State {
        /// The stategroup property.
        property: PropertyId,
        /// The state's index in the stategroup.
        state: StateIndex,
    },
}

/// A node type: the properties one kind of node has, and where it hangs in the model.
#[derive(Debug, Clone)]
pub struct NodeType {
    /// This node type's id (its index in [`Schema::types`]).
    pub id: NodeTypeId,
    /// How it hangs under its parent.
    pub parent: ParentLink,
    /// Where its data is stored.
    pub storage: Storage,
    /// In declaration order.
    pub properties: Vec<PropertyId>,
    /// Its properties by name.
    pub by_name: HashMap<String, PropertyId>,
    /// Where the node's `( … )` starts in the source.
    pub span: Span,
}

/// A property declared in a node type, with the place of its slot in a record.
#[derive(Debug, Clone)]
pub struct Property {
    /// This property's id (its index in [`Schema::properties`]).
    pub id: PropertyId,
    /// The property's name, unique in its node type.
    pub name: String,
    /// The node type the property is declared in (may be an inline group).
    pub owner: NodeTypeId,
    /// The node type whose record holds the property's slot (the owner, or the group's host).
    pub host: NodeTypeId,
    /// Byte offset of the slot in the host's record; groups have size 0 and the offset of
    /// their first property.
    pub offset: u32,
    /// What kind of property it is, with its node type or target where it has one.
    pub kind: PropertyKind,
    /// Set for a derived property: its value is computed by the data layer from each
    /// change, never written by an instruction. A derived aggregate is a `Number`, a
    /// derived condition a `StateGroup` with the empty states 'No' and 'Yes'.
    pub derived: Option<Derivation>,
    /// Where the property's name is in the source.
    pub span: Span,
}

/// How a derived property's value follows from other data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Derivation {
    /// `count ( over )`, `sum ( over ) 'value'`, `min …`, `max …`: over the members of a
    /// collection of the same node, or over the nodes whose reference points at it. `value`
    /// is a stored number of the member (in the member's record); an empty set gives 0.
    Aggregate {
        /// Which aggregate it computes.
        function: Aggregate,
        /// The members it goes over.
        over: Over,
        /// The members' number property that `sum`, `min` or `max` goes over; `None` for `count`.
        value: Option<PropertyId>,
    },
    /// `condition ( 'number' op N )`: state 'Yes' (index 1) when the number of the same node
    /// compares so with N, else 'No' (index 0).
    Condition {
        /// The number property of the same node that is compared.
        number: PropertyId,
        /// The comparison.
        op: CompareOp,
        /// The constant N it is compared with.
        value: i64,
    },
}

/// The function of a derived aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// `count`: the number of members.
    Count,
    /// `sum`: the sum of the members' values.
    Sum,
    /// `min`: the smallest of the members' values.
    Min,
    /// `max`: the largest of the members' values.
    Max,
}

/// The members a derived aggregate goes over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// `. 'd'` / `% 'm'`: the entries of this dictionary or matrix of the same node.
    Collection(PropertyId),
    /// `< 'r'`: the nodes whose reference `r` points at this entry.
    Referrers(PropertyId),
}

/// The comparison of a derived condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CompareOp {
    /// Whether `a` compares so with `b`.
    pub fn holds<T: Ord + ?Sized>(self, a: &T, b: &T) -> bool {
        match self {
            CompareOp::Eq => a == b,
            CompareOp::Ne => a != b,
            CompareOp::Lt => a < b,
            CompareOp::Le => a <= b,
            CompareOp::Gt => a > b,
            CompareOp::Ge => a >= b,
        }
    }

    /// The operator as written in the schema language.
    pub fn symbol(self) -> &'static str {
        match self {
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        }
    }
}

/// The kind of a property, with what the kind needs: a node type, a target or states.
#[derive(Debug, Clone)]
pub enum PropertyKind {
    /// `number`: an i64.
    Number,
    /// `text`: a string.
    Text,
    /// `group`: one node whose properties live in the record of the node that holds it.
    Group {
        /// The group's node type.
        node: NodeTypeId,
    },
    /// `dictionary`: entries keyed by text, each with a node.
    Dictionary {
        /// The node type of its entries.
        node: NodeTypeId,
    },
    /// Keys are references into `target`; each entry has a node of type `node`.
    Matrix {
        /// The node type of its entries.
        node: NodeTypeId,
        /// The dictionary whose entries are the keys, and the path to it.
        target: ReferenceTarget,
    },
    /// `reference`: points at an entry of a dictionary.
    Reference {
        /// The dictionary whose entries are the targets, and the path to it.
        target: ReferenceTarget,
    },
    /// `stategroup`: is in exactly one of its states.
    StateGroup {
        /// The states, in declaration order (indexed by [`StateIndex`]).
        states: Vec<State>,
    },
}

/// One state of a stategroup.
#[derive(Debug, Clone)]
pub struct State {
    /// The state's name.
    pub name: String,
    /// The node type of the state's node.
    pub node: NodeTypeId,
    /// Where the state is declared in the source.
    pub span: Span,
}

/// A resolved path expression `( up-steps down-steps )` of a reference or matrix.
///
/// Evaluated from the node that declares the property (its `owner`): first every `up` step,
/// then every `down` step. The last down step is always a `Dictionary` step: the dictionary
/// whose entries are the targets. Every `Dictionary` step contributes one component to the
/// key, so a reference into a dictionary nested in another has a compound key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceTarget {
    /// The `^` steps, in order.
    pub up: Vec<UpStep>,
    /// The steps down from where the up steps end, in order.
    pub down: Vec<DownStep>,
    /// The targeted dictionary property (the last down step).
    pub dictionary: PropertyId,
    /// The node type of its entries.
    pub entry_type: NodeTypeId,
    /// Number of key components (= number of `Dictionary` down steps).
    pub key_arity: usize,
    /// Where the path is in the source.
    pub span: Span,
}

/// One `^` step: leaves the current node for the node that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpStep {
    /// `+^` — out of a group's node.
    Group,
    /// `.^` — out of a dictionary entry's node.
    DictionaryEntry,
    /// `%^` — out of a matrix entry's node.
    MatrixEntry,
    /// `?^` (also written `*^`) — out of a state's node, to the node holding the stategroup.
    State,
}

/// One step down in a reference path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownStep {
    /// `+ 'g'`
    Group(PropertyId),
    /// `. 'd'` — consumes one key component.
    Dictionary(PropertyId),
    /// `? 'sg' * 's'` — only valid while the stategroup is in that state.
    State {
        /// The stategroup property.
        stategroup: PropertyId,
        /// The state the path requires.
        state: StateIndex,
    },
}

/// The kind of a command parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// `number`: an i64.
    Number,
    /// `text`: a string.
    Text,
}

/// `command 'Name' ( 'p' -> number … ) ( instructions )`.
///
/// The body is instruction text; the instruction layer parses and checks it when a database
/// opens (and `espalier schema check` does the same), because instructions live above this layer.
#[derive(Debug, Clone)]
pub struct CommandDecl {
    /// The command's name.
    pub name: String,
    /// The parameters, in declaration order, with their kinds.
    pub params: Vec<(String, ParamKind)>,
    /// The text between the body's parentheses.
    pub body: String,
    /// Where `body` starts in the schema source, so body errors can point into the schema.
    pub body_span: Span,
    /// Where the command is declared in the source.
    pub span: Span,
}

/// How an index is queried; decides which property kinds it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// `equality`: lookups by exact value, on a number, text or stategroup; the only kind
    /// that can be `unique`.
    Equality,
    /// `range`: lookups by bounds or by prefix, on a number or text.
    Range,
    /// `prefix`: lookups by a text prefix, on a text.
    Prefix,
}

/// `index 'Name' ( collection-path ) 'property' kind [unique]`.
#[derive(Debug, Clone)]
pub struct IndexDecl {
    /// The index's name.
    pub name: String,
    /// The dictionary or matrix whose entries are indexed (every instance of it).
    pub collection: PropertyId,
    /// A number, text or stategroup property of the entry node (possibly inside groups).
    pub property: PropertyId,
    /// How the index is queried.
    pub kind: IndexKind,
    /// Whether no two indexed entries may share a value (only `equality` indexes can be).
    pub unique: bool,
    /// Where the index is declared in the source.
    pub span: Span,
}

impl Schema {
    /// The root node type.
    pub fn root(&self) -> &NodeType {
        &self.types[ROOT.index()]
    }

    /// The node type with id `id`.
    pub fn node_type(&self, id: NodeTypeId) -> &NodeType {
        &self.types[id.index()]
    }

    /// The property with id `id`.
    pub fn property(&self, id: PropertyId) -> &Property {
        &self.properties[id.index()]
    }

    /// The property called `name` on node type `node`.
    pub fn find(&self, node: NodeTypeId, name: &str) -> Option<&Property> {
        self.node_type(node).by_name.get(name).map(|&p| self.property(p))
    }

    /// The node type whose record holds `node`'s data, or `None` for an empty state.
    pub fn record_of(&self, node: NodeTypeId) -> Option<NodeTypeId> {
        match self.node_type(node).storage {
            Storage::Record { .. } => Some(node),
            Storage::Inline { host } => Some(host),
            Storage::Empty => None,
        }
    }

    /// Record size in bytes of a node type that has its own record.
    pub fn record_size(&self, node: NodeTypeId) -> u32 {
        match self.node_type(node).storage {
            Storage::Record { size } => size,
            _ => 0,
        }
    }

    /// The command called `name`.
    pub fn command(&self, name: &str) -> Option<&CommandDecl> {
        self.commands.iter().find(|c| c.name == name)
    }

    /// The indexes (number in `indexes`, declaration) over the entries of `collection`.
    pub fn indexes_of_collection(&self, collection: PropertyId) -> impl Iterator<Item = (u32, &IndexDecl)> {
        self.indexes.iter().enumerate().filter(move |(_, i)| i.collection == collection).map(|(n, i)| (n as u32, i))
    }

    /// Derived properties (id, derivation) — few, so a scan is cheaper than a map.
    pub fn derived(&self) -> impl Iterator<Item = (PropertyId, &Derivation)> {
        self.derived_ids.iter().filter_map(move |&p| self.property(p).derived.as_ref().map(|d| (p, d)))
    }

    /// The derived aggregates (id, function, value) that go over `over`.
    pub fn aggregates_over(
        &self,
        over: Over,
    ) -> impl Iterator<Item = (PropertyId, Aggregate, Option<PropertyId>)> + '_ {
        self.derived().filter_map(move |(p, d)| match *d {
            Derivation::Aggregate { function, over: o, value } if o == over => Some((p, function, value)),
            _ => None,
        })
    }

    /// Whether any derived aggregate goes over `over` (its members' joins and leaves must
    /// move it).
    pub fn is_aggregated(&self, over: Over) -> bool {
        self.aggregates_over(over).next().is_some()
    }

    /// The indexes (number in `indexes`, declaration) whose value is `property`.
    pub fn indexes_of_property(&self, property: PropertyId) -> impl Iterator<Item = (u32, &IndexDecl)> {
        self.indexes.iter().enumerate().filter(move |(_, i)| i.property == property).map(|(n, i)| (n as u32, i))
    }
}

impl PropertyKind {
    /// The word used for this kind in the schema language.
    pub fn keyword(&self) -> &'static str {
        match self {
            PropertyKind::Number => "number",
            PropertyKind::Text => "text",
            PropertyKind::Group { .. } => "group",
            PropertyKind::Dictionary { .. } => "dictionary",
            PropertyKind::Matrix { .. } => "matrix",
            PropertyKind::Reference { .. } => "reference",
            PropertyKind::StateGroup { .. } => "stategroup",
        }
    }

    /// Bytes the property occupies in its host record (groups: 0, their properties count).
    pub fn slot_size(&self) -> u32 {
        match self {
            PropertyKind::Number => slot::NUMBER,
            PropertyKind::Text => slot::TEXT,
            PropertyKind::Reference { .. } => slot::REFERENCE,
            PropertyKind::StateGroup { .. } => slot::STATEGROUP,
            PropertyKind::Dictionary { .. } | PropertyKind::Matrix { .. } => slot::COLLECTION,
            PropertyKind::Group { .. } => 0,
        }
    }
}
