//! The whole benchmark at CI size: Espalier and SQLite agree on every operation's answer
//! and on the database's state after every update (the run fails otherwise).

use espalier_oo7::bench::{run, Config};

#[test]
fn quick_run_agrees_on_every_operation() {
    let report = run(&Config::quick()).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<(&str, &str)> = report.ops.iter().map(|r| (r.op.as_str(), r.mode)).collect();
    for op in ["T1", "T1 one", "T1 many", "T2a", "T2b", "T2c", "T3a", "T3b", "T3c", "T6", "T8", "T9", "CU"] {
        assert!(names.contains(&(op, "hot")), "{op} missing from {names:?}");
    }
    for op in ["Q1", "Q2", "Q3", "Q4", "Q5", "Q7", "Q8", "Q8 coded"] {
        assert!(names.contains(&(op, "hot")) && names.contains(&(op, "cold")), "{op} missing from {names:?}");
    }
    assert!(names.contains(&("insert", "hot")) && names.contains(&("delete", "hot")));
    let md = report.to_markdown();
    assert!(md.contains("| T1 | hot |"), "{md}");
    println!("{md}");
}

#[test]
fn only_runs_the_operations_asked_for() {
    use espalier_oo7::Op;
    assert_eq!(Op::parse("q8-coded"), Some(Op::Q8Coded));
    assert_eq!(Op::parse("T1_one"), Some(Op::T1One));
    assert_eq!(Op::parse("T4"), None);
    assert!(Op::ALL.iter().all(|op| Op::parse(op.name()) == Some(*op)));
    let config = Config { only: vec![Op::Q1, Op::Delete], ..Config::quick() };
    let report = run(&config).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<(&str, &str)> = report.ops.iter().map(|r| (r.op.as_str(), r.mode)).collect();
    assert_eq!(names, [("Q1", "hot"), ("Q1", "cold"), ("insert", "hot"), ("delete", "hot")]);
}
