"""The server's operations endpoints as a monitoring system sees them: `/metrics` parsed by
Prometheus's own text-format parser (prometheus_client), `/health`."""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

import espalier

from .conftest import Server


@pytest.fixture(scope="module")
def fresh() -> Iterator[Server]:
    s = Server()
    yield s
    s.cleanup()


def metrics(server: Server) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample of /metrics: name -> labels -> value, as Prometheus's parser reads them."""
    with urllib.request.urlopen(f"{server.http}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def test_metrics_parse_and_count_requests_by_kind_and_outcome(fresh: Server) -> None:
    with espalier.connect(fresh.url) as db:
        for _ in range(5):
            db.update("update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 )")
        db.query("collection select . 'Clients' 'Name' -> text : 'Name'")
        with pytest.raises(espalier.ConflictError):
            db.update("update ( 'Products' -> dictionary \"frame\" ( ) )")
        db.ping()
    m = metrics(fresh)
    requests = m["espalier_requests_total"]
    assert requests[(("kind", "execute"), ("outcome", "ok"))] >= 6
    assert requests[(("kind", "execute"), ("outcome", "error"))] >= 1
    assert requests[(("kind", "ping"), ("outcome", "ok"))] >= 1
    # A histogram per kind: cumulative buckets ending in +Inf, which is the count.
    buckets = m["espalier_request_duration_seconds_bucket"]
    execute = sorted(
        (float(dict(labels)["le"]), v) for labels, v in buckets.items() if dict(labels)["kind"] == "execute"
    )
    assert execute[-1][0] == float("inf")
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(execute))
    count = m["espalier_request_duration_seconds_count"][(("kind", "execute"),)]
    assert execute[-1][1] == count >= 7
    assert m["espalier_request_duration_seconds_sum"][(("kind", "execute"),)] > 0
    # Commits: at least the five updates, in batches of some size, and time spent in them.
    assert m["espalier_commits_total"][()] >= 1
    assert m["espalier_committed_requests_total"][()] >= 5
    assert m["espalier_commit_batch_requests_count"][()] == m["espalier_commits_total"][()]
    assert m["espalier_commit_batch_requests_sum"][()] == m["espalier_committed_requests_total"][()]
    assert m["espalier_commit_seconds_total"][()] >= m["espalier_store_commit_seconds_total"][()] > 0
    assert m["espalier_database_version"][()] >= 5
    assert m["espalier_sessions"][()] >= 0
    assert m["espalier_subscriptions"][()] == 0
    assert m["process_resident_memory_bytes"][()] > 1e6


def test_subscriptions_and_sessions_are_gauges(fresh: Server) -> None:
    with espalier.connect(fresh.url) as db:
        sub = db.subscribe(". 'Machines' : \"M1\"")
        m = metrics(fresh)
        assert m["espalier_subscriptions"][()] == 1
        assert m["espalier_sessions"][()] >= 1
        sub.close()


def test_health_and_its_alias(fresh: Server) -> None:
    for path in ["/health", "/v1/health"]:
        with urllib.request.urlopen(f"{fresh.http}{path}", timeout=10) as r:
            assert r.status == 200
            assert json.loads(r.read())["kind"] == "ok"


def test_metrics_need_a_token_when_the_server_has_tokens() -> None:
    s = Server(tokens={"watcher": "read"})
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{s.http}/metrics", timeout=10)
        assert e.value.code == 401
        req = urllib.request.Request(
            f"{s.http}/metrics", headers={"Authorization": f"Bearer {Server.secret('watcher')}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            families = {f.name for f in text_string_to_metric_families(r.read().decode())}
        assert {"espalier_requests", "espalier_request_duration_seconds", "espalier_commits"} <= families
        # /health answers without a token, for load balancers.
        with urllib.request.urlopen(f"{s.http}/health", timeout=10) as r:
            assert r.status == 200
    finally:
        s.cleanup()
