use super::calm::{self, CalmOptions, CalmPlan};
use super::*;
use harmony_core::sampling::{fast_rng, uniform_below};

/// A correlated synthetic population: attribute j depends on attribute j−1.
fn synthetic(n: usize, cards: &[usize], seed: u64) -> Dataset {
    let mut rng = fast_rng(seed);
    let mut codes = Vec::with_capacity(n * cards.len());
    for _ in 0..n {
        let mut prev = 0usize;
        for &c in cards {
            let v = if uniform_below(&mut rng, 3) == 0 { uniform_below(&mut rng, c as u64) as usize } else { prev % c };
            let v = if uniform_below(&mut rng, 4) == 0 { 0 } else { v };
            codes.push(v as u32);
            prev = v + 1;
        }
    }
    let names = (0..cards.len()).map(|j| format!("a{j}")).collect();
    Dataset::new(names, cards.to_vec(), codes).unwrap()
}

#[test]
fn project_and_sub_map_match_brute_force() {
    let cards = [2usize, 3, 4];
    let cells: Vec<f64> = (0..24).map(|i| i as f64).collect();
    let p = project(&cells, &[0, 1, 2], &cards, &[0, 2]);
    let mut want = vec![0.0; 8];
    for a in 0..2 {
        for b in 0..3 {
            for c in 0..4 {
                want[a * 4 + c] += cells[(a * 3 + b) * 4 + c];
            }
        }
    }
    assert_eq!(p, want);
    assert_eq!(project(&cells, &[0, 1, 2], &cards, &[]), vec![276.0]);
}

#[test]
fn all_queries_enumerates_k_subsets_and_rejects_bad_k() {
    let names: Vec<String> = (0..5).map(|j| format!("a{j}")).collect();
    let q = all_queries(&[4, 0, 1, 2, 3], 3, &names).unwrap();
    assert_eq!(q.len(), 10);
    assert_eq!(q[0], vec![0, 1, 2]);
    assert_eq!(q[9], vec![2, 3, 4]);
    let e = all_queries(&[0, 1], 3, &names).unwrap_err().to_string();
    assert!(e.contains("k") && e.contains('3') && e.contains("between 1 and the number of attributes (2)"), "{e}");
    let e = all_queries(&[0, 0, 1], 2, &names).unwrap_err().to_string();
    assert!(e.contains("a0 (listed twice)"), "{e}");
}

#[test]
fn bad_inputs_are_clear_errors() {
    let data = synthetic(100, &[2, 3, 4], 1);
    let e = data.resolve(&["a0".into(), "nope".into()]).unwrap_err().to_string();
    assert!(e.contains("\"nope\"") && e.contains("one of: a0, a1, a2"), "{e}");
    let e = Dataset::new(vec!["x".into()], vec![1], vec![0]).unwrap_err().to_string();
    assert!(e.contains("cardinality") && e.contains("attribute x"), "{e}");
    let e = Dataset::new(vec!["x".into()], vec![2], vec![0, 2]).unwrap_err().to_string();
    assert!(e.contains("code 2") && e.contains("< 2"), "{e}");
    let qs = all_queries(&[0, 1, 2], 2, data.names()).unwrap();
    let e = CalmPlan::choose(&data, 1.0, &qs, CalmOptions { l: Some(4), ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("l") && e.to_string().contains("(3)"), "{e}");
    assert!(CalmPlan::choose(&data, f64::NAN, &qs, CalmOptions::default()).is_err());
    assert!(CalmPlan::choose(&data, 1.0, &[], CalmOptions::default()).is_err());
}

#[test]
fn plan_covers_every_query_and_prints_choice() {
    let data = synthetic(20_000, &[2, 3, 4, 2, 5, 3], 2);
    let qs = all_queries(&[0, 1, 2, 3, 4, 5], 3, data.names()).unwrap();
    let plan = CalmPlan::choose(&data, 1.0, &qs, CalmOptions::default()).unwrap();
    assert!(plan.cover.iter().all(|c| !c.is_empty()));
    assert!(plan.sets.iter().all(|s| s.len() <= plan.l && s.len() >= 3));
    assert!(plan.candidates.len() >= 2);
    // The least predicted GLS total wins; it is below the raw total (pooling over sets).
    let best = plan.candidates.iter().map(|c| c.predicted_gls_total_sse).fold(f64::INFINITY, f64::min);
    assert_eq!(best, plan.predicted_gls_total_sse);
    assert!(plan.candidates.iter().all(|c| c.predicted_gls_total_sse <= c.predicted_total_sse * (1.0 + 1e-12)));
    assert!(plan.describe().contains(&format!("l={}", plan.l)));
}

#[test]
fn calm_output_is_consistent_nonnegative_and_normalized() {
    for (eps, seed) in [(0.5, 3), (2.0, 4)] {
        let data = synthetic(8_000, &[2, 3, 4, 2, 5, 3, 2], seed);
        let qs = all_queries(&(0..7).collect::<Vec<_>>(), 2, data.names()).unwrap();
        let plan = CalmPlan::choose(&data, eps, &qs, CalmOptions { l: Some(3), ..Default::default() }).unwrap();
        let mut rng = fast_rng(seed);
        let raw = calm::collect(&plan, &data, &mut rng).unwrap();
        assert!(raw.marginals.iter().flatten().any(|&x| x < 0.0), "the test should start with negatives");
        for how in [calm::Post::Family, calm::Post::Local] {
            let post = calm::postprocess_with(&plan, &raw, how);
            assert_eq!(post.used, how);
            consistency::check(&plan.sets, data.cards(), &post.marginals, 1e-9).unwrap();
        }
        let post = calm::postprocess_with(&plan, &raw, calm::Post::Joint);
        assert_eq!(post.used, calm::Post::Joint);
        let margs = post.marginals;
        assert_eq!(margs, calm::postprocess(&plan, &raw));
        consistency::check(&plan.sets, data.cards(), &margs, 1e-9).unwrap();
        let ans = calm::answer(&plan, &margs, &raw.sizes);
        for a in &ans {
            assert!(a.cells.iter().all(|&x| x >= 0.0));
            assert!((a.cells.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        }
        // Overlapping answers agree on shared single attributes.
        let p01 = project(&ans[0].cells, &ans[0].attrs, data.cards(), &[0]);
        let p02 = project(&ans[1].cells, &ans[1].attrs, data.cards(), &[0]);
        for (x, y) in p01.iter().zip(&p02) {
            assert!((x - y).abs() < 1e-9);
        }
    }
}

#[test]
fn reconstruction_when_l_below_k() {
    let data = synthetic(20_000, &[2, 3, 2, 3], 5);
    let qs = all_queries(&[0, 1, 2, 3], 3, data.names()).unwrap();
    let plan = CalmPlan::choose(&data, 4.0, &qs, CalmOptions { l: Some(2), ..Default::default() }).unwrap();
    assert!(plan.cover.iter().all(Vec::is_empty));
    let mut rng = fast_rng(6);
    let raw = calm::collect(&plan, &data, &mut rng).unwrap();
    let margs = calm::postprocess(&plan, &raw);
    let ans = calm::answer(&plan, &margs, &raw.sizes);
    for a in &ans {
        assert!(a.predicted_sse.is_none());
        assert!(a.cells.iter().all(|&x| x >= 0.0));
        // Max-ent keeps the fitted pairwise marginals.
        let sub = &a.attrs[..2];
        let j = plan.sets.iter().position(|s| s == sub).unwrap();
        let want = &margs[j];
        let got = project(&a.cells, &a.attrs, data.cards(), sub);
        for (x, y) in got.iter().zip(want) {
            assert!((x - y).abs() < 1e-6, "{x} vs {y}");
        }
        assert!(a.tvd(&data.true_marginal(&a.attrs)) < 0.1);
    }
}

#[test]
fn ipf_recovers_an_independent_table() {
    let cards = [2usize, 3];
    let a = vec![0.3, 0.7];
    let b = vec![0.2, 0.5, 0.3];
    let x = ipf(&[0, 1], &cards, &[(vec![0], a.clone()), (vec![1], b.clone())], 100, 1e-12);
    for i in 0..2 {
        for j in 0..3 {
            assert!((x[i * 3 + j] - a[i] * b[j]).abs() < 1e-12);
        }
    }
}

/// Heavy tier: Fourier cells are unbiased with the variance of the module docs (ratio
/// estimator over the realized coefficient groups, finite-population covariances), the devices
/// drawing their coefficient. R = 400 collections on a fixed population; cardinality 3 makes the
/// domains not powers of two, so the covariance terms do not cancel (they are a few percent of
/// the variance here, below what R = 400 resolves: `fourier_variance_is_exact_over_all_partitions`
/// checks them exactly); ε = 1 and 4 (where the sampling part dominates). Per cell: bias z-scores below 5.3, and the mean of (x − π)²/Var_c
/// (Var_c at the true θ and the run's counts) within 5.3·√(2/R) of 1 (two-sided 1.2e-7 each,
/// Bonferroni over ≤ 80 checks: < 1e-5); the total: mean of SSE − predicted, z = 4.42.
#[test]
#[ignore]
fn fourier_is_unbiased_with_the_predicted_variance() {
    use super::fourier::FourierPlan;
    use harmony_core::{Aggregator, randomizer::Randomizer};
    let data = synthetic(20_000, &[2, 3, 2, 3], 61);
    let all = all_queries(&[0, 1, 2, 3], 2, data.names()).unwrap();
    let r = 400;
    for (eps, qs) in [(1.0, all.clone()), (4.0, all)] {
        let truths: Vec<Vec<f64>> = qs.iter().map(|q| data.true_marginal(q)).collect();
        let plan = FourierPlan::new(data.names(), data.cards(), eps, &qs).unwrap();
        let theta = plan.coefficients_of((0..data.n()).map(|i| data.record(i)));
        let device = plan.randomizer();
        let mut rng = fast_rng(62 + eps as u64 + qs.len() as u64);
        let mut sums: Vec<Vec<f64>> = truths.iter().map(|t| vec![0.0; t.len()]).collect();
        let (mut sumsq, mut ratio) = (sums.clone(), sums.clone());
        let mut diffs = vec![Vec::with_capacity(r); qs.len()];
        for _ in 0..r {
            let mut agg = plan.aggregator();
            for i in 0..data.n() {
                agg.add(&device.randomize(data.record(i), &mut rng).unwrap()).unwrap();
            }
            let est = agg.estimate();
            for (qi, a) in plan.answer(&est).into_iter().enumerate() {
                let a = a.unwrap();
                let var = plan.cell_variances(qi, &theta, &est.counts).unwrap();
                diffs[qi].push(a.sse(&truths[qi]) - var.iter().sum::<f64>());
                for (c, &x) in a.cells.iter().enumerate() {
                    sums[qi][c] += x;
                    sumsq[qi][c] += x * x;
                    ratio[qi][c] += (x - truths[qi][c]).powi(2) / var[c] / r as f64;
                }
            }
        }
        for (qi, t) in truths.iter().enumerate() {
            let d = &diffs[qi];
            let mean = d.iter().sum::<f64>() / r as f64;
            let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (r - 1) as f64).sqrt();
            assert!((mean / (sd / (r as f64).sqrt())).abs() < 4.42, "ε={eps} query {qi}: SSE − predicted {mean:.3e}");
            for c in 0..t.len() {
                let m = sums[qi][c] / r as f64;
                let v = (sumsq[qi][c] / r as f64 - m * m) * r as f64 / (r - 1) as f64;
                let zc = (m - t[c]) / (v / r as f64).sqrt();
                assert!(zc.abs() < 5.3, "ε={eps} query {qi} cell {c}: mean {m} truth {} z {zc:.2}", t[c]);
                let tol = 5.3 * (2.0 / r as f64).sqrt();
                assert!((ratio[qi][c] - 1.0).abs() < tol, "ε={eps} query {qi} cell {c}: MSE/var {}", ratio[qi][c]);
            }
        }
    }
}

#[test]
fn fourier_is_exact_in_the_limit_and_predicts_its_error() {
    let data = synthetic(30_000, &[2, 2, 3, 2], 7);
    let qs = all_queries(&[0, 1, 2, 3], 2, data.names()).unwrap();
    let mut rng = fast_rng(8);
    let out = fourier::run(&data, 8.0, &qs, &mut rng).unwrap();
    let (mut sse, mut pred) = (0.0, 0.0);
    for a in &out {
        sse += a.sse(&data.true_marginal(&a.attrs));
        pred += a.predicted_sse.unwrap();
    }
    // 6 queries, total SSE a sum of many cells: within a factor 3 of the prediction.
    assert!(sse < 3.0 * pred && sse > pred / 3.0, "sse {sse} predicted {pred}");
}

#[test]
fn direct_and_calm_raw_are_close_to_the_truth() {
    let data = synthetic(30_000, &[2, 3, 4, 2], 9);
    let qs = all_queries(&[0, 1, 2, 3], 2, data.names()).unwrap();
    let mut rng = fast_rng(10);
    let d = direct::run(&data, 2.0, &qs, &mut rng).unwrap();
    let plan = CalmPlan::choose(&data, 2.0, &qs, CalmOptions::default()).unwrap();
    let raw = calm::collect(&plan, &data, &mut rng).unwrap();
    let c = calm::answer_raw(&plan, &raw);
    for a in d.iter().chain(&c) {
        let sse = a.sse(&data.true_marginal(&a.attrs));
        assert!(sse < 10.0 * a.predicted_sse.unwrap(), "{:?}: {sse} vs {:?}", a.attrs, a.predicted_sse);
    }
}

/// Heavy tier: a raw CALM answer is unbiased with the predicted SSE (docs/MECHANISMS.md E), the
/// devices drawing their groups: R = 400 independent collections on a fixed population (queries
/// covered once and several times, GRR at ε = 1 and 3). The prediction uses each run's realized
/// group sizes, so the test is on d_r = SSE_r − predicted_r (mean 0): z = 4.42 (two-sided 1e-5)
/// with its empirical standard error. Per cell: bias z-scores with z = 5.3, and the mean of
/// (x − π)²/Var_c over the runs (Var_c from [`CalmPlan::raw_cell_variances`] at the truth) within
/// 5.3·√(2/R) of 1 (two-sided 1.2e-7 per cell, Bonferroni over ≤ 60 cells: < 1e-5 in all).
#[test]
#[ignore]
fn calm_raw_is_unbiased_with_the_predicted_sse() {
    for (eps, l) in [(1.0, 3), (3.0, 4)] {
        let data = synthetic(40_000, &[2, 3, 4, 2, 3], 11);
        let qs = all_queries(&[0, 1, 2, 3, 4], 2, data.names()).unwrap();
        let plan = CalmPlan::choose(&data, eps, &qs, CalmOptions { l: Some(l), ..Default::default() }).unwrap();
        let r = 400;
        if l == 4 {
            assert!([0usize, 4, 9].iter().any(|&qi| plan.cover[qi].len() >= 2), "test a multiply covered query");
        }
        for qi in [0usize, 4, 9] {
            let truth = data.true_marginal(&plan.queries[qi]);
            let s = 1.0 - truth.iter().map(|p| p * p).sum::<f64>();
            let mut diffs = Vec::with_capacity(r);
            let mut sum = vec![0.0; truth.len()];
            let mut sumsq = vec![0.0; truth.len()];
            let mut ratio = vec![0.0; truth.len()];
            let mut rng = fast_rng(100 + qi as u64 + 10 * l as u64);
            for _ in 0..r {
                let raw = calm::collect(&plan, &data, &mut rng).unwrap();
                let a = &calm::answer_raw(&plan, &raw)[qi];
                let pred = plan.predicted_query_sse(qi, &raw.sizes, s).unwrap();
                diffs.push(a.sse(&truth) - pred);
                let var = plan.raw_cell_variances(qi, &raw.sizes, &truth);
                for (c, &x) in a.cells.iter().enumerate() {
                    sum[c] += x;
                    sumsq[c] += x * x;
                    ratio[c] += (x - truth[c]).powi(2) / var[c] / r as f64;
                }
            }
            let mean = diffs.iter().sum::<f64>() / r as f64;
            let sd = (diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (r - 1) as f64).sqrt();
            let z = mean / (sd / (r as f64).sqrt());
            assert!(z.abs() < 4.42, "ε={eps} l={l} query {qi}: mean SSE − predicted {mean:.4e} (z = {z:.2}, R = {r})");
            for c in 0..truth.len() {
                let m = sum[c] / r as f64;
                let v = (sumsq[c] / r as f64 - m * m) * r as f64 / (r - 1) as f64;
                let zc = (m - truth[c]) / (v / r as f64).sqrt();
                assert!(zc.abs() < 5.3, "ε={eps} query {qi} cell {c}: mean {m} truth {} z {zc:.2}", truth[c]);
                let tol = 5.3 * (2.0 / r as f64).sqrt();
                assert!((ratio[c] - 1.0).abs() < tol, "ε={eps} query {qi} cell {c}: MSE/variance {}", ratio[c]);
            }
        }
    }
}

/// The per-cell variances of a raw answer sum to the predicted SSE of the query (exactly, at
/// the same shares), for GRR and OUE sets, queries covered once and several times.
#[test]
fn raw_cell_variances_sum_to_the_predicted_sse() {
    for (eps, l) in [(1.0, 3), (3.0, 4), (0.5, 4)] {
        let data = synthetic(5_000, &[2, 3, 4, 2, 3], 13);
        let qs = all_queries(&[0, 1, 2, 3, 4], 2, data.names()).unwrap();
        let plan = CalmPlan::choose(&data, eps, &qs, CalmOptions { l: Some(l), ..Default::default() }).unwrap();
        let sizes: Vec<usize> = (0..plan.m()).map(|j| 900 + 37 * j).collect();
        let mut plan = plan;
        plan.n = sizes.iter().sum();
        for qi in 0..qs.len() {
            let truth = data.true_marginal(&plan.queries[qi]);
            let s = 1.0 - truth.iter().map(|p| p * p).sum::<f64>();
            let total: f64 = plan.raw_cell_variances(qi, &sizes, &truth).iter().sum();
            let pred = plan.predicted_query_sse(qi, &sizes, s).unwrap();
            assert!((total - pred).abs() < 1e-12 * pred, "ε={eps} l={l} query {qi}: {total} vs {pred}");
        }
    }
}

/// A published plan rebuilds identically from its sets; mixed 2- and 3-way queries are covered
/// through the 3-way ones; groups without reports are dropped at estimation.
#[test]
fn plans_rebuild_from_their_sets_and_empty_groups_are_dropped() {
    let data = synthetic(6_000, &[2, 3, 4, 2, 3], 17);
    let all = [0, 1, 2, 3, 4];
    let mut qs = all_queries(&all, 2, data.names()).unwrap();
    qs.extend(all_queries(&all, 3, data.names()).unwrap());
    let plan = CalmPlan::choose(&data, 2.0, &qs, CalmOptions::default()).unwrap();
    assert!(plan.cover.iter().all(|c| !c.is_empty()) && plan.sets.iter().all(|s| s.len() >= 3));
    let again =
        CalmPlan::with_sets(data.names(), data.cards(), data.n(), 2.0, plan.sets.clone(), &qs, super::MAX_CELLS)
            .unwrap();
    assert_eq!((&again.sets, &again.cover), (&plan.sets, &plan.cover));
    let e = CalmPlan::with_sets(data.names(), data.cards(), 10, 2.0, vec![vec![2, 1]], &qs, super::MAX_CELLS);
    assert!(e.unwrap_err().to_string().contains("sets"));
    let mut raw = calm::collect(&plan, &data, &mut fast_rng(18)).unwrap();
    assert_eq!(raw.sizes.iter().sum::<usize>(), data.n());
    let full = calm::estimate(&plan, &raw, None);
    assert!(full.marginals.iter().all(Option::is_some));
    // Empty the first group: its covered queries fall back to other sets or reconstruction.
    raw.sizes[0] = 0;
    let part = calm::estimate(&plan, &raw, Some(calm::Post::Gls));
    assert_eq!(part.used, Some(calm::Post::Gls));
    for (qi, m) in part.marginals.iter().enumerate() {
        let m = m.as_ref().expect("every attribute is in another set");
        assert!((m.cells.iter().sum::<f64>() - 1.0).abs() < 1e-9, "query {qi}");
    }
    raw.sizes.iter_mut().for_each(|s| *s = 0);
    assert!(calm::estimate(&plan, &raw, None).marginals.iter().all(Option::is_none));
}

#[test]
fn gls_consistency_pass_is_the_least_squares_joint() {
    // Non-binary cardinalities, sets overlapping in 1 and 2 attributes, GRR and OUE marginals.
    for (eps, l) in [(1.0, 3), (4.0, 3), (0.5, 4)] {
        let data = synthetic(5_000, &[2, 3, 4, 2, 3], 21);
        let qs = all_queries(&[0, 1, 2, 3, 4], 2, data.names()).unwrap();
        let plan = CalmPlan::choose(&data, eps, &qs, CalmOptions { l: Some(l), ..Default::default() }).unwrap();
        let mut rng = fast_rng(22);
        let raw = calm::collect(&plan, &data, &mut rng).unwrap();
        let gls = calm::postprocess_with(&plan, &raw, calm::Post::Gls);
        assert_eq!(gls.used, calm::Post::Gls);
        consistency::check_consistent(&plan.sets, data.cards(), &gls.marginals, 1e-12).unwrap();
        let var = calm::cell_variances(&plan, &raw.sizes);
        let (attrs, joint) = joint::gls_joint(&plan.sets, data.cards(), &raw.marginals, &var, 1 << 20).unwrap();
        for (s, m) in plan.sets.iter().zip(&gls.marginals) {
            let p = project(&joint, &attrs, data.cards(), s);
            for (a, b) in p.iter().zip(m) {
                assert!((a - b).abs() < 1e-12, "ε={eps} l={l} set {s:?}: {a} vs {b}");
            }
        }
    }
}

/// Heavy tier: the GLS-consistent estimate ([`calm::Post::Gls`]) is unbiased with the SSE
/// [`calm::GlsModel`] predicts at the realized group sizes. R = 400 collections on a fixed
/// population, GRR (ε = 3) and OUE (ε = 1, l = 4: 72-cell marginals) sets, queries whose
/// components are pooled over several sets; z = 4.42 on the mean of SSE − predicted (empirical
/// standard error) and z = 5.3 per cell.
#[test]
#[ignore]
fn calm_gls_is_unbiased_with_the_predicted_sse() {
    for (eps, l) in [(3.0, 3), (1.0, 4), (4.0, 3)] {
        let data = synthetic(40_000, &[2, 3, 4, 2, 3], 31);
        let qs = all_queries(&[0, 1, 2, 3, 4], 2, data.names()).unwrap();
        let plan = CalmPlan::choose(&data, eps, &qs, CalmOptions { l: Some(l), ..Default::default() }).unwrap();
        let r = 400;
        let truths: Vec<Vec<f64>> = plan.queries.iter().map(|q| data.true_marginal(q)).collect();
        let energies: Vec<Vec<f64>> = plan
            .queries
            .iter()
            .zip(&truths)
            .map(|(q, t)| joint::component_energies(t, &q.iter().map(|&a| data.cards()[a]).collect::<Vec<_>>()))
            .collect();
        // SSE − prediction at the run's realized group sizes (mean 0).
        let mut sses = vec![Vec::with_capacity(r); qs.len()];
        let mut sums: Vec<Vec<f64>> = truths.iter().map(|t| vec![0.0; t.len()]).collect();
        let mut sumsq = sums.clone();
        let mut rng = fast_rng(200 + l as u64);
        for _ in 0..r {
            let raw = calm::collect(&plan, &data, &mut rng).unwrap();
            let model = plan.gls_model(&raw.sizes);
            let post = calm::postprocess_with(&plan, &raw, calm::Post::Gls);
            for (qi, a) in calm::answer(&plan, &post.marginals, &raw.sizes).iter().enumerate() {
                let pred = model.query_sse(&plan.queries[qi], Some(&energies[qi])).unwrap();
                sses[qi].push(a.sse(&truths[qi]) - pred);
                for (c, &x) in a.cells.iter().enumerate() {
                    sums[qi][c] += x;
                    sumsq[qi][c] += x * x;
                }
            }
        }
        for qi in [0usize, 4, 9] {
            let q = &plan.queries[qi];
            let s = &sses[qi];
            let mean = s.iter().sum::<f64>() / r as f64;
            let sd = (s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (r - 1) as f64).sqrt();
            let z = mean / (sd / (r as f64).sqrt());
            assert!(z.abs() < 4.42, "ε={eps} l={l} query {q:?}: mean SSE − predicted {mean:.4e} (z = {z:.2})");
            for c in 0..truths[qi].len() {
                let m = sums[qi][c] / r as f64;
                let v = (sumsq[qi][c] / r as f64 - m * m) * r as f64 / (r - 1) as f64;
                let zc = (m - truths[qi][c]) / (v / r as f64).sqrt();
                assert!(zc.abs() < 5.3, "ε={eps} query {q:?} cell {c}: mean {m} truth {} z {zc:.2}", truths[qi][c]);
            }
        }
    }
}

#[test]
fn joint_fit_never_increases_the_weighted_error_of_the_gls_estimate() {
    // p̂ is the projection of the GLS estimate onto the joint distributions in the fit's
    // weighted norm Σ_j ‖A_j x − A_j p‖²/σ_j², and the truth p is one of them: in that norm
    // the fit is never farther from the truth, whatever the draw.
    let data = synthetic(3_000, &[2, 3, 2, 2, 3], 41);
    let qs = all_queries(&[0, 1, 2, 3, 4], 3, data.names()).unwrap();
    let plan = CalmPlan::choose(&data, 0.5, &qs, CalmOptions { l: Some(3), ..Default::default() }).unwrap();
    let truths: Vec<Vec<f64>> = plan.sets.iter().map(|s| data.true_marginal(s)).collect();
    let mut rng = fast_rng(42);
    let mut strictly = 0;
    for _ in 0..5 {
        let raw = calm::collect(&plan, &data, &mut rng).unwrap();
        let var = calm::cell_variances(&plan, &raw.sizes);
        let wdist = |margs: &[Vec<f64>]| -> f64 {
            margs
                .iter()
                .zip(&truths)
                .zip(&var)
                .map(|((m, t), v)| m.iter().zip(t).map(|(a, b)| (a - b).powi(2)).sum::<f64>() / v)
                .sum()
        };
        let gls = calm::postprocess_with(&plan, &raw, calm::Post::Gls).marginals;
        let opts = joint::JointOptions { tol: 1e-9, ..Default::default() };
        let fit = joint::fit(&plan.sets, data.cards(), &raw.marginals, &var, opts).unwrap();
        assert!(fit.gap_per_cell <= 1e-9);
        let fitted: Vec<Vec<f64>> =
            plan.sets.iter().map(|s| project(&fit.cells, &fit.attrs, data.cards(), s)).collect();
        let (d_fit, d_gls) = (wdist(&fitted), wdist(&gls));
        // Slack: the fit is within √(2·gap·cells) of the exact projection in this norm.
        let slack = (2.0 * 1e-9 * raw.marginals.iter().map(Vec::len).sum::<usize>() as f64).sqrt();
        assert!(d_fit.sqrt() <= d_gls.sqrt() + slack, "fit {d_fit} vs GLS {d_gls}");
        if d_fit < 0.9 * d_gls {
            strictly += 1;
        }
    }
    assert!(strictly >= 3, "at ε = 0.5 the non-negativity should bind in most draws");
}

/// The Fourier variance formula, covariances included, is exact: 7 devices, 7 coefficients,
/// one device per coefficient (counts fixed at 1), ε = 50 (no noise, c² − 1 < 1e-20). Over all
/// 7! assignments of devices to coefficients (each equally likely given the counts) the cells'
/// mean is the truth and their variance is [`fourier::FourierPlan::cell_variances`] at the true
/// θ, to 1e-12 (mean) and 1e-7 (variance: ε = 20 leaves a noise term ≈ 8.2e-9 per coefficient) — for a 5-category attribute (3 of its 8 bit patterns invalid, so the
/// covariance terms do not cancel) and a 3 × 2 query.
#[test]
fn fourier_variance_is_exact_over_all_partitions() {
    use super::fourier::{FourierCoefficients, FourierPlan};
    let cases: [(&[usize], Vec<Vec<u32>>); 2] = [
        (&[5], vec![vec![0], vec![1], vec![1], vec![2], vec![3], vec![4], vec![4]]),
        (&[3, 2], vec![vec![0, 0], vec![0, 1], vec![1, 1], vec![2, 0], vec![2, 1], vec![2, 1], vec![1, 0]]),
    ];
    for (cards, records) in cases {
        let names: Vec<String> = (0..cards.len()).map(|j| format!("a{j}")).collect();
        let q: Vec<usize> = (0..cards.len()).collect();
        let plan = FourierPlan::new(&names, cards, 20.0, std::slice::from_ref(&q)).unwrap();
        assert_eq!(plan.coefficients(), 7);
        let theta = plan.coefficients_of(records.iter().map(Vec::as_slice));
        // Each device's parity sign for each coefficient.
        let signs: Vec<Vec<f64>> =
            records.iter().map(|r| plan.coefficients_of(std::iter::once(r.as_slice()))).collect();
        let mut perm: Vec<usize> = (0..7).collect();
        let (mut sum, mut sumsq, mut count) = (Vec::new(), Vec::new(), 0.0);
        let mut visit = |perm: &[usize]| {
            let theta_hat = (0..7).map(|a| signs[perm[a]][a]).collect();
            let est = FourierCoefficients { theta: theta_hat, counts: vec![1; 7] };
            let cells = plan.answer(&est).remove(0).unwrap().cells;
            sum.resize(cells.len(), 0.0);
            sumsq.resize(cells.len(), 0.0);
            cells.iter().enumerate().for_each(|(c, &x)| {
                sum[c] += x;
                sumsq[c] += x * x;
            });
            count += 1.0;
        };
        permutations(&mut perm, 0, &mut visit);
        assert_eq!(count, 5040.0);
        let truth: Vec<f64> = {
            let ds = Dataset::new(names.clone(), cards.to_vec(), records.concat()).unwrap();
            ds.true_marginal(&q)
        };
        let var = plan.cell_variances(0, &theta, &[1; 7]).unwrap();
        for c in 0..truth.len() {
            let m = sum[c] / count;
            let v = sumsq[c] / count - m * m;
            assert!((m - truth[c]).abs() < 1e-12, "cards {cards:?} cell {c}: mean {m} truth {}", truth[c]);
            assert!((v - var[c]).abs() < 1e-7, "cards {cards:?} cell {c}: variance {v} formula {}", var[c]);
        }
    }
}

/// The published (Horvitz–Thompson) estimator's variance is exact too: 4 devices each drawing one
/// of 3 coefficients (all 81 assignments equally likely), ε = 20 (the largest accepted; the
/// formula's noise term, ((e^ε + 1)/(e^ε − 1))² − 1 ≈ 8.2e-9 per coefficient, is the tolerance).
#[test]
fn fourier_published_variance_is_exact_over_all_assignments() {
    use super::fourier::{FourierCoefficients, FourierPlan};
    let names = vec!["a".to_string()];
    let records: Vec<Vec<u32>> = vec![vec![0], vec![1], vec![1], vec![2]];
    let plan = FourierPlan::new(&names, &[3], 20.0, &[vec![0]]).unwrap();
    assert_eq!(plan.coefficients(), 3);
    let theta = plan.coefficients_of(records.iter().map(Vec::as_slice));
    let signs: Vec<Vec<f64>> = records.iter().map(|r| plan.coefficients_of(std::iter::once(r.as_slice()))).collect();
    let (mut sum, mut sumsq) = (vec![0.0; 3], vec![0.0; 3]);
    for code in 0..81usize {
        let groups: Vec<usize> = (0..4).map(|i| code / 3usize.pow(i as u32) % 3).collect();
        let (mut pos, mut counts) = (vec![0.0; 3], vec![0u64; 3]);
        for (i, &g) in groups.iter().enumerate() {
            pos[g] += signs[i][g];
            counts[g] += 1;
        }
        let theta_hat = (0..3).map(|g| if counts[g] == 0 { f64::NAN } else { pos[g] / counts[g] as f64 }).collect();
        let cells = plan.answer_published(&FourierCoefficients { theta: theta_hat, counts }).remove(0).cells;
        for (c, &x) in cells.iter().enumerate() {
            sum[c] += x / 81.0;
            sumsq[c] += x * x / 81.0;
        }
    }
    let var = plan.published_variances(0, &theta, 4);
    let truth = [0.25, 0.5, 0.25];
    for c in 0..3 {
        assert!((sum[c] - truth[c]).abs() < 1e-12, "cell {c}: mean {} truth {}", sum[c], truth[c]);
        let v = sumsq[c] - sum[c] * sum[c];
        assert!((v - var[c]).abs() < 1e-7, "cell {c}: variance {v} formula {}", var[c]);
    }
}

fn permutations(p: &mut [usize], k: usize, visit: &mut impl FnMut(&[usize])) {
    if k == p.len() {
        return visit(p);
    }
    for i in k..p.len() {
        p.swap(k, i);
        permutations(p, k + 1, visit);
        p.swap(k, i);
    }
}
