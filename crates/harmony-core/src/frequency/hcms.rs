//! Apple's Hadamard Count Mean Sketch, HCMS (Apple Differential Privacy Team, "Learning with
//! Privacy at Scale", 2017, Algorithms 2 and 3; pure-ldp 1.2.0's `CMSClient`/`CMSServer` with
//! `is_hadamard=True`).
//!
//! # Mechanism
//! The hash family of [`Cms`](super::Cms) onto m buckets, m a power of two, and the Sylvester
//! Hadamard matrix H_m (H\[l, h\] = (−1)^popcount(l & h), [`super::fwht`]). A user with item x
//! draws j uniform in [k] and l uniform in [m], and sends (j, l, b) with b = H\[l, h_j(x)\] with
//! probability 1 − p and −H\[l, h_j(x)\] with probability p = 1/(1 + e^ε): one bit.
//!
//! # Estimator
//! The server sums b per (j, l), S\[j\]\[l\], transforms each row with the FWHT,
//! T\[j\]\[h\] = Σ_l S\[j\]\[l\]·H\[l, h\], and with c = (e^ε + 1)/(e^ε − 1) estimates
//!
//! ```text
//! f̂(v) = m/(m − 1)·( (c/N)·Σ_j T[j][h_j(v)] − 1/m ),
//! ```
//!
//! the mean of the one-report estimates Y = m/(m − 1)·(X − 1/m), X = c·b·H\[l, h_J(v)\].
//!
//! # Moments of one report (derivation)
//! E[b | j, l] = (1 − 2p)·H\[l, h_j(x)\] = H\[l, h_j(x)\]/c, so E[X | j, l] = H\[l, h_j(x)\]·H\[l, h_j(v)\]
//! and, l being uniform and the rows of H orthogonal, E[X | j] = 1[h_j(x) = h_j(v)]. Averaging
//! over j: E[X | x] = γ(x, v), the fraction of rows where x and v collide (γ(v, v) = 1). X² = c²
//! always, so Var(X | x) = c² − γ². Hence, for the oracle's hash family,
//!
//! ```text
//! E[Y | x]   = 1[x = v] + 1[x ≠ v]·m/(m − 1)·(γ(x, v) − 1/m)
//! Var(Y | x) = (m/(m − 1))²·(c² − γ(x, v)²)
//! ```
//!
//! so E[f̂(v)] = f_v + β_v with the collision bias β_v = m/(m − 1)·Σ_{x≠v} f_x(γ(x, v) − 1/m), and
//! n·Var(f̂(v)) = (m/(m − 1))²·(c² − f_v − Σ_{x≠v} f_x γ(x, v)²).
//!
//! # Over the hash family
//! For a random seed k·γ ~ Binomial(k, 1/m) for x ≠ v (see [`Cms`](super::Cms)): E[γ] = 1/m
//! (unbiased over the family) and E[γ²] = 1/m² + (1 − 1/m)/(km). The family-averaged variance
//!
//! ```text
//! n·Var(f̂(v)) = (m/(m − 1))²·(c² − f_v − (1 − f_v)(1/m² + (1 − 1/m)/(km)))
//! ```
//!
//! is what the standard errors use (f̂_v plugged in) and, at f_v = 0, the worst case.

use super::cms::{DEFAULT_K, DEFAULT_M, check_shape};
use super::fwht::{fwht, hadamard_entry, hadamard_positive};
use super::sketch_hash::HashFamily;
use super::{FrequencyOracle, check_batch};
use crate::aggregate::{Aggregator, at_index, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::params::{Epsilon, check_domain};
use crate::sampling::{Bernoulli, BernoulliWords, uniform_below, uniform_below_from};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Default public hash seed ("HARMHCMS").
pub const DEFAULT_SEED: u64 = 0x4841_524D_4843_4D53;

/// Apple's Hadamard Count Mean Sketch over [0, d) (and arbitrary u64 items).
///
/// # Privacy
/// P[(j, l, b) | x] = (1/(km))·(1 − p if b = H\[l, h_j(x)\] else p). Two inputs give the same
/// probability when H\[l, h_j(x)\] = H\[l, h_j(x')\] and otherwise probabilities whose ratio is
/// (1 − p)/p = e^ε: exactly ε-LDP.
///
/// # Utility
/// `Var = (m/(m−1))²·[c² − f_v − Σ_{x≠v} f_x γ(x,v)²]/n` for the fixed family (module docs),
/// about OUE's variance plus 1 (c² = 4e^ε/(e^ε − 1)² + 1). Report: ⌈log₂ k⌉ + log₂ m + 1 bits.
/// Aggregation O(n + k·m log m), then O(k) per estimated item.
///
/// # Example
/// ```
/// use harmony_core::frequency::Hcms;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let hcms = Hcms::new(2.0, 1000).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = hcms.aggregator();
/// for i in 0..5000 {
///     let v = if i % 5 == 0 { 999 } else { i % 500 }; // 20% hold 999
///     agg.add(&hcms.randomize(v, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[999] - 0.2).abs() < 5.0 * est.std_errors[999]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Hcms {
    eps: Epsilon,
    d: usize,
    k: usize,
    m: usize,
    hashes: HashFamily,
    /// Flip probability p = 1/(1 + e^ε).
    p: f64,
    /// c = (e^ε + 1)/(e^ε − 1).
    c: f64,
    flip: Bernoulli,
    flip_words: BernoulliWords,
}

/// An HCMS report: the hash index, the Hadamard coefficient index and one sign bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HcmsReport {
    /// The hash function used, in [0, k).
    pub j: u32,
    /// The Hadamard row (coefficient), in [0, m).
    pub l: u32,
    /// The sign: true for +1.
    pub bit: bool,
}

impl WireReport for HcmsReport {
    const KIND: WireKind = ReportKind::Hcms.wire();
}

impl Hcms {
    /// HCMS with budget `epsilon` over [0, d), k = 256 hash functions onto m = 1024 buckets from
    /// [`DEFAULT_SEED`]. Errors: ε not finite and > 0, d < 2.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        Self::with_params(epsilon, d, DEFAULT_K, DEFAULT_M, DEFAULT_SEED)
    }
    /// HCMS with k hash functions onto m buckets (a power of two) from a public `seed`. Errors:
    /// ε not finite and > 0, d < 2, k ∉ [1, 2^20], m not a power of two in [2, 2^20],
    /// k·m > 2^26.
    pub fn with_params(epsilon: f64, d: usize, k: usize, m: usize, seed: u64) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_domain("d", d)?;
        check_shape(k, m)?;
        if !m.is_power_of_two() {
            return Err(Error::param("m", m, "a power of two (the Hadamard transform's size)"));
        }
        let em = (-eps.value()).exp();
        let p = em / (1.0 + em);
        Ok(Hcms {
            eps,
            d,
            k,
            m,
            hashes: HashFamily::new(seed, k, m),
            p,
            c: eps.c(),
            flip: Bernoulli::new(p),
            flip_words: BernoulliWords::new(p),
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
    /// h_j(item).
    pub fn bucket(&self, j: usize, item: u64) -> usize {
        self.hashes.bucket(j, item)
    }
    /// γ(x, v): the fraction of the k hash functions under which x and v collide.
    pub fn collision_fraction(&self, x: u64, v: u64) -> f64 {
        self.hashes.collision_fraction(x, v)
    }
    /// E[one report's estimate of f_v | x] for this hash family.
    pub fn report_mean(&self, x: usize, v: usize) -> f64 {
        self.hashes.report_mean(x, v)
    }
    /// E[f̂(v)] for a population with fractions `freqs` (this hash family).
    pub fn expectation(&self, freqs: &[f64], v: usize) -> f64 {
        self.hashes.expectation(freqs, v)
    }
    /// The collision bias E[f̂(v)] − f_v of this hash family (mean 0 over seeds).
    pub fn collision_bias(&self, freqs: &[f64], v: usize) -> f64 {
        self.expectation(freqs, v) - freqs[v]
    }
    /// n·Var(f̂(v)) averaged over hash seeds, at fraction f_v.
    pub fn family_variance(&self, f_v: f64) -> f64 {
        let (m, k) = (self.m as f64, self.k as f64);
        let s = self.hashes.debias_scale();
        let e_gamma2 = 1.0 / (m * m) + (1.0 - 1.0 / m) / (k * m);
        s * s * (self.c * self.c - f_v - (1.0 - f_v) * e_gamma2)
    }
    /// P[report | x] from the oracle's constants (0 if out of range).
    pub fn output_probability(&self, x: usize, r: &HcmsReport) -> f64 {
        if x >= self.d || r.j as usize >= self.k || r.l as usize >= self.m {
            return 0.0;
        }
        let h = self.hashes.bucket(r.j as usize, x as u64);
        let agrees = hadamard_positive(r.l as u64, h as u64) == r.bit;
        (if agrees { 1.0 - self.p } else { self.p }) / (self.k * self.m) as f64
    }
    /// ln(P[r | x]/P[r | x']): 0 or ±ε.
    pub fn log_likelihood_ratio(&self, x: usize, x2: usize, r: &HcmsReport) -> f64 {
        let j = r.j as usize;
        let s1 = hadamard_positive(r.l as u64, self.hashes.bucket(j, x as u64) as u64);
        let s2 = hadamard_positive(r.l as u64, self.hashes.bucket(j, x2 as u64) as u64);
        match (s1 == s2, s1 == r.bit) {
            (true, _) => 0.0,
            (false, true) => self.eps.value(),
            (false, false) => -self.eps.value(),
        }
    }
    /// Randomizes an arbitrary u64 item (domain value v is item v).
    pub fn randomize_item<R: Rng + ?Sized>(&self, item: u64, rng: &mut R) -> HcmsReport {
        let j = uniform_below(rng, self.k as u64) as usize;
        let l = uniform_below(rng, self.m as u64);
        let sign = hadamard_positive(l, self.hashes.bucket(j, item) as u64);
        HcmsReport { j: j as u32, l: l as u32, bit: sign != self.flip.sample(rng) }
    }
    /// Randomizes a batch of u64 items (appended): per 64 reports one 64-lane Bernoulli(p) word
    /// of flips; per report one random word for j (Lemire) and the top log₂ m bits of another
    /// for l. Same distribution as [`Hcms::randomize_item`].
    pub fn randomize_items<R: Rng + ?Sized>(&self, items: &[u64], rng: &mut R, out: &mut Vec<HcmsReport>) {
        out.reserve(items.len());
        let shift = 64 - self.m.trailing_zeros();
        for chunk in items.chunks(64) {
            let mut flips = self.flip_words.sample(rng);
            for &item in chunk {
                let first = rng.next_u64();
                let j = uniform_below_from(rng, first, self.k as u64) as usize;
                let l = rng.next_u64() >> shift;
                let sign = hadamard_positive(l, self.hashes.bucket(j, item) as u64);
                out.push(HcmsReport { j: j as u32, l: l as u32, bit: sign != (flips & 1 == 1) });
                flips >>= 1;
            }
        }
    }
}

impl FrequencyOracle for Hcms {
    fn validate_report(&self, r: &HcmsReport) -> Result<()> {
        if r.j as usize >= self.k {
            return Err(Error::report("j", r.j, format!("an index in [0, {})", self.k)));
        }
        if r.l as usize >= self.m {
            return Err(Error::report("l", r.l, format!("an index in [0, {})", self.m)));
        }
        Ok(())
    }
    type Report = HcmsReport;
    type Aggregator = HcmsAggregator;

    fn name(&self) -> &'static str {
        "hcms"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    fn domain_size(&self) -> usize {
        self.d
    }
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> HcmsReport {
        self.randomize_item(v as u64, rng)
    }
    /// [`Hcms::randomize_items`]; all inputs validated first.
    fn randomize_batch<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<HcmsReport>) -> Result<()> {
        check_batch(vs, self.d)?;
        let items: Vec<u64> = vs.iter().map(|&v| v as u64).collect();
        self.randomize_items(&items, rng, out);
        Ok(())
    }
    fn aggregator(&self) -> HcmsAggregator {
        HcmsAggregator { oracle: self.clone(), sums: vec![0; self.k * self.m], n: 0 }
    }
    /// Exact for this hash family: (m/(m − 1))²·(c² − γ(x, v)²).
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        let g = if x == v { 1.0 } else { self.collision_fraction(x as u64, v as u64) };
        let s = self.hashes.debias_scale();
        s * s * (self.c * self.c - g * g)
    }
    /// Averaged over hash seeds (x ≠ v): (m/(m − 1))²·(c² − 1/m² − (1 − 1/m)/(km)).
    fn worst_case_variance(&self) -> f64 {
        self.family_variance(0.0)
    }
    fn report_estimate(&self, r: &HcmsReport, v: usize) -> f64 {
        let h = self.hashes.bucket(r.j as usize, v as u64) as u64;
        let sign = if r.bit { 1.0 } else { -1.0 };
        self.hashes.debias_scale() * (self.c * sign * hadamard_entry(r.l as u64, h) as f64 - 1.0 / self.m as f64)
    }
}

/// Server-side HCMS state: Σ b per (row, coefficient), k × m signed sums.
#[derive(Debug, Clone)]
pub struct HcmsAggregator {
    oracle: Hcms,
    sums: Vec<i64>,
    n: u64,
}

impl HcmsAggregator {
    /// The transformed sketch T = S·H (row-major, k × m): T\[j\]\[h\] = Σ over reports of row j of
    /// b·H\[l, h\].
    pub fn transformed(&self) -> Vec<i64> {
        let mut t = self.sums.clone();
        t.chunks_exact_mut(self.oracle.m).for_each(fwht);
        t
    }
    /// Frequency estimates of arbitrary u64 items (O(k) each after one FWHT per row), with the
    /// family-averaged standard errors.
    pub fn estimate_items(&self, items: &[u64]) -> FrequencyEstimate {
        let o = &self.oracle;
        let n = self.n;
        if n == 0 {
            return FrequencyEstimate::empty(items.len());
        }
        let t = self.transformed();
        let nf = n as f64;
        let frequencies: Vec<f64> = items
            .iter()
            .map(|&item| {
                let s: i64 = (0..o.k).map(|j| t[j * o.m + o.hashes.bucket(j, item)]).sum();
                o.hashes.debias_scale() * (o.c * s as f64 / nf - 1.0 / o.m as f64)
            })
            .collect();
        let std_errors =
            frequencies.iter().map(|&f| (o.family_variance(f.clamp(0.0, 1.0)).max(0.0) / nf).sqrt()).collect();
        FrequencyEstimate { n, frequencies, std_errors }
    }
}

impl Aggregator for HcmsAggregator {
    type Report = HcmsReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &HcmsReport) -> Result<()> {
        self.oracle.validate_report(r)
    }
    #[inline]
    fn add_unchecked(&mut self, r: &HcmsReport) {
        self.sums[r.j as usize * self.oracle.m + r.l as usize] += if r.bit { 1 } else { -1 };
        self.n += 1;
    }
    fn add_batch(&mut self, reports: &[HcmsReport]) -> Result<()> {
        let (k, m) = (self.oracle.k as u32, self.oracle.m as u32);
        // Branch-free range check of the whole batch; the first bad index only on failure.
        if reports.iter().fold(false, |bad, r| bad | (r.j >= k) | (r.l >= m)) {
            let i = reports.iter().position(|r| self.validate(r).is_err()).unwrap_or(0);
            return self.validate(&reports[i]).map_err(|e| at_index(e, i));
        }
        reports.iter().for_each(|r| self.add_unchecked(r));
        Ok(())
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("hcms parameters", &self.oracle, &other.oracle)?;
        self.sums.iter_mut().zip(&other.sums).for_each(|(a, b)| *a += b);
        self.n += other.n;
        Ok(())
    }
    fn count(&self) -> u64 {
        self.n
    }
    fn estimate(&self) -> FrequencyEstimate {
        let items: Vec<u64> = (0..self.oracle.d as u64).collect();
        self.estimate_items(&items)
    }
}

impl crate::state::SaveState for HcmsAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n);
        w.i64s(&self.sums);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.n += r.u64("hcms n")?;
        r.add_i64s("hcms sums", &mut self.sums)
    }
}

impl super::registry::Registered for Hcms {
    const PARAMS: &'static [&'static str] = &["k", "m", "seed"];
    fn build(
        _: crate::kinds::OracleKind,
        epsilon: f64,
        d: usize,
        params: &super::registry::Params<'_>,
    ) -> Result<Self> {
        let (k, m) = (params.get("k", super::cms::DEFAULT_K)?, params.get("m", super::cms::DEFAULT_M)?);
        Hcms::with_params(epsilon, d, k, m, params.get("seed", DEFAULT_SEED)?)
    }
    fn output_probability(&self, x: usize, r: &HcmsReport) -> f64 {
        Hcms::output_probability(self, x, r)
    }
    fn log_likelihood_ratio(&self, x: usize, x2: usize, r: &HcmsReport) -> f64 {
        Hcms::log_likelihood_ratio(self, x, x2, r)
    }
    /// The aggregator's batch path (it validates again, cheaply).
    fn add_validated<'a>(agg: &mut Self::Aggregator, reports: impl Iterator<Item = &'a HcmsReport>) -> Result<()> {
        let inner: Vec<HcmsReport> = reports.copied().collect();
        agg.add_batch(&inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::fast_rng;

    fn outputs(o: &Hcms) -> Vec<HcmsReport> {
        (0..o.k as u32)
            .flat_map(|j| (0..o.m as u32).flat_map(move |l| [false, true].map(|bit| HcmsReport { j, l, bit })))
            .collect()
    }

    /// Every output (j, l, b): probabilities sum to 1, the largest ratio is e^ε (1e-9), and the
    /// log-likelihood ratio equals the direct one.
    #[test]
    fn exact_privacy_by_enumeration() {
        for &eps in &[0.5, 1.0, 3.0, 8.0] {
            for &(k, m, d) in &[(2usize, 4usize, 5usize), (3, 8, 4), (1, 2, 3)] {
                let o = Hcms::with_params(eps, d, k, m, 5).unwrap();
                let outs = outputs(&o);
                let mut worst = 1.0f64;
                for x in 0..d {
                    assert!((outs.iter().map(|r| o.output_probability(x, r)).sum::<f64>() - 1.0).abs() < 1e-12);
                    for y in 0..d {
                        for r in &outs {
                            let (a, b) = (o.output_probability(x, r), o.output_probability(y, r));
                            worst = worst.max(a / b);
                            assert!((o.log_likelihood_ratio(x, y, r) - (a / b).ln()).abs() < 1e-9);
                        }
                    }
                }
                assert!((worst / eps.exp() - 1.0).abs() < 1e-9, "eps {eps} k {k} m {m}: max ratio {worst}");
            }
        }
    }

    /// Scalar and batch samplers against the enumerated probabilities (k = 3, m = 4: 24
    /// outputs, 23 dof; critical value 68.0 at 2.5e-6 per statistic, 1e-5 for the four).
    #[test]
    fn samplers_match_the_output_probabilities() {
        let o = Hcms::with_params(1.0, 6, 3, 4, 8).unwrap();
        let outs = outputs(&o);
        let index = |r: &HcmsReport| (r.j as usize * 4 + r.l as usize) * 2 + r.bit as usize;
        let n = 200_000;
        for (case, x) in [1usize, 4].into_iter().enumerate() {
            let mut rng = fast_rng(60 + case as u64);
            let mut scalar = vec![0u64; 24];
            (0..n).for_each(|_| scalar[index(&o.randomize(x, &mut rng).unwrap())] += 1);
            let mut out = Vec::new();
            o.randomize_batch(&vec![x; n], &mut rng, &mut out).unwrap();
            let mut batch = vec![0u64; 24];
            out.iter().for_each(|r| batch[index(r)] += 1);
            for counts in [&scalar, &batch] {
                let chi2: f64 = outs
                    .iter()
                    .map(|r| {
                        let e = n as f64 * o.output_probability(x, r);
                        (counts[index(r)] as f64 - e).powi(2) / e
                    })
                    .sum();
                assert!(chi2 < 68.0, "x = {x}: n = {n}, chi2 {chi2:.1} >= 68.0 (23 dof)");
            }
        }
    }

    #[test]
    fn estimate_is_the_mean_of_report_estimates() {
        let o = Hcms::with_params(1.5, 40, 16, 64, 9).unwrap();
        let mut rng = fast_rng(61);
        let reports: Vec<HcmsReport> = (0..3000).map(|i| o.randomize(i * 7 % 40, &mut rng).unwrap()).collect();
        let mut a = o.aggregator();
        a.add_batch(&reports).unwrap();
        let est = a.estimate();
        for v in 0..40 {
            let mean = reports.iter().map(|r| o.report_estimate(r, v)).sum::<f64>() / 3000.0;
            assert!((est.frequencies[v] - mean).abs() < 1e-9, "v {v}: {} vs {mean}", est.frequencies[v]);
        }
        assert_eq!(a.estimate_items(&[5]).frequencies[0], est.frequencies[5]);
    }

    #[test]
    fn parameters_and_reports_are_checked() {
        assert!(Hcms::with_params(1.0, 10, 4, 24, 1).unwrap_err().to_string().contains("power of two"));
        let o = Hcms::with_params(1.0, 10, 4, 16, 1).unwrap();
        let a = o.aggregator();
        assert!(a.validate(&HcmsReport { j: 4, l: 0, bit: true }).unwrap_err().to_string().contains("j is 4"));
        assert!(a.validate(&HcmsReport { j: 0, l: 16, bit: true }).unwrap_err().to_string().contains("l is 16"));
        let mut a = o.aggregator();
        let batch = [HcmsReport { j: 0, l: 0, bit: true }, HcmsReport { j: 0, l: 99, bit: false }];
        assert!(a.add_batch(&batch).unwrap_err().to_string().contains("report 1: l is 99"));
        assert_eq!(a.count(), 0);
        let s2 = (16.0f64 / 15.0).powi(2);
        let c = 1f64.exp().mul_add(1.0, 1.0) / 1f64.exp_m1();
        assert!((o.report_variance(2, 2) - s2 * (c * c - 1.0)).abs() < 1e-9);
    }
}
