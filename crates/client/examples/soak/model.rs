//! What the clients write and what they know about it: each client owns one entry of
//! `'Clients'` (a counter and a dictionary of items) and keeps, on its side, every write the
//! server acknowledged. The server's state is then compared with that knowledge:
//! acknowledged but missing is **lost**, present but never sent (or a value that disagrees) is
//! **wrong**. A write whose reply never came (the server was killed) is **pending**: either
//! outcome is right, and the next verification takes whichever the server has.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use espalier_client::protocol::{ErrorCode, QueryResult, Reply};
use espalier_client::{Client, ClientError};

use crate::SoakError;

/// The soak's schema. `'Total'` is bumped in the same update as a client's `'Count'`, so it
/// must always equal the sum of the counts; the derived count and sums must equal what the
/// entries hold (a torn commit shows in any of them). `'Batches'` receive the large
/// transactions of the crash rounds.
pub const SCHEMA: &str = "root (
    'Clients' -> dictionary (
        'Count' -> number
        'Items' -> dictionary ( 'n' -> number )
        'Item Count' -> count ( . 'Items' )
        'Item Sum' -> sum ( . 'Items' ) 'n'
    )
    'Total' -> number
    'Batches' -> dictionary (
        'Size' -> number
        'Rows' -> dictionary ( 'n' -> number )
        'Row Count' -> count ( . 'Rows' )
        'Row Sum' -> sum ( . 'Rows' ) 'n'
    )
    'Batch Rows' -> number
)
";

/// Notes kept for the report (the first failures and wrong replies); the rest are counted.
const MAX_NOTES: usize = 20;
/// Instructions a batch's rows are split over inside its transaction.
const BATCH_PARTS: usize = 10;

/// A small seeded generator (splitmix64): the same `--seed` gives the same choices.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi.saturating_sub(lo) + 1)
    }
}

/// Counters of one phase, shared by its clients.
#[derive(Default)]
pub struct Stats {
    /// Requests answered as expected.
    pub ops: AtomicU64,
    /// Writes acknowledged.
    pub writes: AtomicU64,
    /// Error replies and broken sessions that nothing explains.
    pub failed: AtomicU64,
    /// Replies (or a state after restart) that disagree with what was acknowledged.
    pub wrong: AtomicU64,
    /// Acknowledged writes missing after a restart.
    pub lost: AtomicU64,
    /// Requests cut off by the signal to the server (expected).
    pub cut: AtomicU64,
    /// Writes in flight when the server was signalled: present after restart / absent.
    pub pending_present: AtomicU64,
    pub pending_absent: AtomicU64,
    notes: Mutex<Vec<String>>,
}

impl Stats {
    pub fn fail(&self, note: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.note(format!("failed: {note}"));
    }

    pub fn wrong(&self, note: String) {
        self.wrong.fetch_add(1, Ordering::Relaxed);
        self.note(format!("wrong: {note}"));
    }

    pub fn lost(&self, n: u64, note: String) {
        self.lost.fetch_add(n, Ordering::Relaxed);
        self.note(format!("lost: {note}"));
    }

    fn note(&self, note: String) {
        let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        if notes.len() < MAX_NOTES {
            notes.push(note);
        }
    }

    pub fn notes(&self) -> Vec<String> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// When the clients stop: at a deadline (the soak), or when the server goes away (a crash
/// round). Errors seen after `signalled` are the signal's doing, not failures.
#[derive(Default)]
pub struct Stop {
    pub deadline: Option<Instant>,
    signalled: AtomicBool,
}

impl Stop {
    pub fn at(deadline: Instant) -> Stop {
        Stop { deadline: Some(deadline), signalled: AtomicBool::new(false) }
    }

    pub fn signal(&self) {
        self.signalled.store(true, Ordering::SeqCst);
    }

    pub fn signalled(&self) -> bool {
        self.signalled.load(Ordering::SeqCst)
    }

    /// The deadline passed. A crash round's clients have none: they run into the signal, so
    /// that it finds as many requests in flight as the soak has clients.
    fn over(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// An error a client may see once the server has been signalled: the session closes, or a
/// SIGTERMed server answers `shutting_down`.
pub fn expected_after_signal(e: &ClientError) -> bool {
    matches!(e, ClientError::Closed { .. } | ClientError::Connect(_)) || e.code() == Some(&ErrorCode::ShuttingDown)
}

/// An error reply: the request was refused whole (requests are atomic), so it had no effect.
pub fn refused(e: &ClientError) -> bool {
    matches!(e, ClientError::Server { .. })
}

/// One client's knowledge of its entry.
#[derive(Debug, Clone)]
pub struct Model {
    pub key: String,
    /// `'Count'` as far as acknowledged.
    pub count: i64,
    /// The items acknowledged (key = value `'n'`).
    pub items: BTreeSet<u64>,
    /// An increment sent whose reply never came.
    pub pending_count: bool,
    /// An item sent whose reply never came.
    pub pending_item: Option<u64>,
    /// The next item key: never reused, so a pending item's key is never sent again.
    next_item: u64,
    rng: Rng,
}

impl Model {
    pub fn new(id: usize, seed: u64) -> Model {
        Model {
            key: format!("c{id}"),
            count: 0,
            items: BTreeSet::new(),
            pending_count: false,
            pending_item: None,
            next_item: 0,
            rng: Rng::new(seed ^ (id as u64).wrapping_mul(0x2545_f491_4f6c_dd1d)),
        }
    }

    fn item_sum(&self) -> i64 {
        self.items.iter().map(|&k| k as i64).sum()
    }
}

/// The instruction that creates every client's entry.
pub fn create_clients(models: &[Model]) -> String {
    let entries: Vec<String> =
        models.iter().map(|m| format!("update ( 'Clients' -> dictionary \"{}\" ( ) )", m.key)).collect();
    format!("transaction ( {} )", entries.join(", "))
}

fn increment(key: &str) -> String {
    format!("update ( 'Clients' -> dictionary \"{key}\" update ( 'Count' -> number + 1 ) 'Total' -> number + 1 )")
}

fn insert(key: &str, item: u64) -> String {
    format!("update . 'Clients' : \"{key}\" ( 'Items' -> dictionary \"{item}\" ( 'n' -> number {item} ) )")
}

fn read_own(key: &str) -> String {
    format!(
        "collection . 'Clients' : \"{key}\" select 'Count' -> number : 'Count' \
         'Items' -> number : 'Item Count' 'Sum' -> number : 'Item Sum'"
    )
}

fn read_item(key: &str, item: u64) -> String {
    format!("get . 'Clients' : \"{key}\" . 'Items' : \"{item}\"")
}

/// The numbers of a query's rows, by the rows' keys joined with `/`.
fn numbers(q: &QueryResult) -> Result<BTreeMap<String, Vec<i64>>, String> {
    let mut rows = BTreeMap::new();
    for row in &q.rows {
        let values = row
            .values
            .iter()
            .map(|v| v.as_i64().ok_or_else(|| format!("row {:?}: {v} is not a number", row.key)))
            .collect::<Result<Vec<_>, _>>()?;
        if rows.insert(row.key.join("/"), values).is_some() {
            return Err(format!("row {:?} listed twice", row.key));
        }
    }
    if q.total as usize != rows.len() {
        return Err(format!("total {} but {} rows", q.total, rows.len()));
    }
    Ok(rows)
}

/// A write's reply must say `done` (or be a transaction's list of replies).
pub fn is_done(reply: &Reply) -> bool {
    matches!(reply, Reply::Done { .. } | Reply::Transaction(_))
}

/// One client's closed loop until `stop`: increments, inserts and reads of what it wrote.
/// Returns its knowledge, with whatever was in flight when the session ended marked pending.
pub async fn work(client: Client, mut m: Model, stop: Arc<Stop>, stats: Arc<Stats>) -> Model {
    while !stop.over() {
        let pick = m.rng.range(0, 99);
        let (text, write) = match pick {
            0..=39 => (increment(&m.key), Op::Increment),
            40..=69 => {
                let item = m.next_item;
                m.next_item += 1;
                (insert(&m.key, item), Op::Insert(item))
            }
            70..=89 => (read_own(&m.key), Op::ReadOwn),
            _ => match m.items.iter().nth(m.rng.range(0, m.items.len().saturating_sub(1) as u64) as usize) {
                Some(&item) => (read_item(&m.key, item), Op::ReadItem(item)),
                None => (read_own(&m.key), Op::ReadOwn),
            },
        };
        let result = client.execute(&text, None).await;
        let reply = match result {
            Ok(reply) => reply,
            Err(e) => {
                // A refused request changed nothing; anything else may or may not have.
                if !refused(&e) {
                    match write {
                        Op::Increment => m.pending_count = true,
                        Op::Insert(item) => m.pending_item = Some(item),
                        Op::ReadOwn | Op::ReadItem(_) => {}
                    }
                }
                let signalled = stop.signalled();
                if signalled && expected_after_signal(&e) {
                    stats.cut.fetch_add(1, Ordering::Relaxed);
                } else {
                    stats.fail(format!("{}: {text}: {e}", m.key));
                }
                // After the signal every session ends; before it, an error reply leaves the
                // session usable, anything else ends it.
                if signalled || !refused(&e) || client.closed().is_some() {
                    break;
                }
                continue;
            }
        };
        match write {
            Op::Increment | Op::Insert(_) if !is_done(&reply) => {
                // Not a commit's reply: its effect is unknown, as if it were cut off.
                stats.wrong(format!("{}: {text}: reply {reply:?}", m.key));
                match write {
                    Op::Increment => m.pending_count = true,
                    Op::Insert(item) => m.pending_item = Some(item),
                    _ => {}
                }
                break;
            }
            Op::Increment => {
                m.count += 1;
                stats.writes.fetch_add(1, Ordering::Relaxed);
            }
            Op::Insert(item) => {
                m.items.insert(item);
                stats.writes.fetch_add(1, Ordering::Relaxed);
            }
            Op::ReadOwn => {
                let want = [m.count, m.items.len() as i64, m.item_sum()];
                match &reply {
                    Reply::Query(q) => match numbers(q) {
                        Ok(rows) if rows.len() == 1 && rows.values().next().is_some_and(|v| v[..] == want) => {}
                        Ok(rows) => stats.wrong(format!("{}: read {rows:?}, acknowledged {want:?}", m.key)),
                        Err(e) => stats.wrong(format!("{}: read: {e}", m.key)),
                    },
                    other => stats.wrong(format!("{}: read: not a query result: {other:?}", m.key)),
                }
            }
            Op::ReadItem(item) => {
                let ok = matches!(&reply, Reply::Node(n) if n.get("n").and_then(|v| v.as_u64()) == Some(item));
                if !ok {
                    stats.wrong(format!("{}: item {item} reads {reply:?}", m.key));
                }
            }
        }
        stats.ops.fetch_add(1, Ordering::Relaxed);
    }
    m
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Increment,
    Insert(u64),
    ReadOwn,
    ReadItem(u64),
}

/// Reads every client's entry from the server and compares it with the clients' knowledge;
/// counts lost and wrong in `stats`, then takes the server's state as the new knowledge (so a
/// pending write is settled one way or the other). Also checks `'Total'`.
pub async fn verify_clients(client: &Client, models: &mut [Model], stats: &Stats) -> Result<(), SoakError> {
    let q = query(
        client,
        "collection select . 'Clients' 'Count' -> number : 'Count' 'Items' -> number : 'Item Count' \
         'Sum' -> number : 'Item Sum'",
    )
    .await?;
    let rows = numbers(&q).map_err(SoakError::Verify)?;
    let mut counts = 0i64;
    for m in models.iter_mut() {
        let Some(row) = rows.get(&m.key) else {
            stats.lost(1, format!("{}: the client's entry is missing", m.key));
            continue;
        };
        let [count, item_count, item_sum] = row[..] else {
            return Err(SoakError::Verify(format!("{}: row {row:?} is not three numbers", m.key)));
        };
        counts += count;
        if count < m.count {
            stats.lost(
                (m.count - count) as u64,
                format!("{}: 'Count' is {count}, {} increments acknowledged", m.key, m.count),
            );
        } else if count > m.count + i64::from(m.pending_count) {
            stats.wrong(format!(
                "{}: 'Count' is {count}, {} acknowledged and {} in flight",
                m.key,
                m.count,
                u8::from(m.pending_count)
            ));
        }
        if m.pending_count {
            let present = count > m.count;
            (if present { &stats.pending_present } else { &stats.pending_absent }).fetch_add(1, Ordering::Relaxed);
        }
        let items =
            query(client, &format!("collection . 'Clients' : \"{}\" select . 'Items' 'n' -> number : 'n'", m.key))
                .await?;
        let items = numbers(&items).map_err(SoakError::Verify)?;
        let mut present = BTreeSet::new();
        for (key, values) in &items {
            match key.parse::<u64>() {
                Ok(k) if values[..] == [k as i64] => {
                    present.insert(k);
                }
                _ => stats.wrong(format!("{}: item {key:?} holds {values:?}", m.key)),
            }
        }
        let missing = m.items.difference(&present).count();
        if missing > 0 {
            let first: Vec<_> = m.items.difference(&present).take(5).collect();
            stats.lost(missing as u64, format!("{}: {missing} acknowledged items missing, first {first:?}", m.key));
        }
        for stray in present.difference(&m.items) {
            if Some(*stray) != m.pending_item {
                stats.wrong(format!("{}: item {stray} present but never acknowledged nor in flight", m.key));
            }
        }
        if let Some(p) = m.pending_item {
            (if present.contains(&p) { &stats.pending_present } else { &stats.pending_absent })
                .fetch_add(1, Ordering::Relaxed);
        }
        let sum: i64 = present.iter().map(|&k| k as i64).sum();
        if item_count != present.len() as i64 || item_sum != sum {
            stats.wrong(format!(
                "{}: derived 'Item Count' {item_count} and 'Item Sum' {item_sum}, entries {} and {sum}",
                m.key,
                present.len()
            ));
        }
        m.count = count;
        m.items = present;
        m.pending_count = false;
        m.pending_item = None;
        m.next_item = m.next_item.max(m.items.last().map_or(0, |l| l + 1));
    }
    let extra = rows.keys().filter(|k| !models.iter().any(|m| &m.key == *k)).count();
    if extra > 0 {
        stats.wrong(format!("{extra} client entries no client created"));
    }
    let root =
        numbers(&query(client, "collection select 'Total' -> number : 'Total'").await?).map_err(SoakError::Verify)?;
    match root.values().next().map(|v| &v[..]) {
        Some(&[total]) if total == counts => {}
        other => stats.wrong(format!("'Total' is {other:?}, the counts add up to {counts}")),
    }
    Ok(())
}

/// Runs a query the verification needs; any failure ends the run (nothing can be verified).
async fn query(client: &Client, text: &str) -> Result<QueryResult, SoakError> {
    client.query(text, None).await.map_err(|e| SoakError::Verify(format!("{text}: {e}")))
}

/// The large transactions of the crash rounds: one batch is `rows` entries written by one
/// transaction of several updates, with `'Batch Rows'` bumped in it.
#[derive(Debug, Default)]
pub struct Batches {
    /// Batches acknowledged and not yet seen after a restart.
    pub acked: BTreeSet<String>,
    /// The batch in flight when the server was signalled.
    pub pending: Option<String>,
    /// Batches present and read whole once.
    verified: BTreeSet<String>,
}

/// A batch transaction: creates `name` with `rows` entries, split over several updates.
pub fn batch(name: &str, rows: usize) -> String {
    let mut members = vec![format!(
        "update ( 'Batches' -> dictionary \"{name}\" ( 'Size' -> number {rows} ) 'Batch Rows' -> number + {rows} )"
    )];
    let per = rows.div_ceil(BATCH_PARTS).max(1);
    let mut start = 0;
    while start < rows {
        let end = (start + per).min(rows);
        let items: Vec<String> =
            (start..end).map(|i| format!("'Rows' -> dictionary \"{i}\" ( 'n' -> number {i} )")).collect();
        members.push(format!("update . 'Batches' : \"{name}\" ( {} )", items.join(" ")));
        start = end;
    }
    format!("transaction ( {} )", members.join(", "))
}

/// Checks the batches after a restart: every acknowledged batch present, each present batch
/// whole (its size, derived count and sum, and once its every row), `'Batch Rows'` their sum.
pub async fn verify_batches(client: &Client, b: &mut Batches, rows: usize, stats: &Stats) -> Result<(), SoakError> {
    let q = query(
        client,
        "collection select . 'Batches' 'Size' -> number : 'Size' 'Count' -> number : 'Row Count' \
         'Sum' -> number : 'Row Sum'",
    )
    .await?;
    let present = numbers(&q).map_err(SoakError::Verify)?;
    let mut total = 0i64;
    for (name, values) in &present {
        let [size, count, sum] = values[..] else {
            return Err(SoakError::Verify(format!("batch {name}: row {values:?} is not three numbers")));
        };
        total += size;
        let n = rows as i64;
        if size != n || count != n || sum != n * (n - 1) / 2 {
            stats.wrong(format!("batch {name} torn: size {size}, {count} rows summing to {sum}, written {n}"));
        }
        if !b.acked.contains(name) && b.pending.as_deref() != Some(name) && !b.verified.contains(name) {
            stats.wrong(format!("batch {name} present but never acknowledged nor in flight"));
        }
        if !b.verified.contains(name) {
            let text = format!("collection . 'Batches' : \"{name}\" select . 'Rows' 'n' -> number : 'n'");
            let all = numbers(&query(client, &text).await?).map_err(SoakError::Verify)?;
            let whole = all.len() == rows
                && all.iter().all(|(k, v)| k.parse::<i64>().is_ok_and(|k| (0..n).contains(&k) && v[..] == [k]));
            if !whole {
                stats.wrong(format!("batch {name}: its {} rows are not 0..{rows} each holding its key", all.len()));
            }
            b.verified.insert(name.clone());
        }
    }
    if let Some(p) = b.pending.take() {
        (if present.contains_key(&p) { &stats.pending_present } else { &stats.pending_absent })
            .fetch_add(1, Ordering::Relaxed);
    }
    let missing: Vec<&String> = b.acked.iter().filter(|a| !present.contains_key(*a)).collect();
    if !missing.is_empty() {
        stats.lost(missing.len() as u64, format!("acknowledged batches missing: {missing:?}"));
    }
    b.acked.clear();
    let root = numbers(&query(client, "collection select 'Rows' -> number : 'Batch Rows'").await?)
        .map_err(SoakError::Verify)?;
    match root.values().next().map(|v| &v[..]) {
        Some(&[t]) if t == total => {}
        other => stats.wrong(format!("'Batch Rows' is {other:?}, the batches hold {total}")),
    }
    Ok(())
}
