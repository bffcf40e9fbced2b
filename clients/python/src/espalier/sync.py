"""The blocking client: the asyncio client run on a private event loop in a background thread,
so a plain program gets the same session (pipelining from several threads, subscriptions with
push, reconnect and resume) through ordinary calls and a blocking iterator.

```python
with espalier.connect("ws://127.0.0.1:7700") as db:
    print(db.query("collection select . 'Orders' 'q' -> number : 'Quantity'").rows)
    for event in db.subscribe(". 'Machines' : \\"M1\\""):
        ...
```
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any, TypeVar

from .aio import AsyncClient, Subscription
from .errors import ClientError
from .messages import Done, Event, Node, Params, QueryResult, Reply, Status, TransactionResult, Welcome

__all__ = ["Client", "SyncSubscription", "connect"]

T = TypeVar("T")


class _End:
    """The end of a subscription's events (StopAsyncIteration cannot cross a Future)."""


_END = _End()


class Client:
    """A blocking session with an Espalier server; the options are ``AsyncClient``'s. Methods
    may be called from several threads at once: their requests are pipelined on the session."""

    def __init__(self, url: str, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="espalier-client", daemon=True)
        self._thread.start()
        self._closed = False
        try:
            self._client: AsyncClient = self._run(self._open(url, options))
        except BaseException:
            self._stop_loop()
            raise

    @staticmethod
    async def _open(url: str, options: dict[str, Any]) -> AsyncClient:
        return await AsyncClient(url, **options).open()

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if self._closed:
            coro.close()
            raise ClientError("closed", "the client was closed")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    def close(self) -> None:
        """Ends the session and stops the background thread."""
        if self._closed:
            return
        try:
            self._run(self._client.close(), timeout=30)
        finally:
            self._closed = True
            self._stop_loop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def welcome(self) -> Welcome:
        welcome = self._client.welcome
        assert welcome is not None, "a connected client has had its welcome"
        return welcome

    @property
    def async_client(self) -> AsyncClient:
        """The asyncio client underneath (its methods run on this client's loop only)."""
        return self._client

    @property
    def reconnects(self) -> int:
        return self._client.reconnects

    def call(self, kind: str, **fields: Any) -> dict[str, Any]:
        return self._run(self._client.call(kind, **fields))

    def execute(
        self, text: str | None = None, *, instruction: Mapping[str, Any] | None = None, params: Params | None = None
    ) -> Reply:
        return self._run(self._client.execute(text, instruction=instruction, params=params))

    def query(self, text: str, params: Params | None = None) -> QueryResult:
        return self._run(self._client.query(text, params))

    def update(self, text: str, params: Params | None = None) -> Done:
        return self._run(self._client.update(text, params))

    def transaction(self, *texts: str, params: Params | None = None) -> TransactionResult:
        return self._run(self._client.transaction(*texts, params=params))

    def get(self, path: str = "", params: Params | None = None) -> Node:
        return self._run(self._client.get(path, params))

    def ping(self) -> None:
        self._run(self._client.ping())

    def status(self) -> Status:
        return self._run(self._client.status())

    def shutdown(self) -> None:
        self._run(self._client.shutdown())

    def subscribe(self, path: str = "", *, params: Params | None = None, since: int | None = None) -> SyncSubscription:
        return SyncSubscription(self, self._run(self._client.subscribe(path, params=params, since=since)))

    def subscribe_query(
        self,
        text: str | None = None,
        *,
        instruction: Mapping[str, Any] | None = None,
        params: Params | None = None,
        since: int | None = None,
    ) -> SyncSubscription:
        sub = self._run(self._client.subscribe_query(text, instruction=instruction, params=params, since=since))
        return SyncSubscription(self, sub)

    def send_frame(self, frame: str | bytes, reply_id: int | None = None) -> dict[str, Any] | None:
        return self._run(self._client.send_frame(frame, reply_id))


class SyncSubscription:
    """A subscription with a blocking iterator; ``next(timeout)`` waits at most that long
    (raising ``TimeoutError``). The data attributes are the asyncio subscription's."""

    def __init__(self, client: Client, sub: Subscription) -> None:
        self._client = client
        self._sub = sub

    @property
    def id(self) -> int | None:
        return self._sub.id

    @property
    def version(self) -> int:
        return self._sub.version

    @property
    def resumed(self) -> bool:
        return self._sub.resumed

    @property
    def overflows(self) -> int:
        return self._sub.overflows

    @property
    def node(self) -> dict[str, Any] | None:
        return self._sub.node

    @property
    def query(self) -> QueryResult | None:
        return self._sub.query

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        event = self._client._run(self._next(None))
        if isinstance(event, _End):
            raise StopIteration
        return event

    def next(self, timeout: float | None = None) -> Event:
        """The next event; ``StopIteration`` when the subscription has ended."""
        try:
            event = self._client._run(self._next(timeout))
        except asyncio.TimeoutError:
            raise TimeoutError(f"no event within {timeout} s") from None
        if isinstance(event, _End):
            raise StopIteration
        return event

    async def _next(self, timeout: float | None) -> Event | _End:
        try:
            return await self._sub.next(timeout)
        except StopAsyncIteration:
            return _END

    def close(self) -> None:
        self._client._run(self._sub.close())

    def __enter__(self) -> SyncSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(url: str, **options: Any) -> Client:
    """Opens a blocking session (options as for ``AsyncClient``)."""
    return Client(url, **options)
