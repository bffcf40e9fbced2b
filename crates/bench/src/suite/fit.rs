//! What scaling does to a benchmark's keys: keys are `"0"` … `"N-1"`, so a collection scaled
//! smaller than a benchmark's keys would fail runs that succeed at the written size.
//!
//! - **`index`** as the key of an existing entry (a path step, an entry update or removal, a
//!   matrix entry's target) means "once per entry" (B1's remove_all, B6's task_stop and
//!   task_start: `repeat 300` over 300 machines). When the repetitions fit the collection as
//!   written but not as scaled, they are cut to the scaled size, and the cut is reported
//!   ([`Fitted::note`]).
//! - **A literal key** (B6's `reference "5"`) that exists as written but not as scaled cannot
//!   be fitted: the benchmark is refused before anything is built, with the benchmark, the
//!   collection, its sizes and the smallest scale that holds the key.
//!
//! Keys beyond the written size are left alone (they fail at every scale: the file means it,
//! as B5's `remove -1`), and so are benchmarks that declare `key_missing` with `expect error`
//! or `allow error`.

use std::collections::HashMap;

use espalier_instruction::ast::Value;
use espalier_instruction::plan::{Plan, ValueRole};
use espalier_schema::{PropertyId, PropertyKind, Schema};

use super::run::scaled_repeat;
use super::values::word_of;
use super::{is_nested, key_dictionaries, BenchValue, BenchWord, Benchmark, Scale, Suite};

/// A benchmark's repetitions at a scale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    /// The benchmark's name.
    pub benchmark: String,
    /// The repetitions to run: the written count × the repeat scale, cut to the collection an
    /// `index` keys.
    pub repeat: u64,
    /// Why `repeat` is smaller than the repeat scale alone gives, if it is.
    pub note: Option<String>,
}

/// Fits every benchmark of `suite` (those named in `only`, or all) to `scale` and
/// `repeat_scale`; the error names the benchmark whose literal key the scaled data lacks.
pub fn fit_benchmarks(suite: &Suite, scale: Scale, repeat_scale: f64, only: &[String]) -> Result<Vec<Fitted>, String> {
    let sizes = suite.collection_sizes();
    suite
        .benchmarks
        .iter()
        .filter(|b| only.is_empty() || only.contains(&b.name))
        .map(|b| fit(suite, &sizes, b, scale, repeat_scale))
        .collect()
}

/// How a key is used: it must name an existing entry of `collection`.
struct KeyUse<'p> {
    collection: PropertyId,
    key: &'p Value,
}

fn fit(
    suite: &Suite,
    sizes: &HashMap<PropertyId, u64>,
    bench: &Benchmark,
    scale: Scale,
    repeat_scale: f64,
) -> Result<Fitted, String> {
    let written = bench.repeat;
    let asked = scaled_repeat(written, repeat_scale);
    let mut fitted = Fitted { benchmark: bench.name.clone(), repeat: asked, note: None };
    let declared = |code: &str| bench.expect.as_deref() == Some(code) || bench.allow.iter().any(|a| a == code);
    if declared("key_missing") {
        return Ok(fitted);
    }
    let schema = &suite.schema;
    let mut uses = Vec::new();
    for i in &bench.instructions {
        let mut keys = Vec::new();
        key_uses(schema, &i.plan, &mut keys);
        uses.extend(keys.into_iter().map(|k| (k, &i.values)));
    }
    for (u, values) in uses {
        let Some(&size) = sizes.get(&u.collection).filter(|&&n| n > 0) else { continue };
        let nested = is_nested(schema, u.collection);
        let scaled = scale.apply(size, nested);
        let name = &schema.property(u.collection).name;
        let flag = if nested { "--nested-scale" } else { "--scale" };
        let factor = if nested { scale.nested } else { scale.outer };
        let index = matches!(word_of(values, u.key), Some(BenchValue { word: BenchWord::Index, .. }));
        match u.key {
            _ if index => {
                if written <= size && asked > scaled && scaled < fitted.repeat {
                    fitted.repeat = scaled;
                    fitted.note = Some(format!(
                        "benchmark '{}' runs {scaled} times, not {asked}: its `index` is a key of '{name}', which \
                         has {scaled} entries at {flag} {factor} ({size} as written)",
                        bench.name
                    ));
                }
            }
            key => {
                let Some(k) = literal_number(key) else { continue };
                if k < size && k >= scaled {
                    // The smallest factor (in thousandths) whose rounded size holds key k.
                    let least = ((k + 1) as f64 / size as f64 * 1000.0).ceil() / 1000.0;
                    return Err(format!(
                        "benchmark '{}' names the key \"{k}\" of '{name}', which has {scaled} entries (\"0\" … \"{}\") \
                         at {flag} {factor} ({size} as written): every run would fail with key_missing; use {flag} \
                         {least} or more",
                        bench.name,
                        scaled - 1,
                    ));
                }
            }
        }
    }
    Ok(fitted)
}

/// A key written as a whole number (`"5"` or `5`).
fn literal_number(v: &Value) -> Option<u64> {
    match v {
        Value::Text(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => t.parse().ok(),
        Value::Int(i) => u64::try_from(*i).ok(),
        _ => None,
    }
}

/// The keys of `plan` that must name existing entries, by the checker's account of its values
/// ([`Plan::value_uses`]): entry steps, updates and removals, a new matrix entry's target and a
/// reference's new target (compared keys need not exist).
fn key_uses<'p>(schema: &Schema, plan: &'p Plan, out: &mut Vec<KeyUse<'p>>) {
    for u in plan.value_uses(schema) {
        match u.role {
            ValueRole::EntryKey { collection } => out.push(KeyUse { collection, key: u.value }),
            // A new dictionary entry's key is free; a new matrix entry's key names its target.
            ValueRole::NewKey { collection } => {
                if matches!(schema.property(collection).kind, PropertyKind::Matrix { .. }) {
                    targets(schema, collection, u.value, out);
                }
            }
            ValueRole::TargetKey { reference } => targets(schema, reference, u.value, out),
            ValueRole::ComparedKey { .. } | ValueRole::Number | ValueRole::Text | ValueRole::State { .. } => {}
        }
    }
}

/// The keys of `key` with the dictionaries they are keys of: a compound key's components
/// one by one, a single key of the first dictionary.
fn targets<'p>(schema: &Schema, p: PropertyId, key: &'p Value, out: &mut Vec<KeyUse<'p>>) {
    let dicts = key_dictionaries(schema, p);
    match key {
        Value::Compound(parts) => {
            out.extend(parts.iter().zip(&dicts).map(|(key, &collection)| KeyUse { collection, key }))
        }
        key => out.extend(dicts.first().map(|&collection| KeyUse { collection, key })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::{load_suite, parse_suite};

    fn b6() -> Suite {
        load_suite(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benchmarks/b6/use_case.bench"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn outer(f: f64) -> Scale {
        Scale { outer: f, nested: 1.0 }
    }

    /// B6 at --scale 0.05 ran 300 task_stop and task_start runs over 15 machines, and
    /// task_start's `reference "5"` over 5 orders: 585 runs failed with key_missing.
    #[test]
    fn b6_scaled_below_its_literal_key_is_refused_and_index_follows_the_machines() {
        let suite = b6();
        let e = fit_benchmarks(&suite, outer(0.05), 1.0, &[]).unwrap_err();
        for needle in ["'task_start'", "\"5\"", "'Orders'", "5 entries", "100 as written", "--scale 0.06"] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
        // --only another benchmark: nothing to refuse.
        let only = fit_benchmarks(&suite, outer(0.05), 1.0, &["search".into()]).unwrap();
        assert_eq!(only, vec![Fitted { benchmark: "search".into(), repeat: 1000, note: None }]);

        let fitted = fit_benchmarks(&suite, outer(0.06), 1.0, &[]).unwrap();
        let of = |name: &str| fitted.iter().find(|f| f.benchmark == name).unwrap().clone();
        assert_eq!(of("search").repeat, 1000);
        assert_eq!(of("many_references"), Fitted { benchmark: "many_references".into(), repeat: 1000, note: None });
        for name in ["task_stop", "task_start"] {
            let f = of(name);
            assert_eq!(f.repeat, 18, "{name}");
            let note = f.note.unwrap();
            assert!(note.contains("18 times, not 300") && note.contains("'Machines'"), "{note}");
        }
        // The repeat scale already below the machines: nothing to cut.
        let fitted = fit_benchmarks(&suite, outer(0.06), 0.01, &[]).unwrap();
        assert!(fitted.iter().all(|f| f.note.is_none()), "{fitted:?}");
        assert_eq!(fitted.iter().find(|f| f.benchmark == "task_stop").unwrap().repeat, 3);
        // As written, and scaled up: as written.
        for f in [1.0, 2.0] {
            let fitted = fit_benchmarks(&suite, outer(f), 1.0, &[]).unwrap();
            assert_eq!(fitted.iter().find(|x| x.benchmark == "task_start").unwrap().repeat, 300);
            assert!(fitted.iter().all(|x| x.note.is_none()));
        }
    }

    #[test]
    fn index_keys_of_existing_entries_are_fitted_and_the_rest_left_alone() {
        let src = "root ( 'd' -> dictionary ( 'n' -> number ) 'e' -> dictionary ( ) 'm' -> matrix ( . 'd' ) ( ) )\n\
                   initialize ( 'd' -> dictionary 100 ( ) 'e' -> dictionary 0 ( ) 'm' -> matrix 0 ( ) )\n\
                   benchmark 'remove' repeat 100 ( update ( 'd' -> dictionary index remove ) )\n\
                   benchmark 'step' repeat 100 ( update . 'd' : index ( 'n' -> number 1 ) )\n\
                   benchmark 'add' repeat 100 ( update ( 'e' -> dictionary index ( ) ) )\n\
                   benchmark 'matrix' repeat 100 ( update ( 'm' -> matrix index ( ) ) )\n\
                   benchmark 'beyond' repeat 200 ( update . 'd' : index ( 'n' -> number 1 ) )\n\
                   benchmark 'declared' repeat 100 allow error 'key_missing' ( get . 'd' : \"7\" )\n\
                   benchmark 'literal' repeat 10 ( get . 'd' : \"7\" )\n";
        let suite = parse_suite(src, "t").unwrap_or_else(|e| panic!("{e}"));
        let e = fit_benchmarks(&suite, outer(0.05), 1.0, &[]).unwrap_err();
        assert!(e.contains("'literal'") && e.contains("\"7\" of 'd'") && e.contains("--scale 0.08"), "{e}");
        let names: Vec<String> = suite.benchmarks.iter().map(|b| b.name.clone()).filter(|n| n != "literal").collect();
        let fitted = fit_benchmarks(&suite, outer(0.05), 1.0, &names).unwrap();
        let repeats: Vec<(&str, u64)> = fitted.iter().map(|f| (f.benchmark.as_str(), f.repeat)).collect();
        assert_eq!(
            repeats,
            [("remove", 5), ("step", 5), ("add", 100), ("matrix", 5), ("beyond", 200), ("declared", 100)],
            "{fitted:?}"
        );
    }
}
