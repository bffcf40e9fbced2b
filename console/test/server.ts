// A real `espalier serve` for the console's tests: a temporary database with the demo data on
// a free 127.0.0.1 port, with tokens. The binary is $ESPALIER_BIN (clients/test sets it), or
// the workspace's target/debug/espalier. (As clients/typescript/test/server.ts, which the
// client's tests use; this one also restarts on the same port.)

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../../../", import.meta.url)); // from console/build/test/
const START_TIMEOUT_MS = 30_000;

export function espalierBin(): string {
  const path = process.env["ESPALIER_BIN"] ?? join(ROOT, "target", "debug", "espalier");
  if (!existsSync(path))
    throw new Error(`no espalier binary at ${path}: run \`cargo build -p espalier\` or set ESPALIER_BIN`);
  return path;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const address = s.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export class Server {
  readonly dir: string;
  readonly db: string;
  port = 0;
  private proc: ChildProcess | undefined;
  private exited: Promise<number | null> | undefined;

  private constructor(readonly tokens: Record<string, string>) {
    this.dir = mkdtempSync(join(tmpdir(), "espalier-console-test-"));
    this.db = join(this.dir, "db");
  }

  static secret(name: string): string {
    return `${name}-secret-0123456789`;
  }

  /** Creates the database (demo schema and data) and starts serving it. */
  static async start(tokens: Record<string, string> = {}): Promise<Server> {
    const s = new Server(tokens);
    const init = spawnSync(espalierBin(), ["--db", s.db, "init", "--demo"], { encoding: "utf8", timeout: 60_000 });
    if (init.status !== 0) throw new Error(`espalier init failed: ${init.stderr}`);
    s.port = await freePort();
    await s.run();
    return s;
  }

  get http(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  output(): string {
    try {
      return readFileSync(join(this.dir, "server.log"), "utf8").slice(-4000);
    } catch {
      return "";
    }
  }

  async run(): Promise<void> {
    const args = ["--db", this.db, "--durability", "none", "serve", "--listen", `127.0.0.1:${this.port}`];
    for (const [name, role] of Object.entries(this.tokens))
      args.push("--token", `${name}:${role}:${Server.secret(name)}`);
    const log = openSync(join(this.dir, "server.log"), "a");
    const proc = spawn(espalierBin(), args, { stdio: ["ignore", log, log] });
    closeSync(log);
    this.proc = proc;
    this.exited = new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) throw new Error(`espalier serve exited with ${proc.exitCode}:\n${this.output()}`);
      try {
        const res = await fetch(`${this.http}/v1/health`, { signal: AbortSignal.timeout(1000) });
        if (res.status === 200) return;
      } catch {
        // not up yet
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    await this.stop();
    throw new Error(`espalier serve did not answer /v1/health within ${START_TIMEOUT_MS} ms:\n${this.output()}`);
  }

  async stop(): Promise<void> {
    const proc = this.proc;
    if (proc === undefined) return;
    this.proc = undefined;
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
      await this.exited;
      clearTimeout(timer);
    }
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.run();
  }

  /** Runs an instruction over HTTP with a token's secret; the reply message. */
  async execute(text: string, token: string): Promise<Record<string, unknown>> {
    const res = await fetch(`${this.http}/v1/execute`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
      body: JSON.stringify({ text }),
    });
    return (await res.json()) as Record<string, unknown>;
  }

  async cleanup(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
