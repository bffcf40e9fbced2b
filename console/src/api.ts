// The console's link to the server: one WebSocket session (the TypeScript client) for
// instructions and subscriptions, and plain HTTP for the console's endpoints
// (docs/protocol.md, "Console endpoints").

import { connect, type Client, type QueryResult } from "../../clients/typescript/src/index.js";

export interface SessionInfo {
  tokens: boolean;
  role: string | null;
  message?: string;
}

export interface Page extends QueryResult {
  version?: number;
}

/** Raised for a failed console endpoint, with the server's code and message. */
export class EndpointError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export class Api {
  client: Client | undefined;

  constructor(readonly token: string | undefined) {}

  private headers(): Record<string, string> {
    return this.token !== undefined ? { Authorization: `Bearer ${this.token}` } : {};
  }

  /** Whether the server wants a token and what role `token` has; always answered with 200. */
  static async session(token: string | undefined): Promise<SessionInfo> {
    const headers: Record<string, string> = token !== undefined ? { Authorization: `Bearer ${token}` } : {};
    const res = await fetch("/console/session", { headers });
    return (await res.json()) as SessionInfo;
  }

  async open(): Promise<Client> {
    const options = { reconnectAttempts: 1_000_000, timeoutMs: 30_000, onError: () => undefined };
    this.client = await connect(
      location.origin,
      this.token !== undefined ? { ...options, token: this.token } : options,
    );
    return this.client;
  }

  get db(): Client {
    if (this.client === undefined) throw new Error("not connected");
    return this.client;
  }

  async endpoint<T>(path: string, query: Record<string, string | number> = {}): Promise<T> {
    const q = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
    const res = await fetch(`${path}${q.size > 0 ? `?${q}` : ""}`, { headers: this.headers() });
    const body = (await res.json()) as Record<string, unknown>;
    if (!res.ok || body["kind"] === "error") {
      throw new EndpointError(String(body["code"] ?? res.status), String(body["message"] ?? res.statusText));
    }
    return body as T;
  }
}
