//! Hierarchical histograms (Cormode, Kulkarni and Srivastava, VLDB'19) with constrained
//! inference (Hay, Rastogi, Miklau and Suciu, VLDB'10).
//!
//! The domain is padded to `D' = B^h`. Users are split at random into `h` groups; a user of
//! level `l ∈ 1..=h` reports its level-l node `x / B^(h−l)` (one of `B^l`) with the adaptive
//! oracle (GRR when `B^l < 3e^ε + 2`, else OUE) at the full ε. The root (level 0) is known: 1.
//!
//! # Privacy
//! One report per user at the full ε (ε-LDP). The level is drawn by the device uniformly and
//! independently of its value ([`Randomizer`] impl), so sending it costs no privacy.
//!
//! # Reports
//! [`HhReport`]: the level (1 byte) and the level oracle's report (a GRR index, or OUE's B^l
//! bits packed in 64-bit words); wire kind 20.
//!
//! # Utility
//! A range `[a, b)` decomposes B-adically into at most `2(B − 1)` nodes per level; per level the
//! nodes form a set S_l of k_l nodes and mass f_S. The noise of the level-l sum is exact:
//! OUE `[k q(1−q) + f_S (p(1−p) − q(1−q))] / ((p−q)² n_l)` (independent bits) and GRR
//! `[f_S π₁(1−π₁) + (1−f_S) π₀(1−π₀)] / ((p−q)² n_l)` with `π₁ = p + (k−1)q`, `π₀ = kq` (the
//! report lands in S or not). Levels use disjoint users; the split's sampling error (with the
//! negative covariance between groups) is added by [`split_variance`](super::split_variance).
//!
//! Constrained inference: a bottom-up inverse-variance pass then a top-down pass spreading each
//! parent's residual equally over its children (Hay et al.'s estimator, with per-level noise
//! variances `Var*_l / n_l`). The weights depend only on public constants, so the consistent
//! estimate stays unbiased; its variance has no closed form here and
//! [`RangeEstimator::range_variance`] reports the raw estimator's (an upper bound in practice,
//! measured in docs/ANALYTICS-RANGES.md).

use super::{
    RangeEstimator, VarianceParts, assign_groups, check_values, mass, normalize_plug_in, split_sizes,
    split_variance_levels,
};
use harmony_core::aggregate::check_compatible;
use harmony_core::frequency::{Adaptive, AdaptiveAggregator, AdaptiveReport, GrrReport, PureParams, UnaryReport};
use harmony_core::sampling::uniform_below;
use harmony_core::wire::{self, WireKind, WireReport};
use harmony_core::{Aggregator, Error, FrequencyOracle, Randomizer, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The hierarchical-histogram collection over `[0, D)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Hierarchy {
    d: usize,
    b: usize,
    h: usize,
    levels: Vec<Adaptive>,
}

/// One device's report: its level and its level-l node through the level's oracle.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HhReport {
    /// The level l ∈ 1..=h, drawn by the device.
    pub level: u8,
    /// The level oracle's report (GRR or OUE, as the level's domain B^l decides).
    pub report: AdaptiveReport,
}

impl WireReport for HhReport {
    const KIND: WireKind = WireKind { byte: 20, name: "HhReport" };
}

/// The server side of a hierarchical collection: one oracle aggregator per level (exact integer
/// counts, so the state does not depend on the order of adds and merges). Mergeable (shards,
/// parallel folds).
#[derive(Debug, Clone)]
pub struct HhAggregator {
    hierarchy: Hierarchy,
    levels: Vec<AdaptiveAggregator>,
}

impl HhAggregator {
    /// Reports per level (the realized group sizes).
    pub fn counts(&self) -> Vec<u64> {
        self.levels.iter().map(|a| a.count()).collect()
    }
    /// The hierarchy it aggregates.
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }
}

/// Checks a report's level against h; the error names the field.
fn check_level(level: u8, h: usize) -> Result<usize> {
    let l = level as usize;
    if l == 0 || l > h {
        return Err(Error::report("level", level, format!("a level in 1..={h}")));
    }
    Ok(l)
}

impl Aggregator for HhAggregator {
    type Report = HhReport;
    /// The estimate, or an error while a level has no report.
    type Output = Result<HhEstimate>;

    fn validate(&self, r: &HhReport) -> Result<()> {
        let l = check_level(r.level, self.levels.len())?;
        self.levels[l - 1].validate(&r.report)
    }
    fn add_unchecked(&mut self, r: &HhReport) {
        self.levels[r.level as usize - 1].add_unchecked(&r.report);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("hierarchies", &self.hierarchy, &other.hierarchy)?;
        self.levels.iter_mut().zip(&other.levels).try_for_each(|(a, b)| a.merge(b))
    }
    fn count(&self) -> u64 {
        self.levels.iter().map(|a| a.count()).sum()
    }
    /// The estimate (raw and consistent) with the realized level sizes. Errors: a level without
    /// reports.
    fn estimate(&self) -> Result<HhEstimate> {
        if let Some(l) = self.levels.iter().position(|a| a.count() == 0) {
            return Err(Error::input(format!("level {} reports", l + 1), 0, "at least 1 report per level"));
        }
        let sizes: Vec<f64> = self.levels.iter().map(|a| a.count() as f64).collect();
        let n = sizes.iter().sum();
        let freqs = self.levels.iter().map(|a| a.estimate().frequencies).collect();
        Ok(self.hierarchy.estimate_from(freqs, n, sizes))
    }
}

/// The constants of one level's oracle.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LevelNoise {
    grr: bool,
    pq: PureParams,
}

impl LevelNoise {
    fn of(o: &Adaptive) -> Self {
        match o {
            Adaptive::Grr(g) => LevelNoise { grr: true, pq: g.pure_params() },
            Adaptive::Oue(u) => LevelNoise { grr: false, pq: u.pure_params() },
        }
    }
    /// n_l · Var of the estimate of a set of k nodes holding mass f_s.
    fn set_variance(&self, k: usize, f_s: f64) -> f64 {
        let (p, q) = (self.pq.p, self.pq.q);
        let k = k as f64;
        let gap2 = (p - q) * (p - q);
        if self.grr {
            let (p1, p0) = (p + (k - 1.0) * q, k * q);
            (f_s * p1 * (1.0 - p1) + (1.0 - f_s) * p0 * (1.0 - p0)) / gap2
        } else {
            (k * q * (1.0 - q) + f_s * (p * (1.0 - p) - q * (1.0 - q))) / gap2
        }
    }
}

impl LevelNoise {
    /// n_l · Var of `Σ_i w_i x̂_i` (the level's node estimates) when its node fractions are `f`.
    fn weighted_variance(&self, w: &[f64], f: &[f64]) -> f64 {
        let (p, q) = (self.pq.p, self.pq.q);
        let gap2 = (p - q) * (p - q);
        let s2: f64 = w.iter().map(|x| x * x).sum();
        if self.grr {
            // The report Y is one node: E[w_Y | v] = qΣw + (p−q)w_v, E[w_Y² | v] = qΣw² + (p−q)w_v².
            let s1: f64 = w.iter().sum();
            let per = |wv: f64| {
                let m = q * s1 + (p - q) * wv;
                q * s2 + (p - q) * wv * wv - m * m
            };
            f.iter().zip(w).map(|(fv, &wv)| fv * per(wv)).sum::<f64>() / gap2
        } else {
            let fw2: f64 = f.iter().zip(w).map(|(f, w)| f * w * w).sum();
            (q * (1.0 - q) * s2 + (p * (1.0 - p) - q * (1.0 - q)) * fw2) / gap2
        }
    }
}

/// The server's estimate of a hierarchical collection: raw node estimates (with per-level
/// prefix sums) and the consistent leaves (with prefix sums).
#[derive(Debug, Clone, PartialEq)]
pub struct HhEstimate {
    d: usize,
    b: usize,
    h: usize,
    n: f64,
    sizes: Vec<f64>,
    noise: Vec<LevelNoise>,
    /// `raw_prefix[l − 1][i]`: the sum of level-l node estimates `0..i`.
    raw_prefix: Vec<Vec<f64>>,
    consistent_prefix: Vec<f64>,
}

/// The number of levels `h = ⌈log_B d⌉` (at least 1).
fn height(b: usize, d: usize) -> usize {
    let (mut h, mut span) = (1, b);
    while span < d {
        span *= b;
        h += 1;
    }
    h
}

/// The B-adic decomposition of `[a, b)` over `B^h` leaves: runs `(level, lo, hi)` of level nodes
/// (level 0 is the root).
fn decompose(bf: usize, h: usize, a: usize, b: usize, runs: &mut Vec<(usize, usize, usize)>) {
    runs.clear();
    let (mut lo, mut hi, mut l) = (a, b, h);
    while lo < hi {
        if l == 0 {
            runs.push((0, 0, 1));
            break;
        }
        let mut llo = lo;
        while llo % bf != 0 && llo < hi {
            llo += 1;
        }
        if llo > lo {
            runs.push((l, lo, llo));
        }
        if llo >= hi {
            break;
        }
        let mut hhi = hi;
        while hhi % bf != 0 && hhi > llo {
            hhi -= 1;
        }
        if hhi < hi {
            runs.push((l, hhi, hi));
        }
        lo = llo / bf;
        hi = hhi / bf;
        l -= 1;
    }
}

/// The branching factor in `2..=16` minimizing the raw estimator's average variance over all
/// ranges of `[0, d)` (a deterministic sample of 4,000 when d > 128), with f = 0 (data-free):
/// `h · mean Σ_l n_l Var(S_l)`. Errors: ε not finite and > 0, d < 2.
pub fn choose_branching(epsilon: f64, d: usize) -> Result<usize> {
    if d < 2 {
        return Err(Error::param("d", d, "an integer >= 2 (the domain size)"));
    }
    let ranges: Vec<(usize, usize)> = if d <= 128 {
        (0..d).flat_map(|a| (a + 1..=d).map(move |b| (a, b))).collect()
    } else {
        let mut rng = harmony_core::sampling::fast_rng(0x5eed_00b5);
        (0..4000).map(|_| random_range(d, &mut rng)).collect()
    };
    let mut best = (f64::INFINITY, 2);
    let mut runs = Vec::new();
    for bf in 2..=16usize {
        let h = height(bf, d);
        let noise: Vec<LevelNoise> = (1..=h)
            .map(|l| Adaptive::new(epsilon, bf.pow(l as u32)).map(|o| LevelNoise::of(&o)))
            .collect::<Result<_>>()?;
        let mut total = 0.0;
        for &(a, b) in &ranges {
            decompose(bf, h, a, b, &mut runs);
            let mut k = vec![0usize; h + 1];
            for &(l, lo, hi) in &runs {
                k[l] += hi - lo;
            }
            total += (1..=h).filter(|&l| k[l] > 0).map(|l| noise[l - 1].set_variance(k[l], 0.0)).sum::<f64>();
        }
        let score = h as f64 * total / ranges.len() as f64;
        if score < best.0 {
            best = (score, bf);
        }
    }
    Ok(best.1)
}

/// A uniformly random non-empty range `[a, b)` of `[0, d)` (a < b, both endpoints uniform over
/// the `d(d+1)/2` ranges).
pub fn random_range<R: Rng + ?Sized>(d: usize, rng: &mut R) -> (usize, usize) {
    let total = (d * (d + 1) / 2) as u64;
    let mut k = harmony_core::sampling::uniform_below(rng, total) as usize;
    // Ranges with start a: d − a of them.
    let mut a = 0;
    while k >= d - a {
        k -= d - a;
        a += 1;
    }
    (a, a + 1 + k)
}

impl Hierarchy {
    /// The hierarchy with budget `epsilon`, branching `b` over `[0, d)`. Errors: ε not finite
    /// and > 0, b < 2, d < 2, `b^h` overflowing 2^24 nodes.
    pub fn new(epsilon: f64, b: usize, d: usize) -> Result<Self> {
        if b < 2 {
            return Err(Error::param("branching B", b, "an integer >= 2"));
        }
        if d < 2 {
            return Err(Error::param("d", d, "an integer >= 2 (the domain size)"));
        }
        let h = height(b, d);
        if (b as f64).powi(h as i32) > (1u64 << 24) as f64 {
            return Err(Error::param("branching B", b, format!("small enough that B^h <= 2^24 for d = {d}")));
        }
        let levels = (1..=h).map(|l| Adaptive::new(epsilon, b.pow(l as u32))).collect::<Result<_>>()?;
        Ok(Hierarchy { d, b, h, levels })
    }
    /// The domain size D.
    pub fn domain(&self) -> usize {
        self.d
    }
    /// The branching factor B.
    pub fn branching(&self) -> usize {
        self.b
    }
    /// The number of levels h (one group of users each).
    pub fn levels(&self) -> usize {
        self.h
    }
    /// The oracle of each level (`grr` or `oue`).
    pub fn branches(&self) -> Vec<&'static str> {
        self.levels.iter().map(|o| o.branch()).collect()
    }
    /// Simulates a collection: users split at random across the levels; each level's nodes
    /// randomized and aggregated in batches (OUE packed, no allocation per report). Errors: no
    /// values, a value ≥ D, fewer users than levels.
    pub fn collect<R: Rng + ?Sized>(&self, values: &[usize], rng: &mut R) -> Result<HhEstimate> {
        check_values(values, self.d)?;
        if values.len() < self.h {
            return Err(Error::input("values", values.len(), format!("at least {} users (one per level)", self.h)));
        }
        let groups = assign_groups(values.len(), self.h, rng);
        let mut nodes: Vec<Vec<usize>> =
            split_sizes(values.len(), self.h).into_iter().map(Vec::with_capacity).collect();
        for (&x, &g) in values.iter().zip(&groups) {
            let l = g as usize + 1;
            nodes[l - 1].push(x / self.b.pow((self.h - l) as u32));
        }
        let mut agg = self.aggregator();
        for ((o, vs), a) in self.levels.iter().zip(&nodes).zip(agg.levels.iter_mut()) {
            match (o, a) {
                (Adaptive::Grr(g), AdaptiveAggregator::Grr(a)) => {
                    let mut out = Vec::with_capacity(vs.len());
                    g.randomize_batch(vs, rng, &mut out)?;
                    a.add_batch(&out)?;
                }
                (Adaptive::Oue(u), AdaptiveAggregator::Oue(a)) => {
                    let mut buf = Vec::new();
                    for chunk in vs.chunks(1 << 14) {
                        buf.clear();
                        u.randomize_packed(chunk, rng, &mut buf)?;
                        a.add_packed(&buf)?;
                    }
                }
                _ => unreachable!("a level's aggregator comes from its own oracle"),
            }
        }
        agg.estimate()
    }

    /// One user's report at level `l ∈ 1..=h` (its level-l node through the level's oracle).
    /// Devices draw l themselves ([`Randomizer::randomize`]). Errors: x ≥ D, l outside 1..=h.
    pub fn randomize_at<R: Rng + ?Sized>(&self, x: usize, l: usize, rng: &mut R) -> Result<HhReport> {
        if x >= self.d {
            return Err(Error::input("x", x, format!("< the domain size {}", self.d)));
        }
        if l == 0 || l > self.h {
            return Err(Error::input("level", l, format!("in 1..={}", self.h)));
        }
        let report = self.levels[l - 1].randomize_unchecked(x / self.b.pow((self.h - l) as u32), rng);
        Ok(HhReport { level: l as u8, report })
    }

    /// The largest encoded report (bytes, wire header included): a bound from the deepest
    /// level's worst report (GRR: the last node; OUE: every bit set).
    pub fn max_report_bytes(&self) -> usize {
        let worst = |l: usize, o: &Adaptive| {
            let report = match o {
                Adaptive::Grr(g) => AdaptiveReport::Grr(GrrReport { y: (g.domain_size() - 1) as u32 }),
                Adaptive::Oue(u) => {
                    AdaptiveReport::Oue(UnaryReport { bits: vec![u64::MAX; u.domain_size().div_ceil(64)] })
                }
            };
            wire::encode(&HhReport { level: l as u8, report }).len()
        };
        self.levels.iter().enumerate().map(|(i, o)| worst(i + 1, o)).max().unwrap_or(0)
    }

    /// An empty, mergeable server-side accumulator.
    pub fn aggregator(&self) -> HhAggregator {
        HhAggregator { hierarchy: self.clone(), levels: self.levels.iter().map(|o| o.aggregator()).collect() }
    }

    pub(crate) fn estimate_from(&self, level_freqs: Vec<Vec<f64>>, n: f64, sizes: Vec<f64>) -> HhEstimate {
        let noise: Vec<LevelNoise> = self.levels.iter().map(LevelNoise::of).collect();
        let raw_prefix = level_freqs
            .iter()
            .map(|f| {
                let mut p = vec![0.0; f.len() + 1];
                for (i, x) in f.iter().enumerate() {
                    p[i + 1] = p[i] + x;
                }
                p
            })
            .collect();
        let sigma2: Vec<f64> = noise.iter().zip(&sizes).map(|(nz, &s)| nz.set_variance(1, 0.0) / s.max(1.0)).collect();
        let leaves = consistent_leaves(self.b, &level_freqs, &sigma2);
        let mut consistent_prefix = vec![0.0; self.d + 1];
        for t in 0..self.d {
            consistent_prefix[t + 1] = consistent_prefix[t] + leaves[t];
        }
        HhEstimate { d: self.d, b: self.b, h: self.h, n, sizes, noise, raw_prefix, consistent_prefix }
    }
}

/// Hay et al.'s two passes with per-level noise variances `sigma2[l − 1]`; the root is 1.
/// Returns the consistent leaf estimates (`B^h` of them).
fn consistent_leaves(b: usize, x: &[Vec<f64>], sigma2: &[f64]) -> Vec<f64> {
    let h = x.len();
    // Bottom-up: z_l (inverse-variance blend of the node's own estimate and its children's sum).
    let mut z: Vec<Vec<f64>> = x.to_vec();
    let mut var = vec![0.0; h];
    var[h - 1] = sigma2[h - 1];
    for l in (0..h - 1).rev() {
        let child_var = b as f64 * var[l + 1];
        let (w_own, w_kids) = (1.0 / sigma2[l], 1.0 / child_var);
        for i in 0..z[l].len() {
            let s: f64 = z[l + 1][i * b..(i + 1) * b].iter().sum();
            z[l][i] = (w_own * x[l][i] + w_kids * s) / (w_own + w_kids);
        }
        var[l] = 1.0 / (w_own + w_kids);
    }
    // Top-down: the root is exactly 1; spread each parent's residual equally over its children.
    let mut parent = vec![1.0];
    for zl in z.iter_mut() {
        for (i, &u) in parent.iter().enumerate() {
            let kids = &mut zl[i * b..(i + 1) * b];
            let r = (u - kids.iter().sum::<f64>()) / b as f64;
            kids.iter_mut().for_each(|k| *k += r);
        }
        parent = zl.clone();
    }
    parent
}

/// The weights of Hay et al.'s bottom-up pass: level l's own estimate counts `a[l]`, its
/// children's sum `1 − a[l]` (l < h − 1, 0-based levels).
fn blend_weights(b: usize, sigma2: &[f64]) -> Vec<f64> {
    let h = sigma2.len();
    let mut var = sigma2[h - 1];
    let mut a = vec![1.0; h];
    for l in (0..h - 1).rev() {
        let (w_own, w_kids) = (1.0 / sigma2[l], 1.0 / (b as f64 * var));
        a[l] = w_own / (w_own + w_kids);
        var = 1.0 / (w_own + w_kids);
    }
    a
}

/// The adjoint of [`consistent_leaves`]: for the functional `Σ_t r[t]·leaf_t` of the consistent
/// leaves (an affine map of the raw node estimates `x`), its coefficient on each raw node
/// estimate (`w[l][i]`, 0-based levels) and its constant (the root's share).
fn consistent_adjoint(b: usize, sigma2: &[f64], r: &[f64]) -> (Vec<Vec<f64>>, f64) {
    let h = sigma2.len();
    let bf = b as f64;
    let mut gz: Vec<Vec<f64>> = (1..=h).map(|l| vec![0.0; b.pow(l as u32)]).collect();
    let mut gu = r.to_vec();
    let mut constant = 0.0;
    // Top-down pass, reversed: u_j = z_j − (Σ_siblings z)/B + parent/B.
    for l in (0..h).rev() {
        let mut gparent = vec![0.0; gu.len() / b];
        for (g, kids) in gu.chunks(b).enumerate() {
            let s: f64 = kids.iter().sum();
            for (k, &gk) in kids.iter().enumerate() {
                gz[l][g * b + k] += gk - s / bf;
            }
            gparent[g] = s / bf;
        }
        if l == 0 {
            constant = gparent[0];
        } else {
            gu = gparent;
        }
    }
    // Bottom-up pass, reversed: z_l = a·x_l + (1 − a)·Σ_kids z_{l+1}.
    let a = blend_weights(b, sigma2);
    let mut gx = gz.clone();
    for l in 0..h - 1 {
        let (own, rest) = gz.split_at_mut(l + 1);
        for (i, &g) in own[l].iter().enumerate() {
            gx[l][i] = a[l] * g;
            rest[0][i * b..(i + 1) * b].iter_mut().for_each(|k| *k += (1.0 - a[l]) * g);
        }
    }
    gx[h - 1].clone_from(&gz[h - 1]);
    (gx, constant)
}

/// A device: draws its level l uniformly from `rng` (independently of x), then sends its
/// level-l node through the level's oracle. Input: the device's bin x < D.
impl Randomizer for Hierarchy {
    type Input = usize;
    type Report = HhReport;

    fn randomize(&self, x: &usize, rng: &mut dyn Rng) -> Result<HhReport> {
        if *x >= self.d {
            return Err(Error::input("bin", x, format!("< the number of bins {}", self.d)));
        }
        let l = 1 + uniform_below(rng, self.h as u64) as usize;
        self.randomize_at(*x, l, rng)
    }
    fn validate(&self, r: &HhReport) -> Result<()> {
        let l = check_level(r.level, self.h)?;
        self.levels[l - 1].validate_report(&r.report)
    }
}

impl HhEstimate {
    /// The branching factor B.
    pub fn branching(&self) -> usize {
        self.b
    }
    /// The number of levels h.
    pub fn levels(&self) -> usize {
        self.h
    }
    /// The raw (inconsistent) estimate of `[a, b)` from the B-adic decomposition, O(h · B)
    /// (without checks: `a ≤ b ≤ D`).
    pub fn range_raw_unchecked(&self, a: usize, b: usize) -> f64 {
        let mut runs = Vec::with_capacity(2 * self.h);
        decompose(self.b, self.h, a, b, &mut runs);
        runs.iter()
            .map(|&(l, lo, hi)| if l == 0 { 1.0 } else { self.raw_prefix[l - 1][hi] - self.raw_prefix[l - 1][lo] })
            .sum()
    }
    /// The raw estimator's view (answers from the B-adic decomposition, not from the consistent
    /// leaves), with the same exact variance.
    pub fn raw(&self) -> RawHh<'_> {
        RawHh(self)
    }
    /// The raw estimator's exact variance from the cumulative fractions: per level the k_l nodes
    /// of the decomposition and their mass m_l give the noise `set_variance(k_l, m_l)/n_l` and
    /// the split term's `σ_ll = m_l(1 − m_l)` (the level functions are disjoint indicators).
    fn variance_raw(&self, a: usize, b: usize, cum: &[f64]) -> VarianceParts {
        let mut runs = Vec::with_capacity(2 * self.h);
        decompose(self.b, self.h, a, b, &mut runs);
        let mut k = vec![0usize; self.h + 1];
        let mut masses = vec![0.0; self.h + 1];
        for &(l, lo, hi) in &runs {
            if l > 0 {
                let span = self.b.pow((self.h - l) as u32);
                k[l] += hi - lo;
                masses[l] += mass(cum, lo * span, hi * span);
            }
        }
        let noise: f64 = (1..=self.h)
            .filter(|&l| k[l] > 0)
            .map(|l| self.noise[l - 1].set_variance(k[l], masses[l]) / self.sizes[l - 1])
            .sum();
        let sigma: Vec<f64> = masses[1..].iter().map(|m| m * (1.0 - m)).collect();
        VarianceParts { noise, split: split_variance_levels(&sigma, &self.sizes, self.n, mass(cum, a, b)) }
    }
}

impl HhEstimate {
    /// Per-level noise variances of one node estimate (the constrained inference's weights).
    fn sigma2(&self) -> Vec<f64> {
        self.noise.iter().zip(&self.sizes).map(|(nz, &s)| nz.set_variance(1, 0.0) / s.max(1.0)).collect()
    }
    /// The consistent estimate of a union of disjoint leaf ranges `[a, b)` (over `[0, D)`) and
    /// its exact variance when the population's cumulative leaf fractions are `cum`.
    ///
    /// The consistent answer is an affine map of the raw node estimates (the weights of the
    /// constrained inference depend only on ε and the level sizes), so the answer is one linear
    /// combination `c + Σ_{l,i} w_{l,i} x̂_{l,i}`, its coefficients from the adjoint of the two
    /// passes. Per level the noise of `Σ_i w_i x̂_i` is exact: OUE
    /// `[q(1−q)Σw_i² + (p(1−p) − q(1−q))Σ f_i w_i²] / ((p−q)² n_l)`, GRR
    /// `Σ_v f_v Var(w_Y | v) / ((p−q)² n_l)`; the split term uses `σ_ll = Var_f(w_{l,node(x)})`
    /// (the level functions add up to the union's indicator minus the constant). O(B^h) per call.
    pub fn consistent_union(&self, ranges: &[(usize, usize)], cum: &[f64]) -> (f64, VarianceParts) {
        self.consistent_union_with(ranges, cum, &self.level_fractions(cum))
    }
    /// Each level's node fractions from the cumulative leaf fractions (what
    /// [`consistent_union_with`](Self::consistent_union_with) takes, computed once for many
    /// unions).
    pub fn level_fractions(&self, cum: &[f64]) -> Vec<Vec<f64>> {
        (1..=self.h)
            .map(|l| {
                let span = self.b.pow((self.h - l) as u32);
                (0..self.b.pow(l as u32)).map(|i| mass(cum, i * span, (i + 1) * span)).collect()
            })
            .collect()
    }
    /// [`consistent_union`](Self::consistent_union) with the level fractions of `cum` given.
    pub fn consistent_union_with(
        &self,
        ranges: &[(usize, usize)],
        cum: &[f64],
        fractions: &[Vec<f64>],
    ) -> (f64, VarianceParts) {
        let leaves = self.b.pow(self.h as u32);
        let mut r = vec![0.0; leaves];
        let mut estimate = 0.0;
        let mut total_mass = 0.0;
        for &(a, b) in ranges {
            r[a..b].iter_mut().for_each(|x| *x = 1.0);
            estimate += self.consistent_prefix[b] - self.consistent_prefix[a];
            total_mass += mass(cum, a, b);
        }
        let (w, _) = consistent_adjoint(self.b, &self.sigma2(), &r);
        let (mut noise, mut sigma) = (0.0, Vec::with_capacity(self.h));
        for ((l, wl), f) in (1..=self.h).zip(&w).zip(fractions) {
            noise += self.noise[l - 1].weighted_variance(wl, f) / self.sizes[l - 1];
            let m1: f64 = f.iter().zip(wl).map(|(f, w)| f * w).sum();
            let m2: f64 = f.iter().zip(wl).map(|(f, w)| f * w * w).sum();
            sigma.push(m2 - m1 * m1);
        }
        let split = split_variance_levels(&sigma, &self.sizes, self.n, total_mass);
        (estimate, VarianceParts { noise, split })
    }
}

impl RangeEstimator for HhEstimate {
    fn domain(&self) -> usize {
        self.d
    }
    /// The consistent estimate: O(1) from the leaves' prefix sums.
    #[inline]
    fn range_unchecked(&self, a: usize, b: usize) -> f64 {
        self.consistent_prefix[b] - self.consistent_prefix[a]
    }
    /// The raw estimator's exact variance (see the module doc).
    fn range_variance_cum(&self, a: usize, b: usize, cum: &[f64]) -> VarianceParts {
        self.variance_raw(a, b, cum)
    }
    fn plug_in_freqs(&self) -> Vec<f64> {
        normalize_plug_in((0..self.d).map(|t| self.consistent_prefix[t + 1] - self.consistent_prefix[t]).collect())
    }
}

/// The raw hierarchical estimator (see [`HhEstimate::raw`]).
#[derive(Debug, Clone, Copy)]
pub struct RawHh<'a>(&'a HhEstimate);

impl RangeEstimator for RawHh<'_> {
    fn domain(&self) -> usize {
        self.0.d
    }
    fn range_unchecked(&self, a: usize, b: usize) -> f64 {
        self.0.range_raw_unchecked(a, b)
    }
    fn range_variance_cum(&self, a: usize, b: usize, cum: &[f64]) -> VarianceParts {
        self.0.variance_raw(a, b, cum)
    }
    fn plug_in_freqs(&self) -> Vec<f64> {
        self.0.plug_in_freqs()
    }
}

#[cfg(test)]
pub(super) fn consistent_for_test(b: usize, x: &[Vec<f64>], sigma2: &[f64], r: &[f64]) -> (f64, f64) {
    let leaves = consistent_leaves(b, x, sigma2);
    let direct = leaves.iter().zip(r).map(|(l, r)| l * r).sum();
    let (w, c) = consistent_adjoint(b, sigma2, r);
    let linear = c + w.iter().zip(x).flat_map(|(w, x)| w.iter().zip(x).map(|(w, x)| w * x)).sum::<f64>();
    (direct, linear)
}

#[cfg(test)]
pub(super) fn decompose_for_test(bf: usize, h: usize, a: usize, b: usize) -> Vec<(usize, usize, usize)> {
    let mut r = Vec::new();
    decompose(bf, h, a, b, &mut r);
    r
}

impl harmony_core::state::SaveState for HhAggregator {
    fn save_state(&self, w: &mut harmony_core::state::StateWriter<'_>) {
        harmony_core::state::save_all(w, &self.levels);
    }
    fn merge_state(&mut self, r: &mut harmony_core::state::StateReader<'_>) -> Result<()> {
        harmony_core::state::merge_all(r, "hierarchy levels", &mut self.levels)
    }
}
