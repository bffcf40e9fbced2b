//! Dump export/import round trips, import validation, and `check` on good and corrupted data.

use std::path::Path;
use std::sync::Arc;

use espalier_data::keys::{entries_index, link_key, links_index, source_type};
use espalier_data::{
    check, export, import, DataError, DumpError, EntryKey, Graph, ImportStats, NodeId, NodeRef, WriteGraph, ROOT_ID,
};
use espalier_schema::{compile, NodeTypeId, PropertyId, PropertyKind, ReferenceTarget, Schema};
use espalier_storage::tables::Read;
use espalier_transaction::{Database, DatabaseOptions, Durability, TxError};
use serde_json::{json, Value};

/// Every property kind: nested dictionaries, a group inside a state, a matrix with compound
/// keys into a nested dictionary declared later (its keys point forward in the dump), a
/// self-referencing matrix, references pointing forward.
const SCHEMA: &str = "
root (
    'Shipments' -> dictionary (
        'Route' -> matrix ( .^ . 'Regions' . 'Cities' ) ( 'Order' -> number )
        'Status' -> stategroup (
            'Planned' -> ( )
            'Sent' -> (
                'Carrier' -> group (
                    'Name' -> text
                    'Depot' -> reference ( +^ ?^ .^ . 'Regions' )
                )
            )
        )
        'Weight' -> number
    )
    'Regions' -> dictionary (
        'Name' -> text
        'Cities' -> dictionary (
            'Population' -> number
            'Twin' -> reference ( .^ . 'Cities' )
        )
        'Neighbours' -> matrix ( .^ . 'Regions' ) ( 'Distance' -> number )
        'Mode' -> stategroup ( 'Open' -> ( 'Since' -> number ) 'Closed' -> ( ) )
    )
    'Info' -> group ( 'Title' -> text 'Count' -> number )
)";

#[derive(Debug)]
#[allow(dead_code)] // the fields are read through Debug when a test fails
enum E {
    Data(DataError),
    Dump(DumpError),
    Tx(TxError),
}

impl From<DataError> for E {
    fn from(e: DataError) -> E {
        E::Data(e)
    }
}
impl From<DumpError> for E {
    fn from(e: DumpError) -> E {
        E::Dump(e)
    }
}
impl From<TxError> for E {
    fn from(e: TxError) -> E {
        E::Tx(e)
    }
}

fn create(dir: &Path, source: &str) -> Arc<Database> {
    let opts = DatabaseOptions { durability: Durability::None, ..Default::default() };
    Database::create(dir, compile(source).unwrap(), opts).unwrap()
}

fn prop(s: &Schema, ty: NodeTypeId, name: &str) -> PropertyId {
    s.find(ty, name).unwrap_or_else(|| panic!("no property {name}")).id
}

/// The node type under a group, dictionary, matrix, or state `state` of a stategroup.
fn ty(s: &Schema, p: PropertyId, state: usize) -> NodeTypeId {
    match &s.property(p).kind {
        PropertyKind::Group { node } | PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => *node,
        PropertyKind::StateGroup { states } => states[state].node,
        k => panic!("{} has no node", k.keyword()),
    }
}

fn target(s: &Schema, p: PropertyId) -> &ReferenceTarget {
    match &s.property(p).kind {
        PropertyKind::Reference { target } | PropertyKind::Matrix { target, .. } => target,
        _ => panic!("not a reference"),
    }
}

fn keyv(k: &[&str]) -> Vec<String> {
    k.iter().map(|s| s.to_string()).collect()
}

fn set_ref(g: &mut WriteGraph<'_, '_>, node: NodeRef, p: PropertyId, key: &[&str]) -> Result<(), E> {
    let schema = g.schema;
    let t = g.graph().resolve(node, target(schema, p), &keyv(key))?;
    g.set_reference(node, p, t.id)?;
    Ok(())
}

fn add_matrix(g: &mut WriteGraph<'_, '_>, owner: NodeRef, p: PropertyId, key: &[&str]) -> Result<NodeRef, E> {
    let schema = g.schema;
    let t = g.graph().resolve(owner, target(schema, p), &keyv(key))?;
    Ok(g.add_entry(owner, p, EntryKey::Target(t.id))?)
}

struct P {
    shipments: PropertyId,
    route: PropertyId,
    order: PropertyId,
    status: PropertyId,
    carrier: PropertyId,
    carrier_name: PropertyId,
    depot: PropertyId,
    weight: PropertyId,
    regions: PropertyId,
    region_name: PropertyId,
    cities: PropertyId,
    population: PropertyId,
    twin: PropertyId,
    neighbours: PropertyId,
    distance: PropertyId,
    mode: PropertyId,
    since: PropertyId,
    info: PropertyId,
    title: PropertyId,
    count: PropertyId,
}

fn props(s: &Schema) -> P {
    let shipments = prop(s, espalier_schema::ROOT, "Shipments");
    let shipment = ty(s, shipments, 0);
    let route = prop(s, shipment, "Route");
    let status = prop(s, shipment, "Status");
    let sent = ty(s, status, 1);
    let carrier = prop(s, sent, "Carrier");
    let carrier_ty = ty(s, carrier, 0);
    let regions = prop(s, espalier_schema::ROOT, "Regions");
    let region = ty(s, regions, 0);
    let cities = prop(s, region, "Cities");
    let city = ty(s, cities, 0);
    let neighbours = prop(s, region, "Neighbours");
    let mode = prop(s, region, "Mode");
    let info = prop(s, espalier_schema::ROOT, "Info");
    let info_ty = ty(s, info, 0);
    P {
        shipments,
        route,
        order: prop(s, ty(s, route, 0), "Order"),
        status,
        carrier,
        carrier_name: prop(s, carrier_ty, "Name"),
        depot: prop(s, carrier_ty, "Depot"),
        weight: prop(s, shipment, "Weight"),
        regions,
        region_name: prop(s, region, "Name"),
        cities,
        population: prop(s, city, "Population"),
        twin: prop(s, city, "Twin"),
        neighbours,
        distance: prop(s, ty(s, neighbours, 0), "Distance"),
        mode,
        since: prop(s, ty(s, mode, 0), "Since"),
        info,
        title: prop(s, info_ty, "Title"),
        count: prop(s, info_ty, "Count"),
    }
}

fn fill(g: &mut WriteGraph<'_, '_>, p: &P) -> Result<(), E> {
    let info = g.graph().group(NodeRef::ROOT, p.info);
    g.set_text(info, p.title, "Test \"data\"\twith ünïcode ✓")?;
    g.set_number(info, p.count, i64::MIN)?;

    // Regions first (the references and matrix keys below need their targets).
    let north = g.add_entry(NodeRef::ROOT, p.regions, EntryKey::Text("north"))?;
    let south = g.add_entry(NodeRef::ROOT, p.regions, EntryKey::Text("south"))?;
    g.set_text(north, p.region_name, "Nord")?;
    g.set_text(south, p.region_name, "Süd\n\"x\"")?;
    // Created b before a so that record ids disagree with key order.
    let b = g.add_entry(north, p.cities, EntryKey::Text("b"))?;
    let a = g.add_entry(north, p.cities, EntryKey::Text("a"))?;
    let c = g.add_entry(south, p.cities, EntryKey::Text("c"))?;
    g.set_number(a, p.population, 10)?;
    g.set_number(b, p.population, i64::MAX)?;
    g.set_number(c, p.population, -5)?;
    set_ref(g, a, p.twin, &["b"])?; // forward in dump order
    set_ref(g, b, p.twin, &["a"])?;
    set_ref(g, c, p.twin, &["c"])?; // itself
    let n = add_matrix(g, north, p.neighbours, &["south"])?; // forward, self-referencing matrix
    g.set_number(n, p.distance, 5)?;
    let s2 = add_matrix(g, south, p.neighbours, &["south"])?;
    g.set_number(s2, p.distance, 0)?;
    let s1 = add_matrix(g, south, p.neighbours, &["north"])?;
    g.set_number(s1, p.distance, 5)?;
    let north_mode = g.graph().state(north, p.mode)?.1;
    g.set_number(north_mode, p.since, 1990)?;
    g.switch_state(south, p.mode, 1)?;

    let ship = g.add_entry(NodeRef::ROOT, p.shipments, EntryKey::Text("s1"))?;
    g.set_number(ship, p.weight, 12)?;
    // Compound matrix keys into Regions/Cities, which come after Shipments in the dump.
    let r1 = add_matrix(g, ship, p.route, &["south", "c"])?;
    g.set_number(r1, p.order, 2)?;
    let r2 = add_matrix(g, ship, p.route, &["north", "b"])?;
    g.set_number(r2, p.order, 1)?;
    let sent = g.switch_state(ship, p.status, 1)?;
    let carrier = g.graph().group(sent, p.carrier);
    g.set_text(carrier, p.carrier_name, "Nord")?; // shares the string with north's Name
    set_ref(g, carrier, p.depot, &["south"])?;
    let planned = g.add_entry(NodeRef::ROOT, p.shipments, EntryKey::Text("s2"))?;
    g.set_number(planned, p.weight, -1)?;
    let empty = g.add_entry(NodeRef::ROOT, p.shipments, EntryKey::Text(""))?; // empty key
    g.set_number(empty, p.weight, 0)?;
    Ok(())
}

fn build(dir: &Path) -> Arc<Database> {
    let db = create(dir, SCHEMA);
    let p = props(db.schema());
    db.write(|g| fill(g, &p)).unwrap();
    db
}

fn dump(db: &Database) -> (Vec<u8>, u64) {
    let snap = db.snapshot().unwrap();
    let mut out = Vec::new();
    let nodes = export(&snap.graph(), snap.version().unwrap(), &mut out, &mut |_| {}).unwrap();
    (out, nodes)
}

fn load(db: &Database, text: &[u8]) -> Result<ImportStats, E> {
    let committed = db.write(|g| -> Result<ImportStats, E> { Ok(import(g, text, &mut |_| {})?) })?;
    Ok(committed.value)
}

fn records(db: &Database) -> usize {
    let snap = db.snapshot().unwrap();
    let schema = db.schema();
    (0..schema.types.len() as u32).filter_map(|t| snap.reader().table(t)).map(|t| t.len() as usize).sum()
}

fn check_db(db: &Database) -> espalier_data::CheckReport {
    let snap = db.snapshot().unwrap();
    check(&snap.graph(), &mut |_| {}).unwrap()
}

#[test]
fn export_import_export_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(&dir.path().join("a"));
    let (first, nodes) = dump(&db);
    let text = String::from_utf8(first.clone()).unwrap();
    // Well-formed JSON with the documented shape.
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["espalier_dump"], 1);
    assert_eq!(v["schema"], SCHEMA);
    assert_eq!(
        v["root"]["Shipments"]["s1"]["Route"],
        json!([[["north", "b"], {"Order": 1}], [["south", "c"], {"Order": 2}]])
    );
    assert_eq!(v["root"]["Shipments"]["s1"]["Status"]["Sent"]["Carrier"]["Depot"], "south");
    assert_eq!(v["root"]["Regions"]["south"]["Mode"], json!({"Closed": {}}));
    assert_eq!(v["root"]["Regions"]["north"]["Cities"]["b"]["Population"], i64::MAX);
    assert_eq!(v["root"]["Info"]["Count"], i64::MIN);
    let keys: Vec<&String> = v["root"]["Regions"]["north"]["Cities"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["a", "b"]);
    // Properties in declaration order.
    let root_members: Vec<&str> = text.lines().filter(|l| l.starts_with("  \"")).map(|l| l.trim()).collect();
    assert!(root_members[0].starts_with("\"Shipments\""), "{root_members:?}");
    assert!(dump(&db).0 == first, "export is deterministic");

    let db2 = create(&dir.path().join("b"), SCHEMA);
    let stats = load(&db2, &first).unwrap();
    assert_eq!(stats.nodes, nodes);
    assert_eq!(stats.references, 4);
    assert_eq!(stats.bytes, first.len() as u64);
    assert_eq!(stats.version, 2);
    let (second, nodes2) = dump(&db2);
    assert_eq!(nodes2, nodes);
    assert_eq!(String::from_utf8(second[..].to_vec()).unwrap().replace("\"version\": 3", "\"version\": 2"), text);

    let good = check_db(&db2);
    assert!(good.problems.is_empty(), "{:#?}", good.problems);
    assert_eq!(good.records, records(&db2) as u64);
    let orig = check_db(&db);
    assert!(orig.problems.is_empty(), "{:#?}", orig.problems);
    assert_eq!(
        (orig.records, orig.entries, orig.links, orig.strings),
        (good.records, good.entries, good.links, good.strings)
    );
    // 'Nord' is shared by two text slots; strings: title, Nord, Süd. The seven distinct
    // dictionary keys are at most 7 bytes long, so each is kept in its entry's key slot.
    assert_eq!(good.strings, 3);
    // Links: 4 references + 5 matrix entries.
    assert_eq!(good.links, 9);
}

/// A dictionary key of at most 7 bytes lives in its entry's key slot; a longer one is a
/// counted string, released with the entry. Both read back, find their entry, and leave
/// `check` clean, with the keys that share bytes with a text told apart.
#[test]
fn short_keys_are_inline_and_long_keys_are_counted_strings() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), SCHEMA);
    let p = props(db.schema());
    let keys = ["", "a\u{0}b", "seven77", "eight888", "Zürich", "a much longer region name"];
    db.write(|g| -> Result<(), E> {
        for k in keys {
            g.add_entry(NodeRef::ROOT, p.regions, EntryKey::Text(k))?;
        }
        // The same bytes as the 8-byte key, as a text: one string, counted twice.
        let info = g.graph().group(NodeRef::ROOT, p.info);
        g.set_text(info, p.title, "eight888")?;
        Ok(())
    })
    .unwrap();
    let r = check_db(&db);
    assert!(r.problems.is_empty(), "{:#?}", r.problems);
    // "Zürich" is 7 bytes in UTF-8: inline. The strings: "eight888" and the long name.
    assert_eq!((r.entries, r.strings), (6, 2));
    let snap = db.snapshot().unwrap();
    let g = snap.graph();
    for k in keys {
        let e = g.find_entry(NodeRef::ROOT, p.regions, EntryKey::Text(k)).unwrap().expect(k);
        assert_eq!(g.entry_key(e).unwrap(), [k.to_string()]);
    }
    drop(snap);
    db.write(|g| -> Result<(), E> {
        for k in keys {
            g.remove_entry(NodeRef::ROOT, p.regions, EntryKey::Text(k))?;
        }
        Ok(())
    })
    .unwrap();
    let r = check_db(&db);
    assert!(r.problems.is_empty(), "{:#?}", r.problems);
    assert_eq!((r.entries, r.strings), (0, 1), "the title keeps \"eight888\"");
}

#[test]
fn check_counts_a_fresh_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), SCHEMA);
    let r = check_db(&db);
    assert!(r.problems.is_empty(), "{:#?}", r.problems);
    assert_eq!((r.records, r.entries, r.links, r.strings), (1, 0, 0, 0));
}

// --- check on corrupted stores ---------------------------------------------------------------

fn entry(g: &Graph<'_>, owner: NodeRef, p: PropertyId, key: &str) -> NodeRef {
    g.find_entry(owner, p, EntryKey::Text(key)).unwrap().unwrap()
}

fn corrupt(db: &Database, f: impl FnMut(&mut WriteGraph<'_, '_>) -> Result<(), E> + Send) {
    db.write(f).unwrap();
}

fn assert_problem(problems: &[String], fragments: &[&str]) {
    assert!(
        problems.iter().any(|p| fragments.iter().all(|f| p.contains(f))),
        "no problem mentions all of {fragments:?}:\n{problems:#?}"
    );
}

#[test]
fn check_finds_a_missing_links_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path());
    let p = props(db.schema());
    corrupt(&db, |g| {
        let gr = g.graph();
        let ship = entry(&gr, NodeRef::ROOT, p.shipments, "s1");
        let sent = gr.state(ship, p.status)?.1;
        let carrier = gr.group(sent, p.carrier);
        let target = gr.reference(carrier, p.depot)?;
        let links = links_index(g.schema, p.depot);
        assert!(g.txn().index_remove(links, target.row(), &link_key(carrier.id)).unwrap().is_some());
        Ok(())
    });
    let r = check_db(&db);
    assert_problem(
        &r.problems,
        &[". 'Shipments' : \"s1\" ? 'Status' * 'Sent' + 'Carrier', property 'Depot'", "reverse-link index (Links)"],
    );
    assert_eq!(r.problems.len(), 1, "{:#?}", r.problems);
}

#[test]
fn check_finds_a_wrong_string_count() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path());
    let p = props(db.schema());
    corrupt(&db, |g| {
        let north = entry(&g.graph(), NodeRef::ROOT, p.regions, "north");
        let id = g.graph().text_id(north, p.region_name)?;
        // One more hold than the slots that hold it: count 3, held by 2.
        let text = g.graph().string(id)?;
        assert_eq!(g.txn().acquire(text.as_bytes()).unwrap(), id);
        Ok(())
    });
    let r = check_db(&db);
    assert_eq!(r.problems.len(), 1, "{:#?}", r.problems);
    assert_problem(&r.problems, &["\"Nord\"", "reference count 3 but 2 text slots hold it", "property 'Name'"]);
}

#[test]
fn check_finds_a_missing_entries_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path());
    let p = props(db.schema());
    corrupt(&db, |g| {
        let north = entry(&g.graph(), NodeRef::ROOT, p.regions, "north");
        assert!(g.txn().index_remove(entries_index(p.cities), north.id.row(), b"b").unwrap().is_some());
        Ok(())
    });
    let r = check_db(&db);
    assert_problem(&r.problems, &[". 'Regions' : \"north\" . 'Cities'", "entry count says 2 but there are 1 entries"]);
    // The record of b is still stored, but its collection no longer holds it.
    assert_problem(&r.problems, &["not reachable from the root", "key \"b\" of 'Cities'", "has no Entries row for it"]);
    // City a's twin was b, which its key no longer finds.
    assert_problem(
        &r.problems,
        &[". 'Regions' : \"north\" . 'Cities' : \"a\", property 'Twin'", "does not resolve from here"],
    );
}

#[test]
fn check_finds_a_wrong_entry_count() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path());
    let p = props(db.schema());
    corrupt(&db, |g| {
        let mut rec = g.graph().record(ROOT_ID)?.to_vec();
        let at = espalier_data::record::slot(g.schema, p.shipments);
        rec[at..at + 8].copy_from_slice(&7u64.to_le_bytes());
        g.txn().put(ROOT_ID.table(), ROOT_ID.row(), &rec).unwrap();
        Ok(())
    });
    let r = check_db(&db);
    assert_eq!(r.problems, vec![". 'Shipments': the entry count says 7 but there are 3 entries".to_string()]);
}

#[test]
fn check_finds_an_orphan_record_and_a_dangling_links_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path());
    let p = props(db.schema());
    let (orphan, target) = db
        .write(|g| -> Result<(NodeId, NodeId), E> {
            // A link no slot backs, and a record nothing points at.
            let south = entry(&g.graph(), NodeRef::ROOT, p.regions, "south");
            let source = NodeId::new(south.id.node_type(), 999);
            let links = links_index(g.schema, p.depot);
            g.txn().index_put(links, south.id.row(), &link_key(source), 999).unwrap();
            let mut rec = g.graph().record(south.id)?.to_vec();
            let ghost = g.txn().acquire(b"ghost").unwrap();
            let len = rec.len();
            rec[len - 8..].copy_from_slice(&ghost.to_le_bytes());
            let row = g.txn().insert(south.id.table(), &rec).unwrap();
            Ok((NodeId::new(south.id.node_type(), row), south.id))
        })
        .unwrap()
        .value;
    let r = check_db(&db);
    // A link's key is the source's row; its table is the one holding 'Depot'.
    let source = NodeId::new(source_type(db.schema(), p.depot), 999);
    assert_problem(
        &r.problems,
        &[&format!("record {source} refers to record {target} through 'Depot', but it does not")],
    );
    assert_problem(&r.problems, &[&format!("record {orphan} is not reachable from the root"), "\"ghost\""]);
}

// --- bad dumps -------------------------------------------------------------------------------

fn good_dump() -> Value {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path());
    serde_json::from_slice(&dump(&db).0).unwrap()
}

/// Imports `text` into a fresh database; returns the error message and checks nothing stayed.
fn bad(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), SCHEMA);
    let before = records(&db);
    let err = match load(&db, text.as_bytes()) {
        Ok(_) => panic!("import succeeded:\n{text}"),
        Err(E::Dump(e)) => e.to_string(),
        Err(e) => panic!("unexpected error {e:?}"),
    };
    assert_eq!(records(&db), before, "a failed import leaves the database unchanged");
    let r = check_db(&db);
    assert!(r.problems.is_empty() && r.entries == 0, "{:#?}", r.problems);
    err
}

/// A dump's text with the members in the required order (`Value` sorts object members;
/// import accepts the properties of a node in any order).
fn text(v: &Value) -> String {
    format!(
        "{{\"espalier_dump\": {},\n\"schema\": {},\n\"version\": {},\n\"root\": {}}}",
        v["espalier_dump"],
        v["schema"],
        v["version"],
        serde_json::to_string_pretty(&v["root"]).unwrap()
    )
}

fn bad_value(v: &Value) -> String {
    bad(&text(v))
}

fn assert_msg(msg: &str, fragments: &[&str]) {
    for f in fragments {
        assert!(msg.contains(f), "{msg:?} does not mention {f:?}");
    }
}

#[test]
fn the_good_dump_pretty_printed_by_serde_imports() {
    let v = good_dump();
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), SCHEMA);
    load(&db, text(&v).as_bytes()).unwrap();
    assert!(check_db(&db).problems.is_empty());
}

#[test]
fn dump_schema_must_match() {
    let mut v = good_dump();
    v["schema"] = Value::from(format!("{SCHEMA} "));
    assert_msg(&bad_value(&v), &["dump schema differs from the database schema", "(line 2, column"]);
}

#[test]
fn members_come_in_order() {
    let v = good_dump();
    let t = format!("{{\"root\": {}, \"schema\": {}}}", v["root"], v["schema"]);
    assert_msg(&bad(&t), &["expected member \"espalier_dump\", found \"root\""]);
    let t = format!("{{\"espalier_dump\": 2, \"schema\": {}}}", v["schema"]);
    assert_msg(&bad(&t), &["dump format 2 is not supported"]);
}

#[test]
fn unknown_property() {
    let mut v = good_dump();
    v["root"]["Regions"]["north"]["Cities"]["a"]["Colour"] = json!("red");
    assert_msg(
        &bad_value(&v),
        &[
            ". 'Regions' : \"north\" . 'Cities' : \"a\": unknown property 'Colour' (it has 'Population', 'Twin')",
            "line",
        ],
    );
}

#[test]
fn missing_property() {
    let mut v = good_dump();
    v["root"]["Shipments"]["s2"].as_object_mut().unwrap().remove("Weight");
    assert_msg(&bad_value(&v), &[". 'Shipments' : \"s2\": missing property 'Weight'", "line"]);
    let mut v = good_dump();
    v["root"]["Info"].as_object_mut().unwrap().remove("Title");
    assert_msg(&bad_value(&v), &["+ 'Info': missing property 'Title'"]);
}

#[test]
fn wrong_json_type() {
    let mut v = good_dump();
    v["root"]["Shipments"]["s1"]["Weight"] = json!("heavy");
    let msg = bad_value(&v);
    assert_msg(
        &msg,
        &[". 'Shipments' : \"s1\", property 'Weight': invalid type: string \"heavy\", expected a number", "(line"],
    );
    let mut v = good_dump();
    v["root"]["Regions"]["north"]["Name"] = json!(5);
    assert_msg(&bad_value(&v), &["property 'Name': invalid type: integer `5`, expected a text"]);
    let mut v = good_dump();
    v["root"]["Regions"]["north"]["Cities"] = json!([]);
    assert_msg(&bad_value(&v), &["property 'Cities'", "expected a dictionary"]);
    let mut v = good_dump();
    v["root"]["Shipments"]["s1"]["Route"][0][0] = json!("north");
    assert_msg(&bad_value(&v), &["property 'Route'", "expected a compound key (a JSON array of 2 strings)"]);
    let mut v = good_dump();
    v["root"]["Shipments"]["s1"]["Route"][0] = json!([["north", "b"], {"Order": 1}, 3]);
    assert_msg(&bad_value(&v), &[". 'Shipments' : \"s1\" % 'Route'", "more than two elements"]);
}

#[test]
fn unknown_state_and_state_member_count() {
    let mut v = good_dump();
    v["root"]["Shipments"]["s2"]["Status"] = json!({"Lost": {}});
    assert_msg(
        &bad_value(&v),
        &[". 'Shipments' : \"s2\", property 'Status': unknown state 'Lost' (states: 'Planned', 'Sent')"],
    );
    let mut v = good_dump();
    v["root"]["Shipments"]["s2"]["Status"] = json!({});
    assert_msg(&bad_value(&v), &["property 'Status'", "exactly one member", "found none"]);
    let v = good_dump();
    let t = text(&v).replace("\"Planned\": {}", "\"Planned\": {}, \"Sent\": {}");
    assert_msg(&bad(&t), &["property 'Status'", "exactly one member", "\"Sent\""]);
    let mut v = good_dump();
    v["root"]["Regions"]["south"]["Mode"] = json!({"Closed": {"Since": 1}});
    assert_msg(
        &bad_value(&v),
        &[". 'Regions' : \"south\" ? 'Mode' * 'Closed': unknown property 'Since' (it has none)"],
    );
}

#[test]
fn numbers_out_of_range() {
    let mut v = good_dump();
    v["root"]["Shipments"]["s1"]["Weight"] = json!(9223372036854775808u64);
    assert_msg(&bad_value(&v), &["property 'Weight'", "number 9223372036854775808 is out of range"]);
    let t = text(&good_dump()).replace("\"Weight\": 12", "\"Weight\": -1e30");
    assert_msg(&bad(&t), &["property 'Weight'", "is not a 64-bit signed integer"]);
    let t = text(&good_dump()).replace("\"Weight\": 12", "\"Weight\": 1.5");
    assert_msg(&bad(&t), &["property 'Weight'", "number 1.5 is not a 64-bit signed integer"]);
}

#[test]
fn key_too_long() {
    let mut v = good_dump();
    let long = "k".repeat(481);
    let city = v["root"]["Regions"]["north"]["Cities"]["a"].clone();
    v["root"]["Regions"]["north"]["Cities"][&long] = city;
    assert_msg(&bad_value(&v), &[". 'Regions' : \"north\" . 'Cities'", "481 bytes is too long"]);
    let mut v = good_dump();
    v["root"]["Regions"]["north"]["Cities"]["a"]["Twin"] = json!(long);
    assert_msg(&bad_value(&v), &["property 'Twin'", "481 bytes is too long"]);
}

#[test]
fn duplicate_keys() {
    let t = text(&good_dump()).replacen("\"s2\":", "\"s1\":", 1);
    assert_msg(&bad(&t), &[". 'Shipments': duplicate key \"s1\"", "(line"]);
    let mut v = good_dump();
    v["root"]["Regions"]["south"]["Neighbours"] = json!([["north", {"Distance": 1}], ["north", {"Distance": 2}]]);
    assert_msg(&bad_value(&v), &[". 'Regions' : \"south\" % 'Neighbours': duplicate key"]);
    let mut v = good_dump();
    v["root"]["Shipments"]["s1"]["Route"] = json!([[["north", "a"], {"Order": 1}], [["north", "a"], {"Order": 2}]]);
    assert_msg(&bad_value(&v), &[". 'Shipments' : \"s1\" % 'Route': duplicate key [\"north\",\"a\"]", "(line"]);
    // In export order 'Regions' follows 'Shipments': these keys point forward and are placed
    // at the end; duplicates among them are found there.
    let dir = tempfile::tempdir().unwrap();
    let exported = String::from_utf8(dump(&build(dir.path())).0).unwrap();
    let at = exported.find("\"s1\": {").unwrap();
    let t = format!(
        "{}{}",
        &exported[..at],
        exported[at..].replacen("\"Route\": [", "\"Route\": [[[\"north\", \"b\"], {\"Order\": 9}],", 1)
    );
    assert_ne!(t, exported);
    assert_msg(&bad(&t), &[". 'Shipments' : \"s1\" % 'Route': duplicate key [\"north\",\"b\"]"]);
    let mut v = good_dump();
    v["root"]["Shipments"]["s1"]["Weight"] = json!(1);
    let t = text(&v).replacen("\"Weight\": 1", "\"Weight\": 1, \"Weight\": 2", 1);
    assert_msg(&bad(&t), &["property 'Weight' appears twice"]);
}

#[test]
fn unresolved_references_and_matrix_keys() {
    let mut v = good_dump();
    v["root"]["Shipments"]["s1"]["Status"]["Sent"]["Carrier"]["Depot"] = json!("east");
    v["root"]["Regions"]["north"]["Cities"]["a"]["Twin"] = json!("zz");
    let msg = bad_value(&v);
    assert_msg(&msg, &["2 references do not resolve"]);
    assert_msg(
        &msg,
        &[". 'Shipments' : \"s1\" ? 'Status' * 'Sent' + 'Carrier', property 'Depot': reference \"east\" does not resolve"],
    );
    assert_msg(&msg, &[". 'Regions' : \"north\" . 'Cities' : \"a\", property 'Twin': reference \"zz\""]);
    let mut v = good_dump();
    v["root"]["Shipments"]["s1"]["Route"][0][0] = json!(["north", "nowhere"]);
    assert_msg(&bad_value(&v), &["1 matrix key does not resolve", "% 'Route': matrix key [\"north\",\"nowhere\"]"]);
    // Other states than the ones exported round-trip too.
    let mut v = good_dump();
    v["root"]["Regions"]["south"]["Mode"] = json!({"Open": {"Since": 3}});
    v["root"]["Regions"]["north"]["Mode"] = json!({"Closed": {}});
    load_ok_value(&v);
}

fn load_ok_value(v: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), SCHEMA);
    load(&db, text(v).as_bytes()).unwrap();
    assert!(check_db(&db).problems.is_empty());
}

#[test]
fn syntax_errors_and_non_empty_databases() {
    let t = text(&good_dump());
    assert_msg(&bad(&t[..t.len() - 10]), &["EOF while parsing"]);
    assert_msg(&bad(&format!("{t} x")), &["trailing characters", "(line"]);
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), SCHEMA);
    load(&db, t.as_bytes()).unwrap();
    let before = records(&db);
    match load(&db, t.as_bytes()) {
        Err(E::Dump(e)) => assert_msg(&e.to_string(), &["not empty"]),
        other => panic!("{other:?}"),
    }
    assert_eq!(records(&db), before);
}

// --- a large import --------------------------------------------------------------------------

#[test]
fn import_of_100k_entries_streams_and_reports_progress() {
    const SMALL: &str = "root ( 'Items' -> dictionary ( 'N' -> number 'Next' -> reference ( .^ . 'Items' ) ) )";
    const N: usize = 100_000;
    let mut text =
        format!("{{\"espalier_dump\": 1, \"schema\": {}, \"version\": 9, \"root\": {{\"Items\": {{", json!(SMALL));
    for i in 0..N {
        let sep = if i == 0 { "" } else { "," };
        // Every reference points forward (the last one wraps around).
        text.push_str(&format!("{sep}\"i{i:06}\": {{\"N\": {i}, \"Next\": \"i{:06}\"}}", (i + 1) % N));
    }
    text.push_str("}}}");
    let dir = tempfile::tempdir().unwrap();
    let db = create(&dir.path().join("a"), SMALL);
    let mut reports = Vec::new();
    let stats = db
        .write(|g| -> Result<ImportStats, E> {
            reports.clear();
            Ok(import(g, text.as_bytes(), &mut |b| reports.push(b))?)
        })
        .unwrap()
        .value;
    assert_eq!(stats, ImportStats { nodes: N as u64 + 1, references: N as u64, bytes: text.len() as u64, version: 9 });
    assert!(reports.len() >= 3, "{reports:?}");
    assert!(reports.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(reports.last(), Some(&(text.len() as u64)));

    let snap = db.snapshot().unwrap();
    let mut out = Vec::new();
    let mut progress = Vec::new();
    let nodes = export(&snap.graph(), 9, &mut out, &mut |n| progress.push(n)).unwrap();
    assert_eq!(nodes, N as u64 + 1);
    assert_eq!(progress, (1..=10).map(|i| i * 10_000).collect::<Vec<u64>>());
    let back: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(back["root"]["Items"]["i099999"], json!({"N": 99999, "Next": "i000000"}));
    let mut checked = 0;
    let r = check(&snap.graph(), &mut |n| checked = n).unwrap();
    assert!(r.problems.is_empty(), "{:#?}", r.problems);
    assert_eq!((r.records, r.entries, r.links), (N as u64 + 1, N as u64, N as u64));
    assert!(checked >= 300_000);
}

#[test]
fn check_finds_a_record_whose_parent_row_names_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path());
    let p = props(db.schema());
    corrupt(&db, |g| {
        // The header is the parent's row alone: make city "c" name a region row that is not there.
        let south = entry(&g.graph(), NodeRef::ROOT, p.regions, "south");
        let c = entry(&g.graph(), south, p.cities, "c");
        let mut rec = g.graph().record(c.id)?.to_vec();
        rec[..espalier_data::record::HEADER].copy_from_slice(&9999u32.to_le_bytes());
        g.txn().put(c.id.table(), c.id.row(), &rec).unwrap();
        Ok(())
    });
    let r = check_db(&db);
    assert_problem(&r.problems, &["is not reachable from the root", "parent record", "is missing"]);
    assert_problem(&r.problems, &["'Cities' entry \"c\"", "'s header names parent record"]);
    assert_problem(&r.problems, &["'Shipments' : \"s1\", property 'Route'", "cannot be read"]);
}

/// A bulk load without change records (`set_record_changes(false)`) writes exactly what the
/// same writes with records write; only the change set is left empty.
#[test]
fn writes_without_change_records_write_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let recorded = create(&dir.path().join("a"), SCHEMA);
    let p = props(recorded.schema());
    let changes = recorded
        .write(|g| -> Result<usize, E> {
            fill(g, &p)?;
            Ok(g.pending_changes().len())
        })
        .unwrap();
    assert!(changes.value > 0);
    let quiet = create(&dir.path().join("b"), SCHEMA);
    let changes = quiet
        .write(|g| -> Result<usize, E> {
            g.set_record_changes(false);
            fill(g, &p)?;
            Ok(g.pending_changes().len())
        })
        .unwrap();
    assert_eq!(changes.value, 0);
    assert_eq!(dump(&recorded).0, dump(&quiet).0);
    assert!(check_db(&quiet).problems.is_empty());
}
