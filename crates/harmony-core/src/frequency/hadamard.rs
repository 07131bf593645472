//! The 1-bit Hadamard mechanism (Cormode's "HE"; Harmony's orthogonal Bassily–Smith;
//! docs/MECHANISMS.md §A5).
//!
//! K = the next power of two ≥ d and H the K×K Sylvester matrix, H[j, x] = (−1)^popcount(j & x).
//! The user draws a row j ~ U\[K\] (independent of the data; it may come from public randomness)
//! and sends b = H[j, x] with probability e^ε/(e^ε + 1), −H[j, x] otherwise. The server
//! accumulates A\[j\] += b and computes every estimate at once with one fast Walsh–Hadamard
//! transform: f̂ = (c/n)·H A with c = (e^ε + 1)/(e^ε − 1). O(n + K log K).

use super::FrequencyOracle;
use super::fwht::{fwht, hadamard_entry, hadamard_positive};
use crate::aggregate::{Aggregator, check_compatible};
use crate::error::Result;
use crate::estimate::FrequencyEstimate;
use crate::frequency::SignedRowSums;
use crate::params::{Epsilon, check_domain};
use crate::sampling::{Bernoulli, uniform_below};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The 1-bit Hadamard frequency oracle (the orthogonal form of Bassily–Smith).
///
/// # Privacy
/// The row j is uniform and independent of x; given j the bit is binary randomized response
/// on H[j, x]: P[(j, b) | x] = (1/K)·(e^ε/(e^ε + 1) if b = H[j, x] else 1/(e^ε + 1)). The ratio
/// for two inputs is at most e^ε, attained on rows where H[j, x] ≠ H[j, x']: exactly ε-LDP.
///
/// # Utility
/// One report's estimate c·b·H[j, v] has mean 1[x = v] (rows of H are orthogonal) and variance
/// c² − 1[x = v], so `Var = (c² − f_v)/n` with c = (e^ε + 1)/(e^ε − 1); worst case c²/n. Report:
/// 1 bit plus log₂ K bits for j (or none if j is public).
///
/// # Example
/// ```
/// use harmony_core::frequency::Hadamard;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let h = Hadamard::new(2.0, 10).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = h.aggregator();
/// for i in 0..5000 {
///     agg.add(&h.randomize(if i % 2 == 0 { 3 } else { 7 }, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[3] - 0.5).abs() < 5.0 * est.std_errors[3]);
/// assert!((est.frequencies[0] - 0.0).abs() < 5.0 * est.std_errors[0]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Hadamard {
    eps: Epsilon,
    d: usize,
    k: usize,
    p: f64,
    c: f64,
    keep: Bernoulli,
}

/// A 1-bit Hadamard report: the row and the randomized sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HadamardReport {
    /// The row index, in [0, K).
    pub j: u32,
    /// The randomized sign: `true` is +1.
    pub bit: bool,
}

impl WireReport for HadamardReport {
    const KIND: WireKind = ReportKind::Hadamard.wire();
}

impl Hadamard {
    /// The 1-bit Hadamard mechanism with budget `epsilon` over [0, d). Errors: ε not finite and
    /// > 0, d < 2.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_domain("d", d)?;
        let p = 1.0 / (1.0 + (-eps.value()).exp());
        Ok(Hadamard { eps, d, k: d.next_power_of_two(), p, c: eps.c(), keep: Bernoulli::new(p) })
    }
    /// K: the number of rows (the next power of two ≥ d).
    pub fn rows(&self) -> usize {
        self.k
    }
    /// c = (e^ε + 1)/(e^ε − 1).
    pub fn c(&self) -> f64 {
        self.c
    }
    /// P[report | x] from the oracle's constants (0 if j ≥ K or x ≥ d).
    pub fn output_probability(&self, x: usize, r: &HadamardReport) -> f64 {
        if r.j as usize >= self.k || x >= self.d {
            return 0.0;
        }
        let agree = hadamard_positive(r.j as u64, x as u64) == r.bit;
        let pr = if agree { self.p } else { self.p * (-self.eps.value()).exp() };
        pr / self.k as f64
    }
}

impl FrequencyOracle for Hadamard {
    type Report = HadamardReport;
    type Aggregator = HadamardAggregator;

    fn name(&self) -> &'static str {
        "hadamard"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    fn domain_size(&self) -> usize {
        self.d
    }
    // Always: two draws and a parity, in every batch loop (left to the inliner, the batch
    // loops of the benchmark and the simulations called it out of line, ~20% slower).
    #[inline(always)]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> HadamardReport {
        let j = uniform_below(rng, self.k as u64);
        let keep = self.keep.sample(rng);
        HadamardReport { j: j as u32, bit: hadamard_positive(j, v as u64) == keep }
    }
    fn validate_report(&self, r: &HadamardReport) -> Result<()> {
        if r.j as usize >= self.k {
            return Err(crate::error::Error::report("j", r.j, format!("a row index in [0, {})", self.k)));
        }
        Ok(())
    }
    fn aggregator(&self) -> HadamardAggregator {
        HadamardAggregator { oracle: self.clone(), state: SignedRowSums::new(self.k) }
    }
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        self.c * self.c - (x == v) as u8 as f64
    }
    fn worst_case_variance(&self) -> f64 {
        self.c * self.c
    }
    fn aggregate_variance(&self, freqs: &[f64], v: usize) -> f64 {
        self.c * self.c - freqs[v]
    }
    fn aggregate_cross_moment(&self, _freqs: &[f64], _a: usize, _b: usize) -> Option<f64> {
        Some(0.0)
    }
    fn report_estimate(&self, r: &HadamardReport, v: usize) -> f64 {
        let b = if r.bit { 1.0 } else { -1.0 };
        self.c * b * hadamard_entry(r.j as u64, v as u64) as f64
    }
}

/// Server-side 1-bit Hadamard state: the signed sum A\[j\] of each row's bits. O(K) memory.
#[derive(Debug, Clone)]
pub struct HadamardAggregator {
    oracle: Hadamard,
    state: SignedRowSums,
}

impl Aggregator for HadamardAggregator {
    type Report = HadamardReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &HadamardReport) -> Result<()> {
        self.state.validate(r.j)
    }
    #[inline]
    fn add_unchecked(&mut self, r: &HadamardReport) {
        self.state.add(r.j, r.bit);
    }
    fn add_unchecked_times(&mut self, r: &HadamardReport, times: u64) {
        self.state.add_times(r.j, r.bit, times);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("hadamard parameters", &self.oracle, &other.oracle)?;
        self.state.merge(&other.state);
        Ok(())
    }
    fn count(&self) -> u64 {
        self.state.n
    }
    fn estimate(&self) -> FrequencyEstimate {
        let (d, n) = (self.oracle.d, self.state.n);
        if n == 0 {
            return FrequencyEstimate::empty(d);
        }
        let mut t = self.state.sums.clone();
        fwht(&mut t);
        let c = self.oracle.c;
        let frequencies: Vec<f64> = t[..d].iter().map(|&s| c * s as f64 / n as f64).collect();
        let std_errors =
            frequencies.iter().map(|&f| ((c * c - f.clamp(0.0, 1.0)).max(0.0) / n as f64).sqrt()).collect();
        FrequencyEstimate { n, frequencies, std_errors }
    }
}

impl crate::state::SaveState for HadamardAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        self.state.save_state(w);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.state.merge_state(r)
    }
}

impl super::registry::Registered for Hadamard {
    const ADAPTIVE: bool = true;
    fn build(_: crate::kinds::OracleKind, epsilon: f64, d: usize, _: &super::registry::Params<'_>) -> Result<Self> {
        Self::new(epsilon, d)
    }
    fn output_probability(&self, x: usize, r: &HadamardReport) -> f64 {
        Hadamard::output_probability(self, x, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::fast_rng;

    #[test]
    fn fwht_estimate_equals_mean_of_report_estimates() {
        let h = Hadamard::new(1.0, 11).unwrap();
        assert_eq!(h.rows(), 16);
        let mut rng = fast_rng(401);
        let reports: Vec<_> = (0..500).map(|i| h.randomize(i % 11, &mut rng).unwrap()).collect();
        let mut a = h.aggregator();
        a.add_batch(&reports).unwrap();
        let est = a.estimate();
        for v in 0..11 {
            let mean = reports.iter().map(|r| h.report_estimate(r, v)).sum::<f64>() / 500.0;
            assert!((est.frequencies[v] - mean).abs() < 1e-12, "v = {v}");
        }
    }

    #[test]
    fn validate_rejects_rows_beyond_k() {
        let h = Hadamard::new(1.0, 5).unwrap();
        let e = h.aggregator().validate(&HadamardReport { j: 8, bit: true }).unwrap_err().to_string();
        assert!(e.contains("j is 8") && e.contains("[0, 8)"), "{e}");
    }
}
