//! Every model under tests/models compiles, and key facts of each hold: record sizes,
//! offsets, key arity, and the up/down steps of specific references.

use espalier_schema::*;

fn source(name: &str) -> String {
    let path = format!("{}/tests/models/{name}.alan", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn load(name: &str) -> Schema {
    let src = source(name);
    compile(&src).unwrap_or_else(|e| panic!("{name}.alan:\n{}", e.render(&src, name)))
}

/// The property at a path of names from the root; entries, groups and states are entered by
/// naming the collection/group, or `stategroup*state`.
fn prop<'a>(s: &'a Schema, path: &[&str]) -> &'a Property {
    let mut node = ROOT;
    let mut found = None;
    for step in path {
        if let Some(n) = found.map(|p: &Property| p.id) {
            node = s.child_node(n).unwrap_or_else(|| panic!("{step}: not a container"));
        }
        let (name, state) = match step.split_once('*') {
            Some((a, b)) => (a, Some(b)),
            None => (*step, None),
        };
        let p = s.find(node, name).unwrap_or_else(|| panic!("no '{name}' in {}", s.node_type_name(node)));
        if let Some(state) = state {
            let i = s.state_index(p.id, state).expect("state");
            let PropertyKind::StateGroup { states } = &p.kind else { panic!("not a stategroup") };
            node = states[i as usize].node;
            found = None;
            continue;
        }
        found = Some(p);
    }
    found.expect("path names a property")
}

fn node_of(s: &Schema, path: &[&str]) -> NodeTypeId {
    s.child_node(prop(s, path).id).expect("container")
}

fn target<'a>(s: &'a Schema, path: &[&str]) -> &'a ReferenceTarget {
    s.target(prop(s, path).id).expect("reference or matrix")
}

fn state_node(s: &Schema, path: &[&str], state: &str) -> NodeTypeId {
    let p = prop(s, path);
    let PropertyKind::StateGroup { states } = &p.kind else { panic!("not a stategroup") };
    states.iter().find(|x| x.name == state).expect("state").node
}

const ALL: &[&str] = &[
    "thesis_orders",
    "products",
    "listing_6_1",
    "add",
    "add_big",
    "increment",
    "matrix_add",
    "remove_all",
    "remove_in_100000",
    "set_state",
    "set_reference",
    "set_in_x",
    "depth_2",
    "depth_3",
    "depth_4",
    "depth_5",
    "depth_6",
    "number_filter",
    "text_filter",
    "state_filter",
    "set_state_failure",
    "path_failure",
    "add_failure",
    "remove_failure",
    "b6",
    "social",
    "compound_key",
    "commands_indexes",
];

#[test]
fn every_model_file_compiles_and_is_listed() {
    let dir = format!("{}/tests/models", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("models dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().trim_end_matches(".alan").to_string())
        .collect();
    files.sort();
    let mut listed: Vec<String> = ALL.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed);
    for name in ALL {
        let s = load(name);
        assert_eq!(s.root().parent, ParentLink::Root);
        // Every property is hosted by a record and fits inside it.
        for p in &s.properties {
            let size = s.record_size(p.host);
            assert!(p.offset + p.kind.slot_size() <= size, "{name}: {}", s.property_name(p.id));
        }
        assert!(!describe(&s).is_empty());
    }
}

#[test]
fn thesis_orders_example() {
    let s = load("thesis_orders");
    // Root: 'Orders' (8) then the group's 'Tools', 'Tool Lists', 'Machines' inline.
    assert_eq!(s.root().storage, Storage::Record { size: 32 });
    assert_eq!(prop(&s, &["Orders"]).offset, 0);
    let cp = prop(&s, &["Company Property"]);
    assert_eq!((cp.offset, cp.kind.slot_size()), (8, 0));
    let tools = prop(&s, &["Company Property", "Tools"]);
    assert_eq!((tools.host, tools.offset), (ROOT, 8));
    assert_eq!(prop(&s, &["Company Property", "Machines"]).offset, 24);
    assert_eq!(s.node_type(node_of(&s, &["Company Property"])).storage, Storage::Inline { host: ROOT });

    let orders = node_of(&s, &["Orders"]);
    assert_eq!(s.node_type(orders).storage, Storage::Record { size: 24 });
    assert_eq!(s.node_type(state_node(&s, &["Orders", "Status"], "Started")).storage, Storage::Record { size: 8 });
    let finished = state_node(&s, &["Orders", "Status"], "Finished");
    assert_eq!(s.node_type(finished).storage, Storage::Record { size: 16 });
    assert_eq!(s.node_type_name(finished), "root.'Orders'?'Status'*'Finished'");
    let success = state_node(&s, &["Orders", "Status*Finished", "Result"], "Success");
    assert_eq!(s.node_type(success).storage, Storage::Empty);

    // 'Order' -> reference ( +^ .^ +^ . 'Orders' ), declared in the group 'Current Process'.
    let machines = node_of(&s, &["Company Property", "Machines"]);
    assert_eq!(s.node_type(machines).storage, Storage::Record { size: 24 });
    let order = prop(&s, &["Company Property", "Machines", "Current Process", "Order"]);
    assert_eq!((order.host, order.offset), (machines, 8));
    let t = target(&s, &["Company Property", "Machines", "Current Process", "Order"]);
    assert_eq!(t.up, vec![UpStep::Group, UpStep::DictionaryEntry, UpStep::Group]);
    assert_eq!(t.down, vec![DownStep::Dictionary(prop(&s, &["Orders"]).id)]);
    assert_eq!((t.entry_type, t.key_arity), (orders, 1));
    assert_eq!(s.path_text(t), "+^ .^ +^ . 'Orders'");

    let t = target(&s, &["Company Property", "Tool Lists", "Tools"]);
    assert_eq!(t.up, vec![UpStep::DictionaryEntry]);
    assert_eq!(t.dictionary, prop(&s, &["Company Property", "Tools"]).id);
    let t = target(&s, &["Company Property", "Machines", "Required Tools"]);
    assert_eq!(t.entry_type, node_of(&s, &["Company Property", "Tool Lists"]));
    assert_eq!(prop(&s, &["Company Property", "Machines", "Required Tools"]).offset, 16);
}

#[test]
fn products_with_subtypes() {
    let s = load("products");
    let t = target(&s, &["products", "type*book", "author"]);
    assert_eq!(t.up, vec![UpStep::State, UpStep::DictionaryEntry]);
    assert_eq!(t.entry_type, node_of(&s, &["People"]));
    let t = target(&s, &["products", "type*album", "artist"]);
    assert_eq!(t.entry_type, node_of(&s, &["Artists"]));
    let book = state_node(&s, &["products", "type"], "book");
    assert_eq!(s.node_type(book).storage, Storage::Record { size: 24 });
    let album = state_node(&s, &["products", "type"], "album");
    assert_eq!(s.node_type(album).storage, Storage::Record { size: 24 });
    assert_eq!(s.record_size(node_of(&s, &["products"])), 32);
    assert_eq!(prop(&s, &["products", "type*album", "track list"]).offset, 16);
}

#[test]
fn small_benchmark_models() {
    let s = load("listing_6_1");
    assert_eq!(s.record_size(node_of(&s, &["d1"])), 24);
    assert_eq!(prop(&s, &["d1", "sg"]).offset, 8);

    for name in ["add", "remove_all", "remove_in_100000", "add_failure", "remove_failure"] {
        let s = load(name);
        assert_eq!((s.types.len(), s.properties.len()), (2, 1), "{name}");
        assert_eq!(s.root().storage, Storage::Record { size: 8 });
        assert_eq!(
            s.node_type(NodeTypeId::new(1)).storage,
            Storage::Record { size: 0 },
            "empty entries still get a record"
        );
    }

    let s = load("add_big");
    let d = node_of(&s, &["d"]);
    assert_eq!(s.record_size(d), 8 * 8 + 2 * 16);
    assert_eq!(prop(&s, &["d", "n1"]).offset, 32);
    assert_eq!(prop(&s, &["d", "sg2"]).offset, 80);

    let s = load("increment");
    assert_eq!(s.root().storage, Storage::Record { size: 8 });

    let s = load("matrix_add");
    let t = target(&s, &["m"]);
    assert!(t.up.is_empty());
    assert_eq!((t.key_arity, t.entry_type), (1, node_of(&s, &["d"])));
    assert_eq!(s.record_size(node_of(&s, &["m"])), 0);
    assert!(matches!(s.node_type(node_of(&s, &["m"])).parent, ParentLink::MatrixEntry { .. }));

    for name in ["set_state", "set_state_failure"] {
        let s = load(name);
        assert_eq!(s.root().storage, Storage::Record { size: 16 });
        let sg = prop(&s, &["sg"]).id;
        assert_eq!(s.state_index(sg, "s1"), Some(1));
        assert_eq!(s.node_type(state_node(&s, &["sg"], "s0")).storage, Storage::Empty);
    }

    let s = load("set_reference");
    assert_eq!(prop(&s, &["r"]).offset, 8);
    assert_eq!(target(&s, &["r"]).down, vec![DownStep::Dictionary(prop(&s, &["d"]).id)]);

    for name in ["set_in_x", "number_filter"] {
        let s = load(name);
        assert_eq!(s.record_size(NodeTypeId::new(1)), 8, "{name}");
    }
    let s = load("text_filter");
    assert!(matches!(prop(&s, &["d1", "t"]).kind, PropertyKind::Text));

    for name in ["state_filter", "path_failure"] {
        let s = load(name);
        assert_eq!(s.record_size(node_of(&s, &["d"])), 16);
        assert_eq!(s.record_size(state_node(&s, &["d", "sg"], "s1")), 8);
        assert_eq!(s.node_type(state_node(&s, &["d", "sg"], "s0")).storage, Storage::Empty);
    }
}

#[test]
fn depth_models_nest_dictionaries() {
    for depth in 2..=6 {
        let s = load(&format!("depth_{depth}"));
        assert_eq!(s.types.len(), depth + 1);
        let names: Vec<String> = (1..=depth).map(|i| format!("d{i}")).collect();
        let mut path: Vec<&str> = names.iter().map(String::as_str).collect();
        path.push("n");
        let n = prop(&s, &path);
        assert_eq!((n.offset, s.record_size(n.host)), (0, 8));
        assert_eq!(
            s.node_type_name(n.owner),
            names.iter().map(|d| format!(".'{d}'")).fold("root".to_string(), |a, b| a + &b)
        );
    }
}

#[test]
fn b6_use_case() {
    let s = load("b6");
    assert_eq!(s.root().storage, Storage::Record { size: 40 });
    let clients = node_of(&s, &["Clients"]);
    assert_eq!(s.record_size(clients), 48);
    let mail = prop(&s, &["Clients", "Contact", "E-mail"]);
    assert_eq!((mail.host, mail.offset), (clients, 40));

    let orders = node_of(&s, &["Orders"]);
    assert_eq!(s.record_size(orders), 120);
    assert_eq!(prop(&s, &["Orders", "Planning Pool"]).offset, 112);
    let t = target(&s, &["Orders", "Client"]);
    assert_eq!((t.up.clone(), t.entry_type), (vec![UpStep::DictionaryEntry], clients));
    let t = target(&s, &["Orders", "Modifications", "Added Materials"]);
    assert_eq!(t.up, vec![UpStep::DictionaryEntry, UpStep::DictionaryEntry]);
    assert_eq!(t.entry_type, node_of(&s, &["Materials"]));

    let t = target(&s, &["Machines", "Current Task*Selected", "Current Order"]);
    assert_eq!(t.up, vec![UpStep::State, UpStep::DictionaryEntry]);
    assert_eq!((t.entry_type, t.key_arity), (orders, 1));
    let selected = state_node(&s, &["Machines", "Current Task"], "Selected");
    assert_eq!(s.record_size(selected), 24);
    assert_eq!(s.node_type_name(selected), "root.'Machines'?'Current Task'*'Selected'");
    let not_started = state_node(&s, &["Machines", "Current Task*Selected", "Status"], "Not Started");
    assert_eq!(s.node_type(not_started).storage, Storage::Empty);
}

#[test]
fn social_self_reference() {
    let s = load("social");
    let people = node_of(&s, &["People"]);
    let t = target(&s, &["People", "Friends"]);
    assert_eq!(t.up, vec![UpStep::DictionaryEntry]);
    assert_eq!((t.entry_type, t.dictionary), (people, prop(&s, &["People"]).id));
    let friends = node_of(&s, &["People", "Friends"]);
    assert_eq!(s.record_size(friends), 24);
    let t = target(&s, &["People", "Partner*Some", "Who"]);
    assert_eq!((t.up.clone(), t.entry_type), (vec![UpStep::State, UpStep::DictionaryEntry], people));
    assert_eq!(target(&s, &["Groups", "Members"]).entry_type, people);
}

#[test]
fn compound_keys() {
    let s = load("compound_key");
    let lines = prop(&s, &["Orders", "Lines"]).id;
    let orders = prop(&s, &["Orders"]).id;
    let t = target(&s, &["Shipments", "Line"]);
    assert_eq!(t.down, vec![DownStep::Dictionary(orders), DownStep::Dictionary(lines)]);
    assert_eq!((t.key_arity, t.dictionary), (2, lines));
    assert_eq!(target(&s, &["Shipments", "Parcels"]).key_arity, 2);
    assert_eq!(target(&s, &["Top Line"]).key_arity, 2);
    // Within one order, a line needs only its own key.
    let t = target(&s, &["Orders", "Favourite Line"]);
    assert_eq!((t.up.len(), t.key_arity), (0, 1));
    // A state step on the way down does not add a key component.
    let t = target(&s, &["Settings", "Default Template"]);
    let mode = prop(&s, &["Settings", "Mode"]).id;
    assert!(t.up.is_empty(), "declared in the group that holds 'Mode'");
    assert_eq!(t.down[0], DownStep::State { stategroup: mode, state: 1 });
    assert_eq!(t.key_arity, 1);
}

#[test]
fn commands_and_indexes() {
    let s = load("commands_indexes");
    let src = source("commands_indexes");
    assert_eq!(s.commands.len(), 2);
    let c = s.command("Set Quantity").expect("command");
    assert_eq!(c.params, vec![("order".to_string(), ParamKind::Text), ("quantity".to_string(), ParamKind::Number)]);
    assert_eq!(c.body.trim(), "update . 'Orders' : $order ( 'Quantity' -> number $quantity )");
    assert_eq!(&src[c.body_span.start as usize..c.body_span.end as usize], c.body);
    assert_eq!(&src[c.span.start as usize..c.span.end as usize], "'Set Quantity'");

    assert_eq!(s.indexes.len(), 5);
    let i = s.index("Client E-mail").expect("index");
    assert_eq!((i.kind, i.unique), (IndexKind::Equality, true));
    assert_eq!(i.collection, prop(&s, &["Clients"]).id);
    assert_eq!(i.property, prop(&s, &["Clients", "Contact", "E-mail"]).id);
    let i = s.index("Line Amount").expect("index");
    assert_eq!(i.collection, prop(&s, &["Orders", "Lines"]).id);
    assert_eq!(s.index("Client Name").map(|i| i.kind), Some(IndexKind::Prefix));
    assert!(s.index("Client Tier").is_some());

    let d = describe(&s);
    assert!(d.contains("'Set Quantity' ( 'order' -> text 'quantity' -> number )"), "{d}");
    assert!(d.contains("'Client E-mail' on 'E-mail' of root.'Clients'+'Contact' equality unique"), "{d}");
}

#[test]
fn describe_summarises() {
    let s = load("thesis_orders");
    let d = describe(&s);
    assert!(d.starts_with("13 node types: 1 root, 4 dictionary entries, 1 matrix entry, 2 groups, 5 states"), "{d}");
    assert!(d.contains("  root  32 bytes\n"), "{d}");
    assert!(d.contains("  root.'Orders'  24 bytes\n"), "{d}");
    assert!(
        d.contains(
            "'Order' of root+'Company Property'.'Machines'+'Current Process' reference ( +^ .^ +^ . 'Orders' ) -> entries of root.'Orders' (key arity 1)"
        ),
        "{d}"
    );
    assert!(
        d.contains("16 properties: 4 number, 1 text, 2 group, 4 dictionary, 1 matrix, 2 reference, 2 stategroup"),
        "{d}"
    );
}
