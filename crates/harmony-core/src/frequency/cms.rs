//! Apple's Count Mean Sketch, CMS (Apple Differential Privacy Team, "Learning with Privacy at
//! Scale", 2017, Algorithms 1 and 3; pure-ldp 1.2.0's `CMSClient`/`CMSServer`). It is often
//! called Count-Min; Apple's server averages the k rows, hence "mean".
//!
//! # Mechanism
//! k public hash functions h_1..h_k: u64 → [m] ([`HashFamily`], from a public seed). A user with
//! item x draws j uniform in [k], encodes v ∈ {−1, +1}^m with +1 at h_j(x) only, flips every
//! coordinate independently with probability p = 1/(1 + e^(ε/2)) and sends j and the m signs as
//! bits (1 = +1).
//!
//! # Estimator
//! The server counts, per row j and bucket h, the reports with the bit set, M\[j\]\[h\], out of N
//! reports. With c = (e^(ε/2) + 1)/(e^(ε/2) − 1), a report's value at h is
//! X_h = c·B_h − (c − 1)/2 (B_h its bit; Apple's k((c/2)v_h + 1/2) divided by k), and
//!
//! ```text
//! f̂(v) = m/(m − 1)·( (c·Σ_j M[j][h_j(v)] − N(c − 1)/2)/N − 1/m ),
//! ```
//!
//! the mean over reports of the one-report estimate Y = m/(m − 1)·(X_{h_J(v)} − 1/m).
//!
//! # Moments of one report (derivation)
//! Given J = j and x, B_h is Bernoulli(1 − p) at h = h_j(x) and Bernoulli(p) elsewhere. Since
//! c(1 − 2p) = 1, E[X_h | j] = 1[h = h_j(x)], and Var(X_h | j) = c²p(1 − p) =
//! e^(ε/2)/(e^(ε/2) − 1)² =: σ² for every h. With γ(x, v) = #{j : h_j(x) = h_j(v)}/k (the
//! fraction of rows where x and v collide; γ(v, v) = 1), E[X_{h_J(v)} | x] = γ and, by total
//! variance, Var(X_{h_J(v)} | x) = σ² + γ(1 − γ). Hence, for the oracle's (fixed) hash family,
//!
//! ```text
//! E[Y | x]   = 1[x = v] + 1[x ≠ v]·m/(m − 1)·(γ(x, v) − 1/m)
//! Var(Y | x) = (m/(m − 1))²·(σ² + γ(x, v)(1 − γ(x, v)))
//! ```
//!
//! and for a population with fractions f: E[f̂(v)] = f_v + β_v, with the collision bias
//! β_v = m/(m − 1)·Σ_{x≠v} f_x(γ(x, v) − 1/m) ([`Cms::collision_bias`]), and
//! n·Var(f̂(v)) = (m/(m − 1))²·(σ² + Σ_{x≠v} f_x γ(x, v)(1 − γ(x, v)))
//! ([`FrequencyOracle::aggregate_variance`], exact).
//!
//! # Over the hash family
//! For a seed drawn at random each h_j is 2-independent and the k functions are independent
//! ([`sketch_hash`](super::sketch_hash)), so k·γ(x, v) ~ Binomial(k, 1/m) for x ≠ v:
//! E[γ] = 1/m (β_v has mean 0 — Apple's estimator is unbiased over the family) and
//! E[γ(1 − γ)] = (1/m)(1 − 1/m)(1 − 1/k). The family-averaged variance
//!
//! ```text
//! n·Var(f̂(v)) = (m/(m − 1))²·(σ² + (1 − f_v)(1/m)(1 − 1/m)(1 − 1/k))
//! ```
//!
//! is what the standard errors use (with f̂_v plugged in; the fixed-seed form needs every pair's
//! γ) and what [`FrequencyOracle::worst_case_variance`] reports (f_v = 0). For a fixed seed the
//! bias β_v is O(√(Σ f_x²/(km))); draw the seed at random per collection to make it average out.

use super::rows::{self, Lanes, PackedRows, RowBits};
use super::sketch_hash::HashFamily;
use super::{FrequencyOracle, check_batch};
use crate::aggregate::{Aggregator, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::params::{Epsilon, check_domain};
use crate::sampling::{Bernoulli, BernoulliWords, uniform_below};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Default number of hash functions k.
pub const DEFAULT_K: usize = 256;
/// Default number of buckets m (Apple's).
pub const DEFAULT_M: usize = 1024;
/// Default public hash seed ("HARMCMS1").
pub const DEFAULT_SEED: u64 = 0x4841_524D_434D_5331;
/// Largest k·m (the aggregator keeps about 12 bytes per cell).
pub const MAX_CELLS: usize = 1 << 26;

/// Apple's Count Mean Sketch over [0, d) (and arbitrary u64 items).
///
/// # Privacy
/// P[(j, v) | x] = (1/k)·Π_h P[v_h | x]. For inputs x, x' with h_j(x) ≠ h_j(x') only the
/// coordinates h_j(x) and h_j(x') differ in distribution, each by the factor (1 − p)/p =
/// e^(ε/2): the ratio is at most e^ε, attained by +1 at h_j(x) and −1 at h_j(x'); it is 1 when
/// h_j(x) = h_j(x'). Exactly ε-LDP.
///
/// # Utility
/// See the module docs: `Var = (m/(m−1))²·[σ² + Σ_{x≠v} f_x γ(x,v)(1 − γ(x,v))]/n` for the
/// fixed family, σ² = e^(ε/2)/(e^(ε/2) − 1)² (SUE's variance), and
/// `(m/(m−1))²·[σ² + (1 − f_v)(1 − 1/m)(1 − 1/k)/m]/n` averaged over hash seeds. Report: ⌈log₂ k⌉
/// + m bits. Aggregation O(n·m/64) word operations, then O(k) per estimated item.
///
/// # Example
/// ```
/// use harmony_core::frequency::Cms;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let cms = Cms::new(2.0, 1000).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = cms.aggregator();
/// for i in 0..5000 {
///     let v = if i % 5 == 0 { 999 } else { i % 500 }; // 20% hold 999
///     agg.add(&cms.randomize(v, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[999] - 0.2).abs() < 5.0 * est.std_errors[999]);
/// assert!((est.frequencies[700] - 0.0).abs() < 5.0 * est.std_errors[700]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Cms {
    eps: Epsilon,
    d: usize,
    k: usize,
    m: usize,
    hashes: HashFamily,
    /// Flip probability p = 1/(1 + e^(ε/2)).
    p: f64,
    /// c = (e^(ε/2) + 1)/(e^(ε/2) − 1).
    c: f64,
    /// σ² = e^(ε/2)/(e^(ε/2) − 1)².
    sigma2: f64,
    noise: BernoulliWords,
    own: Bernoulli,
    own_words: BernoulliWords,
}

/// A CMS report: the hash index and the m perturbed signs (bit = 1 for +1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CmsReport {
    /// The hash function used, in [0, k).
    pub j: u32,
    /// m bits packed little-endian in ⌈m/64⌉ words; padding bits zero.
    pub bits: Vec<u64>,
}

impl WireReport for CmsReport {
    const KIND: WireKind = ReportKind::Cms.wire();
}

/// Checks the sketch shape shared by CMS and HCMS: k ∈ [1, 2^20], m ∈ [2, 2^20], k·m ≤ 2^26.
pub(crate) fn check_shape(k: usize, m: usize) -> Result<()> {
    if !(1..=1 << 20).contains(&k) {
        return Err(Error::param("k", k, "a number of hash functions in [1, 2^20]"));
    }
    if !(2..=1 << 20).contains(&m) {
        return Err(Error::param("m", m, "a number of buckets in [2, 2^20]"));
    }
    if k * m > MAX_CELLS {
        return Err(Error::param("k", k, format!("k·m <= 2^26 with m = {m} (the sketch has k·m cells)")));
    }
    Ok(())
}

impl Cms {
    /// CMS with budget `epsilon` over [0, d), [`DEFAULT_K`] hash functions onto [`DEFAULT_M`]
    /// buckets from [`DEFAULT_SEED`]. Errors: ε not finite and > 0, d < 2.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        Self::with_params(epsilon, d, DEFAULT_K, DEFAULT_M, DEFAULT_SEED)
    }
    /// CMS with k hash functions onto m buckets from a public `seed`. Errors: ε not finite and
    /// > 0, d < 2, k ∉ [1, 2^20], m ∉ [2, 2^20], k·m > 2^26.
    pub fn with_params(epsilon: f64, d: usize, k: usize, m: usize, seed: u64) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_domain("d", d)?;
        check_shape(k, m)?;
        let em1 = (eps.value() / 2.0).exp_m1();
        let e = em1 + 1.0;
        let p = 1.0 / (1.0 + e);
        let keep = e / (1.0 + e);
        Ok(Cms {
            eps,
            d,
            k,
            m,
            hashes: HashFamily::new(seed, k, m),
            p,
            c: (e + 1.0) / em1,
            sigma2: e / (em1 * em1),
            noise: BernoulliWords::new(p),
            own: Bernoulli::new(keep),
            own_words: BernoulliWords::new(keep),
        })
    }
    /// Number of hash functions k.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Number of buckets m.
    pub fn m(&self) -> usize {
        self.m
    }
    /// The public hash seed.
    pub fn seed(&self) -> u64 {
        self.hashes.seed()
    }
    /// The flip probability p = 1/(1 + e^(ε/2)).
    pub fn p(&self) -> f64 {
        self.p
    }
    /// h_j(item).
    pub fn bucket(&self, j: usize, item: u64) -> usize {
        self.hashes.bucket(j, item)
    }
    /// γ(x, v): the fraction of the k hash functions under which items x and v collide.
    pub fn collision_fraction(&self, x: u64, v: u64) -> f64 {
        self.hashes.collision_fraction(x, v)
    }
    /// E[one report's estimate of f_v | x] for this hash family (1 for x = v, otherwise
    /// m/(m − 1)·(γ(x, v) − 1/m)).
    pub fn report_mean(&self, x: usize, v: usize) -> f64 {
        self.hashes.report_mean(x, v)
    }
    /// E[f̂(v)] for a population with fractions `freqs` (this hash family).
    pub fn expectation(&self, freqs: &[f64], v: usize) -> f64 {
        self.hashes.expectation(freqs, v)
    }
    /// The collision bias β_v = E[f̂(v)] − f_v of this hash family (mean 0 over seeds).
    pub fn collision_bias(&self, freqs: &[f64], v: usize) -> f64 {
        self.expectation(freqs, v) - freqs[v]
    }
    /// n·Var(f̂(v)) averaged over hash seeds, at fraction f_v (see the module docs).
    pub fn family_variance(&self, f_v: f64) -> f64 {
        let m = self.m as f64;
        let s = self.hashes.debias_scale();
        s * s * (self.sigma2 + (1.0 - f_v) * (1.0 - 1.0 / m) * (1.0 - 1.0 / self.k as f64) / m)
    }
    /// P[report | x] from the oracle's constants (0 for a malformed report or x ≥ d). Underflows
    /// to 0 for large m (use [`Cms::log_likelihood_ratio`] to compare inputs).
    pub fn output_probability(&self, x: usize, r: &CmsReport) -> f64 {
        if x >= self.d || rows::validate("j", r.j, self.k, &r.bits, self.m).is_err() {
            return 0.0;
        }
        let b = self.hashes.bucket(r.j as usize, x as u64);
        let own = rows::bit(&r.bits, b);
        let others = r.bits.iter().map(|w| w.count_ones() as i32).sum::<i32>() - own as i32;
        let q = 1.0 - self.p;
        let own_p = if own { q } else { self.p };
        own_p * self.p.powi(others) * q.powi(self.m as i32 - 1 - others) / self.k as f64
    }
    /// ln(P[r | x]/P[r | x']) without forming the probabilities: ±ε/2 from each of the two
    /// buckets h_j(x), h_j(x') when they differ, else 0.
    pub fn log_likelihood_ratio(&self, x: usize, x2: usize, r: &CmsReport) -> f64 {
        let (b1, b2) = (self.hashes.bucket(r.j as usize, x as u64), self.hashes.bucket(r.j as usize, x2 as u64));
        if b1 == b2 {
            return 0.0;
        }
        let half = self.eps.value() / 2.0;
        let s1 = if rows::bit(&r.bits, b1) { half } else { -half };
        let s2 = if rows::bit(&r.bits, b2) { -half } else { half };
        s1 + s2
    }
    /// Randomizes an arbitrary u64 item (domain value v is item v).
    pub fn randomize_item<R: Rng + ?Sized>(&self, item: u64, rng: &mut R) -> CmsReport {
        let j = uniform_below(rng, self.k as u64) as usize;
        let mut bits = Vec::with_capacity(self.m.div_ceil(64));
        rows::append_noise(&self.noise, self.m, 1, rng, &mut bits);
        rows::put(&mut bits, self.hashes.bucket(j, item), self.own.sample(rng) as u64);
        CmsReport { j: j as u32, bits }
    }
    /// Randomizes a batch of u64 items into `out` (appended, packed: no allocation per report).
    /// Per 64 reports: 64 row draws, one long run of Bernoulli(p) noise words
    /// ([`BernoulliWords::fill`]) and one 64-lane word of Bernoulli(1 − p) for the users' own
    /// buckets. Same distribution as [`Cms::randomize_item`].
    pub fn randomize_items_packed<R: Rng + ?Sized>(&self, items: &[u64], rng: &mut R, out: &mut PackedRows) {
        let w = self.m.div_ceil(64);
        out.rows.reserve(items.len());
        out.bits.reserve(items.len() * w);
        let mut lanes = Lanes::default();
        for chunk in items.chunks(64) {
            let first = out.rows.len();
            out.rows.extend(chunk.iter().map(|_| uniform_below(rng, self.k as u64) as u32));
            let start = out.bits.len();
            rows::append_noise(&self.noise, self.m, chunk.len(), rng, &mut out.bits);
            for (i, &item) in chunk.iter().enumerate() {
                let b = self.hashes.bucket(out.rows[first + i] as usize, item);
                let own = lanes.next(&self.own_words, rng);
                rows::put(&mut out.bits[start + i * w..start + (i + 1) * w], b, own);
            }
        }
    }
    /// Randomizes a batch of categories in [0, d) into `out` (packed). All inputs are
    /// validated first (all or nothing).
    pub fn randomize_packed<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut PackedRows) -> Result<()> {
        check_batch(vs, self.d)?;
        let items: Vec<u64> = vs.iter().map(|&v| v as u64).collect();
        self.randomize_items_packed(&items, rng, out);
        Ok(())
    }
}

impl FrequencyOracle for Cms {
    fn validate_report(&self, r: &CmsReport) -> Result<()> {
        rows::validate("j", r.j, self.k, &r.bits, self.m)
    }
    type Report = CmsReport;
    type Aggregator = CmsAggregator;

    fn name(&self) -> &'static str {
        "cms"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    fn domain_size(&self) -> usize {
        self.d
    }
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> CmsReport {
        self.randomize_item(v as u64, rng)
    }
    /// The packed kernel ([`Cms::randomize_items_packed`]), then one report per input.
    fn randomize_batch<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<CmsReport>) -> Result<()> {
        let mut packed = PackedRows::new();
        self.randomize_packed(vs, rng, &mut packed)?;
        let w = self.m.div_ceil(64);
        out.reserve(vs.len());
        out.extend(
            packed.rows.iter().zip(packed.bits.chunks_exact(w)).map(|(&j, b)| CmsReport { j, bits: b.to_vec() }),
        );
        Ok(())
    }
    fn aggregator(&self) -> CmsAggregator {
        CmsAggregator { oracle: self.clone(), rows: RowBits::new(self.k, self.m) }
    }
    /// Exact for this hash family: (m/(m − 1))²·(σ² + γ(x, v)(1 − γ(x, v))).
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        let g = if x == v { 1.0 } else { self.collision_fraction(x as u64, v as u64) };
        let s = self.hashes.debias_scale();
        s * s * (self.sigma2 + g * (1.0 - g))
    }
    /// Averaged over hash seeds (x ≠ v): (m/(m − 1))²·(σ² + (1 − 1/m)(1 − 1/k)/m). A pair whose
    /// hashes collide in a fraction γ of the rows has the exact variance
    /// [`report_variance`](FrequencyOracle::report_variance).
    fn worst_case_variance(&self) -> f64 {
        self.family_variance(0.0)
    }
    fn report_estimate(&self, r: &CmsReport, v: usize) -> f64 {
        let b = rows::bit(&r.bits, self.hashes.bucket(r.j as usize, v as u64)) as u8 as f64;
        let x = self.c * b - (self.c - 1.0) / 2.0;
        self.hashes.debias_scale() * (x - 1.0 / self.m as f64)
    }
}

/// Server-side CMS state: the k × m sketch of set-bit counts and the reports per row.
#[derive(Debug, Clone)]
pub struct CmsAggregator {
    oracle: Cms,
    rows: RowBits,
}

impl CmsAggregator {
    /// The sketch: M\[j\]\[h\] = reports of row j with bit h set, row-major (k × m).
    pub fn sketch(&self) -> Vec<u64> {
        self.rows.counts()
    }
    /// Adds a packed batch ([`Cms::randomize_packed`]: `rows` and `bits` of a [`PackedRows`],
    /// or any sub-range of reports of them); validates every report first (all or nothing, the
    /// error names the report's index).
    pub fn add_packed(&mut self, rows: &[u32], bits: &[u64]) -> Result<()> {
        rows::validate_packed("j", rows, bits, self.oracle.k, self.oracle.m)?;
        self.rows.add_packed(rows, bits);
        Ok(())
    }
    /// Frequency estimates of arbitrary u64 items (O(k) each), with the family-averaged
    /// standard errors.
    pub fn estimate_items(&self, items: &[u64]) -> FrequencyEstimate {
        let o = &self.oracle;
        let n = self.rows.total();
        if n == 0 {
            return FrequencyEstimate::empty(items.len());
        }
        let sketch = self.rows.counts();
        let nf = n as f64;
        let frequencies: Vec<f64> = items
            .iter()
            .map(|&item| {
                let s: u64 = (0..o.k).map(|j| sketch[j * o.m + o.hashes.bucket(j, item)]).sum();
                let mean_x = (o.c * s as f64 - nf * (o.c - 1.0) / 2.0) / nf;
                o.hashes.debias_scale() * (mean_x - 1.0 / o.m as f64)
            })
            .collect();
        let std_errors = frequencies.iter().map(|&f| (o.family_variance(f.clamp(0.0, 1.0)) / nf).sqrt()).collect();
        FrequencyEstimate { n, frequencies, std_errors }
    }
}

impl Aggregator for CmsAggregator {
    type Report = CmsReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &CmsReport) -> Result<()> {
        self.oracle.validate_report(r)
    }
    fn add_unchecked(&mut self, r: &CmsReport) {
        self.rows.add(r.j, &r.bits);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("cms parameters", &self.oracle, &other.oracle)?;
        self.rows.merge(&other.rows);
        Ok(())
    }
    fn count(&self) -> u64 {
        self.rows.total()
    }
    fn estimate(&self) -> FrequencyEstimate {
        let items: Vec<u64> = (0..self.oracle.d as u64).collect();
        self.estimate_items(&items)
    }
}

impl crate::state::SaveState for CmsAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        self.rows.save_state(w);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.rows.merge_state(r)
    }
}

impl super::registry::Registered for Cms {
    const PARAMS: &'static [&'static str] = &["k", "m", "seed"];
    fn build(
        _: crate::kinds::OracleKind,
        epsilon: f64,
        d: usize,
        params: &super::registry::Params<'_>,
    ) -> Result<Self> {
        let (k, m) = (params.get("k", DEFAULT_K)?, params.get("m", DEFAULT_M)?);
        Cms::with_params(epsilon, d, k, m, params.get("seed", DEFAULT_SEED)?)
    }
    fn output_probability(&self, x: usize, r: &CmsReport) -> f64 {
        Cms::output_probability(self, x, r)
    }
    fn log_likelihood_ratio(&self, x: usize, x2: usize, r: &CmsReport) -> f64 {
        Cms::log_likelihood_ratio(self, x, x2, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::fast_rng;

    /// Every output (j, bits) of a small CMS: probabilities sum to 1 and the largest ratio over
    /// inputs is e^ε exactly (some row separates two inputs) — 1e-9 relative.
    #[test]
    fn exact_privacy_by_enumeration() {
        for &eps in &[0.5, 1.0, 3.0, 8.0] {
            for &(k, m, d) in &[(2usize, 4usize, 5usize), (3, 5, 4), (1, 6, 3)] {
                let o = Cms::with_params(eps, d, k, m, 7).unwrap();
                let outs: Vec<CmsReport> =
                    (0..k as u32).flat_map(|j| (0u64..1 << m).map(move |b| CmsReport { j, bits: vec![b] })).collect();
                let probs: Vec<Vec<f64>> =
                    (0..d).map(|x| outs.iter().map(|r| o.output_probability(x, r)).collect()).collect();
                let mut worst = 1.0f64;
                let mut separated = false;
                for x in 0..d {
                    assert!((probs[x].iter().sum::<f64>() - 1.0).abs() < 1e-12);
                    for y in 0..d {
                        separated |= (0..k).any(|j| o.bucket(j, x as u64) != o.bucket(j, y as u64));
                        for (a, b) in probs[x].iter().zip(&probs[y]) {
                            worst = worst.max(a / b);
                        }
                        for r in &outs {
                            let llr = o.log_likelihood_ratio(x, y, r);
                            let direct = (o.output_probability(x, r) / o.output_probability(y, r)).ln();
                            assert!((llr - direct).abs() < 1e-9, "llr {llr} vs {direct}");
                        }
                    }
                }
                assert!(separated, "k {k} m {m}: no row separates two inputs");
                assert!((worst / eps.exp() - 1.0).abs() < 1e-9, "eps {eps} k {k} m {m}: max ratio {worst}");
            }
        }
    }

    /// The sampler (scalar and packed) against the enumerated probabilities: χ² over the
    /// k·2^m outputs (k = 2, m = 4: 31 dof; critical value 80.9 at 2.5e-6 per statistic, 1e-5 for
    /// the four).
    #[test]
    fn samplers_match_the_output_probabilities() {
        let o = Cms::with_params(1.0, 6, 2, 4, 3).unwrap();
        let n = 200_000;
        for (case, x) in [0usize, 5].into_iter().enumerate() {
            let mut rng = fast_rng(40 + case as u64);
            let mut scalar = vec![0u64; 32];
            for _ in 0..n {
                let r = o.randomize(x, &mut rng).unwrap();
                scalar[r.j as usize * 16 + r.bits[0] as usize] += 1;
            }
            let mut packed = PackedRows::new();
            o.randomize_packed(&vec![x; n], &mut rng, &mut packed).unwrap();
            let mut batch = vec![0u64; 32];
            for i in 0..n {
                let (j, b) = packed.get(i, 1);
                batch[j as usize * 16 + b[0] as usize] += 1;
            }
            for counts in [&scalar, &batch] {
                let chi2: f64 = (0..32)
                    .map(|c| {
                        let r = CmsReport { j: (c / 16) as u32, bits: vec![(c % 16) as u64] };
                        let e = n as f64 * o.output_probability(x, &r);
                        (counts[c] as f64 - e).powi(2) / e
                    })
                    .sum();
                assert!(chi2 < 80.9, "x = {x}: n = {n}, chi2 {chi2:.1} >= 80.9 (31 dof)");
            }
        }
    }

    #[test]
    fn estimate_is_the_mean_of_report_estimates_and_items_match_the_domain() {
        let o = Cms::with_params(1.5, 40, 16, 64, 9).unwrap();
        let mut rng = fast_rng(41);
        let reports: Vec<CmsReport> = (0..3000).map(|i| o.randomize(i * 7 % 40, &mut rng).unwrap()).collect();
        let mut a = o.aggregator();
        a.add_batch(&reports).unwrap();
        let est = a.estimate();
        for v in 0..40 {
            let mean = reports.iter().map(|r| o.report_estimate(r, v)).sum::<f64>() / 3000.0;
            assert!((est.frequencies[v] - mean).abs() < 1e-9, "v {v}: {} vs {mean}", est.frequencies[v]);
        }
        let by_item = a.estimate_items(&[3, 39, 1 << 40]);
        assert_eq!(by_item.frequencies[..2], [est.frequencies[3], est.frequencies[39]]);
        // The sketch holds every report's bits.
        let total_bits: u64 = reports.iter().flat_map(|r| &r.bits).map(|w| w.count_ones() as u64).sum();
        assert_eq!(a.sketch().iter().sum::<u64>(), total_bits);
    }

    /// The packed aggregation equals adding the same reports one by one, across the
    /// bit-sliced counters' flushes; a bad report anywhere in a packed batch adds nothing.
    #[test]
    fn packed_aggregation_equals_single_adds() {
        let o = Cms::with_params(1.0, 50, 5, 130, 4).unwrap();
        let mut rng = fast_rng(42);
        let vs: Vec<usize> = (0..20_000).map(|i| i * 13 % 50).collect();
        let mut packed = PackedRows::new();
        o.randomize_packed(&vs, &mut rng, &mut packed).unwrap();
        let w = 3;
        let (mut a, mut b) = (o.aggregator(), o.aggregator());
        a.add_packed(&packed.rows[..7000], &packed.bits[..7000 * w]).unwrap();
        a.add_packed(&packed.rows[7000..], &packed.bits[7000 * w..]).unwrap();
        for i in 0..vs.len() {
            let (j, bits) = packed.get(i, w);
            b.add(&CmsReport { j, bits: bits.to_vec() }).unwrap();
        }
        assert_eq!(a.sketch(), b.sketch());
        assert_eq!(a.estimate(), b.estimate());
        let mut bad = packed.clone();
        bad.rows[123] = 5;
        let e = a.add_packed(&bad.rows, &bad.bits).unwrap_err().to_string();
        assert!(e.contains("report 123: j is 5"), "{e}");
        assert_eq!(a.count(), 20_000);
    }

    #[test]
    fn closed_forms_and_parameter_errors() {
        let o = Cms::with_params(2.0, 10, 8, 32, 1).unwrap();
        let e = 1f64.exp();
        assert!((o.sigma2 - e / (e - 1.0).powi(2)).abs() < 1e-12);
        assert!((o.c * (1.0 - 2.0 * o.p) - 1.0).abs() < 1e-12);
        // The family-averaged worst case lies between the exact pairs' variances.
        let s2 = (32.0f64 / 31.0).powi(2);
        assert!((o.report_variance(3, 3) - s2 * o.sigma2).abs() < 1e-12);
        assert!((o.worst_case_variance() - s2 * (o.sigma2 + (31.0 / 32.0) * (7.0 / 8.0) / 32.0)).abs() < 1e-12);
        let f: Vec<f64> = (0..10).map(|i| (i + 1) as f64 / 55.0).collect();
        let bias: f64 = (0..10).map(|v| o.collision_bias(&f, v)).sum();
        assert!(bias.abs() < 1.0, "{bias}");
        assert!(Cms::with_params(1.0, 10, 0, 32, 1).unwrap_err().to_string().contains("k is 0"));
        assert!(Cms::with_params(1.0, 10, 4, 1, 1).unwrap_err().to_string().contains("m is 1"));
        assert!(Cms::with_params(1.0, 10, 1 << 20, 1 << 20, 1).unwrap_err().to_string().contains("2^26"));
        let other = Cms::with_params(2.0, 10, 8, 32, 2).unwrap();
        assert!(o.aggregator().merge(&other.aggregator()).is_err(), "different seeds must not merge");
    }
}
