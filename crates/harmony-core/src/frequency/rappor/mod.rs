//! RAPPOR (Erlingsson, Pihur, Korolova, "RAPPOR: Randomized Aggregatable Privacy-Preserving
//! Ordinal Response", CCS 2014; pure-ldp 1.2.0's `RAPPORClient`/`RAPPORServer`, which has the
//! permanent response only).
//!
//! # Mechanism
//! Public hash functions ([`HashFamily`]), h per cohort, onto a Bloom filter of m bits; C
//! cohorts. A device draws its cohort c once, uniformly. For an item x:
//! 1. Bloom filter B: bits h_{c,1}(x), …, h_{c,h}(x) set (a bit hit twice is set once).
//! 2. Permanent randomized response (PRR), drawn once per (device, item) and memoized: each bit
//!    B'_i is 1 with probability f/2, 0 with probability f/2, B_i otherwise.
//! 3. Instantaneous randomized response (IRR), fresh for every report: S_i = 1 with probability
//!    q if B'_i = 1 and p if B'_i = 0. The report is (c, S).
//!
//! One report's bits are then independent with P[S_i = 1] = q* = (1 − f/2)q + (f/2)p where
//! B_i = 1 and p* = (f/2)q + (1 − f/2)p where B_i = 0.
//!
//! # Privacy
//! * One report: for x, x' in the same cohort only the bits of B(x) Δ B(x') differ in
//!   distribution; the likelihood ratio is at most (q*/p*)^u·((1 − p*)/(1 − q*))^u' with
//!   u, u' ≤ h the bits of x only and of x' only, so ε₁ = h·ln(q*(1 − p*)/(p*(1 − q*)))
//!   ([`Rappor::epsilon`]), attained when two items have disjoint h-bit filters in a cohort.
//! * Longitudinal: however many reports of the same item a device sends, they are functions of
//!   the memoized B' (and fresh IRR noise), so the whole sequence is ε∞-LDP with
//!   ε∞ = 2h·ln((1 − f/2)/(f/2)) ([`Rappor::permanent_epsilon`]), the PRR's own ratio. Each
//!   distinct item a device reports has its own B' and spends its own ε∞.
//!
//! [`Rappor::new`] and `AnyOracle::by_name("rappor", ε, d)` use the permanent response only
//! (p = 0, q = 1: S = B'), so ε₁ = ε∞ = ε and f = 2/(1 + e^(ε/2h)); with an IRR (p < q) the
//! budget ε given is ε₁ and f is solved for it ([`Rappor::with_shape`]).
//!
//! # Decoding
//! Least squares over a candidate list ([`decode`]): unbiased for every candidate when the
//! candidates cover the support, with standard errors from the regression's exact covariance
//! (bit noise and cohort assignment). The domain [0, d) is one such list.
//!
//! # The permanent-response memo
//! [`RapporMemo`] is the device's state: its cohort and the PRR of each item it reported. The
//! caller stores it (the device SDK persists it); [`Rappor::randomize_memoized`] reads and
//! extends it, the oracle itself stays immutable.

pub mod decode;

use super::rows::{self, Lanes, PackedRows, RowBits};
use super::sketch_hash::HashFamily;
use super::{FrequencyOracle, check_batch};
use crate::aggregate::{Aggregator, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::params::{Epsilon, check_domain};
use crate::sampling::{Bernoulli, BernoulliWords, padding_mask, uniform_below};
use crate::wire::{ReportKind, WireKind, WireReport};
use decode::Decoder;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// Default Bloom filter size m (RAPPOR's).
pub const DEFAULT_M: usize = 128;
/// Default hashes per cohort h (RAPPOR's).
pub const DEFAULT_H: usize = 2;
/// Default public hash seed ("HARMRAPP").
pub const DEFAULT_SEED: u64 = 0x4841_524D_5241_5050;
/// Largest domain [0, d) decoded as a whole (W is d × d).
pub const MAX_DOMAIN: usize = 2048;

/// The default number of cohorts for a domain of d items with m-bit filters: at least 8 and at
/// least 4d/m, so that the C·m regression rows outnumber the d unknowns four to one.
pub fn default_cohorts(d: usize, m: usize) -> usize {
    d.saturating_mul(4).div_ceil(m.max(1)).max(8)
}

/// The shape of a RAPPOR instance: filter size, hashes, cohorts, IRR and hash seed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RapporShape {
    /// Bloom filter bits m.
    pub m: usize,
    /// Hash functions per cohort h.
    pub h: usize,
    /// Cohorts C.
    pub cohorts: usize,
    /// IRR: P[S_i = 1 | B'_i = 0].
    pub p: f64,
    /// IRR: P[S_i = 1 | B'_i = 1].
    pub q: f64,
    /// Public hash seed.
    pub seed: u64,
}

impl RapporShape {
    /// RAPPOR's m = 128, h = 2, [`default_cohorts`], no IRR (p = 0, q = 1), [`DEFAULT_SEED`].
    pub fn default_for(d: usize) -> Self {
        RapporShape {
            m: DEFAULT_M,
            h: DEFAULT_H,
            cohorts: default_cohorts(d, DEFAULT_M),
            p: 0.0,
            q: 1.0,
            seed: DEFAULT_SEED,
        }
    }
}

/// Every parameter of a RAPPOR instance (the shape and the PRR's f).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RapporParams {
    /// The shape.
    pub shape: RapporShape,
    /// PRR: each filter bit is replaced by a fair coin with probability f.
    pub f: f64,
}

/// RAPPOR over [0, d) (and arbitrary u64 items): see the module docs.
///
/// # Privacy
/// One report is ε₁-LDP, ε₁ = h·ln(q*(1 − p*)/(p*(1 − q*))) ([`FrequencyOracle::epsilon`]);
/// every report of a memoized item together is ε∞-LDP, ε∞ = 2h·ln((1 − f/2)/(f/2))
/// ([`Rappor::permanent_epsilon`]).
///
/// # Utility
/// Unbiased least-squares decoding; `Var(f̂_a) = Σ_x f_x·Var(Y_a | x)/n` with the exact
/// one-report variance of [`decode`] (bit noise and cohort assignment). Report: ⌈log₂ C⌉ + m
/// bits. Aggregation O(n·m/64); decoding O(d³) once, then O(d·(C·m + d·C·h)) per estimate.
///
/// # Example
/// ```
/// use harmony_core::frequency::Rappor;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let rappor = Rappor::new(4.0, 20).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = rappor.aggregator();
/// for i in 0..20_000 {
///     let v = if i % 4 == 0 { 15 } else { i % 10 }; // 25% hold 15, none 18
///     agg.add(&rappor.randomize(v, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[15] - 0.25).abs() < 5.0 * est.std_errors[15]);
/// assert!((est.frequencies[18] - 0.0).abs() < 5.0 * est.std_errors[18]);
/// ```
#[derive(Debug, Clone)]
pub struct Rappor {
    eps: Epsilon,
    d: usize,
    params: RapporParams,
    /// P[S_i = 1] of one report where the filter bit is 0 / 1.
    p_star: f64,
    q_star: f64,
    hashes: HashFamily,
    noise: BernoulliWords,
    own: BernoulliWords,
    prr_flip: Bernoulli,
    irr_p: Bernoulli,
    irr_q: Bernoulli,
    /// The decoder of [0, d), built on first use (a client never needs it).
    domain: Arc<OnceLock<Result<Decoder>>>,
}

impl PartialEq for Rappor {
    fn eq(&self, other: &Self) -> bool {
        (self.eps, self.d, self.params) == (other.eps, other.d, other.params)
    }
}

/// A RAPPOR report: the device's cohort and the m reported bits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RapporReport {
    /// The cohort, in [0, C).
    pub cohort: u32,
    /// m bits packed little-endian in ⌈m/64⌉ words; padding bits zero.
    pub bits: Vec<u64>,
}

impl WireReport for RapporReport {
    const KIND: WireKind = ReportKind::Rappor.wire();
}

/// A device's RAPPOR state, stored by the caller: its cohort and the permanent randomized
/// response of every item it reported, for the parameters they were drawn under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RapporMemo {
    /// The parameters the responses belong to.
    pub params: RapporParams,
    /// The device's cohort, drawn once.
    pub cohort: u32,
    /// Item → its permanent randomized response B' (m bits, packed).
    pub responses: BTreeMap<u64, Vec<u64>>,
}

/// One-report ε₁ for filter-bit probabilities (p*, q*) and h hashes.
fn one_report_epsilon(h: usize, ps: f64, qs: f64) -> f64 {
    h as f64 * ((qs * (1.0 - ps)) / (ps * (1.0 - qs))).ln()
}

/// (p*, q*) of one report.
fn star(f: f64, p: f64, q: f64) -> (f64, f64) {
    (0.5 * f * q + (1.0 - 0.5 * f) * p, (1.0 - 0.5 * f) * q + 0.5 * f * p)
}

impl Rappor {
    /// RAPPOR over [0, d) with [`RapporShape::default_for`]: m = 128, h = 2, max(8, ⌈4d/128⌉)
    /// cohorts, the permanent response only, f = 2/(1 + e^(ε/4)) so that ε₁ = ε∞ = ε.
    /// Errors: ε not finite and > 0, d ∉ [2, 2048].
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        Self::with_shape(epsilon, d, RapporShape::default_for(d))
    }
    /// RAPPOR with the given shape; f is chosen so that one report is ε-LDP (closed form
    /// without an IRR, bisection with one). Errors: as [`Rappor::from_params`], and ε above
    /// the IRR's own h·ln(q(1 − p)/(p(1 − q))).
    pub fn with_shape(epsilon: f64, d: usize, shape: RapporShape) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        check_shape(&shape)?;
        let h = shape.h as f64;
        let f = if shape.p == 0.0 && shape.q == 1.0 {
            2.0 / (1.0 + (eps.value() / (2.0 * h)).exp())
        } else {
            let at = |f: f64| {
                let (ps, qs) = star(f, shape.p, shape.q);
                one_report_epsilon(shape.h, ps, qs)
            };
            let max = at(0.0);
            if eps.value() >= max {
                return Err(Error::param(
                    "epsilon",
                    eps.value(),
                    format!("a budget below {max} (the IRR p = {}, q = {} alone gives no more)", shape.p, shape.q),
                ));
            }
            let (mut lo, mut hi) = (0.0f64, 1.0f64); // at(lo) > ε >= at(hi)
            for _ in 0..200 {
                let mid = 0.5 * (lo + hi);
                if at(mid) > eps.value() { lo = mid } else { hi = mid }
            }
            hi
        };
        Self::build(eps, d, RapporParams { shape, f })
    }
    /// RAPPOR with every parameter explicit (pure-ldp's f, m, h, cohorts); ε₁ is computed.
    /// Errors: d ∉ [2, 2048], m ∉ [1, 2^16], h ∉ [1, m], C ∉ [1, 2^16], C·m > 2^22, f ∉ [0, 1],
    /// not 0 ≤ p < q ≤ 1, an infinite ε₁ (f = 0 without an IRR), C·m < d.
    pub fn from_params(d: usize, params: RapporParams) -> Result<Self> {
        check_shape(&params.shape)?;
        if !(0.0..=1.0).contains(&params.f) {
            return Err(Error::param("f", params.f, "a probability in [0, 1]"));
        }
        let s = &params.shape;
        let (ps, qs) = star(params.f, s.p, s.q);
        let eps = Epsilon::new(one_report_epsilon(s.h, ps, qs))
            .map_err(|_| Error::param("f", params.f, "f > 0 or an IRR with 0 < p < q < 1 (a finite ε)"))?;
        Self::build(eps, d, params)
    }
    fn build(eps: Epsilon, d: usize, params: RapporParams) -> Result<Self> {
        let d = check_domain("d", d)?;
        let s = &params.shape;
        if d > MAX_DOMAIN {
            return Err(Error::param(
                "d",
                d,
                format!("at most {MAX_DOMAIN} (the domain is decoded by a d × d regression)"),
            ));
        }
        if s.cohorts * s.m < d {
            return Err(Error::param(
                "cohorts",
                s.cohorts,
                format!("cohorts·m >= d = {d} (fewer regression rows than unknowns), m = {}", s.m),
            ));
        }
        let (p_star, q_star) = star(params.f, s.p, s.q);
        Ok(Rappor {
            eps,
            d,
            params,
            p_star,
            q_star,
            hashes: HashFamily::new(s.seed, s.cohorts * s.h, s.m),
            noise: BernoulliWords::new(p_star),
            own: BernoulliWords::new(q_star),
            prr_flip: Bernoulli::new(params.f),
            irr_p: Bernoulli::new(s.p),
            irr_q: Bernoulli::new(s.q),
            domain: Arc::new(OnceLock::new()),
        })
    }
    /// All parameters.
    pub fn params(&self) -> &RapporParams {
        &self.params
    }
    /// ε∞ = 2h·ln((1 − f/2)/(f/2)): the bound for every report of one memoized item together.
    pub fn permanent_epsilon(&self) -> f64 {
        let half = 0.5 * self.params.f;
        2.0 * self.params.shape.h as f64 * ((1.0 - half) / half).ln()
    }
    /// (p*, q*): P[a report's bit is 1] where the filter bit is 0 / 1.
    pub fn bit_probabilities(&self) -> (f64, f64) {
        (self.p_star, self.q_star)
    }
    fn rows(&self) -> usize {
        self.params.shape.cohorts * self.params.shape.m
    }
    /// The Bloom filter bits of `item` in `cohort` (h positions; a repeat is listed once).
    pub fn bloom(&self, cohort: usize, item: u64) -> Vec<usize> {
        let h = self.params.shape.h;
        let mut bits: Vec<usize> = (0..h).map(|i| self.hashes.bucket(cohort * h + i, item)).collect();
        bits.sort_unstable();
        bits.dedup();
        bits
    }
    /// The largest one-report log-ratio between any two of `items` (≤ ε₁; equal when two of
    /// them have disjoint h-bit filters in some cohort).
    pub fn epsilon_between(&self, items: &[u64]) -> f64 {
        let up = (self.q_star / self.p_star).ln();
        let down = ((1.0 - self.p_star) / (1.0 - self.q_star)).ln();
        let mut worst = 0.0f64;
        for c in 0..self.params.shape.cohorts {
            let filters: Vec<Vec<usize>> = items.iter().map(|&x| self.bloom(c, x)).collect();
            for a in &filters {
                for b in &filters {
                    let only_a = a.iter().filter(|i| !b.contains(i)).count() as f64;
                    let only_b = b.iter().filter(|i| !a.contains(i)).count() as f64;
                    worst = worst.max(only_a * up + only_b * down);
                }
            }
        }
        worst
    }
    /// The decoder of [0, d) (built once, shared by clones).
    pub fn domain_decoder(&self) -> Result<&Decoder> {
        self.domain
            .get_or_init(|| Decoder::new(self, &(0..self.d as u64).collect::<Vec<_>>()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Validates a shape (not the budget).
fn check_shape(s: &RapporShape) -> Result<()> {
    if !(1..=1 << 16).contains(&s.m) {
        return Err(Error::param("m", s.m, "a Bloom filter size in [1, 2^16]"));
    }
    if !(1..=s.m).contains(&s.h) {
        return Err(Error::param("h", s.h, format!("a number of hashes in [1, m = {}]", s.m)));
    }
    if !(1..=1 << 16).contains(&s.cohorts) || s.cohorts * s.m > 1 << 22 {
        return Err(Error::param("cohorts", s.cohorts, format!("in [1, 2^16] with cohorts·m <= 2^22 (m = {})", s.m)));
    }
    if !(0.0..=1.0).contains(&s.p) || !(0.0..=1.0).contains(&s.q) || s.p >= s.q {
        return Err(Error::param("q", s.q, format!("an IRR with 0 <= p < q <= 1 (p = {})", s.p)));
    }
    Ok(())
}

impl Rappor {
    /// The device's permanent randomized response B' for `item` in `cohort` (m bits).
    pub fn permanent_response<R: Rng + ?Sized>(&self, cohort: usize, item: u64, rng: &mut R) -> Vec<u64> {
        let m = self.params.shape.m;
        let mut bits = vec![0u64; m.div_ceil(64)];
        let bloom = self.bloom(cohort, item);
        for i in 0..m {
            let b = if self.prr_flip.sample(rng) { rng.next_u64() & 1 } else { bloom.contains(&i) as u64 };
            rows::put(&mut bits, i, b);
        }
        bits
    }
    /// A report from a permanent response: each bit through the IRR.
    pub fn instantaneous_response<R: Rng + ?Sized>(&self, cohort: u32, prr: &[u64], rng: &mut R) -> RapporReport {
        let m = self.params.shape.m;
        let mut bits = vec![0u64; m.div_ceil(64)];
        for i in 0..m {
            let b = if rows::bit(prr, i) { self.irr_q.sample(rng) } else { self.irr_p.sample(rng) };
            rows::put(&mut bits, i, b as u64);
        }
        RapporReport { cohort, bits }
    }
    /// A new device state: a uniform cohort and no responses yet.
    pub fn new_memo<R: Rng + ?Sized>(&self, rng: &mut R) -> RapporMemo {
        let cohort = uniform_below(rng, self.params.shape.cohorts as u64) as u32;
        RapporMemo { params: self.params, cohort, responses: BTreeMap::new() }
    }
    /// A report of `item` by the device whose state is `memo`: its memoized permanent response
    /// (drawn and stored on the item's first report) through a fresh IRR. Errors: a memo of
    /// other parameters, or one whose cohort or stored response does not fit them.
    pub fn randomize_memoized<R: Rng + ?Sized>(
        &self,
        item: u64,
        memo: &mut RapporMemo,
        rng: &mut R,
    ) -> Result<RapporReport> {
        if memo.params != self.params {
            return Err(Error::Incompatible(format!("rappor memo of {:?} used with {:?}", memo.params, self.params)));
        }
        let (m, cohorts) = (self.params.shape.m, self.params.shape.cohorts);
        let cohort = memo.cohort;
        if cohort as usize >= cohorts {
            return Err(Error::param("cohort", cohort, format!("the memo's cohort in [0, {cohorts})")));
        }
        let prr = memo.responses.entry(item).or_insert_with(|| self.permanent_response(cohort as usize, item, rng));
        if prr.len() != m.div_ceil(64) || prr[prr.len() - 1] & !padding_mask(m) != 0 {
            return Err(Error::param("responses", item, format!("a stored response of {m} bits")));
        }
        Ok(self.instantaneous_response(cohort, prr, rng))
    }
    /// A one-time report of an arbitrary u64 item (a fresh device: uniform cohort, fresh PRR):
    /// each bit directly with its one-report probability q* or p*.
    pub fn randomize_item<R: Rng + ?Sized>(&self, item: u64, rng: &mut R) -> RapporReport {
        let mut out = PackedRows::new();
        self.randomize_items_packed(&[item], rng, &mut out);
        RapporReport { cohort: out.rows[0], bits: out.bits }
    }
    /// One-time reports of a batch of items (appended, packed): per 64 reports, 64 cohort draws,
    /// one run of Bernoulli(p*) noise words and Bernoulli(q*) lanes for the filters' bits.
    pub fn randomize_items_packed<R: Rng + ?Sized>(&self, items: &[u64], rng: &mut R, out: &mut PackedRows) {
        let s = &self.params.shape;
        let w = s.m.div_ceil(64);
        out.rows.reserve(items.len());
        out.bits.reserve(items.len() * w);
        let mut lanes = Lanes::default();
        for chunk in items.chunks(64) {
            let first = out.rows.len();
            out.rows.extend(chunk.iter().map(|_| uniform_below(rng, s.cohorts as u64) as u32));
            let start = out.bits.len();
            rows::append_noise(&self.noise, s.m, chunk.len(), rng, &mut out.bits);
            for (i, &item) in chunk.iter().enumerate() {
                let c = out.rows[first + i] as usize;
                let bits = &mut out.bits[start + i * w..start + (i + 1) * w];
                for t in c * s.h..(c + 1) * s.h {
                    // A repeated position is drawn again: the last draw stands, still Bernoulli(q*).
                    rows::put(bits, self.hashes.bucket(t, item), lanes.next(&self.own, rng));
                }
            }
        }
    }
    /// One-time reports of categories in [0, d) (packed); all inputs validated first.
    pub fn randomize_packed<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut PackedRows) -> Result<()> {
        check_batch(vs, self.d)?;
        let items: Vec<u64> = vs.iter().map(|&v| v as u64).collect();
        self.randomize_items_packed(&items, rng, out);
        Ok(())
    }
    /// P[report | x] for a one-time report (0 if malformed or x ≥ d).
    pub fn output_probability(&self, x: usize, r: &RapporReport) -> f64 {
        let s = &self.params.shape;
        if x >= self.d || rows::validate("cohort", r.cohort, s.cohorts, &r.bits, s.m).is_err() {
            return 0.0;
        }
        let bloom = self.bloom(r.cohort as usize, x as u64);
        let prob: f64 = (0..s.m)
            .map(|i| {
                let pi = if bloom.contains(&i) { self.q_star } else { self.p_star };
                if rows::bit(&r.bits, i) { pi } else { 1.0 - pi }
            })
            .product();
        prob / s.cohorts as f64
    }
    /// ln(P[r | x]/P[r | x']) for a one-time report, from the bits where the filters differ.
    pub fn log_likelihood_ratio(&self, x: usize, x2: usize, r: &RapporReport) -> f64 {
        let c = r.cohort as usize;
        let (a, b) = (self.bloom(c, x as u64), self.bloom(c, x2 as u64));
        let term = |i: usize| {
            if rows::bit(&r.bits, i) {
                (self.q_star / self.p_star).ln()
            } else {
                ((1.0 - self.q_star) / (1.0 - self.p_star)).ln()
            }
        };
        a.iter().filter(|i| !b.contains(i)).map(|&i| term(i)).sum::<f64>()
            - b.iter().filter(|i| !a.contains(i)).map(|&i| term(i)).sum::<f64>()
    }
    /// The permanent response's probability P[B' | x, cohort].
    pub fn permanent_probability(&self, cohort: usize, x: u64, prr: &[u64]) -> f64 {
        let bloom = self.bloom(cohort, x);
        let half = 0.5 * self.params.f;
        (0..self.params.shape.m)
            .map(|i| if rows::bit(prr, i) == bloom.contains(&i) { 1.0 - half } else { half })
            .product()
    }
}

impl FrequencyOracle for Rappor {
    fn validate_report(&self, r: &RapporReport) -> Result<()> {
        let s = &self.params.shape;
        rows::validate("cohort", r.cohort, s.cohorts, &r.bits, s.m)
    }
    type Report = RapporReport;
    type Aggregator = RapporAggregator;

    fn name(&self) -> &'static str {
        "rappor"
    }
    /// ε₁, the budget of one report.
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    fn domain_size(&self) -> usize {
        self.d
    }
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> RapporReport {
        self.randomize_item(v as u64, rng)
    }
    fn randomize_batch<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<RapporReport>) -> Result<()> {
        let mut packed = PackedRows::new();
        self.randomize_packed(vs, rng, &mut packed)?;
        let w = self.params.shape.m.div_ceil(64);
        out.reserve(vs.len());
        out.extend(
            packed
                .rows
                .iter()
                .zip(packed.bits.chunks_exact(w))
                .map(|(&c, b)| RapporReport { cohort: c, bits: b.to_vec() }),
        );
        Ok(())
    }
    fn aggregator(&self) -> RapporAggregator {
        RapporAggregator { oracle: self.clone(), rows: RowBits::new(self.params.shape.cohorts, self.params.shape.m) }
    }
    /// Exact (decoding of [0, d)); NaN if the domain is not identifiable.
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        self.domain_decoder().map_or(f64::NAN, |dec| dec.report_variance(self, x, v))
    }
    /// max over (x, v) of [`report_variance`](FrequencyOracle::report_variance), exact:
    /// O(d·(C·m + d·C·h)) after the decoder's O(d³).
    fn worst_case_variance(&self) -> f64 {
        self.domain_decoder().map_or(f64::NAN, |dec| dec.worst_case_variance(self))
    }
    fn aggregate_variance(&self, freqs: &[f64], v: usize) -> f64 {
        self.domain_decoder().map_or(f64::NAN, |dec| dec.aggregate_variance(self, freqs, v))
    }
    fn report_estimate(&self, r: &RapporReport, v: usize) -> f64 {
        self.domain_decoder().map_or(f64::NAN, |dec| dec.report_estimate(self, r.cohort, &r.bits, v))
    }
}

/// Server-side RAPPOR state: per cohort, the reports and the set-bit counts.
#[derive(Debug, Clone)]
pub struct RapporAggregator {
    oracle: Rappor,
    rows: RowBits,
}

impl RapporAggregator {
    /// Set-bit counts per (cohort, bit), row-major (C × m), and reports per cohort.
    pub fn counts(&self) -> (Vec<u64>, Vec<u64>) {
        (self.rows.counts(), self.rows.reports().to_vec())
    }
    /// Adds a packed batch ([`Rappor::randomize_packed`]: `rows` and `bits` of a
    /// [`PackedRows`], or a sub-range of them); validates every report first.
    pub fn add_packed(&mut self, rows: &[u32], bits: &[u64]) -> Result<()> {
        let s = &self.oracle.params.shape;
        rows::validate_packed("cohort", rows, bits, s.cohorts, s.m)?;
        self.rows.add_packed(rows, bits);
        Ok(())
    }
    /// Decodes the domain [0, d). Errors: the domain's Bloom bits do not identify its items.
    pub fn try_estimate(&self) -> Result<FrequencyEstimate> {
        let dec = self.oracle.domain_decoder()?;
        Ok(dec.estimate(&self.oracle, &self.rows.counts(), self.rows.reports()))
    }
    /// Decodes arbitrary u64 candidates by least squares (unbiased when they cover the
    /// support). Errors: an empty or too long list (more than [`decode::MAX_CANDIDATES`]), or
    /// candidates the Bloom bits do not identify.
    pub fn estimate_candidates(&self, candidates: &[u64]) -> Result<FrequencyEstimate> {
        let dec = Decoder::new(&self.oracle, candidates)?;
        Ok(dec.estimate(&self.oracle, &self.rows.counts(), self.rows.reports()))
    }
}

impl Aggregator for RapporAggregator {
    type Report = RapporReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &RapporReport) -> Result<()> {
        self.oracle.validate_report(r)
    }
    fn add_unchecked(&mut self, r: &RapporReport) {
        self.rows.add(r.cohort, &r.bits);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("rappor parameters", &self.oracle, &other.oracle)?;
        self.rows.merge(&other.rows);
        Ok(())
    }
    fn count(&self) -> u64 {
        self.rows.total()
    }
    /// [`RapporAggregator::try_estimate`]; NaN estimates with infinite standard errors if the
    /// domain is not identifiable (not the case for the default shapes).
    fn estimate(&self) -> FrequencyEstimate {
        self.try_estimate().unwrap_or_else(|_| {
            let d = self.oracle.d;
            FrequencyEstimate { n: self.count(), frequencies: vec![f64::NAN; d], std_errors: vec![f64::INFINITY; d] }
        })
    }
}

impl crate::state::SaveState for RapporAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        self.rows.save_state(w);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.rows.merge_state(r)
    }
}

impl super::registry::Registered for Rappor {
    const PARAMS: &'static [&'static str] = &["m", "h", "cohorts", "p", "q", "seed"];
    fn build(
        _: crate::kinds::OracleKind,
        epsilon: f64,
        d: usize,
        params: &super::registry::Params<'_>,
    ) -> Result<Self> {
        let m = params.get("m", DEFAULT_M)?;
        let shape = RapporShape {
            m,
            h: params.get("h", DEFAULT_H)?,
            cohorts: params.get("cohorts", default_cohorts(d, m))?,
            p: params.get("p", 0.0)?,
            q: params.get("q", 1.0)?,
            seed: params.get("seed", DEFAULT_SEED)?,
        };
        Rappor::with_shape(epsilon, d, shape)
    }
    fn output_probability(&self, x: usize, r: &RapporReport) -> f64 {
        Rappor::output_probability(self, x, r)
    }
    fn log_likelihood_ratio(&self, x: usize, x2: usize, r: &RapporReport) -> f64 {
        Rappor::log_likelihood_ratio(self, x, x2, r)
    }
}

#[cfg(test)]
mod tests;
