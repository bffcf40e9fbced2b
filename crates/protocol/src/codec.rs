//! Turning messages into WebSocket frames and back: JSON or MessagePack per session, optional
//! per-message compression, bounded sizes, typed decode errors.
//!
//! Frames (see `docs/protocol.md`, "Frames"): a JSON session sends plain messages as text
//! frames; a MessagePack session as binary frames. A compressed message is a binary frame that
//! starts with its algorithm's magic (zstd `28 B5 2F FD`, zlib `78`), which neither a
//! MessagePack map (first byte `80`–`8F`, `DE`, `DF`) nor JSON text can start with.

use std::io::Read;

use serde::Deserialize;

use crate::message::{Compression, Encoding, ErrorCode, Message};

/// The zstd frame magic number, little endian on the wire.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// The first byte of a zlib stream with a 32 KiB window (CMF = deflate, window 2^15).
pub const ZLIB_FIRST: u8 = 0x78;
/// Deepest nesting a decoder follows (arrays, maps, enum wrappers).
pub const MAX_DEPTH: usize = 128;
/// Default size under which messages go uncompressed even when the session compresses.
pub const DEFAULT_COMPRESS_MIN: usize = 512;
/// zstd level: the fastest, as the seed's "fast compression" setting.
const ZSTD_LEVEL: i32 = 1;

/// One WebSocket data frame's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A text frame: a plain JSON message.
    Text(String),
    /// A binary frame: a plain MessagePack message, or a compressed message in either encoding.
    Binary(Vec<u8>),
}

impl Frame {
    /// The payload's length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Frame::Text(t) => t.len(),
            Frame::Binary(b) => b.len(),
        }
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why a frame could not be read as a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are not a message in the encoding: malformed, truncated, trailing bytes, or a
    /// field of the wrong type (`bad_frame`).
    #[error("the {encoding} message is malformed: {detail}")]
    Malformed {
        /// The encoding the bytes were read in.
        encoding: Encoding,
        /// The decoder's complaint.
        detail: String,
    },
    /// The frame does not fit the session: a text frame in a MessagePack session, an uncompressed
    /// binary frame in a JSON session, or a compression the session did not negotiate
    /// (`wrong_encoding`); the text says which.
    #[error("{0}")]
    WrongEncoding(String),
    /// The frame, body or decompressed message is over the limit it was decoded against
    /// (`too_large`).
    #[error("the message is {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// The size in bytes; of a decompressed message, the size its header declares or as far
        /// as decompression got before stopping.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The compressed data cannot be decompressed (`bad_frame`); the text says why.
    #[error("the compressed message cannot be decompressed: {0}")]
    Decompress(String),
}

impl DecodeError {
    /// The error code a client is answered with for this frame.
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::Malformed { .. } | DecodeError::Decompress(_) => ErrorCode::BadFrame,
            DecodeError::WrongEncoding(_) => ErrorCode::WrongEncoding,
            DecodeError::TooLarge { .. } => ErrorCode::TooLarge,
        }
    }
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The encoded message (before compression) is over the limit it was encoded against.
    #[error("the reply is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The encoded size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The encoder or compressor failed; the text says why.
    #[error("cannot encode the message: {0}")]
    Serialize(String),
}

/// A frame that failed to decode, with the request id if one could still be read from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecodable {
    /// The request's `id`, if the frame could be read far enough to find it, so that the error
    /// answers that request.
    pub id: Option<u64>,
    /// Why the frame could not be decoded.
    pub error: DecodeError,
}

/// The encoding choices of one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Codec {
    /// How the session's messages are encoded.
    pub encoding: Encoding,
    /// The session's per-message compression.
    pub compression: Compression,
    /// Messages shorter than this go uncompressed.
    pub compress_min: usize,
    /// Largest message accepted, compressed or not (bounds decompression too).
    pub max_message: usize,
}

impl Codec {
    /// The codec of a session with these settings. Panics if `max_message` is zero.
    pub fn new(encoding: Encoding, compression: Compression, compress_min: usize, max_message: usize) -> Codec {
        assert!(max_message > 0, "a zero message limit accepts nothing");
        Codec { encoding, compression, compress_min, max_message }
    }

    /// The given encoding without compression (HTTP bodies, tests).
    pub fn plain(encoding: Encoding, max_message: usize) -> Codec {
        Codec::new(encoding, Compression::None, usize::MAX, max_message)
    }

    /// The message's bytes in this session's encoding, uncompressed.
    pub fn to_bytes(&self, msg: &Message) -> Result<Vec<u8>, EncodeError> {
        match self.encoding {
            Encoding::Json => serde_json::to_vec(msg).map_err(|e| EncodeError::Serialize(e.to_string())),
            Encoding::Msgpack => rmp_serde::to_vec_named(msg).map_err(|e| EncodeError::Serialize(e.to_string())),
        }
    }

    /// The frame for `msg`; fails if its encoding (before compression) exceeds `limit` bytes.
    pub fn encode_limited(&self, msg: &Message, limit: usize) -> Result<Frame, EncodeError> {
        let bytes = self.to_bytes(msg)?;
        if bytes.len() > limit {
            return Err(EncodeError::TooLarge { size: bytes.len(), limit });
        }
        self.frame(bytes)
    }

    /// The frame for `msg`.
    pub fn encode(&self, msg: &Message) -> Result<Frame, EncodeError> {
        self.encode_limited(msg, usize::MAX)
    }

    /// Wraps encoded bytes into a frame, compressing them if the session does and they are long.
    pub fn frame(&self, bytes: Vec<u8>) -> Result<Frame, EncodeError> {
        if self.compression != Compression::None && bytes.len() >= self.compress_min {
            return Ok(Frame::Binary(compress(self.compression, &bytes)?));
        }
        match self.encoding {
            // serde_json writes UTF-8 only; the check is cheap next to the encoding.
            Encoding::Json => String::from_utf8(bytes)
                .map(Frame::Text)
                .map_err(|e| EncodeError::Serialize(format!("JSON output is not UTF-8: {e}"))),
            Encoding::Msgpack => Ok(Frame::Binary(bytes)),
        }
    }

    /// Reads a text frame.
    pub fn decode_text(&self, text: &str) -> Result<Message, Undecodable> {
        if text.len() > self.max_message {
            return Err(undecodable(None, DecodeError::TooLarge { size: text.len(), limit: self.max_message }));
        }
        match self.encoding {
            Encoding::Json => decode_json(text.as_bytes()),
            Encoding::Msgpack => Err(undecodable(
                None,
                DecodeError::WrongEncoding(
                    "a text frame in a MessagePack session; send MessagePack in binary frames".into(),
                ),
            )),
        }
    }

    /// Reads a binary frame: MessagePack, or a compressed message.
    pub fn decode_binary(&self, bytes: &[u8]) -> Result<Message, Undecodable> {
        if bytes.len() > self.max_message {
            return Err(undecodable(None, DecodeError::TooLarge { size: bytes.len(), limit: self.max_message }));
        }
        if let Some(algorithm) = compressed_by(bytes) {
            if algorithm != self.compression {
                return Err(undecodable(
                    None,
                    DecodeError::WrongEncoding(format!(
                        "a {algorithm}-compressed frame in a session that negotiated compression {}",
                        self.compression
                    )),
                ));
            }
            let plain = decompress(algorithm, bytes, self.max_message).map_err(|e| undecodable(None, e))?;
            return self.decode_plain(&plain);
        }
        match self.encoding {
            Encoding::Msgpack => decode_msgpack(bytes),
            Encoding::Json => Err(undecodable(
                None,
                DecodeError::WrongEncoding(
                    "an uncompressed binary frame in a JSON session; send JSON in text frames".into(),
                ),
            )),
        }
    }

    /// Decodes uncompressed bytes in the session's encoding.
    pub fn decode_plain(&self, bytes: &[u8]) -> Result<Message, Undecodable> {
        if bytes.len() > self.max_message {
            return Err(undecodable(None, DecodeError::TooLarge { size: bytes.len(), limit: self.max_message }));
        }
        match self.encoding {
            Encoding::Json => decode_json(bytes),
            Encoding::Msgpack => decode_msgpack(bytes),
        }
    }

    /// Decodes a frame.
    pub fn decode(&self, frame: &Frame) -> Result<Message, Undecodable> {
        match frame {
            Frame::Text(t) => self.decode_text(t),
            Frame::Binary(b) => self.decode_binary(b),
        }
    }
}

fn undecodable(id: Option<u64>, error: DecodeError) -> Undecodable {
    Undecodable { id, error }
}

/// Which compression a binary frame's first bytes announce.
pub fn compressed_by(bytes: &[u8]) -> Option<Compression> {
    if bytes.starts_with(&ZSTD_MAGIC) {
        Some(Compression::Zstd)
    } else if bytes.first() == Some(&ZLIB_FIRST) {
        Some(Compression::Deflate)
    } else {
        None
    }
}

/// Just the id, for answering a message whose other fields do not decode.
#[derive(Deserialize)]
struct IdOnly {
    #[serde(default)]
    id: Option<u64>,
}

fn decode_json(bytes: &[u8]) -> Result<Message, Undecodable> {
    match serde_json::from_slice::<Message>(bytes) {
        Ok(m) => Ok(m),
        Err(e) => {
            let id = serde_json::from_slice::<IdOnly>(bytes).ok().and_then(|i| i.id);
            Err(undecodable(id, DecodeError::Malformed { encoding: Encoding::Json, detail: e.to_string() }))
        }
    }
}

fn msgpack_value<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, String> {
    let mut de = rmp_serde::Deserializer::new(std::io::Cursor::new(bytes));
    de.set_max_depth(MAX_DEPTH);
    let value = T::deserialize(&mut de).map_err(|e| e.to_string())?;
    let used = de.position();
    if used != bytes.len() as u64 {
        return Err(format!("{} bytes after the end of the message", bytes.len() as u64 - used));
    }
    Ok(value)
}

/// Decodes any value from an (uncompressed) body in `encoding`: HTTP bodies, tests.
pub fn decode_value<T: serde::de::DeserializeOwned>(
    encoding: Encoding,
    bytes: &[u8],
    limit: usize,
) -> Result<T, DecodeError> {
    if bytes.len() > limit {
        return Err(DecodeError::TooLarge { size: bytes.len(), limit });
    }
    match encoding {
        Encoding::Json => {
            serde_json::from_slice(bytes).map_err(|e| DecodeError::Malformed { encoding, detail: e.to_string() })
        }
        Encoding::Msgpack => msgpack_value(bytes).map_err(|detail| DecodeError::Malformed { encoding, detail }),
    }
}

fn decode_msgpack(bytes: &[u8]) -> Result<Message, Undecodable> {
    if bytes.is_empty() {
        return Err(undecodable(
            None,
            DecodeError::Malformed { encoding: Encoding::Msgpack, detail: "the frame is empty".into() },
        ));
    }
    match msgpack_value::<Message>(bytes) {
        Ok(m) => Ok(m),
        Err(detail) => {
            let id = msgpack_value::<IdOnly>(bytes).ok().and_then(|i| i.id);
            Err(undecodable(id, DecodeError::Malformed { encoding: Encoding::Msgpack, detail }))
        }
    }
}

/// Compresses one message.
pub fn compress(algorithm: Compression, bytes: &[u8]) -> Result<Vec<u8>, EncodeError> {
    match algorithm {
        Compression::None => Ok(bytes.to_vec()),
        Compression::Zstd => {
            zstd::bulk::compress(bytes, ZSTD_LEVEL).map_err(|e| EncodeError::Serialize(format!("zstd: {e}")))
        }
        Compression::Deflate => {
            use std::io::Write;
            let mut enc =
                flate2::write::ZlibEncoder::new(Vec::with_capacity(bytes.len() / 2), flate2::Compression::fast());
            enc.write_all(bytes).map_err(|e| EncodeError::Serialize(format!("deflate: {e}")))?;
            enc.finish().map_err(|e| EncodeError::Serialize(format!("deflate: {e}")))
        }
    }
}

/// Decompresses one message, refusing to produce more than `limit` bytes.
pub fn decompress(algorithm: Compression, bytes: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
    match algorithm {
        Compression::None => Ok(bytes.to_vec()),
        Compression::Zstd => {
            // The frame header may declare its size; refuse early if it is over the limit.
            if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(bytes) {
                if size > limit as u64 {
                    return Err(DecodeError::TooLarge { size: usize::try_from(size).unwrap_or(usize::MAX), limit });
                }
            }
            let mut out = Vec::new();
            let mut dec = zstd::stream::read::Decoder::with_buffer(bytes)
                .map_err(|e| DecodeError::Decompress(format!("zstd: {e}")))?
                .single_frame();
            read_bounded(&mut dec, &mut out, limit, "zstd")?;
            Ok(out)
        }
        Compression::Deflate => {
            let mut out = Vec::new();
            let mut dec = flate2::read::ZlibDecoder::new(bytes);
            read_bounded(&mut dec, &mut out, limit, "deflate")?;
            Ok(out)
        }
    }
}

fn read_bounded(r: &mut impl Read, out: &mut Vec<u8>, limit: usize, what: &str) -> Result<(), DecodeError> {
    let cap = limit.saturating_add(1) as u64;
    r.take(cap).read_to_end(out).map_err(|e| DecodeError::Decompress(format!("{what}: {e}")))?;
    if out.len() > limit {
        return Err(DecodeError::TooLarge { size: out.len(), limit });
    }
    Ok(())
}
