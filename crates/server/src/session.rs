//! One WebSocket session: a reader that decodes and dispatches requests (each runs on its own
//! task, so replies go out in any order), and a writer that sends replies and pushes.
//!
//! Bounds: at most `max_in_flight` requests in progress (the excess is answered
//! `too_many_requests`); the outgoing queue holds at most `max_in_flight + 32` messages, and
//! a request reserves its reply's place before it starts, so a reply never waits for room and
//! engine threads never wait for a slow client. When the queue is full, or holds more than
//! `session_queue_bytes` (see `outbox`), the reader stops reading, so a client that does not
//! read its replies only slows itself; at most [`reads_per_session`] of its reads build
//! replies at once.
//!
//! Liveness: a session the server hears nothing from for half of `idle_timeout` is pinged;
//! one that still says nothing (not even the pong its WebSocket layer answers by itself) by
//! `idle_timeout` is closed with 1008 `idle`; one whose writer cannot hand anything to the
//! socket for `idle_timeout` is closed as a `slow_reader`.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::{close_code, Message as WsMessage, WebSocket};
use espalier_instruction::ParamValue;
use espalier_protocol::{Codec, ErrorCode, Message, Request, RequestBody, Role, Source, Undecodable};
use futures_util::stream::SplitStream;
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::encode::{encode_error, encode_message, encode_reply};
use crate::exec;
use crate::figures::{self, InFlight};
use crate::outbox::{self, Outbox, Outgoing, Slot};
use crate::shared::Shared;
use crate::subscription;
use crate::subscription::{lock_subs, Subscriptions};
use crate::work::{self, Job, Outcome, INLINE_BUDGET, INLINE_CHECK_MAX};

mod write;
use write::write_loop;

/// Messages beyond the in-flight replies the outgoing queue holds (errors, pushes).
const QUEUE_SLACK: usize = 32;
/// How long closing waits for the writer to deliver what is queued.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How often a closing session checks whether its requests have finished.
const DRAIN_POLL: Duration = Duration::from_millis(10);

/// Reads of one session that may build replies at once (on the blocking pool): enough to use
/// the machine's cores, few enough that a client pipelining many large queries holds only a
/// few replies in memory that it has not read.
pub fn reads_per_session() -> usize {
    static READS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *READS.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get()).max(2))
}

fn outcome_message(id: u64, r: Result<Outcome, espalier_protocol::RequestError>) -> Message {
    match r {
        Ok(Outcome::Reply(reply)) => Message::result(Some(id), reply),
        Ok(Outcome::Node { version, node }) => Message::node(Some(id), version, node),
        Err(e) => Message::from_error(Some(id), &e),
    }
}

struct Session {
    shared: Arc<Shared>,
    role: Role,
    codec: Codec,
    tx: Outbox,
    inflight: Arc<Semaphore>,
    /// Reads building replies on the blocking pool (see [`reads_per_session`]).
    reads: Arc<Semaphore>,
    subs: Subscriptions,
    next_sub: u64,
}

/// Serves one upgraded WebSocket until either side closes it or the server shuts down.
pub async fn run(socket: WebSocket, shared: Arc<Shared>, role: Role, codec: Codec, permit: OwnedSemaphorePermit) {
    let _permit = permit; // the session's slot, held until it has closed
    let (sink, mut stream) = socket.split();
    let max_in_flight = shared.limits.max_in_flight;
    let (tx, inbox) = outbox::channel(&shared.memory, max_in_flight + QUEUE_SLACK);
    let writer = tokio::spawn(write_loop(sink, inbox, shared.limits.idle_timeout));
    let mut session = Session {
        shared,
        role,
        codec,
        tx,
        inflight: Arc::new(Semaphore::new(max_in_flight)),
        reads: Arc::new(Semaphore::new(reads_per_session())),
        subs: Arc::new(Mutex::new(HashMap::new())),
        next_sub: 1,
    };
    let welcome = Message::welcome(
        session.shared.engine.database().version(),
        role,
        codec.encoding,
        codec.compression,
        codec.compress_min as u64,
        session.shared.limits.announced(),
    );
    let (code, reason) = if session.tx.send(encode_message(&codec, &welcome)).await.is_ok() {
        session.read_loop(&mut stream).await
    } else {
        (close_code::NORMAL, String::new())
    };
    session.finish(code, reason, writer).await;
}

/// Why reading a frame failed, as far as the close code goes.
enum ReadFailure {
    /// A message over the size limit (close 1009).
    Capacity,
    /// A text frame that is not UTF-8 (close 1007, RFC 6455 §8.1).
    Utf8,
    /// Anything else the WebSocket layer refused (close 1002).
    Protocol,
}

fn read_failure(e: axum::Error) -> ReadFailure {
    use tokio_tungstenite::tungstenite::Error;
    match e.into_inner().downcast_ref::<Error>() {
        Some(Error::Capacity(_)) => ReadFailure::Capacity,
        Some(Error::Utf8(_)) => ReadFailure::Utf8,
        _ => ReadFailure::Protocol,
    }
}

impl Session {
    /// Reads until the client closes, the server shuts down (and in-flight requests are done),
    /// or a frame is over the limit. Returns the close code and reason.
    async fn read_loop(&mut self, stream: &mut SplitStream<WebSocket>) -> (u16, String) {
        let mut shutdown = self.shared.shutdown_signal();
        let mut closing: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
        let mut poll = tokio::time::interval(DRAIN_POLL);
        let max = self.shared.limits.max_in_flight;
        let idle = self.shared.limits.idle_timeout;
        // When the client was last heard from; the check runs at most twice per idle period
        // rather than a timer being reset per frame.
        let mut heard = Instant::now();
        let mut pinged = false;
        let idle_check = tokio::time::sleep(idle / 2);
        tokio::pin!(idle_check);
        loop {
            let readable = self.tx.has_room();
            let next = tokio::select! {
                r = shutdown.wait_for(|stop| *stop), if closing.is_none() => {
                    // An error means the server is gone: close as for a shutdown.
                    let _ = r;
                    closing = Some(Box::pin(tokio::time::sleep(self.shared.limits.shutdown_grace)));
                    continue;
                }
                _ = async { if let Some(c) = closing.as_mut() { c.await } }, if closing.is_some() => {
                    return (close_code::AWAY, "server shutting down (grace period over)".into());
                }
                _ = poll.tick(), if closing.is_some() => {
                    if self.inflight.available_permits() == max {
                        return (close_code::AWAY, "server shutting down".into());
                    }
                    continue;
                }
                // The writer gave up on the client (evicted or stalled) and closed it.
                _ = self.tx.closed() => return (close_code::POLICY, "slow_reader".into()),
                _ = &mut idle_check, if closing.is_none() => {
                    if !readable {
                        // Not reading is the server's doing (backpressure), not the client's.
                        heard = Instant::now();
                    }
                    let quiet = heard.elapsed();
                    if quiet >= idle {
                        return (close_code::POLICY, format!("idle: nothing received for {idle:?} (idle_timeout_ms)"));
                    }
                    if quiet >= idle / 2 && !pinged {
                        // A full queue is written to anyway; its client answers that.
                        self.tx.try_send(Outgoing::Ping);
                        pinged = true;
                    }
                    let due = if pinged { heard + idle } else { heard + idle / 2 };
                    idle_check.as_mut().reset(due.into());
                    continue;
                }
                _ = self.tx.room(), if !readable => continue,
                m = stream.next(), if readable => {
                    heard = Instant::now();
                    pinged = false;
                    m
                }
            };
            let flow = match next {
                None => return (close_code::NORMAL, String::new()),
                Some(Err(e)) => {
                    return match read_failure(e) {
                        ReadFailure::Capacity => (
                            close_code::SIZE,
                            format!("a message is over the limit of {} bytes", self.shared.limits.max_frame_bytes),
                        ),
                        ReadFailure::Utf8 => (close_code::INVALID, "a text frame is not valid UTF-8".into()),
                        ReadFailure::Protocol => (close_code::PROTOCOL, "WebSocket protocol error".into()),
                    };
                }
                Some(Ok(WsMessage::Text(t))) => {
                    let decoded = self.codec.decode_text(t.as_str());
                    self.on_frame(decoded, t.len(), closing.is_some()).await
                }
                Some(Ok(WsMessage::Binary(b))) => {
                    let decoded = self.codec.decode_binary(&b);
                    self.on_frame(decoded, b.len(), closing.is_some()).await
                }
                Some(Ok(WsMessage::Close(_))) => return (close_code::NORMAL, String::new()),
                Some(Ok(_)) => ControlFlow::Continue(()), // ping/pong: answered by the WebSocket layer
            };
            if flow.is_break() {
                return (close_code::NORMAL, String::new());
            }
        }
    }

    async fn push(&self, out: Outgoing) -> ControlFlow<()> {
        match self.tx.send(out).await {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(()), // the writer is gone: the client went away
        }
    }

    async fn on_frame(
        &mut self,
        decoded: Result<Message, Undecodable>,
        frame_len: usize,
        closing: bool,
    ) -> ControlFlow<()> {
        let msg = match decoded {
            Ok(m) => m,
            Err(Undecodable { id, error }) => {
                return self.push(encode_error(&self.codec, id, error.code(), error.to_string())).await
            }
        };
        let id = msg.id;
        match msg.into_request() {
            Ok(req) if closing => {
                let _ = req;
                self.push(encode_error(&self.codec, id, ErrorCode::ShuttingDown, "the server is shutting down")).await
            }
            Ok(req) => self.on_request(req, frame_len).await,
            Err(e) => self.push(encode_error(&self.codec, id, e.code, e.message)).await,
        }
    }

    async fn on_request(&mut self, req: Request, frame_len: usize) -> ControlFlow<()> {
        let Request { id, body } = req;
        let Ok(inflight) = self.inflight.clone().try_acquire_owned() else {
            let max = self.shared.limits.max_in_flight;
            let msg =
                format!("more than {max} requests in flight on this session; wait for replies before sending more");
            return self.push(encode_error(&self.codec, Some(id), ErrorCode::TooManyRequests, msg)).await;
        };
        let mut inflight = InFlight::new(inflight, self.shared.figures.start(figures::kind_of(&body)));
        let Ok(slot) = self.tx.reserve().await else {
            return ControlFlow::Break(());
        };
        let codec = self.codec;
        match body {
            RequestBody::Ping => {
                slot.send(encode_message(&codec, &Message::pong(id)));
            }
            RequestBody::Status => {
                slot.send(encode_message(&codec, &self.shared.status(Some(id))));
            }
            RequestBody::Shutdown => {
                if self.role < Role::Admin {
                    let msg = format!("shutdown needs the admin role; this session has {}", self.role);
                    inflight.fail();
                    slot.send(encode_error(&codec, Some(id), ErrorCode::Forbidden, msg));
                } else {
                    slot.send(encode_message(&codec, &Message::ok(Some(id))));
                    self.shared.begin_shutdown();
                }
            }
            RequestBody::Execute { source, params } if frame_len <= INLINE_CHECK_MAX => {
                self.execute_checked(slot, inflight, id, source, params);
            }
            RequestBody::Execute { source, params } => {
                self.spawn_work(slot, inflight, id, Job::Execute { source, params });
            }
            RequestBody::Get { path, params } if frame_len <= INLINE_CHECK_MAX => {
                let limit = self.shared.limits.max_result_bytes;
                match exec::get(&self.shared.engine, &path, &params, INLINE_BUDGET, false) {
                    Ok(Some((version, node))) => {
                        slot.send(encode_reply(&codec, &Message::node(Some(id), version, node), limit));
                    }
                    Ok(None) => self.spawn_work(slot, inflight, id, Job::Get { path, params }),
                    Err(e) => {
                        inflight.fail();
                        slot.send(encode_error(&codec, Some(id), e.code, e.message));
                    }
                }
            }
            RequestBody::Get { path, params } => {
                self.spawn_work(slot, inflight, id, Job::Get { path, params });
            }
            RequestBody::Subscribe { target, params, since } => {
                let mut subs = lock_subs(&self.subs);
                if subs.len() >= self.shared.limits.max_subscriptions {
                    let max = self.shared.limits.max_subscriptions;
                    let msg = format!("this session has its maximum of {max} subscriptions; unsubscribe first");
                    inflight.fail();
                    slot.send(encode_error(&codec, Some(id), ErrorCode::TooManySubscriptions, msg));
                } else {
                    let sub = self.next_sub;
                    self.next_sub += 1;
                    let ctx = subscription::Context {
                        shared: self.shared.clone(),
                        codec,
                        tx: self.tx.clone(),
                        subs: self.subs.clone(),
                        subscription: sub,
                        request: id,
                        target,
                        params,
                        since,
                    };
                    // Inserted under the lock, before the task can remove itself on failure.
                    subs.insert(sub, tokio::spawn(subscription::run(ctx, slot, inflight)));
                }
            }
            RequestBody::Unsubscribe { subscription } => {
                let handle = lock_subs(&self.subs).remove(&subscription);
                match handle {
                    None => {
                        let msg = format!("this session has no subscription {subscription}");
                        inflight.fail();
                        slot.send(encode_error(&codec, Some(id), ErrorCode::UnknownSubscription, msg));
                    }
                    Some(task) => {
                        task.abort();
                        tokio::spawn(async move {
                            // After the task has stopped, nothing more of it can be queued.
                            let _ = task.await;
                            // Free the slot before the reply can reach the client (see spawn_work).
                            drop(inflight);
                            slot.send(encode_message(&codec, &Message::unsubscribed(id, subscription)));
                        });
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// Checks a (small) instruction here, then: writes go to group commit, node reads run
    /// inline within their budget, other reads go to the blocking pool.
    fn execute_checked(
        &self,
        slot: Slot,
        mut inflight: InFlight,
        id: u64,
        source: Source,
        params: HashMap<String, ParamValue>,
    ) {
        let codec = self.codec;
        let limit = self.shared.limits.max_result_bytes;
        let checked = match exec::check(&self.shared.engine, &source) {
            Ok(c) => c,
            Err(e) => {
                inflight.fail();
                slot.send(encode_error(&codec, Some(id), e.code, e.message));
                return;
            }
        };
        if !checked.is_read_only() {
            if let Err(e) = work::may_write(self.role) {
                inflight.fail();
                slot.send(encode_error(&codec, Some(id), e.code, e.message));
                return;
            }
            work::spawn_write(&self.shared, checked, params, move |r| {
                // Free the slot before the reply can reach the client (see spawn_work).
                inflight.fail_if(r.is_err());
                drop(inflight);
                slot.send(encode_reply(&codec, &outcome_message(id, r), limit));
            });
            return;
        }
        match exec::node_read(&self.shared.engine, &checked, &params, INLINE_BUDGET) {
            Some(Ok(Some(reply))) => {
                slot.send(encode_reply(&codec, &Message::result(Some(id), reply), limit));
            }
            Some(Err(e)) => {
                inflight.fail();
                slot.send(encode_error(&codec, Some(id), e.code, e.message));
            }
            Some(Ok(None)) | None => self.spawn_work(slot, inflight, id, Job::Read { checked, params }),
        }
    }

    fn spawn_work(&self, slot: Slot, mut inflight: InFlight, id: u64, job: Job) {
        let shared = self.shared.clone();
        let role = self.role;
        let codec = self.codec;
        let limit = shared.limits.max_result_bytes;
        let reads = self.reads.clone();
        let outbox = self.tx.clone();
        tokio::spawn(async move {
            // A few at a time, and none while the session's replies wait unread: a reply is
            // only built when there is room for it.
            let Ok(_read) = reads.acquire_owned().await else { return };
            outbox.room().await;
            if outbox.is_stopping() {
                return; // the session is closing: nobody will read the reply
            }
            let (out, failed) = work::run(&shared, role, job, move |r| {
                let failed = r.is_err();
                (encode_reply(&codec, &outcome_message(id, r), limit), failed)
            })
            .await;
            inflight.fail_if(failed);
            // The permit goes before the reply is queued: a client that has read a reply may
            // send its next request at once, and must find the slot free (the clients' own
            // in-flight accounting relies on it).
            drop(inflight);
            slot.send(out);
        });
    }

    /// Ends the subscriptions, queues the close frame and waits (bounded) for the writer.
    async fn finish(self, code: u16, reason: String, writer: JoinHandle<()>) {
        let tasks: Vec<_> = lock_subs(&self.subs).drain().map(|(_, t)| t).collect();
        for t in &tasks {
            t.abort();
        }
        let Session { tx, .. } = self;
        let _ = tokio::time::timeout(CLOSE_WAIT, tx.send(Outgoing::Close(code, reason))).await;
        drop(tx);
        let mut writer = writer;
        if tokio::time::timeout(CLOSE_WAIT, &mut writer).await.is_err() {
            writer.abort();
        }
    }
}
