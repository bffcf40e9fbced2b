//! Session admission: idle WebSocket upgrades, connections that never send a request, and
//! one address opening connection after connection cannot lock out a real client.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use espalier_client::{Client, ClientOptions};
use espalier_protocol::{ErrorCode, Message};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::{self, Message as WsMessage};
use tokio_tungstenite::WebSocketStream;

use crate::common::*;

/// The attackers' address: loopback, but not the real client's 127.0.0.1.
const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const UPGRADES: usize = 1100;

type Upgrade = Result<WebSocketStream<TcpStream>, tungstenite::Error>;

/// A WebSocket upgrade from `local`, which then does nothing at all (never reads, never sends).
async fn upgrade_from(local: IpAddr, server: SocketAddr) -> Upgrade {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(local, 0))?;
    let tcp = socket.connect(server).await?;
    let (ws, _) = tokio_tungstenite::client_async(format!("ws://{server}/ws"), tcp).await?;
    Ok(ws)
}

/// `UPGRADES` idle upgrades from `local`, 100 at a time.
async fn idle_upgrades(local: IpAddr, server: SocketAddr) -> Vec<Upgrade> {
    let mut all = Vec::new();
    for _ in 0..UPGRADES / 100 {
        let batch = (0..100).map(|_| upgrade_from(local, server));
        all.extend(futures_util::future::join_all(batch).await);
    }
    all
}

/// The refusal's status and error message, for an upgrade refused with the error shape.
fn refusal(e: &tungstenite::Error) -> (u16, Message) {
    let tungstenite::Error::Http(response) = e else { panic!("not an HTTP refusal: {e:?}") };
    let body = response.body().as_deref().unwrap_or_default();
    (response.status().as_u16(), serde_json::from_slice(body).expect("the error shape"))
}

/// A real client connects (retrying while refused) and gets answers.
async fn real_client_is_served(server: &TestServer, within: Duration) -> Duration {
    let started = Instant::now();
    let client = loop {
        match Client::connect(&server.url(), ClientOptions::default()).await {
            Ok(c) => break c,
            Err(e) if started.elapsed() < within => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("locked out for {within:?}: {e}"),
        }
    };
    client.ping().await.unwrap();
    client.execute("collection select . 'Clients' 'Name' -> text : 'Name'", None).await.unwrap();
    started.elapsed()
}

#[tokio::test]
async fn idle_upgrades_cannot_lock_out_a_client() {
    let server = start_with(|c| {
        limits(c, |l| {
            l.idle_timeout = Duration::from_millis(600);
            l.max_connections_per_address = 10_000; // this test is about the idle timeout
        })
    })
    .await;
    let mut upgrades = idle_upgrades(IpAddr::V4(Ipv4Addr::LOCALHOST), server.addr).await;
    let admitted = upgrades.iter().filter(|u| u.is_ok()).count();
    assert_eq!(admitted, 1024, "the idle upgrades take every session");
    for e in upgrades.iter().filter_map(|u| u.as_ref().err()) {
        let (status, m) = refusal(e);
        assert_eq!((status, m.code.clone()), (503, Some(ErrorCode::TooManySessions)), "{m:?}");
    }
    // Once they have been idle for the timeout they are closed, and a real client gets in.
    let waited = real_client_is_served(&server, Duration::from_secs(10)).await;
    eprintln!("a real client was served after {waited:?}");
    // An idle session was pinged, then closed with 1008 and why.
    let ws = upgrades.iter_mut().find_map(|u| u.as_mut().ok()).unwrap();
    let mut close = None;
    while let Some(Ok(frame)) = ws.next().await {
        if let WsMessage::Close(c) = frame {
            close = c;
            break;
        }
    }
    let close = close.expect("a close frame");
    assert_eq!(u16::from(close.code), 1008);
    assert!(close.reason.contains("idle"), "{}", close.reason);
    drop(upgrades);
    server.stop().await;
}

#[tokio::test]
async fn one_address_cannot_take_every_connection() {
    let server = start_with(|c| limits(c, |l| l.max_connections_per_address = 50)).await;
    let upgrades = idle_upgrades(ATTACKER, server.addr).await;
    let admitted = upgrades.iter().filter(|u| u.is_ok()).count();
    assert_eq!(admitted, 50, "one address gets its share");
    let mut refused = 0;
    for u in &upgrades {
        match u {
            Ok(_) => {}
            Err(tungstenite::Error::Http(_)) => {
                let (status, m) = refusal(u.as_ref().unwrap_err());
                assert_eq!((status, m.code.clone()), (503, Some(ErrorCode::TooManySessions)), "{m:?}");
                assert!(m.message.as_deref().unwrap().contains("max_connections_per_address"), "{m:?}");
                refused += 1;
            }
            // Past the refusals answered at once, refused connections are just closed.
            Err(_) => refused += 1,
        }
    }
    assert_eq!(refused, UPGRADES - 50);
    // Another address is served at once, with the attackers' connections still open.
    let waited = real_client_is_served(&server, Duration::ZERO).await;
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    drop(upgrades);
    // Their places are given back when they close.
    let mut again = None;
    for _ in 0..200 {
        if let Ok(ws) = upgrade_from(ATTACKER, server.addr).await {
            again = Some(ws);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(again.is_some(), "the address may connect again once its connections closed");
    server.stop().await;
}

/// Reads until the server closes the connection.
async fn closed_within(tcp: &mut TcpStream, limit: Duration) {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(limit, tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
            Err(_) => panic!("the connection was still open after {limit:?}"),
        }
    }
}

#[tokio::test]
async fn a_connection_without_a_request_is_closed() {
    let server = start_with(|c| limits(c, |l| l.request_timeout = Duration::from_millis(300))).await;
    // Nothing at all.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    // Part of the headers, and then nothing (slowloris).
    let mut slow = TcpStream::connect(server.addr).await.unwrap();
    slow.write_all(b"GET /ws HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let started = Instant::now();
    closed_within(&mut silent, Duration::from_secs(5)).await;
    closed_within(&mut slow, Duration::from_secs(5)).await;
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(200) && took < Duration::from_secs(3), "{took:?}");
    // A session lives past the request timeout: the timeout is for the first request only.
    let client = server.client().await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    client.ping().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn a_quiet_client_that_answers_pings_stays_connected() {
    let server = start_with(|c| limits(c, |l| l.idle_timeout = Duration::from_millis(300))).await;
    let client = server.client().await;
    let mut sub = client.subscribe_node(". 'Machines' : \"M1\"", None, None).await.unwrap();
    // Several idle periods without a request: the client's WebSocket layer answers the pings.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    client.ping().await.unwrap();
    let _ = &mut sub;
    server.stop().await;
}

#[tokio::test]
async fn a_request_without_a_valid_token_closes_its_connection() {
    let server = start_with(with_tokens).await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(b"GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut answer))
        .await
        .expect("the server closes the connection after its answer")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(answer.contains("unauthorized"), "{answer}");
    // With a token, the connection is kept for the next request.
    let ok = reqwest::Client::new().get(server.http("/v1/status")).bearer_auth(READ_SECRET).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_ne!(ok.headers().get("connection").map(|v| v.to_str().unwrap()), Some("close"));
    server.stop().await;
}
