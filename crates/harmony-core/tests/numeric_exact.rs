//! Exact checks of the multidimensional mechanisms by enumerating every output: the worst-case
//! probability ratio equals e^ε (to 1e-9 relative) and the decoded report is exactly unbiased;
//! and a chi-square check that the O(d) sampler really draws from those probabilities.

use harmony_core::numeric::{DuchiMulti, VectorMechanism};
use harmony_core::sampling::fast_rng;

/// ⟨s, v⟩ for s, v ∈ {±1}^d encoded as d-bit masks (1 = +1).
fn inner(s: u32, v: u32, d: usize) -> i64 {
    let agree = (!(s ^ v) & ((1u32 << d) - 1)).count_ones() as i64;
    2 * agree - d as i64
}

/// P[s | v] from the mechanism's own constants π and |T₊|/2^d.
fn prob(m: &DuchiMulti, s: u32, v: u32, d: usize) -> f64 {
    let total = (1u64 << d) as f64;
    let t_plus = m.positive_fraction() * total;
    if inner(s, v, d) > 0 { m.pi() / t_plus } else { (1.0 - m.pi()) / (total - t_plus) }
}

#[test]
fn duchi_multi_is_exactly_eps_ldp_and_unbiased_for_d_1_to_10() {
    for eps in [0.1, 0.5, 1.0, 2.0, 4.0, 8.0] {
        for d in 1..=10usize {
            let m = DuchiMulti::new(eps, d).unwrap();
            let outputs = 1u32 << d;
            // |T₊| from the struct matches a count.
            let t_plus = (0..outputs).filter(|&s| inner(s, 0, d) > 0).count() as f64;
            assert!(
                (m.positive_fraction() * outputs as f64 - t_plus).abs() < 1e-9,
                "eps {eps}, d {d}: |T+| {t_plus} vs {}",
                m.positive_fraction() * outputs as f64
            );
            let mut worst = 0.0f64;
            for s in 0..outputs {
                let (mut lo, mut hi) = (f64::MAX, 0.0f64);
                for v in 0..outputs {
                    let p = prob(&m, s, v, d);
                    lo = lo.min(p);
                    hi = hi.max(p);
                }
                worst = worst.max(hi / lo);
            }
            let target = eps.exp();
            assert!((worst / target - 1.0).abs() < 1e-9, "eps {eps}, d {d}: max ratio {worst}, e^eps {target}");
            // Unbiased: Σ_s P[s | v]·B·s_j = v_j for every v and j; probabilities sum to 1.
            for v in 0..outputs {
                let mut total = 0.0;
                let mut mean = vec![0.0; d];
                for s in 0..outputs {
                    let p = prob(&m, s, v, d);
                    total += p;
                    for (j, mj) in mean.iter_mut().enumerate() {
                        *mj += p * m.scale() * if (s >> j) & 1 == 1 { 1.0 } else { -1.0 };
                    }
                }
                assert!((total - 1.0).abs() < 1e-12, "eps {eps}, d {d}: total {total}");
                for (j, mj) in mean.iter().enumerate() {
                    let vj = if (v >> j) & 1 == 1 { 1.0 } else { -1.0 };
                    assert!((mj - vj).abs() < 1e-9, "eps {eps}, d {d}, v {v:#b}: E[B s_{j}] = {mj}, v_j = {vj}");
                }
            }
        }
    }
}

#[test]
fn duchi_multi_sampler_matches_the_exact_output_distribution() {
    // Chi-square over all 2^d outputs for a fixed ±1 input (the rounding is then deterministic).
    // Thresholds: the chi-square quantile at 1 - 1e-5 for 2^d - 1 degrees of freedom.
    let quantile = |dof: usize| match dof {
        1 => 19.51,
        3 => 25.90,
        7 => 35.26,
        15 => 50.49,
        31 => 76.56,
        _ => unreachable!(),
    };
    for eps in [0.5, 1.0, 3.0] {
        for d in 1..=5usize {
            let m = DuchiMulti::new(eps, d).unwrap();
            let outputs = 1usize << d;
            // v = (+1, −1, +1, −1, …).
            let v: u32 = (0..d).filter(|j| j % 2 == 0).map(|j| 1u32 << j).sum();
            let t: Vec<f64> = (0..d).map(|j| if (v >> j) & 1 == 1 { 1.0 } else { -1.0 }).collect();
            let n = 100_000u64;
            let mut rng = fast_rng(7000 + d as u64);
            let mut counts = vec![0u64; outputs];
            for _ in 0..n {
                let r = m.randomize(&t, &mut rng).unwrap();
                counts[r.bits[0] as usize] += 1;
            }
            let chi2: f64 = (0..outputs)
                .map(|s| {
                    let e = n as f64 * prob(&m, s as u32, v, d);
                    (counts[s] as f64 - e).powi(2) / e
                })
                .sum();
            let q = quantile(outputs - 1);
            assert!(chi2 < q, "eps {eps}, d {d}: n = {n}, chi2 {chi2:.2} >= {q} (counts {counts:?})");
        }
    }
}
