//! Shared helpers of the frequency-oracle tests: thresholds at stated false-failure rates, a
//! skewed test population and the enumeration of every output of a small oracle.
#![allow(dead_code)]

use harmony_core::estimate::Moments;
use harmony_core::frequency::*;
use harmony_core::sampling::fast_rng;
use harmony_core::{Aggregator, FrequencyOracle};

/// Complementary error function (Numerical Recipes `erfcc`, relative error < 1.2e-7).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// The z with P[|Z| > z] = alpha for a standard normal Z (bisection).
pub fn z_two_sided(alpha: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if erfc(mid / std::f64::consts::SQRT_2) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Per-check z for `checks` two-sided checks whose union has false-failure rate `alpha`
/// (Bonferroni). `z_bonferroni(1e-5, 1)` = 4.42.
pub fn z_bonferroni(alpha: f64, checks: usize) -> f64 {
    z_two_sided(alpha / checks as f64)
}

/// The upper `alpha` quantile of χ² with k degrees of freedom (Wilson–Hilferty; exact for
/// k = 1 through the normal).
pub fn chi2_critical(k: usize, alpha: f64) -> f64 {
    let z = z_two_sided(2.0 * alpha);
    if k == 1 {
        return z * z;
    }
    let k = k as f64;
    let a = 2.0 / (9.0 * k);
    k * (1.0 - a + z * a.sqrt()).powi(3)
}

/// A skewed population of n users over [0, d): Zipf(1.2) weights on the first 3d/4 items and
/// none on the last quarter (so f_v = 0 items are covered). Returns the values and the exact
/// fractions (counts / n).
pub fn skewed_population(d: usize, n: usize) -> (Vec<usize>, Vec<f64>) {
    let support = (3 * d / 4).max(1);
    let w: Vec<f64> = (0..support).map(|x| 1.0 / ((x + 1) as f64).powf(1.2)).collect();
    let total: f64 = w.iter().sum();
    let mut counts: Vec<usize> = w.iter().map(|wx| (wx / total * n as f64).floor() as usize).collect();
    counts[0] += n - counts.iter().sum::<usize>();
    counts.resize(d, 0);
    let values = counts.iter().enumerate().flat_map(|(x, &c)| std::iter::repeat_n(x, c)).collect();
    let freqs = counts.iter().map(|&c| c as f64 / n as f64).collect();
    (values, freqs)
}

/// E[one report's estimate of f_v | x]: 1[x = v], ⟨Φ_x, Φ_v⟩ for Bassily–Smith, and for the
/// count mean sketches 1[x = v] plus their fixed hash family's collision term.
pub fn report_mean(o: &AnyOracle, x: usize, v: usize) -> f64 {
    match o {
        AnyOracle::BassilySmith(b) => b.inner_product(x, v),
        AnyOracle::Cms(c) => c.report_mean(x, v),
        AnyOracle::Hcms(c) => c.report_mean(x, v),
        _ => (x == v) as u8 as f64,
    }
}

/// E[f̂_v] for a population with fractions `f`: f_v, or the biased Bassily–Smith expectation,
/// or f_v plus a count mean sketch's collision bias for its fixed hash family.
pub fn estimate_mean(o: &AnyOracle, f: &[f64], v: usize) -> f64 {
    match o {
        AnyOracle::BassilySmith(b) => b.expectation(f, v),
        AnyOracle::Cms(c) => c.expectation(f, v),
        AnyOracle::Hcms(c) => c.expectation(f, v),
        _ => f[v],
    }
}

/// Whether every output of the oracle can be enumerated (the sketches' default m-bit reports
/// cannot: their exact tests use small m in their own modules).
pub fn enumerable(name: &str) -> bool {
    name != "olh" && !SKETCH_NAMES.contains(&name)
}

fn unary_outputs(d: usize) -> Vec<UnaryReport> {
    assert!(d <= 12, "enumerating 2^{d} bit vectors");
    (0u64..1 << d).map(|b| UnaryReport { bits: vec![b] }).collect()
}

/// Every possible report of a small oracle. For OLH: the reports carrying `olh_seed`.
pub fn all_outputs(o: &AnyOracle, olh_seed: u64) -> Vec<AnyReport> {
    let signed = |rows: usize| -> Vec<(u32, bool)> { (0..rows as u32).flat_map(|j| [(j, false), (j, true)]).collect() };
    match o {
        AnyOracle::Grr(g) => (0..g.domain_size() as u32).map(|y| AnyReport::Grr(GrrReport { y })).collect(),
        AnyOracle::Sue(u) | AnyOracle::Oue(u) => {
            unary_outputs(u.domain_size()).into_iter().map(AnyReport::Unary).collect()
        }
        AnyOracle::Olh(h) => (0..h.g()).map(|y| AnyReport::Olh(OlhReport { seed: olh_seed, y })).collect(),
        AnyOracle::Hadamard(h) => {
            signed(h.rows()).into_iter().map(|(j, bit)| AnyReport::Hadamard(HadamardReport { j, bit })).collect()
        }
        AnyOracle::Hr(h) => (0..h.outputs() as u32).map(|y| AnyReport::Hr(HrReport { y })).collect(),
        AnyOracle::BassilySmith(b) => signed(b.rows())
            .into_iter()
            .map(|(j, bit)| AnyReport::BassilySmith(BassilySmithReport { j, bit }))
            .collect(),
        AnyOracle::Adaptive(a) => {
            all_outputs(a.inner(), olh_seed).into_iter().map(|r| AnyReport::Adaptive(AutoReport(Box::new(r)))).collect()
        }
        AnyOracle::Ss(o) => unary_outputs(o.domain_size())
            .into_iter()
            .filter(|r| r.bits[0].count_ones() as usize == o.k())
            .map(|r| AnyReport::Ss(SsReport { bits: r.bits }))
            .collect(),
        AnyOracle::Cms(_) | AnyOracle::Hcms(_) | AnyOracle::Rappor(_) => {
            panic!("{}: outputs not enumerable at the default sizes (see enumerable())", o.name())
        }
    }
}

/// The test parameters of the Monte-Carlo tiers.
pub const EPSILONS: [f64; 4] = [0.5, 1.0, 2.0, 4.0];

/// Checks the estimates of one oracle at every ε; `n` reports each.
pub fn check_estimates(name: &str, d: usize, n: usize, seed: u64) {
    let report_pairs = [(0usize, 0usize), (0, 1), (d - 1, 0), (1, 1), (5, d - 1)];
    let draws = n / 2;
    let checks = EPSILONS.len() * (d + 2 * report_pairs.len());
    let z = z_bonferroni(1e-5, checks);
    let (values, f) = skewed_population(d, n);
    for (k, &eps) in EPSILONS.iter().enumerate() {
        let o = AnyOracle::by_name(name, eps, d).unwrap();
        let mut rng = fast_rng(seed + k as u64);
        let mut reports = Vec::new();
        o.randomize_batch(&values, &mut rng, &mut reports).unwrap();
        let mut agg = o.aggregator();
        agg.add_batch(&reports).unwrap();
        let est = agg.estimate();
        assert_eq!(est.n, n as u64);
        for v in 0..d {
            let target = estimate_mean(&o, &f, v);
            let sigma = (o.aggregate_variance(&f, v) / n as f64).sqrt();
            let err = est.frequencies[v] - target;
            assert!(
                err.abs() < z * sigma,
                "{name} eps = {eps} v = {v}: n = {n}, estimate {:.5}, target {target:.5}, tolerance {:.5} (z = {z:.2})",
                est.frequencies[v],
                z * sigma
            );
            let ratio = est.std_errors[v] / sigma;
            assert!(
                (ratio - 1.0).abs() < 0.25,
                "{name} eps = {eps} v = {v}: plug-in se {} vs sigma {sigma}",
                est.std_errors[v]
            );
        }
        // One report's estimate: mean and variance against the closed forms.
        for (j, &(x, v)) in report_pairs.iter().enumerate() {
            let mut rng = fast_rng(seed + 1000 * (k as u64 + 1) + j as u64);
            let (mut m, mut m2) = (Moments::default(), Moments::default());
            for _ in 0..draws {
                let r = o.randomize(x, &mut rng).unwrap();
                let y = o.report_estimate(&r, v);
                m.push(y);
                m2.push(y * y);
            }
            let (mean, var) = (report_mean(&o, x, v), o.report_variance(x, v));
            let zm = m.z_mean(mean, var);
            assert!(
                zm.abs() < z,
                "{name} eps = {eps} x = {x} v = {v}: n = {draws}, mean {:.5}, target {mean:.5}, z = {zm:.2} (tolerance {z:.2})",
                m.mean
            );
            check_variance(&format!("{name} eps = {eps} x = {x} v = {v}"), &m2, mean, var, z);
        }
    }
}

/// Tests Var(Y) = `var` through the second moment E[Y²] = var + mean² (with `mean` the closed
/// form): a sample average, so its z-test is valid even for two-point Y, whose sample variance
/// is a degenerate (non-normal) statistic. When Y² is constant the check is exact.
pub fn check_variance(what: &str, m2: &Moments, mean: f64, var: f64, z: f64) {
    let target = var + mean * mean;
    if m2.variance() <= 1e-12 * target * target {
        assert!((m2.mean - target).abs() <= 1e-9 * target, "{what}: E[Y^2] = {} is constant, target {target}", m2.mean);
        return;
    }
    let zv = m2.z_mean(target, m2.variance());
    assert!(
        zv.abs() < z,
        "{what}: n = {}, variance {:.5}, target {var:.5}, z = {zv:.2} (tolerance {z:.2})",
        m2.n,
        m2.mean - mean * mean
    );
}

/// Empirical ε on E = {o : P[o | x] = e^ε·P[o | x']} (log-likelihood ratio ε), with its
/// delta-method standard error.
pub fn audit(o: &AnyOracle, x: usize, x2: usize, n: usize, seed: u64) -> (f64, f64) {
    let mut rng = fast_rng(seed);
    let mut hits = [0u64; 2];
    for (k, &input) in [x, x2].iter().enumerate() {
        for _ in 0..n {
            let r = o.randomize(input, &mut rng).unwrap();
            // E = the outputs of the largest ratio, e^ε (for GRR, OUE, OLH, HR, ... the same as
            // ratio > 1; for RAPPOR with h = 2 hashes the ratios e^(jε/4) between also exist).
            let llr = o.log_likelihood_ratio(x, x2, &r);
            hits[k] += (llr > o.epsilon().value() * (1.0 - 1e-9)) as u64;
        }
    }
    let (p1, p0) = (hits[0] as f64 / n as f64, hits[1] as f64 / n as f64);
    let se = ((1.0 - p1) / (n as f64 * p1) + (1.0 - p0) / (n as f64 * p0)).sqrt();
    ((p1 / p0).ln(), se)
}
