//! Test helper for `tests/crash.rs`: `espalier-crash-child DIR [sync|none]`.
//!
//! Opens (or creates) a database with a one-dictionary schema in DIR and appends entries from
//! several threads until killed, so that group commit forms batches. After each acknowledged
//! commit it prints the entry's key on its own line and flushes stdout: every line printed is a
//! commit the database promised to keep.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use espalier_instruction::{Engine, Reply};
use espalier_transaction::{DatabaseOptions, Durability};

/// The schema the crash test expects. `'Count'` is bumped in the same update that adds an
/// entry, so a torn commit would show as `'Count'` differing from the number of entries.
const SCHEMA: &str = "root ( 'Log' -> dictionary ( 'n' -> number ) 'Count' -> number )";

const THREADS: usize = 4;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), mode) = (args.get(1), args.get(2).map(String::as_str)) else {
        eprintln!("usage: espalier-crash-child DIR [sync|none]");
        return ExitCode::from(2);
    };
    let durability = match mode {
        None | Some("sync") => Durability::Sync,
        Some("none") => Durability::None,
        Some(other) => {
            eprintln!("unknown durability {other:?}");
            return ExitCode::from(2);
        }
    };
    // Small log segments: the kills land in segment rolls and preparations too, and a reopen
    // reads one small segment rather than a 64 MiB one (debug builds verify every byte).
    // Checkpoints every 128 KiB of log: the kills land in checkpoints too (writing the file,
    // switching the manifest, deleting the log it covers).
    let options = DatabaseOptions {
        durability,
        log_segment_size: 1 << 20,
        checkpoint_log_bytes: 128 << 10,
        ..Default::default()
    };
    let path = Path::new(dir);
    let opened = if espalier_transaction::Database::exists(path) {
        Engine::open(path, options)
    } else {
        Engine::create(path, SCHEMA, options)
    };
    let engine = match opened {
        Ok(e) => Arc::new(e),
        Err(e) => {
            eprintln!("opening {dir}: {e}");
            return ExitCode::from(1);
        }
    };
    // Continue after the largest key present (a crash may leave a gap below it).
    let next = match engine.execute_text("collection select . 'Log'", &HashMap::new()) {
        Ok(Reply::Query(q)) => q.rows.iter().filter_map(|r| r.key[0].parse::<u64>().ok()).max().map_or(0, |m| m + 1),
        other => {
            eprintln!("reading the log: {other:?}");
            return ExitCode::from(1);
        }
    };
    let next = Arc::new(AtomicU64::new(next));
    let stdout = Arc::new(Mutex::new(std::io::stdout()));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (engine, next, stdout) = (engine.clone(), next.clone(), stdout.clone());
            std::thread::spawn(move || -> Result<(), String> {
                loop {
                    let k = next.fetch_add(1, Ordering::SeqCst);
                    let text =
                        format!("update ( 'Log' -> dictionary \"{k}\" ( 'n' -> number {k} ) 'Count' -> number + 1 )");
                    engine.execute_text(&text, &HashMap::new()).map_err(|e| format!("{text}: {e}"))?;
                    let mut out = stdout.lock().map_err(|e| e.to_string())?;
                    writeln!(out, "{k}").and_then(|_| out.flush()).map_err(|e| e.to_string())?;
                }
            })
        })
        .collect();
    for w in workers {
        match w.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("{e}");
                return ExitCode::from(1);
            }
            Err(_) => return ExitCode::from(1),
        }
    }
    ExitCode::SUCCESS
}
