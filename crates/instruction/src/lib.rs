//! Layer 5: instructions — parse (text), type-check against the schema, execute.
//!
//! Text ([`parse`]) or a structured instruction (converted from the protocol's wire form) →
//! [`ast::Instruction`] → checked [`plan::Plan`] ([`plan::Checker`])
//! → [`Reply`] ([`Engine::run`]).

#![warn(missing_docs)]

pub mod ast;
mod engine;
pub mod incremental;
pub mod parse;
pub mod plan;
mod print;
mod reads;
mod run;
mod validate;

pub use engine::{compile_commands, Engine, Registration, Reply, Written};
pub use parse::{parse_instruction, parse_instructions, ParseError};
pub use reads::QueryScope;
pub use run::{ParamValue, QueryResult, Row, RowValue, MAX_PATTERN_ROWS, MAX_VISITED_ROWS};
pub use validate::{benchmark_word, validate, Invalid};

use espalier_data::DataError;
use espalier_transaction::TxError;

/// Why an instruction did not run (or did not commit). Nothing of a failed instruction stays.
#[derive(Debug, thiserror::Error)]
pub enum InstructionError {
    /// The instruction does not parse, or breaks a rule of the text form.
    #[error("syntax error: {}", render_check(&.0 .0))]
    Parse(#[from] ParseError),
    /// The instruction does not fit the schema.
    #[error("{}", render_check(.0))]
    Check(espalier_schema::Diagnostic),
    /// The data refused the change, or could not be read.
    #[error("{0}")]
    Data(#[from] DataError),
    /// The transaction could not run or commit.
    #[error("{0}")]
    Transaction(TxError),
    /// A value did not fit at run time: a parameter missing or of the wrong kind, an overflow, …
    #[error("{0}")]
    Value(String),
    /// A bound on the work or size of a query or registration was exceeded.
    #[error("limit exceeded: {0}")]
    Limit(String),
    /// The schema, or one of its command bodies, does not compile; rendered with its lines.
    #[error("schema error:\n{0}")]
    Schema(String),
    /// The error of one member of a transaction (counting from 0, as the reply's list does),
    /// with the member's text. Its code is the member's error's.
    #[error("in transaction member [{index}] `{text}`: {source}")]
    Member {
        /// The member's position in the transaction, from 0.
        index: usize,
        /// The member's canonical text.
        text: String,
        /// The error the member met.
        source: Box<InstructionError>,
    },
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

    /// This error as the error of member `index` (text `text`) of a transaction.
    pub fn in_member(self, index: usize, text: &str) -> InstructionError {
        InstructionError::Member { index, text: text.to_string(), source: Box::new(self) }
    }

    /// The error a transaction's member met, past the members that name it.
    pub fn innermost(&self) -> &InstructionError {
        match self {
            InstructionError::Member { source, .. } => source.innermost(),
            other => other,
        }
    }

    /// A stable machine-readable code for the error kind (clients match on it).
    pub fn code(&self) -> &'static str {
        match self {
            InstructionError::Member { source, .. } => source.code(),
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
                DataError::Limit(_) => "limit",
                DataError::Tables(_) => "storage",
                DataError::Corrupt(_) => "corrupt",
            },
            InstructionError::Transaction(TxError::StorageFull(_)) => "storage_full",
            // A bug, not the request's fault; the server logged one line of it.
            InstructionError::Transaction(TxError::Panicked(_)) => "internal",
            InstructionError::Transaction(_) => "transaction",
            InstructionError::Value(_) => "value",
            InstructionError::Limit(_) => "limit",
            InstructionError::Schema(_) => "schema",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_and_a_panic_have_their_own_codes() {
        assert_eq!(InstructionError::Transaction(TxError::StorageFull("no space".into())).code(), "storage_full");
        assert_eq!(InstructionError::Transaction(TxError::Panicked("a bug".into())).code(), "internal");
        assert_eq!(InstructionError::Transaction(TxError::Commit("fsync".into())).code(), "transaction");
        let member = InstructionError::Data(DataError::Limit("x".into())).in_member(2, "update ( )");
        assert_eq!(member.code(), "limit");
        assert_eq!(member.to_string(), "in transaction member [2] `update ( )`: limit exceeded: x");
    }
}
