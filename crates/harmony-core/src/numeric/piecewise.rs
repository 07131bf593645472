//! Wang et al.'s Piecewise Mechanism (PM, ICDE'19 §III-B; docs/MECHANISMS.md §B3).
//!
//! Derivation. Let x = e^{ε/2}, C = (x + 1)/(x − 1), p = (e^ε − x)/(2x + 2) = x/(2C) and
//! l(t) = (C + 1)t/2 − (C − 1)/2, r(t) = l(t) + C − 1. The output density is p on [l, r] and
//! p/e^ε = 1/(2Cx) on the rest of [−C, C]. Its mass: p(C − 1) = x/(x + 1) in the centre, and
//! k(1 + t) on the left tail [−C, l), k(1 − t) on the right tail (r, C], with
//! k = (C + 1)/(4Cx) = 1/(2(x + 1)). The densities of any two inputs are each p or p/e^ε, so the
//! ratio is at most e^ε; E\[Y] = t and Var = t²/(x − 1) + (x + 3)/(3(x − 1)²).
//!
//! Sampler: one uniform u ∈ [0, 1) read through the inverse CDF: u < k(1 + t) is the left tail,
//! u ≥ 1 − k(1 − t) the right tail, the rest the centre. At t = ±1 one tail has mass exactly 0
//! (computed as k·0), so it is never selected: that is the |t| = 1 guard.

use super::{
    GRID_STEP, GRID_VARIANCE, Lane, NumericMechanism, NumericReport, check_fixed_epsilon, decode_fixed_bounded,
    numeric_batch,
};
use crate::error::Result;
use crate::params::Epsilon;
use crate::sampling::{
    randomized_round_from_word, randomized_round_hot, randomized_round_is_cold, uniform01, uniform01_from_word,
};
use rand::Rng;
use std::hint::select_unpredictable;

/// The Piecewise Mechanism: a real report in [−C, C], C = (e^{ε/2} + 1)/(e^{ε/2} − 1), whose
/// density is high (p) on a window of width C − 1 around a point moving with t and low (p/e^ε)
/// elsewhere.
///
/// # Privacy
/// For every output y and inputs t, t', the densities are each either p or p/e^ε, so their
/// ratio is at most e^ε, with equality when y is in the high window of t but not of t' (e.g.
/// t = 1, t' = −1, y = C): exactly ε-LDP. Rounding to the grid is post-processing.
///
/// # Utility
/// Var = t²/(e^{ε/2} − 1) + (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²) (+ rounding ≤ 2⁻⁴²); worst case
/// 4e^{ε/2}/(3(e^{ε/2} − 1)²) at |t| = 1, below Laplace's 8/ε² for every ε.
///
/// # Example
/// ```
/// use harmony_core::numeric::{NumericMechanism, Piecewise};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mech = Piecewise::new(1.0)?;
/// let mut rng = fast_rng(42);
/// let ts: Vec<f64> = (0..5000).map(|i| ((i * 13) % 201) as f64 / 100.0 - 1.0).collect();
/// let mut reports = Vec::new();
/// mech.randomize_batch(&ts, &mut rng, &mut reports)?;
/// let mut agg = mech.aggregator();
/// agg.add_batch(&reports)?;
/// let truth = ts.iter().sum::<f64>() / ts.len() as f64;
/// let est = agg.estimate();
/// println!("pm: {:.3} ± {:.3} (truth {truth:.3})", est.value, est.std_error);
/// assert!((est.value - truth).abs() < 5.0 * est.std_error);
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piecewise {
    eps: Epsilon,
    /// e^{ε/2} − 1.
    xm1: f64,
    /// C.
    c: f64,
    /// The last grid point inside [−C, C], ⌊C/s⌋·s: outputs are clamped to ±edge (see
    /// `sample_real`).
    edge: f64,
    /// (C + 1)/2 and (C − 1)/2: l(t) = half_cp1·t − half_cm1.
    half_cp1: f64,
    half_cm1: f64,
    /// Centre density p and its inverse.
    p: f64,
    inv_p: f64,
    /// Tail density p/e^ε and its inverse.
    p_tail: f64,
    inv_p_tail: f64,
    /// Tail mass per unit of (1 ± t): k = 1/(2(x + 1)).
    k: f64,
}

impl Piecewise {
    /// PM with budget ε in the global range ([`Epsilon`]).
    pub fn new(epsilon: f64) -> Result<Self> {
        Ok(Self::from_epsilon(check_fixed_epsilon(epsilon, "pm")?))
    }

    /// From an already validated ε.
    pub(crate) fn from_epsilon(eps: Epsilon) -> Self {
        Self::with_constants(eps, eps.value())
    }

    /// PM's constants at `e` (ε itself for [`Piecewise::from_epsilon`]; the lattice tests build
    /// PM below the accepted range with it, for their table of the slack).
    pub(crate) fn with_constants(eps: Epsilon, e: f64) -> Self {
        let half = 0.5 * e;
        let x = half.exp();
        let xm1 = half.exp_m1();
        let c = (x + 1.0) / xm1;
        let p = x / (2.0 * c);
        let p_tail = 1.0 / (2.0 * c * x);
        Piecewise {
            eps,
            xm1,
            c,
            edge: (c / GRID_STEP).floor() * GRID_STEP,
            half_cp1: 0.5 * (c + 1.0),
            half_cm1: 1.0 / xm1, // (C − 1)/2 = 1/(x − 1)
            p,
            inv_p: 1.0 / p,
            p_tail,
            inv_p_tail: 2.0 * c * x,
            k: 0.5 / (x + 1.0),
        }
    }

    /// The output bound C = (e^{ε/2} + 1)/(e^{ε/2} − 1).
    pub fn scale(&self) -> f64 {
        self.c
    }
    /// The high density p = (e^ε − e^{ε/2})/(2e^{ε/2} + 2).
    pub fn center_density(&self) -> f64 {
        self.p
    }
    /// The low density p/e^ε.
    pub fn tail_density(&self) -> f64 {
        self.p_tail
    }
    /// Left end of the high window, l(t) = (C + 1)t/2 − (C − 1)/2.
    pub fn left(&self, t: f64) -> f64 {
        self.half_cp1 * t - self.half_cm1
    }
    /// Right end of the high window, r(t) = l(t) + C − 1.
    pub fn right(&self, t: f64) -> f64 {
        self.half_cp1 * t + self.half_cm1
    }
    /// Output density at y for input t (before rounding); 0 outside [−C, C].
    pub fn density(&self, t: f64, y: f64) -> f64 {
        if !(-self.c..=self.c).contains(&y) {
            0.0
        } else if (self.left(t)..=self.right(t)).contains(&y) {
            self.p
        } else {
            self.p_tail
        }
    }

    /// The unrounded output for t ∈ [-1, 1] from one uniform u ∈ [0, 1) (inverse CDF), clamped
    /// to the last grid points inside [−C, C]: an output in a partial grid cell at ±C is
    /// rounded deterministically inward instead of randomly to the point past ±C. That point's
    /// probability would be the integral of a density cut off at ±C against a weight that
    /// does not vanish there, held by a few float lattice points whose count depends on the
    /// input: a ln-ratio up to 43ε at ε = 0.00287, where C lies 4·10⁻⁶ grid steps past a grid
    /// point. Clamped, each edge point keeps at least half a tent of tail density, and the
    /// ln-ratio stays below ε + 2⁻²⁹/p_tail (PRIVACY-SAMPLERS.md). The bias, at most s·P[|y| > edge]
    /// ≤ s²·p (p the centre density), is 1.8·10⁻¹³ at ε = 1 and 10⁻⁸ at ε = 20.
    #[inline]
    pub(crate) fn sample_real(&self, t: f64, u: f64) -> f64 {
        let left_mass = self.k * (1.0 + t);
        let right_mass = self.k * (1.0 - t);
        // All three pieces are computed and selected without branches: which one applies is a
        // coin flip, so a branch would be mispredicted often.
        let left = -self.c + u * self.inv_p_tail;
        let right = self.c - (1.0 - u) * self.inv_p_tail;
        let centre = self.left(t) + (u - left_mass) * self.inv_p;
        let tail = select_unpredictable(u < left_mass, left, right);
        let y = select_unpredictable(u < left_mass || u >= 1.0 - right_mass, tail, centre);
        y.max(-self.edge).min(self.edge)
    }

    /// (a, b) without the rounding term: Var = a·t² + b.
    pub(crate) fn raw_variance_coefficients(&self) -> (f64, f64) {
        let x = self.xm1 + 1.0;
        (1.0 / self.xm1, (x + 3.0) / (3.0 * self.xm1 * self.xm1))
    }
}

/// PM's lane of the batch kernel: words (u, rounding), used as `randomize_unchecked` uses them.
#[inline(always)]
pub(crate) fn pm_lane(m: &Piecewise, t: f64, [w0, w1]: [u64; 2]) -> Lane {
    let scaled = m.sample_real(t, uniform01_from_word(w0)) / GRID_STEP;
    Lane { units: randomized_round_hot(w1, scaled), sign: false, done: !randomized_round_is_cold(scaled) }
}

/// [`pm_lane`] finished on every path (the rare large values).
pub(crate) fn pm_fix(m: &Piecewise, t: f64, [w0, w1]: [u64; 2]) -> Lane {
    let y = m.sample_real(t, uniform01_from_word(w0));
    Lane { units: randomized_round_from_word(w1, y, GRID_STEP), sign: false, done: true }
}

numeric_batch!(
    Piecewise,
    2,
    |m: &Piecewise| {
        let m = *m;
        move |t, w| pm_lane(&m, t, w)
    },
    |m: &Piecewise| {
        let m = *m;
        move |t, w, _: &mut R| pm_fix(&m, t, w)
    }
);

impl NumericMechanism for Piecewise {
    fn name(&self) -> &'static str {
        "pm"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    #[inline(always)]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport {
        let u = uniform01(rng);
        NumericReport::fixed(rng, self.sample_real(t, u))
    }
    /// Vectorised batch (an AVX2 build chosen at run time): the same distribution as
    /// `randomize_unchecked` (the same two words per value, drawn in bulk per 64 values).
    fn randomize_batch<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<NumericReport>) -> Result<()> {
        self.batch(ts, rng, out)
    }
    fn decode(&self, report: &NumericReport) -> Result<f64> {
        decode_fixed_bounded(report, self.c, "pm")
    }
    fn variance_coefficients(&self) -> (f64, f64) {
        let (a, b) = self.raw_variance_coefficients();
        (a, b + GRID_VARIANCE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::numeric::GRID_STEP;

    #[test]
    fn density_pieces_give_exactly_e_eps() {
        for eps in [0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 20.0] {
            let m = Piecewise::new(eps).unwrap();
            let target = eps.exp();
            // The two density levels.
            let ratio = m.center_density() / m.tail_density();
            assert!((ratio / target - 1.0).abs() < 1e-9, "eps {eps}: p/p_tail {ratio}");
            let c = m.scale();
            let grid: Vec<f64> = (0..=40).map(|i| -1.0 + i as f64 * 0.05).collect();
            for &t in &grid {
                let (l, r) = (m.left(t), m.right(t));
                assert!(l >= -c - 1e-12 && r <= c + 1e-12 && (r - l - (c - 1.0)).abs() < 1e-9 * c);
                let mass = m.center_density() * (r - l) + m.tail_density() * (2.0 * c - (r - l));
                assert!((mass - 1.0).abs() < 1e-9, "eps {eps}, t {t}: total mass {mass}");
                // Mean of the piecewise density equals t.
                let mean = m.center_density() * (r * r - l * l) / 2.0
                    + m.tail_density() * ((l * l - c * c) / 2.0 + (c * c - r * r) / 2.0);
                assert!((mean - t).abs() < 1e-9 * c, "eps {eps}, t {t}: mean {mean}");
            }
            // Max ratio over inputs and outputs (a grid of y including the window edges).
            let mut ys: Vec<f64> = (0..=400).map(|i| -c + 2.0 * c * i as f64 / 400.0).collect();
            ys.extend(grid.iter().flat_map(|&t| [m.left(t), m.right(t)]));
            let mut worst = 0.0f64;
            for &t in &grid {
                for &u in &grid {
                    for &y in &ys {
                        worst = worst.max(m.density(t, y) / m.density(u, y));
                    }
                }
            }
            assert!((worst / target - 1.0).abs() < 1e-9, "eps {eps}: max ratio {worst}");
        }
    }

    #[test]
    fn variance_matches_closed_form_and_worst_case() {
        for eps in [0.5f64, 1.0, 2.0, 4.0] {
            let m = Piecewise::new(eps).unwrap();
            let x = (eps / 2.0).exp();
            let worst = 4.0 * x / (3.0 * (x - 1.0) * (x - 1.0));
            assert!((m.worst_case_variance() - worst).abs() < 1e-9 * worst, "eps {eps}");
            assert!(m.worst_case_variance() < 8.0 / (eps * eps), "PM beats Laplace at eps {eps}");
        }
    }

    #[test]
    fn sampler_is_a_monotone_inverse_cdf_and_guards_the_edges() {
        for eps in [0.5, 2.0, 20.0] {
            let m = Piecewise::new(eps).unwrap();
            let c = m.scale();
            for t in [-1.0, -0.3, 0.0, 0.7, 1.0] {
                let mut last = -c;
                for i in 0..=10_000 {
                    let u = (i as f64 / 10_000.0).min(1.0 - f64::EPSILON / 2.0);
                    let y = m.sample_real(t, u);
                    assert!(
                        (-c..=c).contains(&y) && y >= last - 1e-9 * c,
                        "eps {eps}, t {t}, u {u}: y {y} after {last}"
                    );
                    last = y;
                }
                // The top of the CDF reaches the last grid point inside C (the end of the window
                // at t = 1, of the tail else, clamped to the grid).
                assert!((last - c).abs() <= GRID_STEP, "eps {eps}, t {t}: top {last}");
                assert_eq!(last, (c / GRID_STEP).floor() * GRID_STEP, "eps {eps}, t {t}: top {last}");
            }
            // t = 1: no right tail, the window ends exactly at C; t = -1: no left tail.
            assert!((m.right(1.0) - c).abs() < 1e-12 * c && (m.left(-1.0) + c).abs() < 1e-12 * c);
            assert_eq!(m.sample_real(-1.0, 0.0), -(c / GRID_STEP).floor() * GRID_STEP);
            assert!((m.sample_real(0.0, 0.5)).abs() < 1e-12);
        }
    }

    #[test]
    fn decode_bounds() {
        let m = Piecewise::new(1.0).unwrap();
        let c = m.scale();
        let edge = (c / GRID_STEP).ceil() as i64;
        assert!(m.decode(&NumericReport::Fixed(edge)).is_ok());
        let e = m.decode(&NumericReport::Fixed(edge + 2)).unwrap_err();
        assert!(matches!(e, Error::InvalidReport { .. }) && e.to_string().contains("pm output"), "{e}");
        assert!(Piecewise::new(0.0).is_err());
    }
}
