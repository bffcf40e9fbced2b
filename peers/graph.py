"""A suite's queries on an embedded peer (DuckDB or Kùzu), over tables or a graph made of them.

`espalier bench oo7 --peers duckdb,kuzu` and `espalier bench social --peers kuzu` write their
database as one CSV file per SQL table (with a header row; the tables of the suite's SQLite
code) and run this program with one JSON request on standard input:

    {"system": "duckdb" | "kuzu", "dir": WORK,
     "ddl": SQL, "tables": [{"name": T, "file": CSV}, …],
     "nodes": [{"label": L, "table": T, "properties": [[COLUMN, "INT64" | "STRING"], …]}, …],
     "rels": [{"type": R, "table": T, "from": [L, COLUMN], "to": [L, COLUMN]}, …],
     "indexes": [[L, PROPERTY], …],
     "warmup": W, "runs": R,
     "queries": [{"name": N, "sql": SQL, "cypher": CYPHER, "kuzu": CYPHER | null,
                  "answer": "aggregate" | "sum" | "rows", "params": [[[VALUE, …], …], …]}, …]}

DuckDB creates the tables with the DDL and reads the files; Kùzu gets a property graph: a node
table per `nodes` entry (its first property is the primary key) and a relationship table per
`rels` entry, an edge for every row of T whose two columns are set (`from`'s column holds the
source's key, `to`'s the target's). `indexes` are for Neo4j (Kùzu has its primary keys).

`params` holds, for each of the W + R runs, the executions of that run, each with its
positional parameters (`?1`, `?2`, … in SQL; `$p0`, `$p1`, … in Cypher). A run executes them
all. Its answer: with `aggregate`, (count, sum) from the one row's first and second column,
summed over the executions; with `sum`, (count, sum) of the rows found and every value in them
(sums wrap as 64-bit integers, as Espalier's); with `rows`, the rows themselves, in the order
the query gives them, the executions' one after another. The reply, on standard output:

    {"system": …, "version": …, "load_ms": …,
     "queries": [{"name": N, "times_us": [R timed runs], "answers": [ANSWER, … one per run, W + R]}, …]}

Any failure is one line on standard error and exit status 1.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

# An execution's rows, as the system returns them.
Rows = Sequence[Sequence[Any]]
Execute = Callable[[dict[str, Any], list[Any]], Rows]

MASK = (1 << 64) - 1
# Longer fields go into Kùzu by CREATE, not COPY FROM CSV (whose reader has a field limit).
KUZU_CSV_FIELD = 100_000


def signed(v: int) -> int:
    """`v` wrapped to a signed 64-bit integer (what Espalier's wrapping sums read back)."""
    v &= MASK
    return v - (1 << 64) if v >= 1 << 63 else v


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()`)."""
    return (time.perf_counter() - started) * 1000.0


def duckdb_load(request: dict[str, Any], work: str) -> tuple[Execute, str, float]:
    import duckdb  # noqa: PLC0415 - only the system asked for need be installed

    started = time.perf_counter()
    conn = duckdb.connect(os.path.join(work, "duckdb.db"))
    conn.execute(request["ddl"])
    for table in request["tables"]:
        path = table["file"].replace("'", "''")
        conn.execute(f"INSERT INTO {table['name']} SELECT * FROM read_csv('{path}', header = true, quote = '\"')")
    conn.execute("ANALYZE")

    def execute(query: dict[str, Any], params: list[Any]) -> Rows:
        return conn.execute(query["sql"], params).fetchall()

    return execute, f"DuckDB {duckdb.__version__}", elapsed_ms(started)


def kuzu_load(request: dict[str, Any], work: str) -> tuple[Execute, str, float]:
    import kuzu  # noqa: PLC0415 - only the system asked for need be installed

    # Kùzu's COPY reads plain CSV in the node or relationship table's column order: the
    # tables' files are turned into that first (not timed as load: the other systems get
    # their input ready-made too).
    tables: dict[str, list[dict[str, str]]] = {}
    csv.field_size_limit(1 << 30)  # the manual is one field (1 MB at medium size)
    for table in request["tables"]:
        with open(table["file"], newline="") as f:
            tables[table["name"]] = list(csv.DictReader(f))
    plain = os.path.join(work, "kuzu-csv")
    os.makedirs(plain)

    def write(name: str, rows: list[list[str]]) -> str:
        path = os.path.join(plain, f"{name}.csv")
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows(rows)
        return path

    node_rows = {
        n["label"]: [[row[c] for c, _ in n["properties"]] for row in tables[n["table"]]] for n in request["nodes"]
    }
    node_files = {label: write(label, rows) for label, rows in node_rows.items()}
    rel_files = {}
    for r in request["rels"]:
        (_, src), (_, dst) = r["from"], r["to"]
        rows = [[row[src], row[dst]] for row in tables[r["table"]] if row[src] and row[dst]]
        rel_files[r["type"]] = write(r["type"], rows)

    started = time.perf_counter()
    db = kuzu.Database(os.path.join(work, "kuzu.db"))
    conn = kuzu.Connection(db)
    for n in request["nodes"]:
        columns = ", ".join(f"{c} {t}" for c, t in n["properties"])
        key = n["properties"][0][0]
        conn.execute(f"CREATE NODE TABLE {n['label']} ({columns}, PRIMARY KEY ({key}))")
        rows = node_rows[n["label"]]
        if any(len(v) > KUZU_CSV_FIELD for row in rows for v in row):
            # COPY refuses fields over its limit (OO7's manual is 1 MB at medium size).
            names = [c for c, _ in n["properties"]]
            create = f"CREATE (:{n['label']} {{{', '.join(f'{c}: ${c}' for c in names)}}})"
            for row in rows:
                typed = [int(v) if t == "INT64" else v for v, (_, t) in zip(row, n["properties"], strict=True)]
                conn.execute(create, dict(zip(names, typed, strict=True)))
        else:
            conn.execute(f"COPY {n['label']} FROM '{node_files[n['label']]}' (header = false)")
    for r in request["rels"]:
        conn.execute(f"CREATE REL TABLE {r['type']} (FROM {r['from'][0]} TO {r['to'][0]})")
        conn.execute(f"COPY {r['type']} FROM '{rel_files[r['type']]}' (header = false)")

    def execute(query: dict[str, Any], params: list[Any]) -> Rows:
        result = conn.execute(query["kuzu"] or query["cypher"], {f"p{i}": v for i, v in enumerate(params)})
        if isinstance(result, list):
            raise TypeError("one statement expected")
        rows: list[list[Any]] = []
        while result.has_next():
            row = result.get_next()
            rows.append(row if isinstance(row, list) else list(row.values()))
        return rows

    return execute, f"Kùzu {kuzu.__version__}", elapsed_ms(started)


def answer(query: dict[str, Any], execute: Execute, executions: list[list[Any]]) -> Any:
    """One run of `query`: its executions, and their answer as the request defines it."""
    if query["answer"] == "rows":
        found: list[list[Any]] = []
        for params in executions:
            found.extend([list(row) for row in execute(query, params)])
        return found
    count = total = 0
    for params in executions:
        rows = execute(query, params)
        if query["answer"] == "aggregate":
            if len(rows) != 1:
                raise ValueError(f"{query['name']}: {len(rows)} rows from an aggregate")
            row = rows[0]
            count += int(row[0] or 0)
            total += int(row[1] or 0) if len(row) > 1 else 0
        else:
            count += len(rows)
            total += sum(int(v) for row in rows for v in row)
    return signed(count), signed(total)


def main() -> int:
    request: dict[str, Any] = json.load(sys.stdin)
    system = request["system"]
    work = os.path.join(request["dir"], f"{system}-work")
    os.makedirs(work)
    loaders = {"duckdb": duckdb_load, "kuzu": kuzu_load}
    if system not in loaders:
        print(f"unknown system {system!r}: expected duckdb or kuzu", file=sys.stderr)
        return 1
    execute, version, load_ms = loaders[system](request, work)
    out = []
    for query in request["queries"]:
        times: list[float] = []
        answers: list[Any] = []
        for i, executions in enumerate(query["params"]):
            t = time.perf_counter()
            answers.append(answer(query, execute, executions))
            if i >= request["warmup"]:
                times.append((time.perf_counter() - t) * 1e6)
        out.append({"name": query["name"], "times_us": times, "answers": answers})
    json.dump({"system": system, "version": version, "load_ms": load_ms, "queries": out}, sys.stdout)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # one line for espalier, whatever failed
        print(f"{type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        sys.exit(1)
