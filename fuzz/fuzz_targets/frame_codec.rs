//! The WebSocket frame codec (`crates/protocol/src/codec.rs`) as a server session reads
//! client frames, in every session setting, then turned into a request as the session does.
//! Whatever decodes re-encodes to a frame that decodes to the same message.
//! Otherwise only a panic, a hang or a crash fails.
#![no_main]

use espalier_protocol::{Codec, Compression, Encoding, Frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the setting and the frame type (0x80: a text frame, so 0x80 for
    // JSON and 0x01 for MessagePack seeds); the rest is the payload.
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
});
