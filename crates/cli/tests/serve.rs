//! `espalier serve` as a process: starts on a free loopback port, serves the Rust client,
//! stops gracefully on SIGTERM with what was committed on disk, and refuses bad setups.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use espalier_client::protocol::{ErrorCode, Reply};
use espalier_client::{Client, ClientError, ClientOptions, Event};

const BIN: &str = env!("CARGO_BIN_EXE_espalier");

/// Starts `espalier --db DB serve ARGS` and returns it with the address it printed.
fn spawn(db: &std::path::Path, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(BIN)
        .arg("--db")
        .arg(db)
        .arg("--durability")
        .arg("none")
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn espalier serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("read the address line");
    let addr = line
        .strip_prefix("listening on ws://")
        .and_then(|rest| rest.split("/ws").next())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, addr)
}

fn terminate(child: &mut Child) -> std::process::ExitStatus {
    // SAFETY: kill(2) on the pid of a child we own and have not waited for yet.
    let r = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(r, 0, "kill");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "the server did not stop within 30 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn serve_demo_answers_clients_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let (mut child, addr) = spawn(&db, &["--demo"]);
    let client = Client::connect(&format!("ws://{addr}"), ClientOptions::default()).await.expect("connects");
    let q = client.query("collection select . 'Machines' 'Pulses' -> number : 'Pulses'", None).await.unwrap();
    assert_eq!(q.total, 3);
    let mut sub = client.subscribe_node(". 'Machines' : \"M2\"", None, None).await.unwrap();
    let r = client.execute("command 'pulse' ( 'machine' -> \"M2\" )", None).await.unwrap();
    let Reply::Done { version, .. } = r else { panic!("{r:?}") };
    match tokio::time::timeout(Duration::from_secs(10), sub.next()).await.unwrap() {
        Some(Event::Changes { version: v, .. }) => assert_eq!(v, version),
        other => panic!("{other:?}"),
    }
    let status = terminate(&mut child);
    assert!(status.success(), "{status:?}");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("created") && err.contains("stopped"), "{err}");
    // The session was closed as going away.
    for _ in 0..200 {
        if client.closed().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(matches!(client.closed(), Some(ClientError::Closed { .. })), "{:?}", client.closed());
    // What was committed is on disk.
    let out = Command::new(BIN).arg("--db").arg(&db).args(["exec", "get . 'Machines' : \"M2\""]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"Pulses\": 1"), "{}", String::from_utf8_lossy(&out.stdout));

    // Serving it again (no --demo needed now) works and keeps the data.
    let (mut again, addr) = spawn(&db, &[]);
    let c = Client::connect(&format!("ws://{addr}"), ClientOptions::default()).await.unwrap();
    let (_, m2) = c.get(". 'Machines' : \"M2\"", None).await.unwrap();
    assert_eq!(m2["Pulses"], serde_json::json!(1));
    assert!(terminate(&mut again).success());
}

#[tokio::test]
async fn serve_with_tokens_refuses_clients_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, "[[token]]\nname = \"ops\"\nrole = \"admin\"\nsecret = \"ops-secret-0123456789\"\n")
        .unwrap();
    let (mut child, addr) = spawn(
        &db,
        &["--demo", "--token", "dash:read:dash-secret-0123456789", "--tokens-file", tokens.to_str().unwrap()],
    );
    let url = format!("ws://{addr}");
    match Client::connect(&url, ClientOptions::default()).await.unwrap_err() {
        ClientError::Refused { code, .. } => assert_eq!(code, ErrorCode::Unauthorized),
        other => panic!("{other:?}"),
    }
    let dash = Client::connect(&url, ClientOptions::default().token("dash-secret-0123456789")).await.unwrap();
    let e = dash.execute("command 'pulse' ( 'machine' -> \"M1\" )", None).await.unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Forbidden));
    // The admin token from the file stops the server.
    let ops = Client::connect(&url, ClientOptions::default().token("ops-secret-0123456789")).await.unwrap();
    ops.shutdown().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "did not stop after an admin shutdown");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success());
}

#[test]
fn serve_refuses_unsafe_or_broken_setups() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .arg("--db")
            .arg(dir.path().join("none.db"))
            .arg("serve")
            .args(args)
            .output()
            .expect("run espalier serve");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&["--listen", "0.0.0.0:0"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("refusing to listen on 0.0.0.0:0 without tokens"), "{err}");
    let (code, err) = run(&["--token", "a:read:short"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("at least 16"), "{err}");
    let (code, err) = run(&["--listen", "not an address"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--listen"), "{err}");
    let (code, err) = run(&["--max-in-flight", "0"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("max in flight must be at least 1"), "{err}");
    let (code, err) = run(&["--listen", "127.0.0.1:0"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no database at"), "{err}");
    assert!(!dir.path().join("none.db").exists(), "nothing was created without --demo");
}
