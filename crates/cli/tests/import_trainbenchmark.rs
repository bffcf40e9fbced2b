//! `espalier import --trainbenchmark`: the official models from their XMI file and from their
//! CSV files give the same database; a broken model file is named and leaves nothing behind.

use std::path::{Path, PathBuf};

mod common;
use common::{espalier_on, text};

fn data() -> PathBuf {
    // CI runs in a clone with ../shared beside it (see .ci/run).
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/trainbenchmark")
}

fn import(db: &Path, model: &Path) -> std::process::Output {
    espalier_on(db, &["import", "--trainbenchmark", model.to_str().expect("utf-8 path")])
}

#[test]
fn the_xmi_and_csv_forms_import_to_the_same_database() {
    let tmp = tempfile::tempdir().unwrap();
    for scenario in ["batch", "inject", "repair"] {
        let prefix = data().join(format!("railway-{scenario}-1"));
        let from_xmi = tmp.path().join(format!("{scenario}-xmi"));
        let from_csv = tmp.path().join(format!("{scenario}-csv"));
        let out = import(&from_xmi, &prefix.with_extension("xmi"));
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("(5 regions, 5 routes)"), "{}", text(&out.stderr));
        let out = import(&from_csv, &prefix);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let check = espalier_on(&from_csv, &["check"]);
        assert!(check.status.success() && text(&check.stdout).contains("no problems"), "{}", text(&check.stdout));
        let dumps: Vec<Vec<u8>> = [&from_xmi, &from_csv]
            .iter()
            .map(|db| {
                let out = espalier_on(db, &["export"]);
                assert!(out.status.success(), "{}", text(&out.stderr));
                out.stdout
            })
            .collect();
        assert!(dumps[0].len() > 100_000, "the {scenario} model is whole");
        assert!(dumps[0] == dumps[1], "{scenario}: the XMI and CSV imports differ");
    }
}

#[test]
fn a_broken_model_is_named_and_no_database_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("model");
    std::fs::create_dir(&copy).unwrap();
    for entry in std::fs::read_dir(data()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("railway-repair-1-") {
            std::fs::copy(&path, copy.join(&name)).unwrap();
        }
    }
    let segments = copy.join("railway-repair-1-Segment.csv");
    let text_of = std::fs::read_to_string(&segments).unwrap();
    std::fs::write(&segments, text_of.replacen("\"504\"", "\"five hundred\"", 1)).unwrap();
    let db = tmp.path().join("db");
    let out = import(&db, &copy.join("railway-repair-1"));
    assert!(!out.status.success());
    let message = text(&out.stderr);
    assert!(message.contains("railway-repair-1-Segment.csv:2: \"five hundred\" is not a number"), "{message}");
    assert!(!db.exists(), "nothing is created");

    // A sensor numbered below every region: no region can hold it.
    std::fs::write(&segments, text_of).unwrap();
    let sensors = copy.join("railway-repair-1-Sensor.csv");
    let mut s = std::fs::read_to_string(&sensors).unwrap();
    s.push_str("\"0\"\n");
    std::fs::write(&sensors, s).unwrap();
    let out = import(&db, &copy.join("railway-repair-1"));
    assert!(!out.status.success());
    let message = text(&out.stderr);
    assert!(message.contains("railway-repair-1-Sensor.csv: 0 has a smaller id than every region"), "{message}");
    assert!(!db.exists(), "nothing is created");

    let out = import(&db, &copy.join("railway-nothing-1"));
    assert!(text(&out.stderr).contains("neither an .xmi file nor the prefix of CSV files"), "{}", text(&out.stderr));
}
