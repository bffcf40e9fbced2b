//! The `frame_codec` target's check, also replayed by `crates/protocol/tests/fuzz_frames.rs`
//! on the inputs it once failed on (that test includes this file by path): it uses
//! `espalier_protocol` only.

use espalier_protocol::{Codec, Compression, Encoding, Frame};

/// Decodes `data` as a server session reads a client frame, in the setting its first byte
/// picks (bit 0: MessagePack, else JSON; bits 1–6 mod 3: no compression, zstd, deflate; bit
/// 7: a text frame, so 0x80 for JSON and 0x01 for MessagePack seeds); the rest is the payload.
/// Whatever decodes re-encodes to a frame that decodes to the same message and turns into a
/// request; an error is rendered. Anything else panics.
pub fn round_trip(data: &[u8]) {
    let Some((&setting, payload)) = data.split_first() else { return };
    let encoding = if setting & 1 == 0 { Encoding::Json } else { Encoding::Msgpack };
    let compression = match (setting >> 1) % 3 {
        0 => Compression::None,
        1 => Compression::Zstd,
        _ => Compression::Deflate,
    };
    let codec = Codec::new(encoding, compression, 64, 1 << 20);
    let frame = if setting & 0x80 == 0 {
        Frame::Binary(payload.to_vec())
    } else {
        Frame::Text(String::from_utf8_lossy(payload).into_owned())
    };
    match codec.decode(&frame) {
        Ok(message) => {
            let encoded = codec.encode(&message).expect("a decoded message encodes");
            let again = codec.decode(&encoded).expect("an encoded message decodes");
            assert_eq!(again, message);
            let _ = message.into_request();
        }
        Err(e) => {
            let _ = (e.id, e.error.code(), e.error.to_string());
        }
    }
}
