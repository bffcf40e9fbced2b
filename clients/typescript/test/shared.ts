// What several test files read: the vector directory and the invalid frames.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import type { Compression, Encoding } from "../src/index.js";

export const VECTORS =
  process.env["ESPALIER_VECTORS"] ?? fileURLToPath(new URL("../../../../protocol/vectors/", import.meta.url));

export interface InvalidCase {
  name: string;
  encoding: Encoding;
  compression: Compression;
  frame: "text" | "binary";
  text?: string;
  hex?: string;
  code: string;
  id?: number;
}

export const INVALID_CASES = JSON.parse(readFileSync(join(VECTORS, "invalid", "cases.json"), "utf8")) as InvalidCase[];
