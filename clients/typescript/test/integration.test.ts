// The client against a real `espalier serve` (test/server.ts): queries, mutations, transactions,
// failures, get, subscriptions, resume and reconnect, reload, auth refusals, limits, both
// encodings and every compression, HTTP one-shot requests, and bad frames over a live session.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  AuthError,
  ClientError,
  type Client,
  type Compression,
  ConflictError,
  connect,
  ConnectionLostError,
  type Done,
  type Encoding,
  type EspalierError,
  type Event,
  HttpClient,
  InvalidInstructionError,
  LimitError,
  NotFoundError,
  ProtocolError,
} from "../src/index.js";
import { Server } from "./server.js";
import { INVALID_CASES } from "./shared.js";

const ORDERS = "collection select . 'Orders' 'Quantity' -> number : 'Quantity' 'Client' -> reference : 'Client'";
const PULSE = "update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 )";
let counter = 0;
const key = (prefix: string): string => `${prefix}${++counter}`;

async function using<T>(clients: Promise<Client>[], body: (...c: Client[]) => Promise<T>): Promise<T> {
  const opened = await Promise.all(clients);
  try {
    return await body(...opened);
  } finally {
    await Promise.all(opened.map((c) => c.close()));
  }
}

async function rejectsWith(
  p: Promise<unknown>,
  Family: abstract new (...args: never[]) => EspalierError,
  code?: string,
) {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof Family, `expected ${Family.name}, got ${String(e)}`);
    if (code !== undefined) assert.equal(e.code, code);
    return true;
  });
}

const pulses = (node: Record<string, unknown>): number => node["Pulses"] as number;

describe("a server with default limits", () => {
  let server: Server;
  before(async () => {
    server = await Server.start();
  });
  after(async () => {
    await server.cleanup();
  });

  for (const encoding of ["json", "msgpack"] as Encoding[]) {
    for (const compression of ["none", "zstd", "deflate"] as Compression[]) {
      test(`session basics, ${encoding} + ${compression}`, async () => {
        await using([connect(server.url, { encoding, compression, compressMin: 64 })], async (db) => {
          assert.equal(db.welcome?.encoding, encoding);
          assert.equal(db.welcome?.compression, compression);
          assert.equal(db.welcome?.role, "admin");
          assert.equal(db.welcome?.compress_min, 64);
          await db.ping();
          const rows = await db.query(ORDERS);
          assert.deepEqual(rows.columns, ["Quantity", "Client"]);
          const o1 = rows.rows.find((r) => r.key[0] === "o1");
          assert.equal(o1?.values[1], "c1");
          const padded = `/* ${"padding ".repeat(40)}*/ ${ORDERS}`;
          assert.equal((await db.query(padded)).total, rows.total);
          const node = await db.get(". 'Machines' : $m", { m: "M3" });
          assert.equal(node.node["Costs per Hour"], 200);
          if (compression === "none") {
            assert.equal(db.stats.compressedIn + db.stats.compressedOut, 0);
          } else {
            assert.ok(db.stats.compressedOut >= 1 && db.stats.compressedIn >= 1, JSON.stringify(db.stats));
          }
        });
      });
    }
  }

  test("mutations, transactions and versions", async () => {
    await using([connect(server.url)], async (db) => {
      const c = key("tc");
      const done = await db.update(`update ( 'Clients' -> dictionary "${c}" ( 'Name' -> text "Test ${c}" ) )`);
      assert.ok(done.changes >= 1);
      const got = await db.get(`. 'Clients' : "${c}"`);
      assert.equal(got.node["Name"], `Test ${c}`);
      assert.ok(got.version >= done.version);
      const before = pulses((await db.get(". 'Machines' : \"M2\"")).node);
      const tx = await db.transaction([
        "update . 'Machines' : \"M2\" ( 'Pulses' -> number + 1 )",
        "update . 'Machines' : \"M2\" ( 'Pulses' -> number + 1 )",
        "get . 'Machines' : \"M2\"",
      ]);
      const last = tx.replies[2];
      assert.ok(last?.type === "node");
      assert.equal(pulses(last.node), before + 2);
      const cmd = await db.execute({
        instruction: { command: { name: "pulse", args: [["machine", { text: "M2" }]] } },
      });
      assert.ok(cmd.type === "done" && cmd.version > done.version);
      await rejectsWith(
        db.transaction([
          "update . 'Machines' : \"M2\" ( 'Pulses' -> number + 100 )",
          "update . 'Machines' : \"nope\" ( 'Pulses' -> number + 1 )",
        ]),
        NotFoundError,
        "key_missing",
      );
      assert.equal(pulses((await db.get(". 'Machines' : \"M2\"")).node), before + 3);
    });
  });

  test("failures carry codes and places", async () => {
    await using([connect(server.url, { encoding: "msgpack" })], async (db) => {
      await assert.rejects(db.execute("update . 'Machines' : ( 'Pulses' -> number + 1 )"), (e: unknown) => {
        assert.ok(e instanceof InvalidInstructionError);
        assert.equal(e.code, "syntax");
        assert.equal(e.line, 1);
        assert.ok(e.where?.includes("execute #"));
        return true;
      });
      await rejectsWith(
        db.execute("update . 'Machines' : \"M1\" ( 'Speed' -> number 1 )"),
        InvalidInstructionError,
        "type",
      );
      await rejectsWith(
        db.execute("update . 'Machines' : $m ( 'Pulses' -> number + 1 )"),
        InvalidInstructionError,
        "value",
      );
      await rejectsWith(db.execute("update ( 'Clients' -> dictionary \"c1\" ( ) )"), ConflictError, "key_exists");
      await rejectsWith(db.execute("update ( 'Clients' -> dictionary \"c1\" remove )"), ConflictError, "referenced");
      await rejectsWith(db.get(". 'Machines' : \"M404\""), NotFoundError, "key_missing");
      await rejectsWith(
        db.call("execute", { text: "get", instruction: { get: { path: [] } } }),
        ProtocolError,
        "bad_request",
      );
      await rejectsWith(db.call("frobnicate"), ProtocolError, "unknown_kind");
      await rejectsWith(db.call("unsubscribe", { subscription: 999 }), ProtocolError, "unknown_subscription");
      await db.ping();
    });
  });

  test("pipelined requests in flight at once", async () => {
    await using([connect(server.url, { encoding: "msgpack" })], async (db) => {
      const start = pulses((await db.get(". 'Machines' : \"M3\"")).node);
      const calls: Promise<unknown>[] = [];
      for (let i = 0; i < 150; i++) {
        if (i % 3 === 0) calls.push(db.update("update . 'Machines' : \"M3\" ( 'Pulses' -> number + 1 )"));
        else if (i % 3 === 1) calls.push(db.get(". 'Machines' : \"M3\""));
        else calls.push(db.ping());
      }
      const results = await Promise.all(calls);
      const versions = results.filter((r): r is Done => (r as Done | undefined)?.type === "done").map((r) => r.version);
      assert.equal(versions.length, 50);
      assert.equal(new Set(versions).size, 50);
      assert.equal(pulses((await db.get(". 'Machines' : \"M3\"")).node), start + 50);
    });
  });

  test("node subscription in commit order", async () => {
    const m = key("SM");
    await using([connect(server.url), connect(server.url, { encoding: "msgpack" })], async (writer, reader) => {
      await writer.update(`update ( 'Machines' -> dictionary "${m}" ( 'Costs per Hour' -> number 7 ) )`);
      const sub = await reader.subscribe(`. 'Machines' : "${m}"`);
      assert.equal(sub.node?.["Pulses"], 0);
      assert.equal(sub.resumed, false);
      const versions: number[] = [];
      for (let i = 0; i < 5; i++)
        versions.push((await writer.update(`command 'pulse' ( 'machine' -> "${m}" )`)).version);
      await writer.update(PULSE); // elsewhere: no notification
      const events: Event[] = [];
      for (let i = 0; i < 5; i++) events.push((await sub.nextEvent(10_000)) as Event);
      assert.deepEqual(
        events.map((e) => e.version),
        versions,
      );
      events.forEach((e, n) => {
        assert.ok(e.type === "notify" && e.changes?.length === 1);
        const c = e.changes[0];
        assert.deepEqual([c?.change, c?.property, c?.old, c?.new], ["number", "Pulses", n, n + 1]);
        assert.deepEqual(c?.node, [{ entry: { collection: "Machines", key: [m], matrix: false } }]);
      });
      assert.equal(sub.version, versions[4]);
      await rejectsWith(sub.nextEvent(300), ClientError, "client_timeout");
      await writer.update(`update ( 'Machines' -> dictionary "${m}" remove )`);
      const removed = await sub.nextEvent(10_000);
      assert.ok(removed?.type === "notify");
      assert.deepEqual(
        removed.changes?.map((c) => c.change),
        ["entry_removed"],
      );
      await sub.close();
      assert.equal(await sub.nextEvent(), undefined);
    });
  });

  test("for await over a subscription", async () => {
    const m = key("FA");
    await using([connect(server.url), connect(server.url)], async (writer, reader) => {
      await writer.update(`update ( 'Machines' -> dictionary "${m}" ( ) )`);
      const sub = await reader.subscribe(`. 'Machines' : "${m}"`);
      const versions: number[] = [];
      for (let i = 0; i < 3; i++)
        versions.push((await writer.update(`command 'pulse' ( 'machine' -> "${m}" )`)).version);
      const seen: number[] = [];
      for await (const event of sub) {
        seen.push(event.version);
        if (seen.length === 3) break; // `break` unsubscribes
      }
      assert.deepEqual(seen, versions);
      assert.ok(sub.isEnded);
    });
  });

  test("query subscription", async () => {
    const o = key("to");
    const text = "collection select . 'Orders' 'Quantity' -> number : 'Quantity' > $min";
    await using([connect(server.url), connect(server.url, { compression: "zstd" })], async (writer, reader) => {
      const sub = await reader.subscribeQuery(text, { params: { min: 100_000 } });
      const before = new Set(sub.query?.rows.map((r) => r.key[0]));
      const done = await writer.update(
        `update ( 'Orders' -> dictionary "${o}" ( 'Client' -> reference "c2" 'Quantity' -> number 200000 ) )`,
      );
      const event = await sub.nextEvent(10_000);
      assert.ok(event?.type === "notify" && event.query !== undefined);
      assert.ok(event.version >= done.version);
      assert.deepEqual(new Set(event.query.rows.map((r) => r.key[0])), new Set([...before, o]));
      assert.equal(sub.query, event.query);
      await writer.update(PULSE);
      await rejectsWith(sub.nextEvent(500), ClientError, "client_timeout");
      await sub.close();
    });
  });

  test("pattern query subscription receives differences", async () => {
    const m = key("PQ");
    const text =
      "collection match x in . 'Machines' where x number : 'Pulses' >= 1000 select 'x' -> x 'p' -> x number : 'Pulses'";
    await using([connect(server.url), connect(server.url, { encoding: "msgpack" })], async (writer, reader) => {
      const sub = await reader.subscribeQuery(text);
      const before = sub.query?.rows.length ?? -1;
      await writer.update(`update ( 'Machines' -> dictionary "${m}" ( 'Pulses' -> number 1000 ) )`);
      const came = await sub.nextEvent(10_000);
      assert.ok(came?.type === "notify");
      assert.deepEqual(came.removed, []);
      assert.deepEqual(came.added, [[m, 1000]]);
      await writer.update(`update . 'Machines' : "${m}" ( 'Pulses' -> number + 1 )`);
      const moved = await sub.nextEvent(10_000);
      assert.ok(moved?.type === "notify");
      assert.deepEqual(moved.removed, [[m, 1000]]);
      assert.deepEqual(moved.added, [[m, 1001]]);
      assert.equal(moved.version, came.version + 1);
      // The subscription's rows follow the differences.
      assert.equal(sub.query?.rows.length, before + 1);
      assert.ok(sub.query?.rows.some((r) => JSON.stringify(r.values) === JSON.stringify([m, 1001])));
      await sub.close();
    });
  });

  test("subscribe with since resumes from the history", async () => {
    const m = key("RM");
    await using([connect(server.url)], async (writer) => {
      await writer.update(`update ( 'Machines' -> dictionary "${m}" ( ) )`);
      const seen = await using(
        [connect(server.url)],
        async (first) => (await first.subscribe(`. 'Machines' : "${m}"`)).version,
      );
      const versions: number[] = [];
      for (let i = 0; i < 3; i++) {
        versions.push((await writer.update(`update . 'Machines' : "${m}" ( 'Pulses' -> number + 1 )`)).version);
      }
      await using([connect(server.url, { encoding: "msgpack" })], async (again) => {
        const sub = await again.subscribe(`. 'Machines' : "${m}"`, { since: seen });
        assert.ok(sub.resumed);
        assert.equal(sub.version, seen);
        assert.equal(sub.node, undefined);
        const got: number[] = [];
        for (let i = 0; i < 3; i++) got.push(((await sub.nextEvent(10_000)) as Event).version);
        assert.deepEqual(got, versions);
        const fresh = await again.subscribe(`. 'Machines' : "${m}"`, { since: (versions[2] as number) + 1_000_000 });
        assert.equal(fresh.resumed, false);
        assert.equal(fresh.node?.["Pulses"], 3);
        const status = await again.status();
        assert.ok(status.history_from <= seen && status.subscriptions >= 2);
      });
    });
  });

  test("local queue overflow resumes without gaps", async () => {
    const m = key("QM");
    await using([connect(server.url), connect(server.url, { subscriptionQueue: 3 })], async (writer, reader) => {
      await writer.update(`update ( 'Machines' -> dictionary "${m}" ( ) )`);
      const sub = await reader.subscribe(`. 'Machines' : "${m}"`);
      const versions: number[] = [];
      for (let i = 0; i < 10; i++) {
        versions.push((await writer.update(`update . 'Machines' : "${m}" ( 'Pulses' -> number + 1 )`)).version);
      }
      // The reader has not read: its queue of 3 overflows as the notifications arrive.
      for (let i = 0; i < 500 && sub.overflows === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(sub.overflows, 1);
      const seen: number[] = [];
      while (seen.length < 10) {
        const e = (await sub.nextEvent(10_000)) as Event;
        assert.equal(e.type, "notify", "resumed from history, expected no reload");
        seen.push(e.version);
      }
      assert.deepEqual(seen, versions);
    });
  });

  test("HTTP one-shot requests", async () => {
    for (const encoding of ["json", "msgpack"] as Encoding[]) {
      const http = new HttpClient(server.http, { encoding });
      assert.ok(await http.health());
      assert.ok((await http.query(ORDERS)).total >= 3);
      assert.equal((await http.get(". 'Machines' : $m", { m: "M1" })).node["Costs per Hour"], 120);
      assert.ok("Machines" in (await http.get()).node);
      const done = await http.execute(PULSE);
      assert.ok(done.type === "done");
      assert.ok((await http.status()).version >= done.version);
      await assert.rejects(http.get(". 'Machines' : \"M404\""), (e: unknown) => {
        return e instanceof NotFoundError && e.where === "GET /v1/node";
      });
      await rejectsWith(http.execute("update ("), InvalidInstructionError, "syntax");
    }
  });

  for (const c of INVALID_CASES) {
    test(`the server refuses invalid frame ${c.name} with ${c.code}`, async () => {
      const errors: EspalierError[] = [];
      await using(
        [connect(server.url, { encoding: c.encoding, compression: c.compression, onError: (e) => errors.push(e) })],
        async (db) => {
          const frame = c.frame === "text" ? (c.text as string) : new Uint8Array(Buffer.from(c.hex as string, "hex"));
          if (c.id !== undefined) {
            await assert.rejects(db.sendFrame(frame, c.id), (e: unknown) => (e as EspalierError).code === c.code);
          } else {
            await db.sendFrame(frame);
            for (let i = 0; i < 200 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
            assert.deepEqual(
              errors.map((e) => e.code),
              [c.code],
            );
          }
          await db.ping();
        },
      );
    });
  }
});

describe("a server with tokens", () => {
  let server: Server;
  before(async () => {
    server = await Server.start([], { reader: "read", writer: "write", boss: "admin" });
  });
  after(async () => {
    await server.cleanup();
  });

  test("auth refusals", async () => {
    await rejectsWith(connect(server.url), AuthError, "unauthorized");
    await rejectsWith(connect(server.url, { token: "not-a-real-token-at-all" }), AuthError, "unauthorized");
    await using([connect(server.url, { token: Server.secret("reader") })], async (reader) => {
      assert.equal(reader.welcome?.role, "read");
      assert.equal((await reader.get(". 'Machines' : \"M1\"")).node["Costs per Hour"], 120);
      await rejectsWith(reader.update(PULSE), AuthError, "forbidden");
      await rejectsWith(reader.shutdown(), AuthError, "forbidden");
    });
    await using([connect(server.url, { token: Server.secret("writer"), tokenInQuery: true })], async (writer) => {
      assert.equal(writer.welcome?.role, "write");
      assert.equal((await writer.update(PULSE)).type, "done");
      await rejectsWith(writer.shutdown(), AuthError, "forbidden");
    });
    assert.ok(await new HttpClient(server.http).health());
    await rejectsWith(new HttpClient(server.http).status(), AuthError, "unauthorized");
    await rejectsWith(
      new HttpClient(server.http, { token: Server.secret("reader") }).execute(PULSE),
      AuthError,
      "forbidden",
    );
  });
});

describe("a server with tight limits", () => {
  let server: Server;
  const big = `/* ${"x".repeat(70_000)} */ ${PULSE}`;
  before(async () => {
    server = await Server.start([
      "--max-frame-bytes",
      "65536",
      "--max-in-flight",
      "4",
      "--max-subscriptions",
      "2",
      "--max-result-bytes",
      "8192",
    ]);
  });
  after(async () => {
    await server.cleanup();
  });

  test("the frame limit, checked here and by the server", async () => {
    await using([connect(server.url)], async (db) => {
      assert.equal(db.welcome?.limits.max_frame_bytes, 65536);
      await assert.rejects(
        db.execute(big),
        (e: unknown) => e instanceof LimitError && e.code === "too_large" && e.detail.includes("not sent"),
      );
      await db.ping();
    });
    await using([connect(server.url, { respectLimits: false, reconnect: false })], async (db) => {
      await assert.rejects(db.execute(big), (e: unknown) => e instanceof ConnectionLostError && e.closeCode === 1009);
      await rejectsWith(db.ping(), ConnectionLostError);
    });
  });

  test("a compressed message is bounded by its decompressed size", async () => {
    const pushed: EspalierError[] = [];
    const options = {
      compression: "zstd",
      respectLimits: false,
      timeoutMs: 1000,
      onError: (e: EspalierError) => pushed.push(e),
    } as const;
    await using([connect(server.url, options)], async (db) => {
      // The server cannot read the id of what it cannot decompress: an id-less `too_large`.
      await rejectsWith(db.execute(big), ClientError, "client_timeout");
      assert.equal(db.stats.compressedOut, 1);
      assert.deepEqual(
        pushed.map((e) => e.code),
        ["too_large"],
      );
      await db.ping();
    });
  });

  test("the result limit", async () => {
    const name = "n".repeat(10_000); // a reply with it is over max_result_bytes (8192)
    await using([connect(server.url)], async (db) => {
      await db.update("update ( 'Clients' -> dictionary \"big\" ( 'Name' -> text \"short\" ) )");
      const sub = await db.subscribe(". 'Clients' : \"big\"");
      await db.update(`update . 'Clients' : "big" ( 'Name' -> text "${name}" )`);
      await rejectsWith(db.get(". 'Clients' : \"big\""), LimitError, "result_too_large");
      // The notification is too large as well: the server ends the subscription.
      await assert.rejects(sub.nextEvent(10_000), (e: unknown) => {
        return e instanceof LimitError && e.code === "result_too_large" && e.subscription === sub.id;
      });
      assert.ok(sub.isEnded);
      await db.ping();
    });
  });

  test("the in-flight limit", async () => {
    // Queries, which run on the server's blocking pool and so stay in flight while the session
    // reads the next request (writes without an fsync finish before it reads on).
    await using([connect(server.url, { respectLimits: false, encoding: "msgpack" })], async (db) => {
      const results = await Promise.allSettled(Array.from({ length: 60 }, () => db.query(ORDERS)));
      const refused = results
        .filter((r) => r.status === "rejected")
        .map((r) => (r as PromiseRejectedResult).reason as EspalierError);
      assert.ok(refused.length > 0 && refused.length < 60);
      assert.deepEqual([...new Set(refused.map((e) => e.code))], ["too_many_requests"]);
      assert.ok(refused.every((e) => e instanceof LimitError));
    });
    await using([connect(server.url)], async (db) => {
      const results = await Promise.all(Array.from({ length: 60 }, () => db.update(PULSE)));
      assert.equal(results.length, 60);
    });
  });

  test("the subscription limit", async () => {
    await using([connect(server.url)], async (db) => {
      const a = await db.subscribe(". 'Machines' : \"M1\"");
      await db.subscribe(". 'Machines' : \"M2\"");
      await rejectsWith(db.subscribe(". 'Machines' : \"M3\""), LimitError, "too_many_subscriptions");
      await a.close();
      await db.subscribe(". 'Machines' : \"M3\"");
    });
  });

  test("reconnect resumes subscriptions without gaps", async () => {
    await using([connect(server.url), connect(server.url, { respectLimits: false })], async (writer, reader) => {
      await writer.update("update ( 'Machines' -> dictionary \"RC\" ( ) )");
      const sub = await reader.subscribe(". 'Machines' : \"RC\"");
      const bump = "update . 'Machines' : \"RC\" ( 'Pulses' -> number + 1 )";
      const versions = [(await writer.update(bump)).version];
      await assert.rejects(
        reader.execute(big),
        (e: unknown) => e instanceof ConnectionLostError && e.closeCode === 1009,
      );
      for (let i = 0; i < 3; i++) versions.push((await writer.update(bump)).version);
      const got: number[] = [];
      for (let i = 0; i < 4; i++) {
        const e = (await sub.nextEvent(10_000)) as Event;
        assert.equal(e.type, "notify");
        got.push(e.version);
      }
      assert.deepEqual(got, versions);
      assert.equal(reader.reconnects, 1);
      await reader.ping();
    });
  });
});

describe("a server of one's own", () => {
  test("the session limit", async () => {
    const server = await Server.start(["--max-sessions", "2"]);
    try {
      await using([connect(server.url), connect(server.url)], async () => {
        await rejectsWith(connect(server.url), LimitError, "too_many_sessions");
      });
    } finally {
      await server.cleanup();
    }
  });

  test("a restart resumes, or reloads what it cannot resume", async () => {
    const server = await Server.start();
    const bump = "update . 'Machines' : \"M2\" ( 'Pulses' -> number + 5 )";
    try {
      await using([connect(server.url, { reconnectAttempts: 40 })], async (reader) => {
        const sub = await reader.subscribe(". 'Machines' : \"M2\"");
        const start = sub.node?.["Pulses"] as number;
        // Nothing missed: versions persist across restarts, so the server resumes.
        await server.restart();
        const done = await using([connect(server.url)], (w) => w.update(bump));
        const event = (await sub.nextEvent(20_000)) as Event;
        assert.ok(event.type === "notify" && event.version === done.version, JSON.stringify(event));
        assert.equal(reader.reconnects, 1);
        // A commit while the server is down: the restarted server cannot resume from before it.
        await server.stop();
        server.execOffline(bump);
        await server.run();
        const reload = (await sub.nextEvent(20_000)) as Event;
        assert.ok(reload.type === "reload" && reload.reason === "resubscribed", JSON.stringify(reload));
        assert.ok(reload.version > done.version);
        assert.equal(reload.node?.["Pulses"], start + 10);
        assert.equal(sub.node, reload.node);
        assert.equal(reader.reconnects, 2);
      });
    } finally {
      await server.cleanup();
    }
  });

  test("a lagging subscriber gets a reload", async () => {
    const server = await Server.start(["--subscriber-queue", "1"]);
    try {
      await using([connect(server.url), connect(server.url)], async (writer, reader) => {
        const sub = await reader.subscribe(". 'Machines' : \"M1\"");
        let last = 0;
        for (let i = 0; i < 20; i++) {
          const results = await Promise.all(Array.from({ length: 32 }, () => writer.update(PULSE)));
          last = Math.max(last, ...results.map((r) => r.version));
        }
        const reloads: Event[] = [];
        while (sub.version < last) {
          const e = (await sub.nextEvent(10_000)) as Event;
          if (e.type === "reload") reloads.push(e);
        }
        assert.ok(reloads.length > 0, "a queue of 1 under bursts of 32 commits never lagged");
        assert.ok(reloads.every((r) => r.type === "reload" && r.reason === "lagged" && r.node !== undefined));
        assert.equal(sub.version, (await reader.get(". 'Machines' : \"M1\"")).version);
      });
    } finally {
      await server.cleanup();
    }
  });

  test("shutdown closes the sessions", async () => {
    const server = await Server.start();
    try {
      await using([connect(server.url, { reconnect: false })], async (watcher) => {
        const sub = await watcher.subscribe(". 'Machines' : \"M1\"");
        await using([connect(server.url)], (admin) => admin.shutdown());
        await assert.rejects(
          sub.nextEvent(20_000),
          (e: unknown) => e instanceof ConnectionLostError && e.closeCode === 1001,
        );
      });
      assert.equal(await server.waitExit(30_000), 0);
    } finally {
      await server.cleanup();
    }
  });
});
