//! The redo log's recovery reader (`LogReader`, as `Tables::open` drives it) on segment files
//! made of fuzz bytes: it reads, verifies, says where and why the log ends (clean, torn or
//! corrupt) and cuts it there; each whole commit's payload is decoded as replay decodes it.
//! The first byte picks how the bytes become files:
//! - even: raw, the whole rest is one segment file (`…01.log`; checksums rarely hold);
//! - odd: framed, the rest split at `|~` into records with valid checksums behind a valid
//!   header, first version and flags from the input, with an optional second segment (at a
//!   `|#` split) and one byte flipped where the input says, so that damage is found in the
//!   middle of records that verify.
//!
//! Only a panic, a hang or a crash fails.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use espalier_fuzz::{decode_ops, pieces, push_record, scratch, segment_header, segment_name};
use espalier_storage::log::{LogReader, Tail};
use espalier_storage::tables::redo::{FIRST, LAST};
use libfuzzer_sys::fuzz_target;

fn db_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| scratch().join("log_reader"))
}

/// One segment's bytes: a valid header for `first`, then a record with a valid checksum for
/// each piece (its first byte, if any, says whether it starts a batch).
fn framed(first: u64, body: &[u8]) -> (Vec<u8>, u64) {
    let mut out = segment_header(first).to_vec();
    let mut version = first;
    for (i, piece) in pieces(body, b"|~").into_iter().enumerate() {
        let (start, payload) = match piece.split_first() {
            Some((&b, rest)) => (i == 0 || b & 0x80 != 0, rest),
            None => (i == 0, piece),
        };
        push_record(&mut out, version, start, payload);
        version += 1;
    }
    (out, version)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let dir = db_dir();
    let log = dir.join("log");
    let _ = std::fs::remove_dir_all(&log);
    std::fs::create_dir_all(&log).expect("the log directory");
    let from;
    if mode & 1 == 0 {
        std::fs::write(log.join(segment_name(1)), rest).expect("a segment");
        from = u64::from(mode >> 1) % 4;
    } else {
        // Header: first version (1..=16), where to flip a byte (u16, 0 = nowhere), from.
        if rest.len() < 4 {
            return;
        }
        let first = u64::from(rest[0] % 16) + 1;
        let flip = usize::from(u16::from_le_bytes([rest[1], rest[2]]));
        from = u64::from(rest[3] % 20);
        let segments = pieces(&rest[4..], b"|#");
        let (mut one, next) = framed(first, segments[0]);
        if flip > 0 && !one.is_empty() {
            let at = flip % one.len();
            one[at] ^= 1 << (mode >> 5);
        }
        std::fs::write(log.join(segment_name(first)), &one).expect("a segment");
        if let Some(body) = segments.get(1) {
            // A second segment, named for the version after the first one's last record, or
            // (bit 1 of the mode) for one after that (a missing version).
            let second = next + u64::from(mode >> 1 & 1);
            let (two, _) = framed(second, body);
            std::fs::write(log.join(segment_name(second)), &two).expect("a segment");
        }
    }
    let mut reader = match LogReader::open(dir, from) {
        Ok(r) => r,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    // As `Tables::open` replays: a commit is its records from one with FIRST to one with LAST.
    let mut commit = Vec::new();
    loop {
        match reader.next_record() {
            Ok(Some(record)) => {
                let Some((flags, ops)) = record.payload.split_first() else { continue };
                if flags & FIRST != 0 {
                    commit.clear();
                }
                commit.extend_from_slice(ops);
                if flags & LAST != 0 {
                    let _ = decode_ops(&commit);
                    commit.clear();
                }
            }
            Ok(None) => break,
            Err(e) => {
                let _ = e.to_string();
                return;
            }
        }
    }
    let end = reader.end().expect("the end of a log read to its end");
    if let Tail::Corrupt { .. } = end.tail {
        let _ = format!("{:?}", end.tail);
    }
    end.cut().expect("cutting the log");
    // What the cut leaves reads to the same last version, and clean (a writer may go on).
    let again = LogReader::open(dir, from).and_then(|r| r.end()).expect("the cut log reads");
    if !matches!(end.tail, Tail::Corrupt { .. }) {
        assert_eq!(again.last_version, end.last_version, "after the cut of {:?}", end.tail);
        assert!(matches!(again.tail, Tail::Clean), "after the cut of {:?}: {:?}", end.tail, again.tail);
    }
});
