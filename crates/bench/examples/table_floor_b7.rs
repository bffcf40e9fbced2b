//! B6/B7 on the new storage layout (`docs/storage.md`), by hand, beside SQLite in the same run:
//! the floor of issue #20's B7 and `bench core` targets before the engine switches.
//!
//! The data is `peers_floor`'s: the suite's builder fills an Espalier database, SQLite is
//! loaded from it by the peers loader (WAL, `synchronous=OFF`, a 1 GiB page cache). The typed
//! tables are then loaded from SQLite's rows, laid out as the B6 model would be under the new
//! layout: a [`TableWriter`] per node type (Clients, Materials, Products, Orders, its
//! 'Connected To Sales Order Line' state 'Yes', Modifications, Added Materials (a matrix),
//! Machines, the 'Current Task' states 'Selected' and 'Not Selected', and the 'Status' states
//! 'Started', 'Canceled', 'Finished'), a [`KeyIndexWriter`] per collection (dictionary keys; an
//! 'Added Materials' entry under its material's row), texts interned with counts. Every
//! reference is navigable backwards through lists threaded through the referring rows.
//!
//! Timed by hand, interleaved with SQLite (each variant drawing keys from its own seeded
//! generator, so that none finds another's pages in the CPU caches), medians:
//!
//! - `many_references`: the machine by key, its 'Current Task' state row, the order, the
//!   client, its premium state (the same answer as SQLite's statement, asserted);
//! - `task_start`: the state switch as writes on the writers and a publish: the machine and
//!   the order by key, the old 'Not Selected' row freed, the 'Selected' and 'Started' rows
//!   inserted, the reference linked into the order's referrer list, the machine's tag and row
//!   written, every touched table published (an untimed switch back after each, as
//!   `peers_floor` does);
//! - the `bench core` operations on this data, also beside SQLite with
//!   `locking_mode=EXCLUSIVE` (a copy of the file, so that both can be open): a key lookup (a
//!   material's stock by key), a two-hop navigation (an order by key → its client → the
//!   client's name), a 100-entry collection in key order (one modification's
//!   'Added Materials': each material's key and the quantity) and a one-property update (an
//!   order's 'Quantity' by key, then publish; no fsync on either side).
//!
//! And the bytes on disk: rows × width with live bits, key index nodes, strings with their
//! table and hash index; against SQLite's file after a WAL checkpoint.
//!
//! `cargo run --release -p espalier-bench --example table_floor_b7 -- [b6|b7] [SAMPLES]`
//! (default b7, 2,000 samples; building B7 takes a few minutes). With `TABLE_FLOOR_PROFILE` set
//! it times key lookups alone instead: warm in a loop (SAMPLES × 1,000), then cold (64 MB of
//! other memory read before each), split into the index descent and the row read.

use std::collections::HashMap;
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use espalier_bench::peers::dataset;
use espalier_bench::peers::relational::{RelationalSchema, SqlConn, SqlValue};
use espalier_bench::peers::sqlite::SqlitePeer;
use espalier_bench::peers::workload::{DataIndex, Outcome, Params, MANY_REFERENCES, TASK_START};
use espalier_bench::peers::{DurabilityPairing, Suite};
use espalier_bench::suite::Scale;
use espalier_bench::table_floor::{key_of, put_key, Strings};
use espalier_instruction::Engine;
use espalier_storage::key_index::{KeyIndex, KeyIndexWriter};
use espalier_storage::table::{TableVersion, TableWriter};
use espalier_transaction::{DatabaseOptions, Durability};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rusqlite::Connection;

type Res<T> = Result<T, Box<dyn Error>>;

// --- row layouts (byte offsets; docs/storage.md: parent 4, number 8, text 4, reference 4 +
// next 4 + prev 4, stategroup tag 4 + row 4, collection count 4, incoming head 4; an entry key
// is 8 bytes: up to 7 bytes inline, a longer key as an interned text id) ---

const PARENT: usize = 0;

/// Root: the counts of 'Clients', 'Materials', 'Products', 'Orders', 'Machines'.
const ROOT_W: usize = 20;
/// Client: parent, key, 'Is Premium Client' (tag, row), 'Name', 'Contact' ('Phone',
/// 'Address', 'E-mail'), first 'Orders' . 'Client' referrer.
const C_PREMIUM: usize = 12;
const C_NAME: usize = 20;
const C_PHONE: usize = 24;
const C_ADDRESS: usize = 32;
const C_EMAIL: usize = 36;
const C_HEAD_CLIENT: usize = 40;
const CLIENT_W: usize = 44;
/// Material / product: parent, key, 'Description', 'Available In Stock' / 'Price', first
/// 'Added Materials' entry / 'Product' referrer.
const MAT_DESC: usize = 12;
const MAT_NUMBER: usize = 16;
const MAT_HEAD: usize = 24;
const MATERIAL_W: usize = 28;
/// Order: parent, key, 'Client' and 'Product' (row, next, prev), 'Quantity', 'Modifications'
/// count, 'Status' (tag, row), 'Connected To Sales Order Line' (tag, row), 'Due Date',
/// 'Scheduled Start Date', 'Scheduled End Date', 'Planner Group', 'Requested Group',
/// 'First Order', 'Planning Pool', first 'Current Order' referrer.
const O_CLIENT: usize = 12;
const O_PRODUCT: usize = 24;
const O_QUANTITY: usize = 36;
const O_MODS: usize = 44;
const O_STATUS: usize = 48;
const O_CONNECTED: usize = 56;
const O_DUE: usize = 64;
const O_START: usize = 72;
const O_END: usize = 80;
const O_PLANNER: usize = 88;
const O_REQUESTED: usize = 92;
const O_FIRST: usize = 96;
const O_POOL: usize = 104;
const O_HEAD_CURRENT: usize = 108;
const ORDER_W: usize = 112;
/// State 'Yes' of 'Connected To Sales Order Line': parent, 'Sales Order Line'.
const YES_W: usize = 8;
/// Modification: parent, key, 'Description', 'Status' (tag, row), 'Added Materials' count.
const MO_DESC: usize = 12;
const MO_STATUS: usize = 16;
const MO_AM: usize = 24;
const MOD_W: usize = 28;
/// Added material (matrix entry): parent, target material (row, next, prev), 'Quantity'.
const AM_TARGET: usize = 4;
const AM_QUANTITY: usize = 16;
const AM_W: usize = 24;
/// Machine: parent, key, 'Current Task' (tag, row).
const MA_TASK: usize = 12;
const MA_TASK_ROW: usize = 16;
const MACHINE_W: usize = 20;
/// State 'Selected': parent, 'Current Order' (row, next, prev), 'Status' (tag, row).
const SE_ORDER: usize = 4;
const SE_STATUS: usize = 16;
const SE_STATUS_ROW: usize = 20;
const SELECTED_W: usize = 24;
/// 'Started': parent, 'Starting Time', 'Iteration'. 'Canceled': parent, 'Last Iteration',
/// 'Reason'. 'Finished': parent, 'Process Duration'. 'Not Selected': parent, 'Reason' (tag, row).
const ST_TIME: usize = 4;
const ST_ITERATION: usize = 12;
const STARTED_W: usize = 20;
const CANCELED_W: usize = 16;
const FINISHED_W: usize = 12;
const NS_REASON: usize = 4;
const NOT_SELECTED_W: usize = 12;

/// State tags: indexes in the schema's order.
const TASK_SELECTED: u32 = 0;
const TASK_NOT_SELECTED: u32 = 1;
const STATUS_STARTED: u32 = 0;
const STATUS_CANCELED: u32 = 1;
const STATUS_FINISHED: u32 = 3;
const PREMIUM: [&str; 2] = ["Yes", "No"];

const ROOT: u32 = 1;

#[inline]
fn u32_at(row: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(row[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
fn i64_at(row: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(row[at..at + 8].try_into().expect("8 bytes"))
}

fn put_u32(row: &mut [u8], at: usize, v: u32) {
    row[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_i64(row: &mut [u8], at: usize, v: i64) {
    row[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Every table and index of the model, as the writer holds them.
struct Writers {
    root: TableWriter,
    clients: TableWriter,
    materials: TableWriter,
    products: TableWriter,
    orders: TableWriter,
    order_yes: TableWriter,
    mods: TableWriter,
    am: TableWriter,
    machines: TableWriter,
    selected: TableWriter,
    not_selected: TableWriter,
    started: TableWriter,
    canceled: TableWriter,
    finished: TableWriter,
    ix_clients: KeyIndexWriter,
    ix_materials: KeyIndexWriter,
    ix_products: KeyIndexWriter,
    ix_orders: KeyIndexWriter,
    ix_mods: KeyIndexWriter,
    ix_am: KeyIndexWriter,
    ix_machines: KeyIndexWriter,
    strings: Strings,
}

/// A published version of everything: what a reader holds. Each table's and index's version
/// is inline (moved out of its fresh `Arc`), as a database version would hold them: one
/// dependent load fewer per access than an `Arc` per table.
#[derive(Clone)]
struct Snapshot {
    root: TableVersion,
    clients: TableVersion,
    materials: TableVersion,
    products: TableVersion,
    orders: TableVersion,
    order_yes: TableVersion,
    mods: TableVersion,
    am: TableVersion,
    machines: TableVersion,
    selected: TableVersion,
    not_selected: TableVersion,
    started: TableVersion,
    canceled: TableVersion,
    finished: TableVersion,
    ix_clients: KeyIndex,
    ix_materials: KeyIndex,
    ix_products: KeyIndex,
    ix_orders: KeyIndex,
    ix_mods: KeyIndex,
    ix_am: KeyIndex,
    ix_machines: KeyIndex,
    strings: Arc<Strings>,
}

impl Writers {
    fn new() -> Writers {
        Writers {
            root: TableWriter::new(ROOT_W),
            clients: TableWriter::new(CLIENT_W),
            materials: TableWriter::new(MATERIAL_W),
            products: TableWriter::new(MATERIAL_W),
            orders: TableWriter::new(ORDER_W),
            order_yes: TableWriter::new(YES_W),
            mods: TableWriter::new(MOD_W),
            am: TableWriter::new(AM_W),
            machines: TableWriter::new(MACHINE_W),
            selected: TableWriter::new(SELECTED_W),
            not_selected: TableWriter::new(NOT_SELECTED_W),
            started: TableWriter::new(STARTED_W),
            canceled: TableWriter::new(CANCELED_W),
            finished: TableWriter::new(FINISHED_W),
            ix_clients: KeyIndexWriter::new(),
            ix_materials: KeyIndexWriter::new(),
            ix_products: KeyIndexWriter::new(),
            ix_orders: KeyIndexWriter::new(),
            ix_mods: KeyIndexWriter::new(),
            ix_am: KeyIndexWriter::new(),
            ix_machines: KeyIndexWriter::new(),
            strings: Strings::new(),
        }
    }

    fn publish(&mut self) -> Snapshot {
        Snapshot {
            root: Arc::unwrap_or_clone(self.root.publish()),
            clients: Arc::unwrap_or_clone(self.clients.publish()),
            materials: Arc::unwrap_or_clone(self.materials.publish()),
            products: Arc::unwrap_or_clone(self.products.publish()),
            orders: Arc::unwrap_or_clone(self.orders.publish()),
            order_yes: Arc::unwrap_or_clone(self.order_yes.publish()),
            mods: Arc::unwrap_or_clone(self.mods.publish()),
            am: Arc::unwrap_or_clone(self.am.publish()),
            machines: Arc::unwrap_or_clone(self.machines.publish()),
            selected: Arc::unwrap_or_clone(self.selected.publish()),
            not_selected: Arc::unwrap_or_clone(self.not_selected.publish()),
            started: Arc::unwrap_or_clone(self.started.publish()),
            canceled: Arc::unwrap_or_clone(self.canceled.publish()),
            finished: Arc::unwrap_or_clone(self.finished.publish()),
            ix_clients: Arc::unwrap_or_clone(self.ix_clients.publish()),
            ix_materials: Arc::unwrap_or_clone(self.ix_materials.publish()),
            ix_products: Arc::unwrap_or_clone(self.ix_products.publish()),
            ix_orders: Arc::unwrap_or_clone(self.ix_orders.publish()),
            ix_mods: Arc::unwrap_or_clone(self.ix_mods.publish()),
            ix_am: Arc::unwrap_or_clone(self.ix_am.publish()),
            ix_machines: Arc::unwrap_or_clone(self.ix_machines.publish()),
            strings: Arc::new(self.strings.clone()),
        }
    }
}

impl Snapshot {
    fn tables(&self) -> [&TableVersion; 14] {
        [
            &self.root,
            &self.clients,
            &self.materials,
            &self.products,
            &self.orders,
            &self.order_yes,
            &self.mods,
            &self.am,
            &self.machines,
            &self.selected,
            &self.not_selected,
            &self.started,
            &self.canceled,
            &self.finished,
        ]
    }

    /// (rows, key indexes, strings) in bytes on disk.
    fn disk_bytes(&self) -> (u64, u64, u64) {
        let rows = self.tables().iter().map(|t| t.disk_bytes()).sum();
        let indexes = [
            &self.ix_clients,
            &self.ix_materials,
            &self.ix_products,
            &self.ix_orders,
            &self.ix_mods,
            &self.ix_am,
            &self.ix_machines,
        ]
        .iter()
        .map(|i| i.disk_bytes())
        .sum();
        (rows, indexes, self.strings.disk_bytes())
    }
}

/// Adds 1 to the count at `at` of `row`.
fn bump(t: &mut TableWriter, row: u32, at: usize) {
    let r = t.row_mut(row).expect("live");
    let n = u32_at(r, at);
    put_u32(r, at, n + 1);
}

/// Points `source`'s reference slot at `slot` (row, next, prev) to `target` and puts it first
/// in the target's referrer list (head at `head` of the target's row).
fn link(source: &mut TableWriter, s: u32, slot: usize, target: &mut TableWriter, t: u32, head: usize) {
    let first = u32_at(target.row(t).expect("live target"), head);
    let r = source.row_mut(s).expect("live source");
    put_u32(r, slot, t);
    put_u32(r, slot + 4, first);
    put_u32(r, slot + 8, 0);
    if first != 0 {
        put_u32(source.row_mut(first).expect("live referrer"), slot + 8, s);
    }
    put_u32(target.row_mut(t).expect("live target"), head, s);
}

/// Takes `source`'s reference slot at `slot` out of its target's referrer list.
fn unlink(source: &mut TableWriter, s: u32, slot: usize, target: &mut TableWriter, head: usize) {
    let r = source.row(s).expect("live source");
    let (t, next, prev) = (u32_at(r, slot), u32_at(r, slot + 4), u32_at(r, slot + 8));
    if prev != 0 {
        put_u32(source.row_mut(prev).expect("live referrer"), slot + 4, next);
    } else {
        put_u32(target.row_mut(t).expect("live target"), head, next);
    }
    if next != 0 {
        put_u32(source.row_mut(next).expect("live referrer"), slot + 8, prev);
    }
    put_u32(source.row_mut(s).expect("live source"), slot, 0);
}

/// A SQLite row's cells as numbers and texts.
fn int(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<i64> {
    Ok(row.get::<_, Option<i64>>(i)?.unwrap_or(0))
}

fn text(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<String> {
    Ok(row.get::<_, Option<String>>(i)?.unwrap_or_default())
}

/// Loads the tables from SQLite's rows (ordered by id, so row order is SQLite's and
/// Espalier's id order); returns the SQLite id → row maps' sizes for checks.
fn load(conn: &Connection) -> Res<Writers> {
    let mut w = Writers::new();
    let root = w.root.insert();
    assert_eq!(root, ROOT);
    let mut rows_of: HashMap<&'static str, HashMap<i64, u32>> = HashMap::new();
    // Dictionary entries at the root: (table, writer, index, root count slot).
    let mut clients = HashMap::new();
    let mut st = conn.prepare(
        "SELECT id, entry_key, is_premium_client, name, contact_phone, contact_address, contact_e_mail \
         FROM clients ORDER BY id",
    )?;
    let mut q = st.query([])?;
    while let Some(r) = q.next()? {
        let row = w.clients.insert();
        let key = text(r, 1)?;
        w.ix_clients.insert(ROOT, key.as_bytes(), row)?;
        let (name, address, email) = (text(r, 3)?, text(r, 5)?, text(r, 6)?);
        let (name, address, email) = (w.strings.intern(&name), w.strings.intern(&address), w.strings.intern(&email));
        let b = w.clients.row_mut(row).expect("new");
        put_u32(b, PARENT, ROOT);
        put_key(b, &key, &mut w.strings);
        put_u32(b, C_PREMIUM, int(r, 2)? as u32);
        put_u32(b, C_NAME, name);
        put_i64(b, C_PHONE, int(r, 4)?);
        put_u32(b, C_ADDRESS, address);
        put_u32(b, C_EMAIL, email);
        bump(&mut w.root, ROOT, 0);
        clients.insert(int(r, 0)?, row);
    }
    rows_of.insert("clients", clients);
    for (table, number, slot) in [("materials", "available_in_stock", 4usize), ("products", "price", 8)] {
        let mut map = HashMap::new();
        let mut st = conn.prepare(&format!("SELECT id, entry_key, description, {number} FROM {table} ORDER BY id"))?;
        let mut q = st.query([])?;
        while let Some(r) = q.next()? {
            let (t, ix) = if table == "materials" {
                (&mut w.materials, &mut w.ix_materials)
            } else {
                (&mut w.products, &mut w.ix_products)
            };
            let row = t.insert();
            let key = text(r, 1)?;
            ix.insert(ROOT, key.as_bytes(), row)?;
            let desc = w.strings.intern(&text(r, 2)?);
            let b = t.row_mut(row).expect("new");
            put_u32(b, PARENT, ROOT);
            put_key(b, &key, &mut w.strings);
            put_u32(b, MAT_DESC, desc);
            put_i64(b, MAT_NUMBER, int(r, 3)?);
            bump(&mut w.root, ROOT, slot);
            map.insert(int(r, 0)?, row);
        }
        rows_of.insert(table, map);
    }
    let mut orders = HashMap::new();
    let mut st = conn.prepare(
        "SELECT id, entry_key, client, product, quantity, status, connected_to_sales_order_line, \
         connected_to_sales_order_line_yes_sales_order_line, due_date, scheduled_start_date, \
         scheduled_end_date, planner_group, requested_group, first_order, planning_pool FROM orders ORDER BY id",
    )?;
    let mut q = st.query([])?;
    while let Some(r) = q.next()? {
        let row = w.orders.insert();
        let key = text(r, 1)?;
        w.ix_orders.insert(ROOT, key.as_bytes(), row)?;
        let client = rows_of["clients"][&int(r, 2)?];
        let product = rows_of["products"][&int(r, 3)?];
        link(&mut w.orders, row, O_CLIENT, &mut w.clients, client, C_HEAD_CLIENT);
        link(&mut w.orders, row, O_PRODUCT, &mut w.products, product, MAT_HEAD);
        let connected = int(r, 6)? as u32;
        let yes = if connected == 1 {
            let y = w.order_yes.insert();
            let line = w.strings.intern(&text(r, 7)?);
            let b = w.order_yes.row_mut(y).expect("new");
            put_u32(b, PARENT, row);
            put_u32(b, 4, line);
            y
        } else {
            0
        };
        let texts: Vec<u32> =
            [11, 12, 14].iter().map(|&i| text(r, i).map(|t| w.strings.intern(&t))).collect::<Result<_, _>>()?;
        let b = w.orders.row_mut(row).expect("new");
        put_u32(b, PARENT, ROOT);
        put_key(b, &key, &mut w.strings);
        put_i64(b, O_QUANTITY, int(r, 4)?);
        put_u32(b, O_STATUS, int(r, 5)? as u32);
        put_u32(b, O_CONNECTED, connected);
        put_u32(b, O_CONNECTED + 4, yes);
        put_i64(b, O_DUE, int(r, 8)?);
        put_i64(b, O_START, int(r, 9)?);
        put_i64(b, O_END, int(r, 10)?);
        put_u32(b, O_PLANNER, texts[0]);
        put_u32(b, O_REQUESTED, texts[1]);
        put_i64(b, O_FIRST, int(r, 13)?);
        put_u32(b, O_POOL, texts[2]);
        bump(&mut w.root, ROOT, 12);
        orders.insert(int(r, 0)?, row);
    }
    let mut mods = HashMap::new();
    let mut st =
        conn.prepare("SELECT id, parent_id, entry_key, description, status FROM orders_modifications ORDER BY id")?;
    let mut q = st.query([])?;
    while let Some(r) = q.next()? {
        let row = w.mods.insert();
        let order = orders[&int(r, 1)?];
        let key = text(r, 2)?;
        w.ix_mods.insert(order, key.as_bytes(), row)?;
        let desc = w.strings.intern(&text(r, 3)?);
        let b = w.mods.row_mut(row).expect("new");
        put_u32(b, PARENT, order);
        put_key(b, &key, &mut w.strings);
        put_u32(b, MO_DESC, desc);
        put_u32(b, MO_STATUS, int(r, 4)? as u32);
        bump(&mut w.orders, order, O_MODS);
        mods.insert(int(r, 0)?, row);
    }
    let materials = &rows_of["materials"];
    let mut st =
        conn.prepare("SELECT parent_id, target_id, quantity FROM orders_modifications_added_materials ORDER BY id")?;
    let mut q = st.query([])?;
    while let Some(r) = q.next()? {
        let row = w.am.insert();
        let m = mods[&int(r, 0)?];
        let material = materials[&int(r, 1)?];
        w.ix_am.insert(m, &material.to_be_bytes(), row)?;
        put_u32(w.am.row_mut(row).expect("new"), PARENT, m);
        link(&mut w.am, row, AM_TARGET, &mut w.materials, material, MAT_HEAD);
        put_i64(w.am.row_mut(row).expect("new"), AM_QUANTITY, int(r, 2)?);
        bump(&mut w.mods, m, MO_AM);
    }
    let mut st = conn.prepare(
        "SELECT id, entry_key, current_task, current_task_selected_current_order, current_task_selected_status, \
         current_task_selected_status_started_starting_time, current_task_selected_status_started_iteration, \
         current_task_selected_status_canceled_last_iteration, current_task_selected_status_canceled_reason, \
         current_task_selected_status_finished_process_duration, current_task_not_selected_reason \
         FROM machines ORDER BY id",
    )?;
    let mut q = st.query([])?;
    while let Some(r) = q.next()? {
        let row = w.machines.insert();
        let key = text(r, 1)?;
        w.ix_machines.insert(ROOT, key.as_bytes(), row)?;
        let task = int(r, 2)? as u32;
        let state = if task == TASK_SELECTED {
            let s = w.selected.insert();
            put_u32(w.selected.row_mut(s).expect("new"), PARENT, row);
            link(&mut w.selected, s, SE_ORDER, &mut w.orders, orders[&int(r, 3)?], O_HEAD_CURRENT);
            let status = int(r, 4)? as u32;
            let status_row = match status {
                STATUS_STARTED => {
                    let x = w.started.insert();
                    let b = w.started.row_mut(x).expect("new");
                    put_u32(b, PARENT, s);
                    put_i64(b, ST_TIME, int(r, 5)?);
                    put_i64(b, ST_ITERATION, int(r, 6)?);
                    x
                }
                STATUS_CANCELED => {
                    let reason = w.strings.intern(&text(r, 8)?);
                    let x = w.canceled.insert();
                    let b = w.canceled.row_mut(x).expect("new");
                    put_u32(b, PARENT, s);
                    put_i64(b, 4, int(r, 7)?);
                    put_u32(b, 12, reason);
                    x
                }
                STATUS_FINISHED => {
                    let x = w.finished.insert();
                    let b = w.finished.row_mut(x).expect("new");
                    put_u32(b, PARENT, s);
                    put_i64(b, 4, int(r, 9)?);
                    x
                }
                _ => 0,
            };
            let b = w.selected.row_mut(s).expect("live");
            put_u32(b, SE_STATUS, status);
            put_u32(b, SE_STATUS_ROW, status_row);
            s
        } else {
            let s = w.not_selected.insert();
            let b = w.not_selected.row_mut(s).expect("new");
            put_u32(b, PARENT, row);
            put_u32(b, NS_REASON, int(r, 10)? as u32);
            s
        };
        let b = w.machines.row_mut(row).expect("new");
        put_u32(b, PARENT, ROOT);
        put_key(b, &key, &mut w.strings);
        put_u32(b, MA_TASK, task);
        put_u32(b, MA_TASK_ROW, state);
        bump(&mut w.root, ROOT, 16);
    }
    Ok(w)
}

// --- the operations by hand ---

/// many_references: the machine's task state, and the premium state of its order's client
/// when it is 'Selected' (`None` otherwise: the projection does not match).
fn many_references(s: &Snapshot, machine: &str) -> Option<Option<&'static str>> {
    let m = s.ix_machines.get(ROOT, machine.as_bytes())?;
    let row = s.machines.row(m)?;
    if u32_at(row, MA_TASK) != TASK_SELECTED {
        return Some(None);
    }
    let selected = s.selected.row(u32_at(row, MA_TASK_ROW))?;
    let order = s.orders.row(u32_at(selected, SE_ORDER))?;
    let client = s.clients.row(u32_at(order, O_CLIENT))?;
    Some(Some(PREMIUM[u32_at(client, C_PREMIUM) as usize]))
}

/// task_start: switches an idle machine to 'Selected' ('Started' at `time`, `iteration`) for
/// `order`, and publishes every table it wrote.
fn task_start(w: &mut Writers, snap: &mut Snapshot, machine: &str, order: &str, time: i64, iteration: i64) -> Res<()> {
    let m = w.ix_machines.current().get(ROOT, machine.as_bytes()).ok_or("no such machine")?;
    let o = w.ix_orders.current().get(ROOT, order.as_bytes()).ok_or("no such order")?;
    let row = w.machines.row(m).ok_or("machine row")?;
    if u32_at(row, MA_TASK) != TASK_NOT_SELECTED {
        return Err(format!("machine {machine} is not idle").into());
    }
    // 'Not Selected' has no property that anything can refer to: nothing to check before
    // freeing it (its 'Reason' states have no rows).
    let old = u32_at(row, MA_TASK_ROW);
    w.not_selected.free(old);
    let sel = w.selected.insert();
    put_u32(w.selected.row_mut(sel).ok_or("new row")?, PARENT, m);
    link(&mut w.selected, sel, SE_ORDER, &mut w.orders, o, O_HEAD_CURRENT);
    let started = w.started.insert();
    let b = w.started.row_mut(started).ok_or("new row")?;
    put_u32(b, PARENT, sel);
    put_i64(b, ST_TIME, time);
    put_i64(b, ST_ITERATION, iteration);
    let b = w.selected.row_mut(sel).ok_or("new row")?;
    put_u32(b, SE_STATUS, STATUS_STARTED);
    put_u32(b, SE_STATUS_ROW, started);
    let b = w.machines.row_mut(m).ok_or("machine row")?;
    put_u32(b, MA_TASK, TASK_SELECTED);
    put_u32(b, MA_TASK_ROW, sel);
    publish_task(w, snap);
    Ok(())
}

/// The switch back to 'Not Selected' ('Machine Unavailable'), untimed after each task_start.
fn task_reset(w: &mut Writers, snap: &mut Snapshot, machine: &str) -> Res<()> {
    let m = w.ix_machines.current().get(ROOT, machine.as_bytes()).ok_or("no such machine")?;
    let row = w.machines.row(m).ok_or("machine row")?;
    let sel = u32_at(row, MA_TASK_ROW);
    let started = u32_at(w.selected.row(sel).ok_or("selected row")?, SE_STATUS_ROW);
    unlink(&mut w.selected, sel, SE_ORDER, &mut w.orders, O_HEAD_CURRENT);
    w.started.free(started);
    w.selected.free(sel);
    let ns = w.not_selected.insert();
    put_u32(w.not_selected.row_mut(ns).ok_or("new row")?, PARENT, m);
    let b = w.machines.row_mut(m).ok_or("machine row")?;
    put_u32(b, MA_TASK, TASK_NOT_SELECTED);
    put_u32(b, MA_TASK_ROW, ns);
    publish_task(w, snap);
    Ok(())
}

/// Publishes the tables a task switch writes. No reader holds an older version than the one
/// just replaced, so rows freed before it are reusable.
fn publish_task(w: &mut Writers, snap: &mut Snapshot) {
    snap.machines = Arc::unwrap_or_clone(w.machines.publish());
    snap.not_selected = Arc::unwrap_or_clone(w.not_selected.publish());
    snap.selected = Arc::unwrap_or_clone(w.selected.publish());
    snap.started = Arc::unwrap_or_clone(w.started.publish());
    snap.orders = Arc::unwrap_or_clone(w.orders.publish());
    for t in [&mut w.machines, &mut w.not_selected, &mut w.selected, &mut w.started, &mut w.orders] {
        let oldest = t.version() - 1;
        t.release_before(oldest);
    }
}

fn key_lookup(s: &Snapshot, material: &str) -> Option<i64> {
    let m = s.ix_materials.get(ROOT, material.as_bytes())?;
    Some(i64_at(s.materials.row(m)?, MAT_NUMBER))
}

fn two_hop(s: &Snapshot, order: &str, out: &mut String) -> Option<()> {
    let o = s.ix_orders.get(ROOT, order.as_bytes())?;
    let client = s.clients.row(u32_at(s.orders.row(o)?, O_CLIENT))?;
    out.clear();
    out.push_str(s.strings.get(u32_at(client, C_NAME)));
    Some(())
}

/// One modification's 'Added Materials' in key order: each material's key (into `keys`, one
/// per line) and the quantity.
fn collection(s: &Snapshot, order: &str, modification: &str, keys: &mut String, values: &mut Vec<i64>) -> Option<()> {
    let o = s.ix_orders.get(ROOT, order.as_bytes())?;
    let m = s.ix_mods.get(o, modification.as_bytes())?;
    keys.clear();
    values.clear();
    for e in s.ix_am.entries(m) {
        let material = u32::from_be_bytes(e.key.try_into().ok()?);
        let am = s.am.row(e.row)?;
        keys.push_str(key_of(s.materials.row(material)?, &s.strings));
        keys.push('\n');
        values.push(i64_at(am, AM_QUANTITY));
    }
    Some(())
}

fn update(w: &mut Writers, snap: &mut Snapshot, order: &str, quantity: i64) -> Res<()> {
    let o = w.ix_orders.current().get(ROOT, order.as_bytes()).ok_or("no such order")?;
    put_i64(w.orders.row_mut(o).ok_or("order row")?, O_QUANTITY, quantity);
    snap.orders = Arc::unwrap_or_clone(w.orders.publish());
    Ok(())
}

// --- SQLite ---

const S_LOOKUP: &str = "SELECT available_in_stock FROM materials WHERE entry_key = ?1";
const S_TWO_HOP: &str = "SELECT c.name FROM orders o JOIN clients c ON c.id = o.client WHERE o.entry_key = ?1";
const S_COLLECTION: &str = "SELECT m.entry_key, a.quantity FROM orders_modifications_added_materials a \
     JOIN materials m ON m.id = a.target_id \
     WHERE a.parent_id = (SELECT mo.id FROM orders_modifications mo JOIN orders o ON o.id = mo.parent_id \
                          WHERE o.entry_key = ?1 AND mo.entry_key = ?2) \
     ORDER BY a.target_id";
const S_UPDATE: &str = "UPDATE orders SET quantity = ?1 WHERE entry_key = ?2";

fn sql_lookup(c: &Connection, material: &str) -> Res<i64> {
    Ok(c.prepare_cached(S_LOOKUP)?.query_row([material], |r| r.get(0))?)
}

fn sql_two_hop(c: &Connection, order: &str, out: &mut String) -> Res<()> {
    let mut st = c.prepare_cached(S_TWO_HOP)?;
    let mut rows = st.query([order])?;
    let row = rows.next()?.ok_or("no order")?;
    out.clear();
    out.push_str(row.get_ref(0)?.as_str()?);
    Ok(())
}

fn sql_collection(
    c: &Connection,
    order: &str,
    modification: &str,
    keys: &mut String,
    values: &mut Vec<i64>,
) -> Res<()> {
    let mut st = c.prepare_cached(S_COLLECTION)?;
    let mut rows = st.query([order, modification])?;
    keys.clear();
    values.clear();
    while let Some(row) = rows.next()? {
        keys.push_str(row.get_ref(0)?.as_str()?);
        keys.push('\n');
        values.push(row.get(1)?);
    }
    Ok(())
}

fn sql_update(c: &Connection, order: &str, quantity: i64) -> Res<()> {
    let n = c.prepare_cached(S_UPDATE)?.execute(rusqlite::params![quantity, order])?;
    if n != 1 {
        return Err(format!("the update changed {n} rows").into());
    }
    Ok(())
}

fn many_sql(sqlite: &mut SqlitePeer, p: &Params) -> Res<Option<Option<String>>> {
    match (MANY_REFERENCES.sql)(sqlite, p)? {
        Outcome::Queries(q) => {
            let rows = &q.first().ok_or("no result")?.rows;
            Ok(Some(rows.first().and_then(|r| r.values.first()).and_then(|v| v.as_str()).map(str::to_string)))
        }
        Outcome::Done => Err("many_references is a query".into()),
    }
}

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

/// The keys a generator draws from: orders with their modifications, and materials.
struct Keys {
    orders: Vec<(String, Vec<String>)>,
    materials: Vec<String>,
}

impl Keys {
    fn read(s: &Snapshot) -> Keys {
        let orders = s
            .ix_orders
            .entries(ROOT)
            .map(|e| {
                let key = String::from_utf8_lossy(e.key).into_owned();
                let mods = s.ix_mods.entries(e.row).map(|m| String::from_utf8_lossy(m.key).into_owned()).collect();
                (key, mods)
            })
            .collect();
        let materials = s.ix_materials.entries(ROOT).map(|e| String::from_utf8_lossy(e.key).into_owned()).collect();
        Keys { orders, materials }
    }

    fn order<'a>(&'a self, rng: &mut StdRng) -> &'a str {
        &self.orders[rng.random_range(0..self.orders.len())].0
    }

    fn modification<'a>(&'a self, rng: &mut StdRng) -> (&'a str, &'a str) {
        loop {
            let (o, mods) = &self.orders[rng.random_range(0..self.orders.len())];
            if !mods.is_empty() {
                return (o, &mods[rng.random_range(0..mods.len())]);
            }
        }
    }

    fn material<'a>(&'a self, rng: &mut StdRng) -> &'a str {
        &self.materials[rng.random_range(0..self.materials.len())]
    }
}

/// Samples of one operation: by hand, SQLite, SQLite with exclusive locking.
#[derive(Default)]
struct Samples {
    ours: Vec<Duration>,
    sql: Vec<Duration>,
    excl: Vec<Duration>,
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
    let sqlite_path = dir.path().join("sqlite.db");
    let mut sqlite = SqlitePeer::create(&sqlite_path, &rs, DurabilityPairing::None)?;
    {
        let snapshot = engine.database().snapshot()?;
        sqlite.load(&rs, &snapshot.graph(), &pb)?;
    }
    pb.finish_and_clear();
    let index = DataIndex::read(&engine)?;
    drop(engine);
    let sqlite_bytes = sqlite.disk_size()?;

    let t = Instant::now();
    let mut w = load(sqlite.connection())?;
    let mut snap = w.publish();
    let load_s = t.elapsed().as_secs_f64();
    let keys = Keys::read(&snap);

    // The copy for exclusive locking (a second connection could not open the file while an
    // exclusive one holds it).
    let excl_path = dir.path().join("sqlite-exclusive.db");
    sqlite.connection().execute("VACUUM INTO ?1", [excl_path.to_string_lossy()])?;
    let excl = Connection::open(&excl_path)?;
    // As `SqlitePeer` does: plans stay fixed once prepared (no re-preparing per binding).
    excl.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    excl.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
    let mode: String = excl.query_row("PRAGMA locking_mode = EXCLUSIVE", [], |r| r.get(0))?;
    assert_eq!(mode, "exclusive");
    excl.execute_batch("PRAGMA synchronous = OFF; PRAGMA cache_size = -1048576;")?;
    excl.set_prepared_statement_cache_capacity(16);
    // Both SQLite connections start with every page in their cache (quick_check reads them
    // all), as the tables are all in memory: no variant pays for reading the file.
    for c in [sqlite.connection(), &excl] {
        let ok: String = c.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
        assert_eq!(ok, "ok");
    }
    eprintln!("{entries} entries; tables loaded from SQLite's rows in {load_s:.1} s");

    if std::env::var("TABLE_FLOOR_PROFILE").is_ok() {
        // For `perf`: key lookups in a loop, nothing else.
        let mut r = StdRng::seed_from_u64(99);
        let ks: Vec<&str> = (0..1000).map(|_| keys.material(&mut r)).collect();
        let t = Instant::now();
        let mut sum = 0;
        for _ in 0..samples {
            for k in &ks {
                sum += key_lookup(&snap, k).unwrap_or(0);
            }
        }
        let ns = t.elapsed().as_secs_f64() * 1e9 / (samples * ks.len()) as f64;
        println!("key lookup: {ns:.1} ns ({sum}); index depth {}", snap.ix_materials.depth());
        // Cold: 64 MB of other memory read between lookups.
        let junk = vec![1u8; 64 << 20];
        let (mut index_only, mut full, mut row_only) = (Vec::new(), Vec::new(), Vec::new());
        for k in ks.iter().take(200) {
            let mut x = 0u64;
            for c in junk.chunks(64) {
                x = x.wrapping_add(u64::from(c[0]));
            }
            std::hint::black_box(x);
            let t = Instant::now();
            std::hint::black_box(snap.ix_materials.get(ROOT, k.as_bytes()));
            index_only.push(t.elapsed());
            for c in junk.chunks(64) {
                x = x.wrapping_add(u64::from(c[0]));
            }
            std::hint::black_box(x);
            let t = Instant::now();
            std::hint::black_box(key_lookup(&snap, k));
            full.push(t.elapsed());
            let row = snap.ix_materials.get(ROOT, k.as_bytes()).unwrap_or(1);
            for c in junk.chunks(64) {
                x = x.wrapping_add(u64::from(c[0]));
            }
            std::hint::black_box(x);
            let t = Instant::now();
            std::hint::black_box(snap.materials.row(row));
            row_only.push(t.elapsed());
        }
        println!(
            "cold: index get {:.2} µs, row by id {:.2} µs, key lookup {:.2} µs",
            median_us(index_only),
            median_us(row_only),
            median_us(full)
        );
        return Ok(());
    }
    let rng = |seed| StdRng::seed_from_u64(seed);
    // Per operation and variant its own generator (ours, SQLite, SQLite exclusive).
    let mut rngs: Vec<StdRng> = (1..=18).map(rng).collect();
    let (mut many, mut start, mut lookup, mut hop, mut coll, mut upd) = (
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
    );
    let reset = TASK_START.reset.ok_or("task_start has a reset")?;
    let (mut out, mut out2) = (String::new(), String::new());
    let (mut vals, mut vals2) = (Vec::new(), Vec::new());
    for i in 0..samples {
        // many_references: by hand (checked against SQLite, untimed), SQLite.
        let p: Params = (MANY_REFERENCES.params)(&mut rngs[0], &index)?;
        let machine = p.text("machine")?;
        let ours = timed(&mut many.ours, || Ok(many_references(&snap, &machine)))?;
        let want = many_sql(&mut sqlite, &p)?;
        assert_eq!(ours.map(|o| o.map(str::to_string)), want, "many_references disagrees on machine {machine}");
        let p: Params = (MANY_REFERENCES.params)(&mut rngs[1], &index)?;
        timed(&mut many.sql, || many_sql(&mut sqlite, &p))?;

        // task_start: by hand on the writers (then checked and reset, untimed), SQLite.
        let p: Params = (TASK_START.params)(&mut rngs[2], &index)?;
        let (machine, order) = (p.text("machine")?, p.text("order")?);
        timed(&mut start.ours, || {
            task_start(&mut w, &mut snap, &machine, &order, p.int("time")?, p.int("iteration")?)
        })?;
        let m = snap.ix_machines.get(ROOT, machine.as_bytes()).ok_or("machine")?;
        let sel = snap.selected.row(u32_at(snap.machines.row(m).ok_or("row")?, MA_TASK_ROW)).ok_or("selected")?;
        let o = snap.ix_orders.get(ROOT, order.as_bytes()).ok_or("order")?;
        assert_eq!(u32_at(sel, SE_ORDER), o, "task_start did not select the order");
        task_reset(&mut w, &mut snap, &machine)?;
        let p: Params = (TASK_START.params)(&mut rngs[3], &index)?;
        timed(&mut start.sql, || Ok((TASK_START.sql)(&mut sqlite, &p)?))?;
        let changed = SqlConn::execute(&mut sqlite, reset.sql, &[SqlValue::Text(p.text("machine")?)])?;
        assert_eq!(changed, 1, "the SQLite reset changed {changed} rows");

        // Key lookup.
        let k = keys.material(&mut rngs[4]);
        let v = timed(&mut lookup.ours, || key_lookup(&snap, k).ok_or_else(|| "no material".into()))?;
        assert_eq!(v, sql_lookup(sqlite.connection(), k)?, "key lookup disagrees on {k}");
        let k = keys.material(&mut rngs[5]);
        timed(&mut lookup.sql, || sql_lookup(sqlite.connection(), k))?;
        let k = keys.material(&mut rngs[6]);
        timed(&mut lookup.excl, || sql_lookup(&excl, k))?;

        // Two-hop navigation.
        let k = keys.order(&mut rngs[7]);
        timed(&mut hop.ours, || two_hop(&snap, k, &mut out).ok_or_else(|| "no order".into()))?;
        sql_two_hop(sqlite.connection(), k, &mut out2)?;
        assert_eq!(out, out2, "two-hop disagrees on {k}");
        let k = keys.order(&mut rngs[8]);
        timed(&mut hop.sql, || sql_two_hop(sqlite.connection(), k, &mut out2))?;
        let k = keys.order(&mut rngs[9]);
        timed(&mut hop.excl, || sql_two_hop(&excl, k, &mut out2))?;

        // 100-entry collection in key order.
        let (o, m) = keys.modification(&mut rngs[10]);
        timed(&mut coll.ours, || collection(&snap, o, m, &mut out, &mut vals).ok_or_else(|| "no modification".into()))?;
        sql_collection(sqlite.connection(), o, m, &mut out2, &mut vals2)?;
        assert_eq!((&out, &vals), (&out2, &vals2), "the collection disagrees on {o}/{m}");
        let (o, m) = keys.modification(&mut rngs[11]);
        timed(&mut coll.sql, || sql_collection(sqlite.connection(), o, m, &mut out2, &mut vals2))?;
        let (o, m) = keys.modification(&mut rngs[12]);
        timed(&mut coll.excl, || sql_collection(&excl, o, m, &mut out2, &mut vals2))?;

        // One-property update and publish (the value differs per sample).
        let q = 1_000_000 + i as i64;
        let k = keys.order(&mut rngs[13]);
        timed(&mut upd.ours, || update(&mut w, &mut snap, k, q))?;
        let o = snap.ix_orders.get(ROOT, k.as_bytes()).ok_or("order")?;
        assert_eq!(i64_at(snap.orders.row(o).ok_or("row")?, O_QUANTITY), q);
        let k = keys.order(&mut rngs[14]);
        timed(&mut upd.sql, || sql_update(sqlite.connection(), k, q))?;
        let k = keys.order(&mut rngs[15]);
        timed(&mut upd.excl, || sql_update(&excl, k, q))?;
    }

    let name = if suite == Suite::B6 { "B6" } else { "B7" };
    println!("| {name}, {samples} interleaved samples, medians | tables, µs | SQLite, µs | SQLite ÷ | SQLite exclusive, µs | ÷ |");
    println!("|---|--:|--:|--:|--:|--:|");
    for (label, s) in [
        ("many_references", &many),
        ("task_start (writes + publish)", &start),
        ("key lookup (material's stock)", &lookup),
        ("two-hop (order → client → name)", &hop),
        ("100-entry collection in key order", &coll),
        ("one-property update + publish", &upd),
    ] {
        let (a, b) = (median_us(s.ours.clone()), median_us(s.sql.clone()));
        let excl = if s.excl.is_empty() {
            "| – | – |".to_string()
        } else {
            let c = median_us(s.excl.clone());
            format!("| {c:.2} | {:.2}× |", c / a)
        };
        println!("| {label} | {a:.2} | {b:.2} | {:.2}× {excl}", b / a);
    }
    let (rows, indexes, strings) = snap.disk_bytes();
    let total = rows + indexes + strings;
    println!(
        "| on disk, MB (rows {:.1} + key indexes {:.1} + strings {:.1}) | {:.1} | {:.1} | {:.2}× | | |",
        rows as f64 / 1e6,
        indexes as f64 / 1e6,
        strings as f64 / 1e6,
        total as f64 / 1e6,
        sqlite_bytes as f64 / 1e6,
        sqlite_bytes as f64 / total as f64
    );
    Ok(())
}
