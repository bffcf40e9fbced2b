//! The six queries on a hand-built railway whose matches are worked out by hand (in the
//! comments), and on a generated model larger than the official one, checked against SQL.

use espalier_trainbenchmark::model::{
    ElementKind, Model, Position, Region, Route, Semaphore, Signal, SwitchPosition, TrackElement,
};
use espalier_trainbenchmark::queries::{espalier_matches, sql_matches, sqlite_of};
use espalier_trainbenchmark::{generate, Query, Scenario};
use espalier_transaction::{DatabaseOptions, Durability};

fn segment(
    id: u64,
    length: i64,
    monitored_by: &[u64],
    connects_to: &[u64],
    semaphores: &[(u64, Signal)],
) -> TrackElement {
    TrackElement {
        id,
        kind: ElementKind::Segment {
            length,
            semaphores: semaphores.iter().map(|&(id, signal)| Semaphore { id, signal }).collect(),
        },
        monitored_by: monitored_by.to_vec(),
        connects_to: connects_to.to_vec(),
    }
}

fn switch(id: u64, p: Position, monitored_by: &[u64], connects_to: &[u64]) -> TrackElement {
    TrackElement {
        id,
        kind: ElementKind::Switch { current_position: p },
        monitored_by: monitored_by.to_vec(),
        connects_to: connects_to.to_vec(),
    }
}

/// Region 100: sensors 101–103. Switch 110 (STRAIGHT, sensor 101) leads into segments
/// 111→…→117 (all sensor 101; 111 holds semaphore 130, GO), then 118 (length 0, sensor 102,
/// semaphore 131, STOP) → 119 (length −5, sensor 102). Switch 120 (DIVERGING) has no sensor;
/// switch 121 (FAILURE, sensors 102 and 103) connects to 110.
/// Route 200: active, entry 130, exit 131, requires 101, follows 201 (DIVERGING → 110) and
/// 202 (FAILURE → 121). Route 210: inactive, entry 131, exit 130, requires 102, follows 211
/// (STRAIGHT → 120). Route 220: active, no entry or exit, requires 101.
fn hand_built() -> Model {
    let mut elements = vec![switch(110, Position::Straight, &[101], &[111])];
    for id in 111..=117 {
        let semaphores: &[(u64, Signal)] = if id == 111 { &[(130, Signal::Go)] } else { &[] };
        elements.push(segment(id, 10 * id as i64, &[101], &[id + 1], semaphores));
    }
    elements.push(segment(118, 0, &[102], &[119], &[(131, Signal::Stop)]));
    elements.push(segment(119, -5, &[102], &[], &[]));
    elements.push(switch(120, Position::Diverging, &[], &[]));
    elements.push(switch(121, Position::Failure, &[102, 103], &[110]));
    let region = Region { id: 100, sensors: vec![101, 102, 103], elements };
    let swp = |id, position, target| SwitchPosition { id, position, target };
    let routes = vec![
        Route {
            id: 200,
            active: true,
            entry: Some(130),
            exit: Some(131),
            requires: vec![101],
            follows: vec![swp(201, Position::Diverging, 110), swp(202, Position::Failure, 121)],
        },
        Route {
            id: 210,
            active: false,
            entry: Some(131),
            exit: Some(130),
            requires: vec![102],
            follows: vec![swp(211, Position::Straight, 120)],
        },
        Route { id: 220, active: true, entry: None, exit: None, requires: vec![101], follows: vec![] },
    ];
    Model { regions: vec![region], routes }
}

fn expected(q: Query) -> Vec<Vec<u64>> {
    match q {
        // Segments of length ≤ 0.
        Query::PosLength => vec![vec![118], vec![119]],
        // Switch 120 has no sensor.
        Query::SwitchMonitored => vec![vec![120]],
        // Route 200 follows 202 to switch 121, monitored by 102 and 103, which it does not
        // require; 110's sensor 101 it requires; route 210's switch 120 has no sensor.
        Query::RouteSensor => vec![vec![200, 102, 202, 121], vec![200, 103, 202, 121]],
        // Route 200 (active, entry 130 GO) wants 110 DIVERGING, which is STRAIGHT; 121 agrees.
        // Route 210 is inactive and its entry shows STOP.
        Query::SwitchSet => vec![vec![130, 200, 201, 110]],
        // Six consecutive segments all monitored by 101: 111..116 and 112..117.
        Query::ConnectedSegments => {
            vec![vec![101, 111, 112, 113, 114, 115, 116], vec![101, 112, 113, 114, 115, 116, 117]]
        }
        // Route 200 exits at 131 and requires 101: te1 in 110..116 (sensor 101) reaches te2 =
        // te1 + 1 (sensor 101), required by 220, whose entry is not 131 (seven matches); via
        // 117 → 118 (sensor 102) route 210 enters at 131: no match. Route 210 exits at 130
        // and requires 102: 121 → 110 (sensor 101) reaches 200 (entry 130: no) and 220 (yes);
        // 118 → 119 stays on 102, required only by 210 itself.
        Query::SemaphoreNeighbor => {
            let mut m: Vec<Vec<u64>> = (110..=116).map(|te1| vec![131, 200, 220, 101, 101, te1, te1 + 1]).collect();
            m.push(vec![130, 210, 220, 102, 101, 121, 110]);
            m
        }
    }
}

fn opts() -> DatabaseOptions {
    DatabaseOptions { durability: Durability::None, ..Default::default() }
}

#[test]
fn hand_built_railway_has_the_worked_out_matches() {
    let model = hand_built();
    let tmp = tempfile::tempdir().unwrap();
    let engine = espalier_trainbenchmark::create(&tmp.path().join("db"), &model, opts()).unwrap();
    let conn = sqlite_of(&model.tables()).unwrap();
    for q in Query::ALL {
        let mut want = expected(q);
        want.sort();
        assert_eq!(espalier_matches(&engine, q).unwrap(), want, "{} in Espalier", q.name());
        assert_eq!(sql_matches(&conn, q).unwrap(), want, "{} in SQL", q.name());
    }
}

#[test]
fn the_planner_follows_links_backwards_where_that_is_cheaper() {
    let model = hand_built();
    let tmp = tempfile::tempdir().unwrap();
    let engine = espalier_trainbenchmark::create(&tmp.path().join("db"), &model, opts()).unwrap();
    let instr = espalier_instruction::parse_instruction(
        Query::SemaphoreNeighbor.pattern(),
        espalier_instruction::parse::ParseOptions::CLIENT,
    )
    .unwrap();
    let lines = engine.check(&instr, None).unwrap().explain(engine.schema()).unwrap();
    let text = lines.join("\n");
    // te1 from sensor1 and route2 from sensor2, backwards through the reverse-link index;
    // neither is scanned from the root.
    assert!(text.contains("bind te1 from sensor1 < 'Monitored By' (matrix, backwards"), "{text}");
    assert!(text.contains("bind route2 from sensor2 < 'Requires' (matrix, backwards"), "{text}");
    assert!(lines.iter().filter(|l| l.contains("from root")).count() == 1, "{text}");
}

#[test]
fn generated_models_beyond_the_official_size_match_sql() {
    for scenario in [Scenario::Repair, Scenario::Inject] {
        let model = generate(scenario, 2);
        let one = generate(scenario, 1).size();
        assert!(model.size() > one * 3 / 2, "size 2 is about twice size 1: {} and {one}", model.size());
        let tmp = tempfile::tempdir().unwrap();
        let engine = espalier_trainbenchmark::create(&tmp.path().join("db"), &model, opts()).unwrap();
        let conn = sqlite_of(&model.tables()).unwrap();
        let mut total = 0;
        for q in Query::ALL {
            let ours = espalier_matches(&engine, q).unwrap();
            assert_eq!(ours, sql_matches(&conn, q).unwrap(), "{} size 2 {}", scenario.name(), q.name());
            total += ours.len();
        }
        assert!(total > 0, "{} size 2 has faults", scenario.name());
    }
}

#[test]
fn a_repair_step_fixes_the_same_matches_in_both() {
    use espalier_trainbenchmark::repair::{espalier_text, fixes, pick, sql_apply, Index};
    let model = generate(Scenario::Repair, 1);
    let tmp = tempfile::tempdir().unwrap();
    let engine = espalier_trainbenchmark::create(&tmp.path().join("db"), &model, opts()).unwrap();
    let conn = sqlite_of(&model.tables()).unwrap();
    let mut index = Index::new(&model);
    // The hand-built model covers SwitchMonitored, which the official one never matches.
    let small = hand_built();
    let small_engine = espalier_trainbenchmark::create(&tmp.path().join("small"), &small, opts()).unwrap();
    let small_conn = sqlite_of(&small.tables()).unwrap();
    let mut small_index = Index::new(&small);
    for q in Query::ALL {
        for (engine, conn, index) in [(&engine, &conn, &mut index), (&small_engine, &small_conn, &mut small_index)] {
            let before = espalier_matches(engine, q).unwrap();
            if before.is_empty() {
                continue;
            }
            let fix = pick(q, &before, 0.5);
            let plan = fixes(index, q, &fix).unwrap();
            let text = espalier_text(index, &plan).unwrap();
            engine
                .execute_text(&text, &std::collections::HashMap::new())
                .unwrap_or_else(|e| panic!("{} repair: {e}\n{text}", q.name()));
            let tx = conn.unchecked_transaction().unwrap();
            sql_apply(&tx, &plan).unwrap();
            tx.commit().unwrap();
            let after = espalier_matches(engine, q).unwrap();
            assert_eq!(after, sql_matches(conn, q).unwrap(), "{} after the repair", q.name());
            assert!(after.len() < before.len(), "{}: {} matches before, {} after", q.name(), before.len(), after.len());
            for m in &fix {
                assert!(!after.contains(m), "{}: fixed match {m:?} still there", q.name());
            }
        }
    }
}
