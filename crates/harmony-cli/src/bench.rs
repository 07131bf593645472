//! `harmony bench`: randomize and aggregation throughput of every mechanism.
//!
//! For each (mechanism, d, ε) of the grid: seeded inputs are generated (untimed), then the
//! mechanism's batch API runs on one thread with a seeded [`harmony_core::sampling::fast_rng`]
//! (repeated until the timed part reaches a minimum duration), then the last batch of reports is
//! aggregated with [`harmony_core::aggregate::aggregate_parallel`] on a rayon pool of `--threads`
//! threads (all cores by default) followed by `estimate` (also repeated). Frequency oracles are
//! built with `AnyOracle::by_name` and measured through the concrete oracle inside it
//! (`randomize_batch`; SUE / OUE: `randomize_packed` + `add_packed`); the rate through
//! `AnyOracle::randomize_batch` itself (run-time dispatch) is reported as `randomize_any_per_s`.
//! Duchi and Laplace are measured through their columnar batch APIs (`randomize_signs` +
//! `add_signs`: one sign bit per report; `randomize_units` + `add_units`: one `i64` of grid
//! units per report), their rate through `AnyNumeric::randomize_batch` (`NumericReport` output)
//! as `randomize_any_per_s`. Numeric 1-D mechanisms
//! have no d (reported as d = 1); `duchi-multi` and `harmony-1bit` use d as the dimension;
//! frequency oracles use it as the domain size. Mechanisms with O(d) work per user (SUE, OUE and
//! adaptive when it picks OUE: d-bit reports; duchi-multi and harmony-1bit: d input coordinates)
//! run at a smaller n when d is large, so that n·d/8 bytes stay under [`REPORT_BYTES_CAP`]; the
//! row's `note` says so. OLH is never reduced: its n·d aggregation is what it measures.

mod cases;

use crate::output::{Format, progress};
use anyhow::{Context, bail};
use cases::{Measured, Timing};
use harmony_core::frequency::AnyOracle;
use harmony_core::numeric::AnyNumeric;
use harmony_core::sampling::{fast_rng, stream_seed};
use serde::Serialize;
use std::time::{Duration, Instant};

/// 1-D numeric mechanisms (no d).
pub const NUMERIC: [&str; 6] = ["laplace", "duchi", "pm", "hm", "scdf", "staircase"];
/// Multidimensional numeric mechanisms (d = dimension).
pub const VECTOR: [&str; 2] = ["duchi-multi", "harmony-1bit"];
/// Frequency oracles (d = domain size): every registered one. Some also accept parameters
/// (`cms:k=256:m=1024`, `ss:k=8`, see `AnyOracle::by_name`).
pub const FREQUENCY: &[&str] = harmony_core::frequency::FREQUENCY_NAMES;
/// Frequency oracles whose reports are m-bit sketches (capped by their own report size).
const SKETCHES: &[&str] = harmony_core::frequency::SKETCH_NAMES;
/// Frequency oracles whose aggregation evaluates every report against every candidate.
const PER_CANDIDATE: [&str; 1] = ["olh"];
/// For mechanisms with O(d) work per user, n·d/8 is kept under this many bytes (n·d ≤ 2^30):
/// n is reduced at large d.
pub const REPORT_BYTES_CAP: f64 = (1u64 << 27) as f64;
/// A frequency report above this many bytes (wire format) is taken to be a d-bit vector.
const O_D_REPORT_BYTES: f64 = 64.0;
/// n is never reduced below this.
const MIN_CAPPED_N: usize = 1024;

/// Options of `harmony bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Short run (under 30 s): n = 100 000, ε = 1, d ∈ {16, 1024} (each overridable).
    #[arg(long)]
    quick: bool,
    /// Output format (JSON on stdout; the progress bar stays on stderr).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Mechanisms to measure, comma-separated (default: all): laplace, duchi, pm, hm, scdf,
    /// staircase, duchi-multi, harmony-1bit, grr, sue, oue, olh, hadamard, hr, bassily-smith,
    /// adaptive, cms, hcms, rappor (sketch parameters as cms:k=256:m=1024).
    #[arg(long, value_delimiter = ',')]
    mechanisms: Vec<String>,
    /// Domain sizes / dimensions, comma-separated (default 16,1024,65536; ignored by 1-D numeric
    /// mechanisms).
    #[arg(long, value_delimiter = ',')]
    d: Vec<usize>,
    /// Privacy budgets, comma-separated (default 0.5,1,2,4).
    #[arg(long, value_delimiter = ',')]
    epsilon: Vec<f64>,
    /// Number of simulated devices (default 1 000 000).
    #[arg(long)]
    n: Option<usize>,
    /// Aggregation threads (default: all cores). Randomization always runs on one thread.
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of the inputs and of the randomizers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// One row of the output.
#[derive(Debug, Clone, Serialize)]
struct Row {
    mechanism: String,
    d: usize,
    epsilon: f64,
    n: usize,
    threads: usize,
    randomize_per_s: f64,
    aggregate_per_s: f64,
    /// Reports × candidates per second, for per-candidate aggregation (OLH); else null.
    evaluations_per_s: Option<f64>,
    randomize_s: f64,
    aggregate_s: f64,
    estimate_s: f64,
    randomize_reps: u32,
    aggregate_reps: u32,
    bytes_per_report: Option<f64>,
    /// Frequency oracles: randomize rate through `AnyOracle::randomize_batch` (run-time
    /// dispatch, `AnyReport` output) instead of the concrete oracle's batch API; Duchi and
    /// Laplace: through `AnyNumeric::randomize_batch` (`NumericReport` output) instead of the
    /// columnar API.
    randomize_any_per_s: Option<f64>,
    note: Option<String>,
}

/// A cell that could not run (the mechanism rejected its parameters).
#[derive(Debug, Clone, Serialize)]
struct Skipped {
    mechanism: String,
    d: usize,
    epsilon: f64,
    reason: String,
}

#[derive(Serialize)]
struct Output<'a> {
    results: &'a [Row],
    skipped: &'a [Skipped],
    seed: u64,
    quick: bool,
    wall_s: f64,
}

/// What kind of mechanism a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Numeric,
    Vector,
    Frequency,
}

fn family(name: &str) -> Option<Family> {
    let base = name.split(':').next().unwrap_or(name);
    if FREQUENCY.contains(&base) {
        return Some(Family::Frequency);
    }
    if NUMERIC.contains(&name) {
        Some(Family::Numeric)
    } else if VECTOR.contains(&name) {
        Some(Family::Vector)
    } else if FREQUENCY.contains(&name) {
        Some(Family::Frequency)
    } else {
        None
    }
}

fn all_names() -> Vec<&'static str> {
    NUMERIC.iter().chain(&VECTOR).chain(FREQUENCY).copied().collect()
}

/// The resolved grid.
struct Plan {
    mechanisms: Vec<(String, Family)>,
    ds: Vec<usize>,
    epsilons: Vec<f64>,
    n: usize,
    threads: usize,
    timing: Timing,
}

fn plan(args: &BenchArgs) -> anyhow::Result<Plan> {
    let mut mechanisms = Vec::new();
    let names: Vec<String> = if args.mechanisms.is_empty() {
        all_names().into_iter().map(String::from).collect()
    } else {
        args.mechanisms.iter().map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect()
    };
    for name in names {
        let Some(f) = family(&name) else {
            bail!("unknown mechanism {name:?}; valid names: {}", all_names().join(", "));
        };
        if !mechanisms.iter().any(|(m, _)| *m == name) {
            mechanisms.push((name, f));
        }
    }
    let ds = if !args.d.is_empty() {
        args.d.clone()
    } else if args.quick {
        vec![16, 1024]
    } else {
        vec![16, 1024, 65536]
    };
    if let Some(&bad) = ds.iter().find(|&&d| !(2..=(1usize << 24)).contains(&d)) {
        bail!("--d {bad}: every d must be an integer >= 2 and <= 2^24");
    }
    let epsilons = if !args.epsilon.is_empty() {
        args.epsilon.clone()
    } else if args.quick {
        vec![1.0]
    } else {
        vec![0.5, 1.0, 2.0, 4.0]
    };
    if let Some(&bad) = epsilons.iter().find(|&&e| !(e.is_finite() && e > 0.0)) {
        bail!("--epsilon {bad}: every epsilon must be a finite number > 0");
    }
    let n = args.n.unwrap_or(if args.quick { 100_000 } else { 1_000_000 });
    if n == 0 {
        bail!("--n 0: the number of devices must be >= 1");
    }
    let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
    let threads = args.threads.unwrap_or(cores);
    if threads == 0 {
        bail!("--threads 0: use at least one thread");
    }
    let timing = if args.quick {
        Timing { min_time: Duration::from_millis(100), max_reps: 50 }
    } else {
        Timing { min_time: Duration::from_millis(500), max_reps: 1000 }
    };
    Ok(Plan { mechanisms, ds, epsilons, n, threads, timing })
}

/// The (mechanism, d, ε) cells in output order.
fn cells(p: &Plan) -> Vec<(String, Family, usize, f64)> {
    let mut out = Vec::new();
    for (name, f) in &p.mechanisms {
        let ds: &[usize] = if *f == Family::Numeric { &[1] } else { &p.ds };
        for &d in ds {
            for &eps in &p.epsilons {
                out.push((name.clone(), *f, d, eps));
            }
        }
    }
    out
}

/// n for a mechanism with `bytes` of O(d) data per user (reports, or input coordinates / 8):
/// capped so that it all fits in [`REPORT_BYTES_CAP`]; the note says why.
fn capped_n(n: usize, bytes: f64, why: &str) -> (usize, Option<String>) {
    let cap = ((REPORT_BYTES_CAP / bytes.max(1.0)) as usize).max(MIN_CAPPED_N);
    if n > cap { (cap, Some(format!("n reduced from {n} to {cap}: {why} (O(d) work per user)"))) } else { (n, None) }
}

/// Mean wire size of a few reports of a frequency oracle (to decide the n cap).
fn probe_frequency(oracle: &AnyOracle, d: usize) -> f64 {
    use harmony_core::FrequencyOracle;
    let mut rng = fast_rng(7);
    let reports: Vec<_> = (0..16).map(|i| oracle.randomize_unchecked(i % d, &mut rng)).collect();
    reports.iter().map(|r| r.encode().len()).sum::<usize>() as f64 / reports.len() as f64
}

/// Measures one cell.
fn measure(
    name: &str,
    fam: Family,
    d: usize,
    eps: f64,
    p: &Plan,
    seed: u64,
    pool: &rayon::ThreadPool,
) -> anyhow::Result<(usize, Measured, Option<String>)> {
    let rseed = stream_seed(seed, 0x5EED);
    Ok(match fam {
        Family::Numeric => {
            let mech = AnyNumeric::by_name(name, eps).with_context(|| format!("{name} at epsilon {eps}"))?;
            let inputs = cases::numeric_inputs(p.n, stream_seed(seed, 1));
            (p.n, cases::numeric(&mech, &inputs, rseed, pool, p.timing), None)
        }
        Family::Vector => {
            // Every user holds d coordinates (all read and checked by the batch API), so the work
            // per report is O(d) for both; cap n·d like O(d)-byte reports.
            let (n, note) = capped_n(p.n, d.div_ceil(8) as f64, &format!("{d} input coordinates per user"));
            let m = cases::vector_by_name(name, eps, d, n, rseed, pool, p.timing)
                .with_context(|| format!("{name} at d = {d}, epsilon {eps}"))?;
            (n, m, note)
        }
        Family::Frequency => {
            let oracle =
                AnyOracle::by_name(name, eps, d).with_context(|| format!("{name} at d = {d}, epsilon {eps}"))?;
            let (n, note) = if PER_CANDIDATE.contains(&name) {
                (p.n, None)
            } else if SKETCHES.contains(&harmony_core::FrequencyOracle::name(&oracle)) {
                // m-bit sketch reports: n·(report bytes) under the cap.
                capped_n(p.n, probe_frequency(&oracle, d), "m-bit sketch reports")
            } else {
                // Reports of more than a few words are d-bit vectors (SUE, OUE, adaptive as OUE).
                let bytes = probe_frequency(&oracle, d);
                if bytes > O_D_REPORT_BYTES {
                    capped_n(p.n, d.div_ceil(8) as f64, &format!("{d}-bit reports"))
                } else {
                    (p.n, None)
                }
            };
            let inputs = cases::zipf_inputs(n, d, stream_seed(seed, d as u64));
            let (m, any) = cases::frequency(&oracle, &inputs, rseed, pool, p.timing);
            (n, Measured { randomize_any_per_s: Some(any), ..m }, note)
        }
    })
}

/// Runs the benchmark.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let p = plan(&args)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(p.threads)
        .thread_name(|i| format!("bench-agg-{i}"))
        .build()
        .context("building the aggregation thread pool")?;
    let grid = cells(&p);
    let pb = progress(grid.len() as u64, "bench", args.format);
    let mut rows = Vec::with_capacity(grid.len());
    let mut skipped = Vec::new();
    for (name, fam, d, eps) in grid {
        pb.set_message(format!("{name} d={d} ε={eps}"));
        let (n, m, note) = match measure(&name, fam, d, eps, &p, args.seed, &pool) {
            Ok(x) => x,
            Err(e) => {
                pb.suspend(|| eprintln!("warning: skipped {name} d={d} epsilon={eps}: {e:#}"));
                skipped.push(Skipped { mechanism: name, d, epsilon: eps, reason: format!("{e:#}") });
                pb.inc(1);
                continue;
            }
        };
        let evaluations_per_s = PER_CANDIDATE.contains(&name.as_str()).then_some(m.aggregate_per_s * d as f64);
        rows.push(Row {
            mechanism: name,
            d,
            epsilon: eps,
            n,
            threads: p.threads,
            randomize_per_s: m.randomize_per_s,
            aggregate_per_s: m.aggregate_per_s,
            evaluations_per_s,
            randomize_s: m.randomize_s,
            aggregate_s: m.aggregate_s,
            estimate_s: m.estimate_s,
            randomize_reps: m.reps.0,
            aggregate_reps: m.reps.1,
            bytes_per_report: m.bytes_per_report,
            randomize_any_per_s: m.randomize_any_per_s,
            note,
        });
        pb.inc(1);
    }
    pb.finish_and_clear();
    let wall_s = started.elapsed().as_secs_f64();
    match args.format {
        Format::Json => {
            let out = Output { results: &rows, skipped: &skipped, seed: args.seed, quick: args.quick, wall_s };
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        Format::Table => {
            print!("{}", table(&rows, wall_s));
            for s in &skipped {
                println!("skipped {} d={} ε={}: {}", s.mechanism, s.d, s.epsilon, s.reason);
            }
        }
    }
    Ok(())
}

/// A rate with an SI suffix, three significant digits.
fn si(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let (v, suf) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|&(div, _)| x >= div)
        .map_or((x, ""), |(div, suf)| (x / div, suf));
    let decimals = if v < 10.0 {
        2
    } else if v < 100.0 {
        1
    } else {
        0
    };
    format!("{v:.decimals$}{suf}")
}

/// Human-readable aligned table (numbers right-aligned), with notes below.
fn table(rows: &[Row], wall_s: f64) -> String {
    let header =
        ["mechanism", "d", "ε", "n", "threads", "randomize/s", "(any)/s", "aggregate/s", "eval/s", "bytes/rep", "note"];
    let mut notes: Vec<String> = Vec::new();
    let body: Vec<[String; 11]> = rows
        .iter()
        .map(|r| {
            let note = match &r.note {
                Some(t) => {
                    if !notes.contains(t) {
                        notes.push(t.clone());
                    }
                    format!("[{}]", notes.iter().position(|x| x == t).unwrap_or(0) + 1)
                }
                None => String::new(),
            };
            [
                r.mechanism.clone(),
                if r.d == 1 && NUMERIC.contains(&r.mechanism.as_str()) { "-".into() } else { r.d.to_string() },
                format!("{}", r.epsilon),
                r.n.to_string(),
                r.threads.to_string(),
                si(r.randomize_per_s),
                r.randomize_any_per_s.map(si).unwrap_or_else(|| "-".into()),
                si(r.aggregate_per_s),
                r.evaluations_per_s.map(si).unwrap_or_else(|| "-".into()),
                r.bytes_per_report.map(|b| format!("{b:.1}")).unwrap_or_else(|| "-".into()),
                note,
            ]
        })
        .collect();
    let mut width = header.map(|h| h.chars().count());
    for row in &body {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(width).enumerate() {
            let pad = w - c.chars().count();
            if i == 0 || i == cells.len() - 1 {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
            s.push_str("  ");
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&header.map(String::from));
    out.push_str(&line(&width.map(|w| "-".repeat(w))));
    for row in &body {
        out.push_str(&line(row));
    }
    for (i, t) in notes.iter().enumerate() {
        out.push_str(&format!("[{}] {t}\n", i + 1));
    }
    out.push_str(&format!(
        "randomize: one thread, the mechanism's batch API (SUE/OUE/Duchi/Laplace: packed), seeded FastRng (8-lane Xoshiro256++) ((any) = through AnyOracle / AnyNumeric); \
         aggregate: add + estimate on the thread pool; {wall_s:.1} s in all\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> BenchArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            b: BenchArgs,
        }
        let mut v = vec!["bench"];
        v.extend_from_slice(extra);
        Cli::parse_from(v).b
    }

    #[test]
    fn unknown_mechanism_lists_valid_names() {
        let e = plan(&args(&["--mechanisms", "grr,nope"])).err().unwrap().to_string();
        assert!(e.contains("\"nope\"") && e.contains("bassily-smith") && e.contains("staircase"), "{e}");
    }

    #[test]
    fn quick_grid_is_small() {
        let p = plan(&args(&["--quick"])).unwrap();
        assert_eq!((p.n, p.epsilons.clone(), p.ds.clone()), (100_000, vec![1.0], vec![16, 1024]));
        let c = cells(&p);
        // 6 numeric cells (d = 1) + 14 d-dependent mechanisms x 2 d
        assert_eq!(c.len(), 6 + 14 * 2);
        assert!(c.iter().filter(|x| x.1 == Family::Numeric).all(|x| x.2 == 1));
    }

    #[test]
    fn bad_grid_values_are_rejected() {
        assert!(plan(&args(&["--d", "1"])).is_err());
        assert!(plan(&args(&["--epsilon", "0"])).is_err());
        assert!(plan(&args(&["--n", "0"])).is_err());
        assert!(plan(&args(&["--threads", "0"])).is_err());
    }

    #[test]
    fn cap_only_large_reports() {
        assert_eq!(capped_n(1_000_000, 12.0, "x").0, 1_000_000);
        let (n, note) = capped_n(1_000_000, 8192.0, "x");
        assert_eq!(n, 16_384);
        assert!(note.unwrap().contains("16384"));
    }

    #[test]
    fn si_suffixes() {
        assert_eq!(si(1234.0), "1.23k");
        assert_eq!(si(12_500_000.0), "12.5M");
        assert_eq!(si(999.0), "999");
        assert_eq!(si(2.5e9), "2.50G");
    }
}
