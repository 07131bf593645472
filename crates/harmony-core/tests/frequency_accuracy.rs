//! Monte-Carlo accuracy of every frequency oracle (fast tier: n = 10⁵ reports, debug build).
//!
//! For each oracle and ε ∈ {0.5, 1, 2, 4} on a skewed population over d = 16 items:
//! * every estimate f̂_v is within z·σ_v of its expectation (f_v; Bassily–Smith: its biased
//!   expectation Σ_x f_x⟨Φ_x, Φ_v⟩), with σ_v² = `aggregate_variance(f, v)/n`, the closed form;
//! * the plug-in standard error is within 25% of σ_v;
//! * the one-report estimate Y (`report_estimate`) has the closed-form mean and variance
//!   (`report_variance`) for x = v and x ≠ v (z-tests of the mean of Y and of the mean of Y²
//!   against variance + mean²).
//!
//! z: each test function makes m checks and uses the Bonferroni z for an overall false-failure
//! rate of 1e-5 (z = 4.42 for a single check, ≈ 5.5 for 100), so the whole file fails spuriously
//! with probability below 1e-4.

mod frequency_support;

use frequency_support::*;
use harmony_core::FrequencyOracle;
use harmony_core::frequency::*;

const D: usize = 16;

#[test]
fn grr_monte_carlo() {
    check_estimates("grr", D, 100_000, 3000);
}

#[test]
fn sue_monte_carlo() {
    check_estimates("sue", D, 100_000, 3100);
}

#[test]
fn oue_monte_carlo() {
    check_estimates("oue", D, 100_000, 3200);
}

#[test]
fn olh_monte_carlo() {
    check_estimates("olh", D, 100_000, 3300);
}

#[test]
fn hadamard_monte_carlo() {
    check_estimates("hadamard", D, 100_000, 3400);
}

#[test]
fn hr_monte_carlo() {
    check_estimates("hr", D, 100_000, 3500);
    // A domain with several partly filled blocks and a single-item-block configuration.
    check_estimates("hr", 37, 100_000, 3550);
}

#[test]
fn bassily_smith_monte_carlo_centres_on_its_biased_expectation() {
    check_estimates("bassily-smith", D, 100_000, 3600);
    // With a short matrix (m = K rows, as a naive implementation would pick) the bias is real:
    // the expectation differs from the truth. The default m = 2^16 makes it small, not zero.
    let (_, f) = skewed_population(D, 100_000);
    let bs = BassilySmith::with_matrix(
        1.0,
        D,
        D.next_power_of_two(),
        harmony_core::frequency::bassily_smith::DEFAULT_MATRIX_SEED,
    )
    .unwrap();
    let default = BassilySmith::new(1.0, D).unwrap();
    let default_bias = (0..D).map(|v| default.bias(&f, v).abs()).fold(0.0, f64::max);
    assert!(default_bias < 0.01, "default matrix max |bias| = {default_bias}");
    let max_bias = (0..D).map(|v| bs.bias(&f, v).abs()).fold(0.0, f64::max);
    assert!(max_bias > 0.01, "max |bias| = {max_bias}");
    // ... and it is exactly Σ_{x≠v} f_x⟨Φ_x, Φ_v⟩ by enumeration of (j, bit) for one report.
    for x in 0..4 {
        for v in 0..D {
            let o = AnyOracle::BassilySmith(bs.clone());
            let mean: f64 =
                all_outputs(&o, 0).iter().map(|r| o.output_probability(x, r) * o.report_estimate(r, v)).sum();
            assert!((mean - bs.inner_product(x, v)).abs() < 1e-12, "x = {x} v = {v}: {mean}");
        }
    }
}

#[test]
fn adaptive_monte_carlo_both_branches() {
    check_estimates("adaptive", D, 100_000, 3700); // GRR for eps >= 2, OUE below
    check_estimates("adaptive", 64, 100_000, 3750); // OUE for eps <= 2, GRR at eps = 4
}

#[test]
fn cms_monte_carlo_centres_on_its_fixed_family_expectation() {
    check_estimates("cms", D, 100_000, 3800);
    // Small sketches: the collision terms are large and must be in the closed forms.
    check_estimates("cms:k=4:m=8", D, 100_000, 3810);
}

#[test]
fn hcms_monte_carlo_centres_on_its_fixed_family_expectation() {
    check_estimates("hcms", D, 100_000, 3900);
    check_estimates("hcms:k=4:m=8", D, 100_000, 3910);
}

#[test]
fn rappor_monte_carlo() {
    check_estimates("rappor", D, 100_000, 4000);
    // With an instantaneous response and few bits per cohort.
    check_estimates("rappor:m=16:cohorts=4:p=0.25:q=0.75", D, 100_000, 4010);
}

#[test]
fn olh_hash_collision_rate_is_one_over_g() {
    // Pairs of items, including far-apart and huge u64 items.
    let pairs: [(u64, u64); 6] = [(0, 1), (1, 2), (5, 1 << 20), (7, 7 + (1 << 31)), (3, u64::MAX), (1 << 40, 12_345)];
    let gs = [2u32, 3, 8, 56];
    let seeds = 200_000u64;
    let z = z_bonferroni(1e-5, pairs.len() * gs.len());
    for &g in &gs {
        let o = Olh::with_g(1.0, 4, g).unwrap();
        for &(a, b) in &pairs {
            let hits = (0..seeds)
                .filter(|&s| {
                    o.hash(s.wrapping_mul(0x9E37_79B9_7F4A_7C15), a) == o.hash(s.wrapping_mul(0x9E37_79B9_7F4A_7C15), b)
                })
                .count();
            let p = 1.0 / g as f64;
            let zz = (hits as f64 - seeds as f64 * p) / (seeds as f64 * p * (1.0 - p)).sqrt();
            assert!(
                zz.abs() < z,
                "g = {g} items ({a}, {b}): n = {seeds}, collisions {hits}, expected {:.0}, z = {zz:.2} (tolerance {z:.2})",
                seeds as f64 * p
            );
        }
    }
}

#[test]
fn aggregate_variance_overrides_equal_the_weighted_report_variances() {
    let (_, f) = skewed_population(D, 1000);
    for name in FREQUENCY_NAMES {
        for &eps in &EPSILONS {
            let o = AnyOracle::by_name(name, eps, D).unwrap();
            for v in 0..D {
                let by_sum: f64 = f.iter().enumerate().map(|(x, &fx)| fx * o.report_variance(x, v)).sum();
                let closed = o.aggregate_variance(&f, v);
                assert!(
                    (closed - by_sum).abs() < 1e-9 * by_sum.abs().max(1.0),
                    "{name} eps = {eps} v = {v}: {closed} vs {by_sum}"
                );
            }
            let pairs = || (0..D).flat_map(|x| (0..D).map(move |v| (x, v)));
            let worst = pairs().map(|(x, v)| o.report_variance(x, v)).fold(0.0, f64::max);
            if let AnyOracle::Cms(_) | AnyOracle::Hcms(_) = &o {
                // The sketches report the worst case (x ≠ v) averaged over hash seeds: a pair's
                // exact variance for the fixed seed differs from it by its collision term only,
                // at most (m/(m − 1))²/4 (m = 1024 by default).
                for (x, v) in pairs().filter(|(x, v)| x != v) {
                    let diff = (o.report_variance(x, v) - o.worst_case_variance()).abs();
                    assert!(diff <= 0.25 * (1024.0f64 / 1023.0).powi(2), "{name} eps = {eps} ({x}, {v}): {diff}");
                }
            } else {
                assert!(
                    (o.worst_case_variance() - worst).abs() < 1e-9 * worst,
                    "{name} eps = {eps}: worst {} vs {worst}",
                    o.worst_case_variance()
                );
            }
        }
    }
}
