//! Numeric mean estimation on [-1, 1]: one value per user, one real (or one bit) per report.
//!
//! Every mechanism here has a per-report variance of the form `a·t² + b` (t the user's value),
//! which [`NumericMechanism::variance_coefficients`] exposes. The aggregator uses it to give a
//! plug-in standard error: E\[Y²] = (1 + a)·t² + b, so Σt² is estimated without bias from ΣY²
//! when 1 + a > 0 (and bounded by the mean's square otherwise).
//!
//! Real-valued outputs travel as fixed-point integers after unbiased randomized rounding on the
//! grid [`GRID_STEP`]·ℤ (post-processing: keeps ε-LDP and unbiasedness, hides float low bits);
//! the rounding variance (≤ step²/4, ≈ step²/6 on average) is included in `b` as step²/4 — an
//! upper bound, smaller than 10⁻¹³.
//!
//! | name | type | report | one-report variance |
//! |---|---|---|---|
//! | `laplace` | [`Laplace`] | `Fixed` | 8/ε² |
//! | `duchi` | [`Duchi`] | `Sign` | C² − t², C = (e^ε+1)/(e^ε−1) |
//! | `pm` | [`Piecewise`] | `Fixed` | t²/(e^{ε/2}−1) + (e^{ε/2}+3)/(3(e^{ε/2}−1)²) |
//! | `hm` | [`Hybrid`] | `Sign` or `Fixed` | constant in t for ε > ε* = 0.609352, Duchi's below |
//! | `scdf` | [`Scdf`] | `Fixed` | staircase noise with γ = 1/2 |
//! | `staircase` | [`Staircase`] | `Fixed` | staircase noise with the variance-optimal γ |
//!
//! Multidimensional mechanisms (t ∈ [-1, 1]^d) implement [`VectorMechanism`]: [`DuchiMulti`]
//! (`duchi-multi`, Duchi et al. with Harmony's correction) and [`HarmonyBit`] (`harmony-1bit`).
//! [`AnyNumeric`] picks a 1-D mechanism by name at run time.

use crate::aggregate::{Aggregator, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::Estimate;
use crate::params::{Epsilon, check_unit};
use rand::Rng;
use serde::{Deserialize, Serialize};

pub mod any;
pub mod duchi;
pub mod duchi_multi;
pub mod harmony_bit;
pub mod hybrid;
pub mod laplace;
pub mod piecewise;
pub mod staircase;
pub mod vector;

pub use any::{AnyNumeric, NUMERIC_NAMES};
pub use duchi::Duchi;
pub use duchi_multi::{DuchiMulti, DuchiMultiReport};
pub use harmony_bit::{HarmonyBit, HarmonyBitReport};
pub use hybrid::{EPSILON_STAR, Hybrid};
pub use laplace::Laplace;
pub use piecewise::Piecewise;
pub use staircase::{Scdf, Staircase, StaircaseNoise};
pub use vector::{VectorMeanAggregator, VectorMechanism};

/// The fixed-point grid of real-valued reports: 2⁻²⁰ ≈ 9.5·10⁻⁷.
pub const GRID_STEP: f64 = 1.0 / (1u64 << 20) as f64;
/// Variance added by randomized rounding to the grid (upper bound step²/4).
pub const GRID_VARIANCE: f64 = GRID_STEP * GRID_STEP / 4.0;

/// The largest magnitude of a fixed-point report, 2⁴² ≈ 4.4·10¹² (2⁶² grid units, so an `i64`
/// never saturates). Unbounded mechanisms (Laplace, staircase) clamp their output to ±this bound
/// before rounding: clamping is post-processing, so ε-LDP is kept exactly, and with
/// ε ≥ [`MIN_FIXED_EPSILON`] the probability that it changes anything is below e⁻²⁰⁰⁰. Decoders
/// reject any report beyond it.
pub const FIXED_BOUND: f64 = (1u64 << 42) as f64;

/// The smallest ε accepted by the mechanisms with fixed-point reports (Laplace, PM, SCDF,
/// staircase): below it their outputs could reach [`FIXED_BOUND`]. Duchi and HM (which is Duchi
/// for ε ≤ ε*) accept every ε of [`Epsilon::new`].
pub const MIN_FIXED_EPSILON: f64 = 1e-9;

/// Validates ε for a mechanism with fixed-point reports: [`Epsilon::new`] and ε ≥
/// [`MIN_FIXED_EPSILON`].
pub fn check_fixed_epsilon(eps: f64, mechanism: &str) -> Result<Epsilon> {
    let e = Epsilon::new(eps)?;
    if eps < MIN_FIXED_EPSILON {
        return Err(Error::param(
            "epsilon",
            eps,
            format!("a number >= {MIN_FIXED_EPSILON} for {mechanism} (its reports are fixed-point numbers below 2^42)"),
        ));
    }
    Ok(e)
}

/// Checks every value of a batch against [-1, 1]; the error names the first bad index. The
/// message is only formatted on failure (no allocation on the happy path).
pub fn check_unit_batch(ts: &[f64]) -> Result<()> {
    if ts.iter().all(|t| (-1.0..=1.0).contains(t)) {
        return Ok(());
    }
    for (i, &t) in ts.iter().enumerate() {
        check_unit(&format!("value {i}"), t)?;
    }
    Ok(())
}

/// One numeric report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NumericReport {
    /// One bit: the report's value is `+scale` (true) or `-scale` (false), `scale` a public
    /// constant of the mechanism (Duchi, HM's Duchi branch).
    Sign(bool),
    /// A fixed-point real: the value is `units · GRID_STEP`.
    Fixed(i64),
}

impl NumericReport {
    /// A real value rounded (unbiased, randomized) to the grid.
    #[inline]
    pub fn fixed<R: Rng + ?Sized>(rng: &mut R, y: f64) -> Self {
        NumericReport::Fixed(crate::sampling::randomized_round_fast(rng, y, GRID_STEP))
    }
}

/// A mechanism for one value in [-1, 1] whose reports average to an unbiased mean.
pub trait NumericMechanism: std::fmt::Debug + Clone + PartialEq + Send + Sync {
    /// Name used in the CLI and JSON (`laplace`, `duchi`, `pm`, `hm`, `scdf`, `staircase`).
    fn name(&self) -> &'static str;
    /// The privacy budget.
    fn epsilon(&self) -> Epsilon;
    /// Randomizes t ∈ [-1, 1] (checked by the caller).
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport;
    /// Checks a report and returns its unbiased value.
    fn decode(&self, report: &NumericReport) -> Result<f64>;
    /// (a, b) with Var(one report | t) = a·t² + b, rounding included.
    fn variance_coefficients(&self) -> (f64, f64);

    /// Randomizes t; an error if t is NaN or outside [-1, 1].
    fn randomize<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> Result<NumericReport> {
        check_unit("value", t)?;
        Ok(self.randomize_unchecked(t, rng))
    }
    /// Randomizes a batch into `out` (appended). All or nothing: if any input is NaN or outside
    /// [-1, 1], nothing is appended and the error names the first bad index.
    ///
    /// The range check is fused into the randomizing loop (one pass over the inputs); on error
    /// the reports already written are truncated away, so no report of the batch escapes.
    fn randomize_batch<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<NumericReport>) -> Result<()> {
        let start = out.len();
        let mut ok = true;
        out.reserve(ts.len());
        out.extend(ts.iter().map(|&t| {
            ok &= (-1.0..=1.0).contains(&t);
            self.randomize_unchecked(t, rng)
        }));
        if !ok {
            out.truncate(start);
            check_unit_batch(ts)?;
        }
        Ok(())
    }
    /// Variance of one report when the user's value is t.
    fn variance(&self, t: f64) -> f64 {
        let (a, b) = self.variance_coefficients();
        a * t * t + b
    }
    /// The largest one-report variance over t ∈ [-1, 1] (at t = 0 or |t| = 1).
    fn worst_case_variance(&self) -> f64 {
        let (a, b) = self.variance_coefficients();
        b.max(a + b)
    }
    /// Exact variance of the mean estimate over the given inputs: (1/n²)·Σ Var(t_i).
    fn aggregate_variance(&self, ts: &[f64]) -> f64 {
        let n = ts.len() as f64;
        ts.iter().map(|&t| self.variance(t)).sum::<f64>() / (n * n)
    }
    /// An empty aggregator for this mechanism.
    fn aggregator(&self) -> MeanAggregator<Self> {
        MeanAggregator::new(self.clone())
    }
}

/// Mean aggregator for any [`NumericMechanism`]: count, Σy, Σy².
#[derive(Debug, Clone, PartialEq)]
pub struct MeanAggregator<M> {
    mechanism: M,
    n: u64,
    sum: f64,
    sum_sq: f64,
}

impl<M: NumericMechanism> MeanAggregator<M> {
    /// An empty aggregator.
    pub fn new(mechanism: M) -> Self {
        MeanAggregator { mechanism, n: 0, sum: 0.0, sum_sq: 0.0 }
    }
    /// The mechanism whose reports this aggregates.
    pub fn mechanism(&self) -> &M {
        &self.mechanism
    }
}

/// Plug-in variance of a mean of n unbiased reports with one-report variance a·t² + b, from the
/// reports' sum and sum of squares. Shared by every numeric aggregator.
pub fn plug_in_mean_variance(n: f64, sum: f64, sum_sq: f64, a: f64, b: f64) -> f64 {
    if n < 1.0 {
        return f64::INFINITY;
    }
    let mean = sum / n;
    // Σt² estimate: unbiased from ΣY² when 1 + a is not ~0, else n·mean² (a lower bound on Σt²,
    // which makes the variance an upper bound when a < 0).
    let sum_t2 = if 1.0 + a > 1e-9 { ((sum_sq - n * b) / (1.0 + a)).clamp(0.0, n) } else { (n * mean * mean).min(n) };
    ((a * sum_t2 + n * b) / (n * n)).max(0.0)
}

impl<M: NumericMechanism> MeanAggregator<M> {
    /// Adds `n` reports given only through their sum and sum of squares (a packed batch API such
    /// as [`Duchi::add_signs`], which has checked the reports). Errors: a sum not finite.
    pub(crate) fn add_sums(&mut self, n: u64, sum: f64, sum_sq: f64) -> Result<()> {
        if !(sum.is_finite() && sum_sq.is_finite()) {
            return Err(Error::report("sum", sum, "finite sums"));
        }
        self.n += n;
        self.sum += sum;
        self.sum_sq += sum_sq;
        Ok(())
    }
}

impl<M: NumericMechanism> Aggregator for MeanAggregator<M> {
    type Report = NumericReport;
    type Output = Estimate;

    fn validate(&self, report: &NumericReport) -> Result<()> {
        self.mechanism.decode(report).map(|_| ())
    }
    fn add_unchecked(&mut self, report: &NumericReport) {
        let y = self.mechanism.decode(report).unwrap_or(0.0);
        self.n += 1;
        self.sum += y;
        self.sum_sq += y * y;
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("numeric mechanism", &self.mechanism, &other.mechanism)?;
        self.n += other.n;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        Ok(())
    }
    fn count(&self) -> u64 {
        self.n
    }
    fn estimate(&self) -> Estimate {
        let n = self.n as f64;
        let (a, b) = self.mechanism.variance_coefficients();
        let mean = if self.n == 0 { 0.0 } else { self.sum / n };
        Estimate::from_variance(mean, plug_in_mean_variance(n, self.sum, self.sum_sq, a, b))
    }
}

/// Rejects a `Fixed` report outside ±bound (used by every bounded real-valued mechanism).
pub fn decode_fixed_bounded(report: &NumericReport, bound: f64, mechanism: &str) -> Result<f64> {
    match *report {
        NumericReport::Fixed(u) => {
            let y = u as f64 * GRID_STEP;
            // Compared in grid units (exact for every i64), with one unit of slack: randomized
            // rounding may round the bound itself up.
            let limit = ((bound / GRID_STEP).ceil() + 1.0).min(i64::MAX as f64) as u64;
            if u.unsigned_abs() > limit {
                return Err(Error::report("value", y, format!("a {mechanism} output in [-{bound}, {bound}]")));
            }
            Ok(y)
        }
        NumericReport::Sign(_) => Err(Error::report("kind", "Sign", format!("a Fixed report for {mechanism}"))),
    }
}
