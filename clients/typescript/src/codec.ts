/**
 * Messages to WebSocket frames and back (docs/protocol.md, "Frames"). A JSON session sends
 * plain messages as text frames, a MessagePack session as binary frames; a compressed message
 * is a binary frame that starts with its algorithm's magic (zstd `28 B5 2F FD`, zlib `78`).
 * MessagePack is written as the server writes it: shortest integer forms, `str` strings, keys
 * in insertion order, absent (undefined) fields left out.
 */

import { decode as msgpackDecode, encode as msgpackEncode } from "@msgpack/msgpack";

export type Encoding = "json" | "msgpack";
export type Compression = "none" | "zstd" | "deflate";
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export const ZSTD_MAGIC = Uint8Array.of(0x28, 0xb5, 0x2f, 0xfd);
export const ZLIB_FIRST = 0x78;
export const DEFAULT_COMPRESS_MIN = 512;
// Deepest nesting accepted when decoding (the server's bound is 128).
const MAX_DEPTH = 512;

/** A frame that is not a readable message; `code` is `bad_frame`, `wrong_encoding` or `too_large`. */
export class DecodeError extends Error {
  constructor(
    readonly code: "bad_frame" | "wrong_encoding" | "too_large",
    message: string,
  ) {
    super(`${code}: ${message}`);
    this.name = "DecodeError";
  }
}

/** zstd for environments that lack it (browsers): compress with level 1, decompress bounded. */
export interface ZstdCodec {
  compress(data: Uint8Array): Uint8Array | Promise<Uint8Array>;
  /** Must refuse (throw) to produce more than `limit` bytes. */
  decompress(data: Uint8Array, limit: number): Uint8Array | Promise<Uint8Array>;
}

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

export function encode(message: JsonObject, encoding: Encoding): Uint8Array {
  if (encoding === "json") return utf8.encode(JSON.stringify(message));
  return msgpackEncode(message, { ignoreUndefined: true });
}

function depthOk(value: unknown, depth: number): boolean {
  if (depth > MAX_DEPTH) return false;
  if (Array.isArray(value)) return value.every((v) => depthOk(v, depth + 1));
  if (value !== null && typeof value === "object") return Object.values(value).every((v) => depthOk(v, depth + 1));
  return true;
}

/** One message from uncompressed bytes; throws `DecodeError` (`bad_frame`). */
export function decode(data: Uint8Array, encoding: Encoding): JsonObject {
  let value: unknown;
  if (encoding === "json") {
    try {
      value = JSON.parse(utf8Decoder.decode(data));
    } catch (e) {
      throw new DecodeError("bad_frame", `the json message is malformed: ${(e as Error).message}`);
    }
  } else {
    if (data.length === 0) throw new DecodeError("bad_frame", "the msgpack message is malformed: the frame is empty");
    try {
      // Throws on bytes after the message, and on maps with non-string keys.
      value = msgpackDecode(data, { useBigInt64: false, mapKeyConverter: mapKey });
    } catch (e) {
      throw new DecodeError("bad_frame", `the msgpack message is malformed: ${(e as Error).message}`);
    }
    if (!depthOk(value, 0)) throw new DecodeError("bad_frame", "the msgpack message is nested too deeply");
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new DecodeError("bad_frame", `a message is a map, not ${Array.isArray(value) ? "an array" : typeof value}`);
  }
  return value as JsonObject;
}

function mapKey(key: unknown): string {
  if (typeof key !== "string") throw new Error(`map keys are strings, not ${typeof key}`);
  return key;
}

export function compressedBy(data: Uint8Array): Compression | undefined {
  if (data.length >= 4 && data[0] === 0x28 && data[1] === 0xb5 && data[2] === 0x2f && data[3] === 0xfd) return "zstd";
  if (data.length >= 1 && data[0] === ZLIB_FIRST) return "deflate";
  return undefined;
}

// ---- compression backends ----

interface NodeZlib {
  deflateSync(data: Uint8Array, options: { level: number }): Uint8Array;
  inflateSync(data: Uint8Array, options: { maxOutputLength: number }): Uint8Array;
  zstdCompressSync?: (data: Uint8Array, options?: object) => Uint8Array;
  zstdDecompressSync?: (data: Uint8Array, options?: { maxOutputLength: number }) => Uint8Array;
  constants: Record<string, number>;
}

interface WasmZstd {
  init(): Promise<void>;
  compress(data: Uint8Array, level: number): Uint8Array;
  decompress(data: Uint8Array, options: { defaultHeapSize: number }): Uint8Array;
}

export const isNode: boolean =
  typeof process !== "undefined" && typeof process.versions === "object" && typeof process.versions.node === "string";

let nodeZlib: Promise<NodeZlib> | undefined;
function loadNodeZlib(): Promise<NodeZlib> {
  nodeZlib ??= import("node:zlib") as unknown as Promise<NodeZlib>;
  return nodeZlib;
}

let wasmZstd: Promise<WasmZstd> | undefined;
function loadWasmZstd(): Promise<WasmZstd> {
  wasmZstd ??= (async () => {
    const name = "@bokuweb/zstd-wasm";
    const mod = (await import(name)) as WasmZstd & { default?: WasmZstd };
    const api = typeof mod.init === "function" ? mod : (mod.default as WasmZstd);
    await api.init();
    return api;
  })();
  return wasmZstd;
}

/** The zstd codec of this environment: Node's zlib (Node ≥ 22.15), else the WebAssembly build
 * of zstd in Node; none in browsers (pass one with the `zstd` option). */
export async function defaultZstd(): Promise<ZstdCodec | undefined> {
  if (!isNode) return undefined;
  const zlib = await loadNodeZlib();
  const compressSync = zlib.zstdCompressSync;
  const decompressSync = zlib.zstdDecompressSync;
  if (compressSync !== undefined && decompressSync !== undefined) {
    const level = zlib.constants["ZSTD_c_compressionLevel"];
    return {
      compress: (d) => compressSync(d, level !== undefined ? { params: { [level]: 1 } } : {}),
      decompress: (d, limit) => decompressSync(d, { maxOutputLength: limit }),
    };
  }
  const wasm = await loadWasmZstd();
  return {
    compress: (d) => wasm.compress(d, 1),
    decompress: (d, limit) => {
      const size = zstdContentSize(d);
      if (size !== undefined && size > limit) {
        throw new DecodeError("too_large", `the message is ${size} bytes, over the limit of ${limit}`);
      }
      // Without a declared size the output buffer is `limit` bytes: a larger message fails.
      return wasm.decompress(d, { defaultHeapSize: Math.max(1, size ?? limit) });
    },
  };
}

/** The content size a zstd frame header declares, if it does (RFC 8878, 3.1.1.1). */
export function zstdContentSize(frame: Uint8Array): number | undefined {
  if (frame.length < 5) return undefined;
  const descriptor = frame[4] as number;
  const fcsFlag = descriptor >> 6;
  const singleSegment = (descriptor >> 5) & 1;
  const dictIdBytes = [0, 1, 2, 4][descriptor & 3] as number;
  const fcsBytes = fcsFlag === 0 ? singleSegment : ([1, 2, 4, 8][fcsFlag] as number);
  if (fcsBytes === 0) return undefined;
  const at = 5 + (singleSegment ? 0 : 1) + dictIdBytes;
  if (frame.length < at + fcsBytes) return undefined;
  let size = 0;
  for (let i = fcsBytes - 1; i >= 0; i--) size = size * 256 + (frame[at + i] as number);
  return fcsBytes === 2 ? size + 256 : size;
}

async function streamThrough(data: Uint8Array, stream: GenericTransformStream, limit: number): Promise<Uint8Array> {
  const writer = stream.writable.getWriter();
  void writer.write(data).catch(() => undefined);
  void writer.close().catch(() => undefined);
  const reader = (stream.readable as ReadableStream<Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > limit) {
      await reader.cancel();
      throw new DecodeError("too_large", `the message is over the limit of ${limit} bytes`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let offset = 0;
  for (const c of chunks) {
    out.set(c, offset);
    offset += c.length;
  }
  return out;
}

export async function compress(algorithm: Compression, data: Uint8Array, zstd?: ZstdCodec): Promise<Uint8Array> {
  if (algorithm === "none") return data;
  if (algorithm === "zstd") {
    if (zstd === undefined) throw new DecodeError("wrong_encoding", "zstd is not available here");
    return zstd.compress(data);
  }
  if (isNode) return (await loadNodeZlib()).deflateSync(data, { level: 1 });
  return streamThrough(data, new CompressionStream("deflate"), Number.MAX_SAFE_INTEGER);
}

/** Decompresses one message, refusing to produce more than `limit` bytes. */
export async function decompress(
  algorithm: Compression,
  data: Uint8Array,
  limit: number,
  zstd?: ZstdCodec,
): Promise<Uint8Array> {
  try {
    if (algorithm === "none") return data;
    if (algorithm === "zstd") {
      if (zstd === undefined) throw new DecodeError("wrong_encoding", "zstd is not available here");
      return await zstd.decompress(data, limit);
    }
    if (isNode) return (await loadNodeZlib()).inflateSync(data, { maxOutputLength: limit });
    return await streamThrough(data, new DecompressionStream("deflate"), limit);
  } catch (e) {
    if (e instanceof DecodeError) throw e;
    const text = (e as Error).message ?? String(e);
    if (e instanceof RangeError || /too large|maxOutputLength|dstSize|Destination buffer/i.test(text)) {
      throw new DecodeError("too_large", `the decompressed message is over the limit of ${limit} bytes`);
    }
    throw new DecodeError("bad_frame", `the compressed message cannot be decompressed: ${algorithm}: ${text}`);
  }
}

/** The encoding choices of one session. */
export class Codec {
  constructor(
    readonly encoding: Encoding = "json",
    readonly compression: Compression = "none",
    public compressMin: number = DEFAULT_COMPRESS_MIN,
    public maxMessage: number = 64 << 20,
    readonly zstd?: ZstdCodec,
  ) {
    if (!(maxMessage > 0)) throw new RangeError("maxMessage must be positive");
  }

  toBytes(message: JsonObject): Uint8Array {
    return encode(message, this.encoding);
  }

  /** Wraps encoded bytes into a frame: text (JSON) or binary, compressed if long enough. */
  async frame(data: Uint8Array): Promise<string | Uint8Array> {
    if (this.compression !== "none" && data.length >= this.compressMin) {
      return compress(this.compression, data, this.zstd);
    }
    return this.encoding === "json" ? new TextDecoder().decode(data) : data;
  }

  async encode(message: JsonObject): Promise<string | Uint8Array> {
    return this.frame(this.toBytes(message));
  }

  /** Reads one frame; throws `DecodeError`. */
  async decode(frame: string | Uint8Array): Promise<JsonObject> {
    if (typeof frame === "string") {
      const data = utf8.encode(frame);
      if (data.length > this.maxMessage) {
        throw new DecodeError("too_large", `the message is ${data.length} bytes, over the limit of ${this.maxMessage}`);
      }
      if (this.encoding !== "json") throw new DecodeError("wrong_encoding", "a text frame in a MessagePack session");
      return decode(data, "json");
    }
    if (frame.length > this.maxMessage) {
      throw new DecodeError("too_large", `the message is ${frame.length} bytes, over the limit of ${this.maxMessage}`);
    }
    const algorithm = compressedBy(frame);
    if (algorithm !== undefined) {
      if (algorithm !== this.compression) {
        throw new DecodeError(
          "wrong_encoding",
          `a ${algorithm}-compressed frame in a session with compression ${this.compression}`,
        );
      }
      return decode(await decompress(algorithm, frame, this.maxMessage, this.zstd), this.encoding);
    }
    if (this.encoding === "json")
      throw new DecodeError("wrong_encoding", "an uncompressed binary frame in a JSON session");
    return decode(frame, "msgpack");
  }
}
