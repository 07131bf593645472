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
//! The user randomizes its position with the 1-bit Hadamard oracle at the full ε and multiplies
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
//! ([`split_variance`](super::split_variance)).

use super::{
    RangeEstimator, VarianceParts, assign_groups, check_values, normalize_plug_in, split_sizes, split_variance,
};
use harmony_core::frequency::{Hadamard, HadamardAggregator, HadamardReport};
use harmony_core::{Aggregator, Error, FrequencyOracle, Result};
use rand::Rng;

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
    /// One user's report at level `l ∈ 1..=h` (the level may come from public randomness).
    /// Errors: x ≥ D, l outside 1..=h.
    pub fn randomize<R: Rng + ?Sized>(&self, x: usize, l: usize, rng: &mut R) -> Result<HadamardReport> {
        if x >= self.d {
            return Err(Error::input("x", x, format!("< the domain size {}", self.d)));
        }
        if l == 0 || l > self.h {
            return Err(Error::input("level", l, format!("in 1..={}", self.h)));
        }
        Ok(self.randomize_unchecked(x, l, rng))
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
    /// An empty, mergeable server-side accumulator.
    pub fn aggregator(&self) -> HaarAggregator {
        HaarAggregator { haar: self.clone(), levels: self.levels.iter().map(|o| o.aggregator()).collect() }
    }
}

/// The server side of a Haar collection: one 1-bit Hadamard aggregator per level. Mergeable.
#[derive(Debug, Clone)]
pub struct HaarAggregator {
    haar: Haar,
    levels: Vec<HadamardAggregator>,
}

impl HaarAggregator {
    /// Adds a report of level `l ∈ 1..=h`. Errors: a bad level, a row index out of range.
    pub fn add(&mut self, l: usize, report: &HadamardReport) -> Result<()> {
        if l == 0 || l > self.levels.len() {
            return Err(Error::report("level", l, format!("in 1..={}", self.levels.len())));
        }
        self.levels[l - 1].add(report)
    }
    /// Combines another aggregator of the same collection. Errors: a different collection.
    pub fn merge(&mut self, other: &Self) -> Result<()> {
        if self.haar != other.haar {
            return Err(Error::Incompatible("Haar aggregators of different collections".into()));
        }
        self.levels.iter_mut().zip(&other.levels).try_for_each(|(a, b)| a.merge(b))
    }
    /// Reports per level.
    pub fn counts(&self) -> Vec<u64> {
        self.levels.iter().map(|a| a.count()).collect()
    }
    /// The estimate. Errors: a level without reports. The closed-form variance assumes the users
    /// were split at random into groups of these sizes.
    pub fn estimate(&self) -> Result<HaarEstimate> {
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
    fn range_variance_parts(&self, a: usize, b: usize, freqs: &[f64]) -> VarianceParts {
        let mut noise = 0.0;
        let mut z = vec![vec![0.0; self.d]; self.h];
        for l in 1..=self.h {
            let size = (1usize << self.h) >> (l - 1);
            let (va, wa) = self.weight(a, l);
            let (vb, wb) = self.weight(b, l);
            let mut alpha: Vec<(usize, f64)> = Vec::with_capacity(2);
            if va == vb {
                alpha.push((va, wb - wa));
            } else {
                alpha.push((va, -wa));
                alpha.push((vb, wb));
            }
            for &(v, al) in &alpha {
                if al == 0.0 {
                    continue;
                }
                let (lo, hi) = ((v * size).min(self.d), ((v + 1) * size).min(self.d));
                let mu: f64 = freqs[lo..hi].iter().sum();
                noise += al * al * (self.c2 - mu) / self.sizes[l - 1];
                let mid = v * size + size / 2;
                for (x, zx) in z[l - 1].iter_mut().enumerate().take(hi).skip(lo) {
                    *zx = if x < mid { al } else { -al };
                }
            }
        }
        VarianceParts { noise, split: split_variance(&z, freqs, self.n, &self.sizes) }
    }
    fn plug_in_freqs(&self) -> Vec<f64> {
        normalize_plug_in((0..self.d).map(|t| self.prefix[t + 1] - self.prefix[t]).collect())
    }
}
