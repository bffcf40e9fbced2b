//! The server: one listener, an axum router (WebSocket sessions and HTTP one-shot requests),
//! authentication, the session limit, and graceful shutdown.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use espalier_instruction::Engine;
use espalier_protocol::codec::decode_value;
use espalier_protocol::{
    Codec, Compression, Encoding, ErrorCode, Instruction, Message, Params, RequestError, Role, Source,
};
use serde::Deserialize;
use tokio::net::TcpListener;

use crate::admission::{Admission, Peer};
use crate::config::{ServerConfig, ServerLimits};
use crate::fallback::{self, error_reply, reply};
use crate::figures::Kind;
use crate::hub::{HistoryBounds, Hub};
use crate::shared::{http_admit, query_map, Shared};
use crate::work::{self, Job, Outcome};
use crate::{admission, session, ServerError};

/// Stops a running server gracefully.
#[derive(Clone)]
pub struct ShutdownHandle(Arc<Shared>);

impl ShutdownHandle {
    /// Starts the graceful shutdown (see [`Server::serve`]); calling it again does nothing more.
    pub fn shutdown(&self) {
        self.0.begin_shutdown();
    }
}

/// A server bound to its address; [`Server::serve`] runs it.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    hub_thread: std::thread::JoinHandle<()>,
}

impl Server {
    /// Binds the listener and starts the subscription hub; [`Server::serve`] runs it.
    pub async fn bind(engine: Arc<Engine>, config: ServerConfig) -> Result<Server, ServerError> {
        config.validate()?;
        let listener =
            TcpListener::bind(config.listen).await.map_err(|e| ServerError::Bind(config.listen.to_string(), e))?;
        let limits = config.limits;
        let (hub, hub_thread) =
            Hub::start(engine.database().clone(), HistoryBounds::of(&limits)).map_err(ServerError::Io)?;
        let shared = Arc::new(Shared::new(engine, hub, limits, config.tokens));
        Ok(Server { listener, shared, hub_thread })
    }

    /// The address the server listens on (with the actual port when 0 asked for any free one).
    pub fn local_addr(&self) -> Result<SocketAddr, ServerError> {
        self.listener.local_addr().map_err(ServerError::Io)
    }

    /// A handle that can stop the server from elsewhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.shared.clone())
    }

    /// Serves until shut down, then: stops accepting, lets sessions finish their requests (up
    /// to the grace period), closes them, stops the hub and flushes the database.
    pub async fn serve(self) -> Result<(), ServerError> {
        let Server { listener, shared, hub_thread } = self;
        let app = router(shared.clone());
        let mut signal = shared.shutdown_signal();
        let listener =
            Admission::new(listener, shared.limits.max_connections_per_address, shared.limits.request_timeout);
        axum::serve(listener, app.into_make_service_with_connect_info::<Peer>())
            .with_graceful_shutdown(async move {
                // An error means the sender is gone, which only happens at shutdown too.
                let _ = signal.wait_for(|stop| *stop).await;
            })
            .await
            .map_err(ServerError::Io)?;
        // Sessions hold permits until they have closed; wait for all of them (bounded).
        let all = u32::try_from(shared.limits.max_sessions).unwrap_or(u32::MAX);
        let wait = shared.limits.shutdown_grace + Duration::from_secs(5);
        if tokio::time::timeout(wait, shared.sessions.clone().acquire_many_owned(all)).await.is_err() {
            crate::config::log::warn(
                "some sessions did not close in time; exiting anyway",
                &[("waited", &format!("{wait:?}"))],
            );
        }
        shared.hub.stop();
        let engine = shared.engine.clone();
        tokio::task::spawn_blocking(move || {
            let _ = hub_thread.join();
            // A checkpoint on the way out: the next open loads it instead of replaying the log.
            engine.database().checkpoint()?;
            engine.database().sync()
        })
        .await
        .map_err(|e| ServerError::Io(std::io::Error::other(e.to_string())))?
        .map_err(|e| ServerError::Io(std::io::Error::other(format!("flushing the database: {e}"))))?;
        Ok(())
    }
}

fn router(shared: Arc<Shared>) -> Router {
    let body_limit = shared.limits.max_frame_bytes;
    Router::new()
        .route("/ws", get(ws_upgrade))
        .route("/v1/execute", post(http_execute))
        .route("/v1/node", get(http_node))
        .route("/v1/status", get(http_status))
        .route("/v1/health", get(http_health))
        .route("/health", get(http_health))
        .route("/metrics", get(http_metrics))
        .route("/v1/backup", get(http_backup))
        .route("/v1/shutdown", post(http_shutdown))
        .merge(crate::console::routes())
        .fallback(fallback::not_found)
        .method_not_allowed_fallback(fallback::method_not_allowed)
        .layer(axum::middleware::map_response(fallback::json_errors))
        .layer(axum::middleware::from_fn(admission::started))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(shared)
}

/// The session settings of a WebSocket upgrade.
fn session_codec(q: &HashMap<String, String>, limits: &ServerLimits) -> Result<Codec, RequestError> {
    for name in q.keys() {
        if !["encoding", "compression", "compress_min", "token"].contains(&name.as_str()) {
            return Err(RequestError::bad_request(format!(
                "unknown parameter {name:?}; a session takes encoding, compression, compress_min and token"
            )));
        }
    }
    let encoding = match q.get("encoding") {
        None => Encoding::Json,
        Some(e) => Encoding::parse(e)
            .ok_or_else(|| RequestError::bad_request(format!("encoding {e:?} is not json or msgpack")))?,
    };
    let compression = match q.get("compression") {
        None => Compression::None,
        Some(c) => Compression::parse(c)
            .ok_or_else(|| RequestError::bad_request(format!("compression {c:?} is not none, zstd or deflate")))?,
    };
    let compress_min = match q.get("compress_min") {
        None => espalier_protocol::DEFAULT_COMPRESS_MIN,
        Some(n) => n
            .parse::<usize>()
            .map_err(|_| RequestError::bad_request(format!("compress_min {n:?} is not a byte count")))?,
    };
    Ok(Codec::new(encoding, compression, compress_min, limits.max_frame_bytes))
}

async fn ws_upgrade(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let prepared = (|| {
        let q = query_map(query)?;
        let codec = session_codec(&q, &shared.limits)?;
        let role = shared.authenticate(&headers, q.get("token").map(String::as_str))?;
        Ok::<_, RequestError>((codec, role))
    })();
    let (codec, role) = match prepared {
        Ok(p) => p,
        Err(e) => return error_reply(Encoding::Json, &e),
    };
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => {
            return error_reply(
                Encoding::Json,
                &RequestError::bad_request(format!("GET /ws is a WebSocket endpoint: {e}")),
            )
        }
    };
    let permit = match shared.admit() {
        Ok(p) => p,
        Err(e) => return error_reply(Encoding::Json, &e),
    };
    let limit = shared.limits.max_frame_bytes;
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .read_buffer_size(espalier_protocol::WS_READ_BUFFER)
        .on_upgrade(move |socket| session::run(socket, shared, role, codec, permit))
}

/// Encodings of an HTTP exchange: the request body's, and the reply's. A body without a
/// Content-Type is JSON, and so is one labelled `application/x-www-form-urlencoded`: that is
/// what `curl -d` sends unless told otherwise, and no endpoint takes a form.
fn http_encodings(headers: &HeaderMap) -> Result<(Encoding, Encoding), RequestError> {
    let request = match headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) {
        None => Encoding::Json,
        Some(ct) if is_form(ct) => Encoding::Json,
        Some(ct) => Encoding::from_content_type(ct).ok_or_else(|| {
            RequestError::new(
                ErrorCode::WrongEncoding,
                format!("Content-Type {ct:?} is neither application/json nor application/msgpack"),
            )
        })?,
    };
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.split(',').find_map(Encoding::from_content_type));
    Ok((request, accept.unwrap_or(request)))
}

/// `application/x-www-form-urlencoded`, with or without parameters.
fn is_form(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/x-www-form-urlencoded")
}

fn accept_encoding(headers: &HeaderMap) -> Encoding {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.split(',').find_map(Encoding::from_content_type))
        .unwrap_or(Encoding::Json)
}

#[derive(Deserialize)]
struct ExecuteBody {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    instruction: Option<Instruction>,
    #[serde(default)]
    params: Option<Params>,
}

fn outcome_response(encoding: Encoding, limit: usize, r: Result<Outcome, RequestError>) -> Response {
    let msg = match r {
        Ok(Outcome::Reply(reply)) => Message::result(None, reply),
        Ok(Outcome::Node { version, node }) => Message::node(None, version, node),
        Err(e) => return error_reply(encoding, &e),
    };
    match Codec::plain(encoding, usize::MAX).encode_limited(&msg, limit) {
        Ok(_) => reply(StatusCode::OK, encoding, &msg),
        Err(e) => error_reply(encoding, &RequestError::new(ErrorCode::ResultTooLarge, e.to_string())),
    }
}

async fn http_execute(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (req_enc, reply_enc) = match http_encodings(&headers) {
        Ok(e) => e,
        Err(e) => return error_reply(accept_encoding(&headers), &e),
    };
    let prepared = (|| {
        let q = query_map(query)?;
        let (role, permit) = http_admit(&shared, &headers, &q)?;
        let body = body.map_err(|e| match e {
            BytesRejection::FailedToBufferBody(_) => RequestError::new(
                ErrorCode::TooLarge,
                format!("the body is over the limit of {} bytes (or was cut off): {e}", shared.limits.max_frame_bytes),
            ),
            other => RequestError::bad_request(other.to_string()),
        })?;
        let parsed: ExecuteBody = decode_value(req_enc, &body, shared.limits.max_frame_bytes)
            .map_err(|e| RequestError::new(e.code(), e.to_string()))?;
        let source = match (parsed.text, parsed.instruction) {
            (Some(t), None) => Source::Text(t),
            (None, Some(i)) => Source::Structured(i),
            _ => return Err(RequestError::bad_request("give exactly one of `text` and `instruction`")),
        };
        let params = parsed.params.unwrap_or_default().into_iter().collect();
        Ok((role, permit, source, params))
    })();
    let (role, permit, source, params) = match prepared {
        Ok(p) => p,
        Err(e) => return error_reply(reply_enc, &e),
    };
    let limit = shared.limits.max_result_bytes;
    let mut timer = shared.figures.start(Kind::Execute);
    let response =
        work::run(&shared, role, Job::Execute { source, params }, move |r| outcome_response(reply_enc, limit, r)).await;
    if !response.status().is_success() {
        timer.fail();
    }
    drop(timer);
    drop(permit);
    response
}

async fn http_node(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    let encoding = accept_encoding(&headers);
    let prepared = (|| {
        let q = query_map(query)?;
        let (role, permit) = http_admit(&shared, &headers, &q)?;
        let path = q.get("path").cloned().unwrap_or_default();
        let params = q
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix("p.").map(|name| (name.to_string(), espalier_protocol::ParamValue::Text(v.clone())))
            })
            .collect();
        Ok::<_, RequestError>((role, permit, path, params))
    })();
    let (role, permit, path, params) = match prepared {
        Ok(p) => p,
        Err(e) => return error_reply(encoding, &e),
    };
    let limit = shared.limits.max_result_bytes;
    let mut timer = shared.figures.start(Kind::Get);
    let response =
        work::run(&shared, role, Job::Get { path, params }, move |r| outcome_response(encoding, limit, r)).await;
    if !response.status().is_success() {
        timer.fail();
    }
    drop(timer);
    drop(permit);
    response
}

async fn http_status(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    let encoding = accept_encoding(&headers);
    match query_map(query).and_then(|q| shared.authenticate(&headers, q.get("token").map(String::as_str))) {
        Ok(_) => reply(StatusCode::OK, encoding, &shared.status(None)),
        Err(e) => error_reply(encoding, &e),
    }
}

async fn http_health(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let encoding = accept_encoding(&headers);
    if shared.is_shutting_down() {
        return error_reply(encoding, &RequestError::new(ErrorCode::ShuttingDown, "the server is shutting down"));
    }
    reply(StatusCode::OK, encoding, &Message::ok(None))
}

async fn http_shutdown(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    let encoding = accept_encoding(&headers);
    let role = match query_map(query).and_then(|q| shared.authenticate(&headers, q.get("token").map(String::as_str))) {
        Ok(r) => r,
        Err(e) => return error_reply(encoding, &e),
    };
    if role < Role::Admin {
        return error_reply(
            encoding,
            &RequestError::new(ErrorCode::Forbidden, format!("shutdown needs the admin role; this token has {role}")),
        );
    }
    shared.begin_shutdown();
    reply(StatusCode::OK, encoding, &Message::ok(None))
}

/// `GET /metrics`: the server's counters in Prometheus's text format. Needs a token (any role)
/// when the server has tokens, like `/v1/status`.
async fn http_metrics(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    if let Err(e) = query_map(query).and_then(|q| shared.authenticate(&headers, q.get("token").map(String::as_str))) {
        return error_reply(accept_encoding(&headers), &e);
    }
    let text = shared.figures.prometheus(shared.engine.database(), &shared.gauges());
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"))],
        text,
    )
        .into_response()
}

/// `GET /v1/backup` (admin): a consistent snapshot streamed as the JSON dump (`backup.rs`).
/// It holds a session slot until the dump is written, so shutdown waits for it (up to the grace).
async fn http_backup(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    let encoding = accept_encoding(&headers);
    let (role, permit) = match query_map(query).and_then(|q| http_admit(&shared, &headers, &q)) {
        Ok(r) => r,
        Err(e) => return error_reply(encoding, &e),
    };
    if role < Role::Admin {
        return error_reply(
            encoding,
            &RequestError::new(ErrorCode::Forbidden, format!("a backup needs the admin role; this token has {role}")),
        );
    }
    crate::backup::stream(shared, permit).await
}
