//! `GET /v1/backup` (admin): the database as of one snapshot, streamed as the JSON dump that
//! `espalier export` writes and `espalier import` reads (docs/dump-format.md). Writes go on
//! while it streams; the dump holds exactly the commits up to its `version`.
//!
//! A blocking task reads the snapshot and writes the dump into a bounded channel that the
//! response body drains, so memory stays at a few chunks whatever the database's size, and a
//! client that goes away stops the export (the channel closes, the next write fails). A
//! failure after the headers are sent aborts the body: the chunked transfer then has no final
//! chunk, which `espalier backup` detects, so a partial dump is never taken for a whole one.

use std::io::{self, Write};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::shared::Shared;

/// Chunks in flight between the export and the socket.
const CHANNEL_CHUNKS: usize = 8;

/// The response streaming the dump; the snapshot is taken before this returns, so the dump's
/// version is at least every commit acknowledged before the request was received.
pub(crate) async fn stream(shared: Arc<Shared>, permit: OwnedSemaphorePermit) -> Response {
    let (tx, mut rx) = mpsc::channel::<Result<Bytes, io::Error>>(CHANNEL_CHUNKS);
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<Result<u64, String>>();
    let engine = shared.engine.clone();
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let database = engine.database();
        let snapshot = match database.snapshot() {
            Ok(s) => s,
            Err(e) => {
                let _ = started_tx.send(Err(format!("reading the database: {e}")));
                return;
            }
        };
        let version = match snapshot.version() {
            Ok(v) => v,
            Err(e) => {
                let _ = started_tx.send(Err(format!("reading the database's version: {e}")));
                return;
            }
        };
        let _ = started_tx.send(Ok(version));
        let mut out = ChannelWriter { tx: tx.clone() };
        if let Err(e) = espalier_data::export(&snapshot.graph(), version, &mut out, &mut |_| {}) {
            // Aborts the body (the client sees the transfer cut off), unless it is gone already.
            let _ = tx.blocking_send(Err(io::Error::other(format!("the backup failed: {e}"))));
        }
    });
    let version = match started_rx.await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        Err(_) => return (StatusCode::INTERNAL_SERVER_ERROR, "the backup task ended early").into_response(),
    };
    let body = Body::from_stream(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(&version.to_string()) {
        headers.insert("espalier-version", v);
    }
    response
}

/// Sends each write as one chunk; fails with `BrokenPipe` once the response is gone.
struct ChannelWriter {
    tx: mpsc::Sender<Result<Bytes, io::Error>>,
}

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.tx
            .blocking_send(Ok(Bytes::copy_from_slice(buf)))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the backup's client went away"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
