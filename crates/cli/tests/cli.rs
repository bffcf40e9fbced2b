//! The `espalier` binary end to end, each test in its own temporary directory.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_espalier");

/// Runs `espalier args…` in `dir` with `stdin` as standard input.
fn run_in(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env_remove("ESPALIER_DB")
        .env("ESPALIER_HISTORY", dir.join("history"))
        .env("HOME", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run espalier");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write stdin");
    drop(input);
    child.wait_with_output().expect("wait for espalier")
}

fn run(dir: &Path, args: &[&str]) -> Output {
    run_in(dir, args, "")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

/// Asserts success and returns stdout.
fn ok(dir: &Path, args: &[&str]) -> String {
    let o = run(dir, args);
    assert_eq!(code(&o), 0, "espalier {args:?}\nstdout:\n{}\nstderr:\n{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// A temporary directory with the demo database at ./espalier.db.
fn demo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ok(dir.path(), &["--durability", "none", "init", "--demo"]);
    dir
}

const GOOD_SCHEMA: &str = "root (\n    'Items' -> dictionary (\n        'Count' -> number\n    )\n)\n";

#[test]
fn schema_check_good_prints_summary() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.alan"), GOOD_SCHEMA).unwrap();
    let out = ok(dir.path(), &["schema", "check", "good.alan"]);
    assert!(out.contains("good.alan: ok"), "{out}");
    assert!(out.contains("node types"), "{out}");
    assert!(out.contains("records:"), "{out}");
}

#[test]
fn schema_check_bad_shows_caret_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.alan"), "root (\n    'a' -> nmber\n)\n").unwrap();
    let o = run(dir.path(), &["schema", "check", "bad.alan"]);
    assert_eq!(code(&o), 1);
    let err = stderr(&o);
    assert!(err.contains("bad.alan:2:12: error: unknown property kind `nmber`"), "{err}");
    assert!(err.contains("2 |     'a' -> nmber\n  |            ^^^^^"), "{err}");
    assert!(stdout(&o).is_empty());
}

#[test]
fn schema_check_reports_command_body_errors() {
    let dir = tempfile::tempdir().unwrap();
    let src = format!(
        "{GOOD_SCHEMA}command 'bump' ( 'item' -> text ) (\n    update . 'Items' : $item ( 'Cont' -> number + 1 )\n)\n"
    );
    std::fs::write(dir.path().join("cmd.alan"), src).unwrap();
    let o = run(dir.path(), &["schema", "check", "cmd.alan"]);
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("cmd.alan:7:"), "{err}");
    assert!(err.contains("in command 'bump'"), "{err}");
    assert!(err.contains("'Cont'"), "{err}");
    assert!(err.contains('^'), "{err}");
}

#[test]
fn demo_schema_file_checks() {
    let dir = tempfile::tempdir().unwrap();
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../demo/factory.alan");
    let out = ok(dir.path(), &["schema", "check", demo]);
    assert!(out.contains("'start task'"), "{out}");
}

#[test]
fn init_demo_then_query_as_table_and_json() {
    let dir = demo();
    let q = "collection select . 'Orders' 'Qty' -> number : 'Quantity' 'Client' -> reference : 'Client'";
    let table = ok(dir.path(), &["exec", q]);
    assert!(table.contains("key"), "{table}");
    assert!(table.contains("Qty"), "{table}");
    assert!(table.contains("o1") && table.contains("500") && table.contains("c1"), "{table}");
    assert!(table.trim_end().ends_with("total: 3"), "{table}");

    let json = ok(dir.path(), &["exec", q, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["total"], 3);
    assert_eq!(v["columns"], serde_json::json!(["Qty", "Client"]));
    assert_eq!(v["rows"][0], serde_json::json!({"key": ["o1"], "values": [500, "c1"]}));

    // The global --json means the same.
    let json2 = ok(dir.path(), &["--json", "exec", q]);
    assert_eq!(json, json2);
}

#[test]
fn get_prints_the_node_as_json() {
    let dir = demo();
    let out = ok(dir.path(), &["exec", "get . 'Machines' : \"M1\""]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["Pulses"], 2);
    assert_eq!(v["Current Task"]["Selected"]["Current Order"], "o1");
}

#[test]
fn params_are_passed() {
    let dir = demo();
    let out =
        ok(dir.path(), &["exec", "collection . 'Clients' : $c select 'Name' -> text : 'Name'", "--param", "c=c2"]);
    assert!(out.contains("Abbott & Sons"), "{out}");
    // A command with a number parameter given as text.
    ok(
        dir.path(),
        &[
            "exec",
            "command 'start task' ( 'machine' -> $m 'order' -> $o 'time' -> $t )",
            "-p",
            "m=M2",
            "-p",
            "o=o2",
            "-p",
            "t=42",
        ],
    );
    let out = ok(dir.path(), &["--json", "exec", "get . 'Machines' : \"M2\""]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["Current Task"]["Selected"]["Status"]["Started"]["Starting Time"], 42);
    // A missing parameter is an instruction error.
    let o = run(dir.path(), &["exec", "get . 'Clients' : $nope"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("$nope"), "{}", stderr(&o));
}

#[test]
fn mutation_then_query_sees_it() {
    let dir = demo();
    let out = ok(dir.path(), &["exec", "update . 'Orders' : \"o2\" ( 'Quantity' -> number + 7 )"]);
    assert!(out.starts_with("done: version "), "{out}");
    assert!(out.contains("1 change"), "{out}");
    let out = ok(dir.path(), &["--json", "exec", "collection . 'Orders' : \"o2\" select 'Q' -> number : 'Quantity'"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rows"][0]["values"][0], 57);
    // The JSON form of an instruction works too.
    let out = ok(
        dir.path(),
        &["--json", "exec", r#"{"get":{"path":[{"dictionary":{"name":"Orders","key":{"text":"o2"}}}]}}"#],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["Quantity"], 57);
}

#[test]
fn instruction_errors_exit_2_with_code() {
    let dir = demo();
    let o = run(dir.path(), &["exec", "update ( 'Clients' -> dictionary \"c1\" ( ) )"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).starts_with("error[key_exists]: "), "{}", stderr(&o));
    let o = run(dir.path(), &["exec", "update ( 'Clients' -> dictionary \"c9\" ( 'Name' -> txt \"x\" ) )"]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(err.starts_with("error[syntax]: "), "{err}");
    assert!(err.contains("^^^"), "{err}");
    // Nothing of the failed instructions stayed.
    let o = run(dir.path(), &["exec", "get . 'Clients' : \"c9\""]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("error[key_missing]"), "{}", stderr(&o));
}

#[test]
fn other_failures_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &["exec", "get"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("no database at ./espalier.db"), "{}", stderr(&o));
    assert!(stderr(&o).contains("espalier init --demo"), "{}", stderr(&o));
}

#[test]
fn exec_reads_stdin_and_files() {
    let dir = demo();
    let o = run_in(dir.path(), &["exec", "-"], "command 'pulse' ( 'machine' -> \"M3\" )\n");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    std::fs::write(
        dir.path().join("script.alan"),
        "// two pulses\ncommand 'pulse' ( 'machine' -> \"M3\" )\ncollection . 'Machines' : \"M3\" select 'P' -> number : 'Pulses'\n",
    )
    .unwrap();
    let out = ok(dir.path(), &["exec", "--file", "script.alan"]);
    assert!(out.starts_with("done: version"), "{out}");
    assert!(out.contains("┆ 2 │"), "{out}");
}

#[test]
fn db_flag_and_env() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.alan"), GOOD_SCHEMA).unwrap();
    ok(dir.path(), &["--db", "items.db", "init", "--schema", "s.alan"]);
    let o = Command::new(BIN)
        .args(["exec", "update ( 'Items' -> dictionary \"a\" ( 'Count' -> number 3 ) )"])
        .current_dir(dir.path())
        .env("ESPALIER_DB", "items.db")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = ok(dir.path(), &["--db", "items.db", "exec", "collection select . 'Items' 'C' -> number : 'Count'"]);
    assert!(out.contains("total: 1"), "{out}");
    assert!(!dir.path().join("espalier.db").exists());
}

#[test]
fn shell_runs_stdin_blocks() {
    let dir = demo();
    let script = "\
update (
    'Clients' -> dictionary \"c4\" (
        'Name' -> text \"Delta (\\\"paren\\\" in a string)\"
    )
)
.schema
update ( 'Clients' -> dictionary \"c4\" ( ) )
collection select . 'Clients' 'Name' -> text : 'Name'
.format json
get . 'Clients' : \"c4\"
";
    let o = run_in(dir.path(), &["shell"], script);
    let out = stdout(&o);
    let err = stderr(&o);
    // The multi-line instruction ran.
    assert!(out.contains("done: version"), "{out}");
    // .schema printed the source.
    assert!(out.contains("'Current Task' -> stategroup"), "{out}");
    // The error was reported, and the shell went on.
    assert!(err.contains("error[key_exists]"), "{err}");
    assert!(out.contains("total: 4"), "{out}");
    assert!(out.contains("\"Name\": \"Delta (\\\"paren\\\" in a string)\""), "{out}");
    // Any failure makes a script's exit status 2.
    assert_eq!(code(&o), 2);
}

#[test]
fn shell_succeeds_when_everything_does() {
    let dir = demo();
    let o = run_in(dir.path(), &["shell"], ".describe\ncommand 'pulse' ( 'machine' -> \"M1\" )\n.quit\nget\n");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("commands:"), "{out}");
    assert!(out.contains("done: version"), "{out}");
    assert!(!out.contains("\"Clients\""), "nothing runs after .quit: {out}");
}

/// `help` (without the dot) prints the shell's help, as `.help` does; `quit` leaves.
#[test]
fn shell_knows_help_without_the_dot() {
    let dir = demo();
    let o = run_in(dir.path(), &["shell"], ".help\n");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let dotted = stdout(&o);
    assert!(dotted.contains("Shell commands:") && dotted.contains("Tab completes"), "{dotted}");
    let o = run_in(dir.path(), &["shell"], "help\nget . 'Machines' : \"M1\"\nquit\nget\n");
    assert_eq!(code(&o), 0, "help is no failed instruction: {}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with(&dotted), "help prints what .help prints:\n{out}");
    assert!(out.contains("\"Pulses\""), "the shell goes on after help: {out}");
    assert!(!out.contains("\"Clients\""), "nothing runs after quit: {out}");
}

#[test]
fn shell_reports_unclosed_input() {
    let dir = demo();
    let o = run_in(dir.path(), &["shell"], "update (\n 'Clients' -> dictionary \"c5\" (\n");
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("error[syntax]"), "{}", stderr(&o));
}

#[test]
fn export_import_export_is_identical() {
    let dir = demo();
    ok(dir.path(), &["exec", "command 'pulse' ( 'machine' -> \"M2\" )"]);
    ok(dir.path(), &["export", "one.json"]);
    ok(dir.path(), &["--db", "copy.db", "import", "one.json"]);
    ok(dir.path(), &["--db", "copy.db", "export", "two.json"]);
    let one = std::fs::read(dir.path().join("one.json")).unwrap();
    let two = std::fs::read(dir.path().join("two.json")).unwrap();
    assert!(one == two, "dumps differ");
    // Export to standard output gives the same bytes.
    let o = run(dir.path(), &["export"]);
    assert_eq!(code(&o), 0);
    assert!(o.stdout == one);
    // The copy works and checks clean.
    ok(dir.path(), &["--db", "copy.db", "check"]);
    let out = ok(dir.path(), &["--db", "copy.db", "exec", "get . 'Machines' : \"M2\""]);
    assert!(out.contains("\"Pulses\": 1"), "{out}");
    // Import refuses an existing database.
    let o = run(dir.path(), &["--db", "copy.db", "import", "one.json"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("copy.db already holds a database"), "{}", stderr(&o));
}

#[test]
fn check_passes_on_a_good_database() {
    let dir = demo();
    let out = ok(dir.path(), &["check"]);
    assert!(out.contains("records:"), "{out}");
    assert!(out.contains("ok: no problems"), "{out}");
    let out = ok(dir.path(), &["--json", "check"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["problems"], serde_json::json!([]));
    assert!(v["records"].as_u64().unwrap() > 0);
}

#[test]
fn check_reports_a_torn_last_write_that_recovery_cut() {
    let dir = demo();
    let before = ok(dir.path(), &["export"]);
    // The remains of a write a crash interrupted: a record header claiming more bytes than
    // follow, after the last good record.
    let log = dir.path().join("espalier.db").join("log");
    let segment = std::fs::read_dir(&log)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "log"));
    let segment = segment.expect("a log segment");
    let mut bytes = std::fs::read(&segment).unwrap();
    // Walk the records (docs: `storage/src/log.rs`): a 24-byte segment header, then each
    // record's 16-byte header and its payload padded to 8 bytes, until a zero length word or the
    // end of the file.
    let mut end = 24;
    while end + 4 <= bytes.len() {
        let word = u32::from_le_bytes(bytes[end..end + 4].try_into().unwrap());
        if word == 0 {
            break;
        }
        end += 16 + ((word & 0x7FFF_FFFF) as usize).div_ceil(8) * 8;
    }
    bytes.truncate(end);
    bytes.extend_from_slice(&[0x40, 0, 0, 0x80, 1, 2, 3, 4, 99, 0, 0, 0, 0, 0, 0, 0, 7, 7]);
    std::fs::write(&segment, &bytes).unwrap();
    let out = ok(dir.path(), &["check"]);
    assert!(out.contains("recovery: cut an incomplete last write"), "{out}");
    assert!(out.contains("ok: no problems"), "{out}");
    // Nothing acknowledged was lost, and the next open finds a clean log.
    assert_eq!(ok(dir.path(), &["export"]), before);
    let out = ok(dir.path(), &["--json", "check"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["log"]["torn_write_cut"], serde_json::Value::Null, "{out}");
    assert!(v["log"]["commits_replayed"].as_u64().unwrap() > 0, "{out}");
}

#[test]
fn init_refuses_to_overwrite() {
    let dir = demo();
    let before = ok(dir.path(), &["export"]);
    let o = run(dir.path(), &["init", "--demo"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("./espalier.db already holds a database"), "{}", stderr(&o));
    assert_eq!(ok(dir.path(), &["export"]), before);
    // A non-empty directory that is not a database is not touched either.
    std::fs::create_dir(dir.path().join("other")).unwrap();
    std::fs::write(dir.path().join("other/keep.txt"), "x").unwrap();
    let o = run(dir.path(), &["--db", "other", "init", "--demo"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("not empty"), "{}", stderr(&o));
}

#[test]
fn init_with_a_bad_schema_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.alan"), "root ( 'a' -> reference ( . 'b' ) )").unwrap();
    let o = run(dir.path(), &["init", "--schema", "bad.alan"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("bad.alan:1:"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only bad.alan is left");
}

#[test]
fn bad_dumps_leave_nothing_behind() {
    let dir = demo();
    ok(dir.path(), &["export", "good.json"]);
    let good = std::fs::read_to_string(dir.path().join("good.json")).unwrap();
    let cases = [
        ("garbage.json", "this is not json".to_string()),
        ("truncated.json", good[..good.len() / 2].to_string()),
        ("dangling.json", good.replacen("\"Client\": \"c2\"", "\"Client\": \"nobody\"", 1)),
        ("unknown.json", good.replacen("\"Quantity\"", "\"Qantity\"", 1)),
    ];
    for (file, text) in cases {
        assert_ne!(text, good, "{file} must differ from the good dump");
        std::fs::write(dir.path().join(file), &text).unwrap();
        let o = run(dir.path(), &["--db", "new.db", "import", file]);
        assert_eq!(code(&o), 1, "{file}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.starts_with("error: "), "{file}: {err}");
        assert!(err.contains(file), "{file}: {err}");
        assert!(!dir.path().join("new.db").exists(), "{file} left a database");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("partial"))
            .collect();
        assert!(leftovers.is_empty(), "{file} left {leftovers:?}");
    }
}

#[test]
fn serve_without_a_database_says_how_to_make_one() {
    // The server itself is tested in tests/serve.rs.
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &["serve"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("no database at"), "{}", stderr(&o));
    assert!(stderr(&o).contains("init --demo"), "{}", stderr(&o));
}

#[test]
fn no_subcommand_prints_help() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(dir.path(), &[]);
    assert!(out.contains("Usage: espalier"), "{out}");
    for sub in ["schema", "init", "exec", "shell", "export", "import", "check", "serve"] {
        assert!(out.contains(sub), "{sub} missing from\n{out}");
    }
    // Usage errors are failures that are not an instruction's: status 1.
    let o = run(dir.path(), &["exec"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("Usage:"), "{}", stderr(&o));
    let o = run(dir.path(), &["--durability", "sometimes", "check"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let o = run(dir.path(), &["init"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("--schema"), "{}", stderr(&o));
    let long = ok(dir.path(), &["exec", "--help"]);
    assert!(long.contains("Examples:"), "{long}");
    assert!(long.contains("--param"), "{long}");
}
