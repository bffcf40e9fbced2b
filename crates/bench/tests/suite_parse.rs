//! The benchmark language: every file in `benchmarks/` parses and checks, the suites hold what
//! appendix B lists, and bad files get errors with the right line:column and a caret.

use std::path::{Path, PathBuf};

use espalier_bench::suite::{load_suite, parse_suite, BenchWord, InitValue, Scale, Suite, SuiteError};

fn benchmarks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benchmarks")
}

fn bench_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for group in std::fs::read_dir(benchmarks_dir()).expect("benchmarks/ exists") {
        let group = group.expect("dir entry").path();
        if !group.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&group).expect("group dir") {
            let f = f.expect("dir entry").path();
            if f.extension().is_some_and(|e| e == "bench") {
                files.push(f);
            }
        }
    }
    files.sort();
    files
}

fn load(rel: &str) -> Suite {
    let path = benchmarks_dir().join(rel);
    load_suite(&path).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()))
}

#[test]
fn every_benchmark_file_parses_and_checks() {
    let files = bench_files();
    assert!(files.len() >= 34, "expected all of appendix B, found {} files", files.len());
    for f in &files {
        let suite = load_suite(f).unwrap_or_else(|e| panic!("{e}"));
        assert!(!suite.benchmarks.is_empty(), "{}", f.display());
        let text = std::fs::read_to_string(f).unwrap();
        let group =
            f.parent().and_then(|g| g.file_name()).map(|g| g.to_string_lossy().into_owned()).unwrap_or_default();
        if matches!(group.as_str(), "b1" | "b2" | "b3" | "b4" | "b5" | "b6" | "b7") {
            assert!(text.starts_with("// B"), "{} starts with a comment citing appendix B", f.display());
        } else {
            assert!(text.starts_with("// "), "{} starts with a comment saying what it measures", f.display());
        }
        for b in &suite.benchmarks {
            assert!(b.repeat > 0 && !b.instructions.is_empty(), "{} {}", f.display(), b.name);
        }
    }
}

#[test]
fn appendix_b_is_complete() {
    let names: Vec<String> =
        bench_files().iter().flat_map(|f| load_suite(f).unwrap().benchmarks.into_iter().map(|b| b.name)).collect();
    let mut want: Vec<String> = [
        "add",
        "add_big",
        "increment",
        "matrix_add",
        "remove_all",
        "remove_in_100000",
        "set_state",
        "set_reference",
        "set_in_depth_2",
        "set_in_depth_3",
        "set_in_depth_4",
        "set_in_depth_5",
        "set_in_depth_6",
        "number_filter_100",
        "number_filter_1000",
        "number_filter_10000",
        "text_filter_1000",
        "state_filter_1000",
        "set_state_failure",
        "path_failure",
        "add_failure",
        "remove_failure",
        "search",
        "overview_subcollection",
        "task_start",
        "get_big_items",
        "many_references",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for x in [10, 100, 1000, 10_000, 100_000] {
        want.push(format!("set_in_{x}"));
        want.push(format!("get_in_{x}"));
    }
    for w in &want {
        assert!(names.contains(w), "no benchmark {w}");
    }
}

#[test]
fn suites_hold_the_appendix_numbers() {
    let s = load("b1/set_state.bench");
    assert_eq!(s.benchmarks[0].repeat, 500);
    let names: Vec<&str> = s.benchmarks[0].instructions.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["set_state[1]", "set_state[2]"]);

    let s = load("b3/set_in_depth_4.bench");
    assert_eq!(s.expected_entries(Scale::default()), 100.0 + 100.0 * (100.0 + 100.0 * (10.0 + 10.0 * 10.0)));

    let s = load("b6/use_case.bench");
    let names: Vec<&str> = s.benchmarks.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        ["search", "overview_subcollection", "get_big_items", "many_references", "task_stop", "task_start"]
    );
    assert_eq!(s.benchmark("search").unwrap().instructions.len(), 5);
    let sizes = s.collection_sizes();
    let size = |name: &str| sizes[&s.schema.properties.iter().find(|p| p.name == name).unwrap().id];
    assert_eq!((size("Clients"), size("Materials"), size("Orders"), size("Machines")), (100, 10_000, 100, 300));
    assert_eq!((size("Modifications"), size("Added Materials")), (5, 100));
    // 100 + 10000 + 30 + 100 · (1 + 5 · (1 + 100)) + 300
    assert_eq!(s.expected_entries(Scale::default()), 100.0 + 10_000.0 + 30.0 + 100.0 * (1.0 + 5.0 * 101.0) + 300.0);
    // Weighted states keep their weights.
    let machines = s.init.iter().find(|i| s.schema.property(i.property).name == "Machines").unwrap();
    let InitValue::Collection { items, .. } = &machines.value else { panic!("collection") };
    let InitValue::States(choices) = &items[0].value else { panic!("states") };
    assert_eq!(choices.iter().map(|c| c.weight).collect::<Vec<_>>(), [8, 2]);

    // B7 is B6 with the outermost collections × 100 and three of its benchmarks.
    let b7 = load("b7/big_use_case.bench");
    let model_of = |s: &Suite| s.model[s.model.find("root (").unwrap()..].to_string();
    assert_eq!(model_of(&b7), model_of(&load("b6/use_case.bench")));
    let b7_sizes = b7.collection_sizes();
    let b7_size = |name: &str| b7_sizes[&b7.schema.properties.iter().find(|p| p.name == name).unwrap().id];
    assert_eq!((b7_size("Orders"), b7_size("Modifications"), b7_size("Added Materials")), (10_000, 5, 100));
    let b7_names: Vec<&str> = b7.benchmarks.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(b7_names, ["search", "many_references", "task_stop", "task_start"]);
}

#[test]
fn b5_benchmarks_expect_their_failures() {
    for (file, code) in [
        ("b5/set_state_failure.bench", "already_in_state"),
        ("b5/path_failure.bench", "state_not_selected"),
        ("b5/add_failure.bench", "key_exists"),
        ("b5/remove_failure.bench", "key_missing"),
    ] {
        assert_eq!(load(file).benchmarks[0].expect.as_deref(), Some(code), "{file}");
    }
}

/// Parses `src`, expecting an error whose first diagnostic is at `line:column` and whose
/// message contains `needle`; returns the rendered error.
fn error_at(src: &str, line: u32, column: u32, needle: &str) -> String {
    let e = match parse_suite(src, "bad") {
        Ok(_) => panic!("expected an error for:\n{src}"),
        Err(e) => e,
    };
    let d = &e.diagnostics()[0];
    assert_eq!((d.line, d.column), (line, column), "{e}");
    assert!(d.message.contains(needle), "message {:?} lacks {needle:?}", d.message);
    let rendered = e.to_string();
    assert!(rendered.starts_with(&format!("bad:{line}:{column}: error: ")), "{rendered}");
    assert!(rendered.contains('^'), "{rendered}");
    rendered
}

const MODEL: &str = "root (\n    'd' -> dictionary ( 'n' -> number 'sg' -> stategroup ( 's0' -> ( ) 's1' -> ( ) ) )\n    'r' -> reference ( . 'd' )\n)\n";

#[test]
fn bad_files_say_where_and_why() {
    // In the model: the schema compiler's error, at the file's line.
    error_at("// c\nroot (\n    'd' -> dictionry ( )\n)\ninitialize ( )\nrepeat 1 ( get )\n", 3, 12, "dictionry");
    // No initialize.
    error_at("root ( )\nrepeat 1 ( get )\n", 2, 1, "before `repeat`");
    // Unknown property in initialize.
    let src = format!("{MODEL}initialize (\n    'x' -> number 1\n)\nrepeat 1 ( get )\n");
    error_at(&src, 6, 5, "no property 'x'");
    // Kind mismatch.
    let src = format!("{MODEL}initialize (\n    'd' -> number 1\n)\nrepeat 1 ( get )\n");
    error_at(&src, 6, 12, "dictionary in the model, not a number");
    // Unknown state, weights that add up to 0.
    let src =
        format!("{MODEL}initialize (\n    'd' -> dictionary 3 ( 'sg' -> stategroup 's9' ( ) )\n)\nrepeat 1 ( get )\n");
    error_at(&src, 6, 46, "no state 's9'");
    let src = format!(
        "{MODEL}initialize (\n    'd' -> dictionary 3 ( 'sg' -> stategroup ( 's0' -> 0 ( ) ) )\n)\nrepeat 1 ( get )\n"
    );
    error_at(&src, 6, 46, "add up to more than 0");
    // A random bound of 0.
    let src = format!("{MODEL}initialize (\n    'd' -> dictionary 3 ( 'n' -> number random 0 )\n)\nrepeat 1 ( get )\n");
    error_at(&src, 6, 48, "positive bound");
    // Unclosed initialize.
    let src = format!("{MODEL}initialize (\n    'd' -> dictionary 3 (\n");
    error_at(&src, 6, 25, "never closed");
    // A syntax error inside a repeat body: the instruction parser's message, at its place.
    let src = format!("{MODEL}initialize ( )\nrepeat 10 (\n    update . 'd' : random ( 'n' -> nmber 1 )\n)\n");
    error_at(&src, 7, 36, "an operation for 'n'");
    // A type error inside a repeat body: the checker's message, at the step.
    let src = format!("{MODEL}initialize ( )\nrepeat 10 (\n    update . 'e' : random ( 'n' -> number 1 )\n)\n");
    error_at(&src, 7, 12, "no property 'e'");
    // `index` and `random` are fine here; a missing `,` between instructions on one line is not.
    let src = format!("{MODEL}initialize ( )\nrepeat 10 ( get get )\n");
    error_at(&src, 6, 17, "`,` or a line break");
    // repeat 0, an empty body, an unknown clause.
    error_at(&format!("{MODEL}initialize ( )\nrepeat 0 ( get )\n"), 6, 8, "1 …");
    error_at(&format!("{MODEL}initialize ( )\nrepeat 3 ( )\n"), 6, 10, "at least one instruction");
    error_at(&format!("{MODEL}initialize ( )\nrepeat 3 expect 'x' ( get )\n"), 6, 17, "`error` after `expect`");
    // Duplicate benchmark names.
    let src = format!("{MODEL}initialize ( )\nbenchmark 'a' repeat 1 ( get )\nbenchmark 'a' repeat 1 ( get )\n");
    error_at(&src, 7, 11, "named 'a' comes earlier");
    // A created node without a value for its reference.
    let src = "root ( 'd' -> dictionary ( ) 'e' -> dictionary ( 'r' -> reference ( .^ . 'd' ) ) )\n\
               initialize ( 'e' -> dictionary 5 ( ) )\nrepeat 1 ( get )\n";
    error_at(src, 2, 34, "reference 'r'");
    // Bad bytes never crash: a stray character in the middle.
    let src = format!("{MODEL}initialize ( ) § repeat 1 ( get )\n");
    assert!(parse_suite(&src, "bad").is_err());
}

#[test]
fn read_errors_name_the_file() {
    let e = load_suite(Path::new("/nonexistent/x.bench")).unwrap_err();
    assert!(matches!(e, SuiteError::Read { .. }) && e.to_string().contains("/nonexistent/x.bench"), "{e}");
}

#[test]
fn the_thesis_listing_parses() {
    // Listings 6.1 and 6.2 of the thesis (with the typographic damage of the PDF repaired).
    let src = "root (\n    'd1' -> dictionary (\n        'n' -> number\n        'sg' -> stategroup (\n            \
               's1' -> ()\n            's2' -> ()\n        )\n    )\n)\n\
               initialize (\n    'd1' -> dictionary 10000 (\n        'n' -> number 1\n        'sg' -> stategroup (\n            \
               's1' -> 7 ( )\n            's2' -> 3 ( )\n        )\n    )\n)\n\
               repeat 1000 (\n    update . 'd1' : random ( 'n' -> number 10 )\n)\n";
    let s = parse_suite(src, "listing_6_2").unwrap();
    assert_eq!(s.benchmarks[0].name, "listing_6_2");
    assert_eq!(s.expected_entries(Scale::default()), 10_000.0);
    assert_eq!(s.expected_entries(Scale { outer: 0.01, nested: 1.0 }), 100.0);
}

#[test]
fn the_language_reference_examples_parse() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmark-language.md"))
        .expect("docs/benchmark-language.md");
    let mut blocks = 0;
    let mut rest = doc.as_str();
    while let Some(start) = rest.find("```bench\n") {
        let body = &rest[start + "```bench\n".len()..];
        let end = body.find("```").expect("closed code block");
        parse_suite(&body[..end], "doc").unwrap_or_else(|e| panic!("docs example does not parse:\n{e}"));
        blocks += 1;
        rest = &body[end + 3..];
    }
    assert!(blocks >= 2, "found {blocks} examples");
}

/// `index` and `random` belong to the benchmark language: the instruction parser refuses them
/// (crates/instruction/tests/parse_errors.rs), a repeat body reads them, and each stands as a
/// `$parameter` in the checked plan, drawn before every run.
#[test]
fn benchmark_values_are_the_benchmark_languages() {
    let src = format!(
        "{MODEL}initialize ( 'd' -> dictionary 10 ( ) )\nrepeat 10 (\n    update . 'd' : random ( 'n' -> number index ),\n    \
         update ( 'd' -> dictionary random 5 remove )\n)\n"
    );
    let suite = parse_suite(&src, "ok").unwrap_or_else(|e| panic!("{e}"));
    let words: Vec<Vec<BenchWord>> =
        suite.benchmarks[0].instructions.iter().map(|i| i.values.iter().map(|v| v.word.clone()).collect()).collect();
    assert_eq!(words, [vec![BenchWord::Random(None), BenchWord::Index], vec![BenchWord::Random(Some(5))]]);
    // A bound of 0, at the number.
    let src = format!("{MODEL}initialize ( )\nrepeat 1 ( update ( 'd' -> dictionary random 0 remove ) )\n");
    error_at(&src, 6, 46, "`random` needs a positive bound, not 0");
    // No bound where a number is meant; keys of a collection `initialize` leaves empty.
    let src = format!(
        "{MODEL}initialize ( 'd' -> dictionary 3 ( ) )\nrepeat 1 ( update . 'd' : \"1\" ( 'n' -> number random ) )\n"
    );
    error_at(&src, 6, 47, "needs an upper bound");
    let src = format!("{MODEL}initialize ( )\nrepeat 1 ( get . 'd' : random )\n");
    error_at(&src, 6, 24, "gives none");
    // Not in pattern queries.
    let src = format!(
        "{MODEL}initialize ( 'd' -> dictionary 3 ( ) )\nrepeat 1 ( collection match x in . 'd' where x number : 'n' == index select 'k' -> x )\n"
    );
    error_at(&src, 6, 64, "cannot be used in a pattern query");
}
