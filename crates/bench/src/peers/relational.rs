//! The relational image of an Espalier schema, a loader that copies an Espalier snapshot into
//! it, and a reader that turns rows back into Espalier's node JSON for cross-checks.
//!
//! **The mapping** (one choice for every schema, the one a DBA would draw from the model):
//!
//! - Every dictionary and every matrix gets a table; its rows are the entries of *every*
//!   instance of that collection. The root gets a one-row table `root` if it has properties
//!   that are not collections.
//! - Leading columns: `id` (the entry's Espalier record id, so ids and the order of matrix
//!   entries agree between the systems), `parent_id` (the id of the row of the nearest
//!   enclosing entry; left out when that is the root, which is a singleton), then
//!   `entry_key` (text) for a dictionary or `target_id` (the target entry's id) for a matrix —
//!   a matrix table is the link table of an attributed many-to-many relation.
//! - Numbers are `BIGINT`, texts `TEXT`, a reference is the `BIGINT` id of its target row.
//! - A group's properties are columns of the row that holds the group, named with the group's
//!   name as a prefix.
//! - A stategroup is a column holding the state's index (`SMALLINT` in PostgreSQL). The
//!   properties of each state are nullable columns of the same row, named
//!   `<stategroup>_<state>_<property>`: single-table subtyping, so switching a state is one
//!   `UPDATE`. A `CHECK` per such column says it is set exactly while its state is the current
//!   one (this is the schema's "no nulls" rule, held by the database).
//! - A collection inside a group or state is a table whose `parent_id` is the enclosing entry.
//! - Foreign keys: `parent_id` → parent row (`ON DELETE CASCADE`: removing an entry removes its
//!   subtree), references and matrix targets → target row. Indexes: primary key on `id`,
//!   unique (`parent_id`, `entry_key`) or (`parent_id`, `target_id`), one on every reference
//!   column and matrix target (the reverse navigation Espalier's link index gives, and what
//!   the foreign keys need to check a delete), and one per index the schema declares.
//!
//! Names are the schema's names in lower case with `_` for anything but letters and digits,
//! prefixed by the parent table's name for nested collections, made unique with a suffix and
//! kept under PostgreSQL's 63-byte limit. For B6: `clients`, `orders`,
//! `orders_modifications`, `orders_modifications_added_materials`, `machines`, with columns
//! such as `machines.current_task_selected_current_order`.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use espalier_data::{Graph, NodeRef, NodeView, ROOT_ID};
use espalier_schema::{NodeTypeId, PropertyId, PropertyKind, Schema, StateIndex, Storage, ROOT};
use indicatif::ProgressBar;
use serde_json::{Map, Value};

use super::PeerError;

/// Deepest nesting of node types the loader and reader walk (schemas are far shallower).
const MAX_DEPTH: usize = 64;
/// Longest identifier PostgreSQL keeps (NAMEDATALEN - 1).
const MAX_IDENT: usize = 63;
/// Distinct strings the loader keeps decoded; cleared when full.
const STRING_CACHE: usize = 1 << 16;
/// Children of one node that the reader turns back into JSON (it is for cross-checks of
/// small subtrees and test-size databases).
const MAX_READ_CHILDREN: usize = 1_000_000;

/// The index of a table in [`RelationalSchema::tables`].
pub type TableId = usize;

/// The SQL dialect a statement is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite's SQL.
    Sqlite,
    /// PostgreSQL's SQL.
    Postgres,
}

/// A value going into or coming out of a SQL statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlValue {
    /// SQL `NULL`.
    Null,
    /// An integer.
    Int(i64),
    /// A text.
    Text(String),
}

impl SqlValue {
    /// The integer, if the value is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            SqlValue::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The text, if the value is one.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            SqlValue::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The value as JSON (for messages and results).
    pub fn to_json(&self) -> Value {
        match self {
            SqlValue::Null => Value::Null,
            SqlValue::Int(i) => Value::from(*i),
            SqlValue::Text(t) => Value::from(t.as_str()),
        }
    }
}

/// A connection to a SQL peer. Statements use `$1`, `$2`, … placeholders, each first
/// appearing in increasing order (SQLite numbers `$N` names by first appearance).
pub trait SqlConn {
    /// The dialect the connection's statements must be written in.
    fn dialect(&self) -> Dialect;
    /// Runs statements without parameters or results (DDL, `BEGIN`, …).
    fn batch(&mut self, sql: &str) -> Result<(), PeerError>;
    /// Runs a statement and returns its rows.
    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Vec<SqlValue>>, PeerError>;
    /// Runs a statement and returns the number of rows it changed.
    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, PeerError>;
}

/// One cell of a row being loaded (texts shared with the loader's string cache).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// SQL `NULL`.
    Null,
    /// An integer.
    Int(i64),
    /// A text.
    Text(Arc<str>),
}

/// Where loaded rows go.
pub trait RowSink {
    /// One row of `table`, with a cell for every column (`Table::column_names`).
    fn row(&mut self, table: TableId, cells: &[Cell]) -> Result<(), PeerError>;
}

/// What a property column holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnKind {
    /// A number (`BIGINT`).
    Number,
    /// A text.
    Text,
    /// The index of the current state of a stategroup with `states` states.
    State {
        /// The number of states of the stategroup.
        states: usize,
    },
    /// The id of the target row in table `target`; `key_arity` key components name it.
    Reference {
        /// The table of the target rows.
        target: TableId,
        /// The number of key components that name a target.
        key_arity: usize,
    },
}

/// A property column of a table.
#[derive(Debug, Clone)]
pub struct Column {
    /// The column's SQL name.
    pub name: String,
    /// What the column holds.
    pub kind: ColumnKind,
    /// The schema property the column holds.
    pub property: PropertyId,
    /// Set for a column inside a state: (index in `Table::columns` of its stategroup's column,
    /// the state). The column holds a value exactly while that state is the current one.
    pub condition: Option<(usize, StateIndex)>,
}

/// What the rows of a table are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableKind {
    /// The one-row table of the root's own properties.
    Root,
    /// The entries of a dictionary, keyed by `entry_key`.
    Dictionary,
    /// Rows are keyed by the id of an entry of `target`, named by `key_arity` key components.
    Matrix {
        /// The table of the target entries.
        target: TableId,
        /// The number of key components that name a target.
        key_arity: usize,
    },
}

/// The table of one dictionary or matrix (or of the root's properties).
#[derive(Debug, Clone)]
pub struct Table {
    /// The table's SQL name.
    pub name: String,
    /// What the rows are.
    pub kind: TableKind,
    /// The dictionary or matrix whose entries are the rows (`None` for the root table).
    pub collection: Option<PropertyId>,
    /// The node type of a row.
    pub node_type: NodeTypeId,
    /// The table of the enclosing entry; `None` when that is the root (no `parent_id`).
    pub parent: Option<TableId>,
    /// The property columns, after the leading ones.
    pub columns: Vec<Column>,
}

impl Table {
    /// Number of leading columns: `id`, then `parent_id` if any, then the key.
    pub fn lead(&self) -> usize {
        match self.kind {
            TableKind::Root => 1,
            _ => 2 + usize::from(self.parent.is_some()),
        }
    }

    /// Every column name, leading ones first (the order of a loaded row's cells).
    pub fn column_names(&self) -> Vec<&str> {
        let mut names = vec!["id"];
        if self.parent.is_some() {
            names.push("parent_id");
        }
        match self.kind {
            TableKind::Root => {}
            TableKind::Dictionary => names.push("entry_key"),
            TableKind::Matrix { .. } => names.push("target_id"),
        }
        names.extend(self.columns.iter().map(|c| c.name.as_str()));
        names
    }

    /// The property column named `name`, if any.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// The tables of a schema and where each property lives.
#[derive(Debug, Clone)]
pub struct RelationalSchema {
    /// The Espalier schema the tables map.
    pub schema: Arc<Schema>,
    /// The tables, indexed by [`TableId`].
    pub tables: Vec<Table>,
    /// The one-row table of the root's own properties, if it has any.
    pub root_table: Option<TableId>,
    /// Per property: the (table, index in `columns`) of a number, text, reference or stategroup.
    column_of: Vec<Option<(TableId, usize)>>,
    /// Per property: the table of a dictionary or matrix.
    table_of: Vec<Option<TableId>>,
}

/// `'Added Materials'` → `added_materials`.
fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for ch in name.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = out.trim_matches('_');
    let mut s = if trimmed.is_empty() { "x".to_string() } else { trimmed.to_string() };
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert_str(0, "p_");
    }
    s
}

/// Joins name parts and makes the result unique in `taken` and short enough for PostgreSQL.
fn unique_name(parts: &[&str], taken: &mut HashSet<String>) -> String {
    let base: Vec<String> = parts.iter().map(|p| sanitize(p)).filter(|p| !p.is_empty()).collect();
    let base = base.join("_");
    let base = if base.len() > MAX_IDENT - 8 {
        // Keep it unique even when the cut removes what told two names apart.
        let hash = xxhash_short(&base);
        format!("{}_{hash:06x}", &base[..MAX_IDENT - 16])
    } else {
        base
    };
    let mut name = base.clone();
    let mut n = 2;
    while !taken.insert(name.clone()) {
        name = format!("{base}_{n}");
        n += 1;
        assert!(n < 100_000, "unbounded name collisions for {base}");
    }
    name
}

/// A small stable hash (FNV-1a) for shortened identifiers.
fn xxhash_short(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h & 0x00ff_ffff
}

/// Quotes an identifier for either dialect.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

struct Builder<'s> {
    schema: &'s Schema,
    tables: Vec<Table>,
    table_names: HashSet<String>,
    column_names: Vec<HashSet<String>>,
    column_of: Vec<Option<(TableId, usize)>>,
    table_of: Vec<Option<TableId>>,
    /// Reference and matrix targets to resolve once every table exists: (table, column or
    /// `None` for a matrix key, the targeted dictionary).
    targets: Vec<(TableId, Option<usize>, PropertyId, usize)>,
}

impl Builder<'_> {
    fn new_table(
        &mut self,
        name_parts: &[&str],
        kind: TableKind,
        collection: Option<PropertyId>,
        node_type: NodeTypeId,
        parent: Option<TableId>,
    ) -> TableId {
        let name = unique_name(name_parts, &mut self.table_names);
        let mut taken: HashSet<String> =
            ["id", "parent_id", "entry_key", "target_id"].iter().map(|s| s.to_string()).collect();
        taken.insert(String::new());
        self.tables.push(Table { name, kind, collection, node_type, parent, columns: Vec::new() });
        self.column_names.push(taken);
        if let Some(c) = collection {
            self.table_of[c.index()] = Some(self.tables.len() - 1);
        }
        self.tables.len() - 1
    }

    fn push_column(
        &mut self,
        table: TableId,
        path: &[&str],
        kind: ColumnKind,
        property: PropertyId,
        condition: Option<(usize, StateIndex)>,
    ) -> usize {
        let name = unique_name(path, &mut self.column_names[table]);
        let t = &mut self.tables[table];
        t.columns.push(Column { name, kind, property, condition });
        let index = t.columns.len() - 1;
        self.column_of[property.index()] = Some((table, index));
        index
    }

    /// Adds the columns of node type `ty` (and of its groups and states) to `table`; collects
    /// the collections found, with their name path, for child tables.
    fn columns(
        &mut self,
        table: TableId,
        ty: NodeTypeId,
        prefix: &[String],
        condition: Option<(usize, StateIndex)>,
        collections: &mut Vec<(PropertyId, Vec<String>)>,
        depth: usize,
    ) -> Result<(), PeerError> {
        if depth > MAX_DEPTH {
            return Err(PeerError::Invalid(format!("schema nests deeper than {MAX_DEPTH} levels")));
        }
        let schema = self.schema;
        for &p in &schema.node_type(ty).properties {
            let prop = schema.property(p);
            let mut path: Vec<String> = prefix.to_vec();
            path.push(prop.name.clone());
            let parts: Vec<&str> = path.iter().map(String::as_str).collect();
            match &prop.kind {
                PropertyKind::Number => {
                    self.push_column(table, &parts, ColumnKind::Number, p, condition);
                }
                PropertyKind::Text => {
                    self.push_column(table, &parts, ColumnKind::Text, p, condition);
                }
                PropertyKind::Reference { target } => {
                    // The target table is filled in once every table exists.
                    let c = self.push_column(
                        table,
                        &parts,
                        ColumnKind::Reference { target: usize::MAX, key_arity: target.key_arity },
                        p,
                        condition,
                    );
                    self.targets.push((table, Some(c), target.dictionary, target.key_arity));
                }
                PropertyKind::Group { node } => self.columns(table, *node, &path, condition, collections, depth + 1)?,
                PropertyKind::StateGroup { states } => {
                    let c = self.push_column(table, &parts, ColumnKind::State { states: states.len() }, p, condition);
                    for (i, state) in states.iter().enumerate() {
                        let mut state_path = path.clone();
                        state_path.push(state.name.clone());
                        self.columns(
                            table,
                            state.node,
                            &state_path,
                            Some((c, i as StateIndex)),
                            collections,
                            depth + 1,
                        )?;
                    }
                }
                PropertyKind::Dictionary { .. } | PropertyKind::Matrix { .. } => collections.push((p, path)),
            }
        }
        Ok(())
    }

    /// Creates the tables of `collections` (found under a row of `parent`) and, recursively,
    /// of the collections inside their entries.
    fn child_tables(
        &mut self,
        parent: Option<TableId>,
        collections: Vec<(PropertyId, Vec<String>)>,
        depth: usize,
    ) -> Result<(), PeerError> {
        if depth > MAX_DEPTH {
            return Err(PeerError::Invalid(format!("schema nests collections deeper than {MAX_DEPTH} levels")));
        }
        let schema = self.schema;
        for (p, path) in collections {
            let mut parts: Vec<String> = parent.map(|t| vec![self.tables[t].name.clone()]).unwrap_or_default();
            parts.extend(path);
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            let (kind, node) = match &schema.property(p).kind {
                PropertyKind::Dictionary { node } => (TableKind::Dictionary, *node),
                PropertyKind::Matrix { node, target } => {
                    (TableKind::Matrix { target: usize::MAX, key_arity: target.key_arity }, *node)
                }
                _ => unreachable!("only collections are collected"),
            };
            let table = self.new_table(&parts, kind, Some(p), node, parent);
            if let PropertyKind::Matrix { target, .. } = &schema.property(p).kind {
                self.targets.push((table, None, target.dictionary, target.key_arity));
            }
            let mut inner = Vec::new();
            self.columns(table, node, &[], None, &mut inner, 0)?;
            self.child_tables(Some(table), inner, depth + 1)?;
        }
        Ok(())
    }
}

impl RelationalSchema {
    /// The tables for `schema`.
    pub fn new(schema: Arc<Schema>) -> Result<RelationalSchema, PeerError> {
        let n = schema.properties.len();
        let mut b = Builder {
            schema: &schema,
            tables: Vec::new(),
            table_names: HashSet::new(),
            column_names: Vec::new(),
            column_of: vec![None; n],
            table_of: vec![None; n],
            targets: Vec::new(),
        };
        let root = b.new_table(&["root"], TableKind::Root, None, ROOT, None);
        let mut collections = Vec::new();
        b.columns(root, ROOT, &[], None, &mut collections, 0)?;
        b.child_tables(None, collections, 0)?;
        for (table, column, dictionary, key_arity) in std::mem::take(&mut b.targets) {
            let target = b.table_of[dictionary.index()]
                .ok_or_else(|| PeerError::Invalid(format!("no table for dictionary property {dictionary}")))?;
            match column {
                Some(c) => b.tables[table].columns[c].kind = ColumnKind::Reference { target, key_arity },
                None => b.tables[table].kind = TableKind::Matrix { target, key_arity },
            }
        }
        let Builder { mut tables, mut column_of, table_of, .. } = b;
        // A root without properties of its own needs no table.
        let root_table = if tables[root].columns.is_empty() {
            tables.remove(root);
            for t in &mut tables {
                t.parent = t.parent.map(|p| p - 1);
                for c in &mut t.columns {
                    if let ColumnKind::Reference { target, .. } = &mut c.kind {
                        *target -= 1;
                    }
                }
                if let TableKind::Matrix { target, .. } = &mut t.kind {
                    *target -= 1;
                }
            }
            for slot in column_of.iter_mut().flatten() {
                slot.0 -= 1;
            }
            None
        } else {
            Some(root)
        };
        let table_of = table_of.into_iter().map(|t| t.map(|t| if root_table.is_none() { t - 1 } else { t })).collect();
        Ok(RelationalSchema { schema, tables, root_table, column_of, table_of })
    }

    /// The table of a dictionary or matrix property.
    pub fn table_of(&self, collection: PropertyId) -> Option<TableId> {
        self.table_of.get(collection.index()).copied().flatten()
    }

    /// The table and column of a number, text, reference or stategroup property.
    pub fn column_of(&self, property: PropertyId) -> Option<(TableId, usize)> {
        self.column_of.get(property.index()).copied().flatten()
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<(TableId, &Table)> {
        self.tables.iter().enumerate().find(|(_, t)| t.name == name)
    }

    /// The table of the collection reached from the root by `path` (property names through
    /// groups, states and entries, e.g. `["Orders", "Modifications"]`).
    pub fn table_at(&self, path: &[&str]) -> Option<TableId> {
        let mut ty = ROOT;
        let mut found = None;
        for name in path {
            let p = self.schema.find(ty, name)?;
            match &p.kind {
                PropertyKind::Dictionary { node } | PropertyKind::Matrix { node, .. } => {
                    found = self.table_of(p.id);
                    ty = *node;
                }
                PropertyKind::Group { node } => ty = *node,
                _ => return None,
            }
        }
        found
    }

    fn type_name(d: Dialect, kind: &ColumnKind) -> &'static str {
        match (d, kind) {
            (Dialect::Sqlite, ColumnKind::Text) => "TEXT",
            (Dialect::Sqlite, _) => "INTEGER",
            (Dialect::Postgres, ColumnKind::Text) => "TEXT",
            (Dialect::Postgres, ColumnKind::State { .. }) => "SMALLINT",
            (Dialect::Postgres, _) => "BIGINT",
        }
    }

    /// `CREATE TABLE` statements. SQLite declares its foreign keys here (it cannot add them
    /// later); PostgreSQL gets them from [`RelationalSchema::after_load`].
    pub fn create_tables(&self, d: Dialect) -> Vec<String> {
        let id_type = match d {
            Dialect::Sqlite => "INTEGER",
            Dialect::Postgres => "BIGINT",
        };
        let mut out = Vec::new();
        for t in &self.tables {
            let mut cols: Vec<String> = vec![format!("id {id_type} PRIMARY KEY")];
            if let Some(p) = t.parent {
                let mut c = format!("parent_id {id_type} NOT NULL");
                if d == Dialect::Sqlite {
                    let _ = write!(c, " REFERENCES {} (id) ON DELETE CASCADE", ident(&self.tables[p].name));
                }
                cols.push(c);
            }
            match t.kind {
                TableKind::Root => {}
                TableKind::Dictionary => cols.push("entry_key TEXT NOT NULL".into()),
                TableKind::Matrix { target, .. } => {
                    let mut c = format!("target_id {id_type} NOT NULL");
                    if d == Dialect::Sqlite {
                        let _ = write!(c, " REFERENCES {} (id)", ident(&self.tables[target].name));
                    }
                    cols.push(c);
                }
            }
            for c in &t.columns {
                let mut s = format!("{} {}", ident(&c.name), Self::type_name(d, &c.kind));
                if c.condition.is_none() {
                    s.push_str(" NOT NULL");
                }
                if let (Dialect::Sqlite, ColumnKind::Reference { target, .. }) = (d, &c.kind) {
                    let _ = write!(s, " REFERENCES {} (id)", ident(&self.tables[*target].name));
                }
                cols.push(s);
            }
            for c in &t.columns {
                if let ColumnKind::State { states } = c.kind {
                    cols.push(format!("CHECK ({} BETWEEN 0 AND {})", ident(&c.name), states.saturating_sub(1)));
                }
                if let Some((sg, state)) = c.condition {
                    cols.push(format!(
                        "CHECK (CASE WHEN {sg} = {state} THEN {c} IS NOT NULL ELSE {c} IS NULL END)",
                        sg = ident(&t.columns[sg].name),
                        c = ident(&c.name)
                    ));
                }
            }
            out.push(format!("CREATE TABLE {} (\n    {}\n)", ident(&t.name), cols.join(",\n    ")));
        }
        out
    }

    /// Indexes (and, for PostgreSQL, foreign keys), created after the bulk load as a DBA
    /// would: building them once is far cheaper than maintaining them row by row.
    pub fn after_load(&self, d: Dialect) -> Vec<String> {
        let mut out = Vec::new();
        let mut names: HashSet<String> = self.tables.iter().map(|t| t.name.clone()).collect();
        let mut index = |out: &mut Vec<String>, unique: bool, t: &Table, cols: &[&str]| {
            let name = unique_name(&[&t.name, &cols.join("_")], &mut names);
            out.push(format!(
                "CREATE {}INDEX {} ON {} ({})",
                if unique { "UNIQUE " } else { "" },
                ident(&name),
                ident(&t.name),
                cols.iter().map(|c| ident(c)).collect::<Vec<_>>().join(", ")
            ));
        };
        for t in &self.tables {
            let key = match t.kind {
                TableKind::Root => None,
                TableKind::Dictionary => Some("entry_key"),
                TableKind::Matrix { .. } => Some("target_id"),
            };
            if let Some(key) = key {
                match t.parent {
                    Some(_) => index(&mut out, true, t, &["parent_id", key]),
                    None => index(&mut out, true, t, &[key]),
                }
            }
            if matches!(t.kind, TableKind::Matrix { .. }) && t.parent.is_some() {
                index(&mut out, false, t, &["target_id"]);
            }
            for c in &t.columns {
                if matches!(c.kind, ColumnKind::Reference { .. }) {
                    index(&mut out, false, t, &[&c.name]);
                }
            }
        }
        // Declared indexes. Espalier does not enforce `unique` yet, so neither do these.
        for decl in &self.schema.indexes {
            let (Some(t), Some((ct, c))) = (self.table_of(decl.collection), self.column_of(decl.property)) else {
                continue;
            };
            if t != ct {
                continue;
            }
            let table = &self.tables[t];
            let col = table.columns[c].name.clone();
            match table.parent {
                Some(_) => index(&mut out, false, table, &["parent_id", &col]),
                None => index(&mut out, false, table, &[&col]),
            }
        }
        if d == Dialect::Postgres {
            for t in &self.tables {
                if let Some(p) = t.parent {
                    out.push(format!(
                        "ALTER TABLE {} ADD FOREIGN KEY (parent_id) REFERENCES {} (id) ON DELETE CASCADE",
                        ident(&t.name),
                        ident(&self.tables[p].name)
                    ));
                }
                if let TableKind::Matrix { target, .. } = t.kind {
                    out.push(format!(
                        "ALTER TABLE {} ADD FOREIGN KEY (target_id) REFERENCES {} (id)",
                        ident(&t.name),
                        ident(&self.tables[target].name)
                    ));
                }
                for c in &t.columns {
                    if let ColumnKind::Reference { target, .. } = c.kind {
                        out.push(format!(
                            "ALTER TABLE {} ADD FOREIGN KEY ({}) REFERENCES {} (id)",
                            ident(&t.name),
                            ident(&c.name),
                            ident(&self.tables[target].name)
                        ));
                    }
                }
            }
        }
        out
    }

    /// Per table, the number of entries Espalier holds (summed over every instance of the
    /// collection), counted from the collections' entry-count slots; the root table counts 1.
    pub fn espalier_counts(&self, graph: &Graph<'_>) -> Result<Vec<u64>, PeerError> {
        let mut counts = vec![0u64; self.tables.len()];
        if let Some(r) = self.root_table {
            counts[r] = 1;
        }
        let mut walker = Walker::new(self, graph);
        walker.count(NodeRef::ROOT, &mut counts, 0)?;
        Ok(counts)
    }

    /// Copies every entry of the snapshot into `sink`, parents before children. Returns the
    /// rows written per table. `progress` advances by one per row.
    pub fn load(
        &self,
        graph: &Graph<'_>,
        sink: &mut dyn RowSink,
        progress: &ProgressBar,
    ) -> Result<Vec<u64>, PeerError> {
        let mut walker = Walker::new(self, graph);
        let mut rows = vec![0u64; self.tables.len()];
        let mut pending = Vec::new();
        match self.root_table {
            Some(t) => {
                let mut cells = vec![Cell::Null; self.tables[t].lead() + self.tables[t].columns.len()];
                cells[0] = Cell::Int(ROOT_ID.get() as i64);
                walker.fill(
                    graph.view(NodeRef::ROOT).map_err(|e| PeerError::data("reading the root", e))?,
                    &mut cells,
                    &mut pending,
                    0,
                )?;
                sink.row(t, &cells)?;
                rows[t] += 1;
                progress.inc(1);
            }
            None => walker.collections(NodeRef::ROOT, &mut pending, 0)?,
        }
        for (property, owner) in pending {
            walker.load_collection(property, owner, None, sink, &mut rows, progress, 0)?;
        }
        Ok(rows)
    }
}

/// Walks an Espalier snapshot for the loader.
struct Walker<'r, 'g> {
    rs: &'r RelationalSchema,
    graph: &'r Graph<'g>,
    strings: HashMap<u64, Arc<str>>,
}

fn data_err(what: &str) -> impl Fn(espalier_data::DataError) -> PeerError + '_ {
    move |e| PeerError::data(what.to_string(), e)
}

impl<'r, 'g> Walker<'r, 'g> {
    fn new(rs: &'r RelationalSchema, graph: &'r Graph<'g>) -> Walker<'r, 'g> {
        Walker { rs, graph, strings: HashMap::new() }
    }

    fn text(&mut self, id: u64) -> Result<Arc<str>, PeerError> {
        if let Some(s) = self.strings.get(&id) {
            return Ok(s.clone());
        }
        if self.strings.len() >= STRING_CACHE {
            self.strings.clear();
        }
        let s: Arc<str> = self.graph.string(id).map_err(data_err("reading a text"))?.into();
        self.strings.insert(id, s.clone());
        Ok(s)
    }

    fn cell(&self, property: PropertyId) -> usize {
        let (t, c) = self.rs.column_of(property).expect("every value property has a column");
        self.rs.tables[t].lead() + c
    }

    /// Fills the cells of `view`'s node type (groups and states included) and collects its
    /// collections as (property, owner node).
    fn fill(
        &mut self,
        view: NodeView<'g>,
        cells: &mut [Cell],
        pending: &mut Vec<(PropertyId, NodeRef)>,
        depth: usize,
    ) -> Result<(), PeerError> {
        assert!(depth <= MAX_DEPTH, "node types nest deeper than the schema check allows");
        let schema = &*self.rs.schema;
        for &p in &schema.node_type(view.node.ty).properties {
            match &schema.property(p).kind {
                PropertyKind::Number => {
                    cells[self.cell(p)] = Cell::Int(view.number(p).map_err(data_err("reading a number"))?)
                }
                PropertyKind::Text => {
                    let id = view.text_id(p).map_err(data_err("reading a text"))?;
                    cells[self.cell(p)] = Cell::Text(self.text(id)?);
                }
                PropertyKind::Reference { .. } => {
                    let id = view.reference(p).map_err(data_err("reading a reference"))?;
                    cells[self.cell(p)] = Cell::Int(id.get() as i64);
                }
                PropertyKind::Group { .. } => self.fill(view.group(p), cells, pending, depth + 1)?,
                PropertyKind::StateGroup { .. } => {
                    let (index, state) = view.state(p).map_err(data_err("reading a state"))?;
                    cells[self.cell(p)] = Cell::Int(i64::from(index));
                    if let Storage::Record { .. } = schema.node_type(state.ty).storage {
                        let sv = self.graph.view(state).map_err(data_err("reading a state's node"))?;
                        self.fill(sv, cells, pending, depth + 1)?;
                    }
                }
                PropertyKind::Dictionary { .. } | PropertyKind::Matrix { .. } => pending.push((p, view.node)),
            }
        }
        Ok(())
    }

    /// Collects the collections of a node without reading its values (the root without a table).
    fn collections(
        &mut self,
        node: NodeRef,
        pending: &mut Vec<(PropertyId, NodeRef)>,
        depth: usize,
    ) -> Result<(), PeerError> {
        assert!(depth <= MAX_DEPTH, "node types nest deeper than the schema check allows");
        let schema = &*self.rs.schema;
        for &p in &schema.node_type(node.ty).properties {
            match &schema.property(p).kind {
                PropertyKind::Dictionary { .. } | PropertyKind::Matrix { .. } => pending.push((p, node)),
                PropertyKind::Group { .. } => self.collections(self.graph.group(node, p), pending, depth + 1)?,
                PropertyKind::StateGroup { .. } => {
                    let (_, state) = self.graph.state(node, p).map_err(data_err("reading a state"))?;
                    if let Storage::Record { .. } = schema.node_type(state.ty).storage {
                        self.collections(state, pending, depth + 1)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)] // a recursive walk carrying its accumulators
    fn load_collection(
        &mut self,
        property: PropertyId,
        owner: NodeRef,
        parent_row: Option<i64>,
        sink: &mut dyn RowSink,
        rows: &mut [u64],
        progress: &ProgressBar,
        depth: usize,
    ) -> Result<(), PeerError> {
        assert!(depth <= MAX_DEPTH, "collections nest deeper than the schema check allows");
        let t = self.rs.table_of(property).expect("every collection has a table");
        let table = &self.rs.tables[t];
        let width = table.lead() + table.columns.len();
        let matrix = matches!(table.kind, TableKind::Matrix { .. });
        let graph = *self.graph;
        for entry in graph.entries(owner, property).map_err(data_err("listing entries"))? {
            let (raw, node) = entry.map_err(data_err("listing entries"))?;
            let mut cells = vec![Cell::Null; width];
            cells[0] = Cell::Int(node.id.get() as i64);
            let mut at = 1;
            if table.parent.is_some() {
                cells[1] = Cell::Int(parent_row.expect("a table with a parent is loaded under a parent row"));
                at = 2;
            }
            cells[at] = if matrix {
                let target = graph.matrix_target_of(property, raw).map_err(data_err("reading a matrix key"))?;
                Cell::Int(target.get() as i64)
            } else {
                let key = std::str::from_utf8(raw)
                    .map_err(|_| PeerError::Invalid(format!("entry {} has a key that is not UTF-8", node.id)))?;
                Cell::Text(key.into())
            };
            let mut pending = Vec::new();
            let view = graph.view(node).map_err(data_err("reading an entry"))?;
            self.fill(view, &mut cells, &mut pending, 0)?;
            sink.row(t, &cells)?;
            rows[t] += 1;
            progress.inc(1);
            for (p, inner) in pending {
                self.load_collection(p, inner, Some(node.id.get() as i64), sink, rows, progress, depth + 1)?;
            }
        }
        Ok(())
    }

    /// Adds the entry counts of every collection under `node` (recursively) to `counts`.
    fn count(&mut self, node: NodeRef, counts: &mut [u64], depth: usize) -> Result<(), PeerError> {
        assert!(depth <= 4 * MAX_DEPTH, "node types nest deeper than the schema check allows");
        let schema = &*self.rs.schema;
        let graph = *self.graph;
        for &p in &schema.node_type(node.ty).properties {
            match &schema.property(p).kind {
                PropertyKind::Dictionary { .. } | PropertyKind::Matrix { .. } => {
                    let t = self.rs.table_of(p).expect("every collection has a table");
                    counts[t] += graph.count(node, p).map_err(data_err("reading an entry count"))?;
                    for entry in graph.entries(node, p).map_err(data_err("listing entries"))? {
                        let (_, e) = entry.map_err(data_err("listing entries"))?;
                        self.count(e, counts, depth + 1)?;
                    }
                }
                PropertyKind::Group { .. } => self.count(graph.group(node, p), counts, depth + 1)?,
                PropertyKind::StateGroup { .. } => {
                    let (_, state) = graph.state(node, p).map_err(data_err("reading a state"))?;
                    if let Storage::Record { .. } = schema.node_type(state.ty).storage {
                        self.count(state, counts, depth + 1)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Reads rows back as Espalier's node JSON (the dump shape that `get` replies with), so a
/// peer's data can be compared with Espalier's node by node.
pub struct NodeReader<'a> {
    rs: &'a RelationalSchema,
    conn: &'a mut dyn SqlConn,
}

impl<'a> NodeReader<'a> {
    /// A reader of `rs`'s tables over `conn`.
    pub fn new(rs: &'a RelationalSchema, conn: &'a mut dyn SqlConn) -> NodeReader<'a> {
        NodeReader { rs, conn }
    }

    /// The root node, with every collection in it.
    pub fn root(&mut self) -> Result<Value, PeerError> {
        let row = match self.rs.root_table {
            Some(t) => {
                let rows = self.select_row(t, ROOT_ID.get() as i64)?;
                rows.ok_or_else(|| PeerError::Mismatch("the root table has no row".into()))?
            }
            None => Vec::new(),
        };
        self.node(self.rs.root_table, ROOT, &row, ROOT_ID.get() as i64, 0)
    }

    /// The id of the entry with text key `key` in the top-level dictionary `table`.
    pub fn find(&mut self, table: TableId, key: &str) -> Result<Option<i64>, PeerError> {
        let t = &self.rs.tables[table];
        assert!(t.parent.is_none() && t.kind == TableKind::Dictionary, "find looks up top-level dictionary entries");
        let sql = format!("SELECT id FROM {} WHERE entry_key = $1", ident(&t.name));
        let rows = self.conn.query(&sql, &[SqlValue::Text(key.to_string())])?;
        Ok(rows.first().and_then(|r| r.first()).and_then(SqlValue::as_int))
    }

    /// The node of the entry with id `id` in `table`.
    pub fn entry(&mut self, table: TableId, id: i64) -> Result<Value, PeerError> {
        let row = self
            .select_row(table, id)?
            .ok_or_else(|| PeerError::Mismatch(format!("no row with id {id} in {}", self.rs.tables[table].name)))?;
        let ty = self.rs.tables[table].node_type;
        self.node(Some(table), ty, &row, id, 0)
    }

    fn select_row(&mut self, table: TableId, id: i64) -> Result<Option<Vec<SqlValue>>, PeerError> {
        let t = &self.rs.tables[table];
        let cols: Vec<String> = t.column_names().iter().map(|c| ident(c)).collect();
        let sql = format!("SELECT {} FROM {} WHERE id = $1", cols.join(", "), ident(&t.name));
        let mut rows = self.conn.query(&sql, &[SqlValue::Int(id)])?;
        if rows.len() > 1 {
            return Err(PeerError::Mismatch(format!("{} rows with id {id} in {}", rows.len(), t.name)));
        }
        Ok(rows.pop())
    }

    fn value(&self, table: Option<TableId>, row: &[SqlValue], property: PropertyId) -> Result<SqlValue, PeerError> {
        let (t, c) = self.rs.column_of(property).expect("every value property has a column");
        assert_eq!(Some(t), table, "a property read from the row of another table");
        let tab = &self.rs.tables[t];
        row.get(tab.lead() + c).cloned().ok_or_else(|| PeerError::Mismatch(format!("row of {} is too short", tab.name)))
    }

    fn node(
        &mut self,
        table: Option<TableId>,
        ty: NodeTypeId,
        row: &[SqlValue],
        row_id: i64,
        depth: usize,
    ) -> Result<Value, PeerError> {
        if depth > 4 * MAX_DEPTH {
            return Err(PeerError::Invalid("node nests too deep to read".into()));
        }
        let schema = self.rs.schema.clone();
        let mut obj = Map::new();
        for &p in &schema.node_type(ty).properties {
            let prop = schema.property(p);
            let bad =
                |what: &str, v: &SqlValue| PeerError::Mismatch(format!("column of '{}' holds {what} {v:?}", prop.name));
            let v = match &prop.kind {
                PropertyKind::Number => match self.value(table, row, p)? {
                    SqlValue::Int(i) => Value::from(i),
                    other => return Err(bad("a non-number", &other)),
                },
                PropertyKind::Text => match self.value(table, row, p)? {
                    SqlValue::Text(t) => Value::from(t),
                    other => return Err(bad("a non-text", &other)),
                },
                PropertyKind::Reference { .. } => {
                    let (t, c) = self.rs.column_of(p).expect("reference column");
                    let ColumnKind::Reference { target, key_arity } = self.rs.tables[t].columns[c].kind else {
                        unreachable!("a reference property has a reference column")
                    };
                    match self.value(table, row, p)? {
                        SqlValue::Int(id) => self.key(target, id, key_arity)?,
                        other => return Err(bad("a non-id", &other)),
                    }
                }
                PropertyKind::Group { node } => self.node(table, *node, row, row_id, depth + 1)?,
                PropertyKind::StateGroup { states } => {
                    let index = match self.value(table, row, p)? {
                        SqlValue::Int(i) => i,
                        other => return Err(bad("a non-state", &other)),
                    };
                    let state = usize::try_from(index)
                        .ok()
                        .and_then(|i| states.get(i))
                        .ok_or_else(|| bad("an unknown state", &SqlValue::Int(index)))?;
                    let mut m = Map::new();
                    m.insert(state.name.clone(), self.node(table, state.node, row, row_id, depth + 1)?);
                    Value::Object(m)
                }
                PropertyKind::Dictionary { node } => {
                    let child = self.rs.table_of(p).expect("collection table");
                    let mut entries = self.children(child, row_id)?;
                    entries.sort_by(|a, b| a.1.as_text().cmp(&b.1.as_text()));
                    let mut m = Map::new();
                    for (id, key) in entries {
                        let SqlValue::Text(k) = key else { return Err(bad("a non-text key", &key)) };
                        let r = self.select_row(child, id)?.expect("the row just listed");
                        m.insert(k, self.node(Some(child), *node, &r, id, depth + 1)?);
                    }
                    Value::Object(m)
                }
                PropertyKind::Matrix { node, .. } => {
                    let child = self.rs.table_of(p).expect("collection table");
                    let TableKind::Matrix { target, key_arity } = self.rs.tables[child].kind else {
                        unreachable!("a matrix property has a matrix table")
                    };
                    let mut keyed = Vec::new();
                    for (id, t) in self.children(child, row_id)? {
                        let SqlValue::Int(tid) = t else { return Err(bad("a non-id matrix key", &t)) };
                        keyed.push((self.key(target, tid, key_arity)?, id));
                    }
                    keyed.sort_by(|a, b| key_order(&a.0, &b.0));
                    let mut list = Vec::with_capacity(keyed.len());
                    for (key, id) in keyed {
                        let r = self.select_row(child, id)?.expect("the row just listed");
                        list.push(Value::Array(vec![key, self.node(Some(child), *node, &r, id, depth + 1)?]));
                    }
                    Value::Array(list)
                }
            };
            obj.insert(prop.name.clone(), v);
        }
        Ok(Value::Object(obj))
    }

    /// (id, key or target id) of the rows of `table` under `parent`.
    fn children(&mut self, table: TableId, parent: i64) -> Result<Vec<(i64, SqlValue)>, PeerError> {
        let t = &self.rs.tables[table];
        let key = if matches!(t.kind, TableKind::Matrix { .. }) { "target_id" } else { "entry_key" };
        let rows = match t.parent {
            Some(_) => self.conn.query(
                &format!("SELECT id, {key} FROM {} WHERE parent_id = $1", ident(&t.name)),
                &[SqlValue::Int(parent)],
            )?,
            None => self.conn.query(&format!("SELECT id, {key} FROM {}", ident(&t.name)), &[])?,
        };
        if rows.len() > MAX_READ_CHILDREN {
            return Err(PeerError::Invalid(format!("{} has more than {MAX_READ_CHILDREN} rows to read", t.name)));
        }
        rows.into_iter()
            .map(|mut r| {
                let k = r.pop().unwrap_or(SqlValue::Null);
                match r.pop() {
                    Some(SqlValue::Int(id)) => Ok((id, k)),
                    other => Err(PeerError::Mismatch(format!("{} has a row with id {other:?}", t.name))),
                }
            })
            .collect()
    }

    /// The KEY (dump notation) of row `id` of dictionary table `table`: its key, preceded by
    /// the keys of its enclosing entries for a compound key.
    fn key(&mut self, table: TableId, id: i64, arity: usize) -> Result<Value, PeerError> {
        let mut parts = Vec::with_capacity(arity);
        let (mut t, mut at) = (table, id);
        for _ in 0..arity {
            let tab = &self.rs.tables[t];
            let sql = match tab.parent {
                Some(_) => format!("SELECT entry_key, parent_id FROM {} WHERE id = $1", ident(&tab.name)),
                None => format!("SELECT entry_key FROM {} WHERE id = $1", ident(&tab.name)),
            };
            let rows = self.conn.query(&sql, &[SqlValue::Int(at)])?;
            let row = rows
                .first()
                .ok_or_else(|| PeerError::Mismatch(format!("reference to missing row {at} of {}", tab.name)))?;
            match row.first() {
                Some(SqlValue::Text(k)) => parts.push(k.clone()),
                other => return Err(PeerError::Mismatch(format!("{} row {at} has key {other:?}", tab.name))),
            }
            if parts.len() == arity {
                break;
            }
            match (tab.parent, row.get(1)) {
                (Some(p), Some(SqlValue::Int(pid))) => {
                    t = p;
                    at = *pid;
                }
                _ => return Err(PeerError::Mismatch(format!("compound key of {} row {id} ends early", tab.name))),
            }
        }
        parts.reverse();
        Ok(if arity == 1 { Value::from(parts.remove(0)) } else { Value::from(parts) })
    }
}

/// Component-wise byte order of KEYs (strings, or arrays of strings), as the dump sorts them.
fn key_order(a: &Value, b: &Value) -> std::cmp::Ordering {
    fn parts(v: &Value) -> Vec<&str> {
        match v {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }
    parts(a).cmp(&parts(b))
}

/// Where two JSON values first differ, as `/path: left vs right` (for mismatch messages).
pub fn first_difference(a: &Value, b: &Value) -> Option<String> {
    fn walk(a: &Value, b: &Value, path: &mut String, depth: usize) -> Option<String> {
        if a == b {
            return None;
        }
        let here = |path: &str| {
            let show = |v: &Value| {
                let s = v.to_string();
                if s.len() > 300 {
                    format!("{}…", s.chars().take(300).collect::<String>())
                } else {
                    s
                }
            };
            Some(format!("at {}: {} vs {}", if path.is_empty() { "/" } else { path }, show(a), show(b)))
        };
        if depth > 256 {
            return here(path);
        }
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (k, va) in x {
                    let len = path.len();
                    path.push('/');
                    path.push_str(k);
                    let d = match y.get(k) {
                        Some(vb) => walk(va, vb, path, depth + 1),
                        None => Some(format!("at {path}: present vs missing")),
                    };
                    path.truncate(len);
                    if d.is_some() {
                        return d;
                    }
                }
                y.keys().find(|k| !x.contains_key(*k)).map(|k| format!("at {path}/{k}: missing vs present"))
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                    let len = path.len();
                    let _ = write!(path, "/{i}");
                    let d = walk(va, vb, path, depth + 1);
                    path.truncate(len);
                    if d.is_some() {
                        return d;
                    }
                }
                None
            }
            _ => here(path),
        }
    }
    walk(a, b, &mut String::new(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(src: &str) -> RelationalSchema {
        let schema = espalier_schema::compile(src).expect("test schema compiles");
        RelationalSchema::new(Arc::new(schema)).expect("relational schema")
    }

    #[test]
    fn names_are_sanitised_unique_and_short() {
        assert_eq!(sanitize("Added Materials"), "added_materials");
        assert_eq!(sanitize("E-mail"), "e_mail");
        assert_eq!(sanitize("1st"), "p_1st");
        assert_eq!(sanitize("--"), "x");
        let mut taken = HashSet::new();
        assert_eq!(unique_name(&["a b"], &mut taken), "a_b");
        assert_eq!(unique_name(&["a", "b"], &mut taken), "a_b_2");
        let long = "x".repeat(200);
        let n1 = unique_name(&[&long, "one"], &mut taken);
        let n2 = unique_name(&[&long, "two"], &mut taken);
        assert!(n1.len() <= MAX_IDENT && n2.len() <= MAX_IDENT && n1 != n2, "{n1} {n2}");
    }

    #[test]
    fn states_become_conditional_columns_and_collections_tables() {
        let r = rs(include_str!("../../../schema/tests/models/products.alan"));
        let (_, products) = r.table("products").expect("products table");
        let names: Vec<&str> = products.column_names();
        assert_eq!(
            names,
            [
                "id",
                "entry_key",
                "price",
                "description",
                "type",
                "type_book_author",
                "type_book_title",
                "type_book_publication_date",
                "type_album_artist",
                "type_album_title"
            ]
        );
        let author = products.column("type_book_author").expect("author column");
        assert_eq!(author.condition, Some((2, 0)));
        let (tl, track_list) = r.table("products_type_album_track_list").expect("nested table");
        assert_eq!(track_list.parent, r.table("products").map(|(i, _)| i));
        assert_eq!(track_list.column_names(), ["id", "parent_id", "entry_key", "name", "duration"]);
        assert!(r.root_table.is_none(), "the root has no properties of its own");
        let ddl = r.create_tables(Dialect::Postgres).join(";\n");
        assert!(ddl.contains("CHECK (CASE WHEN \"type\" = 0 THEN \"type_book_author\" IS NOT NULL"), "{ddl}");
        let after = r.after_load(Dialect::Postgres).join(";\n");
        assert!(
            after.contains(&format!("ALTER TABLE \"{}\" ADD FOREIGN KEY (parent_id)", r.tables[tl].name)),
            "{after}"
        );
    }

    #[test]
    fn root_properties_and_compound_matrix_keys() {
        let r = rs(include_str!("../../../schema/tests/models/compound_key.alan"));
        let root = r.root_table.expect("the root has a reference of its own");
        assert_eq!(r.tables[root].column_names(), ["id", "settings_mode", "settings_default_template", "top_line"]);
        let (_, parcels) = r.table("shipments_parcels").expect("matrix table");
        let lines = r.table("orders_lines").map(|(i, _)| i);
        assert_eq!(Some(parcels.kind.clone()), lines.map(|t| TableKind::Matrix { target: t, key_arity: 2 }));
        assert!(r.table("settings_mode_automatic_templates").is_some_and(|(_, t)| t.parent.is_none()));
    }

    #[test]
    fn first_difference_names_the_path() {
        let a = serde_json::json!({"x": {"y": [1, 2]}, "z": "a"});
        let b = serde_json::json!({"x": {"y": [1, 3]}, "z": "a"});
        assert_eq!(first_difference(&a, &b).as_deref(), Some("at /x/y/1: 2 vs 3"));
        assert_eq!(first_difference(&a, &a), None);
    }
}
