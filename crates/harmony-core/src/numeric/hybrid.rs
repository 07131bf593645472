//! Wang et al.'s Hybrid Mechanism (HM, ICDE'19; docs/MECHANISMS.md §B4).
//!
//! Derivation. With probability α run PM, else Duchi, both at the full ε. Both branches are
//! unbiased, so Var(HM) = α·Var_PM(t) + (1 − α)·Var_Duchi(t). With x = e^{ε/2} and
//! α = 1 − 1/x the t² terms cancel: α/(x − 1) − (1 − α) = 1/x − 1/x = 0, leaving the constant
//! (x + 3)/(3x(x − 1)) + C_D²/x, C_D = (e^ε + 1)/(e^ε − 1). That choice of α is optimal for
//! ε > ε* = 0.609352 (where PM's constant term equals Duchi's worst case C_D², i.e. x solves
//! 3x³ − x² + x − 7 = 0); for ε ≤ ε*, α = 0 and HM is Duchi.

use super::duchi::decode_sign;
use super::piecewise::{pm_fix, pm_lane};
use super::{
    Duchi, GRID_VARIANCE, Lane, NumericMechanism, NumericReport, Piecewise, decode_fixed_bounded, numeric_batch,
};
use crate::error::{Error, Result};
use crate::params::Epsilon;
use crate::sampling::{bernoulli_fast, bernoulli63_from_word};
use rand::Rng;

/// ε* = ln((−5 + 2∛(6353 − 405√241) + 2∛(6353 + 405√241))/27) ≈ 0.609352: HM mixes in PM only
/// above it.
pub const EPSILON_STAR: f64 = 0.609_352_493_027_309_5;

/// The Hybrid Mechanism: PM with probability α = 1 − e^{−ε/2} (for ε > ε*), else Duchi.
///
/// # Privacy
/// Each branch is exactly ε-LDP (see [`Piecewise`] and [`Duchi`]); the branch is chosen
/// independently of t and is visible in the report (`Fixed` for PM, `Sign` for Duchi), so the
/// probability of any output is α·(PM density) or (1 − α)·(Duchi probability), and its ratio
/// between two inputs is that branch's, at most e^ε, with equality at t = ±1: exactly ε-LDP.
///
/// # Utility
/// For ε > ε*: Var = (e^{ε/2} + 3)/(3e^{ε/2}(e^{ε/2} − 1)) + (e^ε + 1)²/(e^{ε/2}(e^ε − 1)²),
/// constant in t (4.288992 at ε = 1, 0.218979 at ε = 4). For ε ≤ ε*: Var = C² − t² (Duchi),
/// worst case C² (16.6708 at ε = 0.5).
///
/// # Example
/// ```
/// use harmony_core::numeric::{Hybrid, NumericMechanism};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mech = Hybrid::new(1.0)?;
/// let mut rng = fast_rng(42);
/// let ts: Vec<f64> = (0..5000).map(|i| ((i * 17) % 201) as f64 / 100.0 - 1.0).collect();
/// let mut reports = Vec::new();
/// mech.randomize_batch(&ts, &mut rng, &mut reports)?;
/// let mut agg = mech.aggregator();
/// agg.add_batch(&reports)?;
/// let truth = ts.iter().sum::<f64>() / ts.len() as f64;
/// let est = agg.estimate();
/// println!("hm: {:.3} ± {:.3} (truth {truth:.3})", est.value, est.std_error);
/// assert!((est.value - truth).abs() < 5.0 * est.std_error);
/// assert!((mech.worst_case_variance() - 4.288992).abs() < 1e-6);
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hybrid {
    eps: Epsilon,
    alpha: f64,
    duchi: Duchi,
    /// The PM branch, present iff ε > ε* (α > 0).
    pm: Option<Piecewise>,
}

impl Hybrid {
    /// HM with budget ε (in the global range of [`Epsilon`]).
    pub fn new(epsilon: f64) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let (alpha, pm) = if epsilon > EPSILON_STAR {
            (-(-0.5 * epsilon).exp_m1(), Some(Piecewise::from_epsilon(eps)))
        } else {
            (0.0, None)
        };
        Ok(Hybrid { eps, alpha, duchi: Duchi::from_epsilon(eps), pm })
    }

    /// The probability α of the PM branch: 1 − e^{−ε/2} if ε > ε*, else 0.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    /// The Duchi branch.
    pub fn duchi(&self) -> &Duchi {
        &self.duchi
    }
    /// The PM branch (None when ε ≤ ε*).
    pub fn piecewise(&self) -> Option<&Piecewise> {
        self.pm.as_ref()
    }
}

impl Hybrid {
    /// One value of the batch: `w0` picks the branch (Bernoulli(α), the decision of
    /// `bernoulli_fast`), `w1` and `w2` are the branch's words. Without a PM branch (ε ≤ ε*,
    /// α = 0) the coin always picks Duchi.
    #[inline(always)]
    fn lane(&self, pm: &Piecewise, t: f64, [w0, w1, w2]: [u64; 3], finish: bool) -> Lane {
        let use_pm = bernoulli63_from_word(w0, self.alpha);
        let positive = bernoulli63_from_word(w1, self.duchi.prob_positive(t));
        let pm_lane = if finish { pm_fix(pm, t, [w1, w2]) } else { pm_lane(pm, t, [w1, w2]) };
        Lane {
            units: if use_pm { pm_lane.units } else { positive as i64 },
            sign: !use_pm,
            done: !use_pm | pm_lane.done,
        }
    }
}

numeric_batch!(
    Hybrid,
    3,
    |m: &Hybrid| {
        let (m, pm) = (*m, m.pm.unwrap_or_else(|| Piecewise::from_epsilon(m.eps)));
        move |t, w| m.lane(&pm, t, w, false)
    },
    |m: &Hybrid| {
        let (m, pm) = (*m, m.pm.unwrap_or_else(|| Piecewise::from_epsilon(m.eps)));
        move |t, w, _: &mut R| m.lane(&pm, t, w, true)
    }
);

impl NumericMechanism for Hybrid {
    fn name(&self) -> &'static str {
        "hm"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    #[inline(always)]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport {
        match &self.pm {
            Some(pm) if bernoulli_fast(rng, self.alpha) => pm.randomize_unchecked(t, rng),
            _ => self.duchi.randomize_unchecked(t, rng),
        }
    }
    /// Vectorised batch (an AVX2 build chosen at run time): three random words per value (the
    /// branch coin, then PM's uniform or Duchi's coin, then PM's rounding), both branches
    /// computed and one selected without a branch. Same distribution as `randomize_unchecked`
    /// (not the same stream: that one draws two or three words depending on the branch).
    fn randomize_batch<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<NumericReport>) -> Result<()> {
        self.batch(ts, rng, out)
    }
    fn decode(&self, report: &NumericReport) -> Result<f64> {
        match (report, &self.pm) {
            (NumericReport::Sign(_), _) => decode_sign(report, self.duchi.scale(), "hm"),
            (NumericReport::Fixed(_), Some(pm)) => decode_fixed_bounded(report, pm.scale(), "hm"),
            (NumericReport::Fixed(u), None) => Err(Error::report(
                "kind",
                format!("Fixed({u})"),
                format!(
                    "a Sign report for hm at epsilon {} <= eps* = {EPSILON_STAR} (HM is Duchi there)",
                    self.eps.value()
                ),
            )),
        }
    }
    fn variance_coefficients(&self) -> (f64, f64) {
        match &self.pm {
            // The t² terms cancel exactly (module doc), so a = 0.
            Some(pm) => {
                let (_, b_pm) = pm.raw_variance_coefficients();
                let c = self.duchi.scale();
                (0.0, self.alpha * (b_pm + GRID_VARIANCE) + (1.0 - self.alpha) * c * c)
            }
            None => self.duchi.variance_coefficients(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epsilon_star_closed_form() {
        let s241 = 241f64.sqrt();
        let y = (-5.0 + 2.0 * (6353.0 - 405.0 * s241).cbrt() + 2.0 * (6353.0 + 405.0 * s241).cbrt()) / 27.0;
        assert!((y.ln() - EPSILON_STAR).abs() < 1e-13, "closed form {} vs {EPSILON_STAR}", y.ln());
        let x = (EPSILON_STAR / 2.0).exp();
        assert!((3.0 * x.powi(3) - x * x + x - 7.0).abs() < 1e-12);
        // PM's constant term equals Duchi's worst case at eps*.
        let pm = Piecewise::new(EPSILON_STAR).unwrap();
        let d = Duchi::new(EPSILON_STAR).unwrap();
        let (_, b) = pm.raw_variance_coefficients();
        assert!((b / d.worst_case_variance() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn reference_values() {
        let h1 = Hybrid::new(1.0).unwrap();
        assert!((h1.alpha() - 0.393469).abs() < 1e-6, "alpha {}", h1.alpha());
        for (eps, want) in [(0.5, 16.6708), (1.0, 4.288992), (2.0, 1.042336), (4.0, 0.218979)] {
            let h = Hybrid::new(eps).unwrap();
            let got = h.worst_case_variance();
            assert!((got - want).abs() < 1e-6 * want.max(1.0) * 10.0, "eps {eps}: {got} vs {want}");
        }
        // The t² coefficient really is 0 above eps*: recompute it from the branches.
        for eps in [0.7, 1.0, 3.0, 10.0] {
            let h = Hybrid::new(eps).unwrap();
            let (a_pm, _) = h.piecewise().unwrap().raw_variance_coefficients();
            let a = h.alpha() * a_pm - (1.0 - h.alpha());
            assert!(a.abs() < 1e-12, "eps {eps}: a = {a}");
        }
        let low = Hybrid::new(0.5).unwrap();
        assert_eq!(low.alpha(), 0.0);
        assert_eq!(low.variance_coefficients(), low.duchi().variance_coefficients());
    }

    #[test]
    fn branch_probabilities_are_exactly_e_eps() {
        for eps in [0.3, 1.0, 2.0, 4.0] {
            let h = Hybrid::new(eps).unwrap();
            let target = eps.exp();
            // Duchi branch: (1 − α)·P±(t) ratios over t, t' in a grid.
            let grid: Vec<f64> = (0..=20).map(|i| -1.0 + i as f64 * 0.1).collect();
            let mut worst = 0.0f64;
            for &t in &grid {
                for &u in &grid {
                    let (pt, pu) = (h.duchi().prob_positive(t), h.duchi().prob_positive(u));
                    let w = 1.0 - h.alpha();
                    worst = worst.max((w * pt) / (w * pu)).max((w * (1.0 - pt)) / (w * (1.0 - pu)));
                }
            }
            assert!((worst / target - 1.0).abs() < 1e-9, "eps {eps}: duchi branch ratio {worst}");
            if let Some(pm) = h.piecewise() {
                let r = (h.alpha() * pm.center_density()) / (h.alpha() * pm.tail_density());
                assert!((r / target - 1.0).abs() < 1e-9, "eps {eps}: pm branch ratio {r}");
            }
        }
    }

    #[test]
    fn decode_by_branch() {
        let h = Hybrid::new(1.0).unwrap();
        assert_eq!(h.decode(&NumericReport::Sign(true)).unwrap(), h.duchi().scale());
        assert!(h.decode(&NumericReport::Fixed(1 << 20)).is_ok());
        let low = Hybrid::new(0.5).unwrap();
        let e = low.decode(&NumericReport::Fixed(0)).unwrap_err();
        assert!(e.to_string().contains("Sign report for hm"), "{e}");
    }
}
