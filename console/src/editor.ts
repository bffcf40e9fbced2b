// The instruction editor: a textarea over a highlighted copy of its text, completion of
// property, state and command names from the schema, results as a table or raw JSON, errors
// with a caret at their line:column, `explain` for pattern queries, and the history of what
// this browser ran.

import type { Reply } from "../../clients/typescript/src/index.js";
import type { Api } from "./api.js";
import { clear, formatValue, h, keyboardRows } from "./dom.js";
import { errorPosition, offsetOf, quoteName, tokenize, unquote } from "./lang.js";
import { highlight, renderInto, type Schema, type SType } from "./schema.js";

const HISTORY_KEY = "espalier.history";
const HISTORY_MAX = 50;

export function loadHistory(): string[] {
  try {
    const v = JSON.parse(localStorage.getItem(HISTORY_KEY) ?? "[]") as unknown;
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
  } catch {
    return [];
  }
}

function remember(text: string): void {
  const list = [text, ...loadHistory().filter((x) => x !== text)].slice(0, HISTORY_MAX);
  localStorage.setItem(HISTORY_KEY, JSON.stringify(list));
}

/** Names to offer at `offset`: the properties of the node type the path before it reaches
 * (when it can be followed from the root), then every other name of the schema. */
export function completions(schema: Schema, src: string, offset: number): { from: number; names: string[] } {
  const tokens = tokenize(src.slice(0, offset));
  const last = tokens[tokens.length - 1];
  let from = offset;
  let typed = "";
  if (last !== undefined && last.kind === "name" && !(last.text.length > 1 && last.text.endsWith("'"))) {
    from = last.start;
    typed = unquote(last.text).toLowerCase();
  }
  // Follow the steps before the name from the root: `. 'A' : k`, `% 'A' : k`, `+ 'G'`, `? 'S' * 'T'`.
  const solid = tokens.filter((t) => t.kind !== "space" && t.kind !== "comment" && t.start < from);
  let type: SType | undefined;
  let start = solid.length;
  while (start > 0) {
    const t = solid[start - 1];
    if (t === undefined || t.kind === "keyword" || (t.kind === "punct" && "()".includes(t.text))) break;
    start--;
  }
  type = schema.root;
  for (let i = start; i < solid.length && type !== undefined; i++) {
    const t = solid[i];
    if (t?.kind !== "punct" || !".%+?>".includes(t.text)) continue;
    const name = solid[i + 1];
    if (name?.kind !== "name") break;
    const p: SType["properties"][number] | undefined = type.properties.find((x) => x.name === unquote(name.text));
    if (t.text === "?") {
      const state = solid[i + 3];
      type = state?.kind === "name" ? p?.states?.find((s) => s.name === unquote(state.text))?.node : undefined;
      i += 3;
    } else if (t.text === ">") {
      type = p?.target !== undefined ? schema.type(p.target.type) : undefined;
      i += 1;
    } else {
      type = p?.node;
      i += 1;
    }
  }
  const local = (type?.properties ?? []).map((p) => p.name);
  const all = [...new Set([...local, ...schema.names])];
  return { from, names: all.filter((n) => n.toLowerCase().startsWith(typed)) };
}

export class Editor {
  readonly el: HTMLElement;
  readonly input: HTMLTextAreaElement;
  private readonly layer: HTMLPreElement;
  private readonly popup: HTMLUListElement;
  private readonly output: HTMLElement;
  private readonly historyList: HTMLElement;
  private choices: string[] = [];
  private choice = 0;
  private choiceFrom = 0;
  private errorAt: number | undefined;

  constructor(
    private readonly api: Api,
    private readonly schema: Schema,
  ) {
    this.input = h("textarea", {
      class: "editor-input",
      spellcheck: "false",
      autocapitalize: "off",
      autocomplete: "off",
      "aria-label": "Instruction (Ctrl+Enter runs, Ctrl+Space completes)",
      "aria-autocomplete": "list",
      "aria-controls": "completions",
    });
    this.layer = h("pre", { class: "editor-layer code", "aria-hidden": "true" });
    this.popup = h("ul", { class: "completions", id: "completions", role: "listbox", hidden: true });
    this.output = h("div", { class: "output", "aria-live": "polite" });
    this.historyList = h("ol", { class: "history" });
    const run = h("button", { type: "button", class: "primary", onclick: () => void this.run(false) }, "Run");
    const explain = h("button", { type: "button", onclick: () => void this.run(true) }, "Explain");
    this.el = h(
      "div",
      { class: "editor-view" },
      h(
        "div",
        { class: "panel editor-panel" },
        h("h2", {}, "Instruction"),
        h("div", { class: "editor" }, this.layer, this.input, this.popup),
        h(
          "div",
          { class: "toolbar" },
          run,
          explain,
          h(
            "span",
            { class: "muted" },
            "Ctrl+Enter runs · Ctrl+Space completes · role: ",
            api.client?.welcome?.role ?? "?",
          ),
        ),
        this.output,
      ),
      h("div", { class: "panel history-panel" }, h("h2", {}, "History"), this.historyList),
    );
    this.input.addEventListener("input", () => {
      this.errorAt = undefined;
      this.paint();
      const before = this.input.value.slice(0, this.input.selectionStart);
      if (!this.popup.hidden || /'[^']*$/.test(before.split("\n").pop() ?? "")) this.complete(false);
    });
    this.input.addEventListener("scroll", () => {
      this.layer.scrollTop = this.input.scrollTop;
      this.layer.scrollLeft = this.input.scrollLeft;
    });
    this.input.addEventListener("keydown", (e) => this.key(e));
    this.input.addEventListener("blur", () => setTimeout(() => this.close(), 150));
    const draft = sessionStorage.getItem("espalier.draft");
    sessionStorage.removeItem("espalier.draft");
    this.input.value = draft ?? loadHistory()[0] ?? "collection select . 'Orders' 'Quantity' -> number : 'Quantity'";
    this.paint();
    this.showHistory();
  }

  private paint(): void {
    renderInto(this.layer, highlight(`${this.input.value}\n`, this.errorAt));
  }

  private key(e: KeyboardEvent): void {
    if (!this.popup.hidden) {
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        this.choice = (this.choice + (e.key === "ArrowDown" ? 1 : this.choices.length - 1)) % this.choices.length;
        this.showChoices();
        return;
      }
      if (e.key === "Enter" || e.key === "Tab") {
        e.preventDefault();
        this.accept();
        return;
      }
      if (e.key === "Escape") {
        e.preventDefault();
        this.close();
        return;
      }
    }
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      void this.run(false);
    } else if (e.key === " " && e.ctrlKey) {
      e.preventDefault();
      this.complete(true);
    }
  }

  private complete(explicit: boolean): void {
    const { from, names } = completions(this.schema, this.input.value, this.input.selectionStart);
    if (names.length === 0 || (!explicit && from === this.input.selectionStart)) {
      this.close();
      return;
    }
    this.choices = names.slice(0, 12);
    this.choice = 0;
    this.choiceFrom = from;
    this.popup.hidden = false;
    this.input.setAttribute("aria-expanded", "true");
    // Place the list under the caret (monospace: columns × character width).
    const before = this.input.value.slice(0, this.input.selectionStart).split("\n");
    const style = getComputedStyle(this.input);
    const line = parseFloat(style.lineHeight) || 20;
    const ch = this.charWidth();
    this.popup.style.top = `${before.length * line + 8 - this.input.scrollTop}px`;
    this.popup.style.left = `${Math.min((before[before.length - 1]?.length ?? 0) * ch + 8, this.input.clientWidth - 200)}px`;
    this.showChoices();
  }

  private charWidth(): number {
    const probe = h("span", { class: "code" }, "0000000000");
    this.layer.append(probe);
    const w = probe.getBoundingClientRect().width / 10;
    probe.remove();
    return w || 8;
  }

  private showChoices(): void {
    clear(
      this.popup,
      ...this.choices.map((name, i) =>
        h(
          "li",
          {
            role: "option",
            id: `completion-${i}`,
            "aria-selected": i === this.choice ? "true" : "false",
            class: i === this.choice ? "selected" : "",
            onmousedown: (e: Event) => {
              e.preventDefault();
              this.choice = i;
              this.accept();
            },
          },
          quoteName(name),
        ),
      ),
    );
    this.input.setAttribute("aria-activedescendant", `completion-${this.choice}`);
  }

  private accept(): void {
    const name = this.choices[this.choice];
    if (name === undefined) return;
    const v = this.input.value;
    const end = this.input.selectionStart;
    const after = v.slice(end);
    const closing = after.startsWith("'") ? 1 : 0;
    const text = quoteName(name);
    this.input.value = v.slice(0, this.choiceFrom) + text + after.slice(closing);
    const caret = this.choiceFrom + text.length;
    this.input.setSelectionRange(caret, caret);
    this.close();
    this.paint();
  }

  private close(): void {
    this.popup.hidden = true;
    this.input.removeAttribute("aria-expanded");
    this.input.removeAttribute("aria-activedescendant");
  }

  private showHistory(): void {
    const items = loadHistory().map((text) =>
      h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: "history-item code",
            title: text,
            onclick: () => {
              this.input.value = text;
              this.errorAt = undefined;
              this.paint();
              this.input.focus();
            },
          },
          text.length > 160 ? `${text.slice(0, 157)}...` : text,
        ),
      ),
    );
    clear(this.historyList, ...items);
    if (items.length === 0) this.historyList.append(h("li", { class: "muted" }, "Nothing run yet in this browser."));
  }

  async run(explain: boolean): Promise<void> {
    let text = this.input.value;
    if (text.trim() === "") return;
    if (explain) {
      if (!/^collection\s+match\b/.test(text.trim())) {
        clear(
          this.output,
          h(
            "p",
            { class: "error", role: "alert" },
            "explain shows the plan of a pattern query: collection match … select …",
          ),
        );
        return;
      }
      text = `explain ${text}`;
    }
    remember(this.input.value.trim());
    this.showHistory();
    clear(this.output, h("p", { class: "muted" }, "Running…"));
    const started = performance.now();
    try {
      const reply = await this.api.db.execute(text);
      const ms = performance.now() - started;
      clear(this.output, this.result(reply, ms));
    } catch (e) {
      this.showError(e as Error & { code?: string; detail?: string }, explain ? "explain ".length : 0);
    }
  }

  private showError(e: Error & { code?: string; detail?: string }, shift: number): void {
    const message = e.detail ?? e.message;
    const at = errorPosition(message);
    const box = h(
      "div",
      { class: "error-box", role: "alert" },
      h("div", { class: "error" }, h("strong", {}, e.code ?? "error"), ": ", message),
    );
    if (at !== undefined) {
      const src = this.input.value;
      const column = at.line === 1 ? at.column - shift : at.column;
      const lineText = src.split("\n")[at.line - 1] ?? "";
      box.append(
        h("pre", { class: "caret code" }, `${at.line}:${column}\n${lineText}\n${" ".repeat(Math.max(0, column - 1))}^`),
      );
      const offset = offsetOf(this.input.value, at.line, column);
      this.errorAt = offset;
      this.paint();
      box.append(
        h(
          "button",
          {
            type: "button",
            class: "small",
            onclick: () => {
              this.input.focus();
              this.input.setSelectionRange(offset, offset);
            },
          },
          "Go to the error",
        ),
      );
    }
    clear(this.output, box);
  }

  private result(reply: Reply, ms: number): HTMLElement {
    const el = h("div", { class: "result" });
    const timing = h("span", { class: "muted" }, ` ${ms.toFixed(1)} ms`);
    const tabs = h("div", { class: "result-body" });
    const raw = h("pre", { class: "code raw", hidden: true }, JSON.stringify(reply, null, 2));
    const rawToggle = h(
      "button",
      {
        type: "button",
        class: "small",
        "aria-pressed": "false",
        onclick: () => {
          raw.hidden = !raw.hidden;
          tabs.hidden = !raw.hidden;
          rawToggle.setAttribute("aria-pressed", String(!raw.hidden));
        },
      },
      "Raw JSON",
    );
    el.append(h("div", { class: "result-head" }, h("strong", {}, summary(reply)), timing, " ", rawToggle));
    tabs.append(replyBody(reply));
    el.append(tabs, raw);
    return el;
  }
}

function summary(reply: Reply): string {
  switch (reply.type) {
    case "query":
      return `${reply.total} row${reply.total === 1 ? "" : "s"}${reply.rows.length < reply.total ? ` (${reply.rows.length} shown)` : ""}`;
    case "done":
      return `committed: version ${reply.version}, ${reply.changes} change${reply.changes === 1 ? "" : "s"}`;
    case "node":
      return "node";
    case "transaction":
      return `transaction of ${reply.replies.length}`;
  }
}

export function replyBody(reply: Reply): HTMLElement {
  switch (reply.type) {
    case "query": {
      const hasKey = reply.rows.some((r) => r.key.length > 0);
      const table = h("table", { class: "rows", "aria-label": "Result rows" });
      const head = h("tr");
      if (hasKey) head.append(h("th", { scope: "col" }, "key"));
      for (const c of reply.columns) head.append(h("th", { scope: "col" }, c));
      const body = h("tbody");
      for (const row of reply.rows) {
        const tr = h("tr", { tabindex: 0 });
        if (hasKey) tr.append(h("td", {}, formatValue(row.key)));
        for (const v of row.values) tr.append(h("td", {}, formatValue(v)));
        body.append(tr);
      }
      table.append(h("thead", {}, head), body);
      keyboardRows(table);
      return table;
    }
    case "done":
      return h("p", {}, `The change is committed at version ${reply.version}.`);
    case "node":
      return h("pre", { class: "code" }, JSON.stringify(reply.node, null, 2));
    case "transaction":
      return h("ol", {}, ...reply.replies.map((r) => h("li", {}, h("strong", {}, summary(r)), replyBody(r))));
  }
}
