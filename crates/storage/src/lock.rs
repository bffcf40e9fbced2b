//! The database directory's lock: one open at a time, in one process.
//!
//! [`DirLock::acquire`] takes an exclusive `flock(2)` on the file `DIR/lock` and keeps it
//! until the guard is dropped. The kernel holds the lock, not the file: it goes away with the
//! process however that ends (a SIGKILL included), so a lock file left behind never blocks
//! anyone. The file's content is only information for whoever is refused: the holder's
//! process id and, for a server, the address it listens on.
//!
//! `flock` locks belong to an open file description, so a second open of the same directory
//! in the same process is refused too ([`LockError::HeldHere`]): a process opens a database
//! once and shares the handle.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The lock file's name inside the database directory.
pub const LOCK_FILE: &str = "lock";

/// Who holds the lock, as written into the lock file for anyone refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// A process working on the database itself (`exec`, `shell`, `import`, a program).
    Process,
    /// A server: other programs reach the database through it at `listen`.
    Server {
        /// The address it listens on.
        listen: SocketAddr,
    },
}

/// What the lock file says about the process holding the lock.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeldBy {
    /// The holder's process id (absent if the holder had not written it yet).
    pub pid: Option<u32>,
    /// The address the holder serves the database on, if it is a server.
    pub server: Option<String>,
}

impl HeldBy {
    fn parse(text: &str) -> HeldBy {
        let mut by = HeldBy::default();
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("pid", v)) => by.pid = v.trim().parse().ok(),
                Some(("server", v)) if !v.trim().is_empty() => by.server = Some(v.trim().to_string()),
                _ => {}
            }
        }
        by
    }
}

/// Why a database directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error("{}", held_message(.dir, .by))]
    Held {
        /// The database directory.
        dir: PathBuf,
        /// What the lock file says of the holder.
        by: HeldBy,
    },
    /// This process already holds the lock (the directory is open twice).
    #[error("{} is already open in this process (pid {pid}); open a database once and share the handle", .dir.display())]
    HeldHere {
        /// The database directory.
        dir: PathBuf,
        /// This process's id.
        pid: u32,
    },
    /// The lock file could not be opened, locked or written.
    #[error("cannot lock the database directory ({}): {source}", .path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
}

fn held_message(dir: &Path, by: &HeldBy) -> String {
    let pid = by.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
    match &by.server {
        Some(addr) => format!(
            "{dir} is in use by an Espalier server{pid} listening on {addr}; send instructions to the server \
             instead, e.g. `curl -s http://{addr}/v1/execute -d '{{\"text\": \"get\"}}'` (docs/server.md), \
             or stop it first",
            dir = dir.display()
        ),
        None => format!(
            "{} is in use by another process{pid}; a database is open in one process at a time \
             (wait for it to finish, or stop it)",
            dir.display()
        ),
    }
}

/// The held lock on a database directory; dropping it lets the next process in.
#[derive(Debug)]
pub struct DirLock {
    file: File,
    dir: PathBuf,
}

impl DirLock {
    /// Locks the directory `dir` (which must exist) for `holder`, or says who holds it.
    /// Never waits. When refused, nothing has been written.
    pub fn acquire(dir: &Path, holder: Holder) -> Result<DirLock, LockError> {
        let path = dir.join(LOCK_FILE);
        let io_err = |source| LockError::Io { path: path.clone(), source };
        // No truncation: the holder's information stays for the next one refused.
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io_err)?;
        loop {
            // SAFETY: flock(2) on a descriptor we own for the duration of the call.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EWOULDBLOCK) => {
                    let mut text = String::new();
                    // Unreadable content names no holder; the refusal stands either way.
                    let _ = file.read_to_string(&mut text);
                    let by = HeldBy::parse(&text);
                    let pid = std::process::id();
                    if by.pid == Some(pid) {
                        return Err(LockError::HeldHere { dir: dir.to_path_buf(), pid });
                    }
                    return Err(LockError::Held { dir: dir.to_path_buf(), by });
                }
                _ => return Err(io_err(e)),
            }
        }
        let lock = DirLock { file, dir: dir.to_path_buf() };
        lock.set_holder(holder)?;
        Ok(lock)
    }

    /// Records a new holder description (a server once it knows its address).
    pub fn set_holder(&self, holder: Holder) -> Result<(), LockError> {
        let mut text = format!("pid {}\n", std::process::id());
        if let Holder::Server { listen } = holder {
            text.push_str(&format!("server {listen}\n"));
        }
        let io_err = |source| LockError::Io { path: self.dir.join(LOCK_FILE), source };
        self.file.write_all_at(text.as_bytes(), 0).map_err(io_err)?;
        self.file.set_len(text.len() as u64).map_err(io_err)
    }

    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the lock file says now (for tests and diagnostics).
    pub fn held_by(&self) -> HeldBy {
        let mut buf = vec![0; 256];
        let n = self.file.read_at(&mut buf, 0).unwrap_or(0);
        HeldBy::parse(&String::from_utf8_lossy(&buf[..n]))
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Nobody holds it from here on; the lock itself goes with the descriptor.
        let _ = self.file.set_len(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_written_and_a_second_open_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let lock = DirLock::acquire(dir.path(), Holder::Process).unwrap();
        assert_eq!(lock.held_by(), HeldBy { pid: Some(std::process::id()), server: None });
        // flock is per open file description: a second acquire in this process is refused.
        match DirLock::acquire(dir.path(), Holder::Process) {
            Err(LockError::HeldHere { pid, .. }) => assert_eq!(pid, std::process::id()),
            other => panic!("{other:?}"),
        }
        let listen: SocketAddr = "127.0.0.1:7420".parse().unwrap();
        lock.set_holder(Holder::Server { listen }).unwrap();
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(text, format!("pid {}\nserver 127.0.0.1:7420\n", std::process::id()));
        lock.set_holder(Holder::Process).unwrap();
        assert_eq!(lock.held_by().server, None);
        drop(lock);
        // Released: the next open gets it.
        DirLock::acquire(dir.path(), Holder::Process).unwrap();
    }

    #[test]
    fn a_lock_file_left_behind_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        // What a killed server leaves: its information, but no flock (that died with it).
        std::fs::write(dir.path().join(LOCK_FILE), "pid 999999\nserver 127.0.0.1:1\n").unwrap();
        let lock = DirLock::acquire(dir.path(), Holder::Process).unwrap();
        assert_eq!(lock.held_by(), HeldBy { pid: Some(std::process::id()), server: None });
        assert_eq!(
            std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap(),
            format!("pid {}\n", std::process::id())
        );
    }

    #[test]
    fn another_holder_is_named_in_the_refusal() {
        let dir = tempfile::tempdir().unwrap();
        // Another process's lock, simulated by a second open file description holding the
        // flock with a foreign pid in the file.
        let other = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.path().join(LOCK_FILE))
            .unwrap();
        // SAFETY: flock on a descriptor we own.
        assert_eq!(unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
        other.write_all_at(b"pid 4242\nserver 127.0.0.1:7420\n", 0).unwrap();
        let e = DirLock::acquire(dir.path(), Holder::Process).unwrap_err();
        let LockError::Held { by, .. } = &e else { panic!("{e:?}") };
        assert_eq!(by, &HeldBy { pid: Some(4242), server: Some("127.0.0.1:7420".into()) });
        let message = e.to_string();
        assert!(message.contains("pid 4242") && message.contains("127.0.0.1:7420"), "{message}");
        assert!(message.contains("curl -s http://127.0.0.1:7420/v1/execute"), "{message}");
        // The refused open wrote nothing.
        assert_eq!(std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap(), "pid 4242\nserver 127.0.0.1:7420\n");
        // Without a server, the refusal names the process only.
        other.write_all_at(b"pid 4243\n", 0).unwrap();
        other.set_len(9).unwrap();
        let message = DirLock::acquire(dir.path(), Holder::Process).unwrap_err().to_string();
        assert!(message.contains("another process (pid 4243)") && !message.contains("server"), "{message}");
        drop(other);
        DirLock::acquire(dir.path(), Holder::Process).unwrap();
    }
}
