//! What the fuzz targets share: a scratch directory removed at exit, the demo database
//! (`demo/factory.alan` and `demo/data.alan`), and the on-disk framings of the log and of
//! checkpoints, so that a target can hand the readers records whose checksums hold (random
//! bytes almost never get past a crc32c).

pub mod frame_codec;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use espalier_instruction::parse::{parse_instructions, ParseOptions};
use espalier_instruction::Engine;
use espalier_storage::tables::redo::Ops;
use espalier_transaction::{DatabaseOptions, Durability};

/// The demo schema, as `espalier init --demo` creates it.
pub const DEMO_SCHEMA: &str = include_str!("../../demo/factory.alan");
/// The demo data: instructions run in order.
pub const DEMO_DATA: &str = include_str!("../../demo/data.alan");

static SCRATCH: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn remove_scratch() {
    if let Some(dir) = SCRATCH.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// This process's directory for files, emptied at start and removed when the process exits
/// normally (a crash leaves it for inspection). In `/dev/shm` where there is one: the log
/// reader's cut syncs, which on a disk costs more than the rest of a run.
pub fn scratch() -> &'static Path {
    SCRATCH.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        let dir = base.join(format!("espalier-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create the scratch directory");
        // SAFETY: registers a plain function with no arguments; it only reads a static.
        unsafe { libc::atexit(remove_scratch) };
        dir
    })
}

/// Options for a throwaway database: no fsync, small log segments.
pub fn options() -> DatabaseOptions {
    DatabaseOptions {
        durability: Durability::None,
        log_segment_size: 1 << 20,
        checkpoint_log_bytes: 64 << 20,
        ..DatabaseOptions::default()
    }
}

/// A new database with the demo schema in the scratch directory, with the demo data if `data`.
pub fn demo_engine(name: &str, data: bool) -> Engine {
    let engine = Engine::create(&scratch().join(name), DEMO_SCHEMA, options()).expect("the demo database");
    if data {
        let list = parse_instructions(DEMO_DATA, ParseOptions::CLIENT).expect("the demo data parses");
        for instr in list {
            let plan = engine.check(&instr.item, Some(DEMO_DATA)).expect("the demo data checks");
            engine.run(&plan, &Default::default(), None).expect("the demo data loads");
        }
    }
    engine
}

/// Log segment header (see `crates/storage/src/log.rs`): magic, first version, reserved, crc32c.
pub fn segment_header(first_version: u64) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..8].copy_from_slice(b"ESPLOG01");
    h[8..16].copy_from_slice(&first_version.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Appends one log record with a valid checksum (payload cut to the 31-bit length field).
pub fn push_record(out: &mut Vec<u8>, version: u64, batch_start: bool, payload: &[u8]) {
    let mut word = payload.len() as u32 & !(1 << 31);
    if batch_start {
        word |= 1 << 31;
    }
    let word = word.to_le_bytes();
    let crc = crc32c::crc32c_append(crc32c::crc32c_append(crc32c::crc32c(&word), &version.to_le_bytes()), payload);
    out.extend_from_slice(&word);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len().next_multiple_of(8), 0);
}

/// The file name of the log segment starting at `first_version`.
pub fn segment_name(first_version: u64) -> String {
    format!("{first_version:020}.log")
}

/// Appends one checkpoint chunk: length, crc32c, bytes.
pub fn push_chunk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(bytes).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Decodes every redo operation of `ops` as replay does; the number decoded, or the error.
pub fn decode_ops(ops: &[u8]) -> Result<usize, String> {
    let mut read = Ops::new(ops);
    // Each operation consumes at least its tag byte.
    for n in 0..=ops.len() {
        match read.next_op() {
            Ok(Some(_)) => {}
            Ok(None) => return Ok(n),
            Err(e) => return Err(e.to_string()),
        }
    }
    panic!("more operations than bytes in {} bytes of redo", ops.len());
}

/// Splits fuzz input into pieces at a separator byte sequence (for inputs that carry several
/// payloads, records or chunks).
pub fn pieces<'a>(data: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(at) = rest.windows(sep.len()).position(|w| w == sep) {
        out.push(&rest[..at]);
        rest = &rest[at + sep.len()..];
    }
    out.push(rest);
    out
}
