//! The write queue: leader/follower group commit.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use espalier_data::{ChangeSet, WriteGraph};

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
    /// Wakes the waiting thread to lead the next batch.
    fn lead(&self);
}

pub(crate) enum Signal<T> {
    Done(T),
    Lead,
}

/// Runs a batch and completes each job. Implemented by the database.
pub(crate) trait BatchRunner {
    fn run_batch(&self, batch: Vec<Box<dyn Job>>);
}

#[derive(Default)]
struct State {
    pending: VecDeque<Box<dyn Job>>,
    leading: bool,
}

pub(crate) struct WriteQueue {
    state: Mutex<State>,
    max_batch: usize,
}

impl WriteQueue {
    pub fn new(max_batch: usize) -> WriteQueue {
        assert!(max_batch >= 1);
        WriteQueue { state: Mutex::new(State::default()), max_batch }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `job` and waits for its result on `rx`, leading batches when asked to.
    pub fn submit<T>(&self, runner: &dyn BatchRunner, job: Box<dyn Job>, rx: Receiver<Signal<T>>) -> T {
        let lead_now = {
            let mut s = self.lock();
            s.pending.push_back(job);
            !std::mem::replace(&mut s.leading, true)
        };
        if lead_now {
            self.lead(runner);
        }
        loop {
            match rx.recv() {
                Ok(Signal::Done(result)) => return result,
                Ok(Signal::Lead) => self.lead(runner),
                // The sender lives in the job, which is always completed: unreachable unless
                // a completion itself panicked.
                Err(_) => panic!("write request dropped without a result"),
            }
        }
    }

    /// Runs one batch, then hands leadership to the next waiter (so no thread keeps leading
    /// for others after its own request is done) or gives it up.
    fn lead(&self, runner: &dyn BatchRunner) {
        let batch: Vec<Box<dyn Job>> = {
            let mut s = self.lock();
            assert!(s.leading, "lead without the leader flag");
            let n = s.pending.len().min(self.max_batch);
            s.pending.drain(..n).collect()
        };
        if !batch.is_empty() {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| runner.run_batch(batch))) {
                // run_batch completes jobs itself; a panic here is a bug in the runner. Keep the
                // queue alive for everyone else.
                eprintln!("espalier: batch runner panicked: {}", panic_message(&panic));
            }
        }
        let mut s = self.lock();
        match s.pending.front() {
            Some(next) => next.lead(),
            None => s.leading = false,
        }
    }
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
}

impl<F, R, E> Job for TypedJob<F, R, E>
where
    F: FnMut(&mut WriteGraph<'_, '_>) -> Result<R, E> + Send,
    R: Send,
    E: Send + From<TxError>,
{
    fn run(&mut self, graph: &mut WriteGraph<'_, '_>) -> bool {
        let result = match catch_unwind(AssertUnwindSafe(|| (self.f)(graph))) {
            Ok(r) => r,
            Err(p) => Err(E::from(TxError::Panicked(panic_message(&p)))),
        };
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn complete(self: Box<Self>, outcome: Outcome) {
        let this = *self;
        let reply = match (outcome, this.result) {
            (Outcome::Committed { version, changes }, Some(Ok(value))) => {
                Ok(crate::Committed { value, version, changes })
            }
            (Outcome::Failed(e), _) => Err(E::from(e)),
            (_, Some(Err(e))) => Err(e),
            (Outcome::Rejected, Some(Ok(_))) | (_, None) => {
                Err(E::from(TxError::Commit("request was not run to completion".into())))
            }
        };
        // The waiter may have gone (its thread panicked); nothing to tell then.
        let _ = this.tx.send(Signal::Done(reply));
    }

    fn lead(&self) {
        let _ = self.tx.try_send(Signal::Lead);
    }
}
