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
    fn range_variance_cum(&self, a: usize, b: usize, cum: &[f64]) -> VarianceParts {
        self.0.raw().range_variance_cum(a, b, cum)
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
        ah.add(&hh.randomize_at(x, lh, &mut rng).unwrap()).unwrap();
        aw.add(&haar.randomize_at(x, lw, &mut rng).unwrap()).unwrap();
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
    assert!(hh.randomize_at(3, 0, &mut rng).unwrap_err().to_string().contains("level"));
    assert!(haar.randomize_at(30, 1, &mut rng).unwrap_err().to_string().contains("domain size 30"));
    let r = HhReport { level: 9, ..hh.randomize_at(3, 1, &mut rng).unwrap() };
    let e = h1.add(&r).unwrap_err().to_string();
    assert!(e.contains("level is 9") && e.contains("1..=3"), "{e}");
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

/// The O(h) split variances equal the O(h²·D) reference ([`split_variance`] over the level
/// functions z_l) for every range of the domain, with unequal group sizes.
#[test]
fn level_split_variance_equals_the_reference() {
    let (d, n) = (23usize, 1000.0);
    let f = true_freqs(&population(1000, d), d);
    let cum = cumulative(&f);
    let close = |fast: f64, reference: f64, what: &str| {
        assert!((fast - reference).abs() <= 1e-9 * reference.abs() + 1e-15, "{what}: {fast} vs {reference}");
    };
    // hh: B = 3, h = 3 (27 leaves); z_l is the indicator of the level-l nodes of the range.
    let sizes = vec![300.0, 250.0, 450.0];
    let levels = (1..=3u32).map(|l| vec![0.0; 3usize.pow(l)]).collect();
    let hh = Hierarchy::new(1.0, 3, d).unwrap().estimate_from(levels, n, sizes.clone());
    for a in 0..=d {
        for b in a..=d {
            let mut z = vec![vec![0.0; d]; 3];
            for (l, lo, hi) in decompose_for_test(3, 3, a, b).into_iter().filter(|r| r.0 > 0) {
                let span = 3usize.pow(3 - l as u32);
                z[l - 1][(lo * span).min(d)..(hi * span).min(d)].iter_mut().for_each(|x| *x = 1.0);
            }
            close(hh.range_variance_cum(a, b, &cum).split, split_variance(&z, &f, n, &sizes), &format!("hh [{a},{b})"));
        }
    }
    // Haar: D' = 32, h = 5; z_l is ±α on the halves of the (at most two) nodes of the range.
    let sizes = vec![100.0, 150.0, 200.0, 250.0, 300.0];
    let coefs = (1..=5).map(|l| vec![0.0; 1 << (l - 1)]).collect();
    let haar = HaarEstimate::new(d, 5, n, sizes.clone(), 2.0, coefs);
    let weight = |t: usize, size: usize| (t / size, (t % size).min(size - t % size) as f64 / size as f64);
    for a in 0..=d {
        for b in a..=d {
            let mut z = vec![vec![0.0; d]; 5];
            for l in 1..=5 {
                let size = 32 >> (l - 1);
                let ((va, wa), (vb, wb)) = (weight(a, size), weight(b, size));
                let alpha = if va == vb { vec![(va, wb - wa)] } else { vec![(va, -wa), (vb, wb)] };
                for (v, al) in alpha {
                    let (lo, hi, mid) = ((v * size).min(d), ((v + 1) * size).min(d), v * size + size / 2);
                    for (x, zx) in z[l - 1].iter_mut().enumerate().take(hi).skip(lo) {
                        *zx = if x < mid { al } else { -al };
                    }
                }
            }
            close(
                haar.range_variance_cum(a, b, &cum).split,
                split_variance(&z, &f, n, &sizes),
                &format!("haar [{a},{b})"),
            );
        }
    }
}

/// Devices draw their levels: over runs whose level sizes vary, each error standardized by the
/// closed-form variance at that run's realized sizes has mean 0 and mean square 1 (conditional
/// on the sizes the levels are a uniformly random partition). Checked at z = 4.42 per range
/// (false-failure rate ≈ 1e-5 per check).
fn check_device_levels<R, A, E>(name: &str, device: &R, empty: &A, answer: impl Fn(&A) -> E, d: usize, seed: u64)
where
    R: harmony_core::Randomizer<Input = usize, Report = A::Report>,
    A: Aggregator,
    E: RangeEstimator,
{
    const Z: f64 = 4.42;
    let (n, runs) = (1500, 600);
    let values = population(n, d);
    let f = true_freqs(&values, d);
    let ranges = [(0, d), (0, d / 2), (1, d - 1), (2, 3), (d / 3, d / 3 + 4)];
    let (mut z1, mut z2) = (vec![0.0; ranges.len()], vec![0.0; ranges.len()]);
    let mut sizes_seen = std::collections::HashSet::new();
    let mut rng = fast_rng(seed);
    for _ in 0..runs {
        let mut agg = empty.clone();
        for x in &values {
            agg.add(&device.randomize(x, &mut rng).unwrap()).unwrap();
        }
        let est = answer(&agg);
        sizes_seen.insert(est.range_variance(0, 1, &f).to_bits());
        for (i, &(a, b)) in ranges.iter().enumerate() {
            let e = est.range(a, b).unwrap() - f[a..b].iter().sum::<f64>();
            let pv = est.range_variance(a, b, &f);
            z1[i] += e / pv.sqrt();
            z2[i] += e * e / pv;
        }
    }
    assert!(sizes_seen.len() > 20, "{name}: the level sizes should vary between runs");
    let r = runs as f64;
    for (i, &(a, b)) in ranges.iter().enumerate() {
        let (mean, msq) = (z1[i] / r, z2[i] / r);
        assert!(mean.abs() < Z / r.sqrt(), "{name} [{a},{b}): mean standardized error {mean}");
        assert!((msq - 1.0).abs() < Z * (2.0 / r).sqrt(), "{name} [{a},{b}): mean squared standardized error {msq}");
    }
}

#[test]
fn device_chosen_levels_match_the_closed_form_at_realized_sizes() {
    let hh = Hierarchy::new(2.0, 5, 23).unwrap();
    check_device_levels("hh-raw", &hh, &hh.aggregator(), |a| RawOwned(a.estimate().unwrap()), 23, 51);
    let haar = Haar::new(1.0, 13).unwrap();
    check_device_levels("haar", &haar, &haar.aggregator(), |a| a.estimate().unwrap(), 13, 52);
}

/// Device reports are validated against the public constants; the error names the field.
#[test]
fn device_reports_are_validated() {
    use harmony_core::Randomizer;
    let mut rng = fast_rng(53);
    let hh = Hierarchy::new(1.0, 4, 16).unwrap();
    let r = hh.randomize(&5, &mut rng).unwrap();
    assert!((1..=2).contains(&r.level) && hh.validate(&r).is_ok());
    let e = hh.validate(&HhReport { level: 3, ..r.clone() }).unwrap_err().to_string();
    assert!(e.contains("level is 3") && e.contains("1..=2"), "{e}");
    let e = hh.randomize(&16, &mut rng).unwrap_err().to_string();
    assert!(e.contains("bin is 16") && e.contains("16"), "{e}");
    let haar = Haar::new(1.0, 16).unwrap();
    let r = haar.randomize(&5, &mut rng).unwrap();
    let e =
        haar.validate(&HaarReport { level: 4, report: harmony_core::frequency::HadamardReport { j: 8, bit: true } });
    assert!(e.unwrap_err().to_string().contains("j is 8"), "{r:?}");
    assert!(haar.validate(&HaarReport { level: 0, ..r }).unwrap_err().to_string().contains("level is 0"));
    let flat = FlatOue::new(1.0, 16).unwrap();
    let r = Randomizer::randomize(&flat, &3, &mut rng).unwrap();
    assert!(flat.validate(&r).is_ok());
    let e = flat.validate(&harmony_core::frequency::UnaryReport { bits: vec![0, 0] }).unwrap_err().to_string();
    assert!(e.contains("bits"), "{e}");
}
