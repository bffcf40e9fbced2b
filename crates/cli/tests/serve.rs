//! `espalier serve` as a process: starts on a free loopback port, serves the Rust client,
//! stops gracefully on SIGTERM with what was committed on disk, and refuses bad setups.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use espalier_client::protocol::{ErrorCode, Reply};
use espalier_client::{Client, ClientError, ClientOptions, Event};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_espalier");

/// Starts `espalier --db DB serve ARGS` and returns it with the address it printed.
fn spawn(db: &std::path::Path, args: &[&str]) -> (Child, String) {
    let mut command = Command::new(BIN);
    command
        .arg("--db")
        .arg(db)
        .arg("--durability")
        .arg("none")
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stderr(Stdio::piped());
    common::spawn_serve(command)
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
    // The flag the message names is the one that exists.
    assert!(err.contains("--tokens-file FILE") && !err.contains("--tokens FILE"), "{err}");
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

/// `espalier serve` in `dir` with `env` (and no other ESPALIER_… variable) and `args`.
fn serve_in(dir: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir).arg("serve").args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("ESPALIER_") {
            c.env_remove(k);
        }
    }
    c.envs(env.iter().copied());
    c
}

/// Flag over environment over file over default, each value's source printed by
/// `--print-config`; `./espalier.toml` is read without being named, `--config` names another.
#[test]
fn configuration_precedence_flag_env_file_default() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("espalier.toml"),
        "# the file\ndatabase = \"shop.db\"\ndurability = \"periodic\"\n\n[server]\nlisten = \"127.0.0.2\"\nport = 9001\n\n[limits]\nmax_in_flight = 7\nmax_sessions = 9\nhistory = 11\n\n[log]\nlevel = \"warn\"\n",
    )
    .unwrap();
    let env = [("ESPALIER_PORT", "9002"), ("ESPALIER_MAX_IN_FLIGHT", "8"), ("ESPALIER_DURABILITY", "none")];
    let o = serve_in(d, &env, &["--print-config", "--port", "9003", "--history", "12"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}{out}", String::from_utf8_lossy(&o.stderr));
    let line = |key: &str| -> String {
        out.lines().find(|l| l.starts_with(&format!("{key} = "))).unwrap_or_else(|| panic!("no {key}: {out}")).into()
    };
    let expect = [
        ("port", "9003", "# flag --port"),
        ("history", "12", "# flag --history"),
        ("max_in_flight", "8", "# environment ESPALIER_MAX_IN_FLIGHT"),
        ("durability", "\"none\"", "# environment ESPALIER_DURABILITY"),
        ("max_sessions", "9", "# file ./espalier.toml:11"),
        ("listen", "\"127.0.0.2\"", "# file ./espalier.toml:6"),
        ("level", "\"warn\"", "# file ./espalier.toml:15"),
        ("database", "\"./shop.db\"", "# file ./espalier.toml:2"),
        ("max_subscriptions", "256", "# default"),
        ("format", "\"text\"", "# default"),
    ];
    for (key, value, source) in expect {
        let l = line(key);
        assert!(l.starts_with(&format!("{key} = {value} ")) && l.ends_with(source), "{key}: {l}\n{out}");
    }
    assert!(out.contains("# configuration file: ./espalier.toml"), "{out}");

    // JSON with --json; the same sources.
    let o = serve_in(d, &env, &["--print-config", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["settings"]["server.port"], serde_json::json!({"value": 9002, "source": "environment ESPALIER_PORT"}));
    assert_eq!(v["settings"]["limits.history"]["source"], "file ./espalier.toml:12");

    // --config (or ESPALIER_CONFIG) names another file; the default one is then not read.
    std::fs::write(d.join("other.toml"), "[server]\nport = 9100\n").unwrap();
    for (env, args) in [(vec![], vec!["--config", "other.toml"]), (vec![("ESPALIER_CONFIG", "other.toml")], vec![])] {
        let mut args = args.clone();
        args.push("--print-config");
        let o = serve_in(d, &env, &args).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("port = 9100") && out.contains("# file other.toml:2"), "{out}");
        assert!(out.contains("max_sessions = 1024"), "the default file is not read: {out}");
    }
    let o = serve_in(d, &[], &["--config", "missing.toml"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("reading the configuration file missing.toml"));
}

/// Unknown keys are refused with file:line and the key; bad values with their place (file:line,
/// variable or flag).
#[test]
fn configuration_errors_name_the_key_and_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: [(&str, Vec<(&str, &str)>, &str); 6] = [
        ("[server]\nport = 1\nlisten_on = \"x\"\n", vec![], "espalier.toml:3: unknown key `server.listen_on`"),
        (
            "[limits]\nmax_in_flight = \"64\"\n",
            vec![],
            "espalier.toml:2: `limits.max_in_flight` must be a whole number",
        ),
        ("durability = \"fast\"\n", vec![], "espalier.toml:1: durability = \"fast\": not one of sync, periodic, none"),
        ("", vec![("ESPALIER_LOG_LEVEL", "loud")], "ESPALIER_LOG_LEVEL=\"loud\": not one of error, warn, info, debug"),
        ("", vec![("ESPALIER_PORT", "port")], "ESPALIER_PORT=\"port\": not a whole number"),
        ("", vec![("ESPALIER_DURABILITY", "fast")], "ESPALIER_DURABILITY=\"fast\" is not one of sync, periodic, none"),
    ];
    for (file, env, want) in cases {
        std::fs::write(d.join("espalier.toml"), file).unwrap();
        let o = serve_in(d, &env, &["--print-config"]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{file} {env:?}: {err}");
        assert!(err.contains(want), "{file} {env:?}: {err}");
    }
    std::fs::remove_file(d.join("espalier.toml")).unwrap();
    let o = serve_in(d, &[], &["--listen", "127.0.0.1:1", "--port", "2"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("disagree about the port"), "{o:?}");
}

/// `--listen :0` and `--port 0` pick a free loopback port; the configuration file's settings
/// are the ones served with (here: the port, and logfmt diagnostics).
#[tokio::test]
async fn serve_takes_a_port_alone_and_the_configuration_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let start = |env: &[(&str, &str)], args: &[&str]| {
        let mut command = serve_in(d, env, args);
        command.stderr(Stdio::piped());
        common::spawn_serve(command)
    };
    for args in [&["--demo", "--listen", ":0"][..], &["--port", "0"][..]] {
        let (mut child, addr) = start(&[("ESPALIER_DURABILITY", "none")], args);
        assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0") && !addr.ends_with(":7420"), "{addr}");
        let status = terminate(&mut child);
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{args:?}: {status:?} {err}");
    }
    std::fs::write(
        d.join("espalier.toml"),
        "database = \"espalier.db\"\ndurability = \"none\"\n[server]\nport = 0\n[log]\nformat = \"logfmt\"\n",
    )
    .unwrap();
    let (mut child, addr) = start(&[], &[]);
    let client = Client::connect(&format!("ws://{addr}"), ClientOptions::default()).await.expect("connects");
    let q = client.query("collection select . 'Machines' 'Pulses' -> number : 'Pulses'", None).await.unwrap();
    assert_eq!(q.total, 3);
    assert!(terminate(&mut child).success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        !lines.is_empty() && lines.iter().all(|l| l.starts_with("time=") && l.contains(" level=info msg=")),
        "{err}"
    );
    assert!(err.contains("durability=none") && err.contains(&format!("listen={addr}")), "{err}");
}

/// docs/server.md's configuration table has one row per setting, with its variable, flag and
/// default as the code has them.
#[test]
fn the_documented_table_is_the_settings() {
    let doc = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/server.md"))
        .expect("read docs/server.md");
    let rows: Vec<Vec<String>> = doc
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
        .filter(|cells: &Vec<String>| cells.len() == 5)
        .collect();
    assert_eq!(rows.len(), espalier_server::config::settings::KEYS.len(), "{rows:?}");
    for key in espalier_server::config::settings::KEYS {
        let row = rows
            .iter()
            .find(|r| r[0] == format!("`{}`", key.name))
            .unwrap_or_else(|| panic!("docs/server.md has no row for {}", key.name));
        assert_eq!(row[1], format!("`{}`", key.env), "{}", key.name);
        assert_eq!(row[2], format!("`{}`", key.flag), "{}", key.name);
        let default = if key.default.is_empty() { "none".to_string() } else { format!("`{}`", key.default) };
        assert!(row[3].starts_with(&default), "{}: documented default {} is not {default}", key.name, row[3]);
    }
    // Every flag of the table exists.
    let help = Command::new(BIN).args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for key in espalier_server::config::settings::KEYS {
        assert!(help.contains(&format!("{} <", key.flag)), "serve --help lacks {}", key.flag);
    }
}
