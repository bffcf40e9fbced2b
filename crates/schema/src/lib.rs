//! Layer 1: the schema language (Alan-Application notation) — parse, check, compile.
//!
//! Start at [`compile`]: source text in, a [`model::Schema`] or [`Diagnostics`] out;
//! [`describe`] summarises a compiled schema for people. The language is documented in
//! `docs/schema-language.md`.

#![warn(missing_docs)]

mod compile;
pub mod cursor;
mod describe;
pub mod diagnostic;
pub mod lexer;
pub mod model;
mod parse;

pub use compile::compile;
pub use describe::describe;
pub use diagnostic::{Diagnostic, Diagnostics, Span, MAX_ERRORS};
pub use model::*;
pub use parse::MAX_DEPTH;
