//! Server configuration: where to listen, the limits, and the tokens; [`settings`]: where
//! `espalier serve` takes them from (flags, `ESPALIER_…` variables, `espalier.toml`,
//! defaults); [`log`]: its diagnostics, at the configured level and format.

pub mod log;
pub mod settings;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use espalier_protocol::{Limits, Role};
use serde::Deserialize;

use crate::ServerError;

/// Where `espalier serve` listens unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7420";
/// Shortest secret accepted: short secrets can be guessed over the network.
pub const MIN_SECRET_LEN: usize = 16;
/// Most tokens a configuration may hold (each request compares against all of them).
pub const MAX_TOKENS: usize = 1024;

/// Every bound the server enforces. `Default` gives the documented defaults
/// (`docs/server.md`, `docs/protocol.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Largest WebSocket message or HTTP body accepted, and largest decompressed message.
    pub max_frame_bytes: usize,
    /// Requests of one session in progress at once.
    pub max_in_flight: usize,
    /// Open WebSocket sessions plus HTTP requests in progress.
    pub max_sessions: usize,
    /// Longest a read-only request may run before the client gets `timeout`.
    pub max_query_time: Duration,
    /// Largest reply, encoded and before compression.
    pub max_result_bytes: usize,
    /// Subscriptions one session may hold.
    pub max_subscriptions: usize,
    /// Commits queued per subscription before it is told to reload.
    pub subscriber_queue: usize,
    /// Commits kept in memory for resuming subscriptions.
    pub history_commits: usize,
    /// Bound on the changes those commits hold together (memory).
    pub history_changes: usize,
    /// Bound on the bytes those commits hold together (old and new values, paths).
    pub history_bytes: usize,
    /// Encoded replies and pushes one session may hold unsent; past it the session is not
    /// read and its reads wait to start (backpressure).
    pub session_queue_bytes: usize,
    /// Encoded replies and pushes all sessions may hold unsent; past it the session holding
    /// the most is closed (`slow_reader`).
    pub max_queued_bytes: usize,
    /// A session that sends nothing for this long (the server pings it halfway), or does not
    /// take what the server writes for this long, is closed.
    pub idle_timeout: Duration,
    /// A connection's first request (the upgrade or HTTP request) must arrive within this.
    pub request_timeout: Duration,
    /// Open TCP connections from one IP address.
    pub max_connections_per_address: usize,
    /// How long shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_frame_bytes: 16 << 20,
            max_in_flight: 64,
            max_sessions: 1024,
            max_query_time: Duration::from_secs(30),
            max_result_bytes: 64 << 20,
            max_subscriptions: 256,
            subscriber_queue: 1024,
            history_commits: 10_000,
            history_changes: 1_000_000,
            history_bytes: 64 << 20,
            session_queue_bytes: 16 << 20,
            max_queued_bytes: 256 << 20,
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
            max_connections_per_address: 256,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Upper bound on the history (the change feed's own queue is 1 << 20).
pub const MAX_HISTORY: usize = 1 << 20;

impl ServerLimits {
    /// The limits as `welcome` announces them.
    pub fn announced(&self) -> Limits {
        Limits {
            max_frame_bytes: self.max_frame_bytes as u64,
            max_in_flight: self.max_in_flight as u64,
            max_query_ms: self.max_query_time.as_millis().min(u64::MAX as u128) as u64,
            max_result_bytes: self.max_result_bytes as u64,
            max_subscriptions: self.max_subscriptions as u64,
        }
    }

    /// Checks that the limits can work: counts at least 1, durations positive, the total queue
    /// budget no smaller than one reply or one session's queue, and counts within their bounds.
    pub fn validate(&self) -> Result<(), ServerError> {
        let positive = [
            ("max frame bytes", self.max_frame_bytes),
            ("max in flight", self.max_in_flight),
            ("max sessions", self.max_sessions),
            ("max result bytes", self.max_result_bytes),
            ("subscriber queue", self.subscriber_queue),
            ("history", self.history_commits),
            ("history changes", self.history_changes),
            ("history bytes", self.history_bytes),
            ("session queue bytes", self.session_queue_bytes),
            ("max queued bytes", self.max_queued_bytes),
            ("max connections per address", self.max_connections_per_address),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(ServerError::Config(format!("{name} must be at least 1")));
            }
        }
        if self.max_query_time.is_zero() || self.idle_timeout.is_zero() || self.request_timeout.is_zero() {
            return Err(ServerError::Config(
                "max query time, idle timeout and request timeout must be positive".into(),
            ));
        }
        // A reply the total budget cannot hold could never be sent.
        if self.max_queued_bytes < self.max_result_bytes.max(self.session_queue_bytes) {
            return Err(ServerError::Config(format!(
                "max queued bytes ({}) must be at least max result bytes ({}) and session queue bytes ({})",
                self.max_queued_bytes, self.max_result_bytes, self.session_queue_bytes
            )));
        }
        // Semaphore permits are u32-sized in places; keep every count well inside.
        if self.max_in_flight > 1 << 16 || self.max_sessions > 1 << 20 || self.max_subscriptions > 1 << 16 {
            return Err(ServerError::Config(
                "max in flight (65536), max sessions (1048576) and max subscriptions (65536) are bounded".into(),
            ));
        }
        if self.subscriber_queue > 1 << 20 || self.history_commits > MAX_HISTORY {
            return Err(ServerError::Config("subscriber queue and history are at most 1048576".into()));
        }
        Ok(())
    }
}

/// A secret that grants a role.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct Token {
    /// For logs and messages; never the secret.
    pub name: String,
    /// What the token may do.
    pub role: Role,
    /// What a client presents to be granted the role (`Authorization: Bearer <secret>` or
    /// `?token=<secret>`).
    pub secret: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token").field("name", &self.name).field("role", &self.role).finish_non_exhaustive()
    }
}

impl Token {
    /// Parses `NAME:ROLE:SECRET` (the `--token` flag).
    pub fn parse(spec: &str) -> Result<Token, ServerError> {
        let mut parts = spec.splitn(3, ':');
        let (Some(name), Some(role), Some(secret)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(ServerError::Config(format!(
                "--token {:?}: expected NAME:ROLE:SECRET, e.g. --token dashboard:read:$(openssl rand -hex 16)",
                redact(spec)
            )));
        };
        let role = Role::parse(role).ok_or_else(|| {
            ServerError::Config(format!("--token {name}: role {role:?} is not one of read, write, admin"))
        })?;
        let token = Token { name: name.to_string(), role, secret: secret.to_string() };
        token.check()?;
        Ok(token)
    }

    fn check(&self) -> Result<(), ServerError> {
        if self.name.is_empty() {
            return Err(ServerError::Config("a token has an empty name".into()));
        }
        if self.secret.len() < MIN_SECRET_LEN {
            return Err(ServerError::Config(format!(
                "token {}: the secret is {} characters; use at least {MIN_SECRET_LEN} (e.g. openssl rand -hex 16)",
                self.name,
                self.secret.len()
            )));
        }
        if self.secret.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ServerError::Config(format!("token {}: the secret contains whitespace", self.name)));
        }
        Ok(())
    }
}

/// `NAME:ROLE:…` with the secret hidden, for messages.
fn redact(spec: &str) -> String {
    match spec.rsplit_once(':') {
        Some((head, _)) => format!("{head}:…"),
        None => "…".into(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    #[serde(default)]
    token: Vec<Token>,
}

/// Reads a TOML token file:
///
/// ```toml
/// [[token]]
/// name = "dashboard"
/// role = "read"
/// secret = "3f1c…"
/// ```
pub fn read_token_file(path: &Path) -> Result<Vec<Token>, ServerError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ServerError::Config(format!("reading the token file {}: {e}", path.display())))?;
    let file: TokenFile =
        toml::from_str(&text).map_err(|e| ServerError::Config(format!("the token file {}: {e}", path.display())))?;
    for t in &file.token {
        t.check().map_err(|e| ServerError::Config(format!("{}: {e}", path.display())))?;
    }
    Ok(file.token)
}

/// The whole configuration of one server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The address and port to listen on.
    pub listen: SocketAddr,
    /// The bounds the server enforces.
    pub limits: ServerLimits,
    /// Empty: no authentication, and then the server only listens on loopback.
    pub tokens: Vec<Token>,
}

impl ServerConfig {
    /// Loopback on `port` (0: any free port), default limits, no tokens.
    pub fn local(port: u16) -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            limits: ServerLimits::default(),
            tokens: Vec::new(),
        }
    }

    /// Checks the limits and tokens, and refuses to listen beyond loopback without tokens.
    pub fn validate(&self) -> Result<(), ServerError> {
        self.limits.validate()?;
        if self.tokens.len() > MAX_TOKENS {
            return Err(ServerError::Config(format!("at most {MAX_TOKENS} tokens")));
        }
        let mut names = std::collections::HashSet::new();
        let mut secrets = std::collections::HashSet::new();
        for t in &self.tokens {
            t.check()?;
            if !names.insert(t.name.as_str()) {
                return Err(ServerError::Config(format!("two tokens are named {:?}", t.name)));
            }
            if !secrets.insert(t.secret.as_str()) {
                return Err(ServerError::Config(format!("token {:?} repeats another token's secret", t.name)));
            }
        }
        if self.tokens.is_empty() && !self.listen.ip().is_loopback() {
            return Err(ServerError::Config(format!(
                "refusing to listen on {} without tokens: anyone who can reach it could read and change the \
                 database. Add --token NAME:ROLE:SECRET (or --tokens-file FILE), or listen on 127.0.0.1",
                self.listen
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_flags_parse_and_check() {
        let t = Token::parse("dash:read:0123456789abcdef").unwrap();
        assert_eq!((t.name.as_str(), t.role, t.secret.as_str()), ("dash", Role::Read, "0123456789abcdef"));
        // The secret may contain colons.
        assert_eq!(Token::parse("a:admin:0123456789:abcdef").unwrap().secret, "0123456789:abcdef");
        let short = Token::parse("a:read:short").unwrap_err().to_string();
        assert!(short.contains("at least 16"), "{short}");
        let role = Token::parse("a:root:0123456789abcdef").unwrap_err().to_string();
        assert!(role.contains("not one of read, write, admin"), "{role}");
        let shape = Token::parse("secretonly0123456789").unwrap_err().to_string();
        assert!(shape.contains("NAME:ROLE:SECRET") && !shape.contains("secretonly"), "{shape}");
        // Debug never shows the secret.
        assert!(!format!("{t:?}").contains("0123456789abcdef"));
    }

    #[test]
    fn token_files_parse() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        std::fs::write(
            &path,
            "[[token]]\nname = \"a\"\nrole = \"write\"\nsecret = \"0123456789abcdef\"\n\n[[token]]\nname = \"b\"\nrole = \"admin\"\nsecret = \"fedcba9876543210\"\n",
        )
        .unwrap();
        let tokens = read_token_file(&path).unwrap();
        assert_eq!(tokens.len(), 2);
        assert_eq!(tokens[1].role, Role::Admin);
        std::fs::write(&path, "[[token]]\nname = \"a\"\nrole = \"boss\"\nsecret = \"0123456789abcdef\"\n").unwrap();
        assert!(read_token_file(&path).unwrap_err().to_string().contains("tokens.toml"));
        std::fs::write(&path, "[[tokens]]\n").unwrap();
        assert!(read_token_file(&path).is_err(), "unknown tables are refused");
    }

    #[test]
    fn non_loopback_needs_tokens() {
        let mut c = ServerConfig::local(0);
        c.listen = "0.0.0.0:7420".parse().unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("without tokens"));
        c.tokens.push(Token::parse("a:read:0123456789abcdef").unwrap());
        c.validate().unwrap();
        c.tokens.push(Token::parse("b:read:0123456789abcdef").unwrap());
        assert!(c.validate().unwrap_err().to_string().contains("repeats"));
        let mut l = ServerConfig::local(0);
        l.limits.max_in_flight = 0;
        assert!(l.validate().is_err());
    }
}
