//! Range queries, the CDF and quantiles over an ordered attribute discretized to `[0, D)`.
//!
//! Three collections, each estimating every range `[a, b)` with a closed-form variance:
//!
//! - [`hierarchy`]: hierarchical histograms with branching `B` (users split across the
//!   `h = ⌈log_B D⌉` levels, each level reported with the adaptive GRR/OUE oracle over its
//!   `B^l` nodes) and Hay et al.'s constrained inference for consistency;
//! - [`haar`]: Haar wavelet coefficients (users split across the `log2 D` levels), each level's
//!   signed one-hot coefficient sent with the 1-bit Hadamard mechanism;
//! - [`flat`]: every user reports its bin with OUE over `D` (the baseline).
//!
//! # Utility
//! An estimate of `[a, b)` is a sum over groups `l` of group means: `Σ_l (1/n_l) Σ_{i∈G_l}
//! Y_{l,i}` with `E[Y_{l,i} | x_i] = z_l(x_i)`. Its variance is exact:
//! `Σ_l E[noise_l] + Var_split`, where the noise term is the oracle's (f-dependent) variance and
//! `Var_split` the sampling error of splitting users at random into groups of sizes `n_l`
//! (finite-population correction, see [`split_variance`]; O(h) per range by
//! [`split_variance_levels`]). Methods whose answer depends on the true frequencies take them as
//! an argument: the truth gives the predicted variance, the plug-in estimate the reported
//! standard error.
//!
//! # Groups chosen by devices
//! A device draws its group (level) uniformly from its own RNG, independently of its value, and
//! writes it in its report ([`HhReport`], [`HaarReport`] through [`Randomizer`]). The server
//! counts the reports of each level: the realized sizes `n_l`. Conditional on those counts every
//! assignment of the n devices to levels with these counts is equally likely (each has
//! probability `h^−n`), so the groups are a uniformly random partition with sizes `n_l` and the
//! variance above holds with the realized sizes; the estimate is unbiased given that every level
//! has a report (until then there is no estimate). `collect` (the in-process simulations) splits
//! users into groups of fixed, balanced sizes instead, a special case of the same formula.
//!
//! [`Randomizer`]: harmony_core::Randomizer
//!
//! Answers come from precomputed prefix sums: O(1) per range (O(h) for raw hierarchical
//! estimates).
//!
//! # Example
//! ```
//! use harmony_analytics::range::{Haar, RangeEstimator, Z95};
//! use harmony_core::sampling::fast_rng;
//!
//! let values: Vec<usize> = (0..20_000).map(|i| (i * 7) % 50).collect(); // bins 0..50
//! let mut rng = fast_rng(7);
//! let est = Haar::new(1.0, 50).unwrap().collect(&values, &mut rng).unwrap();
//! let ans = est.range_with_se(10, 20).unwrap(); // truth: 0.2
//! assert!((ans.estimate - 0.2).abs() < 5.0 * ans.std_error);
//! let median = est.cdf().quantile(0.5, Z95).unwrap();
//! assert!(median.lower <= median.bin && median.bin <= median.upper);
//! ```

use harmony_core::{Error, Result};
use rand::Rng;

pub mod flat;
pub mod grid2d;
pub mod haar;
pub mod hierarchy;

pub use flat::{FlatEstimate, FlatOue};
pub use grid2d::{Grid2d, GridAnswers};
pub use haar::{Haar, HaarAggregator, HaarEstimate, HaarReport};
pub use hierarchy::{HhAggregator, HhEstimate, HhReport, Hierarchy, RawHh, choose_branching, random_range};

/// z for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// An estimate with its standard error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeAnswer {
    /// The unbiased estimate (a fraction of users).
    pub estimate: f64,
    /// Its standard error.
    pub std_error: f64,
}

/// Checks a range `[a, b)` over `[0, d)`: `a ≤ b ≤ d`.
pub fn check_range(a: usize, b: usize, d: usize) -> Result<()> {
    if b > d {
        return Err(Error::input("range end b", b, format!("<= the domain size {d}")));
    }
    if a > b {
        return Err(Error::input("range start a", a, format!("<= the range end b = {b}")));
    }
    Ok(())
}

/// Checks a quantile level: `0 < q < 1`.
pub fn check_quantile(q: f64) -> Result<()> {
    if !(q > 0.0 && q < 1.0) {
        return Err(Error::input("quantile q", q, "in (0, 1)"));
    }
    Ok(())
}

/// Checks encoded values against the domain: non-empty, each `< d`.
pub fn check_values(values: &[usize], d: usize) -> Result<()> {
    if values.is_empty() {
        return Err(Error::input("values", "[] (no users)", "at least one value"));
    }
    if let Some((i, &v)) = values.iter().enumerate().find(|&(_, &v)| v >= d) {
        return Err(Error::input(format!("values[{i}]"), v, format!("< the domain size {d}")));
    }
    Ok(())
}

/// A range estimate's variance: the oracles' noise (expected over the split) and the sampling
/// error of splitting users across groups.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VarianceParts {
    /// `Σ_l E[noise_l]`.
    pub noise: f64,
    /// `Var_split` (0 when every user reports to one group).
    pub split: f64,
}

/// What every range collection's estimate answers.
pub trait RangeEstimator {
    /// The domain size D (bins `0..D`).
    fn domain(&self) -> usize;
    /// The estimate of the fraction of users in `[a, b)`, without checks (`a ≤ b ≤ D`).
    fn range_unchecked(&self, a: usize, b: usize) -> f64;
    /// The exact variance of the `[a, b)` estimate, in its two parts, when the population's
    /// cumulative bin fractions are `cum` (length D + 1: `cum[t] = Σ_{v<t} f_v`, see
    /// [`cumulative`]). O(h) per range (hh: O(h·B)), so a whole CDF costs O(D·h).
    fn range_variance_cum(&self, a: usize, b: usize, cum: &[f64]) -> VarianceParts;
    /// A plug-in estimate of the bin fractions (clamped to ≥ 0, normalized), for standard errors.
    fn plug_in_freqs(&self) -> Vec<f64>;

    /// The exact variance of the `[a, b)` estimate when the population's bin fractions are
    /// `freqs` (length D, summing to 1), in its two parts. O(D): prefer
    /// [`range_variance_cum`](Self::range_variance_cum) for many ranges.
    fn range_variance_parts(&self, a: usize, b: usize, freqs: &[f64]) -> VarianceParts {
        self.range_variance_cum(a, b, &cumulative(freqs))
    }
    /// The exact variance of the `[a, b)` estimate (noise + split sampling).
    fn range_variance(&self, a: usize, b: usize, freqs: &[f64]) -> f64 {
        let p = self.range_variance_parts(a, b, freqs);
        p.noise + p.split
    }
    /// The estimate of `[a, b)`; errors name a bad bound.
    fn range(&self, a: usize, b: usize) -> Result<f64> {
        check_range(a, b, self.domain())?;
        Ok(self.range_unchecked(a, b))
    }
    /// The estimate of `[a, b)` with its plug-in standard error.
    fn range_with_se(&self, a: usize, b: usize) -> Result<RangeAnswer> {
        check_range(a, b, self.domain())?;
        Ok(RangeAnswer {
            estimate: self.range_unchecked(a, b),
            std_error: self.range_variance(a, b, &self.plug_in_freqs()).max(0.0).sqrt(),
        })
    }
    /// The CDF `F(t) = P[x < t]`, `t = 0..=D`, with plug-in standard errors. O(D·h).
    fn cdf(&self) -> Cdf {
        let d = self.domain();
        let cum = cumulative(&self.plug_in_freqs());
        let values = (0..=d).map(|t| self.range_unchecked(0, t)).collect();
        let std_errors = (0..=d)
            .map(|t| {
                let p = self.range_variance_cum(0, t, &cum);
                (p.noise + p.split).max(0.0).sqrt()
            })
            .collect();
        Cdf { values, std_errors }
    }
}

/// The cumulative sums of bin fractions: `cum[t] = Σ_{v<t} f_v`, `t = 0..=D`.
pub fn cumulative(freqs: &[f64]) -> Vec<f64> {
    let mut cum = Vec::with_capacity(freqs.len() + 1);
    let mut acc = 0.0;
    cum.push(acc);
    for f in freqs {
        acc += f;
        cum.push(acc);
    }
    cum
}

/// The bin fractions' mass of `[lo, hi)` from their cumulative sums, with both ends clipped to
/// the domain (padding bins beyond D hold no users).
#[inline]
pub(crate) fn mass(cum: &[f64], lo: usize, hi: usize) -> f64 {
    let d = cum.len() - 1;
    cum[hi.min(d)] - cum[lo.min(d)]
}

/// An estimated CDF over bins: `values[t]` estimates `P[x < t]` for `t = 0..=D`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cdf {
    /// `F̂(t)`, `t = 0..=D`.
    pub values: Vec<f64>,
    /// The standard error of each `F̂(t)`.
    pub std_errors: Vec<f64>,
}

/// A quantile as a bin, with an interval from inverting the CDF's pointwise band.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileEstimate {
    /// The level q.
    pub q: f64,
    /// The estimated bin: the smallest t with `F̂(t + 1) ≥ q`.
    pub bin: usize,
    /// The interval's lowest bin: the smallest t with `F̂(t + 1) + z·se ≥ q`.
    pub lower: usize,
    /// The interval's highest bin: the smallest t with `F̂(t + 1) − z·se ≥ q` (D − 1 if none).
    pub upper: usize,
}

impl Cdf {
    /// The q-quantile's bin and its interval at z (e.g. [`Z95`]). Errors: q outside (0, 1).
    pub fn quantile(&self, q: f64, z: f64) -> Result<QuantileEstimate> {
        check_quantile(q)?;
        if !(z >= 0.0 && z.is_finite()) {
            return Err(Error::param("z", z, "finite and >= 0"));
        }
        let d = self.values.len() - 1;
        let first =
            |shift: f64| (0..d).find(|&t| self.values[t + 1] + shift * self.std_errors[t + 1] >= q).unwrap_or(d - 1);
        Ok(QuantileEstimate { q, bin: first(0.0), lower: first(z), upper: first(-z) })
    }
}

/// The true q-quantile bin of exact fractions: the smallest t with `Σ_{v ≤ t} f_v ≥ q`.
pub fn true_quantile(freqs: &[f64], q: f64) -> usize {
    let mut acc = 0.0;
    for (t, &f) in freqs.iter().enumerate() {
        acc += f;
        if acc >= q - 1e-12 {
            return t;
        }
    }
    freqs.len() - 1
}

/// Group sizes when `n` users are split into `groups` groups as evenly as possible.
pub fn split_sizes(n: usize, groups: usize) -> Vec<usize> {
    (0..groups).map(|l| n / groups + usize::from(l < n % groups)).collect()
}

/// Assigns `n` users to `groups` groups uniformly at random with the sizes of
/// [`split_sizes`] (a random partition: a Fisher–Yates shuffle of the group labels).
pub fn assign_groups<R: Rng + ?Sized>(n: usize, groups: usize, rng: &mut R) -> Vec<u8> {
    assert!(groups <= u8::MAX as usize + 1, "at most 256 groups");
    let sizes = split_sizes(n, groups);
    let mut labels: Vec<u8> = Vec::with_capacity(n);
    for (l, &s) in sizes.iter().enumerate() {
        labels.extend(std::iter::repeat_n(l as u8, s));
    }
    for i in (1..n).rev() {
        let j = harmony_core::sampling::uniform_below(rng, (i + 1) as u64) as usize;
        labels.swap(i, j);
    }
    labels
}

/// The variance of `Σ_l mean_{i∈G_l} z_l(x_i)` over a uniformly random partition of `n` users
/// into groups of sizes `sizes` (sampling without replacement):
/// `Σ_l σ_ll (n − n_l)/(n_l (n − 1)) − Σ_{l≠m} σ_lm/(n − 1)`, with `σ_lm` the population
/// covariance (divisor n) of `z_l` and `z_m` under the bin fractions `freqs`.
/// `z[l]` is level l's function over bins. Empty groups contribute nothing.
pub fn split_variance(z: &[Vec<f64>], freqs: &[f64], n: f64, sizes: &[f64]) -> f64 {
    if n <= 1.0 {
        return 0.0;
    }
    let h = z.len();
    let means: Vec<f64> = z.iter().map(|zl| zl.iter().zip(freqs).map(|(a, f)| a * f).sum()).collect();
    let mut var = 0.0;
    for l in 0..h {
        if sizes[l] < 1.0 {
            continue;
        }
        for m in l..h {
            if sizes[m] < 1.0 {
                continue;
            }
            let e: f64 = z[l].iter().zip(&z[m]).zip(freqs).map(|((a, b), f)| a * b * f).sum();
            let cov = e - means[l] * means[m];
            if l == m {
                var += cov * (n - sizes[l]) / (sizes[l] * (n - 1.0));
            } else {
                var -= 2.0 * cov / (n - 1.0);
            }
        }
    }
    var
}

/// [`split_variance`] in O(h) when the level functions add up to the range's indicator plus a
/// constant (`Σ_l z_l(x) = 1[x ∈ [a, b)] + c`, true of the hierarchical and Haar estimators):
/// with `Σ_{l,m} σ_lm = Var(Σ_l z_l) = m(1 − m)`, m the range's mass,
/// `Var_split = n/(n − 1)·Σ_l σ_ll/n_l − m(1 − m)/(n − 1)`. `sigma[l]` is `σ_ll`, the population
/// variance of `z_l`. Every group must be non-empty (the estimators need a report per level).
pub fn split_variance_levels(sigma: &[f64], sizes: &[f64], n: f64, mass: f64) -> f64 {
    if n <= 1.0 {
        return 0.0;
    }
    debug_assert!(sizes.iter().all(|&s| s >= 1.0), "split_variance_levels: an empty group");
    let diag: f64 = sigma.iter().zip(sizes).map(|(s, m)| s / m).sum();
    n / (n - 1.0) * diag - mass * (1.0 - mass) / (n - 1.0)
}

/// The bin of a value mapped to [-1, 1] (as `Schema::encode` maps a numeric attribute's
/// [min, max]) among `d` equal-width bins: `⌊(t + 1)/2 · d⌋`, the top edge in the last bin.
/// `None` when t is outside [-1, 1] or not a number.
pub fn bin_of_unit(t: f64, d: usize) -> Option<usize> {
    if !(-1.0..=1.0).contains(&t) {
        return None;
    }
    Some((((t + 1.0) / 2.0 * d as f64) as usize).min(d - 1))
}

/// Clamps estimated fractions to ≥ 0 and normalizes them to sum 1 (uniform if all vanish).
pub fn normalize_plug_in(mut f: Vec<f64>) -> Vec<f64> {
    for x in f.iter_mut() {
        *x = x.max(0.0);
    }
    let s: f64 = f.iter().sum();
    let d = f.len() as f64;
    if s > 0.0 {
        f.iter_mut().for_each(|x| *x /= s);
    } else {
        f.iter_mut().for_each(|x| *x = 1.0 / d);
    }
    f
}

/// Exact bin fractions of encoded values (a helper for simulations and tests).
pub fn true_freqs(values: &[usize], d: usize) -> Vec<f64> {
    let mut c = vec![0.0; d];
    for &v in values {
        c[v] += 1.0;
    }
    let n = values.len().max(1) as f64;
    c.iter_mut().for_each(|x| *x /= n);
    c
}

#[cfg(test)]
mod tests;
