//! Errors at the edges: a text frame that is not UTF-8 closes with 1007 (RFC 6455 §8.1), and
//! every HTTP error, whichever layer makes it, has the JSON error shape.

use espalier_protocol::{ErrorCode, Kind, Message};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::common::*;

#[tokio::test]
async fn invalid_utf8_in_a_text_frame_closes_with_1007() {
    let server = start().await;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("{}/ws", server.url())).await.unwrap();
    let _welcome = ws.next().await.unwrap().unwrap();
    let bad = Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true);
    ws.send(WsMessage::Frame(bad)).await.unwrap();
    let mut close = None;
    while let Some(Ok(frame)) = ws.next().await {
        if let WsMessage::Close(c) = frame {
            close = c;
            break;
        }
    }
    let close = close.expect("a close frame");
    assert_eq!(u16::from(close.code), 1007, "{close:?}");
    assert!(close.reason.contains("UTF-8"), "{}", close.reason);
    server.client().await.ping().await.unwrap();
    server.stop().await;
}

/// The body of an error response, as the protocol's error message.
async fn error_of(r: reqwest::Response) -> Message {
    let ct = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    assert!(ct.starts_with("application/json"), "content type {ct:?}");
    let bytes = r.bytes().await.unwrap();
    assert!(!bytes.is_empty(), "an error answers a body");
    let m: Message = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(m.kind, Kind::Error, "{m:?}");
    m
}

#[tokio::test]
async fn http_errors_have_the_error_shape() {
    let server = start().await;
    let http = reqwest::Client::new();
    // The wrong method on a served path.
    let r = http.get(server.http("/v1/execute")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    let m = error_of(r).await;
    assert_eq!(m.code, Some(ErrorCode::BadRequest));
    assert!(m.message.as_deref().unwrap().contains("GET is not allowed on /v1/execute"), "{m:?}");
    let r = http.delete(server.http("/v1/node")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    error_of(r).await;
    let r = http.post(server.http("/ws")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    error_of(r).await;
    // An unknown path.
    let r = http.get(server.http("/v2/nothing")).send().await.unwrap();
    assert_eq!(r.status(), 400);
    error_of(r).await;
    server.stop().await;
}
