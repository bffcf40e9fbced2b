//! PostgreSQL beside the Espalier server: its own load generator, `pgbench`, at the same client
//! counts, against a private server ([`crate::peers::pg_server`]) on 127.0.0.1.
//!
//! Two scripts: the built-in select-only (`-S`: one `SELECT abalance FROM pgbench_accounts
//! WHERE aid = :aid` per transaction) and a custom single-row update (`UPDATE pgbench_accounts
//! SET abalance = abalance + :delta WHERE aid = :aid`), each with `-c K -j min(K, 2)`, over TCP
//! to 127.0.0.1 (as Espalier's clients), query mode `-M prepared` by default (PostgreSQL at its
//! fastest). Latency quartiles come from pgbench's per-transaction log (`-l`); throughput is the
//! `tps` it prints (without connection time).
//!
//! Durability is paired with Espalier's (`peers::DurabilityPairing`): with `--durability sync`
//! the server runs with `fsync = on` and `synchronous_commit = on`, so every UPDATE's commit
//! waits for its WAL flush, as every Espalier write waits for its fsync.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Serialize;

use super::{Config, RemoteError, Stop};
use crate::peers::pg_server::{self, PgServer, ServerOptions, DATABASE};
use crate::stats::Summary;

/// The role pgbench connects as (`pg_server` creates it with `initdb -U`).
const USER: &str = "espalier";
/// Accounts per unit of pgbench's scale.
const ACCOUNTS_PER_SCALE: u64 = 100_000;
/// Lines of output kept in error messages.
const TAIL_LINES: usize = 15;

/// The transaction pgbench runs, against which Espalier's reads and writes are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Script {
    /// pgbench's built-in select-only transaction.
    SelectOnly,
    /// One `UPDATE pgbench_accounts … WHERE aid = :aid` per transaction.
    Update,
}

impl Script {
    /// The script's name in reports: `select-only` or `update`.
    pub fn name(self) -> &'static str {
        match self {
            Script::SelectOnly => "select-only",
            Script::Update => "update",
        }
    }
}

/// The custom update script for `rows` accounts.
fn update_script(rows: u64) -> String {
    format!(
        "\\set aid random(1, {rows})\n\\set delta random(-5000, 5000)\n\
         UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n"
    )
}

/// The `postgresql.conf` lines of the run.
pub fn settings(config: &Config) -> Vec<String> {
    let max_k = config.clients.iter().copied().max().unwrap_or(1);
    let mut s: Vec<String> = config.durability.postgres().iter().map(|s| s.to_string()).collect();
    s.push(format!("shared_buffers = '{}'", config.pg_shared_buffers));
    // pg_server sets 20; pgbench needs one per client plus the reserved ones.
    s.push(format!("max_connections = {}", (max_k + 10).max(100)));
    s
}

/// pgbench's figures for one client count.
#[derive(Debug, Clone, Serialize)]
pub struct PgRun {
    /// Transactions completed.
    pub transactions: u64,
    /// Transactions that failed.
    pub failed: u64,
    /// Transactions per second.
    pub tps: f64,
    /// Mean latency per transaction, in ms, if pgbench reported it.
    pub latency_average_ms: Option<f64>,
}

/// A private PostgreSQL server with pgbench's tables.
pub struct Pgbench {
    server: PgServer,
    pgbench: PathBuf,
    /// Scripts and transaction logs.
    dir: tempfile::TempDir,
}

/// pgbench next to initdb, else on PATH.
fn find_pgbench() -> Result<PathBuf, RemoteError> {
    if let Ok(bin) = pg_server::find_bin() {
        let p = bin.join("pgbench");
        if p.is_file() {
            return Ok(p);
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("pgbench");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(RemoteError::Pgbench(format!(
        "pgbench is not installed (not next to initdb, not on PATH): {}; or run with --no-pg",
        pg_server::INSTALL_HINT
    )))
}

fn tail(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let lines: Vec<&str> = text.trim().lines().rev().take(TAIL_LINES).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

fn checked(what: &str, out: std::io::Result<Output>) -> Result<Output, RemoteError> {
    let out = out.map_err(|e| RemoteError::Pgbench(format!("cannot run {what}: {e}")))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(RemoteError::Pgbench(format!(
            "{what} failed ({}):\n{}\n{}",
            out.status,
            tail(&out.stderr),
            tail(&out.stdout)
        )))
    }
}

impl Pgbench {
    /// Starts the server with the run's settings and fills pgbench's tables (`pgbench -i`).
    pub fn start(config: &Config, dir: &Path) -> Result<Pgbench, RemoteError> {
        let pgbench = find_pgbench()?;
        let server = PgServer::start(&ServerOptions { settings: settings(config), dir: config.dir.clone() })?;
        let work = tempfile::Builder::new()
            .prefix("pgbench-")
            .tempdir_in(dir)
            .map_err(|e| RemoteError::io(format!("making a directory for pgbench in {}", dir.display()), e))?;
        let rows = u64::from(config.pg_scale) * ACCOUNTS_PER_SCALE;
        let pg = Pgbench { server, pgbench, dir: work };
        let mut args = pg.connection_args();
        args.extend(["-i".into(), "-q".into(), "-s".into(), config.pg_scale.to_string(), DATABASE.into()]);
        checked("pgbench -i", pg.command(&args).output())?;
        let script = pg.script_path();
        std::fs::write(&script, update_script(rows))
            .map_err(|e| RemoteError::io(format!("writing {}", script.display()), e))?;
        Ok(pg)
    }

    fn command(&self, args: &[String]) -> Command {
        let mut c = Command::new(&self.pgbench);
        c.args(args).current_dir(self.dir.path()).env("LC_ALL", "C").env_remove("PGPASSWORD").env_remove("PGOPTIONS");
        c
    }

    fn connection_args(&self) -> Vec<String> {
        ["-h", "127.0.0.1", "-p", &self.server.port().to_string(), "-U", USER].iter().map(|s| s.to_string()).collect()
    }

    fn script_path(&self) -> PathBuf {
        self.dir.path().join("update.sql")
    }

    /// The PostgreSQL server's version.
    pub fn server_version(&self) -> String {
        self.server.version()
    }

    /// The output of `pgbench --version`.
    pub fn pgbench_version(&self) -> String {
        match Command::new(&self.pgbench).arg("--version").output() {
            Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_string(),
            Err(_) => "pgbench (version unknown)".into(),
        }
    }

    /// One untimed second of each script, so that the first point does not pay for cold
    /// caches.
    pub fn warm_up(&self, config: &Config) -> Result<(), RemoteError> {
        let k = config.clients.iter().copied().max().unwrap_or(1).min(8);
        for script in [Script::SelectOnly, Script::Update] {
            let args = self.run_args(script, k, config, ["-T".into(), "1".into()], false);
            checked("pgbench (warm-up)", self.command(&args).output())?;
        }
        Ok(())
    }

    /// `stop` is `-T seconds` or `-t transactions per client`; `log` writes the
    /// per-transaction log.
    fn run_args(&self, script: Script, k: usize, config: &Config, stop: [String; 2], log: bool) -> Vec<String> {
        let mut args = self.connection_args();
        args.extend(["-n".into(), "-M".into(), config.pg_query_mode.clone()]);
        args.extend(["-c".into(), k.to_string(), "-j".into(), k.min(2).to_string()]);
        args.extend(stop);
        if log {
            args.extend(["-l".into(), "--log-prefix".into(), self.log_prefix(script, k).display().to_string()]);
        }
        match script {
            Script::SelectOnly => args.push("-S".into()),
            Script::Update => args.extend(["-f".into(), self.script_path().display().to_string()]),
        }
        args.push(DATABASE.into());
        args
    }

    fn log_prefix(&self, script: Script, k: usize) -> PathBuf {
        self.dir.path().join(format!("log-{}-{k}", script.name()))
    }

    /// One point: pgbench at `k` clients; its summary and the latencies from its log.
    pub fn run(&self, script: Script, k: usize, config: &Config) -> Result<super::PgPoint, RemoteError> {
        let stop = match config.stop {
            // pgbench takes whole seconds.
            Stop::Seconds(s) => ["-T".to_string(), (s.ceil() as u64).max(1).to_string()],
            Stop::Requests(n) => ["-t".to_string(), n.div_ceil(k as u64).max(1).to_string()],
        };
        let args = self.run_args(script, k, config, stop, true);
        let before = (children_cpu(), server_cpu(self.server.data_dir()));
        let out = checked(&format!("pgbench {}", args.join(" ")), self.command(&args).output())?;
        let after = (children_cpu(), server_cpu(self.server.data_dir()));
        let used = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some((b - a).max(0.0)),
            _ => None,
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let summary = parse_summary(&stdout)?;
        let prefix = self.log_prefix(script, k);
        let (mut samples, log_failed) = read_logs(&prefix, config.max_samples)?;
        let latency = if samples.is_empty() { None } else { Some(Summary::of(&mut samples)) };
        Ok(super::PgPoint {
            script,
            clients: k,
            threads: k.min(2),
            query_mode: config.pg_query_mode.clone(),
            transactions: summary.transactions,
            tps: summary.tps,
            latency_average_ms: summary.latency_average_ms,
            latency,
            failed: summary.failed.max(log_failed),
            pgbench_cpu_s: used(before.0, after.0),
            server_cpu_s: used(before.1, after.1),
        })
    }

    /// Stops the server and deletes its data.
    pub fn stop(self) -> Result<(), RemoteError> {
        self.server.stop().map_err(RemoteError::from)
    }
}

/// CPU seconds of this process's finished children (pgbench runs as one).
fn children_cpu() -> Option<f64> {
    // SAFETY: getrusage writes the struct it is given; a zeroed rusage is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return None;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(s(u.ru_utime) + s(u.ru_stime))
}

/// CPU seconds the PostgreSQL server has used: the postmaster's own and its reaped children's
/// (backends that have exited), plus its live children's (background workers, backends still
/// running). From `/proc` (Linux); None elsewhere.
fn server_cpu(data_dir: &Path) -> Option<f64> {
    // SAFETY: sysconf has no preconditions; a negative result means unknown.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    let pid: u32 =
        std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?.lines().next()?.trim().parse().ok()?;
    // Fields after the command name: state, ppid, … utime (14), stime, cutime, cstime (17).
    let fields = |stat: &str| -> Option<Vec<u64>> {
        let rest = stat.get(stat.rfind(')')? + 1..)?;
        Some(rest.split_whitespace().map(|f| f.parse::<i64>().map_or(0, |v| v.max(0) as u64)).collect())
    };
    let own = fields(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    let mut total = own.get(11)? + own.get(12)? + own.get(13)? + own.get(14)?;
    for entry in std::fs::read_dir("/proc").ok()?.flatten().take(1 << 20) {
        let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else { continue };
        let Some(f) = fields(&stat) else { continue };
        if f.get(1) == Some(&u64::from(pid)) {
            total += f.get(11).unwrap_or(&0) + f.get(12).unwrap_or(&0);
        }
    }
    Some(total as f64 / ticks as f64)
}

/// The figures of pgbench's report on standard output (PostgreSQL 15 wording; older versions
/// have no failed-transactions line).
pub fn parse_summary(out: &str) -> Result<PgRun, RemoteError> {
    let value =
        |prefix: &str| -> Option<&str> { out.lines().find_map(|l| l.trim().strip_prefix(prefix)).map(|v| v.trim()) };
    let first_number = |s: &str| -> Option<f64> {
        let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    let transactions = value("number of transactions actually processed:").and_then(first_number).ok_or_else(|| {
        RemoteError::Pgbench(format!("no transaction count in its output:\n{}", tail(out.as_bytes())))
    })?;
    let tps = value("tps =")
        .and_then(first_number)
        .ok_or_else(|| RemoteError::Pgbench(format!("no tps in its output:\n{}", tail(out.as_bytes()))))?;
    let failed = value("number of failed transactions:").and_then(first_number).unwrap_or(0.0);
    let latency_average_ms = value("latency average =").and_then(first_number);
    Ok(PgRun { transactions: transactions as u64, failed: failed as u64, tps, latency_average_ms })
}

/// Latencies (µs) from pgbench's per-transaction logs `<prefix>.<pid>[.<thread>]`: each line is
/// `client transaction latency_us script epoch_s epoch_us …`; a failed transaction has
/// `failed` (or `skipped`) instead of its latency. Returns the samples (at most `max`) and the
/// failed count.
fn read_logs(prefix: &Path, max: usize) -> Result<(Vec<std::time::Duration>, u64), RemoteError> {
    let dir = prefix.parent().ok_or_else(|| RemoteError::Pgbench("the log prefix has no directory".into()))?;
    let name = prefix.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string() + ".";
    let mut samples = Vec::new();
    let mut failed = 0u64;
    let entries = std::fs::read_dir(dir).map_err(|e| RemoteError::io(format!("listing {}", dir.display()), e))?;
    let mut found = false;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(n) = file_name.to_str() else { continue };
        if !n.starts_with(&name) {
            continue;
        }
        found = true;
        let text = std::fs::read_to_string(entry.path())
            .map_err(|e| RemoteError::io(format!("reading {}", entry.path().display()), e))?;
        let (s, f) = parse_log(&text, max.saturating_sub(samples.len()))
            .map_err(|e| RemoteError::Pgbench(format!("{}: {e}", entry.path().display())))?;
        samples.extend(s);
        failed += f;
        // The logs are only for this run's latencies; they can be large.
        let _ = std::fs::remove_file(entry.path());
    }
    if !found {
        return Err(RemoteError::Pgbench(format!("it wrote no transaction log {}*", prefix.display())));
    }
    Ok((samples, failed))
}

fn parse_log(text: &str, max: usize) -> Result<(Vec<std::time::Duration>, u64), String> {
    let mut samples = Vec::new();
    let mut failed = 0;
    for (i, line) in text.lines().enumerate() {
        let mut fields = line.split_whitespace();
        let latency = fields.nth(2).ok_or_else(|| format!("line {} has fewer than three fields: {line:?}", i + 1))?;
        match latency.parse::<u64>() {
            Ok(us) => {
                if samples.len() < max {
                    samples.push(std::time::Duration::from_micros(us));
                }
            }
            Err(_) if latency == "failed" || latency == "skipped" => failed += 1,
            Err(_) => return Err(format!("line {}: latency {latency:?} is not a number", i + 1)),
        }
    }
    Ok((samples, failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgbench_output_parses() {
        let out = "pgbench (15.18 (Debian 15.18-0+deb12u1))\n\
            transaction type: <builtin: select only>\n\
            scaling factor: 1\n\
            query mode: prepared\n\
            number of clients: 4\n\
            number of threads: 2\n\
            maximum number of tries: 1\n\
            duration: 1 s\n\
            number of transactions actually processed: 23456\n\
            number of failed transactions: 3 (0.013%)\n\
            latency average = 0.170 ms\n\
            initial connection time = 4.512 ms\n\
            tps = 23431.861234 (without initial connection time)\n";
        let r = parse_summary(out).unwrap();
        assert_eq!((r.transactions, r.failed), (23456, 3));
        assert!((r.tps - 23431.861234).abs() < 1e-6);
        assert_eq!(r.latency_average_ms, Some(0.170));
        // -t mode prints processed/expected.
        let t = parse_summary("number of transactions actually processed: 100/100\ntps = 5.5 (x)\n").unwrap();
        assert_eq!(t.transactions, 100);
        assert!(parse_summary("nothing here").unwrap_err().to_string().contains("no transaction count"));
    }

    #[test]
    fn pgbench_logs_parse() {
        let log = "0 1 153 0 1700000000 123456\n1 1 99 0 1700000000 123460\n0 2 failed 0 1700000000 1\n";
        let (s, f) = parse_log(log, 10).unwrap();
        assert_eq!(s, vec![std::time::Duration::from_micros(153), std::time::Duration::from_micros(99)]);
        assert_eq!(f, 1);
        assert_eq!(parse_log(log, 1).unwrap().0.len(), 1);
        assert!(parse_log("0 1\n", 10).is_err());
        assert!(parse_log("0 1 x 0 0 0\n", 10).is_err());
    }

    #[test]
    fn the_update_script_names_every_account() {
        let s = update_script(200_000);
        assert!(s.contains("random(1, 200000)") && s.contains("UPDATE pgbench_accounts"), "{s}");
        let mut c = Config::quick();
        c.clients = vec![1, 200];
        let set = settings(&c);
        assert!(set.contains(&"max_connections = 210".to_string()), "{set:?}");
        assert!(set.iter().any(|l| l == "synchronous_commit = on"), "{set:?}");
    }
}
