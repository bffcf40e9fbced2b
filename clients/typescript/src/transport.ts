/**
 * One WebSocket connection, the same on Node (the `ws` package: headers, a size bound, the HTTP
 * body of a refused upgrade) and in browsers (the native `WebSocket`).
 */

import { isNode } from "./codec.js";
import { ClientError, type EspalierError, errorFromCode } from "./errors.js";

export interface Handlers {
  message(frame: string | Uint8Array): void;
  close(code: number, reason: string): void;
}

export interface Transport {
  send(frame: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  /** Stops (true) or resumes (false) reading, where the platform can (Node). */
  pause(paused: boolean): void;
  /** Sets the handlers; frames (the server's `welcome`) and a close that came before are
   * delivered to them first, in order. */
  attach(handlers: Handlers): void;
}

/** Holds what arrives between the open and `attach`. */
class Inbound {
  private handlers: Handlers | undefined;
  private early: Array<string | Uint8Array> = [];
  private closed: [number, string] | undefined;

  attach(handlers: Handlers): void {
    this.handlers = handlers;
    for (const frame of this.early) handlers.message(frame);
    this.early = [];
    if (this.closed !== undefined) handlers.close(...this.closed);
  }

  message(frame: string | Uint8Array): void {
    if (this.handlers !== undefined) this.handlers.message(frame);
    // Before attach only `welcome` and the first replies can come: a few frames.
    else if (this.early.length < 1024) this.early.push(frame);
  }

  close(code: number, reason: string): void {
    if (this.handlers !== undefined) this.handlers.close(code, reason);
    else this.closed = [code, reason];
  }
}

export interface TransportOptions {
  headers: Record<string, string>;
  maxPayload: number;
  timeoutMs: number;
  /** A WebSocket constructor to use instead of the platform's (tests, other runtimes). */
  WebSocket?: BrowserWebSocketConstructor | undefined;
}

type BrowserWebSocketConstructor = new (url: string) => WebSocket;

/** The typed error for a refused upgrade (its body is a JSON `error` message). */
export function refusal(status: number, body: string, where: string): EspalierError {
  try {
    const msg: unknown = JSON.parse(body);
    if (msg !== null && typeof msg === "object" && typeof (msg as { code?: unknown }).code === "string") {
      const m = msg as { code: string; message?: unknown };
      return errorFromCode(m.code, String(m.message ?? ""), { request: where });
    }
  } catch {
    // not JSON: fall through
  }
  const code = (
    { 400: "bad_request", 401: "unauthorized", 403: "forbidden", 503: "shutting_down" } as Record<number, string>
  )[status];
  return errorFromCode(code ?? "internal", `HTTP ${status}: ${body.slice(0, 200)}`, { request: where });
}

export async function openTransport(url: string, where: string, options: TransportOptions): Promise<Transport> {
  if (options.WebSocket === undefined && isNode) return openNode(url, where, options);
  const Ctor = options.WebSocket ?? (globalThis as { WebSocket?: BrowserWebSocketConstructor }).WebSocket;
  if (Ctor === undefined) throw new ClientError("unsupported", "no WebSocket in this environment");
  return openBrowser(Ctor, url, where, options);
}

async function openNode(url: string, where: string, options: TransportOptions): Promise<Transport> {
  const { default: WS } = await import("ws");
  return new Promise<Transport>((resolve, reject) => {
    let settled = false;
    const ws = new WS(url, {
      headers: options.headers,
      maxPayload: options.maxPayload,
      // Compression is the protocol's own, per message.
      perMessageDeflate: false,
      handshakeTimeout: options.timeoutMs,
    });
    const inbound = new Inbound();
    const transport: Transport = {
      send: (frame) => ws.send(frame),
      close: (code, reason) => ws.close(code, reason),
      pause: (paused) => (paused ? ws.pause() : ws.resume()),
      attach: (handlers) => inbound.attach(handlers),
    };
    ws.on("unexpected-response", (req, res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size <= 64 << 10) chunks.push(c);
      });
      res.on("end", () => {
        settled = true;
        reject(refusal(res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8"), where));
        req.destroy();
      });
    });
    ws.on("open", () => {
      settled = true;
      resolve(transport);
    });
    ws.on("error", (e) => {
      if (!settled) {
        settled = true;
        reject(new ClientError("connect_failed", `cannot connect: ${e.message}`, { request: where }));
      }
    });
    ws.on("message", (data, isBinary) => {
      const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
      inbound.message(isBinary ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length) : bytes.toString("utf8"));
    });
    ws.on("close", (code, reason) => {
      if (!settled) {
        settled = true;
        reject(
          new ClientError("connect_failed", `the connection closed during the upgrade (${code})`, { request: where }),
        );
      }
      inbound.close(code, reason.toString("utf8"));
    });
  });
}

function openBrowser(
  Ctor: BrowserWebSocketConstructor,
  url: string,
  where: string,
  options: TransportOptions,
): Promise<Transport> {
  return new Promise<Transport>((resolve, reject) => {
    let settled = false;
    const ws = new Ctor(url);
    ws.binaryType = "arraybuffer";
    const timer = setTimeout(() => {
      if (!settled) {
        settled = true;
        ws.close();
        reject(new ClientError("connect_failed", `no connection within ${options.timeoutMs} ms`, { request: where }));
      }
    }, options.timeoutMs);
    const inbound = new Inbound();
    const transport: Transport = {
      send: (frame) => ws.send(frame),
      close: (code, reason) => ws.close(code, reason),
      pause: () => undefined, // browsers cannot stop reading a WebSocket
      attach: (handlers) => inbound.attach(handlers),
    };
    ws.onopen = () => {
      clearTimeout(timer);
      settled = true;
      resolve(transport);
    };
    ws.onmessage = (ev: MessageEvent) => {
      const data: unknown = ev.data;
      inbound.message(typeof data === "string" ? data : new Uint8Array(data as ArrayBuffer));
    };
    ws.onclose = (ev: CloseEvent) => {
      clearTimeout(timer);
      if (!settled) {
        settled = true;
        // Browsers hide why an upgrade failed; the client asks the HTTP side (see client.ts).
        reject(new ClientError("connect_failed", `the upgrade failed (${ev.code})`, { request: where }));
      }
      inbound.close(ev.code, ev.reason);
    };
  });
}
