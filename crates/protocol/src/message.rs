//! The one message model of the protocol. Every message, in either direction, is a map with a
//! `kind` and the fields that kind uses (see `docs/protocol.md`); JSON and MessagePack encode
//! the same [`Message`] value, fields in declaration order, absent fields left out.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use espalier_data::Change;
use espalier_instruction::{ParamValue, QueryResult, Reply};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::instruction::Instruction;

/// The protocol version a server speaks; `welcome` carries it.
pub const PROTOCOL_VERSION: u32 = 1;

/// What a message is. Unknown names decode to [`Kind::Unknown`] so the receiver can answer
/// `unknown_kind` instead of failing the whole frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Kind {
    // Client → server.
    /// `ping`: a request answered by `pong`.
    Ping,
    /// `execute`: a request to run an instruction, answered by `result`.
    Execute,
    /// `get`: a request for one node and its subtree, answered by `node`.
    Get,
    /// `subscribe`: a request for a subscription to a node or query, answered by `subscribed`.
    Subscribe,
    /// `unsubscribe`: a request to end a subscription, answered by `unsubscribed`.
    Unsubscribe,
    /// `status`: the request for the server's status, and its reply.
    Status,
    /// `shutdown`: a request (admin) to shut the server down, answered by `ok`.
    Shutdown,
    // Server → client (`status` is also the reply to `status`).
    /// `welcome`: the first push of a session, with its settings and the server's limits.
    Welcome,
    /// `pong`: the reply to `ping`.
    Pong,
    /// `result`: the reply to `execute`, with the instruction's reply.
    Result,
    /// `node`: the reply to `get`, with the node in dump form.
    Node,
    /// `subscribed`: the reply to `subscribe`, with the subscription's number and data.
    Subscribed,
    /// `unsubscribed`: the reply to `unsubscribe`; no notification of that subscription follows.
    Unsubscribed,
    /// `notify`: a push of what changed for a subscription, at a new `version`.
    Notify,
    /// `reload`: a push with a subscription's data afresh, after changes could not be delivered.
    Reload,
    /// `ok`: the reply to `shutdown` (and to `/v1/health`).
    Ok,
    /// `error`: a request's failure, an unreadable frame, or the end of a subscription.
    Error,
    /// A kind this build does not know, with its name as received.
    Unknown(String),
}

impl Kind {
    /// Every kind this build knows (all but [`Kind::Unknown`]), requests first.
    pub const ALL: [Kind; 17] = [
        Kind::Ping,
        Kind::Execute,
        Kind::Get,
        Kind::Subscribe,
        Kind::Unsubscribe,
        Kind::Status,
        Kind::Shutdown,
        Kind::Welcome,
        Kind::Pong,
        Kind::Result,
        Kind::Node,
        Kind::Subscribed,
        Kind::Unsubscribed,
        Kind::Notify,
        Kind::Reload,
        Kind::Ok,
        Kind::Error,
    ];

    /// The kind's name on the wire, as in the `kind` field.
    pub fn as_str(&self) -> &str {
        match self {
            Kind::Ping => "ping",
            Kind::Execute => "execute",
            Kind::Get => "get",
            Kind::Subscribe => "subscribe",
            Kind::Unsubscribe => "unsubscribe",
            Kind::Status => "status",
            Kind::Shutdown => "shutdown",
            Kind::Welcome => "welcome",
            Kind::Pong => "pong",
            Kind::Result => "result",
            Kind::Node => "node",
            Kind::Subscribed => "subscribed",
            Kind::Unsubscribed => "unsubscribed",
            Kind::Notify => "notify",
            Kind::Reload => "reload",
            Kind::Ok => "ok",
            Kind::Error => "error",
            Kind::Unknown(s) => s,
        }
    }

    /// The kind a name on the wire stands for; an unknown name gives [`Kind::Unknown`].
    pub fn parse(s: &str) -> Kind {
        match s {
            "ping" => Kind::Ping,
            "execute" => Kind::Execute,
            "get" => Kind::Get,
            "subscribe" => Kind::Subscribe,
            "unsubscribe" => Kind::Unsubscribe,
            "status" => Kind::Status,
            "shutdown" => Kind::Shutdown,
            "welcome" => Kind::Welcome,
            "pong" => Kind::Pong,
            "result" => Kind::Result,
            "node" => Kind::Node,
            "subscribed" => Kind::Subscribed,
            "unsubscribed" => Kind::Unsubscribed,
            "notify" => Kind::Notify,
            "reload" => Kind::Reload,
            "ok" => Kind::Ok,
            "error" => Kind::Error,
            other => Kind::Unknown(other.to_string()),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Kind;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message kind (a string)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Kind, E> {
                Ok(Kind::parse(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// What a token may do. Each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Queries, `get`, subscriptions, `status`, `ping`.
    Read,
    /// And mutations, commands and transactions that write.
    Write,
    /// And `shutdown`.
    Admin,
}

impl Role {
    /// The role's name: `read`, `write` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }

    /// The role a name stands for (as a token's configuration gives it), if any.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "read" => Some(Role::Read),
            "write" => Some(Role::Write),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a session's messages are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// JSON text in WebSocket text frames.
    #[default]
    Json,
    /// MessagePack (maps with named fields) in binary frames.
    Msgpack,
}

impl Encoding {
    /// The encoding's name, as the `encoding` parameter and `welcome` give it.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Json => "json",
            Encoding::Msgpack => "msgpack",
        }
    }

    /// The encoding a name stands for (the `encoding` parameter), if any; `messagepack` is accepted
    /// for `msgpack`.
    pub fn parse(s: &str) -> Option<Encoding> {
        match s {
            "json" => Some(Encoding::Json),
            "msgpack" | "messagepack" => Some(Encoding::Msgpack),
            _ => None,
        }
    }

    /// The HTTP content type of this encoding.
    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Json => "application/json",
            Encoding::Msgpack => "application/msgpack",
        }
    }

    /// The encoding an HTTP `Content-Type` or `Accept` value names, if any.
    pub fn from_content_type(value: &str) -> Option<Encoding> {
        let essence = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match essence.as_str() {
            "application/json" | "text/json" => Some(Encoding::Json),
            "application/msgpack" | "application/x-msgpack" | "application/vnd.msgpack" => Some(Encoding::Msgpack),
            _ => None,
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Per-message compression of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// No compression: every message is sent plain.
    #[default]
    None,
    /// A zstd frame (level 1) per compressed message.
    Zstd,
    /// A zlib stream (RFC 1950, fast level) per compressed message; what browsers'
    /// `CompressionStream("deflate")` and Python's `zlib` produce.
    Deflate,
}

impl Compression {
    /// The compression's name, as the `compression` parameter and `welcome` give it.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Deflate => "deflate",
        }
    }

    /// The compression a name stands for (the `compression` parameter), if any.
    pub fn parse(s: &str) -> Option<Compression> {
        match s {
            "none" => Some(Compression::None),
            "zstd" => Some(Compression::Zstd),
            "deflate" => Some(Compression::Deflate),
            _ => None,
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bounds a server enforces, announced in `welcome` so clients can check before sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Largest message (frame, or decompressed message) the server accepts, in bytes.
    pub max_frame_bytes: u64,
    /// Requests of one session that may be in progress at once.
    pub max_in_flight: u64,
    /// Longest a read-only request may run, in milliseconds.
    pub max_query_ms: u64,
    /// Largest reply (encoded, before compression) the server sends, in bytes.
    pub max_result_bytes: u64,
    /// Subscriptions one session may hold.
    pub max_subscriptions: u64,
}

/// Stable error codes: the instruction layer's (`InstructionError::code()`) and the protocol's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    // Instruction errors (espalier_instruction::InstructionError::code()).
    /// `syntax`: the text (or structured) instruction does not parse.
    Syntax,
    /// `type`: the instruction does not fit the schema (unknown property, wrong kind, …).
    Type,
    /// `key_exists`: adding an entry whose key exists.
    KeyExists,
    /// `key_missing`: an entry named by key does not exist.
    KeyMissing,
    /// `already_in_state`: switching a stategroup to the state it is in.
    AlreadyInState,
    /// `state_not_selected`: a path or update through a state that is not the current one.
    StateNotSelected,
    /// `referenced`: removing or switching away from something still referred to when the request
    /// ends.
    Referenced,
    /// `reference_unset`: a new node's reference was not given.
    ReferenceUnset,
    /// `not_unique`: a `unique` index would hold one value twice at the end of the request.
    NotUnique,
    /// `key_too_long`: a key over the storage limit.
    KeyTooLong,
    /// `storage`: the storage layer failed.
    Storage,
    /// The disk is full: the request was not applied; writes succeed again once space is
    /// freed (HTTP 507).
    StorageFull,
    /// `corrupt`: the stored data contradicts itself or the schema.
    Corrupt,
    /// `transaction`: the commit failed (a failed write or `fdatasync`); writes stop until the
    /// server is restarted.
    Transaction,
    /// `value`: a value does not fit (missing parameter, not a number, …).
    Value,
    /// `limit`: an engine bound was reached (rows visited by a query, nodes removed while still
    /// referred to in one request).
    Limit,
    /// `schema`: the database's schema or its commands do not compile.
    Schema,
    // Protocol errors.
    /// `bad_frame`: the frame is not a readable message (malformed, truncated, trailing bytes, bad
    /// compressed data, a field of the wrong type).
    BadFrame,
    /// `wrong_encoding`: a frame type the session's encoding does not use, a compression it did
    /// not negotiate, or an HTTP body of an unsupported content type.
    WrongEncoding,
    /// `bad_request`: a readable message that is not a valid request (missing `id`, both `text` and
    /// `instruction`, …).
    BadRequest,
    /// `unknown_kind`: `kind` is not a request kind.
    UnknownKind,
    /// `too_large`: a request over `max_frame_bytes` (an HTTP body, or a message once
    /// decompressed).
    TooLarge,
    /// `result_too_large`: the reply would exceed `max_result_bytes`.
    ResultTooLarge,
    /// `too_many_requests`: more than `max_in_flight` requests in progress on the session.
    TooManyRequests,
    /// `too_many_subscriptions`: more than `max_subscriptions` on the session.
    TooManySubscriptions,
    /// `too_many_sessions`: the server has `max_sessions` sessions.
    TooManySessions,
    /// `timeout`: a read-only request ran longer than `max_query_ms`.
    Timeout,
    /// `unauthorized`: no token, or an unknown one.
    Unauthorized,
    /// `forbidden`: the token's role may not do this.
    Forbidden,
    /// `unknown_subscription`: `unsubscribe` of a subscription the session does not have.
    UnknownSubscription,
    /// `shutting_down`: the server is shutting down and takes no new requests.
    ShuttingDown,
    /// `internal`: a bug; the message says what.
    Internal,
    /// A code this build does not know (a newer server).
    Other(String),
}

impl ErrorCode {
    /// Every code this build knows (all but [`ErrorCode::Other`]).
    pub const ALL: [ErrorCode; 32] = [
        ErrorCode::Syntax,
        ErrorCode::Type,
        ErrorCode::KeyExists,
        ErrorCode::KeyMissing,
        ErrorCode::AlreadyInState,
        ErrorCode::StateNotSelected,
        ErrorCode::Referenced,
        ErrorCode::ReferenceUnset,
        ErrorCode::NotUnique,
        ErrorCode::KeyTooLong,
        ErrorCode::Storage,
        ErrorCode::StorageFull,
        ErrorCode::Corrupt,
        ErrorCode::Transaction,
        ErrorCode::Value,
        ErrorCode::Limit,
        ErrorCode::Schema,
        ErrorCode::BadFrame,
        ErrorCode::WrongEncoding,
        ErrorCode::BadRequest,
        ErrorCode::UnknownKind,
        ErrorCode::TooLarge,
        ErrorCode::ResultTooLarge,
        ErrorCode::TooManyRequests,
        ErrorCode::TooManySubscriptions,
        ErrorCode::TooManySessions,
        ErrorCode::Timeout,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::UnknownSubscription,
        ErrorCode::ShuttingDown,
        ErrorCode::Internal,
    ];

    /// The code as it is written on the wire (`key_missing`).
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::Syntax => "syntax",
            ErrorCode::Type => "type",
            ErrorCode::KeyExists => "key_exists",
            ErrorCode::KeyMissing => "key_missing",
            ErrorCode::AlreadyInState => "already_in_state",
            ErrorCode::StateNotSelected => "state_not_selected",
            ErrorCode::Referenced => "referenced",
            ErrorCode::ReferenceUnset => "reference_unset",
            ErrorCode::NotUnique => "not_unique",
            ErrorCode::KeyTooLong => "key_too_long",
            ErrorCode::Storage => "storage",
            ErrorCode::StorageFull => "storage_full",
            ErrorCode::Corrupt => "corrupt",
            ErrorCode::Transaction => "transaction",
            ErrorCode::Value => "value",
            ErrorCode::Limit => "limit",
            ErrorCode::Schema => "schema",
            ErrorCode::BadFrame => "bad_frame",
            ErrorCode::WrongEncoding => "wrong_encoding",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::UnknownKind => "unknown_kind",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::ResultTooLarge => "result_too_large",
            ErrorCode::TooManyRequests => "too_many_requests",
            ErrorCode::TooManySubscriptions => "too_many_subscriptions",
            ErrorCode::TooManySessions => "too_many_sessions",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::UnknownSubscription => "unknown_subscription",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Internal => "internal",
            ErrorCode::Other(s) => s,
        }
    }

    /// The code a name on the wire stands for; an unknown name gives [`ErrorCode::Other`].
    pub fn parse(s: &str) -> ErrorCode {
        ErrorCode::ALL.iter().find(|c| c.as_str() == s).cloned().unwrap_or_else(|| ErrorCode::Other(s.to_string()))
    }

    /// The HTTP status an error with this code gets on the one-shot endpoints.
    pub fn http_status(&self) -> u16 {
        match self {
            ErrorCode::Syntax
            | ErrorCode::Type
            | ErrorCode::Value
            | ErrorCode::KeyTooLong
            | ErrorCode::BadFrame
            | ErrorCode::WrongEncoding
            | ErrorCode::BadRequest
            | ErrorCode::UnknownKind
            | ErrorCode::UnknownSubscription => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::KeyMissing => 404,
            ErrorCode::KeyExists
            | ErrorCode::AlreadyInState
            | ErrorCode::StateNotSelected
            | ErrorCode::Referenced
            | ErrorCode::ReferenceUnset
            | ErrorCode::NotUnique => 409,
            ErrorCode::TooLarge | ErrorCode::ResultTooLarge => 413,
            ErrorCode::Limit | ErrorCode::TooManyRequests | ErrorCode::TooManySubscriptions => 429,
            ErrorCode::TooManySessions | ErrorCode::ShuttingDown => 503,
            ErrorCode::Timeout => 504,
            ErrorCode::StorageFull => 507,
            ErrorCode::Storage
            | ErrorCode::Corrupt
            | ErrorCode::Transaction
            | ErrorCode::Schema
            | ErrorCode::Internal
            | ErrorCode::Other(_) => 500,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ErrorCode, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ErrorCode;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an error code (a string)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ErrorCode, E> {
                Ok(ErrorCode::parse(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// Parameter values by name (sorted, so encodings are deterministic).
pub type Params = BTreeMap<String, ParamValue>;

/// Every message of the protocol. Which fields a kind uses is in `docs/protocol.md`; the
/// constructors below build each server message, [`Message::into_request`] checks a client's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// The request's id, echoed in its reply. Absent on pushes (`welcome`, `notify`, `reload`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// What the message is; it decides which other fields are used.
    pub kind: Kind,
    /// An instruction (or a query to subscribe to) in the text form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// An instruction (or a query to subscribe to) in the structured form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<Instruction>,
    /// Values of `$name` parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Params>,
    /// A node path in the text form (`. 'Orders' : "o1"`; empty for the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `subscribe`: resume after this version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// The subscription's number (unique within the session): `subscribed`, `notify`, `reload`,
    /// `unsubscribe`, `unsubscribed`, and an `error` that ends a subscription.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription: Option<u64>,
    /// The commit version the message's data is at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// `subscribed`: true if the subscription continues from `since` (no data follows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<bool>,
    /// `result`: the instruction's reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Reply>,
    /// A node and its subtree in dump form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<serde_json::Value>,
    /// A query subscription's rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<QueryResult>,
    /// A node subscription's changes of one commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<Change>>,
    /// A pattern query subscription's notification: the rows one commit removed…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<Vec<Vec<serde_json::Value>>>,
    /// … and the rows it added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<Vec<Vec<serde_json::Value>>>,
    /// `reload`: why (`lagged` or `too_large`); `subscribed`: why `since` was not honoured
    /// (`history_dropped` or `version_ahead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `error`: the stable code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    /// `error`: for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `welcome`: the protocol version ([`PROTOCOL_VERSION`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
    /// `welcome`: the server's name and version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// `welcome`: the session's role, its token's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// `welcome`: the session's encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
    /// `welcome`: the session's per-message compression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    /// Messages shorter than this many bytes are sent uncompressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compress_min: Option<u64>,
    /// `welcome`: the bounds the server enforces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// `status`: open sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u64>,
    /// `status`: live subscriptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscriptions: Option<u64>,
    /// `status`: the oldest version a subscription can resume after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_from: Option<u64>,
}

impl Message {
    /// A message of `kind` with no fields set.
    pub fn new(kind: Kind) -> Message {
        Message {
            id: None,
            kind,
            text: None,
            instruction: None,
            params: None,
            path: None,
            since: None,
            subscription: None,
            version: None,
            resumed: None,
            result: None,
            node: None,
            query: None,
            changes: None,
            removed: None,
            added: None,
            reason: None,
            code: None,
            message: None,
            protocol: None,
            server: None,
            role: None,
            encoding: None,
            compression: None,
            compress_min: None,
            limits: None,
            sessions: None,
            subscriptions: None,
            history_from: None,
        }
    }

    /// The message with its `id` set to `id`.
    pub fn with_id(mut self, id: u64) -> Message {
        self.id = Some(id);
        self
    }

    // ---- client requests ----

    /// A `ping` request.
    pub fn ping(id: u64) -> Message {
        Message::new(Kind::Ping).with_id(id)
    }

    /// An `execute` request for an instruction in the text form.
    pub fn execute_text(id: u64, text: impl Into<String>, params: Option<Params>) -> Message {
        Message { text: Some(text.into()), params, ..Message::new(Kind::Execute).with_id(id) }
    }

    /// An `execute` request for an instruction in the structured form (a syntax tree converts
    /// into it).
    pub fn execute(id: u64, instruction: impl Into<Instruction>, params: Option<Params>) -> Message {
        Message { instruction: Some(instruction.into()), params, ..Message::new(Kind::Execute).with_id(id) }
    }

    /// A `get` request for the node at `path` (text form; empty for the root).
    pub fn get(id: u64, path: impl Into<String>, params: Option<Params>) -> Message {
        Message { path: Some(path.into()), params, ..Message::new(Kind::Get).with_id(id) }
    }

    /// A `subscribe` request for the node at `path` and its subtree; with `since`, a resume after
    /// that version.
    pub fn subscribe_node(id: u64, path: impl Into<String>, params: Option<Params>, since: Option<u64>) -> Message {
        Message { path: Some(path.into()), params, since, ..Message::new(Kind::Subscribe).with_id(id) }
    }

    /// A `subscribe` request for a query (text form); with `since`, a resume after that version.
    pub fn subscribe_query(id: u64, text: impl Into<String>, params: Option<Params>, since: Option<u64>) -> Message {
        Message { text: Some(text.into()), params, since, ..Message::new(Kind::Subscribe).with_id(id) }
    }

    /// An `unsubscribe` request ending `subscription`.
    pub fn unsubscribe(id: u64, subscription: u64) -> Message {
        Message { subscription: Some(subscription), ..Message::new(Kind::Unsubscribe).with_id(id) }
    }

    /// A `status` request.
    pub fn status_request(id: u64) -> Message {
        Message::new(Kind::Status).with_id(id)
    }

    /// A `shutdown` request (admin role).
    pub fn shutdown(id: u64) -> Message {
        Message::new(Kind::Shutdown).with_id(id)
    }

    // ---- server messages ----

    /// The `welcome` a session starts with: the last commit's `version`, this protocol and server,
    /// and the session's role, encoding, compression and limits.
    pub fn welcome(
        version: u64,
        role: Role,
        encoding: Encoding,
        compression: Compression,
        compress_min: u64,
        limits: Limits,
    ) -> Message {
        Message {
            protocol: Some(PROTOCOL_VERSION),
            server: Some(format!("espalier {}", env!("CARGO_PKG_VERSION"))),
            version: Some(version),
            role: Some(role),
            encoding: Some(encoding),
            compression: Some(compression),
            compress_min: Some(compress_min),
            limits: Some(limits),
            ..Message::new(Kind::Welcome)
        }
    }

    /// The `pong` reply to a `ping`.
    pub fn pong(id: u64) -> Message {
        Message::new(Kind::Pong).with_id(id)
    }

    /// The `result` reply to an `execute`: the instruction's reply (no `id` in an HTTP reply).
    pub fn result(id: Option<u64>, reply: Reply) -> Message {
        Message { id, result: Some(reply), ..Message::new(Kind::Result) }
    }

    /// The `node` reply to a `get`: the node in dump form, read at `version`.
    pub fn node(id: Option<u64>, version: u64, node: serde_json::Value) -> Message {
        Message { id, version: Some(version), node: Some(node), ..Message::new(Kind::Node) }
    }

    /// An `ok` reply.
    pub fn ok(id: Option<u64>) -> Message {
        Message { id, ..Message::new(Kind::Ok) }
    }

    /// An `error`: a stable code and a message for people; `id` is the request's, if known.
    pub fn error(id: Option<u64>, code: ErrorCode, message: impl Into<String>) -> Message {
        Message { id, code: Some(code), message: Some(message.into()), ..Message::new(Kind::Error) }
    }

    /// The `subscribed` reply to a `subscribe`: the subscription's number, its `version`, whether
    /// it resumed, and its data unless it did.
    pub fn subscribed(id: u64, subscription: u64, version: u64, resumed: bool, data: Data) -> Message {
        let m = Message {
            id: Some(id),
            subscription: Some(subscription),
            version: Some(version),
            resumed: Some(resumed),
            ..Message::new(Kind::Subscribed)
        };
        data.put(m)
    }

    /// The `unsubscribed` reply to an `unsubscribe`.
    pub fn unsubscribed(id: u64, subscription: u64) -> Message {
        Message { subscription: Some(subscription), ..Message::new(Kind::Unsubscribed).with_id(id) }
    }

    /// A node subscription's notification: the changes of one commit within the subtree.
    pub fn notify_changes(subscription: u64, version: u64, changes: Vec<Change>) -> Message {
        Message {
            subscription: Some(subscription),
            version: Some(version),
            changes: Some(changes),
            ..Message::new(Kind::Notify)
        }
    }

    /// A query subscription's notification: the rows at `version`.
    pub fn notify_query(subscription: u64, version: u64, query: QueryResult) -> Message {
        Message {
            subscription: Some(subscription),
            version: Some(version),
            query: Some(query),
            ..Message::new(Kind::Notify)
        }
    }

    /// A pattern query subscription's notification: the rows commit `version` removed and
    /// added (the query's matches are kept incrementally; a row whose values changed is
    /// removed with its old values and added with its new ones).
    pub fn notify_matches(
        subscription: u64,
        version: u64,
        removed: Vec<Vec<serde_json::Value>>,
        added: Vec<Vec<serde_json::Value>>,
    ) -> Message {
        Message {
            subscription: Some(subscription),
            version: Some(version),
            removed: Some(removed),
            added: Some(added),
            ..Message::new(Kind::Notify)
        }
    }

    /// Changes were not delivered; here is the data afresh at `version`.
    pub fn reload(subscription: u64, version: u64, reason: impl Into<String>, data: Data) -> Message {
        let m = Message {
            subscription: Some(subscription),
            version: Some(version),
            reason: Some(reason.into()),
            ..Message::new(Kind::Reload)
        };
        data.put(m)
    }

    /// A push error about a subscription, which ends it.
    pub fn subscription_error(subscription: u64, code: ErrorCode, message: impl Into<String>) -> Message {
        Message { subscription: Some(subscription), ..Message::error(None, code, message) }
    }

    /// The `status` reply: the last commit's version, open sessions, live subscriptions and the
    /// oldest version a subscription can resume after.
    pub fn status(id: Option<u64>, version: u64, sessions: u64, subscriptions: u64, history_from: u64) -> Message {
        Message {
            id,
            version: Some(version),
            sessions: Some(sessions),
            subscriptions: Some(subscriptions),
            history_from: Some(history_from),
            ..Message::new(Kind::Status)
        }
    }

    /// The error a request's problem becomes.
    pub fn from_error(id: Option<u64>, e: &RequestError) -> Message {
        Message::error(id, e.code.clone(), e.message.clone())
    }

    /// The code of an `error` message (`internal` if it has none).
    pub fn error_code(&self) -> ErrorCode {
        self.code.clone().unwrap_or(ErrorCode::Internal)
    }

    /// Checks a client message and gives the request it makes.
    pub fn into_request(self) -> Result<Request, RequestError> {
        let Message { id, kind, text, instruction, params, path, since, subscription, .. } = self;
        let params: HashMap<String, ParamValue> = params.unwrap_or_default().into_iter().collect();
        let source = |text: Option<String>, instruction: Option<Instruction>, what: &str| match (text, instruction) {
            (Some(t), None) => Ok(Source::Text(t)),
            (None, Some(i)) => Ok(Source::Structured(i)),
            (Some(_), Some(_)) => {
                Err(RequestError::bad_request(format!("{what}: give `text` or `instruction`, not both")))
            }
            (None, None) => Err(RequestError::bad_request(format!("{what}: `text` or `instruction` is required"))),
        };
        let body = match kind {
            Kind::Ping => RequestBody::Ping,
            Kind::Status => RequestBody::Status,
            Kind::Shutdown => RequestBody::Shutdown,
            Kind::Execute => RequestBody::Execute { source: source(text, instruction, "execute")?, params },
            Kind::Get => RequestBody::Get {
                path: path.ok_or_else(|| RequestError::bad_request("get: `path` is required (\"\" is the root)"))?,
                params,
            },
            Kind::Subscribe => {
                let target = match path {
                    Some(p) if text.is_none() && instruction.is_none() => Target::Node(p),
                    Some(_) => {
                        return Err(RequestError::bad_request(
                            "subscribe: give `path` (a node) or `text`/`instruction` (a query), not both",
                        ))
                    }
                    None => Target::Query(source(text, instruction, "subscribe")?),
                };
                RequestBody::Subscribe { target, params, since }
            }
            Kind::Unsubscribe => RequestBody::Unsubscribe {
                subscription: subscription
                    .ok_or_else(|| RequestError::bad_request("unsubscribe: `subscription` is required"))?,
            },
            Kind::Unknown(name) => {
                return Err(RequestError::new(
                    ErrorCode::UnknownKind,
                    format!(
                        "unknown request kind {name:?}; requests are ping, execute, get, subscribe, unsubscribe, \
                         status and shutdown"
                    ),
                ))
            }
            other => {
                return Err(RequestError::new(
                    ErrorCode::UnknownKind,
                    format!("{other:?} is a server message kind, not a request", other = other.as_str()),
                ))
            }
        };
        let id = id.ok_or_else(|| RequestError::bad_request(format!("{} request without an `id`", kind_of(&body))))?;
        Ok(Request { id, body })
    }
}

fn kind_of(body: &RequestBody) -> &'static str {
    match body {
        RequestBody::Ping => "ping",
        RequestBody::Execute { .. } => "execute",
        RequestBody::Get { .. } => "get",
        RequestBody::Subscribe { .. } => "subscribe",
        RequestBody::Unsubscribe { .. } => "unsubscribe",
        RequestBody::Status => "status",
        RequestBody::Shutdown => "shutdown",
    }
}

/// The data a `subscribed` or `reload` message carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// No data: a resumed subscription, or a `reload` of a node subscription whose node no
    /// longer exists.
    None,
    /// A node and its subtree in dump form (a node subscription).
    Node(serde_json::Value),
    /// A query's rows (a query subscription).
    Query(QueryResult),
}

impl Data {
    fn put(self, mut m: Message) -> Message {
        match self {
            Data::None => {}
            Data::Node(n) => m.node = Some(n),
            Data::Query(q) => m.query = Some(q),
        }
        m
    }
}

/// An instruction as a client gave it.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// The text form.
    Text(String),
    /// The structured (JSON or MessagePack) form, as decoded: converted to the syntax tree
    /// ([`Instruction::to_ast`]) where the text form is parsed, so both are refused alike.
    Structured(Instruction),
}

/// What a subscription watches.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A node path (text form): the node and its subtree.
    Node(String),
    /// A query: a collection query or a pattern query.
    Query(Source),
}

/// A checked client request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The request's `id`, for its reply.
    pub id: u64,
    /// What the request asks for.
    pub body: RequestBody,
}

/// What a checked request asks for, by kind.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestBody {
    /// `ping`: check that the server answers.
    Ping,
    /// `execute`: run an instruction.
    Execute {
        /// The instruction to run.
        source: Source,
        /// Values of its `$name` parameters.
        params: HashMap<String, ParamValue>,
    },
    /// `get`: read a node and its subtree.
    Get {
        /// The node path in the text form (empty for the root).
        path: String,
        /// Values of the path's `$name` parameters.
        params: HashMap<String, ParamValue>,
    },
    /// `subscribe`: watch a node or query.
    Subscribe {
        /// The node or query to watch.
        target: Target,
        /// Values of its `$name` parameters.
        params: HashMap<String, ParamValue>,
        /// The version to resume after, if the client asks to resume.
        since: Option<u64>,
    },
    /// `unsubscribe`: end a subscription.
    Unsubscribe {
        /// The number of the subscription to end.
        subscription: u64,
    },
    /// `status`: the server's status.
    Status,
    /// `shutdown`: shut the server down.
    Shutdown,
}

impl RequestBody {
    /// The request's kind as named on the wire (`execute`, …).
    pub fn kind(&self) -> &'static str {
        kind_of(self)
    }
}

/// Why a request cannot be served: a code and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("error[{code}]: {message}")]
pub struct RequestError {
    /// The error code the reply carries.
    pub code: ErrorCode,
    /// What went wrong, for people.
    pub message: String,
}

impl RequestError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RequestError {
        RequestError { code, message: message.into() }
    }

    /// A `bad_request` error.
    pub fn bad_request(message: impl Into<String>) -> RequestError {
        RequestError::new(ErrorCode::BadRequest, message)
    }
}
