//! Queries, mutations, commands, transactions, `get`, failures with codes, pipelining — in
//! both encodings and with both compressions.

use espalier_client::ClientOptions;
use espalier_instruction::parse::{parse_instruction, ParseOptions};
use espalier_protocol::{Compression, Encoding, ErrorCode, Reply};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn every_kind_of_instruction_in_every_encoding() {
    let server = start().await;
    for (encoding, compression) in [
        (Encoding::Json, Compression::None),
        (Encoding::Msgpack, Compression::None),
        (Encoding::Json, Compression::Deflate),
        (Encoding::Msgpack, Compression::Zstd),
    ] {
        // compress_min 0: every message is compressed, both ways.
        let client = server
            .client_with(ClientOptions::default().encoding(encoding).compression(compression).compress_min(0))
            .await;
        assert_eq!(client.welcome().role, espalier_protocol::Role::Admin, "no tokens: local clients are admin");

        let q = client
            .query(
                "collection select . 'Orders' 'Quantity' -> number : 'Quantity' 'Client' -> reference : 'Client'",
                None,
            )
            .await
            .unwrap();
        assert_eq!(q.total, 3, "{encoding}/{compression}");
        assert_eq!(q.columns, vec!["Quantity", "Client"]);
        assert_eq!(q.rows[0].key, vec!["o1"]);
        assert_eq!(q.rows[0].values, vec![json!(500), json!("c1")]);

        let before = client.get(". 'Machines' : \"M2\"", None).await.unwrap();
        let done = client.execute("command 'pulse' ( 'machine' -> $m )", params(&[("m", "M2")])).await.unwrap();
        let Reply::Done { version, changes } = done else { panic!("{done:?}") };
        assert_eq!(changes, 1);
        assert!(version > before.0);
        let (v, node) = client.get(". 'Machines' : $m", params(&[("m", "M2")])).await.unwrap();
        assert_eq!(v, version, "get reads at the version of the last commit");
        assert_eq!(node["Pulses"], json!(before.1["Pulses"].as_i64().unwrap() + 1));

        // A structured instruction.
        let instr =
            parse_instruction("update . 'Machines' : \"M3\" ( 'Pulses' -> number 7 )", ParseOptions::CLIENT).unwrap();
        assert!(matches!(client.execute_instruction(instr, None).await.unwrap(), Reply::Done { changes: 1, .. }));

        // A transaction: one version for all of it, and its reads see its own writes.
        let t = client
            .execute(
                "transaction ( update . 'Machines' : \"M3\" ( 'Pulses' -> number + 1 ), get . 'Machines' : \"M3\" )",
                None,
            )
            .await
            .unwrap();
        let Reply::Transaction(list) = t else { panic!("{t:?}") };
        assert!(matches!(list[0], Reply::Done { .. }));
        let Reply::Node(n) = &list[1] else { panic!("{list:?}") };
        assert_eq!(n["Pulses"], json!(8));
        client.close().await.unwrap();
    }
    server.stop().await;
}

/// On the multi-threaded runtime, as `espalier serve` runs: detached writes complete on
/// whichever thread ran their batch, and must fail and roll back the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_carry_their_codes_and_roll_back() {
    let server = start().await;
    let client = server.client().await;
    let cases = [
        ("update . 'Machines' : \"M1\" ( 'Pulses' -> number", ErrorCode::Syntax),
        ("update . 'Machines' : \"M1\" ( 'Nope' -> number 1 )", ErrorCode::Type),
        ("update ( 'Clients' -> dictionary \"c1\" ( 'Name' -> text \"x\" ) )", ErrorCode::KeyExists),
        ("update . 'Machines' : \"M9\" ( 'Pulses' -> number 1 )", ErrorCode::KeyMissing),
        ("update ( 'Clients' -> dictionary \"c1\" remove )", ErrorCode::Referenced),
        ("update ( 'Orders' -> dictionary \"o9\" ( 'Quantity' -> number 1 ) )", ErrorCode::ReferenceUnset),
        ("command 'pulse' ( )", ErrorCode::Type),
        ("update . 'Machines' : $m ( 'Pulses' -> number 1 )", ErrorCode::Value),
    ];
    for (text, expected) in cases {
        let got = code(client.execute(text, None).await);
        assert_eq!(got, expected, "{text}");
    }
    // A failing transaction leaves nothing behind.
    let before = client.get(". 'Machines' : \"M2\"", None).await.unwrap();
    let failed = client
        .execute(
            "transaction ( update . 'Machines' : \"M2\" ( 'Pulses' -> number 99 ), update ( 'Clients' -> dictionary \"c1\" remove ) )",
            None,
        )
        .await;
    assert_eq!(code(failed), ErrorCode::Referenced);
    let after = client.get(". 'Machines' : \"M2\"", None).await.unwrap();
    assert_eq!(before, after, "the failed transaction changed nothing");
    // Errors name the place.
    let e = client.execute("update . 'Machines' : \"M1\" ( 'Nope' -> number 1 )", None).await.unwrap_err();
    assert!(e.to_string().contains("'Nope'"), "{e}");
    // Fine-grained get of a missing node, and of a bad path.
    assert_eq!(code(client.get(". 'Machines' : \"M9\"", None).await), ErrorCode::KeyMissing);
    assert_eq!(code(client.get(". 'Machines' ( ", None).await), ErrorCode::Syntax);
    assert_eq!(code(client.get(". 'Nope' : \"x\"", None).await), ErrorCode::Type);
    // The session is still fine.
    client.ping().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn get_follows_references_and_reads_the_root() {
    let server = start().await;
    let client = server.client().await;
    let (_, order) =
        client.get(". 'Machines' : \"M1\" ? 'Current Task' * 'Selected' > 'Current Order'", None).await.unwrap();
    assert_eq!(order["Quantity"], json!(500));
    let (_, root) = client.get("", None).await.unwrap();
    assert!(root["Clients"]["c1"].is_object());
    let (_, line) = client.get(". 'Orders' : \"o1\" % 'Lines' : \"bolt-m8\"", None).await.unwrap();
    assert_eq!(line["Amount"], json!(400));
    assert_eq!(
        code(client.get(". 'Machines' : \"M2\" ? 'Current Task' * 'Selected'", None).await),
        ErrorCode::StateNotSelected
    );
    server.stop().await;
}

/// A node too large for the inline budget is read on the blocking pool, whole.
#[tokio::test]
async fn large_nodes_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine(dir.path());
    crate::limits::bulk_products(&engine, 3000);
    let server = start_on(engine, dir, |_| {}).await;
    let client = server.client().await;
    let (_, root) = client.get("", None).await.unwrap();
    assert_eq!(root["Products"].as_object().unwrap().len(), 3003);
    let r = client.execute("get", None).await.unwrap();
    let Reply::Node(n) = r else { panic!() };
    assert_eq!(n, root);
    server.stop().await;
}

/// Many requests in flight on one session; replies are matched by id in any order. Multi-threaded,
/// as `espalier serve` runs: the session's writes share batches without waiting for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_from_many_tasks_on_one_session() {
    let server = start().await;
    let client = server.client().await;
    let mut tasks = Vec::new();
    for i in 0..40 {
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                c.execute("command 'pulse' ( 'machine' -> \"M3\" )", None).await.map(|_| ())
            } else {
                c.get(". 'Machines' : \"M3\"", None).await.map(|_| ())
            }
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let (_, m3) = client.get(". 'Machines' : \"M3\"", None).await.unwrap();
    assert_eq!(m3["Pulses"], json!(20), "every pipelined write committed once");
    server.stop().await;
}

#[tokio::test]
async fn blocking_client_works_without_a_runtime_of_its_own() {
    let server = start().await;
    let url = server.url();
    let outcome = tokio::task::spawn_blocking(move || {
        let c = espalier_client::blocking::Client::connect(&url, ClientOptions::default()).unwrap();
        c.ping().unwrap();
        let q = c.query("collection select . 'Clients' 'Name' -> text : 'Name'", None).unwrap();
        c.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).unwrap();
        let (_, m2) = c.get(". 'Machines' : \"M2\"", None).unwrap();
        c.close().unwrap();
        (q.total, m2["Pulses"].clone())
    })
    .await
    .unwrap();
    assert_eq!(outcome, (3, json!(1)));
    server.stop().await;
}
