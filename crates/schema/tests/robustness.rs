//! `compile` never panics: every model with one token deleted, two neighbours swapped, or the
//! text truncated, plus pseudo-random garbage. Successful results must also describe cleanly.

use espalier_schema::lexer::tokenize;
use espalier_schema::*;

fn models() -> Vec<(String, String)> {
    let dir = format!("{}/tests/models", env!("CARGO_MANIFEST_DIR"));
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("models dir")
        .map(|e| {
            let path = e.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("read model");
            (path.display().to_string(), text)
        })
        .collect();
    out.sort();
    assert!(out.len() > 20);
    out
}

fn check(src: &str) {
    match compile(src) {
        Ok(s) => {
            let _ = describe(&s);
            for t in &s.types {
                let _ = s.node_type_name(t.id);
            }
        }
        Err(d) => {
            assert!(!d.0.is_empty());
            for e in &d.0 {
                assert!(e.span.start <= e.span.end && e.span.end as usize <= src.len(), "{e:?}");
                let _ = e.render(src, "x.alan");
            }
        }
    }
}

#[test]
fn deleting_or_swapping_any_token_never_panics() {
    for (name, src) in models() {
        let tokens = tokenize(&src).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (i, t) in tokens.iter().enumerate() {
            let (a, b) = (t.span.start as usize, t.span.end as usize);
            check(&format!("{}{}", &src[..a], &src[b..]));
            if let Some(next) = tokens.get(i + 1) {
                let (c, d) = (next.span.start as usize, next.span.end as usize);
                check(&format!("{}{}{}{}{}", &src[..a], &src[c..d], &src[b..c], &src[a..b], &src[d..]));
            }
        }
    }
}

#[test]
fn truncating_never_panics() {
    for (_, src) in models() {
        for cut in (0..src.len()).step_by(7) {
            if src.is_char_boundary(cut) {
                check(&src[..cut]);
            }
        }
    }
}

#[test]
fn garbage_never_panics() {
    const PIECES: &[&str] = &[
        "root",
        "(",
        ")",
        "'a'",
        "'b'",
        "->",
        "number",
        "text",
        "group",
        "dictionary",
        "matrix",
        "reference",
        "stategroup",
        ".",
        "+",
        "%",
        "?",
        "*",
        "^",
        "command",
        "index",
        "equality",
        "range",
        "prefix",
        "unique",
        "12",
        "\"s\"",
        "$p",
        "''",
        "//c\n",
        " ",
    ];
    // A small LCG keeps this deterministic without a dependency.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..3000 {
        let mut src = String::new();
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let len = (state >> 33) % 40;
        for _ in 0..len {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            src.push_str(PIECES[((state >> 33) % PIECES.len() as u64) as usize]);
            src.push(' ');
        }
        check(&src);
        check(&format!("root ( {src}"));
    }
    for odd in ["\0", "root\u{feff}( )", "root ( 'é' -> number )", "root ( 'a' -> reference ( ?^ ?^ ?^ . 'a' ) )"] {
        check(odd);
    }
}

#[test]
fn errors_are_capped_and_big_inputs_stay_fast() {
    // Thousands of duplicates: one report each up to the cap, then a note, in linear time.
    let mut src = String::from("root (\n");
    for _ in 0..20_000 {
        src.push_str("    'a' -> number\n");
    }
    src.push_str("    'sg' -> stategroup (\n");
    for _ in 0..20_000 {
        src.push_str("        's' -> ( )\n");
    }
    src.push_str("    )\n)\n");
    for _ in 0..5_000 {
        src.push_str("command 'c' ( ) ( )\n");
    }
    let start = std::time::Instant::now();
    let Err(d) = compile(&src) else { panic!("should fail") };
    assert_eq!(d.0.len(), MAX_ERRORS + 1);
    assert!(d.0.iter().any(|e| e.message.starts_with("too many errors")));
    assert!(start.elapsed() < std::time::Duration::from_secs(20), "took {:?}", start.elapsed());

    // The same for the parser's recoverable errors.
    let mut src = String::from("root (\n");
    for _ in 0..20_000 {
        src.push_str("    'a' -> nmber\n");
    }
    src.push(')');
    let Err(d) = compile(&src) else { panic!("should fail") };
    assert_eq!(d.0.len(), MAX_ERRORS + 1);
}
