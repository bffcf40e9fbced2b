//! `espalier import --trainbenchmark PATH`: an official Train Benchmark model into a new
//! database of the railway schema, from its XMI file or from its CSV files (named by their
//! common prefix), with progress bars.

use std::path::Path;

use espalier_trainbenchmark::{load, read_csv_model, read_xmi, LoadError, Model, SCHEMA};

use crate::dump::bar;
use crate::{db, Failure, Global};

/// Reads the model at `path` and creates the database at `--db` holding it (moved into place
/// only when complete, as every import).
pub fn import(g: &Global, path: &Path) -> Result<(), Failure> {
    db::refuse_existing(&g.db)?;
    let reading = bar(None, "{spinner} reading {msg} {elapsed}");
    reading.set_message(path.display().to_string());
    let read = read(path);
    reading.finish_and_clear();
    let (model, source) = read?;
    let total = load::writes(&model) as u64;
    let progress = bar(Some(total), "{spinner} loading: {bar:30} {human_pos}/{human_len} writes ({per_sec}) {elapsed}");
    let result = db::create_atomically(g, &g.db, SCHEMA, "the railway schema", |engine| {
        engine
            .database()
            .write(|wg| -> Result<(), LoadError> {
                // This closure runs again if the map had to grow: the bar starts again too.
                progress.set_position(0);
                load::write_reporting(wg, &model, &mut |done, _| progress.set_position(done as u64))
            })
            .map_err(|e| Failure::other(format!("importing {source}: {e}; no database was created")))?;
        Ok(())
    });
    progress.finish_and_clear();
    result?;
    let nodes = model.size();
    if g.json {
        println!(
            "{}",
            serde_json::json!({
                "database": g.db.display().to_string(),
                "source": source,
                "elements": nodes,
                "regions": model.regions.len(),
                "routes": model.routes.len(),
            })
        );
    } else {
        eprintln!(
            "imported {nodes} elements ({} regions, {} routes) from {source} into {}",
            model.regions.len(),
            model.routes.len(),
            g.db.display()
        );
    }
    Ok(())
}

/// The model at `path` — an `.xmi` file, or the prefix `DIR/NAME` of the CSV files
/// `DIR/NAME-Region.csv`, … — and how to name it in messages.
fn read(path: &Path) -> Result<(Model, String), Failure> {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("xmi")) {
        let model = read_xmi(path).map_err(|e| Failure::other(format!("reading the XMI model: {e}")))?;
        return Ok((model, path.display().to_string()));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Some(prefix) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Err(Failure::other(format!("{}: give an .xmi file or the prefix of the CSV files", path.display())));
    };
    // The prefix may be given as one of its files: `railway-repair-1-Region.csv`.
    let prefix = prefix.strip_suffix("-Region.csv").map(str::to_string).unwrap_or(prefix);
    let region = dir.join(format!("{prefix}-Region.csv"));
    if !region.is_file() {
        return Err(Failure::other(format!(
            "{}: neither an .xmi file nor the prefix of CSV files ({} does not exist)",
            path.display(),
            region.display()
        )));
    }
    let model = read_csv_model(dir, &prefix).map_err(|e| Failure::other(format!("reading the CSV model: {e}")))?;
    Ok((model, format!("{}/{prefix}-*.csv", dir.display())))
}
