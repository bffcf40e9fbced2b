//! `espalier migrate NEW_SCHEMA`: changes the schema of a database that holds data, as a
//! transformation of its dump: export (one snapshot, the database held by this process
//! throughout), map every node from the old schema to the new one, import the result into a
//! new directory (one write transaction, every reference and invariant checked again), then
//! switch the directories. Nothing here depends on how the data is stored.
//!
//! What maps: a property or state of the same name and kind; one renamed with `--rename
//! OLD=NEW` (names of properties and states; a rename applies wherever the old name is not also
//! in the new node type); a new property takes its kind's default (0, "", the first state,
//! empty collections); a new state needs nothing. A property the new schema drops is lost only
//! if some node holds a value other than the default: then the migration is refused, naming
//! the property, how many nodes hold a value and one of them, unless `--allow-loss NAME` names
//! it. What cannot map is refused with its reason and place: a kind that changes, a state in
//! use that is gone, a new reference (existing nodes would need a target).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use espalier_schema::{NodeTypeId, PropertyKind, Schema};
use serde_json::{Map, Value};

use crate::{db, Failure, Global, MigrateArgs};

/// Why the dump cannot be mapped to the new schema.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("--rename {0:?}: give OLD=NEW, two names")]
    BadRename(String),
    #[error("--rename '{old}'='{new}': {reason}")]
    UnusedRename { old: String, new: String, reason: String },
    #[error("--allow-loss '{0}': the old schema has no property or state of that name")]
    UnusedAllowance(String),
    #[error("{path}: {reason}")]
    Refused { path: String, reason: String },
    #[error("the migration would lose data; nothing was changed:\n{}", .0.join("\n"))]
    Loss(Vec<String>),
    #[error("the dump does not have the shape of its schema at {0}")]
    Shape(String),
}

struct Mapper<'a> {
    old: &'a Schema,
    new: &'a Schema,
    renames: HashMap<String, String>,
    allow: HashSet<String>,
    /// Property name → (nodes holding a value, first path), for dropped properties.
    losses: BTreeMap<String, (u64, String)>,
    used_renames: HashSet<String>,
    used_allow: HashSet<String>,
}

fn shape(path: &str) -> MigrateError {
    MigrateError::Shape(path.to_string())
}

impl Mapper<'_> {
    /// The old name whose value goes to the new property `name` of `old_nt`, if any.
    fn source(&mut self, old_nt: NodeTypeId, new_nt: NodeTypeId, name: &str) -> Option<String> {
        let old_type = self.old.node_type(old_nt);
        // A rename OLD → name applies where OLD exists here and is not kept under its own name.
        for (o, n) in &self.renames {
            if n == name && old_type.by_name.contains_key(o) && !self.new.node_type(new_nt).by_name.contains_key(o) {
                self.used_renames.insert(o.clone());
                return Some(o.clone());
            }
        }
        let kept_elsewhere = self.renames.get(name).is_some_and(|n| self.new.node_type(new_nt).by_name.contains_key(n));
        (old_type.by_name.contains_key(name) && !kept_elsewhere).then(|| name.to_string())
    }

    fn node(
        &mut self,
        old_nt: NodeTypeId,
        new_nt: NodeTypeId,
        value: Value,
        path: &str,
    ) -> Result<Value, MigrateError> {
        let Value::Object(mut old) = value else { return Err(shape(path)) };
        let mut out = Map::new();
        let mut consumed = HashSet::new();
        for pid in self.new.node_type(new_nt).properties.clone() {
            let np = self.new.property(pid).clone();
            let here = format!("{path} '{}'", np.name);
            let Some(src) = self.source(old_nt, new_nt, &np.name) else {
                out.insert(np.name.clone(), self.default(&np.kind, &here)?);
                continue;
            };
            consumed.insert(src.clone());
            let op = self.old.property(self.old.node_type(old_nt).by_name[&src]).clone();
            let v = old.remove(&src).ok_or_else(|| shape(&here))?;
            out.insert(np.name.clone(), self.value(&op.kind, &np.kind, v, &here)?);
        }
        for pid in self.old.node_type(old_nt).properties.clone() {
            let op = self.old.property(pid).clone();
            if consumed.contains(&op.name) {
                continue;
            }
            let v = old.remove(&op.name).ok_or_else(|| shape(path))?;
            if !self.is_default(&op.kind, &v) && op.derived.is_none() {
                if self.allow.contains(&op.name) {
                    self.used_allow.insert(op.name.clone());
                } else {
                    let e = self.losses.entry(op.name.clone()).or_insert((0, format!("{path} '{}'", op.name)));
                    e.0 += 1;
                }
            }
        }
        Ok(Value::Object(out))
    }

    fn value(&mut self, old: &PropertyKind, new: &PropertyKind, v: Value, path: &str) -> Result<Value, MigrateError> {
        match (old, new) {
            (PropertyKind::Number, PropertyKind::Number)
            | (PropertyKind::Text, PropertyKind::Text)
            | (PropertyKind::Reference { .. }, PropertyKind::Reference { .. }) => Ok(v),
            (PropertyKind::Group { node: o }, PropertyKind::Group { node: n }) => self.node(*o, *n, v, path),
            (PropertyKind::Dictionary { node: o }, PropertyKind::Dictionary { node: n }) => {
                let Value::Object(entries) = v else { return Err(shape(path)) };
                let mut out = Map::new();
                for (key, entry) in entries {
                    let p = format!("{path} : {key:?}");
                    out.insert(key, self.node(*o, *n, entry, &p)?);
                }
                Ok(Value::Object(out))
            }
            (PropertyKind::Matrix { node: o, .. }, PropertyKind::Matrix { node: n, .. }) => {
                let Value::Array(entries) = v else { return Err(shape(path)) };
                let mut out = Vec::new();
                for pair in entries {
                    let Value::Array(mut kv) = pair else { return Err(shape(path)) };
                    if kv.len() != 2 {
                        return Err(shape(path));
                    }
                    let node = kv.pop().unwrap_or(Value::Null);
                    let key = kv.pop().unwrap_or(Value::Null);
                    let p = format!("{path} : {key}");
                    let node = self.node(*o, *n, node, &p)?;
                    out.push(Value::Array(vec![key, node]));
                }
                Ok(Value::Array(out))
            }
            (PropertyKind::StateGroup { states: os }, PropertyKind::StateGroup { states: ns }) => {
                let Value::Object(one) = v else { return Err(shape(path)) };
                let Some((state, node)) = one.into_iter().next() else { return Err(shape(path)) };
                let old_state = os.iter().find(|s| s.name == state).ok_or_else(|| shape(path))?;
                let renamed = self.renames.get(&state).and_then(|n| ns.iter().find(|s| &s.name == n));
                let target = match renamed {
                    Some(s) => {
                        self.used_renames.insert(state.clone());
                        s
                    }
                    None => ns.iter().find(|s| s.name == state).ok_or_else(|| MigrateError::Refused {
                        path: path.to_string(),
                        reason: format!(
                            "is in state '{state}', which the new schema does not have (keep it under another \
                             name with --rename '{state}'='NEW')"
                        ),
                    })?,
                };
                let p = format!("{path} ? '{}'", target.name);
                let mapped = self.node(old_state.node, target.node, node, &p)?;
                let mut out = Map::new();
                out.insert(target.name.clone(), mapped);
                Ok(Value::Object(out))
            }
            (o, n) => Err(MigrateError::Refused {
                path: path.to_string(),
                reason: format!(
                    "changes from {} to {}: a migration keeps each property's kind",
                    o.keyword(),
                    n.keyword()
                ),
            }),
        }
    }

    fn default(&mut self, kind: &PropertyKind, path: &str) -> Result<Value, MigrateError> {
        Ok(match kind {
            PropertyKind::Number => Value::from(0),
            PropertyKind::Text => Value::from(""),
            PropertyKind::Group { node } => self.default_node(*node, path)?,
            PropertyKind::Dictionary { .. } => Value::Object(Map::new()),
            PropertyKind::Matrix { .. } => Value::Array(vec![]),
            PropertyKind::Reference { .. } => {
                return Err(MigrateError::Refused {
                    path: path.to_string(),
                    reason: "is a new reference: the existing nodes would need a target (add it as a new \
                             collection's property, or give it in a later update)"
                        .into(),
                })
            }
            PropertyKind::StateGroup { states } => {
                let Some(first) = states.first() else { return Err(shape(path)) };
                let mut m = Map::new();
                m.insert(first.name.clone(), self.default_node(first.node, path)?);
                Value::Object(m)
            }
        })
    }

    fn default_node(&mut self, nt: NodeTypeId, path: &str) -> Result<Value, MigrateError> {
        let mut m = Map::new();
        for pid in self.new.node_type(nt).properties.clone() {
            let p = self.new.property(pid).clone();
            m.insert(p.name.clone(), self.default(&p.kind, &format!("{path} '{}'", p.name))?);
        }
        Ok(Value::Object(m))
    }

    /// Whether an old value is its kind's default (dropping it loses nothing).
    fn is_default(&self, kind: &PropertyKind, v: &Value) -> bool {
        match (kind, v) {
            (PropertyKind::Number, Value::Number(n)) => n.as_i64() == Some(0),
            (PropertyKind::Text, Value::String(s)) => s.is_empty(),
            (PropertyKind::Dictionary { .. }, Value::Object(m)) => m.is_empty(),
            (PropertyKind::Matrix { .. }, Value::Array(a)) => a.is_empty(),
            (PropertyKind::Group { node }, Value::Object(m)) => self.node_is_default(*node, m),
            (PropertyKind::StateGroup { states }, Value::Object(m)) => match (states.first(), m.iter().next()) {
                (Some(first), Some((name, Value::Object(node)))) => {
                    *name == first.name && self.node_is_default(first.node, node)
                }
                _ => false,
            },
            _ => false,
        }
    }

    fn node_is_default(&self, nt: NodeTypeId, m: &Map<String, Value>) -> bool {
        self.old.node_type(nt).properties.iter().all(|pid| {
            let p = self.old.property(*pid);
            m.get(&p.name).is_some_and(|v| self.is_default(&p.kind, v))
        })
    }
}

/// Maps a whole dump (as JSON) to the new schema: its version and its new root node.
pub fn map_dump(
    dump: Value,
    old: &Schema,
    new: &Schema,
    renames: &[String],
    allow: &[String],
) -> Result<(u64, Value), MigrateError> {
    let mut rename_map = HashMap::new();
    for r in renames {
        let (o, n) = r.split_once('=').ok_or_else(|| MigrateError::BadRename(r.clone()))?;
        let (o, n) = (unquote(o), unquote(n));
        if o.is_empty() || n.is_empty() {
            return Err(MigrateError::BadRename(r.clone()));
        }
        rename_map.insert(o, n);
    }
    let mut m = Mapper {
        old,
        new,
        renames: rename_map,
        allow: allow.iter().map(|a| unquote(a)).collect(),
        losses: BTreeMap::new(),
        used_renames: HashSet::new(),
        used_allow: HashSet::new(),
    };
    // Names given that matched nothing are mistakes, not no-ops.
    for (o, n) in &m.renames.clone() {
        if !old.node_types_named(o) {
            return Err(MigrateError::UnusedRename {
                old: o.clone(),
                new: n.clone(),
                reason: format!("the old schema has no property or state '{o}'"),
            });
        }
        if !new.node_types_named(n) {
            return Err(MigrateError::UnusedRename {
                old: o.clone(),
                new: n.clone(),
                reason: format!("the new schema has no property or state '{n}'"),
            });
        }
    }
    for a in &m.allow.clone() {
        if !old.node_types_named(a) {
            return Err(MigrateError::UnusedAllowance(a.clone()));
        }
    }
    let Value::Object(mut top) = dump else { return Err(shape("the dump")) };
    let root = top.remove("root").ok_or_else(|| shape("the dump"))?;
    let root = m.node(old.root().id, new.root().id, root, "root")?;
    if !m.losses.is_empty() {
        let lines = m
            .losses
            .iter()
            .map(|(name, (n, first))| {
                format!(
                    "  '{name}' is not in the new schema and {n} node(s) hold a value (first: {first}); \
                     --allow-loss '{name}' drops it, or --rename '{name}'='NEW' keeps it"
                )
            })
            .collect();
        return Err(MigrateError::Loss(lines));
    }
    let version = top.remove("version").and_then(|v| v.as_u64()).unwrap_or(0);
    Ok((version, root))
}

/// `'Name'` or `Name` → `Name`.
fn unquote(s: &str) -> String {
    let s = s.trim();
    s.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')).unwrap_or(s).to_string()
}

trait Names {
    fn node_types_named(&self, name: &str) -> bool;
}

impl Names for Schema {
    /// Whether some property or state of the schema has this name.
    fn node_types_named(&self, name: &str) -> bool {
        self.properties.iter().any(|p| {
            p.name == name
                || matches!(&p.kind, PropertyKind::StateGroup { states } if states.iter().any(|s| s.name == name))
        })
    }
}

pub fn run(g: &Global, args: &MigrateArgs) -> Result<(), Failure> {
    let file = args.schema.display().to_string();
    let source = std::fs::read_to_string(&args.schema).map_err(|e| Failure::other(format!("reading {file}: {e}")))?;
    let new = crate::schema_cmd::compile_all(&source, &file).map_err(|rendered| {
        eprint!("{rendered}");
        Failure::other(format!("{file} does not compile; nothing was changed"))
    })?;
    // Held until the directories are switched: no one writes meanwhile.
    let engine = db::open(g)?;
    let snapshot = engine.database().snapshot().map_err(|e| Failure::other(format!("reading the database: {e}")))?;
    let version = snapshot.version().map_err(|e| Failure::other(format!("reading the database: {e}")))?;
    let mut dump = Vec::new();
    espalier_data::export(&snapshot.graph(), version, &mut dump, &mut |_| {})
        .map_err(|e| Failure::other(format!("exporting the database: {e}")))?;
    drop(snapshot);
    let old_schema = engine.database().schema().clone();
    if old_schema.source == new.source {
        eprintln!("{file} is the database's schema already; nothing to do");
        return Ok(());
    }
    let value: Value =
        serde_json::from_slice(&dump).map_err(|e| Failure::other(format!("reading the exported dump: {e}")))?;
    drop(dump);
    let mapped = map_dump(value, &old_schema, &new, &args.renames, &args.allow_loss)
        .map_err(|e| Failure::other(format!("migrating to {file}: {e}")))?;

    let parent = match g.db.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = g.db.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "espalier".into());
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}.migrate-"))
        .suffix(".json")
        .tempfile_in(&parent)
        .map_err(|e| Failure::other(format!("creating a file in {}: {e}", parent.display())))?;
    write_dump(tmp.as_file_mut(), &new.source, mapped.0, &mapped.1)
        .map_err(|e| Failure::other(format!("writing the migrated dump: {e}")))?;
    drop(mapped);
    let staging = parent.join(format!(".{name}.migrated-{}", std::process::id()));
    crate::dump::import_to(g, &staging, tmp.path()).map_err(|f| match f {
        Failure::Other(m) => Failure::Other(format!("migrating to {file}: {m}; nothing was changed")),
        f => f,
    })?;
    // Switch: the old directory aside, the new one in its place, the old one removed.
    let old_aside = parent.join(format!(".{name}.pre-migrate-{}", std::process::id()));
    std::fs::rename(&g.db, &old_aside).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staging);
        Failure::other(format!("moving {} aside: {e}; nothing was changed", g.db.display()))
    })?;
    if let Err(e) = std::fs::rename(&staging, &g.db) {
        let _ = std::fs::rename(&old_aside, &g.db);
        let _ = std::fs::remove_dir_all(&staging);
        return Err(Failure::other(format!("moving the migrated database into place: {e}; nothing was changed")));
    }
    sync_dir(&parent);
    drop(engine);
    let _ = std::fs::remove_dir_all(&old_aside);
    eprintln!("migrated {} to {file} (version {version})", g.db.display());
    Ok(())
}

/// The dump's members in the order the format requires (a JSON map would sort them).
fn write_dump(out: &mut std::fs::File, schema: &str, version: u64, root: &Value) -> std::io::Result<()> {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(out);
    write!(w, "{{\"espalier_dump\": 1, \"schema\": ")?;
    serde_json::to_writer(&mut w, schema)?;
    write!(w, ", \"version\": {version}, \"root\": ")?;
    serde_json::to_writer(&mut w, root)?;
    writeln!(w, "}}")?;
    w.flush()
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}
