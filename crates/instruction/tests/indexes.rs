//! Schema indexes: kept in the same commit as the entries they index, used by the pattern
//! planner (shown by `explain`), unique ones enforced at the end of each request. The model
//! for every answer is the same database without index declarations.

mod common;

use common::{check_ok, engine, exec, query_rows, run};
use espalier_data::NodeId;
use espalier_instruction::{Engine, Reply};
use proptest::prelude::*;

const BODY: &str = "
root (
    'Clients' -> dictionary (
        'Name' -> text
        'Contact' -> group ( 'E-mail' -> text )
        'Age' -> number
        'Tier' -> stategroup ( 'Basic' -> ( ) 'Gold' -> ( 'Since' -> number ) )
        'Orders' -> dictionary (
            'Amount' -> number
            'Status' -> stategroup ( 'Open' -> ( ) 'Done' -> ( ) )
        )
    )
)
";

const INDEXES: &str = "
index 'Client Name' ( . 'Clients' ) 'Name' prefix
index 'Client E-mail' ( . 'Clients' ) 'E-mail' equality unique
index 'Client Age' ( . 'Clients' ) 'Age' range
index 'Client Tier' ( . 'Clients' ) 'Tier' equality
index 'Order Amount' ( . 'Clients' . 'Orders' ) 'Amount' range
index 'Order Status' ( . 'Clients' . 'Orders' ) 'Status' equality
";

fn indexed() -> (tempfile::TempDir, Engine) {
    engine(&format!("{BODY}{INDEXES}"))
}

/// The rows of a query as sorted strings (order is not part of what is compared).
fn rows(e: &Engine, text: &str) -> Vec<String> {
    let mut out = query_rows(e, text);
    out.sort();
    out
}

/// The plan's operation column.
fn plan(e: &Engine, query: &str) -> Vec<String> {
    match run(e, &format!("explain {query}")).unwrap_or_else(|err| panic!("{query}\n  failed: {err}")) {
        Reply::Query(q) => q.rows.iter().map(|r| r.values[0].as_str().unwrap().to_string()).collect(),
        other => panic!("not a query reply: {other:?}"),
    }
}

fn client(key: &str, name: &str, mail: &str, age: i64) -> String {
    format!(
        "update ( 'Clients' -> dictionary {key:?} ( 'Name' -> text {name:?} 'Contact' -> ( 'E-mail' -> text {mail:?} ) \
         'Age' -> number {age} ) )"
    )
}

#[test]
fn the_planner_binds_by_the_index_that_answers_the_condition() {
    let (_d, e) = indexed();
    exec(&e, &client("c1", "Alice", "a@x", 30));
    exec(&e, &client("c2", "Albert", "b@x", 40));
    exec(&e, &client("c3", "Bob", "c@x", 50));
    exec(&e, "update ( 'Clients' -> dictionary \"c2\" update ( 'Tier' -> stategroup 'Gold' set to ( ) ) )");
    exec(
        &e,
        "update ( 'Clients' -> dictionary \"c3\" update ( 'Orders' -> dictionary \"o1\" ( 'Amount' -> number 7 ) ) )",
    );

    let cases = [
        ("c text : 'Name' == \"Bob\"", "bind c by index 'Client Name' ('Name' == \"Bob\")", vec!["[\"c3\"]"]),
        (
            "c text : 'Name' ( [ 'Al' ] * )",
            "bind c by index 'Client Name' ('Name' starts with \"Al\")",
            vec!["[\"c1\"]", "[\"c2\"]"],
        ),
        (
            "c + 'Contact' text : 'E-mail' == \"b@x\"",
            "bind c by index 'Client E-mail' ('E-mail' == \"b@x\")",
            vec!["[\"c2\"]"],
        ),
        (
            "c number : 'Age' > 30 and c number : 'Age' <= 50",
            "bind c by index 'Client Age' ('Age' from 30 to 50)",
            vec!["[\"c2\"]", "[\"c3\"]"],
        ),
        ("c ? 'Tier' * 'Gold'", "bind c by index 'Client Tier' ('Tier' in state 'Gold')", vec!["[\"c2\"]"]),
        (
            "c stategroup : 'Tier' == 'Basic'",
            "bind c by index 'Client Tier' ('Tier' in state 'Basic')",
            vec!["[\"c1\"]", "[\"c3\"]"],
        ),
    ];
    for (cond, line, want) in cases {
        let q = format!("collection match c in . 'Clients' where {cond} select 'k' -> c");
        let p = plan(&e, &q);
        assert_eq!(p[0], line, "{q}\n{p:#?}");
        assert!(p[1].starts_with("filter c"), "the served condition is re-checked: {p:#?}");
        assert_eq!(rows(&e, &q), want, "{q}");
    }

    // Nested collections: the index holds the orders of every client.
    let q = "collection match o in . 'Clients' . 'Orders' where o number : 'Amount' >= 5 select 'k' -> o";
    assert_eq!(plan(&e, q)[0], "bind o by index 'Order Amount' ('Amount' from 5 to …)");
    assert_eq!(rows(&e, q), vec!["[[\"c3\",\"o1\"]]"]);

    // Inclusive bounds on a number: the index yields exactly the rows they hold for, so no
    // filter re-checks them (a strict bound, above, keeps its filter).
    let q = "collection match c in . 'Clients' where c number : 'Age' >= 40 and c number : 'Age' <= 50 select 'k' -> c";
    let p = plan(&e, q);
    assert_eq!(p[0], "bind c by index 'Client Age' ('Age' from 40 to 50)");
    assert!(!p.iter().any(|l| l.starts_with("filter")), "{p:#?}");
    assert_eq!(rows(&e, q), vec!["[\"c2\"]", "[\"c3\"]"]);

    // A join: each client probes the orders' amount index with its age (both sides are
    // indexed; one is scanned), rather than every order being read for each client.
    exec(&e, &client("c4", "Cyd", "d@x", 7));
    let q = "collection match c in . 'Clients' o in . 'Clients' . 'Orders' \
             where c number : 'Age' == o number : 'Amount' select 'c' -> c 'o' -> o";
    let p = plan(&e, q);
    assert!(p[0].ends_with("(scan)"), "{p:#?}");
    assert!(
        p[1] == "bind o by index 'Order Amount' ('Amount' == c 'Age')"
            || p[1] == "bind c by index 'Client Age' ('Age' == o 'Amount')",
        "{p:#?}"
    );
    assert_eq!(rows(&e, q), vec!["[\"c4\",[\"c3\",\"o1\"]]"]);
    exec(&e, "update ( 'Clients' -> dictionary \"c4\" remove )");

    // Not answerable by an index: `!=`, a range on an equality index, a keyed path.
    for q in [
        "collection match c in . 'Clients' where c text : 'Name' != \"Bob\" select 'k' -> c",
        "collection match c in . 'Clients' where c + 'Contact' text : 'E-mail' > \"a\" select 'k' -> c",
        "collection match o in . 'Clients' : \"c3\" . 'Orders' where o number : 'Amount' >= 5 select 'k' -> o",
    ] {
        assert!(!plan(&e, q)[0].contains("by index"), "{q}: {:#?}", plan(&e, q));
    }
    check_ok(&e);
}

#[test]
fn unique_indexes_are_checked_when_the_request_ends() {
    let (_d, e) = indexed();
    exec(&e, &client("c1", "A", "a@x", 1));
    let err = run(&e, &client("c2", "B", "a@x", 2)).unwrap_err();
    assert_eq!(err.code(), "not_unique");
    assert_eq!(
        err.to_string(),
        "index 'Client E-mail' is unique, but . 'Clients' : \"c1\" and . 'Clients' : \"c2\" both have 'E-mail' \"a@x\""
    );
    // Nothing of the failed request is left: no entry, no index row.
    assert_eq!(rows(&e, "collection match c in . 'Clients' select 'k' -> c"), vec!["[\"c1\"]"]);
    check_ok(&e);

    // Within one request two entries may share a value for a moment (a new entry holds the
    // default "" until its items set it): only the end state counts.
    exec(&e, "update ( 'Clients' -> dictionary \"c2\" ( ) 'Clients' -> dictionary \"c3\" ( 'Contact' -> ( 'E-mail' -> text \"c@x\" ) ) )");
    // Now c2 holds "": a third entry left at the default collides with it.
    let err = run(&e, "update ( 'Clients' -> dictionary \"c4\" ( ) )").unwrap_err();
    assert_eq!(err.code(), "not_unique");
    // A swap inside one transaction passes; so does a value freed by a removal.
    exec(
        &e,
        "transaction ( update ( 'Clients' -> dictionary \"c1\" update ( 'Contact' -> ( 'E-mail' -> text \"c@x\" ) ) ), \
         update ( 'Clients' -> dictionary \"c3\" update ( 'Contact' -> ( 'E-mail' -> text \"a@x\" ) ) ) )",
    );
    assert_eq!(
        rows(&e, "collection match c in . 'Clients' where c + 'Contact' text : 'E-mail' == \"a@x\" select 'k' -> c"),
        vec!["[\"c3\"]"]
    );
    exec(&e, "update ( 'Clients' -> dictionary \"c1\" remove )");
    exec(&e, &client("c5", "E", "c@x", 5));
    check_ok(&e);
}

#[test]
fn long_texts_share_a_cut_key_and_are_told_apart_by_their_values() {
    let (_d, e) = indexed();
    let stem = "L".repeat(250);
    let (a, b) = (format!("{stem}a"), format!("{stem}b"));
    exec(&e, &client("c1", &a, &format!("{stem}1"), 1));
    exec(&e, &client("c2", &b, &format!("{stem}2"), 2));
    exec(&e, &client("c3", &stem, "x", 3));
    let q = |cond: String| format!("collection match c in . 'Clients' where {cond} select 'k' -> c");
    assert_eq!(rows(&e, &q(format!("c text : 'Name' == {a:?}"))), vec!["[\"c1\"]"]);
    assert_eq!(rows(&e, &q(format!("c text : 'Name' == {stem:?}"))), vec!["[\"c3\"]"]);
    assert_eq!(rows(&e, &q(format!("c text : 'Name' ( [ {:?} ] * )", &stem[..240]))).len(), 3);
    assert_eq!(rows(&e, &q(format!("c text : 'Name' ( [ {:?} ] * )", format!("{stem}b")))), vec!["[\"c2\"]"]);
    // Unique: two long e-mails with one cut key are different values.
    let err = run(&e, &client("c4", "d", &format!("{stem}1"), 4)).unwrap_err();
    assert_eq!(err.code(), "not_unique");
    check_ok(&e);
}

// ---- random mutations against the same database without indexes ----

#[derive(Debug, Clone)]
enum Op {
    AddClient { k: u8, name: u8, mail: u8, age: i8 },
    SetName { k: u8, name: u8 },
    SetMail { k: u8, mail: u8 },
    SetAge { k: u8, age: i8 },
    Tier { k: u8, gold: bool },
    RemoveClient { k: u8 },
    AddOrder { k: u8, o: u8, amount: i8 },
    SetAmount { k: u8, o: u8, amount: i8 },
    Status { k: u8, o: u8, done: bool },
    RemoveOrder { k: u8, o: u8 },
}

const NAMES: [&str; 6] = ["Al", "Alice", "Albert", "Bob", "", "Bobby"];

fn name(i: u8) -> String {
    match i % 8 {
        6 => format!("{}x", "L".repeat(220)),
        7 => format!("{}y", "L".repeat(220)),
        n => NAMES[n as usize].to_string(),
    }
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..6;
    prop_oneof![
        (k.clone(), any::<u8>(), 0u8..10, any::<i8>()).prop_map(|(k, name, mail, age)| Op::AddClient {
            k,
            name,
            mail,
            age
        }),
        (k.clone(), any::<u8>()).prop_map(|(k, name)| Op::SetName { k, name }),
        (k.clone(), 0u8..10).prop_map(|(k, mail)| Op::SetMail { k, mail }),
        (k.clone(), any::<i8>()).prop_map(|(k, age)| Op::SetAge { k, age }),
        (k.clone(), any::<bool>()).prop_map(|(k, gold)| Op::Tier { k, gold }),
        k.clone().prop_map(|k| Op::RemoveClient { k }),
        (k.clone(), 0u8..3, any::<i8>()).prop_map(|(k, o, amount)| Op::AddOrder { k, o, amount }),
        (k.clone(), 0u8..3, any::<i8>()).prop_map(|(k, o, amount)| Op::SetAmount { k, o, amount }),
        (k.clone(), 0u8..3, any::<bool>()).prop_map(|(k, o, done)| Op::Status { k, o, done }),
        (k, 0u8..3).prop_map(|(k, o)| Op::RemoveOrder { k, o }),
    ]
}

fn text(op: &Op) -> String {
    let c = |k: u8| format!("'Clients' -> dictionary \"c{k}\"");
    let o = |o: u8| format!("'Orders' -> dictionary \"o{o}\"");
    let state = |b: bool, yes: &str, no: &str| if b { yes.to_string() } else { no.to_string() };
    let body = match op {
        Op::AddClient { k, name: n, mail, age } => format!(
            "{} ( 'Name' -> text {:?} 'Contact' -> ( 'E-mail' -> text \"m{mail}\" ) 'Age' -> number {age} )",
            c(*k),
            name(*n)
        ),
        Op::SetName { k, name: n } => format!("{} update ( 'Name' -> text {:?} )", c(*k), name(*n)),
        Op::SetMail { k, mail } => format!("{} update ( 'Contact' -> ( 'E-mail' -> text \"m{mail}\" ) )", c(*k)),
        Op::SetAge { k, age } => format!("{} update ( 'Age' -> number {age} )", c(*k)),
        Op::Tier { k, gold } => {
            format!("{} update ( 'Tier' -> stategroup '{}' set to ( ) )", c(*k), state(*gold, "Gold", "Basic"))
        }
        Op::RemoveClient { k } => format!("{} remove", c(*k)),
        Op::AddOrder { k, o: oo, amount } => format!("{} update ( {} ( 'Amount' -> number {amount} ) )", c(*k), o(*oo)),
        Op::SetAmount { k, o: oo, amount } => {
            format!("{} update ( {} update ( 'Amount' -> number {amount} ) )", c(*k), o(*oo))
        }
        Op::Status { k, o: oo, done } => format!(
            "{} update ( {} update ( 'Status' -> stategroup '{}' set to ( ) ) )",
            c(*k),
            o(*oo),
            state(*done, "Done", "Open")
        ),
        Op::RemoveOrder { k, o: oo } => format!("{} update ( {} remove )", c(*k), o(*oo)),
    };
    format!("update ( {body} )")
}

/// Queries every index can answer, with values around those the operations write.
fn queries() -> Vec<String> {
    let mut out = Vec::new();
    let c =
        |cond: &str| format!("collection match c in . 'Clients' where {cond} select 'k' -> c 'n' -> c text : 'Name'");
    let o = |cond: &str| format!("collection match o in . 'Clients' . 'Orders' where {cond} select 'k' -> o");
    for i in 0..8 {
        out.push(c(&format!("c text : 'Name' == {:?}", name(i))));
    }
    for p in ["A", "Al", "Ali", "B", "", &"L".repeat(210)] {
        out.push(c(&format!("c text : 'Name' ( [ {p:?} ] * )")));
    }
    for m in 0..10 {
        out.push(c(&format!("c + 'Contact' text : 'E-mail' == \"m{m}\"")));
    }
    for (lo, hi) in [(-128, 127), (-10, 10), (0, 0), (50, 20), (100, 127)] {
        out.push(c(&format!("c number : 'Age' >= {lo} and c number : 'Age' < {hi}")));
        out.push(c(&format!("c number : 'Age' > {lo}")));
        out.push(o(&format!("o number : 'Amount' <= {hi} and o number : 'Amount' > {lo}")));
    }
    out.push(c("c ? 'Tier' * 'Gold'"));
    out.push(c("c stategroup : 'Tier' == 'Basic'"));
    // Joins: each order (or client) probes the other side's index with its own value.
    out.push(
        "collection match c in . 'Clients' o in . 'Clients' . 'Orders' where c number : 'Age' == o number : 'Amount' \
         select 'k' -> c 'o' -> o"
            .to_string(),
    );
    out.push(
        "collection match c in . 'Clients' d in . 'Clients' where d text : 'Name' == c + 'Contact' text : 'E-mail' \
         select 'k' -> c 'd' -> d"
            .to_string(),
    );
    out.push(o("o ? 'Status' * 'Done'"));
    out.push(o("o stategroup : 'Status' == 'Open'"));
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// After every few operations both databases agree on every query; the indexed one
    /// refuses exactly the requests that would repeat an e-mail; `check` finds its index rows
    /// exact.
    #[test]
    fn indexes_answer_as_the_scans_do(ops in proptest::collection::vec(op(), 1..40)) {
        let (_d1, with) = indexed();
        let (mut _d2, mut model) = engine(BODY);
        let queries = queries();
        // The requests the model has applied (replayed to rebuild it after a refusal).
        let mut applied: Vec<String> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let t = text(op);
            let a = run(&with, &t);
            let b = run(&model, &t);
            if a.as_ref().is_err_and(|e| e.code() == "not_unique") {
                // Right to refuse: after the same request the model has the e-mail twice.
                prop_assert!(b.is_ok(), "{}: the model refused too: {:?}", t, b.err());
                let twice = rows(&model, "collection match c in . 'Clients' d in . 'Clients' \
                     where c != d and c + 'Contact' text : 'E-mail' == d + 'Contact' text : 'E-mail' select 'k' -> c");
                prop_assert!(!twice.is_empty(), "{}: refused although no e-mail repeats", t);
                (_d2, model) = engine(BODY);
                for t in &applied {
                    run(&model, t).unwrap_or_else(|e| panic!("replaying {t}: {e}"));
                }
            } else {
                prop_assert_eq!(a.is_ok(), b.is_ok(), "{}: {:?} vs {:?}", t, a.as_ref().err(), b.as_ref().err());
                if b.is_ok() {
                    applied.push(t.clone());
                    // Where the model has an e-mail twice the indexed database must have refused.
                    let twice = rows(&model, "collection match c in . 'Clients' d in . 'Clients' \
                         where c != d and c + 'Contact' text : 'E-mail' == d + 'Contact' text : 'E-mail' select 'k' -> c");
                    prop_assert!(twice.is_empty(), "{}: accepted although an e-mail repeats: {:?}", t, twice);
                }
            }
            if i % 4 == 3 || i + 1 == ops.len() {
                for q in &queries {
                    prop_assert_eq!(rows(&with, q), rows(&model, q), "after {}: {}", t, q);
                }
            }
        }
        check_ok(&with);
    }
}

#[test]
fn a_request_past_the_remembered_values_checks_the_whole_unique_index() {
    let (_d, e) = indexed();
    let add = |from: usize, to: usize, dup: Option<usize>| {
        let adds: Vec<String> = (from..to)
            .map(|i| {
                let mail = if Some(i) == dup { 0 } else { i };
                format!("update ( 'Clients' -> dictionary \"c{i}\" ( 'Contact' -> ( 'E-mail' -> text \"m{mail}\" ) ) )")
            })
            .collect();
        run(&e, &format!("transaction ( {} )", adds.join(", ")))
    };
    // More new values than one request remembers (4096): the end-of-request check then
    // scans every unique index whole.
    add(0, 5000, None).unwrap();
    let err = add(5000, 10_000, Some(9_999)).unwrap_err();
    assert_eq!(err.code(), "not_unique", "{err}");
    assert!(err.to_string().contains("both have 'E-mail' \"m0\""), "{err}");
    assert_eq!(rows(&e, "collection match c in . 'Clients' select 'n' -> count ( )"), vec!["[5000]"]);
    check_ok(&e);
}

#[test]
fn aggregates_without_grouping_give_one_row_even_over_no_match() {
    let (_d, e) = indexed();
    let adds: Vec<String> =
        (0..4)
            .map(|i| {
                let age = 20 + i;
                format!("update ( 'Clients' -> dictionary \"c{i}\" ( 'Age' -> number {age} 'Contact' -> ( 'E-mail' -> text \"m{i}\" ) ) )")
            })
            .collect();
    run(&e, &format!("transaction ( {} )", adds.join(", "))).unwrap();
    // No grouping columns: one group, made before the first match. A count and a sum are
    // added inline, a maximum through `Agg::add`.
    let q = |agg: &str, cond: &str| {
        let text = format!(
            "collection match c in . 'Clients' {cond} select 'n' -> count ( ) 'a' -> {agg} ( c number : 'Age' )"
        );
        rows(&e, &text)
    };
    assert_eq!(q("sum", ""), vec!["[4,86]"]);
    assert_eq!(q("sum", "where c number : 'Age' >= 22"), vec!["[2,45]"]);
    assert_eq!(q("sum", "where c number : 'Age' > 99"), vec!["[0,0]"]);
    assert_eq!(q("max", ""), vec!["[4,23]"]);
    assert_eq!(q("max", "where c number : 'Age' > 99"), vec!["[0,null]"]);
}

#[test]
fn index_rows_survive_a_reopen_from_the_log_and_from_a_checkpoint() {
    let (dir, e) = indexed();
    for i in 0..300i64 {
        exec(&e, &client(&format!("c{i:03}"), &format!("N{}", i % 7), &format!("m{i}@x"), 20 + i % 50));
    }
    // Ages move: each entry's index key moves with them, within its leaf or across.
    for i in (0..300i64).step_by(3) {
        exec(&e, &format!("update . 'Clients' : \"c{i:03}\" ( 'Age' -> number {} )", 90 - i % 40));
    }
    let range = "collection match c in . 'Clients' where c number : 'Age' >= 40 and c number : 'Age' <= 60 select 'c' -> c 'a' -> c number : 'Age'";
    let one = "collection match c in . 'Clients' where c + 'Contact' text : 'E-mail' == \"m123@x\" select 'c' -> c";
    let want = (rows(&e, range), rows(&e, one));
    assert!(want.0.len() > 50 && want.1.len() == 1, "the queries find rows: {want:?}");
    assert!(plan(&e, range)[0].contains("index"), "the range is read through the index: {:?}", plan(&e, range));
    let path = dir.path().join("db");
    let opts = || espalier_transaction::DatabaseOptions {
        durability: espalier_transaction::Durability::None,
        ..Default::default()
    };
    drop(e);
    // Reopened: the index rows come back from the log's replay.
    let e = Engine::open(&path, opts()).unwrap();
    assert_eq!((rows(&e, range), rows(&e, one)), want);
    check_ok(&e);
    // Written to checkpoint files and read back from them.
    e.database().checkpoint().unwrap();
    drop(e);
    let e = Engine::open(&path, opts()).unwrap();
    assert_eq!((rows(&e, range), rows(&e, one)), want);
    check_ok(&e);
}

#[test]
fn an_index_row_whose_entry_is_gone_is_reported_not_followed() {
    let (_dir, e) = indexed();
    exec(&e, &client("c1", "Ann", "a@x", 30));
    exec(&e, &client("c2", "Bob", "b@x", 35));
    let schema = e.database().schema().clone();
    let n = schema.indexes.iter().position(|d| d.name == "Client Age").unwrap() as u32;
    let ty = espalier_data::index::entry_type(&schema, n).unwrap();
    // A row of the 'Client Age' index that names a row of no client (a corrupt index).
    e.database()
        .write(|g| -> Result<(), espalier_transaction::TxError> {
            let key = espalier_data::index::row(espalier_data::index::IndexValue::Number(33), NodeId::new(ty, 999));
            g.txn().index_put(espalier_data::keys::schema_index(&schema, n), 0, &key, 999).unwrap();
            Ok(())
        })
        .unwrap();
    let through =
        "collection match c in . 'Clients' where c number : 'Age' >= 31 and c number : 'Age' <= 40 select 'c' -> c";
    // (The error names the index: the query is read through it.)
    let err = run(&e, through).expect_err("a row of no entry is not followed").to_string();
    assert!(err.contains("index 'Client Age' holds row 999, which is not live"), "{err}");
    // Everything else keeps working, and `check` names the stray row.
    assert_eq!(rows(&e, "collection match c in . 'Clients' select 'c' -> c").len(), 2);
    let snap = e.database().snapshot().unwrap();
    let report = espalier_data::check(&snap.graph(), &mut |_| {}).unwrap();
    assert!(!report.is_ok(), "check finds the stray index row");
}
