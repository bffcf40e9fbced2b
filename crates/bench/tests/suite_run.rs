//! Running suites: every file of `benchmarks/` at a tiny scale, B5's failures, cold samples,
//! deterministic datasets, and the JSON / Markdown / SVG reports.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use espalier_bench::suite::report::{compare_markdown, Report, RunSettings};
use espalier_bench::suite::sys::DropMethod;
use espalier_bench::suite::{
    build_dataset, chart, create_dataset, draws, load_suite, parse_suite, run_suite, scaled_repeat, BuildOptions,
    ColdOptions, Draw, Mode, RunOptions, Scale, Suite,
};
use espalier_instruction::{Engine, Reply};
use espalier_transaction::DatabaseOptions;
use indicatif::ProgressBar;

const REPEAT_SCALE: f64 = 0.01;

fn benchmarks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benchmarks")
}

fn files() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for group in std::fs::read_dir(benchmarks_dir()).unwrap() {
        let group = group.unwrap().path();
        if !group.is_dir() {
            continue;
        }
        let name = group.file_name().unwrap().to_string_lossy().into_owned();
        for f in std::fs::read_dir(&group).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "bench") {
                out.push((name.clone(), f));
            }
        }
    }
    out.sort();
    out
}

/// Small enough for a debug build: outermost collections × 0.06 (B7, whose sizes are B6's ×
/// 100, × 0.001), nested × 0.1, repetitions × 0.01.
fn tiny(group: &str) -> RunOptions {
    RunOptions {
        seed: 7,
        scale: Scale { outer: if group == "b7" { 0.001 } else { 0.06 }, nested: 0.1 },
        repeat_scale: REPEAT_SCALE,
        warmup: 2,
        batch: 500,
        ..RunOptions::default()
    }
}

fn settings() -> RunSettings {
    RunSettings {
        seed: 7,
        scale: Scale { outer: 0.06, nested: 0.1 },
        repeat_scale: REPEAT_SCALE,
        warmup: 2,
        cold_samples: None,
        durability: "none".into(),
        build: "debug".into(),
    }
}

#[test]
fn every_suite_runs_at_a_tiny_scale() {
    let mut report = Report::new("espalier", "tiny", settings());
    let mut suites: Vec<(String, Suite)> = Vec::new();
    for (group, path) in files() {
        let suite = load_suite(&path).unwrap_or_else(|e| panic!("{e}"));
        let run = run_suite(&suite, &tiny(&group)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(run.disk_bytes_built > 0 && run.memory_build.peak_rss_bytes > 0, "{}", path.display());
        report.add(&group, &path.display().to_string(), &run);
        suites.push((group, suite));
    }
    // Every instruction of every benchmark has a hot result with sane numbers.
    for (group, suite) in &suites {
        for b in &suite.benchmarks {
            for instr in &b.instructions {
                let r = report
                    .results
                    .iter()
                    .find(|r| &r.group == group && r.name == instr.name && r.mode == Mode::Hot)
                    .unwrap_or_else(|| panic!("no result for {group}/{}", instr.name));
                assert_eq!(r.count as u64, scaled_repeat(b.repeat, REPEAT_SCALE), "{}", r.name);
                assert!(r.min_us > 0.0 && r.min_us <= r.q1_us && r.q1_us <= r.median_us, "{r:?}");
                assert!(r.median_us <= r.q3_us && r.q3_us <= r.p99_us && r.p99_us <= r.max_us, "{r:?}");
                assert!(r.mean_us >= r.min_us && r.mean_us <= r.max_us, "{r:?}");
                assert!(r.median_us < 1_000_000.0, "{} takes a second even at a tiny scale: {r:?}", r.name);
                assert_eq!(r.unexpected, 0, "{group}/{}: unexpected outcomes {:?}", r.name, r.errors);
            }
        }
    }
    assert!(report.unexpected().is_empty());
    // Queries report their row counts: every client is named "Client Name", so B6's search
    // finds nothing; get_in_X finds all X (scaled) entries.
    let rows = |name: &str| report.results.iter().find(|r| r.name == name).and_then(|r| r.mean_rows);
    assert_eq!(rows("search[1]"), Some(0.0));
    assert_eq!(rows("get_in_1000"), Some(60.0));
    assert_eq!(rows("overview_subcollection"), Some(6.0 * 1.0 * 10.0));

    // The JSON has one object per instruction with the fields the issue names, and reads back.
    let json = report.to_json();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let results = value["results"].as_array().unwrap();
    assert_eq!(results.len(), report.results.len());
    for key in ["name", "count", "min_us", "q1_us", "median_us", "q3_us", "max_us", "p99_us", "mean_us"] {
        assert!(results.iter().all(|r| r.get(key).is_some()), "a JSON result lacks {key}");
    }
    let back = Report::from_json(&json).unwrap();
    assert_eq!((back.suites.len(), back.results.len()), (report.suites.len(), report.results.len()));
    for (a, b) in back.results.iter().zip(&report.results) {
        assert_eq!((a.key(), a.count, &a.errors), (b.key(), b.count, &b.errors));
        assert!((a.median_us - b.median_us).abs() <= 1e-9 * b.median_us.max(1.0), "{a:?} {b:?}");
    }
    // Markdown and SVG name every instruction.
    let md = report.to_markdown();
    let svg = chart::chart(std::slice::from_ref(&report));
    for r in &report.results {
        assert!(md.contains(&format!("| {} | hot |", r.name)), "markdown lacks {}", r.name);
        assert!(svg.contains(&format!(">{}</text>", r.name.replace('&', "&amp;"))), "svg lacks {}", r.name);
    }
    assert!(md.contains("| b6 | use_case |"), "{md}");
    // Comparing a report with itself gives ratios of 1.
    let mut other = report.clone();
    other.label = "again".into();
    let cmp = compare_markdown(&[report.clone(), other]);
    assert!(cmp.contains("| b1 | add | hot |") && cmp.contains(" 1.00× |"), "{cmp}");
}

#[test]
fn b5_failures_fail_with_their_codes() {
    for (file, code) in [
        ("set_state_failure", "already_in_state"),
        ("path_failure", "state_not_selected"),
        ("add_failure", "key_exists"),
        ("remove_failure", "key_missing"),
    ] {
        let suite = load_suite(&benchmarks_dir().join(format!("b5/{file}.bench"))).unwrap();
        let run = run_suite(&suite, &tiny("b5")).unwrap();
        let r = &run.runs[0];
        let n = r.samples.len() as u64;
        assert!(n > 0);
        assert_eq!(r.outcomes.get(code), Some(&n), "{file}: {:?}", r.outcomes);
        assert_eq!((r.failed(), r.unexpected()), (n, 0), "{file}");
    }
    // A failure that is not expected is counted as unexpected: the same instruction without
    // `expect error`.
    let src = "root ( 'd' -> dictionary ( ) )\ninitialize ( 'd' -> dictionary 10 ( ) )\n\
               repeat 5 ( update ( 'd' -> dictionary random 10 ( ) ) )\n";
    let run = run_suite(&parse_suite(src, "x").unwrap(), &RunOptions { warmup: 1, ..RunOptions::default() }).unwrap();
    assert_eq!((run.runs[0].failed(), run.runs[0].unexpected()), (5, 5));
}

#[test]
fn cold_samples_drop_the_page_cache() {
    let suite = load_suite(&benchmarks_dir().join("b2/set_in_1000.bench")).unwrap();
    let opts = RunOptions { cold: Some(ColdOptions { samples: 3 }), ..tiny("b2") };
    let run = run_suite(&suite, &opts).unwrap();
    let cold: Vec<_> = run.runs.iter().filter(|r| r.mode == Mode::Cold).collect();
    assert_eq!(cold.len(), 1);
    assert_eq!(cold[0].samples.len(), 3);
    assert_eq!(cold[0].unexpected(), 0);
    let (method, cached) = run.cold_method.expect("the cold method is reported");
    if cfg!(target_os = "linux") {
        let hot = run.hot_cached.0.expect("mincore measures residency");
        assert!(hot > 0.9, "only {:.0}% of the file cached for the hot run", hot * 100.0);
        assert_eq!(method, DropMethod::Fadvise);
        let cached = cached.expect("mincore measures residency");
        assert!(cached < 0.5, "{:.0}% of the file still cached after the drop", cached * 100.0);
    }
    let mut report = Report::new("espalier", "cold", RunSettings { cold_samples: Some(3), ..settings() });
    report.add("b2", "set_in_1000.bench", &run);
    assert!(report.suites[0]
        .cold_method
        .as_deref()
        .is_some_and(|m| m.contains("posix_fadvise") || m.contains("NOT cold")));
    assert!(report.to_markdown().contains("| set_in_1000 | cold | 3 |"));
}

/// The dump of `suite` built with `seed` and `batch`, version stamped 0.
fn dump(suite: &Suite, seed: u64, batch: u64, scale: Scale) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let opts = DatabaseOptions { durability: espalier_transaction::Durability::None, ..DatabaseOptions::default() };
    let (engine, stats) = create_dataset(
        &dir.path().join("db"),
        suite,
        opts,
        &BuildOptions { seed, scale, batch },
        &ProgressBar::hidden(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(stats.entries > 0);
    let snap = engine.database().snapshot().unwrap();
    let mut out = Vec::new();
    espalier_data::export(&snap.graph(), 0, &mut out, &mut |_| {}).unwrap();
    out
}

#[test]
fn datasets_depend_on_the_seed_only() {
    let suite = load_suite(&benchmarks_dir().join("b6/use_case.bench")).unwrap();
    let scale = Scale { outer: 0.05, nested: 0.2 };
    let a = dump(&suite, 3, 7, scale);
    let b = dump(&suite, 3, 100_000, scale);
    assert!(a == b, "the same seed with other batch sizes gives other data");
    let c = dump(&suite, 4, 7, scale);
    assert!(a != c, "another seed gives the same data");
}

#[test]
fn initialisation_follows_weights_and_bounds() {
    // Listing 6.2 of the thesis, plus a random number and a reference.
    let src = "root (\n  'd1' -> dictionary ( 'n' -> number 'sg' -> stategroup ( 's1' -> ( ) 's2' -> ( 'm' -> number ) ) )\n\
               'r1' -> dictionary ( 'to' -> reference ( .^ . 'd1' ) 't' -> text )\n)\n\
               initialize (\n  'd1' -> dictionary 10000 (\n    'n' -> number random 1000\n    'sg' -> stategroup ( 's1' -> 7 ( ) 's2' -> 3 ( 'm' -> number 5 ) )\n  )\n\
               'r1' -> dictionary 100 ( 'to' -> reference random 10000 't' -> random ( 'x' \"y\" ) )\n)\n\
               repeat 1 ( get )\n";
    let suite = parse_suite(src, "weights").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (engine, stats) = create_dataset(
        &dir.path().join("db"),
        &suite,
        DatabaseOptions::default(),
        &BuildOptions { batch: 999, ..BuildOptions::default() },
        &ProgressBar::hidden(),
    )
    .unwrap();
    assert_eq!((stats.entries, stats.commits), (10_100, 1 + 11));
    let total = |q: &str| match engine.execute_text(q, &HashMap::new()).unwrap() {
        Reply::Query(r) => r.total,
        other => panic!("{other:?}"),
    };
    let s2 = total("collection select . 'd1' 'm' -> ? 'sg' * 's2' number : 'm' == 5");
    assert!((2700..3300).contains(&s2), "weights 7:3 gave {s2} of 10000 in s2");
    assert_eq!(total("collection select . 'd1' 'n' -> number : 'n' >= 1000"), 0);
    assert_eq!(total("collection select . 'd1' 'n' -> number : 'n' < 0"), 0);
    let low = total("collection select . 'd1' 'n' -> number : 'n' < 500");
    assert!((4500..5500).contains(&low), "random 1000 gave {low} of 10000 below 500");
    assert_eq!(
        total("collection select . 'r1' 't' -> text : 't' == \"x\""),
        100 - total("collection select . 'r1' 't' -> text : 't' == \"y\"")
    );
    // Building into a database that already has data fails cleanly (keys exist), naming the place.
    let e = build_dataset(&engine, &suite, &BuildOptions::default(), &ProgressBar::hidden()).unwrap_err();
    assert!(e.to_string().starts_with("weights:6:3: "), "{e}");
}

/// The draws of an instruction's `random` values at a scale (they were the bounds of the
/// plan's values when the runner rewrote plans; the plans stay as checked now).
fn draws_at(suite: &Suite, scale: Scale) -> Vec<Draw> {
    let i = &suite.benchmarks[0].instructions[0];
    draws(&i.plan, &i.values, &suite.schema, &suite.collection_sizes(), scale)
        .unwrap_or_else(|(_, m)| panic!("{m}"))
        .0
        .into_iter()
        .map(|(_, d)| d)
        .collect()
}

#[test]
fn random_keys_follow_the_scaled_collections() {
    let suite = load_suite(&benchmarks_dir().join("b3/set_in_depth_2.bench")).unwrap();
    assert_eq!(draws_at(&suite, Scale { outer: 0.01, nested: 0.5 }), [Draw::Below(10), Draw::Below(500)]);

    let suite = load_suite(&benchmarks_dir().join("b1/remove_in_100000.bench")).unwrap();
    assert_eq!(draws_at(&suite, Scale { outer: 0.01, nested: 1.0 }), [Draw::Below(1000)]);

    // A reference's bound scales with its target; a number's bound does not.
    let src = "root ( 'd' -> dictionary ( ) 'r' -> reference ( . 'd' ) 'n' -> number )\ninitialize ( 'd' -> dictionary 200 ( ) )\n\
               repeat 1 ( update ( 'r' -> reference random 200 'n' -> number random 200 ) )\n";
    let suite = parse_suite(src, "x").unwrap();
    assert_eq!(draws_at(&suite, Scale { outer: 0.5, nested: 1.0 }), [Draw::Below(100), Draw::Below(200)]);
    // The checked plan holds parameters, not benchmark values.
    let plan = format!("{:?}", suite.benchmarks[0].instructions[0].plan);
    assert!(plan.contains("Param(\"__bench_0\")") && !plan.contains("Random"), "{plan}");
}

#[test]
fn engines_reopen_after_a_run() {
    // The temporary database is gone after a run, and nothing keeps the process from opening
    // databases again (the cold phase reopens many times).
    let suite = load_suite(&benchmarks_dir().join("b1/add.bench")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = run_suite(
        &suite,
        &RunOptions { dir: Some(dir.path().to_path_buf()), cold: Some(ColdOptions { samples: 2 }), ..tiny("b1") },
    )
    .unwrap();
    assert_eq!(run.runs.len(), 2);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the temporary database was removed");
    let e = Engine::create(&dir.path().join("again"), &suite.model, DatabaseOptions::default());
    assert!(e.is_ok());
}
