//! Reads the official CSV form of a model (`railway-repair-1-Segment.csv`, …): one file per
//! node type, one per link type, every value double-quoted. It has no containment; it is the
//! relational view the SQLite cross-check starts from.

use std::path::Path;

use crate::model::{Position, Signal, Tables};
use crate::ImportError;

/// One file's rows, each a list of unquoted fields, after checking the header.
fn rows(dir: &Path, prefix: &str, name: &str, header: &[&str]) -> Result<Vec<(usize, Vec<String>)>, ImportError> {
    let file = dir.join(format!("{prefix}-{name}.csv"));
    let source = file.display().to_string();
    let text = std::fs::read_to_string(&file).map_err(|e| ImportError::at(&source, 0, format!("cannot read: {e}")))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let fields: Vec<String> = line
            .split(',')
            .map(|f| {
                f.strip_prefix('"')
                    .and_then(|f| f.strip_suffix('"'))
                    .map(str::to_string)
                    .ok_or_else(|| ImportError::at(&source, i + 1, format!("field {f:?} is not double-quoted")))
            })
            .collect::<Result<_, _>>()?;
        if i == 0 {
            if fields != header {
                return Err(ImportError::at(&source, 1, format!("header {fields:?}, expected {header:?}")));
            }
            continue;
        }
        if fields.len() != header.len() {
            return Err(ImportError::at(&source, i + 1, format!("{} fields, expected {}", fields.len(), header.len())));
        }
        out.push((i + 1, fields));
    }
    Ok(out)
}

fn num<T: std::str::FromStr>(file: &str, line: usize, field: &str) -> Result<T, ImportError> {
    field.parse().map_err(|_| ImportError::at(file, line, format!("{field:?} is not a number")))
}

/// Reads every table of model `prefix` (e.g. `railway-repair-1`) in `dir`.
pub fn read(dir: &Path, prefix: &str) -> Result<Tables, ImportError> {
    let mut t = Tables::default();
    let f = |name: &str| format!("{prefix}-{name}.csv");
    for (line, r) in rows(dir, prefix, "Region", &["id:ID"])? {
        t.regions.insert(num(&f("Region"), line, &r[0])?);
    }
    for (line, r) in rows(dir, prefix, "Route", &["id:ID", "active:BOOLEAN"])? {
        let active = match r[1].as_str() {
            "true" => true,
            "false" => false,
            other => return Err(ImportError::at(&f("Route"), line, format!("{other:?} is not a boolean"))),
        };
        t.routes.insert((num(&f("Route"), line, &r[0])?, active));
    }
    for (line, r) in rows(dir, prefix, "Segment", &["id:ID", "length:INT"])? {
        t.segments.insert((num(&f("Segment"), line, &r[0])?, num(&f("Segment"), line, &r[1])?));
    }
    for (line, r) in rows(dir, prefix, "Semaphore", &["id:ID", "signal"])? {
        let signal = Signal::parse(&r[1])
            .ok_or_else(|| ImportError::at(&f("Semaphore"), line, format!("{:?} is not a Signal", r[1])))?;
        t.semaphores.insert((num(&f("Semaphore"), line, &r[0])?, signal));
    }
    for (line, r) in rows(dir, prefix, "Sensor", &["id:ID"])? {
        t.sensors.insert(num(&f("Sensor"), line, &r[0])?);
    }
    for (name, header, set) in [
        ("Switch", ["id:ID", "currentPosition"], &mut t.switches),
        ("SwitchPosition", ["id:ID", "position"], &mut t.switch_positions),
    ] {
        for (line, r) in rows(dir, prefix, name, &header)? {
            let p = Position::parse(&r[1])
                .ok_or_else(|| ImportError::at(&f(name), line, format!("{:?} is not a Position", r[1])))?;
            set.insert((num(&f(name), line, &r[0])?, p));
        }
    }
    for (name, set) in [
        ("connectsTo", &mut t.connects_to),
        ("entry", &mut t.entry),
        ("exit", &mut t.exit),
        ("follows", &mut t.follows),
        ("monitoredBy", &mut t.monitored_by),
        ("requires", &mut t.requires),
        ("target", &mut t.target),
    ] {
        for (line, r) in rows(dir, prefix, name, &["id:START_ID", "id:END_ID"])? {
            set.insert((num(&f(name), line, &r[0])?, num(&f(name), line, &r[1])?));
        }
    }
    Ok(t)
}
