//! Layer 1: the schema language (Alan-Application notation) — parse, check, compile.
//!
//! Start at [`compile`]: source text in, a [`model::Schema`] or [`Diagnostics`] out.

pub mod diagnostic;
pub mod lexer;
pub mod model;

pub use diagnostic::{Diagnostic, Diagnostics, Span};
pub use model::*;
