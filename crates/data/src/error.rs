use espalier_storage::tables::TablesError;

/// What can go wrong in the data layer. Paths in messages use the instruction notation.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The storage layer failed.
    #[error(transparent)]
    Tables(#[from] TablesError),
    /// Adding an entry whose key its collection already has.
    #[error("{collection} already has an entry {key}")]
    KeyExists {
        /// The collection, as a path ([`Graph::collection_path`](crate::Graph::collection_path)).
        collection: String,
        /// The key as messages show it: a text quoted, a matrix's target by its path.
        key: String,
    },
    /// Naming an entry its collection does not have (to remove it, or on a reference's path).
    #[error("{collection} has no entry {key}")]
    KeyMissing {
        /// The collection, as a path ([`Graph::collection_path`](crate::Graph::collection_path)).
        collection: String,
        /// The key as messages show it: a text quoted, a matrix's target by its path.
        key: String,
    },
    /// Switching a stategroup to the state it is in already.
    #[error("{node} ? '{stategroup}' is already in state '{state}'")]
    AlreadyInState {
        /// The node's path.
        node: String,
        /// The stategroup's name.
        stategroup: String,
        /// The state's name.
        state: String,
    },
    /// A reference's path goes through a state of a stategroup that is not the selected one.
    #[error("{node} ? '{stategroup}' is in state '{actual}', not '{expected}'")]
    StateNotSelected {
        /// The node's path.
        node: String,
        /// The stategroup's name.
        stategroup: String,
        /// The state the path goes through.
        expected: String,
        /// The state selected.
        actual: String,
    },
    /// Removing a node that something outside the removed subtree still refers to (the
    /// integrity rule).
    #[error("cannot remove {target}: {referrer} refers to it through '{property}'")]
    Referenced {
        /// The removed node, by its path.
        target: String,
        /// The path of the node that refers to it.
        referrer: String,
        /// The name of the reference or matrix it refers through.
        property: String,
    },
    /// A node's instruction ended without setting one of its references.
    #[error("reference '{property}' of {node} must be set when the node is created")]
    ReferenceUnset {
        /// The node's path.
        node: String,
        /// The reference's name.
        property: String,
    },
    /// Two entries hold one value of a `unique` index.
    #[error("index '{}' is unique, but {} and {} both have '{}' {}", .0.index, .0.first, .0.second, .0.property, .0.value)]
    NotUnique(Box<UniqueViolation>),
    /// An entry key longer than the limit ([`keys::MAX_KEY_BYTES`](crate::keys::MAX_KEY_BYTES)).
    #[error("entry key of {len} bytes is too long (the limit is {max} bytes)")]
    KeyTooLong {
        /// The key's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A request went past a bound the data layer keeps (such as [`MAX_DEFERRED`](crate::MAX_DEFERRED)).
    #[error("limit exceeded: {0}")]
    Limit(String),
    /// The stored data contradicts itself or the schema.
    #[error("the stored data is inconsistent: {0}")]
    Corrupt(String),
}

/// Two entries holding one value of a `unique` index (boxed: it is rare and large).
#[derive(Debug)]
pub struct UniqueViolation {
    /// The index's name.
    pub index: String,
    /// The indexed property's name.
    pub property: String,
    /// As the instruction language writes it.
    pub value: String,
    /// The path of one entry holding the value.
    pub first: String,
    /// The path of the other entry holding it.
    pub second: String,
}

impl DataError {
    /// True for errors caused by the request (as opposed to storage failure or corruption).
    pub fn is_user_error(&self) -> bool {
        !matches!(self, DataError::Tables(_) | DataError::Corrupt(_))
    }
}
