// The data browser: the tree from the root, one node at a time. A node is a form of its
// properties (read with collection queries from the node itself, never its whole subtree),
// its collections as links with their counts, and who refers to it (pattern queries along
// `< 'reference'`). A collection is a paged table (the query's `limit`/`offset` and `total`;
// with a key prefix, GET /v1/entries).

import type { JsonValue, QueryResult } from "../../clients/typescript/src/index.js";
import { Api, type Page } from "./api.js";
import { clear, formatValue, h, keyboardRows } from "./dom.js";
import { keyText, parsePath, pathText, quoteName, type Step } from "./lang.js";
import { type Place, SCALARS, type Schema, type SProp, type SType } from "./schema.js";

export const PAGE_SIZE = 50;

export interface Location {
  steps: Step[];
  collection?: string;
  prefix?: string;
  offset?: number;
}

export function dataHash(loc: Location): string {
  const q = new URLSearchParams();
  q.set("path", pathText(loc.steps));
  if (loc.collection !== undefined) q.set("c", loc.collection);
  if (loc.prefix) q.set("prefix", loc.prefix);
  if (loc.offset) q.set("offset", String(loc.offset));
  return `#/data?${q.toString()}`;
}

export function parseDataHash(query: string): Location | undefined {
  const q = new URLSearchParams(query);
  const steps = parsePath(q.get("path") ?? "");
  if (steps === undefined) return undefined;
  const loc: Location = { steps };
  const c = q.get("c");
  if (c !== null) loc.collection = c;
  const prefix = q.get("prefix");
  if (prefix) loc.prefix = prefix;
  const offset = Number(q.get("offset") ?? "0");
  if (offset > 0) loc.offset = offset;
  return loc;
}

/** The node type at the end of `steps`, or why there is none. */
export function typeAt(schema: Schema, steps: readonly Step[]): SType {
  let t = schema.root;
  for (const s of steps) {
    const name = s.k === "state" ? s.stategroup : s.name;
    const p = t.properties.find((x) => x.name === name);
    let next: SType | undefined;
    if (s.k === "state") next = p?.states?.find((x) => x.name === s.state)?.node;
    else if (s.k === "group" && p?.kind === "group") next = p.node;
    else if (s.k === "entry" && (p?.kind === "dictionary" || p?.kind === "matrix")) next = p.node;
    if (next === undefined) throw new Error(`no ${s.k} ${quoteName(name)} in ${t.path}`);
    t = next;
  }
  return t;
}

/** The steps to the node of type `place` whose entries have the keys `keys` (in order). */
export function stepsFor(place: readonly Place[], keys: readonly string[]): Step[] {
  const steps: Step[] = [];
  let k = 0;
  for (const p of place) {
    if (p.k === "entry") {
      steps.push({ k: "entry", name: p.name, matrix: p.matrix, key: keys.slice(k, k + p.arity) });
      k += p.arity;
    } else steps.push(p.k === "group" ? { k: "group", name: p.name } : { ...p });
  }
  return steps;
}

function keysOf(v: JsonValue | undefined): string[] {
  if (Array.isArray(v)) return v.flatMap((x) => keysOf(x));
  return v === null || v === undefined ? [] : [String(v)];
}

/** The steps up to and including the last entry (a link's target in the browser). */
function toEntry(steps: Step[]): Step[] {
  let last = -1;
  steps.forEach((s, i) => {
    if (s.k === "entry") last = i;
  });
  return steps.slice(0, last + 1);
}

export class DataView {
  constructor(
    private readonly api: Api,
    private readonly schema: Schema,
    private readonly go: (hash: string) => void,
  ) {}

  render(loc: Location): HTMLElement {
    const view = h("div", { class: "data-view" });
    view.append(this.breadcrumb(loc));
    const body = h("div", { class: "data-body" }, h("p", { class: "muted" }, "Loading…"));
    view.append(body);
    const load = loc.collection !== undefined ? this.table(loc) : this.node(loc);
    load.then(
      (el) => clear(body, el),
      (e: unknown) => clear(body, h("p", { class: "error", role: "alert" }, (e as Error).message)),
    );
    return view;
  }

  private link(steps: Step[], label: string, collection?: string): HTMLAnchorElement {
    const loc: Location = { steps };
    if (collection !== undefined) loc.collection = collection;
    return h("a", { href: dataHash(loc) }, label);
  }

  private breadcrumb(loc: Location): HTMLElement {
    const nav = h("nav", { class: "breadcrumb", "aria-label": "Path" });
    const items: HTMLElement[] = [this.link([], "root")];
    loc.steps.forEach((s, i) => {
      const upTo = loc.steps.slice(0, i + 1);
      if (s.k === "entry") {
        items.push(this.link(loc.steps.slice(0, i), `${s.matrix ? "%" : "."} ${quoteName(s.name)}`, s.name));
        items.push(this.link(upTo, keyText(s.key)));
      } else if (s.k === "group") items.push(this.link(upTo, `+ ${quoteName(s.name)}`));
      else items.push(this.link(upTo, `? ${quoteName(s.stategroup)} * ${quoteName(s.state)}`));
    });
    if (loc.collection !== undefined) {
      const type = typeAt(this.schema, loc.steps);
      const p = type.properties.find((x) => x.name === loc.collection);
      items.push(h("span", {}, `${p?.kind === "matrix" ? "%" : "."} ${quoteName(loc.collection)}`));
    }
    items.forEach((el, i) => {
      if (i > 0) nav.append(h("span", { class: "sep", "aria-hidden": "true" }, " › "));
      nav.append(el);
    });
    const last = nav.lastElementChild;
    if (last !== null) last.setAttribute("aria-current", "page");
    const path = pathText(loc.steps);
    nav.append(h("code", { class: "path-text" }, path === "" ? "(root)" : path));
    return nav;
  }

  // ---- a node ----

  private async node(loc: Location): Promise<HTMLElement> {
    const type = typeAt(this.schema, loc.steps);
    const path = pathText(loc.steps);
    const el = h("div", { class: "node" });
    const form = h("dl", { class: "form" });
    await this.fields(path, type, [], form);
    const title = loc.steps.length === 0 ? "root" : path;
    el.append(
      h(
        "div",
        { class: "node-head" },
        h("h2", {}, title),
        h("span", { class: "muted" }, loc.steps.length === 0 ? "the root node" : type.path),
        h(
          "button",
          {
            type: "button",
            class: "small",
            onclick: () => {
              sessionStorage.setItem("espalier.watch", path);
              this.go("#/live");
            },
          },
          "Watch live",
        ),
      ),
    );
    if (form.childElementCount > 0) el.append(h("section", {}, h("h3", {}, "Properties"), form));
    const collections = await this.collections(path, type, []);
    if (collections.childElementCount > 0) el.append(h("section", {}, h("h3", {}, "Collections"), collections));
    if (loc.steps.length > 0 && loc.steps[loc.steps.length - 1]?.k === "entry") {
      el.append(await this.incoming(loc.steps, type));
    }
    return el;
  }

  /** The scalar properties of `type` (through groups and current states), read from the node
   * at `path` by one collection query per level; `via` is the projection path so far. */
  private async fields(path: string, type: SType, via: string[], into: HTMLElement): Promise<void> {
    const scalars: { prop: SProp; via: string[] }[] = [];
    const collect = (t: SType, v: string[]): void => {
      for (const p of t.properties) {
        if (SCALARS.has(p.kind)) scalars.push({ prop: p, via: v });
        else if (p.kind === "group" && p.node !== undefined) collect(p.node, [...v, `+ ${quoteName(p.name)}`]);
      }
    };
    collect(type, via);
    if (scalars.length === 0) return;
    const projections = scalars.map(
      (s, i) => `'${i}' -> ${[...s.via, `${s.prop.kind} : ${quoteName(s.prop.name)}`].join(" ")}`,
    );
    const rows = await this.api.db.query(`collection ${path} select ${projections.join(" ")}`);
    const values = rows.rows[0]?.values ?? [];
    for (const [i, s] of scalars.entries()) {
      const value = values[i];
      const label = [...s.via.map((v) => v.replace(/^\+ /, "")), quoteName(s.prop.name)].join(" › ");
      const dd = h("dd", {});
      if (s.prop.kind === "reference" && s.prop.target !== undefined) {
        const place = this.schema.places.get(s.prop.target.type) ?? [];
        dd.append(
          h("a", { href: dataHash({ steps: stepsFor(place, keysOf(value)) }), class: "ref" }, formatValue(value)),
        );
      } else dd.append(h("span", { class: `value value-${s.prop.kind}` }, formatValue(value)));
      if (s.prop.derived !== undefined) dd.append(" ", h("span", { class: "muted" }, `(${s.prop.derived})`));
      into.append(h("dt", {}, label), dd);
      // The current state's own properties, one level down.
      if (s.prop.kind === "stategroup" && typeof value === "string") {
        const state = s.prop.states?.find((x) => x.name === value);
        if (state !== undefined && state.node.properties.length > 0) {
          const inner = h("dl", { class: "form nested" });
          await this.fields(path, state.node, [...s.via, `? ${quoteName(s.prop.name)} * ${quoteName(value)}`], inner);
          if (inner.childElementCount > 0) dd.append(inner);
        }
      }
    }
  }

  /** The node's collections (through groups), each a link with its count. */
  private async collections(path: string, type: SType, via: Step[]): Promise<HTMLElement> {
    const list = h("ul", { class: "collections" });
    const found: { prop: SProp; via: Step[] }[] = [];
    const collect = (t: SType, v: Step[]): void => {
      for (const p of t.properties) {
        if (p.kind === "dictionary" || p.kind === "matrix") found.push({ prop: p, via: v });
        else if (p.kind === "group" && p.node !== undefined) collect(p.node, [...v, { k: "group", name: p.name }]);
      }
    };
    collect(type, via);
    const steps = parsePath(path) ?? [];
    const counts = await Promise.all(
      found.map(async (f) => {
        const owner = pathText([...steps, ...f.via]);
        const sym = f.prop.kind === "matrix" ? "%" : ".";
        const r = await this.api.db.query(`collection ${owner} select ${sym} ${quoteName(f.prop.name)} limit 0`);
        return r.total;
      }),
    );
    found.forEach((f, i) => {
      const label = `${f.prop.kind === "matrix" ? "%" : "."} ${quoteName(f.prop.name)}`;
      list.append(
        h(
          "li",
          {},
          this.link([...steps, ...f.via], label, f.prop.name),
          " ",
          h("span", { class: "count" }, `${counts[i] ?? 0} ${counts[i] === 1 ? "entry" : "entries"}`),
          f.prop.target !== undefined ? h("span", { class: "muted" }, ` → ${f.prop.target.path}`) : null,
        ),
      );
    });
    return list;
  }

  /** Who refers to this entry: for each reference or matrix that targets its type, the nodes
   * whose link points here (`collection match t in <path> s in t < 'r' select 's' -> s`). */
  private async incoming(steps: Step[], type: SType): Promise<HTMLElement> {
    const section = h("section", { class: "incoming" }, h("h3", {}, "Referred to by"));
    const referrers = this.schema.referrers.get(type.id) ?? [];
    if (referrers.length === 0) {
      section.append(h("p", { class: "muted" }, "No reference in the schema points at this type."));
      return section;
    }
    const path = pathText(steps);
    const list = h("ul", { class: "referrers" });
    let any = false;
    const results = await Promise.all(
      referrers.map(async (r) => {
        const text = `collection match t in ${path} s in t < ${quoteName(r.prop.name)} select 's' -> s limit 20`;
        try {
          return { r, rows: await this.api.db.query(text) };
        } catch (e) {
          return { r, error: (e as Error).message };
        }
      }),
    );
    for (const res of results) {
      const place = this.schema.places.get(res.r.holder.id) ?? [];
      const head = `${quoteName(res.r.prop.name)} of ${res.r.holder.path}`;
      if ("error" in res) {
        list.append(h("li", {}, head, ": ", h("span", { class: "error" }, res.error ?? "")));
        continue;
      }
      const rows: QueryResult = res.rows;
      if (rows.total === 0) continue;
      any = true;
      const links = rows.rows.map((row) => {
        const target = stepsFor(place, keysOf(row.values[0]));
        return h("li", {}, h("a", { href: dataHash({ steps: toEntry(target) }), class: "ref" }, pathText(target)));
      });
      const more =
        rows.total > rows.rows.length ? h("li", { class: "muted" }, `… ${rows.total - rows.rows.length} more`) : null;
      list.append(h("li", {}, `${head} (${rows.total})`, h("ul", {}, ...links, more)));
    }
    section.append(any ? list : h("p", { class: "muted" }, "Nothing refers to this entry."));
    return section;
  }

  // ---- a collection ----

  private async table(loc: Location): Promise<HTMLElement> {
    const owner = typeAt(this.schema, loc.steps);
    const coll = owner.properties.find((p) => p.name === loc.collection);
    if (coll?.node === undefined || (coll.kind !== "dictionary" && coll.kind !== "matrix")) {
      throw new Error(`${owner.path} has no collection ${quoteName(loc.collection ?? "")}`);
    }
    const entryType = coll.node;
    const columns = entryType.properties.filter((p) => SCALARS.has(p.kind));
    const offset = loc.offset ?? 0;
    const path = pathText(loc.steps);
    let page: Page;
    if (loc.prefix) {
      page = await this.api.endpoint<Page>("/v1/entries", {
        path,
        collection: coll.name,
        prefix: loc.prefix,
        offset,
        limit: PAGE_SIZE,
      });
    } else {
      const sym = coll.kind === "matrix" ? "%" : ".";
      const projections = columns.map((p) => `${quoteName(p.name)} -> ${p.kind} : ${quoteName(p.name)}`).join(" ");
      page = await this.api.db.query(
        `collection ${path} select ${sym} ${quoteName(coll.name)} ${projections} limit ${PAGE_SIZE} offset ${offset}`,
      );
    }
    const el = h("div", { class: "collection" });
    const filter = h("input", {
      type: "search",
      placeholder: "key starts with…",
      "aria-label": "Filter by key prefix",
      value: loc.prefix ?? "",
    });
    el.append(
      h(
        "form",
        {
          class: "filter",
          role: "search",
          onsubmit: (e: Event) => {
            e.preventDefault();
            const next: Location = { ...loc, prefix: filter.value };
            delete next.offset;
            this.go(dataHash(next));
          },
        },
        h("h2", {}, `${coll.kind === "matrix" ? "%" : "."} ${quoteName(coll.name)}`),
        filter,
        h("button", { type: "submit" }, "Filter"),
      ),
    );
    const table = h("table", { class: "rows", "aria-label": `Entries of ${coll.name}` });
    const head = h("tr", {}, h("th", { scope: "col" }, "key"));
    for (const c of columns) head.append(h("th", { scope: "col" }, c.name));
    table.append(h("thead", {}, head));
    const body = h("tbody");
    for (const row of page.rows) {
      const target = [
        ...loc.steps,
        { k: "entry", name: coll.name, key: row.key, matrix: coll.kind === "matrix" } as Step,
      ];
      const tr = h("tr", {
        tabindex: 0,
        class: "link-row",
        onkeydown: (e: Event) => {
          if ((e as KeyboardEvent).key === "Enter" && e.target === tr) this.go(dataHash({ steps: target }));
        },
      });
      tr.append(h("td", {}, h("a", { href: dataHash({ steps: target }), tabindex: -1 }, keyText(row.key))));
      columns.forEach((c, i) => {
        const v = row.values[i];
        if (c.kind === "reference" && c.target !== undefined) {
          const place = this.schema.places.get(c.target.type) ?? [];
          tr.append(
            h(
              "td",
              {},
              h("a", { href: dataHash({ steps: stepsFor(place, keysOf(v)) }), class: "ref" }, formatValue(v)),
            ),
          );
        } else tr.append(h("td", { class: `value-${c.kind}` }, formatValue(v)));
      });
      body.append(tr);
    }
    table.append(body);
    keyboardRows(table);
    el.append(table);
    if (page.rows.length === 0) el.append(h("p", { class: "muted" }, "No entries."));
    const from = page.total === 0 ? 0 : offset + 1;
    const to = offset + page.rows.length;
    const pager = h("div", { class: "pager" }, h("span", { class: "range" }, `${from}–${to} of ${page.total}`));
    const move = (o: number): void => {
      const next: Location = { ...loc, offset: o };
      if (o === 0) delete next.offset;
      this.go(dataHash(next));
    };
    pager.append(
      h(
        "button",
        { type: "button", disabled: offset === 0, onclick: () => move(Math.max(0, offset - PAGE_SIZE)) },
        "‹ Previous",
      ),
      h("button", { type: "button", disabled: to >= page.total, onclick: () => move(offset + PAGE_SIZE) }, "Next ›"),
    );
    el.append(pager);
    return el;
  }
}
