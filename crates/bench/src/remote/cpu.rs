//! CPU time of this process's threads by role, from `/proc/self/task/*/stat` (Linux), so the
//! report can show whether the clients or the server used the machine: the clients run in a
//! tokio runtime whose threads are named [`CLIENT_THREADS`], the server in one named
//! [`SERVER_THREADS`] (plus the server's own `espalier-hub` and `espalier-sync` threads).
//!
//! A thread that exits between two readings loses its time; the runtimes keep their blocking
//! threads alive for the whole run so that none do.

use serde::Serialize;

/// Thread name of the clients' runtime.
pub const CLIENT_THREADS: &str = "bench-client";
/// Thread name of the server's runtime.
pub const SERVER_THREADS: &str = "espalier-srv";
/// Most threads read per sample (bounds the work on a process gone wrong).
const MAX_THREADS: usize = 16_384;

/// CPU seconds (user + system) by role at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuTimes {
    /// CPU seconds of the clients' runtime threads ([`CLIENT_THREADS`]).
    pub client_s: f64,
    /// CPU seconds of the server's runtime threads ([`SERVER_THREADS`]).
    pub server_s: f64,
    /// CPU seconds of every other thread of the process.
    pub other_s: f64,
}

impl CpuTimes {
    /// The time used between `earlier` and `self`.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            client_s: (self.client_s - earlier.client_s).max(0.0),
            server_s: (self.server_s - earlier.server_s).max(0.0),
            other_s: (self.other_s - earlier.other_s).max(0.0),
        }
    }
}

/// Which role a thread name belongs to.
fn role(name: &str) -> Role {
    if name.starts_with(CLIENT_THREADS) {
        Role::Client
    } else if name.starts_with(SERVER_THREADS) || name.starts_with("espalier-hub") || name.starts_with("espalier-sync")
    {
        Role::Server
    } else {
        Role::Other
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Client,
    Server,
    Other,
}

/// Name and CPU ticks (utime + stime) from one `stat` line: `tid (comm) state … utime stime …`;
/// the name may hold spaces and parentheses, so fields are counted after the last `)`.
fn parse_stat(line: &str) -> Option<(&str, u64)> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let name = line.get(open + 1..close)?;
    let rest: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
    // After the name: state is field 3 of the line, utime 14 and stime 15.
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

/// The current CPU times, or None where `/proc` is not available.
pub fn sample() -> Option<CpuTimes> {
    // SAFETY: sysconf has no preconditions; a negative result means unknown.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    let ticks = ticks as f64;
    let mut t = CpuTimes::default();
    for entry in std::fs::read_dir("/proc/self/task").ok()?.take(MAX_THREADS).flatten() {
        let Ok(line) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue; // the thread ended since the listing
        };
        let Some((name, used)) = parse_stat(&line) else { continue };
        let s = used as f64 / ticks;
        match role(name) {
            Role::Client => t.client_s += s,
            Role::Server => t.server_s += s,
            Role::Other => t.other_s += s,
        }
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_odd_names() {
        let line = "4242 (bench-client) S 1 2 3 4 5 6 7 8 9 10 250 30 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_stat(line), Some(("bench-client", 280)));
        let odd = "7 (a (b) c) R 1 2 3 4 5 6 7 8 9 10 1 2 0 0";
        assert_eq!(parse_stat(odd), Some(("a (b) c", 3)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(role("espalier-srv"), Role::Server);
        assert_eq!(role("espalier-hub"), Role::Server);
        assert_eq!(role("bench-client"), Role::Client);
        assert_eq!(role("main"), Role::Other);
    }

    #[test]
    fn this_process_has_cpu_time() {
        let Some(before) = sample() else { return }; // not Linux
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        let after = sample().expect("still readable");
        let used = after.since(&before);
        assert!(used.other_s + used.client_s + used.server_s > 0.0, "{used:?}");
    }
}
