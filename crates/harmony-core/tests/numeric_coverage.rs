//! The plug-in standard error is honest: over 400 independent runs of n = 2000 users, the 95% CI
//! covers the true mean in 92–98% of them. With true coverage 0.95 the count of covering runs has
//! sd 4.4, so the band is ±2.75 sd (about 0.6% false failures per mechanism at fresh seeds; the
//! seeds are fixed). Duchi-type mechanisms (a = −1) use a conservative plug-in, so their coverage
//! sits slightly above 0.95.

use harmony_core::Aggregator;
use harmony_core::numeric::{AnyNumeric, NumericMechanism};
use harmony_core::sampling::{fast_rng, stream_seed};

const RUNS: u64 = 400;
const N: usize = 2000;

fn coverage(m: &AnyNumeric, ts: &[f64], seed: u64) -> f64 {
    let truth = ts.iter().sum::<f64>() / ts.len() as f64;
    let mut covered = 0;
    let mut reports = Vec::with_capacity(ts.len());
    for run in 0..RUNS {
        let mut rng = fast_rng(stream_seed(seed, run));
        reports.clear();
        m.randomize_batch(ts, &mut rng, &mut reports).unwrap();
        let mut agg = m.aggregator();
        agg.add_batch(&reports).unwrap();
        covered += agg.estimate().covers(truth) as u32;
    }
    covered as f64 / RUNS as f64
}

#[test]
fn plug_in_ci_covers_the_truth_about_95_percent_of_the_time() {
    // A skewed population: many users near 0.8, some at -1, a spread in between.
    let ts: Vec<f64> = (0..N)
        .map(|i| match i % 10 {
            0..=4 => 0.8,
            5 | 6 => -1.0,
            k => (k as f64 - 8.0) * 0.5 + ((i * 37) % 100) as f64 / 1000.0,
        })
        .collect();
    let mut failures = Vec::new();
    for (k, (name, eps)) in
        [("pm", 1.0), ("pm", 4.0), ("hm", 1.0), ("hm", 0.5), ("duchi", 1.0), ("laplace", 1.0)].into_iter().enumerate()
    {
        let m = AnyNumeric::by_name(name, eps).unwrap();
        let c = coverage(&m, &ts, 0xc0fe + k as u64);
        println!("{name} eps={eps}: coverage {c:.4} over {RUNS} runs of n = {N}");
        if !(0.92..=0.98).contains(&c) {
            failures
                .push(format!("{name} eps={eps}: coverage {c:.4} over {RUNS} runs of n = {N}, expected [0.92, 0.98]"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
