//! The Rust client of the Espalier server (`docs/protocol.md`).
//!
//! One [`Client`] is one WebSocket session. Requests are pipelined: any number of tasks may
//! call it at once, each request gets its own id, and replies are matched by id whatever
//! order they come in. Subscriptions are [`Subscription`] streams of [`Event`]s.
//!
//! ```no_run
//! # async fn demo() -> Result<(), espalier_client::ClientError> {
//! use espalier_client::{Client, ClientOptions, Event};
//! use futures_util::StreamExt;
//!
//! let client = Client::connect("ws://127.0.0.1:7420", ClientOptions::default()).await?;
//! let reply = client.execute("collection select . 'Orders' 'Qty' -> number : 'Quantity'", None).await?;
//! let mut sub = client.subscribe_node(". 'Machines' : \"M1\"", None, None).await?;
//! client.execute("command 'pulse' ( 'machine' -> \"M1\" )", None).await?;
//! while let Some(event) = sub.next().await {
//!     if let Event::Changes { version, changes } = event { println!("{version}: {changes:?}"); break; }
//! }
//! # Ok(()) }
//! ```
//!
//! [`blocking::Client`] wraps it for code without an async runtime.

#![warn(missing_docs)]

pub mod blocking;
mod subscription;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use espalier_protocol::{
    Codec, Compression, Encoding, ErrorCode, Frame, Instruction, Kind, Limits, Message, Params, QueryResult, Reply,
    Role,
};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub use espalier_protocol as protocol;
pub use subscription::{Event, Subscription};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long `connect` waits for the server's `welcome`.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a client call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The connection could not be made.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The server refused the session (bad token, too many sessions, bad parameter, …).
    #[error("the server refused the session (HTTP {status}): error[{code}]: {message}")]
    Refused {
        /// The HTTP status of the refusal.
        status: u16,
        /// The server's error code.
        code: ErrorCode,
        /// The server's explanation.
        message: String,
    },
    /// The server answered the request with an error.
    #[error("error[{code}]: {message}")]
    Server {
        /// The error code.
        code: ErrorCode,
        /// The server's explanation.
        message: String,
    },
    /// The session is closed (by either side).
    #[error("the connection is closed{}", close_suffix(.code, .reason))]
    Closed {
        /// The WebSocket close code, if the server sent one.
        code: Option<u16>,
        /// Why it closed, as far as known.
        reason: String,
    },
    /// The request is larger than the server accepts (checked before sending).
    #[error("the request is {size} bytes, over the server's limit of {limit} bytes")]
    TooLarge {
        /// The encoded request's size in bytes.
        size: usize,
        /// The server's `max_frame_bytes`.
        limit: usize,
    },
    /// A message could not be encoded or decoded.
    #[error("{0}")]
    Codec(String),
    /// The server sent something the protocol does not allow here.
    #[error("unexpected reply: {0}")]
    Unexpected(String),
}

fn close_suffix(code: &Option<u16>, reason: &str) -> String {
    match (code, reason.is_empty()) {
        (Some(c), false) => format!(" ({c}: {reason})"),
        (Some(c), true) => format!(" ({c})"),
        (None, false) => format!(" ({reason})"),
        (None, true) => String::new(),
    }
}

impl ClientError {
    /// The protocol error code, for errors that have one.
    pub fn code(&self) -> Option<&ErrorCode> {
        match self {
            ClientError::Server { code, .. } | ClientError::Refused { code, .. } => Some(code),
            _ => None,
        }
    }

    fn from_message(m: &Message) -> ClientError {
        ClientError::Server {
            code: m.error_code(),
            message: m.message.clone().unwrap_or_else(|| "(no message)".into()),
        }
    }
}

/// Session settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How messages are encoded (JSON or MessagePack).
    pub encoding: Encoding,
    /// How messages are compressed.
    pub compression: Compression,
    /// Messages shorter than this are not compressed.
    pub compress_min: usize,
    /// Sent as `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Largest message accepted from the server.
    pub max_message: usize,
    /// Events buffered per subscription before it overflows (see [`Event::Overflow`]).
    pub subscription_buffer: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            encoding: Encoding::Msgpack,
            compression: Compression::None,
            compress_min: espalier_protocol::DEFAULT_COMPRESS_MIN,
            token: None,
            max_message: 256 << 20,
            subscription_buffer: 4096,
        }
    }
}

impl ClientOptions {
    /// Sets the message encoding.
    pub fn encoding(mut self, e: Encoding) -> Self {
        self.encoding = e;
        self
    }

    /// Sets the compression.
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }

    /// Sets the size below which messages are not compressed.
    pub fn compress_min(mut self, n: usize) -> Self {
        self.compress_min = n;
        self
    }

    /// Sets the bearer token sent when the session opens.
    pub fn token(mut self, t: impl Into<String>) -> Self {
        self.token = Some(t.into());
        self
    }
}

/// What the server said in `welcome`.
#[derive(Debug, Clone, PartialEq)]
pub struct Welcome {
    /// The database version when the session opened.
    pub version: u64,
    /// What the session may do, given by its token.
    pub role: Role,
    /// The server's name and version.
    pub server: String,
    /// The bounds the server enforces; requests over `max_frame_bytes` are refused before sending.
    pub limits: Limits,
}

/// A subscription's channel as the reader task sees it.
pub(crate) struct SubRoute {
    tx: mpsc::Sender<Message>,
    state: Arc<subscription::State>,
}

pub(crate) struct Inner {
    sink: tokio::sync::Mutex<SplitSink<Ws, WsMessage>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Message>>>,
    subs: Mutex<HashMap<u64, SubRoute>>,
    /// Subscriptions whose `subscribed` arrived and whose caller has not taken them yet.
    fresh: Mutex<HashMap<u64, Arc<subscription::State>>>,
    next_id: AtomicU64,
    codec: Codec,
    welcome: Welcome,
    closed: Mutex<Option<ClientError>>,
    subscription_buffer: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A session with a server.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("welcome", &self.inner.welcome).finish_non_exhaustive()
    }
}

/// `ws://host:port` (or with `/ws`, or `http://`) to the session URL with its parameters.
fn session_url(url: &str, opts: &ClientOptions) -> String {
    let base = url.trim_end_matches('/');
    let base = if let Some(rest) = base.strip_prefix("http://") {
        format!("ws://{rest}")
    } else if let Some(rest) = base.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if base.contains("://") {
        base.to_string()
    } else {
        format!("ws://{base}")
    };
    let base = if base.ends_with("/ws") { base } else { format!("{base}/ws") };
    format!(
        "{base}?encoding={}&compression={}&compress_min={}",
        opts.encoding.as_str(),
        opts.compression.as_str(),
        opts.compress_min
    )
}

fn to_ws(frame: Frame) -> WsMessage {
    match frame {
        Frame::Text(t) => WsMessage::Text(t.into()),
        Frame::Binary(b) => WsMessage::Binary(b.into()),
    }
}

impl Client {
    /// Opens a session: `url` is `ws://host:port` (the `/ws` path is added if missing).
    pub async fn connect(url: &str, opts: ClientOptions) -> Result<Client, ClientError> {
        let mut request =
            session_url(url, &opts).into_client_request().map_err(|e| ClientError::Connect(e.to_string()))?;
        if let Some(token) = &opts.token {
            let value = format!("Bearer {token}")
                .parse()
                .map_err(|_| ClientError::Connect("the token is not a valid header value".into()))?;
            request.headers_mut().insert("authorization", value);
        }
        let config = WebSocketConfig::default()
            .max_message_size(Some(opts.max_message))
            .max_frame_size(Some(opts.max_message))
            .read_buffer_size(espalier_protocol::WS_READ_BUFFER);
        let (ws, _) =
            tokio_tungstenite::connect_async_with_config(request, Some(config), true).await.map_err(refusal)?;
        let (sink, mut stream) = ws.split();
        let codec = Codec::new(opts.encoding, opts.compression, opts.compress_min, opts.max_message);
        // The server's first message is `welcome`.
        let first = tokio::time::timeout(WELCOME_TIMEOUT, stream.next())
            .await
            .map_err(|_| ClientError::Connect("no welcome from the server".into()))?;
        let welcome = match first {
            Some(Ok(m)) => match decode(&codec, m)? {
                Some(w) if w.kind == Kind::Welcome => welcome_of(&w)?,
                other => return Err(ClientError::Unexpected(format!("expected welcome, got {other:?}"))),
            },
            Some(Err(e)) => return Err(ClientError::Connect(e.to_string())),
            None => return Err(ClientError::Closed { code: None, reason: "closed before welcome".into() }),
        };
        let inner = Arc::new(Inner {
            sink: tokio::sync::Mutex::new(sink),
            pending: Mutex::new(HashMap::new()),
            subs: Mutex::new(HashMap::new()),
            fresh: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            codec,
            welcome,
            closed: Mutex::new(None),
            subscription_buffer: opts.subscription_buffer.max(1),
        });
        tokio::spawn(read_loop(Arc::downgrade(&inner), stream));
        Ok(Client { inner })
    }

    /// What the server said when the session opened.
    pub fn welcome(&self) -> &Welcome {
        &self.inner.welcome
    }

    /// The codec the session encodes, compresses and decodes its messages with.
    pub fn codec(&self) -> Codec {
        self.inner.codec
    }

    /// The error that closed the session, if it is closed.
    pub fn closed(&self) -> Option<ClientError> {
        lock(&self.inner.closed).clone()
    }

    /// Sends a request (its `id` is assigned here) and waits for its reply. An `error` reply
    /// becomes `Err(ClientError::Server)`.
    pub async fn request(&self, msg: Message) -> Result<Message, ClientError> {
        let reply = self.inner.call(msg).await?;
        if reply.kind == Kind::Error {
            return Err(ClientError::from_message(&reply));
        }
        Ok(reply)
    }

    /// Sends a raw frame (tests of malformed input); the reply, if any, is not awaited.
    pub async fn send_raw(&self, frame: WsMessage) -> Result<(), ClientError> {
        self.inner.send(frame).await
    }

    /// Sends a `ping` and waits for the `pong`.
    pub async fn ping(&self) -> Result<(), ClientError> {
        expect(self.request(Message::ping(0)).await?, Kind::Pong).map(|_| ())
    }

    /// Runs an instruction given as text.
    pub async fn execute(&self, text: &str, params: Option<Params>) -> Result<Reply, ClientError> {
        result_of(self.request(Message::execute_text(0, text, params)).await?)
    }

    /// Runs a structured instruction: the wire form, or a syntax tree
    /// (`espalier_instruction::ast::Instruction`), which converts into it.
    pub async fn execute_instruction(
        &self,
        instr: impl Into<Instruction>,
        params: Option<Params>,
    ) -> Result<Reply, ClientError> {
        result_of(self.request(Message::execute(0, instr, params)).await?)
    }

    /// Runs a collection query (text) and returns its rows.
    pub async fn query(&self, text: &str, params: Option<Params>) -> Result<QueryResult, ClientError> {
        match self.execute(text, params).await? {
            Reply::Query(q) => Ok(q),
            other => Err(ClientError::Unexpected(format!("not a query result: {other:?}"))),
        }
    }

    /// Reads one node (text node path, `""` for the root): (version, node in dump form).
    pub async fn get(&self, path: &str, params: Option<Params>) -> Result<(u64, serde_json::Value), ClientError> {
        let m = expect(self.request(Message::get(0, path, params)).await?, Kind::Node)?;
        match (m.version, m.node) {
            (Some(v), Some(n)) => Ok((v, n)),
            _ => Err(ClientError::Unexpected("a node reply without version or node".into())),
        }
    }

    /// Subscribes to a node and its subtree; `since` resumes after that version.
    pub async fn subscribe_node(
        &self,
        path: &str,
        params: Option<Params>,
        since: Option<u64>,
    ) -> Result<Subscription, ClientError> {
        self.subscribe(Message::subscribe_node(0, path, params, since)).await
    }

    /// Subscribes to a collection query (text); `since` resumes after that version.
    pub async fn subscribe_query(
        &self,
        text: &str,
        params: Option<Params>,
        since: Option<u64>,
    ) -> Result<Subscription, ClientError> {
        self.subscribe(Message::subscribe_query(0, text, params, since)).await
    }

    async fn subscribe(&self, msg: Message) -> Result<Subscription, ClientError> {
        let m = expect(self.request(msg).await?, Kind::Subscribed)?;
        let id = m.subscription.ok_or_else(|| ClientError::Unexpected("subscribed without a number".into()))?;
        // The reader registered it before handing the reply over (it may have overflowed
        // already; its stream will say so).
        let state = lock(&self.inner.fresh).remove(&id);
        let Some(state) = state else {
            return Err(ClientError::Closed { code: None, reason: "the session closed while subscribing".into() });
        };
        Ok(Subscription::new(self.clone(), m, state))
    }

    pub(crate) async fn unsubscribe(&self, subscription: u64) -> Result<(), ClientError> {
        expect(self.request(Message::unsubscribe(0, subscription)).await?, Kind::Unsubscribed).map(|_| ())
    }

    /// The server's `status`.
    pub async fn status(&self) -> Result<Message, ClientError> {
        expect(self.request(Message::status_request(0)).await?, Kind::Status)
    }

    /// Asks the server to shut down (admin role).
    pub async fn shutdown(&self) -> Result<(), ClientError> {
        expect(self.request(Message::shutdown(0)).await?, Kind::Ok).map(|_| ())
    }

    /// Closes the session.
    pub async fn close(&self) -> Result<(), ClientError> {
        let mut sink = self.inner.sink.lock().await;
        sink.close().await.map_err(|e| ClientError::Closed { code: None, reason: e.to_string() })
    }
}

fn expect(m: Message, kind: Kind) -> Result<Message, ClientError> {
    if m.kind == kind {
        Ok(m)
    } else {
        Err(ClientError::Unexpected(format!("expected {kind}, got {}", m.kind)))
    }
}

fn result_of(m: Message) -> Result<Reply, ClientError> {
    let m = expect(m, Kind::Result)?;
    m.result.ok_or_else(|| ClientError::Unexpected("a result without `result`".into()))
}

fn welcome_of(m: &Message) -> Result<Welcome, ClientError> {
    match (m.version, m.role, m.limits) {
        (Some(version), Some(role), Some(limits)) => {
            Ok(Welcome { version, role, server: m.server.clone().unwrap_or_default(), limits })
        }
        _ => Err(ClientError::Unexpected("a welcome without version, role or limits".into())),
    }
}

/// A refused handshake, with the server's error if its body holds one.
fn refusal(e: tokio_tungstenite::tungstenite::Error) -> ClientError {
    use tokio_tungstenite::tungstenite::Error;
    match e {
        Error::Http(response) => {
            let status = response.status().as_u16();
            let parsed = response.body().as_deref().and_then(|b| serde_json::from_slice::<Message>(b).ok());
            match parsed {
                Some(m) if m.kind == Kind::Error => {
                    ClientError::Refused { status, code: m.error_code(), message: m.message.unwrap_or_default() }
                }
                _ => ClientError::Connect(format!("HTTP {status}")),
            }
        }
        other => ClientError::Connect(other.to_string()),
    }
}

fn decode(codec: &Codec, m: WsMessage) -> Result<Option<Message>, ClientError> {
    let decoded = match m {
        WsMessage::Text(t) => codec.decode_text(t.as_str()),
        WsMessage::Binary(b) => codec.decode_binary(&b),
        _ => return Ok(None),
    };
    decoded.map(Some).map_err(|u| ClientError::Codec(format!("cannot read a server message: {}", u.error)))
}

impl Inner {
    fn is_closed(&self) -> Option<ClientError> {
        lock(&self.closed).clone()
    }

    async fn send(&self, frame: WsMessage) -> Result<(), ClientError> {
        if let Some(e) = self.is_closed() {
            return Err(e);
        }
        let mut sink = self.sink.lock().await;
        sink.send(frame).await.map_err(|e| ClientError::Closed { code: None, reason: e.to_string() })
    }

    /// Sends `msg` with a fresh id and waits for the message with that id.
    async fn call(&self, mut msg: Message) -> Result<Message, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        msg.id = Some(id);
        // The server bounds the message before and after decompression: check the plain size,
        // since an error about a frame it cannot read cannot name the request.
        let bytes = self.codec.to_bytes(&msg).map_err(|e| ClientError::Codec(e.to_string()))?;
        let limit = usize::try_from(self.welcome.limits.max_frame_bytes).unwrap_or(usize::MAX);
        if bytes.len() > limit {
            return Err(ClientError::TooLarge { size: bytes.len(), limit });
        }
        let frame = self.codec.frame(bytes).map_err(|e| ClientError::Codec(e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        if let Err(e) = self.send(to_ws(frame)).await {
            lock(&self.pending).remove(&id);
            return Err(e);
        }
        rx.await.map_err(|_| {
            self.is_closed().unwrap_or(ClientError::Closed { code: None, reason: "the session ended".into() })
        })
    }

    /// Routes one message from the server.
    fn route(self: &Arc<Self>, m: Message) {
        if let Some(sub) = m.subscription.filter(|_| m.id.is_none()) {
            // A push for a subscription: notify, reload, or an error that ends it.
            let route = lock(&self.subs).get(&sub).map(|r| (r.tx.clone(), r.state.clone()));
            if let Some((tx, state)) = route {
                let ends = m.kind == Kind::Error;
                match tx.try_send(m) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        // The application reads too slowly: end the subscription rather than
                        // grow without bound; its stream says `Overflow` after what it holds.
                        state.overflow();
                        lock(&self.subs).remove(&sub);
                        let inner = Arc::downgrade(self);
                        tokio::spawn(async move {
                            if let Some(inner) = inner.upgrade() {
                                let _ = inner.call(Message::unsubscribe(0, sub)).await;
                            }
                        });
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        lock(&self.subs).remove(&sub);
                    }
                }
                if ends {
                    lock(&self.subs).remove(&sub);
                }
            }
            return;
        }
        let Some(id) = m.id else {
            // An error without id answers an unreadable frame; nothing waits for it by id.
            return;
        };
        if m.kind == Kind::Subscribed {
            if let Some(sub) = m.subscription {
                let (tx, rx) = mpsc::channel(self.subscription_buffer);
                let state = Arc::new(subscription::State::new(rx));
                lock(&self.fresh).insert(sub, state.clone());
                lock(&self.subs).insert(sub, SubRoute { tx, state });
            }
        }
        if m.kind == Kind::Unsubscribed {
            if let Some(sub) = m.subscription {
                lock(&self.subs).remove(&sub);
            }
        }
        if let Some(waiter) = lock(&self.pending).remove(&id) {
            let _ = waiter.send(m);
        }
    }

    /// The session is over: fail everything waiting.
    fn close_all(&self, why: ClientError) {
        lock(&self.closed).get_or_insert(why);
        lock(&self.pending).clear();
        lock(&self.subs).clear();
        lock(&self.fresh).clear();
    }
}

async fn read_loop(inner: std::sync::Weak<Inner>, mut stream: SplitStream<Ws>) {
    let mut why = ClientError::Closed { code: None, reason: "the server closed the connection".into() };
    while let Some(item) = stream.next().await {
        let Some(inner) = inner.upgrade() else { return };
        match item {
            Ok(WsMessage::Close(frame)) => {
                why = ClientError::Closed {
                    code: frame.as_ref().map(|f| u16::from(f.code)),
                    reason: frame.map(|f| f.reason.to_string()).unwrap_or_default(),
                };
                break;
            }
            Ok(m) => match decode(&inner.codec, m) {
                Ok(Some(msg)) => inner.route(msg),
                Ok(None) => {}
                Err(e) => {
                    why = e;
                    break;
                }
            },
            Err(e) => {
                why = ClientError::Closed { code: None, reason: e.to_string() };
                break;
            }
        }
    }
    if let Some(inner) = inner.upgrade() {
        inner.close_all(why);
    }
}
