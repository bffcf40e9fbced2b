"""The blocking client against a real server: the same session through plain calls, from
several threads at once, and subscriptions as blocking iterators."""

from __future__ import annotations

import threading

import pytest

import espalier
from espalier.messages import Done, Notification

from .conftest import Server


def test_sync_client_queries_updates_and_errors(server: Server) -> None:
    with espalier.connect(server.url, encoding="msgpack", compression="deflate") as db:
        assert db.welcome.role == "admin"
        db.ping()
        rows = db.query("collection select . 'Clients' 'Name' -> text : 'Name'")
        assert any(r.values == ["Acme Tools"] for r in rows.rows)
        done = db.update("update . 'Products' : \"nut-m8\" ( 'Price' -> number + 1 )")
        assert isinstance(done, Done)
        assert db.get(". 'Products' : \"nut-m8\"").version >= done.version
        with pytest.raises(espalier.ConflictError) as e:
            db.update("update ( 'Products' -> dictionary \"frame\" ( ) )")
        assert e.value.code == "key_exists"
        assert db.status().version >= done.version


def test_sync_client_from_many_threads(server: Server) -> None:
    with espalier.connect(server.url) as db:
        db.update("update ( 'Machines' -> dictionary \"TM\" ( ) )")
        errors: list[BaseException] = []

        def work() -> None:
            try:
                for _ in range(20):
                    db.update("update . 'Machines' : \"TM\" ( 'Pulses' -> number + 1 )")
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors
        assert db.get(". 'Machines' : \"TM\"").node["Pulses"] == 100


def test_sync_subscription_is_a_blocking_iterator(server: Server) -> None:
    with espalier.connect(server.url) as writer, espalier.connect(server.url, compression="zstd") as reader:
        writer.update("update ( 'Machines' -> dictionary \"SyncM\" ( ) )")
        with reader.subscribe(". 'Machines' : \"SyncM\"") as sub:
            assert sub.node is not None and sub.node["Pulses"] == 0
            versions = [
                writer.update("update . 'Machines' : \"SyncM\" ( 'Pulses' -> number + 1 )").version for _ in range(3)
            ]
            got = []
            for event in sub:
                assert isinstance(event, Notification)
                got.append(event.version)
                if len(got) == 3:
                    break
            assert got == versions and sub.version == versions[-1]
            with pytest.raises(TimeoutError):
                sub.next(timeout=0.3)
        with pytest.raises(StopIteration):
            sub.next(timeout=1)


def test_sync_connect_failure_is_typed() -> None:
    with pytest.raises(espalier.ClientError) as e:
        espalier.connect("ws://127.0.0.1:9", connect_timeout=2)
    assert e.value.code == "connect_failed"
