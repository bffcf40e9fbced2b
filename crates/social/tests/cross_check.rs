//! The whole in-process run at CI size: every query (and the three commands) answered by
//! Espalier equals the answer SQL over SQLite computes — the run fails on the first
//! difference or on a count mismatch — and the answers are not trivially empty.

use espalier_social::bench::{build, run, Config};
use espalier_social::espalier::{answer, results, Via};
use espalier_social::queries::draws;
use espalier_social::sqlite::SocialSqlite;
use espalier_social::{Query, Size};

#[test]
fn quick_run_agrees_on_every_query() {
    let report = run(&Config::quick()).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = report.ops.iter().map(|r| r.query.as_str()).collect();
    for q in Query::ALL {
        assert!(names.contains(&q.name()), "{} missing from {names:?}", q.name());
    }
    for q in ["friend-recommendations (command)", "fof-2 (command)", "fof-3 (command)"] {
        assert!(names.contains(&q), "{q} missing from {names:?}");
    }
    let md = report.to_markdown();
    assert!(md.contains("| fof-3 |"), "{md}");
    assert!(report.chart_svg().contains("<svg"));
    println!("{md}");
}

#[test]
fn answers_are_checked_and_mostly_not_empty() {
    let dir = tempfile::tempdir().unwrap();
    let built = build(Size::Tiny, 11, dir.path()).unwrap();
    let mut sql = SocialSqlite::new(&built.sqlite).unwrap();
    for q in Query::ALL {
        let mut nonempty = 0;
        for d in draws(&built.net, 10, 5) {
            let want = sql.run(q, &d).unwrap();
            let got = answer(q, &d, &results(q, built.espalier.run(q, Via::Query, &d).unwrap()).unwrap(), &built.net)
                .unwrap();
            assert_eq!(got, want, "{} for {d:?}", q.name());
            nonempty += usize::from(!want.rows.is_empty());
        }
        assert!(nonempty >= 5, "{}: only {nonempty} of 10 answers have rows", q.name());
    }
}

#[test]
fn a_wrong_answer_is_caught() {
    // The comparison the run makes is not vacuous: another person's answer differs.
    let dir = tempfile::tempdir().unwrap();
    let built = build(Size::Tiny, 11, dir.path()).unwrap();
    let mut sql = SocialSqlite::new(&built.sqlite).unwrap();
    let ds = draws(&built.net, 2, 9);
    let (a, b) = (&ds[0], &ds[1]);
    assert_ne!(a.person, b.person);
    let q = Query::Friends;
    let got = answer(q, a, &results(q, built.espalier.run(q, Via::Query, a).unwrap()).unwrap(), &built.net).unwrap();
    assert_ne!(got, sql.run(q, b).unwrap());
}

#[test]
fn a_count_mismatch_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(Size::Tiny, 3, dir.path()).unwrap();
    espalier_social::bench::check_counts(&built.net, &built.espalier, &built.sqlite).unwrap();
    built.net.params.messages += 1;
    let e = espalier_social::bench::check_counts(&built.net, &built.espalier, &built.sqlite).unwrap_err();
    assert!(e.to_string().contains("count mismatch: 801 messages"), "{e}");
}
