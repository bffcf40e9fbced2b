"""The Train Benchmark's six queries on an embedded peer (DuckDB or Kùzu).

`espalier bench trainbenchmark --peers duckdb,kuzu` writes the model it generated as the
official CSV files (DIR/PREFIX-Region.csv, …) and runs this program (embedded in the espalier
binary) with one JSON request on standard input:

    {"system": "duckdb" | "kuzu", "dir": DIR, "prefix": PREFIX, "warmup": W, "runs": R,
     "queries": [{"name": N, "sql": SQL, "cypher": CYPHER}, …]}

It loads the model into a fresh database of that system in DIR, runs each query W times
untimed and R times timed, and writes one JSON object on standard output:

    {"system": …, "version": …, "load_ms": …,
     "queries": [{"name": N, "times_us": [...], "matches": [[id, …], …]}, …]}

Matches are sorted, so that espalier compares them with its own. DuckDB runs the same SQL as
SQLite; Kùzu runs the Cypher form. Any failure is one line on standard error and exit status 1.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

Rows = list[list[int]]


def read(src: str, prefix: str, name: str) -> list[list[str]]:
    """The rows of one official CSV file, header dropped."""
    with open(os.path.join(src, f"{prefix}-{name}.csv"), newline="") as f:
        rows = list(csv.reader(f))
    return rows[1:]


def duckdb_load(src: str, prefix: str, work: str) -> tuple[Callable[[dict[str, str]], Rows], str, float]:
    import duckdb  # noqa: PLC0415 - only the system asked for need be installed

    started = time.perf_counter()
    conn = duckdb.connect(os.path.join(work, "duckdb.db"))
    # The tables of the SQL queries (crates/trainbenchmark/src/queries.rs, create_tables).
    ddl = {
        "Region": "id BIGINT PRIMARY KEY",
        "Route": "id BIGINT PRIMARY KEY, active INTEGER NOT NULL",
        "Segment": "id BIGINT PRIMARY KEY, length BIGINT NOT NULL",
        "Semaphore": "id BIGINT PRIMARY KEY, signal VARCHAR NOT NULL",
        "Sensor": "id BIGINT PRIMARY KEY",
        "Switch": "id BIGINT PRIMARY KEY, currentPosition VARCHAR NOT NULL",
        "SwitchPosition": "id BIGINT PRIMARY KEY, position VARCHAR NOT NULL",
        "connectsTo": "src BIGINT NOT NULL, dst BIGINT NOT NULL",
        "entry": "route BIGINT NOT NULL, semaphore BIGINT NOT NULL",
        "exit": "route BIGINT NOT NULL, semaphore BIGINT NOT NULL",
        "follows": "route BIGINT NOT NULL, swp BIGINT NOT NULL",
        "monitoredBy": "te BIGINT NOT NULL, sensor BIGINT NOT NULL",
        "requires": "route BIGINT NOT NULL, sensor BIGINT NOT NULL",
        "target": "swp BIGINT NOT NULL, sw BIGINT NOT NULL",
    }
    for table, columns in ddl.items():
        conn.execute(f"CREATE TABLE {table} ({columns})")
        path = os.path.join(src, f"{prefix}-{table}.csv").replace("'", "''")
        # SQLite's Route.active is an integer (the SQL compares it with 1).
        select = 'SELECT "id:ID", CASE WHEN "active:BOOLEAN" THEN 1 ELSE 0 END' if table == "Route" else "SELECT *"
        conn.execute(f"INSERT INTO {table} {select} FROM read_csv('{path}', header = true, quote = '\"')")

    def run(query: dict[str, str]) -> Rows:
        return [[int(v) for v in row] for row in conn.execute(query["sql"]).fetchall()]

    return run, f"DuckDB {duckdb.__version__}", elapsed_ms(started)


def kuzu_load(src: str, prefix: str, work: str) -> tuple[Callable[[dict[str, str]], Rows], str, float]:
    import kuzu  # noqa: PLC0415 - only the system asked for need be installed

    # Kùzu's COPY reads plain CSV in the tables' column order: the official files are turned
    # into that first (not timed as load: the other systems get their input ready-made too).
    plain = os.path.join(work, "kuzu-csv")
    os.makedirs(plain)

    def write(name: str, rows: list[list[str]]) -> str:
        path = os.path.join(plain, f"{name}.csv")
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows(rows)
        return path

    elements = [[r[0], "Segment", r[1], ""] for r in read(src, prefix, "Segment")]
    elements += [[r[0], "Switch", "0", r[1]] for r in read(src, prefix, "Switch")]
    nodes = {
        "Region": ("id INT64, PRIMARY KEY (id)", read(src, prefix, "Region")),
        "Route": ("id INT64, active BOOLEAN, PRIMARY KEY (id)", read(src, prefix, "Route")),
        "TrackElement": (
            "id INT64, kind STRING, length INT64, currentPosition STRING, PRIMARY KEY (id)",
            elements,
        ),
        "Semaphore": ("id INT64, signal STRING, PRIMARY KEY (id)", read(src, prefix, "Semaphore")),
        "Sensor": ("id INT64, PRIMARY KEY (id)", read(src, prefix, "Sensor")),
        "SwitchPosition": ("id INT64, position STRING, PRIMARY KEY (id)", read(src, prefix, "SwitchPosition")),
    }
    edges = {
        "connectsTo": ("TrackElement", "TrackElement"),
        "entry": ("Route", "Semaphore"),
        "exit": ("Route", "Semaphore"),
        "follows": ("Route", "SwitchPosition"),
        "monitoredBy": ("TrackElement", "Sensor"),
        "requires": ("Route", "Sensor"),
        "target": ("SwitchPosition", "TrackElement"),
    }
    files = {name: write(name, rows) for name, (_, rows) in nodes.items()}
    files.update({name: write(name, read(src, prefix, name)) for name in edges})

    started = time.perf_counter()
    db = kuzu.Database(os.path.join(work, "kuzu.db"))
    conn = kuzu.Connection(db)
    for name, (columns, _) in nodes.items():
        conn.execute(f"CREATE NODE TABLE {name} ({columns})")
        conn.execute(f"COPY {name} FROM '{files[name]}' (header = false)")
    for name, (source, dest) in edges.items():
        conn.execute(f"CREATE REL TABLE {name} (FROM {source} TO {dest})")
        conn.execute(f"COPY {name} FROM '{files[name]}' (header = false)")

    def run(query: dict[str, str]) -> Rows:
        result = conn.execute(query["cypher"])
        if isinstance(result, list):
            raise TypeError("one statement expected")
        rows: Rows = []
        while result.has_next():
            rows.append([int(v) for v in result.get_next()])
        return rows

    return run, f"Kùzu {kuzu.__version__}", elapsed_ms(started)


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()`)."""
    return (time.perf_counter() - started) * 1000.0


def main() -> int:
    request: dict[str, Any] = json.load(sys.stdin)
    system = request["system"]
    work = os.path.join(request["dir"], f"{system}-work")
    os.makedirs(work)
    loaders = {"duckdb": duckdb_load, "kuzu": kuzu_load}
    if system not in loaders:
        print(f"unknown system {system!r}: expected duckdb or kuzu", file=sys.stderr)
        return 1
    run, version, load_ms = loaders[system](request["dir"], request["prefix"], work)
    out = []
    for query in request["queries"]:
        times: list[float] = []
        rows: Rows = []
        for i in range(request["warmup"] + request["runs"]):
            t = time.perf_counter()
            rows = run(query)
            if i >= request["warmup"]:
                times.append((time.perf_counter() - t) * 1e6)
        rows.sort()
        out.append({"name": query["name"], "times_us": times, "matches": rows})
    json.dump({"system": system, "version": version, "load_ms": load_ms, "queries": out}, sys.stdout)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # one line for espalier, whatever failed
        print(f"{type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        sys.exit(1)
