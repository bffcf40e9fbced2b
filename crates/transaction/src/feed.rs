//! The change feed: every committed change set, in commit order, to every subscriber.
//! Each subscriber has a bounded queue; one that falls behind is told to reload instead of
//! silently missing changes, and never slows the writer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use espalier_data::ChangeSet;

/// What a [`Subscription`] delivers next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedItem {
    /// The next committed change set, in commit order.
    Changes(Arc<ChangeSet>),
    /// Changes after `last_delivered` were dropped because the queue was full: reload.
    Lagged {
        /// The version of the last change set delivered (0 if none was).
        last_delivered: u64,
    },
}

struct Subscriber {
    tx: Sender<Arc<ChangeSet>>,
    lagged: Arc<AtomicBool>,
    /// The first version it is sent: a change set of an earlier commit may have been made
    /// before it subscribed, without its changes spelt out.
    from: u64,
}

#[derive(Default)]
pub(crate) struct Feed {
    subscribers: Mutex<Vec<Subscriber>>,
    /// How many subscribers there are, read without the lock by every batch (whether to
    /// spell out its changes). A gone subscriber counts until the next publish sees it gone.
    count: AtomicUsize,
}

/// Upper bound on a subscriber queue.
pub const MAX_QUEUE: usize = 1 << 20;

impl Feed {
    /// A subscriber to the change sets of version `from` on.
    pub fn subscribe(&self, capacity: usize, from: u64) -> Subscription {
        assert!(capacity > 0 && capacity <= MAX_QUEUE, "subscription capacity {capacity}");
        let (tx, rx) = bounded(capacity);
        let lagged = Arc::new(AtomicBool::new(false));
        let mut subs = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subs.push(Subscriber { tx, lagged: lagged.clone(), from });
        self.count.store(subs.len(), Ordering::Release);
        Subscription { rx, lagged, last_delivered: 0 }
    }

    /// Whether anyone reads the change sets published from now on.
    pub fn has_subscribers(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    pub fn publish(&self, set: &Arc<ChangeSet>) {
        if !self.has_subscribers() {
            return;
        }
        let mut subs = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subs.retain(|s| {
            if set.version < s.from {
                return true;
            }
            if s.lagged.load(Ordering::Acquire) {
                return true; // keeps dropping until the subscriber has seen the lag
            }
            match s.tx.try_send(set.clone()) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    s.lagged.store(true, Ordering::Release);
                    true
                }
                Err(TrySendError::Disconnected(_)) => false,
            }
        });
        self.count.store(subs.len(), Ordering::Release);
    }
}

/// A subscriber's end of the change feed: every change set committed since it subscribed, in
/// order, from a bounded queue ([`crate::Database::subscribe`]); [`FeedItem::Lagged`] if it
/// fell behind.
pub struct Subscription {
    rx: Receiver<Arc<ChangeSet>>,
    lagged: Arc<AtomicBool>,
    last_delivered: u64,
}

impl Subscription {
    /// The next item, waiting at most `timeout`.
    pub fn next_timeout(&mut self, timeout: Duration) -> Option<FeedItem> {
        // Queued change sets are older than anything dropped: deliver them first.
        if let Ok(set) = self.rx.try_recv() {
            self.last_delivered = set.version;
            return Some(FeedItem::Changes(set));
        }
        if self.lagged.swap(false, Ordering::AcqRel) {
            return Some(FeedItem::Lagged { last_delivered: self.last_delivered });
        }
        let set = self.rx.recv_timeout(timeout).ok()?;
        self.last_delivered = set.version;
        Some(FeedItem::Changes(set))
    }

    /// The next item if one is ready, without waiting.
    pub fn try_next(&mut self) -> Option<FeedItem> {
        self.next_timeout(Duration::ZERO)
    }
}
