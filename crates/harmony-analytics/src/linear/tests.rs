//! Statistical tests of the linear-query mechanisms against their closed-form moments.
//!
//! Each check is a z-test at z = 4.42 (two-sided false-failure rate 1e-5 per check): the mean
//! of R independent runs against the truth (sd √(Var/R)), and the runs' sample variance
//! against the closed form (sd Var·√(2/(R − 1)), the normal approximation: each answer is a
//! mean of n independent reports). Fast tier: a few seconds in debug; the `#[ignore]` tier runs
//! in release (`cargo test -p harmony-analytics --release -- --ignored`).

use super::*;
use harmony_core::Aggregator;
use harmony_core::sampling::{fast_rng, stream_seed, uniform01};
use std::sync::Arc;

const Z: f64 = 4.42;

/// A fixed population of n values over \[J\] (Zipf-like weights, seeded).
fn population(n: usize, j: usize, seed: u64) -> Vec<usize> {
    let w: Vec<f64> = (1..=j).map(|r| (r as f64).powf(-0.8)).collect();
    let total: f64 = w.iter().sum();
    let mut cdf = Vec::with_capacity(j);
    let mut acc = 0.0;
    for x in &w {
        acc += x / total;
        cdf.push(acc);
    }
    let mut rng = fast_rng(seed);
    (0..n)
        .map(|_| {
            let u = uniform01(&mut rng);
            cdf.iter().position(|&c| u < c).unwrap_or(j - 1)
        })
        .collect()
}

/// A mixed workload over \[J\]: prefix ranges, a point query, and signed weights.
fn mixed_workload(j: usize) -> Workload {
    let mut names = Vec::new();
    let mut rows = Vec::new();
    for t in [0, j / 3, j / 2, j - 2] {
        names.push(format!("<= {t}"));
        rows.push((0..j).map(|v| (v <= t) as u8 as f64).collect());
    }
    names.push("point 1".into());
    rows.push((0..j).map(|v| (v == 1) as u8 as f64).collect());
    names.push("weights".into());
    rows.push((0..j).map(|v| ((v * 5) % 7) as f64 / 3.0 - 1.0).collect());
    Workload::from_rows(names, j, rows).unwrap()
}

/// Checks mean and variance of R runs (`runs[r][t]`) against truth and closed-form variance.
fn check_moments(what: &str, runs: &[Vec<f64>], truth: &[f64], var: &[f64]) {
    let r = runs.len() as f64;
    for t in 0..truth.len() {
        let mean = runs.iter().map(|x| x[t]).sum::<f64>() / r;
        let s2 = runs.iter().map(|x| (x[t] - mean).powi(2)).sum::<f64>() / (r - 1.0);
        let z_mean = (mean - truth[t]) / (var[t] / r).sqrt();
        let z_var = (s2 - var[t]) / (var[t] * (2.0 / (r - 1.0)).sqrt());
        assert!(
            z_mean.abs() < Z && z_var.abs() < Z,
            "{what}, query {t}: R = {r}, mean {mean:.6} vs truth {:.6} (z = {z_mean:.2}); \
             variance {s2:.3e} vs closed form {:.3e} (z = {z_var:.2}); tolerance |z| < {Z}",
            truth[t],
            var[t]
        );
    }
}

fn gaussian_moments(j: usize, n: usize, runs: usize, eps: f64, seed: u64) {
    let values = population(n, j, seed);
    let w = Arc::new(mixed_workload(j));
    let truth = w.apply(&distribution(&values, j).unwrap());
    let g = GaussianWorkload::new(eps, 1e-6, w.clone()).unwrap();
    let out: Vec<Vec<f64>> =
        (0..runs).map(|r| simulate::gaussian(&g, &values, stream_seed(seed, r as u64)).unwrap().mean()).collect();
    let var = vec![g.answer_variance(n as u64); w.queries()];
    check_moments(&format!("gaussian J={j} n={n} eps={eps}"), &out, &truth, &var);
}

fn hr_moments(j: usize, n: usize, runs: usize, eps: f64, seed: u64) {
    let values = population(n, j, seed);
    let w = Arc::new(mixed_workload(j));
    let p = distribution(&values, j).unwrap();
    let truth = w.apply(&p);
    let h = HrWorkload::new(eps, w.clone()).unwrap();
    let out: Vec<Vec<f64>> = (0..runs)
        .map(|r| {
            let est = simulate::hr(&h, &values, stream_seed(seed, r as u64)).unwrap();
            h.answer(&est).unwrap().answers.values()
        })
        .collect();
    check_moments(&format!("hr J={j} n={n} eps={eps}"), &out, &truth, &h.variances(&p, n as u64));
}

fn adaptive_moments(j: usize, n: usize, runs: usize, eps: f64, seed: u64) {
    let values = population(n, j, seed);
    let w = mixed_workload(j);
    let p = distribution(&values, j).unwrap();
    let truth = w.apply(&p);
    let mut sizes = Vec::new();
    let out: Vec<Vec<f64>> = (0..runs)
        .map(|r| {
            let (est, s) = simulate::adaptive(eps, &w, &values, stream_seed(seed, r as u64)).unwrap();
            sizes = s;
            est.values()
        })
        .collect();
    // Balanced groups: the sizes are the same in every run.
    let var: Vec<f64> =
        (0..w.queries()).map(|t| AdaptiveQuery::new(eps, w.row(t)).unwrap().variance(&p, n as u64, sizes[t])).collect();
    check_moments(&format!("adaptive J={j} n={n} eps={eps}"), &out, &truth, &var);
}

#[test]
fn gaussian_is_unbiased_with_the_closed_form_variance() {
    gaussian_moments(12, 200, 8000, 1.0, 11);
}

#[test]
fn hr_answers_are_unbiased_with_the_closed_form_variance() {
    hr_moments(20, 300, 8000, 1.0, 12);
    hr_moments(20, 300, 8000, 4.0, 13);
}

#[test]
fn adaptive_answers_are_unbiased_with_the_exact_variance() {
    adaptive_moments(10, 600, 8000, 1.0, 14);
}

#[test]
#[ignore = "heavy statistical tier: run in release with --ignored"]
fn heavy_unbiasedness_and_variance() {
    gaussian_moments(60, 2000, 20_000, 0.5, 21);
    gaussian_moments(60, 2000, 20_000, 4.0, 22);
    hr_moments(200, 5000, 20_000, 1.0, 23);
    hr_moments(100, 5000, 20_000, 5.0, 24);
    adaptive_moments(30, 6000, 20_000, 2.0, 25);
}

/// The 95% CIs of the unbiased answers cover the truth at about the nominal rate.
#[test]
fn confidence_intervals_cover() {
    let (j, n, runs) = (12, 400, 200);
    let values = population(n, j, 31);
    let w = Arc::new(mixed_workload(j));
    let p = distribution(&values, j).unwrap();
    let truth = w.apply(&p);
    let g = GaussianWorkload::new(1.0, 1e-6, w.clone()).unwrap();
    let h = HrWorkload::new(1.0, w.clone()).unwrap();
    let (mut covered, mut total) = ([0usize; 2], 0usize);
    for r in 0..runs {
        let ge = simulate::gaussian(&g, &values, stream_seed(32, r as u64)).unwrap().estimate();
        let he = h.answer(&simulate::hr(&h, &values, stream_seed(33, r as u64)).unwrap()).unwrap().answers;
        for (t, &x) in truth.iter().enumerate() {
            covered[0] += ge.answers[t].covers(x) as usize;
            covered[1] += he.answers[t].covers(x) as usize;
            total += 1;
        }
    }
    // Binomial(1200, 0.95): sd 0.0063; accept [0.92, 0.98] (about ±4.7 sd). HR plugs in Π(p̂).
    for (name, c) in ["gaussian", "hr"].iter().zip(covered) {
        let rate = c as f64 / total as f64;
        assert!((0.92..=0.98).contains(&rate), "{name}: 95% CI coverage {rate:.3} over {total}");
    }
}

fn l2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt()
}

/// (raw, projected) l2 errors of the Gaussian mechanism with the identity workload, mean over
/// runs.
pub(super) fn gaussian_projection_gain(j: usize, n: usize, eps: f64, runs: usize, seed: u64) -> (f64, f64) {
    let values = population(n, j, seed);
    let w = Arc::new(Workload::identity(&Domain::indices(j).unwrap()).unwrap());
    let p = distribution(&values, j).unwrap();
    let g = GaussianWorkload::new(eps, 1e-6, w.clone()).unwrap();
    let (mut raw, mut proj) = (0.0, 0.0);
    for r in 0..runs {
        let y = simulate::gaussian(&g, &values, stream_seed(seed, r as u64)).unwrap().mean();
        raw += l2(&y, &p);
        proj += l2(&project(&w, &y, Hull::Symmetric, ProjectOptions::default()).answers, &p);
    }
    (raw / runs as f64, proj / runs as f64)
}

/// (raw, projected) l2 errors of HR on the identity workload.
fn hr_projection_gain(j: usize, n: usize, eps: f64, runs: usize, seed: u64) -> (f64, f64) {
    let values = population(n, j, seed);
    let w = Arc::new(Workload::identity(&Domain::indices(j).unwrap()).unwrap());
    let p = distribution(&values, j).unwrap();
    let h = HrWorkload::new(eps, w).unwrap();
    let (mut raw, mut proj) = (0.0, 0.0);
    for r in 0..runs {
        let ans = h.answer(&simulate::hr(&h, &values, stream_seed(seed, r as u64)).unwrap()).unwrap();
        raw += l2(&ans.answers.values(), &p);
        proj += l2(&ans.projected, &p);
    }
    (raw / runs as f64, proj / runs as f64)
}

#[test]
fn projection_helps_in_the_high_dimensional_regime() {
    let (raw, proj) = gaussian_projection_gain(300, 1000, 1.0, 3, 41);
    assert!(raw > 5.0 * proj, "gaussian J=300 n=1000: raw l2 {raw:.3}, projected {proj:.3}");
    let (raw, proj) = hr_projection_gain(300, 1000, 1.0, 3, 42);
    assert!(raw > 2.0 * proj, "hr J=300 n=1000: raw l2 {raw:.3}, projected {proj:.3}");
}

/// The acceptance figure: J = 1000, n = 5000, ε = 1 (δ = 1e-6), identity workload.
#[test]
#[ignore = "heavy tier: the J = 1000 acceptance figure"]
fn projection_gain_at_j1000() {
    let (raw, proj) = gaussian_projection_gain(1000, 5000, 1.0, 5, 51);
    eprintln!("gaussian J=1000 n=5000 eps=1: l2 raw {raw:.3}, projected {proj:.3}, ratio {:.2}", raw / proj);
    assert!(raw > 5.0 * proj);
    let (raw, proj) = hr_projection_gain(1000, 5000, 1.0, 5, 52);
    eprintln!("hr J=1000 n=5000 eps=1: l2 raw {raw:.3}, projected {proj:.3}, ratio {:.2}", raw / proj);
    assert!(raw > 2.0 * proj);
}

/// Devices draw their query ([`AdaptiveWorkload`]): the group sizes vary between runs, and each
/// answer's error standardized by the exact variance at that run's realized size m_t has mean 0
/// and mean square 1 (z = 4.42 per query, false-failure rate ≈ 1e-5 per check).
#[test]
fn adaptive_devices_choose_their_query_and_realized_sizes_give_the_variance() {
    use harmony_core::Randomizer;
    let (j, n, runs, eps) = (10, 600, 2000, 1.0);
    let values = population(n, j, 41);
    let w = Arc::new(mixed_workload(j));
    let p = distribution(&values, j).unwrap();
    let truth = w.apply(&p);
    let mech = AdaptiveWorkload::new(eps, w.clone()).unwrap();
    let queries: Vec<AdaptiveQuery> = (0..w.queries()).map(|t| mech.query(t).unwrap()).collect();
    let d = w.queries();
    let (mut z1, mut z2, mut distinct) = (vec![0.0; d], vec![0.0; d], std::collections::HashSet::new());
    let mut rng = fast_rng(42);
    for _ in 0..runs {
        let mut agg = mech.aggregator();
        for v in &values {
            agg.add(&mech.randomize(v, &mut rng).unwrap()).unwrap();
        }
        let (est, sizes) = (agg.estimate(), agg.counts());
        distinct.insert(sizes.clone());
        for t in 0..d {
            let var = queries[t].variance(&p, n as u64, sizes[t]);
            let e = est.answers[t].value - truth[t];
            z1[t] += e / var.sqrt();
            z2[t] += e * e / var;
        }
    }
    assert!(distinct.len() > runs / 2, "the group sizes should vary: {} distinct", distinct.len());
    let r = runs as f64;
    for t in 0..d {
        let (mean, msq) = (z1[t] / r, z2[t] / r);
        assert!(mean.abs() < Z / r.sqrt(), "query {t}: mean standardized error {mean}, tolerance {}", Z / r.sqrt());
        assert!((msq - 1.0).abs() < Z * (2.0 / r).sqrt(), "query {t}: mean squared standardized error {msq}");
    }
    // Reports are checked against d; merging two halves equals one pass.
    let e = mech.validate(&QueryBitReport { query: d as u32, positive: true }).unwrap_err().to_string();
    assert!(e.contains("query is 6") && e.contains("[0, 6)"), "{e}");
    assert!(mech.randomize(&j, &mut rng).unwrap_err().to_string().contains("[0, 10)"));
    let reports: Vec<_> = values.iter().map(|v| mech.randomize(v, &mut rng).unwrap()).collect();
    let (mut all, mut a, mut b) = (mech.aggregator(), mech.aggregator(), mech.aggregator());
    all.add_batch(&reports).unwrap();
    a.add_batch(&reports[..250]).unwrap();
    b.add_batch(&reports[250..]).unwrap();
    a.merge(&b).unwrap();
    assert_eq!(a, all);
    let other = AdaptiveWorkload::new(2.0, w).unwrap().aggregator();
    assert!(a.merge(&other).is_err() && a == all, "a failed merge leaves the state unchanged");
}
