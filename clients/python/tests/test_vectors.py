"""The protocol test vectors (protocol/vectors/README.md): this client reads and writes every
message byte for byte as the server does."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from espalier import codec, errors, messages
from espalier.aio import _event
from espalier.codec import Codec, Compression, DecodeError, Encoding

VECTORS = Path(os.environ.get("ESPALIER_VECTORS", Path(__file__).resolve().parents[3] / "protocol" / "vectors"))
NAMES = sorted(p.stem for p in VECTORS.glob("*.json"))
REQUEST_KINDS = {"ping", "execute", "get", "subscribe", "unsubscribe", "status", "shutdown"}


def load(name: str) -> tuple[dict[str, Any], bytes]:
    value = json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8"))
    return value, (VECTORS / f"{name}.msgpack").read_bytes()


def test_vectors_are_there() -> None:
    # Every kind of docs/protocol.md has a vector; a missing directory must not pass silently.
    assert len(NAMES) >= 30, f"found only {len(NAMES)} vectors in {VECTORS}"
    for name in NAMES:
        assert (VECTORS / f"{name}.msgpack").exists(), name


@pytest.mark.parametrize("name", NAMES)
def test_json_and_msgpack_agree_byte_for_byte(name: str) -> None:
    value, packed = load(name)
    # 2. the decoded JSON re-encodes to exactly the server's MessagePack bytes
    assert codec.encode(value, Encoding.MSGPACK) == packed
    # 3. the MessagePack decodes to the same value
    assert codec.decode(packed, Encoding.MSGPACK) == value
    # 4. re-encoded as JSON, it parses to the same value
    assert json.loads(codec.encode(value, Encoding.JSON)) == value
    assert codec.decode(codec.encode(value, Encoding.JSON), Encoding.JSON) == value


def is_request(name: str) -> bool:
    value = load(name)[0]
    # `status` is a request and its reply's kind; the reply has a version.
    return value["kind"] in REQUEST_KINDS and "version" not in value


REQUESTS = [n for n in NAMES if is_request(n)]


def test_every_request_kind_has_a_vector() -> None:
    assert {load(n)[0]["kind"] for n in REQUESTS} == REQUEST_KINDS


@pytest.mark.parametrize("name", REQUESTS)
def test_request_builder_writes_the_servers_bytes(name: str) -> None:
    value, packed = load(name)
    fields = {k: v for k, v in value.items() if k not in ("id", "kind")}
    # Shuffle the field order the builder is given: it must put them in wire order itself.
    fields = dict(reversed(list(fields.items())))
    built = messages.request(value["kind"], value["id"], **fields)
    assert codec.encode(built, Encoding.MSGPACK) == packed


@pytest.mark.parametrize("name", ["notify_changes", "result_query"])
@pytest.mark.parametrize("algorithm", [Compression.ZSTD, Compression.DEFLATE])
def test_compressed_frames(name: str, algorithm: Compression) -> None:
    value, packed = load(name)
    suffix = "zstd" if algorithm is Compression.ZSTD else "zlib"
    frame = (VECTORS / "frames" / f"{name}.{suffix}").read_bytes()
    assert codec.compressed_by(frame) is algorithm
    assert codec.decompress(algorithm, frame, 1 << 20) == packed
    session = Codec(Encoding.MSGPACK, algorithm, compress_min=0)
    assert session.decode(frame) == value
    # Our own compressed frame of the same message decodes to it too.
    ours = session.encode(value)
    assert isinstance(ours, bytes) and codec.compressed_by(ours) is algorithm
    assert session.decode(ours) == value
    # The size bound applies to the decompressed message.
    with pytest.raises(DecodeError) as e:
        codec.decompress(algorithm, frame, len(packed) - 1)
    assert e.value.code == "too_large"


# The frames of invalid/cases.json a client's decoder can judge (the others are about request
# fields, which only the server checks; they are tested over a live session).
FRAME_CASES = {
    "json_malformed",
    "json_not_an_object",
    "json_uncompressed_binary_frame",
    "msgpack_text_frame",
    "msgpack_truncated",
    "msgpack_trailing_bytes",
    "msgpack_not_a_map",
    "msgpack_empty",
    "zstd_frame_in_uncompressed_session",
    "zlib_frame_in_zstd_session",
    "zstd_garbage",
    "zlib_garbage",
}


def invalid_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((VECTORS / "invalid" / "cases.json").read_text(encoding="utf-8"))
    return cases


@pytest.mark.parametrize("case", [c for c in invalid_cases() if c["name"] in FRAME_CASES], ids=lambda c: c["name"])
def test_invalid_frames_are_refused_with_their_code(case: dict[str, Any]) -> None:
    session = Codec(Encoding(case["encoding"]), Compression(case["compression"]))
    frame: str | bytes = case["text"] if case["frame"] == "text" else bytes.fromhex(case["hex"])
    with pytest.raises(DecodeError) as e:
        session.decode(frame)
    assert e.value.code == case["code"], e.value.message


def test_every_frame_case_is_known() -> None:
    names = {c["name"] for c in invalid_cases()}
    assert names >= FRAME_CASES


def test_typed_replies() -> None:
    welcome = messages.parse_welcome(load("welcome")[0])
    assert welcome.limits.max_frame_bytes == 16 << 20 and welcome.role == "write" and welcome.protocol == 1
    done = messages.parse_reply(load("result_done")[0]["result"])
    assert done == messages.Done(version=42, changes=1)
    query = messages.parse_reply(load("result_query")[0]["result"])
    assert isinstance(query, messages.QueryResult)
    assert query.columns == ["Quantity", "Client", "Status"]
    assert query.records()[1] == {"key": ["o2"], "Quantity": -3, "Client": "c2", "Status": "Planned"}
    tx = messages.parse_reply(load("result_transaction")[0]["result"])
    assert isinstance(tx, messages.TransactionResult)
    assert isinstance(tx.replies[0], messages.Done) and isinstance(tx.replies[1], messages.NodeData)
    status = messages.parse_status(load("status_reply")[0])
    assert status.history_from == 12
    notify = _event(load("notify_changes")[0])
    assert isinstance(notify, messages.Notification) and notify.changes is not None
    kinds = [c.change for c in notify.changes]
    assert kinds == [
        "number",
        "number",
        "text",
        "reference",
        "reference",
        "entry_added",
        "entry_removed",
        "state_switched",
    ]
    assert notify.changes[3].old is None and notify.changes[3].new == ["o1"]
    assert notify.changes[7].stategroup == "Status" and notify.changes[7].node[1] == {"group": "Planning"}
    reload = _event(load("reload")[0])
    assert isinstance(reload, messages.Reload) and reload.reason == "lagged" and reload.node is not None
    nq = _event(load("notify_query")[0])
    assert isinstance(nq, messages.Notification) and nq.query is not None and nq.query.total == 3


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("error_instruction", errors.ConflictError),
        ("error_limit", errors.LimitError),
        ("error_no_id", errors.ProtocolError),
        ("error_subscription", errors.LimitError),
    ],
)
def test_error_vectors_become_typed_errors(name: str, cls: type[errors.EspalierError]) -> None:
    value = load(name)[0]
    e = errors.error_from_code(
        value["code"], value["message"], request_id=value.get("id"), subscription=value.get("subscription")
    )
    assert type(e) is cls
    assert e.code == value["code"] and e.message == value["message"]
    assert e.request_id == value.get("id") and e.subscription == value.get("subscription")
