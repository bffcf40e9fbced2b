//! The console's files and its endpoints: /v1/schema, /v1/entries, /v1/figures and
//! /console/session (docs/protocol.md, "Console endpoints").

use serde_json::{json, Value};

use crate::common::*;

async fn get_json(url: String, token: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

#[tokio::test]
async fn the_console_is_served_at_the_root_with_its_files() {
    let server = start().await;
    let http = reqwest::Client::new();
    let page = http.get(server.http("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'self'"));
    let html = page.text().await.unwrap();
    for file in ["/console/console.js", "/console/console.css"] {
        assert!(html.contains(file), "index.html loads {file}");
        let r = http.get(server.http(file)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{file}");
        assert!(!r.bytes().await.unwrap().is_empty());
    }
    assert_eq!(http.get(server.http("/console/nope.js")).send().await.unwrap().status(), 400);
    server.stop().await;
}

#[tokio::test]
async fn session_says_whether_a_token_is_needed_and_its_role_always_with_200() {
    let open = start().await;
    let (status, v) = get_json(open.http("/console/session"), None).await;
    assert_eq!((status, v), (200, json!({ "tokens": false, "role": "admin" })));
    open.stop().await;

    let server = start_with(with_tokens).await;
    let (status, v) = get_json(server.http("/console/session"), None).await;
    assert_eq!(status, 200);
    assert_eq!((v["tokens"].clone(), v["role"].clone()), (json!(true), Value::Null));
    let (_, v) = get_json(server.http("/console/session"), Some("a-wrong-secret-0123456789")).await;
    assert_eq!(v["role"], Value::Null);
    let (_, v) = get_json(server.http("/console/session"), Some(READ_SECRET)).await;
    assert_eq!(v["role"], "read");
    // The console's other endpoints want a token like every /v1/ endpoint.
    for path in ["/v1/schema", "/v1/figures", "/v1/entries?collection=Orders"] {
        let (status, v) = get_json(server.http(path), None).await;
        assert_eq!((status, v["code"].clone()), (401, json!("unauthorized")), "{path}");
        let (status, _) = get_json(server.http(path), Some(READ_SECRET)).await;
        assert_eq!(status, 200, "{path}");
    }
    server.stop().await;
}

#[tokio::test]
async fn schema_describes_the_tree() {
    let server = start().await;
    let (status, v) = get_json(server.http("/v1/schema"), None).await;
    assert_eq!(status, 200);
    assert_eq!(v["text"], DEMO_SCHEMA);
    let orders = v["root"]["properties"].as_array().unwrap().iter().find(|p| p["name"] == "Orders").unwrap();
    let client = &orders["node"]["properties"][0];
    assert_eq!((client["name"].clone(), client["kind"].clone()), (json!("Client"), json!("reference")));
    assert_eq!(client["target"]["path"], "root.'Clients'");
    assert!(v["commands"].as_array().unwrap().iter().any(|c| c["name"] == "pulse"));
    server.stop().await;
}

#[tokio::test]
async fn entries_pages_by_key_prefix_with_the_total() {
    let server = start().await;
    let client = server.client().await;
    let mut items = String::new();
    for i in 0..30 {
        items.push_str(&format!("'Products' -> dictionary \"x{i:02}\" ( 'Price' -> number {i} ) "));
    }
    client.execute(&format!("update ( {items} )"), None).await.unwrap();
    let page = |q: &str| server.http(&format!("/v1/entries?collection=Products&{q}"));
    let (status, v) = get_json(page("prefix=x1&limit=4&offset=2"), None).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["total"], 10);
    assert_eq!(v["columns"], json!(["Description", "Price"]));
    assert_eq!(v["rows"][0], json!({ "key": ["x12"], "values": ["", 12] }));
    assert_eq!(v["rows"].as_array().unwrap().len(), 4);
    let (_, v) = get_json(page("limit=2"), None).await;
    assert_eq!(v["total"], 33, "without a prefix: every entry");
    // A matrix's keys are its targets' keys; references and states come as in a query.
    let (_, v) =
        get_json(server.http("/v1/entries?path=.%20'Orders'%20:%20%22o1%22&collection=Lines&prefix=nut"), None).await;
    assert_eq!(v["rows"], json!([{ "key": ["nut-m8"], "values": [100] }]));
    let (_, v) = get_json(server.http("/v1/entries?collection=Orders&prefix=o1"), None).await;
    assert_eq!(v["rows"], json!([{ "key": ["o1"], "values": ["c1", 500, "Started"] }]));
    let (status, v) = get_json(server.http("/v1/entries?collection=Nope"), None).await;
    assert_eq!((status, v["code"].clone()), (400, json!("type")));
    server.stop().await;
}

#[tokio::test]
async fn figures_count_requests_by_kind_and_commits() {
    let server = start().await;
    let client = server.client().await;
    for _ in 0..5 {
        client.execute("command 'pulse' ( 'machine' -> \"M1\" )", None).await.unwrap();
    }
    client.get(". 'Machines' : \"M1\"", None).await.unwrap();
    let (status, v) = get_json(server.http("/v1/figures"), None).await;
    assert_eq!(status, 200);
    assert_eq!(v["requests"]["execute"]["count"], 5);
    assert_eq!(v["requests"]["get"]["count"], 1);
    let buckets: u64 =
        v["requests"]["execute"]["buckets"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).sum();
    assert_eq!(buckets, 5);
    let (commits, requests) = (v["commits"]["commits"].as_u64().unwrap(), v["commits"]["requests"].as_u64().unwrap());
    assert!(commits >= 5 && requests >= commits, "{v}");
    assert_eq!(v["sessions"], 2, "the client's session and this request");
    server.stop().await;
}
