//! The server's memory budget under clients that pipeline large queries and never read: the
//! bytes it holds for them stay within `max_queued_bytes`, its anonymous memory stays near
//! that, others are still served, and the memory comes back when they close.
//!
//! A test binary of its own: it measures the process's memory, which the other tests (run
//! in parallel in their binary) would disturb. Its tests take turns ([`HEAVY`]).

#[allow(dead_code)] // each test binary uses part of the helpers
#[path = "it/common.rs"]
mod common;

use std::time::{Duration, Instant};

use espalier_protocol::Message;
use futures_util::SinkExt;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use common::*;

const PRODUCTS: usize = 1000;
const DESCRIPTION: usize = 2000;
const BIG_QUERY: &str = "collection select . 'Products' 'D' -> text : 'Description'";
const ATTACKERS: usize = 3;
const PIPELINED: u64 = 64;

/// Held by each test: they measure the process's memory, so they do not run at once.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const SESSION_BYTES: usize = 4 << 20;
const TOTAL_BYTES: usize = 16 << 20;

/// `PRODUCTS` products with a `DESCRIPTION`-byte description each: the big query answers
/// about 2 MB.
fn products(engine: &espalier_instruction::Engine) {
    for chunk in (0..PRODUCTS).collect::<Vec<_>>().chunks(100) {
        let mut text = String::from("update (");
        for i in chunk {
            let d: String = (0..DESCRIPTION).map(|j| char::from(b'a' + ((i + j) % 26) as u8)).collect();
            text.push_str(&format!(" 'Products' -> dictionary \"p{i:05}\" ( 'Description' -> text \"{d}\" )"));
        }
        text.push(')');
        engine.execute_text(&text, &Default::default()).expect("products");
    }
}

async fn queued_bytes(server: &TestServer) -> usize {
    let text = reqwest::get(server.http("/metrics")).await.unwrap().text().await.unwrap();
    let line = text.lines().find(|l| l.starts_with("espalier_queued_bytes ")).expect("the gauge");
    line["espalier_queued_bytes ".len()..].trim().parse::<f64>().unwrap() as usize
}

#[tokio::test]
async fn clients_that_do_not_read_stay_within_the_budget() {
    let _heavy = HEAVY.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine(dir.path());
    products(&engine);
    let server = start_on(engine, dir, |c| {
        limits(c, |l| {
            l.session_queue_bytes = SESSION_BYTES;
            l.max_queued_bytes = TOTAL_BYTES;
            l.max_result_bytes = 8 << 20;
        })
    })
    .await;
    // One reply's size, as a client that reads sees it.
    let reader = server.client().await;
    reader.execute(BIG_QUERY, None).await.unwrap();
    let reply = serde_json::to_vec(&reader.execute(BIG_QUERY, None).await.unwrap()).unwrap().len();
    assert!(reply > 1_500_000, "{reply}");
    let before = rss_anon();

    let mut attackers = Vec::new();
    for _ in 0..ATTACKERS {
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("{}/ws", server.url())).await.unwrap();
        for id in 1..=PIPELINED {
            let m = Message::execute_text(id, BIG_QUERY, None);
            ws.feed(WsMessage::Text(serde_json::to_string(&m).unwrap().into())).await.unwrap();
        }
        ws.flush().await.unwrap();
        attackers.push(ws); // and never read
    }
    let started = Instant::now();
    let (mut peak_queued, mut peak_rss) = (0, 0);
    while started.elapsed() < Duration::from_secs(4) {
        peak_queued = peak_queued.max(queued_bytes(&server).await);
        peak_rss = peak_rss.max(rss_anon());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A client that reads is served meanwhile.
    let t = Instant::now();
    reader.execute(BIG_QUERY, None).await.unwrap();
    let served = t.elapsed();
    drop(attackers);
    let mut queued_after = usize::MAX;
    for _ in 0..200 {
        queued_after = queued_bytes(&server).await;
        if queued_after == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_anon();
    let mib = |b: usize| b as f64 / f64::from(1 << 20);
    eprintln!(
        "reply {:.1} MiB; anonymous RSS {:.1} MiB before, peak {:.1} MiB, {:.1} MiB after they closed; \
         peak queued {:.1} MiB (budget {:.0} MiB); a reading client served in {served:?}",
        mib(reply),
        mib(before),
        mib(peak_rss),
        mib(after),
        mib(peak_queued),
        mib(TOTAL_BYTES)
    );
    // The budget may be passed by the one reply that finds it full, for the moment it takes
    // the evicted session to drop its queue.
    assert!(peak_queued <= TOTAL_BYTES + reply, "queued {peak_queued} bytes");
    assert_eq!(queued_after, 0, "the queues are given back");
    // What was held unsent is within the budget; replies being built (two reads per session
    // at once) come on top, and both sides' decoded rows take a few times their JSON.
    let bound = TOTAL_BYTES + ATTACKERS * 2 * reply * 4 + (32 << 20);
    assert!(peak_rss.saturating_sub(before) <= bound, "grew by {} bytes", peak_rss - before);
    // The queues' bytes all came back (above); the allocator may keep some of the freed
    // memory for reuse (glibc's per-thread arenas here: 4 to 21 MiB in runs so far; without
    // the budget, 786 MiB).
    assert!(after <= before + (48 << 20), "kept {} bytes after they closed", after.saturating_sub(before));
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_stops_reading_is_closed_after_the_idle_timeout() {
    let _heavy = HEAVY.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine(dir.path());
    products(&engine);
    let server = start_on(engine, dir, |c| limits(c, |l| l.idle_timeout = Duration::from_millis(500))).await;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("{}/ws", server.url())).await.unwrap();
    for id in 1..=16 {
        let m = Message::execute_text(id, BIG_QUERY, None);
        ws.feed(WsMessage::Text(serde_json::to_string(&m).unwrap().into())).await.unwrap();
    }
    ws.flush().await.unwrap();
    // Its replies fill the socket's buffers and then its queue; it reads none of them, so the
    // writer cannot hand anything on for the idle timeout and gives up. (The `/metrics`
    // request itself is the one session left.)
    let started = Instant::now();
    let mut sessions = usize::MAX;
    while started.elapsed() < Duration::from_secs(10) {
        let text = reqwest::get(server.http("/metrics")).await.unwrap().text().await.unwrap();
        let line = text.lines().find(|l| l.starts_with("espalier_sessions ")).unwrap();
        sessions = line["espalier_sessions ".len()..].trim().parse::<f64>().unwrap() as usize;
        if sessions == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sessions, 1, "the session that does not read was closed");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(queued_bytes(&server).await, 0);
    drop(ws);
    server.stop().await;
}
