//! k-way marginals over categorical attributes (numeric ones binned by the caller): CALM
//! (Zhang et al., CCS'18) and baselines.
//!
//! - [`calm`]: choose m marginals of ≤ l attributes by minimising the predicted total SSE;
//!   each device draws one of the m groups and reports its l-way cell by the adaptive frequency
//!   oracle (GRR or OUE) at the full ε ([`groups`]); the aggregator estimates every
//!   materialized marginal, makes them mutually consistent and non-negative — by fitting one
//!   joint distribution to all of them ([`joint`]) when the joint table is small enough, else
//!   as a family ([`consistency`]) — and answers each k-way query from a covering marginal, or
//!   by maximum entropy (iterative proportional fitting) when none covers it.
//! - [`direct`]: one adaptive frequency oracle over the full cross-product of each query's
//!   attributes, each device drawing one query ([`groups`]).
//! - [`fourier`]: the Fourier (input Hadamard transform, "InpHT") method of Cormode, Kulkarni
//!   and Srivastava (SIGMOD'18) over binary-encoded attributes.
//!
//! Every method follows the task shape: a device randomizer (`harmony_core::Randomizer`) that
//! draws its own group, a mergeable aggregator with integer state, and an estimator over it.
//!
//! # Error model
//! For an l-way marginal with |D| cells estimated from `n_g` of `n` users by a pure oracle
//! (p, q) (docs/MECHANISMS.md E):
//! `E[SSE] = (|D| q(1−q) + p(1−p) − q(1−q)) / (n_g (p−q)²) + Σ_c π_c(1−π_c)/n_g · (n−n_g)/(n−1)`.
//! Projecting it to a k-way marginal (summing g = |D|/|D_k| cells): for OUE the cell noises add
//! (the first term is unchanged); for GRR the g cells behave as one GRR "super-cell" with
//! p' = p + (g−1)q, q' = gq. See [`noise_sse`].
//!
//! Layout: a marginal over attributes `a_1 < … < a_k` (indices into the data's columns) is a
//! row-major table, the last attribute varying fastest.

pub mod calm;
pub mod consistency;
pub mod direct;
pub mod fourier;
pub mod groups;
pub mod joint;

use harmony_core::frequency::Adaptive;
use harmony_core::{Error, Result};

/// The largest number of cells of a marginal reported by one device (a CALM set, a direct
/// query): 2^14, so that an OUE report (⌈cells/64⌉ words of at most 10 bytes each, plus a few
/// bytes of header) stays under 2.6 kB, within a report's 4 kB wire limit.
pub const MAX_CELLS: usize = 1 << 14;

/// The attributes (names, cardinalities) and the encoded records (row-major, `n × d` codes).
#[derive(Debug, Clone)]
pub struct Dataset {
    names: Vec<String>,
    cards: Vec<usize>,
    codes: Vec<u32>,
    n: usize,
}

impl Dataset {
    /// Validates and wraps the data. Errors: no attribute, more than 128 attributes, a
    /// cardinality < 2, a code out of range, a length not a multiple of d, no record.
    pub fn new(names: Vec<String>, cards: Vec<usize>, codes: Vec<u32>) -> Result<Self> {
        let d = cards.len();
        if d == 0 || d > 128 || names.len() != d {
            return Err(Error::param(
                "attributes",
                format!("{} names, {} cardinalities", names.len(), d),
                "1 to 128 attributes, one name per cardinality",
            ));
        }
        for (name, &c) in names.iter().zip(&cards) {
            if c < 2 {
                return Err(Error::param("cardinality", format!("{c} (attribute {name})"), "at least 2 categories"));
            }
        }
        if codes.is_empty() || !codes.len().is_multiple_of(d) {
            return Err(Error::input(
                "codes",
                format!("{} values", codes.len()),
                format!("a positive multiple of d = {d}"),
            ));
        }
        for (i, row) in codes.chunks_exact(d).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                if v as usize >= cards[j] {
                    return Err(Error::input(
                        "codes",
                        format!("code {v} (record {i}, attribute {})", names[j]),
                        format!("a code < {}", cards[j]),
                    ));
                }
            }
        }
        let n = codes.len() / d;
        Ok(Dataset { names, cards, codes, n })
    }
    /// Number of records (users).
    pub fn n(&self) -> usize {
        self.n
    }
    /// Number of attributes.
    pub fn d(&self) -> usize {
        self.cards.len()
    }
    /// Attribute names.
    pub fn names(&self) -> &[String] {
        &self.names
    }
    /// Attribute cardinalities.
    pub fn cards(&self) -> &[usize] {
        &self.cards
    }
    /// The codes of record i.
    pub fn record(&self, i: usize) -> &[u32] {
        let d = self.d();
        &self.codes[i * d..(i + 1) * d]
    }
    /// Attribute indices from names. An unknown name is an error listing the known ones.
    pub fn resolve(&self, names: &[String]) -> Result<Vec<usize>> {
        names
            .iter()
            .map(|s| {
                self.names
                    .iter()
                    .position(|n| n == s)
                    .ok_or_else(|| Error::input("attribute", s, format!("one of: {}", self.names.join(", "))))
            })
            .collect()
    }
    /// The number of cells of the marginal over `attrs`.
    pub fn domain(&self, attrs: &[usize]) -> usize {
        attrs.iter().map(|&a| self.cards[a]).product()
    }
    /// The cell of record i in the marginal over `attrs` (row-major, last attribute fastest).
    pub fn cell(&self, i: usize, attrs: &[usize]) -> usize {
        let r = self.record(i);
        attrs.iter().fold(0, |acc, &a| acc * self.cards[a] + r[a] as usize)
    }
    /// The true (empirical) marginal over `attrs`, as fractions.
    pub fn true_marginal(&self, attrs: &[usize]) -> Vec<f64> {
        let mut m = vec![0.0; self.domain(attrs)];
        for i in 0..self.n {
            m[self.cell(i, attrs)] += 1.0;
        }
        let n = self.n as f64;
        m.iter_mut().for_each(|x| *x /= n);
        m
    }
    /// Display name of a set of attributes (`a×b×c`).
    pub fn label(&self, attrs: &[usize]) -> String {
        attrs.iter().map(|&a| self.names[a].as_str()).collect::<Vec<_>>().join("×")
    }
}

/// All k-subsets (sorted) of `attrs` (sorted and deduplicated first), in lexicographic order.
/// Errors: k = 0, k larger than the number of attributes, a repeated attribute.
pub fn all_queries(attrs: &[usize], k: usize, names: &[String]) -> Result<Vec<Vec<usize>>> {
    let mut a = attrs.to_vec();
    a.sort_unstable();
    if let Some(w) = a.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::input("attributes", format!("{} (listed twice)", names[w[0]]), "distinct attributes"));
    }
    if k == 0 || k > a.len() {
        return Err(Error::param(
            "k",
            k,
            format!("a marginal order between 1 and the number of attributes ({})", a.len()),
        ));
    }
    let mut out = Vec::new();
    let mut idx: Vec<usize> = (0..k).collect();
    loop {
        out.push(idx.iter().map(|&i| a[i]).collect());
        let mut i = k;
        while i > 0 && idx[i - 1] == a.len() - k + i - 1 {
            i -= 1;
        }
        if i == 0 {
            return Ok(out);
        }
        idx[i - 1] += 1;
        for j in i..k {
            idx[j] = idx[j - 1] + 1;
        }
    }
}

/// An estimated marginal.
#[derive(Debug, Clone, PartialEq)]
pub struct MarginalEstimate {
    /// The attributes (sorted indices).
    pub attrs: Vec<usize>,
    /// The cells (fractions), row-major, last attribute fastest.
    pub cells: Vec<f64>,
    /// Predicted E\[SSE\] (noise + sampling; plug-in Σπ̂² for the sampling term), `None` when the
    /// marginal was reconstructed by maximum entropy (no closed form for that error).
    pub predicted_sse: Option<f64>,
    /// Each cell's standard error (closed form, plug-in), for the unbiased answers (CALM raw,
    /// direct, Fourier); `None` for post-processed or reconstructed cells.
    pub std_errors: Option<Vec<f64>>,
}

impl MarginalEstimate {
    /// Average per-cell standard error, √(predicted SSE / cells).
    pub fn std_error(&self) -> Option<f64> {
        self.predicted_sse.map(|s| (s / self.cells.len() as f64).sqrt())
    }
    /// Sum of squared errors against `truth`.
    pub fn sse(&self, truth: &[f64]) -> f64 {
        self.cells.iter().zip(truth).map(|(a, b)| (a - b) * (a - b)).sum()
    }
    /// Total variation distance to `truth` (half the L1 distance).
    pub fn tvd(&self, truth: &[f64]) -> f64 {
        0.5 * self.cells.iter().zip(truth).map(|(a, b)| (a - b).abs()).sum::<f64>()
    }
}

/// The (p, q) of the adaptive oracle over d cells and whether it is GRR.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FoParams {
    /// True for GRR, false for OUE.
    pub grr: bool,
    /// P[report supports v | x = v].
    pub p: f64,
    /// P[report supports v | x ≠ v].
    pub q: f64,
}

impl FoParams {
    /// The adaptive choice for (ε, d) (harmony-core's rule: GRR if d < 3e^ε + 2).
    pub fn adaptive(epsilon: f64, d: usize) -> Result<Self> {
        Ok(match Adaptive::new(epsilon, d)? {
            Adaptive::Grr(o) => FoParams { grr: true, p: o.p(), q: o.q() },
            Adaptive::Oue(o) => FoParams { grr: false, p: o.p(), q: o.q() },
        })
    }
}

/// Noise part of E\[SSE\] of a marginal with `d_full` cells estimated from `n_g` users and then
/// summed down to `d_proj` cells (`d_proj` divides `d_full`; equal for no projection).
/// Data-independent (the cell fractions sum to 1).
pub fn noise_sse(fo: FoParams, d_full: usize, d_proj: usize, n_g: f64) -> f64 {
    let delta2 = (fo.p - fo.q) * (fo.p - fo.q);
    let (p, q, cells) = if fo.grr {
        let g = (d_full / d_proj) as f64;
        (fo.p + (g - 1.0) * fo.q, g * fo.q, d_proj as f64)
    } else {
        (fo.p, fo.q, d_full as f64)
    };
    (cells * q * (1.0 - q) + p * (1.0 - p) - q * (1.0 - q)) / (n_g * delta2)
}

/// Sampling part of E\[SSE\]: `Σ π(1−π) / n_g · (n − n_g)/(n − 1)` given `s = 1 − Σπ²`.
pub fn sampling_sse(s: f64, n_g: f64, n: f64) -> f64 {
    if n <= 1.0 { 0.0 } else { s / n_g * (n - n_g) / (n - 1.0) }
}

/// `1 − Σ π̂²` with π̂ clamped to [0, 1] (plug-in for the sampling term).
pub fn gini(cells: &[f64]) -> f64 {
    1.0 - cells.iter().map(|&x| x.clamp(0.0, 1.0).powi(2)).sum::<f64>()
}

/// For each cell of a table with cardinalities `cards`, the index of its cell in the
/// sub-table over the positions where `keep` is true (row-major both).
pub fn sub_map(cards: &[usize], keep: &[bool]) -> Vec<u32> {
    let total: usize = cards.iter().product();
    // Strides in the sub-table.
    let mut sub_stride = vec![0usize; cards.len()];
    let mut s = 1;
    for i in (0..cards.len()).rev() {
        if keep[i] {
            sub_stride[i] = s;
            s *= cards[i];
        }
    }
    let mut out = Vec::with_capacity(total);
    let mut digits = vec![0usize; cards.len()];
    let mut idx = 0usize;
    for _ in 0..total {
        out.push(idx as u32);
        for i in (0..cards.len()).rev() {
            digits[i] += 1;
            idx += sub_stride[i];
            if digits[i] < cards[i] {
                break;
            }
            idx -= sub_stride[i] * cards[i];
            digits[i] = 0;
        }
    }
    out
}

/// Sums `cells` (over `attrs`) down to the sub-marginal over `sub` (a subset of `attrs`).
pub fn project(cells: &[f64], attrs: &[usize], cards_all: &[usize], sub: &[usize]) -> Vec<f64> {
    let cards: Vec<usize> = attrs.iter().map(|&a| cards_all[a]).collect();
    let keep: Vec<bool> = attrs.iter().map(|a| sub.contains(a)).collect();
    let map = sub_map(&cards, &keep);
    let mut out = vec![0.0; sub.iter().map(|&a| cards_all[a]).product()];
    for (c, &t) in cells.iter().zip(&map) {
        out[t as usize] += c;
    }
    out
}

/// Maximum-entropy reconstruction (iterative proportional fitting) of the marginal over
/// `target` from `constraints` (attribute sets, each a subset of `target`, with their
/// non-negative marginals summing to 1). Starts uniform; at most `iters` sweeps or until the
/// largest constraint violation is below `tol`.
pub fn ipf(
    target: &[usize],
    cards_all: &[usize],
    constraints: &[(Vec<usize>, Vec<f64>)],
    iters: usize,
    tol: f64,
) -> Vec<f64> {
    let cards: Vec<usize> = target.iter().map(|&a| cards_all[a]).collect();
    let total: usize = cards.iter().product();
    let mut x = vec![1.0 / total as f64; total];
    let maps: Vec<Vec<u32>> = constraints
        .iter()
        .map(|(s, _)| sub_map(&cards, &target.iter().map(|a| s.contains(a)).collect::<Vec<_>>()))
        .collect();
    for _ in 0..iters {
        let mut worst = 0.0f64;
        for ((_, want), map) in constraints.iter().zip(&maps) {
            let mut have = vec![0.0; want.len()];
            for (v, &t) in x.iter().zip(map) {
                have[t as usize] += v;
            }
            for (h, w) in have.iter().zip(want) {
                worst = worst.max((h - w).abs());
            }
            for (v, &t) in x.iter_mut().zip(map) {
                let h = have[t as usize];
                *v = if h > 0.0 { *v * want[t as usize] / h } else { 0.0 };
            }
        }
        if worst < tol {
            break;
        }
    }
    x
}

#[cfg(test)]
mod tests;
