//! How fast B7's many_references and task_start could be on this substrate and layout, beside
//! SQLite on the same data in the same process (the data and statements of `espalier bench
//! peers`; durability none, SQLite `synchronous=OFF`). Medians of interleaved samples:
//!
//! 1. `many_references`: the engine's query (`Engine::run` of the checked plan);
//! 2. `many_references by hand`: the same answer read through the `Graph` API with no engine:
//!    the machine's entry (one descent in `entries`), its `'Current Task'` state record (one
//!    in `nodes`), the order and the client (each a locator in `nodes`, then its row in
//!    `entries`): the six descents this layout needs;
//! 3. SQLite's many_references statement;
//! 4. `task_start`: the engine's update (an untimed reset after each);
//! 5. `task_start floor`: the least a state switch does on this layout, through the same
//!    commit path (`Database::write`): the machine and the order found by key, the links
//!    into the old state scanned, the machine's row and the old state's record written, the
//!    new state's record and its link to the order put, the commit. The engine's switch also
//!    deletes the old record, creates the nested state's record and records the change set;
//! 6. SQLite's task_start statement (its untimed reset after each).
//!
//! Every by-hand answer is asserted equal to the engine's.
//!
//! `cargo run --release -p espalier-bench --example peers_floor -- [b6|b7] [SAMPLES]`
//! (default b7, 2,000 samples; building B7 takes a minute or two).

use std::error::Error;
use std::time::{Duration, Instant};

use espalier_bench::peers::dataset;
use espalier_bench::peers::relational::RelationalSchema;
use espalier_bench::peers::sqlite::SqlitePeer;
use espalier_bench::peers::workload::{DataIndex, Params, MANY_REFERENCES, TASK_START};
use espalier_bench::peers::{DurabilityPairing, Suite};
use espalier_bench::suite::Scale;
use espalier_data::{EntryKey, Graph, NodeRef};
use espalier_instruction::{parse_instruction, Engine, Reply};
use espalier_schema::PropertyId;
use espalier_storage::{Reader, Table};
use espalier_transaction::{DatabaseOptions, Durability, TxError, WriteGraph};
use rand::SeedableRng;

type Res<T> = Result<T, Box<dyn Error>>;

fn median_us(mut samples: Vec<Duration>) -> f64 {
    assert!(!samples.is_empty(), "no samples");
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

fn timed<T>(samples: &mut Vec<Duration>, f: impl FnOnce() -> Res<T>) -> Res<T> {
    let t = Instant::now();
    let out = f()?;
    samples.push(t.elapsed());
    Ok(out)
}

/// The B6 model's properties the by-hand reads follow, found by name.
struct Names {
    machines: PropertyId,
    orders: PropertyId,
    current_task: PropertyId,
    current_order: PropertyId,
    client: PropertyId,
    premium: PropertyId,
}

fn property(g: &Graph<'_>, owner: espalier_schema::NodeTypeId, name: &str) -> Res<PropertyId> {
    Ok(g.schema.find(owner, name).ok_or_else(|| format!("the model has no '{name}'"))?.id)
}

impl Names {
    fn resolve(g: &Graph<'_>) -> Res<Names> {
        let machines = property(g, espalier_schema::ROOT, "Machines")?;
        let machine = g.entry_type(machines);
        let current_task = property(g, machine, "Current Task")?;
        let selected = state_node(g, current_task, "Selected")?;
        let current_order = property(g, selected, "Current Order")?;
        let orders = property(g, espalier_schema::ROOT, "Orders")?;
        let client = property(g, g.entry_type(orders), "Client")?;
        let client_ty = g.entry_type(property(g, espalier_schema::ROOT, "Clients")?);
        let premium = property(g, client_ty, "Is Premium Client")?;
        Ok(Names { machines, orders, current_task, current_order, client, premium })
    }
}

fn state_node(g: &Graph<'_>, stategroup: PropertyId, name: &str) -> Res<espalier_schema::NodeTypeId> {
    let index = g.schema.state_index(stategroup, name).ok_or_else(|| format!("no state '{name}'"))?;
    match &g.schema.property(stategroup).kind {
        espalier_schema::PropertyKind::StateGroup { states } => Ok(states[index as usize].node),
        _ => Err(format!("'{name}' is not a state").into()),
    }
}

/// many_references by hand: (state of 'Current Task', premium state if selected).
fn many_by_hand(g: &Graph<'_>, n: &Names, machine: &str) -> Res<(String, Option<String>)> {
    let m = g.find_entry_view(NodeRef::ROOT, n.machines, EntryKey::Text(machine))?.ok_or("no such machine")?;
    let (index, state) = m.state(n.current_task)?;
    let task = g.state_name(n.current_task, index).to_string();
    if task != "Selected" {
        return Ok((task, None));
    }
    let order = g.view(state)?.reference(n.current_order)?;
    let client = g.view(NodeRef { id: order, ty: g.entry_type(n.orders) })?.reference(n.client)?;
    let client_ty = g.schema.property(n.premium).owner;
    let (premium, _) = g.view(NodeRef { id: client, ty: client_ty })?.state(n.premium)?;
    Ok((task, Some(g.state_name(n.premium, premium).to_string())))
}

/// The engine's many_references reply: the premium state, or `None` when the machine is not
/// 'Selected' (the filter leaves no row).
fn premium_of_reply(reply: Reply) -> Res<Option<String>> {
    let Reply::Query(q) = reply else { return Err("not a query reply".into()) };
    match q.rows.first() {
        None => Ok(None),
        Some(row) => Ok(Some(row.values.first().and_then(|v| v.as_str()).ok_or("no premium value")?.to_string())),
    }
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let suite = match args.get(1).map(String::as_str) {
        Some("b6") => Suite::B6,
        None | Some("b7") => Suite::B7,
        Some(other) => return Err(format!("unknown suite {other:?}: b6 or b7").into()),
    };
    let samples: usize = args.get(2).map_or(Ok(2000), |s| s.parse())?;
    let file = dataset::suite_file(suite)?;
    let dir = tempfile::tempdir()?;
    let engine = Engine::create(
        &dir.path().join("db"),
        &file.model,
        DatabaseOptions { durability: Durability::None, ..Default::default() },
    )?;
    let pb = indicatif::ProgressBar::new(0);
    let entries = dataset::build(&engine, &file, 1, Scale::default(), &pb)?;
    let rs = RelationalSchema::new(engine.database().schema().clone())?;
    let mut sqlite = SqlitePeer::create(&dir.path().join("sqlite.db"), &rs, DurabilityPairing::None)?;
    {
        let snapshot = engine.database().snapshot()?;
        sqlite.load(&rs, &snapshot.graph(), &pb)?;
    }
    pb.finish_and_clear();
    eprintln!("{entries} entries");
    let index = DataIndex::read(&engine)?;
    let plan = |text: &str| -> Res<_> {
        Ok(engine.check(&parse_instruction(text, espalier_instruction::parse::ParseOptions::CLIENT)?, Some(text))?)
    };
    let many_plan = plan(MANY_REFERENCES.instructions[0])?;
    let start_plan = plan(TASK_START.instructions[0])?;
    let reset = TASK_START.reset.ok_or("task_start has a reset")?;
    let reset_plan = plan(reset.espalier)?;

    let db = engine.database();
    let names = {
        let snapshot = db.snapshot()?;
        Names::resolve(&snapshot.graph())?
    };
    // Each variant draws its own machines: one that ran right after another on the same
    // machine would find that machine's pages in the CPU caches.
    let rng = |seed| rand::rngs::StdRng::seed_from_u64(seed);
    let (mut rng_many, mut rng_hand, mut rng_many_sql) = (rng(1), rng(2), rng(3));
    let (mut rng_start, mut rng_floor, mut rng_start_sql) = (rng(4), rng(5), rng(6));
    let (mut many, mut many_hand, mut many_sql) = (Vec::new(), Vec::new(), Vec::new());
    let (mut start, mut floor, mut start_sql) = (Vec::new(), Vec::new(), Vec::new());
    // Stand-in state records of the floor go under ids no build reaches, and are removed untimed.
    for spare_id in (u64::MAX / 2..).take(samples) {
        // many_references: engine, by hand (checked against the engine, untimed), SQLite.
        let p: Params = (MANY_REFERENCES.params)(&mut rng_many, &index)?;
        timed(&mut many, || Ok(engine.run(&many_plan, &p.map(), None)?))?;
        let p: Params = (MANY_REFERENCES.params)(&mut rng_hand, &index)?;
        let machine = p.text("machine")?;
        let by_hand = timed(&mut many_hand, || {
            let snapshot = db.snapshot()?;
            many_by_hand(&snapshot.graph(), &names, &machine)
        })?;
        let reply = engine.run(&many_plan, &p.map(), None)?;
        assert_eq!(premium_of_reply(reply)?, by_hand.1, "by hand and the engine disagree on machine {machine}");
        let p: Params = (MANY_REFERENCES.params)(&mut rng_many_sql, &index)?;
        timed(&mut many_sql, || Ok((MANY_REFERENCES.sql)(&mut sqlite, &p)?))?;

        // task_start: engine, floor, SQLite; each reset untimed.
        let p: Params = (TASK_START.params)(&mut rng_start, &index)?;
        timed(&mut start, || Ok(engine.run(&start_plan, &p.map(), None)?))?;
        let mut key_params = std::collections::HashMap::new();
        key_params.insert(reset.key_param.to_string(), p.get(reset.key_param)?.clone());
        engine.run(&reset_plan, &key_params, None)?;

        let p: Params = (TASK_START.params)(&mut rng_floor, &index)?;
        let (machine, order) = (p.text("machine")?, p.text("order")?);
        let id = spare_id;
        let mut link = [0u8; 20];
        timed(&mut floor, || {
            db.write(|g: &mut WriteGraph<'_, '_>| -> Result<(), TxError> {
                let missing = |what: &str| TxError::Commit(format!("machine {machine}, order {order}: {what}"));
                let g_read = g.graph();
                let view = g_read
                    .find_entry_view(NodeRef::ROOT, names.machines, EntryKey::Text(&machine))?
                    .ok_or_else(|| missing("no machine"))?;
                let old_state = view.state(names.current_task)?.1.id;
                let (_, machine_key) = g_read.entry_location(view)?.ok_or_else(|| missing("not an entry"))?;
                let order_id = g_read
                    .find_entry_view(NodeRef::ROOT, names.orders, EntryKey::Text(&order))?
                    .ok_or_else(|| missing("no order"))?
                    .node
                    .id;
                // Nothing may refer into the state left: its links.
                let referrers = g.txn().prefix(Table::Links, &old_state.to_be_bytes())?.count();
                assert_eq!(referrers, 0, "a 'Not Selected' state has no referrers");
                // The machine's row and the old state's record written (the switch deletes
                // the record; writing it back touches the same page).
                let row = g.txn().get(Table::Entries, &machine_key)?.ok_or_else(|| missing("no row"))?.to_vec();
                g.txn().put(Table::Entries, &machine_key, &row)?;
                let old = g.txn().get(Table::Nodes, &old_state.to_be_bytes())?.ok_or_else(|| missing("no state"))?;
                let old = old.to_vec();
                g.txn().put(Table::Nodes, &old_state.to_be_bytes(), &old)?;
                // The new state's record (a 16-byte header and three 8-byte slots, as
                // 'Selected' has) and its reference's link to the order.
                g.txn().put(Table::Nodes, &id.to_be_bytes(), &[0u8; 40])?;
                link[..8].copy_from_slice(&order_id.to_be_bytes());
                link[8..16].copy_from_slice(&id.to_be_bytes());
                link[16..].copy_from_slice(&names.current_order.to_be_bytes());
                g.txn().put(Table::Links, &link, &[])?;
                Ok(())
            })?;
            Ok(())
        })?;
        db.write(|g: &mut WriteGraph<'_, '_>| -> Result<(), TxError> {
            g.txn().delete(Table::Nodes, &id.to_be_bytes())?;
            g.txn().delete(Table::Links, &link)?;
            Ok(())
        })?;

        let p: Params = (TASK_START.params)(&mut rng_start_sql, &index)?;
        timed(&mut start_sql, || Ok((TASK_START.sql)(&mut sqlite, &p)?))?;
        let key = espalier_bench::peers::relational::SqlValue::Text(p.text("machine")?);
        let changed = espalier_bench::peers::relational::SqlConn::execute(&mut sqlite, reset.sql, &[key])?;
        assert_eq!(changed, 1, "the SQLite reset changed {changed} rows");
    }
    let row = |name: &str, ours: &[Duration], sql: &[Duration]| {
        let (a, b) = (median_us(ours.to_vec()), median_us(sql.to_vec()));
        println!("| {name} | {a:.2} | {b:.2} | {:.2}× |", b / a);
    };
    println!("| {} ({samples} samples) | µs | SQLite µs | SQLite ÷ |", if suite == Suite::B6 { "B6" } else { "B7" });
    println!("|---|--:|--:|--:|");
    row("many_references", &many, &many_sql);
    row("many_references by hand (6 descents)", &many_hand, &many_sql);
    row("task_start", &start, &start_sql);
    row("task_start floor (3 lookups, 1 scan, 4 puts, commit)", &floor, &start_sql);
    Ok(())
}
