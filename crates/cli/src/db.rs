//! Opening databases, and creating them atomically: built in a temporary directory next to the
//! target, synced, then renamed into place, so a failure leaves nothing half-made.

use std::path::{Path, PathBuf};

use espalier_instruction::parse::ParseOptions;
use espalier_instruction::{parse_instructions, Engine, InstructionError};
use espalier_transaction::TxError;

use crate::{Failure, Global, InitArgs};

/// The demo schema (`demo/factory.alan`).
pub const DEMO_SCHEMA: &str = include_str!("../../../demo/factory.alan");
/// The demo data (`demo/data.alan`): instructions run in order by `init --demo`.
pub const DEMO_DATA: &str = include_str!("../../../demo/data.alan");

/// Opens the database at `--db`, with a helpful message if there is none.
pub fn open(g: &Global) -> Result<Engine, Failure> {
    if !espalier_transaction::Database::exists(&g.db) {
        return Err(Failure::other(format!(
            "no database at {}; create one with `espalier init --demo` or `espalier init --schema FILE` \
             (or point --db / ESPALIER_DB at an existing one)",
            g.db.display()
        )));
    }
    Engine::open(&g.db, g.options()).map_err(|e| match e {
        // Held by another process (a server, say): its message names the holder and what to do.
        InstructionError::Transaction(TxError::Locked(lock)) => Failure::other(lock.to_string()),
        e => Failure::other(format!("opening {}: {e}", g.db.display())),
    })
}

/// Fails if `path` already holds anything (a database or other files).
pub fn refuse_existing(path: &Path) -> Result<(), Failure> {
    if espalier_transaction::Database::exists(path) {
        return Err(Failure::other(format!(
            "{} already holds a database; refusing to overwrite it (remove it or choose another --db)",
            path.display()
        )));
    }
    match std::fs::read_dir(path) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Failure::other(format!(
                    "{} exists and is not empty; refusing to create a database there",
                    path.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) if path.exists() => {
            Err(Failure::other(format!("{} exists and is not a directory; refusing to overwrite it", path.display())))
        }
        Err(e) => Err(Failure::other(format!("{}: {e}", path.display()))),
    }
}

/// Creates a database at `target` from `schema_source`, lets `fill` load it, and moves it into
/// place only if everything succeeded. `file` names the schema in error messages.
pub fn create_atomically(
    g: &Global,
    target: &Path,
    schema_source: &str,
    file: &str,
    fill: impl FnOnce(&Engine) -> Result<(), Failure>,
) -> Result<(), Failure> {
    crate::schema_cmd::compile_all(schema_source, file).map_err(|rendered| {
        eprint!("{rendered}");
        Failure::other(format!("{file} does not compile; no database was created"))
    })?;
    refuse_existing(target)?;
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Failure::other(format!("creating {}: {e}", parent.display())))?;
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "espalier".into());
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}.partial-"))
        .tempdir_in(&parent)
        .map_err(|e| Failure::other(format!("creating a temporary directory in {}: {e}", parent.display())))?;
    {
        let engine = Engine::create(staging.path(), schema_source, g.options())
            .map_err(|e| Failure::other(format!("creating the database: {e}")))?;
        fill(&engine)?;
        engine.database().sync().map_err(|e| Failure::other(format!("syncing the new database: {e}")))?;
    }
    // Checked again: someone may have created it meanwhile.
    refuse_existing(target)?;
    let staged = staging.keep();
    std::fs::rename(&staged, target).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staged);
        Failure::other(format!("moving the new database to {}: {e}", target.display()))
    })?;
    Ok(())
}

/// Runs every instruction of `source` (text, one or more) in order; stops at the first failure.
pub fn run_all(
    engine: &Engine,
    source: &str,
    params: &std::collections::HashMap<String, espalier_instruction::ParamValue>,
    mut each: impl FnMut(&espalier_instruction::Reply),
) -> Result<(), Failure> {
    let list = parse_instructions(source, ParseOptions::CLIENT)
        .map_err(|e| Failure::Instruction(InstructionError::Parse(e), Some(source.to_string())))?;
    for instr in list {
        let plan = engine.check(&instr.item, Some(source)).map_err(|e| Failure::Instruction(e, Some(source.into())))?;
        let reply = engine.run(&plan, params, None).map_err(|e| Failure::Instruction(e, Some(source.into())))?;
        each(&reply);
    }
    Ok(())
}

pub fn init(g: &Global, args: &InitArgs) -> Result<(), Failure> {
    let (source, file) = match &args.schema {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|e| Failure::other(format!("reading {}: {e}", path.display())))?,
            path.display().to_string(),
        ),
        None => (DEMO_SCHEMA.to_string(), "demo/factory.alan".to_string()),
    };
    let demo = args.demo;
    create_atomically(g, &g.db, &source, &file, |engine| {
        if demo {
            run_all(engine, DEMO_DATA, &Default::default(), |_| {})
                .map_err(|f| Failure::other(format!("loading the demo data: {}", describe(&f))))?;
        }
        Ok(())
    })?;
    let what = if demo { "the demo schema and data" } else { "an empty root" };
    eprintln!("created {} with {what}", g.db.display());
    if demo {
        eprintln!("next: espalier{} shell", db_flag(g));
    }
    Ok(())
}

/// ` --db DIR` when the database is not the default one.
fn db_flag(g: &Global) -> String {
    if g.db == Path::new(crate::DEFAULT_DB) {
        String::new()
    } else {
        format!(" --db {}", g.db.display())
    }
}

fn describe(f: &Failure) -> String {
    match f {
        Failure::Instruction(e, _) => format!("error[{}]: {e}", e.code()),
        Failure::Other(m) => m.clone(),
        Failure::Exit(c) => format!("exit status {c}"),
    }
}
