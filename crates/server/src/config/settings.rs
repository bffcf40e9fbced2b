//! Where `espalier serve`'s settings come from: flags, `ESPALIER_…` environment variables, a
//! configuration file (`espalier.toml`) and defaults, in that order of precedence.
//!
//! Every setting is one [`Key`] of [`KEYS`]: its name in the file (`server.port`), its variable
//! (`ESPALIER_PORT`), its flag (`--port`) and its default. A [`Layer`] holds the values one
//! source gives, as text, with where each came from ([`Source`]); [`resolve`] takes the layers
//! from the highest precedence down, checks every value (a bad one is named with its source:
//! the flag, the variable, or `file:line`) and gives [`Settings`], which still knows the source
//! of each value (`espalier serve --print-config`).
//!
//! The file:
//!
//! ```toml
//! database = "espalier.db"      # relative paths are relative to the file's directory
//! durability = "sync"
//!
//! [server]
//! listen = "127.0.0.1"          # an address, or address:port
//! port = 7420
//! tokens_file = "tokens.toml"
//!
//! [limits]
//! max_in_flight = 64
//!
//! [log]
//! level = "info"
//! format = "text"
//! ```
//!
//! Unknown keys and tables are refused with `file:line` and the key; so are values of the
//! wrong type.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::ServerLimits;
use crate::ServerError;

/// The configuration file read when `--config` and `ESPALIER_CONFIG` say nothing (if it exists).
pub const DEFAULT_CONFIG_FILE: &str = "espalier.toml";
/// The variable naming the configuration file.
pub const CONFIG_ENV: &str = "ESPALIER_CONFIG";
/// The address listened on when no `listen` gives one: loopback.
pub const DEFAULT_HOST: &str = "127.0.0.1";
/// The port listened on when neither `server.port` nor `listen` gives one.
pub const DEFAULT_PORT: u16 = 7420;

/// What a key's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Text: an address, a path, or one of a few words.
    Text,
    /// A whole number (`0` and up).
    Whole,
}

/// One setting.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// In the file: `name`, or `table.name`.
    pub name: &'static str,
    /// The environment variable: `ESPALIER_…`.
    pub env: &'static str,
    /// The command-line flag: `--…`.
    pub flag: &'static str,
    /// What its values are.
    pub kind: Kind,
    /// As printed, and as parsed when nothing else gives a value.
    pub default: &'static str,
    /// One line for the documentation's table.
    pub about: &'static str,
}

const fn key(name: &'static str, env: &'static str, flag: &'static str, kind: Kind, default: &'static str) -> Key {
    Key { name, env, flag, kind, default, about: "" }
}

/// Every setting, in the order `--print-config` prints them.
pub const KEYS: &[Key] = &[
    Key { about: "the database directory", ..key("database", "ESPALIER_DB", "--db", Kind::Text, "./espalier.db") },
    Key {
        about: "sync, periodic or none (docs/durability.md)",
        ..key("durability", "ESPALIER_DURABILITY", "--durability", Kind::Text, "sync")
    },
    Key {
        about: "the in-memory bound, in MiB: a checkpoint starts when what was written since the last grew by this much (docs/storage.md)",
        ..key("memory_bound", "ESPALIER_MEMORY_BOUND", "--memory-bound", Kind::Whole, "256")
    },
    Key {
        about: "the address to listen on, optionally with :port; without tokens only loopback",
        ..key("server.listen", "ESPALIER_LISTEN", "--listen", Kind::Text, DEFAULT_HOST)
    },
    Key { about: "the port; 0 picks a free one", ..key("server.port", "ESPALIER_PORT", "--port", Kind::Whole, "7420") },
    Key {
        about: "a TOML file of tokens; with any token every client must present one",
        ..key("server.tokens_file", "ESPALIER_TOKENS_FILE", "--tokens-file", Kind::Text, "")
    },
    Key {
        about: "largest WebSocket message or HTTP body, in bytes",
        ..key("limits.max_frame_bytes", "ESPALIER_MAX_FRAME_BYTES", "--max-frame-bytes", Kind::Whole, "16777216")
    },
    Key {
        about: "requests one session may have in progress",
        ..key("limits.max_in_flight", "ESPALIER_MAX_IN_FLIGHT", "--max-in-flight", Kind::Whole, "64")
    },
    Key {
        about: "open sessions plus HTTP requests in progress",
        ..key("limits.max_sessions", "ESPALIER_MAX_SESSIONS", "--max-sessions", Kind::Whole, "1024")
    },
    Key {
        about: "longest a read-only request may run, in milliseconds",
        ..key("limits.max_query_ms", "ESPALIER_MAX_QUERY_MS", "--max-query-ms", Kind::Whole, "30000")
    },
    Key {
        about: "largest reply, in bytes",
        ..key("limits.max_result_bytes", "ESPALIER_MAX_RESULT_BYTES", "--max-result-bytes", Kind::Whole, "67108864")
    },
    Key {
        about: "subscriptions one session may hold",
        ..key("limits.max_subscriptions", "ESPALIER_MAX_SUBSCRIPTIONS", "--max-subscriptions", Kind::Whole, "256")
    },
    Key {
        about: "commits queued per subscription before it is told to reload",
        ..key("limits.subscriber_queue", "ESPALIER_SUBSCRIBER_QUEUE", "--subscriber-queue", Kind::Whole, "1024")
    },
    Key {
        about: "commits kept so that reconnecting subscribers can resume",
        ..key("limits.history", "ESPALIER_HISTORY_COMMITS", "--history", Kind::Whole, "10000")
    },
    Key {
        about: "bytes of history kept (each commit's changes with their old and new values)",
        ..key("limits.history_bytes", "ESPALIER_HISTORY_BYTES", "--history-bytes", Kind::Whole, "67108864")
    },
    Key {
        about: "outbound bytes one session may hold unsent; past it the session is not read",
        ..key(
            "limits.session_queue_bytes",
            "ESPALIER_SESSION_QUEUE_BYTES",
            "--session-queue-bytes",
            Kind::Whole,
            "16777216",
        )
    },
    Key {
        about: "outbound bytes all sessions may hold unsent; past it the largest holder is closed",
        ..key("limits.max_queued_bytes", "ESPALIER_MAX_QUEUED_BYTES", "--max-queued-bytes", Kind::Whole, "268435456")
    },
    Key {
        about: "a session that sends nothing (not even a pong) or reads nothing this long is closed, in ms",
        ..key("limits.idle_timeout_ms", "ESPALIER_IDLE_TIMEOUT_MS", "--idle-timeout-ms", Kind::Whole, "60000")
    },
    Key {
        about: "a connection's first request (upgrade or HTTP, with its token) must arrive within this, in ms",
        ..key("limits.request_timeout_ms", "ESPALIER_REQUEST_TIMEOUT_MS", "--request-timeout-ms", Kind::Whole, "10000")
    },
    Key {
        about: "open connections from one IP address",
        ..key(
            "limits.max_connections_per_address",
            "ESPALIER_MAX_CONNECTIONS_PER_ADDRESS",
            "--max-connections-per-address",
            Kind::Whole,
            "256",
        )
    },
    Key {
        about: "how long shutdown waits for requests in flight, in milliseconds",
        ..key("limits.shutdown_grace_ms", "ESPALIER_SHUTDOWN_GRACE_MS", "--shutdown-grace-ms", Kind::Whole, "10000")
    },
    Key {
        about: "error, warn, info or debug: the least severe diagnostic written",
        ..key("log.level", "ESPALIER_LOG_LEVEL", "--log-level", Kind::Text, "info")
    },
    Key {
        about: "text, json (one object per line) or logfmt",
        ..key("log.format", "ESPALIER_LOG_FORMAT", "--log-format", Kind::Text, "text")
    },
];

/// The key named `name` (as in the file).
pub fn key_named(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A command-line flag (named here).
    Flag(&'static str),
    /// An environment variable (named here).
    Env(&'static str),
    /// A line of a configuration file.
    File {
        /// The file.
        path: PathBuf,
        /// The 1-based line of the value.
        line: usize,
    },
    /// Nothing gave a value: the key's default.
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag(flag) => write!(f, "flag {flag}"),
            Source::Env(var) => write!(f, "environment {var}"),
            Source::File { path, line } => write!(f, "file {}:{line}", path.display()),
            Source::Default => f.write_str("default"),
        }
    }
}

/// A value as given (text), and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    /// The value as text.
    pub value: String,
    /// Where it came from.
    pub source: Source,
}

impl Given {
    /// `--port "x"`, `ESPALIER_PORT="x"`, `espalier.toml:3: server.port = "x"`: the value with
    /// its place, for messages.
    fn named(&self, key: &Key) -> String {
        match &self.source {
            Source::Flag(flag) => format!("{flag} {:?}", self.value),
            Source::Env(var) => format!("{var}={:?}", self.value),
            Source::File { path, line } => format!("{}:{line}: {} = {:?}", path.display(), key.name, self.value),
            Source::Default => format!("the default {} {:?}", key.name, self.value),
        }
    }
}

/// The values one source gives, by key name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layer {
    values: BTreeMap<&'static str, Given>,
}

fn config_error(message: String) -> ServerError {
    ServerError::Config(message)
}

impl Layer {
    /// Sets `name` (a key of [`KEYS`]) as given by its flag.
    ///
    /// # Panics
    /// If `name` is not a key: a programming error.
    pub fn flag(&mut self, name: &str, value: impl Into<String>) {
        let key = key_named(name).unwrap_or_else(|| panic!("no setting {name}"));
        self.values.insert(key.name, Given { value: value.into(), source: Source::Flag(key.flag) });
    }

    /// The `ESPALIER_…` variables that `lookup` knows (`std::env::var` in the program).
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Layer {
        let mut layer = Layer::default();
        for key in KEYS {
            if let Some(value) = lookup(key.env) {
                layer.values.insert(key.name, Given { value, source: Source::Env(key.env) });
            }
        }
        layer
    }

    /// Reads a configuration file (see the module documentation).
    pub fn from_file(path: &Path) -> Result<Layer, ServerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| config_error(format!("reading the configuration file {}: {e}", path.display())))?;
        Layer::parse_file(&text, path)
    }

    /// Parses the text of a configuration file read from `path` (for messages, and the
    /// directory relative paths are taken from).
    pub fn parse_file(text: &str, path: &Path) -> Result<Layer, ServerError> {
        use toml::de::{DeTable, DeValue};
        let line_of = |offset: usize| text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1;
        let at = |offset: usize| format!("{}:{}", path.display(), line_of(offset));
        let table = DeTable::parse(text).map_err(|e| {
            let place = e.span().map_or_else(|| path.display().to_string(), |s| at(s.start));
            config_error(format!("{place}: not TOML: {}", e.message().trim_end()))
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        let mut layer = Layer::default();
        let mut leaves: Vec<(String, &toml::Spanned<DeValue<'_>>, usize)> = Vec::new();
        for (name, value) in table.get_ref() {
            let name_at = name.span().start;
            match value.get_ref() {
                DeValue::Table(inner) if KEYS.iter().any(|k| k.name.starts_with(&format!("{}.", name.get_ref()))) => {
                    for (leaf, v) in inner {
                        leaves.push((format!("{}.{}", name.get_ref(), leaf.get_ref()), v, leaf.span().start));
                    }
                }
                _ => leaves.push((name.get_ref().to_string(), value, name_at)),
            }
        }
        for (name, value, name_at) in leaves {
            let Some(key) = key_named(&name) else {
                let tables = ["server", "limits", "log"];
                let known: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
                let hint = if tables.contains(&name.as_str()) {
                    format!("[{name}] is a table")
                } else {
                    format!("the keys are {}", known.join(", "))
                };
                return Err(config_error(format!("{}: unknown key `{name}` ({hint})", at(name_at))));
            };
            let line = line_of(value.span().start);
            let wrong = |found: &str| {
                let want = match key.kind {
                    Kind::Text => "a string",
                    Kind::Whole => "a whole number",
                };
                config_error(format!("{}: `{name}` must be {want}, not {found}", at(value.span().start)))
            };
            let text_value = match (key.kind, value.get_ref()) {
                (Kind::Text, DeValue::String(s)) => {
                    if matches!(key.name, "database" | "server.tokens_file")
                        && !s.is_empty()
                        && Path::new(&**s).is_relative()
                    {
                        base.join(&**s).display().to_string()
                    } else {
                        s.to_string()
                    }
                }
                (Kind::Whole, DeValue::Integer(i)) => {
                    let digits = i.as_str().replace('_', "");
                    match u64::from_str_radix(digits.trim_start_matches('+'), i.radix()) {
                        Ok(n) => n.to_string(),
                        Err(_) => return Err(wrong(&format!("{i}"))),
                    }
                }
                (_, DeValue::String(s)) => return Err(wrong(&format!("the string {:?}", &**s))),
                (_, DeValue::Integer(i)) => return Err(wrong(&format!("the number {i}"))),
                (_, DeValue::Float(x)) => return Err(wrong(&format!("the number {x}"))),
                (_, DeValue::Boolean(b)) => return Err(wrong(&format!("{b}"))),
                (_, DeValue::Datetime(d)) => return Err(wrong(&format!("the date {d}"))),
                (_, DeValue::Array(_)) => return Err(wrong("an array")),
                (_, DeValue::Table(_)) => return Err(wrong("a table")),
            };
            let source = Source::File { path: path.to_path_buf(), line };
            layer.values.insert(key.name, Given { value: text_value, source });
        }
        Ok(layer)
    }

    /// The value this layer gives for the key named `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Given> {
        self.values.get(name)
    }
}

/// A diagnostic's severity; as a setting, the least severe level written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Only errors.
    Error,
    /// Errors and warnings.
    Warn,
    /// Errors, warnings and information (the default).
    Info,
    /// Everything, including debugging detail.
    Debug,
}

impl LogLevel {
    /// The level's name in the settings and the log.
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
        }
    }
}

/// How diagnostics are written to standard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `espalier serve: message (key=value …)`, for people.
    Text,
    /// One JSON object per line: `time`, `level`, `message`, then the fields.
    Json,
    /// One logfmt line: `time=… level=… msg="…" key=value …`.
    Logfmt,
}

/// The durability setting (the transaction layer's modes, by name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurabilityMode {
    /// `sync`: every commit is on disk before it is acknowledged.
    Sync,
    /// `periodic`: the disk is synced in the background every 100 ms; power loss can lose that much.
    Periodic,
    /// `none`: never synced; the operating system writes back when it likes.
    None,
}

impl DurabilityMode {
    /// The mode's name in the settings.
    pub fn name(self) -> &'static str {
        match self {
            DurabilityMode::Sync => "sync",
            DurabilityMode::Periodic => "periodic",
            DurabilityMode::None => "none",
        }
    }

    /// The transaction layer's durability for this mode.
    pub fn durability(self) -> espalier_transaction::Durability {
        match self {
            DurabilityMode::Sync => espalier_transaction::Durability::Sync,
            DurabilityMode::Periodic => espalier_transaction::Durability::Periodic(Duration::from_millis(100)),
            DurabilityMode::None => espalier_transaction::Durability::None,
        }
    }
}

/// Every setting with its value and source, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    values: BTreeMap<&'static str, Given>,
    /// The address to listen on (host from `server.listen`, port from `server.port` or the
    /// listen address's port, whichever has the higher precedence).
    pub listen: SocketAddr,
    /// The durability mode (`durability`).
    pub durability: DurabilityMode,
    /// The in-memory bound in bytes (`memory_bound`, given in MiB).
    pub memory_bytes: u64,
    /// Every bound the server enforces (the `limits` table).
    pub limits: ServerLimits,
    /// The least severe diagnostic written (`log.level`).
    pub log_level: LogLevel,
    /// How diagnostics are written (`log.format`).
    pub log_format: LogFormat,
}

/// `host`, `host:port`, `:port`, `[v6]`, `[v6]:port` or a bare IPv6 address: the host (if any)
/// and the port (if any).
fn split_listen(text: &str) -> Result<(Option<String>, Option<String>), String> {
    let text = text.trim();
    if text.parse::<IpAddr>().is_ok() {
        // A bare address (an IPv6 one has colons of its own).
        return Ok((Some(text.to_string()), None));
    }
    if let Some(port) = text.strip_prefix(':') {
        return Ok((None, Some(port.to_string())));
    }
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("an IPv6 address in brackets lacks its `]`")?;
        return match after {
            "" => Ok((Some(host.to_string()), None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((Some(host.to_string()), Some(port.to_string()))),
                None => Err(format!("unexpected {after:?} after the address")),
            },
        };
    }
    match text.rsplit_once(':') {
        Some((host, port)) => Ok((Some(host.to_string()), Some(port.to_string()))),
        None if text.is_empty() => Err("empty".into()),
        None => Ok((Some(text.to_string()), None)),
    }
}

fn parse_port(text: &str) -> Result<u16, String> {
    text.trim().parse::<u16>().map_err(|_| "a port is a whole number from 0 to 65535".to_string())
}

fn resolve_host(host: &str) -> Result<IpAddr, String> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    let found = (host, 0).to_socket_addrs().map_err(|e| format!("not an address (like 127.0.0.1 or [::1]): {e}"))?;
    found.map(|a| a.ip()).next().ok_or_else(|| "resolves to no address".to_string())
}

/// Resolves `layers` (highest precedence first: flags, environment, file) over the defaults,
/// and checks every value.
pub fn resolve(layers: &[&Layer]) -> Result<Settings, ServerError> {
    let mut values: BTreeMap<&'static str, Given> = BTreeMap::new();
    for key in KEYS {
        let given = layers.iter().find_map(|l| l.get(key.name)).cloned();
        values.insert(key.name, given.unwrap_or(Given { value: key.default.to_string(), source: Source::Default }));
    }
    let bad = |name: &str, why: &str| {
        let key = key_named(name).expect("a key");
        config_error(format!("{}: {why}", values[name].named(key)))
    };
    // Check every whole number, and the words.
    for key in KEYS.iter().filter(|k| k.kind == Kind::Whole) {
        if values[key.name].value.trim().parse::<u64>().is_err() {
            return Err(bad(key.name, "not a whole number"));
        }
    }
    let whole = |name: &str| -> u64 { values[name].value.trim().parse().unwrap_or(0) };
    let size =
        |name: &str| -> Result<usize, ServerError> { usize::try_from(whole(name)).map_err(|_| bad(name, "too large")) };
    let durability = match values["durability"].value.trim() {
        "sync" => DurabilityMode::Sync,
        "periodic" => DurabilityMode::Periodic,
        "none" => DurabilityMode::None,
        _ => return Err(bad("durability", "not one of sync, periodic, none")),
    };
    let log_level = match values["log.level"].value.trim() {
        "error" => LogLevel::Error,
        "warn" => LogLevel::Warn,
        "info" => LogLevel::Info,
        "debug" => LogLevel::Debug,
        _ => return Err(bad("log.level", "not one of error, warn, info, debug")),
    };
    let log_format = match values["log.format"].value.trim() {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        "logfmt" => LogFormat::Logfmt,
        _ => return Err(bad("log.format", "not one of text, json, logfmt")),
    };
    if values["database"].value.trim().is_empty() {
        return Err(bad("database", "empty"));
    }
    let memory_bytes = match whole("memory_bound") {
        0 => return Err(bad("memory_bound", "the bound must be at least 1 MiB")),
        mib => mib.checked_mul(1 << 20).ok_or_else(|| bad("memory_bound", "too large"))?,
    };

    let limits = ServerLimits {
        max_frame_bytes: size("limits.max_frame_bytes")?,
        max_in_flight: size("limits.max_in_flight")?,
        max_sessions: size("limits.max_sessions")?,
        max_query_time: Duration::from_millis(whole("limits.max_query_ms")),
        max_result_bytes: size("limits.max_result_bytes")?,
        max_subscriptions: size("limits.max_subscriptions")?,
        subscriber_queue: size("limits.subscriber_queue")?,
        history_commits: size("limits.history")?,
        history_changes: ServerLimits::default().history_changes,
        history_bytes: size("limits.history_bytes")?,
        session_queue_bytes: size("limits.session_queue_bytes")?,
        max_queued_bytes: size("limits.max_queued_bytes")?,
        idle_timeout: Duration::from_millis(whole("limits.idle_timeout_ms")),
        request_timeout: Duration::from_millis(whole("limits.request_timeout_ms")),
        max_connections_per_address: size("limits.max_connections_per_address")?,
        shutdown_grace: Duration::from_millis(whole("limits.shutdown_grace_ms")),
    };
    // The address: the host from the highest layer whose `listen` names one; the port from the
    // highest layer that gives one, by `port` or as the port of its `listen` (both in one layer
    // must agree).
    let mut host: Option<Given> = None;
    let mut port: Option<(u16, Given)> = None;
    for layer in layers {
        let listen = layer.get("server.listen");
        let split = match listen {
            Some(g) => Some(split_listen(&g.value).map_err(|why| {
                config_error(format!("{}: {why}", g.named(key_named("server.listen").expect("a key"))))
            })?),
            None => None,
        };
        if host.is_none() {
            if let (Some(g), Some((Some(h), _))) = (listen, &split) {
                host = Some(Given { value: h.clone(), source: g.source.clone() });
            }
        }
        if port.is_none() {
            let from_listen = match (listen, &split) {
                (Some(g), Some((_, Some(p)))) => Some((
                    parse_port(p).map_err(|why| {
                        config_error(format!("{}: {why}", g.named(key_named("server.listen").expect("a key"))))
                    })?,
                    g,
                )),
                _ => None,
            };
            let from_port = match layer.get("server.port") {
                Some(g) => Some((
                    parse_port(&g.value).map_err(|why| {
                        config_error(format!("{}: {why}", g.named(key_named("server.port").expect("a key"))))
                    })?,
                    g,
                )),
                None => None,
            };
            port = match (from_listen, from_port) {
                (Some((a, la)), Some((b, pb))) if a != b => {
                    return Err(config_error(format!(
                        "{} and {} disagree about the port",
                        la.named(key_named("server.listen").expect("a key")),
                        pb.named(key_named("server.port").expect("a key"))
                    )))
                }
                (_, Some((b, pb))) => Some((b, pb.clone())),
                (Some((a, la)), None) => Some((a, Given { value: a.to_string(), source: la.source.clone() })),
                (None, None) => None,
            };
        }
    }
    let host = host.unwrap_or(Given { value: DEFAULT_HOST.into(), source: Source::Default });
    let (port, port_given) =
        port.unwrap_or((DEFAULT_PORT, Given { value: DEFAULT_PORT.to_string(), source: Source::Default }));
    let ip = resolve_host(&host.value)
        .map_err(|why| config_error(format!("{}: {why}", host.named(key_named("server.listen").expect("a key")))))?;
    values.insert("server.listen", host);
    values.insert("server.port", port_given);

    Ok(Settings { values, listen: SocketAddr::new(ip, port), durability, memory_bytes, limits, log_level, log_format })
}

impl Settings {
    /// A setting's value (as text) and source.
    pub fn given(&self, name: &str) -> Option<&Given> {
        self.values.get(name)
    }

    /// The database directory (`database`).
    pub fn database(&self) -> PathBuf {
        PathBuf::from(&self.values["database"].value)
    }

    /// The tokens file, if one is set.
    pub fn tokens_file(&self) -> Option<PathBuf> {
        let v = &self.values["server.tokens_file"].value;
        (!v.is_empty()).then(|| PathBuf::from(v))
    }

    /// The settings as TOML (a valid `espalier.toml`), each value followed by its source in a
    /// comment.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        let mut table = "";
        for key in KEYS {
            let (t, name) = key.name.split_once('.').unwrap_or(("", key.name));
            if t != table {
                out.push_str(&format!("\n[{t}]\n"));
                table = t;
            }
            let g = &self.values[key.name];
            let value = match key.kind {
                Kind::Whole => g.value.trim().to_string(),
                Kind::Text => toml_string(&g.value),
            };
            let line = format!("{name} = {value}");
            out.push_str(&format!("{line:<40} # {}\n", g.source));
        }
        out
    }

    /// The settings as JSON: `{ "key": { "value": …, "source": "…" } }`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for key in KEYS {
            let g = &self.values[key.name];
            let value = match key.kind {
                Kind::Whole => serde_json::Value::from(g.value.trim().parse::<u64>().unwrap_or(0)),
                Kind::Text => serde_json::Value::from(g.value.clone()),
            };
            map.insert(key.name.into(), serde_json::json!({ "value": value, "source": g.source.to_string() }));
        }
        serde_json::Value::Object(map)
    }
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
