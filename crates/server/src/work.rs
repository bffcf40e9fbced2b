//! Running a request's engine work off the async runtime, with the query-time limit.
//!
//! The engine blocks (LMDB reads, group commit waits for the disk), so every request runs on
//! tokio's blocking pool. Read-only work gets `max_query_time`: past it the client is answered
//! `timeout` (the engine has no cancellation point, so the read itself runs to its end in the
//! background, bounded by the engine's own row limit). Writes are never abandoned once they
//! start: a client must not be told `timeout` about a write that then commits. A write whose
//! deadline passed while it still waited for a thread is not started at all.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use espalier_instruction::{ParamValue, Reply};
use espalier_protocol::{ErrorCode, RequestError, Role, Source};

use crate::exec;
use crate::server::Shared;

/// Engine work a request asks for.
pub enum Job {
    Execute { source: Source, params: HashMap<String, ParamValue> },
    Get { path: String, params: HashMap<String, ParamValue> },
}

/// What engine work produced.
pub enum Outcome {
    Reply(Reply),
    Node { version: u64, node: serde_json::Value },
}

const PENDING: u8 = 0;
const WRITING: u8 = 1;
const TIMED_OUT: u8 = 2;

/// Who decides a request's fate first: the deadline or a write starting.
struct Deadline(AtomicU8);

impl Deadline {
    fn start_write(&self) -> bool {
        self.0.compare_exchange(PENDING, WRITING, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    fn time_out(&self) -> bool {
        self.0.compare_exchange(PENDING, TIMED_OUT, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    fn timed_out(&self) -> bool {
        self.0.load(Ordering::Acquire) == TIMED_OUT
    }
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
            } else {
                if role < Role::Write {
                    return Some(Err(RequestError::new(
                        ErrorCode::Forbidden,
                        format!("this instruction writes, and this session's token has the {role} role"),
                    )));
                }
                if !deadline.start_write() {
                    return None; // the client was already told `timeout`; do not write
                }
            }
            Some(exec::run(engine, &checked, &params).map(Outcome::Reply))
        }
        Job::Get { path, params } => {
            if deadline.timed_out() {
                return None;
            }
            Some(exec::get(engine, &path, &params).map(|(version, node)| Outcome::Node { version, node }))
        }
    }
}

/// Runs `job` on the blocking pool; `finish` turns its outcome into what the caller sends
/// (it runs on the blocking thread too, so encoding large replies does not hold up the runtime).
pub async fn run<T, F>(shared: &Arc<Shared>, role: Role, job: Job, finish: F) -> T
where
    T: Send + 'static,
    F: Fn(Result<Outcome, RequestError>) -> T + Send + Sync + 'static,
{
    let finish = Arc::new(finish);
    let deadline = Arc::new(Deadline(AtomicU8::new(PENDING)));
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
