// The console end to end: a real `espalier serve` (with read and write tokens) on a free
// loopback port serves the console at `/`; headless Chromium (Debian's `chromium`, driven by
// playwright-core with its executable path: nothing downloads a browser) signs in, browses,
// runs instructions, watches changes made by another client, survives a server restart and
// is refused a write under a read token. Every message the browser logs at error level fails
// the test, except the failed connections while the server is down for its restart.
//
// Screenshots of each view at 1280×800 go to console/build/screenshots/, or, with
// ESPALIER_SCREENSHOTS=docs, to docs/console/ (the ones docs/console.md shows).

import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { chromium, type Browser, type Page } from "playwright-core";

import { ROOT, Server } from "./server.js";

const skip = process.env["ESPALIER_SKIP_BROWSER"] === "1" ? "ESPALIER_SKIP_BROWSER=1" : false;
const SHOTS =
  process.env["ESPALIER_SCREENSHOTS"] === "docs"
    ? join(ROOT, "docs", "console")
    : join(ROOT, "console", "build", "screenshots");
const WRITER = Server.secret("writer");
const READER = Server.secret("reader");

let server: Server;
let browser: Browser | undefined;
/** Error-level browser messages; `expected` while the server is down on purpose. */
const errors: string[] = [];
let expected: RegExp | undefined;

function chromiumPath(): string {
  const candidates = [process.env["CHROMIUM"], "/usr/bin/chromium", "/usr/bin/chromium-browser"];
  const found = candidates.find((p): p is string => p !== undefined && p !== "" && existsSync(p));
  if (found === undefined) {
    throw new Error(
      "no Chromium: install Debian's `chromium` (apt-get install chromium), set CHROMIUM=<path>, " +
        "or skip with ESPALIER_SKIP_BROWSER=1",
    );
  }
  return found;
}

before(async () => {
  if (skip) return;
  mkdirSync(SHOTS, { recursive: true });
  server = await Server.start({ reader: "read", writer: "write" });
  browser = await chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--font-render-hinting=none"],
  });
});

after(async () => {
  await browser?.close();
  await server?.cleanup();
  assert.deepEqual(errors, [], "the browser logged errors");
});

async function page(): Promise<Page> {
  assert.ok(browser !== undefined);
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const p = await context.newPage();
  p.on("console", (m) => {
    if (m.type() !== "error" && m.type() !== "warning") return;
    const text = `[${m.type()}] ${m.text()}`;
    if (expected?.test(text)) return;
    if (m.type() === "error") errors.push(text);
  });
  p.on("pageerror", (e) => errors.push(`[pageerror] ${e.message}`));
  return p;
}

async function signIn(p: Page, token: string): Promise<void> {
  await p.goto(server.http + "/");
  await p.getByLabel("Token").fill(token);
  await p.getByRole("button", { name: "Sign in" }).click();
  await p.locator("header.top .role").waitFor();
}

async function shot(p: Page, name: string): Promise<void> {
  await p.screenshot({ path: join(SHOTS, `${name}.png`) });
}

test("sign in with a token, see the role; a wrong token is refused", { skip }, async () => {
  const p = await page();
  await p.goto(server.http + "/");
  await p.getByRole("button", { name: "Sign in" }).waitFor();
  await shot(p, "signin");
  await p.getByLabel("Token").fill("not-the-right-secret-000");
  await p.getByRole("button", { name: "Sign in" }).click();
  await p.getByRole("alert").filter({ hasText: "token" }).waitFor();
  await p.getByLabel("Token").fill(WRITER);
  await p.getByRole("button", { name: "Sign in" }).click();
  assert.equal(await p.locator("header.top .role").textContent(), "write");
  await p.close();
});

test("schema view: node types, references with targets, states, derived, commands, text", { skip }, async () => {
  const p = await page();
  await signIn(p, WRITER);
  await p.getByRole("link", { name: "Schema" }).click();
  const tree = p.getByRole("region", { name: "Node types" });
  await tree.waitFor();
  const text = await tree.textContent();
  for (const expected of ["'Orders'", "'Client'", "root.'Clients'", "'Started'", "'Lines'", "'Client Name'"]) {
    assert.ok(text?.includes(expected), `the tree shows ${expected}`);
  }
  assert.ok((await p.locator(".commands").textContent())?.includes("'start task'"));
  assert.ok((await p.getByLabel("Schema text").textContent())?.includes("'Current Task' -> stategroup"));
  assert.ok((await p.locator(".schema-text .tok-keyword").count()) > 0, "the schema text is highlighted");
  await shot(p, "schema");
  await p.close();
});

test("browse: root, a collection, an entry, follow a reference and back; incoming references", { skip }, async () => {
  const p = await page();
  await signIn(p, WRITER);
  await p.getByRole("link", { name: "Data" }).click();
  await p.getByRole("link", { name: ". 'Orders'" }).click();
  const table = p.getByRole("table", { name: "Entries of Orders" });
  await table.waitFor();
  assert.equal(await p.locator(".pager .range").textContent(), "1–3 of 3");
  await shot(p, "collection");
  await table.getByRole("link", { name: '"o1"' }).click();
  await p.locator("dl.form").first().waitFor();
  const form = await p.locator("dl.form").first().textContent();
  assert.ok(form?.includes("500") && form.includes("Started"), form ?? "");
  await shot(p, "entry");
  // Follow the reference to the client, see who refers to it, and come back.
  // Wait for the new page's own content: the previous page's incoming list is on screen
  // until the client's arrives (waiting for any `.incoming` link raced with it).
  await p.locator("dl.form a.ref", { hasText: "c1" }).click();
  await p.locator(".incoming", { hasText: `. 'Orders' : "o1"` }).waitFor();
  assert.match(p.url(), /Clients/);
  await p.goBack();
  // o1 is the current order of machine M1: a reference from inside a state.
  await p.locator(".incoming", { hasText: `. 'Machines' : "M1"` }).waitFor();
  assert.ok((await p.locator("dl.form").first().textContent())?.includes("500"));
  await p.close();
});

test("a large collection pages from the server and filters by key prefix; rows by keyboard", { skip }, async () => {
  const entries = Array.from(
    { length: 120 },
    (_, i) => `'Products' -> dictionary "p${String(i).padStart(3, "0")}" ( 'Price' -> number ${i} )`,
  );
  const done = await server.execute(`update ( ${entries.join(" ")} )`, WRITER);
  assert.equal(done["kind"], "result", JSON.stringify(done));
  const p = await page();
  await signIn(p, WRITER);
  await p.goto(`${server.http}/#/data?path=&c=Products`);
  await p.getByRole("table", { name: "Entries of Products" }).waitFor();
  assert.equal(await p.locator(".pager .range").textContent(), "1–50 of 123");
  await p.getByRole("button", { name: "Next ›" }).click();
  await p.locator(".pager .range", { hasText: "51–100 of 123" }).waitFor();
  await p.getByLabel("Filter by key prefix").fill("p11");
  await p.getByRole("button", { name: "Filter" }).click();
  await p.locator(".pager .range", { hasText: "1–10 of 10" }).waitFor();
  // Keyboard: focus the first row, arrow down twice, Enter opens that entry.
  await p.locator("tbody tr").first().focus();
  await p.keyboard.press("ArrowDown");
  await p.keyboard.press("ArrowDown");
  await p.keyboard.press("Enter");
  await p.locator("dl.form").first().waitFor();
  assert.match(decodeURIComponent(p.url()), /"p112"/);
  await p.close();
});

test(
  "editor: highlighting, completion, rows, a line:column error with its caret, explain, history",
  { skip },
  async () => {
    const p = await page();
    await signIn(p, WRITER);
    await p.getByRole("link", { name: "Query" }).click();
    const input = p.getByLabel(/Instruction/);
    await input.fill("");
    await input.pressSequentially("collection select . 'Ord");
    const list = p.getByRole("listbox");
    await list.getByRole("option", { name: "'Orders'" }).waitFor();
    await p.keyboard.press("Enter");
    await input.pressSequentially(" 'q' -> number : 'Qu");
    await list.getByRole("option", { name: "'Quantity'" }).waitFor();
    await p.keyboard.press("Tab");
    assert.equal(await input.inputValue(), "collection select . 'Orders' 'q' -> number : 'Quantity'");
    assert.ok((await p.locator(".editor-layer .tok-keyword").count()) >= 3, "keywords are highlighted");
    await p.keyboard.press("Control+Enter");
    await p.locator(".result-head", { hasText: "3 rows" }).waitFor();
    assert.equal(await p.getByRole("table", { name: "Result rows" }).locator("tbody tr").count(), 3);
    await shot(p, "query");
    // A bad instruction: the error's line:column, the caret under it, the token marked.
    await input.fill("collection select . 'Orders'\n  'q' -> number : 'Quantty'");
    await p.getByRole("button", { name: "Run" }).click();
    const error = p.locator(".error-box");
    await error.waitFor();
    const caret = await p.locator(".caret").textContent();
    assert.match(caret ?? "", /^2:\d+\n/);
    assert.ok((await error.textContent())?.includes("no property 'Quantty'"));
    assert.ok((await p.locator(".editor-layer .tok-error").count()) === 1);
    await shot(p, "query-error");
    await input.fill("collection match o in . 'Orders' c in o > 'Client' select 'o' -> o 'c' -> c");
    await p.getByRole("button", { name: "Explain" }).click();
    await p.locator(".result td", { hasText: "bind" }).first().waitFor();
    const history = await p.locator(".history").textContent();
    assert.ok(history?.includes("'Quantty'") && history.includes("collection match"), history ?? "");
    await p.close();
  },
);

test("live: subscriptions see another client's commits, and go on after a server restart", { skip }, async () => {
  const p = await page();
  await signIn(p, READER);
  await p.getByRole("link", { name: "Live" }).click();
  const watch = p.getByLabel("Node path or query to watch");
  await watch.fill(`. 'Machines' : "M2"`);
  await p.getByRole("button", { name: "Subscribe", exact: true }).click();
  await p.locator(".card").first().waitFor();
  await watch.fill("collection select . 'Machines' 'Pulses' -> number : 'Pulses'");
  await p.getByRole("button", { name: "Subscribe", exact: true }).click();
  await p.locator(".card").nth(1).waitFor();
  const done = await server.execute(`command 'pulse' ( 'machine' -> "M2" )`, WRITER);
  const version = (done["result"] as { done: { version: number } }).done.version;
  const node = p.locator(".card", { hasText: `. 'Machines' : "M2"` });
  await node.locator(".event", { hasText: `v${version}` }).waitFor();
  assert.ok((await node.locator(".event").first().textContent())?.includes("'Pulses': 0 → 1"));
  const query = p.locator(".card", { hasText: "collection select" });
  await query.locator(".event", { hasText: `v${version}` }).waitFor();
  // Restart the server: the cards say so, then resume from their last version.
  expected = /WebSocket connection to .* failed|Failed to load resource|ERR_CONNECTION_REFUSED/;
  await server.stop();
  await p.locator(".connection.down").waitFor({ timeout: 15_000 });
  await server.run();
  await p.locator(".connection.up").waitFor({ timeout: 30_000 });
  expected = undefined;
  const again = await server.execute(`command 'pulse' ( 'machine' -> "M2" )`, WRITER);
  const next = (again["result"] as { done: { version: number } }).done.version;
  await node.locator(".event", { hasText: `v${next}` }).waitFor({ timeout: 15_000 });
  assert.ok((await node.locator(".event").first().textContent())?.includes("'Pulses': 1 → 2"));
  await query.locator(".event", { hasText: `v${next}` }).waitFor({ timeout: 15_000 });
  // Nothing was committed while the server was down: the subscriptions resumed where they were.
  assert.equal(await node.locator(".event", { hasText: "reload" }).count(), 0);
  await node.locator(".sub-state", { hasText: "resumed after 1 reconnect" }).waitFor();
  await shot(p, "live");
  await p.close();
});

test("a read token cannot write from the console", { skip }, async () => {
  const p = await page();
  await signIn(p, READER);
  assert.equal(await p.locator("header.top .role").textContent(), "read");
  await p.getByRole("link", { name: "Query" }).click();
  await p.getByLabel(/Instruction/).fill(`update . 'Machines' : "M3" ( 'Pulses' -> number 99 )`);
  await p.keyboard.press("Control+Enter");
  const error = p.locator(".error-box");
  await error.waitFor();
  assert.ok((await error.textContent())?.startsWith("forbidden"), (await error.textContent()) ?? "");
  await shot(p, "read-refused");
  const r = await server.execute(`get . 'Machines' : "M3"`, READER);
  assert.equal((r["result"] as { node: { Pulses: number } }).node.Pulses, 0, "nothing was written");
  await p.close();
});

test("dashboard: the server's figures as charts, updated every second", { skip }, async () => {
  const p = await page();
  await signIn(p, WRITER);
  await p.getByRole("link", { name: "Dashboard" }).click();
  await p.locator(".tile").first().waitFor();
  // Six seconds of load: bursts of concurrent writes (they share commits) and reads.
  for (let burst = 0; burst < 12; burst++) {
    const writes = Array.from({ length: 4 + burst }, () =>
      server.execute(`command 'pulse' ( 'machine' -> "M1" )`, WRITER),
    );
    const reads = Array.from({ length: 2 * burst }, () =>
      server.execute("collection select . 'Orders' 'q' -> number : 'Quantity'", READER),
    );
    await Promise.all([...writes, ...reads, new Promise((r) => setTimeout(r, 500))]);
  }
  // A few seconds of points.
  await p.waitForFunction(
    () => (document.querySelector(".chart polyline")?.getAttribute("points") ?? "").split(" ").length >= 4,
  );
  const text = await p.locator(".dash-grid").textContent();
  for (const expected of ["Sessions", "Requests", "Latency", "Commits", "Batch size", "execute"]) {
    assert.ok(text?.includes(expected), `the dashboard shows ${expected}`);
  }
  const figures = (await (
    await fetch(`${server.http}/v1/figures`, { headers: { Authorization: `Bearer ${READER}` } })
  ).json()) as { commits: { commits: number; requests: number }; requests: { execute: { count: number } } };
  assert.ok(figures.commits.commits >= 20 && figures.commits.requests >= figures.commits.commits);
  assert.ok(figures.requests.execute.count >= 20);
  await shot(p, "dashboard");
  await p.close();
});

test("keyboard: the views' tabs and the editor without a mouse", { skip }, async () => {
  const p = await page();
  await signIn(p, WRITER);
  await p.goto(`${server.http}/#/schema`);
  await p.getByRole("region", { name: "Node types" }).waitFor();
  // Tab reaches the view links in order; Enter follows one.
  await p.locator("body").focus();
  const seen: string[] = [];
  for (let i = 0; i < 8 && !seen.includes("Query"); i++) {
    await p.keyboard.press("Tab");
    seen.push((await p.evaluate(() => document.activeElement?.textContent ?? "")).trim());
  }
  assert.ok(seen.includes("Query"), JSON.stringify(seen));
  await p.keyboard.press("Enter");
  const input = p.getByLabel(/Instruction/);
  await input.waitFor();
  assert.ok(await input.evaluate((el) => el === document.activeElement), "the editor has the focus");
  await p.keyboard.press("Control+a");
  await p.keyboard.type(`get . 'Clients' : "c2"`);
  await p.keyboard.press("Control+Enter");
  await p.locator(".result-head", { hasText: "node" }).waitFor();
  assert.ok((await p.locator(".result").textContent())?.includes("Abbott & Sons"));
  await p.close();
});
