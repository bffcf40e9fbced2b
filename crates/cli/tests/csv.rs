//! `espalier import --csv` and `export --csv`: errors with file:line:column that leave the
//! database as it was, and a round trip.

use std::path::Path;
use std::process::{Command, Output};

mod common;
use common::text;

const BIN: &str = env!("CARGO_BIN_EXE_espalier");

const SCHEMA: &str = "root (
    'Customers' -> dictionary (
        'Name' -> text
        'Tier' -> stategroup ( 'Basic' -> ( ) 'Gold' -> ( ) )
    )
    'Products' -> dictionary (
        'Price' -> number
    )
    'Orders' -> dictionary (
        'Customer' -> reference ( .^ . 'Customers' )
        'Product' -> reference ( .^ . 'Products' )
        'Quantity' -> number
    )
)
";

fn espalier(dir: &Path, db: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(dir)
        .args(["--db", db])
        .args(args)
        .env_remove("ESPALIER_DB")
        .output()
        .expect("run espalier")
}

/// A database `db` with the schema and a first import of customers and products.
fn setup(dir: &Path) {
    std::fs::write(dir.join("shop.alan"), SCHEMA).unwrap();
    let out = espalier(dir, "db", &["init", "--schema", "shop.alan"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::write(dir.join("Customers.csv"), "key,Name,Tier\nann,\"Ann, Ltd\",Gold\nbob,Bob,\n").unwrap();
    std::fs::write(dir.join("Products.csv"), "key,Price\nnut,3\nbolt,5\n").unwrap();
    let out = espalier(dir, "db", &["import", "--csv", "Customers.csv", "Products.csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn bad_files_are_refused_with_their_place_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let before = espalier(d, "db", &["export"]).stdout;
    let cases: &[(&str, &str, &str)] = &[
        // Bad header: a property the entries do not have.
        ("key,Customer,Qty\no1,ann,1\n", "Orders.csv:1:14: 'Orders' entries have no property 'Qty'", "bad header"),
        ("Customer,Quantity\nann,1\n", "Orders.csv:1:1: the header has no `key` column", "no key column"),
        // Unknown key: a reference to a customer that exists nowhere.
        (
            "key,Customer,Quantity\no1,ann,1\no2,carl,2\n",
            "Orders.csv:3:4: unknown key \"carl\": 'Customers' has no such entry",
            "unknown key",
        ),
        // Wrong type.
        (
            "key,Customer,Quantity\no1,ann,many\n",
            "Orders.csv:2:8: 'Quantity' is a number: \"many\" is not a whole number",
            "wrong type",
        ),
        // Duplicate key, in the file.
        ("key,Quantity\no1,1\no2,2\no1,3\n", "Orders.csv:4:1: duplicate key \"o1\" (first on line 2)", "duplicate key"),
        ("key,Quantity\no1,1\no2\n", "Orders.csv:3:1: the row has 1 fields; the header has 2", "short row"),
        ("key,Quantity\n\"o1,1\n", "Orders.csv:2:1: a quoted field is not closed", "open quote"),
    ];
    for (csv, expected, what) in cases {
        std::fs::write(d.join("Orders.csv"), csv).unwrap();
        // With a good file beside it: nothing of either is imported.
        std::fs::write(d.join("Products.csv"), "key,Price\nscrew,1\n").unwrap();
        let out = espalier(d, "db", &["import", "--csv", "Products.csv", "Orders.csv"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(err.contains(expected), "{what}: expected {expected:?} in {err}");
        assert!(err.contains("nothing was imported"), "{what}: {err}");
        assert_eq!(espalier(d, "db", &["export"]).stdout, before, "{what}: the database changed");
    }
    // Duplicate key with the database, and a state that does not exist.
    std::fs::write(d.join("More.csv"), "key,Name\ncid,Cid\nbob,Bob again\n").unwrap();
    let out = espalier(d, "db", &["import", "--csv", "Customers=More.csv"]);
    assert!(
        text(&out.stderr).contains("More.csv:3:1: key \"bob\" already exists in 'Customers'"),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(d.join("More.csv"), "key,Tier\ncid,Platinum\n").unwrap();
    let out = espalier(d, "db", &["import", "--csv", "Customers=More.csv"]);
    assert!(
        text(&out.stderr).contains("More.csv:2:5: 'Tier' has no state 'Platinum' (its states: Basic, Gold)"),
        "{}",
        text(&out.stderr)
    );
    let out = espalier(d, "db", &["import", "--csv", "Nowhere.csv"]);
    assert!(text(&out.stderr).contains("Nowhere.csv: the root has no collection 'Nowhere'"), "{}", text(&out.stderr));
    assert_eq!(espalier(d, "db", &["export"]).stdout, before, "the database changed");
}

#[test]
fn export_then_import_gives_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    // References to entries of the same import, in files given before their targets'.
    std::fs::write(d.join("Orders.csv"), "key,Customer,Product,Quantity\no1,ann,nut,10\no2,cid,bolt,\n").unwrap();
    std::fs::write(d.join("c.csv"), "key,Name,Tier\ncid,\"Cid \"\"the\"\" Kid\",Basic\n").unwrap();
    let out = espalier(d, "db", &["import", "--csv", "Orders.csv", "Customers=c.csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = espalier(d, "db", &["export", "--csv", "out"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(d.join("out/Orders.csv")).unwrap(),
        "key,Customer,Product,Quantity\r\no1,ann,nut,10\r\no2,cid,bolt,0\r\n"
    );
    assert!(std::fs::read_to_string(d.join("out/Customers.csv"))
        .unwrap()
        .contains("cid,\"Cid \"\"the\"\" Kid\",Basic"));

    let out = espalier(d, "copy", &["init", "--schema", "shop.alan"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let files = ["out/Orders.csv", "out/Products.csv", "out/Customers.csv"];
    let out = espalier(d, "copy", &[&["import", "--csv"][..], &files].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = espalier(d, "copy", &["export", "--csv", "again"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for f in ["Customers.csv", "Products.csv", "Orders.csv"] {
        assert_eq!(
            std::fs::read(d.join("out").join(f)).unwrap(),
            std::fs::read(d.join("again").join(f)).unwrap(),
            "{f}"
        );
    }
    assert!(espalier(d, "copy", &["check"]).status.success());
}

/// More entries than one page of the export (10,000): every entry once, in key order; and an
/// import beside them finds every existing key (the same key-range pages).
#[test]
fn export_reads_every_page_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let mut csv = String::from("key,Price\n");
    for i in 0..25_003 {
        csv.push_str(&format!("p{i:06},{i}\n"));
    }
    std::fs::write(d.join("Many.csv"), csv).unwrap();
    let out = espalier(d, "db", &["import", "--csv", "Products=Many.csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Another import of one of them is refused: the existing keys were all found.
    std::fs::write(d.join("Again.csv"), "key,Price\np025002,1\n").unwrap();
    let out = espalier(d, "db", &["import", "--csv", "Products=Again.csv"]);
    assert!(!out.status.success(), "an existing key imported again");
    assert!(text(&out.stderr).contains("p025002"), "{}", text(&out.stderr));
    let out = espalier(d, "db", &["export", "--csv", "out"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let exported = std::fs::read_to_string(d.join("out/Products.csv")).unwrap();
    let keys: Vec<&str> = exported.lines().skip(1).filter_map(|l| l.split(',').next()).collect();
    assert_eq!(keys.len(), 25_003 + 2, "the generated products and bolt, nut");
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, keys, "in key order, each once");
}
