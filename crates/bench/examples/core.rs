//! The core benchmark as a stand-alone program, with the CLI's own argument handling:
//! `cargo run --release -p espalier-bench --example core -- [--quick] [--json FILE] [--ops N] [--seed N]`.

#[path = "../../cli/src/bench_cmd.rs"]
mod bench_cmd;

use clap::Parser;

#[derive(Parser)]
#[command(about = "Espalier core micro-benchmark against SQLite")]
struct Cli {
    #[command(flatten)]
    core: bench_cmd::CoreArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = bench_cmd::run_core(&cli.core) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
