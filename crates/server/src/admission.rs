//! Who gets a connection: at most `max_connections_per_address` open TCP connections from one
//! IP address (past it a connection is answered 503 `too_many_sessions` and closed), and a
//! connection's first request must arrive within `request_timeout` (one that sends nothing,
//! or its headers too slowly, is closed; so is one whose request is refused for its token).
//! Both hold before any session slot is taken, so connections that never become sessions
//! cannot use up the server's descriptors either.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use espalier_protocol::{Codec, Encoding, ErrorCode, Message, RequestError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Sleep;

/// Refused connections being answered at once (each for at most [`REFUSE_WAIT`]); past
/// this, refused connections are closed without an answer.
const MAX_REFUSING: usize = 64;
/// How long a refused connection is given to take its answer.
const REFUSE_WAIT: Duration = Duration::from_secs(1);

/// Open connections by address.
#[derive(Default)]
struct Counts(Mutex<HashMap<IpAddr, usize>>);

impl Counts {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One connection's place in its address's count, given back when the connection closes.
struct AddressSlot {
    counts: Arc<Counts>,
    ip: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// The server's listener, as axum serves it.
pub struct Admission {
    listener: TcpListener,
    counts: Arc<Counts>,
    per_address: usize,
    request_timeout: Duration,
    refusing: Arc<Semaphore>,
}

impl Admission {
    /// Admits connections from `listener`: at most `per_address` open per IP address, each
    /// with `request_timeout` for its first request.
    pub fn new(listener: TcpListener, per_address: usize, request_timeout: Duration) -> Admission {
        Admission {
            listener,
            counts: Arc::default(),
            per_address,
            request_timeout,
            refusing: Arc::new(Semaphore::new(MAX_REFUSING)),
        }
    }

    fn take(&self, ip: IpAddr) -> Option<AddressSlot> {
        let mut counts = self.counts.lock();
        let n = counts.entry(ip).or_insert(0);
        if *n >= self.per_address {
            return None;
        }
        *n += 1;
        Some(AddressSlot { counts: self.counts.clone(), ip })
    }

    /// Answers an over-limit connection 503 with the error shape, then closes it.
    fn refuse(&self, mut stream: TcpStream, ip: IpAddr) {
        let Ok(permit) = self.refusing.clone().try_acquire_owned() else {
            return; // many refusals at once: just close
        };
        let e = RequestError::new(
            ErrorCode::TooManySessions,
            format!(
                "{ip} has its maximum of {} open connections (max_connections_per_address); close one first",
                self.per_address
            ),
        );
        let body =
            Codec::plain(Encoding::Json, usize::MAX).to_bytes(&Message::from_error(None, &e)).unwrap_or_default();
        let head = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        tokio::spawn(async move {
            let _permit = permit;
            let _ = tokio::time::timeout(REFUSE_WAIT, async {
                stream.write_all(head.as_bytes()).await?;
                stream.write_all(&body).await?;
                stream.shutdown().await?;
                // Read what the client sent until it closes: closing with unread bytes would
                // reset the connection, and the client might lose the answer.
                let mut sink = [0u8; 1024];
                while stream.read(&mut sink).await? > 0 {}
                Ok::<_, io::Error>(())
            })
            .await;
        });
    }
}

impl Listener for Admission {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        loop {
            let (stream, addr) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of descriptors and the like: wait rather than spin (as axum does).
                    crate::config::log::warn("cannot accept a connection", &[("error", &e.to_string())]);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            // Small replies must not wait for Nagle's algorithm.
            let _ = stream.set_nodelay(true);
            match self.take(addr.ip()) {
                Some(slot) => return (Conn::new(stream, slot, self.request_timeout), addr),
                None => self.refuse(stream, addr.ip()),
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// An accepted connection: reads fail with `TimedOut` once the request timeout has passed
/// without a request having reached the router.
pub struct Conn {
    stream: TcpStream,
    _slot: AddressSlot,
    started: Arc<AtomicBool>,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl Conn {
    fn new(stream: TcpStream, slot: AddressSlot, timeout: Duration) -> Conn {
        Conn {
            stream,
            _slot: slot,
            started: Arc::new(AtomicBool::new(false)),
            deadline: Some(Box::pin(tokio::time::sleep(timeout))),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(deadline) = this.deadline.as_mut() {
            if this.started.load(Ordering::Acquire) {
                this.deadline = None;
            } else if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request within the request timeout (request_timeout_ms)",
                )));
            }
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// What a request knows of its connection.
#[derive(Clone)]
pub struct Peer {
    started: Arc<AtomicBool>,
}

impl Connected<IncomingStream<'_, Admission>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Admission>) -> Peer {
        Peer { started: stream.io().started.clone() }
    }
}

/// Middleware: a request has reached the router, so its connection is past the request
/// timeout (a WebSocket session is then watched by its own idle timeout). A request refused
/// for its token closes its connection after the answer, so that a client without a valid
/// token cannot keep connections open.
pub async fn started(request: Request, next: Next) -> Response {
    if let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<Peer>>() {
        peer.started.store(true, Ordering::Release);
    }
    let mut response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
