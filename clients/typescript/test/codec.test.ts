// Unit tests of the codec, request builder and error mapping, without a server.

import assert from "node:assert/strict";
import { deflateSync } from "node:zlib";
import { test } from "node:test";

import {
  AuthError,
  ClientError,
  Codec,
  compressedBy,
  ConflictError,
  DatabaseError,
  decode,
  DecodeError,
  decompress,
  encode,
  EngineLimitError,
  errorFromCode,
  InstructionError,
  InvalidInstructionError,
  LimitError,
  NotFoundError,
  ProtocolError,
  QueryTimeoutError,
  request,
  ServerError,
  UnavailableError,
  wsUrl,
  zstdContentSize,
  type Compression,
  type Encoding,
} from "../src/index.js";
import { defaultZstd } from "../src/codec.js";

test("round trip and the compression threshold, every encoding and compression", async () => {
  const zstd = await defaultZstd();
  for (const encoding of ["json", "msgpack"] as Encoding[]) {
    for (const compression of ["none", "zstd", "deflate"] as Compression[]) {
      const session = new Codec(encoding, compression, 100, 1 << 20, zstd);
      const small = request("ping", 1);
      const big = request("execute", 2, {
        text: "update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 ) ".repeat(10),
      });
      for (const msg of [small, big]) {
        const frame = await session.encode(msg);
        const compressed = compression !== "none" && encode(msg, encoding).length >= 100;
        if (compressed) assert.ok(frame instanceof Uint8Array && compressedBy(frame) === compression);
        else if (encoding === "json") assert.equal(typeof frame, "string");
        else assert.ok(frame instanceof Uint8Array && compressedBy(frame) === undefined);
        assert.deepEqual(await session.decode(frame), msg);
      }
    }
  }
});

test("MessagePack integers use the shortest form, strings are str", () => {
  const cases: Array<[number, string]> = [
    [5, "05"],
    [200, "ccc8"],
    [70000, "ce00011170"],
    [2 ** 40, "cf0000010000000000"],
    [-3, "fd"],
    [-100, "d09c"],
    [-1000, "d1fc18"],
    [-100000, "d2fffe7960"],
    [-(2 ** 40), "d3ffffff0000000000"],
  ];
  for (const [value, hex] of cases) {
    assert.equal(
      Buffer.from(encode({ v: value }, "msgpack"))
        .subarray(3)
        .toString("hex"),
      hex,
      String(value),
    );
  }
  assert.equal(Buffer.from(encode({ text: "é" }, "msgpack")).toString("hex"), "81a474657874a2c3a9");
});

test("decompression bombs are refused", async () => {
  const zstd = await defaultZstd();
  const plain = new Uint8Array(200_002).fill(0x20);
  for (const [algorithm, frame] of [
    ["zstd", await zstd!.compress(plain)],
    ["deflate", new Uint8Array(deflateSync(plain))],
  ] as Array<[Compression, Uint8Array]>) {
    await assert.rejects(
      decompress(algorithm, frame, 10_000, zstd),
      (e: unknown) => e instanceof DecodeError && e.code === "too_large",
    );
    assert.equal((await decompress(algorithm, frame, plain.length, zstd)).length, plain.length);
  }
});

test("truncated compressed frames are bad frames", async () => {
  const zstd = await defaultZstd();
  const plain = new TextEncoder().encode('{"id":1,"kind":"ping"}'.repeat(50));
  for (const [algorithm, frame] of [
    ["zstd", await zstd!.compress(plain)],
    ["deflate", new Uint8Array(deflateSync(plain))],
  ] as Array<[Compression, Uint8Array]>) {
    await assert.rejects(decompress(algorithm, frame.subarray(0, frame.length - 4), 1 << 20, zstd), (e: unknown) => {
      return e instanceof DecodeError && e.code === "bad_frame";
    });
  }
});

test("zstd frame headers give their content size", async () => {
  const zstd = await defaultZstd();
  for (const size of [1, 255, 256, 300, 65_535 + 256, 70_000, 5_000_000]) {
    assert.equal(zstdContentSize(await zstd!.compress(new Uint8Array(size))), size);
  }
});

test("oversized frames are refused before decoding", async () => {
  const session = new Codec("msgpack", "none", 512, 64);
  await assert.rejects(
    session.decode(encode({ kind: "node", node: { x: "y".repeat(100) } }, "msgpack")),
    (e: unknown) => {
      return e instanceof DecodeError && e.code === "too_large";
    },
  );
});

test("non-objects and non-string keys are bad frames", () => {
  assert.throws(() => decode(new TextEncoder().encode("[1]"), "json"), DecodeError);
  assert.throws(() => decode(Uint8Array.of(0x81, 0x01, 0x02), "msgpack"), DecodeError);
});

test("the request builder checks its input", () => {
  assert.deepEqual(request("get", 3, { path: "", params: { b: 2, a: "x" } }), {
    id: 3,
    kind: "get",
    params: { a: "x", b: 2 },
    path: "",
  });
  assert.deepEqual(Object.keys(request("get", 3, { path: "", params: { b: 2, a: "x" } })), [
    "id",
    "kind",
    "params",
    "path",
  ]);
  for (const bad of [{ x: 1.5 }, { x: true }, { x: null }, { x: 2 ** 60 }]) {
    assert.throws(
      () => request("get", 1, { path: "", params: bad as never }),
      (e: unknown) => e instanceof ClientError && e.code === "usage" && e.detail.includes("$x"),
    );
  }
  assert.throws(() => request("ping", -1), ClientError);
  assert.throws(() => request("ping", 1, { nonsense: 1 } as never), ClientError);
});

test("every protocol code has its family", () => {
  const families: Array<[unknown, string[]]> = [
    [InvalidInstructionError, ["syntax", "type", "value", "key_too_long"]],
    [NotFoundError, ["key_missing"]],
    [
      ConflictError,
      ["key_exists", "already_in_state", "state_not_selected", "referenced", "reference_unset", "not_unique"],
    ],
    [DatabaseError, ["transaction", "storage", "storage_full", "corrupt", "schema"]],
    [EngineLimitError, ["limit"]],
    [ProtocolError, ["bad_frame", "wrong_encoding", "bad_request", "unknown_kind", "unknown_subscription"]],
    [LimitError, ["too_large", "result_too_large", "too_many_requests", "too_many_subscriptions", "too_many_sessions"]],
    [QueryTimeoutError, ["timeout"]],
    [AuthError, ["unauthorized", "forbidden"]],
    [UnavailableError, ["shutting_down"]],
    [ServerError, ["internal", "a_code_from_the_future", "constructor", "__proto__"]],
  ];
  for (const [Family, codes] of families) {
    for (const code of codes) assert.equal(errorFromCode(code, "m").constructor, Family, code);
  }
  assert.ok(errorFromCode("limit", "m") instanceof LimitError);
  assert.ok(errorFromCode("key_missing", "m") instanceof InstructionError);
  assert.ok(errorFromCode("timeout", "m") instanceof LimitError);
});

test("errors name the place", () => {
  const e = errorFromCode("syntax", "syntax error: 1:8: expected a path", { request: "execute #4 'update'" });
  assert.equal(e.line, 1);
  assert.equal(e.column, 8);
  assert.equal(e.where, "execute #4 'update', at 1:8");
  assert.equal(e.message, "error[syntax]: syntax error: 1:8: expected a path (execute #4 'update', at 1:8)");
  assert.equal(errorFromCode("result_too_large", "too big", { subscription: 3 }).where, "subscription 3");
});

test("upgrade URLs", () => {
  assert.equal(
    wsUrl("http://127.0.0.1:7700", "msgpack", "zstd", 64, "s3cret"),
    "ws://127.0.0.1:7700/ws?encoding=msgpack&compression=zstd&compress_min=64&token=s3cret",
  );
  assert.equal(
    wsUrl("wss://db.example/ws", "json", "none", 512),
    "wss://db.example/ws?encoding=json&compression=none&compress_min=512",
  );
  assert.throws(() => wsUrl("ftp://x", "json", "none", 1), ClientError);
});
