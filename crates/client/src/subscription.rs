//! Subscriptions as streams of events.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll};

use espalier_protocol::{Change, ErrorCode, Kind, Message, QueryResult};
use futures_util::Stream;
use tokio::sync::mpsc;

use crate::{Client, ClientError};

/// One thing that happened to a subscription.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A node subscription: one commit's changes within the subtree.
    Changes {
        /// The commit's version.
        version: u64,
        /// The commit's changes within the subtree, in order.
        changes: Vec<Change>,
    },
    /// A query subscription: the rows after one or more commits.
    Rows {
        /// The version the rows are at.
        version: u64,
        /// All the rows of the query.
        query: QueryResult,
    },
    /// A pattern query subscription: the rows one commit removed and added.
    Matches {
        /// The commit's version.
        version: u64,
        /// The rows that no longer match.
        removed: Vec<Vec<serde_json::Value>>,
        /// The rows that match now.
        added: Vec<Vec<serde_json::Value>>,
    },
    /// The server could not deliver every commit: here is the data afresh. `node` is `None`
    /// for a node subscription whose node no longer exists.
    Reload {
        /// The version the fresh data is at.
        version: u64,
        /// Why the commits could not be delivered.
        reason: String,
        /// A node subscription's node, in dump form.
        node: Option<serde_json::Value>,
        /// A query subscription's rows.
        query: Option<QueryResult>,
    },
    /// The server ended the subscription.
    Ended {
        /// Why, as an error code.
        code: ErrorCode,
        /// Why, in words.
        message: String,
    },
    /// This client's buffer for the subscription overflowed (the application read too slowly):
    /// the subscription is over; subscribe again with `since: Some(last_version)` to resume.
    Overflow {
        /// The version of the last event taken: resume after it.
        last_version: u64,
    },
}

/// Shared between the reader task and the subscription.
pub(crate) struct State {
    rx: Mutex<Option<mpsc::Receiver<Message>>>,
    overflowed: AtomicBool,
}

impl State {
    pub(crate) fn new(rx: mpsc::Receiver<Message>) -> State {
        State { rx: Mutex::new(Some(rx)), overflowed: AtomicBool::new(false) }
    }

    pub(crate) fn overflow(&self) {
        self.overflowed.store(true, Ordering::Release);
    }
}

/// A live subscription: the data at `version`, then a stream of [`Event`]s in commit order.
pub struct Subscription {
    client: Client,
    /// The subscription's number in its session.
    pub id: u64,
    /// The version the data is at (or, when resumed, the `since` it continues after).
    pub version: u64,
    /// True if it continues after `since` without data.
    pub resumed: bool,
    /// A node subscription's data.
    pub node: Option<serde_json::Value>,
    /// A query subscription's rows.
    pub query: Option<QueryResult>,
    rx: Option<mpsc::Receiver<Message>>,
    state: std::sync::Arc<State>,
    last_version: u64,
    finished: bool,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("version", &self.version)
            .field("last_version", &self.last_version)
            .finish_non_exhaustive()
    }
}

fn event_of(m: Message) -> Event {
    let version = m.version.unwrap_or(0);
    match m.kind {
        Kind::Notify => match (m.changes, m.query, m.removed, m.added) {
            (Some(changes), ..) => Event::Changes { version, changes },
            (None, Some(query), ..) => Event::Rows { version, query },
            (None, None, removed, added) if removed.is_some() || added.is_some() => {
                Event::Matches { version, removed: removed.unwrap_or_default(), added: added.unwrap_or_default() }
            }
            (None, None, ..) => Event::Changes { version, changes: Vec::new() },
        },
        Kind::Reload => Event::Reload { version, reason: m.reason.unwrap_or_default(), node: m.node, query: m.query },
        Kind::Error => {
            Event::Ended { code: m.code.unwrap_or(ErrorCode::Internal), message: m.message.unwrap_or_default() }
        }
        other => Event::Ended { code: ErrorCode::Internal, message: format!("unexpected {other} for a subscription") },
    }
}

impl Subscription {
    pub(crate) fn new(client: Client, m: Message, state: std::sync::Arc<State>) -> Subscription {
        let rx = state.rx.lock().unwrap_or_else(|e| e.into_inner()).take();
        let version = m.version.unwrap_or(0);
        Subscription {
            client,
            id: m.subscription.unwrap_or(0),
            version,
            resumed: m.resumed.unwrap_or(false),
            node: m.node,
            query: m.query,
            rx,
            state,
            last_version: version,
            finished: false,
        }
    }

    /// The version of the last event taken (or of the initial data): resume after it.
    pub fn last_version(&self) -> u64 {
        self.last_version
    }

    /// Ends the subscription on the server.
    pub async fn unsubscribe(mut self) -> Result<(), ClientError> {
        self.rx = None;
        self.client.unsubscribe(self.id).await
    }

    fn take(&mut self, m: Message) -> Event {
        let e = event_of(m);
        match &e {
            Event::Changes { version, .. }
            | Event::Rows { version, .. }
            | Event::Matches { version, .. }
            | Event::Reload { version, .. } => {
                self.last_version = *version;
            }
            Event::Ended { .. } => self.finished = true,
            Event::Overflow { .. } => {}
        }
        e
    }

    /// The next event; `None` once the subscription (or the session) has ended.
    pub async fn next(&mut self) -> Option<Event> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }
}

impl Stream for Subscription {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        if self.finished {
            return Poll::Ready(None);
        }
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Ready(None);
        };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(m)) => Poll::Ready(Some(self.take(m))),
            Poll::Ready(None) => {
                self.finished = true;
                if self.state.overflowed.load(Ordering::Acquire) {
                    return Poll::Ready(Some(Event::Overflow { last_version: self.last_version }));
                }
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
