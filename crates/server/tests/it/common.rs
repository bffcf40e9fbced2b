//! A server on a free loopback port over a fresh demo database, and helpers to drive it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use espalier_client::{Client, ClientError, ClientOptions};
use espalier_instruction::parse::{parse_instructions, ParseOptions};
use espalier_instruction::Engine;
use espalier_protocol::{Encoding, ErrorCode};
use espalier_server::{Server, ServerConfig, ServerError, ServerLimits, ShutdownHandle, Token};
use espalier_transaction::{DatabaseOptions, Durability};

pub const DEMO_SCHEMA: &str = include_str!("../../../../demo/factory.alan");
pub const DEMO_DATA: &str = include_str!("../../../../demo/data.alan");

pub const READ_SECRET: &str = "read-secret-0123456789";
pub const WRITE_SECRET: &str = "write-secret-0123456789";
pub const ADMIN_SECRET: &str = "admin-secret-0123456789";

pub struct TestServer {
    pub addr: SocketAddr,
    pub handle: ShutdownHandle,
    pub task: tokio::task::JoinHandle<Result<(), ServerError>>,
    pub engine: Arc<Engine>,
    /// Keeps the database directory until the test ends.
    pub _dir: tempfile::TempDir,
}

impl TestServer {
    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    pub fn http(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub async fn client(&self) -> Client {
        self.client_with(ClientOptions::default()).await
    }

    pub async fn client_with(&self, opts: ClientOptions) -> Client {
        Client::connect(&self.url(), opts).await.expect("connects")
    }

    /// Shuts down and waits for the server to finish.
    pub async fn stop(self) {
        self.handle.shutdown();
        let r = tokio::time::timeout(Duration::from_secs(30), self.task).await;
        r.expect("the server stops in time").expect("the server task ends").expect("the server stops cleanly");
    }
}

/// A fresh database with the demo schema and data.
pub fn demo_engine(dir: &std::path::Path) -> Arc<Engine> {
    let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
    let engine = Engine::create(&dir.join("db"), DEMO_SCHEMA, opts).expect("creates the demo database");
    for instr in parse_instructions(DEMO_DATA, ParseOptions::CLIENT).expect("demo data parses") {
        let plan = engine.check(&instr.item, Some(DEMO_DATA)).expect("demo data checks");
        engine.run(&plan, &Default::default(), None).expect("demo data loads");
    }
    Arc::new(engine)
}

pub async fn start() -> TestServer {
    start_with(|_| {}).await
}

pub async fn start_with(configure: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = demo_engine(dir.path());
    start_on(engine, dir, configure).await
}

pub async fn start_on(
    engine: Arc<Engine>,
    dir: tempfile::TempDir,
    configure: impl FnOnce(&mut ServerConfig),
) -> TestServer {
    let mut config = ServerConfig::local(0);
    configure(&mut config);
    let server = Server::bind(engine.clone(), config).await.expect("binds");
    let addr = server.local_addr().expect("address");
    let handle = server.shutdown_handle();
    let task = tokio::spawn(server.serve());
    TestServer { addr, handle, task, engine, _dir: dir }
}

/// Tokens for the three roles.
pub fn with_tokens(c: &mut ServerConfig) {
    c.tokens = vec![
        Token::parse(&format!("reader:read:{READ_SECRET}")).unwrap(),
        Token::parse(&format!("writer:write:{WRITE_SECRET}")).unwrap(),
        Token::parse(&format!("admin:admin:{ADMIN_SECRET}")).unwrap(),
    ];
}

pub fn limits(c: &mut ServerConfig, f: impl FnOnce(&mut ServerLimits)) {
    f(&mut c.limits);
}

pub fn opts(encoding: Encoding) -> ClientOptions {
    ClientOptions::default().encoding(encoding)
}

/// The error code of a failed call.
pub fn code<T: std::fmt::Debug>(r: Result<T, ClientError>) -> ErrorCode {
    match r {
        Err(e) => e.code().cloned().unwrap_or_else(|| panic!("no code in {e:?}")),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

/// Waits up to 10 s for `f` to hold.
pub async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

pub fn params(pairs: &[(&str, &str)]) -> Option<espalier_protocol::Params> {
    Some(pairs.iter().map(|(k, v)| (k.to_string(), espalier_protocol::ParamValue::Text(v.to_string()))).collect())
}

/// A `kB` line of /proc/self/status, in bytes (the server runs in this process).
pub fn status_bytes(name: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}"));
    let kib: usize = line[name.len()..].trim().trim_end_matches("kB").trim().parse().expect("a number of kB");
    kib * 1024
}

/// Anonymous resident memory: the heap, without the database's mapped pages.
pub fn rss_anon() -> usize {
    status_bytes("RssAnon:")
}
