//! `espalier bench run` (benchmark files in the benchmark language) and `espalier bench
//! compare` (reports side by side); see `espalier_bench::suite` and
//! `docs/benchmark-language.md`.

use std::path::{Path, PathBuf};

use crate::Global;
use espalier_bench::suite::report::{compare_markdown, write_atomic, Report, RunSettings};
use espalier_bench::suite::{chart, fit_benchmarks, load_suite, run_suite, ColdOptions, RunOptions, Scale, Suite};

/// Options of `espalier bench run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Benchmark files (`*.bench`), or directories whose `*.bench` files run in name order.
    #[arg(value_name = "FILE|DIR", required = true)]
    pub files: Vec<PathBuf>,
    /// Multiply the sizes of the outermost collections in `initialize` (and the key bounds
    /// into them) by F: the data grows linearly with F. B7 is B6's model at a large F.
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub scale: f64,
    /// Multiply the sizes of nested collections (inside entries of other collections) by F.
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub nested_scale: f64,
    /// Multiply every `repeat` count by F (at least one repetition remains).
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub repeat_scale: f64,
    /// Seed of the dataset and of `random` in instructions; the same seed gives the same data.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Untimed runs of every instruction before the timed ones (mutations are rolled back).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub warmup: u64,
    /// Also measure cold: the data file is dropped from the OS page cache before every sample.
    #[arg(long)]
    pub cold: bool,
    /// Cold samples per instruction (with --cold; at most the benchmark's repetitions).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub cold_samples: u64,
    /// Commit with fsync: the same as `--durability sync`. Without it or `--durability`,
    /// commits are not fsynced (`none`, as in `espalier bench core`).
    #[arg(long)]
    pub fsync: bool,
    /// Run only the benchmarks with this name (repeatable).
    #[arg(long, value_name = "NAME")]
    pub only: Vec<String>,
    /// Write the JSON report to FILE (whole or not at all).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write the Markdown report to FILE (whole or not at all).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write box-plot charts (SVG, one panel per directory) to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Name of this run in reports and comparisons.
    #[arg(long, value_name = "NAME", default_value = "espalier")]
    pub label: String,
    /// Directory to build the temporary databases in (default: the system's temp directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Exit with status 0 even if some instruction had an unexpected outcome (a failure where
    /// success was expected, or the reverse); they are still reported. Without it such a run
    /// exits with status 2, after writing its reports.
    #[arg(long)]
    pub allow_unexpected: bool,
    /// Accepted for old scripts: failing on unexpected outcomes is the default now.
    #[arg(long, hide = true, conflicts_with = "allow_unexpected")]
    pub strict: bool,
    /// After the report, put this run beside earlier JSON reports (`--out` of earlier runs;
    /// repeatable, the first is the base of the ratios), as `bench compare` does.
    #[arg(long, value_name = "REPORT.json")]
    pub compare: Vec<PathBuf>,
}

/// Reads JSON reports of earlier runs.
fn read_reports(paths: &[PathBuf]) -> Result<Vec<Report>, String> {
    let mut reports = Vec::with_capacity(paths.len());
    for p in paths {
        let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        reports.push(Report::from_json(&text).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    Ok(reports)
}

/// Options of `espalier bench compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// JSON reports written by `espalier bench run --out` (the first is the base of ratios).
    #[arg(value_name = "REPORT.json", required = true, num_args = 2..)]
    pub reports: Vec<PathBuf>,
    /// Write the Markdown comparison to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write box plots of all reports side by side to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// The benchmark files named by `paths`: files as given, directories expanded to their
/// `*.bench` files in name order.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("cannot read directory {}: {e}", p.display()))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| f.extension().is_some_and(|x| x == "bench"))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(format!("{} holds no .bench files", p.display()));
            }
            out.extend(files);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(format!("{} does not exist", p.display()));
        }
    }
    Ok(out)
}

/// The group of a file: the name of its directory (`b1` … `b7`).
fn group_of(path: &Path) -> String {
    path.parent().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    write_atomic(path, |w| w.write_all(text.as_bytes())).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Parses every file first (so a bad file fails before anything is built), runs each, then
/// writes the reports: Markdown on standard output (JSON with `--json`), and the files asked
/// for. Returns the exit status.
pub fn run(args: &RunArgs, g: &Global) -> Result<u8, String> {
    let json = g.json;
    let durability = g.bench_durability(args.fsync)?;
    let scale = Scale { outer: args.scale, nested: args.nested_scale };
    scale.validate()?;
    if !(args.repeat_scale.is_finite() && args.repeat_scale > 0.0) {
        return Err(format!("--repeat-scale must be a positive number, not {}", args.repeat_scale));
    }
    let files = expand(&args.files)?;
    if json && !args.compare.is_empty() {
        return Err("--compare writes Markdown; it has no JSON form (compare JSON reports with `bench compare`)".into());
    }
    // Read before the run, so that a bad report fails at once rather than after it.
    let mut bases = read_reports(&args.compare)?;
    let mut suites: Vec<(PathBuf, Suite)> = Vec::with_capacity(files.len());
    for f in &files {
        match load_suite(f) {
            Ok(suite) => suites.push((f.clone(), suite)),
            Err(e) => {
                // Rendered diagnostics carry their own `file:line:column: error:` prefix.
                eprintln!("{e}");
                return Ok(1);
            }
        }
    }
    for name in &args.only {
        if !suites.iter().any(|(_, s)| s.benchmark(name).is_some()) {
            return Err(format!("no benchmark named '{name}' in the files given"));
        }
    }
    // What the scales do to every benchmark's keys, before anything is built: a literal key
    // the scaled data lacks refuses the run; an `index` over a smaller collection runs fewer
    // times, said here.
    for (path, suite) in &suites {
        let only: Vec<String> = args.only.iter().filter(|n| suite.benchmark(n).is_some()).cloned().collect();
        if !args.only.is_empty() && only.is_empty() {
            continue;
        }
        let fitted =
            fit_benchmarks(suite, scale, args.repeat_scale, &only).map_err(|e| format!("{}: {e}", path.display()))?;
        for note in fitted.iter().filter_map(|f| f.note.as_ref()) {
            eprintln!("note: {}: {note}", path.display());
        }
    }
    let settings = RunSettings {
        seed: args.seed,
        scale,
        repeat_scale: args.repeat_scale,
        warmup: args.warmup,
        cold_samples: args.cold.then_some(args.cold_samples),
        durability: durability.name().into(),
        build: if cfg!(debug_assertions) { "debug".into() } else { "release".into() },
    };
    let mut report = Report::new("espalier", &args.label, settings);
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    for (path, suite) in &suites {
        let only: Vec<String> = args.only.iter().filter(|n| suite.benchmark(n).is_some()).cloned().collect();
        if !args.only.is_empty() && only.is_empty() {
            continue;
        }
        let options = RunOptions {
            seed: args.seed,
            scale,
            repeat_scale: args.repeat_scale,
            warmup: args.warmup,
            cold: args.cold.then_some(ColdOptions { samples: args.cold_samples.max(1) }),
            durability: durability.durability(),
            dir: args.dir.clone(),
            progress,
            only,
            ..RunOptions::default()
        };
        eprintln!("{} …", path.display());
        let run = run_suite(suite, &options).map_err(|e| format!("{}: {e}", path.display()))?;
        report.add(&group_of(path), &path.display().to_string(), &run);
    }
    // Files first, whole or not at all; standard output last.
    if let Some(p) = &args.out {
        write_file(p, &report.to_json())?;
    }
    if let Some(p) = &args.markdown {
        write_file(p, &report.to_markdown())?;
    }
    if let Some(p) = &args.svg {
        write_file(p, &chart::chart(std::slice::from_ref(&report)))?;
    }
    if json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_markdown());
    }
    if !bases.is_empty() {
        bases.push(report.clone());
        print!("\n{}", compare_markdown(&bases));
    }
    let unexpected = report.unexpected();
    if !unexpected.is_empty() {
        let what = if args.allow_unexpected { "warning" } else { "error" };
        eprintln!("{what}: {} instruction(s) had unexpected outcomes:", unexpected.len());
        for r in &unexpected {
            let errors: Vec<String> = r.errors.iter().map(|(k, v)| format!("{v}× {k}")).collect();
            eprintln!(
                "  {}/{} ({}): {} of {} runs; expected {}, outcomes: {} ok{}{}",
                r.group,
                r.name,
                r.mode.as_str(),
                r.unexpected,
                r.count,
                r.expected,
                r.count as u64 - r.failed,
                if errors.is_empty() { "" } else { ", " },
                errors.join(", ")
            );
        }
        if !args.allow_unexpected {
            eprintln!(
                "(the benchmark files declare the failures they expect with `expect error` or `allow error`; \
                 --allow-unexpected exits 0 anyway)"
            );
            return Ok(2);
        }
    }
    Ok(0)
}

/// `espalier bench compare`.
pub fn compare(args: &CompareArgs, json: bool) -> Result<u8, String> {
    let reports = read_reports(&args.reports)?;
    if json {
        return Err("bench compare writes Markdown (and SVG); it has no JSON form".into());
    }
    let md = compare_markdown(&reports);
    if let Some(p) = &args.svg {
        write_file(p, &chart::chart(&reports))?;
    }
    match &args.markdown {
        Some(p) => write_file(p, &md)?,
        None => print!("{md}"),
    }
    Ok(0)
}
