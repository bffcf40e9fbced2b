"""The asyncio client against a real `espalier serve` (see conftest.py): queries, mutations,
transactions, failures, get, subscriptions, resume, both encodings and every compression,
HTTP one-shot requests, and the server's refusal of bad frames over a live session."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

import espalier
from espalier import aio
from espalier.messages import Done, Node, NodeData, Notification, QueryResult, Reload, TransactionResult

from .conftest import Server

T = TypeVar("T")
ORDERS = "collection select . 'Orders' 'Quantity' -> number : 'Quantity' 'Client' -> reference : 'Client'"
VECTORS = Path(__file__).resolve().parents[3] / "protocol" / "vectors"
_keys = itertools.count(1)


def run(coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    """Runs one test's coroutine with a bound, so a lost reply fails the test, not CI."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def key(prefix: str) -> str:
    """A key no other test uses (the module's server is shared)."""
    return f"t-{prefix}{next(_keys)}"


def pulses(node: dict[str, Any]) -> int:
    value = node["Pulses"]
    assert isinstance(value, int)
    return value


SESSIONS = [(e, c) for e in ("json", "msgpack") for c in ("none", "zstd", "deflate")]


@pytest.mark.parametrize(("encoding", "compression"), SESSIONS)
def test_session_basics_in_every_encoding(server: Server, encoding: str, compression: str) -> None:
    async def body() -> None:
        async with await aio.connect(server.url, encoding=encoding, compression=compression, compress_min=64) as db:
            assert db.welcome is not None
            assert (db.welcome.encoding, db.welcome.compression) == (encoding, compression)
            assert db.welcome.protocol == 1 and db.welcome.role == "admin" and db.welcome.compress_min == 64
            await db.ping()
            rows = await db.query(ORDERS)
            assert rows.columns == ["Quantity", "Client"]
            assert {tuple(r.key) for r in rows.rows} >= {("o1",), ("o2",), ("o3",)}
            o1 = next(r for r in rows.rows if r.key == ["o1"])
            assert o1.values[1] == "c1"
            # A long request (over compress_min) goes compressed in compressed sessions.
            padded = "/* " + "padding " * 40 + "*/ " + ORDERS
            assert (await db.query(padded)).total == rows.total
            node = await db.get(". 'Machines' : $m", {"m": "M3"})
            assert node.node["Costs per Hour"] == 200 and node.version >= 1
            if compression == "none":
                assert db.stats["compressed_in"] == 0 and db.stats["compressed_out"] == 0
            else:
                assert db.stats["compressed_out"] >= 1, db.stats
                assert db.stats["compressed_in"] >= 1, db.stats

    run(body())


def test_mutations_transactions_and_versions(server: Server) -> None:
    async def body() -> None:
        async with await aio.connect(server.url) as db:
            c = key("c")
            done = await db.update(f"update ( 'Clients' -> dictionary \"{c}\" ( 'Name' -> text \"Test {c}\" ) )")
            assert isinstance(done, Done) and done.changes >= 1
            got = await db.get(f". 'Clients' : \"{c}\"")
            assert got.node["Name"] == f"Test {c}" and got.version >= done.version
            before = pulses((await db.get(". 'Machines' : \"M2\"")).node)
            tx = await db.transaction(
                "update . 'Machines' : \"M2\" ( 'Pulses' -> number + 1 )",
                "update . 'Machines' : \"M2\" ( 'Pulses' -> number + 1 )",
                "get . 'Machines' : \"M2\"",
            )
            assert isinstance(tx, TransactionResult) and len(tx.replies) == 3
            last = tx.replies[2]
            assert isinstance(last, NodeData) and pulses(last.node) == before + 2
            # A command, in the structured form.
            cmd = await db.execute(instruction={"command": {"name": "pulse", "args": [["machine", {"text": "M2"}]]}})
            assert isinstance(cmd, Done) and cmd.version > done.version
            # A failing transaction changes nothing.
            with pytest.raises(espalier.NotFoundError) as e:
                await db.transaction(
                    "update . 'Machines' : \"M2\" ( 'Pulses' -> number + 100 )",
                    "update . 'Machines' : \"nope\" ( 'Pulses' -> number + 1 )",
                )
            assert e.value.code == "key_missing"
            assert pulses((await db.get(". 'Machines' : \"M2\"")).node) == before + 3

    run(body())


def test_failures_carry_codes_and_places(server: Server) -> None:
    async def body() -> None:
        async with await aio.connect(server.url, encoding="msgpack") as db:
            with pytest.raises(espalier.InvalidInstructionError) as syntax:
                await db.execute("update . 'Machines' : ( 'Pulses' -> number + 1 )")
            assert syntax.value.code == "syntax" and syntax.value.line == 1 and syntax.value.column is not None
            assert syntax.value.where is not None and "execute #" in syntax.value.where
            with pytest.raises(espalier.InvalidInstructionError) as typ:
                await db.execute("update . 'Machines' : \"M1\" ( 'Speed' -> number 1 )")
            assert typ.value.code == "type"
            with pytest.raises(espalier.InvalidInstructionError) as value:
                await db.execute("update . 'Machines' : $m ( 'Pulses' -> number + 1 )")
            assert value.value.code == "value"
            with pytest.raises(espalier.ConflictError) as exists:
                await db.execute("update ( 'Clients' -> dictionary \"c1\" ( 'Name' -> text \"again\" ) )")
            assert exists.value.code == "key_exists"
            with pytest.raises(espalier.ConflictError) as referenced:
                await db.execute("update ( 'Clients' -> dictionary \"c1\" remove )")
            assert referenced.value.code == "referenced" and "refers to it" in referenced.value.message
            with pytest.raises(espalier.NotFoundError):
                await db.get(". 'Machines' : \"M404\"")
            # Protocol errors, through the raw request call.
            with pytest.raises(espalier.ProtocolError) as both:
                await db.call("execute", text="get", instruction={"get": {"path": []}})
            assert both.value.code == "bad_request"
            with pytest.raises(espalier.ProtocolError) as unknown:
                await db.call("frobnicate")
            assert unknown.value.code == "unknown_kind"
            with pytest.raises(espalier.ProtocolError) as unsub:
                await db.call("unsubscribe", subscription=999)
            assert unsub.value.code == "unknown_subscription"
            # The session goes on after every failure.
            await db.ping()

    run(body())


def test_pipelined_requests_in_flight_at_once(server: Server) -> None:
    async def body() -> None:
        async with await aio.connect(server.url, encoding="msgpack") as db:
            start = pulses((await db.get(". 'Machines' : \"M3\"")).node)
            calls: list[Coroutine[Any, Any, Any]] = []
            for i in range(150):
                if i % 3 == 0:
                    calls.append(db.update("update . 'Machines' : \"M3\" ( 'Pulses' -> number + 1 )"))
                elif i % 3 == 1:
                    calls.append(db.get(". 'Machines' : \"M3\""))
                else:
                    calls.append(db.ping())
            results = await asyncio.gather(*calls)
            versions = [r.version for r in results if isinstance(r, Done)]
            assert len(versions) == 50 and len(set(versions)) == 50
            assert all(isinstance(r, Node) for r in results[1::3])
            assert pulses((await db.get(". 'Machines' : \"M3\"")).node) == start + 50

    run(body())


def test_node_subscription_in_commit_order(server: Server) -> None:
    async def body() -> None:
        m = key("SM")
        async with await aio.connect(server.url) as writer, await aio.connect(server.url, encoding="msgpack") as reader:
            await writer.update(f"update ( 'Machines' -> dictionary \"{m}\" ( 'Costs per Hour' -> number 7 ) )")
            sub = await reader.subscribe(f". 'Machines' : \"{m}\"")
            assert sub.node is not None and sub.node["Pulses"] == 0 and not sub.resumed
            versions = []
            for _ in range(5):
                versions.append((await writer.update(f"command 'pulse' ( 'machine' -> \"{m}\" )")).version)
            # A commit elsewhere does not notify this subscription.
            await writer.update("update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 )")
            events = [await sub.next(10) for _ in range(5)]
            assert [e.version for e in events] == versions
            for n, event in enumerate(events):
                assert isinstance(event, Notification) and event.changes is not None
                (change,) = event.changes
                assert (change.change, change.property, change.old, change.new) == ("number", "Pulses", n, n + 1)
                assert change.node == [{"entry": {"collection": "Machines", "key": [m], "matrix": False}}]
            assert sub.version == versions[-1]
            with pytest.raises(asyncio.TimeoutError):
                await sub.next(0.3)
            # Removing the node is a change of the subscription too.
            await writer.update(f"update ( 'Machines' -> dictionary \"{m}\" remove )")
            removed = await sub.next(10)
            assert isinstance(removed, Notification) and removed.changes is not None
            assert [c.change for c in removed.changes] == ["entry_removed"]
            await sub.close()
            assert sub.ended
            with pytest.raises(StopAsyncIteration):
                await sub.__anext__()

    run(body())


def test_query_subscription(server: Server) -> None:
    async def body() -> None:
        o = key("o")
        text = "collection select . 'Orders' 'Quantity' -> number : 'Quantity' > $min"
        async with await aio.connect(server.url) as writer, await aio.connect(server.url, compression="zstd") as reader:
            sub = await reader.subscribe_query(text, params={"min": 100_000})
            assert isinstance(sub.query, QueryResult)
            before = {tuple(r.key) for r in sub.query.rows}
            new_order = f"'Orders' -> dictionary \"{o}\" ( 'Client' -> reference \"c2\" 'Quantity' -> number 200000 )"
            done = await writer.update(f"update ( {new_order} )")
            event = await sub.next(10)
            assert isinstance(event, Notification) and event.query is not None
            assert event.version >= done.version
            assert {tuple(r.key) for r in event.query.rows} == before | {(o,)}
            assert sub.query is event.query
            # A commit that does not change the rows sends nothing.
            await writer.update("update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 )")
            with pytest.raises(asyncio.TimeoutError):
                await sub.next(0.5)
            await writer.update(f"update ( 'Orders' -> dictionary \"{o}\" update ( 'Quantity' -> number 5 ) )")
            gone = await sub.next(10)
            assert isinstance(gone, Notification) and gone.query is not None
            assert {tuple(r.key) for r in gone.query.rows} == before
            await sub.close()

    run(body())


def test_pattern_query_subscription_receives_differences(server: Server) -> None:
    async def body() -> None:
        m = key("PQ")
        text = (
            "collection match x in . 'Machines' where x number : 'Pulses' >= 1000 "
            "select 'x' -> x 'p' -> x number : 'Pulses'"
        )
        async with await aio.connect(server.url) as writer, await aio.connect(server.url, encoding="msgpack") as reader:
            sub = await reader.subscribe_query(text)
            assert isinstance(sub.query, QueryResult)
            before = len(sub.query.rows)
            await writer.update(f"update ( 'Machines' -> dictionary \"{m}\" ( 'Pulses' -> number 1000 ) )")
            came = await sub.next(10)
            assert isinstance(came, Notification) and came.removed == [] and came.added == [[m, 1000]]
            await writer.update(f"update . 'Machines' : \"{m}\" ( 'Pulses' -> number + 1 )")
            moved = await sub.next(10)
            assert isinstance(moved, Notification)
            assert moved.removed == [[m, 1000]] and moved.added == [[m, 1001]] and moved.version == came.version + 1
            # The subscription's rows follow the differences.
            assert len(sub.query.rows) == before + 1 and [m, 1001] in [r.values for r in sub.query.rows]
            await writer.update(f"update ( 'Machines' -> dictionary \"{m}\" remove )")
            gone = await sub.next(10)
            assert isinstance(gone, Notification) and gone.removed == [[m, 1001]] and gone.added == []
            assert len(sub.query.rows) == before
            await sub.close()

    run(body())


def test_subscribe_since_resumes_from_history(server: Server) -> None:
    async def body() -> None:
        m = key("RM")
        async with await aio.connect(server.url) as writer:
            await writer.update(f"update ( 'Machines' -> dictionary \"{m}\" ( ) )")
            async with await aio.connect(server.url) as first:
                sub = await first.subscribe(f". 'Machines' : \"{m}\"")
                seen = sub.version
            # Away: three commits happen.
            versions = [
                (await writer.update(f"update . 'Machines' : \"{m}\" ( 'Pulses' -> number + 1 )")).version
                for _ in range(3)
            ]
            async with await aio.connect(server.url, encoding="msgpack") as again:
                sub = await again.subscribe(f". 'Machines' : \"{m}\"", since=seen)
                assert sub.resumed and sub.version == seen and sub.node is None
                events = [await sub.next(10) for _ in range(3)]
                assert [e.version for e in events] == versions
                # A version newer than the database cannot resume: the data comes afresh.
                fresh = await again.subscribe(f". 'Machines' : \"{m}\"", since=versions[-1] + 1_000_000)
                assert not fresh.resumed and fresh.node is not None and fresh.node["Pulses"] == 3
                status = await again.status()
                assert status.history_from <= seen and status.subscriptions >= 2 and status.sessions >= 2

    run(body())


def test_subscription_errors_end_the_subscription(server: Server) -> None:
    async def body() -> None:
        async with await aio.connect(server.url) as db:
            with pytest.raises(espalier.ProtocolError) as not_query:
                await db.subscribe_query("update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 )")
            assert not_query.value.code == "bad_request"
            with pytest.raises(espalier.NotFoundError):
                await db.subscribe(". 'Machines' : \"M404\"")

    run(body())


def test_local_queue_overflow_resumes_without_gaps(server: Server) -> None:
    async def body() -> None:
        m = key("QM")
        async with (
            await aio.connect(server.url) as writer,
            await aio.connect(server.url, subscription_queue=3) as reader,
        ):
            await writer.update(f"update ( 'Machines' -> dictionary \"{m}\" ( ) )")
            sub = await reader.subscribe(f". 'Machines' : \"{m}\"")
            versions = [
                (await writer.update(f"update . 'Machines' : \"{m}\" ( 'Pulses' -> number + 1 )")).version
                for _ in range(10)
            ]
            # The reader did not iterate: its queue of 3 overflows as the notifications arrive,
            # and once it reads, it resumes from the last version it took: every commit, in order.
            for _ in range(500):
                if sub.overflows:
                    break
                await asyncio.sleep(0.01)
            assert sub.overflows == 1
            seen: list[int] = []
            while len(seen) < 10:
                event = await sub.next(10)
                if isinstance(event, Reload):
                    pytest.fail(f"resumed from history, expected no reload: {event}")
                seen.append(event.version)
            assert seen == versions

    run(body())


def test_http_one_shot(server: Server) -> None:
    for encoding in ("json", "msgpack"):
        http = espalier.HttpClient(server.http, encoding=encoding)
        assert http.health()
        rows = http.query(ORDERS)
        assert rows.total >= 3
        node = http.get(". 'Machines' : $m", {"m": "M1"})
        assert node.node["Costs per Hour"] == 120
        root = http.get()
        assert "Machines" in root.node
        done = http.execute("update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 )")
        assert isinstance(done, Done)
        assert http.status().version >= done.version
        with pytest.raises(espalier.NotFoundError) as e:
            http.get(". 'Machines' : \"M404\"")
        assert e.value.code == "key_missing" and e.value.where == "GET /v1/node"
        with pytest.raises(espalier.InvalidInstructionError):
            http.execute("update (")

    async def body() -> None:
        ahttp = espalier.AsyncHttpClient(server.http)
        assert (await ahttp.query(ORDERS)).total >= 3

    run(body())


def invalid_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((VECTORS / "invalid" / "cases.json").read_text(encoding="utf-8"))
    return cases


@pytest.mark.parametrize("case", invalid_cases(), ids=lambda c: c["name"])
def test_server_refuses_invalid_frames(server: Server, case: dict[str, Any]) -> None:
    async def body() -> None:
        errors: list[espalier.EspalierError] = []
        async with await aio.connect(
            server.url, encoding=case["encoding"], compression=case["compression"], on_error=errors.append
        ) as db:
            frame: str | bytes = case["text"] if case["frame"] == "text" else bytes.fromhex(case["hex"])
            if "id" in case:
                with pytest.raises(espalier.EspalierError) as e:
                    await db.send_frame(frame, reply_id=case["id"])
                assert e.value.code == case["code"]
            else:
                await db.send_frame(frame)
                for _ in range(200):
                    if errors:
                        break
                    await asyncio.sleep(0.01)
                assert [e.code for e in errors] == [case["code"]]
            await db.ping()  # the session goes on

    run(body())
