//! The Fourier method of Cormode, Kulkarni and Srivastava (SIGMOD'18, "InpHT"): attributes are
//! binary-encoded (attribute a with c_a categories takes ⌈log2 c_a⌉ bits); a marginal over the
//! bit set β is p(y) = 2^{−|β|} Σ_{α ⊆ β} θ_α (−1)^{⟨α, y⟩} with θ_α = E[(−1)^{⟨α, x⟩}], θ_∅ = 1.
//! The set T of needed non-empty coefficients is the union over the queries of all subsets of
//! their bit sets ([`FourierPlan`]).
//!
//! # Devices
//! A device draws α ∈ T uniformly at random (its group) and reports α with s·t, t =
//! (−1)^{⟨α, x⟩}, where s = +1 with probability e^ε/(e^ε + 1) (binary randomized response;
//! [`FourierRandomizer`]). The server counts, per α, the reports n_α and the positive ones
//! ([`FourierAggregator`], integer state).
//!
//! # Utility
//! With c = (e^ε + 1)/(e^ε − 1), c·s·t is unbiased for t with variance c² − 1, so
//! θ̂_α = c(2·pos_α − n_α)/n_α (the mean over the n_α devices that drew α). The group counts are
//! realized (multinomial), and conditional on them the groups are a uniformly random partition
//! of the n devices (see [`super::groups`]), so with the finite-population correction
//! `Var θ̂_α = [c² − 1 + (1 − θ_α²)(n − n_α)/(n − 1)]/n_α` and, between two groups,
//! `Cov(θ̂_α, θ̂_α') = −(θ_{α⊕α'} − θ_α θ_α')/(n − 1)` (sampling without replacement; the noises
//! are independent). A cell is p̂(y) = h(y)/2^b with h = Σ_{α ⊆ β} θ̂_α χ_α(y) (b = |β|, one
//! Hadamard transform), so summing the covariances over the pairs α ≠ α' in closed form:
//!
//! `Var p̂(y) = 2^{−2b} [Σ_α Var θ̂_α − ((2^b − 2)(h(y) − 1) − (h(y) − 1)² + Σ_α θ_α²)/(n − 1)]`,
//!
//! with θ̂ plugged in (θ̂² clamped to 1 in the variances). E\[SSE\] is its sum over the query's
//! valid cells (the codes of real categories among the 2^b bit patterns). The test
//! `fourier_is_unbiased_with_the_predicted_variance` checks both. A query with a coefficient no
//! device drew has no estimate. Simulations of the published method ([`run`]) use its
//! Horvitz–Thompson estimator instead ([`FourierPlan::answer_published`]): with about one device
//! per coefficient (Adult's 2-way marginals) it is the better of the two.
//!
//! # Privacy
//! One bit by randomized response at ε, α independent of the data: ε-LDP.
//!
//! # Example
//! ```
//! use harmony_analytics::marginals::fourier::FourierPlan;
//! use harmony_core::{Aggregator, randomizer::Randomizer};
//! let names = ["a".to_string(), "b".to_string()];
//! let plan = FourierPlan::new(&names, &[3, 2], 2.0, &[vec![0, 1]])?;
//! assert_eq!(plan.coefficients(), 7); // 3 bits: every non-empty subset
//! let (device, mut agg) = (plan.randomizer(), plan.aggregator());
//! let mut rng = harmony_core::sampling::fast_rng(5);
//! for i in 0..20_000u32 {
//!     agg.add(&device.randomize(&[i % 3, i % 2], &mut rng)?)?;
//! }
//! let answer = plan.answer(&agg.estimate()).remove(0).expect("every coefficient drawn");
//! let se = answer.std_errors.as_ref().unwrap();
//! for (cell, s) in answer.cells.iter().zip(se) {
//!     assert!((cell - 1.0 / 6.0).abs() < 5.0 * s); // each of the 6 cells holds 1/6
//! }
//! # Ok::<(), harmony_core::Error>(())
//! ```

use super::MarginalEstimate;
use harmony_core::aggregate::{Aggregator, check_compatible};
use harmony_core::frequency::fwht::fwht;
use harmony_core::randomizer::Randomizer;
use harmony_core::sampling::{bernoulli, uniform_below};
use harmony_core::wire::{WireKind, WireReport};
use harmony_core::{Epsilon, Error, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The largest number of coefficients |T| of a plan (2^22).
pub const MAX_COEFFICIENTS: usize = 1 << 22;

/// Bit offsets of each attribute in the binary encoding, and the total number of bits.
pub fn bit_layout(cards: &[usize]) -> (Vec<usize>, Vec<usize>, usize) {
    let widths: Vec<usize> = cards.iter().map(|&c| (usize::BITS - (c - 1).leading_zeros()) as usize).collect();
    let mut offsets = Vec::with_capacity(cards.len());
    let mut o = 0;
    for &w in &widths {
        offsets.push(o);
        o += w;
    }
    (offsets, widths, o)
}

fn query_bits(q: &[usize], offsets: &[usize], widths: &[usize]) -> Vec<usize> {
    q.iter().flat_map(|&a| offsets[a]..offsets[a] + widths[a]).collect()
}

fn deposit(local: usize, bits: &[usize]) -> u128 {
    bits.iter().enumerate().filter(|(i, _)| local >> i & 1 == 1).fold(0u128, |m, (_, &b)| m | (1u128 << b))
}

/// The public constants of a Fourier collection: the bit layout, the coefficients T and the
/// queries.
#[derive(Debug, Clone, PartialEq)]
pub struct FourierPlan {
    names: Vec<String>,
    cards: Vec<usize>,
    offsets: Vec<usize>,
    widths: Vec<usize>,
    coeffs: Vec<u128>,
    index: HashMap<u128, u32>,
    queries: Vec<Vec<usize>>,
    qbits: Vec<Vec<usize>>,
    c: f64,
    keep: f64,
}

impl FourierPlan {
    /// The plan of `queries` (sorted attribute indices) over attributes `names` with
    /// cardinalities `cards`. Errors: ε invalid, no query, a cardinality below 2, more than 128
    /// bits in the encoding, a query over more than 24 bits, more than [`MAX_COEFFICIENTS`].
    pub fn new(names: &[String], cards: &[usize], epsilon: f64, queries: &[Vec<usize>]) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        if queries.is_empty() {
            return Err(Error::input("queries", "none", "at least one marginal to estimate"));
        }
        if names.len() != cards.len() || cards.iter().any(|&c| c < 2) {
            return Err(Error::param("cardinalities", cards, "one cardinality >= 2 per attribute name"));
        }
        let (offsets, widths, total) = bit_layout(cards);
        if total > 128 {
            return Err(Error::input("attributes", format!("{total} bits when binary-encoded"), "at most 128 bits"));
        }
        let label = |q: &[usize]| q.iter().map(|&a| names[a].as_str()).collect::<Vec<_>>().join("×");
        // T: every non-empty subset of every query's bit set.
        let (mut index, mut coeffs, mut qbits) = (HashMap::new(), Vec::new(), Vec::with_capacity(queries.len()));
        for q in queries {
            if q.is_empty() || q.windows(2).any(|w| w[0] >= w[1]) || q.iter().any(|&a| a >= cards.len()) {
                return Err(Error::input(
                    "query",
                    format!("{q:?}"),
                    format!("sorted attribute indices < {}", cards.len()),
                ));
            }
            let b = query_bits(q, &offsets, &widths);
            if b.len() > 24 {
                return Err(Error::input("query", format!("{} over {} bits", label(q), b.len()), "at most 24 bits"));
            }
            for local in 1..(1usize << b.len()) {
                let g = deposit(local, &b);
                index.entry(g).or_insert_with(|| {
                    coeffs.push(g);
                    (coeffs.len() - 1) as u32
                });
            }
            if coeffs.len() > MAX_COEFFICIENTS {
                return Err(Error::input(
                    "queries",
                    format!("{} coefficients", coeffs.len()),
                    format!("at most {MAX_COEFFICIENTS}"),
                ));
            }
            qbits.push(b);
        }
        let keep = eps.exp() / (eps.exp() + 1.0);
        let (names, cards, queries) = (names.to_vec(), cards.to_vec(), queries.to_vec());
        Ok(FourierPlan { names, cards, offsets, widths, coeffs, index, queries, qbits, c: eps.c(), keep })
    }
    /// The number of coefficients |T| (device groups).
    pub fn coefficients(&self) -> usize {
        self.coeffs.len()
    }
    /// The queries.
    pub fn queries(&self) -> &[Vec<usize>] {
        &self.queries
    }
    /// The devices' randomizer.
    pub fn randomizer(&self) -> FourierRandomizer {
        FourierRandomizer { plan: self.clone() }
    }
    /// An empty accumulator.
    pub fn aggregator(&self) -> FourierAggregator {
        let t = self.coeffs.len();
        FourierAggregator { c: self.c, counts: vec![0; t], positives: vec![0; t] }
    }
    /// Every query's answer (see the module docs), `None` for a query one of whose coefficients
    /// no device drew.
    pub fn answer(&self, est: &FourierCoefficients) -> Vec<Option<MarginalEstimate>> {
        let n = est.counts.iter().sum::<u64>() as f64;
        (0..self.queries.len()).map(|qi| self.answer_query(qi, est, n)).collect()
    }

    fn answer_query(&self, qi: usize, est: &FourierCoefficients, n: f64) -> Option<MarginalEstimate> {
        let var = self.transform(qi, &est.theta, &est.counts, n)?;
        let h = self.transform_h(qi, &est.theta);
        let inv = 1.0 / h.len() as f64;
        let codes = self.cell_codes(qi);
        let cells = codes.iter().map(|&y| h[y] * inv).collect();
        let predicted_sse = Some(codes.iter().map(|&y| var[y]).sum());
        let std_errors = Some(codes.iter().map(|&y| var[y].sqrt()).collect());
        Some(MarginalEstimate { attrs: self.queries[qi].clone(), cells, predicted_sse, std_errors })
    }

    /// Every query's answer by the published estimator (for simulations): Horvitz–Thompson over
    /// the random assignment, θ̂_α = (|T|/n)·Σ c·s over the reports on α (0 when none), unbiased
    /// over the devices' draws (not given the counts). For a fixed population, Var θ̂_α =
    /// (|T|c² − 1)/n and Cov(θ̂_α, θ̂_α') = −θ_{α⊕α'}/n, so a cell has
    /// `Var p̂(y) = 2^{−2b}[(2^b − 1)(|T|c² − 1) − (2^b − 2)(h(y) − 1)]/n` (θ̂ plugged in). Better
    /// than [`Self::answer`] when groups hold a device or two (1/n_α is then far above |T|/n on
    /// average), worse with many devices per coefficient.
    pub fn answer_published(&self, est: &FourierCoefficients) -> Vec<MarginalEstimate> {
        let n = est.counts.iter().sum::<u64>();
        let t = self.coeffs.len() as f64;
        let theta: Vec<f64> = est
            .theta
            .iter()
            .zip(&est.counts)
            .map(|(&th, &k)| if k == 0 { 0.0 } else { th * k as f64 * t / n as f64 })
            .collect();
        (0..self.queries.len())
            .map(|qi| {
                let h = self.transform_h(qi, &theta);
                let var = self.published_variances(qi, &theta, n);
                let (codes, sz) = (self.cell_codes(qi), h.len() as f64);
                let cells = codes.iter().map(|&y| h[y] / sz).collect();
                let predicted_sse = Some(var.iter().sum());
                let std_errors = Some(var.iter().map(|v| v.sqrt()).collect());
                MarginalEstimate { attrs: self.queries[qi].clone(), cells, predicted_sse, std_errors }
            })
            .collect()
    }

    /// The cells' variances of query qi under [`Self::answer_published`] at `theta` for n
    /// devices.
    pub fn published_variances(&self, qi: usize, theta: &[f64], n: u64) -> Vec<f64> {
        let h = self.transform_h(qi, theta);
        let (sz, t, n) = (h.len() as f64, self.coeffs.len() as f64, n as f64);
        let diag = (sz - 1.0) * (t * self.c * self.c - 1.0);
        self.cell_codes(qi).iter().map(|&y| ((diag - (sz - 2.0) * (h[y] - 1.0)) / (n * sz * sz)).max(0.0)).collect()
    }

    /// The variance of each cell of query qi (row-major) when the coefficients are `theta` and
    /// the groups have `counts` reports (n = Σ counts): the module docs' formula, exact at the
    /// true θ. `None` if a coefficient of the query has no report.
    pub fn cell_variances(&self, qi: usize, theta: &[f64], counts: &[u64]) -> Option<Vec<f64>> {
        let n = counts.iter().sum::<u64>() as f64;
        let var = self.transform(qi, theta, counts, n)?;
        Some(self.cell_codes(qi).iter().map(|&y| var[y]).collect())
    }

    /// The population's coefficients θ_α (the mean parity over `records`, each the codes of
    /// every attribute): the truth a simulation compares with.
    pub fn coefficients_of<'a>(&self, records: impl Iterator<Item = &'a [u32]>) -> Vec<f64> {
        let (mut sums, mut n) = (vec![0i64; self.coeffs.len()], 0usize);
        for r in records {
            let x = r.iter().enumerate().fold(0u128, |m, (a, &v)| m | ((v as u128) << self.offsets[a]));
            for (s, &c) in sums.iter_mut().zip(&self.coeffs) {
                *s += if (c & x).count_ones() & 1 == 0 { 1 } else { -1 };
            }
            n += 1;
        }
        sums.iter().map(|&s| s as f64 / n as f64).collect()
    }

    /// h = Σ_{α ⊆ β} θ_α χ_α over the 2^b bit patterns of query qi.
    fn transform_h(&self, qi: usize, theta: &[f64]) -> Vec<f64> {
        let b = &self.qbits[qi];
        let mut h = vec![0.0f64; 1 << b.len()];
        h[0] = 1.0;
        for (local, slot) in h.iter_mut().enumerate().skip(1) {
            *slot = theta[self.index[&deposit(local, b)] as usize];
        }
        fwht(&mut h);
        h
    }

    /// Each bit pattern's variance of query qi's cells at `theta` with `counts` reports per
    /// coefficient (the module docs' formula); `None` when a coefficient has no report.
    fn transform(&self, qi: usize, theta: &[f64], counts: &[u64], n: f64) -> Option<Vec<f64>> {
        let b = &self.qbits[qi];
        let (mut diag, mut theta2) = (0.0, 0.0);
        for local in 1..1usize << b.len() {
            let i = self.index[&deposit(local, b)] as usize;
            let n_a = counts[i] as f64;
            if n_a == 0.0 {
                return None;
            }
            let th = theta[i];
            let fpc = if n > 1.0 { (n - n_a) / (n - 1.0) } else { 0.0 };
            diag += (self.c * self.c - 1.0 + (1.0 - th.clamp(-1.0, 1.0).powi(2)) * fpc) / n_a;
            theta2 += th * th;
        }
        let sz = (1usize << b.len()) as f64;
        let inv = 1.0 / sz;
        let var = self
            .transform_h(qi, theta)
            .iter()
            .map(|&hy| {
                let cross =
                    if n > 1.0 { ((sz - 2.0) * (hy - 1.0) - (hy - 1.0).powi(2) + theta2) / (n - 1.0) } else { 0.0 };
                (inv * inv * (diag - cross)).max(0.0)
            })
            .collect();
        Some(var)
    }

    /// The bit pattern of each cell of query qi, row-major (the last attribute fastest); the
    /// pattern holds the attributes' codes in query order, low bits first.
    fn cell_codes(&self, qi: usize) -> Vec<usize> {
        let q = &self.queries[qi];
        let cards: Vec<usize> = q.iter().map(|&a| self.cards[a]).collect();
        let dq: usize = cards.iter().product();
        let mut out = Vec::with_capacity(dq);
        let mut digits = vec![0usize; q.len()];
        for _ in 0..dq {
            let (mut y, mut shift) = (0usize, 0);
            for (k, &a) in q.iter().enumerate() {
                y |= digits[k] << shift;
                shift += self.widths[a];
            }
            out.push(y);
            for k in (0..q.len()).rev() {
                digits[k] += 1;
                if digits[k] < cards[k] {
                    break;
                }
                digits[k] = 0;
            }
        }
        out
    }
}

/// One device's report: the coefficient it drew and its randomized sign.
///
/// On the wire (kind byte 32, `MarginalFourier`): the coefficient as a varint and one byte, 4 to
/// 7 bytes with the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FourierReport {
    /// The coefficient α (its index in T).
    pub coefficient: u32,
    /// The randomized sign s·t is +1.
    pub positive: bool,
}

impl WireReport for FourierReport {
    /// harmony-analytics owns bytes 20–39; Fourier marginals take 32.
    const KIND: WireKind = WireKind { byte: 32, name: "MarginalFourier" };
}

/// A device's randomizer: its input is its codes of every attribute, in the plan's order.
#[derive(Debug, Clone, PartialEq)]
pub struct FourierRandomizer {
    plan: FourierPlan,
}

impl Randomizer for FourierRandomizer {
    type Input = [u32];
    type Report = FourierReport;

    /// Errors: a wrong number of codes, a code at or above its attribute's cardinality (named).
    fn randomize(&self, codes: &[u32], rng: &mut dyn Rng) -> Result<FourierReport> {
        let p = &self.plan;
        if codes.len() != p.cards.len() {
            return Err(Error::input("codes", codes.len(), format!("{} codes, one per attribute", p.cards.len())));
        }
        let mut x = 0u128;
        for (a, &v) in codes.iter().enumerate() {
            if v as usize >= p.cards[a] {
                return Err(Error::input(p.names[a].as_str(), v, format!("a code in [0, {})", p.cards[a])));
            }
            x |= (v as u128) << p.offsets[a];
        }
        let j = uniform_below(rng, p.coeffs.len() as u64) as usize;
        let even = (p.coeffs[j] & x).count_ones() & 1 == 0;
        Ok(FourierReport { coefficient: j as u32, positive: even == bernoulli(rng, p.keep) })
    }

    fn validate(&self, r: &FourierReport) -> Result<()> {
        check_coefficient(r.coefficient, self.plan.coeffs.len())
    }
}

fn check_coefficient(j: u32, t: usize) -> Result<()> {
    if j as usize >= t {
        return Err(Error::report("coefficient", j, format!("a coefficient in [0, {t})")));
    }
    Ok(())
}

/// The server state: per coefficient, the reports and the positive ones.
#[derive(Debug, Clone)]
pub struct FourierAggregator {
    c: f64,
    counts: Vec<u64>,
    positives: Vec<u64>,
}

/// The estimated coefficients.
#[derive(Debug, Clone, PartialEq)]
pub struct FourierCoefficients {
    /// θ̂_α per coefficient (NaN without reports).
    pub theta: Vec<f64>,
    /// Reports per coefficient (the realized group sizes).
    pub counts: Vec<u64>,
}

impl Aggregator for FourierAggregator {
    type Report = FourierReport;
    type Output = FourierCoefficients;

    fn validate(&self, r: &FourierReport) -> Result<()> {
        check_coefficient(r.coefficient, self.counts.len())
    }
    fn add_unchecked(&mut self, r: &FourierReport) {
        let j = r.coefficient as usize;
        self.counts[j] += 1;
        self.positives[j] += r.positive as u64;
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible(
            "Fourier plans (coefficients, c)",
            &(self.counts.len(), self.c),
            &(other.counts.len(), other.c),
        )?;
        self.counts.iter_mut().zip(&other.counts).for_each(|(a, b)| *a += b);
        self.positives.iter_mut().zip(&other.positives).for_each(|(a, b)| *a += b);
        Ok(())
    }
    fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
    fn estimate(&self) -> FourierCoefficients {
        let theta = self
            .counts
            .iter()
            .zip(&self.positives)
            .map(|(&n, &pos)| if n == 0 { f64::NAN } else { self.c * (2.0 * pos as f64 - n as f64) / n as f64 })
            .collect();
        FourierCoefficients { theta, counts: self.counts.clone() }
    }
}

/// Runs the method on `queries` (a simulation: every record of `data` is a device randomizing
/// with `rng`), answered by the published estimator ([`FourierPlan::answer_published`]: on
/// Adult's 2-way marginals there are about as many coefficients as devices). Errors: those of
/// [`FourierPlan::new`].
pub fn run<R: Rng>(
    data: &super::Dataset,
    epsilon: f64,
    queries: &[Vec<usize>],
    rng: &mut R,
) -> Result<Vec<MarginalEstimate>> {
    let plan = FourierPlan::new(data.names(), data.cards(), epsilon, queries)?;
    let device = plan.randomizer();
    let mut agg = plan.aggregator();
    for i in 0..data.n() {
        agg.add_unchecked(&device.randomize(data.record(i), rng)?);
    }
    Ok(plan.answer_published(&agg.estimate()))
}

impl harmony_core::state::SaveState for FourierAggregator {
    fn save_state(&self, w: &mut harmony_core::state::StateWriter<'_>) {
        w.u64s(&self.counts);
        w.u64s(&self.positives);
    }
    fn merge_state(&mut self, r: &mut harmony_core::state::StateReader<'_>) -> Result<()> {
        r.add_u64s("fourier coefficient reports", &mut self.counts)?;
        r.add_u64s("fourier positive answers", &mut self.positives)
    }
}
