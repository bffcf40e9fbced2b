"""One-shot requests over plain HTTP (``docs/protocol.md``, "HTTP"): no session, one request
per call. For scripts, health checks and places where a WebSocket is awkward.

```python
http = espalier.HttpClient("http://127.0.0.1:7700", token="...")
http.execute("update . 'Machines' : \\"M1\\" ( 'Pulses' -> number + 1 )")
```
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from .codec import DecodeError, Encoding, decode, encode
from .errors import ClientError, EspalierError, error_from_code
from .messages import Node, Params, QueryResult, Reply, Status, parse_reply, parse_status, request

__all__ = ["HttpClient", "AsyncHttpClient"]

_MAX_REPLY = 64 << 20


class HttpClient:
    """One-shot requests. ``encoding`` picks the body format both ways (``json`` or ``msgpack``);
    ``timeout`` bounds each request in seconds; replies over ``max_reply`` bytes are refused."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        encoding: Encoding | str = Encoding.JSON,
        timeout: float = 60.0,
        max_reply: int = _MAX_REPLY,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        scheme = {"ws": "http", "wss": "https", "http": "http", "https": "https"}.get(parts.scheme)
        if scheme is None or not parts.netloc:
            raise ClientError("usage", f"{url!r} is not an http:// or https:// URL with a host")
        self.base = urllib.parse.urlunsplit((scheme, parts.netloc, "", "", ""))
        try:
            self.encoding = Encoding(encoding)
        except ValueError as e:
            raise ClientError("usage", str(e)) from None
        self.token = token
        self.timeout = timeout
        self.max_reply = max_reply

    def _send(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        content_type = "application/json" if self.encoding is Encoding.JSON else "application/msgpack"
        headers = {"Accept": content_type}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = encode(dict(body), self.encoding)
            headers["Content-Type"] = content_type
        where = f"{method} {path.split('?', maxsplit=1)[0]}"
        req = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return self._read(resp.read(self.max_reply + 1), resp.headers.get("Content-Type"), where)
        except urllib.error.HTTPError as e:
            try:
                msg = self._read(e.read(self.max_reply + 1), e.headers.get("Content-Type"), where)
            except EspalierError:
                raise error_from_code(_status_code(e.code), f"HTTP {e.code} {e.reason}", request=where) from None
            raise self._error(msg, where) from None
        except (urllib.error.URLError, OSError) as e:
            raise ClientError("connect_failed", f"cannot reach {self.base}: {e}", request=where) from None

    def _read(self, data: bytes, content_type: str | None, where: str) -> dict[str, Any]:
        if len(data) > self.max_reply:
            raise ClientError("bad_reply", f"the reply is over {self.max_reply} bytes", request=where)
        encoding = Encoding.MSGPACK if content_type and "msgpack" in content_type else Encoding.JSON
        try:
            return decode(data, encoding)
        except DecodeError as e:
            raise ClientError("bad_reply", f"unreadable reply: {e.message}", request=where) from None

    @staticmethod
    def _error(msg: Mapping[str, Any], where: str) -> EspalierError:
        if msg.get("kind") == "error":
            return error_from_code(str(msg.get("code", "internal")), str(msg.get("message", "")), request=where)
        return ClientError(
            "bad_reply", f"an HTTP error without an error message: {json.dumps(msg)[:100]}", request=where
        )

    def _expect(self, msg: Mapping[str, Any], kind: str, where: str) -> None:
        if msg.get("kind") == "error":
            raise self._error(msg, where)
        if msg.get("kind") != kind:
            raise ClientError("bad_reply", f"expected {kind!r}, got {msg.get('kind')!r}", request=where)

    def execute(
        self, text: str | None = None, *, instruction: Mapping[str, Any] | None = None, params: Params | None = None
    ) -> Reply:
        """``POST /v1/execute``: runs one instruction."""
        if (text is None) == (instruction is None):
            raise ClientError("usage", "execute: give `text` or `instruction`, exactly one")
        body = request("execute", 0, text=text, instruction=instruction, params=params)
        del body["id"], body["kind"]
        msg = self._send("POST", "/v1/execute", body)
        self._expect(msg, "result", "POST /v1/execute")
        return parse_reply(msg.get("result"))

    def query(self, text: str, params: Params | None = None) -> QueryResult:
        reply = self.execute(text, params=params)
        if not isinstance(reply, QueryResult):
            raise ClientError(
                "usage", f"query: the instruction is not a collection query (it gave {type(reply).__name__})"
            )
        return reply

    def get(self, path: str = "", params: Params | None = None) -> Node:
        """``GET /v1/node``: one node in dump form with its version."""
        query: list[tuple[str, str]] = []
        if path:
            query.append(("path", path))
        for name, value in sorted((params or {}).items()):
            query.append((f"p.{name}", str(value)))
        msg = self._send("GET", "/v1/node" + ("?" + urllib.parse.urlencode(query) if query else ""))
        self._expect(msg, "node", "GET /v1/node")
        node, version = msg.get("node"), msg.get("version")
        if not isinstance(node, dict) or not isinstance(version, int):
            raise ClientError("bad_reply", "a node reply without node/version", request="GET /v1/node")
        return Node(version=version, node=node)

    def status(self) -> Status:
        msg = self._send("GET", "/v1/status")
        self._expect(msg, "status", "GET /v1/status")
        return parse_status(msg)

    def health(self) -> bool:
        """``GET /v1/health``: True when the server serves; raises while it shuts down."""
        msg = self._send("GET", "/v1/health")
        self._expect(msg, "ok", "GET /v1/health")
        return True

    def shutdown(self) -> None:
        """``POST /v1/shutdown`` (admin)."""
        msg = self._send("POST", "/v1/shutdown")
        self._expect(msg, "ok", "POST /v1/shutdown")


class AsyncHttpClient:
    """``HttpClient`` for asyncio code: each request runs in a worker thread."""

    def __init__(self, url: str, **options: Any) -> None:
        self.sync = HttpClient(url, **options)

    async def execute(
        self, text: str | None = None, *, instruction: Mapping[str, Any] | None = None, params: Params | None = None
    ) -> Reply:
        return await asyncio.to_thread(self.sync.execute, text, instruction=instruction, params=params)

    async def query(self, text: str, params: Params | None = None) -> QueryResult:
        return await asyncio.to_thread(self.sync.query, text, params)

    async def get(self, path: str = "", params: Params | None = None) -> Node:
        return await asyncio.to_thread(self.sync.get, path, params)

    async def status(self) -> Status:
        return await asyncio.to_thread(self.sync.status)

    async def health(self) -> bool:
        return await asyncio.to_thread(self.sync.health)

    async def shutdown(self) -> None:
        await asyncio.to_thread(self.sync.shutdown)


def _status_code(status: int) -> str:
    return {
        400: "bad_request",
        401: "unauthorized",
        403: "forbidden",
        404: "key_missing",
        409: "key_exists",
        413: "too_large",
        429: "too_many_requests",
        503: "shutting_down",
        504: "timeout",
    }.get(status, "internal")
