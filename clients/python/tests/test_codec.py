"""Unit tests of the codec, request builders and error mapping, without a server."""

from __future__ import annotations

import zlib

import msgpack
import pytest
import zstandard

from espalier import codec, errors, messages
from espalier.aio import ws_url
from espalier.codec import Codec, Compression, DecodeError, Encoding


@pytest.mark.parametrize("encoding", list(Encoding))
@pytest.mark.parametrize("compression", list(Compression))
def test_round_trip_and_compression_threshold(encoding: Encoding, compression: Compression) -> None:
    session = Codec(encoding, compression, compress_min=100)
    small = messages.request("ping", 1)
    big = messages.request("execute", 2, text="update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 ) " * 10)
    for msg in (small, big):
        frame = session.encode(msg)
        compressed = compression is not Compression.NONE and len(codec.encode(msg, encoding)) >= 100
        if compressed:
            assert isinstance(frame, bytes) and codec.compressed_by(frame) is compression
        elif encoding is Encoding.JSON:
            assert isinstance(frame, str)
        else:
            assert isinstance(frame, bytes) and codec.compressed_by(frame) is None
        assert session.decode(frame) == msg


def test_msgpack_integers_use_the_shortest_form() -> None:
    # positive fixint, uint8, uint16, uint32, uint64; negative fixint, int8, int16, int32, int64
    cases = {
        5: "05",
        200: "ccc8",
        70000: "ce00011170",
        1 << 40: "cf0000010000000000",
        -3: "fd",
        -100: "d09c",
        -1000: "d1fc18",
        -100000: "d2fffe7960",
        -(1 << 40): "d3ffffff0000000000",
    }
    for value, hex_bytes in cases.items():
        assert codec.encode({"v": value}, Encoding.MSGPACK)[3:].hex() == hex_bytes, value


def test_msgpack_strings_are_str_not_bin() -> None:
    packed = codec.encode({"text": "é"}, Encoding.MSGPACK)
    assert packed == bytes.fromhex("81a474657874a2c3a9")


def test_decompression_bombs_are_refused() -> None:
    plain = b"{" + b" " * 200_000 + b"}"
    for algorithm, frame in (
        (Compression.ZSTD, zstandard.ZstdCompressor(level=1).compress(plain)),
        # A frame without a declared size goes through the stepwise path.
        (Compression.ZSTD, zstandard.ZstdCompressor(level=1, write_content_size=False).compress(plain)),
        (Compression.DEFLATE, zlib.compress(plain)),
    ):
        with pytest.raises(DecodeError) as e:
            codec.decompress(algorithm, frame, 10_000)
        assert e.value.code == "too_large"
        assert codec.decompress(algorithm, frame, len(plain)) == plain


def test_truncated_compressed_frames_are_bad() -> None:
    plain = b'{"id":1,"kind":"ping"}' * 50
    for algorithm, frame in (
        (Compression.ZSTD, codec.compress(Compression.ZSTD, plain)),
        (Compression.ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(plain)),
        (Compression.DEFLATE, codec.compress(Compression.DEFLATE, plain)),
    ):
        with pytest.raises(DecodeError) as e:
            codec.decompress(algorithm, frame[:-4], 1 << 20)
        assert e.value.code == "bad_frame"


def test_oversized_frames_are_refused_before_decoding() -> None:
    session = Codec(Encoding.MSGPACK, max_message=64)
    frame = msgpack.packb({"kind": "node", "node": {"x": "y" * 100}})
    with pytest.raises(DecodeError) as e:
        session.decode(frame)
    assert e.value.code == "too_large"


def test_deeply_nested_json_is_a_bad_frame_not_a_crash() -> None:
    with pytest.raises(DecodeError) as e:
        codec.decode(b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}", Encoding.JSON)
    assert e.value.code == "bad_frame"


def test_request_builder_checks_its_input() -> None:
    assert messages.request("get", 3, path="", params={"b": 2, "a": "x"}) == {
        "id": 3,
        "kind": "get",
        "params": {"a": "x", "b": 2},
        "path": "",
    }
    for bad in ({"x": 1.5}, {"x": True}, {"x": None}, {"x": 1 << 63}):
        with pytest.raises(errors.ClientError) as e:
            messages.request("get", 1, path="", params=bad)
        assert e.value.code == "usage" and "$x" in e.value.message
    with pytest.raises(errors.ClientError):
        messages.request("ping", -1)
    with pytest.raises(errors.ClientError):
        messages.request("ping", 1, nonsense=1)


def test_every_protocol_code_has_its_family() -> None:
    families = {
        errors.InvalidInstructionError: ["syntax", "type", "value", "key_too_long"],
        errors.NotFoundError: ["key_missing"],
        errors.ConflictError: [
            "key_exists",
            "already_in_state",
            "state_not_selected",
            "referenced",
            "reference_unset",
            "not_unique",
        ],
        errors.DatabaseError: ["transaction", "storage", "storage_full", "corrupt", "schema"],
        errors.EngineLimitError: ["limit"],
        errors.ProtocolError: ["bad_frame", "wrong_encoding", "bad_request", "unknown_kind", "unknown_subscription"],
        errors.LimitError: [
            "too_large",
            "result_too_large",
            "too_many_requests",
            "too_many_subscriptions",
            "too_many_sessions",
        ],
        errors.QueryTimeoutError: ["timeout"],
        errors.AuthError: ["unauthorized", "forbidden"],
        errors.UnavailableError: ["shutting_down"],
        errors.ServerError: ["internal", "a_code_from_the_future"],
    }
    for cls, codes in families.items():
        for code in codes:
            e = errors.error_from_code(code, "m")
            assert type(e) is cls, code
    assert isinstance(errors.error_from_code("limit", "m"), errors.InstructionError)
    assert isinstance(errors.error_from_code("limit", "m"), errors.LimitError)
    assert isinstance(errors.error_from_code("timeout", "m"), errors.LimitError)


def test_errors_name_the_place() -> None:
    e = errors.error_from_code("syntax", "syntax error: 1:8: expected a path", request="execute #4 'update'")
    assert (e.line, e.column) == (1, 8)
    assert e.where == "execute #4 'update', at 1:8"
    assert str(e) == "error[syntax]: syntax error: 1:8: expected a path (execute #4 'update', at 1:8)"
    sub = errors.error_from_code("result_too_large", "too big", subscription=3)
    assert sub.where == "subscription 3" and sub.line is None


def test_ws_url() -> None:
    url = ws_url(
        "http://127.0.0.1:7700",
        encoding=Encoding.MSGPACK,
        compression=Compression.ZSTD,
        compress_min=64,
        token="s3cret",
        token_in_query=True,
    )
    assert url == "ws://127.0.0.1:7700/ws?encoding=msgpack&compression=zstd&compress_min=64&token=s3cret"
    plain = ws_url("wss://db.example/ws", encoding=Encoding.JSON, compression=Compression.NONE, compress_min=512)
    assert plain == "wss://db.example/ws?encoding=json&compression=none&compress_min=512"
    with pytest.raises(errors.ClientError):
        ws_url("ftp://x", encoding=Encoding.JSON, compression=Compression.NONE, compress_min=1)
