//! The official scale-factor-1 models (`../shared/data/trainbenchmark`): the XMI and CSV
//! forms agree, the tree rebuilt from the CSV form is the XMI's, the generator reproduces
//! them, and every query's matches in Espalier (model read from XMI) equal SQL's in SQLite
//! (tables read from CSV); batch has no match at all.

use std::path::PathBuf;

use espalier_trainbenchmark::queries::{espalier_matches, sql_matches, sqlite_of};
use espalier_trainbenchmark::{csv, generate, read_xmi, Query, Scenario};
use espalier_transaction::{DatabaseOptions, Durability};

fn data() -> PathBuf {
    // CI runs in a clone with ../shared beside it (see .ci/run).
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/trainbenchmark")
}

#[test]
fn official_models_queries_match_sql() {
    let dir = data();
    assert!(dir.is_dir(), "{} is missing: the official models come from ../shared", dir.display());
    let mut repair_matches = 0;
    for scenario in [Scenario::Batch, Scenario::Inject, Scenario::Repair] {
        let prefix = format!("railway-{}-1", scenario.name());
        let model = read_xmi(&dir.join(format!("{prefix}.xmi"))).unwrap();
        let tables = csv::read(&dir, &prefix).unwrap();
        assert_eq!(model.tables(), tables, "{prefix}: the XMI and CSV forms differ");
        let from_csv = espalier_trainbenchmark::read_csv_model(&dir, &prefix).unwrap();
        assert_eq!(from_csv, model, "{prefix}: the tree rebuilt from the CSV form is not the XMI's");
        assert_eq!(generate(scenario, 1), model, "{prefix}: the generator does not reproduce the official model");

        let tmp = tempfile::tempdir().unwrap();
        let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
        let engine = espalier_trainbenchmark::create(&tmp.path().join("db"), &model, opts).unwrap();
        let conn = sqlite_of(&tables).unwrap();
        for q in Query::ALL {
            let ours = espalier_matches(&engine, q).unwrap_or_else(|e| panic!("{prefix} {}: {e}", q.name()));
            let sql = sql_matches(&conn, q).unwrap();
            assert_eq!(ours, sql, "{prefix} {}", q.name());
            let mut dedup = ours.clone();
            dedup.dedup();
            assert_eq!(dedup.len(), ours.len(), "{prefix} {}: a match twice", q.name());
            if scenario == Scenario::Batch {
                assert!(ours.is_empty(), "{prefix} {}: the batch model has no faults", q.name());
            }
            if scenario == Scenario::Repair {
                repair_matches += ours.len();
            }
            println!("{prefix} {}: {} matches", q.name(), ours.len());
        }
    }
    assert!(repair_matches > 0, "the repair model has faults to find");
}
