//! The progress bars of the benchmark suites, on standard error: one way to make them.

use indicatif::{ProgressBar, ProgressStyle};

/// A suite's steps: what runs, the bar, how many of how many, time taken and left.
pub const STEPS: &str = "{prefix:>28} [{bar:30}] {pos}/{len} {elapsed_precise} eta {eta}";

/// A bar of `len` steps named `prefix` drawn with `template` (indicatif's template language),
/// or a hidden one when `show` is false (JSON output, tests).
pub fn bar(show: bool, len: u64, prefix: &str, template: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    // A template is a constant of the caller's; a bad one falls back to the default bar.
    let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style.progress_chars("=> "));
    pb.set_prefix(prefix.to_string());
    pb
}
