//! The commit history is bounded in bytes as well as in commits: updates of large texts do
//! not pile up in memory, and a subscriber asking to resume from a version whose commits
//! were dropped is told so (`reason: "history_dropped"`) and gets the data afresh.

use espalier_protocol::{Kind, Message};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::common::*;

const TEXT: usize = 1 << 20;
const UPDATES: usize = 40;
const HISTORY_BYTES: usize = 4 << 20;

async fn metric(server: &TestServer, name: &str) -> usize {
    let text = reqwest::get(server.http("/metrics")).await.unwrap().text().await.unwrap();
    let line = text.lines().find(|l| l.starts_with(&format!("{name} "))).expect("the metric");
    line[name.len() + 1..].trim().parse::<f64>().unwrap() as usize
}

/// Subscribes to client c1 over a raw session with `since`; the `subscribed` message.
async fn subscribe_since(server: &TestServer, since: u64) -> Message {
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("{}/ws", server.url())).await.unwrap();
    let _welcome = ws.next().await.unwrap().unwrap();
    let m = Message::subscribe_node(1, ". 'Clients' : \"c1\"", None, Some(since));
    ws.send(WsMessage::Text(serde_json::to_string(&m).unwrap().into())).await.unwrap();
    loop {
        let frame = ws.next().await.unwrap().unwrap();
        let m: Message = serde_json::from_str(frame.to_text().unwrap()).unwrap();
        if m.id == Some(1) {
            return m;
        }
    }
}

#[tokio::test]
async fn large_texts_do_not_pile_up_in_the_history() {
    let server = start_with(|c| limits(c, |l| l.history_bytes = HISTORY_BYTES)).await;
    let client = server.client().await;
    let first = client.status().await.unwrap().version.unwrap();
    let before = rss_anon();
    for i in 0..UPDATES {
        let text = char::from(b'a' + (i % 26) as u8).to_string().repeat(TEXT);
        client.execute(&format!("update . 'Clients' : \"c1\" ( 'Name' -> text \"{text}\" )"), None).await.unwrap();
    }
    let last = client.status().await.unwrap().version.unwrap();
    let grown = rss_anon().saturating_sub(before);
    eprintln!("{UPDATES} updates of a {TEXT}-byte text: anonymous RSS grew by {:.1} MiB", grown as f64 / 1048576.0);
    // Not asserted: the allocator keeps some of what the requests used (about as much grew
    // with no history at all); the history's own bytes are, below.
    // Each commit holds the old and the new text: 2 MiB, 80 MiB for all of them without the
    // bound. The history keeps what fits.
    let mut held = usize::MAX;
    for _ in 0..100 {
        held = metric(&server, "espalier_history_bytes").await;
        if held > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(held > 0 && held <= HISTORY_BYTES, "history holds {held} bytes");
    let from = client.status().await.unwrap().history_from.unwrap();
    assert!(from > first && from < last, "history from {from}, versions {first}..{last}");

    // Resuming from a dropped version: told so, with the data afresh.
    let m = subscribe_since(&server, first).await;
    assert_eq!(m.kind, Kind::Subscribed, "{m:?}");
    assert_eq!(m.resumed, Some(false));
    assert_eq!(m.reason.as_deref(), Some("history_dropped"));
    assert!(m.node.is_some() && m.version == Some(last), "{m:?}");
    // From a version still kept: resumed.
    let m = subscribe_since(&server, last - 1).await;
    assert_eq!((m.resumed, m.reason.as_deref()), (Some(true), None), "{m:?}");
    // From a version the database has not reached: told that instead.
    let m = subscribe_since(&server, last + 10).await;
    assert_eq!((m.resumed, m.reason.as_deref()), (Some(false), Some("version_ahead")), "{m:?}");
    server.stop().await;
}
