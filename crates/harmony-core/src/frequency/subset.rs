//! Subset Selection (the k-subset mechanism; Wang et al. 2016, "Mutual information optimal
//! local differential privacy"; Ye & Barg 2018): the user reports k of the d values.
//!
//! # Mechanism
//! With e = e^ε, an output is a set S ⊂ [0, d) of size k with P[S | x] = e/Z if x ∈ S and 1/Z
//! otherwise, Z = C(d − 1, k − 1)·e + C(d − 1, k). It is sampled in two steps: keep x with
//! probability p = C(d − 1, k − 1)·e/Z = ke/(ke + d − k) (as C(d − 1, k)/C(d − 1, k − 1) =
//! (d − k)/k), then add a uniform (k − 1)-subset (x kept) or k-subset (x dropped) of the d − 1
//! other values ([`floyd`]). The report is S as a d-bit vector with k bits set.
//!
//! # Privacy
//! P[S | x]/P[S | x'] = (p/(1 − p))·C(d − 1, k)/C(d − 1, k − 1) = (ke/(d − k))·((d − k)/k) = e
//! when x ∈ S ∌ x', its inverse in the other case, 1 otherwise: exactly ε-LDP. The tests check
//! it on the implemented sampler's own probabilities (the Bernoulli draw's exact p, Floyd's
//! exact uniform subsets).
//!
//! # Estimator and variance
//! A report supports v iff v ∈ S (a pure oracle, docs/MECHANISMS.md §0): p* = p and
//! q* = P[v ∈ S | x ≠ v] = p·(k − 1)/(d − 1) + (1 − p)·k/(d − 1) = (k − p)/(d − 1).
//! f̂_v = (C(v)/n − q*)/(p* − q*) is unbiased, and
//! `n·Var(f̂_v) = q*(1 − q*)/(p* − q*)² + f_v (1 − p* − q*)/(p* − q*)` (one report:
//! p*(1 − p*)/(p* − q*)² if x = v, Var* = q*(1 − q*)/(p* − q*)² otherwise).
//!
//! k = 1 is GRR. The default k is the integer in [1, d − 1] with the smallest Var*: near
//! d/(e + 1) (Ye–Barg), where p ≈ 1/2 and q* ≈ 1/(e + 1), so Var* is at most GRR's and about
//! OUE's 4e/(e − 1)² at large d (a little below it at moderate d).
//!
//! # Covariance
//! For items a ≠ b, with Y_v = (1[v ∈ S] − q*)/(p* − q*): if x ∉ {a, b},
//! P[a, b ∈ S] = r₀ = (k − 1)(k − 2p)/((d − 1)(d − 2)), so E[Y_a Y_b | x] = (r₀ − q*²)/(p* − q*)²;
//! if x = a, P[a, b ∈ S] = p(k − 1)/(d − 1) and E[Y_a Y_b | x] = p(p − 1)/((d − 1)(p* − q*)²).
//!
//! Report: d bits (⌈d/64⌉ words); aggregation bit-sliced, O(nd/64), as OUE's.

use super::unary::{BitSlicedCounts, validate_bits};
use super::{FrequencyOracle, PureParams};
use crate::aggregate::{Aggregator, at_index, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::kinds::OracleKind;
use crate::params::{Epsilon, check_domain};
use crate::sampling::{Bernoulli, floyd};
use crate::wire::{WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Subset Selection over [0, d): a k-subset that holds the true value with probability
/// ke^ε/(ke^ε + d − k) (see the module docs for the privacy proof and the variance).
///
/// # Example
/// ```
/// use harmony_core::frequency::SubsetSelection;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let ss = SubsetSelection::new(1.0, 100).unwrap();
/// assert_eq!(ss.k(), 27); // the integer near 100/(e + 1) with the smallest variance
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = ss.aggregator();
/// for i in 0..5000 {
///     agg.add(&ss.randomize(i % 10, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[3] - 0.1).abs() < 5.0 * est.std_errors[3]);
/// assert!((est.frequencies[50] - 0.0).abs() < 5.0 * est.std_errors[50]);
/// ```
#[derive(Debug, Clone)]
pub struct SubsetSelection {
    params: SsParams,
    include: Bernoulli,
}

impl PartialEq for SubsetSelection {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params
    }
}

#[derive(Debug, Clone, PartialEq)]
struct SsParams {
    eps: Epsilon,
    d: usize,
    k: usize,
    p: f64,
    q: f64,
}

/// A Subset Selection report: the k reported values as a d-bit vector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SsReport {
    /// ⌈d/64⌉ words, bit v of word v/64 set iff v is in the subset; exactly k bits set.
    pub bits: Vec<u64>,
}

impl WireReport for SsReport {
    const KIND: WireKind = WireKind { byte: 16, name: "SubsetSelection" };
}

impl SsReport {
    /// Whether v is in the subset.
    #[inline]
    pub fn contains(&self, v: usize) -> bool {
        (self.bits[v / 64] >> (v % 64)) & 1 == 1
    }
}

/// Var* = q*(1 − q*)/(p* − q*)² and (p, q*) for subsets of size k.
fn variance_for(eps: f64, d: usize, k: usize) -> (f64, f64, f64) {
    // p = ke/(ke + d − k), computed as 1/(1 + (d − k)/k·e^−ε) (no overflow at large ε).
    let p = 1.0 / (1.0 + (d - k) as f64 / k as f64 * (-eps).exp());
    let q = (k as f64 - p) / (d - 1) as f64;
    (q * (1.0 - q) / ((p - q) * (p - q)), p, q)
}

/// The k in [1, d − 1] with the smallest Var* (the first on a tie). Var* has one minimum in k,
/// near d/(e^ε + 1): the integers around it are compared.
pub fn optimal_k(eps: Epsilon, d: usize) -> usize {
    let centre = d as f64 / (eps.value().exp() + 1.0);
    let lo = (centre.floor() as usize).saturating_sub(2).max(1);
    let hi = (centre.ceil() as usize + 2).min(d - 1);
    (lo..=hi).fold(
        lo,
        |best, k| {
            if variance_for(eps.value(), d, k).0 < variance_for(eps.value(), d, best).0 { k } else { best }
        },
    )
}

impl SubsetSelection {
    /// Subset Selection with the optimal k ([`optimal_k`]). Errors: ε not finite and > 0,
    /// d < 2.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_domain("d", d)?;
        Self::with_k(epsilon, d, optimal_k(eps, d))
    }
    /// Subset Selection with subsets of size k. Errors: ε not finite and > 0, d < 2, k outside
    /// [1, d − 1].
    pub fn with_k(epsilon: f64, d: usize, k: usize) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_domain("d", d)?;
        if k == 0 || k >= d {
            return Err(Error::param("k", k, format!("a subset size in [1, {}] (d = {d})", d - 1)));
        }
        let (_, p, q) = variance_for(eps.value(), d, k);
        Ok(SubsetSelection { params: SsParams { eps, d, k, p, q }, include: Bernoulli::new(p) })
    }
    /// The subset size k.
    pub fn k(&self) -> usize {
        self.params.k
    }
    /// P[x ∈ S | x] = ke^ε/(ke^ε + d − k).
    pub fn p(&self) -> f64 {
        self.params.p
    }
    /// P[v ∈ S | x ≠ v] = (k − p)/(d − 1).
    pub fn q(&self) -> f64 {
        self.params.q
    }
    /// Support probabilities (p*, q*) = (p, q).
    pub fn pure_params(&self) -> PureParams {
        PureParams { p: self.params.p, q: self.params.q }
    }
    /// ln P[S | x] of the implemented sampler: its Bernoulli draw's exact probability of keeping
    /// x, times one over the number of subsets of the other values of the remaining size.
    fn ln_probability(&self, x: usize, r: &SsReport) -> f64 {
        let SsParams { d, k, .. } = self.params;
        let kept = self.include.probability();
        if r.contains(x) { kept.ln() - ln_choose(d - 1, k - 1) } else { (1.0 - kept).ln() - ln_choose(d - 1, k) }
    }
}

/// ln C(n, r), summed term by term (exact enough for the probabilities of small instances).
fn ln_choose(n: usize, r: usize) -> f64 {
    let r = r.min(n - r);
    (1..=r).map(|i| ((n - r + i) as f64 / i as f64).ln()).sum()
}

fn validate(r: &SsReport, d: usize, k: usize) -> Result<()> {
    validate_bits(&r.bits, d)?;
    let ones: u32 = r.bits.iter().map(|w| w.count_ones()).sum();
    if ones as usize != k {
        return Err(Error::report("bits", format!("{ones} bits set"), format!("exactly k = {k} bits set")));
    }
    Ok(())
}

impl FrequencyOracle for SubsetSelection {
    type Report = SsReport;
    type Aggregator = SsAggregator;

    fn name(&self) -> &'static str {
        "ss"
    }
    fn epsilon(&self) -> Epsilon {
        self.params.eps
    }
    fn domain_size(&self) -> usize {
        self.params.d
    }
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> SsReport {
        let mut report = SsReport { bits: Vec::new() };
        super::registry::Registered::randomize_into(self, v, rng, &mut report);
        report
    }
    fn validate_report(&self, r: &SsReport) -> Result<()> {
        validate(r, self.params.d, self.params.k)
    }
    fn aggregator(&self) -> SsAggregator {
        SsAggregator { params: self.params.clone(), n: 0, counts: BitSlicedCounts::new(self.params.d.div_ceil(64)) }
    }
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        self.pure_params().report_variance(x == v)
    }
    fn worst_case_variance(&self) -> f64 {
        self.pure_params().worst_case_variance()
    }
    fn aggregate_variance(&self, freqs: &[f64], v: usize) -> f64 {
        self.pure_params().aggregate_variance(freqs[v])
    }
    fn aggregate_cross_moment(&self, freqs: &[f64], a: usize, b: usize) -> Option<f64> {
        let SsParams { d, k, p, q, .. } = self.params;
        let (df, kf, scale) = (d as f64, k as f64, 1.0 / ((p - q) * (p - q)));
        let holder = p * (p - 1.0) / (df - 1.0) * scale;
        let other = if d > 2 { ((kf - 1.0) * (kf - 2.0 * p) / ((df - 1.0) * (df - 2.0)) - q * q) * scale } else { 0.0 };
        Some((freqs[a] + freqs[b]) * holder + (1.0 - freqs[a] - freqs[b]) * other)
    }
    fn report_estimate(&self, r: &SsReport, v: usize) -> f64 {
        (r.contains(v) as u8 as f64 - self.params.q) / (self.params.p - self.params.q)
    }
}

impl super::registry::Registered for SubsetSelection {
    const PARAMS: &'static [&'static str] = &["k"];
    const ADAPTIVE: bool = true;

    /// `ss` or `ss:k=…`.
    fn build(_: OracleKind, epsilon: f64, d: usize, params: &super::registry::Params<'_>) -> Result<Self> {
        match params.get_opt("k")? {
            Some(k) => Self::with_k(epsilon, d, k),
            None => Self::new(epsilon, d),
        }
    }
    /// 0 for a malformed report or x ≥ d.
    fn output_probability(&self, x: usize, r: &SsReport) -> f64 {
        if self.validate_report(r).is_err() || x >= self.params.d {
            return 0.0;
        }
        self.ln_probability(x, r).exp()
    }
    fn log_likelihood_ratio(&self, x: usize, x2: usize, r: &SsReport) -> f64 {
        if self.validate_report(r).is_err() || x.max(x2) >= self.params.d {
            return f64::NAN;
        }
        self.ln_probability(x, r) - self.ln_probability(x2, r)
    }
    /// Keeps x with the Bernoulli draw, then Floyd's algorithm over the d − 1 other values
    /// (index t maps to t, or t + 1 from x on) into the reused bit vector.
    fn randomize_into<R: Rng + ?Sized>(&self, v: usize, rng: &mut R, report: &mut SsReport) {
        let SsParams { d, k, .. } = self.params;
        let bits = &mut report.bits;
        bits.clear();
        bits.resize(d.div_ceil(64), 0);
        let kept = self.include.sample(rng);
        floyd(rng, k - kept as usize, d - 1, |t| {
            let y = t + (t >= v) as usize;
            let (w, mask) = (y / 64, 1u64 << (y % 64));
            let fresh = bits[w] & mask == 0;
            bits[w] |= mask;
            fresh
        });
        bits[v / 64] |= (kept as u64) << (v % 64);
    }
    fn add_validated<'a>(agg: &mut SsAggregator, reports: impl Iterator<Item = &'a SsReport>) -> Result<()> {
        agg.n += agg.counts.add_all(reports.map(|r| r.bits.as_slice()));
        Ok(())
    }
}

/// Server-side Subset Selection state: bit-sliced support counts (as OUE's).
#[derive(Debug, Clone)]
pub struct SsAggregator {
    params: SsParams,
    n: u64,
    counts: BitSlicedCounts,
}

impl SsAggregator {
    /// The number of reports holding each value (length d).
    pub fn counts(&self) -> Vec<u64> {
        self.counts.first_totals(self.params.d)
    }
}

impl Aggregator for SsAggregator {
    type Report = SsReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &SsReport) -> Result<()> {
        validate(r, self.params.d, self.params.k)
    }
    fn add_unchecked(&mut self, r: &SsReport) {
        self.counts.add_one(&r.bits);
        self.n += 1;
    }
    fn add_unchecked_times(&mut self, r: &SsReport, times: u64) {
        self.counts.add_times(&r.bits, times);
        self.n += times;
    }
    fn add_batch(&mut self, reports: &[SsReport]) -> Result<()> {
        for (i, r) in reports.iter().enumerate() {
            self.validate(r).map_err(|e| at_index(e, i))?;
        }
        <SubsetSelection as super::registry::Registered>::add_validated(self, reports.iter())
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("subset-selection parameters", &self.params, &other.params)?;
        self.counts.absorb(&other.counts);
        self.n += other.n;
        Ok(())
    }
    fn count(&self) -> u64 {
        self.n
    }
    fn estimate(&self) -> FrequencyEstimate {
        self.counts.pure_estimate(self.n, self.params.d, PureParams { p: self.params.p, q: self.params.q })
    }
}

impl crate::state::SaveState for SsAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n);
        self.counts.save_state(w);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.n += r.u64("subset-selection n")?;
        self.counts.merge_state(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frequency::Registered;
    use crate::sampling::fast_rng;
    use std::collections::HashMap;

    /// Every k-subset of [0, d) as a report.
    fn subsets(d: usize, k: usize) -> Vec<SsReport> {
        (0u64..1 << d).filter(|m| m.count_ones() as usize == k).map(|m| SsReport { bits: vec![m] }).collect()
    }

    /// The implemented sampler's pmf, enumerated: rows sum to 1 and the largest ratio between
    /// two inputs is e^ε (to 1e-12 relative), attained.
    #[test]
    fn exact_epsilon_on_the_sampler() {
        for eps in [0.1, 0.5, 1.0, 2.0, 4.0, 8.0] {
            for (d, k) in [(2, 1), (3, 1), (4, 2), (5, 2), (6, 3), (7, 2), (8, 5)] {
                let o = SubsetSelection::with_k(eps, d, k).unwrap();
                let outs = subsets(d, k);
                let probs: Vec<Vec<f64>> =
                    (0..d).map(|x| outs.iter().map(|r| o.output_probability(x, r)).collect()).collect();
                for row in &probs {
                    assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12, "eps {eps} d {d} k {k}");
                }
                let mut worst = 0.0f64;
                for a in &probs {
                    for b in &probs {
                        worst = a.iter().zip(b).fold(worst, |w, (pa, pb)| w.max(pa / pb));
                    }
                }
                assert!((worst / eps.exp() - 1.0).abs() < 1e-12, "eps {eps} d {d} k {k}: {worst}");
            }
        }
    }

    /// The sampler draws the enumerated pmf: χ² of 200,000 draws at d = 6, k = 2 (15 subsets,
    /// 14 degrees of freedom; 60 is far beyond the 1e-6 quantile, about 42).
    #[test]
    fn sampler_matches_its_pmf() {
        let o = SubsetSelection::with_k(1.0, 6, 2).unwrap();
        let mut rng = fast_rng(5);
        let n = 200_000;
        let mut counts: HashMap<SsReport, u64> = HashMap::new();
        for _ in 0..n {
            *counts.entry(o.randomize(4, &mut rng).unwrap()).or_default() += 1;
        }
        let chi2: f64 = subsets(6, 2)
            .iter()
            .map(|r| {
                let e = n as f64 * o.output_probability(4, r);
                let c = *counts.get(r).unwrap_or(&0) as f64;
                (c - e) * (c - e) / e
            })
            .sum();
        assert!(chi2 < 60.0, "chi2 = {chi2}");
        assert_eq!(counts.len(), 15);
    }

    /// The local search finds the brute-force optimum, which sits near d/(e^ε + 1).
    #[test]
    fn optimal_k_is_the_brute_force_minimum() {
        for eps in [0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0] {
            for d in (2..200).chain([500, 1000, 4096]) {
                let e = Epsilon::new(eps).unwrap();
                let brute =
                    (1..d).fold(1, |b, k| if variance_for(eps, d, k).0 < variance_for(eps, d, b).0 { k } else { b });
                assert_eq!(optimal_k(e, d), brute, "eps {eps} d {d}");
                assert!((brute as f64 - d as f64 / (eps.exp() + 1.0)).abs() <= 2.0, "eps {eps} d {d}");
            }
        }
        // SS's Var* is at most GRR's (k = 1 is GRR) and below OUE's here.
        let ss = SubsetSelection::new(1.0, 100).unwrap();
        let grr = crate::frequency::Grr::new(1.0, 100).unwrap();
        let oue = crate::frequency::Oue::new(1.0, 100).unwrap();
        assert!(ss.report_variance(1, 0) < grr.report_variance(1, 0).min(oue.report_variance(1, 0)));
    }

    /// Monte-Carlo variance of one report's estimate Y_v against the closed form, for x = v and
    /// x ≠ v: |z| < 4.42 with z = (sample variance − closed form)/SE, SE from the sample's
    /// fourth central moment.
    fn variance_z(o: &SubsetSelection, x: usize, v: usize, n: usize, seed: u64) -> f64 {
        let mut rng = fast_rng(seed);
        let ys: Vec<f64> = (0..n).map(|_| o.report_estimate(&o.randomize(x, &mut rng).unwrap(), v)).collect();
        let mean = ys.iter().sum::<f64>() / n as f64;
        let m2 = ys.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / n as f64;
        let m4 = ys.iter().map(|y| (y - mean).powi(4)).sum::<f64>() / n as f64;
        (m2 - o.report_variance(x, v)) / ((m4 - m2 * m2) / n as f64).sqrt()
    }

    fn check_variances(n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for (i, (eps, d)) in [(0.5, 10), (1.0, 100), (2.0, 30), (4.0, 200)].into_iter().enumerate() {
            let o = SubsetSelection::new(eps, d).unwrap();
            for (x, v) in [(3, 3), (3, 7)] {
                let z = variance_z(&o, x, v, n, 100 + 2 * i as u64 + (x == v) as u64);
                out.push(format!("eps {eps} d {d} k {} x {x} v {v}: z = {z:.2}", o.k()));
                assert!(z.abs() < 4.42, "{}", out.last().unwrap());
            }
        }
        out
    }

    #[test]
    fn variance_matches_the_closed_form() {
        check_variances(40_000);
    }

    #[test]
    #[ignore = "heavy: run in release with --ignored"]
    fn heavy_variance_matches_the_closed_form() {
        println!("{}", check_variances(1_000_000).join("\n"));
    }

    #[test]
    fn reports_are_validated_and_states_merge() {
        let o = SubsetSelection::with_k(1.0, 70, 3).unwrap();
        let mut a = o.aggregator();
        let e = a.add(&SsReport { bits: vec![0b111, 1] }).unwrap_err().to_string();
        assert!(e.contains("4 bits set") && e.contains("exactly k = 3"), "{e}");
        let e = a.add(&SsReport { bits: vec![0b111, 1 << 7] }).unwrap_err().to_string();
        assert!(e.contains("padding"), "{e}");
        assert!(a.add(&SsReport { bits: vec![0b111] }).is_err());
        assert!(o.with_k_err().contains("[1, 69]"));
        let mut rng = fast_rng(3);
        let reports: Vec<SsReport> = (0..100).map(|i| o.randomize(i % 70, &mut rng).unwrap()).collect();
        a.add_batch(&reports).unwrap();
        let mut b = o.aggregator();
        reports.iter().for_each(|r| b.add(r).unwrap());
        let mut saved = Vec::new();
        crate::state::SaveState::save_state(&a, &mut crate::state::StateWriter(&mut saved));
        let mut c = o.aggregator();
        crate::state::SaveState::merge_state(&mut c, &mut crate::state::StateReader::new(&saved)).unwrap();
        assert_eq!((a.counts(), a.count()), (b.counts(), b.count()));
        assert_eq!((c.counts(), c.count()), (b.counts(), 100));
        assert!(a.merge(&SubsetSelection::with_k(1.0, 70, 4).unwrap().aggregator()).is_err());
        assert_eq!(SubsetSelection::build(OracleKind::Ss, 1.0, 70, &super::super::Params::parse("ss:k=3")).unwrap(), o);
    }

    impl SubsetSelection {
        fn with_k_err(&self) -> String {
            Self::with_k(1.0, self.params.d, self.params.d).unwrap_err().to_string()
        }
    }
}
