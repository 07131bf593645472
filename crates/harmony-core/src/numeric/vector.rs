//! Mechanisms for a vector t ∈ [-1, 1]^d and their generic mergeable mean aggregator.
//!
//! Every coordinate j of a report decodes to an unbiased estimate of t_j with variance
//! a·t_j² + b ([`VectorMechanism::variance_coefficients`]), so the aggregator keeps, per
//! coordinate, the sum and the sum of squares and gives plug-in standard errors with
//! [`super::plug_in_mean_variance`].

use super::plug_in_mean_variance;
use crate::aggregate::{Aggregator, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::Estimate;
use crate::params::{Epsilon, check_unit};
use rand::Rng;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A mechanism for one vector t ∈ [-1, 1]^d per user whose decoded reports average to an
/// unbiased estimate of the mean vector.
pub trait VectorMechanism: std::fmt::Debug + Clone + PartialEq + Send + Sync {
    /// The report one user sends.
    type Report: std::fmt::Debug + Clone + PartialEq + Serialize + DeserializeOwned + Send + Sync;

    /// Name used in the CLI and JSON (`duchi-multi`, `harmony-1bit`).
    fn name(&self) -> &'static str;
    /// The privacy budget (for the whole vector).
    fn epsilon(&self) -> Epsilon;
    /// The dimension d.
    fn dimension(&self) -> usize;
    /// Randomizes t (length d, every coordinate in [-1, 1]; checked by the caller).
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: &[f64], rng: &mut R) -> Self::Report;
    /// Checks a report against the mechanism's parameters; the error names the field, the value
    /// and the valid range.
    fn validate(&self, report: &Self::Report) -> Result<()>;
    /// Adds a validated report's unbiased vector y to `sum` and y∘y to `sum_sq` (both of
    /// length d). Touches only the coordinates where y is non-zero.
    fn accumulate(&self, report: &Self::Report, sum: &mut [f64], sum_sq: &mut [f64]);
    /// (a, b) with Var(coordinate j of one report | t) = a·t_j² + b.
    fn variance_coefficients(&self) -> (f64, f64);
    /// Like [`accumulate`](Self::accumulate), in units of [`unit`](Self::unit): y/u and (y/u)².
    /// A mechanism whose coordinates are ±u overrides both so the sums are integers (exact in
    /// f64 up to 2^53 reports, hence independent of the order reports are added and merged).
    fn accumulate_units(&self, report: &Self::Report, sum: &mut [f64], sum_sq: &mut [f64]) {
        self.accumulate(report, sum, sum_sq)
    }
    /// The value of one unit of [`accumulate_units`](Self::accumulate_units).
    fn unit(&self) -> f64 {
        1.0
    }

    /// Checks t: length d and every coordinate in [-1, 1] (the error names the coordinate).
    fn check_input(&self, t: &[f64]) -> Result<()> {
        check_vector(t, self.dimension(), "")
    }
    /// Randomizes t after checking it.
    fn randomize<R: Rng + ?Sized>(&self, t: &[f64], rng: &mut R) -> Result<Self::Report> {
        self.check_input(t)?;
        Ok(self.randomize_unchecked(t, rng))
    }
    /// Randomizes a batch of rows into `out` (appended). Validates every row first: on error
    /// nothing is appended and the error names the row (and coordinate).
    fn randomize_batch<T: AsRef<[f64]>, R: Rng + ?Sized>(
        &self,
        rows: &[T],
        rng: &mut R,
        out: &mut Vec<Self::Report>,
    ) -> Result<()> {
        let d = self.dimension();
        for (i, row) in rows.iter().enumerate() {
            let row = row.as_ref();
            if row.len() != d || !row.iter().all(|x| (-1.0..=1.0).contains(x)) {
                check_vector(row, d, &format!("row {i} "))?;
            }
        }
        // (Rows are validated in a first pass, unlike the 1-D batch: a row is d values, so the
        // second read is cheap next to randomizing it.)
        out.reserve(rows.len());
        out.extend(rows.iter().map(|row| self.randomize_unchecked(row.as_ref(), rng)));
        Ok(())
    }
    /// The report's unbiased vector (length d), after validating it.
    fn decode(&self, report: &Self::Report) -> Result<Vec<f64>> {
        self.validate(report)?;
        let d = self.dimension();
        let (mut y, mut scratch) = (vec![0.0; d], vec![0.0; d]);
        self.accumulate(report, &mut y, &mut scratch);
        Ok(y)
    }
    /// Variance of coordinate j of one report when the user's value there is t_j.
    fn variance(&self, t_j: f64) -> f64 {
        let (a, b) = self.variance_coefficients();
        a * t_j * t_j + b
    }
    /// The largest one-report, one-coordinate variance over t_j ∈ [-1, 1].
    fn worst_case_variance(&self) -> f64 {
        let (a, b) = self.variance_coefficients();
        b.max(a + b)
    }
    /// An empty aggregator for this mechanism.
    fn aggregator(&self) -> VectorMeanAggregator<Self> {
        VectorMeanAggregator::new(self.clone())
    }
}

/// Checks a vector's length and coordinates; `prefix` (e.g. `"row 3 "`) starts the names. No
/// allocation unless the vector is bad.
fn check_vector(t: &[f64], d: usize, prefix: &str) -> Result<()> {
    if t.len() != d {
        return Err(Error::input(format!("{prefix}vector length"), t.len(), format!("{d} coordinates")));
    }
    if t.iter().all(|x| (-1.0..=1.0).contains(x)) {
        return Ok(());
    }
    for (j, &x) in t.iter().enumerate() {
        check_unit(&format!("{prefix}coordinate {j}"), x)?;
    }
    Ok(())
}

/// Mean aggregator for any [`VectorMechanism`]: count and, per coordinate, Σy and Σy² (in the
/// mechanism's units, see [`VectorMechanism::accumulate_units`]).
#[derive(Debug, Clone, PartialEq)]
pub struct VectorMeanAggregator<M> {
    mechanism: M,
    n: u64,
    sum: Vec<f64>,
    sum_sq: Vec<f64>,
}

impl<M: VectorMechanism> VectorMeanAggregator<M> {
    /// An empty aggregator.
    pub fn new(mechanism: M) -> Self {
        let d = mechanism.dimension();
        VectorMeanAggregator { mechanism, n: 0, sum: vec![0.0; d], sum_sq: vec![0.0; d] }
    }
    /// The mechanism whose reports this aggregates.
    pub fn mechanism(&self) -> &M {
        &self.mechanism
    }
}

impl<M: VectorMechanism> Aggregator for VectorMeanAggregator<M> {
    type Report = M::Report;
    type Output = Vec<Estimate>;

    fn validate(&self, report: &M::Report) -> Result<()> {
        self.mechanism.validate(report)
    }
    fn add_unchecked(&mut self, report: &M::Report) {
        self.n += 1;
        self.mechanism.accumulate_units(report, &mut self.sum, &mut self.sum_sq);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("vector mechanism", &self.mechanism, &other.mechanism)?;
        self.n += other.n;
        self.sum.iter_mut().zip(&other.sum).for_each(|(a, b)| *a += b);
        self.sum_sq.iter_mut().zip(&other.sum_sq).for_each(|(a, b)| *a += b);
        Ok(())
    }
    fn count(&self) -> u64 {
        self.n
    }
    fn estimate(&self) -> Vec<Estimate> {
        let n = self.n as f64;
        let (a, b) = self.mechanism.variance_coefficients();
        let u = self.mechanism.unit();
        self.sum
            .iter()
            .zip(&self.sum_sq)
            .map(|(&s, &s2)| {
                let (s, s2) = (s * u, s2 * u * u);
                let mean = if self.n == 0 { 0.0 } else { s / n };
                Estimate::from_variance(mean, plug_in_mean_variance(n, s, s2, a, b))
            })
            .collect()
    }
}

impl<M: VectorMechanism> crate::state::SaveState for VectorMeanAggregator<M> {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n);
        w.f64s(&self.sum);
        w.f64s(&self.sum_sq);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.n += r.u64("vector n")?;
        r.add_f64s("vector sums", &mut self.sum)?;
        r.add_f64s("vector sums of squares", &mut self.sum_sq)
    }
}
