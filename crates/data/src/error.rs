use espalier_storage::tables::TablesError;

/// What can go wrong in the data layer. Paths in messages use the instruction notation.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error(transparent)]
    Tables(#[from] TablesError),
    #[error("{collection} already has an entry {key}")]
    KeyExists { collection: String, key: String },
    #[error("{collection} has no entry {key}")]
    KeyMissing { collection: String, key: String },
    #[error("{node} ? '{stategroup}' is already in state '{state}'")]
    AlreadyInState { node: String, stategroup: String, state: String },
    #[error("{node} ? '{stategroup}' is in state '{actual}', not '{expected}'")]
    StateNotSelected { node: String, stategroup: String, expected: String, actual: String },
    #[error("cannot remove {target}: {referrer} refers to it through '{property}'")]
    Referenced { target: String, referrer: String, property: String },
    #[error("reference '{property}' of {node} must be set when the node is created")]
    ReferenceUnset { node: String, property: String },
    #[error("index '{}' is unique, but {} and {} both have '{}' {}", .0.index, .0.first, .0.second, .0.property, .0.value)]
    NotUnique(Box<UniqueViolation>),
    #[error("entry key of {len} bytes is too long (the limit is {max} bytes)")]
    KeyTooLong { len: usize, max: usize },
    #[error("limit exceeded: {0}")]
    Limit(String),
    #[error("the stored data is inconsistent: {0}")]
    Corrupt(String),
}

/// Two entries holding one value of a `unique` index (boxed: it is rare and large).
#[derive(Debug)]
pub struct UniqueViolation {
    pub index: String,
    pub property: String,
    /// As the instruction language writes it.
    pub value: String,
    pub first: String,
    pub second: String,
}

impl DataError {
    /// True for errors caused by the request (as opposed to storage failure or corruption).
    pub fn is_user_error(&self) -> bool {
        !matches!(self, DataError::Tables(_) | DataError::Corrupt(_))
    }
}
