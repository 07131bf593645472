//! Calibration of the Gaussian mechanism: the smallest σ for (ε, δ)-DP with l2 sensitivity Δ.
//!
//! [`analytic_gaussian_sigma`] uses the exact condition of Balle & Wang (ICML 2018, Thm. 8):
//! N(0, σ²I) added to a function of l2 sensitivity Δ is (ε, δ)-DP **iff**
//!
//! δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ,
//!
//! valid for every ε > 0 (the classic σ = Δ√(2 ln(1.25/δ))/ε of [`classic_gaussian_sigma`] holds
//! only for ε ≤ 1, and is always larger). δ(σ) decreases in σ; σ is found by bisection in log σ
//! and the upper end returned, so the returned σ always satisfies the condition (up to the
//! 1.2·10⁻⁷ relative accuracy of Φ below).

use harmony_core::{Epsilon, Error, Result};

/// ln erfc(x) for x ≥ 0 (Numerical Recipes' Chebyshev fit, relative error of erfc < 1.2·10⁻⁷;
/// computed in logs so it does not underflow for large x).
fn ln_erfc_nonneg(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.5 * x);
    let poly = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    t.ln() + poly
}

/// ln Φ(x), Φ the standard normal CDF.
pub fn ln_normal_cdf(x: f64) -> f64 {
    // Φ(x) = erfc(−x/√2)/2.
    let z = -x / std::f64::consts::SQRT_2;
    if z >= 0.0 { ln_erfc_nonneg(z) - std::f64::consts::LN_2 } else { (1.0 - 0.5 * ln_erfc_nonneg(-z).exp()).ln() }
}

/// Φ(x), the standard normal CDF (relative error < 1.2·10⁻⁷ in the lower tail).
pub fn normal_cdf(x: f64) -> f64 {
    ln_normal_cdf(x).exp()
}

/// δ(σ) of Balle & Wang's exact condition for the Gaussian mechanism (module doc).
pub fn gaussian_delta(epsilon: f64, sigma: f64, sensitivity: f64) -> f64 {
    let (a, b) = (sensitivity / (2.0 * sigma), epsilon * sigma / sensitivity);
    let first = normal_cdf(a - b);
    let second = (epsilon + ln_normal_cdf(-a - b)).exp();
    (first - second).max(0.0)
}

fn check(epsilon: f64, delta: f64, sensitivity: f64) -> Result<()> {
    Epsilon::new(epsilon)?;
    if !(delta > 0.0 && delta < 1.0) {
        return Err(Error::param("delta", delta, "a number in (0, 1) (the δ of (ε, δ)-LDP)"));
    }
    if !(sensitivity.is_finite() && sensitivity > 0.0) {
        return Err(Error::param("sensitivity", sensitivity, "a finite number > 0"));
    }
    Ok(())
}

/// The smallest σ making N(0, σ²I) noise (ε, δ)-DP for l2 sensitivity Δ (Balle–Wang, exact).
/// Errors: ε not finite and > 0, δ outside (0, 1), Δ not finite and > 0.
pub fn analytic_gaussian_sigma(epsilon: f64, delta: f64, sensitivity: f64) -> Result<f64> {
    check(epsilon, delta, sensitivity)?;
    let mut hi = sensitivity;
    while gaussian_delta(epsilon, hi, sensitivity) > delta {
        hi *= 2.0;
    }
    let mut lo = hi;
    while lo > 1e-12 * sensitivity && gaussian_delta(epsilon, lo, sensitivity) <= delta {
        lo /= 2.0;
    }
    for _ in 0..100 {
        let mid = (lo * hi).sqrt();
        if gaussian_delta(epsilon, mid, sensitivity) <= delta {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi / lo < 1.0 + 1e-12 {
            break;
        }
    }
    Ok(hi)
}

/// The classic σ = Δ√(2 ln(1.25/δ))/ε (Dwork–Roth Thm. A.1; valid for ε ≤ 1 only). For
/// comparison: [`analytic_gaussian_sigma`] is always smaller and valid for every ε.
pub fn classic_gaussian_sigma(epsilon: f64, delta: f64, sensitivity: f64) -> Result<f64> {
    check(epsilon, delta, sensitivity)?;
    Ok(sensitivity * (2.0 * (1.25 / delta).ln()).sqrt() / epsilon)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_cdf_matches_known_values() {
        for (x, want) in [
            (0.0, 0.5),
            (1.0, 0.841_344_746_068_543),
            (-1.959_963_984_540_054, 0.025),
            (-5.0, 2.866_515_718_791_939e-7),
            (-20.0, 2.753_624_118_606_233_7e-89),
        ] {
            let got = normal_cdf(x);
            assert!((got / want - 1.0).abs() < 2e-7, "Φ({x}) = {got}, want {want}");
        }
    }

    #[test]
    fn analytic_sigma_meets_delta_and_beats_the_classic_one() {
        for &eps in &[0.25, 0.5, 1.0] {
            for &delta in &[1e-5, 1e-6, 1e-9] {
                let s = analytic_gaussian_sigma(eps, delta, 2.0).unwrap();
                let classic = classic_gaussian_sigma(eps, delta, 2.0).unwrap();
                assert!(s < classic, "eps {eps} delta {delta}: analytic {s} >= classic {classic}");
                // The classic σ is (ε, δ)-DP (Dwork–Roth), so its exact δ is below the target.
                assert!(gaussian_delta(eps, classic, 2.0) <= delta);
                let d = gaussian_delta(eps, s, 2.0);
                assert!(d <= delta && d > 0.999 * delta, "eps {eps}: δ(σ) = {d}, target {delta}");
                // Tight: a 0.1% smaller σ violates δ.
                assert!(gaussian_delta(eps, 0.999 * s, 2.0) > delta);
            }
        }
        // Scales linearly with the sensitivity and works for ε > 1.
        let a = analytic_gaussian_sigma(4.0, 1e-6, 1.0).unwrap();
        let b = analytic_gaussian_sigma(4.0, 1e-6, 3.0).unwrap();
        assert!((b / a - 3.0).abs() < 1e-9);
    }

    /// The privacy check from first principles: δ(σ) is the hockey-stick divergence
    /// ∫ max(0, p(x) − e^ε q(x)) dx between N(0, σ²) and N(Δ, σ²) (the worst pair of inputs,
    /// projected on a_v − a_v'), integrated numerically (Simpson, 200,000 panels), independent
    /// of the Φ approximation.
    #[test]
    fn delta_matches_the_hockey_stick_divergence() {
        for &(eps, delta, sens) in &[(0.5, 1e-6, 2.0), (1.0, 1e-6, std::f64::consts::SQRT_2), (4.0, 1e-9, 3.0)] {
            let sigma = analytic_gaussian_sigma(eps, delta, sens).unwrap();
            let pdf = |x: f64, mu: f64| {
                (-(x - mu) * (x - mu) / (2.0 * sigma * sigma)).exp() / (sigma * (2.0 * std::f64::consts::PI).sqrt())
            };
            let f = |x: f64| (pdf(x, 0.0) - eps.exp() * pdf(x, sens)).max(0.0);
            let (lo, hi, m) = (-40.0 * sigma, sens + 40.0 * sigma, 200_000);
            let h = (hi - lo) / m as f64;
            let mut sum = f(lo) + f(hi);
            for i in 1..m {
                sum += f(lo + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
            }
            let integral = sum * h / 3.0;
            assert!(
                (integral / delta - 1.0).abs() < 1e-3,
                "eps {eps}, Δ {sens}: ∫ = {integral:e} vs δ = {delta:e} at σ = {sigma}"
            );
        }
    }

    #[test]
    fn bad_delta_and_epsilon_are_rejected() {
        for bad in [0.0, 1.0, -0.1, 1.5, f64::NAN] {
            let e = analytic_gaussian_sigma(1.0, bad, 2.0).unwrap_err().to_string();
            assert!(e.contains("delta") && e.contains("(0, 1)"), "{e}");
        }
        assert!(analytic_gaussian_sigma(0.0, 1e-6, 2.0).unwrap_err().to_string().contains("epsilon"));
    }
}
