//! The Espalier wire protocol (`docs/protocol.md`): one message model ([`Message`]) shared by
//! the server and every client, encoded as JSON or MessagePack (named fields) per session,
//! optionally compressed per message (zstd or zlib), with bounded sizes and typed errors.
//!
//! Instructions travel in the protocol's own types ([`instruction`]), converted to and from the
//! syntax tree at the boundary, so the syntax tree is not the wire format.
//!
//! `protocol/vectors/` holds every message kind as JSON text and MessagePack bytes;
//! `tests/vectors.rs` checks that this crate reads and writes them byte for byte.

#![warn(missing_docs)]

pub mod codec;
pub mod instruction;
pub mod message;

pub use codec::{Codec, DecodeError, EncodeError, Frame, Undecodable, DEFAULT_COMPRESS_MIN};
pub use message::{
    Compression, Data, Encoding, ErrorCode, Kind, Limits, Message, Params, Request, RequestBody, RequestError, Role,
    Source, Target, PROTOCOL_VERSION,
};
// The types messages carry, so users of the protocol need no other crate to name them.
pub use espalier_data::{Change, NodePath, PathStep};
pub use espalier_instruction::{ParamValue, QueryResult, Reply, Row};
pub use instruction::{parse_json, Instruction, Refused};

/// Size of a WebSocket endpoint's read buffer (server and Rust client). tungstenite zero-fills
/// the free part of its buffer before every socket read: at its default of 128 KiB that memset
/// was the largest single cost of a small request under load. Larger messages still arrive,
/// read in pieces of this size.
pub const WS_READ_BUFFER: usize = 8 << 10;
