//! Empirical ε audits of the numeric mechanisms: sample many reports for two extreme inputs,
//! estimate every output's probability (real-valued reports binned: binning is
//! post-processing, so the bins' ratios are bounded by e^ε too, and attained by bins inside
//! one input's high-density window and the other's tail), and check that the largest log ratio
//! is ε within Z_TEST = 4.42 delta-method standard errors (1e-5 false-failure rate per output
//! and direction; outputs with fewer than 100 draws on one side by an exact binomial test).
//! Negative controls show the audit catches a mechanism that is not ε-LDP, including one with
//! an output impossible under one input.

mod numeric_common;

use harmony_core::numeric::{
    Duchi, DuchiMulti, GRID_STEP, HarmonyBit, Hybrid, NumericMechanism, NumericReport, Piecewise, VectorMechanism,
};
use harmony_core::sampling::{bernoulli, fast_rng, uniform_below};
use numeric_common::audit_ratio;

const N: u64 = 200_000;

/// Bins of real-valued reports over [−bound, bound].
const BINS: usize = 16;

/// Output index of a 1-D report: 0 = Sign(−), 1 = Sign(+), 2 + b for a `Fixed` report in bin b
/// of [`BINS`] equal bins over [−bound, bound] (PM's [−C, C]; values past it, by rounding, in
/// the end bins).
fn category(r: &NumericReport, bound: f64) -> usize {
    match *r {
        NumericReport::Sign(false) => 0,
        NumericReport::Sign(true) => 1,
        NumericReport::Fixed(u) => {
            let z = (u as f64 * GRID_STEP + bound) / (2.0 * bound);
            2 + ((z * BINS as f64).floor().max(0.0) as usize).min(BINS - 1)
        }
    }
}

fn counts_1d<M: NumericMechanism>(m: &M, t: f64, seed: u64, bound: f64) -> Vec<u64> {
    let mut rng = fast_rng(seed);
    let mut c = vec![0u64; 2 + BINS];
    for _ in 0..N {
        c[category(&m.randomize(t, &mut rng).unwrap(), bound)] += 1;
    }
    c
}

#[test]
fn duchi_audit() {
    for (k, eps) in [0.5, 1.0, 2.0, 4.0].into_iter().enumerate() {
        let m = Duchi::new(eps).unwrap();
        let (a, b) = (counts_1d(&m, 1.0, 10 + k as u64, 1.0), counts_1d(&m, -1.0, 20 + k as u64, 1.0));
        let r = audit_ratio(&a, &b, N, eps).unwrap_or_else(|e| panic!("duchi eps={eps}: {e}"));
        println!("duchi eps={eps}: empirical max ln ratio {r:.4}");
    }
}

/// HM: the Sign outputs of the Duchi branch and the binned reports of the PM branch (both
/// branches' ratios reach e^ε).
#[test]
fn hybrid_audit() {
    for (k, eps) in [0.5, 1.0, 2.0, 4.0].into_iter().enumerate() {
        let m = Hybrid::new(eps).unwrap();
        let bound = m.piecewise().map(|p| p.scale()).unwrap_or(1.0);
        let (a, b) = (counts_1d(&m, 1.0, 30 + k as u64, bound), counts_1d(&m, -1.0, 40 + k as u64, bound));
        let r = audit_ratio(&a, &b, N, eps).unwrap_or_else(|e| panic!("hm eps={eps}: {e}"));
        println!("hm eps={eps}: empirical max ln ratio {r:.4}");
    }
}

/// PM, binned over [−C, C] (it used to be lumped into one category, so never audited).
#[test]
fn pm_audit() {
    for (k, eps) in [0.5, 1.0, 2.0, 4.0].into_iter().enumerate() {
        let m = Piecewise::new(eps).unwrap();
        let c = m.scale();
        let (a, b) = (counts_1d(&m, 1.0, 50 + k as u64, c), counts_1d(&m, -1.0, 60 + k as u64, c));
        let r = audit_ratio(&a, &b, N, eps).unwrap_or_else(|e| panic!("pm eps={eps}: {e}"));
        println!("pm eps={eps}: empirical max ln ratio {r:.4}");
    }
}

#[test]
fn duchi_multi_audit() {
    for (k, eps) in [0.5, 1.0, 2.0].into_iter().enumerate() {
        for d in [1usize, 2, 3, 4] {
            let m = DuchiMulti::new(eps, d).unwrap();
            let count = |t: f64, seed: u64| {
                let mut rng = fast_rng(seed);
                let tv = vec![t; d];
                let mut c = vec![0u64; 1 << d];
                for _ in 0..N {
                    c[m.randomize(&tv, &mut rng).unwrap().bits[0] as usize] += 1;
                }
                c
            };
            let seed = 100 * (k as u64 + 1) + d as u64;
            let (a, b) = (count(1.0, seed), count(-1.0, seed + 50));
            let r = audit_ratio(&a, &b, N, eps).unwrap_or_else(|e| panic!("duchi-multi eps={eps} d={d}: {e}"));
            println!("duchi-multi eps={eps} d={d}: empirical max ln ratio {r:.4}");
        }
    }
}

#[test]
fn harmony_bit_audit() {
    for (k, eps) in [0.5, 1.0, 2.0].into_iter().enumerate() {
        let d = 3;
        let m = HarmonyBit::new(eps, d).unwrap();
        let count = |t: f64, seed: u64| {
            let mut rng = fast_rng(seed);
            let mut c = vec![0u64; 2 * d];
            for _ in 0..N {
                let r = m.randomize(&[t, t, t], &mut rng).unwrap();
                c[2 * r.j as usize + r.positive as usize] += 1;
            }
            c
        };
        let (a, b) = (count(1.0, 300 + k as u64), count(-1.0, 400 + k as u64));
        let r = audit_ratio(&a, &b, N, eps).unwrap_or_else(|e| panic!("harmony-1bit eps={eps}: {e}"));
        println!("harmony-1bit eps={eps}: empirical max ln ratio {r:.4}");
    }
}

#[test]
fn audit_catches_broken_mechanisms() {
    let eps: f64 = 1.0;
    // Duchi with a 10% too small C: P₊(1)/P₊(−1) > e^ε.
    let c = 0.9 * Duchi::new(eps).unwrap().scale();
    let sample = |t: f64, seed: u64| {
        let mut rng = fast_rng(seed);
        let mut counts = vec![0u64; 2];
        for _ in 0..N {
            counts[bernoulli(&mut rng, 0.5 + t / (2.0 * c)) as usize] += 1;
        }
        counts
    };
    let err = audit_ratio(&sample(1.0, 1), &sample(-1.0, 2), N, eps).unwrap_err();
    println!("broken duchi: {err}");
    // Duchi multidimensional as restated by Harmony (strict >, π = e/(e+1)) at d = 2:
    // T₊(v) = {v}, T₋(v) has 3 outputs, ratio 3e^ε.
    let pi = eps.exp() / (eps.exp() + 1.0);
    let sample = |v: u32, seed: u64| {
        let mut rng = fast_rng(seed);
        let mut counts = vec![0u64; 4];
        for _ in 0..N {
            let s = if bernoulli(&mut rng, pi) {
                v
            } else {
                let others: Vec<u32> = (0..4).filter(|&s| s != v).collect();
                others[uniform_below(&mut rng, 3) as usize]
            };
            counts[s as usize] += 1;
        }
        counts
    };
    let err = audit_ratio(&sample(0b11, 3), &sample(0b00, 4), N, eps).unwrap_err();
    println!("uncorrected duchi-multi: {err}");
    // Too private (a mechanism at eps/2 audited against eps) fails the attainment side.
    let half = Duchi::new(eps / 2.0).unwrap();
    let err = audit_ratio(&counts_1d(&half, 1.0, 5, 1.0), &counts_1d(&half, -1.0, 6, 1.0), N, eps).unwrap_err();
    println!("eps/2 duchi audited at eps: {err}");
}

/// The auditor itself, with planted defects of the kind it used to skip (outputs with fewer
/// than 100 draws on one side): an output impossible under one input fails it (≥ 100 draws vs
/// 0 at ε ≤ 2), and so does a PM whose outputs under t' stop short of C (the top bin empty).
/// A legitimate rare output (ratio e^ε, few draws) does not.
#[test]
fn audit_fails_on_outputs_impossible_under_one_input() {
    let eps: f64 = 1.0;
    // Real counts of Duchi (t = ±1), with a third output planted by moving draws out of output 0.
    let plant = |eps: f64, seed: u64, under_t: u64, under_t2: u64| {
        let m = Duchi::new(eps).unwrap();
        let (mut a, mut b) = (counts_1d(&m, 1.0, seed, 1.0), counts_1d(&m, -1.0, seed + 1, 1.0));
        (a[0], a[2]) = (a[0] - under_t, under_t);
        (b[0], b[2]) = (b[0] - under_t2, under_t2);
        audit_ratio(&a, &b, N, eps)
    };
    assert!(plant(eps, 70, 0, 0).is_ok(), "the sound mechanism passes");
    // 100 draws vs none: P[X ≥ 100] = (e/(1 + e))^100 = 2.6e-14 at ε = 1, 3.1e-6 at ε = 2.
    let err = plant(eps, 70, 100, 0).unwrap_err();
    println!("impossible output: {err}");
    assert!(err.contains("output 2"), "{err}");
    assert!(plant(2.0, 74, 100, 0).unwrap_err().contains("output 2"));
    // Not yet significant: 30 vs 0 at ε = 1 (P = 8.4e-5); a rare output with the right ratio
    // (40 vs 15, e^1 = 2.7) passes.
    assert!(plant(eps, 70, 30, 0).is_ok());
    assert!(plant(eps, 70, 40, 15).is_ok());
    // PM whose outputs under t' = −1 are clamped below C − 0.2·C: the top bin is empty for t'.
    let pm = Piecewise::new(eps).unwrap();
    let c = pm.scale();
    let broken = |t: f64, seed: u64, cap: f64| {
        let mut rng = fast_rng(seed);
        let mut counts = vec![0u64; 2 + BINS];
        for _ in 0..N {
            let NumericReport::Fixed(u) = pm.randomize(t, &mut rng).unwrap() else { unreachable!() };
            let y = (u as f64 * GRID_STEP).min(cap);
            counts[category(&NumericReport::Fixed((y / GRID_STEP) as i64), c)] += 1;
        }
        counts
    };
    let err = audit_ratio(&broken(1.0, 72, c), &broken(-1.0, 73, 0.8 * c), N, eps).unwrap_err();
    println!("pm with a truncated tail: {err}");
}
