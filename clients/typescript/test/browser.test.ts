// The client in a real browser: headless Chromium (the `@sparticuz/chromium` build from npm,
// driven by `playwright-core`) loads the compiled client as ES modules from a page on a local
// static server, which also passes `/ws` and `/v1/*` through to a real `espalier serve` (so
// the page talks to it from its own origin). The browser path has its own code: the native
// WebSocket (token in the URL), CompressionStream for deflate, fetch, and no built-in zstd.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createServer, request as httpRequest, type Server as HttpServer } from "node:http";
import { connect as netConnect, type AddressInfo } from "node:net";
import { extname, join, normalize } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import type * as Espalier from "../src/index.js";
import { Server } from "./server.js";

declare global {
  interface Window {
    espalier: typeof Espalier;
  }
}

const HERE = fileURLToPath(new URL(".", import.meta.url)); // build/test/
const SRC = join(HERE, "..", "src"); // the client compiled by tsconfig.test.json
const MSGPACK = join(HERE, "..", "..", "node_modules", "@msgpack", "msgpack", "dist.esm");
const PAGE = `<!doctype html>
<script type="importmap">{"imports": {"@msgpack/msgpack": "/msgpack/index.mjs"}}</script>
<script type="module">
  import * as espalier from "/src/index.js";
  window.espalier = espalier;
  document.title = "ready";
</script>`;
const TYPES: Record<string, string> = { ".js": "text/javascript", ".mjs": "text/javascript", ".html": "text/html" };

let espalier: Server;
let site: HttpServer;
let origin = "";
let browser: { close(): Promise<void>; newPage(): Promise<Page> } | undefined;

interface Page {
  goto(url: string): Promise<unknown>;
  waitForFunction(f: () => boolean): Promise<unknown>;
  evaluate<R, A>(f: (arg: A) => Promise<R>, arg: A): Promise<R>;
  on(event: "console", f: (m: { text(): string }) => void): void;
}

/** Serves the page and the modules, and passes /ws and /v1/* through to the server. */
function startSite(port: number): Promise<HttpServer> {
  const server = createServer((req, res) => {
    const url = req.url ?? "/";
    if (url.startsWith("/v1/")) {
      const up = httpRequest(
        { host: "127.0.0.1", port, path: url, method: req.method, headers: req.headers },
        (upRes) => {
          res.writeHead(upRes.statusCode ?? 502, upRes.headers);
          upRes.pipe(res);
        },
      );
      up.on("error", () => res.destroy());
      req.pipe(up);
      return;
    }
    const path = url.split("?")[0] ?? "/";
    const file =
      path === "/"
        ? undefined
        : path.startsWith("/src/")
          ? join(SRC, normalize(path.slice(5)))
          : path.startsWith("/msgpack/")
            ? join(MSGPACK, normalize(path.slice(9)))
            : "";
    if (file === undefined) {
      res.writeHead(200, { "Content-Type": "text/html" }).end(PAGE);
      return;
    }
    if (file === "" || !(file.startsWith(SRC) || file.startsWith(MSGPACK))) {
      res.writeHead(404).end();
      return;
    }
    readFile(file).then(
      (body) => res.writeHead(200, { "Content-Type": TYPES[extname(file)] ?? "application/octet-stream" }).end(body),
      () => res.writeHead(404).end(),
    );
  });
  server.on("upgrade", (req, socket, head) => {
    const up = netConnect(port, "127.0.0.1", () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      up.write(`${lines.join("\r\n")}\r\n\r\n`);
      up.write(head);
      socket.pipe(up).pipe(socket);
    });
    up.on("error", () => socket.destroy());
    socket.on("error", () => up.destroy());
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

// A machine that cannot run the downloaded Chromium may skip this file, saying so.
const skip = process.env["ESPALIER_SKIP_BROWSER"] === "1" ? "ESPALIER_SKIP_BROWSER=1" : false;

before(async () => {
  if (skip) return;
  espalier = await Server.start([], { reader: "read", writer: "write" });
  site = await startSite(espalier.port);
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  const chromium = (await import("@sparticuz/chromium")).default;
  const { chromium: pw } = await import("playwright-core");
  browser = await pw.launch({ executablePath: await chromium.executablePath(), args: chromium.args, headless: true });
});

after(async () => {
  await browser?.close();
  site?.closeAllConnections();
  await new Promise((resolve) => site?.close(resolve));
  await espalier?.cleanup();
});

async function page(): Promise<Page> {
  assert.ok(browser !== undefined);
  const p = await browser.newPage();
  p.on("console", (m) => console.log(`[browser] ${m.text()}`));
  await p.goto(origin);
  await p.waitForFunction(() => document.title === "ready");
  return p;
}

const READER = Server.secret("reader");
const WRITER = Server.secret("writer");

test("in the browser: sessions in both encodings, deflate through CompressionStream", { skip }, async () => {
  const p = await page();
  const result = await p.evaluate(
    async ({ token }) => {
      const { connect } = window.espalier;
      const url = location.origin.replace("http", "ws");
      const out: Record<string, unknown> = { hasProcess: typeof process !== "undefined" };
      for (const encoding of ["json", "msgpack"] as const) {
        const db = await connect(url, { token, encoding, compression: "deflate", compressMin: 64 });
        const rows = await db.query("collection select . 'Orders' 'Quantity' -> number : 'Quantity'");
        const padded = await db.query(
          `/* ${"padding ".repeat(40)}*/ collection select . 'Orders' 'Quantity' -> number : 'Quantity'`,
        );
        const done = await db.update("update . 'Machines' : \"M1\" ( 'Pulses' -> number + 1 )");
        const node = await db.get(". 'Machines' : $m", { m: "M1" });
        out[encoding] = {
          role: db.welcome?.role,
          total: rows.total,
          same: padded.total === rows.total,
          done: done.type,
          fresh: node.version >= done.version,
          stats: { ...db.stats },
        };
        await db.close();
      }
      return out;
    },
    { token: WRITER },
  );
  assert.equal(result["hasProcess"], false, "the page must run the browser code path");
  for (const encoding of ["json", "msgpack"]) {
    const r = result[encoding] as {
      role: string;
      total: number;
      same: boolean;
      done: string;
      fresh: boolean;
      stats: Record<string, number>;
    };
    assert.equal(r.role, "write");
    assert.ok(r.total >= 3 && r.same && r.done === "done" && r.fresh, JSON.stringify(r));
    assert.ok((r.stats["compressedIn"] ?? 0) >= 1 && (r.stats["compressedOut"] ?? 0) >= 1, JSON.stringify(r.stats));
  }
});

test("in the browser: subscriptions, typed errors, HTTP, zstd refused, auth refused", { skip }, async () => {
  const p = await page();
  const result = await p.evaluate(
    async ({ reader, writer }) => {
      const { connect, ConflictError, AuthError, ClientError, HttpClient } = window.espalier;
      const url = location.origin.replace("http", "ws");
      const w = await connect(url, { token: writer, encoding: "msgpack" });
      const r = await connect(url, { token: reader });
      const sub = await r.subscribe(". 'Machines' : \"M2\"");
      const versions: number[] = [];
      for (let i = 0; i < 3; i++) versions.push((await w.update("command 'pulse' ( 'machine' -> \"M2\" )")).version);
      const seen: number[] = [];
      for await (const e of sub) {
        seen.push(e.version);
        if (seen.length === 3) break;
      }
      const out: Record<string, unknown> = { ordered: JSON.stringify(seen) === JSON.stringify(versions) };
      try {
        await w.update("update ( 'Clients' -> dictionary \"c1\" ( ) )");
      } catch (e) {
        out["conflict"] = e instanceof ConflictError ? (e as InstanceType<typeof ConflictError>).code : String(e);
      }
      try {
        await r.update("update . 'Machines' : \"M2\" ( 'Pulses' -> number + 1 )");
      } catch (e) {
        out["forbidden"] = e instanceof AuthError ? (e as InstanceType<typeof AuthError>).code : String(e);
      }
      out["http"] = (await new HttpClient(location.origin, { token: reader }).get(". 'Machines' : \"M2\"")).node[
        "Pulses"
      ];
      try {
        await connect(url, { token: reader, compression: "zstd" });
      } catch (e) {
        out["zstd"] = e instanceof ClientError ? (e as InstanceType<typeof ClientError>).code : String(e);
      }
      try {
        await connect(url, { token: "not-a-real-token-at-all" });
      } catch (e) {
        out["unauthorized"] = e instanceof AuthError ? (e as InstanceType<typeof AuthError>).code : String(e);
      }
      await w.close();
      await r.close();
      return out;
    },
    { reader: READER, writer: WRITER },
  );
  assert.deepEqual(result, {
    ordered: true,
    conflict: "key_exists",
    forbidden: "forbidden",
    http: 3,
    zstd: "unsupported",
    unauthorized: "unauthorized",
  });
});
