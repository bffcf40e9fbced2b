//! Box-plot charts in SVG, in the manner of the thesis's figures 7.1–7.4: one panel per
//! group (b1 … b7), one box per instruction and series (a report's hot or cold runs), on a
//! logarithmic time axis. The box spans q1–q3 with a line at the median; the whisker runs from
//! the minimum to p99 and a small circle marks the maximum (the thesis's R plots drew
//! whiskers at 1.5 IQR; only these order statistics are kept, so the whisker shows p99).

pub mod throughput;

use std::fmt::Write as _;

use super::report::{InstructionResult, Report};
use super::run::Mode;

/// One colour in the chart: a report's results in one mode.
pub struct Series<'a> {
    /// The series' name in the legend.
    pub label: String,
    /// The results it draws.
    pub results: Vec<&'a InstructionResult>,
}

/// One series per report and mode present in it (hot, then cold).
pub fn series_of(reports: &[Report]) -> Vec<Series<'_>> {
    let mut out = Vec::new();
    let several = reports.len() > 1;
    for r in reports {
        for mode in [Mode::Hot, Mode::Cold] {
            let results: Vec<&InstructionResult> = r.results.iter().filter(|x| x.mode == mode).collect();
            if results.is_empty() {
                continue;
            }
            let label = if several { format!("{} {}", r.label, mode.as_str()) } else { mode.as_str().to_string() };
            out.push(Series { label, results });
        }
    }
    out
}

const PALETTE: [&str; 8] = ["#8c564b", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#ff7f0e", "#17becf", "#7f7f7f"];
const PANEL_HEIGHT: f64 = 260.0;
const LEFT: f64 = 70.0;
const BOTTOM: f64 = 150.0;
const TOP: f64 = 34.0;
const BOX_WIDTH: f64 = 12.0;
const GAP: f64 = 14.0;
/// Most instructions drawn per panel (the rest are named in a note): keeps the file bounded.
pub const MAX_PER_PANEL: usize = 200;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn time_label(us: f64) -> String {
    if us >= 1_000_000.0 {
        format!("{} s", us / 1_000_000.0)
    } else if us >= 1000.0 {
        format!("{} ms", us / 1000.0)
    } else {
        format!("{us} µs")
    }
}

/// The SVG document for `series`, titled `title`.
pub fn svg(series: &[Series<'_>], title: &str) -> String {
    // Panels by group, instructions in first-seen order.
    let mut groups: Vec<String> = Vec::new();
    for s in series {
        for r in &s.results {
            if !groups.contains(&r.group) {
                groups.push(r.group.clone());
            }
        }
    }
    let names_of = |group: &str| -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for s in series {
            for r in s.results.iter().filter(|r| r.group == group) {
                if !names.contains(&r.name) {
                    names.push(r.name.clone());
                }
            }
        }
        names
    };
    let per_slot = series.len().max(1) as f64 * BOX_WIDTH + GAP;
    let width = groups
        .iter()
        .map(|g| LEFT + 20.0 + names_of(g).len().min(MAX_PER_PANEL) as f64 * per_slot)
        .fold(480.0f64, f64::max)
        + 160.0;
    let panel_total = TOP + PANEL_HEIGHT + BOTTOM;
    let height = 40.0 + groups.len().max(1) as f64 * panel_total;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(out, r#"<text x="10" y="22" font-size="15" font-weight="bold">{}</text>"#, esc(title));
    // Legend.
    for (i, s) in series.iter().enumerate() {
        let x = width - 150.0;
        let y = 14.0 + i as f64 * 14.0;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{y}" width="10" height="10" fill="{}" fill-opacity="0.35" stroke="{}"/><text x="{}" y="{}">{}</text>"#,
            PALETTE[i % PALETTE.len()],
            PALETTE[i % PALETTE.len()],
            x + 14.0,
            y + 9.0,
            esc(&s.label)
        );
    }
    for (gi, group) in groups.iter().enumerate() {
        let names = names_of(group);
        let shown = &names[..names.len().min(MAX_PER_PANEL)];
        let y0 = 40.0 + gi as f64 * panel_total + TOP;
        let lookup =
            |si: usize, name: &str| series[si].results.iter().find(|r| r.group == *group && r.name == name).copied();
        // The axis spans every value drawn in this panel.
        let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
        for si in 0..series.len() {
            for n in shown {
                if let Some(r) = lookup(si, n) {
                    lo = lo.min(r.min_us.max(0.01));
                    hi = hi.max(r.max_us.max(0.01));
                }
            }
        }
        if !lo.is_finite() {
            continue;
        }
        let (dlo, dhi) = (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0));
        let y_of = |v: f64| y0 + PANEL_HEIGHT - (v.max(0.01).log10() - dlo) / (dhi - dlo) * PANEL_HEIGHT;
        let right = LEFT + 20.0 + shown.len() as f64 * per_slot;
        let _ = writeln!(
            out,
            r#"<text x="{LEFT}" y="{}" font-size="13" font-weight="bold">{}</text>"#,
            y0 - 10.0,
            esc(if group.is_empty() { "(no group)" } else { group })
        );
        let _ = writeln!(
            out,
            r##"<rect x="{LEFT}" y="{y0}" width="{}" height="{PANEL_HEIGHT}" fill="none" stroke="#444"/>"##,
            right - LEFT
        );
        let mut d = dlo;
        while d <= dhi + 1e-9 {
            let v = 10f64.powf(d);
            let y = y_of(v);
            let _ = writeln!(
                out,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{right:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT - 4.0,
                y + 4.0,
                time_label(v)
            );
            d += 1.0;
        }
        for (ni, name) in shown.iter().enumerate() {
            let slot_x = LEFT + 10.0 + ni as f64 * per_slot;
            for si in 0..series.len() {
                let Some(r) = lookup(si, name) else { continue };
                let color = PALETTE[si % PALETTE.len()];
                let x = slot_x + si as f64 * BOX_WIDTH;
                let cx = x + BOX_WIDTH / 2.0 - 1.0;
                let tooltip = format!(
                    "{} {}: min {:.2} q1 {:.2} median {:.2} q3 {:.2} p99 {:.2} max {:.2} µs (n={})",
                    r.name, series[si].label, r.min_us, r.q1_us, r.median_us, r.q3_us, r.p99_us, r.max_us, r.count
                );
                let _ = writeln!(
                    out,
                    r#"<g><title>{}</title><line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="{color}"/><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}" fill-opacity="0.35" stroke="{color}"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"/><circle cx="{cx:.1}" cy="{:.1}" r="1.8" fill="none" stroke="{color}"/></g>"#,
                    esc(&tooltip),
                    y_of(r.min_us),
                    y_of(r.p99_us),
                    x,
                    y_of(r.q3_us),
                    BOX_WIDTH - 2.0,
                    (y_of(r.q1_us) - y_of(r.q3_us)).max(0.5),
                    x,
                    y_of(r.median_us),
                    x + BOX_WIDTH - 2.0,
                    y_of(r.median_us),
                    y_of(r.max_us)
                );
            }
            let lx = slot_x + series.len() as f64 * BOX_WIDTH / 2.0;
            let ly = y0 + PANEL_HEIGHT + 8.0;
            let _ = writeln!(
                out,
                r#"<text x="{lx:.1}" y="{ly:.1}" transform="rotate(60 {lx:.1} {ly:.1})">{}</text>"#,
                esc(name)
            );
        }
        if names.len() > shown.len() {
            let _ = writeln!(
                out,
                r#"<text x="{LEFT}" y="{:.1}">… and {} more not drawn</text>"#,
                y0 + PANEL_HEIGHT + BOTTOM - 10.0,
                names.len() - shown.len()
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

/// The chart of one report (hot and cold series), or of several side by side.
pub fn chart(reports: &[Report]) -> String {
    let title = match reports {
        [one] => format!("{} — instruction latency (log scale)", one.label),
        _ => {
            let labels: Vec<&str> = reports.iter().map(|r| r.label.as_str()).collect();
            format!("{} — instruction latency (log scale)", labels.join(" vs "))
        }
    };
    svg(&series_of(reports), &title)
}
