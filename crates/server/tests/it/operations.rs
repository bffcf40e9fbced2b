//! Operations endpoints: `/metrics` (Prometheus text), `/health`, `/v1/backup` (admin).
//! The Python client's tests parse `/metrics` with Prometheus's own parser as well.

use std::collections::HashMap;

use crate::common::*;

/// Every sample line of the text format as `name{labels}` → value; checks each line's shape.
fn samples(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in text.lines() {
        if line.starts_with("# HELP ") || line.starts_with("# TYPE ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("line {line:?}"));
        let name = series.split('{').next().unwrap();
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "metric name in {line:?}"
        );
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value in {line:?}"));
        assert!(out.insert(series.to_string(), value).is_none(), "repeated series {series}");
    }
    out
}

#[tokio::test]
async fn metrics_count_requests_by_kind_and_outcome() {
    let server = start().await;
    let client = server.client().await;
    client.execute("command 'pulse' ( 'machine' -> \"M1\" )", None).await.unwrap();
    assert!(client.execute("update ( 'Clients' -> dictionary \"c1\" ( ) )", None).await.is_err());
    let http = reqwest::Client::new();
    let r = http.get(server.http("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    let m = samples(&r.text().await.unwrap());
    assert!(m["espalier_requests_total{kind=\"execute\",outcome=\"ok\"}"] >= 1.0);
    assert!(m["espalier_requests_total{kind=\"execute\",outcome=\"error\"}"] >= 1.0);
    let count = m["espalier_request_duration_seconds_count{kind=\"execute\"}"];
    assert_eq!(m["espalier_request_duration_seconds_bucket{kind=\"execute\",le=\"+Inf\"}"], count);
    assert!(count >= 2.0);
    assert!(m["espalier_commits_total"] >= 1.0);
    assert_eq!(m["espalier_commit_batch_requests_sum"], m["espalier_committed_requests_total"]);
    assert_eq!(m["espalier_sessions"], 1.0, "the client's session (the metrics request holds no slot)");
    // /health is /v1/health.
    for path in ["/health", "/v1/health"] {
        let r = http.get(server.http(path)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.text().await.unwrap(), "{\"kind\":\"ok\"}");
    }
    server.stop().await;
}

#[tokio::test]
async fn metrics_need_a_token_and_backups_the_admin_role() {
    let server = start_with(with_tokens).await;
    let http = reqwest::Client::new();
    assert_eq!(http.get(server.http("/metrics")).send().await.unwrap().status(), 401);
    let r = http.get(server.http("/metrics")).bearer_auth(READ_SECRET).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(http.get(server.http("/health")).send().await.unwrap().status(), 200);
    assert_eq!(http.get(server.http("/v1/backup")).send().await.unwrap().status(), 401);
    for secret in [READ_SECRET, WRITE_SECRET] {
        let r = http.get(server.http("/v1/backup")).bearer_auth(secret).send().await.unwrap();
        assert_eq!(r.status(), 403);
    }
    let r = http.get(server.http("/v1/backup")).bearer_auth(ADMIN_SECRET).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let version: u64 = r.headers()["espalier-version"].to_str().unwrap().parse().unwrap();
    let dump: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(dump["version"], version);
    assert_eq!(dump["espalier_dump"], 1);
    assert!(dump["root"]["Clients"]["c1"].is_object(), "{dump}");
    server.stop().await;
}
