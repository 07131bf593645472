//! Haar wavelet coefficients sent with the 1-bit Hadamard mechanism (Cormode, Kulkarni and
//! Srivastava, VLDB'19).
//!
//! The domain is padded to `D' = 2^h`. Users are split at random into `h` groups; a user of
//! level `l ∈ 1..=h` holds a signed one-hot vector over the `2^(l−1)` level-l nodes (each of
//! `D'/2^(l−1)` bins): position `x >> (h − l + 1)`, sign +1 if x lies in the node's left half,
//! else −1. Its mean over users is the Haar coefficient `C_l[v]` = mass(left half of v) −
//! mass(right half of v).
//!
//! # Privacy
//! The device draws its level uniformly and independently of x ([`Randomizer`] impl), so the
//! level costs no privacy. It randomizes its position with the 1-bit Hadamard oracle at the full ε and multiplies
//! the sent sign by its own sign. For every input (position, sign) the report is distributed as
//! the oracle's report for the position with the bit relabelled, so each output's probability is
//! `e^ε/((e^ε+1)K)` or `1/((e^ε+1)K)`: the ratio between any two inputs is at most `e^ε`.
//!
//! # Utility
//! `P̂(t) = t/D' + Σ_l w_l(t) Ĉ_l[v_l(t)]`, with `w_l = min(off, size − off)/size ≤ 1/2` (off
//! the position of t in its level-l node). A range is `P̂(b) − P̂(a)`: per level a combination
//! `Σ_v α_v Ĉ_l[v]` of at most two coefficients. The oracle's per-report estimates of distinct
//! positions are uncorrelated, so its noise is exactly `Σ_v α_v² (c² − μ_v)/n_l` (μ_v the mass of
//! node v, c = (e^ε+1)/(e^ε−1)), plus the sampling error of the split
//! ([`split_variance_levels`](super::split_variance_levels), with `σ_ll` from the coefficients'
//! nodes: O(h) per range).
//!
//! # Reports
//! [`HaarReport`]: the level (1 byte), the Hadamard row j and the sign; wire kind 21, 4–7 bytes
//! encoded whatever D.

use super::{
    RangeEstimator, VarianceParts, assign_groups, check_values, mass, normalize_plug_in, split_sizes,
    split_variance_levels,
};
use harmony_core::aggregate::check_compatible;
use harmony_core::frequency::{Hadamard, HadamardAggregator, HadamardReport};
use harmony_core::sampling::uniform_below;
use harmony_core::wire::{self, WireKind, WireReport};
use harmony_core::{Aggregator, Error, FrequencyOracle, Randomizer, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The Haar collection over `[0, D)` (padded to a power of two).
#[derive(Debug, Clone, PartialEq)]
pub struct Haar {
    d: usize,
    h: usize,
    levels: Vec<Hadamard>,
}

/// The server's estimate of a Haar collection: coefficients and the prefix function.
#[derive(Debug, Clone, PartialEq)]
pub struct HaarEstimate {
    d: usize,
    h: usize,
    n: f64,
    sizes: Vec<f64>,
    c2: f64,
    coefs: Vec<Vec<f64>>,
    prefix: Vec<f64>,
}

impl Haar {
    /// The Haar collection with budget `epsilon` over `[0, d)`. Errors: ε not finite and > 0,
    /// d < 2.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        if d < 2 {
            return Err(Error::param("d", d, "an integer >= 2 (the domain size)"));
        }
        let h = d.next_power_of_two().trailing_zeros() as usize;
        let levels = (1..=h).map(|l| Hadamard::new(epsilon, (1usize << (l - 1)).max(2))).collect::<Result<_>>()?;
        Ok(Haar { d, h, levels })
    }
    /// The domain size D.
    pub fn domain(&self) -> usize {
        self.d
    }
    /// The number of levels h = log2 D' (one group of users each).
    pub fn levels(&self) -> usize {
        self.h
    }
    /// One user's report at level `l ∈ 1..=h` (devices draw l themselves:
    /// [`Randomizer::randomize`]). Errors: x ≥ D, l outside 1..=h.
    pub fn randomize_at<R: Rng + ?Sized>(&self, x: usize, l: usize, rng: &mut R) -> Result<HaarReport> {
        if x >= self.d {
            return Err(Error::input("x", x, format!("< the domain size {}", self.d)));
        }
        if l == 0 || l > self.h {
            return Err(Error::input("level", l, format!("in 1..={}", self.h)));
        }
        Ok(HaarReport { level: l as u8, report: self.randomize_unchecked(x, l, rng) })
    }
    #[inline]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, x: usize, l: usize, rng: &mut R) -> HadamardReport {
        let pos = x >> (self.h - l + 1);
        let negative = (x >> (self.h - l)) & 1 == 1;
        let mut r = self.levels[l - 1].randomize_unchecked(pos, rng);
        r.bit ^= negative;
        r
    }
    /// Simulates a collection: users split at random across the levels, randomized and
    /// aggregated. Errors: no values, a value ≥ D, fewer users than levels.
    pub fn collect<R: Rng + ?Sized>(&self, values: &[usize], rng: &mut R) -> Result<HaarEstimate> {
        check_values(values, self.d)?;
        if values.len() < self.h {
            return Err(Error::input("values", values.len(), format!("at least {} users (one per level)", self.h)));
        }
        let groups = assign_groups(values.len(), self.h, rng);
        let mut agg = self.aggregator();
        for (&x, &g) in values.iter().zip(&groups) {
            let l = g as usize + 1;
            let r = self.randomize_unchecked(x, l, rng);
            agg.levels[l - 1].add_unchecked(&r);
        }
        debug_assert_eq!(agg.counts(), split_sizes(values.len(), self.h).iter().map(|&s| s as u64).collect::<Vec<_>>());
        agg.estimate()
    }
    /// The largest encoded report (bytes, wire header included): the deepest level's last row.
    pub fn max_report_bytes(&self) -> usize {
        let j = (self.levels[self.h - 1].rows() - 1) as u32;
        wire::encode(&HaarReport { level: self.h as u8, report: HadamardReport { j, bit: true } }).len()
    }
    /// An empty, mergeable server-side accumulator.
    pub fn aggregator(&self) -> HaarAggregator {
        HaarAggregator { haar: self.clone(), levels: self.levels.iter().map(|o| o.aggregator()).collect() }
    }
}

/// One device's report: its level and its signed position through the level's 1-bit Hadamard
/// oracle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HaarReport {
    /// The level l ∈ 1..=h, drawn by the device.
    pub level: u8,
    /// The level oracle's report (row j < K_l, sign bit).
    pub report: HadamardReport,
}

impl WireReport for HaarReport {
    const KIND: WireKind = WireKind { byte: 21, name: "HaarReport" };
}

/// Checks a report's level against h; the error names the field.
fn check_level(level: u8, h: usize) -> Result<usize> {
    let l = level as usize;
    if l == 0 || l > h {
        return Err(Error::report("level", level, format!("a level in 1..={h}")));
    }
    Ok(l)
}

/// A device: draws its level l uniformly from `rng` (independently of x), then sends its
/// signed level-l position. Input: the device's bin x < D.
impl Randomizer for Haar {
    type Input = usize;
    type Report = HaarReport;

    fn randomize(&self, x: &usize, rng: &mut dyn Rng) -> Result<HaarReport> {
        if *x >= self.d {
            return Err(Error::input("bin", x, format!("< the number of bins {}", self.d)));
        }
        let l = 1 + uniform_below(rng, self.h as u64) as usize;
        Ok(HaarReport { level: l as u8, report: self.randomize_unchecked(*x, l, rng) })
    }
    fn validate(&self, r: &HaarReport) -> Result<()> {
        let l = check_level(r.level, self.h)?;
        self.levels[l - 1].validate_report(&r.report)
    }
}

/// The server side of a Haar collection: one 1-bit Hadamard aggregator per level (exact integer
/// sums). Mergeable.
#[derive(Debug, Clone)]
pub struct HaarAggregator {
    haar: Haar,
    levels: Vec<HadamardAggregator>,
}

impl HaarAggregator {
    /// Reports per level (the realized group sizes).
    pub fn counts(&self) -> Vec<u64> {
        self.levels.iter().map(|a| a.count()).collect()
    }
}

impl Aggregator for HaarAggregator {
    type Report = HaarReport;
    /// The estimate, or an error while a level has no report.
    type Output = Result<HaarEstimate>;

    fn validate(&self, r: &HaarReport) -> Result<()> {
        let l = check_level(r.level, self.levels.len())?;
        self.levels[l - 1].validate(&r.report)
    }
    fn add_unchecked(&mut self, r: &HaarReport) {
        self.levels[r.level as usize - 1].add_unchecked(&r.report);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("Haar collections", &self.haar, &other.haar)?;
        self.levels.iter_mut().zip(&other.levels).try_for_each(|(a, b)| a.merge(b))
    }
    fn count(&self) -> u64 {
        self.levels.iter().map(|a| a.count()).sum()
    }
    /// The estimate with the realized level sizes. Errors: a level without reports.
    fn estimate(&self) -> Result<HaarEstimate> {
        if let Some(l) = self.levels.iter().position(|a| a.count() == 0) {
            return Err(Error::input(format!("level {} reports", l + 1), 0, "at least 1 report per level"));
        }
        let sizes: Vec<f64> = self.levels.iter().map(|a| a.count() as f64).collect();
        let n = sizes.iter().sum();
        let coefs = self.levels.iter().map(|a| a.estimate().frequencies).collect();
        let h = &self.haar;
        Ok(HaarEstimate::new(h.d, h.h, n, sizes, h.levels[0].c(), coefs))
    }
}

impl HaarEstimate {
    pub(crate) fn new(d: usize, h: usize, n: f64, sizes: Vec<f64>, c: f64, coefs: Vec<Vec<f64>>) -> Self {
        let dp = 1usize << h;
        let mut est = HaarEstimate { d, h, n, sizes, c2: c * c, coefs, prefix: Vec::new() };
        est.prefix = (0..=d)
            .map(|t| {
                let mut p = t as f64 / dp as f64;
                for l in 1..=h {
                    let (v, w) = est.weight(t, l);
                    if w != 0.0 {
                        p += w * est.coefs[l - 1][v];
                    }
                }
                p
            })
            .collect();
        est
    }
    /// The level-l node containing t and the weight `min(off, size − off)/size`.
    #[inline]
    fn weight(&self, t: usize, l: usize) -> (usize, f64) {
        let size = (1usize << self.h) >> (l - 1);
        let off = t % size;
        (t / size, off.min(size - off) as f64 / size as f64)
    }
    /// The estimated Haar coefficients, level by level (`2^(l−1)` at level l).
    pub fn coefficients(&self) -> &[Vec<f64>] {
        &self.coefs
    }
    /// The number of levels h.
    pub fn levels(&self) -> usize {
        self.h
    }
}

impl RangeEstimator for HaarEstimate {
    fn domain(&self) -> usize {
        self.d
    }
    #[inline]
    fn range_unchecked(&self, a: usize, b: usize) -> f64 {
        self.prefix[b] - self.prefix[a]
    }
    /// Per level at most two coefficients: `α_v` of node v (at t = a and t = b), with noise
    /// `α_v²(c² − μ_v)/n_l` and, for the split term, `E[z_l²] = Σ_v α_v² μ_v`,
    /// `E[z_l] = Σ_v α_v (μ_left(v) − μ_right(v))`.
    fn range_variance_cum(&self, a: usize, b: usize, cum: &[f64]) -> VarianceParts {
        let mut noise = 0.0;
        let mut sigma = Vec::with_capacity(self.h);
        for l in 1..=self.h {
            let size = (1usize << self.h) >> (l - 1);
            let (va, wa) = self.weight(a, l);
            let (vb, wb) = self.weight(b, l);
            let alpha = if va == vb { [(va, wb - wa), (0, 0.0)] } else { [(va, -wa), (vb, wb)] };
            let (mut ez2, mut ez) = (0.0, 0.0);
            for (v, al) in alpha {
                if al == 0.0 {
                    continue;
                }
                let (lo, mid, hi) = (v * size, v * size + size / 2, (v + 1) * size);
                let mu = mass(cum, lo, hi);
                noise += al * al * (self.c2 - mu) / self.sizes[l - 1];
                ez2 += al * al * mu;
                ez += al * (mass(cum, lo, mid) - mass(cum, mid, hi));
            }
            sigma.push(ez2 - ez * ez);
        }
        VarianceParts { noise, split: split_variance_levels(&sigma, &self.sizes, self.n, mass(cum, a, b)) }
    }
    fn plug_in_freqs(&self) -> Vec<f64> {
        normalize_plug_in((0..self.d).map(|t| self.prefix[t + 1] - self.prefix[t]).collect())
    }
}

impl harmony_core::state::SaveState for HaarAggregator {
    fn save_state(&self, w: &mut harmony_core::state::StateWriter<'_>) {
        harmony_core::state::save_all(w, &self.levels);
    }
    fn merge_state(&mut self, r: &mut harmony_core::state::StateReader<'_>) -> Result<()> {
        harmony_core::state::merge_all(r, "haar levels", &mut self.levels)
    }
}
