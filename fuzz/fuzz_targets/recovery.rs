//! Opening a database after damage (`Database::open`, as `espalier serve`, `shell` and
//! `check` do): a demo database whose checkpoint and log are made of fuzz bytes with valid
//! checksums, so that replay applies what they say (a log from another build, or damage that
//! a checksum missed, must not crash the open); a database that opens is then checked by
//! `espalier_data::check`, which reports problems rather than panicking.
//!
//! The input, split at `|#`: the checkpoint's chunks (split at `|~`, each with a valid crc32c),
//! then the log's records after it (split at `|~`, each a record with a valid checksum; a
//! piece's first byte is the redo flags as replay reads them, bit 7 of it also marks a batch
//! start). Only a panic, a hang or a crash fails.
//!
//! It found that a row or string id far past the data (`Put` or `StringStored` of row 2^31)
//! made recovery's `rebuild_free` list every row below it as free, gigabytes for a few bytes
//! of input (an out-of-memory abort); fixed in d39cdad (the free list walks the pages that
//! exist), and such inputs are run again.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use espalier_fuzz::{demo_engine, options, pieces, push_chunk, push_record, segment_header, segment_name};
use espalier_transaction::Database;
use libfuzzer_sys::fuzz_target;

/// The database directory and the log version its manifest's checkpoint covers.
fn database() -> &'static (PathBuf, u64) {
    static DB: OnceLock<(PathBuf, u64)> = OnceLock::new();
    DB.get_or_init(|| {
        let engine = demo_engine("recovery", true);
        engine.database().checkpoint().expect("a checkpoint");
        let dir = engine.database().tables().dir().to_path_buf();
        drop(engine);
        let covered = std::fs::read_dir(&dir)
            .expect("the database")
            .flatten()
            .find_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix("checkpoint-")?.strip_suffix(".ckpt")?.parse::<u64>().ok()
            })
            .expect("the checkpoint file");
        (dir, covered)
    })
}

fuzz_target!(|data: &[u8]| {
    let (dir, covered) = database();
    let parts = pieces(data, b"|#");
    let records = parts.get(1).map(|r| pieces(r, b"|~")).unwrap_or_default();
    let mut checkpoint = b"ESPCKP01".to_vec();
    checkpoint.extend_from_slice(&covered.to_le_bytes());
    for chunk in pieces(parts[0], b"|~") {
        push_chunk(&mut checkpoint, chunk);
    }
    checkpoint.extend_from_slice(&[0; 8]);
    std::fs::write(dir.join(format!("checkpoint-{covered:020}.ckpt")), &checkpoint).expect("the checkpoint");
    let log = dir.join("log");
    let _ = std::fs::remove_dir_all(&log);
    std::fs::create_dir_all(&log).expect("the log directory");
    if parts.len() > 1 {
        let first = covered + 1;
        let mut segment = segment_header(first).to_vec();
        for (i, piece) in records.into_iter().enumerate() {
            let start = i == 0 || piece.first().is_some_and(|b| b & 0x80 != 0);
            push_record(&mut segment, first + i as u64, start, piece);
        }
        std::fs::write(log.join(segment_name(first)), &segment).expect("the segment");
    }
    match Database::open(dir, options()) {
        Ok(db) => {
            let snapshot = db.snapshot().expect("a snapshot");
            match espalier_data::check(&snapshot.graph(), &mut |_| {}) {
                Ok(report) => {
                    let _ = report.problems.len();
                }
                Err(e) => {
                    let _ = e.to_string();
                }
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
