//! Heavy statistical tier of the sketch oracles (release: `cargo test --release -p harmony-core
//! --test sketch_heavy -- --ignored`). The default shapes are covered by `frequency_heavy.rs`
//! (every name of `FREQUENCY_NAMES` at n = 10⁶, CI coverage, ε audit); here: small sketches,
//! where the hash-collision terms are large, at n = 10⁶, RAPPOR with an instantaneous response,
//! and the count mean sketches' unbiasedness over random hash families.
//!
//! z: Bonferroni over each test's checks for an overall false-failure rate of 1e-5 per test.

mod frequency_support;

use frequency_support::*;
use harmony_core::frequency::{AnyOracle, Cms, Hcms};
use harmony_core::sampling::fast_rng;
use harmony_core::{Aggregator, FrequencyOracle};

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_small_sketches_and_rappor_with_irr() {
    let specs =
        ["cms:k=4:m=8", "cms:k=16:m=64", "hcms:k=4:m=8", "hcms:k=16:m=64", "rappor:m=32:cohorts=8:p=0.25:q=0.75"];
    for (i, spec) in specs.iter().enumerate() {
        check_estimates(spec, 16, 1_000_000, 20_000 + 100 * i as u64);
    }
    check_estimates("rappor:m=64:h=3:cohorts=16", 200, 1_000_000, 21_000);
}

/// Over random hash seeds the count mean sketches are unbiased: R runs, each with a fresh seed
/// and n users, small k and m so that a fixed seed's collision bias is large; the mean of the
/// R estimates of every item is within z·(sample sd)/√R of f_v.
#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_count_mean_sketches_are_unbiased_over_hash_families() {
    let (d, n, runs) = (8usize, 2000usize, 20_000usize);
    let (values, f) = skewed_population(d, n);
    let z = z_bonferroni(1e-5, 2 * d);
    let mut rng = fast_rng(22_000);
    for which in ["cms", "hcms"] {
        let (mut sum, mut sum2) = (vec![0.0; d], vec![0.0; d]);
        let mut max_fixed_bias = 0.0f64;
        for r in 0..runs as u64 {
            let o = match which {
                "cms" => AnyOracle::Cms(Cms::with_params(2.0, d, 4, 8, r).unwrap()),
                _ => AnyOracle::Hcms(Hcms::with_params(2.0, d, 4, 8, r).unwrap()),
            };
            let mut reports = Vec::with_capacity(n);
            o.randomize_batch(&values, &mut rng, &mut reports).unwrap();
            let mut agg = o.aggregator();
            agg.add_batch(&reports).unwrap();
            let est = agg.estimate();
            for v in 0..d {
                sum[v] += est.frequencies[v];
                sum2[v] += est.frequencies[v] * est.frequencies[v];
                max_fixed_bias = max_fixed_bias.max((estimate_mean(&o, &f, v) - f[v]).abs());
            }
        }
        for v in 0..d {
            let mean = sum[v] / runs as f64;
            let sd = ((sum2[v] / runs as f64 - mean * mean) * runs as f64 / (runs as f64 - 1.0)).sqrt();
            let zz = (mean - f[v]) / (sd / (runs as f64).sqrt());
            assert!(
                zz.abs() < z,
                "{which} v = {v}: {runs} seeds x n = {n}, mean {mean:.5}, f_v {:.5}, z = {zz:.2} (tolerance {z:.2})",
                f[v]
            );
        }
        // The fixed-seed bias being averaged out is real (not a test that cannot fail).
        assert!(max_fixed_bias > 0.02, "{which}: largest fixed-seed bias {max_fixed_bias}");
        println!("{which}: unbiased over {runs} seeds; largest fixed-seed collision bias {max_fixed_bias:.4}");
    }
}
