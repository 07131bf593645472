//! One simulated collection of a categorical column through any frequency oracle, sketch
//! parameters included (`cms:k=256:m=1024:seed=7`, see `AnyOracle::by_name`): what
//! bench/sketches/compare.py runs on Harmony's side (a collection task takes an oracle by kind,
//! with the sketches' default parameters, so it cannot draw a fresh hash family per run).
//!
//! ```sh
//! cargo run --release -p harmony-core --example sketch_column -- MECHANISM EPSILON SEED CODES
//! ```
//!
//! CODES: a file of category indices in [0, d), one per line; d is one more than the largest
//! index unless given as a fifth argument. Prints one JSON line: `{"estimates": [...],
//! "std_errors": [...], "seconds": s}`, where `seconds` is one thread's time to randomize every
//! value (`FrequencyOracle::randomize`, the per-user client path, seeded by SEED), add each report
//! to the aggregator and estimate.

use harmony_core::frequency::AnyOracle;
use harmony_core::sampling::fast_rng;
use harmony_core::{Aggregator, FrequencyOracle};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mechanism, epsilon, seed, codes, rest @ ..] = &args[..] else {
        return Err("usage: sketch_column MECHANISM EPSILON SEED CODES [D]".into());
    };
    let codes: Vec<usize> = std::fs::read_to_string(codes)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().parse::<usize>().map_err(|e| format!("CODES line {l:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let d = match rest.first() {
        Some(d) => d.parse()?,
        None => codes.iter().max().map_or(0, |m| m + 1),
    };
    let oracle = AnyOracle::by_name(mechanism, epsilon.parse()?, d)?;
    let mut rng = fast_rng(seed.parse()?);
    let start = Instant::now();
    let mut agg = oracle.aggregator();
    for &v in &codes {
        agg.add(&oracle.randomize(v, &mut rng)?)?;
    }
    let est = agg.estimate();
    let seconds = start.elapsed().as_secs_f64();
    let out = serde_json::json!({
        "estimates": est.frequencies,
        "std_errors": est.std_errors,
        "seconds": seconds,
    });
    println!("{out}");
    Ok(())
}
