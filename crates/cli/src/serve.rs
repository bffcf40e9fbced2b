//! `espalier serve`: the database over the network (`docs/server.md`, `docs/protocol.md`).
//!
//! The settings come from flags, `ESPALIER_…` variables, a configuration file (`--config`,
//! `ESPALIER_CONFIG`, or `./espalier.toml` if there is one) and defaults, in that order of
//! precedence; `espalier_server::config::settings` resolves them and knows where each came
//! from (`--print-config`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::parser::ValueSource;
use clap::Args;
use espalier_server::config::log;
use espalier_server::config::settings::{self, DurabilityMode, Layer, Settings, CONFIG_ENV, DEFAULT_CONFIG_FILE};
use espalier_server::{read_token_file, Server, ServerConfig, Token};
use espalier_storage::Holder;

use crate::{db, DurabilityArg, Failure, Global};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The configuration file (TOML; keys in docs/server.md). Default: ESPALIER_CONFIG, else
    /// ./espalier.toml if it exists. Flags and ESPALIER_… variables override its values.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration, with where each value came from (flag, environment,
    /// file:line or default), and exit without serving.
    #[arg(long)]
    pub print_config: bool,
    /// Address to listen on, optionally with a port: 127.0.0.1, 0.0.0.0:7420, [::1]:9000, or
    /// :PORT for the port alone (the address stays 127.0.0.1 unless configured). Without
    /// tokens only loopback addresses are allowed [default: 127.0.0.1; env: ESPALIER_LISTEN].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Port to listen on; 0 picks a free one (the address is printed) [default: 7420; env:
    /// ESPALIER_PORT].
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// If the database holds nothing yet, create it with the demo schema and data first.
    #[arg(long)]
    pub demo: bool,
    /// A token: NAME:ROLE:SECRET, ROLE one of read, write, admin (repeatable). With any token
    /// configured, every client must present one.
    #[arg(long = "token", value_name = "NAME:ROLE:SECRET")]
    pub tokens: Vec<String>,
    /// A TOML file of tokens ([[token]] name = "…" role = "…" secret = "…"); keeps secrets
    /// out of the process list [env: ESPALIER_TOKENS_FILE].
    #[arg(long, value_name = "FILE")]
    pub tokens_file: Option<PathBuf>,
    /// Largest WebSocket message or HTTP body accepted [default: 16777216; env:
    /// ESPALIER_MAX_FRAME_BYTES].
    #[arg(long, value_name = "BYTES")]
    pub max_frame_bytes: Option<u64>,
    /// Requests one session may have in progress [default: 64; env: ESPALIER_MAX_IN_FLIGHT].
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<u64>,
    /// Open sessions plus HTTP requests in progress [default: 1024; env:
    /// ESPALIER_MAX_SESSIONS].
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<u64>,
    /// Longest a read-only request may run, in milliseconds [default: 30000; env:
    /// ESPALIER_MAX_QUERY_MS].
    #[arg(long, value_name = "MS")]
    pub max_query_ms: Option<u64>,
    /// Largest reply, in bytes [default: 67108864; env: ESPALIER_MAX_RESULT_BYTES].
    #[arg(long, value_name = "BYTES")]
    pub max_result_bytes: Option<u64>,
    /// Subscriptions one session may hold [default: 256; env: ESPALIER_MAX_SUBSCRIPTIONS].
    #[arg(long, value_name = "N")]
    pub max_subscriptions: Option<u64>,
    /// Commits queued per subscription before it is told to reload [default: 1024; env:
    /// ESPALIER_SUBSCRIBER_QUEUE].
    #[arg(long, value_name = "N")]
    pub subscriber_queue: Option<u64>,
    /// Commits kept in memory so that reconnecting subscribers can resume [default: 10000;
    /// env: ESPALIER_HISTORY_COMMITS].
    #[arg(long, value_name = "N")]
    pub history: Option<u64>,
    /// Bytes of commit history kept for resuming subscribers [default: 67108864; env:
    /// ESPALIER_HISTORY_BYTES].
    #[arg(long, value_name = "BYTES")]
    pub history_bytes: Option<u64>,
    /// Outbound bytes one session may hold unsent; past it the session is not read [default:
    /// 16777216; env: ESPALIER_SESSION_QUEUE_BYTES].
    #[arg(long, value_name = "BYTES")]
    pub session_queue_bytes: Option<u64>,
    /// Outbound bytes all sessions may hold unsent; past it the largest holder is closed
    /// [default: 268435456; env: ESPALIER_MAX_QUEUED_BYTES].
    #[arg(long, value_name = "BYTES")]
    pub max_queued_bytes: Option<u64>,
    /// A session that sends nothing (not even a pong) or reads nothing this long is closed, in
    /// milliseconds [default: 60000; env: ESPALIER_IDLE_TIMEOUT_MS].
    #[arg(long, value_name = "MS")]
    pub idle_timeout_ms: Option<u64>,
    /// A connection's first request must arrive within this, in milliseconds [default: 10000;
    /// env: ESPALIER_REQUEST_TIMEOUT_MS].
    #[arg(long, value_name = "MS")]
    pub request_timeout_ms: Option<u64>,
    /// Open connections from one IP address [default: 256; env:
    /// ESPALIER_MAX_CONNECTIONS_PER_ADDRESS].
    #[arg(long, value_name = "N")]
    pub max_connections_per_address: Option<u64>,
    /// How long shutdown waits for requests in flight, in milliseconds [default: 10000; env:
    /// ESPALIER_SHUTDOWN_GRACE_MS].
    #[arg(long, value_name = "MS")]
    pub shutdown_grace_ms: Option<u64>,
    /// The least severe diagnostic written to standard error [default: info; env:
    /// ESPALIER_LOG_LEVEL].
    #[arg(long, value_name = "LEVEL", value_parser = ["error", "warn", "info", "debug"])]
    pub log_level: Option<String>,
    /// How diagnostics are written: text, json (one object per line) or logfmt [default: text;
    /// env: ESPALIER_LOG_FORMAT].
    #[arg(long, value_name = "FORMAT", value_parser = ["text", "json", "logfmt"])]
    pub log_format: Option<String>,
}

/// The settings the command line gives.
fn flag_layer(g: &Global, args: &ServeArgs) -> Layer {
    let mut l = Layer::default();
    if g.db_source == Some(ValueSource::CommandLine) {
        l.flag("database", g.db.display().to_string());
    }
    if let Some(d) = g.durability {
        l.flag("durability", d.name());
    }
    if let Some(m) = g.memory_bound {
        l.flag("memory_bound", m.to_string());
    }
    if let Some(v) = &args.listen {
        l.flag("server.listen", v.clone());
    }
    if let Some(v) = args.port {
        l.flag("server.port", v.to_string());
    }
    if let Some(v) = &args.tokens_file {
        l.flag("server.tokens_file", v.display().to_string());
    }
    let numbers = [
        ("limits.max_frame_bytes", args.max_frame_bytes),
        ("limits.max_in_flight", args.max_in_flight),
        ("limits.max_sessions", args.max_sessions),
        ("limits.max_query_ms", args.max_query_ms),
        ("limits.max_result_bytes", args.max_result_bytes),
        ("limits.max_subscriptions", args.max_subscriptions),
        ("limits.subscriber_queue", args.subscriber_queue),
        ("limits.history", args.history),
        ("limits.history_bytes", args.history_bytes),
        ("limits.session_queue_bytes", args.session_queue_bytes),
        ("limits.max_queued_bytes", args.max_queued_bytes),
        ("limits.idle_timeout_ms", args.idle_timeout_ms),
        ("limits.request_timeout_ms", args.request_timeout_ms),
        ("limits.max_connections_per_address", args.max_connections_per_address),
        ("limits.shutdown_grace_ms", args.shutdown_grace_ms),
    ];
    for (name, v) in numbers {
        if let Some(v) = v {
            l.flag(name, v.to_string());
        }
    }
    if let Some(v) = &args.log_level {
        l.flag("log.level", v.clone());
    }
    if let Some(v) = &args.log_format {
        l.flag("log.format", v.clone());
    }
    l
}

/// The configuration file: `--config`, else `ESPALIER_CONFIG`, else `./espalier.toml` if it
/// exists. A file named by the flag or the variable must exist.
fn config_file(args: &ServeArgs) -> Option<PathBuf> {
    if let Some(p) = &args.config {
        return Some(p.clone());
    }
    if let Some(p) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let default = Path::new(".").join(DEFAULT_CONFIG_FILE);
    default.is_file().then_some(default)
}

/// Flags over the environment over the file over the defaults.
fn settings(g: &Global, args: &ServeArgs) -> Result<(Settings, Option<PathBuf>), Failure> {
    let fail = |e: espalier_server::ServerError| Failure::other(e.to_string());
    let flags = flag_layer(g, args);
    let env = Layer::from_env(|name| std::env::var(name).ok());
    let file = config_file(args);
    let file_layer = match &file {
        Some(path) => Layer::from_file(path).map_err(fail)?,
        None => Layer::default(),
    };
    let settings = settings::resolve(&[&flags, &env, &file_layer]).map_err(fail)?;
    Ok((settings, file))
}

fn server_config(settings: &Settings, args: &ServeArgs) -> Result<ServerConfig, Failure> {
    let fail = |e: espalier_server::ServerError| Failure::other(e.to_string());
    let mut tokens = Vec::new();
    if let Some(file) = settings.tokens_file() {
        tokens.extend(read_token_file(&file).map_err(fail)?);
    }
    for spec in &args.tokens {
        tokens.push(Token::parse(spec).map_err(fail)?);
    }
    let config = ServerConfig { listen: settings.listen, limits: settings.limits.clone(), tokens };
    config.validate().map_err(fail)?;
    Ok(config)
}

/// `--print-config`: the settings as an `espalier.toml` with each value's source (JSON with
/// `--json`), then whether the server would start with them.
fn print_config(g: &Global, settings: &Settings, file: Option<&Path>, args: &ServeArgs) -> Result<(), Failure> {
    let checked = server_config(settings, args);
    let tokens = checked.as_ref().map(|c| c.tokens.len()).ok();
    if g.json {
        let out = serde_json::json!({
            "config_file": file.map(|f| f.display().to_string()),
            "settings": settings.to_json(),
            "tokens": tokens,
            "error": checked.as_ref().err().map(|e| match e { Failure::Other(m) => m.clone(), _ => String::new() }),
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        println!("# espalier serve: the effective configuration (flag > environment > file > default)");
        match file {
            Some(f) => println!("# configuration file: {}", f.display()),
            None => println!("# configuration file: none (no --config, no {CONFIG_ENV}, no ./{DEFAULT_CONFIG_FILE})"),
        }
        if let Some(n) = tokens {
            let flags = args.tokens.len();
            println!("# tokens: {n} ({flags} from --token, {} from the tokens file)", n - flags);
        }
        print!("{}", settings.to_toml());
    }
    checked.map(|_| ())
}

/// A future that resolves on SIGINT (Ctrl-C) or SIGTERM. The handlers are installed when this
/// is called (inside the runtime), not when the future is first polled: a signal sent right
/// after the address is printed must already stop the server gracefully.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let streams = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
        async move {
            match streams {
                (Ok(mut int), Ok(mut term)) => {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

pub fn serve(g: &Global, args: &ServeArgs) -> Result<(), Failure> {
    let (settings, file) = settings(g, args)?;
    if args.print_config {
        return print_config(g, &settings, file.as_deref(), args);
    }
    log::init(settings.log_level, settings.log_format);
    log::install_panic_hook();
    let config = server_config(&settings, args)?;
    // The database and durability as configured: the commands below open it as usual.
    let g = &Global {
        db: settings.database(),
        durability: Some(match settings.durability {
            DurabilityMode::Sync => DurabilityArg::Sync,
            DurabilityMode::Periodic => DurabilityArg::Periodic,
            DurabilityMode::None => DurabilityArg::None,
        }),
        memory_bound: Some(settings.memory_bytes >> 20),
        ..g.clone()
    };
    if args.demo && !espalier_transaction::Database::exists(&g.db) {
        db::create_atomically(g, &g.db, db::DEMO_SCHEMA, "demo/factory.alan", |engine| {
            db::run_all(engine, db::DEMO_DATA, &Default::default(), |_| {})
        })?;
        log::info("created the database with the demo schema and data", &[("database", &g.db.display())]);
    }
    let engine = Arc::new(db::open(g)?);
    let opened = engine.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("espalier-serve")
        .build()
        .map_err(|e| Failure::other(format!("starting the runtime: {e}")))?;
    let secured = !config.tokens.is_empty();
    let tokens = config.tokens.len();
    let durability = settings.durability.name();
    runtime.block_on(async move {
        let server = Server::bind(engine, config).await.map_err(|e| Failure::other(e.to_string()))?;
        let addr = server.local_addr().map_err(|e| Failure::other(e.to_string()))?;
        // Whoever else opens the database is refused with this address to go to instead.
        if let Err(e) = opened.database().dir_lock().set_holder(Holder::Server { listen: addr }) {
            log::warn("could not record the server's address in the lock file", &[("error", &e)]);
        }
        let handle = server.shutdown_handle();
        let stop = stop_signal();
        tokio::spawn(async move {
            stop.await;
            log::info("shutting down (finishing requests in flight)", &[]);
            handle.shutdown();
        });
        // The one line on standard output: scripts read the address from it.
        println!("listening on ws://{addr}/ws and http://{addr}/v1/");
        let access = if secured { "tokens required" } else { "no tokens: loopback only, every client is admin" };
        log::info(
            "serving; stop with Ctrl-C",
            &[
                ("database", &g.db.display()),
                ("listen", &addr),
                ("durability", &durability),
                ("tokens", &tokens),
                ("access", &access),
            ],
        );
        server.serve().await.map_err(|e| Failure::other(e.to_string()))
    })?;
    log::info("stopped", &[]);
    Ok(())
}
