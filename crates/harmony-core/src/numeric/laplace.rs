//! The Laplace mechanism (MECHANISMS.md §B1): t + Lap(2/ε).
//!
//! Derivation. The density of the output y given t is (ε/4)·exp(−ε|y − t|/2). For two inputs
//! t, t' ∈ [-1, 1] the ratio is exp(ε(|y − t'| − |y − t|)/2) ≤ exp(ε|t − t'|/2) ≤ e^ε (triangle
//! inequality, |t − t'| ≤ 2), with equality for t = 1, t' = −1 and y ≥ 1. Lap(λ) has variance
//! 2λ², so one report has variance 8/ε² whatever t.
//!
//! Sampling: a fair sign and an Exp(1) draw from one `u64` by the ziggurat method
//! ([`crate::sampling::standard_laplace`]: no `ln` in ~99% of draws), then randomized rounding
//! to the grid with one more `u64`.

use super::{
    FIXED_BOUND, GRID_STEP, GRID_VARIANCE, Lane, MeanAggregator, NumericMechanism, NumericReport, Units, add_units,
    check_fixed_epsilon, decode_fixed_bounded, numeric_batch,
};
use crate::error::Result;
use crate::params::Epsilon;
use crate::sampling::{
    exp_ziggurat, randomized_round_from_word, randomized_round_hot, randomized_round_is_cold, sign_and_exp1_finish,
    sign_and_exp1_lane, standard_laplace, with_sign,
};
use rand::Rng;

/// The Laplace mechanism on [-1, 1]: the report is t + Lap(2/ε), rounded to the fixed-point grid.
///
/// # Privacy
/// The sensitivity of t ∈ [-1, 1] is 2, and Laplace noise of scale 2/ε makes the output density
/// ratio of any two inputs at most exp(ε·|t − t'|/2) ≤ e^ε, with equality at t = ±1: exactly
/// ε-LDP. Rounding to the grid and clamping to ±[`FIXED_BOUND`] are post-processing.
///
/// # Utility
/// Var = 8/ε² (+ the grid's rounding variance ≤ 2⁻⁴²), constant in t: `variance_coefficients()`
/// is (0, 8/ε² + [`GRID_VARIANCE`]). Outputs are unbounded, so reports are only checked against
/// the sanity bound ±[`FIXED_BOUND`] = ±2⁴².
///
/// # Example
/// ```
/// use harmony_core::numeric::{Laplace, NumericMechanism};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mech = Laplace::new(2.0)?;
/// let mut rng = fast_rng(42);
/// let mut agg = mech.aggregator();
/// let ts: Vec<f64> = (0..5000).map(|i| (i % 21) as f64 / 10.0 - 1.0).collect();
/// for &t in &ts {
///     agg.add(&mech.randomize(t, &mut rng)?)?;
/// }
/// let truth = ts.iter().sum::<f64>() / ts.len() as f64;
/// let est = agg.estimate();
/// println!("laplace: {:.3} ± {:.3} (truth {truth:.3})", est.value, est.std_error);
/// assert!((est.value - truth).abs() < 5.0 * est.std_error);
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Laplace {
    eps: Epsilon,
    scale: f64,
}

impl Laplace {
    /// A Laplace mechanism with budget ε ≥ [`super::MIN_FIXED_EPSILON`] (finite, ≤ 700).
    pub fn new(epsilon: f64) -> Result<Self> {
        let eps = check_fixed_epsilon(epsilon, "laplace")?;
        Ok(Laplace { eps, scale: 2.0 / epsilon })
    }

    /// The noise scale λ = 2/ε (density (1/2λ)·exp(−|x|/λ)).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The output density at y for input t (before rounding): exp(−|y − t|/λ)/(2λ).
    pub fn density(&self, t: f64, y: f64) -> f64 {
        (-(y - t).abs() / self.scale).exp() / (2.0 * self.scale)
    }
}

impl Laplace {
    /// Randomizes a batch into grid units: `out` gets one `i64` per value, the `units` of the
    /// `Fixed(units)` report that [`NumericMechanism::randomize_batch`] would give (the same
    /// kernel and draws; 8 bytes per report instead of 16). All or nothing: if any value is NaN
    /// or outside [-1, 1], nothing is appended and the error names the first bad index.
    /// [`Laplace::add_units`] aggregates such reports.
    pub fn randomize_units<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<i64>) -> Result<()> {
        self.batch(ts, rng, &mut Units(out))
    }

    /// Adds grid-unit reports (as written by [`Laplace::randomize_units`]) to `agg`. Errors
    /// (nothing added): a report beyond ±[`FIXED_BOUND`] (its index is named).
    pub fn add_units(&self, agg: &mut MeanAggregator<Laplace>, units: &[i64]) -> Result<()> {
        add_units(agg, units, FIXED_BOUND, "laplace")
    }

    /// t + λ·(±x), clamped to ±[`FIXED_BOUND`], in grid units (unrounded).
    #[inline(always)]
    fn scaled(&self, t: f64, negative: bool, x: f64) -> f64 {
        (t + self.scale * with_sign(x, negative)).clamp(-FIXED_BOUND, FIXED_BOUND) / GRID_STEP
    }
}

numeric_batch!(
    Laplace,
    2,
    |m: &Laplace| {
        let (m, z) = (*m, exp_ziggurat());
        move |t, [w0, w1]: [u64; 2]| {
            let (negative, x, accepted) = sign_and_exp1_lane(z, w0);
            let scaled = m.scaled(t, negative, x);
            Lane {
                units: randomized_round_hot(w1, scaled),
                sign: false,
                done: accepted & !randomized_round_is_cold(scaled),
            }
        }
    },
    |m: &Laplace| {
        let (m, z) = (*m, exp_ziggurat());
        move |t, [w0, w1]: [u64; 2], rng: &mut R| {
            let (negative, x, accepted) = sign_and_exp1_lane(z, w0);
            let (negative, x) = if accepted { (negative, x) } else { sign_and_exp1_finish(rng, w0) };
            let y = m.scaled(t, negative, x) * GRID_STEP;
            Lane { units: randomized_round_from_word(w1, y, GRID_STEP), sign: false, done: true }
        }
    }
);

impl NumericMechanism for Laplace {
    fn name(&self) -> &'static str {
        "laplace"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    #[inline(always)]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport {
        let y = (t + self.scale * standard_laplace(rng)).clamp(-FIXED_BOUND, FIXED_BOUND);
        NumericReport::fixed(rng, y)
    }
    /// Vectorised batch (an AVX2 build chosen at run time): per value one ziggurat word and one
    /// rounding word drawn in bulk; the ~1% of ziggurat draws outside the fast region finish
    /// scalar ([`sign_and_exp1_finish`], fresh words). Same distribution as
    /// `randomize_unchecked` (not the same stream: the rare finishing words come after the
    /// chunk's bulk draw).
    fn randomize_batch<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<NumericReport>) -> Result<()> {
        self.batch(ts, rng, out)
    }
    fn decode(&self, report: &NumericReport) -> Result<f64> {
        decode_fixed_bounded(report, FIXED_BOUND, "laplace")
    }
    fn variance_coefficients(&self) -> (f64, f64) {
        (0.0, 2.0 * self.scale * self.scale + GRID_VARIANCE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::numeric::GRID_STEP;

    #[test]
    fn density_ratio_is_exactly_e_eps() {
        for eps in [0.1, 0.5, 1.0, 2.0, 4.0, 8.0] {
            let m = Laplace::new(eps).unwrap();
            let grid: Vec<f64> = (0..=40).map(|i| -1.0 + i as f64 * 0.05).collect();
            let ys: Vec<f64> = (0..=200).map(|i| -5.0 + i as f64 * 0.05).collect();
            let mut worst = 0.0f64;
            for &t in &grid {
                for &u in &grid {
                    for &y in &ys {
                        worst = worst.max(m.density(t, y) / m.density(u, y));
                    }
                }
            }
            let target = eps.exp();
            assert!((worst / target - 1.0).abs() < 1e-9, "eps {eps}: max ratio {worst}, e^eps {target}");
        }
    }

    #[test]
    fn constants_and_bad_parameters() {
        let m = Laplace::new(1.0).unwrap();
        assert_eq!(m.name(), "laplace");
        assert_eq!(m.scale(), 2.0);
        assert!((m.worst_case_variance() - 8.0).abs() < 1e-12);
        for bad in [f64::NAN, f64::INFINITY, 0.0, -1.0, 1e-12] {
            let e = Laplace::new(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidParameter { name: "epsilon", .. }), "{e}");
        }
        assert!(Laplace::new(1e-12).unwrap_err().to_string().contains(">= 0.000000001"));
    }

    #[test]
    fn decode_accepts_huge_but_bounded_values() {
        let m = Laplace::new(1.0).unwrap();
        let units = (FIXED_BOUND / GRID_STEP) as i64;
        assert_eq!(m.decode(&NumericReport::Fixed(units)).unwrap(), FIXED_BOUND);
        assert_eq!(m.decode(&NumericReport::Fixed(-units)).unwrap(), -FIXED_BOUND);
        let e = m.decode(&NumericReport::Fixed(units + 2)).unwrap_err();
        assert!(matches!(e, Error::InvalidReport { .. }) && e.to_string().contains("laplace"), "{e}");
        assert!(m.decode(&NumericReport::Fixed(i64::MIN)).is_err());
        assert!(m.decode(&NumericReport::Sign(true)).unwrap_err().to_string().contains("kind"));
    }

    #[test]
    fn units_api_equals_the_report_batch() {
        use crate::Aggregator;
        use crate::sampling::fast_rng;
        let m = Laplace::new(0.5).unwrap();
        let ts: Vec<f64> = (0..777).map(|i| (i % 21) as f64 / 10.0 - 1.0).collect();
        let (mut reports, mut units) = (Vec::new(), Vec::new());
        m.randomize_batch(&ts, &mut fast_rng(4), &mut reports).unwrap();
        m.randomize_units(&ts, &mut fast_rng(4), &mut units).unwrap();
        let want: Vec<NumericReport> = units.iter().map(|&u| NumericReport::Fixed(u)).collect();
        assert_eq!(reports, want);
        let (mut a, mut b) = (m.aggregator(), m.aggregator());
        a.add_batch(&reports).unwrap();
        m.add_units(&mut b, &units).unwrap();
        let (ea, eb) = (a.estimate(), b.estimate());
        assert_eq!(a.count(), b.count());
        assert!((ea.value - eb.value).abs() < 1e-12 && (ea.std_error - eb.std_error).abs() < 1e-12);
        // Bad values: nothing appended; out-of-bound units: nothing added, the index named.
        let mut bad = ts.clone();
        bad[9] = 2.0;
        assert!(m.randomize_units(&bad, &mut fast_rng(4), &mut units).unwrap_err().to_string().contains('9'));
        assert_eq!(units.len(), ts.len());
        let e = m.add_units(&mut b, &[0, i64::MAX]).unwrap_err();
        assert!(e.to_string().contains("laplace"), "{e}");
        assert_eq!(b.count(), ts.len() as u64);
    }
}
