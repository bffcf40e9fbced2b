//! The memory budget of what the server has encoded for clients but not yet written: every
//! reply and push of a WebSocket session goes through its [`Outbox`], which counts the
//! frame's bytes against the session's budget (`session_queue_bytes`) and the server's
//! (`max_queued_bytes`) until the writer has handed it to the socket.
//!
//! Past the session's budget the session is not read and its reads wait to start
//! (backpressure: a client that does not read its replies only stops itself). Past the
//! server's budget the session holding the most is evicted: its writer closes it with
//! `slow_reader` and its queue is dropped, which returns the memory at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use espalier_protocol::Frame;
use tokio::sync::mpsc::{self, OwnedPermit};
use tokio::sync::Notify;

/// What a session's writer sends.
pub enum Outgoing {
    Frame(Frame),
    /// A WebSocket ping: a live client's WebSocket layer answers it with a pong.
    Ping,
    Close(u16, String),
}

impl Outgoing {
    fn bytes(&self) -> usize {
        match self {
            Outgoing::Frame(f) => f.len(),
            Outgoing::Ping | Outgoing::Close(..) => 0,
        }
    }
}

/// Bytes held unsent by all sessions, and the sessions, so that the largest can be evicted.
pub struct Memory {
    total: AtomicUsize,
    max_total: usize,
    max_session: usize,
    sessions: Mutex<HashMap<u64, Weak<Budget>>>,
    next_id: AtomicU64,
}

impl Memory {
    /// The server's budget: `max_total` bytes in all, `max_session` per session.
    pub fn new(max_total: usize, max_session: usize) -> Arc<Memory> {
        Arc::new(Memory {
            total: AtomicUsize::new(0),
            max_total,
            max_session,
            sessions: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        })
    }

    /// Bytes of replies and pushes encoded and not yet written, over all sessions.
    pub fn queued_bytes(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Weak<Budget>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Evicts sessions, largest first, until those evicted hold enough to bring the total
    /// under the budget (they drop it as soon as their writers see it).
    fn evict_over_budget(&self) {
        let sessions = self.lock();
        let over = (self.queued_bytes() + 1).saturating_sub(self.max_total);
        let mut live: Vec<Arc<Budget>> = sessions.values().filter_map(Weak::upgrade).collect();
        let mut freeing: usize = live.iter().filter(|b| b.is_evicted()).map(|b| b.held()).sum();
        live.retain(|b| !b.is_evicted());
        live.sort_by_key(|b| std::cmp::Reverse(b.held()));
        for b in live {
            if freeing >= over {
                break;
            }
            freeing += b.held();
            b.evict();
        }
    }
}

/// One session's share.
pub struct Budget {
    id: u64,
    held: AtomicUsize,
    /// Woken when `held` falls, or on eviction.
    changed: Notify,
    evicted: AtomicBool,
    /// Tells the writer it was evicted (a stored permit, so it is seen whenever it looks).
    pub evict_signal: Notify,
}

impl Budget {
    fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    pub fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire)
    }

    /// Bytes this session holds unsent.
    pub fn queued_bytes(&self) -> usize {
        self.held()
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::Release);
        self.evict_signal.notify_one();
        self.changed.notify_waiters();
    }
}

/// The bytes of one queued frame; given back when it is dropped (written, or thrown away
/// with its queue).
pub struct Charge {
    bytes: usize,
    budget: Arc<Budget>,
    memory: Arc<Memory>,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Ordering::AcqRel);
        self.memory.total.fetch_sub(self.bytes, Ordering::AcqRel);
        self.budget.changed.notify_waiters();
    }
}

/// A message on its way to the writer, with its charge.
pub struct Queued {
    /// The message.
    pub out: Outgoing,
    /// Its bytes, counted until this is dropped (none for pings and close frames).
    pub charge: Option<Charge>,
}

/// The session's writer has stopped: the client is gone or the session was closed.
#[derive(Debug)]
pub struct Gone;

/// The sending side of one session's outgoing queue.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Queued>,
    budget: Arc<Budget>,
    memory: Arc<Memory>,
}

/// The receiving side, for the writer; unregisters the session when dropped.
pub struct Inbox {
    /// The queue.
    pub rx: mpsc::Receiver<Queued>,
    /// The session's share, whose eviction signal the writer watches.
    pub budget: Arc<Budget>,
    memory: Arc<Memory>,
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.memory.lock().remove(&self.budget.id);
    }
}

/// A session's queue of `capacity` messages, registered with `memory`.
pub fn channel(memory: &Arc<Memory>, capacity: usize) -> (Outbox, Inbox) {
    let id = memory.next_id.fetch_add(1, Ordering::Relaxed);
    let budget = Arc::new(Budget {
        id,
        held: AtomicUsize::new(0),
        changed: Notify::new(),
        evicted: AtomicBool::new(false),
        evict_signal: Notify::new(),
    });
    memory.lock().insert(id, Arc::downgrade(&budget));
    let (tx, rx) = mpsc::channel(capacity);
    (Outbox { tx, budget: budget.clone(), memory: memory.clone() }, Inbox { rx, budget, memory: memory.clone() })
}

impl Outbox {
    /// Counts a message's bytes; `None` if it is not to be queued, because the session is
    /// evicted (now, or before) and its client will never get it.
    fn charge(&self, out: Outgoing) -> Option<Queued> {
        let bytes = out.bytes();
        if bytes == 0 {
            return Some(Queued { out, charge: None });
        }
        if self.budget.is_evicted() {
            return None;
        }
        self.budget.held.fetch_add(bytes, Ordering::AcqRel);
        let total = self.memory.total.fetch_add(bytes, Ordering::AcqRel) + bytes;
        let charge = Charge { bytes, budget: self.budget.clone(), memory: self.memory.clone() };
        // At the budget, not only past it: sessions stop being read at the budget, so a total
        // that sat exactly on it would hold everyone up until a stall timed out.
        if total >= self.memory.max_total {
            self.memory.evict_over_budget();
            if self.budget.is_evicted() {
                return None; // dropping the charge gives the bytes back at once
            }
        }
        Some(Queued { out, charge: Some(charge) })
    }

    /// Queues a message, waiting for a place in the queue.
    pub async fn send(&self, out: Outgoing) -> Result<(), Gone> {
        let permit = self.tx.reserve().await.map_err(|_| Gone)?;
        match self.charge(out) {
            Some(q) => permit.send(q),
            None => return Err(Gone),
        }
        Ok(())
    }

    /// Queues a message if there is a place now.
    pub fn try_send(&self, out: Outgoing) -> bool {
        match self.tx.try_reserve() {
            Ok(permit) => match self.charge(out) {
                Some(q) => {
                    permit.send(q);
                    true
                }
                None => false,
            },
            Err(_) => false,
        }
    }

    /// Reserves the place of a reply, so that sending it later never waits.
    pub async fn reserve(&self) -> Result<Slot, Gone> {
        let permit = self.tx.clone().reserve_owned().await.map_err(|_| Gone)?;
        Ok(Slot { permit, outbox: self.clone() })
    }

    /// Waits until the writer has stopped.
    pub async fn closed(&self) {
        self.tx.closed().await
    }

    /// Whether the writer has stopped.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Closed, or evicted and about to be.
    pub fn is_stopping(&self) -> bool {
        self.is_closed() || self.budget.is_evicted()
    }

    /// Whether the session is within its budget and the server within its own: only then
    /// is it read and do its reads start.
    pub fn has_room(&self) -> bool {
        self.budget.held() < self.memory.max_session && self.memory.queued_bytes() < self.memory.max_total
    }

    /// Waits until [`Outbox::has_room`], or the session is evicted or closed.
    pub async fn room(&self) {
        loop {
            let changed = self.budget.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.has_room() || self.budget.is_evicted() || self.is_closed() {
                return;
            }
            // The server's total also falls when other sessions write: look again now and then.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(50), changed).await;
        }
    }
}

/// A reserved place in the queue.
pub struct Slot {
    permit: OwnedPermit<Queued>,
    outbox: Outbox,
}

impl Slot {
    /// Queues the reply in its reserved place (never waits); dropped if the session is evicted.
    pub fn send(self, out: Outgoing) {
        if let Some(queued) = self.outbox.charge(out) {
            self.permit.send(queued);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize) -> Outgoing {
        Outgoing::Frame(Frame::Binary(vec![0; n]))
    }

    #[tokio::test]
    async fn bytes_are_counted_until_dropped_and_the_largest_holder_is_evicted() {
        let memory = Memory::new(1000, 400);
        let (a, mut a_in) = channel(&memory, 8);
        let (b, _b_in) = channel(&memory, 8);
        a.send(frame(300)).await.unwrap();
        assert!(a.has_room());
        a.send(frame(300)).await.unwrap();
        assert!(!a.has_room(), "over its own budget");
        b.send(frame(300)).await.unwrap();
        assert_eq!(memory.queued_bytes(), 900);
        assert!(!a_in.budget.is_evicted());
        b.send(frame(200)).await.unwrap();
        assert!(a_in.budget.is_evicted(), "the largest holder goes");
        assert!(!b.budget.is_evicted());
        let first = a_in.rx.recv().await.unwrap();
        drop(first);
        assert_eq!(memory.queued_bytes(), 800);
        drop(a_in);
        assert_eq!(memory.queued_bytes(), 500, "a dropped queue gives its bytes back");
        assert!(a.send(frame(1)).await.is_err());
    }
}
