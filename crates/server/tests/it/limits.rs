//! Every limit: past it the request gets a clear error (or, for an oversized frame, the
//! session a clean close), and the server keeps serving everyone else.

use std::time::Duration;

use espalier_client::{Client, ClientError, ClientOptions};
use espalier_protocol::codec::compress;
use espalier_protocol::{Compression, Encoding, ErrorCode, Kind, Message, Reply};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::common::*;

/// Adds `n` products, so that a query over them takes a while.
pub fn bulk_products(engine: &espalier_instruction::Engine, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(2000) {
        let mut text = String::from("update (");
        for i in chunk {
            text.push_str(&format!(" 'Products' -> dictionary \"p{i:06}\" ( 'Price' -> number {i} )"));
        }
        text.push(')');
        engine.execute_text(&text, &Default::default()).expect("bulk products");
    }
}

pub const SLOW_QUERY: &str =
    "collection select . 'Products' 'Price' -> number : 'Price' > 5 'D' -> text : 'Description'";

async fn raw(
    url: &str,
    query: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("{url}/ws?{query}")).await.expect("raw connect");
    let welcome = ws.next().await.expect("welcome").expect("welcome frame");
    assert!(matches!(welcome, WsMessage::Text(_) | WsMessage::Binary(_)));
    ws
}

fn json_of(frame: WsMessage) -> Message {
    serde_json::from_str(frame.to_text().expect("a text frame")).expect("a JSON message")
}

#[tokio::test]
async fn in_flight_limit_answers_the_excess() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine(dir.path());
    bulk_products(&engine, 20_000);
    let server = start_on(engine, dir, |c| limits(c, |l| l.max_in_flight = 1)).await;
    let mut ws = raw(&server.url(), "encoding=json").await;
    for id in 1..=3u64 {
        let m = Message::execute_text(id, SLOW_QUERY, None);
        ws.feed(WsMessage::Text(serde_json::to_string(&m).unwrap().into())).await.unwrap();
    }
    ws.flush().await.unwrap();
    let mut results = Vec::new();
    let mut refused = Vec::new();
    while results.len() + refused.len() < 3 {
        let m = json_of(ws.next().await.unwrap().unwrap());
        match m.kind {
            Kind::Result => results.push(m.id.unwrap()),
            Kind::Error => {
                assert_eq!(m.code, Some(ErrorCode::TooManyRequests), "{m:?}");
                assert!(m.message.as_deref().unwrap().contains("more than 1 request"), "{m:?}");
                refused.push(m.id.unwrap());
            }
            other => panic!("{other}"),
        }
    }
    assert_eq!(results, vec![1], "the first runs");
    refused.sort();
    assert_eq!(refused, vec![2, 3], "the excess is refused by id");
    // The session goes on once the first is done.
    let m = Message::ping(9);
    ws.send(WsMessage::Text(serde_json::to_string(&m).unwrap().into())).await.unwrap();
    assert_eq!(json_of(ws.next().await.unwrap().unwrap()).kind, Kind::Pong);
    server.stop().await;
}

#[tokio::test]
async fn query_time_limit_times_out_reads_but_never_writes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine(dir.path());
    bulk_products(&engine, 20_000);
    let server = start_on(engine, dir, |c| limits(c, |l| l.max_query_time = Duration::from_millis(1))).await;
    let client = server.client().await;
    let e = client.execute(SLOW_QUERY, None).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Timeout), "{e}");
    assert!(e.to_string().contains("1ms"), "{e}");
    // A write is never abandoned for time: it commits and says so.
    let r = client.execute("update ( 'Products' -> dictionary \"new\" ( 'Price' -> number 1 ) )", None).await.unwrap();
    assert!(matches!(r, Reply::Done { .. }));
    let other = server.client().await;
    other.ping().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn session_limit_refuses_the_upgrade_until_one_closes() {
    let server = start_with(|c| limits(c, |l| l.max_sessions = 2)).await;
    let a = server.client().await;
    let b = server.client().await;
    let refused = Client::connect(&server.url(), ClientOptions::default()).await.unwrap_err();
    match &refused {
        ClientError::Refused { status, code, message } => {
            assert_eq!((*status, code), (503, &ErrorCode::TooManySessions));
            assert!(message.contains("maximum of 2 sessions"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // HTTP requests take a session slot too.
    let r = reqwest::get(server.http("/v1/node")).await.unwrap();
    assert_eq!(r.status(), 503);
    b.close().await.unwrap();
    drop(b);
    let mut third = None;
    for _ in 0..500 {
        if let Ok(c) = Client::connect(&server.url(), ClientOptions::default()).await {
            third = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    third.expect("a place frees when a session closes").ping().await.unwrap();
    a.ping().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn frame_limit_closes_the_session_cleanly_and_others_go_on() {
    let limit = 64 << 10;
    let server = start_with(|c| limits(c, |l| l.max_frame_bytes = limit)).await;
    let bystander = server.client().await;
    let big = format!("update . 'Clients' : \"c1\" ( 'Name' -> text \"{}\" )", "n".repeat(limit));
    // The client checks the announced limit before sending.
    let client = server.client().await;
    match client.execute(&big, None).await {
        Err(ClientError::TooLarge { limit: l, .. }) => assert_eq!(l, limit),
        other => panic!("{other:?}"),
    }
    // Sent anyway, the server closes with 1009 and says why.
    let mut ws = raw(&server.url(), "encoding=json").await;
    let m = Message::execute_text(1, big.clone(), None);
    ws.send(WsMessage::Text(serde_json::to_string(&m).unwrap().into())).await.unwrap();
    let mut close = None;
    while let Some(Ok(frame)) = ws.next().await {
        if let WsMessage::Close(c) = frame {
            close = c;
            break;
        }
    }
    let close = close.expect("a close frame");
    assert_eq!(u16::from(close.code), 1009);
    assert!(close.reason.contains("65536"), "{}", close.reason);
    // A compressed frame that is small but decompresses past the limit is refused by id-less
    // error, and that session goes on.
    let mut z = raw(&server.url(), "encoding=msgpack&compression=zstd").await;
    let bytes = rmp_serde::to_vec_named(&m).unwrap();
    z.send(WsMessage::Binary(compress(Compression::Zstd, &bytes).unwrap().into())).await.unwrap();
    let WsMessage::Binary(reply) = z.next().await.unwrap().unwrap() else { panic!("binary reply") };
    let reply: Message = rmp_serde::from_slice(&reply).unwrap();
    assert_eq!(reply.code, Some(ErrorCode::TooLarge), "{reply:?}");
    z.send(WsMessage::Binary(rmp_serde::to_vec_named(&Message::ping(2)).unwrap().into())).await.unwrap();
    let WsMessage::Binary(pong) = z.next().await.unwrap().unwrap() else { panic!("binary reply") };
    assert_eq!(rmp_serde::from_slice::<Message>(&pong).unwrap().kind, Kind::Pong);
    // HTTP bodies have the same bound.
    let r = reqwest::Client::new()
        .post(server.http("/v1/execute"))
        .header("content-type", "application/json")
        .body(serde_json::json!({ "text": big }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let body: Message = r.json().await.unwrap();
    assert_eq!(body.code, Some(ErrorCode::TooLarge));
    bystander.ping().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn result_limit_refuses_large_replies() {
    let server = start_with(|c| limits(c, |l| l.max_result_bytes = 512)).await;
    for encoding in [Encoding::Json, Encoding::Msgpack] {
        let client = server.client_with(opts(encoding)).await;
        let e = client.get("", None).await.unwrap_err();
        assert_eq!(e.code(), Some(&ErrorCode::ResultTooLarge), "{e}");
        assert!(e.to_string().contains("512"), "{e}");
        // Small replies still go through.
        client.get(". 'Machines' : \"M2\"", None).await.unwrap();
    }
    let r = reqwest::get(server.http("/v1/node")).await.unwrap();
    assert_eq!(r.status(), 413);
    server.stop().await;
}
