//! Layer 6: the server. One port, served by axum on tokio:
//!
//! - `GET /ws`: WebSocket sessions — pipelined requests with ids (replies in any order),
//!   subscriptions with server push, JSON or MessagePack, optional per-message compression;
//! - `POST /v1/execute`, `GET /v1/node`, `GET /v1/status`, `GET /v1/health`,
//!   `POST /v1/shutdown`: one-shot HTTP;
//! - `GET /metrics` (Prometheus), `GET /health`, `GET /v1/backup` (admin): operations.
//!
//! The protocol is `docs/protocol.md` (types in `espalier-protocol`); running and configuring
//! the server is `docs/server.md`. Module map: `server` (router, HTTP handlers, shutdown),
//! `shared` (what every session and request shares: auth, session slots, the shutdown
//! signal), `admission` (the listener: per-address limit, first-request timeout), `fallback`
//! (HTTP answers and the error shape), `session` (a WebSocket session's reader and writer),
//! `outbox` (its outgoing queue and the memory budget), `encode` (messages for the outbox),
//! `work` (engine calls on the blocking
//! pool with the query-time limit), `exec` (the engine calls themselves), `hub` (change feed →
//! history and subscription queues), `subscription` (one subscription's task), `config`,
//! `console` (the web console's files and its `/v1/schema`, `/v1/entries`, `/v1/figures`),
//! `figures` (request and commit counters for the console's dashboard and `/metrics`),
//! `backup` (a snapshot streamed as the JSON dump).

#![warn(missing_docs)]

mod admission;
mod backup;
pub mod config;
mod console;
mod encode;
mod exec;
mod fallback;
mod figures;
mod hub;
mod outbox;
mod server;
mod session;
mod shared;
mod subscription;
mod work;

pub use config::{read_token_file, ServerConfig, ServerLimits, Token, DEFAULT_LISTEN};
pub use server::{Server, ShutdownHandle};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is invalid (the message says which setting and why).
    #[error("{0}")]
    Config(String),
    /// The listen address (named) could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Bind(String, std::io::Error),
    /// Serving, starting the subscription hub or flushing the database failed.
    #[error("{0}")]
    Io(std::io::Error),
}
