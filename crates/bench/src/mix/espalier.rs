//! The mix on Espalier: a server on a free 127.0.0.1 port (`remote::data::ServedDatabase`),
//! a WebSocket session per client (the blocking `espalier-client`, MessagePack).
//!
//! - **Without transactions** each operation is its own request, sent after the reply to the
//!   one before: reads and scans run on the last committed snapshot without waiting; an
//!   update or insert commits alone. A read-modify-write is a `get`, then an `update` that
//!   adds one to the count on the server (`'Count' -> number + 1`), so no increment is lost
//!   even though the two are not atomic together.
//! - **With transactions** the batch is one `transaction ( … )` request: the engine runs its
//!   members in order inside the one write transaction (reads included), so the batch is
//!   serializable — stronger than snapshot isolation — and is never aborted by a conflict
//!   (there is no concurrent writer to conflict with); it commits whole or not at all. A
//!   read-modify-write is the `get` and the `update … + 1` as two members: the write depends
//!   on the value the member before read, computed where it is stored. Retries are 0.
//!
//! A scan is `collection select . 'Users' from $k … limit N`, the key-range read that stops
//! after its page.

use std::fmt::Write as _;
use std::path::Path;

use espalier_client::blocking::Client;
use espalier_client::ClientOptions;
use espalier_instruction::{Engine, ParamValue, Reply};
use espalier_protocol::Params;
use espalier_transaction::DatabaseOptions;

use super::ops::{self, Op, FIELDS};
use super::{Config, Outcome, Session, State, System, SystemKind};
use crate::remote::data::{DatasetKind, ServedDatabase};
use crate::remote::RemoteError;

/// The table: YCSB's `usertable` as a dictionary of records.
pub const SCHEMA: &str = "root (
    'Users' -> dictionary (
        'F0' -> text 'F1' -> text 'F2' -> text 'F3' -> text 'F4' -> text
        'F5' -> text 'F6' -> text 'F7' -> text 'F8' -> text 'F9' -> text
        'Count' -> number
    )
)";

/// Records per commit while loading.
const LOAD_BATCH: u64 = 1000;

/// Espalier with its server running.
pub struct Served {
    server: ServedDatabase,
    last_key: String,
}

/// A scan: every field of at most `limit` records from the key in parameter `param`, the
/// key-range read that stops after its page (the mix's, and the in-process one of
/// `super::scans`).
pub(super) fn scan_text(param: &str, limit: u64) -> String {
    let mut text = format!("collection select . 'Users' from ${param}");
    for f in 0..FIELDS {
        let _ = write!(text, " 'F{f}' -> text : 'F{f}'");
    }
    let _ = write!(text, " 'Count' -> number : 'Count' limit {limit}");
    text
}

/// Loads `size` records into the mix's table, `LOAD_BATCH` to a commit.
pub(super) fn load(engine: &Engine, size: u64) -> Result<(), RemoteError> {
    let mut i = 0;
    while i < size {
        let end = (i + LOAD_BATCH).min(size);
        let mut text = String::from("update (");
        for r in i..end {
            let _ = write!(text, " 'Users' -> dictionary \"{}\" (", ops::key(r));
            for f in 0..FIELDS {
                let _ = write!(text, " 'F{f}' -> text \"{}\"", ops::loaded_value(r, f));
            }
            text.push_str(" 'Count' -> number 0 )");
        }
        text.push(')');
        engine
            .execute_text(&text, &Default::default())
            .map_err(|e| RemoteError::espalier(format!("loading records {i}..{end}"), e))?;
        i = end;
    }
    Ok(())
}

impl Served {
    /// Creates the database in `dir`, loads `config.size` records and starts the server.
    pub fn start(config: &Config, dir: &Path) -> Result<Served, RemoteError> {
        let options = DatabaseOptions { durability: config.durability.espalier(), ..Default::default() };
        let engine =
            Engine::create(dir, SCHEMA, options).map_err(|e| RemoteError::espalier("creating the mix database", e))?;
        load(&engine, config.size)?;
        let remote = crate::remote::Config {
            clients: config.clients.clone(),
            server_threads: config.server_threads,
            ..crate::remote::Config::quick()
        };
        let server = ServedDatabase::serve(DatasetKind::Model, engine, &remote)?;
        Ok(Served { server, last_key: ops::key(config.size.saturating_sub(1)) })
    }

    fn connect(&self) -> Result<Client, RemoteError> {
        Client::connect(&format!("ws://{}", self.server.addr()), ClientOptions::default())
            .map_err(|e| RemoteError::Server(format!("connecting a client: {e}")))
    }
}

impl System for Served {
    fn kind(&self) -> SystemKind {
        SystemKind::Espalier
    }

    fn version(&self) -> String {
        format!("espalier {}", env!("CARGO_PKG_VERSION"))
    }

    fn isolation(&self, transactional: bool) -> &'static str {
        if transactional {
            "one `transaction ( … )` request per batch, run whole in the single write transaction: serializable, \
             never aborted by a conflict"
        } else {
            "one request per operation: reads on the last committed snapshot, each write its own commit"
        }
    }

    fn session(&self) -> Result<Box<dyn Session>, RemoteError> {
        Ok(Box::new(EspalierSession { client: self.connect()?, last_key: self.last_key.clone() }))
    }

    fn state(&self) -> Result<State, RemoteError> {
        let client = self.connect()?;
        let q = client
            .query("collection select . 'Users' 'c' -> number : 'Count'", None)
            .map_err(|e| RemoteError::Server(format!("reading the counts: {e}")))?;
        let mut counts = 0i64;
        for row in &q.rows {
            counts = counts.wrapping_add(row.values.first().and_then(serde_json::Value::as_i64).unwrap_or(0));
        }
        let _ = client.close();
        Ok(State { records: q.total, counts })
    }

    fn stop(self: Box<Self>) -> Result<(), RemoteError> {
        self.server.stop()
    }
}

struct EspalierSession {
    client: Client,
    last_key: String,
}

/// One request's text and parameters for operation `i` of a batch (a read-modify-write is
/// two instructions); what each reply must be is checked by [`check`].
fn instructions(i: usize, op: &Op, params: &mut Params) -> Vec<String> {
    let k = format!("k{i}");
    let v = format!("v{i}");
    let mut set = |name: &str, value: &str| {
        params.insert(name.to_string(), ParamValue::Text(value.to_string()));
    };
    match op {
        Op::Read { key } => {
            set(&k, key);
            vec![format!("get . 'Users' : ${k}")]
        }
        Op::Update { key, field, value } => {
            set(&k, key);
            set(&v, value);
            vec![format!("update . 'Users' : ${k} ( 'F{field}' -> text ${v} 'Count' -> number + 1 )")]
        }
        Op::Insert { key, value } => {
            set(&k, key);
            set(&v, value);
            let mut text = format!("update ( 'Users' -> dictionary ${k} (");
            for f in 0..FIELDS {
                let _ = write!(text, " 'F{f}' -> text ${v}");
            }
            text.push_str(" 'Count' -> number 0 ) )");
            vec![text]
        }
        Op::Scan { key, limit } => {
            set(&k, key);
            vec![scan_text(&k, *limit)]
        }
        Op::ReadModifyWrite { key, field, value } => {
            set(&k, key);
            set(&v, value);
            vec![
                format!("get . 'Users' : ${k}"),
                format!("update . 'Users' : ${k} ( 'F{field}' -> text ${v} 'Count' -> number + 1 )"),
            ]
        }
    }
}

/// Checks the replies of one operation (one or two) and counts what it did.
fn check(op: &Op, replies: &[Reply], last_key: &str, out: &mut Outcome) {
    let done = |r: &Reply| matches!(r, Reply::Done { .. });
    let node = |r: &Reply| matches!(r, Reply::Node(n) if n.get("Count").is_some());
    match (op, replies) {
        (Op::Read { .. }, [r]) if node(r) => {}
        (Op::Update { .. }, [r]) if done(r) => out.increments += 1,
        (Op::Insert { .. }, [r]) if done(r) => out.inserts += 1,
        (Op::Scan { key, limit }, [Reply::Query(q)]) => {
            let keys: Vec<String> = q.rows.iter().filter_map(|r| r.key.first().cloned()).collect();
            if let Some(wrong) = ops::check_scan(key, *limit, &keys, last_key) {
                out.wrong(wrong);
            }
        }
        (Op::ReadModifyWrite { .. }, [r, w]) if node(r) && done(w) => out.increments += 1,
        _ => out.wrong(format!("{op:?}: replies {replies:?}")),
    }
}

impl Session for EspalierSession {
    fn run(&mut self, batch: &[Op], transactional: bool) -> Result<Outcome, String> {
        let mut out = Outcome::default();
        if transactional {
            let mut params = Params::new();
            let texts: Vec<Vec<String>> =
                batch.iter().enumerate().map(|(i, op)| instructions(i, op, &mut params)).collect();
            let all: Vec<&str> = texts.iter().flatten().map(String::as_str).collect();
            let text = format!("transaction ( {} )", all.join(", "));
            let reply = self.client.execute(&text, Some(params)).map_err(|e| e.to_string())?;
            let Reply::Transaction(replies) = reply else {
                return Err(format!("a transaction answered {reply:?}"));
            };
            let mut at = 0;
            for (op, texts) in batch.iter().zip(&texts) {
                let n = texts.len();
                let part = replies.get(at..at + n).unwrap_or(&[]);
                check(op, part, &self.last_key, &mut out);
                at += n;
            }
        } else {
            for (i, op) in batch.iter().enumerate() {
                let mut params = Params::new();
                let mut replies = Vec::with_capacity(2);
                for text in instructions(i, op, &mut params) {
                    replies.push(self.client.execute(&text, Some(params.clone())).map_err(|e| e.to_string())?);
                }
                check(op, &replies, &self.last_key, &mut out);
            }
        }
        Ok(out)
    }
}
