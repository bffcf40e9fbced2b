"""Servers with tokens and tight limits; restarts, lagging subscribers and shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import espalier
from espalier import aio
from espalier.messages import Done, Notification, Reload

from .conftest import Server
from .test_integration import run

TOKENS = {"reader": "read", "writer": "write", "boss": "admin"}
PULSE = "update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 )"
ORDERS = "collection select . 'Orders' 'Quantity' -> number : 'Quantity' 'Client' -> reference : 'Client'"


@pytest.fixture(scope="module")
def secured() -> Iterator[Server]:
    s = Server(tokens=TOKENS)
    yield s
    s.cleanup()


@pytest.fixture(scope="module")
def tight() -> Iterator[Server]:
    s = Server(
        "--max-frame-bytes",
        "65536",
        "--max-in-flight",
        "4",
        "--max-subscriptions",
        "2",
        "--max-result-bytes",
        "8192",
    )
    yield s
    s.cleanup()


def test_auth_refusals(secured: Server) -> None:
    async def body() -> None:
        with pytest.raises(espalier.AuthError) as none:
            await aio.connect(secured.url)
        assert none.value.code == "unauthorized"
        with pytest.raises(espalier.AuthError) as wrong:
            await aio.connect(secured.url, token="not-a-real-token-at-all")
        assert wrong.value.code == "unauthorized"
        async with await aio.connect(secured.url, token=Server.secret("reader")) as reader:
            assert reader.welcome is not None and reader.welcome.role == "read"
            assert (await reader.get(". 'Machines' : \"M1\"")).node["Costs per Hour"] == 120
            sub = await reader.subscribe(". 'Machines' : \"M1\"")
            with pytest.raises(espalier.AuthError) as forbidden:
                await reader.update(PULSE)
            assert forbidden.value.code == "forbidden"
            with pytest.raises(espalier.AuthError):
                await reader.shutdown()
            await sub.close()
        # The token as a query parameter (what browsers use).
        async with await aio.connect(
            secured.url, token=Server.secret("writer"), token_in_query=True, encoding="msgpack"
        ) as writer:
            assert writer.welcome is not None and writer.welcome.role == "write"
            assert isinstance(await writer.update(PULSE), Done)
            with pytest.raises(espalier.AuthError) as not_admin:
                await writer.shutdown()
            assert not_admin.value.code == "forbidden"

    run(body())
    http = espalier.HttpClient(secured.http)
    assert http.health()  # no token needed
    with pytest.raises(espalier.AuthError) as e:
        http.status()
    assert e.value.code == "unauthorized"
    reader = espalier.HttpClient(secured.http, token=Server.secret("reader"))
    assert reader.status().version >= 1
    with pytest.raises(espalier.AuthError) as f:
        reader.execute(PULSE)
    assert f.value.code == "forbidden"


def test_frame_limit_checked_locally_and_by_the_server(tight: Server) -> None:
    big = "/* " + "x" * 70_000 + " */ " + PULSE

    async def body() -> None:
        async with await aio.connect(tight.url) as db:
            assert db.welcome is not None and db.welcome.limits.max_frame_bytes == 65536
            with pytest.raises(espalier.LimitError) as local:
                await db.execute(big)
            assert local.value.code == "too_large" and "not sent" in local.value.message
            await db.ping()
        # Not checked here: the server closes the session with 1009.
        async with await aio.connect(tight.url, respect_limits=False, reconnect=False) as db:
            with pytest.raises(espalier.ConnectionLostError) as lost:
                await db.execute(big)
            assert lost.value.close_code == 1009
            with pytest.raises(espalier.ConnectionLostError):
                await db.ping()
        # A compressed message is bounded by its decompressed size: the server cannot read
        # its id, so it answers with an id-less `too_large` and the session goes on.
        pushed: list[espalier.EspalierError] = []
        async with await aio.connect(
            tight.url, compression="zstd", respect_limits=False, timeout=1.0, on_error=pushed.append
        ) as db:
            with pytest.raises(espalier.ClientError) as unanswered:
                await db.execute(big)
            assert unanswered.value.code == "client_timeout"
            assert db.stats["compressed_out"] == 1
            assert [e.code for e in pushed] == ["too_large"]
            await db.ping()

    run(body())


def test_result_limit(tight: Server) -> None:
    name = "n" * 10_000  # a reply with it is over the server's max_result_bytes of 8192

    async def body() -> None:
        async with await aio.connect(tight.url) as db:
            await db.update("update ( 'Clients' -> dictionary \"big\" ( 'Name' -> text \"short\" ) )")
            sub = await db.subscribe(". 'Clients' : \"big\"")
            await db.update(f"update . 'Clients' : \"big\" ( 'Name' -> text \"{name}\" )")
            with pytest.raises(espalier.LimitError) as reply:
                await db.get(". 'Clients' : \"big\"")
            assert reply.value.code == "result_too_large"
            # The notification is too large as well: the server ends the subscription.
            with pytest.raises(espalier.LimitError) as pushed:
                await sub.next(10)
            assert pushed.value.code == "result_too_large" and pushed.value.subscription == sub.id
            assert sub.ended
            await db.ping()

    run(body())


def test_session_limit() -> None:
    s = Server("--max-sessions", "2")
    try:

        async def body() -> None:
            async with await aio.connect(s.url), await aio.connect(s.url):
                with pytest.raises(espalier.LimitError) as e:
                    await aio.connect(s.url)
                assert e.value.code == "too_many_sessions"

        run(body())
    finally:
        s.cleanup()


def test_in_flight_limit(tight: Server) -> None:
    async def body() -> None:
        # Queries, which run on the server's blocking pool and so stay in flight while the
        # session reads the next request. (Writes without an fsync finish before the session
        # reads on, so they never pile up.)
        async with await aio.connect(tight.url, respect_limits=False, encoding="msgpack") as db:
            results = await asyncio.gather(*[db.query(ORDERS) for _ in range(60)], return_exceptions=True)
            refused = [r for r in results if isinstance(r, espalier.LimitError)]
            done = [r for r in results if not isinstance(r, BaseException)]
            assert refused and done and len(refused) + len(done) == 60, results
            assert {r.code for r in refused} == {"too_many_requests"}
        # Respecting the limit, the client queues its own requests and all of them succeed.
        async with await aio.connect(tight.url) as db:
            writes = await asyncio.gather(*[db.update(PULSE) for _ in range(60)])
            assert all(isinstance(r, Done) for r in writes)

    run(body())


def test_subscription_limit(tight: Server) -> None:
    async def body() -> None:
        async with await aio.connect(tight.url) as db:
            a = await db.subscribe(". 'Machines' : \"M1\"")
            await db.subscribe(". 'Machines' : \"M2\"")
            with pytest.raises(espalier.LimitError) as e:
                await db.subscribe(". 'Machines' : \"M3\"")
            assert e.value.code == "too_many_subscriptions"
            await a.close()
            await db.subscribe(". 'Machines' : \"M3\"")

    run(body())


def test_reconnect_resumes_subscriptions(tight: Server) -> None:
    big = "/* " + "x" * 70_000 + " */ " + PULSE

    async def body() -> None:
        async with await aio.connect(tight.url) as writer, await aio.connect(tight.url, respect_limits=False) as reader:
            await writer.update("update ( 'Machines' -> dictionary \"RC\" ( ) )")
            sub = await reader.subscribe(". 'Machines' : \"RC\"")
            first = sub.id
            v1 = (await writer.update("update . 'Machines' : \"RC\" ( 'Pulses' -> number + 1 )")).version
            # Over the frame limit: the server drops this session; the client reconnects.
            with pytest.raises(espalier.ConnectionLostError) as lost:
                await reader.execute(big)
            assert lost.value.close_code == 1009
            later = [
                (await writer.update("update . 'Machines' : \"RC\" ( 'Pulses' -> number + 1 )")).version
                for _ in range(3)
            ]
            events = [await sub.next(10) for _ in range(4)]
            assert all(isinstance(e, Notification) for e in events), events
            assert [e.version for e in events] == [v1, *later]
            assert reader.reconnects == 1 and sub.id is not None
            assert first is not None
            await reader.ping()

    run(body())


def test_restart_resumes_or_reloads_subscriptions(fresh_server: Server) -> None:
    bump = "update . 'Machines' : \"M2\" ( 'Pulses' -> number + 5 )"

    async def body() -> None:
        async with await aio.connect(fresh_server.url, reconnect_attempts=40) as reader:
            sub = await reader.subscribe(". 'Machines' : \"M2\"")
            assert sub.node is not None
            start = sub.node["Pulses"]
            # A restart with nothing missed: versions persist, so the server resumes.
            fresh_server.restart()
            async with await aio.connect(fresh_server.url) as writer:
                done = await writer.update(bump)
            event = await sub.next(20)
            assert isinstance(event, Notification) and event.version == done.version, event
            assert reader.reconnects == 1
            # A commit while the server is down (by the CLI, on the database): the restarted
            # server's history starts after it, so the client gets the data afresh.
            fresh_server.stop()
            fresh_server.exec_offline(bump)
            fresh_server.start()
            reload = await sub.next(20)
            assert isinstance(reload, Reload) and reload.reason == "resubscribed", reload
            assert reload.version > done.version and reload.node is not None
            assert reload.node["Pulses"] == start + 10 and sub.node is reload.node
            assert reader.reconnects == 2

    run(body())


def test_server_lag_sends_reload(fresh_server: Server) -> None:
    # The default 1024-commit queue is too deep to overflow quickly; a server with a queue of 1
    # lags as soon as two commits arrive in one group commit.
    fresh_server.flags += ["--subscriber-queue", "1"]
    fresh_server.restart()

    async def body() -> None:
        async with await aio.connect(fresh_server.url) as writer, await aio.connect(fresh_server.url) as reader:
            sub = await reader.subscribe(". 'Machines' : \"M1\"")
            last = 0
            for _ in range(20):
                results = await asyncio.gather(*[writer.update(PULSE) for _ in range(32)])
                last = max(r.version for r in results)
            reloads = []
            while sub.version < last:
                event = await sub.next(10)
                if isinstance(event, Reload):
                    reloads.append(event)
            assert reloads, "a queue of 1 under bursts of 32 commits never lagged"
            assert all(r.reason == "lagged" and r.node is not None for r in reloads)
            final = await reader.get(". 'Machines' : \"M1\"")
            assert sub.version == final.version

    run(body())


def test_shutdown_closes_sessions(fresh_server: Server) -> None:
    async def body() -> None:
        async with await aio.connect(fresh_server.url, reconnect=False) as watcher:
            sub = await watcher.subscribe(". 'Machines' : \"M1\"")
            async with await aio.connect(fresh_server.url) as admin:
                await admin.shutdown()
            with pytest.raises(espalier.ConnectionLostError) as e:
                await sub.next(20)
            assert e.value.close_code == 1001

    run(body())
    assert fresh_server.wait_exit(30) == 0
