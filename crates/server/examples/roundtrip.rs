//! Round-trip latency of one client against a server in this process, for a quick look at the
//! hot path (the full remote benchmark is `espalier bench remote`):
//!
//!     cargo run --release -p espalier-server --example roundtrip -- [ITERATIONS] [CLIENTS]
//!
//! Prints the median and p99 of: `ping` (the protocol's echo floor: frame, decode, encode, no
//! engine), `get` of one small node, a one-property `update` commit (durability none), a
//! 3-row query and a 1000-row query; each in JSON and in MessagePack, over a fresh demo
//! database with 1000 more products. With CLIENTS (e.g. 64), it then runs that many sessions
//! at once for two seconds per request kind and prints the throughput.

use std::sync::Arc;
use std::time::{Duration, Instant};

use espalier_client::{Client, ClientOptions};
use espalier_instruction::parse::{parse_instructions, ParseOptions};
use espalier_instruction::Engine;
use espalier_protocol::Encoding;
use espalier_server::{Server, ServerConfig};
use espalier_transaction::{DatabaseOptions, Durability};

const SCHEMA: &str = include_str!("../../../demo/factory.alan");
const DATA: &str = include_str!("../../../demo/data.alan");

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

async fn time<F, Fut>(n: usize, mut f: F) -> (Duration, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..n / 10 {
        f().await; // warm up
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        samples.push(t.elapsed());
    }
    samples.sort();
    (quantile(&samples, 0.5), quantile(&samples, 0.99))
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = Engine::create(&dir.path().join("db"), SCHEMA, opts).expect("create");
    for instr in parse_instructions(DATA, ParseOptions::CLIENT).expect("data") {
        let plan = engine.check(&instr.item, Some(DATA)).expect("check");
        engine.run(&plan, &Default::default(), None).expect("load");
    }
    let mut products = String::from("update (");
    for i in 0..1000 {
        products.push_str(&format!(
            " 'Products' -> dictionary \"p{i:04}\" ( 'Description' -> text \"part {i}\" 'Price' -> number {i} )"
        ));
    }
    products.push(')');
    engine.execute_text(&products, &Default::default()).expect("products");
    let server = Server::bind(Arc::new(engine), ServerConfig::local(0)).await.expect("bind");
    let url = format!("ws://{}", server.local_addr().expect("addr"));
    let handle = server.shutdown_handle();
    let task = tokio::spawn(server.serve());
    println!("{n} sequential round trips per line; median / p99 in microseconds");
    for encoding in [Encoding::Json, Encoding::Msgpack] {
        let c = Client::connect(&url, ClientOptions::default().encoding(encoding)).await.expect("connect");
        let lines: Vec<(&str, (Duration, Duration))> = vec![
            ("ping", time(n, || async { c.ping().await.expect("ping") }).await),
            (
                "get",
                time(n, || async {
                    c.get(". 'Machines' : \"M2\"", None).await.expect("get");
                })
                .await,
            ),
            (
                "update",
                time(n, || async {
                    c.execute("update . 'Machines' : \"M3\" ( 'Pulses' -> number + 1 )", None).await.expect("update");
                })
                .await,
            ),
            (
                "query",
                time(n, || async {
                    c.query("collection select . 'Clients' 'Name' -> text : 'Name'", None).await.expect("query");
                })
                .await,
            ),
            (
                "query1k",
                time(n / 10, || async {
                    let q = "collection select . 'Products' 'D' -> text : 'Description' 'P' -> number : 'Price'";
                    c.query(q, None).await.expect("query");
                })
                .await,
            ),
        ];
        for (name, (median, p99)) in lines {
            println!("{encoding:8} {name:8} {:8.1} {:8.1}", median.as_secs_f64() * 1e6, p99.as_secs_f64() * 1e6);
        }
    }
    if let Some(clients) = std::env::args().nth(2).and_then(|a| a.parse::<usize>().ok()) {
        throughput(&url, clients).await;
    }
    handle.shutdown();
    task.await.expect("join").expect("serve");
}

/// `clients` sessions each sending one request after the other for two seconds.
async fn throughput(url: &str, clients: usize) {
    let mut sessions = Vec::new();
    for _ in 0..clients {
        sessions.push(Client::connect(url, ClientOptions::default()).await.expect("connect"));
    }
    println!("{clients} sessions at once, MessagePack; requests per second");
    for kind in ["ping", "get", "query", "update"] {
        let stop = Instant::now() + Duration::from_secs(2);
        let mut tasks = Vec::new();
        for (i, c) in sessions.iter().enumerate() {
            let c = c.clone();
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < stop {
                    match kind {
                        "ping" => c.ping().await.expect("ping"),
                        "get" => {
                            c.get(". 'Machines' : \"M2\"", None).await.expect("get");
                        }
                        "query" => {
                            c.query("collection select . 'Clients' 'Name' -> text : 'Name'", None).await.expect("q");
                        }
                        _ => {
                            let key = format!("p{:04}", i % 1000);
                            let text = format!("update . 'Products' : \"{key}\" ( 'Price' -> number + 1 )");
                            c.execute(&text, None).await.expect("update");
                        }
                    }
                    n += 1;
                }
                n
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.expect("join");
        }
        println!("{kind:8} {:10.0}", total as f64 / 2.0);
    }
}
