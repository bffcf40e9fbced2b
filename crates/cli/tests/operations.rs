//! Operations: `espalier backup`, a consistent copy of a served database taken under write load, restored
//! with `espalier import`, `check` clean, holding every commit acknowledged up to its version
//! and none after; refused without the admin role; local backup of an unserved database.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use espalier_client::protocol::Reply;
use espalier_client::{Client, ClientOptions};

mod common;

use common::{espalier_on as espalier, text};

const BIN: &str = env!("CARGO_BIN_EXE_espalier");
const ADMIN: &str = "admin-secret-0123456789";
const READER: &str = "read-secret-0123456789";

/// `espalier serve` with an admin and a read token, on a free loopback port.
fn serve(db: &Path) -> (Child, String) {
    let mut command = Command::new(BIN);
    command
        .arg("--db")
        .arg(db)
        .args(["--durability", "sync", "serve", "--listen", "127.0.0.1:0"])
        .args(["--token", &format!("ops:admin:{ADMIN}"), "--token", &format!("dash:read:{READER}")])
        .env_remove("ESPALIER_DB")
        .stderr(Stdio::null());
    common::spawn_serve(command)
}

fn stop(child: &mut Child) {
    // SAFETY: kill(2) on the pid of a child we own and have not waited for yet.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The keys of 'Clients' in the database at `db`.
fn client_keys(db: &Path) -> Vec<String> {
    let out = espalier(db, &["exec", "--format", "json", "collection select . 'Clients' 'Name' -> text : 'Name'"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let rows = v["rows"].as_array().unwrap_or_else(|| panic!("no rows in {v}"));
    rows.iter().map(|r| r["key"][0].as_str().map(str::to_string).unwrap_or_else(|| panic!("row {r}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_write_load_restores_with_every_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    let init = espalier(&db, &["init", "--demo"]);
    assert!(init.status.success(), "{}", text(&init.stderr));
    let (mut server, addr) = serve(&db);
    let opts = ClientOptions { token: Some(ADMIN.into()), ..Default::default() };

    // Four writers insert clients as fast as they are acknowledged, recording each version.
    let acknowledged: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let stop_writing = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let client = Client::connect(&format!("ws://{addr}"), opts.clone()).await.expect("connects");
        let (acked, stop_writing) = (acknowledged.clone(), stop_writing.clone());
        writers.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop_writing.load(Ordering::Relaxed) {
                let key = format!("w{w}-{n}");
                let instr = format!("update ( 'Clients' -> dictionary \"{key}\" ( 'Name' -> text \"{key}\" ) )");
                match client.execute(&instr, None).await.expect("the write succeeds") {
                    Reply::Done { version, .. } => acked.lock().unwrap().push((key, version)),
                    other => panic!("unexpected reply {other:?}"),
                }
                n += 1;
            }
        }));
    }
    // Let the load build up, then back up while it goes on.
    while acknowledged.lock().unwrap().len() < 50 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before: Vec<(String, u64)> = acknowledged.lock().unwrap().clone();
    let file = dir.path().join("backup.json");
    let backup = {
        let (addr, file) = (addr.clone(), file.clone());
        tokio::task::spawn_blocking(move || {
            Command::new(BIN)
                .args(["--json", "backup", "--server", &addr])
                .arg(&file)
                .env("ESPALIER_TOKEN", ADMIN)
                .env_remove("ESPALIER_DB")
                .output()
                .expect("run espalier backup")
        })
        .await
        .unwrap()
    };
    assert!(backup.status.success(), "{}", text(&backup.stderr));
    // Writes went on during the backup and after it.
    let during = acknowledged.lock().unwrap().len();
    while acknowledged.lock().unwrap().len() < during + 20 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop_writing.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let summary: serde_json::Value = serde_json::from_slice(&backup.stdout).expect("--json summary");
    let version = summary["version"].as_u64().unwrap_or_else(|| panic!("no version in {summary}"));

    // Restored: the integrity check is clean and the data is exactly the commits up to the
    // dump's version: every one acknowledged before the backup began, and none after it.
    let restored = dir.path().join("restored.db");
    let import = espalier(&restored, &["import", file.to_str().unwrap()]);
    assert!(import.status.success(), "{}", text(&import.stderr));
    let check = espalier(&restored, &["check"]);
    assert!(check.status.success(), "{}{}", text(&check.stdout), text(&check.stderr));
    let keys: std::collections::HashSet<String> = client_keys(&restored).into_iter().collect();
    let all = acknowledged.lock().unwrap().clone();
    for (key, v) in &before {
        assert!(*v <= version, "{key} was acknowledged at {v} before the backup of version {version} began");
        assert!(keys.contains(key), "{key} (version {v}) was acknowledged before the backup and is missing");
    }
    let mut after = 0;
    for (key, v) in &all {
        assert_eq!(keys.contains(key), *v <= version, "{key} at version {v}, backup of version {version}");
        after += usize::from(*v > version);
    }
    assert!(after > 0, "writes went on after the backup's snapshot");
    assert_eq!(keys.len(), 3 + all.iter().filter(|(_, v)| *v <= version).count());
    stop(&mut server);
}

#[test]
fn backup_needs_the_admin_role_and_a_served_database_is_backed_up_through_its_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    assert!(espalier(&db, &["init", "--demo"]).status.success());
    let (mut server, addr) = serve(&db);
    let file = dir.path().join("b.json");
    let f = file.to_str().unwrap();

    let out = espalier(&db, &["backup", "--server", &addr, "--token", READER, f]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("refused the backup (403)") && err.contains("admin role"), "{err}");
    let out = espalier(&db, &["backup", "--server", &addr, f]);
    assert!(text(&out.stderr).contains("refused the backup (401)"), "{}", text(&out.stderr));
    assert!(!file.exists(), "a refused backup writes no file");
    // Locally, the served database is locked: the message says how to back it up.
    let out = espalier(&db, &["backup", f]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("espalier backup --server ADDR"), "{err}");
    assert!(!file.exists());
    let out = espalier(&db, &["backup", "--server", "nowhere", f]);
    assert!(text(&out.stderr).contains("is not an address"), "{}", text(&out.stderr));
    stop(&mut server);

    // Unserved, `backup` copies the database itself: the same bytes as `export`.
    let out = espalier(&db, &["backup", f]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let export = espalier(&db, &["export"]);
    assert_eq!(std::fs::read(&file).unwrap(), export.stdout);
}

/// With `--log-level debug`, each request and each commit is an event in the configured format.
#[test]
fn requests_and_commits_are_logged_as_json_lines_at_debug() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    assert!(espalier(&db, &["init", "--demo"]).status.success());
    let log = dir.path().join("serve.log");
    let mut command = Command::new(BIN);
    command
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", "127.0.0.1:0", "--log-level", "debug", "--log-format", "json"])
        .env_remove("ESPALIER_DB")
        .stderr(std::fs::File::create(&log).unwrap());
    let (mut child, addr) = common::spawn_serve(command);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = Client::connect(&format!("ws://{addr}"), ClientOptions::default()).await.expect("connects");
        client.execute("update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 )", None).await.expect("writes");
        assert!(client.execute("update ( 'Clients' -> dictionary \"c1\" ( ) )", None).await.is_err());
    });
    stop(&mut child);
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not a JSON line: {e}")))
        .collect();
    let find = |message: &str, field: &str, value: serde_json::Value| {
        events.iter().any(|e| e["message"] == message && e[field] == value && e["level"] == "debug")
    };
    assert!(find("request", "outcome", "ok".into()), "{events:?}");
    assert!(find("request", "outcome", "error".into()), "{events:?}");
    assert!(find("commit", "version", "9".into()), "{events:?}");
    assert!(events.iter().all(|e| e["time"].is_string()), "{events:?}");
}
