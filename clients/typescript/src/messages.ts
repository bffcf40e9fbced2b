/**
 * The protocol's messages as TypeScript values: request builders (objects in the server's
 * field order, so they encode byte for byte as the server would) and typed replies.
 */

import type { JsonObject, JsonValue } from "./codec.js";
import { ClientError } from "./errors.js";

export const PROTOCOL_VERSION = 1;

/** Values of `$name` parameters: strings or (safe) integers. */
export type Params = Readonly<Record<string, string | number>>;

// The order of `espalier_protocol::Message`'s fields: requests built in this order encode to
// exactly the bytes the server's encoder writes (checked against the vectors).
const REQUEST_FIELDS = ["id", "kind", "text", "instruction", "params", "path", "since", "subscription"] as const;
export type RequestField = (typeof REQUEST_FIELDS)[number];
export type RequestFields = Partial<Record<Exclude<RequestField, "id" | "kind">, JsonValue | undefined>>;

function checkParams(params: JsonValue): JsonObject {
  if (params === null || typeof params !== "object" || Array.isArray(params)) {
    throw new ClientError("usage", "params are an object of names to strings or integers");
  }
  const out: JsonObject = {};
  // Sorted: the server keeps parameters in a sorted map (byte order of the names).
  for (const name of Object.keys(params).sort(byteOrder)) {
    const value = params[name];
    if (typeof value === "string") out[name] = value;
    else if (typeof value === "number" && Number.isSafeInteger(value)) out[name] = value;
    else throw new ClientError("usage", `parameter $${name}: a string or a safe integer, not ${JSON.stringify(value)}`);
  }
  return out;
}

function byteOrder(a: string, b: string): number {
  // UTF-8 byte order equals code point order; JS compares UTF-16 units, which differs only
  // for astral characters. Compare by code points.
  const ca = Array.from(a, (c) => c.codePointAt(0) as number);
  const cb = Array.from(b, (c) => c.codePointAt(0) as number);
  for (let i = 0; i < Math.min(ca.length, cb.length); i++) {
    if (ca[i] !== cb[i]) return (ca[i] as number) - (cb[i] as number);
  }
  return ca.length - cb.length;
}

/** A request message with the given fields (undefined ones left out), in wire order. */
export function request(kind: string, id: number, fields: RequestFields = {}): JsonObject {
  if (!Number.isSafeInteger(id) || id < 0)
    throw new ClientError("usage", `request id ${id} is not a safe unsigned integer`);
  for (const name of Object.keys(fields)) {
    if (!(REQUEST_FIELDS as readonly string[]).includes(name)) {
      throw new ClientError("usage", `${kind}: unknown request field ${JSON.stringify(name)}`);
    }
  }
  const values: Record<string, JsonValue | undefined> = { id, kind, ...fields };
  if (values["params"] !== undefined && values["params"] !== null) values["params"] = checkParams(values["params"]);
  const out: JsonObject = {};
  for (const name of REQUEST_FIELDS) {
    const v = values[name];
    if (v !== undefined && v !== null) out[name] = v;
  }
  return out;
}

export interface Limits {
  max_frame_bytes: number;
  max_in_flight: number;
  max_query_ms: number;
  max_result_bytes: number;
  max_subscriptions: number;
}

export interface Welcome {
  version: number;
  protocol: number;
  server: string;
  role: string;
  encoding: string;
  compression: string;
  compress_min: number;
  limits: Limits;
}

export interface Row {
  key: string[];
  values: JsonValue[];
}

/** A collection query's rows: `total` matching entries, the `columns`, and each row's `key` and `values`. */
export interface QueryResult {
  type: "query";
  total: number;
  columns: string[];
  rows: Row[];
}

/** A committed mutation, command or transaction. */
export interface Done {
  type: "done";
  version: number;
  changes: number;
}

/** An executed `get`: the node in dump form. */
export interface NodeData {
  type: "node";
  node: JsonObject;
}

export interface TransactionResult {
  type: "transaction";
  replies: Reply[];
}

export type Reply = QueryResult | Done | NodeData | TransactionResult;

/** The reply to `get`: the node in dump form and the version it was read at. */
export interface Node {
  version: number;
  node: JsonObject;
}

export interface Status {
  version: number;
  sessions: number;
  subscriptions: number;
  history_from: number;
}

/** One change of a commit within a subscribed subtree (docs/protocol.md, "Subscriptions"). */
export interface Change {
  change: "number" | "text" | "reference" | "entry_added" | "entry_removed" | "state_switched" | string;
  node: JsonObject[];
  property?: string;
  collection?: string;
  stategroup?: string;
  key?: string[];
  old?: JsonValue;
  new?: JsonValue;
}

/** One commit that touched a subscription: node `changes`, a collection query's new rows
 * (`query`), or the rows a pattern query's commit `removed` and `added` (each row its values
 * in column order; the subscription's `query` is kept up to date). */
export interface Notification {
  type: "notify";
  version: number;
  changes?: Change[];
  query?: QueryResult;
  removed?: JsonValue[][];
  added?: JsonValue[][];
}

/** The data afresh: the server dropped notifications (`lagged`) or a resubscription could not
 * resume (`resubscribed`). Replace your copy with it. */
export interface Reload {
  type: "reload";
  version: number;
  reason: string;
  node?: JsonObject;
  query?: QueryResult;
}

export type Event = Notification | Reload;

// ---- parsing replies ----

function field<T>(msg: JsonObject, name: string, check: (v: unknown) => v is T, what: string): T {
  const v = msg[name];
  if (!check(v)) {
    throw new ClientError(
      "bad_reply",
      `${String(msg["kind"] ?? "message")}: field \`${name}\` is missing or not ${what}`,
    );
  }
  return v;
}

export const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);
const isString = (v: unknown): v is string => typeof v === "string";
export const isObject = (v: unknown): v is JsonObject => v !== null && typeof v === "object" && !Array.isArray(v);
const isArray = (v: unknown): v is JsonValue[] => Array.isArray(v);

export function parseQuery(value: unknown): QueryResult {
  if (!isObject(value)) throw new ClientError("bad_reply", "a query result is a map");
  const rows = field(value, "rows", isArray, "a list").map((r) => {
    if (!isObject(r)) throw new ClientError("bad_reply", "a query row is a map");
    return {
      key: field(r, "key", isArray, "a list").map(String),
      values: field(r, "values", isArray, "a list"),
    };
  });
  return {
    type: "query",
    total: field(value, "total", isInt, "an integer"),
    columns: field(value, "columns", isArray, "a list").map(String),
    rows,
  };
}

export function parseReply(value: unknown): Reply {
  if (!isObject(value) || Object.keys(value).length !== 1) {
    throw new ClientError("bad_reply", `a result is a map with one member, not ${JSON.stringify(value)?.slice(0, 80)}`);
  }
  const [tag, body] = Object.entries(value)[0] as [string, JsonValue];
  switch (tag) {
    case "query":
      return parseQuery(body);
    case "done":
      if (!isObject(body)) throw new ClientError("bad_reply", "done is a map");
      return {
        type: "done",
        version: field(body, "version", isInt, "an integer"),
        changes: field(body, "changes", isInt, "an integer"),
      };
    case "node":
      if (!isObject(body)) throw new ClientError("bad_reply", "a node is a map");
      return { type: "node", node: body };
    case "transaction":
      if (!isArray(body)) throw new ClientError("bad_reply", "a transaction result is a list");
      return { type: "transaction", replies: body.map(parseReply) };
    default:
      throw new ClientError("bad_reply", `unknown result ${JSON.stringify(tag)}`);
  }
}

export function parseWelcome(msg: JsonObject): Welcome {
  const limits = field(msg, "limits", isObject, "a map");
  return {
    version: field(msg, "version", isInt, "an integer"),
    protocol: field(msg, "protocol", isInt, "an integer"),
    server: field(msg, "server", isString, "a string"),
    role: field(msg, "role", isString, "a string"),
    encoding: field(msg, "encoding", isString, "a string"),
    compression: field(msg, "compression", isString, "a string"),
    compress_min: field(msg, "compress_min", isInt, "an integer"),
    limits: {
      max_frame_bytes: field(limits, "max_frame_bytes", isInt, "an integer"),
      max_in_flight: field(limits, "max_in_flight", isInt, "an integer"),
      max_query_ms: field(limits, "max_query_ms", isInt, "an integer"),
      max_result_bytes: field(limits, "max_result_bytes", isInt, "an integer"),
      max_subscriptions: field(limits, "max_subscriptions", isInt, "an integer"),
    },
  };
}

export function parseStatus(msg: JsonObject): Status {
  return {
    version: field(msg, "version", isInt, "an integer"),
    sessions: field(msg, "sessions", isInt, "an integer"),
    subscriptions: field(msg, "subscriptions", isInt, "an integer"),
    history_from: field(msg, "history_from", isInt, "an integer"),
  };
}

export function parseChange(value: unknown): Change {
  if (!isObject(value)) throw new ClientError("bad_reply", "a change is a map");
  field(value, "change", isString, "a string");
  field(value, "node", isArray, "a list");
  return value as unknown as Change;
}

/** A `notify` or `reload` push as an event. */
export function parseEvent(msg: JsonObject): Event {
  const version = field(msg, "version", isInt, "an integer");
  const query = msg["query"] !== undefined && msg["query"] !== null ? parseQuery(msg["query"]) : undefined;
  if (msg["kind"] === "reload") {
    const event: Reload = { type: "reload", version, reason: String(msg["reason"] ?? "") };
    if (isObject(msg["node"])) event.node = msg["node"];
    if (query !== undefined) event.query = query;
    return event;
  }
  const event: Notification = { type: "notify", version };
  const changes = msg["changes"];
  if (isArray(changes)) event.changes = changes.map(parseChange);
  if (query !== undefined) event.query = query;
  const rows = (name: string): JsonValue[][] | undefined => {
    const value = msg[name];
    if (value === undefined || value === null) return undefined;
    if (!isArray(value) || !value.every(isArray)) throw new ClientError("bad_reply", `${name} is not a list of rows`);
    return value as JsonValue[][];
  };
  const removed = rows("removed");
  const added = rows("added");
  if (removed !== undefined) event.removed = removed;
  if (added !== undefined) event.added = added;
  return event;
}

/** A pattern query's rows after one commit's differences (rows are a multiset). */
export function applyRows(query: QueryResult, removed: JsonValue[][], added: JsonValue[][]): QueryResult {
  const rows = [...query.rows];
  const same = (a: JsonValue[], b: JsonValue[]): boolean => JSON.stringify(a) === JSON.stringify(b);
  for (const values of removed) {
    const at = rows.findIndex((r) => same(r.values, values));
    if (at < 0) {
      throw new ClientError(
        "bad_reply",
        `a notification removes a row the subscription does not hold: ${JSON.stringify(values)}`,
      );
    }
    rows.splice(at, 1);
  }
  for (const values of added) rows.push({ key: [], values });
  return { type: "query", total: rows.length, columns: query.columns, rows };
}

/** The rows as objects `{ key, [column]: value }`. */
export function records(result: QueryResult): Array<Record<string, JsonValue | string[]>> {
  return result.rows.map((r) => {
    const rec: Record<string, JsonValue | string[]> = { key: r.key };
    result.columns.forEach((c, i) => {
      rec[c] = r.values[i] ?? null;
    });
    return rec;
  });
}
