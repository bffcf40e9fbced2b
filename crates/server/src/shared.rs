//! What every session and request shares: the engine, the hub, the limits, the tokens (and
//! authentication), the session slots, the figures, the memory budget and the shutdown signal.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::Query;
use axum::http::{header, HeaderMap};
use espalier_instruction::Engine;
use espalier_protocol::{ErrorCode, Message, RequestError, Role};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::config::{ServerLimits, Token};
use crate::figures::{Figures, Gauges};
use crate::hub::Hub;
use crate::outbox::Memory;

/// What every session and request shares.
pub struct Shared {
    pub engine: Arc<Engine>,
    pub hub: Arc<Hub>,
    pub limits: ServerLimits,
    tokens: Vec<Token>,
    /// One permit per open session or HTTP request in progress.
    pub sessions: Arc<Semaphore>,
    /// Requests by kind and their latencies, for `GET /v1/figures` (the console's dashboard).
    pub figures: Arc<Figures>,
    /// Replies and pushes encoded and not yet written, by session and in total.
    pub memory: Arc<Memory>,
    shutting_down: AtomicBool,
    shutdown_tx: watch::Sender<bool>,
}

impl Shared {
    /// The state of a server about to serve `engine`.
    pub fn new(engine: Arc<Engine>, hub: Arc<Hub>, limits: ServerLimits, tokens: Vec<Token>) -> Shared {
        let (shutdown_tx, _) = watch::channel(false);
        Shared {
            engine,
            hub,
            sessions: Arc::new(Semaphore::new(limits.max_sessions)),
            memory: Memory::new(limits.max_queued_bytes, limits.session_queue_bytes),
            limits,
            tokens,
            figures: Arc::default(),
            shutting_down: AtomicBool::new(false),
            shutdown_tx,
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Starts the graceful shutdown (idempotent).
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
        self.shutdown_tx.send_replace(true);
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }

    pub fn open_sessions(&self) -> usize {
        self.limits.max_sessions - self.sessions.available_permits()
    }

    pub fn status(&self, id: Option<u64>) -> Message {
        Message::status(
            id,
            self.engine.database().version(),
            self.open_sessions() as u64,
            self.hub.subscriptions() as u64,
            self.hub.history_from(),
        )
    }

    /// The role a request's secret grants.
    pub(crate) fn authenticate(&self, headers: &HeaderMap, query_token: Option<&str>) -> Result<Role, RequestError> {
        if self.tokens.is_empty() {
            return Ok(Role::Admin);
        }
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(str::trim);
        let Some(secret) = bearer.or(query_token) else {
            return Err(RequestError::new(
                ErrorCode::Unauthorized,
                "this server requires a token: send `Authorization: Bearer <secret>` (or `?token=<secret>`)",
            ));
        };
        // Compare against every token in constant time, so timing tells nothing.
        let mut role = None;
        for t in &self.tokens {
            if constant_time_eq(t.secret.as_bytes(), secret.as_bytes()) {
                role = Some(t.role);
            }
        }
        role.ok_or_else(|| RequestError::new(ErrorCode::Unauthorized, "the token is not valid on this server"))
    }

    /// What `/metrics` and `/v1/figures` show of the server now.
    pub fn gauges(&self) -> Gauges {
        Gauges {
            version: self.engine.database().version(),
            sessions: self.open_sessions(),
            subscriptions: self.hub.subscriptions(),
            history_from: self.hub.history_from(),
            history_bytes: self.hub.history_bytes(),
            queued_bytes: self.memory.queued_bytes(),
        }
    }

    /// A session (or HTTP request) slot, or why there is none.
    pub(crate) fn admit(&self) -> Result<OwnedSemaphorePermit, RequestError> {
        if self.is_shutting_down() {
            return Err(RequestError::new(ErrorCode::ShuttingDown, "the server is shutting down"));
        }
        self.sessions.clone().try_acquire_owned().map_err(|_| {
            RequestError::new(
                ErrorCode::TooManySessions,
                format!("the server has its maximum of {} sessions; try again later", self.limits.max_sessions),
            )
        })
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Query parameters as name → value (the last value of a repeated name wins).
pub(crate) fn query_map(
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<HashMap<String, String>, RequestError> {
    let Query(pairs) = q.map_err(|e| RequestError::bad_request(format!("the query string does not parse: {e}")))?;
    Ok(pairs.into_iter().collect())
}

/// Authenticates and admits an HTTP request.
pub(crate) fn http_admit(
    shared: &Shared,
    headers: &HeaderMap,
    q: &HashMap<String, String>,
) -> Result<(Role, OwnedSemaphorePermit), RequestError> {
    let role = shared.authenticate(headers, q.get("token").map(String::as_str))?;
    let permit = shared.admit()?;
    Ok((role, permit))
}
