//! The original Bassily–Smith frequency oracle with a random ±1/√m projection (Harmony Alg. 3;
//! docs/MECHANISMS.md §A5, last item). Kept only as a baseline: use [`super::Hadamard`].
//!
//! A public m×d matrix Φ with entries s(j, v)/√m, s = ±1, is generated from a public seed
//! (SplitMix64 of the seed, the column and the word index: reproducible on every platform and
//! version). The user draws j ~ U\[m\] and sends b = s(j, x) with probability e^ε/(e^ε + 1),
//! −s(j, x) otherwise. The server's estimate is f̂_v = (c/n) Σ_i b_i s(j_i, v).
//!
//! For a *fixed* Φ, E[f̂_v] = Σ_x f_x ⟨Φ_x, Φ_v⟩ = f_v + Σ_{x≠v} f_x ⟨Φ_x, Φ_v⟩: the estimate is
//! biased, by about √(Σ f²/m) in RMS; it is unbiased only on average over random matrices. The
//! Sylvester matrix (`Hadamard`) has orthogonal columns and no bias at the same cost.

use super::FrequencyOracle;
use crate::aggregate::{Aggregator, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::frequency::SignedRowSums;
use crate::params::{Epsilon, check_domain};
use crate::sampling::{Bernoulli, padding_mask, splitmix64, uniform_below};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, OnceLock};

/// The default public seed of the projection matrix.
pub const DEFAULT_MATRIX_SEED: u64 = 0x4841_524D_4F4E_5942; // "HARMONYB"

/// The largest matrix stored, in bits (m·d ≤ 2^30, i.e. 128 MiB).
pub const MAX_MATRIX_BITS: u64 = 1 << 30;

/// Bassily–Smith with a random ±1/√m matrix — a BIASED baseline.
///
/// **For a fixed matrix Φ the estimator is biased**: E[f̂_v] = f_v + Σ_{x≠v} f_x ⟨Φ_x, Φ_v⟩
/// (see [`BassilySmith::expectation`] and [`BassilySmith::bias`]). It is kept only to reproduce
/// the original algorithm; use [`super::Hadamard`], its orthogonal (unbiased) form, instead.
/// The default m is K, the next power of two ≥ d (the Hadamard mechanism's row count).
///
/// # Privacy
/// The row j is uniform and independent of x, and given j the bit is binary randomized response
/// on s(j, x): P[(j, b) | x] = (1/m)·(e^ε/(e^ε + 1) if b = s(j, x) else 1/(e^ε + 1)). The ratio
/// for two inputs is at most e^ε: exactly ε-LDP whatever Φ.
///
/// # Utility
/// One report's estimate c·b·s(j, v) has mean ρ(x, v) = ⟨Φ_x, Φ_v⟩ and variance
/// c² − ρ(x, v)², with c = (e^ε + 1)/(e^ε − 1); so `Var = [c² − Σ_x f_x ρ(x, v)²]/n` (the f_v
/// term is the x = v summand, ρ = 1), around the *biased* mean Σ_x f_x ρ(x, v). Standard errors
/// plug in the estimates when d²m ≤ 2^32, else use the upper bound (c² − f̂_v)/n. Estimation
/// costs O(m·d).
///
/// # Example
/// ```
/// use harmony_core::frequency::BassilySmith;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let bs = BassilySmith::new(2.0, 8).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = bs.aggregator();
/// let truth = [0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
/// for i in 0..5000 {
///     agg.add(&bs.randomize(i % 2, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// // The estimate centres on the biased expectation, not on the truth.
/// let target = bs.expectation(&truth, 0);
/// assert!((est.frequencies[0] - target).abs() < 5.0 * est.std_errors[0]);
/// ```
#[derive(Clone)]
pub struct BassilySmith {
    eps: Epsilon,
    d: usize,
    m: usize,
    seed: u64,
    p: f64,
    c: f64,
    keep: Bernoulli,
    /// Column v (the signs s(·, v), bit j set for +1) in words [v·wpc, (v + 1)·wpc).
    columns: Arc<[u64]>,
    worst: Arc<OnceLock<f64>>,
}

impl std::fmt::Debug for BassilySmith {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BassilySmith")
            .field("epsilon", &self.eps.value())
            .field("d", &self.d)
            .field("m", &self.m)
            .field("seed", &self.seed)
            .finish()
    }
}

impl PartialEq for BassilySmith {
    fn eq(&self, o: &Self) -> bool {
        (self.eps, self.d, self.m, self.seed) == (o.eps, o.d, o.m, o.seed)
    }
}

/// A Bassily–Smith report: the row and the randomized sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BassilySmithReport {
    /// The row index, in [0, m).
    pub j: u32,
    /// The randomized sign: `true` is +1.
    pub bit: bool,
}

impl WireReport for BassilySmithReport {
    const KIND: WireKind = ReportKind::BassilySmith.wire();
}

impl BassilySmithReport {
    /// Decodes a report's bytes as [`crate::wire::decode`] does (the header, postcard's varint
    /// `j`, then the bool as one byte, 0 or 1), without serde: an engine's batch path over
    /// stored reports. `None` wherever that decode fails; call it for the error.
    pub fn decode_fast(bytes: &[u8]) -> Option<BassilySmithReport> {
        let [crate::wire::WIRE_VERSION, kind, payload @ ..] = bytes else { return None };
        if *kind != Self::KIND.byte {
            return None;
        }
        let (j, n) = crate::wire::take_varint(payload, 32)?;
        let bit = match payload[n..] {
            [0] => false,
            [1] => true,
            _ => return None,
        };
        Some(BassilySmithReport { j: j as u32, bit })
    }
}

impl BassilySmith {
    /// Bassily–Smith with [`default_rows`](Self::default_rows)`(d)` rows and
    /// [`DEFAULT_MATRIX_SEED`]. Errors: ε not finite and > 0, d < 2, m·d > 2^30.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        let d = check_domain("d", d)?;
        Self::with_matrix(epsilon, d, Self::default_rows(d), DEFAULT_MATRIX_SEED)
    }
    /// The default number of rows: 2^16, capped so that the stored matrix has d·m ≤ 2^30 bits,
    /// and never below K (the next power of two ≥ d). Many rows keep the fixed-matrix bias small
    /// (RMS ≈ √(Σ f²/m) ≤ 0.004 at m = 2^16), as the paper's m = log(k+1)·log(2/β)/γ² intends;
    /// it is still not zero — use [`Hadamard`](crate::frequency::Hadamard) for an unbiased oracle.
    pub fn default_rows(d: usize) -> usize {
        let cap = (MAX_MATRIX_BITS / d.max(1) as u64) as usize;
        (1usize << 16).min(cap).max(d.next_power_of_two())
    }
    /// Bassily–Smith with an explicit number of rows m ≥ 1 and matrix seed.
    pub fn with_matrix(epsilon: f64, d: usize, m: usize, seed: u64) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_domain("d", d)?;
        if !(1..=u32::MAX as usize).contains(&m) {
            return Err(Error::param("m", m, "an integer in [1, 2^32)"));
        }
        if (m as u64).saturating_mul(d as u64) > MAX_MATRIX_BITS {
            return Err(Error::param(
                "d",
                d,
                format!("d·m <= 2^30 (m = {m}) for the Bassily–Smith baseline, whose matrix is stored; use hadamard"),
            ));
        }
        let wpc = m.div_ceil(64);
        let mut columns = Vec::with_capacity(wpc * d);
        for v in 0..d as u64 {
            for w in 0..wpc as u64 {
                columns.push(splitmix64(seed.wrapping_add(splitmix64((v << 32) | w))));
            }
            let last = columns.len() - 1;
            columns[last] &= padding_mask(m);
        }
        let p = 1.0 / (1.0 + (-eps.value()).exp());
        Ok(BassilySmith {
            eps,
            d,
            m,
            seed,
            p,
            c: eps.c(),
            keep: Bernoulli::new(p),
            columns: columns.into(),
            worst: Arc::default(),
        })
    }
    /// The number of rows m.
    pub fn rows(&self) -> usize {
        self.m
    }
    /// The public matrix seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
    fn column(&self, v: usize) -> &[u64] {
        let wpc = self.m.div_ceil(64);
        &self.columns[v * wpc..(v + 1) * wpc]
    }
    /// s(j, v) = √m·Φ[j, v] as a bool (`true` = +1).
    #[inline]
    pub fn sign(&self, j: usize, v: usize) -> bool {
        (self.column(v)[j / 64] >> (j % 64)) & 1 == 1
    }
    /// ρ(x, v) = ⟨Φ_x, Φ_v⟩ = (1/m) Σ_j s(j, x)s(j, v) (1 when x = v). O(m/64).
    ///
    /// # Panics
    /// If x or v is ≥ d (as do `report_variance` and `aggregate_variance`, which use it).
    pub fn inner_product(&self, x: usize, v: usize) -> f64 {
        let diff: u32 = self.column(x).iter().zip(self.column(v)).map(|(a, b)| (a ^ b).count_ones()).sum();
        (self.m as f64 - 2.0 * diff as f64) / self.m as f64
    }
    /// E[f̂_v] = Σ_x freqs\[x\]·ρ(x, v) for a population with fractions `freqs`.
    pub fn expectation(&self, freqs: &[f64], v: usize) -> f64 {
        freqs.iter().enumerate().map(|(x, &f)| f * self.inner_product(x, v)).sum()
    }
    /// The bias E[f̂_v] − f_v = Σ_{x≠v} freqs\[x\]·ρ(x, v).
    pub fn bias(&self, freqs: &[f64], v: usize) -> f64 {
        self.expectation(freqs, v) - freqs[v]
    }
    /// P[report | x] from the oracle's constants (0 if j ≥ m or x ≥ d).
    pub fn output_probability(&self, x: usize, r: &BassilySmithReport) -> f64 {
        if r.j as usize >= self.m || x >= self.d {
            return 0.0;
        }
        let pr = if self.sign(r.j as usize, x) == r.bit { self.p } else { self.p * (-self.eps.value()).exp() };
        pr / self.m as f64
    }
}

impl FrequencyOracle for BassilySmith {
    type Report = BassilySmithReport;
    type Aggregator = BassilySmithAggregator;

    fn name(&self) -> &'static str {
        "bassily-smith"
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
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> BassilySmithReport {
        let j = uniform_below(rng, self.m as u64) as usize;
        let keep = self.keep.sample(rng);
        BassilySmithReport { j: j as u32, bit: self.sign(j, v) == keep }
    }
    fn validate_report(&self, r: &BassilySmithReport) -> Result<()> {
        if r.j as usize >= self.m {
            return Err(Error::report("j", r.j, format!("a row index in [0, {})", self.m)));
        }
        Ok(())
    }
    fn aggregator(&self) -> BassilySmithAggregator {
        BassilySmithAggregator { oracle: self.clone(), state: SignedRowSums::new(self.m) }
    }
    /// c² − ρ(x, v)²: the variance around the (biased) mean ρ(x, v).
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        self.c * self.c - self.inner_product(x, v).powi(2)
    }
    /// c² − min_{x≠v} ρ(x, v)² (computed once, lazily; stops at the first orthogonal pair).
    fn worst_case_variance(&self) -> f64 {
        *self.worst.get_or_init(|| {
            let mut min_sq = 1.0f64;
            'outer: for x in 0..self.d {
                for v in x + 1..self.d {
                    min_sq = min_sq.min(self.inner_product(x, v).powi(2));
                    if min_sq == 0.0 {
                        break 'outer;
                    }
                }
            }
            self.c * self.c - min_sq
        })
    }
    fn aggregate_variance(&self, freqs: &[f64], v: usize) -> f64 {
        self.c * self.c - freqs.iter().enumerate().map(|(x, &f)| f * self.inner_product(x, v).powi(2)).sum::<f64>()
    }
    fn report_estimate(&self, r: &BassilySmithReport, v: usize) -> f64 {
        let same = self.sign(r.j as usize, v) == r.bit;
        if same { self.c } else { -self.c }
    }
}

/// Server-side Bassily–Smith state: the signed sum of each row's bits. O(m) memory.
#[derive(Debug, Clone)]
pub struct BassilySmithAggregator {
    oracle: BassilySmith,
    state: SignedRowSums,
}

impl Aggregator for BassilySmithAggregator {
    type Report = BassilySmithReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &BassilySmithReport) -> Result<()> {
        self.state.validate(r.j)
    }
    #[inline]
    fn add_unchecked(&mut self, r: &BassilySmithReport) {
        self.state.add(r.j, r.bit);
    }
    fn add_unchecked_times(&mut self, r: &BassilySmithReport, times: u64) {
        self.state.add_times(r.j, r.bit, times);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("bassily-smith parameters", &self.oracle, &other.oracle)?;
        self.state.merge(&other.state);
        Ok(())
    }
    fn count(&self) -> u64 {
        self.state.n
    }
    fn estimate(&self) -> FrequencyEstimate {
        let o = &self.oracle;
        let (d, n) = (o.d, self.state.n);
        if n == 0 {
            return FrequencyEstimate::empty(d);
        }
        let nf = n as f64;
        let total: i64 = self.state.sums.iter().sum();
        let frequencies: Vec<f64> = (0..d)
            .map(|v| {
                let mut plus = 0i64;
                for (w, &word) in o.column(v).iter().enumerate() {
                    let mut bits = word;
                    while bits != 0 {
                        plus += self.state.sums[w * 64 + bits.trailing_zeros() as usize];
                        bits &= bits - 1;
                    }
                }
                o.c * (2 * plus - total) as f64 / nf
            })
            .collect();
        let c2 = o.c * o.c;
        let clamped: Vec<f64> = frequencies.iter().map(|f| f.clamp(0.0, 1.0)).collect();
        let exact = (d as u64).pow(2).saturating_mul(o.m as u64) <= 1 << 32;
        let std_errors = (0..d)
            .map(|v| {
                let var = if exact { o.aggregate_variance(&clamped, v) } else { c2 - clamped[v] };
                (var.max(0.0) / nf).sqrt()
            })
            .collect();
        FrequencyEstimate { n, frequencies, std_errors }
    }
}

impl crate::state::SaveState for BassilySmithAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        self.state.save_state(w);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.state.merge_state(r)
    }
}

impl super::registry::Registered for BassilySmith {
    fn build(_: crate::kinds::OracleKind, epsilon: f64, d: usize, _: &super::registry::Params<'_>) -> Result<Self> {
        Self::new(epsilon, d)
    }
    fn output_probability(&self, x: usize, r: &BassilySmithReport) -> f64 {
        BassilySmith::output_probability(self, x, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::fast_rng;

    /// `decode_fast` accepts exactly the byte strings `wire::decode` accepts, with the same
    /// report: random and edge reports, their near misses, and hand-made ones.
    #[test]
    fn the_fast_decode_agrees_with_the_wire_decode() {
        use rand::RngExt;
        let mut rng = fast_rng(13);
        let mut inputs = Vec::new();
        for i in 0..2_000u32 {
            let j = if i < 4 {
                [0, 127, 128, u32::MAX][i as usize]
            } else {
                rng.random::<u32>() >> rng.random_range(0..32)
            };
            let r = BassilySmithReport { j, bit: rng.random() };
            let bytes = crate::wire::encode(&r);
            assert_eq!(BassilySmithReport::decode_fast(&bytes), Some(r));
            inputs.extend(crate::wire::mutations(&bytes, &mut rng));
        }
        let header = [crate::wire::WIRE_VERSION, BassilySmithReport::KIND.byte];
        let hand_made = [&[0x80, 0x00, 0x01][..], &[0x05, 0x02], &[0x05], &[0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0x00]];
        for (payload, ok) in hand_made.into_iter().zip([true, false, false, false]) {
            let bytes = [&header[..], payload].concat();
            assert_eq!(crate::wire::decode::<BassilySmithReport>(&bytes).is_ok(), ok, "{payload:02x?}");
            inputs.push(bytes);
        }
        for bytes in &inputs {
            let slow = crate::wire::decode::<BassilySmithReport>(bytes).ok();
            assert_eq!(BassilySmithReport::decode_fast(bytes), slow, "{bytes:02x?}");
        }
    }

    #[test]
    fn matrix_is_reproducible_and_seeded() {
        let a = BassilySmith::new(1.0, 20).unwrap();
        let b = BassilySmith::new(1.0, 20).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.columns, b.columns);
        assert_eq!(a.rows(), 1 << 16);
        assert_eq!(BassilySmith::default_rows(20_000), (1 << 30) / 20_000);
        let c = BassilySmith::with_matrix(1.0, 20, 1 << 16, 7).unwrap();
        assert_ne!(a.columns, c.columns);
        assert_ne!(a, c);
        for v in 0..20 {
            assert_eq!(a.inner_product(v, v), 1.0);
        }
        // Some pair of columns is not orthogonal: the mechanism is biased for this matrix.
        assert!((0..20).any(|x| (0..20).any(|v| x != v && a.inner_product(x, v) != 0.0)));
        assert!(BassilySmith::new(1.0, 40_000).unwrap_err().to_string().contains("hadamard"));
    }

    #[test]
    fn estimate_equals_mean_of_report_estimates() {
        let o = BassilySmith::with_matrix(1.5, 10, 70, 3).unwrap();
        let mut rng = fast_rng(601);
        let reports: Vec<_> = (0..300).map(|i| o.randomize(i % 10, &mut rng).unwrap()).collect();
        let mut a = o.aggregator();
        a.add_batch(&reports).unwrap();
        let est = a.estimate();
        for v in 0..10 {
            let mean = reports.iter().map(|r| o.report_estimate(r, v)).sum::<f64>() / 300.0;
            assert!((est.frequencies[v] - mean).abs() < 1e-12);
        }
        let e = a.validate(&BassilySmithReport { j: 70, bit: false }).unwrap_err().to_string();
        assert!(e.contains("j is 70") && e.contains("[0, 70)"), "{e}");
    }

    #[test]
    fn worst_case_is_c2_minus_the_smallest_squared_inner_product() {
        let o = BassilySmith::with_matrix(1.0, 6, 5, 11).unwrap();
        let mut worst = 0.0f64;
        for x in 0..6 {
            for v in 0..6 {
                worst = worst.max(o.report_variance(x, v));
            }
        }
        assert!((o.worst_case_variance() - worst).abs() < 1e-12);
    }
}
