//! The `harmony` command line.

use clap::{Parser, Subcommand};

mod bench;

/// Harmony: local differential privacy collection and analysis.
#[derive(Parser, Debug)]
#[command(name = "harmony", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure randomize and aggregation throughput of every mechanism.
    Bench(bench::BenchArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}
