//! `espalier migrate NEW_SCHEMA`: each kind of change keeps the data; a lossy or impossible
//! one is refused with its reason and leaves the database as it was.

use std::path::Path;
use std::process::{Command, Output};

mod common;
use common::text;

const BIN: &str = env!("CARGO_BIN_EXE_espalier");

const V1: &str = "root (
    'Customers' -> dictionary (
        'Name' -> text
        'Notes' -> text
        'Tier' -> stategroup ( 'Basic' -> ( ) 'Gold' -> ( 'Since' -> number ) )
    )
    'Orders' -> dictionary (
        'Customer' -> reference ( .^ . 'Customers' )
        'Qty' -> number
        'Spare' -> number
    )
)
";

const DATA: &str = "update (
    'Customers' -> dictionary \"ann\" ( 'Name' -> text \"Ann\" 'Notes' -> text \"pays late\" 'Tier' -> stategroup 'Gold' ( 'Since' -> number 2020 ) )
    'Customers' -> dictionary \"bob\" ( 'Name' -> text \"Bob\" )
    'Orders' -> dictionary \"o1\" ( 'Customer' -> reference \"ann\" 'Qty' -> number 3 )
)";

fn espalier(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN).current_dir(dir).args(["--db", "db"]).args(args).env_remove("ESPALIER_DB").output().unwrap()
}

fn setup(dir: &Path) {
    std::fs::write(dir.join("v1.alan"), V1).unwrap();
    let out = espalier(dir, &["init", "--schema", "v1.alan"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = espalier(dir, &["exec", DATA]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Migrates to `schema` with `args`; returns the output.
fn migrate(dir: &Path, schema: &str, args: &[&str]) -> Output {
    std::fs::write(dir.join("next.alan"), schema).unwrap();
    espalier(dir, &[&["migrate", "next.alan"][..], args].concat())
}

fn get(dir: &Path, path: &str) -> serde_json::Value {
    let out = espalier(dir, &["exec", "--format", "json", &format!("get {path}")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn checked(dir: &Path) {
    let out = espalier(dir, &["check"]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
}

#[test]
fn each_kind_of_change_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    // Add a property (its default), a collection, a state; rename a property and a state;
    // remove an unused property ('Spare' is 0 everywhere).
    let v2 = V1
        .replace("'Notes' -> text", "'Notes' -> text\n        'Email' -> text")
        .replace("'Basic' -> ( ) 'Gold'", "'Basic' -> ( ) 'Silver' -> ( ) 'Premium'")
        .replace("'Qty' -> number\n        'Spare' -> number", "'Quantity' -> number")
        .replace("root (", "root (\n    'Products' -> dictionary ( 'Price' -> number )");
    let out = migrate(d, &v2, &["--rename", "'Qty'='Quantity'", "--rename", "Gold=Premium"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("migrated db to next.alan"), "{}", text(&out.stderr));
    checked(d);
    let ann = get(d, ". 'Customers' : \"ann\"");
    assert_eq!(ann["Email"], "", "{ann}");
    assert_eq!(ann["Tier"]["Premium"]["Since"], 2020, "{ann}");
    let o1 = get(d, ". 'Orders' : \"o1\"");
    assert_eq!(o1["Quantity"], 3, "{o1}");
    assert_eq!(o1["Customer"], "ann", "{o1}");
    assert!(o1.get("Spare").is_none());
    let out = espalier(d, &["exec", "update ( 'Products' -> dictionary \"nut\" ( 'Price' -> number 2 ) )"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = espalier(d, &["exec", "update . 'Customers' : \"bob\" ( 'Tier' -> stategroup 'Silver' set to ( ) )"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The database now has the new schema text.
    let dump = text(&espalier(d, &["export"]).stdout);
    assert!(dump.contains("'Silver'"), "{dump}");
}

#[test]
fn lossy_or_impossible_changes_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let before = espalier(d, &["export"]).stdout;
    let without_notes = V1.replace("        'Notes' -> text\n", "");
    let cases: Vec<(String, Vec<&str>, &str)> = vec![
        (
            without_notes.clone(),
            vec![],
            "'Notes' is not in the new schema and 1 node(s) hold a value (first: root 'Customers' : \"ann\" 'Notes'); --allow-loss 'Notes' drops it",
        ),
        (V1.replace("'Qty' -> number", "'Qty' -> text"), vec![], "root 'Orders' : \"o1\" 'Qty': changes from number to text"),
        (V1.replace("'Gold' -> ( 'Since' -> number )", "'Premium' -> ( 'Since' -> number )"), vec![], "is in state 'Gold', which the new schema does not have"),
        (V1.replace("'Spare' -> number", "'Spare' -> number\n        'Helper' -> reference ( .^ . 'Customers' )"), vec![], "'Helper': is a new reference"),
        (without_notes.clone(), vec!["--rename", "Nope=Notes"], "--rename 'Nope'='Notes': the old schema has no property or state 'Nope'"),
        ("root ( 'x' -> nonsense )".into(), vec![], "next.alan does not compile; nothing was changed"),
    ];
    for (schema, args, expected) in &cases {
        let out = migrate(d, schema, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{expected}: {err}");
        assert!(err.contains(expected), "expected {expected:?} in {err}");
        assert_eq!(espalier(d, &["export"]).stdout, before, "{expected}: the database changed");
    }
    let leftovers: Vec<_> = std::fs::read_dir(d).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    assert_eq!(leftovers.len(), 3, "only db, v1.alan and next.alan: {leftovers:?}");
    // Named, the loss is allowed.
    let out = migrate(d, &without_notes, &["--allow-loss", "Notes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    checked(d);
    assert!(get(d, ". 'Customers' : \"ann\"").get("Notes").is_none());
}
