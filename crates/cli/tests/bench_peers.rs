//! `espalier bench peers` end to end at a tiny scale (Espalier and SQLite; the PostgreSQL peer
//! is tested in crates/bench/tests/peers.rs), and its usage errors.

use std::process::Command;

mod common;

use common::{run, text, BIN};

const TINY: [&str; 10] =
    ["--scale", "0.05", "--nested-scale", "0.1", "--ops", "5", "--warmup", "1", "--systems", "espalier,sqlite"];

#[test]
fn peers_reports_every_operation_as_json_and_markdown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let mut args = vec!["--json", "bench", "peers", "--suite", "b6", "--dir"];
    let dir_arg = d.display().to_string();
    args.push(&dir_arg);
    args.extend(TINY);
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    let results = json["results"].as_array().expect("results");
    assert_eq!(results.len(), 5 * 2, "five B6 operations on two systems");
    assert!(results.iter().all(|r| r["count"] == 5 && r["median_us"].as_f64().is_some_and(|m| m > 0.0)));
    assert!(json["cross_checks"].as_u64().is_some_and(|n| n >= 30));
    assert_eq!(std::fs::read_dir(d).expect("dir").count(), 0, "the temporary databases are deleted");

    let mut args = vec!["bench", "peers", "--suite", "b7"];
    args.extend(TINY);
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    for op in ["many_references", "search", "task_start"] {
        assert!(md.contains(&format!("| {op} | espalier |")) && md.contains(&format!("| {op} | sqlite |")), "{md}");
    }
    assert!(!md.contains("| get_big_items |"), "B7 has three operations: {md}");
}

#[test]
fn peers_rejects_bad_options_with_a_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for (args, want) in [
        (vec!["--systems", "sqlite"], "must start with espalier"),
        (vec!["--systems", "espalier,mysql"], "unknown system \"mysql\""),
        (vec!["--scale", "0"], "scale must be a positive number"),
        (vec!["--ops", "0"], "ops must be at least 1"),
    ] {
        let mut all = vec!["bench", "peers", "--suite", "b6"];
        all.extend(args);
        let o = run(d, &all);
        assert_eq!(o.status.code(), Some(1), "{all:?}");
        assert!(text(&o.stderr).contains(want), "{all:?}: {}", text(&o.stderr));
    }
}

/// Ctrl-C during a run with PostgreSQL stops the server it started and removes its files and
/// the run's temporary databases (the server is a daemon of its own: without the handler it
/// would outlive the run). Once while
/// the server is still starting, once while the operations run.
#[test]
fn an_interrupt_stops_the_postgresql_server() {
    interrupt_after(std::time::Duration::from_millis(300));
    interrupt_after(std::time::Duration::from_secs(4));
}

fn interrupt_after(delay: std::time::Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let dir_arg = d.display().to_string();
    let args = [
        "bench",
        "peers",
        "--suite",
        "b6",
        "--dir",
        &dir_arg,
        "--scale",
        "0.05",
        "--nested-scale",
        "0.1",
        "--ops",
        "5000000",
        "--warmup",
        "1",
        "--systems",
        "espalier,postgres",
    ];
    /// Kills the run if the test fails before it ends (it would run for hours).
    struct KillOnDrop(Option<std::process::Child>);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            if let Some(c) = self.0.as_mut() {
                // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
                unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
                let _ = c.wait();
            }
        }
    }
    let child = Command::new(BIN)
        .args(args)
        .current_dir(d)
        .env_remove("ESPALIER_DB")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start espalier");
    let mut guard = KillOnDrop(Some(child));
    let child = guard.0.as_mut().expect("child");
    // The server's postmaster.pid appears once it runs (initdb's bootstrap backend writes one
    // too, with its pid negated: that is not the server yet).
    let pid_file = || -> Option<std::path::PathBuf> {
        std::fs::read_dir(d).ok()?.flatten().map(|e| e.path().join("data/postmaster.pid")).find(|p| p.is_file())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let pid: i32 = loop {
        if let Some(pid) = pid_file()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
            .filter(|&pid| pid > 0)
        {
            break pid;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err).ok();
            panic!("espalier ended ({status}) before PostgreSQL started: {err}");
        }
        assert!(std::time::Instant::now() < deadline, "PostgreSQL did not start within 120 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::thread::sleep(delay);
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = guard.0.take().expect("child").wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("stopped 1 PostgreSQL server"), "{}", text(&out.stderr));
    assert!(!running(pid), "the postmaster {pid} is gone");
    let left: Vec<_> = std::fs::read_dir(d).expect("dir").flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "the server's files and the temporary databases are removed: {left:?}");
}

/// Whether process `pid` exists and has not exited: an exited daemon whose parent (here
/// possibly a container's init that reaps nothing) has not collected it stays a zombie.
fn running(pid: i32) -> bool {
    // SAFETY: kill has no memory-safety preconditions; signal 0 only asks whether it exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    // /proc/PID/stat: "pid (comm) state …"; comm may hold spaces and parentheses.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    state.is_some_and(|s| s != "Z" && s != "X")
}
