//! Shared Monte-Carlo helpers of the numeric integration tests (fast and heavy tiers).
//!
//! Every statistic is compared at |z| < Z_TEST = 4.42, a two-sided false-failure rate of 1e-5
//! per statistic for a normal statistic. The seeds are fixed, so a run is reproducible; a failure
//! message prints n, the estimate, the target and the tolerance.
#![allow(dead_code)]

use harmony_core::estimate::{Moments, Z_TEST};
use harmony_core::numeric::{AnyNumeric, NUMERIC_NAMES, NumericMechanism, VectorMechanism};
use harmony_core::sampling::{fast_rng, stream_seed};

/// The budgets every Monte-Carlo test covers.
pub const EPSILONS: [f64; 4] = [0.5, 1.0, 2.0, 4.0];
/// The inputs every 1-D Monte-Carlo test covers (both ends, the middle, two interior points).
pub const TS: [f64; 5] = [-1.0, -0.3, 0.0, 0.6, 1.0];

/// All six 1-D mechanisms at budget ε.
pub fn all_1d(eps: f64) -> Vec<AnyNumeric> {
    NUMERIC_NAMES.iter().map(|n| AnyNumeric::by_name(n, eps).unwrap()).collect()
}

/// Checks, for n reports of input t, that the sample mean is within Z_TEST·σ/√n of t and the
/// sample variance within Z_TEST standard errors of the closed form `m.variance(t)`.
pub fn check_1d<M: NumericMechanism>(m: &M, t: f64, n: usize, seed: u64) -> Result<(), String> {
    let mut rng = fast_rng(seed);
    let (mut mo, mut sq) = (Moments::default(), Moments::default());
    for _ in 0..n {
        let r = m.randomize(t, &mut rng).map_err(|e| e.to_string())?;
        let y = m.decode(&r).map_err(|e| e.to_string())?;
        mo.push(y);
        sq.push(y * y);
    }
    let tag = format!("{} eps={} t={t}", m.name(), m.epsilon().value());
    check_moments(&tag, &mo, &sq, t, m.variance(t))
}

/// The mean and variance checks on the moments of Y (`mo`) and of Y² (`sq`).
///
/// When |Y| is constant (Duchi-type ±B outputs) the sample variance is a function of the sample
/// mean, its first-order standard error vanishes near t = 0 and `z_variance` is not a valid z;
/// the second moment E[Y²] = Var + t² is then checked exactly instead (to 1e-9 relative).
pub fn check_moments(tag: &str, mo: &Moments, sq: &Moments, t: f64, var: f64) -> Result<(), String> {
    let n = mo.n;
    let zm = mo.z_mean(t, var);
    if zm.abs() >= Z_TEST {
        return Err(format!(
            "{tag}: n = {n}, mean {:.6}, target {t}, tolerance ±{:.6} (z = {zm:.2})",
            mo.mean,
            Z_TEST * (var / n as f64).sqrt()
        ));
    }
    let second = var + t * t;
    if sq.variance() <= 1e-12 * second * second {
        if (sq.mean - second).abs() > 1e-9 * second {
            return Err(format!("{tag}: n = {n}, E[Y^2] {:.9} (|Y| constant), target {second:.9}", sq.mean));
        }
        return Ok(());
    }
    let zv = mo.z_variance(var);
    if zv.abs() >= Z_TEST {
        let se = (mo.variance() - var) / zv;
        return Err(format!(
            "{tag}: n = {n}, variance {:.6}, target {var:.6}, tolerance ±{:.6} (z = {zv:.2})",
            mo.variance(),
            Z_TEST * se.abs()
        ));
    }
    Ok(())
}

/// Runs `check_1d` for every mechanism, ε and t; collects every failure.
pub fn check_all_1d(n: usize, base_seed: u64) -> Vec<String> {
    let mut failures = Vec::new();
    let mut stream = 0;
    for eps in EPSILONS {
        for m in all_1d(eps) {
            for t in TS {
                stream += 1;
                if let Err(e) = check_1d(&m, t, n, stream_seed(base_seed, stream)) {
                    failures.push(e);
                }
            }
        }
    }
    failures
}

/// Per-coordinate mean and variance checks of a vector mechanism at input t (n reports), from
/// per-coordinate power sums Σy, Σy², Σy³, Σy⁴ (cheap enough for d = 200 at 10⁶ reports). The
/// z statistics are those of `Moments::z_mean` and `Moments::z_variance`.
pub fn check_vector<M: VectorMechanism>(m: &M, t: &[f64], n: usize, seed: u64) -> Result<(), String> {
    let d = m.dimension();
    let mut rng = fast_rng(seed);
    let mut sums = vec![[0.0f64; 4]; d];
    // Range of y² per coordinate, to detect a constant |Y|.
    let mut sq_range = vec![(f64::INFINITY, 0.0f64); d];
    let (mut y, mut scratch) = (vec![0.0; d], vec![0.0; d]);
    for _ in 0..n {
        let r = m.randomize(t, &mut rng).map_err(|e| e.to_string())?;
        m.validate(&r).map_err(|e| e.to_string())?;
        y.iter_mut().for_each(|v| *v = 0.0);
        m.accumulate(&r, &mut y, &mut scratch);
        for ((s, r), &v) in sums.iter_mut().zip(sq_range.iter_mut()).zip(&y) {
            let v2 = v * v;
            *r = (r.0.min(v2), r.1.max(v2));
            s[0] += v;
            s[1] += v2;
            s[2] += v2 * v;
            s[3] += v2 * v2;
        }
    }
    let nf = n as f64;
    for j in 0..d {
        let tag = format!("{} eps={} d={d} coordinate {j} (t_j = {})", m.name(), m.epsilon().value(), t[j]);
        let (tj, var) = (t[j], m.variance(t[j]));
        let [m1, m2, m3, m4] = sums[j].map(|x| x / nf);
        let zm = (m1 - tj) / (var / nf).sqrt();
        if zm.abs() >= Z_TEST {
            return Err(format!(
                "{tag}: n = {n}, mean {m1:.6}, target {tj}, tolerance ±{:.6} (z = {zm:.2})",
                Z_TEST * (var / nf).sqrt()
            ));
        }
        let second = var + tj * tj;
        if sq_range[j].0 == sq_range[j].1 {
            // |Y| constant: check E[Y²] exactly (see check_moments).
            if (m2 - second).abs() > 1e-9 * second {
                return Err(format!("{tag}: n = {n}, E[Y^2] {m2:.9} (|Y| constant), target {second:.9}"));
            }
            continue;
        }
        let s2 = (m2 - m1 * m1) * nf / (nf - 1.0);
        let mu4 = m4 - 4.0 * m1 * m3 + 6.0 * m1 * m1 * m2 - 3.0 * m1.powi(4);
        let se = ((mu4 - var * var).max(f64::MIN_POSITIVE) / nf).sqrt();
        let zv = (s2 - var) / se;
        if zv.abs() >= Z_TEST {
            return Err(format!(
                "{tag}: n = {n}, variance {s2:.6}, target {var:.6}, tolerance ±{:.6} (z = {zv:.2})",
                Z_TEST * se
            ));
        }
    }
    Ok(())
}

/// A deterministic test vector in [-1, 1]^d with distinct coordinates, including ±1 and 0 when
/// d ≥ 3.
pub fn test_vector(d: usize) -> Vec<f64> {
    (0..d)
        .map(|j| match j {
            0 => 1.0,
            1 => -1.0,
            2 => 0.0,
            _ => (j as f64 * 0.7).sin(),
        })
        .collect()
}

/// Empirical ε audit over a finite output space: given output counts for two inputs (n draws
/// each), checks that every output's log probability ratio ln(p̂₁/p̂₂) is at most ε + Z_TEST·se
/// (se by the delta method, √((1 − p)/(np)) per side) and that the largest one is at least
/// ε − Z_TEST·se (the bound is attained).
///
/// An output seen fewer than 100 times on one side has a ratio too noisy for the delta method;
/// it is tested exactly instead: given the m = c₁ + c₂ draws of that output, c₁ is
/// Binomial(m, π) with π ≤ e^ε/(1 + e^ε) under ε-LDP (equal n), so the audit fails when
/// P[X ≥ c₁] < 1e-5/2 at π = e^ε/(1 + e^ε) (per output and direction). In particular an output
/// impossible under one input (c₂ = 0) fails as soon as c₁ ≥ 11.5/ln(1 + e^{−ε}): 37 draws at
/// ε = 1, 100 at ε = 2.1 (the failure of Mironov's attack and of the old `olh.py`, which never
/// output g − 1). It used to skip such outputs.
pub fn audit_ratio(counts1: &[u64], counts2: &[u64], n: u64, eps: f64) -> Result<f64, String> {
    let nf = n as f64;
    let mut best = f64::NEG_INFINITY;
    let mut best_se = 0.0;
    for (o, (&c1, &c2)) in counts1.iter().zip(counts2).enumerate() {
        for (a, b) in [(c1, c2), (c2, c1)] {
            if b < 100 {
                let tail = binomial_upper_tail(a + b, a, eps.exp() / (1.0 + eps.exp()));
                if tail < 0.5e-5 {
                    return Err(format!(
                        "output {o}: n = {n} per input, counts {a} vs {b}: P[X >= {a}] = {tail:.2e} under ratio e^eps \
                         (exact binomial test, threshold 5e-6)"
                    ));
                }
                continue;
            }
            if a < 100 {
                continue;
            }
            let (pa, pb) = (a as f64 / nf, b as f64 / nf);
            let lr = (pa / pb).ln();
            let se = ((1.0 - pa) / (nf * pa) + (1.0 - pb) / (nf * pb)).sqrt();
            if lr > eps + Z_TEST * se {
                return Err(format!(
                    "output {o}: n = {n} per input, ln ratio {lr:.5} > eps {eps} + {:.5} (counts {a} vs {b})",
                    Z_TEST * se
                ));
            }
            if lr > best {
                best = lr;
                best_se = se;
            }
        }
    }
    if best < eps - Z_TEST * best_se {
        return Err(format!("n = {n} per input: largest ln ratio {best:.5} < eps {eps} - {:.5}", Z_TEST * best_se));
    }
    Ok(best)
}

/// P[X ≥ a] for X ~ Binomial(m, π), summed in log space over the m − a + 1 terms (few: the
/// auditor calls it with m − a < 100).
pub fn binomial_upper_tail(m: u64, a: u64, pi: f64) -> f64 {
    if a == 0 {
        return 1.0;
    }
    // ln C(m, j) for j = m − a, …, 0 (the low side's count), built from ln C(m, 0) = 0 upwards.
    let low = m - a;
    let mut ln_c = 0.0;
    let mut terms = Vec::with_capacity(low as usize + 1);
    for j in 0..=low {
        if j > 0 {
            ln_c += ((m - j + 1) as f64 / j as f64).ln();
        }
        terms.push(ln_c + (m - j) as f64 * pi.ln() + j as f64 * (1.0 - pi).ln());
    }
    let top = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    top.exp() * terms.iter().map(|t| (t - top).exp()).sum::<f64>()
}
