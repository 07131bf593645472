//! Staircase-shaped noise: Geng & Viswanath's staircase mechanism with the variance-optimal γ
//! ([`Staircase`]) and SCDF as Wang et al. (ICDE 2019, eq. 2) give it ([`Scdf`]), one family
//! ([`StaircaseNoise`]) parameterised by γ ∈ [0, 1].
//!
//! Density. With sensitivity Δ = 2 (inputs in [-1, 1]) and b = e^{−ε}, the noise density is
//! a·bᵏ on [kΔ, (k + γ)Δ) and a·bᵏ⁺¹ on [(k + γ)Δ, (k + 1)Δ) for k = 0, 1, …, mirrored for
//! negative x, with a = (1 − b)/(2Δ(γ + (1 − γ)b)) so that it integrates to 1. It is
//! non-increasing in |x| and f(x + Δ) = b·f(x) for x ≥ 0, so f(x)/f(x + s) ≤ 1/b = e^ε for every
//! |s| ≤ Δ: exactly ε-DP for the shift t − t' ∈ [−2, 2].
//!
//! Sampler: a sign S, G with P(G = i) = (1 − b)bⁱ (⌊E/ε⌋, S and E = Exp(1) from
//! [`crate::sampling::laplace1_full`]: U's exponent and significand drawn apart, so E has the full
//! relative precision of an `f64` at every depth and every integer G is in reach — an earlier
//! draw had about 20 significant bits near U ≈ 2⁻³³, which left values of G unreachable for
//! ε < 2⁻²⁰), B with P(B = 0) = γ/(γ + (1 − γ)b) and U uniform; noise = S·Δ·(G + γU) if B = 0,
//! else S·Δ·(G + γ + (1 − γ)U). t + noise is clamped to ±[`noise_bound`]`(ε)` before rounding
//! (post-processing, probability ≤ e⁻⁴²) and decoders refuse reports beyond it.
//!
//! Variance (derived here by summing the series). With β = 1 − b, ∫ over step k of x² gives
//! Δ³((k + γ)³ − k³)/3 and Δ³((k + 1)³ − (k + γ)³)/3; summing against bᵏ with Σbᵏ = 1/β,
//! Σk·bᵏ = b/β², Σk²·bᵏ = b(1 + b)/β³ and simplifying:
//!
//! ```text
//! Var(γ) = Δ² · ( 2b/β² + h(γ) ),   h(γ) = (β·γ³ + 3b·γ² − 3b·γ + b) / (3(b + β·γ)).
//! ```
//!
//! (γ = 1 gives Δ²(2b/β² + 1/3), the variance of Δ·(G + U).) Only h depends on γ; [`Staircase`]
//! minimises it by golden-section search on [0, 1]; the tests check the result against Geng &
//! Viswanath's closed form γ* = −b/(1 − b) + (b − 2b² + 2b⁴ − b⁵)^{1/3}/(2^{1/3}(1 − b)²).

use super::{GRID_VARIANCE, NumericMechanism, NumericReport, check_fixed_epsilon, decode_fixed_bounded, noise_bound};
use crate::error::{Error, Result};
use crate::params::Epsilon;
use crate::sampling::{bernoulli_fast, laplace1_full, uniform01, with_sign};
use rand::Rng;
use std::hint::select_unpredictable;

/// The sensitivity of a value in [-1, 1].
const DELTA: f64 = 2.0;

/// Staircase-shaped additive noise for t ∈ [-1, 1] with a given γ: the shared core of
/// [`Staircase`] and [`Scdf`] (use those as mechanisms; this type exposes the density, the
/// sampler and the variance).
///
/// # Privacy
/// For every γ ∈ [0, 1], adding this noise to t ∈ [-1, 1] is exactly ε-LDP: the density is
/// non-increasing in |x| and drops by exactly e^{−ε} every Δ = 2 (module doc).
///
/// # Utility
/// Var = Δ²(2b/(1 − b)² + h(γ)), b = e^{−ε}, h from the [module doc](self).
///
/// # Example
/// ```
/// use harmony_core::numeric::StaircaseNoise;
/// use harmony_core::sampling::fast_rng;
///
/// let noise = StaircaseNoise::new(1.0, 0.5)?;
/// let mut rng = fast_rng(42);
/// let n = 20_000;
/// let mean_sq = (0..n).map(|_| noise.sample(&mut rng).powi(2)).sum::<f64>() / n as f64;
/// println!("E[X²] ≈ {mean_sq:.3}, closed form {:.3}", noise.noise_variance());
/// assert!((mean_sq / noise.noise_variance() - 1.0).abs() < 0.1);
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StaircaseNoise {
    eps: Epsilon,
    gamma: f64,
    /// b = e^{−ε}.
    b: f64,
    /// The density at 0, a = (1 − b)/(2Δ(γ + (1 − γ)b)).
    a: f64,
    /// P(B = 0) = γ/(γ + (1 − γ)b).
    p_first: f64,
    /// The noise variance (without rounding).
    noise_variance: f64,
    /// 1/ε.
    inv_eps: f64,
    /// The output bound B = [`noise_bound`]`(ε)`.
    bound: f64,
}

impl StaircaseNoise {
    /// Staircase noise with budget ε in the global range ([`Epsilon`]) and step split γ ∈ [0, 1].
    pub fn new(epsilon: f64, gamma: f64) -> Result<Self> {
        let eps = check_fixed_epsilon(epsilon, "staircase noise")?;
        if !(0.0..=1.0).contains(&gamma) {
            return Err(Error::param("gamma", gamma, "a number in [0, 1]"));
        }
        Ok(Self::build(eps, gamma))
    }

    fn build(eps: Epsilon, gamma: f64) -> Self {
        let e = eps.value();
        let b = (-e).exp();
        let beta = -(-e).exp_m1();
        let w = b + beta * gamma; // γ + (1 − γ)b
        StaircaseNoise {
            eps,
            gamma,
            b,
            a: beta / (2.0 * DELTA * w),
            p_first: gamma / w,
            noise_variance: DELTA * DELTA * (2.0 * b / (beta * beta) + gamma_term(b, beta, gamma)),
            inv_eps: 1.0 / e,
            bound: noise_bound(e),
        }
    }

    /// The γ minimising the variance at this ε (golden-section search on [0, 1]).
    pub fn optimal_gamma(epsilon: f64) -> Result<f64> {
        let eps = check_fixed_epsilon(epsilon, "staircase noise")?;
        let b = (-eps.value()).exp();
        let beta = -(-eps.value()).exp_m1();
        Ok(golden_section_min(|g| gamma_term(b, beta, g), 0.0, 1.0))
    }

    /// The step split γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }
    /// The ratio b = e^{−ε} between consecutive steps.
    pub fn ratio(&self) -> f64 {
        self.b
    }
    /// The density at 0, a(γ).
    pub fn peak_density(&self) -> f64 {
        self.a
    }
    /// The output bound B = 3 + 84/ε ([`noise_bound`]): t + noise is clamped to [−B, B]
    /// (probability ≤ e⁻⁴²) and reports beyond it are refused.
    pub fn bound(&self) -> f64 {
        self.bound
    }
    /// The noise variance Δ²(2b/(1 − b)² + h(γ)) (module doc), without rounding.
    pub fn noise_variance(&self) -> f64 {
        self.noise_variance
    }
    /// The noise density at x: a·bᵏ or a·bᵏ⁺¹ (module doc).
    pub fn density(&self, x: f64) -> f64 {
        let s = x.abs() / DELTA;
        let k = s.floor();
        let level = if s - k < self.gamma { k } else { k + 1.0 };
        self.a * (-self.eps.value() * level).exp()
    }

    /// One noise draw: the sign and E ~ Exp(1) from one full-precision Laplace draw
    /// ([`laplace1_full`]: bit 63 of its word is the sign, the other bits U's exponent and
    /// significand), then G = ⌊E/ε⌋, B and U (module doc).
    #[inline(always)]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let w = rng.next_u64();
        let x = laplace1_full(rng, w);
        let (negative, e) = (x.is_sign_negative(), x.abs());
        // ⌊E/ε⌋ by truncation (E/ε ≥ 0; a saturating cast, then the clamp to ±B): no libm floor.
        let g = (e * self.inv_eps) as i64 as f64;
        let first = bernoulli_fast(rng, self.p_first);
        let u = uniform01(rng);
        let (offset, width) = select_unpredictable(first, (0.0, self.gamma), (self.gamma, 1.0 - self.gamma));
        with_sign(DELTA * (g + offset + width * u), negative)
    }

    #[inline(always)]
    fn randomize<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport {
        let y = (t + self.sample(rng)).clamp(-self.bound, self.bound);
        NumericReport::fixed(rng, y)
    }
}

/// h(γ) of the module doc: the γ-dependent part of Var/Δ².
fn gamma_term(b: f64, beta: f64, g: f64) -> f64 {
    (beta * g * g * g + 3.0 * b * g * g - 3.0 * b * g + b) / (3.0 * (b + beta * g))
}

/// Minimiser of a unimodal f on [lo, hi] by golden-section search (to the f64 resolution).
fn golden_section_min(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    let r = (5f64.sqrt() - 1.0) / 2.0;
    let (mut x1, mut x2) = (hi - r * (hi - lo), lo + r * (hi - lo));
    let (mut f1, mut f2) = (f(x1), f(x2));
    for _ in 0..200 {
        if hi - lo <= 1e-15 {
            break;
        }
        if f1 < f2 {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - r * (hi - lo);
            f1 = f(x1);
        } else {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + r * (hi - lo);
            f2 = f(x2);
        }
    }
    0.5 * (lo + hi)
}

/// Implements [`NumericMechanism`] for a newtype over [`StaircaseNoise`].
macro_rules! staircase_mechanism {
    ($ty:ident, $name:literal) => {
        impl $ty {
            /// The noise distribution (γ, b, density, variance).
            pub fn noise(&self) -> &StaircaseNoise {
                &self.0
            }
        }

        impl NumericMechanism for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn epsilon(&self) -> Epsilon {
                self.0.eps
            }
            #[inline(always)]
            fn randomize_unchecked<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport {
                self.0.randomize(t, rng)
            }
            fn decode(&self, report: &NumericReport) -> Result<f64> {
                decode_fixed_bounded(report, self.0.bound, $name)
            }
            fn variance_coefficients(&self) -> (f64, f64) {
                (0.0, self.0.noise_variance + GRID_VARIANCE)
            }
        }
    };
}

/// Geng & Viswanath's staircase mechanism: t plus staircase noise with the variance-optimal γ.
///
/// # Privacy
/// The noise density is non-increasing in |x| and drops by exactly b = e^{−ε} every Δ = 2, so for
/// inputs t, t' ∈ [-1, 1] (|t − t'| ≤ Δ) the output densities differ by a factor ≤ e^ε, with
/// equality e.g. at a step edge: exactly ε-LDP. Rounding and clamping to ±[`noise_bound`]`(ε)`
/// are post-processing.
///
/// # Deviation from Geng & Viswanath
/// Their staircase mechanism uses γ = 1/(1 + e^{ε/2}), the γ that minimises the expected
/// *absolute* noise (ℓ1 cost); this type uses the γ* that minimises the *variance* (Geng &
/// Viswanath's ℓ2-optimal γ, the closed form in the module doc), because every estimate here is
/// a mean whose standard error is set by the variance. At ε = 1 γ* = 0.417 against 0.378, at
/// ε = 4 0.196 against 0.119: the ℓ1 γ's variance is 0.08% higher at ε = 1, 12% at ε = 4,
/// 1.9× at ε = 8 and 15× at ε = 20.
///
/// # Utility
/// Var = 4(2b/(1 − b)² + h(γ*)) with h from the [module doc](self), constant in t; it is below
/// Laplace's 8/ε² for every ε, markedly so for large ε (Θ(e^{−2ε/3}) vs 8/ε²).
///
/// # Example
/// ```
/// use harmony_core::numeric::{NumericMechanism, Staircase};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mech = Staircase::new(4.0)?;
/// let mut rng = fast_rng(42);
/// let ts: Vec<f64> = (0..5000).map(|i| ((i * 3) % 201) as f64 / 100.0 - 1.0).collect();
/// let mut agg = mech.aggregator();
/// for &t in &ts {
///     agg.add(&mech.randomize(t, &mut rng)?)?;
/// }
/// let truth = ts.iter().sum::<f64>() / ts.len() as f64;
/// let est = agg.estimate();
/// println!("staircase (gamma {:.4}): {:.3} ± {:.3} (truth {truth:.3})", mech.noise().gamma(), est.value, est.std_error);
/// assert!((est.value - truth).abs() < 5.0 * est.std_error);
/// assert!(mech.worst_case_variance() < 8.0 / 16.0);
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Staircase(StaircaseNoise);

impl Staircase {
    /// The staircase mechanism with budget ε in the global range ([`Epsilon`]) and the γ that
    /// minimises the variance.
    pub fn new(epsilon: f64) -> Result<Self> {
        let gamma = StaircaseNoise::optimal_gamma(epsilon)?;
        Ok(Staircase(StaircaseNoise::new(epsilon, gamma)?))
    }
}

staircase_mechanism!(Staircase, "staircase");

/// SCDF, the staircase-shaped noise of Wang et al. (ICDE 2019, eq. 2): density a = ε/4 on the
/// central step and m = 2(1 − e^{−ε} − εe^{−ε})/(ε(1 − e^{−ε})) for its width, i.e. the staircase
/// family with γ = 1/ε − 1/(e^ε − 1) (then γ + (1 − γ)b = (1 − b)/ε, so a = ε/4).
///
/// The paper prints the denominator of m as "ε − e^{−ε}", a typo: only the form above
/// normalises with a = ε/4. An earlier version of this type used γ = 1/2 (the central step of
/// width Δ centred at 0); its variance is above SCDF's for every accepted ε (0.49 against 0.26
/// at ε = 4, 0.34 against 0.026 at ε = 8, where it is worse than Laplace's 0.125), so it was
/// dropped.
///
/// # Privacy
/// As for [`Staircase`]: the density drops by exactly e^{−ε} every Δ = 2 and is non-increasing
/// in |x|, so the output density ratio of two inputs in [-1, 1] is at most e^ε, attained:
/// exactly ε-LDP.
///
/// # Utility
/// Var = 4(2b/(1 − b)² + h(γ)) with b = e^{−ε} and h from the [module doc](self), constant in
/// t: at or above [`Staircase`]'s (whose γ minimises it), below Laplace's 8/ε² for every ε
/// (7.67 against 8 at ε = 1, 0.026 against 0.125 at ε = 8).
///
/// # Example
/// ```
/// use harmony_core::numeric::{NumericMechanism, Scdf};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mech = Scdf::new(2.0)?;
/// let mut rng = fast_rng(42);
/// let ts: Vec<f64> = (0..5000).map(|i| ((i * 11) % 201) as f64 / 100.0 - 1.0).collect();
/// let mut reports = Vec::new();
/// mech.randomize_batch(&ts, &mut rng, &mut reports)?;
/// let mut agg = mech.aggregator();
/// agg.add_batch(&reports)?;
/// let truth = ts.iter().sum::<f64>() / ts.len() as f64;
/// let est = agg.estimate();
/// println!("scdf: {:.3} ± {:.3} (truth {truth:.3})", est.value, est.std_error);
/// assert!((est.value - truth).abs() < 5.0 * est.std_error);
/// assert!(Scdf::new(8.0)?.worst_case_variance() < 8.0 / 64.0);
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scdf(StaircaseNoise);

impl Scdf {
    /// SCDF noise with budget ε in the global range ([`Epsilon`]): γ = 1/ε − 1/(e^ε − 1).
    pub fn new(epsilon: f64) -> Result<Self> {
        let eps = check_fixed_epsilon(epsilon, "scdf")?;
        Ok(Scdf(StaircaseNoise::build(eps, scdf_gamma(epsilon))))
    }
}

/// SCDF's γ = 1/ε − 1/(e^ε − 1) (∈ (0, 1/2); → 1/2 − ε/12 as ε → 0).
pub fn scdf_gamma(epsilon: f64) -> f64 {
    1.0 / epsilon - 1.0 / epsilon.exp_m1()
}

staircase_mechanism!(Scdf, "scdf");

#[cfg(test)]
mod tests {
    use super::*;

    fn closed_form_gamma(b: f64) -> f64 {
        -b / (1.0 - b) + (b - 2.0 * b * b + 2.0 * b.powi(4) - b.powi(5)).cbrt() / (2f64.cbrt() * (1.0 - b).powi(2))
    }

    #[test]
    fn golden_section_agrees_with_the_closed_form_gamma() {
        for eps in [0.01, 0.1, 0.5, 1.0, 2.0, 4.0, 10.0, 20.0] {
            let m = Staircase::new(eps).unwrap();
            let b: f64 = (-eps).exp();
            let cf = closed_form_gamma(b);
            let g = m.noise().gamma();
            assert!((g - cf).abs() < 1e-6, "eps {eps}: golden {g}, closed form {cf}");
            let at_cf = StaircaseNoise::new(eps, cf).unwrap().noise_variance();
            let v = m.noise().noise_variance();
            assert!(v <= at_cf * (1.0 + 1e-12), "eps {eps}: var {v} at golden, {at_cf} at closed form");
            assert!((v / at_cf - 1.0).abs() < 1e-12, "eps {eps}");
        }
    }

    #[test]
    fn variance_formula_matches_the_series() {
        for eps in [0.3, 1.0, 3.0] {
            for gamma in [0.0, 0.2, 0.5, 0.9, 1.0] {
                let n = StaircaseNoise::new(eps, gamma).unwrap();
                let (b, a) = (n.ratio(), n.peak_density());
                // Sum the pieces directly (both sides), up to b^k < 1e-30.
                let (mut mass, mut second) = (0.0, 0.0);
                let mut k = 0.0f64;
                loop {
                    let bk = b.powf(k);
                    if bk < 1e-30 {
                        break;
                    }
                    let (x0, x1, x2) = (k * DELTA, (k + gamma) * DELTA, (k + 1.0) * DELTA);
                    mass += 2.0 * a * (bk * (x1 - x0) + bk * b * (x2 - x1));
                    second += 2.0 * a * (bk * (x1.powi(3) - x0.powi(3)) + bk * b * (x2.powi(3) - x1.powi(3))) / 3.0;
                    k += 1.0;
                }
                assert!((mass - 1.0).abs() < 1e-12, "eps {eps}, gamma {gamma}: mass {mass}");
                let v = n.noise_variance();
                assert!((second / v - 1.0).abs() < 1e-10, "eps {eps}, gamma {gamma}: series {second}, formula {v}");
            }
        }
    }

    #[test]
    fn density_ratio_over_shifts_is_exactly_e_eps() {
        for eps in [0.2, 1.0, 2.0, 5.0] {
            for noise in [Staircase::new(eps).unwrap().0, Scdf::new(eps).unwrap().0] {
                let g = noise.gamma();
                // Grid of x: points just either side of every step edge (the density at an edge
                // itself is a measure-zero choice that float rounding can flip) and a regular grid
                // offset so it never hits an edge.
                let mut xs = Vec::new();
                for k in -5..5 {
                    for off in [0.0, g, 1.0] {
                        let edge = (k as f64 + off) * DELTA;
                        xs.extend([edge - 1e-9, edge + 1e-9]);
                    }
                }
                xs.extend((0..=400).map(|i| -10.0123 + i as f64 * 0.05));
                let shifts: Vec<f64> = (0..=40).map(|i| -DELTA + i as f64 * 0.1).collect();
                let mut worst = 0.0f64;
                for &x in &xs {
                    for &s in &shifts {
                        worst = worst.max(noise.density(x) / noise.density(x + s));
                    }
                }
                let target = eps.exp();
                assert!((worst / target - 1.0).abs() < 1e-9, "eps {eps}, gamma {g}: max ratio {worst}");
                // Step structure from the constants: f(x + Δ) = b·f(x) for x ≥ 0.
                for &x in xs.iter().filter(|&&x| x >= 0.0) {
                    let r = noise.density(x + DELTA) / noise.density(x);
                    assert!((r / noise.ratio() - 1.0).abs() < 1e-9, "x {x}: {r}");
                }
            }
        }
    }

    /// SCDF as published: a = ε/4, m = 2(1 − e^{−ε} − εe^{−ε})/(ε(1 − e^{−ε})) (the printed
    /// "ε − e^{−ε}" denominator does not normalise), better than Laplace for every ε and than
    /// the γ = 1/2 variant it replaced; the staircase (γ*) is better still. Fails on the γ = 1/2
    /// SCDF (0.336 at ε = 8).
    #[test]
    fn scdf_is_wang_eq2_and_beats_laplace() {
        assert!(Scdf::new(8.0).unwrap().worst_case_variance() < 8.0 / 64.0);
        for eps in [2e-3, 0.1, 0.5, 1.0, 4.0, 8.0, 20.0] {
            let s = Scdf::new(eps).unwrap();
            let st = Staircase::new(eps).unwrap();
            let b: f64 = (-eps).exp();
            assert!(
                (s.noise().peak_density() / (eps / 4.0) - 1.0).abs() < 1e-9,
                "eps {eps}: a = {}",
                s.noise().peak_density()
            );
            let m = 2.0 * (1.0 - b - eps * b) / (eps * (1.0 - b));
            // The central step's width is m·Δ/2 = 2γ: the step [0, γΔ) on each side.
            assert!((m - 2.0 * s.noise().gamma()).abs() < 1e-9, "eps {eps}: m = {m}, gamma {}", s.noise().gamma());
            assert_eq!((s.name(), st.name()), ("scdf", "staircase"));
            assert!(st.worst_case_variance() <= s.worst_case_variance() * (1.0 + 1e-12), "eps {eps}");
            assert!(s.worst_case_variance() < 8.0 / (eps * eps), "eps {eps}: {}", s.worst_case_variance());
            let half = StaircaseNoise::new(eps, 0.5).unwrap().noise_variance();
            assert!(s.noise().noise_variance() <= half * (1.0 + 1e-12), "eps {eps}: gamma 1/2 gives {half}");
        }
        // Reference values (scdf.py of the audit): 0.2645 at ε = 4, 0.02576 at ε = 8.
        assert!((Scdf::new(4.0).unwrap().noise().noise_variance() - 0.264_499_9).abs() < 1e-6);
        assert!((Scdf::new(8.0).unwrap().noise().noise_variance() - 0.025_759_16).abs() < 1e-7);
        assert!(matches!(StaircaseNoise::new(1.0, 1.5), Err(Error::InvalidParameter { name: "gamma", .. })));
        assert!(matches!(Scdf::new(-1.0), Err(Error::InvalidParameter { name: "epsilon", .. })));
    }

    /// Outputs are clamped to ±B = ±(3 + 84/ε) and reports beyond are refused.
    #[test]
    fn reports_are_bounded_by_the_noise_bound() {
        use crate::numeric::GRID_STEP;
        use crate::sampling::fast_rng;
        for eps in [2e-3, 1.0, 20.0] {
            for m in [Staircase::new(eps).unwrap().0, Scdf::new(eps).unwrap().0] {
                assert_eq!(m.bound(), 3.0 + 84.0 / eps);
                let units = (m.bound() / GRID_STEP).ceil() as i64 + 1;
                let mech = Staircase(m);
                assert!(mech.decode(&NumericReport::Fixed(units)).is_ok());
                assert!(mech.decode(&NumericReport::Fixed(-units - 1)).is_err());
                assert!(mech.decode(&NumericReport::Fixed(1 << 62)).is_err());
                let mut rng = fast_rng(3);
                for _ in 0..2000 {
                    assert!(mech.decode(&mech.randomize(1.0, &mut rng).unwrap()).is_ok());
                }
            }
        }
    }
}
