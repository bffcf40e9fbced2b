// The live view: subscriptions to nodes and queries, each a card with its data and the
// commits that touched it as they arrive (highlighted, with their versions). The client
// reconnects after a dropped session and resubscribes from the last version it received, so a
// card goes on after a server restart without a gap (or shows the reload it got instead).

import type { Change, Event as SubEvent, JsonValue, Subscription } from "../../clients/typescript/src/index.js";
import type { Api } from "./api.js";
import { clear, formatValue, h } from "./dom.js";
import { replyBody } from "./editor.js";
import { keyText } from "./lang.js";

const MAX_EVENTS = 200;

interface Card {
  target: string;
  sub: Subscription;
  el: HTMLElement;
}

function keysOf(v: JsonValue | undefined): string[] {
  return Array.isArray(v) ? v.map((x) => String(x)) : v === undefined || v === null ? [] : [String(v)];
}

function stepText(step: JsonValue): string {
  if (step === null || typeof step !== "object" || Array.isArray(step)) return String(step);
  const s = step as Record<string, JsonValue>;
  const entry = s["entry"] as Record<string, JsonValue> | undefined;
  if (entry !== undefined)
    return `${entry["matrix"] === true ? "%" : "."} '${entry["collection"]}' : ${keyText(keysOf(entry["key"]))}`;
  if (s["group"] !== undefined) return `+ '${String(s["group"])}'`;
  const state = s["state"] as Record<string, JsonValue> | undefined;
  if (state !== undefined) return `? '${state["stategroup"]}' * '${state["state"]}'`;
  return JSON.stringify(step);
}

export function changeText(c: Change): string {
  const at = c.node.map((s) => stepText(s)).join(" ");
  const where = at === "" ? "" : `${at} `;
  switch (c.change) {
    case "entry_added":
      return `${where}+ '${c.collection}' : ${keyText(c.key ?? [])}`;
    case "entry_removed":
      return `${where}− '${c.collection}' : ${keyText(c.key ?? [])}`;
    case "state_switched":
      return `${where}'${c.stategroup}': ${formatValue(c.old)} → ${formatValue(c.new)}`;
    default:
      return `${where}'${c.property}': ${formatValue(c.old)} → ${formatValue(c.new)}`;
  }
}

export class LiveView {
  readonly el: HTMLElement;
  private readonly cards: Card[] = [];
  private readonly list: HTMLElement;
  private readonly input: HTMLInputElement;
  private readonly status: HTMLElement;

  constructor(private readonly api: Api) {
    this.input = h("input", {
      type: "text",
      class: "code",
      placeholder: `. 'Machines' : "M1"   or   collection select . 'Orders' 'Quantity' -> number : 'Quantity'`,
      "aria-label": "Node path or query to watch",
    });
    this.status = h("span", { class: "muted", role: "status" });
    this.list = h("div", { class: "cards" });
    this.el = h(
      "div",
      { class: "live-view" },
      h(
        "form",
        {
          class: "watch panel",
          onsubmit: (e: Event) => {
            e.preventDefault();
            void this.watch(this.input.value.trim());
          },
        },
        h("h2", {}, "Watch"),
        this.input,
        h("button", { type: "submit", class: "primary" }, "Subscribe"),
        this.status,
      ),
      this.list,
    );
  }

  /** Called when the view is shown: picks up a path the data browser asked to watch. */
  shown(): void {
    const path = sessionStorage.getItem("espalier.watch");
    sessionStorage.removeItem("espalier.watch");
    if (path !== null) void this.watch(path);
    this.input.focus();
  }

  async watch(target: string): Promise<void> {
    const isQuery = /^(explain\s+)?collection\b/.test(target);
    clear(this.status, "Subscribing…");
    let sub: Subscription;
    try {
      sub = isQuery ? await this.api.db.subscribeQuery(target) : await this.api.db.subscribe(target);
    } catch (e) {
      clear(
        this.status,
        h("span", { class: "error", role: "alert" }, (e as Error & { detail?: string }).detail ?? String(e)),
      );
      return;
    }
    clear(this.status);
    const version = h("span", { class: "version" }, `version ${sub.version}`);
    const data = h("div", { class: "card-data" });
    const events = h("ol", { class: "events", "aria-live": "polite", reversed: true });
    const card: Card = {
      target,
      sub,
      el: h("article", { class: "card live", "aria-label": `Subscription to ${target || "the root"}` }),
    };
    const close = h(
      "button",
      {
        type: "button",
        class: "small",
        onclick: () => {
          void sub.close();
          card.el.remove();
          this.cards.splice(this.cards.indexOf(card), 1);
        },
      },
      "Unsubscribe",
    );
    const state = h("span", { class: "sub-state" }, "live");
    card.el.append(
      h("header", {}, h("code", {}, target === "" ? "(root)" : target), " ", version, " ", state, " ", close),
      data,
      h("h4", {}, "Commits"),
      events,
    );
    this.showData(sub, data);
    this.cards.unshift(card);
    this.list.prepend(card.el);
    void this.follow(sub, version, data, events, state);
  }

  private showData(sub: Subscription, into: HTMLElement): void {
    if (sub.query !== undefined) clear(into, replyBody(sub.query));
    else if (sub.node !== undefined) clear(into, h("pre", { class: "code" }, JSON.stringify(sub.node, null, 2)));
    else clear(into, h("p", { class: "muted" }, "(the node does not exist now)"));
  }

  private async follow(
    sub: Subscription,
    version: HTMLElement,
    data: HTMLElement,
    events: HTMLElement,
    state: HTMLElement,
  ): Promise<void> {
    try {
      for await (const event of sub) {
        clear(version, `version ${event.version}`);
        events.prepend(this.eventItem(event));
        while (events.childElementCount > MAX_EVENTS) events.lastElementChild?.remove();
        if (event.type === "reload" || event.query !== undefined || event.added !== undefined) this.showData(sub, data);
      }
      clear(state, "ended");
    } catch (e) {
      clear(state, h("span", { class: "error" }, (e as Error & { detail?: string }).detail ?? String(e)));
    }
  }

  private eventItem(event: SubEvent): HTMLElement {
    const item = h("li", { class: "event fresh" }, h("span", { class: "version" }, `v${event.version}`), " ");
    setTimeout(() => item.classList.remove("fresh"), 2500);
    if (event.type === "reload") {
      item.append(h("span", { class: "reload" }, `reload (${event.reason}): the data afresh`));
      return item;
    }
    if (event.changes !== undefined) {
      const list = h("ul", {}, ...event.changes.map((c) => h("li", { class: "code" }, changeText(c))));
      item.append(list);
    } else if (event.query !== undefined) {
      item.append(`${event.query.total} rows now`);
    } else {
      item.append(`${event.removed?.length ?? 0} rows left, ${event.added?.length ?? 0} came`);
    }
    return item;
  }

  /** Shows, on every card, whether the session is up (called by the app's heartbeat). */
  setConnected(up: boolean, reconnects: number): void {
    for (const c of this.cards) {
      const s = c.el.querySelector(".sub-state");
      if (s !== null && !c.sub.isEnded) {
        s.textContent = up
          ? reconnects > 0
            ? `live (resumed after ${reconnects} reconnect${reconnects === 1 ? "" : "s"})`
            : "live"
          : "reconnecting…";
        s.classList.toggle("down", !up);
      }
    }
  }
}
