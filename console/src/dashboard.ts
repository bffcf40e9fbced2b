// The dashboard: the server's own figures (GET /v1/figures) every second, as small charts of
// the last two minutes: sessions and subscriptions, requests per second, latency (median and
// 99th percentile of each second's requests), commits per second and their mean batch size.

import type { Api } from "./api.js";
import { clear, h, svg } from "./dom.js";

interface Counter {
  count: number;
  micros: number;
  buckets: number[];
}

export interface Figures {
  uptime_ms: number;
  version: number;
  sessions: number;
  subscriptions: number;
  history_from: number;
  requests: Record<string, Counter>;
  bucket_bounds_us: number[];
  commits: { commits: number; requests: number; nanos: number };
}

interface Point {
  at: number;
  sessions: number;
  subscriptions: number;
  rate: number;
  p50: number;
  p99: number;
  commits: number;
  batch: number;
  version: number;
}

const KEEP = 120;

/** The latency (ms) under which `q` of the requests counted between two readings fell. */
export function percentile(before: Figures, after: Figures, q: number): number {
  const bounds = after.bucket_bounds_us;
  const delta = bounds.map(() => 0);
  for (const [kind, c] of Object.entries(after.requests)) {
    const b = before.requests[kind];
    c.buckets.forEach((n, i) => (delta[i] = (delta[i] ?? 0) + n - (b?.buckets[i] ?? 0)));
  }
  const total = delta.reduce((a, b) => a + b, 0);
  if (total === 0) return 0;
  let seen = 0;
  for (let i = 0; i < delta.length; i++) {
    seen += delta[i] ?? 0;
    if (seen >= q * total) return (bounds[i] ?? 0) / 1000;
  }
  return (bounds[bounds.length - 1] ?? 0) / 1000;
}

const requestsOf = (f: Figures): number => Object.values(f.requests).reduce((a, c) => a + c.count, 0);

function chart(points: Point[], series: { key: keyof Point; label: string; cls: string }[], unit: string): SVGElement {
  const width = 360;
  const height = 90;
  const max = Math.max(1e-9, ...points.flatMap((p) => series.map((s) => Number(p[s.key]))));
  const g = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    class: "chart",
    role: "img",
    "aria-label": series.map((s) => s.label).join(", "),
  });
  g.append(svg("line", { x1: 0, y1: height - 1, x2: width, y2: height - 1, class: "axis" }));
  // The newest point at the right edge; at least the last 30 seconds across the width.
  const span = Math.max(points.length, 30);
  for (const s of series) {
    const coords = points.map((p, i) => {
      const x = (i + span - points.length) * (width / (span - 1));
      const y = height - 4 - (Number(p[s.key]) / max) * (height - 12);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    if (coords.length > 0) g.append(svg("polyline", { points: coords.join(" "), class: `line ${s.cls}` }));
  }
  const top = svg("text", { x: 4, y: 12, class: "chart-max" });
  top.textContent = `${max < 10 ? max.toFixed(2) : Math.round(max)} ${unit}`;
  g.append(top);
  return g;
}

export class Dashboard {
  readonly el: HTMLElement;
  private readonly grid: HTMLElement;
  private points: Point[] = [];
  private last: Figures | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private error: HTMLElement;

  constructor(private readonly api: Api) {
    this.grid = h("div", { class: "dash-grid" });
    this.error = h("p", { class: "error", role: "status" });
    this.el = h("div", { class: "dashboard" }, h("h2", {}, "Server"), this.error, this.grid);
  }

  start(): void {
    if (this.timer !== undefined) return;
    void this.tick();
    this.timer = setInterval(() => void this.tick(), 1000);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private async tick(): Promise<void> {
    let f: Figures;
    try {
      f = await this.api.endpoint<Figures>("/v1/figures");
    } catch (e) {
      clear(this.error, `The figures are not available now: ${(e as Error).message}`);
      return;
    }
    clear(this.error);
    const before = this.last;
    this.last = f;
    if (before !== undefined && f.uptime_ms > before.uptime_ms) {
      const seconds = (f.uptime_ms - before.uptime_ms) / 1000;
      const commits = f.commits.commits - before.commits.commits;
      const committed = f.commits.requests - before.commits.requests;
      this.points.push({
        at: Date.now(),
        sessions: f.sessions,
        subscriptions: f.subscriptions,
        rate: (requestsOf(f) - requestsOf(before)) / seconds,
        p50: percentile(before, f, 0.5),
        p99: percentile(before, f, 0.99),
        commits: commits / seconds,
        batch: commits > 0 ? committed / commits : 0,
        version: f.version,
      });
      if (this.points.length > KEEP) this.points.shift();
    } else if (before !== undefined) {
      this.points = []; // the server restarted: its counters began again
    }
    this.draw(f);
  }

  private draw(f: Figures): void {
    const p = this.points[this.points.length - 1];
    const tile = (title: string, value: string, graph: SVGElement | null, legend?: string): HTMLElement =>
      h(
        "section",
        { class: "tile panel" },
        h("h3", {}, title),
        h("div", { class: "figure" }, value),
        graph,
        legend !== undefined ? h("div", { class: "legend muted" }, legend) : null,
      );
    const meanCommitMs = f.commits.commits > 0 ? f.commits.nanos / f.commits.commits / 1e6 : 0;
    clear(
      this.grid,
      tile(
        "Sessions",
        `${f.sessions} sessions · ${f.subscriptions} subscriptions`,
        chart(
          this.points,
          [
            { key: "sessions", label: "sessions", cls: "s1" },
            { key: "subscriptions", label: "subscriptions", cls: "s2" },
          ],
          "",
        ),
        "— sessions  — subscriptions",
      ),
      tile(
        "Requests",
        `${(p?.rate ?? 0).toFixed(1)} /s · ${requestsOf(f)} in all`,
        chart(this.points, [{ key: "rate", label: "requests per second", cls: "s1" }], "/s"),
      ),
      tile(
        "Latency",
        `median < ${(p?.p50 ?? 0).toFixed(3)} ms · p99 < ${(p?.p99 ?? 0).toFixed(3)} ms`,
        chart(
          this.points,
          [
            { key: "p50", label: "median latency", cls: "s1" },
            { key: "p99", label: "99th percentile latency", cls: "s2" },
          ],
          "ms",
        ),
        "— median  — 99th percentile (each second's requests)",
      ),
      tile(
        "Commits",
        `${(p?.commits ?? 0).toFixed(1)} /s · ${f.commits.commits} in all · ${meanCommitMs.toFixed(2)} ms each`,
        chart(this.points, [{ key: "commits", label: "commits per second", cls: "s1" }], "/s"),
      ),
      tile(
        "Batch size",
        `${(p?.batch ?? 0).toFixed(2)} now · ${(f.commits.commits > 0 ? f.commits.requests / f.commits.commits : 0).toFixed(2)} mean`,
        chart(this.points, [{ key: "batch", label: "requests per commit", cls: "s1" }], "req"),
      ),
      tile(
        "Database",
        `version ${f.version}`,
        null,
        `history from ${f.history_from} · up ${Math.round(f.uptime_ms / 1000)} s`,
      ),
    );
    const byKind = h("table", { class: "rows kinds", "aria-label": "Requests by kind" });
    byKind.append(
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", { scope: "col" }, "kind"),
          h("th", { scope: "col" }, "requests"),
          h("th", { scope: "col" }, "mean"),
        ),
      ),
    );
    const body = h("tbody");
    for (const [kind, c] of Object.entries(f.requests)) {
      if (c.count === 0) continue;
      body.append(
        h(
          "tr",
          {},
          h("td", {}, kind),
          h("td", {}, c.count),
          h("td", {}, `${(c.micros / c.count / 1000).toFixed(3)} ms`),
        ),
      );
    }
    byKind.append(body);
    this.grid.append(h("section", { class: "tile panel" }, h("h3", {}, "By kind"), byKind));
  }
}
