//! Running a request's engine work: inline, on the blocking pool with the query-time limit,
//! or as a write through group commit.
//!
//! The engine blocks (snapshot reads; writes wait for group commit and the disk). Measured on the
//! two-core development machine (`cargo run --release -p espalier-server --example
//! roundtrip`), every hand-off to another thread costs about as much as the read of a small
//! node itself, so:
//!
//! - small node reads (`get`, or `execute` of a `get`) run inline on the session's task
//!   with a budget of [`INLINE_BUDGET`] bytes of output; a larger node is read again on the
//!   blocking pool, so a big read never holds up the runtime for long;
//! - queries run on the blocking pool with `max_query_time`: past it the client is answered
//!   `timeout`, and the read is told to stop (the engine looks at its cancel flag every
//!   1024 rows or pattern steps, so it ends within microseconds);
//! - writes checked inline go to group commit detached (`Engine::run_detached`): the session
//!   never waits for a commit, so writes pipelined on one session share batches. With an
//!   fsync per commit the database's writer thread runs the batches; without one a write
//!   that finds no batch running runs its own on the session's thread (a hand-off to another
//!   thread and back costs more than the commit). Writes checked on the blocking pool (large
//!   texts, HTTP) wait for their commit there. Writes are never abandoned once started: a
//!   client must not be told `timeout` about a write that then commits. A write whose
//!   deadline passed while it still waited for a thread (only writes sent as large texts,
//!   checked on the pool) is not started.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use espalier_instruction::{ParamValue, Reply};
use espalier_protocol::{ErrorCode, RequestError, Role, Source};

use crate::exec::{self, Checked};
use crate::shared::Shared;

/// Output a node read may produce inline before it moves to the blocking pool.
pub const INLINE_BUDGET: usize = 64 << 10;
/// Requests up to this size are parsed and checked inline (microseconds); larger ones on the
/// blocking pool.
pub const INLINE_CHECK_MAX: usize = 16 << 10;

/// Engine work a request asks for.
pub enum Job {
    /// An instruction still to be parsed and checked.
    Execute {
        source: Source,
        params: HashMap<String, ParamValue>,
    },
    /// A checked read-only instruction.
    Read {
        checked: Checked,
        params: HashMap<String, ParamValue>,
    },
    Get {
        path: String,
        params: HashMap<String, ParamValue>,
    },
}

/// What engine work produced.
pub enum Outcome {
    Reply(Reply),
    Node { version: u64, node: serde_json::Value },
}

const PENDING: u8 = 0;
const WRITING: u8 = 1;
const TIMED_OUT: u8 = 2;

/// Who decides a request's fate first: the deadline or a write starting. A read that is
/// timed out while it runs is told to stop (`stop`), so it does not go on using a thread and
/// a snapshot for a client that already has its answer.
struct Deadline {
    state: AtomicU8,
    stop: AtomicBool,
}

impl Deadline {
    fn new() -> Deadline {
        Deadline { state: AtomicU8::new(PENDING), stop: AtomicBool::new(false) }
    }

    fn start_write(&self) -> bool {
        self.state.compare_exchange(PENDING, WRITING, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    fn time_out(&self) -> bool {
        let won = self.state.compare_exchange(PENDING, TIMED_OUT, Ordering::AcqRel, Ordering::Acquire).is_ok();
        if won {
            self.stop.store(true, Ordering::Relaxed);
        }
        won
    }

    fn timed_out(&self) -> bool {
        self.state.load(Ordering::Acquire) == TIMED_OUT
    }
}

/// The write check: a role may only write if it is `write` or `admin`.
pub fn may_write(role: Role) -> Result<(), RequestError> {
    if role < Role::Write {
        return Err(RequestError::new(
            ErrorCode::Forbidden,
            format!("this instruction writes, and this session's token has the {role} role"),
        ));
    }
    Ok(())
}

fn do_job(shared: &Shared, role: Role, job: Job, deadline: &Deadline) -> Option<Result<Outcome, RequestError>> {
    let engine = &shared.engine;
    match job {
        Job::Execute { source, params } => {
            let checked = match exec::check(engine, &source) {
                Ok(c) => c,
                Err(e) => return Some(Err(e)),
            };
            if checked.is_read_only() {
                if deadline.timed_out() {
                    return None;
                }
                return Some(exec::read(engine, &checked, &params, &deadline.stop).map(Outcome::Reply));
            }
            if let Err(e) = may_write(role) {
                return Some(Err(e));
            }
            if !deadline.start_write() {
                return None; // the client was already told `timeout`; do not write
            }
            Some(exec::run(engine, &checked, &params).map(Outcome::Reply))
        }
        Job::Read { checked, params } => {
            assert!(checked.is_read_only(), "writes do not go through the read path");
            if deadline.timed_out() {
                return None;
            }
            Some(exec::read(engine, &checked, &params, &deadline.stop).map(Outcome::Reply))
        }
        Job::Get { path, params } => {
            if deadline.timed_out() {
                return None;
            }
            let limit = exec::dump_limit(shared.limits.max_result_bytes);
            Some(exec::get(engine, &path, &params, limit, true).and_then(|r| {
                r.map(|(version, node)| Outcome::Node { version, node })
                    .ok_or_else(|| RequestError::new(ErrorCode::Internal, "an over-limit node read gave nothing"))
            }))
        }
    }
}

/// Runs `job` on the blocking pool with the query-time limit; `finish` turns its outcome into
/// what the caller sends (it runs on the blocking thread too, so encoding large replies does
/// not hold up the runtime).
pub async fn run<T, F>(shared: &Arc<Shared>, role: Role, job: Job, finish: F) -> T
where
    T: Send + 'static,
    F: Fn(Result<Outcome, RequestError>) -> T + Send + Sync + 'static,
{
    let finish = Arc::new(finish);
    let deadline = Arc::new(Deadline::new());
    let (s, d, f) = (shared.clone(), deadline.clone(), finish.clone());
    let mut handle = tokio::task::spawn_blocking(move || do_job(&s, role, job, &d).map(|r| f(r)));
    let limit = shared.limits.max_query_time;
    let joined = match tokio::time::timeout(limit, &mut handle).await {
        Ok(joined) => joined,
        Err(_) if deadline.time_out() => {
            return finish(Err(RequestError::new(
                ErrorCode::Timeout,
                format!("the request ran longer than the server's query time limit of {limit:?}"),
            )));
        }
        // A write has started: it finishes (and commits) whatever the time.
        Err(_) => handle.await,
    };
    match joined {
        Ok(Some(done)) => done,
        Ok(None) => finish(Err(RequestError::new(ErrorCode::Timeout, "the request timed out before it started"))),
        Err(e) => finish(Err(RequestError::new(ErrorCode::Internal, format!("the request failed: {e}")))),
    }
}

/// Queues a checked write for group commit without holding up the session; `deliver` sends its
/// outcome. A reply with a query's rows or a node (a transaction that reads) is spelt out, encoded and
/// sent on the blocking pool, so that the database's single writer, which ran its batch, goes
/// on to the next batch (see [`deliver_off_writer`]); any other reply is delivered from the
/// thread that ran its batch.
pub fn spawn_write(
    shared: &Arc<Shared>,
    checked: Checked,
    params: HashMap<String, ParamValue>,
    deliver: impl FnOnce(Result<Outcome, RequestError>) + Send + 'static,
) {
    assert!(!checked.is_read_only(), "reads go through `run`, which watches the time");
    let lead_here = writes_inline(shared);
    // Called on the session's task, inside the server's runtime.
    let runtime = tokio::runtime::Handle::try_current().ok();
    shared.engine.run_detached(checked.plan, params, lead_here, move |r| {
        match (r.map_err(|e| exec::instruction_error(&e)), runtime) {
            // Bounded: the session holds an in-flight slot for the request until `deliver` has
            // run, and sessions are bounded. (If the runtime is shutting down, the reply is
            // dropped with its session.)
            (Ok(written), Some(runtime)) if deliver_off_writer(&written) => {
                runtime.spawn_blocking(move || deliver(reply(written)));
            }
            (r, _) => deliver(r.and_then(reply)),
        }
    });
}

/// A committed write's reply, its rows spelt out.
fn reply(written: espalier_instruction::Written) -> Result<Outcome, RequestError> {
    written.into_reply().map(Outcome::Reply).map_err(|e| exec::instruction_error(&e))
}

/// Whether a write's reply is spelt out and encoded on the blocking pool rather than on the
/// thread that ran its batch: when it holds rows or a node. The database's single writer runs every
/// transaction's reads; turning their rows into a reply and encoding it (a page of 300
/// records of 11 fields is some 300 KB) would hold up every other transaction behind it,
/// where the hand-off costs a few microseconds. Replies that only say `done` are sent at once.
pub fn deliver_off_writer(written: &espalier_instruction::Written) -> bool {
    written.is_large()
}

/// Whether a write with no batch running ahead of it runs its batch on the session's own
/// thread, rather than on the database's writer thread. Without an fsync per commit a batch
/// takes microseconds, and the hand-off to the writer thread and back costs several times
/// that; with one, an async runtime's thread must not wait for the disk.
fn writes_inline(shared: &Shared) -> bool {
    shared.engine.database().durability() != espalier_transaction::Durability::Sync
}
