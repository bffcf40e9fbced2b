//! The settings' sources, precedence and messages.

use super::*;

fn env(pairs: &[(&str, &str)]) -> Layer {
    let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Layer::from_env(|k| map.get(k).cloned())
}

fn file(text: &str) -> Result<Layer, String> {
    Layer::parse_file(text, Path::new("conf/espalier.toml")).map_err(|e| e.to_string())
}

fn source(s: &Settings, name: &str) -> String {
    s.given(name).unwrap().source.to_string()
}

#[test]
fn flag_beats_environment_beats_file_beats_default() {
    let file = file(
        "database = \"shop.db\"\ndurability = \"periodic\"\n\n[server]\nport = 9001\nlisten = \"127.0.0.2\"\n\n[limits]\nmax_in_flight = 7\nmax_sessions = 9\n\n[log]\nformat = \"json\"\n",
    )
    .unwrap();
    let env = env(&[("ESPALIER_PORT", "9002"), ("ESPALIER_MAX_IN_FLIGHT", "8"), ("ESPALIER_LOG_LEVEL", "warn")]);
    let mut flags = Layer::default();
    flags.flag("server.port", "9003");
    let s = resolve(&[&flags, &env, &file]).unwrap();
    assert_eq!(s.listen, "127.0.0.2:9003".parse().unwrap());
    assert_eq!(source(&s, "server.port"), "flag --port");
    assert_eq!(source(&s, "server.listen"), "file conf/espalier.toml:6");
    assert_eq!(s.limits.max_in_flight, 8);
    assert_eq!(source(&s, "limits.max_in_flight"), "environment ESPALIER_MAX_IN_FLIGHT");
    assert_eq!(s.limits.max_sessions, 9);
    assert_eq!(source(&s, "limits.max_sessions"), "file conf/espalier.toml:10");
    assert_eq!(s.limits.max_subscriptions, 256);
    assert_eq!(source(&s, "limits.max_subscriptions"), "default");
    assert_eq!((s.log_level, s.log_format), (LogLevel::Warn, LogFormat::Json));
    assert_eq!(s.durability, DurabilityMode::Periodic);
    // A relative path in the file is relative to the file.
    assert_eq!(s.database(), Path::new("conf/shop.db"));
    // Without the flag the environment's port; without both the file's.
    assert_eq!(resolve(&[&env, &file]).unwrap().listen.port(), 9002);
    assert_eq!(resolve(&[&file]).unwrap().listen.port(), 9001);
    let d = resolve(&[]).unwrap();
    assert_eq!(d.listen, "127.0.0.1:7420".parse().unwrap());
    assert_eq!(d.limits, ServerLimits::default());
    assert_eq!((d.durability, d.log_level, d.log_format), (DurabilityMode::Sync, LogLevel::Info, LogFormat::Text));
    assert_eq!(d.database(), Path::new("./espalier.db"));
    assert_eq!(d.tokens_file(), None);
    // Every default parses as its key's kind and gives the documented limits.
    let printed = d.to_toml();
    assert_eq!(Layer::parse_file(&printed, Path::new("x.toml")).map(|l| resolve(&[&l]).is_ok()).ok(), Some(true));
}

#[test]
fn listen_takes_host_port_or_only_a_port() {
    let with = |listen: &str| {
        let mut flags = Layer::default();
        flags.flag("server.listen", listen);
        resolve(&[&flags]).map(|s| s.listen.to_string()).map_err(|e| e.to_string())
    };
    assert_eq!(with(":0").unwrap(), "127.0.0.1:0");
    assert_eq!(with(":9000").unwrap(), "127.0.0.1:9000");
    assert_eq!(with("0.0.0.0").unwrap(), "0.0.0.0:7420");
    assert_eq!(with("127.0.0.1:0").unwrap(), "127.0.0.1:0");
    assert_eq!(with("[::1]:9000").unwrap(), "[::1]:9000");
    assert_eq!(with("::1").unwrap(), "[::1]:7420");
    assert_eq!(with("localhost:9000").unwrap().rsplit(':').next(), Some("9000"));
    let e = with(":http").unwrap_err();
    assert!(e.contains("--listen \":http\"") && e.contains("0 to 65535"), "{e}");
    assert!(with("not an address").unwrap_err().contains("--listen \"not an address\""));
    // `:PORT` gives only the port: the host comes from below (here the file).
    let file = file("[server]\nlisten = \"0.0.0.0:1\"\n").unwrap();
    let mut flags = Layer::default();
    flags.flag("server.listen", ":2");
    assert_eq!(resolve(&[&flags, &file]).unwrap().listen.to_string(), "0.0.0.0:2");
    // One layer's listen port and port must agree.
    let mut flags = Layer::default();
    flags.flag("server.listen", "127.0.0.1:1");
    flags.flag("server.port", "2");
    let e = resolve(&[&flags]).unwrap_err().to_string();
    assert!(e.contains("disagree about the port"), "{e}");
    // A higher layer's port beats a lower layer's listen port.
    let env = env(&[("ESPALIER_PORT", "5")]);
    assert_eq!(resolve(&[&env, &file]).unwrap().listen.to_string(), "0.0.0.0:5");
}

#[test]
fn unknown_keys_and_bad_values_are_named_with_their_place() {
    let e = file("database = \"a\"\n\n[limits]\nmax_in_flite = 3\n").unwrap_err();
    assert!(e.contains("conf/espalier.toml:4: unknown key `limits.max_in_flite`"), "{e}");
    assert!(e.contains("limits.max_in_flight"), "the message lists the keys: {e}");
    let e = file("prot = 1\n").unwrap_err();
    assert!(e.contains("conf/espalier.toml:1: unknown key `prot`"), "{e}");
    let e = file("[server]\nport = \"7420\"\n").unwrap_err();
    assert!(e.contains("conf/espalier.toml:2: `server.port` must be a whole number, not the string \"7420\""), "{e}");
    let e = file("[log]\nlevel = 3\n").unwrap_err();
    assert!(e.contains(":2: `log.level` must be a string"), "{e}");
    let e = file("[server\n").unwrap_err();
    assert!(e.contains("conf/espalier.toml:1: not TOML"), "{e}");
    let e = file("server = 1\n").unwrap_err();
    assert!(e.contains("unknown key `server` ([server] is a table)"), "{e}");
    let e = file("[limits]\nmax_sessions = -1\n").unwrap_err();
    assert!(e.contains(":2: `limits.max_sessions` must be a whole number, not -1"), "{e}");

    let e = resolve(&[&file("durability = \"fast\"\n").unwrap()]).unwrap_err().to_string();
    assert!(e.contains("conf/espalier.toml:1: durability = \"fast\": not one of sync, periodic, none"), "{e}");
    let e = resolve(&[&env(&[("ESPALIER_LOG_FORMAT", "xml")])]).unwrap_err().to_string();
    assert!(e.contains("ESPALIER_LOG_FORMAT=\"xml\": not one of text, json, logfmt"), "{e}");
    let e = resolve(&[&env(&[("ESPALIER_MAX_SESSIONS", "many")])]).unwrap_err().to_string();
    assert!(e.contains("ESPALIER_MAX_SESSIONS=\"many\": not a whole number"), "{e}");
    let e = resolve(&[&env(&[("ESPALIER_PORT", "70000")])]).unwrap_err().to_string();
    assert!(e.contains("ESPALIER_PORT=\"70000\": a port is a whole number from 0 to 65535"), "{e}");
}

#[test]
fn printed_settings_name_every_source() {
    let file = file("[limits]\nhistory = 5\n").unwrap();
    let env = env(&[("ESPALIER_DURABILITY", "none")]);
    let mut flags = Layer::default();
    flags.flag("server.listen", ":0");
    let s = resolve(&[&flags, &env, &file]).unwrap();
    let toml = s.to_toml();
    assert!(toml.contains("durability = \"none\"") && toml.contains("# environment ESPALIER_DURABILITY"), "{toml}");
    assert!(toml.contains("[limits]") && toml.contains("history = 5") && toml.contains("# file conf/espalier.toml:2"));
    assert!(toml.contains("port = 0") && toml.contains("# flag --listen"), "{toml}");
    assert!(toml.contains("listen = \"127.0.0.1\"") && toml.contains("# default"), "{toml}");
    let json = s.to_json();
    assert_eq!(json["limits.history"], serde_json::json!({"value": 5, "source": "file conf/espalier.toml:2"}));
    assert_eq!(json["server.port"]["source"], "flag --listen");
    // Every key has a variable named after it and a flag.
    for k in KEYS {
        assert!(k.env.starts_with("ESPALIER_") && k.flag.starts_with("--") && !k.about.is_empty(), "{k:?}");
    }
}

#[test]
fn admission_and_memory_limits_resolve() {
    let defaults = resolve(&[]).unwrap().limits;
    assert_eq!(defaults, ServerLimits::default());
    let env = env(&[
        ("ESPALIER_IDLE_TIMEOUT_MS", "1500"),
        ("ESPALIER_REQUEST_TIMEOUT_MS", "250"),
        ("ESPALIER_MAX_CONNECTIONS_PER_ADDRESS", "8"),
        ("ESPALIER_SESSION_QUEUE_BYTES", "1048576"),
        ("ESPALIER_MAX_QUEUED_BYTES", "134217728"),
    ]);
    let file = file("[limits]\nhistory_bytes = 4096\n").unwrap();
    let l = resolve(&[&env, &file]).unwrap().limits;
    assert_eq!(l.idle_timeout, Duration::from_millis(1500));
    assert_eq!(l.request_timeout, Duration::from_millis(250));
    assert_eq!(l.max_connections_per_address, 8);
    assert_eq!((l.session_queue_bytes, l.max_queued_bytes, l.history_bytes), (1 << 20, 128 << 20, 4096));
    // A total budget that cannot hold one reply is refused at start.
    let small = ServerLimits { max_queued_bytes: 1 << 20, ..ServerLimits::default() };
    assert!(small.validate().unwrap_err().to_string().contains("max queued bytes"));
}

#[test]
fn the_in_memory_bound_is_given_in_mib() {
    assert_eq!(resolve(&[]).unwrap().memory_bytes, 256 << 20);
    let file = file("memory_bound = 64\n").unwrap();
    let s = resolve(&[&file]).unwrap();
    assert_eq!((s.memory_bytes, source(&s, "memory_bound")), (64 << 20, "file conf/espalier.toml:1".to_string()));
    let env = env(&[("ESPALIER_MEMORY_BOUND", "0")]);
    let e = resolve(&[&env, &file]).unwrap_err().to_string();
    assert!(e.contains("ESPALIER_MEMORY_BOUND") && e.contains("at least 1 MiB"), "{e}");
}
