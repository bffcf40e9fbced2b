//! The `espalier` processes the soak drives: `init` and `check` run to completion, `serve` runs
//! as a child on a free 127.0.0.1 port until it is signalled. Every child runs in the work
//! directory (so no stray `./espalier.toml` is read) without the caller's `ESPALIER_…`
//! variables (so none of them changes the database, port or durability under test).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::SoakError;

/// How long a server may take from its start to the `listening on` line (a debug build
/// replaying a large log is slow).
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a SIGTERMed server may take to stop: the server's own grace (10 s) and the flush.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Lines of the server's log quoted when it fails.
const LOG_TAIL_BYTES: u64 = 4096;

/// Where the processes run and what they use.
#[derive(Debug, Clone)]
pub struct Env {
    /// The `espalier` binary under test.
    pub bin: PathBuf,
    /// The work directory: children run here; the database, the schema and the log are in it.
    pub work: PathBuf,
    /// The database directory.
    pub db: PathBuf,
    /// The servers' standard error, appended to across restarts.
    pub log: PathBuf,
    /// Holds the running server's pid, for the wrapper's trap (`scripts/soak`).
    pub pidfile: Option<PathBuf>,
}

impl Env {
    /// A command for the binary with a clean environment, in the work directory.
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.current_dir(&self.work).stdin(Stdio::null());
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("ESPALIER_") {
                cmd.env_remove(key);
            }
        }
        cmd
    }

    /// `espalier init --schema FILE` on the database directory.
    pub fn init(&self, schema: &Path) -> Result<(), SoakError> {
        let out = self
            .command()
            .arg("--db")
            .arg(&self.db)
            .arg("init")
            .arg("--schema")
            .arg(schema)
            .output()
            .map_err(|e| SoakError::Process(format!("running {} init: {e}", self.bin.display())))?;
        if !out.status.success() {
            return Err(SoakError::Process(format!(
                "espalier init failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// `espalier check` on the database directory (no server may hold it). `Ok(None)` when it
    /// found no problem, `Ok(Some(output))` when it did.
    pub fn check(&self) -> Result<Option<String>, SoakError> {
        let out = self
            .command()
            .arg("--db")
            .arg(&self.db)
            .arg("check")
            .output()
            .map_err(|e| SoakError::Process(format!("running {} check: {e}", self.bin.display())))?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        match out.status.code() {
            Some(0) => Ok(None),
            // Status 1 is `check`'s "problems found", but also a database it cannot open:
            // either is a failed check.
            _ => Ok(Some(text)),
        }
    }

    /// The last few KiB of the servers' log, for error messages.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.log) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)));
            let _ = f.read_to_string(&mut text);
        }
        text
    }
}

/// A running `espalier serve`. Dropping it kills the process, so an error or a panic in the
/// soak never leaves a server behind.
pub struct Server {
    child: Child,
    /// `host:port` it listens on.
    pub addr: String,
    pidfile: Option<PathBuf>,
}

impl Server {
    /// Starts `espalier --durability D serve --db DIR --port 0` and waits for its address.
    pub fn start(env: &Env, durability: &str) -> Result<Server, SoakError> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&env.log)
            .map_err(|e| SoakError::Process(format!("opening {}: {e}", env.log.display())))?;
        let child = env
            .command()
            .arg("--durability")
            .arg(durability)
            .arg("serve")
            .arg("--db")
            .arg(&env.db)
            .arg("--listen")
            .arg("127.0.0.1")
            .arg("--port")
            .arg("0")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| SoakError::Process(format!("starting {} serve: {e}", env.bin.display())))?;
        let mut server = Server { child, addr: String::new(), pidfile: env.pidfile.clone() };
        if let Some(p) = &server.pidfile {
            std::fs::write(p, format!("{}\n", server.child.id()))
                .map_err(|e| SoakError::Process(format!("writing {}: {e}", p.display())))?;
        }
        let Some(stdout) = server.child.stdout.take() else {
            return Err(SoakError::Process("the server's standard output is not a pipe".into()));
        };
        // The one line on standard output is the address (docs/server.md); a thread reads it
        // so the wait can time out, then drains the pipe until the server exits.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            for _ in lines {}
        });
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Some(Ok(line))) => line,
            Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = server.child.wait().map(|s| s.to_string()).unwrap_or_default();
                return Err(SoakError::Process(format!(
                    "the server exited before listening ({status}); its log ends:\n{}",
                    env.log_tail()
                )));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(SoakError::Process(format!(
                    "the server did not listen within {START_TIMEOUT:?}; its log ends:\n{}",
                    env.log_tail()
                )));
            }
        };
        server.addr = line
            .strip_prefix("listening on ws://")
            .and_then(|rest| rest.split_once("/ws"))
            .map(|(addr, _)| addr.to_string())
            .ok_or_else(|| SoakError::Process(format!("the server's first line is not its address: {line:?}")))?;
        if !server.addr.starts_with("127.0.0.1:") {
            return Err(SoakError::Process(format!("the server listens on {}, not on 127.0.0.1", server.addr)));
        }
        Ok(server)
    }

    /// The server's exit status if it has exited (by itself: the soak has not signalled it).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's resident set size in KiB (`VmRSS` of `/proc/<pid>/status`; Linux only).
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().ok()
    }

    /// SIGKILL: no shutdown, no flush beyond what the server already did.
    pub fn kill(mut self) -> Result<(), SoakError> {
        self.child.kill().map_err(|e| SoakError::Process(format!("killing the server: {e}")))?;
        self.child.wait().map_err(|e| SoakError::Process(format!("waiting for the server: {e}")))?;
        self.forget_pid();
        Ok(())
    }

    /// SIGTERM, then waits for the graceful shutdown (docs/server.md, "Stop it"); a server
    /// that does not stop in time is killed and reported.
    pub fn terminate(mut self) -> Result<ExitStatus, SoakError> {
        let pid = libc::pid_t::try_from(self.pid())
            .map_err(|_| SoakError::Process(format!("pid {} out of range", self.pid())))?;
        // SAFETY: kill(2) with a pid this process spawned and has not reaped yet.
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            return Err(SoakError::Process(format!("SIGTERM: {}", std::io::Error::last_os_error())));
        }
        let started = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.forget_pid();
                    return Ok(status);
                }
                Ok(None) if started.elapsed() < STOP_TIMEOUT => std::thread::sleep(Duration::from_millis(10)),
                Ok(None) => {
                    return Err(SoakError::Process(format!(
                        "the server did not stop within {STOP_TIMEOUT:?} of SIGTERM"
                    )))
                }
                Err(e) => return Err(SoakError::Process(format!("waiting for the server: {e}"))),
            }
        }
    }

    fn forget_pid(&mut self) {
        if let Some(p) = self.pidfile.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.forget_pid();
    }
}
