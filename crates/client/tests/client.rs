//! The Rust client against a real server on a free loopback port: addresses, the welcome,
//! typed errors, pipelining, encodings, subscriptions as streams, a closed session.

use std::sync::Arc;
use std::time::Duration;

use espalier_client::protocol::{Compression, Encoding, ErrorCode, Reply, Role};
use espalier_client::{Client, ClientError, ClientOptions, Event};
use espalier_instruction::Engine;
use espalier_server::{Server, ServerConfig, ShutdownHandle};
use espalier_transaction::{DatabaseOptions, Durability};
use futures_util::StreamExt;

const SCHEMA: &str = "root ( 'Counters' -> dictionary ( 'Value' -> number ) )";

struct Running {
    addr: std::net::SocketAddr,
    handle: ShutdownHandle,
    task: tokio::task::JoinHandle<Result<(), espalier_server::ServerError>>,
    _dir: tempfile::TempDir,
}

async fn server() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = Engine::create(&dir.path().join("db"), SCHEMA, opts).unwrap();
    engine.execute_text("update ( 'Counters' -> dictionary \"a\" ( ) )", &Default::default()).unwrap();
    let server = Server::bind(Arc::new(engine), ServerConfig::local(0)).await.unwrap();
    let addr = server.local_addr().unwrap();
    let handle = server.shutdown_handle();
    let task = tokio::spawn(server.serve());
    Running { addr, handle, task, _dir: dir }
}

#[tokio::test]
async fn addresses_in_every_spelling_connect() {
    let s = server().await;
    for url in [
        s.addr.to_string(),
        format!("ws://{}", s.addr),
        format!("ws://{}/", s.addr),
        format!("ws://{}/ws", s.addr),
        format!("http://{}", s.addr),
    ] {
        let c = Client::connect(&url, ClientOptions::default()).await.unwrap_or_else(|e| panic!("{url}: {e}"));
        c.ping().await.unwrap();
    }
    s.handle.shutdown();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn nobody_listening_is_a_connect_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    match Client::connect(&format!("ws://127.0.0.1:{port}"), ClientOptions::default()).await {
        Err(ClientError::Connect(m)) => assert!(!m.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn welcome_errors_pipelining_and_streams() {
    let s = server().await;
    let url = format!("ws://{}", s.addr);
    for (encoding, compression) in [
        (Encoding::Json, Compression::None),
        (Encoding::Msgpack, Compression::Deflate),
        (Encoding::Msgpack, Compression::Zstd),
    ] {
        let c =
            Client::connect(&url, ClientOptions::default().encoding(encoding).compression(compression).compress_min(8))
                .await
                .unwrap();
        let w = c.welcome();
        assert_eq!(w.role, Role::Admin);
        assert_eq!(w.limits.max_in_flight, 64);
        assert!(w.server.starts_with("espalier "));
        assert_eq!(c.codec().encoding, encoding);

        // Typed errors.
        match c.execute("update . 'Counters' : \"zz\" ( 'Value' -> number 1 )", None).await {
            Err(ClientError::Server { code, message }) => {
                assert_eq!(code, ErrorCode::KeyMissing);
                assert!(message.contains("zz"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let big = "x".repeat(w.limits.max_frame_bytes as usize);
        assert!(matches!(c.execute(&big, None).await, Err(ClientError::TooLarge { .. })));

        // A stream of changes while 50 pipelined writes run from one client.
        let mut sub = c.subscribe_node(". 'Counters' : \"a\"", None, None).await.unwrap();
        let start = sub.node.as_ref().unwrap()["Value"].as_i64().unwrap();
        let writes = (0..50).map(|_| c.execute("update . 'Counters' : \"a\" ( 'Value' -> number + 1 )", None));
        for r in futures_util::future::join_all(writes).await {
            assert!(matches!(r.unwrap(), Reply::Done { changes: 1, .. }));
        }
        let mut values = Vec::new();
        while values.len() < 50 {
            match tokio::time::timeout(Duration::from_secs(10), StreamExt::next(&mut sub)).await.unwrap() {
                Some(Event::Changes { changes, .. }) => values.push(changes.len()),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(sub.last_version() - sub.version, 50);
        let (_, a) = c.get(". 'Counters' : \"a\"", None).await.unwrap();
        assert_eq!(a["Value"].as_i64().unwrap(), start + 50);
        sub.unsubscribe().await.unwrap();
        c.close().await.unwrap();
    }
    // When the server goes away, calls fail with `Closed`, not a hang.
    let c = Client::connect(&url, ClientOptions::default()).await.unwrap();
    s.handle.shutdown();
    s.task.await.unwrap().unwrap();
    for _ in 0..500 {
        if c.closed().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    match c.ping().await {
        Err(ClientError::Closed { code, .. }) => assert_eq!(code, Some(1001)),
        other => panic!("{other:?}"),
    }
}

/// A pattern query subscription is kept incrementally: it starts with the rows, then each
/// commit that changes them sends the rows it removed and added; a commit that does not
/// change them sends nothing; unsubscribing unregisters the query from the engine.
#[tokio::test]
async fn pattern_query_subscriptions_receive_the_differences() {
    let s = server().await;
    let url = format!("ws://{}", s.addr);
    let c = Client::connect(&url, ClientOptions::default()).await.unwrap();
    c.execute("update ( 'Counters' -> dictionary \"b\" ( 'Value' -> number 5 ) )", None).await.unwrap();
    let q = "collection match x in . 'Counters' where x number : 'Value' > 2 select 'x' -> x 'v' -> x number : 'Value'";
    let mut sub = c.subscribe_query(q, None, None).await.unwrap();
    let rows = sub.query.as_ref().unwrap();
    assert_eq!(rows.rows.len(), 1);
    assert_eq!(rows.rows[0].values, vec![serde_json::json!("b"), serde_json::json!(5)]);

    // Below the bound: nothing to send. Then "a" comes in, then "b" changes its value.
    c.execute("update . 'Counters' : \"a\" ( 'Value' -> number 1 )", None).await.unwrap();
    c.execute("update . 'Counters' : \"a\" ( 'Value' -> number 3 )", None).await.unwrap();
    c.execute("update . 'Counters' : \"b\" ( 'Value' -> number 6 )", None).await.unwrap();
    let mut events = Vec::new();
    while events.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), StreamExt::next(&mut sub)).await.unwrap() {
            Some(Event::Matches { version, removed, added }) => events.push((version, removed, added)),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(events[0].1, Vec::<Vec<serde_json::Value>>::new());
    assert_eq!(events[0].2, vec![vec![serde_json::json!("a"), serde_json::json!(3)]]);
    assert_eq!(events[1].1, vec![vec![serde_json::json!("b"), serde_json::json!(5)]]);
    assert_eq!(events[1].2, vec![vec![serde_json::json!("b"), serde_json::json!(6)]]);
    assert!(events[0].0 > sub.version && events[1].0 == events[0].0 + 1, "in commit order: {events:?}");

    // Aggregates cannot be kept as a set of rows: a clear refusal.
    match c.subscribe_query("collection match x in . 'Counters' select 'n' -> count ( )", None, None).await {
        Err(ClientError::Server { message, .. }) => assert!(message.contains("registered query"), "{message}"),
        other => panic!("{other:?}"),
    }
    sub.unsubscribe().await.unwrap();
    c.close().await.unwrap();
    s.handle.shutdown();
    s.task.await.unwrap().unwrap();
}
