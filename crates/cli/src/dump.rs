//! `espalier export`, `import` and `check`: the data crate's dump and integrity check, with
//! progress bars on a terminal.

use std::fs::File;
use std::io::{BufReader, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use espalier_data::{DumpError, ImportStats};
use espalier_transaction::{TxError, WriteGraph};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::{db, ExportArgs, Failure, Global};

/// A progress bar on standard error, hidden when standard error is not a terminal.
pub(crate) fn bar(len: Option<u64>, template: &str) -> ProgressBar {
    let target =
        if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let bar = ProgressBar::with_draw_target(len, target);
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

pub fn export(g: &Global, args: &ExportArgs) -> Result<(), Failure> {
    let engine = db::open(g)?;
    let snapshot = engine.database().snapshot().map_err(|e| Failure::other(format!("reading the database: {e}")))?;
    let version = snapshot.version().map_err(|e| Failure::other(format!("reading the database: {e}")))?;
    let graph = snapshot.graph();
    let progress = bar(None, "{spinner} exporting: {human_pos} nodes ({per_sec}) {elapsed}");
    let mut report = |n: u64| progress.set_position(n);
    let nodes = match &args.file {
        None => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            espalier_data::export(&graph, version, &mut out, &mut report)
                .map_err(|e| export_error(e, "standard output"))?
        }
        Some(path) => {
            // Written next to the target and renamed into place, so a failed export leaves no
            // truncated file behind.
            let dir = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let mut tmp = tempfile::NamedTempFile::new_in(dir)
                .map_err(|e| Failure::other(format!("creating a file in {}: {e}", dir.display())))?;
            let nodes = espalier_data::export(&graph, version, tmp.as_file_mut(), &mut report)
                .map_err(|e| export_error(e, &path.display().to_string()))?;
            tmp.as_file_mut().sync_all().map_err(|e| Failure::other(format!("writing {}: {e}", path.display())))?;
            tmp.persist(path).map_err(|e| Failure::other(format!("writing {}: {}", path.display(), e.error)))?;
            nodes
        }
    };
    progress.finish_and_clear();
    if let Some(path) = &args.file {
        eprintln!("exported {nodes} nodes (version {version}) to {}", path.display());
    }
    Ok(())
}

fn export_error(e: DumpError, to: &str) -> Failure {
    match e {
        // A closed pipe (`espalier export | head`) is the reader's choice, not a failure.
        DumpError::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe => Failure::Exit(0),
        other => Failure::other(format!("exporting to {to}: {other}")),
    }
}

/// Why the import's write did not commit.
#[derive(Debug)]
enum ImportError {
    Dump(DumpError),
    Tx(TxError),
}

impl From<TxError> for ImportError {
    fn from(e: TxError) -> ImportError {
        ImportError::Tx(e)
    }
}

impl From<espalier_data::DataError> for ImportError {
    fn from(e: espalier_data::DataError) -> ImportError {
        ImportError::Dump(DumpError::Data(e))
    }
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImportError::Dump(e) => write!(f, "{e}"),
            ImportError::Tx(e) => write!(f, "{e}"),
        }
    }
}

pub fn import(g: &Global, path: &Path) -> Result<(), Failure> {
    let stats = import_to(g, &g.db, path)?;
    if g.json {
        println!(
            "{}",
            serde_json::json!({
                "database": g.db.display().to_string(),
                "nodes": stats.nodes,
                "references": stats.references,
                "bytes": stats.bytes,
                "dump_version": stats.version,
            })
        );
    } else {
        eprintln!(
            "imported {} nodes and {} references ({} bytes, dump of version {}) into {}",
            stats.nodes,
            stats.references,
            stats.bytes,
            stats.version,
            g.db.display()
        );
    }
    Ok(())
}

/// Creates the database `target` from the dump at `path` (built in a temporary directory and
/// moved into place only when complete).
pub(crate) fn import_to(g: &Global, target: &Path, path: &Path) -> Result<ImportStats, Failure> {
    let name = path.display().to_string();
    db::refuse_existing(target)?;
    let size = std::fs::metadata(path).map_err(|e| Failure::other(format!("reading {name}: {e}")))?.len();
    let schema = dump_schema(path)?;
    let progress = bar(Some(size), "{spinner} importing: {bar:30} {bytes}/{total_bytes} ({bytes_per_sec}) {elapsed}");
    let mut stats = ImportStats::default();
    let result = db::create_atomically(g, target, &schema, &format!("{name} (its schema)"), |engine| {
        let committed = engine
            .database()
            .write(|wg: &mut WriteGraph<'_, '_>| -> Result<ImportStats, ImportError> {
                // This closure runs again if the map had to grow: read the file from the start.
                progress.set_position(0);
                let file = File::open(path).map_err(|e| ImportError::Dump(DumpError::Io(e)))?;
                espalier_data::import(wg, file, &mut |bytes| progress.set_position(bytes)).map_err(ImportError::Dump)
            })
            .map_err(|e| Failure::other(format!("importing {name}: {e}; no database was created")))?;
        stats = committed.value;
        restore_version(engine, stats.version)
            .map_err(|e| Failure::other(format!("importing {name}: setting the version: {e}; no database was created")))
    });
    progress.finish_and_clear();
    result?;
    Ok(stats)
}

/// Gives the new database the version of the dump it was made from, so that versions go on
/// from where the exported database was and exporting the import gives the same bytes. Only
/// for a database no one else has open (the import's staging directory).
fn restore_version(engine: &espalier_instruction::Engine, version: u64) -> Result<(), String> {
    engine.database().set_version(version).map_err(|e| e.to_string())
}

/// The `schema` member of a dump, read without reading the data after it (the exporter writes
/// it second).
fn dump_schema(path: &Path) -> Result<String, Failure> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| Failure::other(format!("reading {name}: {e}")))?;
    let mut de = serde_json::Deserializer::from_reader(BufReader::new(file));
    let mut found = None;
    let result = Header { schema: &mut found }.deserialize(&mut de);
    match (found, result) {
        (Some(schema), _) => Ok(schema),
        (None, Err(e)) => Err(Failure::other(format!("{name} is not an espalier dump: {e}"))),
        (None, Ok(())) => Err(Failure::other(format!("{name} is not an espalier dump: it has no \"schema\" member"))),
    }
}

/// Reads the top-level object up to its `schema` member, then stops (with an error that
/// [`dump_schema`] ignores once the schema is found).
struct Header<'a> {
    schema: &'a mut Option<String>,
}

const STOP: &str = "stop after the schema";

impl<'de> DeserializeSeed<'de> for Header<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Header<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a dump object {\"espalier_dump\": 1, \"schema\": \"...\", ...}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "schema" {
                *self.schema = Some(map.next_value::<String>()?);
                return Err(serde::de::Error::custom(STOP));
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

pub fn check(g: &Global) -> Result<(), Failure> {
    let engine = db::open(g)?;
    let snapshot = engine.database().snapshot().map_err(|e| Failure::other(format!("reading the database: {e}")))?;
    let version = snapshot.version().map_err(|e| Failure::other(format!("reading the database: {e}")))?;
    let progress = bar(None, "{spinner} checking: {human_pos} records and rows ({per_sec}) {elapsed}");
    let report = espalier_data::check(&snapshot.graph(), &mut |n| progress.set_position(n));
    progress.finish_and_clear();
    let report = report.map_err(|e| Failure::other(format!("checking {}: {e}", g.db.display())))?;
    let recovered = engine.database().recovered();
    let ok = report.is_ok();
    let mut out = std::io::stdout().lock();
    if g.json {
        let json = serde_json::json!({
            "database": g.db.display().to_string(),
            "version": version,
            "records": report.records,
            "entries": report.entries,
            "links": report.links,
            "strings": report.strings,
            "index_rows": report.index_rows,
            "problems": report.problems,
            "log": {
                "commits_replayed": recovered.commits,
                "bytes": recovered.log_bytes,
                "torn_write_cut": recovered.torn.as_ref().map(|(segment, offset)| serde_json::json!({
                    "segment": segment.display().to_string(),
                    "offset": offset,
                })),
            },
        });
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&json).unwrap_or_default());
    } else {
        let _ = writeln!(out, "{} at version {version}", g.db.display());
        let _ = writeln!(out, "  records: {}", report.records);
        let _ = writeln!(out, "  entries: {}", report.entries);
        let _ = writeln!(out, "  links:   {}", report.links);
        let _ = writeln!(out, "  strings: {}", report.strings);
        let _ = writeln!(out, "  index rows: {}", report.index_rows);
        let _ = writeln!(out, "  log: {} commits replayed ({} bytes)", recovered.commits, recovered.log_bytes);
        if let Some((segment, offset)) = &recovered.torn {
            let _ = writeln!(
                out,
                "  recovery: cut an incomplete last write at {} offset {offset} (a crash during a write; it was \
                 never acknowledged)",
                segment.display()
            );
        }
        for p in &report.problems {
            let _ = writeln!(out, "problem: {p}");
        }
        if ok {
            let _ = writeln!(out, "ok: no problems");
        } else {
            let n = report.problems.len();
            let _ = writeln!(out, "{n} {}", if n == 1 { "problem" } else { "problems" });
        }
    }
    let _ = out.flush();
    if ok {
        Ok(())
    } else {
        Err(Failure::Exit(1))
    }
}
