//! Privacy amplification by shuffling: the central (ε, δ) of n shuffled ε₀-LDP reports.
//!
//! A port of the numerical bound of Feldman, McMillan and Talwar, "Hiding Among the Clones: A
//! Simple and Nearly Optimal Analysis of Privacy Amplification by Shuffling" (FOCS 2021,
//! arXiv:2012.12803, Appendix E), from their code `computeamplification.py`
//! (github.com/apple/ml-shuffling-amplification). With C ~ Bin(n−1, e^−ε₀), A = Bin(C, ½),
//! B = A + 1 and α = e^ε₀/(1+e^ε₀), the shuffled output is (ε, δ)-indistinguishable between
//! neighbours if P = αA + (1−α)B and Q = αB + (1−α)A are; δ(ε) = Σ_c P(C = c)·D_e^ε(P_c‖Q_c)
//! (both directions), then ε is found by bisection on δ(ε) < δ.
//!
//! Differences from the Python, each keeping the result a sound bound: the default `step` is 1
//! (every c is summed exactly; with larger steps the Python takes the maximum over an interval's
//! two ends, which is not a bound because D(c) saw-tooths with ⌊β(c+1)⌋), its Q direction takes
//! both ends (the Python compares `upperc` with itself), the tail of C left out is added as
//! exact binomial tail mass, and the search stops once that tail is below δ·1e−6 (added too).
//! See docs/SHUFFLE.md for the reproduced numbers.

use crate::error::{Error, Result, Shown};

/// How [`numerical_epsilon`] computes: the Python's parameters.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Width of the c-intervals (1 = exact; the Python's example uses 100).
    pub step: u64,
    /// Bisection steps on ε (the Python's example uses 10); the answer is within
    /// upper/2^iterations of the exact root.
    pub iterations: u32,
    /// `true`: an upper bound on the shuffled ε; `false`: the Python's lower bound.
    pub upper: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { step: 1, iterations: 30, upper: true }
    }
}

fn check(n: u64, eps0: f64, delta: f64) -> Result<()> {
    if n < 2 {
        return Err(bad("n", &n, "at least 2 devices"));
    }
    if !(eps0 > 0.0 && eps0 <= 50.0) {
        return Err(bad("epsilon0", &eps0, "a number in (0, 50]"));
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(bad("delta", &delta, "a number in (0, 1)"));
    }
    Ok(())
}

fn bad<T: std::fmt::Debug>(name: &'static str, v: &T, expected: &str) -> Error {
    Error::InvalidParameter { name, value: Shown::from(v), expected: expected.into() }
}

/// The paper's closed form (Theorem 3.1), valid when ε₀ ≤ ln(n / (16 ln(4/δ))); `None` outside.
pub fn closed_form_epsilon(n: u64, eps0: f64, delta: f64) -> Result<Option<f64>> {
    check(n, eps0, delta)?;
    let nf = n as f64;
    if eps0 > (nf / (16.0 * (4.0 / delta).ln())).ln() {
        return Ok(None);
    }
    let a = 8.0 * (eps0.exp() * (4.0 / delta).ln()).sqrt() / nf.sqrt();
    let c = 8.0 * eps0.exp() / nf;
    let e = (1.0 + a + c).ln();
    let b = 1.0 - (-eps0).exp();
    let d = 1.0 + (-eps0 - e).exp();
    Ok(Some((1.0 + (b / d) * (a + c)).ln()))
}

/// The central ε of n shuffled ε₀-LDP reports at δ (the smallest ε the bound certifies;
/// never above ε₀).
pub fn numerical_epsilon(n: u64, eps0: f64, delta: f64, opts: Options) -> Result<f64> {
    check(n, eps0, delta)?;
    if opts.step == 0 {
        return Err(bad("step", &0, "at least 1"));
    }
    let hi = closed_form_epsilon(n, eps0, delta)?.unwrap_or(eps0).min(eps0);
    let (mut lo, mut hi) = (0.0, hi);
    for _ in 0..opts.iterations {
        let mid = (lo + hi) / 2.0;
        if delta_at(n, eps0, mid, delta, opts) < delta {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// The largest ε₀ per device whose shuffled upper bound at n and δ is at most `target`
/// (bisection on ε₀ over [target, 50] to relative precision 1e-4; ε₀ = target always works).
pub fn local_epsilon_for(n: u64, target: f64, delta: f64, opts: Options) -> Result<f64> {
    check(n, target.min(50.0), delta)?;
    let reaches = |e0: f64| numerical_epsilon(n, e0, delta, opts).map(|e| e <= target);
    let (mut lo, mut hi) = (target, target);
    while hi < 50.0 {
        hi = (hi * 2.0).min(50.0);
        if !reaches(hi)? {
            break;
        }
        lo = hi;
    }
    if lo == hi {
        return Ok(lo);
    }
    while hi - lo > 1e-4 * lo {
        let mid = (lo + hi) / 2.0;
        if reaches(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// δ(ε) of the clone reduction (the Python's `deltacomp`), or `cap` as soon as it exceeds `cap`.
/// The c-intervals alternate above and below E[C] as in the Python: [⌈E⌉, ⌈E⌉+step], then
/// [⌈E⌉−step, ⌈E⌉−1], [⌈E⌉+step+1, ⌈E⌉+2·step], ...; before each, the uncovered mass decides
/// whether to stop.
fn delta_at(n: u64, eps0: f64, eps: f64, cap: f64, opts: Options) -> f64 {
    if eps >= eps0 {
        return 0.0;
    }
    let (m, p) = (n - 1, (-eps0).exp());
    // Exact mode sums every c but checks the uncovered mass (two tail sums) once per block of
    // about sd(C)/16 values.
    let sd = ((m as f64) * p * (1.0 - p)).sqrt();
    let step = if opts.step == 1 { ((sd / 16.0) as u64).max(1) } else { opts.step };
    let center = ((m as f64) * p).ceil() as u64;
    let (mut dp, mut dq) = (0.0f64, 0.0f64);
    // Covered so far: c ∈ [lo, hi); both move outwards.
    let (mut lo, mut hi) = (center, center);
    let mut up = true;
    loop {
        let next = if up && hi <= m {
            let b = if hi == center { center + step } else { hi + step - 1 };
            Some((hi, b.min(m)))
        } else if !up && lo > 0 {
            Some((lo.saturating_sub(step), lo - 1))
        } else {
            None
        };
        up = !up;
        let Some((a, b)) = next else {
            if hi > m && lo == 0 {
                return dp.max(dq);
            }
            continue;
        };
        let rest = if hi == lo { 1.0 } else { binom_cdf_below(lo, m, p) + binom_tail_above(hi - 1, m, p) };
        if dp.max(dq) > cap {
            return cap;
        }
        // The Python stops once the uncovered mass is below both sums (so its upper bound can be
        // twice the lower); exact mode (step 1) goes on until it is below 0.1% of them.
        let enough = if opts.step == 1 { rest < 1e-3 * dp.max(dq) } else { rest < dp && rest < dq };
        if enough || rest < cap * 1e-6 {
            return if opts.upper { dp.max(dq) + rest } else { dp.max(dq) };
        }
        let (ap, aq) = interval(a, b, m, p, eps, eps0, opts);
        dp += ap;
        dq += aq;
        if a >= hi {
            hi = b + 1;
        } else {
            lo = a;
        }
    }
}

/// The contribution of c ∈ [a, b] to both directions: summed c by c when `step` is 1, else the
/// Python's interval mass times the ends' max (upper) or min (lower).
fn interval(a: u64, b: u64, m: u64, p: f64, eps: f64, eps0: f64, opts: Options) -> (f64, f64) {
    if opts.step == 1 {
        let (mut wp, mut wq) = (Walk::default(), Walk::default());
        let (mut sp, mut sq) = (0.0, 0.0);
        for c in a..=b {
            let w = ln_binom_pmf(c, m, p).exp();
            sp += w * onestep_with(c, eps, eps0, true, &mut wp).max(0.0);
            sq += w * onestep_with(c, eps, eps0, false, &mut wq).max(0.0);
        }
        return (sp, sq);
    }
    let mass: f64 = (a..=b).map(|c| ln_binom_pmf(c, m, p).exp()).sum();
    let ends = |dir| (onestep(a, eps, eps0, dir).max(0.0), onestep(b, eps, eps0, dir).max(0.0));
    let pick = |(x, y): (f64, f64)| if opts.upper { x.max(y) } else { x.min(y) };
    (mass * pick(ends(true)), mass * pick(ends(false)))
}

/// D_e^ε(P_c‖Q_c) (`p_over_q`) or D_e^ε(Q_c‖P_c): the Python's `onestep`.
fn onestep(c: u64, eps: f64, eps0: f64, p_over_q: bool) -> f64 {
    onestep_with(c, eps, eps0, p_over_q, &mut Walk::default())
}

/// [`onestep`] with P(Bin(c, ½) ≤ k) carried from c − 1 by `walk` (O(1) per c).
fn onestep_with(c: u64, eps: f64, eps0: f64, p_over_q: bool, walk: &mut Walk) -> f64 {
    let alpha = eps0.exp() / (eps0.exp() + 1.0);
    let ee = eps.exp();
    let effeps = (((ee + 1.0) * alpha - 1.0) / ((1.0 + ee) * alpha - ee)).ln();
    let beta = if p_over_q { 1.0 / (effeps.exp() + 1.0) } else { 1.0 / ((-effeps).exp() + 1.0) };
    let k = (beta * (c as f64 + 1.0)).floor() as u64; // the Python's cdf(cutoff), cdf(cutoff − 1)
    let f0 = walk.cdf(k, c);
    let f1 = if k == 0 {
        0.0
    } else if k > c {
        1.0
    } else {
        f0 - ln_binom_pmf(k, c, 0.5).exp()
    };
    let pc = alpha * f0 + (1.0 - alpha) * f1;
    let qc = (1.0 - alpha) * f0 + alpha * f1;
    if p_over_q { pc - ee * qc } else { (1.0 - qc) - ee * (1.0 - pc) }
}

/// F(k; c) = P(Bin(c, ½) ≤ k) along c = a, a+1, ... with k rising by 0 or 1:
/// F(k; c+1) = F(k; c) − pmf(k; c)/2 and F(k+1; c) = F(k; c) + pmf(k+1; c); recomputed from
/// scratch every 1,024 steps (rounding drift < 1e-13) and at any other move, so rounding cannot drift.
#[derive(Default)]
struct Walk {
    last: Option<(u64, u64, f64)>,
    steps: u32,
}

impl Walk {
    fn cdf(&mut self, k: u64, c: u64) -> f64 {
        let pmf = |k: u64, c: u64| ln_binom_pmf(k, c, 0.5).exp();
        let f = match self.last {
            Some((k0, c0, f0)) if c == c0 + 1 && (k == k0 || k == k0 + 1) && k0 < c0 && self.steps < 1024 => {
                self.steps += 1;
                let f = f0 - 0.5 * pmf(k0, c0);
                if k == k0 { f } else { f + pmf(k, c) }
            }
            _ => {
                self.steps = 0;
                binom_cdf(k, c, 0.5)
            }
        };
        self.last = Some((k, c, f));
        f
    }
}

/// ln Γ(x) for x ≥ 1: Stirling's series after shifting x to ≥ 10 (absolute error < 1e-14).
pub(crate) fn ln_gamma(x: f64) -> f64 {
    let (mut x, mut shift) = (x, 0.0);
    // Stirling's series from x ≥ 15 with the terms to x⁻⁹: the first one left out,
    // 691/(360360·x¹¹), is below 2.2e-16 there (to x⁻⁷ from x ≥ 10 it was 8e-13).
    while x < 15.0 {
        shift -= x.ln();
        x += 1.0;
    }
    let x2 = x * x;
    let series = 1.0 / (12.0 * x) - 1.0 / (360.0 * x * x2) + 1.0 / (1260.0 * x2 * x2 * x)
        - 1.0 / (1680.0 * x2 * x2 * x2 * x)
        + 1.0 / (1188.0 * x2 * x2 * x2 * x2 * x);
    shift + (x - 0.5) * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI).ln() + series
}

/// ln P(X = k), X ~ Bin(n, p), 0 < p < 1.
fn ln_binom_pmf(k: u64, n: u64, p: f64) -> f64 {
    if k > n {
        return f64::NEG_INFINITY;
    }
    let (k, n) = (k as f64, n as f64);
    ln_gamma(n + 1.0) - ln_gamma(k + 1.0) - ln_gamma(n - k + 1.0) + k * p.ln() + (n - k) * (-p).ln_1p()
}

/// P(X ≤ k), X ~ Bin(n, p): the smaller tail summed from its largest term outwards.
fn binom_cdf(k: u64, n: u64, p: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    let mode = ((n + 1) as f64 * p).floor() as u64;
    if k < mode { lower_tail(k, n, p) } else { 1.0 - binom_tail_above(k, n, p) }
}

/// P(X < k) (0 for k = 0).
fn binom_cdf_below(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 { 0.0 } else { binom_cdf(k - 1, n, p) }
}

/// P(X > k): the upper tail, accurate when small (= P(Y < n − k) for Y ~ Bin(n, 1 − p)).
fn binom_tail_above(k: u64, n: u64, p: f64) -> f64 {
    if k >= n {
        return 0.0;
    }
    let mode = ((n + 1) as f64 * p).floor() as u64;
    if k + 1 > mode { lower_tail(n - k - 1, n, 1.0 - p) } else { 1.0 - lower_tail(k, n, p) }
}

/// P(X ≤ k) for k below the mode: terms fall from k downwards; summed until negligible.
fn lower_tail(k: u64, n: u64, p: f64) -> f64 {
    let ratio = (1.0 - p) / p;
    let mut term = ln_binom_pmf(k, n, p).exp();
    let mut sum = term;
    let mut j = k;
    while j > 0 && term > sum * 1e-17 {
        term *= j as f64 / (n - j + 1) as f64 * ratio;
        sum += term;
        j -= 1;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_tails_match_direct_sums() {
        for &(n, p) in &[(10u64, 0.5), (37, 0.2), (200, 0.9), (1000, 0.018)] {
            let pmf: Vec<f64> = (0..=n).map(|k| ln_binom_pmf(k, n, p).exp()).collect();
            // Each ln pmf is a difference of ln Γ values up to ln n!, each rounded to its
            // ulp: the pmfs are exact to a few ε·ln n! (measured: sum − 1 = −8.9e-16 at n = 10,
            // 5.7e-13 at n = 1000, where ε·ln n! = 1.3e-12).
            let tol = 16.0 * f64::EPSILON * ln_gamma(n as f64 + 1.0);
            let sum: f64 = pmf.iter().sum();
            assert!((sum - 1.0).abs() < tol, "n {n}: sum of the pmf − 1 = {:e}", sum - 1.0);
            for k in 0..=n {
                let below: f64 = pmf[..=k as usize].iter().sum();
                let above: f64 = pmf[k as usize + 1..].iter().sum();
                assert!((binom_cdf(k, n, p) - below).abs() < tol, "cdf({k};{n},{p})");
                let rel = (binom_tail_above(k, n, p) - above).abs() / above.max(1e-300);
                assert!(rel < 1e-9 || above < 1e-290, "tail({k};{n},{p}): {rel}");
            }
        }
        // ln Γ against exact factorials.
        let mut f = 0.0f64;
        for k in 1..60u32 {
            f += (k as f64).ln();
            assert!((ln_gamma(k as f64 + 1.0) - f).abs() < 1e-12 * f.max(1.0), "ln {k}!");
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let e = numerical_epsilon(1, 1.0, 1e-6, Options::default()).unwrap_err().to_string();
        assert!(e.contains("n is 1"), "{e}");
        let e = numerical_epsilon(100, -1.0, 1e-6, Options::default()).unwrap_err().to_string();
        assert!(e.contains("epsilon0 is -1"), "{e}");
        let e = numerical_epsilon(100, 1.0, 2.0, Options::default()).unwrap_err().to_string();
        assert!(e.contains("delta is 2"), "{e}");
    }
}
