// The Espalier console: signs in (a token when the server has tokens), then shows one of five
// views by the URL's hash: #/schema, #/data?path=…, #/query, #/live, #/dashboard.

import { Api, EndpointError } from "./api.js";
import { Dashboard } from "./dashboard.js";
import { DataView, parseDataHash } from "./data.js";
import { clear, h } from "./dom.js";
import { Editor } from "./editor.js";
import { LiveView } from "./live.js";
import { Schema, type SchemaJson, schemaView } from "./schema.js";

const TOKEN_KEY = "espalier.token";

const VIEWS = [
  { hash: "#/schema", label: "Schema" },
  { hash: "#/data", label: "Data" },
  { hash: "#/query", label: "Query" },
  { hash: "#/live", label: "Live" },
  { hash: "#/dashboard", label: "Dashboard" },
] as const;

const app = document.getElementById("app") as HTMLElement;

function go(hash: string): void {
  if (location.hash === hash) void route();
  else location.hash = hash;
}

let state:
  | {
      api: Api;
      schema: Schema;
      main: HTMLElement;
      nav: HTMLElement;
      data: DataView;
      editor?: Editor;
      live: LiveView;
      dashboard: Dashboard;
      connection: HTMLElement;
    }
  | undefined;

async function start(): Promise<void> {
  const saved = sessionStorage.getItem(TOKEN_KEY) ?? undefined;
  let info = await Api.session(saved);
  if (info.role === null && saved !== undefined) {
    sessionStorage.removeItem(TOKEN_KEY);
    info = await Api.session(undefined);
  }
  if (info.role === null) {
    signIn(info.message);
    return;
  }
  await open(info.tokens ? saved : undefined, info.tokens);
}

function signIn(message?: string, failed?: string): void {
  const token = h("input", {
    type: "password",
    id: "token",
    autocomplete: "current-password",
    required: true,
    "aria-describedby": "signin-help",
  });
  const form = h(
    "form",
    {
      class: "signin panel",
      onsubmit: (e: Event) => {
        e.preventDefault();
        void (async () => {
          const info = await Api.session(token.value);
          if (info.role === null) {
            signIn(message, info.message ?? "The server does not accept this token.");
            return;
          }
          sessionStorage.setItem(TOKEN_KEY, token.value);
          await open(token.value, true);
        })();
      },
    },
    h("h1", {}, "Espalier console"),
    h(
      "p",
      { id: "signin-help" },
      "This server asks for a token. Paste a token's secret; its role (read, write or admin) decides what you may do.",
    ),
    h("label", { for: "token" }, "Token"),
    token,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
    failed !== undefined ? h("p", { class: "error", role: "alert" }, failed) : null,
  );
  clear(app, form);
  token.focus();
}

async function open(token: string | undefined, tokens: boolean): Promise<void> {
  const api = new Api(token);
  clear(app, h("p", { class: "muted loading" }, "Connecting…"));
  const client = await api.open();
  const schema = new Schema(await api.endpoint<SchemaJson>("/v1/schema"));
  const nav = h("nav", { class: "tabs", "aria-label": "Views" });
  for (const v of VIEWS) nav.append(h("a", { href: v.hash, "data-view": v.hash }, v.label));
  const connection = h("span", { class: "connection up", role: "status" }, "connected");
  const welcome = client.welcome;
  const header = h(
    "header",
    { class: "top" },
    h("span", { class: "brand" }, "Espalier"),
    nav,
    h(
      "span",
      { class: "who" },
      connection,
      " ",
      h("span", { class: "muted" }, welcome?.server ?? ""),
      " ",
      h(
        "span",
        { class: `role role-${welcome?.role ?? "none"}`, title: "the role of this session" },
        welcome?.role ?? "?",
      ),
      tokens
        ? h(
            "button",
            {
              type: "button",
              class: "small",
              onclick: () => {
                sessionStorage.removeItem(TOKEN_KEY);
                void client.close();
                location.hash = "";
                location.reload();
              },
            },
            "Sign out",
          )
        : null,
    ),
  );
  const main = h("main", { id: "main", tabindex: -1 });
  clear(app, h("a", { href: "#main", class: "skip" }, "Skip to the view"), header, main);
  state = {
    api,
    schema,
    main,
    nav,
    data: new DataView(api, schema, go),
    live: new LiveView(api),
    dashboard: new Dashboard(api),
    connection,
  };
  heartbeat();
  await route();
}

/** Pings the server every two seconds: the header and the live cards show whether the
 * session is up (the client reconnects by itself). */
function heartbeat(): void {
  setInterval(() => {
    const s = state;
    if (s === undefined) return;
    const ping = s.api.db.ping().then(
      () => true,
      () => false,
    );
    const late = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 1500));
    void Promise.race([ping, late]).then((up) => {
      s.connection.textContent = up ? "connected" : "reconnecting…";
      s.connection.classList.toggle("up", up);
      s.connection.classList.toggle("down", !up);
      s.live.setConnected(up, s.api.db.reconnects);
    });
  }, 2000);
}

async function route(): Promise<void> {
  const s = state;
  if (s === undefined) return;
  const hash = location.hash || "#/data";
  const [view = "#/data", query = ""] = hash.split("?", 2);
  for (const a of s.nav.querySelectorAll("a")) {
    if (a.dataset["view"] === view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (view !== "#/dashboard") s.dashboard.stop();
  document.title = `Espalier · ${VIEWS.find((v) => v.hash === view)?.label ?? "console"}`;
  switch (view) {
    case "#/schema":
      clear(s.main, schemaView(s.schema, go));
      break;
    case "#/query":
      s.editor ??= new Editor(s.api, s.schema);
      clear(s.main, s.editor.el);
      s.editor.input.focus();
      break;
    case "#/live":
      clear(s.main, s.live.el);
      s.live.shown();
      break;
    case "#/dashboard":
      clear(s.main, s.dashboard.el);
      s.dashboard.start();
      break;
    default: {
      const loc = parseDataHash(query) ?? { steps: [] };
      clear(s.main, s.data.render(loc));
    }
  }
}

window.addEventListener("hashchange", () => void route());
start().catch((e: unknown) => {
  const message = e instanceof EndpointError || e instanceof Error ? e.message : String(e);
  clear(app, h("div", { class: "panel error", role: "alert" }, `The console cannot start: ${message}`));
});
