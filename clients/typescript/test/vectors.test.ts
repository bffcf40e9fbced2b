// The protocol test vectors (protocol/vectors/README.md): this client reads and writes every
// message byte for byte as the server does.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import {
  Codec,
  compressedBy,
  decode,
  DecodeError,
  decompress,
  encode,
  type Compression,
  errorFromCode,
  parseEvent,
  parseReply,
  parseStatus,
  parseWelcome,
  records,
  request,
  ConflictError,
  LimitError,
  ProtocolError,
  type JsonObject,
} from "../src/index.js";
import { INVALID_CASES, VECTORS } from "./shared.js";

const NAMES = readdirSync(VECTORS)
  .filter((f) => f.endsWith(".json"))
  .map((f) => f.slice(0, -5))
  .sort();
const REQUEST_KINDS = new Set(["ping", "execute", "get", "subscribe", "unsubscribe", "status", "shutdown"]);

function load(name: string): [JsonObject, Uint8Array] {
  const value = JSON.parse(readFileSync(join(VECTORS, `${name}.json`), "utf8")) as JsonObject;
  return [value, new Uint8Array(readFileSync(join(VECTORS, `${name}.msgpack`)))];
}

test("the vectors are there", () => {
  assert.ok(NAMES.length >= 30, `found only ${NAMES.length} vectors in ${VECTORS}`);
});

for (const name of NAMES) {
  test(`vector ${name}: JSON and MessagePack agree byte for byte`, () => {
    const [value, packed] = load(name);
    assert.deepEqual(Buffer.from(encode(value, "msgpack")).toString("hex"), Buffer.from(packed).toString("hex"));
    assert.deepEqual(decode(packed, "msgpack"), value);
    assert.deepEqual(JSON.parse(new TextDecoder().decode(encode(value, "json"))), value);
    assert.deepEqual(decode(encode(value, "json"), "json"), value);
  });
}

const isRequest = (v: JsonObject): boolean => REQUEST_KINDS.has(String(v["kind"])) && !("version" in v);

test("every request kind has a vector", () => {
  const kinds = new Set(
    NAMES.map((n) => load(n)[0])
      .filter(isRequest)
      .map((v) => String(v["kind"])),
  );
  assert.deepEqual([...kinds].sort(), [...REQUEST_KINDS].sort());
});

for (const name of NAMES) {
  const [value, packed] = load(name);
  if (!isRequest(value)) continue;
  test(`vector ${name}: the request builder writes the server's bytes`, () => {
    const fields: Record<string, never> = {};
    // Give the fields in reverse: the builder must put them in wire order itself.
    for (const [k, v] of Object.entries(value).reverse()) if (k !== "id" && k !== "kind") fields[k] = v as never;
    const built = request(String(value["kind"]), value["id"] as number, fields);
    assert.equal(Buffer.from(encode(built, "msgpack")).toString("hex"), Buffer.from(packed).toString("hex"));
  });
}

for (const name of ["notify_changes", "result_query"]) {
  for (const [algorithm, suffix] of [
    ["zstd", "zstd"],
    ["deflate", "zlib"],
  ] as Array<[Compression, string]>) {
    test(`frame ${name}.${suffix} decompresses to the vector`, async () => {
      const [value, packed] = load(name);
      const frame = new Uint8Array(readFileSync(join(VECTORS, "frames", `${name}.${suffix}`)));
      assert.equal(compressedBy(frame), algorithm);
      const opened = await new Codec("msgpack", algorithm, 0, 1 << 20, await zstdFor(algorithm)).decode(frame);
      assert.deepEqual(opened, value);
      const plain = await decompress(algorithm, frame, 1 << 20, await zstdFor(algorithm));
      assert.deepEqual(Buffer.from(plain), Buffer.from(packed));
      // Our own compressed frame of the same message decodes to it too.
      const ours = await new Codec("msgpack", algorithm, 0, 1 << 20, await zstdFor(algorithm)).encode(value);
      assert.ok(ours instanceof Uint8Array && compressedBy(ours) === algorithm);
      assert.deepEqual(await new Codec("msgpack", algorithm, 0, 1 << 20, await zstdFor(algorithm)).decode(ours), value);
      // The size bound applies to the decompressed message.
      await assert.rejects(decompress(algorithm, frame, packed.length - 1, await zstdFor(algorithm)), (e: unknown) => {
        return e instanceof DecodeError && e.code === "too_large";
      });
    });
  }
}

async function zstdFor(algorithm: Compression) {
  const { defaultZstd } = await import("../src/codec.js");
  return algorithm === "zstd" ? await defaultZstd() : undefined;
}

// The frames of invalid/cases.json a client's decoder can judge (the others are about request
// fields, which only the server checks; the integration tests send them to a live server).
const FRAME_CASES = new Set([
  "json_malformed",
  "json_not_an_object",
  "json_uncompressed_binary_frame",
  "msgpack_text_frame",
  "msgpack_truncated",
  "msgpack_trailing_bytes",
  "msgpack_not_a_map",
  "msgpack_empty",
  "zstd_frame_in_uncompressed_session",
  "zlib_frame_in_zstd_session",
  "zstd_garbage",
  "zlib_garbage",
]);

for (const c of INVALID_CASES.filter((c) => FRAME_CASES.has(c.name))) {
  test(`invalid frame ${c.name} is refused with ${c.code}`, async () => {
    const session = new Codec(c.encoding, c.compression, 512, 1 << 20, await zstdFor(c.compression));
    const frame = c.frame === "text" ? (c.text as string) : new Uint8Array(Buffer.from(c.hex as string, "hex"));
    await assert.rejects(session.decode(frame), (e: unknown) => e instanceof DecodeError && e.code === c.code);
  });
}

test("typed replies", () => {
  const welcome = parseWelcome(load("welcome")[0]);
  assert.equal(welcome.limits.max_frame_bytes, 16 << 20);
  assert.equal(welcome.role, "write");
  assert.deepEqual(parseReply(load("result_done")[0]["result"]), { type: "done", version: 42, changes: 1 });
  const query = parseReply(load("result_query")[0]["result"]);
  assert.ok(query.type === "query");
  assert.deepEqual(records(query)[1], { key: ["o2"], Quantity: -3, Client: "c2", Status: "Planned" });
  const tx = parseReply(load("result_transaction")[0]["result"]);
  assert.ok(tx.type === "transaction");
  assert.deepEqual(
    tx.replies.map((r) => r.type),
    ["done", "node"],
  );
  assert.equal(parseStatus(load("status_reply")[0]).history_from, 12);
  const notify = parseEvent(load("notify_changes")[0]);
  assert.ok(notify.type === "notify" && notify.changes !== undefined);
  assert.deepEqual(
    notify.changes.map((c) => c.change),
    ["number", "number", "text", "reference", "reference", "entry_added", "entry_removed", "state_switched"],
  );
  const reload = parseEvent(load("reload")[0]);
  assert.ok(reload.type === "reload" && reload.reason === "lagged" && reload.node !== undefined);
});

test("error vectors become typed errors", () => {
  for (const [name, Family] of [
    ["error_instruction", ConflictError],
    ["error_limit", LimitError],
    ["error_no_id", ProtocolError],
    ["error_subscription", LimitError],
  ] as const) {
    const v = load(name)[0];
    const e = errorFromCode(String(v["code"]), String(v["message"]), {
      requestId: v["id"] as number | undefined,
      subscription: v["subscription"] as number | undefined,
    });
    assert.equal(e.constructor, Family, name);
    assert.equal(e.code, v["code"]);
    assert.equal(e.detail, v["message"]);
  }
});
