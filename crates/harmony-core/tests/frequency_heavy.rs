//! Heavy statistical tier of the frequency oracles (n = 10⁶; release:
//! `cargo test --release -- --ignored`). Same statistics and thresholds as the fast tier
//! (Bonferroni z for a 1e-5 false-failure rate per test), with ten times the samples, plus the
//! coverage of the 95% confidence intervals and OLH at d = 65 536.

mod frequency_support;

use frequency_support::*;
use harmony_core::aggregate::aggregate_parallel;
use harmony_core::frequency::*;
use harmony_core::sampling::fast_rng;
use harmony_core::{Aggregator, FrequencyOracle};

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_monte_carlo_every_oracle() {
    for (i, name) in FREQUENCY_NAMES.iter().enumerate() {
        check_estimates(name, 16, 1_000_000, 10_000 + 100 * i as u64);
    }
    for (i, &(name, d)) in
        [("olh", 1000usize), ("hr", 1000), ("hadamard", 1000), ("oue", 100), ("sue", 100), ("grr", 100)]
            .iter()
            .enumerate()
    {
        check_estimates(name, d, 1_000_000, 11_000 + 100 * i as u64);
    }
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_coverage_of_95_percent_intervals() {
    // R independent runs of n users; per item, the fraction of runs whose CI covers E[f̂_v]
    // (f_v; the biased expectation for Bassily–Smith) must be 0.95 within z·sd, sd the binomial
    // standard deviation, z the Bonferroni z over every (oracle, item) pair.
    let (d, n, runs) = (8usize, 2000usize, 2000usize);
    let (values, f) = skewed_population(d, n);
    let z = z_bonferroni(1e-5, FREQUENCY_NAMES.len() * d);
    let sd = (0.95f64 * 0.05 / runs as f64).sqrt();
    for (i, name) in FREQUENCY_NAMES.iter().enumerate() {
        let o = AnyOracle::by_name(name, 1.0, d).unwrap();
        let mut covered = vec![0usize; d];
        let mut rng = fast_rng(12_000 + i as u64);
        let mut reports = Vec::with_capacity(n);
        for _ in 0..runs {
            reports.clear();
            o.randomize_batch(&values, &mut rng, &mut reports).unwrap();
            let mut agg = o.aggregator();
            agg.add_batch(&reports).unwrap();
            let est = agg.estimate();
            for (v, c) in covered.iter_mut().enumerate() {
                *c += est.get(v).covers(estimate_mean(&o, &f, v)) as usize;
            }
        }
        for (v, &c) in covered.iter().enumerate() {
            let rate = c as f64 / runs as f64;
            assert!(
                (rate - 0.95).abs() < z * sd,
                "{name} v = {v} (f = {:.4}): {runs} runs of n = {n}, coverage {rate:.4}, target 0.95, tolerance {:.4}",
                f[v],
                z * sd
            );
        }
        let pooled = covered.iter().sum::<usize>() as f64 / (runs * d) as f64;
        println!("{name}: pooled 95% CI coverage {pooled:.4} over {runs} runs x {d} items");
    }
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_empirical_epsilon_audit() {
    let n = 1_000_000;
    let checks = FREQUENCY_NAMES.len() * EPSILONS.len();
    let z = z_bonferroni(1e-5, checks);
    for (i, name) in FREQUENCY_NAMES.iter().enumerate() {
        for (j, &eps) in EPSILONS.iter().enumerate() {
            let o = AnyOracle::by_name(name, eps, 16).unwrap();
            let (eps_hat, se) = audit(&o, 2, 9, n, 13_000 + 10 * i as u64 + j as u64);
            let tol = z * se;
            assert!(
                (eps_hat - eps).abs() <= tol,
                "{name} eps = {eps}: n = {n}, empirical {eps_hat:.4}, target {eps}, tolerance {tol:.4}"
            );
            println!("{name} eps = {eps}: empirical eps {eps_hat:.4} ± {tol:.4}");
        }
    }
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_olh_full_domain_65536() {
    // The vectorised kernel at scale: every one of 65 536 estimates within its Bonferroni band.
    let (d, n) = (65_536usize, 200_000usize);
    let o = Olh::new(2.0, d).unwrap();
    let (values, f) = skewed_population(d, n);
    let mut rng = fast_rng(14_000);
    let mut reports = Vec::new();
    o.randomize_batch(&values, &mut rng, &mut reports).unwrap();
    let agg = aggregate_parallel(&o.aggregator(), &reports).unwrap();
    let est = agg.estimate();
    let z = z_bonferroni(1e-5, d);
    let mut chi2 = 0.0;
    for v in 0..d {
        let sigma = (o.aggregate_variance(&f, v) / n as f64).sqrt();
        let zv = (est.frequencies[v] - f[v]) / sigma;
        chi2 += zv * zv;
        assert!(
            zv.abs() < z,
            "olh v = {v}: n = {n}, estimate {}, target {}, tolerance {}",
            est.frequencies[v],
            f[v],
            z * sigma
        );
    }
    // Σz² over items: nearly independent for OLH, so about d ± sqrt(2d)·z.
    let tol = z * (2.0 * d as f64).sqrt();
    assert!((chi2 - d as f64).abs() < tol, "olh: sum of z^2 = {chi2:.0}, expected {d} ± {tol:.0}");
    // Candidate scoring of the same reports agrees with the full-domain counts.
    let cands: Vec<u64> = (0..2000u64).map(|v| v * 31).collect();
    let by_cand = o.support_counts_for(&reports, &cands).unwrap();
    let full = agg.support_counts();
    for (k, &c) in cands.iter().enumerate() {
        assert_eq!(by_cand[k], full[c as usize], "candidate {c}");
    }
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_olh_collision_rate() {
    let seeds = 4_000_000u64;
    let pairs: [(u64, u64); 4] = [(0, 1), (11, 1 << 30), (3, u64::MAX), (1 << 40, (1 << 40) + 1)];
    let gs = [2u32, 5, 21, 148];
    let z = z_bonferroni(1e-5, pairs.len() * gs.len());
    for &g in &gs {
        let o = Olh::with_g(1.0, 4, g).unwrap();
        for &(a, b) in &pairs {
            let mut rng = fast_rng(15_000 + g as u64);
            let hits = (0..seeds)
                .filter(|_| {
                    let s = rand::Rng::next_u64(&mut rng);
                    o.hash(s, a) == o.hash(s, b)
                })
                .count();
            let p = 1.0 / g as f64;
            let zz = (hits as f64 - seeds as f64 * p) / (seeds as f64 * p * (1.0 - p)).sqrt();
            assert!(
                zz.abs() < z,
                "g = {g} ({a}, {b}): n = {seeds}, collisions {hits}, expected {:.0}, z = {zz:.2}",
                seeds as f64 * p
            );
        }
    }
}
