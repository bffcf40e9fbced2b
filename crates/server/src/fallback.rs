//! HTTP answers holding one protocol message, and every HTTP error in the protocol's JSON
//! error shape (`{"kind":"error","code":…,"message":…}`): unknown paths, wrong methods, and
//! any response some layer below produced with an error status and an empty body.

use axum::body::HttpBody;
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use espalier_protocol::{Codec, Encoding, ErrorCode, Message, RequestError};

/// An HTTP response holding one protocol message.
pub(crate) fn reply(status: StatusCode, encoding: Encoding, msg: &Message) -> Response {
    match Codec::plain(encoding, usize::MAX).to_bytes(msg) {
        Ok(bytes) => {
            (status, [(header::CONTENT_TYPE, HeaderValue::from_static(encoding.content_type()))], bytes).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the reply: {e}")).into_response(),
    }
}

/// An error, in the error shape, with the status its code stands for.
pub(crate) fn error_reply(encoding: Encoding, e: &RequestError) -> Response {
    let status = StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    reply(status, encoding, &Message::from_error(None, e))
}

const ENDPOINTS: &str = "the server has GET /ws (WebSocket), POST /v1/execute, GET /v1/node, GET /v1/status, \
     GET /v1/health, POST /v1/shutdown, GET /metrics, GET /health, GET /v1/backup, the console at GET / and its \
     GET /v1/schema, /v1/entries and /v1/figures (see docs/protocol.md)";

/// A path no route serves.
pub async fn not_found() -> Response {
    error_reply(Encoding::Json, &RequestError::new(ErrorCode::BadRequest, format!("no such endpoint; {ENDPOINTS}")))
}

/// A served path asked with a method it does not take (`GET /v1/execute`): 405, with the
/// error shape.
pub async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let e = RequestError::new(ErrorCode::BadRequest, format!("{method} is not allowed on {}; {ENDPOINTS}", uri.path()));
    reply(StatusCode::METHOD_NOT_ALLOWED, Encoding::Json, &Message::from_error(None, &e))
}

/// The code a bare error status stands for.
fn code_of(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        401 => ErrorCode::Unauthorized,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::KeyMissing,
        408 | 504 => ErrorCode::Timeout,
        413 => ErrorCode::TooLarge,
        429 => ErrorCode::TooManyRequests,
        503 => ErrorCode::TooManySessions,
        s if s >= 500 => ErrorCode::Internal,
        _ => ErrorCode::BadRequest,
    }
}

/// Gives an error response with an empty body (made by a layer below the handlers, such as
/// axum's own rejections) the error shape, keeping its status.
pub async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let empty = response.body().size_hint().exact() == Some(0);
    if !(status.is_client_error() || status.is_server_error()) || !empty {
        return response;
    }
    let reason = status.canonical_reason().unwrap_or("error");
    let e = RequestError::new(code_of(status), format!("{} {reason}", status.as_u16()));
    reply(status, Encoding::Json, &Message::from_error(None, &e))
}
