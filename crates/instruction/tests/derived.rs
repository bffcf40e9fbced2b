//! Derived properties: kept from each change in the same write, readable, filterable and
//! indexable like stored ones, refused as targets of updates; after random mutations every
//! one equals its recomputation from scratch (`espalier_data::check` recomputes them), and
//! registered queries that read them stay equal to the queries run afresh.

mod common;

use common::{engine, exec};
use proptest::prelude::*;

const SCHEMA: &str = "
root (
    'Products' -> dictionary (
        'Price' -> number
        'Times Ordered' -> count ( < 'Product' )
        'Units Ordered' -> sum ( < 'Product' ) 'Quantity'
        'Biggest Line' -> max ( < 'Product' ) 'Quantity'
        'Popular' -> condition ( 'Times Ordered' >= 2 )
    )
    'Orders' -> dictionary (
        'Lines' -> dictionary (
            'Product' -> reference ( .^ .^ . 'Products' )
            'Detail' -> group ( 'Quantity' -> number )
        )
        'Status' -> stategroup (
            'Open' -> ( )
            'Closed' -> ( 'Notes' -> dictionary ( 'Weight' -> number ) 'Weight' -> sum ( . 'Notes' ) 'Weight' )
        )
        'Line Count' -> count ( . 'Lines' )
        'Total Quantity' -> sum ( . 'Lines' ) 'Quantity'
        'Smallest' -> min ( . 'Lines' ) 'Quantity'
        'Largest' -> max ( . 'Lines' ) 'Quantity'
        'Empty' -> condition ( 'Line Count' == 0 )
    )
)
index 'Popular Products' ( . 'Products' ) 'Popular' equality
index 'Order Size' ( . 'Orders' ) 'Line Count' range
";

use common::{check_ok, query_rows as rows, run};

fn line(o: &str, l: &str, p: &str, q: i64) -> String {
    format!(
        "update ( 'Orders' -> dictionary {o:?} update ( 'Lines' -> dictionary {l:?} ( 'Product' -> reference {p:?} \
         'Detail' -> ( 'Quantity' -> number {q} ) ) ) )"
    )
}

#[test]
fn aggregates_and_conditions_follow_every_change() {
    let (_d, e) = engine(SCHEMA);
    exec(&e, "update ( 'Products' -> dictionary \"p1\" ( ) 'Products' -> dictionary \"p2\" ( ) 'Orders' -> dictionary \"o1\" ( ) )");
    let order =
        "collection match o in . 'Orders' select 'n' -> o number : 'Line Count' 's' -> o number : 'Total Quantity' \
                 'min' -> o number : 'Smallest' 'max' -> o number : 'Largest' 'e' -> o stategroup : 'Empty'";
    let product = "collection match p in . 'Products' select 'k' -> p 't' -> p number : 'Times Ordered' \
                   'u' -> p number : 'Units Ordered' 'b' -> p number : 'Biggest Line' 'pop' -> p stategroup : 'Popular'";
    assert_eq!(rows(&e, order), vec![r#"[0,0,0,0,"Yes"]"#]);
    exec(&e, &line("o1", "l1", "p1", 5));
    exec(&e, &line("o1", "l2", "p1", 3));
    exec(&e, &line("o1", "l3", "p2", 9));
    assert_eq!(rows(&e, order), vec![r#"[3,17,3,9,"No"]"#]);
    assert_eq!(rows(&e, product), vec![r#"["p1",2,8,5,"Yes"]"#, r#"["p2",1,9,9,"No"]"#]);
    // The extreme grows, shrinks, leaves; a reference moves to another product.
    exec(&e, "update ( 'Orders' -> dictionary \"o1\" update ( 'Lines' -> dictionary \"l3\" update ( 'Detail' -> ( 'Quantity' -> number 1 ) ) ) )");
    assert_eq!(rows(&e, order), vec![r#"[3,9,1,5,"No"]"#]);
    exec(&e, "update ( 'Orders' -> dictionary \"o1\" update ( 'Lines' -> dictionary \"l1\" update ( 'Product' -> reference \"p2\" ) ) )");
    assert_eq!(rows(&e, product), vec![r#"["p1",1,3,3,"No"]"#, r#"["p2",2,6,5,"Yes"]"#]);
    exec(&e, "update ( 'Orders' -> dictionary \"o1\" update ( 'Lines' -> dictionary \"l1\" remove ) )");
    assert_eq!(rows(&e, order), vec![r#"[2,4,1,3,"No"]"#]);
    // Removing the whole order takes its lines out of the products' aggregates.
    exec(&e, "update ( 'Orders' -> dictionary \"o1\" remove )");
    assert_eq!(rows(&e, product), vec![r#"["p1",0,0,0,"No"]"#, r#"["p2",0,0,0,"No"]"#]);
    check_ok(&e);
}

#[test]
fn derived_properties_are_filtered_indexed_and_reported_in_change_sets() {
    let (_d, e) = engine(SCHEMA);
    exec(&e, "update ( 'Products' -> dictionary \"p1\" ( ) 'Products' -> dictionary \"p2\" ( ) 'Orders' -> dictionary \"o1\" ( ) 'Orders' -> dictionary \"o2\" ( ) )");
    for (l, q) in [("a", 1), ("b", 2)] {
        exec(&e, &line("o1", l, "p1", q));
    }
    let popular = "collection match p in . 'Products' where p ? 'Popular' * 'Yes' select 'k' -> p";
    let plan = rows(&e, &format!("explain {popular}"));
    assert!(plan[0].contains("by index 'Popular Products'"), "{plan:?}");
    assert_eq!(rows(&e, popular), vec![r#"["p1"]"#]);
    let big = "collection match o in . 'Orders' where o number : 'Line Count' >= 1 select 'k' -> o";
    assert!(rows(&e, &format!("explain {big}"))[0].contains("by index 'Order Size'"));
    assert_eq!(rows(&e, big), vec![r#"["o1"]"#]);
    // The projection filter of a collection query reads derived numbers as stored ones.
    assert_eq!(rows(&e, "collection select . 'Orders' 'n' -> number : 'Line Count' > 1"), vec!["[2]"],);

    // A change set carries the derived changes after the change that caused them.
    let db = e.database().clone();
    let mut feed = db.subscribe(16);
    exec(&e, &line("o2", "c", "p2", 4));
    let item = feed.next_timeout(std::time::Duration::from_secs(5));
    let Some(espalier_transaction::FeedItem::Changes(set)) = item else { panic!("no change set: {item:?}") };
    let text = serde_json::to_string(&set.changes).unwrap();
    for want in ["\"Line Count\"", "\"Total Quantity\"", "\"Times Ordered\"", "\"Units Ordered\"", "\"Empty\""] {
        assert!(text.contains(want), "{want} missing from {text}");
    }
    check_ok(&e);
}

#[test]
fn derived_properties_cannot_be_set() {
    let (_d, e) = engine(SCHEMA);
    exec(&e, "update ( 'Orders' -> dictionary \"o1\" ( ) )");
    for text in [
        "update ( 'Orders' -> dictionary \"o1\" update ( 'Line Count' -> number 5 ) )",
        "update ( 'Orders' -> dictionary \"o2\" ( 'Total Quantity' -> number 5 ) )",
        "update ( 'Orders' -> dictionary \"o1\" update ( 'Empty' -> stategroup 'No' set to ( ) ) )",
    ] {
        let err = run(&e, text).unwrap_err();
        assert_eq!(err.code(), "type", "{text}: {err}");
        assert!(err.to_string().contains("is derived"), "{err}");
    }
}

#[test]
fn schema_errors_name_the_derived_property() {
    for (schema, want) in [
        ("root ( 'a' -> count ( . 'b' ) )", "no dictionary or matrix 'b' in the root node"),
        (
            "root ( 'd' -> dictionary ( 't' -> text ) 's' -> sum ( . 'd' ) 't' )",
            "'t' is a text; an aggregate needs a number",
        ),
        (
            "root ( 'd' -> dictionary ( 'n' -> number ) 'x' -> count ( < 'r' ) )",
            "no reference 'r' points at the root node",
        ),
        (
            "root ( 'd' -> dictionary ( 'e' -> dictionary ( ) 'c' -> count ( . 'e' ) ) 's' -> sum ( . 'd' ) 'c' )",
            "'c' is derived; an aggregate goes over stored numbers only",
        ),
        ("root ( 'c' -> condition ( 'n' > ) )", "expected an integer to compare with"),
    ] {
        let err = espalier_schema::compile(schema).unwrap_err().to_string();
        assert!(err.contains(want), "{schema}\n  gave: {err}\n  wanted: {want}");
    }
}

// ---- random mutations, then recomputation from scratch ----

#[derive(Debug, Clone)]
enum Op {
    AddLine { o: u8, l: u8, p: u8, q: i8 },
    SetQuantity { o: u8, l: u8, q: i8 },
    Retarget { o: u8, l: u8, p: u8 },
    RemoveLine { o: u8, l: u8 },
    AddOrder { o: u8 },
    RemoveOrder { o: u8 },
    Close { o: u8 },
    Note { o: u8, n: u8, w: i8 },
    RemoveProduct { p: u8 },
    AddProduct { p: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..3, 0u8..4, 0u8..3, any::<i8>()).prop_map(|(o, l, p, q)| Op::AddLine { o, l, p, q }),
        3 => (0u8..3, 0u8..4, any::<i8>()).prop_map(|(o, l, q)| Op::SetQuantity { o, l, q }),
        2 => (0u8..3, 0u8..4, 0u8..3).prop_map(|(o, l, p)| Op::Retarget { o, l, p }),
        2 => (0u8..3, 0u8..4).prop_map(|(o, l)| Op::RemoveLine { o, l }),
        1 => (0u8..3).prop_map(|o| Op::AddOrder { o }),
        1 => (0u8..3).prop_map(|o| Op::RemoveOrder { o }),
        1 => (0u8..3).prop_map(|o| Op::Close { o }),
        2 => (0u8..3, 0u8..3, any::<i8>()).prop_map(|(o, n, w)| Op::Note { o, n, w }),
        1 => (0u8..3).prop_map(|p| Op::RemoveProduct { p }),
        1 => (0u8..3).prop_map(|p| Op::AddProduct { p }),
    ]
}

fn text(op: &Op) -> String {
    let o = |o: u8| format!("'Orders' -> dictionary \"o{o}\"");
    match op {
        Op::AddLine { o: oo, l, p, q } => line(&format!("o{oo}"), &format!("l{l}"), &format!("p{p}"), i64::from(*q)),
        Op::SetQuantity { o: oo, l, q } => format!(
            "update ( {} update ( 'Lines' -> dictionary \"l{l}\" update ( 'Detail' -> ( 'Quantity' -> number {q} ) ) ) )",
            o(*oo)
        ),
        Op::Retarget { o: oo, l, p } => format!(
            "update ( {} update ( 'Lines' -> dictionary \"l{l}\" update ( 'Product' -> reference \"p{p}\" ) ) )",
            o(*oo)
        ),
        Op::RemoveLine { o: oo, l } => format!("update ( {} update ( 'Lines' -> dictionary \"l{l}\" remove ) )", o(*oo)),
        Op::AddOrder { o: oo } => format!("update ( {} ( ) )", o(*oo)),
        Op::RemoveOrder { o: oo } => format!("update ( {} remove )", o(*oo)),
        Op::Close { o: oo } => format!("update ( {} update ( 'Status' -> stategroup 'Closed' set to ( ) ) )", o(*oo)),
        Op::Note { o: oo, n, w } => format!(
            "update ( {} update ( 'Status' -> stategroup 'Closed' ( 'Notes' -> dictionary \"n{n}\" ( 'Weight' -> number {w} ) ) ) )",
            o(*oo)
        ),
        Op::RemoveProduct { p } => format!("update ( 'Products' -> dictionary \"p{p}\" remove )"),
        Op::AddProduct { p } => format!("update ( 'Products' -> dictionary \"p{p}\" ( ) )"),
    }
}

/// The start of every random sequence: products p0–p2 and order o0.
fn three_products_one_order() -> (tempfile::TempDir, espalier_instruction::Engine) {
    let (d, e) = engine(SCHEMA);
    exec(
        &e,
        "update ( 'Products' -> dictionary \"p0\" ( ) 'Products' -> dictionary \"p1\" ( ) \
              'Products' -> dictionary \"p2\" ( ) 'Orders' -> dictionary \"o0\" ( ) )",
    );
    (d, e)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Whatever sequence of changes (many of them refused: missing keys, products still
    /// referred to), every derived value equals its recomputation and every index row is
    /// exact, checked after each operation.
    #[test]
    fn derived_values_equal_their_recomputation(ops in proptest::collection::vec(op(), 1..50)) {
        let (_d, e) = three_products_one_order();
        for op in &ops {
            let t = text(op);
            let _ = run(&e, &t);
            let snap = e.database().snapshot().unwrap();
            let report = espalier_data::check(&snap.graph(), &mut |_| {}).unwrap();
            prop_assert!(report.is_ok(), "after {}: {:?}", t, report.problems);
        }
    }
}

/// Registered queries that read derived values (directly, by index, through a reference,
/// inside a state): their incremental rows are checked against the query run afresh.
const REGISTERED: [&str; 6] = [
    "collection match o in . 'Orders' where o number : 'Line Count' == 1 select 'o' -> o",
    "collection match o in . 'Orders' select 'o' -> o 'n' -> o number : 'Line Count' \
     's' -> o number : 'Total Quantity' 'e' -> o stategroup : 'Empty'",
    "collection match p in . 'Products' where p ? 'Popular' * 'Yes' select 'p' -> p 't' -> p number : 'Times Ordered'",
    "collection match o in . 'Orders' l in o . 'Lines' where l > 'Product' number : 'Units Ordered' > 3 \
     select 'o' -> o 'l' -> l",
    "collection match o in . 'Orders' where o number : 'Line Count' >= 1 select 'o' -> o",
    "collection match o in . 'Orders' where o ? 'Status' * 'Closed' number : 'Weight' > 0 select 'o' -> o",
];

fn sorted(mut rows: Vec<String>) -> Vec<String> {
    rows.sort();
    rows
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn registered_queries_over_derived_values_equal_their_recomputation(ops in proptest::collection::vec(op(), 1..50)) {
        let (_d, e) = three_products_one_order();
        let ids: Vec<u64> = REGISTERED
            .iter()
            .map(|q| e.register_text(q, &std::collections::HashMap::new()).expect("registers").id)
            .collect();
        for op in &ops {
            let t = text(op);
            let _ = run(&e, &t);
            for (q, id) in REGISTERED.iter().zip(&ids) {
                let (_, now) = e.registry().result(*id).expect("still registered");
                let kept = sorted(now.rows.iter().map(|r| serde_json::to_string(&r.values).unwrap()).collect());
                prop_assert_eq!(&kept, &sorted(rows(&e, q)), "after {}: {}", t, q);
            }
        }
    }
}
