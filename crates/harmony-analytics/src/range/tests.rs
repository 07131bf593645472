//! Tests of the range collections: exact structure (decomposition, noiseless reconstruction,
//! consistency), bad input, and Monte-Carlo checks of unbiasedness and of the closed-form
//! variance at a stated z.

use super::hierarchy::decompose_for_test;
use super::*;
use harmony_core::Aggregator;
use harmony_core::sampling::fast_rng;

/// A skewed population over `[0, d)`: value v with weight ∝ (v + 1)·(d − v) + 3·[v = 2].
fn population(n: usize, d: usize) -> Vec<usize> {
    let w: Vec<f64> = (0..d).map(|v| ((v + 1) * (d - v)) as f64 + if v == 2 { 3.0 * d as f64 } else { 0.0 }).collect();
    let total: f64 = w.iter().sum();
    let mut out = Vec::with_capacity(n);
    let mut acc = 0.0;
    for (v, wv) in w.iter().enumerate() {
        acc += wv / total;
        let upto = if v + 1 == d { n } else { (acc * n as f64).round() as usize };
        while out.len() < upto {
            out.push(v);
        }
    }
    out
}

#[test]
fn decomposition_covers_the_range_exactly_with_few_nodes() {
    for (bf, h) in [(2usize, 4usize), (3, 3), (5, 2), (4, 3)] {
        let dp = bf.pow(h as u32);
        for a in 0..=dp {
            for b in a..=dp {
                let runs = decompose_for_test(bf, h, a, b);
                let mut covered = vec![0u8; dp];
                let mut per_level = vec![0usize; h + 1];
                for (l, lo, hi) in runs {
                    let span = bf.pow((h - l) as u32);
                    per_level[l] += hi - lo;
                    for c in covered.iter_mut().take(hi * span).skip(lo * span) {
                        *c += 1;
                    }
                }
                for (x, &c) in covered.iter().enumerate() {
                    assert_eq!(c, u8::from(x >= a && x < b), "B={bf} h={h} [{a},{b}) leaf {x}");
                }
                assert!(per_level.iter().all(|&k| k <= 2 * (bf - 1)), "B={bf} [{a},{b}): {per_level:?}");
            }
        }
    }
}

#[test]
fn haar_prefix_reconstructs_exact_coefficients() {
    let d = 11;
    let f = true_freqs(&population(1000, d), d);
    let h = 4;
    let dp = 16;
    let coefs: Vec<Vec<f64>> = (1..=h)
        .map(|l| {
            let size = dp >> (l - 1);
            (0..1usize << (l - 1))
                .map(|v| {
                    let mass = |lo: usize, hi: usize| f[lo.min(d)..hi.min(d)].iter().sum::<f64>();
                    mass(v * size, v * size + size / 2) - mass(v * size + size / 2, (v + 1) * size)
                })
                .collect()
        })
        .collect();
    let est = HaarEstimate::new(d, h, 1000.0, vec![250.0; 4], 2.0, coefs);
    for a in 0..=d {
        for b in a..=d {
            let truth: f64 = f[a..b].iter().sum();
            assert!((est.range(a, b).unwrap() - truth).abs() < 1e-12, "[{a},{b})");
        }
    }
}

#[test]
fn consistency_keeps_exact_node_values() {
    let d = 20;
    let f = true_freqs(&population(1000, d), d);
    let hh = Hierarchy::new(1.0, 3, d).unwrap();
    assert_eq!(hh.levels(), 3);
    let levels: Vec<Vec<f64>> = (1..=3u32)
        .map(|l| {
            let span = 3usize.pow(3 - l);
            (0..3usize.pow(l)).map(|i| f[(i * span).min(d)..((i + 1) * span).min(d)].iter().sum()).collect()
        })
        .collect();
    let est = hh.estimate_from(levels, 1000.0, vec![333.0, 333.0, 334.0]);
    for a in 0..=d {
        for b in a..=d {
            let truth: f64 = f[a..b].iter().sum();
            assert!((est.range(a, b).unwrap() - truth).abs() < 1e-12);
            assert!((est.raw().range(a, b).unwrap() - truth).abs() < 1e-12);
        }
    }
}

#[test]
fn bad_input_is_rejected_with_clear_errors() {
    let values = population(500, 10);
    let mut rng = fast_rng(3);
    let est = Haar::new(1.0, 10).unwrap().collect(&values, &mut rng).unwrap();
    let e = est.range(3, 11).unwrap_err().to_string();
    assert!(e.contains("range end b") && e.contains("11") && e.contains("10"), "{e}");
    let e = est.range(5, 4).unwrap_err().to_string();
    assert!(e.contains("range start a") && e.contains('5'), "{e}");
    for q in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
        let e = est.cdf().quantile(q, Z95).unwrap_err().to_string();
        assert!(e.contains("quantile q") && e.contains("(0, 1)"), "{e}");
    }
    let e = FlatOue::new(1.0, 10).unwrap().collect(&[], &mut rng).unwrap_err().to_string();
    assert!(e.contains("no users"), "{e}");
    let e = Hierarchy::new(1.0, 5, 10).unwrap().collect(&[1, 10], &mut rng).unwrap_err().to_string();
    assert!(e.contains("values[1]") && e.contains("10"), "{e}");
    assert!(Hierarchy::new(1.0, 1, 10).unwrap_err().to_string().contains("branching B"));
    assert!(Haar::new(1.0, 1).is_err());
    assert!(matches!(check_range(0, 11, 10), Err(harmony_core::Error::InvalidInput { .. })));
}

#[test]
fn branching_choice_is_near_five() {
    for eps in [1.0, 2.0, 4.0] {
        let b = choose_branching(eps, 256).unwrap();
        assert!((3..=10).contains(&b), "eps {eps}: B = {b}");
    }
}

#[test]
fn random_ranges_are_valid_and_cover_all() {
    let mut rng = fast_rng(9);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..2000 {
        let (a, b) = random_range(6, &mut rng);
        assert!(a < b && b <= 6);
        seen.insert((a, b));
    }
    assert_eq!(seen.len(), 21);
}

/// Monte-Carlo check of one method: over `runs` collections, for each range the mean error is
/// within z·sqrt(Var/runs) of 0 and the empirical variance within z·sqrt(2/(runs−1)) (relative)
/// of the closed form. z = 4.42 (false failure ≈ 1e-5 per check).
fn check_method<F, E>(name: &str, n: usize, d: usize, runs: usize, seed: u64, collect: F)
where
    F: Fn(&[usize], &mut harmony_core::fast_rng::FastRng) -> E,
    E: RangeEstimator,
{
    const Z: f64 = 4.42;
    let values = population(n, d);
    let f = true_freqs(&values, d);
    let ranges = [(0, d), (0, d / 2), (1, d - 1), (2, 3), (d / 3, d / 3 + 4), (d - 5, d)];
    let mut errs = vec![Vec::with_capacity(runs); ranges.len()];
    let mut predicted = vec![0.0; ranges.len()];
    let mut rng = fast_rng(seed);
    for _ in 0..runs {
        let est = collect(&values, &mut rng);
        for (i, &(a, b)) in ranges.iter().enumerate() {
            let truth: f64 = f[a..b].iter().sum();
            errs[i].push(est.range(a, b).unwrap() - truth);
            predicted[i] = est.range_variance(a, b, &f);
        }
    }
    for (i, &(a, b)) in ranges.iter().enumerate() {
        let r = runs as f64;
        let mean = errs[i].iter().sum::<f64>() / r;
        let var = errs[i].iter().map(|e| (e - mean) * (e - mean)).sum::<f64>() / (r - 1.0);
        let pv = predicted[i];
        if pv == 0.0 {
            assert!(var < 1e-20, "{name} [{a},{b}): variance {var}, predicted 0");
            continue;
        }
        let tol_mean = Z * (pv / r).sqrt();
        assert!(mean.abs() < tol_mean, "{name} n={n} [{a},{b}): mean error {mean}, tolerance {tol_mean}");
        let ratio = var / pv;
        let tol = Z * (2.0 / (r - 1.0)).sqrt();
        assert!((ratio - 1.0).abs() < tol, "{name} n={n} [{a},{b}): var {var} / predicted {pv} = {ratio}, tol {tol}");
    }
}

#[test]
fn flat_is_unbiased_with_the_closed_form_variance() {
    let o = FlatOue::new(1.0, 16).unwrap();
    check_method("flat", 2000, 16, 1000, 11, |v, r| o.collect(v, r).unwrap());
}

#[test]
fn haar_is_unbiased_with_the_closed_form_variance() {
    let o = Haar::new(2.0, 13).unwrap();
    check_method("haar", 2000, 13, 1000, 12, |v, r| o.collect(v, r).unwrap());
}

#[test]
fn raw_hierarchy_is_unbiased_with_the_closed_form_variance() {
    // ε = 2: level 1 (5 nodes) uses GRR, level 2 (25 nodes > 3e² + 2) OUE.
    let o = Hierarchy::new(2.0, 5, 23).unwrap();
    assert_eq!(o.branches(), ["grr", "oue"]);
    check_method("hh-raw", 2000, 23, 1000, 13, |v, r| RawOwned(o.collect(v, r).unwrap()));
}

#[test]
fn consistent_hierarchy_is_unbiased() {
    // The consistent estimator has no closed form: check the mean only, against the raw bound.
    let o = Hierarchy::new(1.0, 4, 16).unwrap();
    let values = population(2000, 16);
    let f = true_freqs(&values, 16);
    let mut rng = fast_rng(14);
    let (runs, mut sum, mut sq_c, mut sq_r) = (300, 0.0, 0.0, 0.0);
    let mut pv = 0.0;
    for _ in 0..runs {
        let est = o.collect(&values, &mut rng).unwrap();
        let truth: f64 = f[3..11].iter().sum();
        let e = est.range(3, 11).unwrap() - truth;
        let er = est.raw().range(3, 11).unwrap() - truth;
        sum += e;
        sq_c += e * e;
        sq_r += er * er;
        pv = est.range_variance(3, 11, &f);
    }
    let tol = 4.42 * (pv / runs as f64).sqrt();
    assert!((sum / runs as f64).abs() < tol, "mean error {} tol {tol}", sum / runs as f64);
    assert!(sq_c < sq_r, "consistent {sq_c} should beat raw {sq_r}");
}

/// Owns an estimate and answers with its raw hierarchical estimator.
struct RawOwned(HhEstimate);

impl RangeEstimator for RawOwned {
    fn domain(&self) -> usize {
        self.0.raw().domain()
    }
    fn range_unchecked(&self, a: usize, b: usize) -> f64 {
        self.0.raw().range_unchecked(a, b)
    }
    fn range_variance_parts(&self, a: usize, b: usize, f: &[f64]) -> VarianceParts {
        self.0.raw().range_variance_parts(a, b, f)
    }
    fn plug_in_freqs(&self) -> Vec<f64> {
        self.0.plug_in_freqs()
    }
}

#[test]
fn quantile_interval_brackets_the_estimate_and_uses_the_band() {
    let values = population(4000, 30);
    let f = true_freqs(&values, 30);
    let mut rng = fast_rng(21);
    let est = Hierarchy::new(2.0, 5, 30).unwrap().collect(&values, &mut rng).unwrap();
    let cdf = est.cdf();
    assert_eq!(cdf.values.len(), 31);
    for q in [0.1, 0.5, 0.9] {
        let qe = cdf.quantile(q, Z95).unwrap();
        assert!(qe.lower <= qe.bin && qe.bin <= qe.upper, "{qe:?}");
        let narrow = cdf.quantile(q, 0.0).unwrap();
        assert_eq!((narrow.lower, narrow.upper), (narrow.bin, narrow.bin));
        let t = true_quantile(&f, q);
        assert!(qe.lower <= t + 3 && t <= qe.upper + 3, "q {q}: truth {t}, {qe:?}");
    }
}

/// Heavy tier: larger n and more runs, every method, two ε (release: `cargo test --release
/// -p harmony-analytics -- --ignored`).
#[test]
#[ignore]
fn heavy_all_methods_match_closed_form_variance() {
    for (eps, seed) in [(0.5, 31u64), (4.0, 32)] {
        let flat = FlatOue::new(eps, 40).unwrap();
        check_method("flat", 40_000, 40, 1500, seed, |v, r| flat.collect(v, r).unwrap());
        let haar = Haar::new(eps, 40).unwrap();
        check_method("haar", 40_000, 40, 1500, seed + 10, |v, r| haar.collect(v, r).unwrap());
        let hh = Hierarchy::new(eps, 5, 40).unwrap();
        check_method("hh-raw", 40_000, 40, 1500, seed + 20, |v, r| RawOwned(hh.collect(v, r).unwrap()));
    }
}

#[test]
fn per_user_reports_shard_and_merge() {
    let values = population(6000, 30);
    let f = true_freqs(&values, 30);
    let mut rng = fast_rng(41);
    let hh = Hierarchy::new(1.0, 5, 30).unwrap();
    let haar = Haar::new(1.0, 30).unwrap();
    let (mut h1, mut h2) = (hh.aggregator(), hh.aggregator());
    let (mut w1, mut w2) = (haar.aggregator(), haar.aggregator());
    for (i, &x) in values.iter().enumerate() {
        let (lh, lw) = (1 + i % hh.levels(), 1 + i % haar.levels());
        let (ah, aw) = if i % 2 == 0 { (&mut h1, &mut w1) } else { (&mut h2, &mut w2) };
        ah.add(lh, &hh.randomize(x, lh, &mut rng).unwrap()).unwrap();
        aw.add(lw, &haar.randomize(x, lw, &mut rng).unwrap()).unwrap();
    }
    h1.merge(&h2).unwrap();
    w1.merge(&w2).unwrap();
    assert_eq!(h1.counts().iter().sum::<u64>(), 6000);
    let (eh, ew) = (h1.estimate().unwrap(), w1.estimate().unwrap());
    for (a, b) in [(0, 15), (4, 9), (10, 30)] {
        let truth: f64 = f[a..b].iter().sum();
        for (name, est, se) in [
            ("hh", eh.range(a, b).unwrap(), eh.range_with_se(a, b).unwrap().std_error),
            ("haar", ew.range(a, b).unwrap(), ew.range_with_se(a, b).unwrap().std_error),
        ] {
            assert!((est - truth).abs() < 4.42 * se, "{name} [{a},{b}): {est} vs {truth}, se {se}");
        }
    }
    // Bad levels, foreign aggregators, empty levels.
    assert!(hh.randomize(3, 0, &mut rng).unwrap_err().to_string().contains("level"));
    assert!(haar.randomize(30, 1, &mut rng).unwrap_err().to_string().contains("domain size 30"));
    let r = hh.randomize(3, 1, &mut rng).unwrap();
    assert!(h1.add(9, &r).unwrap_err().to_string().contains("level"));
    assert!(h1.merge(&Hierarchy::new(2.0, 5, 30).unwrap().aggregator()).is_err());
    assert!(w1.merge(&Haar::new(1.0, 64).unwrap().aggregator()).is_err());
    let e = haar.aggregator().estimate().unwrap_err().to_string();
    assert!(e.contains("level 1 reports"), "{e}");
    let flat = FlatOue::new(1.0, 30).unwrap();
    let mut fa = flat.aggregator();
    for &x in &values {
        fa.add(&flat.randomize(x, &mut rng).unwrap()).unwrap();
    }
    let ef = flat.estimate(&fa).unwrap();
    let ans = ef.range_with_se(4, 9).unwrap();
    assert!((ans.estimate - f[4..9].iter().sum::<f64>()).abs() < 4.42 * ans.std_error);
    assert!(flat.estimate(&flat.aggregator()).is_err());
    assert!(flat.estimate(&FlatOue::new(1.0, 31).unwrap().aggregator()).is_err());
}
