// The schema as GET /v1/schema gives it, indexed for the views: node types by id, where each
// type sits in the tree, and which references point at it.

import { h, clear } from "./dom.js";
import { quoteName, tokenize } from "./lang.js";

export interface SType {
  id: number;
  path: string;
  properties: SProp[];
}

export interface SProp {
  name: string;
  kind: "number" | "text" | "group" | "dictionary" | "matrix" | "reference" | "stategroup";
  node?: SType;
  target?: { type: number; path: string; text: string; key_arity: number };
  states?: { name: string; node: SType }[];
  derived?: string;
}

export interface SchemaJson {
  text: string;
  root: SType;
  commands: { name: string; params: { name: string; kind: string }[]; body: string }[];
  indexes: {
    name: string;
    collection: string;
    collection_name: string;
    property: string;
    kind: string;
    unique: boolean;
  }[];
}

/** One step of a node type's place in the tree. */
export type Place =
  | { k: "entry"; name: string; matrix: boolean; arity: number }
  | { k: "group"; name: string }
  | { k: "state"; stategroup: string; state: string };

/** A property that links to entries of a type: the reference or matrix, and the node type a
 * pattern variable bound through `< 'name'` has (the reference's owner, or the matrix entry). */
export interface Referrer {
  prop: SProp;
  holder: SType;
}

export const SCALARS = new Set(["number", "text", "reference", "stategroup"]);

export class Schema {
  readonly byId = new Map<number, SType>();
  readonly places = new Map<number, Place[]>();
  readonly referrers = new Map<number, Referrer[]>();
  readonly names = new Set<string>();

  constructor(readonly json: SchemaJson) {
    this.index(json.root, []);
    for (const c of json.commands) this.names.add(c.name);
  }

  private index(t: SType, place: Place[]): void {
    this.byId.set(t.id, t);
    this.places.set(t.id, place);
    for (const p of t.properties) {
      this.names.add(p.name);
      if (p.target !== undefined) {
        const holder = p.kind === "matrix" && p.node !== undefined ? p.node : t;
        const list = this.referrers.get(p.target.type) ?? [];
        list.push({ prop: p, holder });
        this.referrers.set(p.target.type, list);
      }
      if (p.node !== undefined) {
        const step: Place =
          p.kind === "group"
            ? { k: "group", name: p.name }
            : { k: "entry", name: p.name, matrix: p.kind === "matrix", arity: p.target?.key_arity ?? 1 };
        this.index(p.node, [...place, step]);
      }
      for (const s of p.states ?? []) {
        this.names.add(s.name);
        this.index(s.node, [...place, { k: "state", stategroup: p.name, state: s.name }]);
      }
    }
  }

  get root(): SType {
    return this.json.root;
  }

  type(id: number): SType {
    const t = this.byId.get(id);
    if (t === undefined) throw new Error(`no node type ${id}`);
    return t;
  }
}

/** The schema view: the node types as a tree beside the schema text. */
export function schemaView(schema: Schema, go: (hash: string) => void): HTMLElement {
  const tree = h("div", { class: "schema-tree", role: "region", "aria-label": "Node types" });
  const typeTree = (t: SType): HTMLElement => {
    const list = h("ul");
    for (const p of t.properties) {
      const kind = p.derived !== undefined ? `${p.kind}, derived` : p.kind;
      const item = h(
        "li",
        { id: `type-${t.id}-${p.name}` },
        h("span", { class: "prop-name" }, quoteName(p.name)),
        " ",
        h("span", { class: `kind kind-${p.kind}` }, kind),
      );
      if (p.derived !== undefined) item.append(" ", h("code", { class: "derived" }, p.derived));
      if (p.target !== undefined) {
        const target = p.target.type;
        item.append(
          " → ",
          h(
            "a",
            {
              href: `#type-${target}`,
              class: "target",
              onclick: (e: Event) => {
                e.preventDefault();
                document.getElementById(`type-${target}`)?.scrollIntoView({ block: "center" });
                document.getElementById(`type-${target}`)?.focus();
              },
            },
            p.target.path,
          ),
          " ",
          h("code", {}, p.target.text),
        );
      }
      const indexes = schema.json.indexes.filter(
        (i) => p.node !== undefined && i.collection === p.node.path && i.collection_name === p.name,
      );
      for (const i of indexes) {
        item.append(
          " ",
          h(
            "span",
            { class: "index" },
            `index ${quoteName(i.name)} on ${quoteName(i.property)} ${i.kind}${i.unique ? " unique" : ""}`,
          ),
        );
      }
      if (p.node !== undefined) {
        item.append(h("span", { class: "type-anchor", id: `type-${p.node.id}`, tabindex: -1 }), typeTree(p.node));
      }
      if (p.states !== undefined) {
        const states = h("ul");
        for (const s of p.states) {
          states.append(
            h(
              "li",
              {},
              h("span", { class: "state-name" }, quoteName(s.name)),
              " ",
              h("span", { class: "kind" }, "state"),
              s.node.properties.length > 0 ? typeTree(s.node) : null,
            ),
          );
        }
        item.append(states);
      }
      list.append(item);
    }
    return list;
  };
  tree.append(h("div", { class: "root-label" }, "root"), typeTree(schema.root));
  const commands = h("section", { class: "commands" }, h("h3", {}, "Commands"));
  for (const c of schema.json.commands) {
    commands.append(
      h(
        "div",
        { class: "command" },
        h("span", { class: "prop-name" }, quoteName(c.name)),
        " ( ",
        ...c.params.flatMap((p) => [h("span", {}, `${quoteName(p.name)} -> ${p.kind}`), " "]),
        ")",
        " ",
        h(
          "button",
          {
            type: "button",
            class: "small",
            onclick: () => {
              const args = c.params.map((p) => `${quoteName(p.name)} -> ${p.kind === "number" ? "0" : '""'}`);
              sessionStorage.setItem("espalier.draft", `command ${quoteName(c.name)} ( ${args.join(" ")} )`);
              go("#/query");
            },
          },
          "Try",
        ),
        h("pre", { class: "code" }, highlight(c.body)),
      ),
    );
  }
  if (schema.json.commands.length === 0) commands.append(h("p", {}, "None."));
  const indexes = h("section", {}, h("h3", {}, "Indexes"));
  for (const i of schema.json.indexes) {
    indexes.append(
      h(
        "div",
        {},
        `${quoteName(i.name)}: ${i.collection} on ${quoteName(i.property)}, ${i.kind}${i.unique ? ", unique" : ""}`,
      ),
    );
  }
  if (schema.json.indexes.length === 0) indexes.append(h("p", {}, "None."));
  const text = h(
    "pre",
    { class: "code schema-text", tabindex: 0, "aria-label": "Schema text" },
    highlight(schema.json.text),
  );
  return h(
    "div",
    { class: "schema-view" },
    h("div", { class: "panel" }, h("h2", {}, "Node types"), tree, commands, indexes),
    h("div", { class: "panel" }, h("h2", {}, "Schema text"), text),
  );
}

/** The text with each token in a span of its kind's class. */
export function highlight(src: string, errorAt?: number): DocumentFragment {
  const out = document.createDocumentFragment();
  for (const t of tokenize(src)) {
    if (t.kind === "space") {
      out.append(t.text);
      continue;
    }
    const cls = `tok-${t.kind}${errorAt !== undefined && errorAt >= t.start && errorAt < t.end ? " tok-error" : ""}`;
    out.append(h("span", { class: cls }, t.text));
  }
  if (errorAt !== undefined && errorAt >= src.length) out.append(h("span", { class: "tok-error" }, " "));
  return out;
}

export function renderInto(el: HTMLElement, frag: DocumentFragment): void {
  clear(el);
  el.append(frag);
}
