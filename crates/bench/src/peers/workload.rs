//! The operations of B6 (appendix B.6) and B7 (B.7), each as a triple: the Espalier
//! instructions with named `$params`, the equivalent SQL, and a parameter generator that
//! draws concrete keys from the data with a seeded generator.
//!
//! Translation rules, so that both sides do the same work:
//!
//! - A collection query's reply carries the rows of the page *and the total number of
//!   matching rows*; the SQL computes the total in the same statement (a scalar subquery), so
//!   it reads one snapshot. Rows come in Espalier's order: entry keys in byte order (SQLite's
//!   `BINARY`, PostgreSQL's C collation) and matrix entries by target id (= record id).
//! - A reference's value is its target's key, so the SQL joins the target table.
//! - A state is returned by name; the SQL returns its index and the row mapper names it, as a
//!   client program would.
//! - A mutation is one statement (one implicit transaction). `set to` a state fails if that
//!   state is already the current one; the SQL's `WHERE` says the same, and zero changed rows
//!   fails the operation.
//!
//! The B.6.3 instruction sets `'Product' -> reference "5"` inside 'Selected', whose property is
//! 'Current Order' in the model; it is written with 'Current Order' here. Since `set to` fails on
//! a machine that is already 'Selected', task_start picks a machine that is 'Not Selected'
//! and, untimed after the cross-check, switches it back ([`Op::reset`]) so the pool stays.

use std::collections::HashMap;

use espalier_instruction::{Engine, ParamValue, QueryResult, Reply, Row};
use rand::rngs::StdRng;
use rand::Rng;
use serde_json::Value;

use super::relational::{SqlConn, SqlValue};
use super::{PeerError, Suite};

/// The parameters of one run of an operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params(pub Vec<(&'static str, ParamValue)>);

impl Params {
    /// The parameter `name`; an error if it is missing.
    pub fn get(&self, name: &str) -> Result<&ParamValue, PeerError> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .ok_or_else(|| PeerError::Invalid(format!("parameter ${name} is missing")))
    }

    /// The parameter `name` as text (a number in decimal).
    pub fn text(&self, name: &str) -> Result<String, PeerError> {
        match self.get(name)? {
            ParamValue::Text(t) => Ok(t.clone()),
            ParamValue::Int(i) => Ok(i.to_string()),
        }
    }

    /// The parameter `name` as a number; an error if it is text.
    pub fn int(&self, name: &str) -> Result<i64, PeerError> {
        match self.get(name)? {
            ParamValue::Int(i) => Ok(*i),
            ParamValue::Text(t) => Err(PeerError::Invalid(format!("parameter ${name} is text {t:?}, not a number"))),
        }
    }

    /// The parameter map `Engine::run` takes.
    pub fn map(&self) -> HashMap<String, ParamValue> {
        self.0.iter().map(|(n, v)| (n.to_string(), v.clone())).collect()
    }

    /// `$machine="12" $order="7"` for messages.
    pub fn describe(&self) -> String {
        if self.0.is_empty() {
            return "(no parameters)".into();
        }
        self.0
            .iter()
            .map(|(n, v)| match v {
                ParamValue::Int(i) => format!("${n}={i}"),
                ParamValue::Text(t) => format!("${n}={t:?}"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What an operation returned, in a form every system can produce.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The replies of the operation's queries, in order.
    Queries(Vec<QueryResult>),
    /// A committed mutation.
    Done,
}

/// What the parameter generators know about the data (read from Espalier after the build).
#[derive(Debug, Clone, Default)]
pub struct DataIndex {
    /// The 'Name' of every client.
    pub client_names: Vec<String>,
    /// The key of every machine.
    pub machine_keys: Vec<String>,
    /// Machines whose 'Current Task' is 'Not Selected' (task_start picks among them).
    pub idle_machines: Vec<String>,
    /// The key of every order.
    pub order_keys: Vec<String>,
}

fn rows_of(engine: &Engine, text: &str) -> Result<Vec<Row>, PeerError> {
    match engine.execute_text(text, &HashMap::new()).map_err(|e| PeerError::espalier(text.to_string(), e))? {
        Reply::Query(q) => Ok(q.rows),
        other => Err(PeerError::Invalid(format!("{text}: expected rows, got {other:?}"))),
    }
}

impl DataIndex {
    /// Reads keys and names from the database (any data in the B6 model).
    pub fn read(engine: &Engine) -> Result<DataIndex, PeerError> {
        let one = |r: &Row| r.key.first().cloned().unwrap_or_default();
        let clients = rows_of(engine, "collection select . 'Clients' 'Name' -> text : 'Name'")?;
        let machines = rows_of(engine, "collection select . 'Machines' 'Task' -> stategroup : 'Current Task'")?;
        let orders = rows_of(engine, "collection select . 'Orders' 'Quantity' -> number : 'Quantity'")?;
        Ok(DataIndex {
            client_names: clients.iter().filter_map(|r| r.values.first()?.as_str().map(str::to_string)).collect(),
            machine_keys: machines.iter().map(one).collect(),
            idle_machines: machines
                .iter()
                .filter(|r| r.values.first().and_then(Value::as_str) == Some("Not Selected"))
                .map(one)
                .collect(),
            order_keys: orders.iter().map(one).collect(),
        })
    }
}

/// Runs an operation on a SQL peer with the given parameters.
pub type SqlFn = fn(&mut dyn SqlConn, &Params) -> Result<Outcome, PeerError>;
/// Draws the parameters of one run of an operation from the data.
pub type ParamFn = fn(&mut StdRng, &DataIndex) -> Result<Params, PeerError>;

/// Reading back the node a mutation touched: Espalier's `get` and the same entry from SQL.
#[derive(Debug, Clone, Copy)]
pub struct Verify {
    /// A `get` instruction with the key as a parameter.
    pub espalier: &'static str,
    /// The top-level dictionary of the entry (its names from the root).
    pub collection: &'static [&'static str],
    /// The parameter holding the entry's key.
    pub key_param: &'static str,
}

/// An untimed mutation after the cross-check that puts the data back into a state the next
/// run can use; `sql` takes the key as `$1` and must change exactly one row.
#[derive(Debug, Clone, Copy)]
pub struct Reset {
    /// The Espalier `update` instruction, with the key as a parameter.
    pub espalier: &'static str,
    /// The SQL statement, with the key as `$1`.
    pub sql: &'static str,
    /// The parameter holding the entry's key.
    pub key_param: &'static str,
}

/// One benchmark operation.
#[derive(Clone, Copy)]
pub struct Op {
    /// The operation's name in reports.
    pub name: &'static str,
    /// Espalier instructions, run one after another (each its own request).
    pub instructions: &'static [&'static str],
    /// The SQL statements (for reports and checks); [`Op::sql`] runs them.
    pub sql_text: &'static [&'static str],
    /// Runs the operation on a SQL peer.
    pub sql: SqlFn,
    /// Draws the parameters of one run.
    pub params: ParamFn,
    /// How to read back the node a mutation touched, for the cross-check; `None` for queries.
    pub verify: Option<Verify>,
    /// The untimed mutation that undoes a run, if the next run needs it.
    pub reset: Option<Reset>,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Op").field("name", &self.name).finish()
    }
}

// --- state names of the B6 model, by index (a client maps them as an enum) ---

const PREMIUM_STATES: [&str; 2] = ["Yes", "No"];
const ORDER_STATUS_STATES: [&str; 4] = ["Scheduled", "Released", "Started", "Unplanned"];
const SALES_LINE_STATES: [&str; 2] = ["No", "Yes"];

fn state(names: &[&str], v: &SqlValue) -> Result<Value, PeerError> {
    v.as_int()
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| names.get(i))
        .map(|s| Value::from(*s))
        .ok_or_else(|| PeerError::Mismatch(format!("state column holds {v:?}, not one of {names:?}")))
}

fn text_of(v: &SqlValue) -> Result<String, PeerError> {
    v.as_text().map(str::to_string).ok_or_else(|| PeerError::Mismatch(format!("expected text, got {v:?}")))
}

fn int_of(v: &SqlValue) -> Result<i64, PeerError> {
    v.as_int().ok_or_else(|| PeerError::Mismatch(format!("expected a number, got {v:?}")))
}

fn cols(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// The total from the last column of the first row (0 without rows).
fn total(rows: &[Vec<SqlValue>]) -> Result<u64, PeerError> {
    match rows.first() {
        None => Ok(0),
        Some(r) => r
            .last()
            .map(int_of)
            .transpose()?
            .map(|t| t.max(0) as u64)
            .ok_or_else(|| PeerError::Mismatch("a query row without the total column".into())),
    }
}

/// `LIKE` pattern matching texts that start with `prefix`, with `\` as the escape character.
pub fn like_prefix(prefix: &str) -> String {
    let mut p = String::with_capacity(prefix.len() + 2);
    for ch in prefix.chars() {
        if matches!(ch, '\\' | '%' | '_') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push('%');
    p
}

// --- B.6.1 search ---

/// B.6.1 search: five searches of the clients by name prefix, ten rows each.
pub const SEARCH_ESPALIER: [&str; 5] = [
    "collection select . 'Clients' 'Name' -> text : 'Name' ( [ $p1 ] * ) limit 10",
    "collection select . 'Clients' 'Name' -> text : 'Name' ( [ $p2 ] * ) limit 10",
    "collection select . 'Clients' 'Name' -> text : 'Name' ( [ $p3 ] * ) limit 10",
    "collection select . 'Clients' 'Name' -> text : 'Name' ( [ $p4 ] * ) limit 10",
    "collection select . 'Clients' 'Name' -> text : 'Name' ( [ $p5 ] * ) limit 10",
];

/// B.6.1 search in SQL: one prefix's page of clients and the total that match.
pub const SEARCH_SQL: &str = "SELECT entry_key, name, \
     (SELECT count(*) FROM clients WHERE name LIKE $1 ESCAPE '\\') \
     FROM clients WHERE name LIKE $1 ESCAPE '\\' ORDER BY entry_key LIMIT 10";

fn search_sql(c: &mut dyn SqlConn, p: &Params) -> Result<Outcome, PeerError> {
    let mut out = Vec::with_capacity(5);
    for name in ["p1", "p2", "p3", "p4", "p5"] {
        let rows = c.query(SEARCH_SQL, &[SqlValue::Text(like_prefix(&p.text(name)?))])?;
        let total = total(&rows)?;
        let rows = rows
            .iter()
            .map(|r| Ok(Row { key: vec![text_of(&r[0])?], values: vec![Value::from(text_of(&r[1])?)] }))
            .collect::<Result<_, PeerError>>()?;
        out.push(QueryResult { total, columns: cols(&["Name"]), rows });
    }
    Ok(Outcome::Queries(out))
}

/// The first 1 … 5 characters of a random client's name: a user typing it.
fn search_params(rng: &mut StdRng, d: &DataIndex) -> Result<Params, PeerError> {
    if d.client_names.is_empty() {
        return Err(PeerError::Invalid("search needs at least one client".into()));
    }
    let name = &d.client_names[rng.random_range(0..d.client_names.len())];
    let prefix = |n: usize| -> String { name.chars().take(n).collect() };
    Ok(Params(vec![
        ("p1", ParamValue::Text(prefix(1))),
        ("p2", ParamValue::Text(prefix(2))),
        ("p3", ParamValue::Text(prefix(3))),
        ("p4", ParamValue::Text(prefix(4))),
        ("p5", ParamValue::Text(prefix(5))),
    ]))
}

// --- B.6.2 overview_subcollection ---

/// B.6.2 overview_subcollection: the first ten added materials over all orders' modifications.
pub const OVERVIEW_ESPALIER: [&str; 1] =
    ["collection select . 'Orders' . 'Modifications' % 'Added Materials' 'Quantity' -> number : 'Quantity' limit 10"];

/// B.6.2 overview_subcollection in SQL: the same page and the total.
pub const OVERVIEW_SQL: &str = "SELECT o.entry_key, m.entry_key, mat.entry_key, am.quantity, \
     (SELECT count(*) FROM orders o2 \
        JOIN orders_modifications m2 ON m2.parent_id = o2.id \
        JOIN orders_modifications_added_materials am2 ON am2.parent_id = m2.id) \
     FROM orders o \
     JOIN orders_modifications m ON m.parent_id = o.id \
     JOIN orders_modifications_added_materials am ON am.parent_id = m.id \
     JOIN materials mat ON mat.id = am.target_id \
     ORDER BY o.entry_key, m.entry_key, am.target_id LIMIT 10";

fn overview_sql(c: &mut dyn SqlConn, _: &Params) -> Result<Outcome, PeerError> {
    let rows = c.query(OVERVIEW_SQL, &[])?;
    let total = total(&rows)?;
    let rows = rows
        .iter()
        .map(|r| {
            Ok(Row {
                key: vec![text_of(&r[0])?, text_of(&r[1])?, text_of(&r[2])?],
                values: vec![Value::from(int_of(&r[3])?)],
            })
        })
        .collect::<Result<_, PeerError>>()?;
    Ok(Outcome::Queries(vec![QueryResult { total, columns: cols(&["Quantity"]), rows }]))
}

fn no_params(_: &mut StdRng, _: &DataIndex) -> Result<Params, PeerError> {
    Ok(Params::default())
}

// --- B.6.3 task_start ---

/// B.6.3 task_start: selects an order for an idle machine and starts its task.
pub const TASK_START_ESPALIER: [&str; 1] = ["update . 'Machines' : $machine ( \
     'Current Task' -> stategroup 'Selected' set to ( \
        'Current Order' -> reference $order \
        'Status' -> stategroup 'Started' ( 'Starting Time' -> integer $time 'Iteration' -> integer $iteration ) ) )"];

/// `$1` order key, `$2` starting time, `$3` iteration, `$4` machine key.
pub const TASK_START_SQL: &str = "UPDATE machines SET \
     current_task = 0, \
     current_task_selected_current_order = (SELECT id FROM orders WHERE entry_key = $1), \
     current_task_selected_status = 0, \
     current_task_selected_status_started_starting_time = $2, \
     current_task_selected_status_started_iteration = $3, \
     current_task_selected_status_canceled_last_iteration = NULL, \
     current_task_selected_status_canceled_reason = NULL, \
     current_task_selected_status_finished_process_duration = NULL, \
     current_task_not_selected_reason = NULL \
     WHERE entry_key = $4 AND current_task <> 0";

fn task_start_sql(c: &mut dyn SqlConn, p: &Params) -> Result<Outcome, PeerError> {
    let n = c.execute(
        TASK_START_SQL,
        &[
            SqlValue::Text(p.text("order")?),
            SqlValue::Int(p.int("time")?),
            SqlValue::Int(p.int("iteration")?),
            SqlValue::Text(p.text("machine")?),
        ],
    )?;
    match n {
        1 => Ok(Outcome::Done),
        n => Err(PeerError::Invalid(format!(
            "task_start changed {n} rows (the machine is missing or already 'Selected'), {}",
            p.describe()
        ))),
    }
}

fn task_start_params(rng: &mut StdRng, d: &DataIndex) -> Result<Params, PeerError> {
    if d.idle_machines.is_empty() || d.order_keys.is_empty() {
        return Err(PeerError::Invalid(
            "task_start needs a machine in 'Not Selected' and an order; this data set has none (raise --scale)".into(),
        ));
    }
    Ok(Params(vec![
        ("machine", ParamValue::Text(d.idle_machines[rng.random_range(0..d.idle_machines.len())].clone())),
        ("order", ParamValue::Text(d.order_keys[rng.random_range(0..d.order_keys.len())].clone())),
        ("time", ParamValue::Int(rng.random_range(0..10_000_000))),
        ("iteration", ParamValue::Int(rng.random_range(0..1000))),
    ]))
}

/// Reads back a machine (task_start's cross-check).
pub const MACHINE_GET: &str = "get . 'Machines' : $machine";

/// Switches a machine back to 'Not Selected' after task_start.
pub const TASK_RESET_ESPALIER: &str = "update . 'Machines' : $machine ( \
     'Current Task' -> stategroup 'Not Selected' set to ( 'Reason' -> stategroup 'Machine Unavailable' ( ) ) )";

/// Switches a machine back to 'Not Selected' after task_start, in SQL.
pub const TASK_RESET_SQL: &str = "UPDATE machines SET \
     current_task = 1, \
     current_task_selected_current_order = NULL, \
     current_task_selected_status = NULL, \
     current_task_selected_status_started_starting_time = NULL, \
     current_task_selected_status_started_iteration = NULL, \
     current_task_selected_status_canceled_last_iteration = NULL, \
     current_task_selected_status_canceled_reason = NULL, \
     current_task_selected_status_finished_process_duration = NULL, \
     current_task_not_selected_reason = 0 \
     WHERE entry_key = $1 AND current_task <> 1";

// --- B.6.4 get_big_items ---

/// B.6.4 get_big_items: the first ten orders with eleven of their properties.
pub const BIG_ITEMS_ESPALIER: [&str; 1] = ["collection select . 'Orders' \
     'Product' -> reference : 'Product' \
     'Status' -> stategroup : 'Status' \
     'Connected To Sales Order Line' -> stategroup : 'Connected To Sales Order Line' \
     'Quantity' -> number : 'Quantity' \
     'Due Date' -> number : 'Due Date' \
     'Scheduled Start Date' -> number : 'Scheduled Start Date' \
     'Scheduled End Date' -> number : 'Scheduled End Date' \
     'Planner Group' -> text : 'Planner Group' \
     'Requested Group' -> text : 'Requested Group' \
     'First Order' -> number : 'First Order' \
     'Planning Pool' -> text : 'Planning Pool' \
     limit 10"];

/// B.6.4 get_big_items in SQL: the same page and the total.
pub const BIG_ITEMS_SQL: &str = "SELECT o.entry_key, p.entry_key, o.status, o.connected_to_sales_order_line, \
     o.quantity, o.due_date, o.scheduled_start_date, o.scheduled_end_date, o.planner_group, o.requested_group, \
     o.first_order, o.planning_pool, (SELECT count(*) FROM orders) \
     FROM orders o JOIN products p ON p.id = o.product \
     ORDER BY o.entry_key LIMIT 10";

fn big_items_sql(c: &mut dyn SqlConn, _: &Params) -> Result<Outcome, PeerError> {
    let rows = c.query(BIG_ITEMS_SQL, &[])?;
    let total = total(&rows)?;
    let rows = rows
        .iter()
        .map(|r| {
            Ok(Row {
                key: vec![text_of(&r[0])?],
                values: vec![
                    Value::from(text_of(&r[1])?),
                    state(&ORDER_STATUS_STATES, &r[2])?,
                    state(&SALES_LINE_STATES, &r[3])?,
                    Value::from(int_of(&r[4])?),
                    Value::from(int_of(&r[5])?),
                    Value::from(int_of(&r[6])?),
                    Value::from(int_of(&r[7])?),
                    Value::from(text_of(&r[8])?),
                    Value::from(text_of(&r[9])?),
                    Value::from(int_of(&r[10])?),
                    Value::from(text_of(&r[11])?),
                ],
            })
        })
        .collect::<Result<_, PeerError>>()?;
    let columns = cols(&[
        "Product",
        "Status",
        "Connected To Sales Order Line",
        "Quantity",
        "Due Date",
        "Scheduled Start Date",
        "Scheduled End Date",
        "Planner Group",
        "Requested Group",
        "First Order",
        "Planning Pool",
    ]);
    Ok(Outcome::Queries(vec![QueryResult { total, columns, rows }]))
}

// --- B.6.5 many_references ---

/// B.6.5 many_references: whether the client of a machine's current order is premium, over three references.
pub const MANY_REFERENCES_ESPALIER: [&str; 1] = ["collection . 'Machines' : $machine select \
     'Premium' -> ? 'Current Task' * 'Selected' > 'Current Order' > 'Client' stategroup : 'Is Premium Client' \
     limit 10"];

/// The machine's state comes back too: no row means no such machine (Espalier fails then),
/// a state other than 'Selected' (0) means the projection does not match.
pub const MANY_REFERENCES_SQL: &str = "SELECT m.current_task, c.is_premium_client \
     FROM machines m \
     LEFT JOIN orders o ON o.id = m.current_task_selected_current_order \
     LEFT JOIN clients c ON c.id = o.client \
     WHERE m.entry_key = $1";

fn many_references_sql(c: &mut dyn SqlConn, p: &Params) -> Result<Outcome, PeerError> {
    let machine = p.text("machine")?;
    let rows = c.query(MANY_REFERENCES_SQL, &[SqlValue::Text(machine.clone())])?;
    let Some(r) = rows.first() else {
        return Err(PeerError::Invalid(format!("no machine with key {machine:?}")));
    };
    let rows = if int_of(&r[0])? == 0 {
        vec![Row { key: vec![], values: vec![state(&PREMIUM_STATES, &r[1])?] }]
    } else {
        vec![]
    };
    Ok(Outcome::Queries(vec![QueryResult { total: rows.len() as u64, columns: cols(&["Premium"]), rows }]))
}

fn machine_params(rng: &mut StdRng, d: &DataIndex) -> Result<Params, PeerError> {
    if d.machine_keys.is_empty() {
        return Err(PeerError::Invalid("many_references needs at least one machine".into()));
    }
    Ok(Params(vec![("machine", ParamValue::Text(d.machine_keys[rng.random_range(0..d.machine_keys.len())].clone()))]))
}

// --- the operation table ---

/// B.6.1 search.
pub const SEARCH: Op = Op {
    name: "search",
    instructions: &SEARCH_ESPALIER,
    sql_text: &[SEARCH_SQL],
    sql: search_sql,
    params: search_params,
    verify: None,
    reset: None,
};

/// B.6.2 overview_subcollection.
pub const OVERVIEW_SUBCOLLECTION: Op = Op {
    name: "overview_subcollection",
    instructions: &OVERVIEW_ESPALIER,
    sql_text: &[OVERVIEW_SQL],
    sql: overview_sql,
    params: no_params,
    verify: None,
    reset: None,
};

/// B.6.3 task_start.
pub const TASK_START: Op = Op {
    name: "task_start",
    instructions: &TASK_START_ESPALIER,
    sql_text: &[TASK_START_SQL],
    sql: task_start_sql,
    params: task_start_params,
    verify: Some(Verify { espalier: MACHINE_GET, collection: &["Machines"], key_param: "machine" }),
    reset: Some(Reset { espalier: TASK_RESET_ESPALIER, sql: TASK_RESET_SQL, key_param: "machine" }),
};

/// B.6.4 get_big_items.
pub const GET_BIG_ITEMS: Op = Op {
    name: "get_big_items",
    instructions: &BIG_ITEMS_ESPALIER,
    sql_text: &[BIG_ITEMS_SQL],
    sql: big_items_sql,
    params: no_params,
    verify: None,
    reset: None,
};

/// B.6.5 many_references.
pub const MANY_REFERENCES: Op = Op {
    name: "many_references",
    instructions: &MANY_REFERENCES_ESPALIER,
    sql_text: &[MANY_REFERENCES_SQL],
    sql: many_references_sql,
    params: machine_params,
    verify: None,
    reset: None,
};

/// The operations of a suite, in the order they run.
pub fn ops(suite: Suite) -> Vec<Op> {
    match suite {
        Suite::B6 => vec![SEARCH, OVERVIEW_SUBCOLLECTION, TASK_START, GET_BIG_ITEMS, MANY_REFERENCES],
        Suite::B7 => vec![MANY_REFERENCES, SEARCH, TASK_START],
    }
}

/// Checks that each `$N` placeholder first appears after `$1 … $N-1` (SQLite numbers named
/// parameters by first appearance; PostgreSQL by N), and returns the highest N.
pub fn check_placeholders(sql: &str) -> Result<usize, String> {
    let bytes = sql.as_bytes();
    let mut seen = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' {
            let start = i + 1;
            let mut end = start;
            while end < bytes.len() && bytes[end].is_ascii_digit() {
                end += 1;
            }
            let n: usize = sql[start..end].parse().map_err(|_| format!("`$` without a number at byte {i}: {sql}"))?;
            if n > seen + 1 {
                return Err(format!("${n} appears before ${}: {sql}", seen + 1));
            }
            seen = seen.max(n);
            i = end;
        } else {
            i += 1;
        }
    }
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_numbers_its_placeholders_in_order() {
        for suite in [Suite::B6, Suite::B7] {
            for op in ops(suite) {
                for sql in op.sql_text {
                    check_placeholders(sql).unwrap_or_else(|e| panic!("{}: {e}", op.name));
                }
                if let Some(r) = op.reset {
                    assert_eq!(check_placeholders(r.sql), Ok(1), "{}", op.name);
                }
            }
        }
        assert_eq!(check_placeholders("SELECT $1, $2, $1"), Ok(2));
        assert!(check_placeholders("SELECT $2, $1").is_err());
    }

    #[test]
    fn like_prefix_escapes_wildcards() {
        assert_eq!(like_prefix("ab"), "ab%");
        assert_eq!(like_prefix("a_%\\"), "a\\_\\%\\\\%");
    }

    #[test]
    fn state_names_match_the_model() {
        let schema = super::super::dataset::suite_file(Suite::B6).expect("B6 parses").schema;
        let names = |node: &str, sg: &str| -> Vec<String> {
            let dict = schema.find(espalier_schema::ROOT, node).expect("collection");
            let espalier_schema::PropertyKind::Dictionary { node: ty } = dict.kind else { panic!("dictionary") };
            match &schema.find(ty, sg).expect("stategroup").kind {
                espalier_schema::PropertyKind::StateGroup { states } => states.iter().map(|s| s.name.clone()).collect(),
                _ => panic!("stategroup"),
            }
        };
        assert_eq!(names("Clients", "Is Premium Client"), PREMIUM_STATES);
        assert_eq!(names("Orders", "Status"), ORDER_STATUS_STATES);
        assert_eq!(names("Orders", "Connected To Sales Order Line"), SALES_LINE_STATES);
    }
}
