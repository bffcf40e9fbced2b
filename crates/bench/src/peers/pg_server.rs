//! A private PostgreSQL server for one benchmark run: `initdb` into a temporary directory,
//! `pg_ctl start` on a free 127.0.0.1 port with its unix socket in that directory, stopped
//! and deleted when the [`PgServer`] is dropped (also when the run fails or panics).
//!
//! PostgreSQL refuses to run as root. When this process is root, every server command runs
//! as an unprivileged user (`postgres`, or `$ESPALIER_PG_USER`) through `runuser`, and the
//! temporary directory is handed to that user.
//!
//! The binaries are found in `$ESPALIER_PG_BIN`, then on `PATH`, then in the newest
//! `/usr/lib/postgresql/*/bin` (Debian's layout).
//!
//! An interrupt (Ctrl-C, SIGTERM) ends the process without running destructors, and
//! PostgreSQL runs as its own daemon: every server is registered with [`crate::interrupt`],
//! which stops it (immediate shutdown) and deletes its directory.

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use super::PeerError;

/// How long `pg_ctl` may wait for the server to start or stop.
const PG_CTL_WAIT: Duration = Duration::from_secs(60);
/// Attempts at finding a free port (another process may take the one we found).
const START_ATTEMPTS: usize = 5;
/// The database the benchmark uses.
pub const DATABASE: &str = "espalier_bench";
/// The superuser `initdb` creates.
const SUPERUSER: &str = "espalier";

/// What to install when PostgreSQL is missing.
pub const INSTALL_HINT: &str = "install PostgreSQL (Debian/Ubuntu: `apt-get install -y postgresql`), \
or set ESPALIER_PG_BIN to the directory holding initdb and pg_ctl";

/// Server settings beyond the defaults.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// `postgresql.conf` lines (durability, memory).
    pub settings: Vec<String>,
    /// Where the temporary directory is made (default: the system's temp directory).
    pub dir: Option<PathBuf>,
}

/// A running server; dropping it stops the server and deletes its files.
pub struct PgServer {
    bin: PathBuf,
    /// Owns the temporary directory (data, socket, log); deleted on drop after the stop.
    tmp: Option<tempfile::TempDir>,
    data: PathBuf,
    socket_dir: PathBuf,
    port: u16,
    /// Run server commands as this user (when this process is root).
    run_as: Option<String>,
    running: bool,
    /// Stops the server and deletes its directory if the process is interrupted.
    cleanup: Option<crate::interrupt::Registration>,
}

/// The directory holding `initdb` and `pg_ctl`.
pub fn find_bin() -> Result<PathBuf, PeerError> {
    let has_tools = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os("ESPALIER_PG_BIN") {
        let dir = PathBuf::from(dir);
        return if has_tools(&dir) {
            Ok(dir)
        } else {
            Err(PeerError::Server(format!("ESPALIER_PG_BIN={} holds no initdb and pg_ctl", dir.display())))
        };
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_tools(&dir) {
                // Resolve symlinks so that the server binary next to them is found too.
                let initdb = std::fs::canonicalize(dir.join("initdb")).unwrap_or_else(|_| dir.join("initdb"));
                return Ok(initdb.parent().map(Path::to_path_buf).unwrap_or(dir));
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            has_tools(&bin).then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        PeerError::Server(format!("PostgreSQL is not installed (no initdb/pg_ctl found): {INSTALL_HINT}"))
    })
}

/// Whether this process runs as root (PostgreSQL will not).
pub fn running_as_root() -> bool {
    match Command::new("id").arg("-u").output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout).trim() == "0",
        Err(_) => false,
    }
}

/// The argument vector that runs `program args…`, as `user` when one is given.
pub fn command_line(run_as: Option<&str>, program: &Path, args: &[String]) -> Vec<String> {
    let mut v = Vec::with_capacity(args.len() + 4);
    if let Some(user) = run_as {
        v.extend(["runuser".to_string(), "-u".to_string(), user.to_string(), "--".to_string()]);
    }
    v.push(program.display().to_string());
    v.extend(args.iter().cloned());
    v
}

fn run(argv: &[String]) -> Result<Output, PeerError> {
    let (program, args) = argv.split_first().expect("a command line has a program");
    Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .map_err(|e| PeerError::Server(format!("cannot run {}: {e}", argv.join(" "))))
}

fn check(argv: &[String], out: Output) -> Result<Output, PeerError> {
    if out.status.success() {
        return Ok(out);
    }
    let mut msg = format!("`{}` failed ({})", argv.join(" "), out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for text in [stderr.trim(), stdout.trim()] {
        if !text.is_empty() {
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            let _ = write!(msg, "\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
    }
    Err(PeerError::Server(msg))
}

/// A port that was free a moment ago on 127.0.0.1.
fn free_port() -> Result<u16, PeerError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| PeerError::io("finding a free port", e))?;
    l.local_addr().map(|a| a.port()).map_err(|e| PeerError::io("finding a free port", e))
}

/// (uid, gid) of `user`, from `id`.
fn ids_of(user: &str) -> Result<(u32, u32), PeerError> {
    let get = |flag: &str| -> Result<u32, PeerError> {
        let out = Command::new("id")
            .args([flag, user])
            .output()
            .map_err(|e| PeerError::Server(format!("cannot run `id {flag} {user}`: {e}")))?;
        if !out.status.success() {
            return Err(PeerError::Server(format!(
                "running as root, PostgreSQL needs an unprivileged user, and user {user:?} does not exist: \
                 create it (`useradd -r {user}`; installing PostgreSQL creates `postgres`) or set ESPALIER_PG_USER"
            )));
        }
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| PeerError::Server(format!("`id {flag} {user}` printed no number")))
    };
    Ok((get("-u")?, get("-g")?))
}

impl PgServer {
    /// Creates a cluster and starts it. Fails with a message naming the step and PostgreSQL's
    /// output; fails with [`INSTALL_HINT`] when PostgreSQL is not installed.
    pub fn start(options: &ServerOptions) -> Result<PgServer, PeerError> {
        let bin = find_bin()?;
        let run_as = if running_as_root() {
            Some(std::env::var("ESPALIER_PG_USER").unwrap_or_else(|_| "postgres".to_string()))
        } else {
            None
        };
        let base = options.dir.clone().unwrap_or_else(std::env::temp_dir);
        let tmp = tempfile::Builder::new()
            .prefix("espalier-pg-")
            .tempdir_in(&base)
            .map_err(|e| PeerError::io(format!("making a temporary directory in {}", base.display()), e))?;
        if let Some(user) = &run_as {
            let (uid, gid) = ids_of(user)?;
            std::os::unix::fs::chown(tmp.path(), Some(uid), Some(gid))
                .map_err(|e| PeerError::io(format!("handing {} to user {user}", tmp.path().display()), e))?;
            // The server user must be able to reach the directory through its parents.
            check_reachable(tmp.path(), user)?;
        }
        let data = tmp.path().join("data");
        let socket_dir = tmp.path().to_path_buf();
        let mut server =
            PgServer { bin, tmp: Some(tmp), data, socket_dir, port: 0, run_as, running: false, cleanup: None };
        // Registered before anything starts, so that an interrupt at any moment from here on
        // stops what is running and removes the directory.
        let mut stop = vec!["-D".to_string(), server.data.display().to_string()];
        stop.extend(["stop", "-m", "immediate", "-w"].iter().map(|a| a.to_string()));
        server.cleanup =
            Some(crate::interrupt::on_interrupt(server.socket_dir.clone(), Some(server.argv("pg_ctl", &stop))));
        server.initdb(options)?;
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            server.port = free_port()?;
            server.write_port()?;
            let log = server.log_path().display().to_string();
            match server.pg_ctl(&["start", "-w", "-t", &PG_CTL_WAIT.as_secs().to_string(), "-l", &log]) {
                Ok(()) => {
                    server.running = true;
                    server.create_database()?;
                    return Ok(server);
                }
                // Most likely the port was taken in between; the log says.
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| PeerError::Server("the server did not start".into())))
    }

    fn argv(&self, program: &str, args: &[String]) -> Vec<String> {
        command_line(self.run_as.as_deref(), &self.bin.join(program), args)
    }

    fn initdb(&self, options: &ServerOptions) -> Result<(), PeerError> {
        let args: Vec<String> = [
            "-D",
            &self.data.display().to_string(),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            // C collation: text compares byte by byte, as Espalier orders keys.
            "--locale=C",
            "--no-sync",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let argv = self.argv("initdb", &args);
        check(&argv, run(&argv)?)?;
        let mut conf = String::from("\n# espalier bench peers\nlisten_addresses = '127.0.0.1'\n");
        let _ = writeln!(conf, "unix_socket_directories = '{}'", self.socket_dir.display());
        conf.push_str("max_connections = 20\nlogging_collector = off\n");
        for line in &options.settings {
            let _ = writeln!(conf, "{line}");
        }
        let path = self.data.join("postgresql.conf");
        let mut text =
            std::fs::read_to_string(&path).map_err(|e| PeerError::io(format!("reading {}", path.display()), e))?;
        text.push_str(&conf);
        std::fs::write(&path, text).map_err(|e| PeerError::io(format!("writing {}", path.display()), e))
    }

    /// The port goes into `postgresql.auto.conf`, rewritten on every start attempt.
    fn write_port(&self) -> Result<(), PeerError> {
        let path = self.data.join("postgresql.auto.conf");
        std::fs::write(&path, format!("port = {}\n", self.port))
            .map_err(|e| PeerError::io(format!("writing {}", path.display()), e))
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<(), PeerError> {
        let mut all = vec!["-D".to_string(), self.data.display().to_string()];
        all.extend(args.iter().map(|s| s.to_string()));
        let argv = self.argv("pg_ctl", &all);
        let out = run(&argv)?;
        check(&argv, out).map(drop).map_err(|e| match self.log_tail() {
            Some(log) => PeerError::Server(format!("{e}\nserver log:\n{log}")),
            None => e,
        })
    }

    /// The server's log, in the temporary directory (owned by the server user).
    fn log_path(&self) -> PathBuf {
        self.socket_dir.join("server.log")
    }

    fn log_tail(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.log_path()).ok()?;
        let lines: Vec<&str> = text.lines().rev().take(20).collect();
        Some(lines.into_iter().rev().collect::<Vec<_>>().join("\n"))
    }

    fn create_database(&self) -> Result<(), PeerError> {
        let mut client = postgres::Client::connect(&self.connection_string("postgres"), postgres::NoTls)
            .map_err(|e| PeerError::pg("connecting to the new server", e))?;
        client
            .batch_execute(&format!("CREATE DATABASE {DATABASE}"))
            .map_err(|e| PeerError::pg("creating the benchmark database", e))
    }

    /// libpq-style connection parameters for `dbname`, over the unix socket (the fastest
    /// local transport; the server also listens on 127.0.0.1:`port`).
    pub fn connection_string(&self, dbname: &str) -> String {
        format!("host={} port={} user={SUPERUSER} dbname={dbname}", self.socket_dir.display(), self.port)
    }

    /// A new connection to the benchmark database.
    pub fn connect(&self) -> Result<postgres::Client, PeerError> {
        postgres::Client::connect(&self.connection_string(DATABASE), postgres::NoTls)
            .map_err(|e| PeerError::pg(format!("connecting to {}", self.connection_string(DATABASE)), e))
    }

    /// A new connection over TCP to 127.0.0.1.
    pub fn connect_tcp(&self) -> Result<postgres::Client, PeerError> {
        let s = format!("host=127.0.0.1 port={} user={SUPERUSER} dbname={DATABASE}", self.port);
        postgres::Client::connect(&s, postgres::NoTls).map_err(|e| PeerError::pg(format!("connecting to {s}"), e))
    }

    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// The user server commands run as (when this process is root).
    pub fn run_as(&self) -> Option<&str> {
        self.run_as.as_deref()
    }

    /// `postgres --version` of the binaries in use.
    pub fn version(&self) -> String {
        match Command::new(self.bin.join("postgres")).arg("--version").output() {
            Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_string(),
            Err(_) => "PostgreSQL (version unknown)".to_string(),
        }
    }

    /// Stops the server (fast shutdown) and deletes its files.
    pub fn stop(mut self) -> Result<(), PeerError> {
        let r = self.shutdown();
        drop(self.tmp.take());
        r
    }

    fn shutdown(&mut self) -> Result<(), PeerError> {
        if !self.running {
            return Ok(());
        }
        self.running = false;
        match self.pg_ctl(&["stop", "-m", "fast", "-w", "-t", &PG_CTL_WAIT.as_secs().to_string()]) {
            Ok(()) => Ok(()),
            Err(e) => {
                // Never leave a server behind: fall back to an immediate stop.
                let _ = self.pg_ctl(&["stop", "-m", "immediate", "-w"]);
                Err(e)
            }
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            eprintln!("warning: stopping the PostgreSQL server: {e}");
        }
    }
}

/// Fails with a clear message if `user` cannot reach `dir` (a parent directory closed to
/// others, such as a home directory with mode 0700).
fn check_reachable(dir: &Path, user: &str) -> Result<(), PeerError> {
    let argv: Vec<String> =
        ["runuser", "-u", user, "--", "test", "-x", &dir.display().to_string()].iter().map(|s| s.to_string()).collect();
    let out = run(&argv)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(PeerError::Server(format!(
            "user {user} cannot reach {}: a parent directory is closed to other users; choose another directory \
             with --dir (e.g. /tmp)",
            dir.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_for_root_and_for_others() {
        let args = vec!["-D".to_string(), "/tmp/x".to_string()];
        let plain = command_line(None, Path::new("/usr/bin/initdb"), &args);
        assert_eq!(plain, ["/usr/bin/initdb", "-D", "/tmp/x"]);
        let as_pg = command_line(Some("postgres"), Path::new("/usr/bin/initdb"), &args);
        assert_eq!(as_pg, ["runuser", "-u", "postgres", "--", "/usr/bin/initdb", "-D", "/tmp/x"]);
    }
}
