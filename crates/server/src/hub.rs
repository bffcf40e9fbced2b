//! The subscription hub: reads the database's change feed on its own thread, keeps a bounded
//! history of recent change sets (for resuming; bounded in commits, changes and bytes, oldest
//! dropped first), and hands every change set to the queue of
//! each subscription it touches. Queues are bounded; a full queue marks its subscription
//! lagged (it will reload) and drops what it held. Writers never wait for any of this: the
//! feed itself never blocks them, and this thread only takes short locks.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use espalier_data::{Change, ChangeSet, NodePath, PathStep};
use espalier_instruction::QueryScope;
use espalier_transaction::{Database, FeedItem};
use tokio::sync::Notify;

use crate::config::log::{self, LogLevel};

/// Queue of the hub's own feed subscription (commits the hub may fall behind by).
const FEED_QUEUE: usize = 1 << 16;
/// How often the hub thread looks at its stop flag while the feed is idle.
const POLL: Duration = Duration::from_millis(50);

/// Which changes a subscription sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Changes in the subtree of this node, and its own creation or removal.
    Subtree(NodePath),
    /// Changes to the entries of one collection of a node (within them, entries added or
    /// removed), and the node's own creation or removal.
    Collection { node: NodePath, collection: String },
    /// Every change.
    Everything,
    /// The commits whose last change set carries a difference of this registered query.
    Registered(u64),
}

/// A collection query's subscription sees the changes in its scope.
impl From<QueryScope> for Filter {
    fn from(scope: QueryScope) -> Filter {
        match scope {
            QueryScope::Subtree(node) => Filter::Subtree(node),
            QueryScope::Collection { node, collection } => Filter::Collection { node, collection },
            QueryScope::Everything => Filter::Everything,
        }
    }
}

fn starts_with(path: &NodePath, prefix: &NodePath) -> bool {
    path.0.len() >= prefix.0.len() && path.0[..prefix.0.len()] == prefix.0[..]
}

/// The step of `target` just below `node`, if `node` is a proper ancestor of `target`.
fn step_below<'a>(node: &NodePath, target: &'a NodePath) -> Option<&'a PathStep> {
    if target.0.len() > node.0.len() && starts_with(target, node) {
        target.0.get(node.0.len())
    } else {
        None
    }
}

impl Filter {
    /// Does `change` touch what this filter watches?
    pub fn touches(&self, change: &Change) -> bool {
        let target = match self {
            Filter::Everything => return true,
            Filter::Registered(_) => return false,
            Filter::Subtree(p) => {
                if starts_with(change_node(change), p) {
                    return true;
                }
                p
            }
            Filter::Collection { node, collection } => {
                let at = change_node(change);
                let in_entry = matches!(
                    step_below(node, at),
                    Some(PathStep::Entry { collection: c, .. }) if c == collection
                );
                let entries_changed = at == node
                    && matches!(
                        change,
                        Change::EntryAdded { collection: c, .. } | Change::EntryRemoved { collection: c, .. }
                            if c == collection
                    );
                if in_entry || entries_changed {
                    return true;
                }
                node
            }
        };
        let node = change_node(change);
        // The watched node (or an ancestor) itself is created or removed.
        match (change, step_below(node, target)) {
            (
                Change::EntryAdded { collection, key, .. } | Change::EntryRemoved { collection, key, .. },
                Some(PathStep::Entry { collection: c, key: k, .. }),
            ) => c == collection && k == key,
            (Change::StateSwitched { stategroup, old, new, .. }, Some(PathStep::State { stategroup: sg, state })) => {
                sg == stategroup && (state == old || state == new)
            }
            _ => false,
        }
    }

    pub fn touches_set(&self, set: &ChangeSet) -> bool {
        match self {
            Filter::Registered(id) => set.diffs.iter().any(|d| d.query == *id),
            _ => set.changes.iter().any(|c| self.touches(c)),
        }
    }
}

pub fn change_node(change: &Change) -> &NodePath {
    match change {
        Change::Number { node, .. }
        | Change::Text { node, .. }
        | Change::Reference { node, .. }
        | Change::EntryAdded { node, .. }
        | Change::EntryRemoved { node, .. }
        | Change::StateSwitched { node, .. } => node,
    }
}

/// What is waiting for one subscription.
#[derive(Default)]
pub struct Pending {
    pub sets: VecDeque<Arc<ChangeSet>>,
    /// Sets were dropped: the subscription must reload.
    pub lagged: bool,
}

/// A subscription as the hub sees it.
pub struct SubQueue {
    pub filter: Filter,
    capacity: usize,
    pending: Mutex<Pending>,
    /// Wakes the subscription's task.
    pub notify: Notify,
}

impl SubQueue {
    pub fn new(filter: Filter, capacity: usize) -> SubQueue {
        assert!(capacity > 0);
        SubQueue { filter, capacity, pending: Mutex::new(Pending::default()), notify: Notify::new() }
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a set, or marks the queue lagged when it is full. Never waits.
    fn push(&self, set: &Arc<ChangeSet>) {
        {
            let mut p = self.lock();
            if p.lagged {
                return;
            }
            if p.sets.len() >= self.capacity {
                p.sets.clear();
                p.lagged = true;
            } else {
                p.sets.push_back(set.clone());
            }
        }
        self.notify.notify_one();
    }

    fn mark_lagged(&self) {
        {
            let mut p = self.lock();
            p.sets.clear();
            p.lagged = true;
        }
        self.notify.notify_one();
    }

    /// Takes everything queued.
    pub fn take(&self) -> Pending {
        std::mem::take(&mut *self.lock())
    }
}

/// How much history the hub keeps.
#[derive(Debug, Clone, Copy)]
pub struct HistoryBounds {
    /// Commits kept.
    pub commits: usize,
    /// Changes those commits hold together.
    pub changes: usize,
    /// Their bytes, as [`approx_bytes`] counts them.
    pub bytes: usize,
}

impl HistoryBounds {
    /// The bounds the server's limits set.
    pub fn of(limits: &crate::config::ServerLimits) -> HistoryBounds {
        HistoryBounds { commits: limits.history_commits, changes: limits.history_changes, bytes: limits.history_bytes }
    }
}

/// Counts bytes written, keeping none.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// About what a change set holds in memory: its changes as JSON (paths, names, old and new
/// values; the structures cost about as much as their text), the records it touched, and a
/// little for itself.
pub fn approx_bytes(set: &ChangeSet) -> usize {
    let mut json = Counter(0);
    // Serializing plain data into a counter cannot fail; if it did, count the changes alone.
    if serde_json::to_writer(&mut json, set).is_err() {
        json.0 = set.changes.len() * 64;
    }
    let t = &set.touched;
    let touched = t.records.len() * 8 + t.slots.len() * 16 + t.entries.len() * 24 + t.links.len() * 16;
    json.0 + touched + 128
}

struct State {
    /// The last version the hub has processed.
    last: u64,
    /// Recent change sets, consecutive versions ending at `last`, with their sizes.
    history: VecDeque<(Arc<ChangeSet>, usize)>,
    history_changes: usize,
    history_bytes: usize,
    /// The first version `history` holds (or would hold next); `u64::MAX` after the hub itself
    /// lagged and before the next set arrives.
    history_start: u64,
    subs: HashMap<u64, Arc<SubQueue>>,
    next_key: u64,
}

/// How a new subscription starts.
pub enum Start {
    /// It continues after `since`: what it missed is queued (or it is lagged if that was too much).
    Resumed,
    /// The caller sends the data afresh; with `since`, why it could not resume.
    Fresh(Option<NotResumed>),
}

/// Why a subscription with `since` could not resume (`subscribed`'s `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotResumed {
    /// The commits after `since` are no longer in the history.
    HistoryDropped,
    /// `since` is newer than the database (another database, or one restored from a backup).
    VersionAhead,
}

impl NotResumed {
    /// As `subscribed`'s `reason` says it.
    pub fn reason(self) -> &'static str {
        match self {
            NotResumed::HistoryDropped => "history_dropped",
            NotResumed::VersionAhead => "version_ahead",
        }
    }
}

pub struct Hub {
    state: Mutex<State>,
    stop: AtomicBool,
    bounds: HistoryBounds,
}

impl Hub {
    /// Starts the hub thread on `db`'s change feed.
    pub fn start(db: Arc<Database>, bounds: HistoryBounds) -> std::io::Result<(Arc<Hub>, std::thread::JoinHandle<()>)> {
        // Subscribe before reading the version, so nothing committed after it is missed.
        let feed = db.subscribe(FEED_QUEUE);
        let last = db.version();
        let hub = Arc::new(Hub {
            state: Mutex::new(State {
                last,
                history: VecDeque::new(),
                history_changes: 0,
                history_bytes: 0,
                history_start: last + 1,
                subs: HashMap::new(),
                next_key: 1,
            }),
            stop: AtomicBool::new(false),
            bounds,
        });
        let h = hub.clone();
        let thread = std::thread::Builder::new().name("espalier-hub".into()).spawn(move || h.run(feed))?;
        Ok((hub, thread))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(&self, mut feed: espalier_transaction::Subscription) {
        while !self.stop.load(Ordering::Acquire) {
            match feed.next_timeout(POLL) {
                Some(FeedItem::Changes(set)) => {
                    if log::enabled(LogLevel::Debug) {
                        log::event(
                            LogLevel::Debug,
                            "commit",
                            &[("version", &set.version), ("changes", &set.changes.len())],
                        );
                    }
                    self.publish(set)
                }
                Some(FeedItem::Lagged { last_delivered }) => self.lagged(last_delivered),
                None => {}
            }
        }
    }

    fn publish(&self, set: Arc<ChangeSet>) {
        // Measured before the lock: the writers' commits never wait for it, but subscribers do.
        let bytes = approx_bytes(&set);
        let mut s = self.lock();
        if set.version <= s.last {
            return; // committed before the hub started
        }
        if s.history_start == u64::MAX {
            s.history_start = set.version;
        }
        s.last = set.version;
        s.history_changes += set.changes.len();
        s.history_bytes += bytes;
        s.history.push_back((set.clone(), bytes));
        let b = self.bounds;
        // The newest commit may go too, if it alone is over the bytes: then nothing resumes
        // across it, and subscribers reload.
        while s.history.len() > b.commits
            || (s.history_changes > b.changes && s.history.len() > 1)
            || s.history_bytes > b.bytes
        {
            let Some((old, old_bytes)) = s.history.pop_front() else { break };
            s.history_changes -= old.changes.len();
            s.history_bytes -= old_bytes;
            s.history_start = old.version + 1;
        }
        for sub in s.subs.values() {
            if sub.filter.touches_set(&set) {
                sub.push(&set);
            }
        }
    }

    /// The hub fell behind the feed: sets were lost, so every subscription reloads and the
    /// history starts over.
    fn lagged(&self, last_delivered: u64) {
        let mut s = self.lock();
        s.history.clear();
        s.history_changes = 0;
        s.history_bytes = 0;
        s.history_start = u64::MAX;
        s.last = s.last.max(last_delivered);
        for sub in s.subs.values() {
            sub.mark_lagged();
        }
    }

    /// Registers a subscription. With `since`, queues what it missed from the history if the
    /// history reaches back that far (`Start::Resumed`); `current` is the database's version now.
    pub fn register(&self, sub: Arc<SubQueue>, since: Option<u64>, current: u64) -> (u64, Start) {
        let mut s = self.lock();
        let key = s.next_key;
        s.next_key += 1;
        let start = match since {
            None => Start::Fresh(None),
            Some(since) if since > current => Start::Fresh(Some(NotResumed::VersionAhead)),
            // Right after the hub itself lagged, nothing can resume: sets were lost.
            Some(_) if s.history_start == u64::MAX => Start::Fresh(Some(NotResumed::HistoryDropped)),
            // Whatever the hub has not seen yet comes live; the caller skips up to `since`.
            Some(since) if since >= s.last => Start::Resumed,
            Some(since) if since.saturating_add(1) >= s.history_start => {
                for (set, _) in s.history.iter().filter(|(set, _)| set.version > since) {
                    if sub.filter.touches_set(set) {
                        sub.push(set);
                    }
                }
                Start::Resumed
            }
            Some(_) => Start::Fresh(Some(NotResumed::HistoryDropped)),
        };
        s.subs.insert(key, sub);
        (key, start)
    }

    pub fn unregister(&self, key: u64) {
        self.lock().subs.remove(&key);
    }

    pub fn subscriptions(&self) -> usize {
        self.lock().subs.len()
    }

    /// The history's (approximate) bytes.
    pub fn history_bytes(&self) -> usize {
        self.lock().history_bytes
    }

    /// The oldest `since` a subscription can resume after.
    pub fn history_from(&self) -> u64 {
        let s = self.lock();
        if s.history_start == u64::MAX {
            s.last
        } else {
            s.history_start - 1
        }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(c: &str, k: &str) -> PathStep {
        PathStep::Entry { collection: c.into(), key: vec![k.into()], matrix: false }
    }

    #[test]
    fn subtree_filters_see_inside_and_their_own_birth_and_death() {
        let m1 = NodePath(vec![entry("Machines", "M1")]);
        let f = Filter::Subtree(m1.clone());
        let number = |node: NodePath| Change::Number { node, property: "Pulses".into(), old: 0, new: 1 };
        assert!(f.touches(&number(m1.clone())));
        assert!(f.touches(&number(NodePath(vec![entry("Machines", "M1"), PathStep::Group("g".into())]))));
        assert!(!f.touches(&number(NodePath(vec![entry("Machines", "M2")]))));
        assert!(!f.touches(&number(NodePath(vec![]))));
        let removed = |k: &str| Change::EntryRemoved {
            node: NodePath(vec![]),
            collection: "Machines".into(),
            key: vec![k.into()],
        };
        assert!(f.touches(&removed("M1")));
        assert!(!f.touches(&removed("M2")));
        let in_state = NodePath(vec![
            entry("Machines", "M1"),
            PathStep::State { stategroup: "Task".into(), state: "Selected".into() },
        ]);
        let g = Filter::Subtree(in_state);
        let switched = |old: &str, new: &str| Change::StateSwitched {
            node: m1.clone(),
            stategroup: "Task".into(),
            old: old.into(),
            new: new.into(),
        };
        assert!(g.touches(&switched("Selected", "Idle")));
        assert!(g.touches(&switched("Idle", "Selected")));
        assert!(!g.touches(&switched("Idle", "Broken")));
        assert!(Filter::Everything.touches(&removed("M2")));
    }

    #[test]
    fn collection_filters_see_their_entries_only() {
        let f = Filter::Collection { node: NodePath(vec![]), collection: "Machines".into() };
        let number = |node: NodePath| Change::Number { node, property: "Pulses".into(), old: 0, new: 1 };
        assert!(f.touches(&number(NodePath(vec![entry("Machines", "M7")]))));
        assert!(!f.touches(&number(NodePath(vec![entry("Clients", "c1")]))));
        assert!(!f.touches(&number(NodePath(vec![]))), "a property of the owner is not an entry");
        let added =
            |c: &str| Change::EntryAdded { node: NodePath(vec![]), collection: c.into(), key: vec!["k".into()] };
        assert!(f.touches(&added("Machines")));
        assert!(!f.touches(&added("Clients")));
        // The owner node's own removal.
        let g = Filter::Collection { node: NodePath(vec![entry("Orders", "o1")]), collection: "Lines".into() };
        let removed =
            Change::EntryRemoved { node: NodePath(vec![]), collection: "Orders".into(), key: vec!["o1".into()] };
        assert!(g.touches(&removed));
    }

    #[test]
    fn full_queues_lag_instead_of_growing() {
        let q = SubQueue::new(Filter::Everything, 2);
        for v in 1..=3 {
            q.push(&Arc::new(ChangeSet { version: v, ..ChangeSet::default() }));
        }
        let p = q.take();
        assert!(p.lagged && p.sets.is_empty());
        q.push(&Arc::new(ChangeSet { version: 4, ..ChangeSet::default() }));
        assert_eq!(q.take().sets.len(), 1, "after the lag is taken, sets queue again");
    }
}
