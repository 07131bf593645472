//! The flat baseline: every user reports its bin with OUE over the whole domain `[0, D)`.
//!
//! # Privacy
//! One OUE report per user at the full ε (ε-LDP, see `harmony_core::frequency::unary`).
//!
//! # Utility
//! A range sums the bins' estimates. Within one report OUE's bits are independent given x, so the
//! variance is exactly `Σ_{v∈[a,b)} [q(1−q) + f_v (p(1−p) − q(1−q))] / (n (p − q)²)`: the
//! `f_v` term included, no sampling error (every user reports the whole domain).
//!
//! # Reports
//! harmony-core's [`UnaryReport`] (wire kind 3): D bits packed in ⌈D/64⌉ words.

use super::{RangeEstimator, VarianceParts, check_values, mass, normalize_plug_in};
use harmony_core::frequency::{Oue, PureParams, UnaryAggregator, UnaryEncoding, UnaryReport};
use harmony_core::{Aggregator, Error, FrequencyOracle, Randomizer, Result};
use rand::Rng;

/// The flat OUE collection over `[0, D)`.
#[derive(Debug, Clone, PartialEq)]
pub struct FlatOue {
    oracle: UnaryEncoding,
}

/// The server's estimate of a flat collection, with prefix sums for O(1) ranges.
#[derive(Debug, Clone, PartialEq)]
pub struct FlatEstimate {
    n: f64,
    params: PureParams,
    freqs: Vec<f64>,
    prefix: Vec<f64>,
}

impl FlatOue {
    /// OUE with budget `epsilon` over `[0, d)`. Errors: ε not finite and > 0, d < 2.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        Ok(FlatOue { oracle: Oue::new(epsilon, d)? })
    }
    /// The domain size D.
    pub fn domain(&self) -> usize {
        self.oracle.domain_size()
    }
    /// Simulates a collection: every value is randomized with OUE (packed batches, no
    /// allocation per report) and aggregated. Errors: no values, a value ≥ D.
    pub fn collect<R: Rng + ?Sized>(&self, values: &[usize], rng: &mut R) -> Result<FlatEstimate> {
        check_values(values, self.domain())?;
        let mut agg = self.oracle.aggregator();
        let mut buf = Vec::new();
        for chunk in values.chunks(1 << 15) {
            buf.clear();
            self.oracle.randomize_packed(chunk, rng, &mut buf)?;
            agg.add_packed(&buf)?;
        }
        self.estimate(&agg)
    }
    /// One user's report (OUE over D). Errors: x ≥ D.
    pub fn randomize<R: Rng + ?Sized>(&self, x: usize, rng: &mut R) -> Result<UnaryReport> {
        self.oracle.randomize(x, rng)
    }
    /// The largest encoded report (bytes, wire header included): every bit set.
    pub fn max_report_bytes(&self) -> usize {
        harmony_core::wire::encode(&UnaryReport { bits: vec![u64::MAX; self.domain().div_ceil(64)] }).len()
    }
    /// An empty, mergeable server-side accumulator (the OUE aggregator).
    pub fn aggregator(&self) -> UnaryAggregator {
        self.oracle.aggregator()
    }
    /// The estimate from an accumulator of this collection's reports. Errors: no reports, an
    /// accumulator over another domain size.
    pub fn estimate(&self, agg: &UnaryAggregator) -> Result<FlatEstimate> {
        if agg.count() == 0 {
            return Err(Error::input("reports", 0, "at least 1 report"));
        }
        let est = agg.estimate();
        if est.frequencies.len() != self.domain() {
            return Err(Error::Incompatible(format!(
                "an OUE aggregator over {} values, expected {}",
                est.frequencies.len(),
                self.domain()
            )));
        }
        Ok(FlatEstimate::new(est.frequencies, agg.count() as usize, self.oracle.pure_params()))
    }
}

/// A device: its bin x < D through OUE.
impl Randomizer for FlatOue {
    type Input = usize;
    type Report = UnaryReport;

    fn randomize(&self, x: &usize, rng: &mut dyn Rng) -> Result<UnaryReport> {
        if *x >= self.domain() {
            return Err(Error::input("bin", x, format!("< the number of bins {}", self.domain())));
        }
        Ok(self.oracle.randomize_unchecked(*x, rng))
    }
    fn validate(&self, r: &UnaryReport) -> Result<()> {
        self.oracle.validate_report(r)
    }
}

impl FlatEstimate {
    fn new(freqs: Vec<f64>, n: usize, params: PureParams) -> Self {
        let mut prefix = vec![0.0; freqs.len() + 1];
        for (i, f) in freqs.iter().enumerate() {
            prefix[i + 1] = prefix[i] + f;
        }
        FlatEstimate { n: n as f64, params, freqs, prefix }
    }
    /// The unbiased per-bin estimates.
    pub fn freqs(&self) -> &[f64] {
        &self.freqs
    }
}

impl RangeEstimator for FlatEstimate {
    fn domain(&self) -> usize {
        self.freqs.len()
    }
    #[inline]
    fn range_unchecked(&self, a: usize, b: usize) -> f64 {
        self.prefix[b] - self.prefix[a]
    }
    fn range_variance_cum(&self, a: usize, b: usize, cum: &[f64]) -> VarianceParts {
        let m = mass(cum, a, b);
        let k = (b - a) as f64;
        let pq = &self.params;
        let (v0, v1) = (pq.report_variance(false), pq.report_variance(true));
        VarianceParts { noise: (k * v0 + m * (v1 - v0)) / self.n, split: 0.0 }
    }
    fn plug_in_freqs(&self) -> Vec<f64> {
        normalize_plug_in(self.freqs.clone())
    }
}
