//! One subscription's task: resolve what it watches, register with the hub, send `subscribed`
//! with the data (or resume from the history), then turn each queued change set into a
//! `notify`, or a lag into a `reload` with the data afresh.
//!
//! Versions: the data of `subscribed`/`reload` is read at version V (exact for nodes, a lower
//! bound for queries — see `exec::run_query`), and only change sets after V are notified, so
//! a commit is never applied twice to a node's data nor skipped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use espalier_data::ChangeSet;
use espalier_instruction::plan::Plan;
use espalier_instruction::{ParamValue, QueryResult};
use espalier_protocol::codec::EncodeError;
use espalier_protocol::{Codec, Data, ErrorCode, Message, RequestError, Target};

use crate::encode::{encode_error, encode_reply};
use crate::exec::{self, Resolved};
use crate::figures::InFlight;
use crate::hub::{Filter, Start, SubQueue};
use crate::outbox::Outgoing;
use crate::outbox::{Outbox, Slot};
use crate::shared::Shared;
use tokio::task::JoinHandle;

/// A session's subscription tasks, by subscription number.
pub type Subscriptions = Arc<Mutex<HashMap<u64, JoinHandle<()>>>>;

/// The map, even if a task panicked while holding it (it holds no invariant across calls).
pub fn lock_subs(subs: &Subscriptions) -> std::sync::MutexGuard<'_, HashMap<u64, JoinHandle<()>>> {
    subs.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct Context {
    pub shared: Arc<Shared>,
    pub codec: Codec,
    pub tx: Outbox,
    pub subs: Subscriptions,
    pub subscription: u64,
    /// The id of the `subscribe` request.
    pub request: u64,
    pub target: Target,
    pub params: HashMap<String, ParamValue>,
    pub since: Option<u64>,
}

/// What the subscription watches, once resolved.
enum Watch {
    Node(espalier_data::NodePath),
    Query(Plan),
    /// A pattern query registered with the engine (by its id): notified by differences.
    Registered(u64),
}

/// Unregisters from the hub and the session when the task ends, however it ends.
struct Registration {
    shared: Arc<Shared>,
    subs: Subscriptions,
    subscription: u64,
    key: Option<u64>,
    /// The engine's registered query, for a pattern query subscription.
    query: Option<u64>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.shared.hub.unregister(key);
        }
        if let Some(id) = self.query {
            self.shared.engine.unregister(id);
        }
        // A no-op after an unsubscribe (the session removed it first). The session holds this
        // lock only for a map operation, never across an await or an abort.
        lock_subs(&self.subs).remove(&self.subscription);
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, RequestError> + Send + 'static,
) -> Result<T, RequestError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(RequestError::new(ErrorCode::Internal, format!("subscription work failed: {e}"))))
}

/// The data of a subscription now: (version, data).
async fn fetch(ctx: &Context, watch: &Arc<Watch>) -> Result<(u64, Data), RequestError> {
    let engine = ctx.shared.engine.clone();
    let watch = watch.clone();
    let params = ctx.params.clone();
    let limit = exec::dump_limit(ctx.shared.limits.max_result_bytes);
    blocking(move || match &*watch {
        Watch::Node(path) => {
            let (version, node) = exec::node_at(&engine, path, limit)?;
            Ok((version, node.map_or(Data::None, Data::Node)))
        }
        Watch::Query(plan) => {
            let (version, rows) = exec::run_query(&engine, plan, &params)?;
            Ok((version, Data::Query(rows)))
        }
        // The rows the engine keeps, at the commit they are of.
        Watch::Registered(id) => match engine.registry().result(*id) {
            Some((version, rows)) => Ok((version, Data::Query(rows))),
            None => Err(RequestError::new(ErrorCode::Internal, "the registered query stopped")),
        },
    })
    .await
}

pub async fn run(ctx: Context, slot: Slot, mut inflight: InFlight) {
    let mut reg = Registration {
        shared: ctx.shared.clone(),
        subs: ctx.subs.clone(),
        subscription: ctx.subscription,
        key: None,
        query: None,
    };
    // Resolve the target against the current data.
    let resolved = {
        let engine = ctx.shared.engine.clone();
        let target = ctx.target.clone();
        let params = ctx.params.clone();
        blocking(move || match &target {
            Target::Node(path) => exec::resolve_node(&engine, path, &params).map(Resolved::Node),
            Target::Query(source) => exec::resolve_query(&engine, source, &params),
        })
        .await
    };
    let mut registered = None;
    let (watch, filter) = match resolved {
        Ok(Resolved::Node(path)) => (Watch::Node(path.clone()), Filter::Subtree(path)),
        Ok(Resolved::Query { plan, scope }) => (Watch::Query(*plan), scope),
        Ok(Resolved::Registered(r)) => {
            reg.query = Some(r.id);
            let id = r.id;
            registered = Some(r);
            (Watch::Registered(id), Filter::Registered(id))
        }
        Err(e) => {
            inflight.fail();
            drop(inflight);
            slot.send(encode_error(&ctx.codec, Some(ctx.request), e.code, e.message));
            drop(reg);
            return;
        }
    };
    let watch = Arc::new(watch);
    let queue = Arc::new(SubQueue::new(filter, ctx.shared.limits.subscriber_queue));
    let current = ctx.shared.engine.database().version();
    let (key, start) = ctx.shared.hub.register(queue.clone(), ctx.since, current);
    reg.key = Some(key);
    let limit = ctx.shared.limits.max_result_bytes;

    // `subscribed`: resumed, or with the data afresh. A pattern query is registered anew, so
    // it has no history to resume from: it starts with its rows at registration.
    let mut last_rows: Option<QueryResult> = None;
    // Why `since` could not be honoured, said in `subscribed` so that the client knows its
    // copy is replaced rather than continued.
    let not_resumed = match &start {
        Start::Fresh(Some(why)) => Some(why.reason()),
        _ => None,
    };
    let (mut seen, first) = match (start, ctx.since, registered) {
        (_, _, Some(r)) => {
            (r.version, Message::subscribed(ctx.request, ctx.subscription, r.version, false, Data::Query(r.result)))
        }
        (Start::Resumed, Some(since), None) => {
            (since, Message::subscribed(ctx.request, ctx.subscription, since, true, Data::None))
        }
        _ => match fetch(&ctx, &watch).await {
            Ok((version, Data::None)) => {
                let _ = version;
                let e = RequestError::new(ErrorCode::KeyMissing, "the subscribed node does not exist");
                inflight.fail();
                drop(inflight);
                slot.send(encode_error(&ctx.codec, Some(ctx.request), e.code, e.message));
                return;
            }
            Ok((version, data)) => {
                if let Data::Query(rows) = &data {
                    last_rows = Some(rows.clone());
                }
                let mut m = Message::subscribed(ctx.request, ctx.subscription, version, false, data);
                m.reason = not_resumed.map(str::to_string);
                (version, m)
            }
            Err(e) => {
                inflight.fail();
                drop(inflight);
                slot.send(encode_error(&ctx.codec, Some(ctx.request), e.code, e.message));
                return;
            }
        },
    };
    // The request's slot is freed before its reply is queued (see session::spawn_work).
    drop(inflight);
    match ctx.codec.encode_limited(&first, limit) {
        Ok(frame) => slot.send(Outgoing::Frame(frame)),
        Err(_) => {
            slot.send(encode_reply(&ctx.codec, &first, limit));
            return;
        }
    };

    loop {
        // Nothing is built for a session whose replies wait unread (`session_queue_bytes`):
        // meanwhile the hub's queue for it fills and lags, and a reload follows.
        ctx.tx.room().await;
        if ctx.tx.is_stopping() {
            return;
        }
        let pending = queue.take();
        if !pending.lagged && pending.sets.is_empty() {
            queue.notify.notified().await;
            continue;
        }
        let result = if pending.lagged {
            reload(&ctx, &watch, &mut seen, &mut last_rows, "lagged").await
        } else {
            let sets: Vec<Arc<ChangeSet>> = pending.sets.into_iter().filter(|s| s.version > seen).collect();
            notify(&ctx, &watch, &queue.filter, sets, &mut seen, &mut last_rows).await
        };
        match result {
            Ok(true) => {}
            Ok(false) => return, // the session is gone
            Err(e) => {
                // The subscription cannot go on: say so and end it.
                let msg = Message::subscription_error(ctx.subscription, e.code, e.message);
                let _ = ctx.tx.send(encode_reply(&ctx.codec, &msg, usize::MAX)).await;
                return;
            }
        }
    }
}

/// Sends one message of this subscription; false if the session is gone.
async fn send(ctx: &Context, msg: &Message) -> Result<bool, RequestError> {
    let frame = ctx.codec.encode_limited(msg, ctx.shared.limits.max_result_bytes).map_err(|e| match e {
        EncodeError::TooLarge { size, limit } => RequestError::new(
            ErrorCode::ResultTooLarge,
            format!("a notification is {size} bytes, over the server's limit of {limit} bytes; the subscription ends"),
        ),
        EncodeError::Serialize(e) => RequestError::new(ErrorCode::Internal, format!("cannot encode: {e}")),
    })?;
    Ok(ctx.tx.send(Outgoing::Frame(frame)).await.is_ok())
}

async fn reload(
    ctx: &Context,
    watch: &Arc<Watch>,
    seen: &mut u64,
    last_rows: &mut Option<QueryResult>,
    reason: &str,
) -> Result<bool, RequestError> {
    let (version, data) = fetch(ctx, watch).await?;
    if let Data::Query(rows) = &data {
        *last_rows = Some(rows.clone());
    }
    *seen = version;
    send(ctx, &Message::reload(ctx.subscription, version, reason, data)).await
}

async fn notify(
    ctx: &Context,
    watch: &Arc<Watch>,
    filter: &Filter,
    sets: Vec<Arc<ChangeSet>>,
    seen: &mut u64,
    last_rows: &mut Option<QueryResult>,
) -> Result<bool, RequestError> {
    let Some(newest) = sets.last().map(|s| s.version) else {
        return Ok(true);
    };
    match &**watch {
        // One message per commit: the changes within the subtree, or the query's difference.
        Watch::Node(_) | Watch::Registered(_) => {
            for set in sets {
                if set.version <= *seen {
                    continue; // covered by a reload below, or by the rows sent already
                }
                let msg = match &**watch {
                    Watch::Registered(id) => {
                        let Some(diff) = set.diffs.iter().find(|d| d.query == *id) else { continue };
                        if let Some(e) = &diff.error {
                            return Err(RequestError::new(ErrorCode::Limit, e.clone()));
                        }
                        let (removed, added) = (diff.removed.clone(), diff.added.clone());
                        Message::notify_matches(ctx.subscription, set.version, removed, added)
                    }
                    _ => {
                        let changes = set.changes.iter().filter(|c| filter.touches(c)).cloned().collect();
                        Message::notify_changes(ctx.subscription, set.version, changes)
                    }
                };
                let delivered = match ctx.codec.encode_limited(&msg, ctx.shared.limits.max_result_bytes) {
                    Ok(frame) => {
                        *seen = set.version;
                        ctx.tx.send(Outgoing::Frame(frame)).await.is_ok()
                    }
                    // One commit changed more than a message may hold: the data afresh may be
                    // smaller (if not, the subscription ends with the error).
                    Err(EncodeError::TooLarge { .. }) => reload(ctx, watch, seen, last_rows, "too_large").await?,
                    Err(EncodeError::Serialize(e)) => {
                        return Err(RequestError::new(ErrorCode::Internal, format!("cannot encode: {e}")))
                    }
                };
                if !delivered {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Watch::Query(_) => {
            let (version, data) = fetch(ctx, watch).await?;
            *seen = version.max(newest);
            let Data::Query(rows) = data else {
                return Err(RequestError::new(ErrorCode::Internal, "a query subscription read a node"));
            };
            if last_rows.as_ref() == Some(&rows) {
                return Ok(true); // the commit did not change the rows
            }
            *last_rows = Some(rows.clone());
            send(ctx, &Message::notify_query(ctx.subscription, *seen, rows)).await
        }
    }
}
