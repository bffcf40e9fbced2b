"""The asyncio client: one WebSocket session with pipelined requests (many in flight, replies
matched by id), subscriptions as async iterators, and reconnect with resume.

```python
async with await espalier.aio.connect("ws://127.0.0.1:7700") as db:
    rows = await db.query("collection select . 'Orders' 'q' -> number : 'Quantity'")
    async for event in await db.subscribe(". 'Machines' : \\"M1\\""):
        ...
```
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from .codec import DEFAULT_COMPRESS_MIN, Codec, Compression, DecodeError, Encoding, compressed_by
from .errors import (
    ClientError,
    ConnectionLostError,
    EspalierError,
    LimitError,
    error_from_code,
)
from .messages import (
    Done,
    Event,
    Node,
    Notification,
    Params,
    QueryResult,
    Reload,
    Reply,
    Row,
    Status,
    TransactionResult,
    Welcome,
    parse_change,
    parse_query,
    parse_reply,
    parse_status,
    parse_welcome,
    request,
)

__all__ = ["AsyncClient", "Subscription", "connect", "ws_url"]

log = logging.getLogger("espalier")

JsonObject = dict[str, Any]

# Largest message accepted before `welcome` tells the server's limits, and the default bound
# after it (the server's default max_result_bytes is 64 MiB; replies are never larger).
_DEFAULT_MAX_MESSAGE = 64 << 20
# Slack over max_result_bytes: the bound applies to the reply's encoding, and a compressed
# frame is never larger than that, but a welcome/notify envelope may add a little.
_MESSAGE_SLACK = 64 << 10


class _Default:
    """The type of ``DEFAULT``: "use the client's timeout"."""


DEFAULT = _Default()
Timeout = float | None | _Default


def ws_url(
    url: str,
    *,
    encoding: Encoding,
    compression: Compression,
    compress_min: int,
    token: str | None = None,
    token_in_query: bool = False,
) -> str:
    """The upgrade URL: ``url`` (``ws://``, ``wss://``, ``http://`` or ``https://``, with or
    without the ``/ws`` path) with the session's query parameters."""
    parts = urllib.parse.urlsplit(url)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ClientError("usage", f"{url!r} is not a ws://, wss://, http:// or https:// URL with a host")
    path = parts.path.rstrip("/")
    if not path.endswith("/ws"):
        path += "/ws"
    query = [("encoding", encoding.value), ("compression", compression.value), ("compress_min", str(compress_min))]
    if token is not None and token_in_query:
        query.append(("token", token))
    return urllib.parse.urlunsplit((scheme, parts.netloc, path, urllib.parse.urlencode(query), ""))


@dataclass
class _Pending:
    future: asyncio.Future[JsonObject]
    where: str
    # Runs in the reader, before any later frame is read (a `subscribed` registers its
    # subscription here so that its first `notify`, right behind it, finds it).
    on_reply: Callable[[JsonObject], None] | None = None


def _describe(kind: str, request_id: int, fields: Mapping[str, Any]) -> str:
    what = fields.get("text") or fields.get("path")
    if isinstance(what, str) and what:
        short = what if len(what) <= 60 else what[:57] + "..."
        return f"{kind} #{request_id} {short!r}"
    if fields.get("instruction") is not None:
        return f"{kind} #{request_id} (structured instruction)"
    return f"{kind} #{request_id}"


class Subscription:
    """A live subscription: ``node`` (node subscriptions) or ``query`` (query subscriptions)
    hold the data, ``version`` the version it is at. Iterate to get each ``Notification`` in
    commit order, or a ``Reload`` that replaces the data. ``close()`` unsubscribes.

    After a reconnect the client resubscribes with ``since`` = the last version received, so
    the iteration goes on without gaps (or with a ``Reload`` if the server's history is too
    short). The iteration raises the error that ended the subscription, if one did.
    """

    def __init__(
        self,
        client: AsyncClient,
        fields: JsonObject,
        queue_size: int,
    ) -> None:
        assert queue_size > 0
        self._client = client
        self._fields = fields  # path or text/instruction, params
        self.is_query = "path" not in fields
        self.id: int | None = None
        self.version = 0
        self.resumed = False
        # How often the reader fell `subscription_queue` events behind (each time the client
        # resumed from history, or delivered a `Reload`).
        self.overflows = 0
        self.node: JsonObject | None = None
        self.query: QueryResult | None = None
        self._queue: collections.deque[Event] = collections.deque()
        self._queue_size = queue_size
        self._wakeup = asyncio.Event()
        self._received_version = 0  # last version put in the queue (resume point on reconnect)
        self._error: BaseException | None = None
        self._ended = False
        self._resubscribing = False
        self._behind = False  # the queue overflowed; resubscribe once it is read
        self._session = 0

    def __repr__(self) -> str:
        target = self._fields.get("path") if not self.is_query else self._fields.get("text", "(structured query)")
        return f"<Subscription {self.id} {target!r} at version {self.version}>"

    # ---- consumer side ----

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._queue:
                event = self._queue.popleft()
                self._delivered(event)
                return event
            if self._error is not None:
                raise self._error
            if self._ended:
                raise StopAsyncIteration
            if self._behind:
                self._client._resubscribe_later(self)
            self._wakeup.clear()
            await self._wakeup.wait()

    async def next(self, timeout: float | None = None) -> Event:
        """The next event, waiting at most ``timeout`` seconds (``asyncio.TimeoutError``)."""
        return await asyncio.wait_for(self.__anext__(), timeout)

    def _delivered(self, event: Event) -> None:
        self.version = event.version
        if isinstance(event, Reload):
            self.node = event.node
            self.query = event.query
        elif event.query is not None:
            self.query = event.query
        elif self.query is not None and (event.removed is not None or event.added is not None):
            self.query = _apply_rows(self.query, event.removed or [], event.added or [])

    @property
    def ended(self) -> bool:
        return self._ended or self._error is not None

    async def close(self) -> None:
        """Unsubscribes; the iteration ends after the events already received."""
        if self._ended:
            return
        self._ended = True
        self._wakeup.set()
        await self._client._unsubscribe(self)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- client side ----

    def _accept(self, msg: JsonObject) -> None:
        """The `subscribed` reply (first, or a resubscription)."""
        self.id = msg.get("subscription") if isinstance(msg.get("subscription"), int) else None
        version = msg.get("version")
        if not isinstance(version, int) or self.id is None:
            raise ClientError("bad_reply", f"subscribed without a subscription number or version: {msg!r:.100}")
        resumed = msg.get("resumed") is True
        first = not self._resubscribing
        node = msg.get("node") if isinstance(msg.get("node"), dict) else None
        query = parse_query(msg["query"]) if msg.get("query") is not None else None
        if first:
            self.resumed = resumed
            self.version = version
            self.node = node
            self.query = query
        elif not resumed:
            # The server could not continue from `since`: the data comes afresh.
            self._push(Reload(version=version, reason="resubscribed", node=node, query=query))
        self._received_version = version
        self._resubscribing = False

    def _push(self, event: Event) -> None:
        if self._ended or self._error is not None or self._behind:
            return  # while behind, events are dropped; the resubscription brings them again
        if len(self._queue) >= self._queue_size:
            # The reader is behind. Keep what is queued, stop the server's stream now, and once
            # the reader has taken the queue, resume from its last version (the server's
            # history replays what was dropped): nothing is lost silently.
            log.warning(
                "subscription %s: %d events unread; it resumes from version %d when they are read",
                self.id,
                len(self._queue),
                self._received_version,
            )
            self._behind = True
            self.overflows += 1
            self._client._detach(self)
            return
        self._queue.append(event)
        self._received_version = event.version
        self._wakeup.set()

    def _fail(self, error: BaseException) -> None:
        if self._error is None and not self._ended:
            self._error = error
        self._wakeup.set()

    def _end(self) -> None:
        self._ended = True
        self._wakeup.set()


class AsyncClient:
    """A session with an Espalier server. Use ``await connect(url, ...)`` or
    ``async with AsyncClient(url, ...) as db``.

    Options: ``token`` (sent as ``Authorization: Bearer``), ``encoding`` (``"json"`` or
    ``"msgpack"``), ``compression`` (``"none"``, ``"zstd"``, ``"deflate"``), ``compress_min``,
    ``timeout`` (seconds per request; ``None`` waits forever), ``connect_timeout``,
    ``reconnect`` (reconnect and resubscribe when the session drops), ``reconnect_attempts``,
    ``respect_limits`` (wait for a free slot instead of exceeding ``max_in_flight``, and refuse
    requests over ``max_frame_bytes`` before sending them), ``subscription_queue`` (events a
    subscription buffers for a slow reader; past it the server's stream stops and resumes from
    the reader's last version once the queue is read), ``on_error`` (called with errors the server
    pushes about no request or subscription, such as an unreadable frame).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        encoding: Encoding | str = Encoding.JSON,
        compression: Compression | str = Compression.NONE,
        compress_min: int = DEFAULT_COMPRESS_MIN,
        timeout: float | None = 60.0,
        connect_timeout: float = 10.0,
        reconnect: bool = True,
        reconnect_attempts: int = 8,
        respect_limits: bool = True,
        subscription_queue: int = 1024,
        max_message: int = _DEFAULT_MAX_MESSAGE,
        token_in_query: bool = False,
        on_error: Callable[[EspalierError], None] | None = None,
    ) -> None:
        try:
            self.encoding = Encoding(encoding)
            self.compression = Compression(compression)
        except ValueError as e:
            raise ClientError("usage", str(e)) from None
        if subscription_queue <= 0 or reconnect_attempts < 0 or compress_min < 0:
            raise ClientError("usage", "subscription_queue must be positive; attempts and compress_min not negative")
        self.url = ws_url(
            url,
            encoding=self.encoding,
            compression=self.compression,
            compress_min=compress_min,
            token=token,
            token_in_query=token_in_query,
        )
        self._token = token if not token_in_query else None
        self._codec = Codec(self.encoding, self.compression, compress_min, max_message)
        self._max_message = max_message
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.reconnect = reconnect
        self.reconnect_attempts = reconnect_attempts
        self.respect_limits = respect_limits
        self.subscription_queue = subscription_queue
        self.on_error = on_error
        self.welcome: Welcome | None = None
        self.reconnects = 0
        self._ids = itertools.count(1)
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, _Pending] = {}
        self._subs_by_id: dict[int, Subscription] = {}
        self._subs: set[Subscription] = set()
        self._slots: asyncio.Semaphore | None = None
        self._connected = asyncio.Event()
        self._welcome_waiter: asyncio.Future[JsonObject] | None = None
        self._closing = False
        self._closed_error: EspalierError | None = None
        self._reconnector: asyncio.Task[None] | None = None
        self._session = 0  # counts sessions; subscription numbers are per session
        self._background: set[asyncio.Task[Any]] = set()
        self.close_code: int | None = None
        self.close_reason: str | None = None
        # Frames sent and received, and how many of them were compressed (all sessions).
        self.stats = {"frames_out": 0, "compressed_out": 0, "frames_in": 0, "compressed_in": 0}

    # ---- lifecycle ----

    async def open(self) -> AsyncClient:
        """Connects and waits for ``welcome``."""
        await self._open()
        return self

    async def __aenter__(self) -> AsyncClient:
        if self._ws is None:
            await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Ends the session: pending requests fail with ``closed``, subscriptions end."""
        if self._closing:
            return
        self._closing = True
        self._closed_error = ClientError("closed", "the client was closed")
        if self._reconnector is not None:
            self._reconnector.cancel()
        ws = self._ws
        if ws is not None:
            await ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        self._fail_pending(self._closed_error)
        for sub in list(self._subs):
            sub._end()
        self._subs.clear()
        self._subs_by_id.clear()
        self._connected.set()  # wake waiters so they see the client is closed
        for task in list(self._background):
            task.cancel()

    @property
    def closed(self) -> bool:
        return self._closing or self._closed_error is not None

    async def _dial(self) -> ClientConnection:
        headers = {"Authorization": f"Bearer {self._token}"} if self._token is not None else None
        try:
            return await ws_connect(
                self.url,
                additional_headers=headers,
                # Compression is the protocol's own (per message, negotiated in the URL).
                compression=None,
                max_size=self._max_message,
                open_timeout=self.connect_timeout,
                proxy=None,
            )
        except InvalidStatus as e:
            raise _refusal(e.response.status_code, e.response.body, self.url) from None
        except (OSError, InvalidHandshake, asyncio.TimeoutError) as e:
            raise ClientError("connect_failed", f"cannot connect to {_redact(self.url)}: {e}") from None

    async def _open(self) -> None:
        ws = await self._dial()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[JsonObject] = loop.create_future()
        self._welcome_waiter = waiter
        self._ws = ws
        self._session += 1
        self.close_code = None
        self.close_reason = None
        self._reader = asyncio.create_task(self._read(ws))
        try:
            msg = await asyncio.wait_for(asyncio.shield(waiter), self.connect_timeout)
        except asyncio.TimeoutError:
            await ws.close()
            raise ClientError(
                "connect_failed", f"no welcome from {_redact(self.url)} within {self.connect_timeout} s"
            ) from None
        welcome = parse_welcome(msg)
        self.welcome = welcome
        self._codec.compress_min = welcome.compress_min
        # Replies are bounded by max_result_bytes, so a larger frame is a broken stream.
        self._codec.max_message = min(self._max_message, welcome.limits.max_result_bytes + _MESSAGE_SLACK)
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(1, welcome.limits.max_in_flight))
        self._connected.set()

    # ---- reading ----

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for frame in ws:
                self._dispatch(frame)
        except ConnectionClosed:
            pass
        except Exception:  # a bug in dispatch must not hang every caller
            log.exception("espalier: reading the session failed")
            await ws.close(1011, "client error")
        finally:
            self._lost(ws)

    def _dispatch(self, frame: str | bytes) -> None:
        self.stats["frames_in"] += 1
        if isinstance(frame, bytes) and compressed_by(frame) is not None:
            self.stats["compressed_in"] += 1
        try:
            msg = self._codec.decode(frame)
        except DecodeError as e:
            # The server sent something unreadable: a reply may be lost, so the session is
            # not trustworthy any more. Close it; pending requests fail, then we reconnect.
            log.error("espalier: unreadable frame from the server: %s", e)
            asyncio.get_running_loop().create_task(self._abort(f"unreadable frame from the server: {e.message}"))
            return
        kind = msg.get("kind")
        request_id = msg.get("id")
        if kind == "welcome":
            if self._welcome_waiter is not None and not self._welcome_waiter.done():
                self._welcome_waiter.set_result(msg)
            return
        if isinstance(request_id, int) and not isinstance(request_id, bool):
            pending = self._pending.pop(request_id, None)
            if pending is None:
                if kind == "error":
                    # About a request this client no longer waits for (or never sent).
                    self._report(self._error(msg, None, request_id))
                    return
                if kind == "subscribed" and isinstance(msg.get("subscription"), int):
                    # Its caller gave up waiting; do not leave the subscription running.
                    self._spawn(
                        self._send_quiet(request("unsubscribe", next(self._ids), subscription=msg["subscription"]))
                    )
                return
            if pending.future.done():
                return
            if kind == "error":
                pending.future.set_exception(self._error(msg, pending.where, request_id))
                return
            if pending.on_reply is not None:
                try:
                    pending.on_reply(msg)
                except EspalierError as e:
                    pending.future.set_exception(e)
                    return
            pending.future.set_result(msg)
            return
        subscription = msg.get("subscription")
        sub = self._subs_by_id.get(subscription) if isinstance(subscription, int) else None
        if kind in ("notify", "reload"):
            if sub is None:
                return  # an old subscription's last words after unsubscribe/resubscribe
            try:
                sub._push(_event(msg))
            except EspalierError as e:
                self._subs_by_id.pop(sub.id or 0, None)
                self._subs.discard(sub)
                sub._fail(e)
            return
        if kind == "error":
            if sub is not None:
                self._subs_by_id.pop(sub.id or 0, None)
                self._subs.discard(sub)
                sub._fail(self._error(msg, None, None))
                return
            self._report(self._error(msg, None, None))
            return
        log.debug("espalier: ignoring a %r message", kind)

    def _report(self, error: EspalierError) -> None:
        if self.on_error is not None:
            self.on_error(error)
        else:
            log.warning("espalier: the server reported %s", error)

    def _error(self, msg: JsonObject, where: str | None, request_id: int | None) -> EspalierError:
        code = msg.get("code") if isinstance(msg.get("code"), str) else "internal"
        message = msg.get("message") if isinstance(msg.get("message"), str) else "(no message)"
        subscription = msg.get("subscription") if isinstance(msg.get("subscription"), int) else None
        return error_from_code(str(code), str(message), request=where, request_id=request_id, subscription=subscription)

    def _lost(self, ws: ClientConnection) -> None:
        if ws is not self._ws:
            return
        self.close_code = ws.close_code
        self.close_reason = ws.close_reason
        self._connected.clear()
        reason = _close_text(ws.close_code, ws.close_reason)
        error: EspalierError
        if self._closing:
            error = self._closed_error or ClientError("closed", "the client was closed")
        else:
            error = ConnectionLostError(
                f"the session ended while the request was in flight: {reason}",
                close_code=ws.close_code,
                close_reason=ws.close_reason,
            )
        if self._welcome_waiter is not None and not self._welcome_waiter.done():
            self._welcome_waiter.set_exception(
                ConnectionLostError(f"the session ended before welcome: {reason}", close_code=ws.close_code)
            )
        self._fail_pending(error)
        self._subs_by_id.clear()  # the numbers belonged to that session
        if self._closing:
            return
        if self.reconnect and self.welcome is not None and self._closed_error is None:
            self._reconnector = asyncio.get_running_loop().create_task(self._reconnect(reason))
            return
        final = ConnectionLostError(
            f"the session ended: {reason}", close_code=ws.close_code, close_reason=ws.close_reason
        )
        self._give_up(final)

    def _give_up(self, error: EspalierError) -> None:
        self._closed_error = error
        for sub in list(self._subs):
            sub._fail(error)
        self._subs.clear()
        self._subs_by_id.clear()
        self._connected.set()

    def _fail_pending(self, error: EspalierError) -> None:
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(_rewhere(error, p.where))

    async def _abort(self, why: str) -> None:
        ws = self._ws
        if ws is not None:
            await ws.close(1002, why[:120])

    async def _reconnect(self, reason: str) -> None:
        delay = 0.05
        last: EspalierError | None = None
        for attempt in range(1, self.reconnect_attempts + 1):
            if self._closing:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
            try:
                await self._open()
            except EspalierError as e:
                last = e
                log.info("espalier: reconnect attempt %d failed: %s", attempt, e)
                continue
            self.reconnects += 1
            log.info("espalier: reconnected after %s", reason)
            for sub in list(self._subs):
                self._resubscribe_later(sub)
            return
        self._give_up(
            ConnectionLostError(
                f"the session ended ({reason}) and {self.reconnect_attempts} reconnect attempts failed"
                + (f"; last: {last.message}" if last else "")
            )
        )

    # ---- requests ----

    async def _wait_connected(self) -> None:
        if self._closed_error is not None:
            raise self._closed_error
        if not self._connected.is_set():
            try:
                await asyncio.wait_for(self._connected.wait(), self.timeout)
            except asyncio.TimeoutError:
                raise ClientError(
                    "client_timeout", "not connected; reconnecting took longer than the timeout"
                ) from None
            if self._closed_error is not None:
                raise self._closed_error

    async def call(
        self,
        kind: str,
        *,
        timeout: Timeout = DEFAULT,
        on_reply: Callable[[JsonObject], None] | None = None,
        **fields: Any,
    ) -> JsonObject:
        """Sends one request and returns its reply message (raising its error as an exception).
        The typed methods (``execute``, ``get``, ...) are built on this."""
        limit = self.timeout if isinstance(timeout, _Default) else timeout
        await self._wait_connected()
        slots = self._slots if self.respect_limits else None
        if slots is not None:
            await slots.acquire()
        try:
            await self._wait_connected()
            request_id = next(self._ids)
            msg = request(kind, request_id, **fields)
            where = _describe(kind, request_id, fields)
            data = self._codec.to_bytes(msg)
            welcome = self.welcome
            if self.respect_limits and welcome is not None and len(data) > welcome.limits.max_frame_bytes:
                raise LimitError(
                    "too_large",
                    f"the request is {len(data)} bytes, over the server's max_frame_bytes of "
                    f"{welcome.limits.max_frame_bytes}; it was not sent",
                    request=where,
                )
            future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
            self._pending[request_id] = _Pending(future, where, on_reply)
            ws = self._ws
            assert ws is not None
            frame = self._codec.frame(data)
            self.stats["frames_out"] += 1
            if isinstance(frame, bytes) and compressed_by(frame) is not None:
                self.stats["compressed_out"] += 1
            try:
                await ws.send(frame)
            except ConnectionClosed:
                self._pending.pop(request_id, None)
                raise ConnectionLostError(
                    f"the session ended before the request was sent: {_close_text(ws.close_code, ws.close_reason)}",
                    close_code=ws.close_code,
                    close_reason=ws.close_reason,
                    request=where,
                ) from None
            try:
                return await asyncio.wait_for(future, limit)
            except asyncio.TimeoutError:
                self._pending.pop(request_id, None)
                raise ClientError("client_timeout", f"no reply within {limit} s", request=where) from None
        finally:
            if slots is not None:
                slots.release()

    async def execute(
        self,
        text: str | None = None,
        *,
        instruction: Mapping[str, Any] | None = None,
        params: Params | None = None,
        timeout: Timeout = DEFAULT,
    ) -> Reply:
        """Runs one instruction (text or structured form) atomically on the server."""
        if (text is None) == (instruction is None):
            raise ClientError("usage", "execute: give `text` or `instruction`, exactly one")
        msg = await self.call("execute", text=text, instruction=instruction, params=params, timeout=timeout)
        if "result" not in msg:
            raise ClientError("bad_reply", f"execute: a {msg.get('kind')!r} reply without `result`")
        return parse_reply(msg["result"])

    async def query(self, text: str, params: Params | None = None) -> QueryResult:
        """Runs a collection query; its rows."""
        reply = await self.execute(text, params=params)
        if not isinstance(reply, QueryResult):
            raise ClientError(
                "usage", f"query: the instruction is not a collection query (it gave {type(reply).__name__})"
            )
        return reply

    async def update(self, text: str, params: Params | None = None) -> Done:
        """Runs a mutation or command; its commit version and change count."""
        reply = await self.execute(text, params=params)
        if not isinstance(reply, Done):
            raise ClientError("usage", f"update: the instruction does not write (it gave {type(reply).__name__})")
        return reply

    async def transaction(self, *texts: str, params: Params | None = None) -> TransactionResult:
        """Runs the instructions as one atomic transaction; one reply per instruction."""
        if not texts:
            raise ClientError("usage", "transaction: give at least one instruction")
        reply = await self.execute("transaction ( " + ", ".join(texts) + " )", params=params)
        assert isinstance(reply, TransactionResult), reply
        return reply

    async def get(self, path: str = "", params: Params | None = None) -> Node:
        """One node and its subtree (dump form), with the version it was read at."""
        msg = await self.call("get", path=path, params=params)
        node = msg.get("node")
        version = msg.get("version")
        if not isinstance(node, dict) or not isinstance(version, int):
            raise ClientError("bad_reply", f"get: a reply without node/version: {msg!r:.100}")
        return Node(version=version, node=node)

    async def ping(self) -> None:
        await self.call("ping")

    async def status(self) -> Status:
        return parse_status(await self.call("status"))

    async def shutdown(self) -> None:
        """Asks the server to shut down (admin tokens only)."""
        await self.call("shutdown")

    async def subscribe(
        self, path: str = "", *, params: Params | None = None, since: int | None = None
    ) -> Subscription:
        """Subscribes to a node and its subtree; ``since`` resumes after that version."""
        return await self._subscribe({"path": path, "params": params}, since)

    async def subscribe_query(
        self,
        text: str | None = None,
        *,
        instruction: Mapping[str, Any] | None = None,
        params: Params | None = None,
        since: int | None = None,
    ) -> Subscription:
        """Subscribes to a collection query: its rows now, then new rows whenever they change."""
        if (text is None) == (instruction is None):
            raise ClientError("usage", "subscribe_query: give `text` or `instruction`, exactly one")
        return await self._subscribe({"text": text, "instruction": instruction, "params": params}, since)

    async def _subscribe(self, fields: JsonObject, since: int | None) -> Subscription:
        sub = Subscription(self, {k: v for k, v in fields.items() if v is not None}, self.subscription_queue)
        await self.call("subscribe", since=since, on_reply=lambda msg: self._register(sub, msg), **sub._fields)
        return sub

    def _register(self, sub: Subscription, msg: JsonObject) -> None:
        sub._accept(msg)
        assert sub.id is not None
        if sub._ended:
            # Closed while its resubscription was on the way: end it on the server too.
            self._spawn(self._unsubscribe_quiet(sub.id))
            return
        sub._session = self._session
        self._subs_by_id[sub.id] = sub
        self._subs.add(sub)

    def _detach(self, sub: Subscription) -> None:
        """Ends a subscription's stream on the server but keeps the subscription (local overflow)."""
        if sub.id is not None and self._subs_by_id.get(sub.id) is sub:
            del self._subs_by_id[sub.id]
            self._spawn(self._unsubscribe_quiet(sub.id))

    async def _unsubscribe_quiet(self, subscription: int) -> None:
        with contextlib.suppress(EspalierError):  # it may be gone already
            await self.call("unsubscribe", subscription=subscription)

    def _resubscribe_later(self, sub: Subscription) -> None:
        if sub._resubscribing:
            return
        sub._resubscribing = True
        sub._behind = False
        # On the same session the old subscription is still live (local overflow): end it.
        # After a reconnect its number means nothing (or another subscription) here.
        old = sub.id if sub._session == self._session and self._subs_by_id.get(sub.id or 0) is sub else None
        if old is not None:
            self._subs_by_id.pop(old, None)
        self._spawn(self._resubscribe(sub, old))

    async def _resubscribe(self, sub: Subscription, old: int | None) -> None:
        if old is not None:
            await self._unsubscribe_quiet(old)
        if sub.ended:
            return
        try:
            await self.call(
                "subscribe", since=sub._received_version, on_reply=lambda msg: self._register(sub, msg), **sub._fields
            )
        except ConnectionLostError:
            sub._resubscribing = False  # the next reconnect tries again
        except EspalierError as e:
            self._subs.discard(sub)
            sub._fail(e)

    async def _unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)
        sub_id = sub.id
        if sub_id is None or self._subs_by_id.get(sub_id) is not sub:
            return
        del self._subs_by_id[sub_id]
        if self.closed or not self._connected.is_set():
            return
        try:
            await self.call("unsubscribe", subscription=sub_id)
        except (ConnectionLostError, ClientError):
            pass  # the session is gone, and the subscription with it
        except EspalierError as e:
            if e.code != "unknown_subscription":
                raise

    # ---- helpers ----

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _send_quiet(self, msg: JsonObject) -> None:
        ws = self._ws
        if ws is None:
            return
        with contextlib.suppress(ConnectionClosed):
            await ws.send(self._codec.encode(msg))

    async def send_frame(self, frame: str | bytes, reply_id: int | None = None) -> JsonObject | None:
        """Sends a raw frame as it is (for tests of how the server refuses bad frames). With
        ``reply_id``, waits for the reply carrying that id (raising it if it is an error); the
        id must not be one this client uses (its ids count up from 1)."""
        await self._wait_connected()
        ws = self._ws
        assert ws is not None
        if reply_id is None:
            await ws.send(frame)
            return None
        if reply_id in self._pending:
            raise ClientError("usage", f"send_frame: id {reply_id} is in use by a request in flight")
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._pending[reply_id] = _Pending(future, f"raw frame #{reply_id}")
        await ws.send(frame)
        try:
            return await asyncio.wait_for(future, self.timeout)
        finally:
            self._pending.pop(reply_id, None)


def _event(msg: JsonObject) -> Event:
    version = msg.get("version")
    if not isinstance(version, int):
        raise ClientError("bad_reply", f"{msg.get('kind')} without a version")
    query = parse_query(msg["query"]) if msg.get("query") is not None else None
    if msg.get("kind") == "reload":
        node = msg.get("node") if isinstance(msg.get("node"), dict) else None
        return Reload(version=version, reason=str(msg.get("reason", "")), node=node, query=query)
    changes = msg.get("changes")
    removed, added = msg.get("removed"), msg.get("added")
    return Notification(
        version=version,
        changes=[parse_change(c) for c in changes] if isinstance(changes, list) else None,
        query=query,
        removed=[list(r) for r in removed] if isinstance(removed, list) else None,
        added=[list(r) for r in added] if isinstance(added, list) else None,
    )


def _apply_rows(query: QueryResult, removed: list[list[Any]], added: list[list[Any]]) -> QueryResult:
    """A pattern query's rows after one commit's differences (rows are a multiset)."""
    rows = list(query.rows)
    for values in removed:
        at = next((i for i, r in enumerate(rows) if r.values == values), None)
        if at is None:
            raise ClientError("bad_reply", f"a notification removes a row the subscription does not hold: {values}")
        rows.pop(at)
    rows.extend(Row(key=[], values=list(v)) for v in added)
    return QueryResult(total=len(rows), columns=query.columns, rows=rows)


def _refusal(status: int, body: bytes | bytearray | None, url: str) -> EspalierError:
    """The typed error for a refused upgrade (its body is a JSON `error` message)."""
    try:
        msg = json.loads(body or b"")
        if isinstance(msg, dict) and isinstance(msg.get("code"), str):
            return error_from_code(msg["code"], str(msg.get("message", "")), request=f"connect to {_redact(url)}")
    except ValueError:
        pass
    text = (body or b"").decode("utf-8", "replace")[:200]
    code = {401: "unauthorized", 403: "forbidden", 503: "shutting_down", 400: "bad_request"}.get(status, "internal")
    return error_from_code(code, f"HTTP {status}: {text}", request=f"connect to {_redact(url)}")


def _redact(url: str) -> str:
    """The URL without a token secret, for messages."""
    parts = urllib.parse.urlsplit(url)
    query = [(k, "***" if k == "token" else v) for k, v in urllib.parse.parse_qsl(parts.query)]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _close_text(code: int | None, reason: str | None) -> str:
    if code is None:
        return "the connection dropped"
    names = {1000: "normal closure", 1001: "going away", 1006: "abnormal closure", 1009: "message too big"}
    text = f"close code {code}"
    if code in names:
        text += f" ({names[code]})"
    return text + (f": {reason}" if reason else "")


def _rewhere(error: EspalierError, where: str) -> EspalierError:
    """A copy of a session-wide error, naming the request it failed."""
    if isinstance(error, ConnectionLostError):
        return ConnectionLostError(
            error.message, close_code=error.close_code, close_reason=error.close_reason, request=where
        )
    return type(error)(error.code, error.message, request=where)


async def connect(url: str, **options: Any) -> AsyncClient:
    """Opens a session (see ``AsyncClient`` for the options) and waits for ``welcome``."""
    return await AsyncClient(url, **options).open()
