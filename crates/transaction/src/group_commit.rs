//! The write queue: leader/follower group commit.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use espalier_data::{ChangeSet, DataError, WriteGraph};

use crate::TxError;

/// What happened to one request of a batch.
pub(crate) enum Outcome {
    Committed {
        version: u64,
        changes: Arc<ChangeSet>,
    },
    /// The request's own logic failed; its writes were rolled back.
    Rejected,
    /// The batch could not commit.
    Failed(TxError),
}

/// One queued request, type-erased.
pub(crate) trait Job: Send {
    /// Runs the request; true if its writes are to be kept. May run again if the batch is
    /// retried after growing the map, so it must not consume what it needs.
    fn run(&mut self, graph: &mut WriteGraph<'_, '_>) -> bool;
    fn complete(self: Box<Self>, outcome: Outcome);
    /// Asks the thread waiting for this request to lead the next batch; false if no thread
    /// waits for it (a detached request, or its waiter is gone): the writer thread leads then.
    fn lead(&self) -> bool;
    /// Whether its caller reads its changes spelt out (else only their count, and they are
    /// spelt out only for subscribers).
    fn spells_changes(&self) -> bool;
}

pub(crate) enum Signal<T> {
    Done(T),
    Lead,
}

/// Jobs run, each with what happened to it, still to be told.
pub(crate) type Completions = Vec<(Box<dyn Job>, Outcome)>;

/// Runs a batch and says what happened to each job. Implemented by the database.
pub(crate) trait BatchRunner {
    fn run_batch(&self, batch: Vec<Box<dyn Job>>) -> Completions;
}

/// Tells every job its outcome. Called after the leader has let go of the runner, so that a
/// caller who drops the database after its answer finds it closed (the writer thread holds
/// the database only while it runs a batch).
fn complete_all(completions: Completions) {
    for (job, outcome) in completions {
        job.complete(outcome);
    }
}

#[derive(Default)]
struct State {
    pending: VecDeque<Box<dyn Job>>,
    /// Some thread leads (or has been asked to): exactly one batch runs at a time.
    leading: bool,
    /// The writer thread is asked to lead the next batch.
    writer_leads: bool,
    writer_started: bool,
    stop: bool,
}

/// Upper bound on requests waiting for a batch. Waiting threads bound themselves; detached
/// requests come from sessions, each with its own bound on requests in flight.
pub(crate) const MAX_PENDING: usize = 1 << 20;

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer thread.
    wake: Condvar,
    max_batch: usize,
}

/// The queue of write requests. Requests whose thread waits for them (`submit`) are led by
/// those threads, one batch each, each handing on to the next waiter, so no thread keeps
/// working for others after its own request is done. Detached requests (`submit_detached`)
/// have no thread of their own: a batch whose next request is detached is led by the writer
/// thread, started on the first detached request.
pub(crate) struct WriteQueue {
    shared: Arc<Shared>,
}

impl WriteQueue {
    pub fn new(max_batch: usize) -> WriteQueue {
        assert!(max_batch >= 1);
        WriteQueue { shared: Arc::new(Shared { state: Mutex::new(State::default()), wake: Condvar::new(), max_batch }) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.shared)
    }

    /// Queues `job` and waits for its result on `rx`, leading batches when asked to.
    pub fn submit<T>(&self, runner: &dyn BatchRunner, job: Box<dyn Job>, rx: Receiver<Signal<T>>) -> T {
        let lead_now = {
            let mut s = self.lock();
            assert!(s.pending.len() < MAX_PENDING, "write queue over its bound");
            s.pending.push_back(job);
            !std::mem::replace(&mut s.leading, true)
        };
        if lead_now {
            complete_all(lead(&self.shared, runner));
        }
        loop {
            match rx.recv() {
                Ok(Signal::Done(result)) => return result,
                Ok(Signal::Lead) => complete_all(lead(&self.shared, runner)),
                // The sender lives in the job, which is always completed: unreachable unless
                // a completion itself panicked.
                Err(_) => panic!("write request dropped without a result"),
            }
        }
    }

    /// Queues `job` without waiting for it; it completes on whichever thread runs its batch.
    /// If no batch is running, `lead_here` says whether the calling thread runs it (when a
    /// batch takes microseconds: no fsync) or the writer thread does (`runner` is what that
    /// thread runs batches on; it ends when the runner is gone or [`WriteQueue::stop`]).
    pub fn submit_detached(
        &self,
        runner: &dyn BatchRunner,
        spawn_runner: impl FnOnce() -> std::sync::Weak<dyn BatchRunner + Send + Sync>,
        job: Box<dyn Job>,
        lead_here: bool,
    ) {
        let lead_now = {
            let mut s = self.lock();
            let refusal = if s.stop {
                Some("the database is closing".to_string())
            } else if s.pending.len() >= MAX_PENDING {
                Some(format!("more than {MAX_PENDING} writes are waiting"))
            } else if !s.writer_started {
                let weak = spawn_runner();
                let shared = self.shared.clone();
                match std::thread::Builder::new()
                    .name("espalier-writer".into())
                    .spawn(move || writer_thread(&shared, &weak))
                {
                    Ok(_) => {
                        s.writer_started = true;
                        None
                    }
                    Err(e) => Some(format!("cannot start the writer thread: {e}")),
                }
            } else {
                None
            };
            if let Some(reason) = refusal {
                drop(s);
                job.complete(Outcome::Failed(TxError::Commit(reason)));
                return;
            }
            s.pending.push_back(job);
            !std::mem::replace(&mut s.leading, true)
        };
        if lead_now {
            if lead_here {
                complete_all(lead(&self.shared, runner));
            } else {
                let mut s = self.lock();
                s.writer_leads = true;
                self.shared.wake.notify_one();
            }
        }
    }

    /// Ends the writer thread once the queue is empty. Later detached requests fail.
    pub fn stop(&self) {
        let mut s = self.lock();
        s.stop = true;
        self.shared.wake.notify_one();
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Leads batches whenever asked to, until stopped (and the queue drained) or the runner gone.
fn writer_thread(shared: &Shared, runner: &std::sync::Weak<dyn BatchRunner + Send + Sync>) {
    loop {
        {
            let mut s = lock(shared);
            while !s.writer_leads {
                if s.stop && !s.leading {
                    return;
                }
                s = shared.wake.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            s.writer_leads = false;
        }
        match runner.upgrade() {
            Some(runner) => {
                let completions = lead(shared, &*runner);
                drop(runner);
                complete_all(completions);
            }
            None => {
                // The database is gone; nothing can run what is queued. Fail it rather than
                // leaving its callers without an answer.
                let pending: Vec<_> = lock(shared).pending.drain(..).collect();
                for job in pending {
                    job.complete(Outcome::Failed(TxError::Commit("the database was closed".into())));
                }
                return;
            }
        }
    }
}

/// Runs one batch, then hands leadership to the next request's waiting thread, or to the
/// writer thread if it has none, or gives it up. Runs another batch itself only when the next
/// request's waiter is gone and there is no writer thread (bounded by the queue's length).
fn lead(shared: &Shared, runner: &dyn BatchRunner) -> Completions {
    let mut completions = Vec::new();
    for _ in 0..=MAX_PENDING {
        let batch: Vec<Box<dyn Job>> = {
            let mut s = lock(shared);
            assert!(s.leading, "lead without the leader flag");
            let n = s.pending.len().min(shared.max_batch);
            s.pending.drain(..n).collect()
        };
        if !batch.is_empty() {
            match catch_unwind(AssertUnwindSafe(|| runner.run_batch(batch))) {
                Ok(done) => completions.extend(done),
                // A bug in the runner: the batch's jobs are lost (their waiters panic, their
                // callbacks are never called). Keep the queue alive for everyone else.
                Err(panic) => eprintln!("espalier: batch runner panicked: {}", panic_message(&panic)),
            }
        }
        let mut s = lock(shared);
        match s.pending.front() {
            None => {
                s.leading = false;
                return completions;
            }
            Some(next) if next.lead() => return completions,
            Some(_) if s.writer_started => {
                s.writer_leads = true;
                shared.wake.notify_one();
                return completions;
            }
            Some(_) => {} // its waiter is gone and there is no writer thread: lead again
        }
    }
    unreachable!("every round takes at least one request, and the queue is bounded");
}

pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// What a request's thread waits for.
pub(crate) type Reply<R, E> = Signal<Result<crate::Committed<R>, E>>;

/// A typed request: the closure, its result slot and the channel back to its thread.
pub(crate) struct TypedJob<F, R, E> {
    pub f: F,
    pub result: Option<Result<R, E>>,
    pub tx: SyncSender<Reply<R, E>>,
    /// See [`Job::spells_changes`].
    pub spell: bool,
}

impl<F, R, E> Job for TypedJob<F, R, E>
where
    F: FnMut(&mut WriteGraph<'_, '_>) -> Result<R, E> + Send,
    R: Send,
    E: Send + From<TxError> + From<DataError>,
{
    fn run(&mut self, graph: &mut WriteGraph<'_, '_>) -> bool {
        run_request(&mut self.f, &mut self.result, graph)
    }

    fn complete(self: Box<Self>, outcome: Outcome) {
        let this = *self;
        let reply = settle(outcome, this.result);
        // The waiter may have gone (its thread panicked); nothing to tell then.
        let _ = this.tx.send(Signal::Done(reply));
    }

    fn lead(&self) -> bool {
        self.tx.try_send(Signal::Lead).is_ok()
    }

    fn spells_changes(&self) -> bool {
        self.spell
    }
}

/// A request nobody waits for: `done` gets its result on the thread that ran its batch.
pub(crate) struct DetachedJob<F, R, E, D> {
    pub f: F,
    pub result: Option<Result<R, E>>,
    pub done: D,
}

impl<F, R, E, D> Job for DetachedJob<F, R, E, D>
where
    F: FnMut(&mut WriteGraph<'_, '_>) -> Result<R, E> + Send,
    R: Send,
    E: Send + From<TxError> + From<DataError>,
    D: FnOnce(Result<crate::Committed<R>, E>) + Send,
{
    fn run(&mut self, graph: &mut WriteGraph<'_, '_>) -> bool {
        run_request(&mut self.f, &mut self.result, graph)
    }

    fn complete(self: Box<Self>, outcome: Outcome) {
        let DetachedJob { f, result, done } = *self;
        // What the request held (the engine, so the database) goes before its caller hears.
        drop(f);
        let reply = settle(outcome, result);
        // The callback only sends to its session; a panic there must not take the batch's
        // other completions with it.
        if let Err(p) = catch_unwind(AssertUnwindSafe(move || done(reply))) {
            eprintln!("espalier: a write's completion panicked: {}", panic_message(&p));
        }
    }

    fn lead(&self) -> bool {
        false
    }

    fn spells_changes(&self) -> bool {
        true
    }
}

/// Runs a request's closure, keeping its result (a panic becomes its error); true if its
/// writes are to be kept.
fn run_request<F, R, E>(f: &mut F, result: &mut Option<Result<R, E>>, graph: &mut WriteGraph<'_, '_>) -> bool
where
    F: FnMut(&mut WriteGraph<'_, '_>) -> Result<R, E>,
    E: From<TxError> + From<DataError>,
{
    let r = match catch_unwind(AssertUnwindSafe(|| f(graph))) {
        // What is checked when a request ends (references into removed nodes, unique-index
        // values) is checked here unless the request checked it itself (the engine does, to
        // answer with its own error codes).
        Ok(Ok(value)) => graph.check_end().map(|()| value).map_err(E::from),
        Ok(r) => r,
        Err(p) => Err(E::from(TxError::Panicked(panic_message(&p)))),
    };
    let ok = r.is_ok();
    *result = Some(r);
    ok
}

/// A request's result from its batch's outcome and its own.
fn settle<R, E: From<TxError>>(outcome: Outcome, result: Option<Result<R, E>>) -> Result<crate::Committed<R>, E> {
    match (outcome, result) {
        (Outcome::Committed { version, changes }, Some(Ok(value))) => Ok(crate::Committed { value, version, changes }),
        (Outcome::Failed(e), _) => Err(E::from(e)),
        (_, Some(Err(e))) => Err(e),
        (Outcome::Rejected, Some(Ok(_))) | (_, None) => {
            Err(E::from(TxError::Commit("request was not run to completion".into())))
        }
    }
}
