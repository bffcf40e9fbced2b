//! Graceful shutdown: stop accepting, finish what is in flight, refuse what comes after,
//! close every session with 1001.

use std::time::Duration;

use espalier_client::{Client, ClientError, ClientOptions};
use espalier_protocol::{ErrorCode, Reply};

use crate::common::*;
use crate::limits::{bulk_products, SLOW_QUERY};

#[tokio::test]
async fn shutdown_finishes_requests_in_flight_then_closes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine(dir.path());
    bulk_products(&engine, 20_000);
    let server = start_on(engine, dir, |_| {}).await;
    let busy = server.client().await;
    let written = busy.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).await.unwrap();

    // The slow query is written first (join! polls in order), then the shutdown on the same
    // session, which the server reads in that order: the query is in flight at the shutdown.
    let (r, down) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(busy.execute(SLOW_QUERY, None), busy.shutdown())
    })
    .await
    .unwrap();
    down.unwrap();
    // The request in flight finishes with its real reply.
    assert!(matches!(r, Ok(Reply::Query(_))), "{r:?}");
    // New requests are refused (or find the session already closed).
    match busy.ping().await {
        Err(ClientError::Server { code, .. }) => assert_eq!(code, ErrorCode::ShuttingDown),
        Err(ClientError::Closed { .. }) => {}
        other => panic!("{other:?}"),
    }
    // Every session is closed with 1001.
    eventually("the session to close", || busy.closed().is_some()).await;
    match busy.closed() {
        Some(ClientError::Closed { code, .. }) => assert_eq!(code, Some(1001)),
        other => panic!("{other:?}"),
    }
    let addr = server.url();
    let engine = server.engine.clone();
    tokio::time::timeout(Duration::from_secs(30), server.task).await.unwrap().unwrap().unwrap();
    // No longer accepting.
    assert!(Client::connect(&addr, ClientOptions::default()).await.is_err());
    // What was committed is there.
    let Reply::Done { version, .. } = written else { panic!() };
    assert!(engine.database().version() >= version);
}

#[tokio::test]
async fn http_shutdown_and_health_during_it() {
    let server = start().await;
    let watcher = server.client().await;
    let http = reqwest::Client::new();
    let r = http.post(server.http("/v1/shutdown")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    eventually("the session to close", || watcher.closed().is_some()).await;
    tokio::time::timeout(Duration::from_secs(30), server.task).await.unwrap().unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_handle_stops_an_idle_server_promptly() {
    let server = start().await;
    let _idle = server.client().await;
    let started = std::time::Instant::now();
    server.stop().await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}
