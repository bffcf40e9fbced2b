//! Tokens and roles: refusals without or with a wrong token, and per role.

use espalier_client::{Client, ClientError, ClientOptions};
use espalier_protocol::{ErrorCode, Message, Role};

use crate::common::*;

async fn as_role(server: &TestServer, secret: &str) -> Client {
    server.client_with(ClientOptions::default().token(secret)).await
}

#[tokio::test]
async fn sessions_need_a_valid_token() {
    let server = start_with(with_tokens).await;
    for opts in [ClientOptions::default(), ClientOptions::default().token("not-a-token-0123456789")] {
        match Client::connect(&server.url(), opts).await.unwrap_err() {
            ClientError::Refused { status, code, .. } => assert_eq!((status, code), (401, ErrorCode::Unauthorized)),
            other => panic!("{other:?}"),
        }
    }
    // The token may also come in the URL (browsers cannot set headers on WebSockets).
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("{}/ws?token={READ_SECRET}", server.url())).await.unwrap();
    use futures_util::StreamExt;
    let welcome: Message = serde_json::from_str(ws.next().await.unwrap().unwrap().to_text().unwrap()).unwrap();
    assert_eq!(welcome.role, Some(Role::Read));
    server.stop().await;
}

#[tokio::test]
async fn each_role_may_do_its_part() {
    let server = start_with(with_tokens).await;
    let reader = as_role(&server, READ_SECRET).await;
    let writer = as_role(&server, WRITE_SECRET).await;
    let admin = as_role(&server, ADMIN_SECRET).await;
    assert_eq!(reader.welcome().role, Role::Read);
    assert_eq!(writer.welcome().role, Role::Write);
    assert_eq!(admin.welcome().role, Role::Admin);

    let write = "command 'pulse' ( 'machine' -> \"M1\" )";
    // read: reads, subscriptions, status; no writes, no shutdown.
    reader.query("collection select . 'Machines' 'P' -> number : 'Pulses'", None).await.unwrap();
    reader.get(". 'Machines' : \"M1\"", None).await.unwrap();
    reader.subscribe_node(". 'Machines' : \"M1\"", None, None).await.unwrap();
    reader.status().await.unwrap();
    let e = reader.execute(write, None).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Forbidden));
    assert!(e.to_string().contains("read role"), "{e}");
    // A read-only transaction is fine for a reader; one that writes is not.
    reader.execute("transaction ( get . 'Machines' : \"M1\" )", None).await.unwrap();
    let t = reader.execute(&format!("transaction ( get . 'Machines' : \"M1\", {write} )"), None).await;
    assert_eq!(code(t), ErrorCode::Forbidden);
    assert_eq!(code(reader.shutdown().await), ErrorCode::Forbidden);
    // write: writes too; no shutdown.
    writer.execute(write, None).await.unwrap();
    assert_eq!(code(writer.shutdown().await), ErrorCode::Forbidden);
    // Nothing a refused writer sent was applied.
    let (_, m1) = admin.get(". 'Machines' : \"M1\"", None).await.unwrap();
    assert_eq!(m1["Pulses"], serde_json::json!(3), "2 from the demo data + 1 from the writer");

    // HTTP: the same tokens and roles.
    let http = reqwest::Client::new();
    let r = http.post(server.http("/v1/execute")).json(&serde_json::json!({ "text": write })).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .post(server.http("/v1/execute"))
        .bearer_auth(READ_SECRET)
        .json(&serde_json::json!({ "text": write }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .post(server.http("/v1/execute"))
        .bearer_auth(WRITE_SECRET)
        .json(&serde_json::json!({ "text": write }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(http.get(server.http("/v1/status")).send().await.unwrap().status(), 401);
    assert_eq!(http.get(server.http("/v1/status")).bearer_auth(READ_SECRET).send().await.unwrap().status(), 200);
    assert_eq!(http.get(server.http("/v1/health")).send().await.unwrap().status(), 200, "health needs no token");
    let r = http.post(server.http("/v1/shutdown")).bearer_auth(WRITE_SECRET).send().await.unwrap();
    assert_eq!(r.status(), 403);

    // admin: may shut the server down.
    admin.shutdown().await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(30), server.task).await.unwrap().unwrap().unwrap();
}
