//! The one-shot HTTP endpoints.

use espalier_protocol::{ErrorCode, Kind, Message, Reply};
use serde_json::json;

use crate::common::*;

async fn message(r: reqwest::Response) -> Message {
    let ct = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let bytes = r.bytes().await.unwrap();
    if ct.starts_with("application/msgpack") {
        rmp_serde::from_slice(&bytes).unwrap()
    } else {
        assert!(ct.starts_with("application/json"), "content type {ct}");
        serde_json::from_slice(&bytes).unwrap()
    }
}

#[tokio::test]
async fn execute_get_status_and_health_over_http() {
    let server = start().await;
    let http = reqwest::Client::new();
    // Text instruction, JSON.
    let r = http
        .post(server.http("/v1/execute"))
        .json(&json!({ "text": "collection select . 'Clients' 'Name' -> text : 'Name'" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let m = message(r).await;
    assert_eq!(m.kind, Kind::Result);
    let Some(Reply::Query(q)) = m.result else { panic!("{m:?}") };
    assert_eq!(q.total, 3);
    // Structured instruction with parameters, MessagePack both ways.
    let body = rmp_serde::to_vec_named(&json!({
        "instruction": {"command": {"name": "pulse", "args": [["machine", {"param": "m"}]]}},
        "params": {"m": "M2"}
    }))
    .unwrap();
    let r = http
        .post(server.http("/v1/execute"))
        .header("content-type", "application/msgpack")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let m = message(r).await;
    assert!(matches!(m.result, Some(Reply::Done { changes: 1, .. })), "{m:?}");
    // JSON request, MessagePack reply by Accept.
    let r = http
        .post(server.http("/v1/execute"))
        .header("accept", "application/msgpack")
        .json(&json!({ "text": "get . 'Machines' : \"M2\"" }))
        .send()
        .await
        .unwrap();
    let m = message(r).await;
    let Some(Reply::Node(n)) = m.result else { panic!("{m:?}") };
    assert_eq!(n["Pulses"], json!(1));
    // Fine-grained get, with a parameter.
    let r =
        http.get(server.http("/v1/node")).query(&[("path", ". 'Machines' : $m"), ("p.m", "M2")]).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let m = message(r).await;
    assert_eq!(m.kind, Kind::Node);
    assert_eq!(m.node.unwrap()["Pulses"], json!(1));
    assert!(m.version.unwrap() > 0);
    // Status and health.
    let m = message(http.get(server.http("/v1/status")).send().await.unwrap()).await;
    assert_eq!(m.kind, Kind::Status);
    assert!(m.version.is_some() && m.sessions.is_some());
    let m = message(http.get(server.http("/v1/health")).send().await.unwrap()).await;
    assert_eq!(m.kind, Kind::Ok);
    server.stop().await;
}

/// A body without a Content-Type is JSON, and so is one labelled as a form (what `curl -d`
/// sends): the docs' curl examples work as written. MessagePack still needs its type.
#[tokio::test]
async fn execute_takes_json_without_a_content_type_or_as_curls_form_default() {
    let server = start().await;
    let http = reqwest::Client::new();
    let body = r#"{"text": "collection select . 'Clients' 'Name' -> text : 'Name'"}"#;
    for content_type in
        [None, Some("application/x-www-form-urlencoded"), Some("Application/X-WWW-Form-Urlencoded; charset=utf-8")]
    {
        let mut req = http.post(server.http("/v1/execute")).body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        let built = req.build().unwrap();
        assert_eq!(built.headers().get("content-type").map(|v| v.to_str().unwrap()), content_type);
        let r = http.execute(built).await.unwrap();
        assert_eq!(r.status(), 200, "{content_type:?}");
        let m = message(r).await;
        let Some(Reply::Query(q)) = m.result else { panic!("{content_type:?}: {m:?}") };
        assert_eq!(q.total, 3);
    }
    // MessagePack without its Content-Type is not JSON: refused, not misread.
    let packed = rmp_serde::to_vec_named(&json!({ "text": "get" })).unwrap();
    let r = http.post(server.http("/v1/execute")).body(packed.clone()).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(message(r).await.code, Some(ErrorCode::BadFrame));
    let r = http
        .post(server.http("/v1/execute"))
        .header("content-type", "application/msgpack")
        .body(packed)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(matches!(message(r).await.result, Some(Reply::Node(_))));
    server.stop().await;
}

#[tokio::test]
async fn http_errors_have_status_codes_and_bodies() {
    let server = start().await;
    let http = reqwest::Client::new();
    let cases: Vec<(reqwest::RequestBuilder, u16, ErrorCode)> = vec![
        (
            http.post(server.http("/v1/execute"))
                .json(&json!({ "text": "update ( 'Clients' -> dictionary \"c1\" remove )" })),
            409,
            ErrorCode::Referenced,
        ),
        (http.post(server.http("/v1/execute")).json(&json!({ "text": "update (" })), 400, ErrorCode::Syntax),
        (http.get(server.http("/v1/node")).query(&[("path", ". 'Machines' : \"M9\"")]), 404, ErrorCode::KeyMissing),
        (http.post(server.http("/v1/execute")).json(&json!({})), 400, ErrorCode::BadRequest),
        (
            http.post(server.http("/v1/execute")).header("content-type", "application/json").body("{\"text\": "),
            400,
            ErrorCode::BadFrame,
        ),
        (
            http.post(server.http("/v1/execute")).header("content-type", "text/plain").body("get"),
            400,
            ErrorCode::WrongEncoding,
        ),
        (http.get(server.http("/v2/nothing")), 400, ErrorCode::BadRequest),
    ];
    for (req, status, code) in cases {
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), status, "{code}");
        let m = message(r).await;
        assert_eq!(m.code, Some(code.clone()));
        assert!(!m.message.unwrap().is_empty());
    }
    server.stop().await;
}
