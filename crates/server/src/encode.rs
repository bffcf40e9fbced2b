//! Messages encoded for a session's outbox: replies over `max_result_bytes` become
//! `result_too_large` errors, and a message that cannot be encoded at all closes the session.

use espalier_protocol::codec::EncodeError;
use espalier_protocol::{Codec, ErrorCode, Message};

use crate::outbox::Outgoing;

/// WebSocket close code: an internal error.
const CLOSE_INTERNAL: u16 = 1011;

/// An error message, encoded; closes the session if even that cannot be encoded.
pub fn encode_error(codec: &Codec, id: Option<u64>, code: ErrorCode, message: impl Into<String>) -> Outgoing {
    encode_message(codec, &Message::error(id, code, message))
}

/// A message, encoded; closes the session if it cannot be encoded.
pub fn encode_message(codec: &Codec, msg: &Message) -> Outgoing {
    match codec.encode(msg) {
        Ok(f) => Outgoing::Frame(f),
        Err(e) => Outgoing::Close(CLOSE_INTERNAL, format!("cannot encode a message: {e}")),
    }
}

/// A reply, encoded, or the error that replaces it when it is over `limit` bytes.
pub fn encode_reply(codec: &Codec, msg: &Message, limit: usize) -> Outgoing {
    match codec.encode_limited(msg, limit) {
        Ok(f) => Outgoing::Frame(f),
        Err(EncodeError::TooLarge { size, limit }) => encode_error(
            codec,
            msg.id,
            ErrorCode::ResultTooLarge,
            format!("the reply is {size} bytes, over the server's limit of {limit} bytes (max_result_bytes)"),
        ),
        Err(EncodeError::Serialize(e)) => {
            encode_error(codec, msg.id, ErrorCode::Internal, format!("cannot encode the reply: {e}"))
        }
    }
}
