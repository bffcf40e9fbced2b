/**
 * A session with an Espalier server over WebSocket: pipelined requests (many in flight,
 * replies matched by id), subscriptions as async iterators, reconnect with resume.
 *
 * ```ts
 * const db = await connect("ws://127.0.0.1:7420", { encoding: "msgpack" });
 * const rows = await db.query("collection select . 'Orders' 'q' -> number : 'Quantity'");
 * for await (const event of await db.subscribe(". 'Machines' : \"M1\"")) { … }
 * ```
 */

import {
  Codec,
  type Compression,
  compressedBy,
  DEFAULT_COMPRESS_MIN,
  DecodeError,
  defaultZstd,
  type Encoding,
  isNode,
  type JsonObject,
  type JsonValue,
  type ZstdCodec,
} from "./codec.js";
import { ClientError, ConnectionLostError, type EspalierError, errorFromCode, LimitError } from "./errors.js";
import {
  applyRows,
  type Done,
  type Event,
  isInt,
  isObject,
  type Node,
  type Params,
  parseEvent,
  parseQuery,
  parseReply,
  parseStatus,
  parseWelcome,
  type QueryResult,
  type Reply,
  request,
  type RequestFields,
  type Status,
  type TransactionResult,
  type Welcome,
} from "./messages.js";
import { openTransport, refusal, type Transport } from "./transport.js";

export interface ClientOptions {
  /** A token's secret: `Authorization: Bearer` in Node, `?token=` in browsers. */
  token?: string;
  /** Send the token as `?token=` (the default in browsers, which cannot set headers). */
  tokenInQuery?: boolean;
  encoding?: Encoding;
  compression?: Compression;
  /** Messages shorter than this go uncompressed (both ways). */
  compressMin?: number;
  /** Per request, in milliseconds; `null` waits forever. Default 60 000. */
  timeoutMs?: number | null;
  connectTimeoutMs?: number;
  /** Reconnect and resubscribe (resuming from the last version) when the session drops. */
  reconnect?: boolean;
  reconnectAttempts?: number;
  /** Wait for a free slot rather than exceed `max_in_flight`; refuse requests over
   * `max_frame_bytes` before sending them. Default true. */
  respectLimits?: boolean;
  /** Events a subscription buffers for a slow reader; past it the server's stream stops, and
   * resumes from the reader's last version once the queue has been read. */
  subscriptionQueue?: number;
  /** Largest message accepted before `welcome` gives the server's bound. */
  maxMessage?: number;
  /** zstd where the platform has none (browsers); Node has one built in. */
  zstd?: ZstdCodec;
  /** Errors the server pushes about no request or subscription (an unreadable frame). */
  onError?: (error: EspalierError) => void;
  /** A WebSocket constructor instead of the platform's. */
  WebSocket?: new (url: string) => WebSocket;
}

const DEFAULT_MAX_MESSAGE = 64 << 20;
// A reply never exceeds max_result_bytes; the slack covers the envelope of pushes.
const MESSAGE_SLACK = 64 << 10;
// Inbound frames waiting to be decoded before reading pauses (Node) — a bound on memory.
const INBOX_HIGH = 1024;
const INBOX_LOW = 256;

interface Pending {
  resolve: (msg: JsonObject) => void;
  reject: (error: EspalierError) => void;
  where: string;
  // Runs before any later frame is handled: a `subscribed` registers its subscription here
  // so that its first `notify`, right behind it, finds it.
  onReply?: ((msg: JsonObject) => void) | undefined;
}

/** Builds the upgrade URL from `ws://`, `wss://`, `http://` or `https://`, with or without `/ws`. */
export function wsUrl(
  url: string,
  encoding: Encoding,
  compression: Compression,
  compressMin: number,
  token?: string,
): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ClientError("usage", `${JSON.stringify(url)} is not a URL`);
  }
  const scheme = ({ "http:": "ws:", "https:": "wss:", "ws:": "ws:", "wss:": "wss:" } as Record<string, string>)[
    parsed.protocol
  ];
  if (scheme === undefined) throw new ClientError("usage", `${url} is not a ws://, wss://, http:// or https:// URL`);
  parsed.protocol = scheme;
  let path = parsed.pathname.replace(/\/+$/, "");
  if (!path.endsWith("/ws")) path += "/ws";
  parsed.pathname = path;
  const query = new URLSearchParams({ encoding, compression, compress_min: String(compressMin) });
  if (token !== undefined) query.set("token", token);
  parsed.search = query.toString();
  parsed.hash = "";
  return parsed.toString();
}

function redact(url: string): string {
  return url.replace(/([?&]token=)[^&]*/, "$1***");
}

function closeText(code: number | undefined, reason: string | undefined): string {
  if (code === undefined) return "the connection dropped";
  const names: Record<number, string> = {
    1000: "normal closure",
    1001: "going away",
    1006: "abnormal closure",
    1009: "message too big",
  };
  const name = names[code];
  return `close code ${code}${name !== undefined ? ` (${name})` : ""}${reason ? `: ${reason}` : ""}`;
}

function describe(kind: string, id: number, fields: RequestFields): string {
  const what = fields.text ?? fields.path;
  if (typeof what === "string" && what !== "") {
    const short = what.length <= 60 ? what : `${what.slice(0, 57)}...`;
    return `${kind} #${id} ${JSON.stringify(short)}`;
  }
  if (fields.instruction !== undefined) return `${kind} #${id} (structured instruction)`;
  return `${kind} #${id}`;
}

/** A counting semaphore (the client's own bound on requests in flight). */
class Slots {
  private waiters: Array<() => void> = [];
  constructor(private free: number) {}
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }
  release(): void {
    const next = this.waiters.shift();
    if (next !== undefined) next();
    else this.free++;
  }
}

/**
 * A live subscription: `node` (node subscriptions) or `query` (query subscriptions) hold the
 * data, `version` the version it is at. Iterate with `for await` to get each notification in
 * commit order, or a `reload` that replaces the data; `close()` unsubscribes. After a reconnect
 * the client resubscribes with `since` = the last version received, so the iteration goes on
 * without gaps (or with a `reload`). The iteration throws the error that ended the subscription.
 */
export class Subscription implements AsyncIterableIterator<Event> {
  id: number | undefined;
  version = 0;
  resumed = false;
  /** How often the reader fell `subscriptionQueue` events behind (each time the client
   * resumed from history, or delivered a `reload`). */
  overflows = 0;
  node: JsonObject | undefined;
  query: QueryResult | undefined;
  readonly isQuery: boolean;
  /** @internal */ session = 0;
  /** @internal */ resubscribing = false;
  /** @internal */ receivedVersion = 0;
  /** @internal The queue overflowed: resubscribe once it has been read. */ behind = false;
  private queue: Event[] = [];
  private waiter: (() => void) | undefined;
  private error: EspalierError | undefined;
  private ended = false;

  /** @internal */
  constructor(
    private readonly client: Client,
    /** @internal */ readonly fields: RequestFields,
    private readonly queueSize: number,
  ) {
    this.isQuery = fields.path === undefined;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Event> {
    return this;
  }

  async next(): Promise<IteratorResult<Event, undefined>> {
    for (;;) {
      const event = this.queue.shift();
      if (event !== undefined) {
        this.delivered(event);
        return { value: event, done: false };
      }
      if (this.error !== undefined) throw this.error;
      if (this.ended) return { value: undefined, done: true };
      if (this.behind) this.client.resubscribeLater(this);
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }

  /** The next event, waiting at most `timeoutMs` (rejects with `client_timeout`); `undefined` once ended. */
  async nextEvent(timeoutMs?: number): Promise<Event | undefined> {
    if (timeoutMs === undefined) {
      const r = await this.next();
      return r.done === true ? undefined : r.value;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        // Wake the waiting `next` so it does not keep the event it would take.
        reject(new ClientError("client_timeout", `no event within ${timeoutMs} ms`, { subscription: this.id }));
      }, timeoutMs);
    });
    try {
      // Only wait while nothing is queued, so a timed-out wait never swallows an event.
      if (this.queue.length === 0 && this.error === undefined && !this.ended) {
        if (this.behind) this.client.resubscribeLater(this);
        await Promise.race([new Promise<void>((resolve) => (this.waiter = resolve)), timeout]);
      }
      const r = await this.next();
      return r.done === true ? undefined : r.value;
    } finally {
      clearTimeout(timer);
      this.waiter = undefined;
    }
  }

  async return(): Promise<IteratorResult<Event, undefined>> {
    await this.close();
    return { value: undefined, done: true };
  }

  get isEnded(): boolean {
    return this.ended || this.error !== undefined;
  }

  /** Unsubscribes; the iteration ends after the events already received. */
  async close(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.wake();
    await this.client.unsubscribe(this);
  }

  private delivered(event: Event): void {
    this.version = event.version;
    if (event.type === "reload") {
      this.node = event.node;
      this.query = event.query;
    } else if (event.query !== undefined) {
      this.query = event.query;
    } else if (this.query !== undefined && (event.removed !== undefined || event.added !== undefined)) {
      this.query = applyRows(this.query, event.removed ?? [], event.added ?? []);
    }
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** @internal The `subscribed` reply (the first, or a resubscription's). */
  accept(msg: JsonObject): void {
    const id = msg["subscription"];
    const version = msg["version"];
    if (!isInt(id) || !isInt(version)) {
      throw new ClientError("bad_reply", "subscribed without a subscription number or version");
    }
    this.id = id;
    const resumed = msg["resumed"] === true;
    const node = isObject(msg["node"]) ? msg["node"] : undefined;
    const query = msg["query"] !== undefined && msg["query"] !== null ? parseQuery(msg["query"]) : undefined;
    if (!this.resubscribing) {
      this.resumed = resumed;
      this.version = version;
      this.node = node;
      this.query = query;
    } else if (!resumed) {
      // The server could not continue from `since`: the data comes afresh.
      const reload: Event = { type: "reload", version, reason: "resubscribed" };
      if (node !== undefined) reload.node = node;
      if (query !== undefined) reload.query = query;
      this.push(reload);
    }
    this.receivedVersion = version;
    this.resubscribing = false;
  }

  /** @internal */
  push(event: Event): void {
    // While behind, events are dropped: the resubscription brings them again.
    if (this.ended || this.error !== undefined || this.behind) return;
    if (this.queue.length >= this.queueSize) {
      // The reader is behind. Keep what is queued, stop the server's stream now, and once the
      // reader has taken the queue, resume from its last version (the server's history
      // replays what was dropped): nothing is lost silently.
      console.warn(
        `espalier: subscription ${this.id}: ${this.queue.length} events unread; ` +
          `it resumes from version ${this.receivedVersion} when they are read`,
      );
      this.behind = true;
      this.overflows++;
      this.client.detach(this);
      return;
    }
    this.queue.push(event);
    this.receivedVersion = event.version;
    this.wake();
  }

  /** @internal */
  fail(error: EspalierError): void {
    if (this.error === undefined && !this.ended) this.error = error;
    this.wake();
  }

  /** @internal */
  end(): void {
    this.ended = true;
    this.wake();
  }
}

export class Client {
  readonly url: string;
  readonly encoding: Encoding;
  readonly compression: Compression;
  welcome: Welcome | undefined;
  reconnects = 0;
  closeCode: number | undefined;
  closeReason: string | undefined;
  /** Frames sent and received, and how many of them were compressed (all sessions). */
  readonly stats = { framesOut: 0, compressedOut: 0, framesIn: 0, compressedIn: 0 };

  private readonly options: ClientOptions;
  private readonly token: string | undefined;
  private codec: Codec;
  private transport: Transport | undefined;
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private subsById = new Map<number, Subscription>();
  private subs = new Set<Subscription>();
  private slots: Slots | undefined;
  private connected = false;
  private connectedWaiters: Array<() => void> = [];
  private welcomeWaiter: { resolve: (msg: JsonObject) => void; reject: (e: EspalierError) => void } | undefined;
  private closing = false;
  private closedError: EspalierError | undefined;
  private session = 0;
  private inbox: Promise<void> = Promise.resolve();
  private inboxDepth = 0;
  private paused = false;
  private closedWaiter: (() => void) | undefined;

  constructor(url: string, options: ClientOptions = {}) {
    this.options = options;
    this.encoding = options.encoding ?? "json";
    this.compression = options.compression ?? "none";
    if (!["json", "msgpack"].includes(this.encoding))
      throw new ClientError("usage", `unknown encoding ${this.encoding}`);
    if (!["none", "zstd", "deflate"].includes(this.compression)) {
      throw new ClientError("usage", `unknown compression ${this.compression}`);
    }
    const queue = options.subscriptionQueue ?? 1024;
    if (!(queue > 0)) throw new ClientError("usage", "subscriptionQueue must be positive");
    const inQuery = options.tokenInQuery ?? !isNode;
    this.token = inQuery ? undefined : options.token;
    const compressMin = options.compressMin ?? DEFAULT_COMPRESS_MIN;
    this.url = wsUrl(url, this.encoding, this.compression, compressMin, inQuery ? options.token : undefined);
    this.codec = new Codec(this.encoding, this.compression, compressMin, options.maxMessage ?? DEFAULT_MAX_MESSAGE);
  }

  private get timeoutMs(): number | null {
    return this.options.timeoutMs === undefined ? 60_000 : this.options.timeoutMs;
  }

  get closed(): boolean {
    return this.closing || this.closedError !== undefined;
  }

  /** Connects and waits for `welcome`. */
  async open(): Promise<this> {
    if (this.compression === "zstd" && this.codec.zstd === undefined) {
      const zstd = this.options.zstd ?? (await defaultZstd());
      if (zstd === undefined) {
        throw new ClientError(
          "unsupported",
          'zstd is not available in this environment (browsers); use compression "deflate" or pass a zstd codec',
        );
      }
      this.codec = new Codec(this.encoding, this.compression, this.codec.compressMin, this.codec.maxMessage, zstd);
    }
    await this.openSession();
    return this;
  }

  private async openSession(): Promise<void> {
    const where = `connect to ${redact(this.url)}`;
    const headers: Record<string, string> = {};
    if (this.token !== undefined) headers["Authorization"] = `Bearer ${this.token}`;
    let transport: Transport;
    try {
      transport = await openTransport(this.url, where, {
        headers,
        maxPayload: this.options.maxMessage ?? DEFAULT_MAX_MESSAGE,
        timeoutMs: this.options.connectTimeoutMs ?? 10_000,
        WebSocket: this.options.WebSocket,
      });
    } catch (e) {
      if (e instanceof ClientError && e.code === "connect_failed" && !isNode) throw await this.whyRefused(e);
      throw e;
    }
    this.session++;
    this.transport = transport;
    this.closeCode = undefined;
    this.closeReason = undefined;
    const welcome = new Promise<JsonObject>((resolve, reject) => (this.welcomeWaiter = { resolve, reject }));
    transport.attach({
      message: (frame) => this.receive(transport, frame),
      close: (code, reason) => {
        this.lost(transport, code, reason);
        const wake = this.closedWaiter;
        this.closedWaiter = undefined;
        wake?.();
      },
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeoutMs = this.options.connectTimeoutMs ?? 10_000;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new ClientError("connect_failed", `no welcome within ${timeoutMs} ms`, { request: where })),
        timeoutMs,
      );
    });
    let msg: JsonObject;
    try {
      msg = await Promise.race([welcome, timeout]);
    } catch (e) {
      transport.close();
      throw e;
    } finally {
      clearTimeout(timer);
    }
    const w = parseWelcome(msg);
    this.welcome = w;
    this.codec.compressMin = w.compress_min;
    this.codec.maxMessage = Math.min(
      this.options.maxMessage ?? DEFAULT_MAX_MESSAGE,
      w.limits.max_result_bytes + MESSAGE_SLACK,
    );
    this.slots ??= new Slots(Math.max(1, w.limits.max_in_flight));
    this.connected = true;
    const waiters = this.connectedWaiters;
    this.connectedWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Browsers hide a refused upgrade's status: ask the HTTP side for the typed error. */
  private async whyRefused(original: EspalierError): Promise<EspalierError> {
    try {
      const http = new URL(this.url);
      http.protocol = http.protocol === "wss:" ? "https:" : "http:";
      http.pathname = http.pathname.replace(/\/ws$/, "/v1/status");
      const token = http.searchParams.get("token");
      http.search = token !== null ? `?token=${encodeURIComponent(token)}` : "";
      const res = await fetch(http.toString(), { headers: { Accept: "application/json" } });
      if (res.ok) return original;
      return refusal(res.status, await res.text(), original.request ?? "connect");
    } catch {
      return original;
    }
  }

  /** Ends the session: pending requests fail with `closed`, subscriptions end. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.closedError = new ClientError("closed", "the client was closed");
    const transport = this.transport;
    if (transport !== undefined && this.connected) {
      // Wait (bounded) for the close handshake, so nothing of the session outlives close().
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = new Promise<void>((resolve) => {
        this.closedWaiter = resolve;
        timer = setTimeout(resolve, 5_000);
      });
      transport.close(1000);
      await done;
      clearTimeout(timer);
    } else {
      transport?.close(1000);
    }
    this.failPending(this.closedError);
    for (const sub of this.subs) sub.end();
    this.subs.clear();
    this.subsById.clear();
    this.wakeConnected();
  }

  // ---- reading ----

  private receive(transport: Transport, frame: string | Uint8Array): void {
    this.stats.framesIn++;
    if (typeof frame !== "string" && compressedBy(frame) !== undefined) this.stats.compressedIn++;
    this.inboxDepth++;
    if (this.inboxDepth > INBOX_HIGH && !this.paused) {
      this.paused = true;
      transport.pause(true);
    }
    // Frames are handled one after another, in arrival order, even when decoding is async.
    this.inbox = this.inbox.then(async () => {
      try {
        if (transport === this.transport) await this.dispatch(frame);
      } catch (e) {
        // A bug in dispatch must not hang every caller: drop the session.
        console.error("espalier: handling a frame failed", e);
        transport.close(1011, "client error");
      } finally {
        this.inboxDepth--;
        if (this.paused && this.inboxDepth < INBOX_LOW) {
          this.paused = false;
          transport.pause(false);
        }
      }
    });
  }

  private async dispatch(frame: string | Uint8Array): Promise<void> {
    let msg: JsonObject;
    try {
      msg = await this.codec.decode(frame);
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      // A reply may be lost: the session is not trustworthy any more. Close it (pending
      // requests fail, then the client reconnects).
      console.error(`espalier: unreadable frame from the server: ${e.message}`);
      this.transport?.close(1002, "unreadable frame");
      return;
    }
    const kind = msg["kind"];
    const id = msg["id"];
    if (kind === "welcome") {
      this.welcomeWaiter?.resolve(msg);
      this.welcomeWaiter = undefined;
      return;
    }
    if (isInt(id)) {
      const pending = this.pending.get(id);
      if (pending === undefined) {
        if (kind === "error") this.report(this.error(msg, undefined, id));
        else if (kind === "subscribed" && isInt(msg["subscription"])) {
          // Its caller gave up waiting; do not leave the subscription running.
          void this.sendQuiet(request("unsubscribe", this.nextId++, { subscription: msg["subscription"] }));
        }
        return;
      }
      this.pending.delete(id);
      if (kind === "error") {
        pending.reject(this.error(msg, pending.where, id));
        return;
      }
      if (pending.onReply !== undefined) {
        try {
          pending.onReply(msg);
        } catch (e) {
          pending.reject(e as EspalierError);
          return;
        }
      }
      pending.resolve(msg);
      return;
    }
    const subId = msg["subscription"];
    const sub = isInt(subId) ? this.subsById.get(subId) : undefined;
    if (kind === "notify" || kind === "reload") {
      if (sub === undefined) return; // an old subscription's last words
      try {
        sub.push(parseEvent(msg));
      } catch (e) {
        this.forget(sub);
        sub.fail(e as EspalierError);
      }
      return;
    }
    if (kind === "error") {
      if (sub !== undefined) {
        this.forget(sub);
        sub.fail(this.error(msg, undefined, undefined));
      } else {
        this.report(this.error(msg, undefined, undefined));
      }
    }
    // Other kinds without an id: newer servers' pushes, ignored.
  }

  private forget(sub: Subscription): void {
    if (sub.id !== undefined && this.subsById.get(sub.id) === sub) this.subsById.delete(sub.id);
    this.subs.delete(sub);
  }

  private report(error: EspalierError): void {
    if (this.options.onError !== undefined) this.options.onError(error);
    else console.warn(`espalier: the server reported ${error.message}`);
  }

  private error(msg: JsonObject, where: string | undefined, requestId: number | undefined): EspalierError {
    const code = typeof msg["code"] === "string" ? msg["code"] : "internal";
    const message = typeof msg["message"] === "string" ? msg["message"] : "(no message)";
    const subscription = isInt(msg["subscription"]) ? msg["subscription"] : undefined;
    return errorFromCode(code, message, { request: where, requestId, subscription });
  }

  private lost(transport: Transport, code: number, reason: string): void {
    if (transport !== this.transport) return;
    this.closeCode = code;
    this.closeReason = reason;
    this.connected = false;
    const text = closeText(code, reason);
    this.welcomeWaiter?.reject(new ConnectionLostError(`the session ended before welcome: ${text}`, code, reason));
    this.welcomeWaiter = undefined;
    this.failPending(
      this.closing
        ? (this.closedError ?? new ClientError("closed", "the client was closed"))
        : new ConnectionLostError(`the session ended while the request was in flight: ${text}`, code, reason),
    );
    this.subsById.clear(); // the numbers belonged to that session
    if (this.closing) return;
    if ((this.options.reconnect ?? true) && this.welcome !== undefined && this.closedError === undefined) {
      void this.reconnect(text);
      return;
    }
    this.giveUp(new ConnectionLostError(`the session ended: ${text}`, code, reason));
  }

  private giveUp(error: EspalierError): void {
    this.closedError = error;
    for (const sub of this.subs) sub.fail(error);
    this.subs.clear();
    this.subsById.clear();
    this.wakeConnected();
  }

  private wakeConnected(): void {
    const waiters = this.connectedWaiters;
    this.connectedWaiters = [];
    for (const wake of waiters) wake();
  }

  private failPending(error: EspalierError): void {
    const pending = this.pending;
    this.pending = new Map();
    for (const p of pending.values()) {
      p.reject(
        error instanceof ConnectionLostError
          ? new ConnectionLostError(error.detail, error.closeCode, error.closeReason, { request: p.where })
          : errorFromCode(error.code, error.detail, { request: p.where }),
      );
    }
  }

  private async reconnect(reason: string): Promise<void> {
    let delay = 50;
    let last: EspalierError | undefined;
    const attempts = this.options.reconnectAttempts ?? 8;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (this.closing) return;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 2_000);
      try {
        await this.openSession();
      } catch (e) {
        last = e as EspalierError;
        continue;
      }
      this.reconnects++;
      for (const sub of this.subs) this.resubscribeLater(sub);
      return;
    }
    this.giveUp(
      new ConnectionLostError(
        `the session ended (${reason}) and ${attempts} reconnect attempts failed${last ? `; last: ${last.detail}` : ""}`,
      ),
    );
  }

  // ---- requests ----

  private async waitConnected(): Promise<void> {
    if (this.closedError !== undefined) throw this.closedError;
    if (this.connected) return;
    const limit = this.timeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await new Promise<void>((resolve, reject) => {
      this.connectedWaiters.push(resolve);
      if (limit !== null) {
        timer = setTimeout(
          () => reject(new ClientError("client_timeout", "not connected; reconnecting took longer than the timeout")),
          limit,
        );
      }
    }).finally(() => clearTimeout(timer));
    if (this.closedError !== undefined) throw this.closedError;
  }

  /** Sends one request and resolves with its reply message (rejecting with its error). The
   * typed methods (`execute`, `get`, …) are built on this. */
  async call(
    kind: string,
    fields: RequestFields = {},
    options: { timeoutMs?: number | null; onReply?: (msg: JsonObject) => void } = {},
  ): Promise<JsonObject> {
    const limit = options.timeoutMs === undefined ? this.timeoutMs : options.timeoutMs;
    await this.waitConnected();
    const respect = this.options.respectLimits ?? true;
    const slots = respect ? this.slots : undefined;
    await slots?.acquire();
    try {
      await this.waitConnected();
      const id = this.nextId++;
      const msg = request(kind, id, fields);
      const where = describe(kind, id, fields);
      const data = this.codec.toBytes(msg);
      const max = this.welcome?.limits.max_frame_bytes;
      if (respect && max !== undefined && data.length > max) {
        throw new LimitError(
          "too_large",
          `the request is ${data.length} bytes, over the server's max_frame_bytes of ${max}; it was not sent`,
          { request: where },
        );
      }
      const frame = await this.codec.frame(data);
      const transport = this.transport;
      if (!this.connected || transport === undefined) {
        throw new ConnectionLostError(
          "the session ended before the request was sent",
          this.closeCode,
          this.closeReason,
          {
            request: where,
          },
        );
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const reply = new Promise<JsonObject>((resolve, reject) => {
        this.pending.set(id, { resolve, reject, where, onReply: options.onReply });
        if (limit !== null) {
          timer = setTimeout(() => {
            if (this.pending.delete(id)) {
              reject(new ClientError("client_timeout", `no reply within ${limit} ms`, { request: where }));
            }
          }, limit);
        }
      });
      this.stats.framesOut++;
      if (typeof frame !== "string" && compressedBy(frame) !== undefined) this.stats.compressedOut++;
      transport.send(frame);
      try {
        return await reply;
      } finally {
        clearTimeout(timer);
      }
    } finally {
      slots?.release();
    }
  }

  /** Runs one instruction, text or structured, atomically on the server. */
  async execute(instruction: string | { instruction: JsonValue }, params?: Params): Promise<Reply> {
    const fields: RequestFields =
      typeof instruction === "string"
        ? { text: instruction, params }
        : { instruction: instruction.instruction, params };
    const msg = await this.call("execute", fields);
    if (!("result" in msg))
      throw new ClientError("bad_reply", `execute: a ${String(msg["kind"])} reply without result`);
    return parseReply(msg["result"]);
  }

  /** Runs a collection query; its rows. */
  async query(text: string, params?: Params): Promise<QueryResult> {
    const reply = await this.execute(text, params);
    if (reply.type !== "query")
      throw new ClientError("usage", `query: the instruction is not a collection query (it gave ${reply.type})`);
    return reply;
  }

  /** Runs a mutation or command; its commit version and change count. */
  async update(text: string, params?: Params): Promise<Done> {
    const reply = await this.execute(text, params);
    if (reply.type !== "done")
      throw new ClientError("usage", `update: the instruction does not write (it gave ${reply.type})`);
    return reply;
  }

  /** Runs the instructions as one atomic transaction; one reply per instruction. */
  async transaction(texts: string[], params?: Params): Promise<TransactionResult> {
    if (texts.length === 0) throw new ClientError("usage", "transaction: give at least one instruction");
    const reply = await this.execute(`transaction ( ${texts.join(", ")} )`, params);
    if (reply.type !== "transaction") throw new ClientError("bad_reply", `transaction: got ${reply.type}`);
    return reply;
  }

  /** One node and its subtree (dump form), with the version it was read at. */
  async get(path = "", params?: Params): Promise<Node> {
    const msg = await this.call("get", { path, params });
    const node = msg["node"];
    const version = msg["version"];
    if (!isObject(node) || !isInt(version)) throw new ClientError("bad_reply", "get: a reply without node/version");
    return { version, node };
  }

  async ping(): Promise<void> {
    await this.call("ping");
  }

  async status(): Promise<Status> {
    return parseStatus(await this.call("status"));
  }

  /** Asks the server to shut down (admin tokens only). */
  async shutdown(): Promise<void> {
    await this.call("shutdown");
  }

  /** Subscribes to a node and its subtree; `since` resumes after that version. */
  async subscribe(path = "", options: { params?: Params; since?: number } = {}): Promise<Subscription> {
    return this.subscribeWith({ path, params: options.params }, options.since);
  }

  /** Subscribes to a collection query: its rows now, then new rows whenever they change. */
  async subscribeQuery(
    query: string | { instruction: JsonValue },
    options: { params?: Params; since?: number } = {},
  ): Promise<Subscription> {
    const fields: RequestFields =
      typeof query === "string"
        ? { text: query, params: options.params }
        : { instruction: query.instruction, params: options.params };
    return this.subscribeWith(fields, options.since);
  }

  private async subscribeWith(fields: RequestFields, since: number | undefined): Promise<Subscription> {
    const clean: RequestFields = {};
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) (clean as Record<string, JsonValue>)[k] = v;
    const sub = new Subscription(this, clean, this.options.subscriptionQueue ?? 1024);
    await this.call("subscribe", { ...clean, since }, { onReply: (msg) => this.register(sub, msg) });
    return sub;
  }

  private register(sub: Subscription, msg: JsonObject): void {
    sub.accept(msg);
    if (sub.isEnded) {
      // Closed while its resubscription was on the way: end it on the server too.
      void this.call("unsubscribe", { subscription: sub.id as number }).catch(() => undefined);
      return;
    }
    sub.session = this.session;
    this.subsById.set(sub.id as number, sub);
    this.subs.add(sub);
  }

  /** @internal */
  detach(sub: Subscription): void {
    // Ends the subscription's stream on the server but keeps the subscription (local overflow).
    if (sub.id !== undefined && this.subsById.get(sub.id) === sub) {
      this.subsById.delete(sub.id);
      void this.call("unsubscribe", { subscription: sub.id }).catch(() => undefined);
    }
  }

  /** @internal */
  resubscribeLater(sub: Subscription): void {
    if (sub.resubscribing) return;
    sub.resubscribing = true;
    sub.behind = false;
    // On the same session the old subscription is still live (local overflow): end it. After
    // a reconnect its number means nothing (or another subscription) here.
    const old =
      sub.id !== undefined && sub.session === this.session && this.subsById.get(sub.id) === sub ? sub.id : undefined;
    if (old !== undefined) this.subsById.delete(old);
    void this.resubscribe(sub, old);
  }

  private async resubscribe(sub: Subscription, old: number | undefined): Promise<void> {
    if (old !== undefined) {
      await this.call("unsubscribe", { subscription: old }).catch(() => undefined);
    }
    if (sub.isEnded) return;
    try {
      await this.call(
        "subscribe",
        { ...sub.fields, since: sub.receivedVersion },
        { onReply: (msg) => this.register(sub, msg) },
      );
    } catch (e) {
      if (e instanceof ConnectionLostError) {
        sub.resubscribing = false; // the next reconnect tries again
        return;
      }
      this.subs.delete(sub);
      sub.fail(e as EspalierError);
    }
  }

  /** @internal */
  async unsubscribe(sub: Subscription): Promise<void> {
    this.subs.delete(sub);
    const id = sub.id;
    if (id === undefined || this.subsById.get(id) !== sub) return;
    this.subsById.delete(id);
    if (this.closed || !this.connected) return;
    try {
      await this.call("unsubscribe", { subscription: id });
    } catch (e) {
      const code = (e as EspalierError).code;
      if (!(e instanceof ClientError) && code !== "unknown_subscription") throw e;
    }
  }

  private async sendQuiet(msg: JsonObject): Promise<void> {
    try {
      this.transport?.send(await this.codec.encode(msg));
    } catch {
      // the session is gone
    }
  }

  /** Sends a raw frame as it is (tests of how the server refuses bad frames). With `replyId`,
   * resolves with the reply carrying that id (rejecting if it is an error); the id must not be
   * one this client uses (its ids count up from 1). */
  async sendFrame(frame: string | Uint8Array, replyId?: number): Promise<JsonObject | undefined> {
    await this.waitConnected();
    const transport = this.transport as Transport;
    if (replyId === undefined) {
      transport.send(frame);
      return undefined;
    }
    if (this.pending.has(replyId)) throw new ClientError("usage", `sendFrame: id ${replyId} is in use`);
    const reply = new Promise<JsonObject>((resolve, reject) => {
      this.pending.set(replyId, { resolve, reject, where: `raw frame #${replyId}` });
    });
    transport.send(frame);
    return reply;
  }
}

/** Opens a session and waits for `welcome`. */
export async function connect(url: string, options: ClientOptions = {}): Promise<Client> {
  return new Client(url, options).open();
}
