// Builds the console into crates/server/console-dist/ (committed; the server embeds it, so a
// cargo build needs no npm): src/main.ts with the TypeScript client bundled into one
// console.js by esbuild, console.css minified, index.html copied.
//
//   node build.mjs           write the files
//   node build.mjs --check   fail if rebuilding would change the committed files

import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const HERE = dirname(fileURLToPath(import.meta.url));
const OUT = join(HERE, "..", "crates", "server", "console-dist");
const check = process.argv.includes("--check");

const common = {
  bundle: true,
  minify: true,
  write: false,
  legalComments: "eof",
  charset: "utf8",
  logLevel: "warning",
  absWorkingDir: HERE,
};

const js = await esbuild.build({
  ...common,
  entryPoints: [join(HERE, "src", "main.ts")],
  outfile: join(OUT, "console.js"),
  format: "esm",
  platform: "browser",
  target: ["es2022", "chrome110", "firefox110", "safari16"],
  // The client's Node-only paths (it checks where it runs before loading them).
  external: ["node:zlib", "ws", "@bokuweb/zstd-wasm"],
  // One copy of msgpack, the console's own, whatever clients/typescript has installed.
  alias: { "@msgpack/msgpack": join(HERE, "node_modules", "@msgpack", "msgpack") },
});
const css = await esbuild.build({
  ...common,
  entryPoints: [join(HERE, "src", "console.css")],
  outfile: join(OUT, "console.css"),
  loader: { ".css": "css" },
});

const files = {
  "index.html": readFileSync(join(HERE, "src", "index.html")),
  "console.js": Buffer.from(js.outputFiles[0].contents),
  "console.css": Buffer.from(css.outputFiles[0].contents),
};

let stale = [];
for (const [name, bytes] of Object.entries(files)) {
  const path = join(OUT, name);
  if (check) {
    let committed;
    try {
      committed = readFileSync(path);
    } catch {
      committed = Buffer.alloc(0);
    }
    if (!committed.equals(bytes)) stale.push(name);
  } else {
    mkdirSync(OUT, { recursive: true });
    writeFileSync(path, bytes);
  }
  console.log(`${check ? "checked" : "wrote"} crates/server/console-dist/${name} (${bytes.length} bytes)`);
}
if (stale.length > 0) {
  console.error(
    `crates/server/console-dist/ is not what console/src builds (${stale.join(", ")}): ` +
      "run `npm run build` in console/ and commit the result",
  );
  process.exit(1);
}
