//! The checkpoint file reader (`tables::checkpoint::read`, as `Tables::open` drives it) on a
//! file made of fuzz bytes; each verified chunk's operations are decoded as replay decodes
//! them. The first byte picks how the bytes become the file:
//! - even: raw, the rest is the whole file (chunk checksums rarely hold);
//! - odd: framed, the magic and a log version, then the rest split at `|~` into chunks with
//!   valid checksums, the ending zero length unless bit 1 is set, and one byte flipped where
//!   the input says.
//!
//! Only a panic, a hang or a crash fails.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use espalier_fuzz::{decode_ops, pieces, push_chunk, scratch};
use espalier_storage::tables::checkpoint;
use libfuzzer_sys::fuzz_target;

fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| scratch().join(checkpoint::file_name(1)))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let file = if mode & 1 == 0 {
        rest.to_vec()
    } else {
        if rest.len() < 3 {
            return;
        }
        let flip = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let mut out = b"ESPCKP01".to_vec();
        out.extend_from_slice(&u64::from(rest[2]).to_le_bytes());
        for chunk in pieces(&rest[3..], b"|~") {
            push_chunk(&mut out, chunk);
        }
        if mode & 2 == 0 {
            out.extend_from_slice(&[0; 8]);
        }
        if flip > 0 {
            let at = flip % out.len();
            out[at] ^= 1 << (mode >> 5);
        }
        out
    };
    std::fs::write(path(), &file).expect("the checkpoint file");
    let mut chunks = 0usize;
    let read = checkpoint::read(path(), &mut |ops| {
        chunks += 1;
        decode_ops(ops).map(|_| ())
    });
    if let Err(e) = read {
        let _ = e.to_string();
    }
});
