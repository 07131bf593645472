//! RAPPOR: exact privacy of one report and of the permanent response by enumeration, the
//! samplers against those probabilities (χ²), the memo, and the decoder's algebra.

use super::*;
use crate::sampling::fast_rng;

fn shape(m: usize, h: usize, cohorts: usize, p: f64, q: f64, seed: u64) -> RapporShape {
    RapporShape { m, h, cohorts, p, q, seed }
}

fn outputs(o: &Rappor) -> Vec<RapporReport> {
    let s = o.params().shape;
    (0..s.cohorts as u32)
        .flat_map(|c| (0u64..1 << s.m).map(move |b| RapporReport { cohort: c, bits: vec![b] }))
        .collect()
}

/// One report: probabilities sum to 1; the largest ratio over inputs is e^(ε between the
/// domain's items) to 1e-9, that ε is at most ε₁ and equals it here (disjoint filters exist);
/// the log-likelihood ratio equals the direct one. Without and with an IRR.
#[test]
fn exact_privacy_of_one_report_by_enumeration() {
    for &eps in &[0.5, 1.0, 2.0, 4.0] {
        for (k, sh) in [shape(6, 2, 2, 0.0, 1.0, 3), shape(5, 1, 3, 0.0, 1.0, 4), shape(6, 2, 2, 0.25, 0.75, 5)]
            .into_iter()
            .enumerate()
        {
            let Ok(o) = Rappor::with_shape(eps, 5, sh) else {
                assert!(sh.p > 0.0 && eps >= 2.0 * (0.75f64 * 0.75 / (0.25 * 0.25)).ln(), "eps {eps} case {k}");
                continue;
            };
            let outs = outputs(&o);
            let mut worst = 1.0f64;
            for x in 0..5 {
                assert!((outs.iter().map(|r| o.output_probability(x, r)).sum::<f64>() - 1.0).abs() < 1e-12);
                for y in 0..5 {
                    for r in &outs {
                        let (a, b) = (o.output_probability(x, r), o.output_probability(y, r));
                        worst = worst.max(a / b);
                        assert!((o.log_likelihood_ratio(x, y, r) - (a / b).ln()).abs() < 1e-9);
                    }
                }
            }
            let between = o.epsilon_between(&[0, 1, 2, 3, 4]);
            assert!(
                (worst.ln() - between).abs() < 1e-9,
                "eps {eps} case {k}: ln max ratio {} vs {between}",
                worst.ln()
            );
            assert!((between - eps).abs() < 1e-9 * eps, "eps {eps} case {k}: epsilon between items {between}");
        }
    }
}

/// The permanent response alone: P[B' | x] sums to 1 and its largest ratio is e^(ε∞) (for a
/// seed where two items have disjoint 2-bit filters).
#[test]
fn exact_privacy_of_the_permanent_response() {
    for &eps in &[0.5, 2.0, 6.0] {
        let disjoint = |o: &Rappor| {
            (0..4u64).any(|x| {
                (0..4u64).any(|y| {
                    let (a, b) = (o.bloom(0, x), o.bloom(0, y));
                    a.len() == 2 && b.len() == 2 && a.iter().all(|i| !b.contains(i))
                })
            })
        };
        let o = (0..100u64)
            .map(|seed| Rappor::with_shape(eps, 4, shape(6, 2, 1, 0.0, 1.0, seed)).unwrap())
            .find(disjoint)
            .expect("a seed with two disjoint filters");
        let all: Vec<Vec<u64>> = (0u64..64).map(|b| vec![b]).collect();
        let mut worst = 1.0f64;
        for x in 0..4u64 {
            assert!((all.iter().map(|b| o.permanent_probability(0, x, b)).sum::<f64>() - 1.0).abs() < 1e-12);
            for y in 0..4u64 {
                for b in &all {
                    worst = worst.max(o.permanent_probability(0, x, b) / o.permanent_probability(0, y, b));
                }
            }
        }
        let eps_inf = o.permanent_epsilon();
        assert!((worst.ln() / eps_inf - 1.0).abs() < 1e-9, "eps {eps}: {} vs {eps_inf}", worst.ln());
        // Without an IRR the permanent response is the report: ε∞ = ε₁ = ε.
        assert!((eps_inf - eps).abs() < 1e-9 * eps);
    }
    // With an IRR, ε∞ > ε₁.
    let o = Rappor::with_shape(1.0, 4, shape(6, 2, 1, 0.25, 0.75, 1)).unwrap();
    assert!(o.permanent_epsilon() > 1.5, "{}", o.permanent_epsilon());
}

/// χ² of the samplers against the enumerated probabilities: one-time reports (scalar and
/// packed) and the memoized path's first report (a fresh device), m = 4, C = 2: 32 outputs,
/// 31 dof, critical value 80.9 at 2.5e-6 per statistic (1e-5 for the four).
#[test]
fn samplers_match_the_output_probabilities() {
    let o = Rappor::with_shape(1.5, 6, shape(4, 2, 2, 0.25, 0.75, 21)).unwrap();
    let n = 200_000;
    let index = |r: &RapporReport| r.cohort as usize * 16 + r.bits[0] as usize;
    let chi2 = |x: usize, counts: &[u64]| -> f64 {
        outputs(&o)
            .iter()
            .map(|r| {
                let e = n as f64 * o.output_probability(x, r);
                (counts[index(r)] as f64 - e).powi(2) / e
            })
            .sum()
    };
    let x = 3;
    let mut rng = fast_rng(70);
    let mut scalar = vec![0u64; 32];
    (0..n).for_each(|_| scalar[index(&o.randomize(x, &mut rng).unwrap())] += 1);
    let mut packed = PackedRows::new();
    o.randomize_packed(&vec![x; n], &mut rng, &mut packed).unwrap();
    let mut batch = vec![0u64; 32];
    (0..n).for_each(|i| batch[packed.rows[i] as usize * 16 + packed.bits[i] as usize] += 1);
    let mut memo = vec![0u64; 32];
    for _ in 0..n {
        let mut state = o.new_memo(&mut rng);
        memo[index(&o.randomize_memoized(x as u64, &mut state, &mut rng).unwrap())] += 1;
    }
    for (what, counts) in [("scalar", &scalar), ("packed", &batch), ("memoized", &memo)] {
        let c = chi2(x, counts);
        assert!(c < 80.9, "{what}: n = {n}, chi2 {c:.1} >= 80.9 (31 dof)");
    }
    // Given a stored permanent response, reports follow the IRR alone.
    let mut state = o.new_memo(&mut rng);
    o.randomize_memoized(x as u64, &mut state, &mut rng).unwrap();
    let prr = state.responses[&(x as u64)].clone();
    let mut counts = [0u64; 16];
    for _ in 0..n {
        let r = o.randomize_memoized(x as u64, &mut state, &mut rng).unwrap();
        assert_eq!(r.cohort, state.cohort);
        counts[r.bits[0] as usize] += 1;
    }
    assert_eq!(state.responses.len(), 1);
    assert_eq!(state.responses[&(x as u64)], prr, "the permanent response is drawn once");
    let c: f64 = (0..16u64)
        .map(|b| {
            let p: f64 = (0..4)
                .map(|i| {
                    let pi = if (prr[0] >> i) & 1 == 1 { 0.75 } else { 0.25 };
                    if (b >> i) & 1 == 1 { pi } else { 1.0 - pi }
                })
                .product();
            (counts[b as usize] as f64 - n as f64 * p).powi(2) / (n as f64 * p)
        })
        .sum();
    // 15 dof at 1e-5: 44.3.
    assert!(c < 44.3, "IRR given the PRR: chi2 {c:.1}");
}

#[test]
fn memo_is_checked_and_serialises() {
    let o = Rappor::new(2.0, 10).unwrap();
    let other = Rappor::new(3.0, 10).unwrap();
    let mut rng = fast_rng(71);
    let mut memo = o.new_memo(&mut rng);
    o.randomize_memoized(4, &mut memo, &mut rng).unwrap();
    let json = serde_json::to_string(&memo).unwrap();
    let back: RapporMemo = serde_json::from_str(&json).unwrap();
    assert_eq!(back, memo);
    let e = other.randomize_memoized(4, &mut memo.clone(), &mut rng).unwrap_err();
    assert!(matches!(e, Error::Incompatible(_)), "{e}");
    let mut bad = memo.clone();
    bad.cohort = 1000;
    assert!(o.randomize_memoized(4, &mut bad, &mut rng).unwrap_err().to_string().contains("cohort is 1000"));
    let mut bad = memo.clone();
    bad.responses.insert(4, vec![]);
    assert!(o.randomize_memoized(4, &mut bad, &mut rng).unwrap_err().to_string().contains("responses"));
}

/// The estimate is linear: it equals the mean of the one-report estimates; decoding the domain
/// as a candidate list gives the same; a list whose items share their filters is singular.
#[test]
fn decoder_algebra() {
    let o = Rappor::with_shape(2.0, 12, shape(16, 2, 4, 0.0, 1.0, 31)).unwrap();
    let mut rng = fast_rng(72);
    let reports: Vec<RapporReport> = (0..2000).map(|i| o.randomize(i * 5 % 12, &mut rng).unwrap()).collect();
    let mut a = o.aggregator();
    a.add_batch(&reports).unwrap();
    let est = a.estimate();
    for v in 0..12 {
        let mean = reports.iter().map(|r| o.report_estimate(r, v)).sum::<f64>() / 2000.0;
        assert!((est.frequencies[v] - mean).abs() < 1e-9, "v {v}: {} vs {mean}", est.frequencies[v]);
    }
    let by_list = a.estimate_candidates(&(0..12).collect::<Vec<u64>>()).unwrap();
    for v in 0..12 {
        assert!((by_list.frequencies[v] - est.frequencies[v]).abs() < 1e-12);
        assert!((by_list.std_errors[v] - est.std_errors[v]).abs() < 1e-12);
    }
    let e = a.estimate_candidates(&[1, 2, 1]).unwrap_err().to_string();
    assert!(e.contains("candidate 2 (item 1)") && e.contains("singular"), "{e}");
    assert!(a.estimate_candidates(&[]).is_err());
    // Aggregate variance is the weighted sum of report variances.
    let f: Vec<f64> = (0..12).map(|i| (i + 1) as f64 / 78.0).collect();
    for v in [0, 5, 11] {
        let sum: f64 = (0..12).map(|x| f[x] * o.report_variance(x, v)).sum();
        assert!((o.aggregate_variance(&f, v) - sum).abs() < 1e-9 * sum, "v {v}");
    }
    // The fast worst case equals the brute-force max over all (x, v) report variances.
    let brute = (0..12).flat_map(|x| (0..12).map(move |v| (x, v))).map(|(x, v)| o.report_variance(x, v));
    let brute = brute.fold(0.0, f64::max);
    assert!((o.worst_case_variance() - brute).abs() < 1e-9 * brute, "{} vs {brute}", o.worst_case_variance());
}

/// The packed aggregation equals adding the same reports one by one.
#[test]
fn packed_aggregation_equals_single_adds() {
    let o = Rappor::with_shape(1.0, 30, shape(100, 3, 6, 0.0, 1.0, 2)).unwrap();
    let mut rng = fast_rng(73);
    let vs: Vec<usize> = (0..9000).map(|i| i * 11 % 30).collect();
    let mut packed = PackedRows::new();
    o.randomize_packed(&vs, &mut rng, &mut packed).unwrap();
    let (mut a, mut b) = (o.aggregator(), o.aggregator());
    a.add_packed(&packed.rows, &packed.bits).unwrap();
    for i in 0..vs.len() {
        let (cohort, bits) = packed.get(i, 2);
        b.add(&RapporReport { cohort, bits: bits.to_vec() }).unwrap();
    }
    assert_eq!(a.counts(), b.counts());
    assert_eq!(a.estimate(), b.estimate());
    let mut bad = packed.clone();
    bad.bits[2 * 77 + 1] |= 1 << 40;
    assert!(a.add_packed(&bad.rows, &bad.bits).unwrap_err().to_string().contains("report 77: bits"));
}

#[test]
fn parameters_are_checked() {
    let e = |r: Result<Rappor>| r.unwrap_err().to_string();
    assert!(e(Rappor::new(1.0, 4096)).contains("d is 4096"));
    assert!(e(Rappor::with_shape(1.0, 10, shape(0, 1, 1, 0.0, 1.0, 1))).contains("m is 0"));
    assert!(e(Rappor::with_shape(1.0, 10, shape(8, 9, 2, 0.0, 1.0, 1))).contains("h is 9"));
    assert!(e(Rappor::with_shape(1.0, 10, shape(8, 2, 1, 0.0, 1.0, 1))).contains("cohorts is 1"));
    assert!(e(Rappor::with_shape(1.0, 10, shape(8, 2, 4, 0.5, 0.5, 1))).contains("q is 0.5"));
    assert!(e(Rappor::with_shape(3.0, 10, shape(8, 2, 4, 0.5, 0.75, 1))).contains("epsilon is 3"));
    let params = RapporParams { shape: shape(8, 2, 4, 0.0, 1.0, 1), f: 0.0 };
    assert!(e(Rappor::from_params(10, params)).contains("f is 0"));
    // pure-ldp's parameters: ε₁ = ε∞ = 2h·ln((1 − f/2)/(f/2)).
    let o = Rappor::from_params(10, RapporParams { shape: shape(128, 2, 8, 0.0, 1.0, 1), f: 0.5 }).unwrap();
    assert!((o.epsilon().value() - 4.0 * 3f64.ln()).abs() < 1e-12);
    assert!((o.permanent_epsilon() - 4.0 * 3f64.ln()).abs() < 1e-12);
    // RAPPOR's paper setting f = 0.5, p = 0.5, q = 0.75, h = 2: ε∞ = 4 ln 3, ε₁ ≈ 1.0743.
    let o = Rappor::from_params(10, RapporParams { shape: shape(128, 2, 8, 0.5, 0.75, 1), f: 0.5 }).unwrap();
    assert!((o.epsilon().value() - 2.0 * (0.6875f64 * 0.4375 / (0.5625 * 0.3125)).ln()).abs() < 1e-12);
    let back = Rappor::with_shape(o.epsilon().value(), 10, o.params().shape).unwrap();
    assert!((back.params().f - 0.5).abs() < 1e-12, "f solved back: {}", back.params().f);
}
