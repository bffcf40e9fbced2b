//! Cleaning up after an interrupt. Ctrl-C or SIGTERM ends the process without running
//! destructors, so temporary databases would stay on disk, and a PostgreSQL server (a daemon
//! of its own) would keep running. What a run creates is registered here; the first
//! registration installs a handler that stops the registered servers, deletes the registered
//! directories and exits with status 130. Dropping a [`Registration`] takes it back (the
//! owner cleans up normally).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::Duration;

/// Something to clean up: an optional command that stops a server, then a directory.
struct Cleanup {
    id: u64,
    stop: Option<Vec<String>>,
    dir: PathBuf,
}

/// Bounded by what one run creates (a few databases and servers).
static REGISTERED: Mutex<Vec<Cleanup>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
const MAX_REGISTERED: usize = 1024;
/// Set when the handler starts cleaning up.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Longest a failing run waits for the handler to finish (it retries each directory for 5 s).
const SETTLE: Duration = Duration::from_secs(60);

fn registered() -> MutexGuard<'static, Vec<Cleanup>> {
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Holds `dir` (and the server `stop` stops) for cleanup on an interrupt until dropped.
#[must_use = "dropping the registration takes it back at once"]
pub struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        registered().retain(|c| c.id != self.0);
    }
}

/// Deletes `dir` if the process is interrupted before the registration is dropped; first runs
/// `stop` (a command line) if given.
pub fn on_interrupt(dir: PathBuf, stop: Option<Vec<String>>) -> Registration {
    install();
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let mut r = registered();
    assert!(r.len() < MAX_REGISTERED, "more than {MAX_REGISTERED} cleanups registered");
    r.push(Cleanup { id, stop, dir });
    Registration(id)
}

fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Err(e) = ctrlc::set_handler(clean_up_and_exit) {
            eprintln!("warning: an interrupt will leave temporary files (and servers) behind: {e}");
        }
    });
}

/// Call before reporting a failure: if an interrupt is being handled, the failure is most
/// likely its doing (a directory removed under a running tool, a server stopped), so this
/// waits for the handler to exit with status 130 instead of reporting it. Returns at once
/// otherwise, or after `SETTLE` (60 s).
pub fn settle_if_interrupted() {
    if INTERRUPTED.load(Ordering::SeqCst) {
        // The handler ends the process with `exit`, which does not wait for this sleep.
        std::thread::sleep(SETTLE);
    }
}

fn clean_up_and_exit() {
    INTERRUPTED.store(true, Ordering::SeqCst);
    let all = std::mem::take(&mut *registered());
    let mut servers = 0;
    // Servers first: their directories are only removable once they are down.
    for c in &all {
        if let Some((program, args)) = c.stop.as_ref().and_then(|s| s.split_first()) {
            let _ = Command::new(program).args(args).output();
            servers += 1;
        }
    }
    for c in &all {
        // A stopped server's last processes may still be writing (its log, a checkpoint):
        // retry for up to 5 s.
        for _ in 0..50 {
            if std::fs::remove_dir_all(&c.dir).is_ok() || !c.dir.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    eprintln!(
        "\ninterrupted: stopped {servers} PostgreSQL server(s) and removed {} temporary director{}",
        all.len(),
        if all.len() == 1 { "y" } else { "ies" }
    );
    std::process::exit(130);
}
