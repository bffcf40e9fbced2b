//! The WebSocket frame codec (`crates/protocol/src/codec.rs`) as a server session reads
//! client frames, in every session setting, then turned into a request as the session does.
//! Whatever decodes re-encodes to a frame that decodes to the same message.
//! Otherwise only a panic, a hang or a crash fails (`espalier_fuzz::frame_codec`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| espalier_fuzz::frame_codec::round_trip(data));
