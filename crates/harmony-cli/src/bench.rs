//! `harmony bench` (placeholder until the bench work lands).

/// Options of `harmony bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Short run (under 30 s).
    #[arg(long)]
    quick: bool,
}

/// Runs the benchmark.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("harmony bench is not built yet (quick = {})", args.quick)
}
