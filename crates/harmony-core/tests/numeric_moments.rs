//! Fast-tier Monte-Carlo checks of every numeric mechanism: mean = t and sample variance = the
//! closed form, each within 4.42 standard errors (false-failure rate 1e-5 per statistic; with
//! ~300 statistics here, ~3e-3 for the whole file at fresh seeds — the seeds are fixed).

mod numeric_common;

use harmony_core::numeric::{
    DuchiMulti, HarmonyBit, Hybrid, NumericMechanism, NumericReport, Piecewise, Scdf, Staircase,
};
use harmony_core::sampling::fast_rng;
use numeric_common::*;

const N: usize = 100_000;

#[test]
fn one_dimensional_means_and_variances() {
    let failures = check_all_1d(N, 0x6d6f_6d65);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn piecewise_window_mass_matches_its_density() {
    // P[y in [l(t), r(t)]] = e^{ε/2}/(e^{ε/2} + 1), and P[y < l(t)] = (1 + t)/(2(e^{ε/2} + 1)).
    for (k, eps) in EPSILONS.into_iter().enumerate() {
        let m = Piecewise::new(eps).unwrap();
        let x = (eps / 2.0).exp();
        let mut rng = fast_rng(100 + k as u64);
        for t in TS {
            let (l, r) = (m.left(t), m.right(t));
            let (mut inside, mut below) = (0u64, 0u64);
            for _ in 0..N {
                let y = m.decode(&m.randomize(t, &mut rng).unwrap()).unwrap();
                // One grid step of slack for the rounding.
                if y >= l - 1e-6 && y <= r + 1e-6 {
                    inside += 1;
                } else if y < l {
                    below += 1;
                }
            }
            for (what, count, p) in
                [("window", inside, x / (x + 1.0)), ("left tail", below, (1.0 + t) / (2.0 * (x + 1.0)))]
            {
                let n = N as f64;
                let sd = (n * p * (1.0 - p)).sqrt().max(1e-9);
                let z = (count as f64 - n * p) / sd;
                assert!(
                    z.abs() < 4.42 || (p == 0.0 && count == 0),
                    "pm eps={eps} t={t} {what}: n = {N}, count {count}, target {:.1}, tolerance ±{:.1}",
                    n * p,
                    4.42 * sd
                );
            }
        }
    }
}

#[test]
fn hybrid_branch_frequency_is_alpha() {
    for (k, eps) in EPSILONS.into_iter().enumerate() {
        let m = Hybrid::new(eps).unwrap();
        let mut rng = fast_rng(200 + k as u64);
        let fixed = (0..N).filter(|_| matches!(m.randomize(0.3, &mut rng).unwrap(), NumericReport::Fixed(_))).count();
        let (n, p) = (N as f64, m.alpha());
        let sd = (n * p * (1.0 - p)).sqrt();
        assert!(
            (fixed as f64 - n * p).abs() < 4.42 * sd + 1e-9,
            "hm eps={eps}: n = {N}, PM-branch reports {fixed}, target {:.1}, tolerance ±{:.1}",
            n * p,
            4.42 * sd
        );
    }
}

#[test]
fn staircase_and_scdf_noise_is_symmetric_with_the_right_variance() {
    // Mean/variance are in one_dimensional_means_and_variances; here the noise's |x|/Δ fractional
    // part: P[frac < γ] = γ/(γ + (1 − γ)b).
    for (k, eps) in EPSILONS.into_iter().enumerate() {
        for noise in [*Staircase::new(eps).unwrap().noise(), *Scdf::new(eps).unwrap().noise()] {
            let mut rng = fast_rng(300 + k as u64);
            let (g, b) = (noise.gamma(), noise.ratio());
            let first = (0..N)
                .filter(|_| {
                    let s = noise.sample(&mut rng).abs() / 2.0;
                    s - s.floor() < g
                })
                .count();
            let (n, p) = (N as f64, g / (g + (1.0 - g) * b));
            let sd = (n * p * (1.0 - p)).sqrt();
            assert!(
                (first as f64 - n * p).abs() < 4.42 * sd,
                "staircase eps={eps} gamma={g}: n = {N}, first-part draws {first}, target {:.1}, tolerance ±{:.1}",
                n * p,
                4.42 * sd
            );
        }
    }
}

#[test]
fn duchi_multi_means_and_variances() {
    let mut failures = Vec::new();
    for (k, eps) in EPSILONS.into_iter().enumerate() {
        for d in [1usize, 2, 3, 4, 5, 8, 65] {
            let m = DuchiMulti::new(eps, d).unwrap();
            let n = if d > 8 { N / 5 } else { N / 2 };
            if let Err(e) = check_vector(&m, &test_vector(d), n, 400 + (k * 100 + d) as u64) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn harmony_bit_means_and_variances() {
    let mut failures = Vec::new();
    for (k, eps) in EPSILONS.into_iter().enumerate() {
        for d in [1usize, 2, 5] {
            let m = HarmonyBit::new(eps, d).unwrap();
            if let Err(e) = check_vector(&m, &test_vector(d), N, 500 + (k * 100 + d) as u64) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
