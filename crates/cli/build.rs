//! Links `espalier` with packed relative relocations (`-z pack-relative-relocs`, DT_RELR)
//! where the toolchain and the C library support them.
//!
//! Why: a position-independent executable carries one 24-byte `.rela.dyn` record per pointer
//! in its read-only data (about 440 KB here), and the loader reads all of them at start. In
//! RELR form they take about 5 KB: the idle server's resident memory falls by 0.3–0.5 MB
//! (docs/benchmarks.md, "Idle memory"), and the binary stays position-independent (ASLR).
//!
//! The probe links and runs a tiny C program with the flag: an older linker rejects the flag,
//! and a C library older than 2.36 refuses to load the result. Either way the build goes on
//! without it.

use std::path::Path;
use std::process::Command;

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    // Only a native Linux build can run the probe.
    if target != host || !target.contains("linux") {
        return;
    }
    let Some(out) = std::env::var_os("OUT_DIR") else { return };
    if supported(Path::new(&out)) {
        println!("cargo:rustc-link-arg-bins={FLAG}");
    }
}

fn supported(out: &Path) -> bool {
    let source = out.join("relr_probe.c");
    let program = out.join("relr_probe");
    // A pointer in initialised data gives the linker a relative relocation to pack.
    let text = "static const char *p = \"x\";\nint main(void) { return p[0] == 'x' ? 0 : 1; }\n";
    if std::fs::write(&source, text).is_err() {
        return false;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let linked = Command::new(cc).arg("-pie").arg("-fPIE").arg(FLAG).arg(&source).arg("-o").arg(&program).output();
    if !linked.is_ok_and(|o| o.status.success()) {
        return false;
    }
    Command::new(&program).status().is_ok_and(|s| s.success())
}
