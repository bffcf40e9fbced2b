//! The frame decoder never panics: random bytes, random text, and mutations of every valid
//! vector, in every session setting. (The same property as the cargo-fuzz target
//! `frame_codec` in `fuzz/`, which needs nightly; this one runs with the other tests.)

use std::path::Path;

use espalier_protocol::codec::compress;
use espalier_protocol::{Codec, Compression, Encoding, Frame};
use proptest::prelude::*;

fn codecs() -> Vec<Codec> {
    let mut out = Vec::new();
    for encoding in [Encoding::Json, Encoding::Msgpack] {
        for compression in [Compression::None, Compression::Zstd, Compression::Deflate] {
            out.push(Codec::new(encoding, compression, 0, 1 << 16));
        }
    }
    out
}

/// Decodes a frame in every setting and turns the result into a request; only a panic fails.
fn decode_everywhere(frame: &Frame) {
    for codec in codecs() {
        if let Ok(m) = codec.decode(frame) {
            let _ = m.into_request();
        }
    }
}

fn vectors() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../protocol/vectors");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("vectors") {
        let path = entry.expect("entry").path();
        match path.extension().and_then(|e| e.to_str()) {
            Some("msgpack") | Some("json") => out.push(std::fs::read(&path).expect("read")),
            _ => {}
        }
    }
    out.sort();
    assert!(out.len() > 40);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        decode_everywhere(&Frame::Binary(bytes.clone()));
        decode_everywhere(&Frame::Text(String::from_utf8_lossy(&bytes).into_owned()));
    }

    #[test]
    fn random_compressed_payloads_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        for algorithm in [Compression::Zstd, Compression::Deflate] {
            decode_everywhere(&Frame::Binary(compress(algorithm, &bytes).unwrap()));
        }
    }

    #[test]
    fn mutated_vectors_never_panic(
        pick in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
        compressed in any::<bool>(),
    ) {
        let all = vectors();
        let mut bytes = all[pick.index(all.len())].clone();
        for (at, byte, op) in edits {
            match op {
                // overwrite, insert, delete
                0 if !bytes.is_empty() => { let i = at.index(bytes.len()); bytes[i] = byte; }
                1 => { let i = at.index(bytes.len() + 1); bytes.insert(i, byte); }
                _ if !bytes.is_empty() => { let i = at.index(bytes.len()); bytes.remove(i); }
                _ => {}
            }
        }
        if compressed {
            bytes = compress(Compression::Zstd, &bytes).unwrap();
        }
        decode_everywhere(&Frame::Binary(bytes.clone()));
        decode_everywhere(&Frame::Text(String::from_utf8_lossy(&bytes).into_owned()));
    }
}

/// Deep nesting is refused, not followed into a stack overflow.
#[test]
fn deep_nesting_is_refused() {
    let depth = 100_000;
    let json = format!("{{\"id\":1,\"kind\":\"execute\",\"instruction\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
    decode_everywhere(&Frame::Text(json));
    // MessagePack: arrays of one element, nested.
    let mut mp = vec![0x82, 0xa2, b'i', b'd', 0x01, 0xab];
    mp.extend_from_slice(b"instruction");
    mp.extend(std::iter::repeat_n(0x91, depth));
    mp.push(0xc0);
    decode_everywhere(&Frame::Binary(mp));
}

/// A small frame that inflates past the limit is refused without inflating it all.
#[test]
fn decompression_bombs_are_bounded() {
    let big = vec![b'a'; 10 << 20];
    for algorithm in [Compression::Zstd, Compression::Deflate] {
        let bomb = compress(algorithm, &big).unwrap();
        assert!(bomb.len() < 64 << 10);
        let codec = Codec::new(Encoding::Msgpack, algorithm, 0, 1 << 16);
        let err = codec.decode(&Frame::Binary(bomb)).unwrap_err();
        assert_eq!(err.error.code(), espalier_protocol::ErrorCode::TooLarge, "{algorithm}");
    }
}

/// The `frame_codec` fuzz target's check, the same file the target calls.
#[path = "../../../fuzz/src/frame_codec.rs"]
mod frame_codec;

/// Inputs the fuzz target once failed on (`tests/fuzz_inputs/`), replayed.
#[test]
fn inputs_the_fuzzer_found_round_trip() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_inputs");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("fuzz inputs") {
        let path = entry.expect("entry").path();
        frame_codec::round_trip(&std::fs::read(&path).expect("read"));
        n += 1;
    }
    assert!(n > 0, "no inputs found");
}
