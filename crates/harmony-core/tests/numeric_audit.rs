//! Empirical ε audits of the discrete-output numeric mechanisms: sample many reports for two
//! extreme inputs, estimate every output's probability, and check that the largest log ratio is
//! ε within Z_TEST = 4.42 delta-method standard errors (1e-5 false-failure rate per output and
//! direction). Negative controls show the audit catches a mechanism that is not ε-LDP.

mod numeric_common;

use harmony_core::numeric::{Duchi, DuchiMulti, HarmonyBit, Hybrid, NumericMechanism, NumericReport, VectorMechanism};
use harmony_core::sampling::{bernoulli, fast_rng, uniform_below};
use numeric_common::audit_ratio;

const N: u64 = 200_000;

/// Output index of a 1-D report: 0 = Sign(−), 1 = Sign(+), 2 = any Fixed (HM's PM branch).
fn category(r: &NumericReport) -> usize {
    match r {
        NumericReport::Sign(false) => 0,
        NumericReport::Sign(true) => 1,
        NumericReport::Fixed(_) => 2,
    }
}

fn counts_1d<M: NumericMechanism>(m: &M, t: f64, seed: u64) -> Vec<u64> {
    let mut rng = fast_rng(seed);
    let mut c = vec![0u64; 3];
    for _ in 0..N {
        c[category(&m.randomize(t, &mut rng).unwrap())] += 1;
    }
    c
}

#[test]
fn duchi_audit() {
    for (k, eps) in [0.5, 1.0, 2.0, 4.0].into_iter().enumerate() {
        let m = Duchi::new(eps).unwrap();
        let (a, b) = (counts_1d(&m, 1.0, 10 + k as u64), counts_1d(&m, -1.0, 20 + k as u64));
        let r = audit_ratio(&a, &b, N, eps).unwrap_or_else(|e| panic!("duchi eps={eps}: {e}"));
        println!("duchi eps={eps}: empirical max ln ratio {r:.4}");
    }
}

#[test]
fn hybrid_duchi_branch_audit() {
    // Below and above eps*: the Sign outputs carry the ratio, the Fixed branch has probability α
    // whatever t.
    for (k, eps) in [0.5, 1.0, 2.0, 4.0].into_iter().enumerate() {
        let m = Hybrid::new(eps).unwrap();
        let (a, b) = (counts_1d(&m, 1.0, 30 + k as u64), counts_1d(&m, -1.0, 40 + k as u64));
        let r = audit_ratio(&a, &b, N, eps).unwrap_or_else(|e| panic!("hm eps={eps}: {e}"));
        println!("hm eps={eps}: empirical max ln ratio {r:.4}");
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
    let err = audit_ratio(&counts_1d(&half, 1.0, 5), &counts_1d(&half, -1.0, 6), N, eps).unwrap_err();
    println!("eps/2 duchi audited at eps: {err}");
}
