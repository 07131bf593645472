//! Frequency oracles over a categorical domain [0, d).
//!
//! | oracle | name | report | one-report variance (x ≠ v, f_v = 0) | aggregation |
//! |---|---|---|---|---|
//! | [`Grr`] | `grr` | category | (d − 2 + e^ε)/(e^ε − 1)² | O(n + d) |
//! | [`Sue`] | `sue` | d bits | e^(ε/2)/(e^(ε/2) − 1)² | O(nd/64), bit-sliced |
//! | [`Oue`] | `oue` | d bits | 4e^ε/(e^ε − 1)² | O(nd/64), bit-sliced |
//! | [`Olh`] | `olh` | seed + hash value | (e^ε − 1 + g)²/((e^ε − 1)²(g − 1)) | O(nd), vectorised |
//! | [`Hadamard`] | `hadamard` | row + 1 bit | c² = ((e^ε + 1)/(e^ε − 1))² | O(n + K log K) |
//! | [`HadamardResponse`] | `hr` | output in \[K\] | 2D/(e^ε − 1)² (block-mass term added) | O(n + K log b) |
//! | [`BassilySmith`] | `bassily-smith` | row + 1 bit | c² − ⟨Φ_x, Φ_v⟩², **biased** baseline | O(n + md) |
//! | [`Auto`] | `adaptive` | the chosen oracle's | the smallest of the registered oracles' | the chosen oracle's |
//! | [`Cms`] | `cms` | hash index + m bits | (m/(m−1))²(e^(ε/2)/(e^(ε/2) − 1)² + γ(1 − γ)) | O(nm/64 + dk) |
//! | [`Hcms`] | `hcms` | hash index + coefficient + 1 bit | (m/(m−1))²(c² − γ²) | O(n + km log m + dk) |
//! | [`Rappor`] | `rappor` | cohort + m Bloom bits | regression (see [`rappor::decode`]) | O(nm/64 + d³) |
//! | [`SubsetSelection`] | `ss` | k of d bits | q(1 − q)/(p − q)², p = ke^ε/(ke^ε + d − k), q = (k − p)/(d − 1) | O(nd/64), bit-sliced |
//!
//! The sketches (CMS, HCMS: γ = the fraction of the k hash rows where x and v collide; RAPPOR)
//! also take arbitrary u64 items and estimate any candidate list. [`AnyOracle`] picks an oracle
//! by name at run time (parameters as `cms:k=256:m=1024`); every oracle is registered in
//! [`any`] and implements [`Registered`]; [`fwht`] is the shared
//! Walsh–Hadamard transform, [`sketch_hash`] the sketches' universal hash family.
//!
//! Each oracle is an immutable struct of precomputed constants (client side, `randomize`) with a
//! mergeable aggregator next to it (server side). Estimates are unbiased fractions; standard
//! errors use the exact aggregate variance including the f_v term (docs/MECHANISMS.md §0), with the
//! estimate plugged in for the unknown f_v (clamped to [0, 1]).

pub mod adaptive;
pub mod any;
pub mod auto;
pub mod bassily_smith;
pub mod cms;
pub mod fwht;
pub mod grr;
pub mod hadamard;
pub mod hcms;
pub mod hr;
pub mod olh;
pub mod rappor;
pub mod registry;
pub mod rows;
pub mod sketch_hash;
pub mod subset;
pub mod unary;

pub use adaptive::{Adaptive, AdaptiveAggregator, AdaptiveReport};
pub use any::{
    AnyAggregator, AnyOracle, AnyReport, FREQUENCY_NAMES, ORACLES, OracleInfo, OracleKind, REPORT_KINDS, SKETCH_NAMES,
};
pub use auto::{Auto, AutoAggregator, AutoReport};
pub use bassily_smith::{BassilySmith, BassilySmithAggregator, BassilySmithReport};
pub use cms::{Cms, CmsAggregator, CmsReport};
pub use grr::{Grr, GrrAggregator, GrrReport};
pub use hadamard::{Hadamard, HadamardAggregator, HadamardReport};
pub use hcms::{Hcms, HcmsAggregator, HcmsReport};
pub use hr::{HadamardResponse, HrAggregator, HrReport};
pub use olh::{Olh, OlhAggregator, OlhReport};
pub use rappor::{Rappor, RapporAggregator, RapporMemo, RapporParams, RapporReport, RapporShape};
pub use registry::{Params, Registered};
pub use rows::PackedRows;
pub use subset::{SsAggregator, SsReport, SubsetSelection};
pub use unary::{Oue, Sue, UnaryAggregator, UnaryEncoding, UnaryKind, UnaryReport};

use crate::aggregate::Aggregator;
use crate::error::Result;
use crate::estimate::FrequencyEstimate;
use crate::params::{Epsilon, check_category};
use rand::Rng;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A locally private frequency oracle over the domain [0, d).
pub trait FrequencyOracle: std::fmt::Debug + Clone + PartialEq + Send + Sync {
    /// The report one user sends.
    type Report: std::fmt::Debug + Clone + PartialEq + Serialize + DeserializeOwned + Send + Sync;
    /// The server-side accumulator.
    type Aggregator: Aggregator<Report = Self::Report, Output = FrequencyEstimate>;

    /// Name used in the CLI and JSON (`grr`, `oue`, `olh`, ...).
    fn name(&self) -> &'static str;
    /// The privacy budget.
    fn epsilon(&self) -> Epsilon;
    /// Domain size d.
    fn domain_size(&self) -> usize;
    /// Randomizes category v (checked by the caller to be < d).
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> Self::Report;
    /// Checks a report against the oracle's constants (index ranges, lengths, branch) without
    /// an aggregator; the aggregator's `validate` checks the same.
    fn validate_report(&self, report: &Self::Report) -> Result<()>;
    /// An empty aggregator.
    fn aggregator(&self) -> Self::Aggregator;
    /// Variance of one report's unbiased estimate of f_v when the user holds x.
    fn report_variance(&self, x: usize, v: usize) -> f64;
    /// The largest one-report variance over (x, v).
    fn worst_case_variance(&self) -> f64;

    /// Randomizes category v; an error if v ≥ d.
    fn randomize<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> Result<Self::Report> {
        check_category(v, self.domain_size())?;
        Ok(self.randomize_unchecked(v, rng))
    }
    /// Randomizes a batch into `out` (appended); validates every input first (all or nothing).
    fn randomize_batch<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<Self::Report>) -> Result<()> {
        check_batch(vs, self.domain_size())?;
        out.reserve(vs.len());
        out.extend(vs.iter().map(|&v| self.randomize_unchecked(v, rng)));
        Ok(())
    }
    /// n·Var(f̂_v) when a fraction `freqs[x]` of the users holds x: Σ_x freqs\[x\]·Var(Y_v | x).
    /// Exact (the f_v term included). Oracles override it with their closed form, which assumes
    /// the fractions sum to 1.
    fn aggregate_variance(&self, freqs: &[f64], v: usize) -> f64 {
        freqs.iter().enumerate().map(|(x, &f)| f * self.report_variance(x, v)).sum()
    }

    /// Σ_x freqs\[x\]·E\[Y_a·Y_b | x\] for items a ≠ b (Y_v the one-report estimate of f_v, see
    /// [`report_estimate`](Self::report_estimate)), so that n·Cov(f̂_a, f̂_b) = this (the
    /// 1\[x = a\]·1\[x = b\] term is 0): the covariance a ratio of frequencies needs (the
    /// present-value frequencies of an attribute that reports missing values). `None` where no
    /// closed form is implemented. Pure oracles with independent supports (unary encodings) and
    /// the 1-bit Hadamard oracle (orthogonal rows): 0. OLH has none: its hash family is only
    /// pairwise independent, and two items' supports are correlated through the holder's hash
    /// (+0.21 against 0 for ideal hashing at ε = 1, d = 3: `frequency::any` tests).
    fn aggregate_cross_moment(&self, _freqs: &[f64], _a: usize, _b: usize) -> Option<f64> {
        None
    }

    /// The one-report estimate Y of f_v carried by a (valid) report: the aggregate estimate is
    /// the mean of Y over the reports, E[Y | x] = 1[x = v] (for the unbiased oracles) and
    /// Var(Y | x) = [`report_variance`](Self::report_variance)`(x, v)`. Multi-attribute
    /// strategies scale it per report.
    ///
    /// The default builds a one-report aggregator (O(d)); every oracle here overrides it with
    /// an O(1) form. The report must have passed the aggregator's `validate`.
    fn report_estimate(&self, report: &Self::Report, v: usize) -> f64 {
        let mut a = self.aggregator();
        a.add_unchecked(report);
        a.estimate().frequencies[v]
    }
}

/// A "pure" oracle (Wang et al. 2017): a report supports v with probability p* if x = v and q*
/// otherwise. Its variance is determined by (p*, q*).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PureParams {
    /// P[report supports v | x = v].
    pub p: f64,
    /// P[report supports v | x ≠ v].
    pub q: f64,
}

impl PureParams {
    /// One-report variance of (1[supports v] − q)/(p − q).
    pub fn report_variance(&self, holds_v: bool) -> f64 {
        let s = if holds_v { self.p } else { self.q };
        s * (1.0 - s) / ((self.p - self.q) * (self.p - self.q))
    }
    /// The largest one-report variance, over whether the device holds v.
    pub fn worst_case_variance(&self) -> f64 {
        self.report_variance(true).max(self.report_variance(false))
    }
    /// n·Var(f̂_v) = Var* + f_v (1 − p − q)/(p − q).
    pub fn aggregate_variance(&self, f_v: f64) -> f64 {
        self.report_variance(false) + f_v * (1.0 - self.p - self.q) / (self.p - self.q)
    }
    /// Builds the estimate from support counts: f̂_v = (C(v)/n − q)/(p − q), with plug-in
    /// standard errors.
    pub fn estimate_from_counts<I: IntoIterator<Item = f64>>(&self, n: u64, counts: I) -> FrequencyEstimate {
        let nf = n as f64;
        let frequencies: Vec<f64> = if n == 0 {
            counts.into_iter().map(|_| 0.0).collect()
        } else {
            counts.into_iter().map(|c| (c / nf - self.q) / (self.p - self.q)).collect()
        };
        let std_errors =
            frequencies
                .iter()
                .map(|&f| {
                    if n == 0 {
                        f64::INFINITY
                    } else {
                        (self.aggregate_variance(f.clamp(0.0, 1.0)).max(0.0) / nf).sqrt()
                    }
                })
                .collect();
        FrequencyEstimate { n, frequencies, std_errors }
    }
}

/// The state of a (row index j, sign bit) oracle's aggregator — 1-bit Hadamard and
/// Bassily–Smith: the signed sum of the bits reported for each row, and the report count.
#[derive(Debug, Clone, PartialEq)]
pub struct SignedRowSums {
    /// Σ ±1 per row.
    pub sums: Vec<i64>,
    /// Number of reports.
    pub n: u64,
}

impl SignedRowSums {
    /// Zero sums for `rows` rows.
    pub fn new(rows: usize) -> Self {
        SignedRowSums { sums: vec![0; rows], n: 0 }
    }
    /// Checks a row index.
    pub fn validate(&self, j: u32) -> Result<()> {
        if j as usize >= self.sums.len() {
            return Err(crate::error::Error::report("j", j, format!("a row index in [0, {})", self.sums.len())));
        }
        Ok(())
    }
    /// Adds one report (row checked by [`validate`](Self::validate)).
    #[inline]
    pub fn add(&mut self, j: u32, bit: bool) {
        self.sums[j as usize] += if bit { 1 } else { -1 };
        self.n += 1;
    }
    /// Adds one report `times` times.
    pub fn add_times(&mut self, j: u32, bit: bool, times: u64) {
        let t = times as i64;
        self.sums[j as usize] += if bit { t } else { -t };
        self.n += times;
    }
    /// Adds another state of the same size.
    pub fn merge(&mut self, other: &Self) {
        self.sums.iter_mut().zip(&other.sums).for_each(|(a, b)| *a += b);
        self.n += other.n;
    }
}

/// Checks every input of a batch against [0, d); the error names the first bad index.
pub fn check_batch(vs: &[usize], d: usize) -> Result<()> {
    if let Some(i) = vs.iter().position(|&v| v >= d) {
        return Err(crate::error::Error::input(format!("category {i}"), vs[i], format!("an index in [0, {d})")));
    }
    Ok(())
}

impl crate::state::SaveState for SignedRowSums {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n);
        w.i64s(&self.sums);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> crate::error::Result<()> {
        self.n += r.u64("reports")?;
        r.add_i64s("signed sums", &mut self.sums)
    }
}
