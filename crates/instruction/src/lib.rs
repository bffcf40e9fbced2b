//! Layer 5: instructions — parse (text and JSON), type-check against the schema, execute.
//!
//! Text or JSON → [`ast::Instruction`] ([`parse`]) → checked [`plan::Plan`] ([`plan::Checker`])
//! → [`Reply`] ([`Engine::run`]).

pub mod ast;
mod engine;
pub mod incremental;
pub mod parse;
pub mod plan;
mod run;
mod validate;

pub use engine::{compile_commands, Engine, Registration, Reply};
pub use parse::{parse_instruction, parse_instructions, ParseError};
pub use run::{ParamValue, QueryResult, Row, MAX_PATTERN_ROWS, MAX_VISITED_ROWS};
pub use validate::{validate, Invalid};

use espalier_data::DataError;
use espalier_transaction::TxError;

/// Why an instruction did not run (or did not commit). Nothing of a failed instruction stays.
#[derive(Debug, thiserror::Error)]
pub enum InstructionError {
    #[error("syntax error: {}", render_check(&.0 .0))]
    Parse(#[from] ParseError),
    #[error("{}", render_check(.0))]
    Check(espalier_schema::Diagnostic),
    #[error("{0}")]
    Data(#[from] DataError),
    #[error("{0}")]
    Transaction(TxError),
    #[error("{0}")]
    Value(String),
    #[error("limit exceeded: {0}")]
    Limit(String),
    #[error("schema error:\n{0}")]
    Schema(String),
}

fn render_check(d: &espalier_schema::Diagnostic) -> String {
    if d.line == 0 {
        d.message.clone()
    } else {
        format!("{}:{}: {}", d.line, d.column, d.message)
    }
}

impl InstructionError {
    pub(crate) fn value(msg: impl Into<String>) -> InstructionError {
        InstructionError::Value(msg.into())
    }

    /// A stable machine-readable code for the error kind (clients match on it).
    pub fn code(&self) -> &'static str {
        match self {
            InstructionError::Parse(_) => "syntax",
            InstructionError::Check(_) => "type",
            InstructionError::Data(d) => match d {
                DataError::KeyExists { .. } => "key_exists",
                DataError::KeyMissing { .. } => "key_missing",
                DataError::AlreadyInState { .. } => "already_in_state",
                DataError::StateNotSelected { .. } => "state_not_selected",
                DataError::Referenced { .. } => "referenced",
                DataError::ReferenceUnset { .. } => "reference_unset",
                DataError::KeyTooLong { .. } => "key_too_long",
                DataError::NotUnique(_) => "not_unique",
                DataError::Tables(_) => "storage",
                DataError::Corrupt(_) => "corrupt",
            },
            InstructionError::Transaction(_) => "transaction",
            InstructionError::Value(_) => "value",
            InstructionError::Limit(_) => "limit",
            InstructionError::Schema(_) => "schema",
        }
    }
}
