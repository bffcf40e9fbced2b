//! Layer 5: instructions — parse (text and JSON), type-check against the schema, execute.

pub mod ast;
