"""The protocol's messages as Python values: request builders (``dict`` in the server's field
order, so they encode byte for byte as the server would) and typed replies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ClientError

__all__ = [
    "Params",
    "Limits",
    "Welcome",
    "Row",
    "QueryResult",
    "Done",
    "NodeData",
    "TransactionResult",
    "Reply",
    "Node",
    "Status",
    "Change",
    "Notification",
    "Reload",
    "Event",
    "request",
    "parse_reply",
    "parse_welcome",
    "parse_status",
    "parse_query",
    "parse_change",
    "PROTOCOL_VERSION",
]

PROTOCOL_VERSION = 1

Params = Mapping[str, str | int]
JsonObject = dict[str, Any]

# The order of `espalier_protocol::Message`'s fields: requests built in this order encode to
# exactly the bytes the server's own encoder writes (checked against the vectors).
_REQUEST_FIELDS = ("id", "kind", "text", "instruction", "params", "path", "since", "subscription")
_I64 = (-(1 << 63), (1 << 63) - 1)
_U64_MAX = (1 << 64) - 1


def _check_params(params: Params) -> dict[str, str | int]:
    out: dict[str, str | int] = {}
    # Sorted: the server keeps parameters in a sorted map, so this is its byte order.
    for name in sorted(params):
        value = params[name]
        if not isinstance(name, str):
            raise ClientError("usage", f"parameter names are strings, not {type(name).__name__}")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ClientError("usage", f"parameter ${name}: a string or an integer, not {type(value).__name__}")
        if isinstance(value, int) and not _I64[0] <= value <= _I64[1]:
            raise ClientError("usage", f"parameter ${name}: {value} does not fit a 64-bit signed number")
        out[name] = value
    return out


def request(kind: str, request_id: int, **fields: Any) -> JsonObject:
    """A request message with the given fields (``None`` ones left out), in wire order."""
    if not 0 <= request_id <= _U64_MAX:
        raise ClientError("usage", f"request id {request_id} is not an unsigned 64-bit integer")
    unknown = set(fields) - set(_REQUEST_FIELDS)
    if unknown:
        raise ClientError("usage", f"{kind}: unknown request fields {sorted(unknown)}")
    values: dict[str, Any] = {"id": request_id, "kind": kind, **fields}
    if values.get("params") is not None:
        values["params"] = _check_params(values["params"])
    return {name: values[name] for name in _REQUEST_FIELDS if values.get(name) is not None}


@dataclass(frozen=True)
class Limits:
    """The server's bounds, from ``welcome``."""

    max_frame_bytes: int
    max_in_flight: int
    max_query_ms: int
    max_result_bytes: int
    max_subscriptions: int


@dataclass(frozen=True)
class Welcome:
    """The first message of every session."""

    version: int
    protocol: int
    server: str
    role: str
    encoding: str
    compression: str
    compress_min: int
    limits: Limits


@dataclass(frozen=True)
class Row:
    key: list[str]
    values: list[Any]


@dataclass(frozen=True)
class QueryResult:
    """A collection query's rows: ``total`` matching entries, the ``columns``' names, and
    ``rows`` (each an entry's ``key`` and its ``values`` in column order)."""

    total: int
    columns: list[str]
    rows: list[Row]

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts ``{"key": [...], column: value, ...}``."""
        return [{"key": r.key, **dict(zip(self.columns, r.values, strict=False))} for r in self.rows]


@dataclass(frozen=True)
class Done:
    """A committed mutation, command or transaction: its version and how many changes it made."""

    version: int
    changes: int


@dataclass(frozen=True)
class NodeData:
    """An executed ``get``: the node and its subtree in dump form."""

    node: JsonObject


@dataclass(frozen=True)
class TransactionResult:
    """One reply per instruction of the transaction, in order."""

    replies: list[Reply]


Reply = QueryResult | Done | NodeData | TransactionResult


@dataclass(frozen=True)
class Node:
    """The reply to ``get``: the node in dump form and the version it was read at."""

    version: int
    node: JsonObject


@dataclass(frozen=True)
class Status:
    version: int
    sessions: int
    subscriptions: int
    history_from: int


@dataclass(frozen=True)
class Change:
    """One change of a commit within a subscribed subtree (``docs/protocol.md``). ``change`` is
    ``number``, ``text``, ``reference``, ``entry_added``, ``entry_removed`` or
    ``state_switched``; ``node`` is the path of the node holding the property, as steps."""

    change: str
    node: list[JsonObject]
    property: str | None = None
    collection: str | None = None
    stategroup: str | None = None
    key: list[str] | None = None
    old: Any = None
    new: Any = None
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Notification:
    """One commit that touched a subscription: node ``changes``, a collection query's new
    rows (``query``), or the rows a pattern query's commit ``removed`` and ``added`` (each
    row its values in column order; the subscription's ``query`` is kept up to date)."""

    version: int
    changes: list[Change] | None = None
    query: QueryResult | None = None
    removed: list[list[Any]] | None = None
    added: list[list[Any]] | None = None


@dataclass(frozen=True)
class Reload:
    """The data afresh: the server dropped notifications (``reason`` ``lagged``), or a
    resubscription could not resume (``resubscribed``). Replace your copy with it."""

    version: int
    reason: str
    node: JsonObject | None = None
    query: QueryResult | None = None


Event = Notification | Reload


def _field(msg: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = msg.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        what = msg.get("kind", "message")
        raise ClientError("bad_reply", f"{what}: field `{name}` is missing or not {_names(kind)}: {value!r:.80}")
    return value


def _names(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def parse_query(value: Any) -> QueryResult:
    if not isinstance(value, dict):
        raise ClientError("bad_reply", f"a query result is a map, not {type(value).__name__}")
    rows = []
    for r in _field(value, "rows", list):
        if not isinstance(r, dict):
            raise ClientError("bad_reply", "a query row is a map")
        rows.append(Row(key=list(_field(r, "key", list)), values=list(_field(r, "values", list))))
    return QueryResult(total=_field(value, "total", int), columns=list(_field(value, "columns", list)), rows=rows)


def parse_reply(value: Any) -> Reply:
    """The engine's reply inside ``result`` (or a transaction's element)."""
    if not isinstance(value, dict) or len(value) != 1:
        raise ClientError("bad_reply", f"a result is a map with one member, not {value!r:.80}")
    ((tag, body),) = value.items()
    if tag == "query":
        return parse_query(body)
    if tag == "done":
        return Done(version=_field(body, "version", int), changes=_field(body, "changes", int))
    if tag == "node":
        if not isinstance(body, dict):
            raise ClientError("bad_reply", "a node is a map")
        return NodeData(node=body)
    if tag == "transaction":
        if not isinstance(body, list):
            raise ClientError("bad_reply", "a transaction result is a list")
        return TransactionResult(replies=[parse_reply(v) for v in body])
    raise ClientError("bad_reply", f"unknown result {tag!r}")


def parse_welcome(msg: Mapping[str, Any]) -> Welcome:
    limits = _field(msg, "limits", dict)
    return Welcome(
        version=_field(msg, "version", int),
        protocol=_field(msg, "protocol", int),
        server=_field(msg, "server", str),
        role=_field(msg, "role", str),
        encoding=_field(msg, "encoding", str),
        compression=_field(msg, "compression", str),
        compress_min=_field(msg, "compress_min", int),
        limits=Limits(
            max_frame_bytes=_field(limits, "max_frame_bytes", int),
            max_in_flight=_field(limits, "max_in_flight", int),
            max_query_ms=_field(limits, "max_query_ms", int),
            max_result_bytes=_field(limits, "max_result_bytes", int),
            max_subscriptions=_field(limits, "max_subscriptions", int),
        ),
    )


def parse_status(msg: Mapping[str, Any]) -> Status:
    return Status(
        version=_field(msg, "version", int),
        sessions=_field(msg, "sessions", int),
        subscriptions=_field(msg, "subscriptions", int),
        history_from=_field(msg, "history_from", int),
    )


def parse_change(value: Any) -> Change:
    if not isinstance(value, dict):
        raise ClientError("bad_reply", "a change is a map")
    return Change(
        change=_field(value, "change", str),
        node=list(_field(value, "node", list)),
        property=value.get("property"),
        collection=value.get("collection"),
        stategroup=value.get("stategroup"),
        key=value.get("key"),
        old=value.get("old"),
        new=value.get("new"),
        raw=value,
    )
