//! Duchi et al.'s one-dimensional mechanism (MECHANISMS.md §B2): one bit per user.
//!
//! Derivation. The report is +C with probability P₊(t) = 1/2 + t/(2C), else −C, with
//! C = (e^ε + 1)/(e^ε − 1). Then E\[Y] = C(2P₊ − 1) = t and E\[Y²] = C², so Var = C² − t².
//! P₊ is increasing in t, so the worst ratio is P₊(1)/P₊(−1) = (C + 1)/(C − 1) = e^ε (and the
//! same for the −C output by symmetry).

use super::{NumericMechanism, NumericReport};
use crate::error::{Error, Result};
use crate::params::Epsilon;
use crate::sampling::bernoulli_fast;
use rand::Rng;

/// Duchi et al.'s 1-D mechanism: reports ±C with C = (e^ε + 1)/(e^ε − 1).
///
/// # Privacy
/// P[+C | t] = 1/2 + t/(2C) ranges over [1/(e^ε + 1), e^ε/(e^ε + 1)] for t ∈ [-1, 1], so the
/// probability of either output changes by a factor of at most e^ε between two inputs, with
/// equality at t = ±1: exactly ε-LDP. (Numerically: the coin is drawn against P₊·2⁶³, exact for
/// P₊ ≥ 2⁻¹¹; for ε ≳ 30, 1 − 1/(e^ε + 1) is no longer representable in f64 and the ratio is only
/// approximately e^ε — such budgets give no meaningful privacy anyway.)
///
/// # Utility
/// Var = C² − t²; worst case C² at t = 0. `variance_coefficients()` is (−1, C²).
/// One bit per report.
///
/// # Example
/// ```
/// use harmony_core::numeric::{Duchi, NumericMechanism};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mech = Duchi::new(1.0)?;
/// let mut rng = fast_rng(42);
/// let ts: Vec<f64> = (0..5000).map(|i| ((i * 7) % 200) as f64 / 100.0 - 1.0).collect();
/// let mut reports = Vec::new();
/// mech.randomize_batch(&ts, &mut rng, &mut reports)?;
/// let mut agg = mech.aggregator();
/// agg.add_batch(&reports)?;
/// let truth = ts.iter().sum::<f64>() / ts.len() as f64;
/// let est = agg.estimate();
/// println!("duchi: {:.3} ± {:.3} (truth {truth:.3})", est.value, est.std_error);
/// assert!((est.value - truth).abs() < 5.0 * est.std_error);
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Duchi {
    eps: Epsilon,
    c: f64,
    half_inv_c: f64,
}

impl Duchi {
    /// Duchi's mechanism with budget ε (finite, > 0, ≤ 700).
    pub fn new(epsilon: f64) -> Result<Self> {
        Ok(Self::from_epsilon(Epsilon::new(epsilon)?))
    }

    /// From an already validated ε.
    pub fn from_epsilon(eps: Epsilon) -> Self {
        let c = eps.c();
        Duchi { eps, c, half_inv_c: 0.5 / c }
    }

    /// The output magnitude C = (e^ε + 1)/(e^ε − 1).
    pub fn scale(&self) -> f64 {
        self.c
    }

    /// P[report = +C | t] = 1/2 + t/(2C).
    #[inline]
    pub fn prob_positive(&self, t: f64) -> f64 {
        0.5 + t * self.half_inv_c
    }
}

/// Decodes a `Sign` report of magnitude `scale` (Duchi, HM's Duchi branch).
#[inline]
pub(crate) fn decode_sign(report: &NumericReport, scale: f64, mechanism: &str) -> Result<f64> {
    match *report {
        NumericReport::Sign(positive) => Ok(if positive { scale } else { -scale }),
        NumericReport::Fixed(u) => {
            Err(Error::report("kind", format!("Fixed({u})"), format!("a Sign report for {mechanism}")))
        }
    }
}

impl NumericMechanism for Duchi {
    fn name(&self) -> &'static str {
        "duchi"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    #[inline(always)]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport {
        NumericReport::Sign(bernoulli_fast(rng, self.prob_positive(t)))
    }
    fn decode(&self, report: &NumericReport) -> Result<f64> {
        decode_sign(report, self.c, "duchi")
    }
    fn variance_coefficients(&self) -> (f64, f64) {
        (-1.0, self.c * self.c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_probability_ratio_is_exactly_e_eps() {
        for eps in [0.05, 0.5, 1.0, 2.0, 4.0, 10.0] {
            let m = Duchi::new(eps).unwrap();
            let grid: Vec<f64> = (0..=40).map(|i| -1.0 + i as f64 * 0.05).collect();
            let mut worst = 0.0f64;
            for &t in &grid {
                for &u in &grid {
                    let (pt, pu) = (m.prob_positive(t), m.prob_positive(u));
                    worst = worst.max(pt / pu).max((1.0 - pt) / (1.0 - pu));
                }
            }
            let target = eps.exp();
            assert!((worst / target - 1.0).abs() < 1e-9, "eps {eps}: max ratio {worst}, e^eps {target}");
            // Unbiased: C·(2P₊ − 1) = t, and E[Y²] = C².
            for &t in &grid {
                let mean = m.scale() * (2.0 * m.prob_positive(t) - 1.0);
                assert!((mean - t).abs() < 1e-12, "eps {eps}, t {t}: mean {mean}");
            }
        }
    }

    #[test]
    fn constants_and_decoding() {
        let m = Duchi::new(1.0).unwrap();
        assert!((m.scale() - 2.163953413738653).abs() < 1e-12);
        assert_eq!(m.decode(&NumericReport::Sign(false)).unwrap(), -m.scale());
        let e = m.decode(&NumericReport::Fixed(3)).unwrap_err();
        assert!(matches!(e, Error::InvalidReport { .. }) && e.to_string().contains("Sign report for duchi"), "{e}");
        assert_eq!(m.variance(0.5), m.scale().powi(2) - 0.25);
        assert_eq!(m.worst_case_variance(), m.scale().powi(2));
        assert!(matches!(Duchi::new(f64::NAN), Err(Error::InvalidParameter { name: "epsilon", .. })));
    }
}
