//! Layer 5: instructions — parse (text and JSON), type-check against the schema, execute.

pub mod ast;
pub mod parse;
pub use parse::{parse_instruction, parse_instructions, ParseError};
