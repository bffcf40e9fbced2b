//! `espalier serve`: the database over the network (`docs/server.md`, `docs/protocol.md`).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use espalier_server::{read_token_file, Server, ServerConfig, ServerLimits, Token, DEFAULT_LISTEN};
use espalier_storage::Holder;

use crate::{db, Failure, Global};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. Without tokens only loopback addresses are allowed.
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// If --db holds no database yet, create it with the demo schema and data first.
    #[arg(long)]
    pub demo: bool,
    /// A token: NAME:ROLE:SECRET, ROLE one of read, write, admin (repeatable). With any token
    /// configured, every client must present one.
    #[arg(long = "token", value_name = "NAME:ROLE:SECRET")]
    pub tokens: Vec<String>,
    /// A TOML file of tokens ([[token]] name = "…" role = "…" secret = "…"); keeps secrets
    /// out of the process list.
    #[arg(long, value_name = "FILE")]
    pub tokens_file: Option<PathBuf>,
    /// Largest WebSocket message or HTTP body accepted [default: 16777216].
    #[arg(long, value_name = "BYTES")]
    pub max_frame_bytes: Option<usize>,
    /// Requests one session may have in progress [default: 64].
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<usize>,
    /// Open sessions plus HTTP requests in progress [default: 1024].
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<usize>,
    /// Longest a read-only request may run, in milliseconds [default: 30000].
    #[arg(long, value_name = "MS")]
    pub max_query_ms: Option<u64>,
    /// Largest reply, in bytes [default: 67108864].
    #[arg(long, value_name = "BYTES")]
    pub max_result_bytes: Option<usize>,
    /// Subscriptions one session may hold [default: 256].
    #[arg(long, value_name = "N")]
    pub max_subscriptions: Option<usize>,
    /// Commits queued per subscription before it is told to reload [default: 1024].
    #[arg(long, value_name = "N")]
    pub subscriber_queue: Option<usize>,
    /// Commits kept in memory so that reconnecting subscribers can resume [default: 10000].
    #[arg(long, value_name = "N")]
    pub history: Option<usize>,
    /// How long shutdown waits for requests in flight, in milliseconds [default: 10000].
    #[arg(long, value_name = "MS")]
    pub shutdown_grace_ms: Option<u64>,
}

fn listen_address(text: &str) -> Result<SocketAddr, Failure> {
    if let Ok(a) = text.parse() {
        return Ok(a);
    }
    let mut found = text.to_socket_addrs().map_err(|e| {
        Failure::other(format!("--listen {text:?}: not an address (like 127.0.0.1:7420 or [::1]:7420): {e}"))
    })?;
    found.next().ok_or_else(|| Failure::other(format!("--listen {text:?} resolves to no address")))
}

fn config(args: &ServeArgs) -> Result<ServerConfig, Failure> {
    let mut tokens = Vec::new();
    if let Some(file) = &args.tokens_file {
        tokens.extend(read_token_file(file).map_err(|e| Failure::other(e.to_string()))?);
    }
    for spec in &args.tokens {
        tokens.push(Token::parse(spec).map_err(|e| Failure::other(e.to_string()))?);
    }
    let d = ServerLimits::default();
    let limits = ServerLimits {
        max_frame_bytes: args.max_frame_bytes.unwrap_or(d.max_frame_bytes),
        max_in_flight: args.max_in_flight.unwrap_or(d.max_in_flight),
        max_sessions: args.max_sessions.unwrap_or(d.max_sessions),
        max_query_time: args.max_query_ms.map_or(d.max_query_time, Duration::from_millis),
        max_result_bytes: args.max_result_bytes.unwrap_or(d.max_result_bytes),
        max_subscriptions: args.max_subscriptions.unwrap_or(d.max_subscriptions),
        subscriber_queue: args.subscriber_queue.unwrap_or(d.subscriber_queue),
        history_commits: args.history.unwrap_or(d.history_commits),
        history_changes: d.history_changes,
        shutdown_grace: args.shutdown_grace_ms.map_or(d.shutdown_grace, Duration::from_millis),
    };
    let config = ServerConfig { listen: listen_address(&args.listen)?, limits, tokens };
    config.validate().map_err(|e| Failure::other(e.to_string()))?;
    Ok(config)
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

pub fn serve(g: &Global, args: &ServeArgs) -> Result<(), Failure> {
    let config = config(args)?;
    if args.demo && !g.db.join("data.mdb").exists() {
        db::create_atomically(g, &g.db, db::DEMO_SCHEMA, "demo/factory.alan", |engine| {
            db::run_all(engine, db::DEMO_DATA, &Default::default(), |_| {})
        })?;
        eprintln!("created {} with the demo schema and data", g.db.display());
    }
    let engine = Arc::new(db::open(g)?);
    let opened = engine.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("espalier-serve")
        .build()
        .map_err(|e| Failure::other(format!("starting the runtime: {e}")))?;
    let secured = !config.tokens.is_empty();
    runtime.block_on(async move {
        let server = Server::bind(engine, config).await.map_err(|e| Failure::other(e.to_string()))?;
        let addr = server.local_addr().map_err(|e| Failure::other(e.to_string()))?;
        // Whoever else opens the database is refused with this address to go to instead.
        if let Err(e) = opened.database().store().dir_lock().set_holder(Holder::Server { listen: addr }) {
            eprintln!("espalier serve: warning: {e}");
        }
        let handle = server.shutdown_handle();
        tokio::spawn(async move {
            stop_signal().await;
            eprintln!("espalier serve: shutting down (finishing requests in flight)");
            handle.shutdown();
        });
        // The one line on standard output: scripts read the address from it.
        println!("listening on ws://{addr}/ws and http://{addr}/v1/");
        eprintln!(
            "espalier serve: database {}, {}; stop with Ctrl-C",
            g.db.display(),
            if secured { "tokens required" } else { "no tokens: loopback only, every client is admin" }
        );
        server.serve().await.map_err(|e| Failure::other(e.to_string()))
    })?;
    eprintln!("espalier serve: stopped");
    Ok(())
}
