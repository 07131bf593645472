//! Unary encoding: symmetric (SUE, basic RAPPOR) and optimized (OUE) — docs/MECHANISMS.md §A3.
//!
//! The user sends d independent bits: bit x is 1 with probability p and every other bit with
//! probability q. For two inputs x ≠ x' only bits x and x' differ in distribution, so the
//! worst-case likelihood ratio is (p/q)·((1 − q)/(1 − p)), attained by the vectors with bit x
//! set and bit x' clear:
//! * SUE: p = e^(ε/2)/(e^(ε/2) + 1), q = 1 − p, ratio (p/q)² = e^ε;
//! * OUE: p = 1/2, q = 1/(e^ε + 1), ratio (1 − q)/q = e^ε.
//!
//! Randomization is word-parallel: 64 Bernoulli(q) lanes per [`BernoulliWords`] draw (exact for
//! the f64 q), then the true bit is drawn with probability p. Aggregation is bit-sliced: each
//! group of 64 categories keeps 12 vertical counter planes; 16 reports at a time are added with
//! a Harley–Seal carry-save tree (15 full adders on whole words) whose carry-out ripples into the
//! upper planes, and the planes are flushed into `u64` counts every 2^12 − 1 reports.

use super::{FrequencyOracle, PureParams};
use crate::aggregate::{Aggregator, at_index, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::params::{Epsilon, check_domain};
use crate::sampling::{Bernoulli, BernoulliWords, padding_mask};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Which unary encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryKind {
    /// Symmetric unary encoding (basic one-time RAPPOR): p = e^(ε/2)/(e^(ε/2) + 1), q = 1 − p.
    Sue,
    /// Optimized unary encoding: p = 1/2, q = 1/(e^ε + 1).
    Oue,
}

#[derive(Debug, Clone, PartialEq)]
struct UnaryParams {
    kind: UnaryKind,
    eps: Epsilon,
    d: usize,
    p: f64,
    q: f64,
}

/// A unary-encoding frequency oracle (SUE or OUE), built by [`Sue::new`] or [`Oue::new`].
///
/// # Privacy
/// Bits are independent; bit x (the user's value) is 1 w.p. p and every other bit w.p. q. For
/// inputs x ≠ x' the likelihood ratio of any bit vector is at most (p/q)·(1 − q)/(1 − p) = e^ε
/// (SUE: (p/q)² with p/q = e^(ε/2); OUE: p = 1/2, (1 − q)/q = e^ε): exactly ε-LDP.
///
/// # Utility
/// f̂_v = (C(v)/n − q)/(p − q) with C(v) the number of reports with bit v set.
/// OUE: `Var = [4e^ε/(e^ε − 1)² + f_v]/n`. SUE: `Var = e^(ε/2)/(e^(ε/2) − 1)²/n` for every f_v
/// (p + q = 1 cancels the f_v term). Report: d bits; aggregation O(nd/64) word operations.
///
/// # Example
/// ```
/// use harmony_core::frequency::Oue;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let oue = Oue::new(1.0, 100).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let reports: Vec<_> = (0..5000).map(|i| oue.randomize(i % 10, &mut rng).unwrap()).collect();
/// let mut agg = oue.aggregator();
/// agg.add_batch(&reports).unwrap();
/// let est = agg.estimate();
/// assert!((est.frequencies[3] - 0.1).abs() < 5.0 * est.std_errors[3]);
/// assert!((est.frequencies[50] - 0.0).abs() < 5.0 * est.std_errors[50]);
/// ```
#[derive(Debug, Clone)]
pub struct UnaryEncoding {
    params: UnaryParams,
    words: usize,
    noise: BernoulliWords,
    truth: Bernoulli,
}

impl PartialEq for UnaryEncoding {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params
    }
}

/// Symmetric unary encoding (basic one-time RAPPOR): a namespace for [`Sue::new`].
///
/// # Privacy
/// p = e^(ε/2)/(e^(ε/2) + 1) for the user's bit, q = 1 − p for the others: the ratio of any
/// bit vector under two inputs is at most (p/q)² = e^ε.
///
/// # Utility
/// `Var = e^(ε/2)/(e^(ε/2) − 1)²/n` for every item whatever f_v (the f_v term cancels because
/// p + q = 1).
///
/// # Example
/// ```
/// use harmony_core::frequency::Sue;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let sue = Sue::new(2.0, 8).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = sue.aggregator();
/// for i in 0..4000 {
///     agg.add(&sue.randomize(i % 2, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[1] - 0.5).abs() < 5.0 * est.std_errors[1]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sue;

/// Optimized unary encoding (Wang et al. 2017): a namespace for [`Oue::new`].
///
/// # Privacy
/// p = 1/2 for the user's bit, q = 1/(e^ε + 1) for the others: the ratio of any bit vector
/// under two inputs is at most (p/q)·(1 − q)/(1 − p) = e^ε.
///
/// # Utility
/// `Var = [4e^ε/(e^ε − 1)² + f_v]/n`; worst case (f_v = 1) (e^ε + 1)²/((e^ε − 1)² n).
///
/// # Example
/// ```
/// use harmony_core::frequency::Oue;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let oue = Oue::new(2.0, 8).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = oue.aggregator();
/// for i in 0..4000 {
///     agg.add(&oue.randomize(i % 4, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[2] - 0.25).abs() < 5.0 * est.std_errors[2]);
/// assert!((est.frequencies[7] - 0.0).abs() < 5.0 * est.std_errors[7]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oue;

impl Sue {
    /// SUE with budget `epsilon` over [0, d). Errors: ε not finite and > 0, d < 2.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(epsilon: f64, d: usize) -> Result<UnaryEncoding> {
        UnaryEncoding::new(UnaryKind::Sue, epsilon, d)
    }
}

impl Oue {
    /// OUE with budget `epsilon` over [0, d). Errors: ε not finite and > 0, d < 2.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(epsilon: f64, d: usize) -> Result<UnaryEncoding> {
        UnaryEncoding::new(UnaryKind::Oue, epsilon, d)
    }
}

/// A unary report: d bits packed little-endian into ⌈d/64⌉ words (bit v is bit v % 64 of word
/// v / 64); the padding bits of the last word are zero.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UnaryReport {
    /// The packed bits.
    pub bits: Vec<u64>,
}

impl UnaryReport {
    /// Decodes a report's bytes into `self` as [`crate::wire::decode`] does (the header, then
    /// postcard's sequence: a varint length, then each word a varint), without serde and reusing
    /// `self.bits`: an engine's batch path over stored reports. `None` wherever that decode
    /// fails (`self` then holds no report); call it for the error.
    pub fn decode_into(&mut self, bytes: &[u8]) -> Option<()> {
        use crate::wire::{WIRE_VERSION, take_varint};
        self.bits.clear();
        let [WIRE_VERSION, kind, payload @ ..] = bytes else { return None };
        if *kind != Self::KIND.byte {
            return None;
        }
        let (len, mut at) = take_varint(payload, usize::BITS)?;
        // Each word is at least one byte: a longer sequence cannot fit (postcard fails on it too).
        if len > (payload.len() - at) as u64 {
            return None;
        }
        for _ in 0..len {
            let (word, n) = take_varint(&payload[at..], 64)?;
            self.bits.push(word);
            at += n;
        }
        (at == payload.len()).then_some(())
    }

    /// Bit v.
    #[inline]
    pub fn bit(&self, v: usize) -> bool {
        (self.bits[v / 64] >> (v % 64)) & 1 == 1
    }
}

impl UnaryEncoding {
    /// Randomizes v (< d, checked by the caller) into `report`, reusing its allocation: the
    /// same draws as [`FrequencyOracle::randomize_unchecked`] (which calls this), without a
    /// fresh `Vec` per report on simulation loops.
    pub fn randomize_reusing<R: Rng + ?Sized>(&self, v: usize, rng: &mut R, report: &mut UnaryReport) {
        let d = self.params.d;
        let bits = &mut report.bits;
        bits.clear();
        for _ in 0..self.words - 1 {
            bits.push(self.noise.sample(rng));
        }
        bits.push(self.noise.sample_masked(rng, padding_mask(d)));
        let (w, b) = (v / 64, v % 64);
        let truth = self.truth.sample(rng) as u64;
        bits[w] = (bits[w] & !(1u64 << b)) | (truth << b);
    }
}

impl WireReport for UnaryReport {
    const KIND: WireKind = ReportKind::Unary.wire();
}

impl UnaryEncoding {
    /// A unary encoding of the given kind. Errors: ε not finite and > 0, d < 2.
    pub fn new(kind: UnaryKind, epsilon: f64, d: usize) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_domain("d", d)?;
        let (p, q) = match kind {
            UnaryKind::Sue => {
                let em = (-eps.value() / 2.0).exp();
                let p = 1.0 / (1.0 + em);
                (p, em * p)
            }
            UnaryKind::Oue => {
                let em = (-eps.value()).exp();
                (0.5, em / (1.0 + em))
            }
        };
        Ok(UnaryEncoding {
            params: UnaryParams { kind, eps, d, p, q },
            words: d.div_ceil(64),
            noise: BernoulliWords::new(q),
            truth: Bernoulli::new(p),
        })
    }
    /// SUE or OUE.
    pub fn kind(&self) -> UnaryKind {
        self.params.kind
    }
    /// P[bit x = 1 | x].
    pub fn p(&self) -> f64 {
        self.params.p
    }
    /// P[bit v = 1 | x ≠ v].
    pub fn q(&self) -> f64 {
        self.params.q
    }
    /// Number of 64-bit words of a report.
    pub fn words(&self) -> usize {
        self.words
    }
    /// Support probabilities (p*, q*) = (p, q).
    pub fn pure_params(&self) -> PureParams {
        PureParams { p: self.params.p, q: self.params.q }
    }
    /// P[report | x] = Π_v P[bit v], from the oracle's constants (0 for a malformed report or x ≥ d).
    pub fn output_probability(&self, x: usize, report: &UnaryReport) -> f64 {
        if validate_bits(&report.bits, self.params.d).is_err() || x >= self.params.d {
            return 0.0;
        }
        (0..self.params.d)
            .map(|v| {
                let pr = if v == x { self.params.p } else { self.params.q };
                if report.bit(v) { pr } else { 1.0 - pr }
            })
            .product()
    }
}

impl UnaryEncoding {
    /// Randomizes a batch into one flat buffer, [`words`](Self::words) `u64`s per report (report
    /// i at `out[i·w..(i+1)·w]`): no allocation per report. Same distribution as
    /// `randomize_unchecked` — every bit is an independent exact Bernoulli: the noise lanes come
    /// from [`BernoulliWords`] (for d ≤ 32 one 64-lane word serves ⌊64/d⌋ reports; lanes of an
    /// i.i.d. word are i.i.d.), the user's own bit from 64-lane words of Bernoulli(p).
    /// All inputs are validated first (all or nothing).
    pub fn randomize_packed<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<u64>) -> Result<()> {
        let d = self.params.d;
        super::check_batch(vs, d)?;
        let w = self.words;
        out.reserve(vs.len() * w);
        let truth = BernoulliWords::new(self.params.p);
        if d <= 32 {
            let mask = padding_mask(d);
            let (mut buf, mut avail) = (0u64, 0usize);
            for chunk in vs.chunks(64) {
                let mut own = truth.sample(rng);
                for &v in chunk {
                    if avail < d {
                        buf = self.noise.sample(rng);
                        avail = 64;
                    }
                    let bits = buf & mask;
                    buf >>= d;
                    avail -= d;
                    out.push((bits & !(1u64 << v)) | ((own & 1) << v));
                    own >>= 1;
                }
            }
        } else {
            let last = padding_mask(d);
            // Reports per `fill` call: one long run of i.i.d. lanes, at most 2^14 words (128 KiB,
            // so that the zeroed buffer is still in L2 when `fill` writes it).
            let per_fill = (NOISE_WORDS / w).clamp(1, 64);
            for chunk in vs.chunks(64) {
                let mut own = truth.sample(rng);
                for part in chunk.chunks(per_fill) {
                    let start = out.len();
                    out.resize(start + part.len() * w, 0);
                    self.noise.fill(rng, &mut out[start..]);
                    for (bits, &v) in out[start..].chunks_exact_mut(w).zip(part) {
                        bits[w - 1] &= last;
                        let word = &mut bits[v / 64];
                        *word = (*word & !(1u64 << (v % 64))) | ((own & 1) << (v % 64));
                        own >>= 1;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Largest number of noise words drawn by one [`BernoulliWords::fill`] call of
/// [`UnaryEncoding::randomize_packed`].
const NOISE_WORDS: usize = 1 << 14;

impl UnaryAggregator {
    /// Adds a flat buffer of reports as written by [`UnaryEncoding::randomize_packed`]
    /// (`words` `u64`s each). Validates every report first (length, padding bits): all or
    /// nothing, the error names the report's index.
    pub fn add_packed(&mut self, packed: &[u64]) -> Result<()> {
        let d = self.params.d;
        let w = d.div_ceil(64);
        if !packed.len().is_multiple_of(w) {
            return Err(Error::report(
                "packed",
                format!("{} words", packed.len()),
                format!("a multiple of {w} words ({d} bits per report)"),
            ));
        }
        for (i, bits) in packed.chunks_exact(w).enumerate() {
            validate_bits(bits, d).map_err(|e| crate::aggregate::at_index(e, i))?;
        }
        let mut group: [&[u64]; 16] = [&[]; 16];
        let mut k = 0;
        for bits in packed.chunks_exact(w) {
            group[k] = bits;
            k += 1;
            if k == 16 {
                self.counts.add16(&group);
                k = 0;
            }
        }
        for bits in &group[..k] {
            self.counts.add_one_ripple(bits);
        }
        self.n += (packed.len() / w) as u64;
        Ok(())
    }
}

pub(crate) fn validate_bits(bits: &[u64], d: usize) -> Result<()> {
    let words = d.div_ceil(64);
    if bits.len() != words {
        return Err(Error::report("bits", format!("{} words", bits.len()), format!("{words} words ({d} bits)")));
    }
    let pad = bits[words - 1] & !padding_mask(d);
    if pad != 0 {
        return Err(Error::report(
            "bits",
            format!("padding bits {pad:#x} set in word {}", words - 1),
            format!("zero bits at positions >= {d}"),
        ));
    }
    Ok(())
}

impl FrequencyOracle for UnaryEncoding {
    type Report = UnaryReport;
    type Aggregator = UnaryAggregator;

    fn name(&self) -> &'static str {
        match self.params.kind {
            UnaryKind::Sue => "sue",
            UnaryKind::Oue => "oue",
        }
    }
    fn epsilon(&self) -> Epsilon {
        self.params.eps
    }
    fn domain_size(&self) -> usize {
        self.params.d
    }
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> UnaryReport {
        let mut report = UnaryReport { bits: Vec::with_capacity(self.words) };
        self.randomize_reusing(v, rng, &mut report);
        report
    }
    fn validate_report(&self, r: &UnaryReport) -> Result<()> {
        validate_bits(&r.bits, self.params.d)
    }
    fn aggregator(&self) -> UnaryAggregator {
        UnaryAggregator { params: self.params.clone(), n: 0, counts: BitSlicedCounts::new(self.words) }
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
    fn aggregate_cross_moment(&self, _freqs: &[f64], _a: usize, _b: usize) -> Option<f64> {
        Some(0.0)
    }
    fn report_estimate(&self, report: &UnaryReport, v: usize) -> f64 {
        (report.bit(v) as u8 as f64 - self.params.q) / (self.params.p - self.params.q)
    }
}

/// Server-side unary state: bit-sliced counters (see the module docs). Adding a batch with
/// [`Aggregator::add_batch`] uses the 16-report carry-save path.
#[derive(Debug, Clone)]
pub struct UnaryAggregator {
    params: UnaryParams,
    n: u64,
    counts: BitSlicedCounts,
}

impl UnaryAggregator {
    /// The number of reports with each bit set (length d).
    pub fn counts(&self) -> Vec<u64> {
        self.counts.first_totals(self.params.d)
    }
}

impl UnaryAggregator {
    /// Adds already validated reports 16 at a time (the carry-save path), the rest one by one.
    pub(crate) fn add_validated<'a>(&mut self, reports: impl Iterator<Item = &'a UnaryReport>) {
        self.n += self.counts.add_all(reports.map(|r| r.bits.as_slice()));
    }
}

impl Aggregator for UnaryAggregator {
    type Report = UnaryReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &UnaryReport) -> Result<()> {
        validate_bits(&r.bits, self.params.d)
    }
    fn add_unchecked(&mut self, r: &UnaryReport) {
        self.counts.add_one(&r.bits);
        self.n += 1;
    }
    fn add_unchecked_times(&mut self, r: &UnaryReport, times: u64) {
        self.counts.add_times(&r.bits, times);
        self.n += times;
    }
    /// All or nothing in one pass over the reports: each group of 16 is validated and added
    /// to a scratch counter, which is folded in only if every report was valid.
    fn add_batch(&mut self, reports: &[UnaryReport]) -> Result<()> {
        if reports.len() < 64 {
            for (i, r) in reports.iter().enumerate() {
                self.validate(r).map_err(|e| at_index(e, i))?;
            }
            self.add_validated(reports.iter());
            return Ok(());
        }
        let mut scratch = BitSlicedCounts::new(self.counts.words);
        for (g, group) in reports.chunks(16).enumerate() {
            for (k, r) in group.iter().enumerate() {
                self.validate(r).map_err(|e| at_index(e, 16 * g + k))?;
            }
            if group.len() == 16 {
                scratch.add16(&std::array::from_fn(|k| group[k].bits.as_slice()));
            } else {
                group.iter().for_each(|r| scratch.add_one_ripple(&r.bits));
            }
        }
        self.counts.absorb(&scratch);
        self.n += reports.len() as u64;
        Ok(())
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("unary-encoding parameters", &self.params, &other.params)?;
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

/// Planes per 64-lane group: each lane counts up to 2^12 − 1 reports between flushes.
const PLANES: usize = 12;
const CAPACITY: u64 = (1 << PLANES) - 1;
/// Words processed together by the carry-save path (two SSE2 registers per plane).
const LANES: usize = 4;

/// Bit-sliced (vertical) counters: `planes[i * words + w]` holds bit i of the 64 lane
/// counters of categories 64w..64w+63 (plane-major, so neighbouring words vectorise).
/// `pending` bounds every lane counter.
#[derive(Debug, Clone)]
pub(crate) struct BitSlicedCounts {
    words: usize,
    planes: Vec<u64>,
    pending: u64,
    flushed: Vec<u64>,
    /// Up to 15 single reports waiting for a full group of 16 (`staged` of them, `words` words
    /// each): one-at-a-time adds then take the carry-save path too.
    stage: Vec<u64>,
    staged: usize,
}

/// A full adder on L words at once: (carry, sum) of a + b + c.
#[inline(always)]
fn csa<const L: usize>(a: [u64; L], b: [u64; L], c: [u64; L]) -> ([u64; L], [u64; L]) {
    let (mut h, mut l) = ([0; L], [0; L]);
    for i in 0..L {
        let u = a[i] ^ b[i];
        h[i] = (a[i] & b[i]) | (u & c[i]);
        l[i] = u ^ c[i];
    }
    (h, l)
}

/// Words w..w+L of 16 reports into the planes: a Harley–Seal carry-save tree into planes
/// 0–3 (ones, twos, fours, eights), then the sixteens ripple into planes 4 and up.
#[inline(always)]
fn add16_at<const L: usize>(planes: &mut [u64], words: usize, w: usize, r: &[&[u64]; 16]) {
    let ld = |k: usize| -> [u64; L] { r[k][w..w + L].try_into().expect("L words") };
    let get = |planes: &[u64], i: usize| -> [u64; L] { planes[i * words + w..][..L].try_into().expect("L words") };
    let (ones, twos, fours, eights) = (get(planes, 0), get(planes, 1), get(planes, 2), get(planes, 3));
    let (twos_a, o) = csa(ones, ld(0), ld(1));
    let (twos_b, o) = csa(o, ld(2), ld(3));
    let (fours_a, t) = csa(twos, twos_a, twos_b);
    let (twos_a, o) = csa(o, ld(4), ld(5));
    let (twos_b, o) = csa(o, ld(6), ld(7));
    let (fours_b, t) = csa(t, twos_a, twos_b);
    let (eights_a, f) = csa(fours, fours_a, fours_b);
    let (twos_a, o) = csa(o, ld(8), ld(9));
    let (twos_b, o) = csa(o, ld(10), ld(11));
    let (fours_a, t) = csa(t, twos_a, twos_b);
    let (twos_a, o) = csa(o, ld(12), ld(13));
    let (twos_b, o) = csa(o, ld(14), ld(15));
    let (fours_b, t) = csa(t, twos_a, twos_b);
    let (eights_b, f) = csa(f, fours_a, fours_b);
    let (mut carry, e) = csa(eights, eights_a, eights_b);
    for (i, x) in [o, t, f, e].into_iter().enumerate() {
        planes[i * words + w..][..L].copy_from_slice(&x);
    }
    for i in 4..PLANES {
        let p = &mut planes[i * words + w..][..L];
        for l in 0..L {
            let t = p[l] & carry[l];
            p[l] ^= carry[l];
            carry[l] = t;
        }
    }
}

impl BitSlicedCounts {
    pub(crate) fn new(words: usize) -> Self {
        BitSlicedCounts {
            words,
            planes: vec![0; words * PLANES],
            pending: 0,
            flushed: vec![0; words * 64],
            stage: vec![0; words * 16],
            staged: 0,
        }
    }

    /// Adds one bit vector: staged, and the 16 staged vectors go through [`Self::add16`]
    /// together.
    #[inline]
    /// Adds one report's bits `times` times, straight into the flushed counts.
    pub(crate) fn add_times(&mut self, bits: &[u64], times: u64) {
        for (w, &word) in bits[..self.words].iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                self.flushed[w * 64 + rest.trailing_zeros() as usize] += times;
                rest &= rest - 1;
            }
        }
    }
    pub(crate) fn add_one(&mut self, bits: &[u64]) {
        let w = self.words;
        self.stage[self.staged * w..][..w].copy_from_slice(&bits[..w]);
        self.staged += 1;
        if self.staged == 16 {
            let stage = std::mem::take(&mut self.stage);
            self.add16(&std::array::from_fn(|k| &stage[k * w..][..w]));
            self.stage = stage;
            self.staged = 0;
        }
    }

    /// Adds the staged vectors' bits to `out` (64 counts per word).
    fn add_staged_into(&self, out: &mut [u64]) {
        for bits in self.stage.chunks_exact(self.words).take(self.staged) {
            for (w, &x) in bits.iter().enumerate() {
                let mut x = x;
                while x != 0 {
                    out[w * 64 + x.trailing_zeros() as usize] += 1;
                    x &= x - 1;
                }
            }
        }
    }

    /// Adds one bit vector: a ripple-carry add of each word into its planes.
    fn add_one_ripple(&mut self, bits: &[u64]) {
        if self.pending + 1 > CAPACITY {
            self.flush();
        }
        for (w, &x) in bits.iter().enumerate().take(self.words) {
            let mut carry = x;
            for i in 0..PLANES {
                if carry == 0 {
                    break;
                }
                let p = &mut self.planes[i * self.words + w];
                let t = *p & carry;
                *p ^= carry;
                carry = t;
            }
        }
        self.pending += 1;
    }

    /// Adds bit vectors 16 at a time (the carry-save path), the rest one by one; returns how
    /// many were added.
    pub(crate) fn add_all<'a>(&mut self, reports: impl Iterator<Item = &'a [u64]>) -> u64 {
        let mut group: [&[u64]; 16] = [&[]; 16];
        let (mut k, mut n) = (0, 0);
        for bits in reports {
            group[k] = bits;
            k += 1;
            if k == 16 {
                self.add16(&group);
                k = 0;
            }
            n += 1;
        }
        for bits in &group[..k] {
            self.add_one_ripple(bits);
        }
        n
    }
    /// Adds 16 bit vectors of `words` words each, LANES words at a time.
    pub(crate) fn add16(&mut self, r: &[&[u64]; 16]) {
        if self.pending + 16 > CAPACITY {
            self.flush();
        }
        let words = self.words;
        let paired = words - words % LANES;
        for w in (0..paired).step_by(LANES) {
            add16_at::<LANES>(&mut self.planes, words, w, r);
        }
        for w in paired..words {
            add16_at::<1>(&mut self.planes, words, w, r);
        }
        self.pending += 16;
    }

    /// Decodes every plane into `out` (64 counts per word), adding.
    fn decode_into(&self, out: &mut [u64]) {
        for (i, plane) in self.planes.chunks_exact(self.words).enumerate() {
            for (w, &bits) in plane.iter().enumerate() {
                let mut bits = bits;
                while bits != 0 {
                    out[w * 64 + bits.trailing_zeros() as usize] += 1 << i;
                    bits &= bits - 1;
                }
            }
        }
    }

    fn flush(&mut self) {
        let mut flushed = std::mem::take(&mut self.flushed);
        self.decode_into(&mut flushed);
        self.flushed = flushed;
        self.planes.iter_mut().for_each(|p| *p = 0);
        self.pending = 0;
    }

    /// The counts of the first `d` categories.
    pub(crate) fn first_totals(&self, d: usize) -> Vec<u64> {
        let mut c = self.totals();
        c.truncate(d);
        c
    }

    /// The pure oracle's estimate from the counts of the first `d` categories over `n` reports.
    pub(crate) fn pure_estimate(&self, n: u64, d: usize, pp: PureParams) -> FrequencyEstimate {
        pp.estimate_from_counts(n, self.first_totals(d).into_iter().map(|c| c as f64))
    }

    /// All counts (64 per word).
    pub(crate) fn totals(&self) -> Vec<u64> {
        let mut t = self.flushed.clone();
        self.decode_into(&mut t);
        self.add_staged_into(&mut t);
        t
    }

    /// Adds another counter's totals into this one's flushed counts.
    pub(crate) fn absorb(&mut self, other: &Self) {
        self.flushed.iter_mut().zip(&other.flushed).for_each(|(a, b)| *a += b);
        other.decode_into(&mut self.flushed);
        other.add_staged_into(&mut self.flushed);
    }
}

impl crate::state::SaveState for BitSlicedCounts {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64s(&self.totals());
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        r.add_u64s("bit counts", &mut self.flushed)
    }
}

impl crate::state::SaveState for UnaryAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n);
        self.counts.save_state(w);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.n += r.u64("unary n")?;
        self.counts.merge_state(r)
    }
}

impl super::registry::Registered for UnaryEncoding {
    const ADAPTIVE: bool = true;
    fn build(kind: crate::kinds::OracleKind, epsilon: f64, d: usize, _: &super::registry::Params<'_>) -> Result<Self> {
        let unary = if kind == crate::kinds::OracleKind::Sue { UnaryKind::Sue } else { UnaryKind::Oue };
        UnaryEncoding::new(unary, epsilon, d)
    }
    fn output_probability(&self, x: usize, r: &UnaryReport) -> f64 {
        UnaryEncoding::output_probability(self, x, r)
    }
    #[inline]
    fn randomize_into<R: Rng + ?Sized>(&self, v: usize, rng: &mut R, report: &mut UnaryReport) {
        self.randomize_reusing(v, rng, report)
    }
    fn add_validated<'a>(agg: &mut UnaryAggregator, reports: impl Iterator<Item = &'a UnaryReport>) -> Result<()> {
        agg.add_validated(reports);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::fast_rng;

    /// `decode_into` accepts exactly the byte strings `wire::decode` accepts, with the same
    /// report: encodings of random reports, then each truncated, extended and with a byte
    /// changed, and hand-made lengths (non-canonical, past the end, overlong).
    #[test]
    fn the_fast_decode_agrees_with_the_wire_decode() {
        use rand::RngExt;
        let mut rng = fast_rng(11);
        let mut r = UnaryReport { bits: Vec::new() };
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for i in 0..2_000 {
            let bits = (0..i % 20).map(|_| rng.random::<u64>() >> rng.random_range(0..64)).collect();
            let report = UnaryReport { bits };
            let bytes = crate::wire::encode(&report);
            assert_eq!(r.decode_into(&bytes), Some(()));
            assert_eq!(r, report);
            inputs.extend(crate::wire::mutations(&bytes, &mut rng));
        }
        let header = [crate::wire::WIRE_VERSION, UnaryReport::KIND.byte];
        let hand_made = [
            &[0x81, 0x00, 0x05][..],
            &[0x02, 0x05],
            &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x05],
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x05],
            &[0x00],
        ];
        for (payload, ok) in hand_made.into_iter().zip([true, false, false, false, true]) {
            let bytes = [&header[..], payload].concat();
            assert_eq!(crate::wire::decode::<UnaryReport>(&bytes).is_ok(), ok, "{payload:02x?}");
            inputs.push(bytes);
        }
        for bytes in &inputs {
            let slow = crate::wire::decode::<UnaryReport>(bytes).ok();
            let fast = r.decode_into(bytes).map(|()| r.clone());
            assert_eq!(fast, slow, "{bytes:02x?}");
        }
    }

    fn naive_counts(reports: &[UnaryReport], d: usize) -> Vec<u64> {
        (0..d).map(|v| reports.iter().filter(|r| r.bit(v)).count() as u64).collect()
    }

    #[test]
    fn bit_sliced_counts_equal_naive_counts_across_flushes() {
        let mut rng = fast_rng(201);
        for &d in &[2usize, 64, 70, 130] {
            let o = Oue::new(1.0, d).unwrap();
            // 9000 reports cross the 4095-report flush twice, with odd batch sizes.
            let reports: Vec<_> = (0..9000).map(|i| o.randomize_unchecked(i % d, &mut rng)).collect();
            let mut a = o.aggregator();
            let mut start = 0;
            for (k, len) in [1usize, 17, 4096, 33, 15, 16, 4000, 822].into_iter().enumerate() {
                let part = &reports[start..start + len];
                if k % 2 == 0 {
                    a.add_batch(part).unwrap();
                } else {
                    part.iter().for_each(|r| a.add(r).unwrap());
                }
                start += len;
            }
            assert_eq!(start, reports.len());
            assert_eq!(a.counts(), naive_counts(&reports, d), "d = {d}");
            assert_eq!(a.count(), 9000);
        }
    }

    #[test]
    fn saturated_reports_count_exactly() {
        // All-ones vectors drive every lane to the capacity: exercises every carry.
        let d = 100;
        let o = Sue::new(1.0, d).unwrap();
        let mut full = vec![u64::MAX, padding_mask(d)];
        full[1] &= padding_mask(d);
        let reports = vec![UnaryReport { bits: full }; 10_000];
        let mut a = o.aggregator();
        a.add_batch(&reports).unwrap();
        a.add(&reports[0]).unwrap();
        assert!(a.counts().iter().all(|&c| c == 10_001));
    }

    #[test]
    fn validate_names_the_problem() {
        let o = Oue::new(1.0, 70).unwrap();
        let a = o.aggregator();
        let e = a.validate(&UnaryReport { bits: vec![0] }).unwrap_err().to_string();
        assert!(e.contains("bits is \"1 words\"") && e.contains("2 words (70 bits)"), "{e}");
        let e = a.validate(&UnaryReport { bits: vec![0, 1 << 6] }).unwrap_err().to_string();
        assert!(e.contains("padding") && e.contains(">= 70"), "{e}");
        assert!(a.validate(&UnaryReport { bits: vec![u64::MAX, (1 << 6) - 1] }).is_ok());
    }

    #[test]
    fn randomize_keeps_padding_zero() {
        let o = Oue::new(0.1, 65).unwrap();
        let mut rng = fast_rng(202);
        for _ in 0..2000 {
            let r = o.randomize(64, &mut rng).unwrap();
            assert_eq!(r.bits.len(), 2);
            assert_eq!(r.bits[1] >> 1, 0);
        }
    }

    #[test]
    fn constants_and_closed_forms() {
        let e = 2f64.exp();
        let oue = Oue::new(2.0, 10).unwrap();
        assert_eq!(oue.p(), 0.5);
        assert!((oue.q() - 1.0 / (e + 1.0)).abs() < 1e-15);
        let f: Vec<f64> = (0..10).map(|i| if i == 4 { 0.4 } else { 0.6 / 9.0 }).collect();
        let closed = 4.0 * e / (e - 1.0).powi(2) + 0.4;
        assert!((oue.aggregate_variance(&f, 4) - closed).abs() < 1e-12);
        assert!((oue.worst_case_variance() - (e + 1.0).powi(2) / (e - 1.0).powi(2)).abs() < 1e-12);
        let sue = Sue::new(2.0, 10).unwrap();
        let h = 1f64.exp();
        assert!((sue.aggregate_variance(&f, 4) - h / (h - 1.0).powi(2)).abs() < 1e-12);
        assert!((sue.p() + sue.q() - 1.0).abs() < 1e-15);
        assert_eq!(sue.name(), "sue");
        assert_eq!(oue.name(), "oue");
        assert_ne!(sue, oue);
    }
}

#[cfg(test)]
mod packed_tests {
    use super::*;
    use crate::estimate::Z_TEST;
    use crate::sampling::fast_rng;

    /// The packed batch path gives unbiased estimates with the closed-form variance (z = 4.42 per
    /// item, Bonferroni over the d items of each case: false-failure ≈ 1e-5·d), and its reports
    /// aggregate exactly as the same bits sent as `UnaryReport`s.
    #[test]
    fn packed_batch_matches_closed_form_and_per_report_aggregation() {
        let mut rng = fast_rng(4242);
        for (kind, eps, d) in [(UnaryKind::Oue, 1.0, 16), (UnaryKind::Sue, 2.0, 5), (UnaryKind::Oue, 0.5, 130)] {
            let ue = UnaryEncoding::new(kind, eps, d).unwrap();
            let n = 60_000;
            let vs: Vec<usize> = (0..n).map(|i| if i % 3 == 0 { 0 } else { i % d }).collect();
            let mut packed = Vec::new();
            ue.randomize_packed(&vs, &mut rng, &mut packed).unwrap();
            assert_eq!(packed.len(), n * ue.words());
            let mut agg = ue.aggregator();
            agg.add_packed(&packed).unwrap();
            let reports: Vec<UnaryReport> =
                packed.chunks_exact(ue.words()).map(|b| UnaryReport { bits: b.to_vec() }).collect();
            let mut one = ue.aggregator();
            one.add_batch(&reports).unwrap();
            assert_eq!(agg.counts(), one.counts());
            let est = agg.estimate();
            let mut truth = vec![0.0; d];
            vs.iter().for_each(|&v| truth[v] += 1.0 / n as f64);
            for v in 0..d {
                let sd = (ue.aggregate_variance(&truth, v) / n as f64).sqrt();
                let z = (est.frequencies[v] - truth[v]) / sd;
                assert!(
                    z.abs() < Z_TEST,
                    "{kind:?} eps {eps} d {d} item {v}: est {} truth {} z {z}",
                    est.frequencies[v],
                    truth[v]
                );
            }
        }
    }

    #[test]
    fn packed_rejects_bad_input_and_bad_reports() {
        let ue = UnaryEncoding::new(UnaryKind::Oue, 1.0, 10).unwrap();
        let mut rng = fast_rng(1);
        let mut out = Vec::new();
        assert!(ue.randomize_packed(&[1, 10], &mut rng, &mut out).unwrap_err().to_string().contains("category 1"));
        assert!(out.is_empty());
        let mut agg = ue.aggregator();
        let e = agg.add_packed(&[0b11, 1 << 12]).unwrap_err().to_string();
        assert!(e.contains("report 1") && e.contains("padding"), "{e}");
        assert_eq!(agg.count(), 0);
        let wide = UnaryEncoding::new(UnaryKind::Oue, 1.0, 100).unwrap();
        assert!(wide.aggregator().add_packed(&[0, 0, 0]).unwrap_err().to_string().contains("multiple of 2"));
    }
}
