//! The queries of benchmark B6 (thesis appendix B.6: search, overview_subcollection,
//! get_big_items, many_references), each as the appendix's collection query and as a pattern
//! query, on a small dataset of the B6 model; both must give the answers computed in plain
//! Rust from the data that was loaded.

use std::collections::HashMap;

use espalier_instruction::{Engine, ParamValue, QueryResult, Reply};
use serde_json::{json, Value};

mod common;
use common::{engine, exec};

const SCHEMA: &str = include_str!("../../schema/tests/models/b6.alan");

struct Client {
    key: String,
    name: String,
    premium: bool,
}

struct Order {
    key: String,
    client: usize,
    quantity: i64,
    due: i64,
    /// modification key -> (material key, quantity)
    modifications: Vec<(String, Vec<(String, i64)>)>,
}

fn run(e: &Engine, text: &str, params: &[(&str, &str)]) -> QueryResult {
    let params: HashMap<String, ParamValue> =
        params.iter().map(|(k, v)| (k.to_string(), ParamValue::Text(v.to_string()))).collect();
    match e.execute_text(text, &params).unwrap_or_else(|err| panic!("{text}\n  failed: {err}")) {
        Reply::Query(q) => q,
        other => panic!("{other:?}"),
    }
}

fn values(q: &QueryResult) -> Vec<Vec<Value>> {
    q.rows.iter().map(|r| r.values.clone()).collect()
}

#[test]
fn b6_queries_in_both_forms() {
    let (_d, e) = engine(SCHEMA);
    let names = [
        "abacus",
        "abc tools",
        "abcd",
        "abcde corp",
        "acme",
        "b-line",
        "abc",
        "zed",
        "abcdef",
        "aardvark",
        "ab",
        "abcd two",
    ];
    let clients: Vec<Client> = names
        .iter()
        .enumerate()
        .map(|(i, n)| Client { key: format!("c{i:02}"), name: n.to_string(), premium: i % 3 == 0 })
        .collect();
    for c in &clients {
        let premium = if c.premium { "Yes" } else { "No" };
        exec(
            &e,
            &format!(
                "update ( 'Clients' -> dictionary \"{}\" ( 'Name' -> text \"{}\" 'Is Premium Client' -> stategroup '{premium}' ( ) ) )",
                c.key, c.name
            ),
        );
    }
    for m in 0..5 {
        exec(
            &e,
            &format!("update ( 'Materials' -> dictionary \"m{m}\" ( 'Available In Stock' -> number {} ) )", m * 10),
        );
    }
    for p in 0..3 {
        exec(&e, &format!("update ( 'Products' -> dictionary \"p{p}\" ( 'Price' -> number {} ) )", 100 + p));
    }
    let orders: Vec<Order> = (0..14)
        .map(|i| Order {
            key: format!("o{i:02}"),
            client: (i * 5) % clients.len(),
            quantity: (i as i64 * 37) % 100,
            due: 1000 - i as i64 * 3,
            modifications: (0..i % 3)
                .map(|j| {
                    (format!("mod{j}"), (0..(i + j) % 4).map(|k| (format!("m{k}"), (i * k) as i64 % 10)).collect())
                })
                .collect(),
        })
        .collect();
    for o in &orders {
        let mods: String = o
            .modifications
            .iter()
            .map(|(k, ms)| {
                let added: String = ms
                    .iter()
                    .map(|(m, q)| format!(" 'Added Materials' -> matrix \"{m}\" ( 'Quantity' -> number {q} )"))
                    .collect();
                format!(" 'Modifications' -> dictionary \"{k}\" ( 'Description' -> text \"change\"{added} )")
            })
            .collect();
        exec(
            &e,
            &format!(
                "update ( 'Orders' -> dictionary \"{}\" ( 'Client' -> reference \"{}\" 'Product' -> reference \"p{}\" 'Quantity' -> number {} 'Due Date' -> number {} 'Planner Group' -> text \"group x\"{mods} ) )",
                o.key, clients[o.client].key, o.quantity % 3, o.quantity, o.due
            ),
        );
    }
    // Machines: 0, 2, 4 work on orders 3, 5, 7; 1 and 3 are not selected.
    for m in 0..5 {
        let task = if m % 2 == 0 {
            format!("'Selected' set to ( 'Current Order' -> reference \"{}\" )", orders[3 + m].key)
        } else {
            "'Not Selected' set to ( )".to_string()
        };
        exec(&e, &format!("update ( 'Machines' -> dictionary \"{m}\" ( 'Current Task' -> stategroup {task} ) )"));
    }

    // B.6.1 search: names starting with a prefix, 10 at most, with the total.
    for prefix in ["a", "ab", "abc", "abcd", "abcde"] {
        let mut want: Vec<&Client> = clients.iter().filter(|c| c.name.starts_with(prefix)).collect();
        want.sort_by(|a, b| a.key.cmp(&b.key));
        let page: Vec<Vec<Value>> = want.iter().take(10).map(|c| vec![json!(c.name)]).collect();
        let q = run(
            &e,
            &format!("collection select . 'Clients' 'Name' -> text : 'Name' ( [ '{prefix}' ] * ) limit 10"),
            &[],
        );
        assert_eq!((q.total, values(&q)), (want.len() as u64, page.clone()), "search {prefix}");
        let p = run(
            &e,
            "collection match c in . 'Clients' where c text : 'Name' ( [ $prefix ] * ) select 'Name' -> c text : 'Name' limit 10",
            &[("prefix", prefix)],
        );
        assert_eq!((p.total, values(&p)), (want.len() as u64, page), "search {prefix} as a pattern");
    }
    // The pattern form can also order the hits.
    let p = run(
        &e,
        "collection match c in . 'Clients' where c text : 'Name' ( [ 'ab' ] * ) select 'Name' -> c text : 'Name' order by 'Name' desc limit 3",
        &[],
    );
    assert_eq!(values(&p), vec![vec![json!("abcdef")], vec![json!("abcde corp")], vec![json!("abcd two")]]);

    // B.6.2 overview_subcollection: every added material of every modification of every order.
    let mut want: Vec<(Vec<String>, i64)> = Vec::new();
    for o in &orders {
        for (k, ms) in &o.modifications {
            for (m, q) in ms {
                want.push((vec![o.key.clone(), k.clone(), m.clone()], *q));
            }
        }
    }
    want.sort();
    let q = run(
        &e,
        "collection select . 'Orders' . 'Modifications' % 'Added Materials' 'Quantity' -> number : 'Quantity' limit 10",
        &[],
    );
    let got: Vec<(Vec<String>, i64)> = q.rows.iter().map(|r| (r.key.clone(), r.values[0].as_i64().unwrap())).collect();
    assert_eq!((q.total, got), (want.len() as u64, want.iter().take(10).cloned().collect()), "overview");
    let p = run(
        &e,
        "collection match m in . 'Orders' . 'Modifications' % 'Added Materials' select 'at' -> m 'Quantity' -> m number : 'Quantity' limit 10",
        &[],
    );
    let got: Vec<(Vec<String>, i64)> = p
        .rows
        .iter()
        .map(|r| {
            let key = r.values[0].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
            (key, r.values[1].as_i64().unwrap())
        })
        .collect();
    assert_eq!((p.total, got), (want.len() as u64, want.iter().take(10).cloned().collect()), "overview as a pattern");
    // …and sum them per order, which the collection query cannot.
    let p = run(
        &e,
        "collection match o in . 'Orders' m in o . 'Modifications' % 'Added Materials'
         select 'order' -> o 'total' -> sum ( m number : 'Quantity' ) order by 'order'",
        &[],
    );
    let mut sums: Vec<(String, i64)> = orders
        .iter()
        .map(|o| (o.key.clone(), o.modifications.iter().flat_map(|(_, ms)| ms.iter().map(|(_, q)| *q)).sum::<i64>()))
        .filter(|(k, _)| orders.iter().any(|o| &o.key == k && o.modifications.iter().any(|(_, ms)| !ms.is_empty())))
        .collect();
    sums.sort();
    assert_eq!(values(&p), sums.into_iter().map(|(k, s)| vec![json!(k), json!(s)]).collect::<Vec<_>>());

    // B.6.4 get_big_items: many properties of the first 10 orders.
    let big = "collection select . 'Orders'
        'Product' -> reference : 'Product'
        'Status' -> stategroup : 'Status'
        'Connected To Sales Order Line' -> stategroup : 'Connected To Sales Order Line'
        'Quantity' -> number : 'Quantity'
        'Due Date' -> number : 'Due Date'
        'Planner Group' -> text : 'Planner Group'
        limit 10";
    let want: Vec<Vec<Value>> = orders
        .iter()
        .take(10)
        .map(|o| {
            vec![
                json!(format!("p{}", o.quantity % 3)),
                json!("Scheduled"),
                json!("No"),
                json!(o.quantity),
                json!(o.due),
                json!("group x"),
            ]
        })
        .collect();
    let q = run(&e, big, &[]);
    assert_eq!((q.total, values(&q)), (orders.len() as u64, want.clone()), "get_big_items");
    let p = run(
        &e,
        "collection match o in . 'Orders' select
            'Product' -> o reference : 'Product'
            'Status' -> o stategroup : 'Status'
            'Connected To Sales Order Line' -> o stategroup : 'Connected To Sales Order Line'
            'Quantity' -> o number : 'Quantity'
            'Due Date' -> o number : 'Due Date'
            'Planner Group' -> o text : 'Planner Group'
         limit 10",
        &[],
    );
    assert_eq!((p.total, values(&p)), (orders.len() as u64, want), "get_big_items as a pattern");

    // B.6.5 many_references: is the client of the machine's current order premium?
    for m in 0..5 {
        let machine = m.to_string();
        let want: Vec<Vec<Value>> = if m % 2 == 0 {
            let premium = clients[orders[3 + m].client].premium;
            vec![vec![json!(if premium { "Yes" } else { "No" })]]
        } else {
            vec![] // not selected: the projection crosses a state that is not selected
        };
        let q = run(
            &e,
            "collection . 'Machines' : $machine select
                'Premium' -> ? 'Current Task' * 'Selected' > 'Current Order' > 'Client' stategroup : 'Is Premium Client'
                limit 10",
            &[("machine", &machine)],
        );
        assert_eq!(values(&q), want, "many_references on machine {m}");
        let p = run(
            &e,
            "collection match m in . 'Machines' : $machine select
                'Premium' -> m ? 'Current Task' * 'Selected' > 'Current Order' > 'Client' stategroup : 'Is Premium Client'",
            &[("machine", &machine)],
        );
        assert_eq!(values(&p), want, "many_references on machine {m} as a pattern");
    }
    // Backwards: the machines working for premium clients.
    let p = run(
        &e,
        "collection match c in . 'Clients' m in c < 'Client' < 'Current Order' ?^
           where c stategroup : 'Is Premium Client' == 'Yes'
         select 'machine' -> m order by 'machine'",
        &[],
    );
    let want: Vec<Vec<Value>> = (0..5)
        .filter(|m| m % 2 == 0 && clients[orders[3 + m].client].premium)
        .map(|m| vec![json!(m.to_string())])
        .collect();
    assert!(!want.is_empty(), "some machine works for a premium client");
    assert_eq!(values(&p), want, "machines of premium clients");
}
