//! Feeds arbitrary bytes to the frame decoder in every session setting: it must never panic,
//! never allocate past its limit, and whatever it accepts must re-encode.
#![no_main]

use espalier_protocol::{Codec, Compression, Encoding, Frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the setting and the frame type; the rest is the payload.
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
    if let Ok(message) = codec.decode(&frame) {
        let encoded = codec.encode(&message).expect("a decoded message encodes");
        let again = codec.decode(&encoded).expect("an encoded message decodes");
        assert_eq!(again, message);
        let _ = message.into_request();
    }
});
