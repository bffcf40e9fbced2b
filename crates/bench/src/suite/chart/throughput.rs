//! Throughput against the number of clients, in SVG: one panel per operation (or mode), one
//! line per system, clients on a doubling axis (1, 2, 4, … 64), operations per second on a
//! linear axis from zero. The chart of the seeds' remote tables (seed 000's figures 3–6).

use std::fmt::Write as _;

use super::{esc, PALETTE};

/// One system's throughput at each client count.
pub struct Line {
    /// The system's name in the legend.
    pub label: String,
    /// (clients, operations per second), in any order.
    pub points: Vec<(usize, f64)>,
}

/// One operation's lines.
pub struct Panel {
    /// The panel's heading.
    pub title: String,
    /// Its lines.
    pub lines: Vec<Line>,
}

const PANEL_WIDTH: f64 = 360.0;
const PANEL_HEIGHT: f64 = 200.0;
const LEFT: f64 = 70.0;
const TOP: f64 = 60.0;
const GAP_X: f64 = 110.0;
const GAP_Y: f64 = 90.0;
/// Panels side by side before a new row starts.
const PER_ROW: usize = 3;
/// Most panels drawn (the rest are named as left out).
const MAX_PANELS: usize = 60;

/// The chart: `unit` names what is counted per second (`requests`, `batches`).
pub fn svg(panels: &[Panel], title: &str, unit: &str) -> String {
    let shown = &panels[..panels.len().min(MAX_PANELS)];
    let rows = shown.len().div_ceil(PER_ROW).max(1);
    let columns = shown.len().clamp(1, PER_ROW);
    let width = LEFT + columns as f64 * (PANEL_WIDTH + GAP_X) + 20.0;
    let height = TOP + rows as f64 * (PANEL_HEIGHT + GAP_Y) + 20.0;
    let mut labels: Vec<&str> = Vec::new();
    for l in shown.iter().flat_map(|p| &p.lines) {
        if !labels.contains(&l.label.as_str()) {
            labels.push(&l.label);
        }
    }
    let color = |label: &str| PALETTE[labels.iter().position(|l| *l == label).unwrap_or(0) % PALETTE.len()];
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(out, r#"<text x="10" y="22" font-size="15" font-weight="bold">{}</text>"#, esc(title));
    for (i, label) in labels.iter().enumerate() {
        let x = 10.0 + i as f64 * 150.0;
        let _ = writeln!(
            out,
            r#"<line x1="{x}" y1="40" x2="{}" y2="40" stroke="{}" stroke-width="2"/><text x="{}" y="44">{}</text>"#,
            x + 20.0,
            color(label),
            x + 24.0,
            esc(label)
        );
    }
    for (pi, panel) in shown.iter().enumerate() {
        let x0 = LEFT + (pi % PER_ROW) as f64 * (PANEL_WIDTH + GAP_X);
        let y0 = TOP + 20.0 + (pi / PER_ROW) as f64 * (PANEL_HEIGHT + GAP_Y);
        let mut ks: Vec<usize> = panel.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).collect();
        ks.sort_unstable();
        ks.dedup();
        let top = panel.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).fold(0.0f64, f64::max);
        let top = nice_ceiling(top);
        let (lo, hi) = match (ks.first(), ks.last()) {
            (Some(&a), Some(&b)) => ((a.max(1) as f64).log2(), (b.max(1) as f64).log2()),
            _ => (0.0, 1.0),
        };
        let span = if hi > lo { hi - lo } else { 1.0 };
        let x_of = |k: usize| x0 + 10.0 + ((k.max(1) as f64).log2() - lo) / span * (PANEL_WIDTH - 20.0);
        let y_of = |v: f64| y0 + PANEL_HEIGHT - v.max(0.0) / top * PANEL_HEIGHT;
        let _ = writeln!(
            out,
            r##"<text x="{x0}" y="{}" font-size="13" font-weight="bold">{}</text><rect x="{x0}" y="{y0}" width="{PANEL_WIDTH}" height="{PANEL_HEIGHT}" fill="none" stroke="#444"/>"##,
            y0 - 8.0,
            esc(&panel.title)
        );
        for i in 0..=4 {
            let v = top * f64::from(i) / 4.0;
            let y = y_of(v);
            let _ = writeln!(
                out,
                r##"<line x1="{x0}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                x0 + PANEL_WIDTH,
                x0 - 4.0,
                y + 4.0,
                rate_label(v)
            );
        }
        for &k in &ks {
            let x = x_of(k);
            let _ = writeln!(
                out,
                r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{k}</text>"#,
                y0 + PANEL_HEIGHT + 14.0
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">clients; {} per second</text>"#,
            x0 + PANEL_WIDTH / 2.0,
            y0 + PANEL_HEIGHT + 30.0,
            esc(unit)
        );
        for line in &panel.lines {
            let mut points = line.points.clone();
            points.sort_by_key(|p| p.0);
            let path: Vec<String> = points.iter().map(|&(k, v)| format!("{:.1},{:.1}", x_of(k), y_of(v))).collect();
            let c = color(&line.label);
            let _ =
                writeln!(out, r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#, path.join(" "));
            for &(k, v) in &points {
                let _ = writeln!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"><title>{} at {k} clients: {:.0} {} per second</title></circle>"#,
                    x_of(k),
                    y_of(v),
                    esc(&line.label),
                    v,
                    esc(unit)
                );
            }
        }
    }
    if panels.len() > shown.len() {
        let _ = writeln!(
            out,
            r#"<text x="10" y="{:.1}">… and {} more not drawn</text>"#,
            height - 6.0,
            panels.len() - shown.len()
        );
    }
    out.push_str("</svg>\n");
    out
}

/// The least of 1, 2 or 5 times a power of ten at or above `v` (at least 1).
fn nice_ceiling(v: f64) -> f64 {
    if v.is_nan() || v <= 1.0 {
        return 1.0;
    }
    let base = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * base).find(|c| *c >= v).unwrap_or(10.0 * base)
}

/// A rate for an axis: 950, 12k, 1.5M.
fn rate_label(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_line_per_system_in_each_panel() {
        let panels = [
            Panel {
                title: "get".into(),
                lines: vec![
                    Line { label: "Espalier".into(), points: vec![(4, 900.0), (1, 300.0), (64, 1200.0)] },
                    Line { label: "PostgreSQL".into(), points: vec![(1, 100.0), (4, 400.0), (64, 700.0)] },
                ],
            },
            Panel { title: "query <&>".into(), lines: vec![Line { label: "Espalier".into(), points: vec![] }] },
        ];
        let s = svg(&panels, "Throughput", "requests");
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<polyline").count(), 3);
        assert_eq!(s.matches("<circle").count(), 6);
        assert!(s.contains("query &lt;&amp;&gt;"), "{s}");
        assert!(s.contains("Espalier at 64 clients: 1200 requests per second"));
        // The axis tops out at a round number above the highest point.
        assert!(s.contains(">2.0k<"), "{s}");
        assert_eq!(nice_ceiling(1200.0), 2000.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(rate_label(1_500_000.0), "1.5M");
    }
}
