//! One process per database: while `espalier serve` has a database open, every other
//! `espalier` process on it (exec, shell, export, another serve) is refused with the server's
//! pid and address and writes nothing; a killed holder's lock does not outlive it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{espalier_on as espalier, text};

const BIN: &str = env!("CARGO_BIN_EXE_espalier");

/// Starts `espalier serve` on a free loopback port; returns it and the address it printed.
fn serve(db: &Path) -> (Child, String) {
    let mut command = Command::new(BIN);
    command
        .arg("--db")
        .arg(db)
        .args(["--durability", "none", "serve", "--listen", "127.0.0.1:0"])
        .env_remove("ESPALIER_DB")
        .stderr(Stdio::null());
    common::spawn_serve(command)
}

fn signal_and_wait(child: &mut Child, signal: libc::c_int) -> std::process::ExitStatus {
    // SAFETY: kill(2) on the pid of a child we own and have not waited for yet.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0, "kill");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "the server did not stop within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_second_process_is_refused_while_the_server_runs_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let init = espalier(&db, &["init", "--demo"]);
    assert!(init.status.success(), "{}", text(&init.stderr));
    let (mut server, addr) = serve(&db);
    let pid = server.id();
    // The lock file names the server (written right after it bound, before the line we read).
    let lock = std::fs::read_to_string(db.join("lock")).unwrap();
    assert_eq!(lock, format!("pid {pid}\nserver {addr}\n"));

    // A write through another process is refused, naming the server and how to reach it.
    let update = "update ( 'Clients' -> dictionary \"c9\" ( 'Name' -> text \"Nine\" ) )";
    let out = espalier(&db, &["exec", update]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(err.contains(&format!("pid {pid}")) && err.contains(&format!("listening on {addr}")), "{err}");
    assert!(err.contains(&format!("curl -s http://{addr}/v1/execute")), "{err}");
    // So are reads, the shell, export, check and another server: one process per database.
    for args in [
        &["exec", "get . 'Clients' : \"c1\""][..],
        &["shell"],
        &["export"],
        &["check"],
        &["serve", "--listen", "127.0.0.1:0"],
    ] {
        let out = espalier(&db, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!("in use by an Espalier server (pid {pid}) listening on {addr}")),
            "{args:?}: {err}"
        );
    }
    // The lock file still names the server: the refused processes wrote nothing there either.
    assert_eq!(std::fs::read_to_string(db.join("lock")).unwrap(), lock);

    // Stopped gracefully, the server lets go; the refused update left no trace: the next
    // commit takes the version after the demo's last.
    assert!(signal_and_wait(&mut server, libc::SIGTERM).success());
    let out = espalier(&db, &["exec", "get . 'Clients' : \"c9\""]);
    assert!(text(&out.stderr).contains("key_missing"), "{}", text(&out.stderr));
    let out = espalier(&db, &["exec", update]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "done: version 9, 2 changes");
}

#[test]
fn a_killed_server_leaves_no_lock_behind() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    assert!(espalier(&db, &["init", "--demo"]).status.success());
    let (mut server, addr) = serve(&db);
    assert!(std::fs::read_to_string(db.join("lock")).unwrap().contains(&addr));
    // SIGKILL: no destructors run; the lock file keeps the dead server's information.
    let status = signal_and_wait(&mut server, libc::SIGKILL);
    assert!(!status.success());
    assert!(std::fs::read_to_string(db.join("lock")).unwrap().contains(&addr));
    // The kernel released the flock with the process: the next process opens and writes.
    let out = espalier(&db, &["exec", "command 'pulse' ( 'machine' -> \"M2\" )"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = espalier(&db, &["check"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}
