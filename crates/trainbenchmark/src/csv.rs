//! Reads the official CSV form of a model (`railway-repair-1-Segment.csv`, …): one file per
//! node type, one per link type, every value double-quoted. It has no containment; it is the
//! relational view the SQLite cross-check starts from.

use std::io::Write as _;
use std::path::Path;

use crate::model::{Position, Signal, Tables};
use crate::ImportError;

/// The header of a file of ids.
const IDS: [&str; 1] = ["id:ID"];
/// The header of a link type's file.
const LINKS: [&str; 2] = ["id:START_ID", "id:END_ID"];
const ROUTE: [&str; 2] = ["id:ID", "active:BOOLEAN"];
const SEGMENT: [&str; 2] = ["id:ID", "length:INT"];
const SEMAPHORE: [&str; 2] = ["id:ID", "signal"];
const SWITCH: [&str; 2] = ["id:ID", "currentPosition"];
const SWITCH_POSITION: [&str; 2] = ["id:ID", "position"];

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
    for (line, r) in rows(dir, prefix, "Region", &IDS)? {
        t.regions.insert(num(&f("Region"), line, &r[0])?);
    }
    for (line, r) in rows(dir, prefix, "Route", &ROUTE)? {
        let active = match r[1].as_str() {
            "true" => true,
            "false" => false,
            other => return Err(ImportError::at(&f("Route"), line, format!("{other:?} is not a boolean"))),
        };
        t.routes.insert((num(&f("Route"), line, &r[0])?, active));
    }
    for (line, r) in rows(dir, prefix, "Segment", &SEGMENT)? {
        t.segments.insert((num(&f("Segment"), line, &r[0])?, num(&f("Segment"), line, &r[1])?));
    }
    for (line, r) in rows(dir, prefix, "Semaphore", &SEMAPHORE)? {
        let signal = Signal::parse(&r[1])
            .ok_or_else(|| ImportError::at(&f("Semaphore"), line, format!("{:?} is not a Signal", r[1])))?;
        t.semaphores.insert((num(&f("Semaphore"), line, &r[0])?, signal));
    }
    for (line, r) in rows(dir, prefix, "Sensor", &IDS)? {
        t.sensors.insert(num(&f("Sensor"), line, &r[0])?);
    }
    for (name, header, set) in
        [("Switch", SWITCH, &mut t.switches), ("SwitchPosition", SWITCH_POSITION, &mut t.switch_positions)]
    {
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
        for (line, r) in rows(dir, prefix, name, &LINKS)? {
            set.insert((num(&f(name), line, &r[0])?, num(&f(name), line, &r[1])?));
        }
    }
    Ok(t)
}

/// Writes `t` as the official CSV files `<dir>/<prefix>-Region.csv`, … — the form [`read`]
/// reads, every value double-quoted — for systems that load the model from them.
pub fn write(dir: &Path, prefix: &str, t: &Tables) -> std::io::Result<()> {
    let file = |name: &str, header: &[&str], rows: &mut dyn Iterator<Item = [String; 2]>, width: usize| {
        let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{prefix}-{name}.csv")))?);
        let quoted = |fields: &[String]| fields.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(",");
        let head: Vec<String> = header.iter().map(|h| h.to_string()).collect();
        writeln!(out, "{}", quoted(&head))?;
        for row in rows {
            writeln!(out, "{}", quoted(&row[..width]))?;
        }
        out.flush()
    };
    let id = |i: &u64| [i.to_string(), String::new()];
    file("Region", &IDS, &mut t.regions.iter().map(id), 1)?;
    file("Sensor", &IDS, &mut t.sensors.iter().map(id), 1)?;
    file("Route", &ROUTE, &mut t.routes.iter().map(|(i, a)| [i.to_string(), a.to_string()]), 2)?;
    file("Segment", &SEGMENT, &mut t.segments.iter().map(|(i, l)| [i.to_string(), l.to_string()]), 2)?;
    let named = |i: &u64, n: &str| [i.to_string(), n.to_string()];
    file("Semaphore", &SEMAPHORE, &mut t.semaphores.iter().map(|(i, s)| named(i, s.name())), 2)?;
    file("Switch", &SWITCH, &mut t.switches.iter().map(|(i, p)| named(i, p.name())), 2)?;
    file("SwitchPosition", &SWITCH_POSITION, &mut t.switch_positions.iter().map(|(i, p)| named(i, p.name())), 2)?;
    for (name, set) in t.links() {
        file(name, &LINKS, &mut set.iter().map(|(a, b)| [a.to_string(), b.to_string()]), 2)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_tables_read_back_the_same() {
        let t = crate::generate(crate::Scenario::Repair, 2).tables();
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "railway-repair-2", &t).unwrap();
        assert_eq!(read(dir.path(), "railway-repair-2").unwrap(), t);
    }
}
