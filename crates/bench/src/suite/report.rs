//! Reports of suite runs: statistics per instruction (count, min, q1, median, q3, max, p99,
//! mean — nearest-rank, as [`crate::stats`]), as JSON, as Markdown, and side by side
//! (`--compare`) with ratios. Files are written with [`write_atomic`], so an interrupted run
//! never leaves a half-written report behind.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::run::{InstructionRun, Mode, SuiteRun};
use super::sys::{Machine, Memory};
use super::{DatasetStats, Scale};
use crate::stats::Summary;

/// The format tag of the JSON report.
pub const FORMAT: &str = "espalier-bench-report/1";

/// A whole run: one or more suites.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The format tag, [`FORMAT`].
    pub format: String,
    /// What is measured: `espalier` here; peers write their own (e.g. `sqlite`).
    pub system: String,
    /// A name for this run in comparisons (default: the system).
    pub label: String,
    /// When the report was made, in seconds since the Unix epoch.
    pub created_unix: u64,
    /// The machine the run was on.
    pub machine: Machine,
    /// The options the run was made with.
    pub options: RunSettings,
    /// The suites run, in order.
    pub suites: Vec<SuiteInfo>,
    /// One object per instruction and mode.
    pub results: Vec<InstructionResult>,
}

/// The options a run was made with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// Seed of the generator of the data's values and the instructions' parameters.
    pub seed: u64,
    /// The factors the collection sizes were multiplied by.
    pub scale: Scale,
    /// The factor the written `repeat` counts were multiplied by.
    pub repeat_scale: f64,
    /// Untimed runs of each instruction before its samples.
    pub warmup: u64,
    /// Cold samples per instruction, if cold runs were made.
    pub cold_samples: Option<u64>,
    /// The database's durability setting.
    pub durability: String,
    /// `release` or `debug`: the build of the measuring program.
    pub build: String,
}

/// One suite (benchmark file) of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteInfo {
    /// The directory the file is in (`b1` … `b7`), or empty.
    pub group: String,
    /// The suite's name.
    pub suite: String,
    /// The benchmark file.
    pub file: String,
    /// What building the data set made and how long it took.
    pub dataset: DatasetStats,
    /// Bytes allocated on disk by the database after building, and after the hot run.
    pub disk_bytes_built: u64,
    /// Bytes allocated on disk by the database after the hot run.
    pub disk_bytes_after: u64,
    /// The process's memory after building.
    pub memory_after_build: Memory,
    /// The process's memory after the run.
    pub memory_after_run: Memory,
    /// How cold samples were made (absent without `--cold`).
    pub cold_method: Option<String>,
    /// Cached fraction of the data file right after the first drop (0–1), if measured.
    pub cold_cached_fraction: Option<f64>,
    /// Cached fraction of the data file (0–1) when the hot run started and when it ended.
    #[serde(default)]
    pub hot_cached_fraction_start: Option<f64>,
    /// Cached fraction of the data file (0–1) when the hot run ended.
    #[serde(default)]
    pub hot_cached_fraction_end: Option<f64>,
    /// Page faults during the hot run (warm-up included): minor (page already cached) and
    /// major (read from disk).
    #[serde(default)]
    pub hot_minor_faults: u64,
    /// Major page faults during the hot run (read from disk).
    #[serde(default)]
    pub hot_major_faults: u64,
}

/// The samples of one instruction in one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstructionResult {
    /// The directory of the suite's file (`b1` … `b7`), or empty.
    pub group: String,
    /// The suite's name.
    pub suite: String,
    /// The benchmark's name.
    pub benchmark: String,
    /// The benchmark's name, or `benchmark[i]` for the i-th instruction of a `repeat` body.
    pub name: String,
    /// The instruction as written.
    pub instruction: String,
    /// `hot` or `cold`.
    pub mode: Mode,
    /// Number of samples.
    pub count: usize,
    /// Smallest sample, in µs.
    pub min_us: f64,
    /// First quartile, in µs.
    pub q1_us: f64,
    /// Median, in µs.
    pub median_us: f64,
    /// Third quartile, in µs.
    pub q3_us: f64,
    /// Largest sample, in µs.
    pub max_us: f64,
    /// 99th percentile, in µs.
    pub p99_us: f64,
    /// Arithmetic mean, in µs.
    pub mean_us: f64,
    /// Runs that failed.
    pub failed: u64,
    /// Failed runs by error code.
    pub errors: BTreeMap<String, u64>,
    /// `ok`, or the error code every run is expected to fail with.
    pub expected: String,
    /// Error codes that runs may also fail with (`allow error`).
    #[serde(default)]
    pub allowed: Vec<String>,
    /// Runs whose outcome was not the expected one.
    pub unexpected: u64,
    /// Mean `total` of the query replies (rows matched), for queries.
    pub mean_rows: Option<f64>,
}

impl InstructionResult {
    /// A box of a chart (`chart::svg`) from timings measured outside a benchmark file: `name`
    /// in panel `group`, of `suite`, hot.
    pub fn of_summary(group: &str, suite: &str, name: &str, s: &crate::stats::Summary) -> InstructionResult {
        InstructionResult {
            group: group.into(),
            suite: suite.into(),
            benchmark: name.into(),
            name: name.into(),
            instruction: name.into(),
            mode: Mode::Hot,
            count: s.count,
            min_us: s.min_us,
            q1_us: s.q1_us,
            median_us: s.median_us,
            q3_us: s.q3_us,
            max_us: s.max_us,
            p99_us: s.p99_us,
            mean_us: s.mean_us,
            failed: 0,
            errors: Default::default(),
            expected: "ok".into(),
            allowed: Vec::new(),
            unexpected: 0,
            mean_rows: None,
        }
    }

    /// The result of `run` under `group` and `suite`; `None` if it has no samples.
    pub fn from_run(group: &str, suite: &str, run: &InstructionRun) -> Option<InstructionResult> {
        if run.samples.is_empty() {
            return None;
        }
        let mut samples = run.samples.clone();
        let s = Summary::of(&mut samples);
        let errors: BTreeMap<String, u64> =
            run.outcomes.iter().filter(|(k, _)| k.as_str() != "ok").map(|(k, v)| (k.clone(), *v)).collect();
        Some(InstructionResult {
            benchmark: run.benchmark.clone(),
            instruction: run.text.clone(),
            mode: run.mode,
            failed: run.failed(),
            errors,
            expected: run.expected.clone().unwrap_or_else(|| "ok".into()),
            allowed: run.allowed.clone(),
            unexpected: run.unexpected(),
            mean_rows: (run.query_totals.1 > 0).then(|| run.query_totals.0 as f64 / run.query_totals.1 as f64),
            ..InstructionResult::of_summary(group, suite, &run.name, &s)
        })
    }

    /// The key results are matched by across reports.
    pub fn key(&self) -> (String, String, Mode) {
        (self.group.clone(), self.name.clone(), self.mode)
    }
}

impl SuiteInfo {
    /// The record of `run`, the suite in `file` under `group`.
    pub fn from_run(group: &str, file: &str, run: &SuiteRun) -> SuiteInfo {
        SuiteInfo {
            group: group.to_string(),
            suite: run.suite.clone(),
            file: file.to_string(),
            dataset: run.dataset.clone(),
            disk_bytes_built: run.disk_bytes_built,
            disk_bytes_after: run.disk_bytes_after,
            memory_after_build: run.memory_build,
            memory_after_run: run.memory_run,
            cold_method: run.cold_method.map(|(m, _)| m.describe().to_string()),
            cold_cached_fraction: run.cold_method.and_then(|(_, f)| f),
            hot_cached_fraction_start: run.hot_cached.0,
            hot_cached_fraction_end: run.hot_cached.1,
            hot_minor_faults: run.hot_faults.0,
            hot_major_faults: run.hot_faults.1,
        }
    }
}

impl Report {
    /// An empty report of `system`, named `label`, made now on this machine.
    pub fn new(system: &str, label: &str, options: RunSettings) -> Report {
        Report {
            format: FORMAT.to_string(),
            system: system.to_string(),
            label: label.to_string(),
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            machine: super::sys::machine(),
            options,
            suites: Vec::new(),
            results: Vec::new(),
        }
    }

    /// Adds a suite's run under `group` (the file's directory name).
    pub fn add(&mut self, group: &str, file: &str, run: &SuiteRun) {
        self.suites.push(SuiteInfo::from_run(group, file, run));
        // Hot results first, then cold, each in the order the file lists them.
        let mut rows: Vec<&InstructionRun> = run.runs.iter().collect();
        rows.sort_by_key(|r| r.mode);
        self.results.extend(rows.into_iter().filter_map(|r| InstructionResult::from_run(group, &run.suite, r)));
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain data to a string cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a JSON report; fails if it is not one or has another format tag.
    pub fn from_json(text: &str) -> Result<Report, String> {
        let report: Report = serde_json::from_str(text).map_err(|e| format!("not a benchmark report: {e}"))?;
        if report.format != FORMAT {
            return Err(format!("report format {:?}; this program reads {FORMAT:?}", report.format));
        }
        Ok(report)
    }

    /// Results with runs whose outcome was not the expected one.
    pub fn unexpected(&self) -> Vec<&InstructionResult> {
        self.results.iter().filter(|r| r.unexpected > 0).collect()
    }

    /// The report as Markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# Benchmark report: {}\n", self.label);
        let o = &self.options;
        let _ = writeln!(
            out,
            "System `{}`, {} build; machine: {} ({} CPUs, {}), kernel {}. Seed {}, scale {} (nested {}), \
             repeat scale {}, warm-up {}, durability `{}`{}.\n",
            self.system,
            o.build,
            if self.machine.cpu.is_empty() { "unknown CPU" } else { &self.machine.cpu },
            self.machine.cpus,
            bytes(self.machine.memory_bytes),
            self.machine.kernel,
            o.seed,
            o.scale.outer,
            o.scale.nested,
            o.repeat_scale,
            o.warmup,
            o.durability,
            match o.cold_samples {
                Some(n) => format!(", {n} cold samples per instruction"),
                None => String::new(),
            }
        );
        out.push_str("## Datasets\n\n");
        out.push_str(
            "| group | suite | entries | build s | disk after build | disk after run | peak RSS (build) | peak RSS (run) | idle heap | cached in hot run | faults in hot run (minor / major) |\n",
        );
        out.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
        for s in &self.suites {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {} | {} / {} |",
                s.group,
                s.suite,
                s.dataset.entries,
                s.dataset.seconds,
                bytes(s.disk_bytes_built),
                bytes(s.disk_bytes_after),
                bytes(s.memory_after_build.peak_rss_bytes),
                bytes(s.memory_after_run.peak_rss_bytes),
                bytes(s.memory_after_run.anon_bytes),
                match (s.hot_cached_fraction_start, s.hot_cached_fraction_end) {
                    (Some(a), Some(b)) => format!("{:.0}% → {:.0}%", a * 100.0, b * 100.0),
                    _ => "?".to_string(),
                },
                s.hot_minor_faults,
                s.hot_major_faults,
            );
        }
        // One line per cold method, with the suites that used it and the most of a data file
        // still cached right after a drop.
        let mut methods: Vec<(&str, Vec<&str>, Option<f64>)> = Vec::new();
        for s in &self.suites {
            let Some(m) = s.cold_method.as_deref() else { continue };
            match methods.iter_mut().find(|(x, _, _)| *x == m) {
                Some((_, suites, cached)) => {
                    suites.push(&s.suite);
                    *cached = max_opt(*cached, s.cold_cached_fraction);
                }
                None => methods.push((m, vec![&s.suite], s.cold_cached_fraction)),
            }
        }
        if !methods.is_empty() {
            out.push_str("\nCold samples: ");
            for (m, suites, cached) in &methods {
                let cached = cached
                    .map(|f| format!(" At most {:.1}% of a data file was still cached right after a drop.", f * 100.0))
                    .unwrap_or_default();
                let which = if methods.len() == 1 { String::new() } else { format!(" ({})", suites.join(", ")) };
                let _ = writeln!(out, "{m}{which}.{cached}");
            }
        }
        out.push_str("\n## Instructions (µs)\n\n");
        let mut group: Option<&str> = None;
        for r in &self.results {
            if group != Some(r.group.as_str()) {
                group = Some(&r.group);
                let _ = writeln!(out, "\n### {}\n", if r.group.is_empty() { "(no group)" } else { &r.group });
                out.push_str("| name | mode | n | min | q1 | median | q3 | p99 | max | mean | outcome |\n");
                out.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
            }
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | **{}** | {} | {} | {} | {} | {} |",
                r.name,
                r.mode.as_str(),
                r.count,
                us(r.min_us),
                us(r.q1_us),
                us(r.median_us),
                us(r.q3_us),
                us(r.p99_us),
                us(r.max_us),
                us(r.mean_us),
                outcome(r)
            );
        }
        out
    }
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn outcome(r: &InstructionResult) -> String {
    let mut s = if r.failed == 0 {
        "ok".to_string()
    } else {
        let parts: Vec<String> = r.errors.iter().map(|(k, v)| format!("{v}× {k}")).collect();
        if r.failed as usize == r.count {
            format!("all failed: {}", parts.join(", "))
        } else {
            format!("{} ok, {}", r.count as u64 - r.failed, parts.join(", "))
        }
    };
    if let Some(rows) = r.mean_rows {
        let _ = write!(s, "; {rows:.1} rows");
    }
    if r.unexpected > 0 {
        let _ = write!(s, " — **{} unexpected** (expected {})", r.unexpected, r.expected);
    } else if r.expected != "ok" || r.failed > 0 {
        let _ = write!(s, " (as expected)");
    }
    s
}

/// A duration in µs with sensible precision.
pub fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `n` bytes in binary units, e.g. `1.5 MB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Several reports side by side: medians (and p99) per instruction and mode, with the ratio
/// of each report's median to the first report's. Results are matched by group, name and mode.
pub fn compare_markdown(reports: &[Report]) -> String {
    assert!(!reports.is_empty(), "nothing to compare");
    let mut out = String::new();
    out.push_str("# Benchmark comparison\n\n");
    for (i, r) in reports.iter().enumerate() {
        let _ = writeln!(
            out,
            "{}. **{}** — system `{}`, {} build, scale {} (nested {}), durability `{}`, {} CPUs",
            i + 1,
            r.label,
            r.system,
            r.options.build,
            r.options.scale.outer,
            r.options.scale.nested,
            r.options.durability,
            r.machine.cpus
        );
    }
    let base = &reports[0];
    let _ = writeln!(out, "\nMedians in µs; ratios are each median ÷ the median of **{}**.\n", base.label);
    let mut header = String::from("| group | name | mode |");
    let mut rule = String::from("|---|---|---|");
    for (i, r) in reports.iter().enumerate() {
        let _ = write!(header, " {} |", r.label);
        rule.push_str("--:|");
        if i > 0 {
            let _ = write!(header, " {} ÷ {} |", r.label, base.label);
            rule.push_str("--:|");
        }
    }
    out.push_str(&header);
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');
    for key in result_keys(reports) {
        let found: Vec<Option<&InstructionResult>> =
            reports.iter().map(|r| r.results.iter().find(|x| x.key() == key)).collect();
        let _ = write!(out, "| {} | {} | {} |", key.0, key.1, key.2.as_str());
        let base_median = found[0].map(|r| r.median_us);
        for (i, f) in found.iter().enumerate() {
            match f {
                Some(r) => {
                    let _ = write!(out, " {} |", us(r.median_us));
                }
                None => out.push_str(" — |"),
            }
            if i > 0 {
                match (base_median, f) {
                    (Some(b), Some(r)) if b > 0.0 => {
                        let _ = write!(out, " {:.2}× |", r.median_us / b);
                    }
                    _ => out.push_str(" — |"),
                }
            }
        }
        out.push('\n');
    }
    out
}

/// Every (group, name, mode) in the reports, in the order they first appear.
pub fn result_keys(reports: &[Report]) -> Vec<(String, String, Mode)> {
    let mut keys = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for r in reports {
        for x in &r.results {
            if seen.insert(x.key()) {
                keys.push(x.key());
            }
        }
    }
    keys
}

/// Writes `path` all at once: `write` fills a temporary file beside it (named
/// `.<name>.partial-…`), which is synced and renamed over `path` only if `write` succeeds. On
/// failure the temporary file is removed and `path` is untouched; if the process is killed
/// meanwhile, only the temporary file can remain.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "report".into());
    let mut tmp = tempfile::Builder::new().prefix(&format!(".{name}.partial-")).tempfile_in(&dir)?;
    // A temporary file is private (0600); a report is an ordinary file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    {
        let mut buffered = std::io::BufWriter::new(tmp.as_file_mut());
        write(&mut buffered)?;
        buffered.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, "old report").unwrap();
        // A writer that fails half way: the old file stays, no temporary file is left.
        let e = write_atomic(&path, |w| {
            w.write_all(b"{\"half\": ")?;
            Err(std::io::Error::other("interrupted"))
        });
        assert!(e.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old report");
        // A writer that panics half way: the same.
        let r = std::panic::catch_unwind(|| {
            let _ = write_atomic(&path, |w| {
                w.write_all(b"{\"half\": ")?;
                panic!("killed mid-write");
            });
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old report");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["report.json".to_string()], "no partial file remains");
        // A writer that finishes replaces it.
        write_atomic(&path, |w| w.write_all(b"new report")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new report");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
        }
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 * 1024 * 1024), "3.0 MB");
        assert_eq!(us(12345.6), "12346");
        assert_eq!(us(2.5), "2.50");
    }
}
