/**
 * One-shot requests over plain HTTP (docs/protocol.md, "HTTP"): no session, one request per
 * call, with `fetch` (Node ≥ 18 and browsers).
 */

import { decode, DecodeError, encode, type Encoding, type JsonObject, type JsonValue } from "./codec.js";
import { ClientError, type EspalierError, errorFromCode } from "./errors.js";
import {
  isInt,
  isObject,
  type Node,
  type Params,
  parseReply,
  parseStatus,
  type QueryResult,
  type Reply,
  request,
  type Status,
} from "./messages.js";

export interface HttpOptions {
  token?: string;
  encoding?: Encoding;
  timeoutMs?: number;
  /** Replies over this many bytes are refused. */
  maxReply?: number;
}

export class HttpClient {
  readonly base: string;
  private readonly options: HttpOptions;

  constructor(url: string, options: HttpOptions = {}) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ClientError("usage", `${JSON.stringify(url)} is not a URL`);
    }
    const scheme = (
      { "ws:": "http:", "wss:": "https:", "http:": "http:", "https:": "https:" } as Record<string, string>
    )[parsed.protocol];
    if (scheme === undefined) throw new ClientError("usage", `${url} is not an http:// or https:// URL`);
    this.base = `${scheme}//${parsed.host}`;
    this.options = options;
  }

  private get encoding(): Encoding {
    return this.options.encoding ?? "json";
  }

  private async send(method: string, path: string, body?: JsonObject): Promise<JsonObject> {
    const type = this.encoding === "json" ? "application/json" : "application/msgpack";
    const headers: Record<string, string> = { Accept: type };
    if (this.options.token !== undefined) headers["Authorization"] = `Bearer ${this.options.token}`;
    if (body !== undefined) headers["Content-Type"] = type;
    const where = `${method} ${path.split("?")[0]}`;
    let res: Response;
    try {
      res = await fetch(this.base + path, {
        method,
        headers,
        // encode() returns arrays over plain ArrayBuffers, which BodyInit wants spelled out.
        body: body !== undefined ? (encode(body, this.encoding) as Uint8Array<ArrayBuffer>) : null,
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 60_000),
      });
    } catch (e) {
      throw new ClientError("connect_failed", `cannot reach ${this.base}: ${(e as Error).message}`, { request: where });
    }
    const max = this.options.maxReply ?? 64 << 20;
    const declared = Number(res.headers.get("content-length") ?? "0");
    if (declared > max)
      throw new ClientError("bad_reply", `the reply is ${declared} bytes, over ${max}`, { request: where });
    const data = new Uint8Array(await res.arrayBuffer());
    if (data.length > max) throw new ClientError("bad_reply", `the reply is over ${max} bytes`, { request: where });
    let msg: JsonObject;
    try {
      msg = decode(data, (res.headers.get("content-type") ?? "").includes("msgpack") ? "msgpack" : "json");
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      if (!res.ok) throw errorFromCode(statusCode(res.status), `HTTP ${res.status}`, { request: where });
      throw new ClientError("bad_reply", `unreadable reply: ${e.message}`, { request: where });
    }
    if (msg["kind"] === "error") throw this.error(msg, where);
    if (!res.ok) throw errorFromCode(statusCode(res.status), `HTTP ${res.status}`, { request: where });
    return msg;
  }

  private error(msg: JsonObject, where: string): EspalierError {
    return errorFromCode(String(msg["code"] ?? "internal"), String(msg["message"] ?? ""), { request: where });
  }

  private expect(msg: JsonObject, kind: string, where: string): void {
    if (msg["kind"] !== kind) {
      throw new ClientError("bad_reply", `expected ${kind}, got ${String(msg["kind"])}`, { request: where });
    }
  }

  /** `POST /v1/execute`: runs one instruction. */
  async execute(instruction: string | { instruction: JsonValue }, params?: Params): Promise<Reply> {
    const fields =
      typeof instruction === "string"
        ? { text: instruction, params }
        : { instruction: instruction.instruction, params };
    const body = request("execute", 0, fields);
    delete body["id"];
    delete body["kind"];
    const msg = await this.send("POST", "/v1/execute", body);
    this.expect(msg, "result", "POST /v1/execute");
    return parseReply(msg["result"]);
  }

  async query(text: string, params?: Params): Promise<QueryResult> {
    const reply = await this.execute(text, params);
    if (reply.type !== "query")
      throw new ClientError("usage", `query: the instruction is not a collection query (it gave ${reply.type})`);
    return reply;
  }

  /** `GET /v1/node`: one node in dump form with its version. */
  async get(path = "", params?: Params): Promise<Node> {
    const query = new URLSearchParams();
    if (path !== "") query.set("path", path);
    for (const name of Object.keys(params ?? {}).sort()) query.set(`p.${name}`, String(params?.[name]));
    const qs = query.toString();
    const msg = await this.send("GET", `/v1/node${qs !== "" ? `?${qs}` : ""}`);
    this.expect(msg, "node", "GET /v1/node");
    const node = msg["node"];
    const version = msg["version"];
    if (!isObject(node) || !isInt(version)) throw new ClientError("bad_reply", "a node reply without node/version");
    return { version, node };
  }

  async status(): Promise<Status> {
    const msg = await this.send("GET", "/v1/status");
    this.expect(msg, "status", "GET /v1/status");
    return parseStatus(msg);
  }

  /** `GET /v1/health`: true while the server serves; rejects while it shuts down. */
  async health(): Promise<boolean> {
    const msg = await this.send("GET", "/v1/health");
    this.expect(msg, "ok", "GET /v1/health");
    return true;
  }

  async shutdown(): Promise<void> {
    const msg = await this.send("POST", "/v1/shutdown");
    this.expect(msg, "ok", "POST /v1/shutdown");
  }
}

function statusCode(status: number): string {
  const codes: Record<number, string> = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "key_missing",
    409: "key_exists",
    413: "too_large",
    429: "too_many_requests",
    503: "shutting_down",
    504: "timeout",
  };
  return codes[status] ?? "internal";
}
