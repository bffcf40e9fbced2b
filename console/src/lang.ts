// The instruction language's tokens (docs/instructions.md, "Tokens"), for highlighting,
// completion and the data browser's node paths.

export type TokenKind =
  "name" | "string" | "int" | "param" | "keyword" | "word" | "punct" | "comment" | "space" | "bad";

export interface Token {
  kind: TokenKind;
  text: string;
  start: number;
  end: number;
}

export const KEYWORDS = new Set([
  "update",
  "collection",
  "select",
  "limit",
  "offset",
  "get",
  "command",
  "transaction",
  "number",
  "integer",
  "text",
  "reference",
  "group",
  "dictionary",
  "matrix",
  "stategroup",
  "set",
  "to",
  "remove",
  "explain",
  "match",
  "in",
  "where",
  "and",
  "or",
  "not",
  "exists",
  "distinct",
  "order",
  "by",
  "asc",
  "desc",
  "count",
  "sum",
  "min",
  "max",
  "avg",
  "shortest",
  "repeat",
  "index",
  "random",
]);

const PUNCT2 = ["->", "==", "!=", "<=", ">=", ".^", "%^", "+^", "?^", "*^"];

/** Splits `src` into tokens, whitespace and comments included, so that the tokens' texts put
 * together give `src` back. An unterminated name, string or comment runs to the end. */
export function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  const push = (kind: TokenKind, end: number): void => {
    out.push({ kind, text: src.slice(i, end), start: i, end });
    i = end;
  };
  while (i < src.length) {
    const c = src[i] ?? "";
    const rest = src.slice(i);
    if (/\s/.test(c)) {
      const m = /^\s+/.exec(rest);
      push("space", i + (m?.[0].length ?? 1));
    } else if (rest.startsWith("//")) {
      const nl = src.indexOf("\n", i);
      push("comment", nl < 0 ? src.length : nl);
    } else if (rest.startsWith("/*")) {
      const close = src.indexOf("*/", i + 2);
      push("comment", close < 0 ? src.length : close + 2);
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < src.length && src[j] !== c) j += src[j] === "\\" ? 2 : 1;
      push(c === "'" ? "name" : "string", Math.min(j + 1, src.length));
    } else if (/[0-9]/.test(c) || (c === "-" && /^-[0-9]/.test(rest))) {
      const m = /^-?[0-9]+/.exec(rest);
      push("int", i + (m?.[0].length ?? 1));
    } else if (c === "$") {
      const m = /^\$[A-Za-z0-9_]*/.exec(rest);
      push("param", i + (m?.[0].length ?? 1));
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(rest);
      const word = m?.[0] ?? c;
      push(KEYWORDS.has(word) ? "keyword" : "word", i + word.length);
    } else {
      const two = PUNCT2.find((p) => rest.startsWith(p));
      if (two !== undefined) push("punct", i + 2);
      else push(/[.%+?*><:()[\],^=!-]/.test(c) ? "punct" : "bad", i + 1);
    }
  }
  return out;
}

/** The value of a name or string token (quotes off, escapes read). */
export function unquote(token: string): string {
  const body = token.slice(1, token.length > 1 && token.endsWith(token[0] ?? "") ? -1 : undefined);
  return body.replace(/\\(u\{([0-9a-fA-F]+)\}|.)/g, (_, e: string, hex: string | undefined) => {
    if (hex !== undefined) return String.fromCodePoint(parseInt(hex, 16));
    return ({ n: "\n", t: "\t", r: "\r" } as Record<string, string>)[e] ?? e;
  });
}

export const quoteName = (name: string): string => `'${name.replace(/[\\']/g, (c) => `\\${c}`)}'`;

export function quoteString(s: string): string {
  const body = s.replace(/[\\"\n\t\r]/g, (c) => ({ "\n": "\\n", "\t": "\\t", "\r": "\\r" })[c] ?? `\\${c}`);
  return `"${body}"`;
}

/** A step of a node path: into an entry (by its key), a group, or the current state. */
export type Step =
  | { k: "entry"; name: string; key: string[]; matrix: boolean }
  | { k: "group"; name: string }
  | { k: "state"; stategroup: string; state: string };

export function keyText(key: string[]): string {
  return key.length === 1 ? quoteString(key[0] ?? "") : `[ ${key.map(quoteString).join(", ")} ]`;
}

export function stepText(s: Step): string {
  switch (s.k) {
    case "entry":
      return `${s.matrix ? "%" : "."} ${quoteName(s.name)} : ${keyText(s.key)}`;
    case "group":
      return `+ ${quoteName(s.name)}`;
    case "state":
      return `? ${quoteName(s.stategroup)} * ${quoteName(s.state)}`;
  }
}

export const pathText = (steps: readonly Step[]): string => steps.map(stepText).join(" ");

/** Reads a node path written as `pathText` writes it; `undefined` if it is not one. */
export function parsePath(src: string): Step[] | undefined {
  const t = tokenize(src).filter((x) => x.kind !== "space" && x.kind !== "comment");
  const steps: Step[] = [];
  let i = 0;
  const next = (): Token | undefined => t[i++];
  const expect = (kind: TokenKind, text?: string): Token | undefined => {
    const tok = next();
    return tok !== undefined && tok.kind === kind && (text === undefined || tok.text === text) ? tok : undefined;
  };
  while (i < t.length) {
    const op = next();
    if (op === undefined || op.kind !== "punct") return undefined;
    const name = expect("name");
    if (name === undefined) return undefined;
    if (op.text === "+") {
      steps.push({ k: "group", name: unquote(name.text) });
    } else if (op.text === "?") {
      if (expect("punct", "*") === undefined) return undefined;
      const state = expect("name");
      if (state === undefined) return undefined;
      steps.push({ k: "state", stategroup: unquote(name.text), state: unquote(state.text) });
    } else if (op.text === "." || op.text === "%") {
      if (expect("punct", ":") === undefined) return undefined;
      const key: string[] = [];
      const first = next();
      if (first?.kind === "string") key.push(unquote(first.text));
      else if (first?.kind === "punct" && first.text === "[") {
        for (;;) {
          const s = expect("string");
          if (s === undefined) return undefined;
          key.push(unquote(s.text));
          const sep = next();
          if (sep?.text === "]") break;
          if (sep?.text !== ",") return undefined;
        }
      } else return undefined;
      steps.push({ k: "entry", name: unquote(name.text), key, matrix: op.text === "%" });
    } else return undefined;
  }
  return steps;
}

/** `line:column` at the start of an error message (possibly after `syntax error: `). */
export function errorPosition(message: string): { line: number; column: number } | undefined {
  const m = /(?:^|: )(\d+):(\d+): /.exec(message);
  if (m === null) return undefined;
  return { line: Number(m[1]), column: Number(m[2]) };
}

/** The offset in `src` of a 1-based line and column (columns count characters). */
export function offsetOf(src: string, line: number, column: number): number {
  let offset = 0;
  for (let l = 1; l < line; l++) {
    const nl = src.indexOf("\n", offset);
    if (nl < 0) return src.length;
    offset = nl + 1;
  }
  return Math.min(offset + column - 1, src.length);
}
