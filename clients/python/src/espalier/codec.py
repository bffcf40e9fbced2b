"""Messages to WebSocket frames and back (``docs/protocol.md``, "Frames").

A JSON session sends plain messages as text frames, a MessagePack session as binary frames; a
compressed message is a binary frame that starts with its algorithm's magic (zstd
``28 B5 2F FD``, zlib ``78``), which neither JSON text nor a MessagePack map can start with.
Messages are plain ``dict`` values in the order their keys were inserted; MessagePack is
written with the shortest integer forms and ``str`` strings, as the server writes it.
"""

from __future__ import annotations

import json
import zlib
from enum import Enum
from typing import Any

import msgpack
import zstandard

__all__ = [
    "Encoding",
    "Compression",
    "Codec",
    "DecodeError",
    "encode",
    "decode",
    "compress",
    "decompress",
    "compressed_by",
    "ZSTD_MAGIC",
    "ZLIB_FIRST",
    "DEFAULT_COMPRESS_MIN",
]

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZLIB_FIRST = 0x78
DEFAULT_COMPRESS_MIN = 512
# The server's levels: zstd 1 and zlib "fast"; any level decompresses the same.
_ZSTD_LEVEL = 1
_ZLIB_LEVEL = 1
# Compressed bytes fed per step when a zstd frame does not declare its size: one step can
# expand to at most a few MiB, so a bomb is caught before it fills memory.
_ZSTD_STEP = 64


class Encoding(str, Enum):
    JSON = "json"
    MSGPACK = "msgpack"


class Compression(str, Enum):
    NONE = "none"
    ZSTD = "zstd"
    DEFLATE = "deflate"


class DecodeError(Exception):
    """A frame that is not a readable message; ``code`` is the protocol's code for it
    (``bad_frame``, ``wrong_encoding`` or ``too_large``)."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


def encode(message: dict[str, Any], encoding: Encoding) -> bytes:
    """The message's bytes in ``encoding``, uncompressed."""
    if encoding is Encoding.JSON:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    packed = msgpack.packb(message, use_bin_type=True)
    assert isinstance(packed, bytes)
    return packed


def decode(data: bytes, encoding: Encoding) -> dict[str, Any]:
    """One message from uncompressed bytes; raises ``DecodeError`` (``bad_frame``)."""
    value: Any
    if encoding is Encoding.JSON:
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise DecodeError("bad_frame", f"the json message is malformed: {e}") from None
    else:
        if not data:
            raise DecodeError("bad_frame", "the msgpack message is malformed: the frame is empty")
        try:
            # strict_map_key: maps have string keys; unpackb refuses bytes after the map.
            value = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
        except msgpack.ExtraData as e:
            raise DecodeError("bad_frame", f"the msgpack message is malformed: bytes after the message ({e})") from None
        except (ValueError, msgpack.UnpackException, RecursionError, TypeError) as e:
            raise DecodeError("bad_frame", f"the msgpack message is malformed: {e}") from None
    if not isinstance(value, dict):
        raise DecodeError("bad_frame", f"a message is a map, not {type(value).__name__}")
    return value


def compressed_by(data: bytes) -> Compression | None:
    """Which compression a binary frame's first bytes announce, if any."""
    if data.startswith(ZSTD_MAGIC):
        return Compression.ZSTD
    if data[:1] == bytes([ZLIB_FIRST]):
        return Compression.DEFLATE
    return None


def compress(algorithm: Compression, data: bytes) -> bytes:
    if algorithm is Compression.ZSTD:
        # write_content_size: the receiver can refuse an oversized message from the header.
        return zstandard.ZstdCompressor(level=_ZSTD_LEVEL, write_content_size=True).compress(data)
    if algorithm is Compression.DEFLATE:
        return zlib.compress(data, _ZLIB_LEVEL)
    return data


def decompress(algorithm: Compression, data: bytes, limit: int) -> bytes:
    """Decompresses one message, refusing to produce more than ``limit`` bytes."""
    if algorithm is Compression.ZSTD:
        try:
            size = zstandard.get_frame_parameters(data).content_size
            if size not in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR):
                # The header declares the size (the server's frames do): refuse or decode at once.
                if size > limit:
                    raise DecodeError("too_large", f"the message is {size} bytes, over the limit of {limit}")
                return zstandard.ZstdDecompressor().decompress(data)
            # No declared size: feed small steps so a bomb overshoots the limit by little.
            dobj = zstandard.ZstdDecompressor().decompressobj()
            out = bytearray()
            for start in range(0, len(data), _ZSTD_STEP):
                out += dobj.decompress(data[start : start + _ZSTD_STEP])
                if len(out) > limit:
                    raise DecodeError("too_large", f"the message is over the limit of {limit} bytes")
            if not dobj.eof:
                raise DecodeError("bad_frame", "the compressed message cannot be decompressed: zstd: truncated frame")
            return bytes(out)
        except zstandard.ZstdError as e:
            raise DecodeError("bad_frame", f"the compressed message cannot be decompressed: zstd: {e}") from None
    if algorithm is Compression.DEFLATE:
        dec = zlib.decompressobj()
        try:
            out_b = dec.decompress(data, limit + 1)
        except zlib.error as e:
            raise DecodeError("bad_frame", f"the compressed message cannot be decompressed: deflate: {e}") from None
        if len(out_b) > limit:
            raise DecodeError("too_large", f"the message is over the limit of {limit} bytes")
        if not dec.eof:
            raise DecodeError("bad_frame", "the compressed message cannot be decompressed: deflate: truncated stream")
        return out_b
    return data


class Codec:
    """The encoding choices of one session: encoding, compression, threshold, size limit."""

    def __init__(
        self,
        encoding: Encoding = Encoding.JSON,
        compression: Compression = Compression.NONE,
        compress_min: int = DEFAULT_COMPRESS_MIN,
        max_message: int = 64 << 20,
    ) -> None:
        if max_message <= 0:
            raise ValueError("max_message must be positive")
        if compress_min < 0:
            raise ValueError("compress_min must not be negative")
        self.encoding = encoding
        self.compression = compression
        self.compress_min = compress_min
        self.max_message = max_message

    def to_bytes(self, message: dict[str, Any]) -> bytes:
        return encode(message, self.encoding)

    def frame(self, data: bytes) -> str | bytes:
        """Wraps encoded bytes into a frame: text (JSON) or binary, compressed if long enough."""
        if self.compression is not Compression.NONE and len(data) >= self.compress_min:
            return compress(self.compression, data)
        if self.encoding is Encoding.JSON:
            return data.decode("utf-8")
        return data

    def encode(self, message: dict[str, Any]) -> str | bytes:
        return self.frame(self.to_bytes(message))

    def decode(self, frame: str | bytes) -> dict[str, Any]:
        """Reads one frame; raises ``DecodeError``."""
        if isinstance(frame, str):
            data = frame.encode("utf-8")
            if len(data) > self.max_message:
                raise DecodeError(
                    "too_large", f"the message is {len(data)} bytes, over the limit of {self.max_message}"
                )
            if self.encoding is not Encoding.JSON:
                raise DecodeError("wrong_encoding", "a text frame in a MessagePack session")
            return decode(data, Encoding.JSON)
        data = bytes(frame)
        if len(data) > self.max_message:
            raise DecodeError("too_large", f"the message is {len(data)} bytes, over the limit of {self.max_message}")
        algorithm = compressed_by(data)
        if algorithm is not None:
            if algorithm is not self.compression:
                raise DecodeError(
                    "wrong_encoding",
                    f"a {algorithm.value}-compressed frame in a session with compression {self.compression.value}",
                )
            return decode(decompress(algorithm, data, self.max_message), self.encoding)
        if self.encoding is Encoding.JSON:
            raise DecodeError("wrong_encoding", "an uncompressed binary frame in a JSON session")
        return decode(data, Encoding.MSGPACK)
