//! The Train Benchmark on the new storage layout (`docs/storage.md`), by hand, beside SQLite
//! in the same run: the floor that issue #20's step 1 asks for before the engine switches.
//!
//! The generated model (`Scenario::Repair`) is loaded into typed tables laid out as
//! `railway.alan` would be under the new layout — one [`TableWriter`] per node type (Region,
//! Sensor, Track Element, its 'Kind' states Segment and Switch, Semaphore, Route, the 'Entry'
//! and 'Exit' states 'Set', Switch Position, and the matrix entry types 'Monitored By',
//! 'Connects To' and 'Requires'), a [`KeyIndexWriter`] per collection, and the element ids as
//! interned texts. Every reference and matrix link is navigable backwards: the target row
//! holds the first referrer row per incoming property, and each referring row holds the next
//! and previous ones (lists threaded through the source table, Neo4j's record store).
//!
//! Then the six queries are answered by hand through published snapshots (as a reader
//! would), each answer asserted equal to SQLite's (`Query::sql` over `queries::create_tables`),
//! and timed beside it: medians of interleaved runs. Also the load (the tables and indexes
//! from the in-memory model, against `create_tables` from the same model's relations) and the
//! bytes on disk (rows × width with live bits, key index nodes, strings with their table and
//! hash index; against SQLite's file after a WAL checkpoint).
//!
//! `cargo run --release -p espalier-trainbenchmark --example table_floor -- [SIZE] [RUNS]`
//! (default size 64, 30 runs after 5 warm-up). With `TABLE_FLOOR_PROFILE=N` (0–5, the
//! queries in the order above) it runs only that by-hand query RUNS times, for `perf`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use espalier_bench::table_floor::{key_of, put_key, Strings};
use espalier_storage::key_index::{KeyIndex, KeyIndexWriter};
use espalier_storage::table::{TableVersion, TableWriter};
use espalier_trainbenchmark::model::{ElementKind, Model, Position, Signal};
use espalier_trainbenchmark::{generate, Query, Scenario};
use rusqlite::Connection;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const WARMUP: usize = 5;

// --- row layouts (byte offsets; docs/storage.md: parent 4, number 8, text 4, reference 4 +
// next 4 + prev 4, stategroup tag 4 + row 4, collection count 4, incoming head 4; an entry key
// is 8 bytes here: up to 7 bytes inline, a longer key as an interned text id, see `put_key`) ---

/// Root: 'Regions' count, 'Routes' count.
const ROOT_W: usize = 8;
/// Region: parent, key, 'Sensors' count, 'Track Elements' count.
const R_SENSORS: usize = 12;
const R_ELEMENTS: usize = 16;
const REGION_W: usize = 20;
/// Sensor: parent, key, first 'Monitored By' entry targeting it, first 'Requires' entry.
const S_HEAD_MB: usize = 12;
const S_HEAD_REQ: usize = 16;
const SENSOR_W: usize = 20;
/// Track element: parent, key, 'Monitored By' count, 'Connects To' count, 'Kind' (tag, row),
/// first 'Connects To' entry targeting it, first 'Follows' . 'Target' referrer.
const T_MB_COUNT: usize = 12;
const T_CT_COUNT: usize = 16;
const T_KIND: usize = 20;
const T_KIND_ROW: usize = 24;
const T_HEAD_CT: usize = 28;
const T_HEAD_TARGET: usize = 32;
const TE_W: usize = 36;
/// Segment (state 'Segment' of 'Kind'): parent, 'Length', 'Semaphores' count.
const G_LENGTH: usize = 4;
const G_SEMAPHORES: usize = 12;
const SEGMENT_W: usize = 16;
/// Switch (state 'Switch'): parent, 'Current Position' (tag, row).
const W_POS: usize = 4;
const SWITCH_W: usize = 12;
/// Semaphore: parent, key, 'Signal' (tag, row), first 'Entry' / 'Exit' referrer.
const M_SIGNAL: usize = 12;
const M_HEAD_ENTRY: usize = 20;
const M_HEAD_EXIT: usize = 24;
const SEMAPHORE_W: usize = 28;
/// Route: parent, key, 'Active', 'Entry', 'Exit' (tag, row each), 'Requires' and 'Follows' counts.
const U_ACTIVE: usize = 12;
const U_ENTRY: usize = 20;
const U_ENTRY_ROW: usize = 24;
const U_EXIT: usize = 28;
const U_EXIT_ROW: usize = 32;
const U_REQ_COUNT: usize = 36;
const U_FOLLOWS_COUNT: usize = 40;
const ROUTE_W: usize = 44;
/// State 'Set' of 'Entry' / 'Exit': parent, 'Semaphore' (row, next, prev).
const E_SEM: usize = 4;
const SET_W: usize = 16;
/// Switch position ('Follows' entry): parent, key, 'Position' (tag, row), 'Target' (row, next, prev).
const P_POS: usize = 12;
const P_TARGET: usize = 20;
const SWP_W: usize = 32;
/// A matrix entry: parent, target row (the key; a reference slot: next and previous entry
/// with the same target follow it).
const X_TARGET: usize = 4;
const MATRIX_W: usize = 16;

const PARENT: usize = 0;

const KIND_SEGMENT: u32 = 0;
const KIND_SWITCH: u32 = 1;
const YES: u32 = 1;
const SET: u32 = 1;

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

fn position_tag(p: Position) -> u32 {
    Position::ALL.iter().position(|x| *x == p).expect("a position") as u32
}

fn signal_tag(s: Signal) -> u32 {
    Signal::ALL.iter().position(|x| *x == s).expect("a signal") as u32
}

/// The writers of every table and index of the railway.
struct Writers {
    root: TableWriter,
    region: TableWriter,
    sensor: TableWriter,
    te: TableWriter,
    segment: TableWriter,
    switch: TableWriter,
    semaphore: TableWriter,
    route: TableWriter,
    entry_set: TableWriter,
    exit_set: TableWriter,
    swp: TableWriter,
    mb: TableWriter,
    ct: TableWriter,
    req: TableWriter,
    ix_regions: KeyIndexWriter,
    ix_sensors: KeyIndexWriter,
    ix_elements: KeyIndexWriter,
    ix_semaphores: KeyIndexWriter,
    ix_routes: KeyIndexWriter,
    ix_follows: KeyIndexWriter,
    ix_mb: KeyIndexWriter,
    ix_ct: KeyIndexWriter,
    ix_req: KeyIndexWriter,
    strings: Strings,
}

/// A published version of everything: what a reader holds. Each table's and index's version
/// is inline (moved out of its fresh `Arc`), as a database version would hold them: one
/// dependent load fewer per access than an `Arc` per table.
struct Snapshot {
    root: TableVersion,
    region: TableVersion,
    sensor: TableVersion,
    te: TableVersion,
    segment: TableVersion,
    switch: TableVersion,
    semaphore: TableVersion,
    route: TableVersion,
    entry_set: TableVersion,
    exit_set: TableVersion,
    swp: TableVersion,
    mb: TableVersion,
    ct: TableVersion,
    req: TableVersion,
    ix_regions: KeyIndex,
    ix_sensors: KeyIndex,
    ix_elements: KeyIndex,
    ix_semaphores: KeyIndex,
    ix_routes: KeyIndex,
    ix_follows: KeyIndex,
    ix_mb: KeyIndex,
    ix_ct: KeyIndex,
    ix_req: KeyIndex,
    strings: Arc<Strings>,
}

impl Snapshot {
    fn tables(&self) -> [(&'static str, &TableVersion); 14] {
        [
            ("Root", &self.root),
            ("Region", &self.region),
            ("Sensor", &self.sensor),
            ("Track Element", &self.te),
            ("Segment", &self.segment),
            ("Switch", &self.switch),
            ("Semaphore", &self.semaphore),
            ("Route", &self.route),
            ("Entry Set", &self.entry_set),
            ("Exit Set", &self.exit_set),
            ("Switch Position", &self.swp),
            ("Monitored By", &self.mb),
            ("Connects To", &self.ct),
            ("Requires", &self.req),
        ]
    }

    fn indexes(&self) -> [&KeyIndex; 9] {
        [
            &self.ix_regions,
            &self.ix_sensors,
            &self.ix_elements,
            &self.ix_semaphores,
            &self.ix_routes,
            &self.ix_follows,
            &self.ix_mb,
            &self.ix_ct,
            &self.ix_req,
        ]
    }

    /// (rows × width, key indexes, strings) in bytes.
    fn disk_bytes(&self) -> (u64, u64, u64) {
        let rows = self.tables().iter().map(|(_, t)| t.disk_bytes()).sum();
        let indexes = self.indexes().iter().map(|i| i.disk_bytes()).sum();
        (rows, indexes, self.strings.disk_bytes())
    }

    fn key<'a>(&'a self, table: &'a TableVersion, row: u32) -> &'a str {
        key_of(table.row(row).expect("a live row"), &self.strings)
    }
}

impl Writers {
    fn new() -> Writers {
        Writers {
            root: TableWriter::new(ROOT_W),
            region: TableWriter::new(REGION_W),
            sensor: TableWriter::new(SENSOR_W),
            te: TableWriter::new(TE_W),
            segment: TableWriter::new(SEGMENT_W),
            switch: TableWriter::new(SWITCH_W),
            semaphore: TableWriter::new(SEMAPHORE_W),
            route: TableWriter::new(ROUTE_W),
            entry_set: TableWriter::new(SET_W),
            exit_set: TableWriter::new(SET_W),
            swp: TableWriter::new(SWP_W),
            mb: TableWriter::new(MATRIX_W),
            ct: TableWriter::new(MATRIX_W),
            req: TableWriter::new(MATRIX_W),
            ix_regions: KeyIndexWriter::new(),
            ix_sensors: KeyIndexWriter::new(),
            ix_elements: KeyIndexWriter::new(),
            ix_semaphores: KeyIndexWriter::new(),
            ix_routes: KeyIndexWriter::new(),
            ix_follows: KeyIndexWriter::new(),
            ix_mb: KeyIndexWriter::new(),
            ix_ct: KeyIndexWriter::new(),
            ix_req: KeyIndexWriter::new(),
            strings: Strings::new(),
        }
    }

    fn publish(&mut self) -> Snapshot {
        Snapshot {
            root: Arc::unwrap_or_clone(self.root.publish()),
            region: Arc::unwrap_or_clone(self.region.publish()),
            sensor: Arc::unwrap_or_clone(self.sensor.publish()),
            te: Arc::unwrap_or_clone(self.te.publish()),
            segment: Arc::unwrap_or_clone(self.segment.publish()),
            switch: Arc::unwrap_or_clone(self.switch.publish()),
            semaphore: Arc::unwrap_or_clone(self.semaphore.publish()),
            route: Arc::unwrap_or_clone(self.route.publish()),
            entry_set: Arc::unwrap_or_clone(self.entry_set.publish()),
            exit_set: Arc::unwrap_or_clone(self.exit_set.publish()),
            swp: Arc::unwrap_or_clone(self.swp.publish()),
            mb: Arc::unwrap_or_clone(self.mb.publish()),
            ct: Arc::unwrap_or_clone(self.ct.publish()),
            req: Arc::unwrap_or_clone(self.req.publish()),
            ix_regions: Arc::unwrap_or_clone(self.ix_regions.publish()),
            ix_sensors: Arc::unwrap_or_clone(self.ix_sensors.publish()),
            ix_elements: Arc::unwrap_or_clone(self.ix_elements.publish()),
            ix_semaphores: Arc::unwrap_or_clone(self.ix_semaphores.publish()),
            ix_routes: Arc::unwrap_or_clone(self.ix_routes.publish()),
            ix_follows: Arc::unwrap_or_clone(self.ix_follows.publish()),
            ix_mb: Arc::unwrap_or_clone(self.ix_mb.publish()),
            ix_ct: Arc::unwrap_or_clone(self.ix_ct.publish()),
            ix_req: Arc::unwrap_or_clone(self.ix_req.publish()),
            strings: Arc::new(self.strings.clone()),
        }
    }
}

/// Adds 1 to the u32 at `at` of `row` (an entry count).
fn bump(t: &mut TableWriter, row: u32, at: usize) {
    let r = t.row_mut(row).expect("live");
    let n = u32_at(r, at);
    put_u32(r, at, n + 1);
}

/// Makes `source`'s reference slot at `slot` (row, next, prev) point at `target` and puts it
/// first in the target's list, whose head is at `head` of the target's row.
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

/// A new entry row of a dictionary: parent and interned key written, the key indexed.
fn dict_entry(
    table: &mut TableWriter,
    index: &mut KeyIndexWriter,
    strings: &mut Strings,
    parent: u32,
    id: u64,
) -> Res<u32> {
    let row = table.insert();
    let key = id.to_string();
    let r = table.row_mut(row).expect("new row");
    put_u32(r, PARENT, parent);
    put_key(r, &key, strings);
    if index.insert(parent, key.as_bytes(), row)?.is_some() {
        return Err(format!("key {id} twice").into());
    }
    Ok(row)
}

/// A new matrix entry of `owner` pointing at `target`, linked into the target's list.
fn matrix_entry(
    w: &mut TableWriter,
    index: &mut KeyIndexWriter,
    owner: u32,
    target_table: &mut TableWriter,
    target: u32,
    head: usize,
) -> Res<u32> {
    let row = w.insert();
    put_u32(w.row_mut(row).expect("new row"), PARENT, owner);
    link(w, row, X_TARGET, target_table, target, head);
    if index.insert(owner, &target.to_be_bytes(), row)?.is_some() {
        return Err(format!("matrix entry to row {target} twice").into());
    }
    Ok(row)
}

/// Loads the model into tables and indexes; returns them published.
fn load(model: &Model) -> Res<(Writers, Snapshot)> {
    let mut w = Writers::new();
    let root = w.root.insert();
    let mut sensor_rows: HashMap<u64, u32> = HashMap::new();
    let mut te_rows: HashMap<u64, u32> = HashMap::new();
    let mut semaphore_rows: HashMap<u64, u32> = HashMap::new();
    let mut region_rows = Vec::with_capacity(model.regions.len());
    for region in &model.regions {
        let rr = dict_entry(&mut w.region, &mut w.ix_regions, &mut w.strings, root, region.id)?;
        bump(&mut w.root, root, 0);
        region_rows.push(rr);
        for &s in &region.sensors {
            let row = dict_entry(&mut w.sensor, &mut w.ix_sensors, &mut w.strings, rr, s)?;
            bump(&mut w.region, rr, R_SENSORS);
            sensor_rows.insert(s, row);
        }
        for e in &region.elements {
            let te = dict_entry(&mut w.te, &mut w.ix_elements, &mut w.strings, rr, e.id)?;
            bump(&mut w.region, rr, R_ELEMENTS);
            te_rows.insert(e.id, te);
            let (tag, state) = match &e.kind {
                ElementKind::Segment { length, semaphores } => {
                    let g = w.segment.insert();
                    let r = w.segment.row_mut(g).expect("new");
                    put_u32(r, PARENT, te);
                    put_i64(r, G_LENGTH, *length);
                    for s in semaphores {
                        let m = dict_entry(&mut w.semaphore, &mut w.ix_semaphores, &mut w.strings, g, s.id)?;
                        bump(&mut w.segment, g, G_SEMAPHORES);
                        put_u32(w.semaphore.row_mut(m).expect("new"), M_SIGNAL, signal_tag(s.signal));
                        semaphore_rows.insert(s.id, m);
                    }
                    (KIND_SEGMENT, g)
                }
                ElementKind::Switch { current_position } => {
                    let s = w.switch.insert();
                    let r = w.switch.row_mut(s).expect("new");
                    put_u32(r, PARENT, te);
                    put_u32(r, W_POS, position_tag(*current_position));
                    (KIND_SWITCH, s)
                }
            };
            let r = w.te.row_mut(te).expect("new");
            put_u32(r, T_KIND, tag);
            put_u32(r, T_KIND_ROW, state);
        }
    }
    let find = |rows: &HashMap<u64, u32>, id: u64| rows.get(&id).copied().ok_or_else(|| format!("no element {id}"));
    for region in &model.regions {
        for e in &region.elements {
            let te = find(&te_rows, e.id)?;
            for &s in &e.monitored_by {
                let sensor = find(&sensor_rows, s)?;
                matrix_entry(&mut w.mb, &mut w.ix_mb, te, &mut w.sensor, sensor, S_HEAD_MB)?;
                bump(&mut w.te, te, T_MB_COUNT);
            }
            for &x in &e.connects_to {
                let target = find(&te_rows, x)?;
                matrix_entry(&mut w.ct, &mut w.ix_ct, te, &mut w.te, target, T_HEAD_CT)?;
                bump(&mut w.te, te, T_CT_COUNT);
            }
        }
    }
    for route in &model.routes {
        let u = dict_entry(&mut w.route, &mut w.ix_routes, &mut w.strings, root, route.id)?;
        bump(&mut w.root, root, 4);
        put_u32(w.route.row_mut(u).expect("new"), U_ACTIVE, u32::from(route.active));
        for (sem, tag_at, table, head) in
            [(route.entry, U_ENTRY, &mut w.entry_set, M_HEAD_ENTRY), (route.exit, U_EXIT, &mut w.exit_set, M_HEAD_EXIT)]
        {
            if let Some(sem) = sem {
                let m = find(&semaphore_rows, sem)?;
                let set = table.insert();
                put_u32(table.row_mut(set).expect("new"), PARENT, u);
                link(table, set, E_SEM, &mut w.semaphore, m, head);
                let r = w.route.row_mut(u).expect("live");
                put_u32(r, tag_at, SET);
                put_u32(r, tag_at + 4, set);
            }
        }
        for &s in &route.requires {
            let sensor = find(&sensor_rows, s)?;
            matrix_entry(&mut w.req, &mut w.ix_req, u, &mut w.sensor, sensor, S_HEAD_REQ)?;
            bump(&mut w.route, u, U_REQ_COUNT);
        }
        for p in &route.follows {
            let swp = dict_entry(&mut w.swp, &mut w.ix_follows, &mut w.strings, u, p.id)?;
            bump(&mut w.route, u, U_FOLLOWS_COUNT);
            put_u32(w.swp.row_mut(swp).expect("new"), P_POS, position_tag(p.position));
            let target = find(&te_rows, p.target)?;
            link(&mut w.swp, swp, P_TARGET, &mut w.te, target, T_HEAD_TARGET);
        }
    }
    let snap = w.publish();
    Ok((w, snap))
}

// --- the queries by hand; each returns its matches as key strings, in no particular order ---

/// Rows ahead that a loop over references prefetches.
const AHEAD: usize = 8;

/// The keys of `rows` of `table`, prefetching a few rows ahead (the rows are references a scan
/// found: their cache misses overlap instead of queueing one after another).
fn keys_of<'a>(s: &'a Snapshot, table: &'a TableVersion, rows: &[u32]) -> Vec<&'a str> {
    for &r in rows.iter().take(AHEAD) {
        table.prefetch(r);
    }
    let mut out = Vec::with_capacity(rows.len());
    for (i, &r) in rows.iter().enumerate() {
        if let Some(&ahead) = rows.get(i + AHEAD) {
            table.prefetch(ahead);
        }
        out.push(s.key(table, r));
    }
    out
}

fn pos_length(s: &Snapshot) -> Vec<&str> {
    let mut parents = Vec::new();
    for (_, g) in s.segment.rows() {
        if i64_at(g, G_LENGTH) <= 0 {
            parents.push(u32_at(g, PARENT));
        }
    }
    keys_of(s, &s.te, &parents)
}

fn switch_monitored(s: &Snapshot) -> Vec<&str> {
    let mut out = Vec::new();
    for (_, sw) in s.switch.rows() {
        let te = u32_at(sw, PARENT);
        let row = s.te.row(te).expect("live");
        if u32_at(row, T_MB_COUNT) == 0 {
            out.push(key_of(row, &s.strings));
        }
    }
    out
}

fn route_sensor(s: &Snapshot) -> Vec<[&str; 4]> {
    let mut out = Vec::new();
    for (_, p) in s.swp.rows() {
        let te = u32_at(p, P_TARGET);
        let te_row = s.te.row(te).expect("live");
        if u32_at(te_row, T_KIND) != KIND_SWITCH {
            continue;
        }
        let route = u32_at(p, PARENT);
        for e in s.ix_mb.entries(te) {
            let sensor = u32::from_be_bytes(e.key.try_into().expect("a row"));
            // Whether the route requires the sensor: the sensor's 'Requires' referrers (about
            // one each) are fewer reads than a descent in the route's key index.
            let head = u32_at(s.sensor.row(sensor).expect("live"), S_HEAD_REQ);
            if !referrers(&s.req, head, X_TARGET).any(|(_, r)| u32_at(r, PARENT) == route) {
                out.push([
                    s.key(&s.route, route),
                    s.key(&s.sensor, sensor),
                    key_of(p, &s.strings),
                    key_of(te_row, &s.strings),
                ]);
            }
        }
    }
    out
}

fn switch_set(s: &Snapshot) -> Vec<[&str; 4]> {
    let mut out = Vec::new();
    for (route, u) in s.route.rows() {
        if u32_at(u, U_ACTIVE) != YES || u32_at(u, U_ENTRY) != SET {
            continue;
        }
        let set = s.entry_set.row(u32_at(u, U_ENTRY_ROW)).expect("live");
        let sem = u32_at(set, E_SEM);
        let sem_row = s.semaphore.row(sem).expect("live");
        if u32_at(sem_row, M_SIGNAL) != signal_tag(Signal::Go) {
            continue;
        }
        for e in s.ix_follows.entries(route) {
            let p = s.swp.row(e.row).expect("live");
            let te_row = s.te.row(u32_at(p, P_TARGET)).expect("live");
            if u32_at(te_row, T_KIND) != KIND_SWITCH {
                continue;
            }
            let sw = s.switch.row(u32_at(te_row, T_KIND_ROW)).expect("live");
            if u32_at(sw, W_POS) != u32_at(p, P_POS) {
                out.push([
                    key_of(sem_row, &s.strings),
                    key_of(u, &s.strings),
                    key_of(p, &s.strings),
                    key_of(te_row, &s.strings),
                ]);
            }
        }
    }
    out
}

fn connected_segments(s: &Snapshot) -> Vec<[&str; 7]> {
    let is_segment = |te: u32| u32_at(s.te.row(te).expect("live"), T_KIND) == KIND_SEGMENT;
    let monitored = |te: u32, sensor: &[u8]| s.ix_mb.get(te, sensor).is_some();
    let mut out = Vec::new();
    for (t1, row1) in s.te.rows() {
        if u32_at(row1, T_KIND) != KIND_SEGMENT {
            continue;
        }
        for m in s.ix_mb.entries(t1) {
            let sensor = m.key;
            let next = |te: u32| {
                s.ix_ct
                    .entries(te)
                    .map(|e| u32::from_be_bytes(e.key.try_into().expect("a row")))
                    .filter(move |&t| is_segment(t) && monitored(t, sensor))
            };
            for t2 in next(t1) {
                for t3 in next(t2) {
                    for t4 in next(t3) {
                        for t5 in next(t4) {
                            for t6 in next(t5) {
                                let sensor = u32::from_be_bytes(sensor.try_into().expect("a row"));
                                let k = |t| s.key(&s.te, t);
                                out.push([s.key(&s.sensor, sensor), k(t1), k(t2), k(t3), k(t4), k(t5), k(t6)]);
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The rows of `table` in the list that starts at `first`, linked through the slot at `slot`.
fn referrers(table: &TableVersion, first: u32, slot: usize) -> impl Iterator<Item = (u32, &[u8])> {
    let mut next = first;
    std::iter::from_fn(move || {
        if next == 0 {
            return None;
        }
        let row = next;
        let bytes = table.row(row).expect("a live referrer");
        next = u32_at(bytes, slot + 4);
        Some((row, bytes))
    })
}

fn semaphore_neighbor(s: &Snapshot) -> Vec<[&str; 7]> {
    let mut out = Vec::new();
    for (route1, u1) in s.route.rows() {
        if u32_at(u1, U_EXIT) != SET {
            continue;
        }
        let semaphore = u32_at(s.exit_set.row(u32_at(u1, U_EXIT_ROW)).expect("live"), E_SEM);
        for r1 in s.ix_req.entries(route1) {
            let sensor1 = u32::from_be_bytes(r1.key.try_into().expect("a row"));
            let head = u32_at(s.sensor.row(sensor1).expect("live"), S_HEAD_MB);
            for (_, mb1) in referrers(&s.mb, head, X_TARGET) {
                let te1 = u32_at(mb1, PARENT);
                for c in s.ix_ct.entries(te1) {
                    let te2 = u32::from_be_bytes(c.key.try_into().expect("a row"));
                    for m2 in s.ix_mb.entries(te2) {
                        let sensor2 = u32::from_be_bytes(m2.key.try_into().expect("a row"));
                        let head = u32_at(s.sensor.row(sensor2).expect("live"), S_HEAD_REQ);
                        for (_, req2) in referrers(&s.req, head, X_TARGET) {
                            let route2 = u32_at(req2, PARENT);
                            if route2 == route1 {
                                continue;
                            }
                            let u2 = s.route.row(route2).expect("live");
                            if u32_at(u2, U_ENTRY) == SET
                                && u32_at(s.entry_set.row(u32_at(u2, U_ENTRY_ROW)).expect("live"), E_SEM) == semaphore
                            {
                                continue;
                            }
                            out.push([
                                s.key(&s.semaphore, semaphore),
                                key_of(u1, &s.strings),
                                key_of(u2, &s.strings),
                                s.key(&s.sensor, sensor1),
                                s.key(&s.sensor, sensor2),
                                s.key(&s.te, te1),
                                s.key(&s.te, te2),
                            ]);
                        }
                    }
                }
            }
        }
    }
    out
}

/// Sorted matches as numbers, to compare with SQLite's.
fn as_ids<const N: usize>(rows: &[[&str; N]]) -> Vec<Vec<u64>> {
    let mut out: Vec<Vec<u64>> = rows.iter().map(|r| r.iter().map(|k| k.parse().expect("an id")).collect()).collect();
    out.sort();
    out
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

/// SQLite as `scan_floor` and `bench.rs` set it up: WAL, synchronous off, a page cache that
/// holds everything.
fn sqlite(path: &std::path::Path) -> Res<Connection> {
    let conn = Connection::open(path)?;
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
    conn.execute_batch("PRAGMA synchronous = OFF; PRAGMA cache_size = -1048576;")?;
    Ok(conn)
}

/// Bytes a file occupies on disk (0 if absent).
fn allocated(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

/// A query's answer from SQLite, timed: reading every column of every row into a vector.
fn sql_rows(st: &mut rusqlite::Statement<'_>) -> Res<Vec<Vec<u64>>> {
    let n = st.column_count();
    let rows = st.query_map([], |row| (0..n).map(|i| row.get::<_, i64>(i).map(|v| v as u64)).collect())?;
    Ok(rows.collect::<Result<Vec<Vec<u64>>, _>>()?)
}

fn main() -> Res<()> {
    let size: u32 = std::env::args().nth(1).map_or(Ok(64), |s| s.parse())?;
    let runs: usize = std::env::args().nth(2).map_or(Ok(30), |s| s.parse())?;
    let dir = tempfile::tempdir()?;
    let model = generate(Scenario::Repair, size);
    let relations = model.tables();

    // Loads, alternating: the tables from the model, SQLite from the model's relations.
    let (mut load_ours, mut load_sql) = (Vec::new(), Vec::new());
    let mut loaded = None;
    for i in 0..5 {
        let t = Instant::now();
        let l = load(&model)?;
        load_ours.push(t.elapsed());
        loaded = Some(l);
        let path = dir.path().join(format!("load-{i}.db"));
        let t = Instant::now();
        let conn = sqlite(&path)?;
        espalier_trainbenchmark::queries::create_tables(&conn, &relations)?;
        load_sql.push(t.elapsed());
        drop(conn);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    let (_writers, snap) = loaded.ok_or("no load")?;
    let sqlite_path = dir.path().join("sqlite.db");
    let conn = sqlite(&sqlite_path)?;
    espalier_trainbenchmark::queries::create_tables(&conn, &relations)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    let sqlite_bytes = allocated(&sqlite_path) + allocated(&dir.path().join("sqlite.db-wal"));

    // The queries: each by hand (answer checked against SQLite's), then timed interleaved.
    type ByHand = Box<dyn Fn(&Snapshot) -> (usize, Vec<Vec<u64>>)>;
    let queries: Vec<(Query, ByHand)> = vec![
        (
            Query::PosLength,
            Box::new(|s| {
                let r = pos_length(s);
                (r.len(), as_ids(&r.iter().map(|k| [*k]).collect::<Vec<_>>()))
            }),
        ),
        (
            Query::SwitchMonitored,
            Box::new(|s| {
                let r = switch_monitored(s);
                (r.len(), as_ids(&r.iter().map(|k| [*k]).collect::<Vec<_>>()))
            }),
        ),
        (Query::RouteSensor, Box::new(|s| (0, as_ids(&route_sensor(s))))),
        (Query::SwitchSet, Box::new(|s| (0, as_ids(&switch_set(s))))),
        (Query::ConnectedSegments, Box::new(|s| (0, as_ids(&connected_segments(s))))),
        (Query::SemaphoreNeighbor, Box::new(|s| (0, as_ids(&semaphore_neighbor(s))))),
    ];
    let mut statements = Vec::new();
    for (q, by_hand) in &queries {
        let mut st = conn.prepare(q.sql())?;
        let mut want = sql_rows(&mut st)?;
        want.sort();
        let (_, got) = by_hand(&snap);
        assert_eq!(got, want, "{}: by hand and SQLite disagree", q.name());
        statements.push((st, want.len()));
    }
    // The timed by-hand runs produce the answer as key strings (what a reply carries); the
    // conversion to numbers above is for the check only.
    let timed: Vec<Box<dyn Fn(&Snapshot) -> usize>> = vec![
        Box::new(|s| pos_length(s).len()),
        Box::new(|s| switch_monitored(s).len()),
        Box::new(|s| route_sensor(s).len()),
        Box::new(|s| switch_set(s).len()),
        Box::new(|s| connected_segments(s).len()),
        Box::new(|s| semaphore_neighbor(s).len()),
    ];
    if let Ok(q) = std::env::var("TABLE_FLOOR_PROFILE") {
        // For `perf`: one by-hand query in a loop, nothing else.
        let i: usize = q.parse()?;
        let t = Instant::now();
        for _ in 0..runs {
            std::hint::black_box(timed[i](&snap));
        }
        println!("query {i}: {:.1} µs per run", t.elapsed().as_secs_f64() * 1e6 / runs as f64);
        return Ok(());
    }
    let mut ours = vec![Vec::new(); queries.len()];
    let mut theirs = vec![Vec::new(); queries.len()];
    for run in 0..WARMUP + runs {
        for (i, f) in timed.iter().enumerate() {
            let t = Instant::now();
            let n = std::hint::black_box(f(&snap));
            let took = t.elapsed();
            let (st, want) = &mut statements[i];
            assert_eq!(n, *want);
            let t2 = Instant::now();
            let rows = std::hint::black_box(sql_rows(st)?);
            let took2 = t2.elapsed();
            assert_eq!(rows.len(), *want);
            if run >= WARMUP {
                ours[i].push(took);
                theirs[i].push(took2);
            }
        }
    }

    let counts: Vec<String> = snap.tables().iter().map(|(n, t)| format!("{n} {}", t.len())).collect();
    println!("size {size}: {}", counts.join(", "));
    println!();
    println!("| size {size}, medians of {runs} interleaved runs | tables, µs | SQLite, µs | SQLite ÷ tables |");
    println!("|---|--:|--:|--:|");
    for (i, (q, _)) in queries.iter().enumerate() {
        let (a, b) = (median(ours[i].clone()), median(theirs[i].clone()));
        println!("| {} ({} matches) | {a:.1} | {b:.1} | {:.2}× |", q.name(), statements[i].1, b / a);
    }
    let (a, b) = (median(load_ours) / 1000.0, median(load_sql) / 1000.0);
    println!("| load (median of 5), ms | {a:.1} | {b:.1} | {:.2}× |", b / a);
    let (rows, indexes, strings) = snap.disk_bytes();
    let total = rows + indexes + strings;
    println!(
        "| on disk, KB (rows {} + key indexes {} + strings {}) | {} | {} | {:.2}× |",
        rows / 1000,
        indexes / 1000,
        strings / 1000,
        total / 1000,
        sqlite_bytes / 1000,
        sqlite_bytes as f64 / total as f64
    );
    Ok(())
}
