//! A session's writer: sends what the outbox queues, a batch per flush, and gives up on a
//! client that is evicted (the server's memory budget) or takes nothing for the idle timeout,
//! dropping its queue first so that the memory comes back at once.

use std::time::Duration;

use axum::extract::ws::{close_code, CloseFrame, Message as WsMessage, WebSocket};
use espalier_protocol::Frame;
use futures_util::stream::SplitSink;
use futures_util::SinkExt;

use super::CLOSE_WAIT;
use crate::outbox::{Budget, Charge, Inbox, Outgoing, Queued};

/// Most messages written before one flush.
const MAX_BATCH: usize = 64;
/// How long the writer tries to send a close frame to a client it is giving up on.
const GIVE_UP_WAIT: Duration = Duration::from_millis(100);

/// Why the writer stopped early.
enum Stop {
    /// The server's budget was exceeded and this session held the most.
    Evicted,
    /// Nothing could be handed to the socket for the idle timeout.
    Stalled,
    /// The connection failed.
    Failed,
}

/// Runs one socket operation, unless the session is evicted or the operation stalls.
async fn guarded(
    budget: &Budget,
    stall: Duration,
    op: impl std::future::Future<Output = Result<(), axum::Error>>,
) -> Result<(), Stop> {
    tokio::select! {
        biased;
        _ = budget.evict_signal.notified() => Err(Stop::Evicted),
        r = tokio::time::timeout(stall, op) => match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Stop::Failed),
            Err(_) => Err(Stop::Stalled),
        },
    }
}

/// Sends a close frame, waiting at most `wait` (a client that reads nothing never takes it).
async fn close(sink: &mut SplitSink<WebSocket, WsMessage>, code: u16, reason: String, wait: Duration) {
    let frame = CloseFrame { code, reason: truncate_reason(reason).into() };
    let _ = tokio::time::timeout(wait, async {
        let _ = sink.send(WsMessage::Close(Some(frame))).await;
        let _ = sink.close().await;
    })
    .await;
}

/// Gives up on the client: drops what is queued for it (giving the memory back at once), then
/// says why if the client takes it.
async fn give_up(
    sink: &mut SplitSink<WebSocket, WsMessage>,
    inbox: &mut Inbox,
    fed: &mut Vec<Charge>,
    stop: Stop,
    stall: Duration,
) {
    let held = inbox.budget.queued_bytes();
    inbox.rx.close();
    while inbox.rx.try_recv().is_ok() {}
    fed.clear();
    let reason = match stop {
        Stop::Evicted => {
            format!("slow_reader: {held} bytes of replies unread while the server's total was over max_queued_bytes")
        }
        Stop::Stalled => format!("slow_reader: the client took nothing for {stall:?} (idle_timeout_ms)"),
        Stop::Failed => return,
    };
    close(sink, close_code::POLICY, reason, GIVE_UP_WAIT).await;
}

pub(super) async fn write_loop(mut sink: SplitSink<WebSocket, WsMessage>, mut inbox: Inbox, stall: Duration) {
    let budget = inbox.budget.clone();
    // The charges of the frames fed since the last flush: their bytes count until the flush
    // has handed them to the socket.
    let mut fed: Vec<Charge> = Vec::new();
    loop {
        let first = tokio::select! {
            biased;
            _ = budget.evict_signal.notified() => {
                return give_up(&mut sink, &mut inbox, &mut fed, Stop::Evicted, stall).await;
            }
            q = inbox.rx.recv() => match q {
                Some(q) => q,
                None => return,
            },
        };
        let mut next = Some(first);
        let mut written = 0;
        while let Some(Queued { out, charge }) = next.take() {
            let msg = match out {
                Outgoing::Frame(Frame::Text(t)) => WsMessage::Text(t.into()),
                Outgoing::Frame(Frame::Binary(b)) => WsMessage::Binary(b.into()),
                Outgoing::Ping => WsMessage::Ping(Default::default()),
                Outgoing::Close(code, reason) => return close(&mut sink, code, reason, CLOSE_WAIT).await,
            };
            fed.extend(charge);
            if let Err(stop) = guarded(&budget, stall, sink.feed(msg)).await {
                return give_up(&mut sink, &mut inbox, &mut fed, stop, stall).await;
            }
            written += 1;
            if written < MAX_BATCH {
                next = inbox.rx.try_recv().ok();
            }
        }
        if let Err(stop) = guarded(&budget, stall, sink.flush()).await {
            return give_up(&mut sink, &mut inbox, &mut fed, stop, stall).await;
        }
        fed.clear();
    }
}

/// Close reasons are at most 123 bytes.
fn truncate_reason(mut reason: String) -> String {
    if reason.len() > 123 {
        let mut end = 120;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
        reason.push_str("...");
    }
    reason
}
