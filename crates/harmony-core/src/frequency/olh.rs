//! Optimized local hashing (OLH; docs/MECHANISMS.md §A4).
//!
//! Each user draws a fresh 64-bit seed s (independent of the data), hashes the item with
//! H_s: u64 → \[g\] and sends (s, y) with y = GRR_g(H_s(x)): y = H_s(x) w.p. p = e^ε/(e^ε + g − 1),
//! each other hash value w.p. q = 1/(e^ε + g − 1). The server counts, for each candidate v, the
//! reports that support it, C(v) = #{i : H_{s_i}(v) = y_i}, and estimates
//! f̂_v = (C(v)/n − 1/g)/(p − 1/g).
//!
//! # The hash family
//! Thorup's strongly universal multiply-shift for vectors (Dietzfelbinger 1996; Thorup, "High
//! speed hashing for integers and strings", 2015, §3.4), on the two 32-bit halves of the item,
//! followed by a multiply-shift range reduction:
//!
//! ```text
//! (a₀, a₁, b) = (splitmix64(s) | 1, splitmix64(s + 2), splitmix64(s + 1))
//! x_v = a₀·lo(v) + a₁·hi(v) + b (mod 2⁶⁴),  lo(v) = v mod 2³², hi(v) = v >> 32
//! H_s(v) = ((x_v >> 32)·g) >> 32
//! ```
//!
//! *Universality.* If a₀ is uniform odd and a₁, b uniform, then for items v ≠ u the top 32 bits
//! (T_v, T_u) of (x_v, x_u) are exactly uniform on [2³²]²: T_v is uniform (b), and
//! D = x_u − x_v = a₀·δ_lo + a₁·δ_hi (δ the differences of the halves, |δ| < 2³², of 2-adic
//! valuation k ≤ 31) is independent of x_v and uniform on the odd multiples of 2ᵏ (δ_hi = 0) or
//! on the multiples of 2ᵏ (δ_hi ≠ 0). T_u − T_v is ⌊D/2³²⌋ plus a carry that is
//! Bernoulli(frac(D/2³²)) given D (the low half of x_v is uniform, independent of T_v), so
//! P[T_u − T_v = m] = E[tent(D/2³² − m)]; D/2³² is uniform on a lattice of spacing ≤ 1/2 whose
//! cells have the integers as boundaries (midpoint or trapezoid rule, exact for the tent), so
//! this is 2⁻³² for every m. Hence P[H(u) = H(v)] = Σ_y (w_y/2³²)² with w_y ∈ {⌊2³²/g⌋, ⌈2³²/g⌉}
//! the number of top-32-bit values mapped to y: 1/g to within g/2⁶⁶ ≤ 2⁻⁵⁰ — what the estimator
//! assumes (q* = 1/g). (a₀, a₁, b) are derived from the user's seed by SplitMix64, a fixed
//! mixer, so the tests check the collision rate empirically, for pairs that differ by 2ᵏ·odd,
//! k = 0 … 63.
//!
//! For items below 2³² (every domain value: d ≤ 2³¹) hi(v) = 0 and H is the earlier
//! `a₀·v + b` hash: reports of domain oracles keep their meaning. The earlier hash applied that
//! form to all 64 bits, which is not universal beyond 2³²: x and x + 2⁶³ always collided, a
//! bias of −0.33·f_x in the estimate of x + 2⁶³ at ε = 1 (PEM's prefixes are 64-bit items).
//! The hash is part of the wire contract. Domain value v is the item `v as u64`;
//! [`Olh::randomize_item`] and [`Olh::support_counts_for`] accept arbitrary u64 items.
//!
//! # Aggregation kernel
//! H(v) = y iff the top 32 bits t_v of x_v lie in the interval [lo, lo + width) of values that
//! map to y. Walking v upwards (within one value of hi(v)) adds a₀ to x_v each step, so per (report, candidate) the test is
//! an add, a carry and a compare on 32-bit halves (biased by 2^31 so that signed compares serve as
//! unsigned ones), over 16 lanes that LLVM vectorises. Candidates are processed in tiles of 4096
//! `u32` counters (L1-resident), all reports of a block per tile, then flushed into `u64`.

use super::{FrequencyOracle, PureParams};
use crate::aggregate::{Aggregator, at_index, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::params::{Epsilon, check_domain};
use crate::sampling::{Bernoulli, BernoulliWords, dispatch_avx2, fill_words, splitmix64, uniform_below};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The largest hash range used: beyond ε ≈ 11 the optimum g = e^ε + 1 is capped here (the
/// variance formula uses the actual g, so estimates stay exact).
pub const MAX_G: u32 = 1 << 16;

/// Optimized local hashing over [0, d) (and arbitrary u64 items).
///
/// # Privacy
/// The seed is drawn independently of x, and given the seed the hashed value goes through GRR
/// over \[g\]: P[(s, y) | x] = P\[s\]·(p if y = H_s(x) else q) with p/q = e^ε. For any two inputs the
/// ratio is at most e^ε, attained whenever H_s(x) ≠ H_s(x'): exactly ε-LDP.
///
/// # Utility
/// With g the exact integer optimum (u = ⌊e^ε⌋; g = u + 1 if e^(2ε) ≤ u(u + 1), else u + 2):
/// `Var = [ (e^ε − 1 + g)²/((e^ε − 1)²(g − 1)) + f_v (1 − p − 1/g)/(p − 1/g) ] / n`
/// (≈ [4e^ε/(e^ε − 1)² + f_v]/n, like OUE). Report: a 64-bit seed and ⌈log₂ g⌉ bits.
/// Aggregation: O(n·d) hash tests (≥ 10⁹ per second per core), or O(n·|candidates|).
///
/// # Example
/// ```
/// use harmony_core::frequency::Olh;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let olh = Olh::new(2.0, 1000).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = olh.aggregator();
/// for i in 0..5000 {
///     let v = if i % 5 == 0 { 999 } else { i % 500 }; // 20% hold 999
///     agg.add(&olh.randomize(v, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[999] - 0.2).abs() < 5.0 * est.std_errors[999]);
/// assert!((est.frequencies[700] - 0.0).abs() < 5.0 * est.std_errors[700]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Olh {
    eps: Epsilon,
    d: usize,
    g: u32,
    p: f64,
    q: f64,
    keep: Bernoulli,
    /// The same Bernoulli(p), 64 lanes per draw, for the batch path.
    keep_words: BernoulliWords,
}

/// An OLH report: the public hash seed and the randomized hash value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OlhReport {
    /// The user's hash seed (uniform, independent of the data).
    pub seed: u64,
    /// The randomized hash value, in [0, g).
    pub y: u32,
}

impl WireReport for OlhReport {
    const KIND: WireKind = ReportKind::Olh.wire();
}

impl OlhReport {
    /// Decodes a report's bytes as [`crate::wire::decode`] does (the header, then postcard's
    /// varints: the seed, then `y`), without serde: an engine's batch path over stored reports.
    /// `None` wherever that decode fails; call it for the error.
    pub fn decode_fast(bytes: &[u8]) -> Option<OlhReport> {
        let [crate::wire::WIRE_VERSION, kind, payload @ ..] = bytes else { return None };
        if *kind != Self::KIND.byte {
            return None;
        }
        let (seed, n) = crate::wire::take_varint(payload, 64)?;
        let (y, m) = crate::wire::take_varint(&payload[n..], 32)?;
        (n + m == payload.len()).then_some(OlhReport { seed, y: y as u32 })
    }
}

/// The exact variance-minimising integer g for budget ε (docs/MECHANISMS.md §A4), in [2, MAX_G].
pub fn optimal_g(eps: Epsilon) -> u32 {
    let e = eps.exp();
    if e >= MAX_G as f64 {
        return MAX_G;
    }
    let u = e.floor();
    let g = if (2.0 * eps.value()).exp() <= u * (u + 1.0) { u + 1.0 } else { u + 2.0 };
    (g as u32).clamp(2, MAX_G)
}

/// The hash parameters (a₀, a₁, b) of a seed (module doc, "The hash family"). Part of the wire
/// contract; public so that other kernels (heavy hitters) compute the same hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashParams {
    /// The multiplier of the low half of the item (odd).
    pub a0: u64,
    /// The multiplier of the high half of the item.
    pub a1: u64,
    /// The offset.
    pub b: u64,
}

impl HashParams {
    /// The parameters of `seed`: (splitmix64(s) | 1, splitmix64(s + 2), splitmix64(s + 1)).
    #[inline]
    pub fn of(seed: u64) -> Self {
        HashParams {
            a0: splitmix64(seed) | 1,
            a1: splitmix64(seed.wrapping_add(2)),
            b: splitmix64(seed.wrapping_add(1)),
        }
    }
    /// x = a₀·lo(item) + a₁·hi(item) + b (mod 2⁶⁴): H is its top 32 bits reduced to [0, g).
    #[inline(always)]
    pub fn x(&self, item: u64) -> u64 {
        self.a0.wrapping_mul(item & 0xffff_ffff).wrapping_add(self.a1.wrapping_mul(item >> 32)).wrapping_add(self.b)
    }
    /// The offset of the items with high half `hi`: x = a₀·lo + (a₁·hi + b), so walking the low
    /// half upwards from it adds a₀ per step.
    #[inline(always)]
    pub fn offset(&self, hi: u64) -> u64 {
        self.a1.wrapping_mul(hi).wrapping_add(self.b)
    }
}

/// H ∈ [0, g) from x: the top 32 bits of x reduced by a multiply-shift.
#[inline(always)]
pub fn reduce(x: u64, g: u32) -> u32 {
    (((x >> 32) * g as u64) >> 32) as u32
}

/// [lo, lo + width): the top-32-bit values t with (t·g) >> 32 = y.
#[inline]
fn interval(y: u32, g: u32) -> (u32, u32) {
    let ceil_div = |k: u64| (k << 32).div_ceil(g as u64);
    let lo = ceil_div(y as u64);
    let hi = ceil_div(y as u64 + 1);
    (lo as u32, (hi - lo) as u32)
}

/// A report unpacked for the kernels.
#[derive(Debug, Clone, Copy)]
struct Prepared {
    /// a₀ and b: x_v = a·v + b for items v < 2³² (the domain kernel).
    a: u64,
    b: u64,
    /// a₁, for items ≥ 2³² (the candidate kernel).
    a1: u64,
    lo: u32,
    width: u32,
}

impl Prepared {
    #[inline]
    fn new(r: &OlhReport, g: u32) -> Self {
        let h = HashParams::of(r.seed);
        let (lo, width) = interval(r.y, g);
        Prepared { a: h.a0, b: h.b, a1: h.a1, lo, width }
    }
}

const LANES: usize = 16;
const TILE: usize = 4096;
/// Reports per block (tile counters are u32, so a block must stay below 2^32).
const BLOCK: usize = 1 << 20;
/// Reports buffered by `add_unchecked` before one kernel pass.
const PENDING: usize = 256;
const BIAS: u32 = 0x8000_0000;

/// Adds to `tile[k]` whether report `p` supports candidate `v0 + k` (tile length a multiple of
/// LANES; every candidate below 2³², so x = a₀·v + b). State per lane: `lob` = low half of x ⊕ 2^31, `z` = (high half − lo) ⊕ 2^31; a hit
/// is `z < width ⊕ 2^31` and a carry out of the low half is `lob < step_lo ⊕ 2^31` (signed).
#[inline]
fn sweep(tile: &mut [u32], p: &Prepared, v0: u64) {
    let step = p.a.wrapping_mul(LANES as u64);
    let step_lo = step as u32 as i32;
    let carry_bound = ((step as u32) ^ BIAS) as i32;
    let step_hi = (step >> 32) as u32 as i32;
    let hit_bound = (p.width ^ BIAS) as i32;
    let mut lob = [0i32; LANES];
    let mut z = [0i32; LANES];
    for i in 0..LANES {
        let x = p.a.wrapping_mul(v0 + i as u64).wrapping_add(p.b);
        lob[i] = ((x as u32) ^ BIAS) as i32;
        z[i] = (((x >> 32) as u32).wrapping_sub(p.lo) ^ BIAS) as i32;
    }
    for chunk in tile.chunks_exact_mut(LANES) {
        for i in 0..LANES {
            chunk[i] += (z[i] < hit_bound) as u32;
            lob[i] = lob[i].wrapping_add(step_lo);
            z[i] = z[i].wrapping_add(step_hi).wrapping_add((lob[i] < carry_bound) as i32);
        }
    }
}

/// counts\[v\] += #{reports supporting v} for v in [0, counts.len()).
fn accumulate_domain(prepared: &[Prepared], counts: &mut [u64]) {
    if prepared.is_empty() {
        return;
    }
    let d = counts.len();
    let mut tile = vec![0u32; TILE];
    for block in prepared.chunks(BLOCK) {
        for start in (0..d).step_by(TILE) {
            let len = TILE.min(d - start);
            let t = &mut tile[..len.next_multiple_of(LANES)];
            t.fill(0);
            for p in block {
                sweep(t, p, start as u64);
            }
            counts[start..start + len].iter_mut().zip(t.iter()).for_each(|(c, &x)| *c += x as u64);
        }
    }
}

/// counts\[k\] += #{reports supporting candidates\[k\]} for arbitrary u64 items.
fn accumulate_candidates(prepared: &[Prepared], candidates: &[u64], counts: &mut [u64]) {
    let mut tile = vec![0u32; TILE.min(candidates.len())];
    for block in prepared.chunks(BLOCK) {
        for (cands, out) in candidates.chunks(TILE).zip(counts.chunks_mut(TILE)) {
            let t = &mut tile[..cands.len()];
            t.fill(0);
            for p in block {
                let (lo, width) = ((p.lo as u64) << 32, (p.width as u64) << 32);
                let h = HashParams { a0: p.a, a1: p.a1, b: p.b };
                for (c, &item) in t.iter_mut().zip(cands) {
                    *c += (h.x(item).wrapping_sub(lo) < width) as u32;
                }
            }
            out.iter_mut().zip(t.iter()).for_each(|(c, &x)| *c += x as u64);
        }
    }
}

impl Olh {
    /// OLH with budget `epsilon` over [0, d), with the optimal integer g. Errors: ε not finite
    /// and > 0, d < 2.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        Self::build(eps, check_domain("d", d)?, optimal_g(eps))
    }
    /// OLH with an explicit hash range g ∈ [2, MAX_G] (g = 2 is binary local hashing, BLH).
    pub fn with_g(epsilon: f64, d: usize, g: u32) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_domain("d", d)?;
        if !(2..=MAX_G).contains(&g) {
            return Err(Error::param("g", g, format!("an integer in [2, {MAX_G}]")));
        }
        Self::build(eps, d, g)
    }
    fn build(eps: Epsilon, d: usize, g: u32) -> Result<Self> {
        let em = (-eps.value()).exp();
        let p = 1.0 / (1.0 + (g as f64 - 1.0) * em);
        Ok(Olh { eps, d, g, p, q: em * p, keep: Bernoulli::new(p), keep_words: BernoulliWords::new(p) })
    }
    /// The hash range g.
    pub fn g(&self) -> u32 {
        self.g
    }
    /// P[y = H_s(x)] = e^ε/(e^ε + g − 1).
    pub fn p(&self) -> f64 {
        self.p
    }
    /// P[y = k] for each hash value k ≠ H_s(x): 1/(e^ε + g − 1).
    pub fn q(&self) -> f64 {
        self.q
    }
    /// Support probabilities (p*, q*) = (p, 1/g).
    pub fn pure_params(&self) -> PureParams {
        PureParams { p: self.p, q: 1.0 / self.g as f64 }
    }
    /// H_seed(item) ∈ [0, g) (module doc, "The hash family").
    #[inline]
    pub fn hash(&self, seed: u64, item: u64) -> u32 {
        reduce(HashParams::of(seed).x(item), self.g)
    }
    /// [`Olh::hash`] of a domain value v < 2³² (hi(v) = 0, so a₁ is not needed): the batch
    /// kernel's form (tested equal).
    #[inline(always)]
    fn hash_domain(&self, seed: u64, v: u64) -> u32 {
        debug_assert!(v >> 32 == 0);
        let (a0, b) = (splitmix64(seed) | 1, splitmix64(seed.wrapping_add(1)));
        reduce(a0.wrapping_mul(v).wrapping_add(b), self.g)
    }
    /// Randomizes an arbitrary u64 item (domain value v is item v).
    #[inline]
    pub fn randomize_item<R: Rng + ?Sized>(&self, item: u64, rng: &mut R) -> OlhReport {
        let seed = rng.next_u64();
        let h = self.hash(seed, item);
        if self.keep.sample(rng) {
            return OlhReport { seed, y: h };
        }
        // h + 1 + U{0..g−2} < 2g: one conditional subtraction replaces `mod g`.
        let t = h + 1 + uniform_below(rng, self.g as u64 - 1) as u32;
        OlhReport { seed, y: if t >= self.g { t - self.g } else { t } }
    }
    /// P[y | x, seed] from the oracle's constants (the seed's own probability does not depend
    /// on x); 0 if y ≥ g or x ≥ d.
    pub fn output_probability(&self, x: usize, report: &OlhReport) -> f64 {
        if report.y >= self.g || x >= self.d {
            0.0
        } else if self.hash(report.seed, x as u64) == report.y {
            self.p
        } else {
            self.q
        }
    }
    fn check_report(&self, r: &OlhReport) -> Result<()> {
        if r.y >= self.g {
            return Err(Error::report("y", r.y, format!("a hash value in [0, {})", self.g)));
        }
        Ok(())
    }
    /// Support counts C(c) = #{i : H_{s_i}(c) = y_i} of arbitrary u64 candidates (heavy
    /// hitters). O(n·|candidates|). Errors: a report with y ≥ g (its index is named).
    pub fn support_counts_for(&self, reports: &[OlhReport], candidates: &[u64]) -> Result<Vec<u64>> {
        let prepared = self.prepare_all(reports)?;
        let mut counts = vec![0u64; candidates.len()];
        accumulate_candidates(&prepared, candidates, &mut counts);
        Ok(counts)
    }
    /// Unbiased frequency estimates of arbitrary u64 candidates from a set of reports.
    pub fn estimate_for(&self, reports: &[OlhReport], candidates: &[u64]) -> Result<FrequencyEstimate> {
        let counts = self.support_counts_for(reports, candidates)?;
        Ok(self.pure_params().estimate_from_counts(reports.len() as u64, counts.into_iter().map(|c| c as f64)))
    }
    fn prepare_all(&self, reports: &[OlhReport]) -> Result<Vec<Prepared>> {
        reports
            .iter()
            .enumerate()
            .map(|(i, r)| self.check_report(r).map(|_| Prepared::new(r, self.g)).map_err(|e| at_index(e, i)))
            .collect()
    }
}

/// Reports per step of the batch kernel (one 64-lane keep word).
const CHUNK: usize = 64;

impl Olh {
    /// The batch kernel; false if some input is ≥ d (the reports are then garbage, and the
    /// caller discards them). Per 64 reports: 64 exact Bernoulli(p) keep lanes
    /// ([`BernoulliWords`]), 64 seed words and 32 words split into two 32-bit uniforms for
    /// Lemire's multiply-shift over the g − 1 other hash values. The hash (two SplitMix64
    /// outputs and a multiply-add) and the selection run in a branch-free loop that LLVM
    /// vectorises; a draw in Lemire's rejection zone (probability < g/2³² ≤ 2⁻¹⁶) is redrawn
    /// afterwards, scalar, with [`uniform_below`], so every other value is exactly uniform.
    #[inline(always)]
    fn batch_kernel<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<OlhReport>) -> bool {
        out.reserve(vs.len());
        let g = self.g;
        let g1 = g - 1;
        // 2^32 mod (g − 1): low products below it are rejected.
        let zone = g1.wrapping_neg() % g1;
        let mut bad = false;
        let mut seeds = [0u64; CHUNK];
        let mut words = [0u64; CHUNK / 2];
        let mut hs = [0u32; CHUNK];
        let mut ys = [0u32; CHUNK];
        let mut lows = [0u32; CHUNK];
        // One report: (hash value, report value, low half of Lemire's product, v out of range).
        let lane = |v: usize, seed: u64, r: u32, keep: u64| {
            let h = self.hash_domain(seed, v as u64 & 0xffff_ffff);
            let m = r as u64 * g1 as u64;
            let t = h + 1 + (m >> 32) as u32;
            let other = if t >= g { t - g } else { t };
            (h, if keep & 1 == 1 { h } else { other }, m as u32, v >= self.d)
        };
        for chunk in vs.chunks(CHUNK) {
            let keep = self.keep_words.sample(rng);
            let k = chunk.len();
            let half = k.div_ceil(2);
            fill_words(rng, &mut seeds[..k]);
            fill_words(rng, &mut words[..half]);
            // Report i draws the low half of word i (i < half) or the high half of word i − half.
            if let Ok(c) = <&[usize; CHUNK]>::try_from(chunk) {
                let mut b = false;
                for j in 0..CHUNK / 2 {
                    let (h, y, low, x) = lane(c[j], seeds[j], words[j] as u32, keep >> j);
                    (hs[j], ys[j], lows[j]) = (h, y, low);
                    b |= x;
                }
                for (j, &w) in words.iter().enumerate() {
                    let i = j + CHUNK / 2;
                    let (h, y, low, x) = lane(c[i], seeds[i], (w >> 32) as u32, keep >> i);
                    (hs[i], ys[i], lows[i]) = (h, y, low);
                    b |= x;
                }
                bad |= b;
            } else {
                for (i, &v) in chunk.iter().enumerate() {
                    let r = if i < half { words[i] as u32 } else { (words[i - half] >> 32) as u32 };
                    let (h, y, low, x) = lane(v, seeds[i], r, keep >> i);
                    (hs[i], ys[i], lows[i]) = (h, y, low);
                    bad |= x;
                }
            }
            let mut rejected = false;
            for &low in &lows[..k] {
                rejected |= low < zone;
            }
            if rejected {
                for i in 0..k {
                    if lows[i] < zone && (keep >> i) & 1 == 0 {
                        let t = hs[i] + 1 + uniform_below(rng, g1 as u64) as u32;
                        ys[i] = if t >= g { t - g } else { t };
                    }
                }
            }
            out.extend(seeds[..k].iter().zip(&ys[..k]).map(|(&seed, &y)| OlhReport { seed, y }));
        }
        !bad
    }

    /// [`Olh::batch_kernel`] compiled with AVX2, BMI2 and POPCNT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi2,popcnt")]
    fn batch_avx2<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<OlhReport>) -> bool {
        self.batch_kernel(vs, rng, out)
    }
}

impl FrequencyOracle for Olh {
    type Report = OlhReport;
    type Aggregator = OlhAggregator;

    fn name(&self) -> &'static str {
        "olh"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    fn domain_size(&self) -> usize {
        self.d
    }
    #[inline]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> OlhReport {
        self.randomize_item(v as u64, rng)
    }
    /// Vectorised batch ([`Olh::batch_kernel`], an AVX2 build chosen at run time). Same
    /// distribution as `randomize_unchecked`. All or nothing: on a bad input nothing is
    /// appended and the error names its index.
    fn randomize_batch<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<OlhReport>) -> Result<()> {
        let start = out.len();
        let ok = dispatch_avx2!(self.batch_avx2(vs, rng, out), self.batch_kernel(vs, rng, out));
        if !ok {
            out.truncate(start);
            crate::frequency::check_batch(vs, self.d)?;
        }
        Ok(())
    }
    fn validate_report(&self, r: &OlhReport) -> Result<()> {
        self.check_report(r)
    }
    fn aggregator(&self) -> OlhAggregator {
        OlhAggregator { oracle: self.clone(), counts: vec![0; self.d], pending: Vec::new(), n: 0 }
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
    fn report_estimate(&self, report: &OlhReport, v: usize) -> f64 {
        let pp = self.pure_params();
        let s = (self.hash(report.seed, v as u64) == report.y) as u8 as f64;
        (s - pp.q) / (pp.p - pp.q)
    }
}

/// Server-side OLH state: support counts over [0, d), plus up to 256 reports buffered for one
/// vectorised pass (`estimate` includes them). [`Aggregator::add_batch`] runs the kernel on the
/// whole batch at once.
#[derive(Debug, Clone)]
pub struct OlhAggregator {
    oracle: Olh,
    counts: Vec<u64>,
    pending: Vec<OlhReport>,
    n: u64,
}

impl OlhAggregator {
    fn prepared(&self, reports: &[OlhReport]) -> Vec<Prepared> {
        reports.iter().map(|r| Prepared::new(r, self.oracle.g)).collect()
    }
    fn flush(&mut self) {
        let prepared = self.prepared(&self.pending);
        accumulate_domain(&prepared, &mut self.counts);
        self.pending.clear();
    }
    /// Support counts C(v) for every v in [0, d).
    pub fn support_counts(&self) -> Vec<u64> {
        let mut counts = self.counts.clone();
        accumulate_domain(&self.prepared(&self.pending), &mut counts);
        counts
    }
}

impl Aggregator for OlhAggregator {
    type Report = OlhReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &OlhReport) -> Result<()> {
        self.oracle.check_report(r)
    }
    fn add_unchecked(&mut self, r: &OlhReport) {
        self.pending.push(*r);
        self.n += 1;
        if self.pending.len() >= PENDING {
            self.flush();
        }
    }
    fn add_batch(&mut self, reports: &[OlhReport]) -> Result<()> {
        for (i, r) in reports.iter().enumerate() {
            self.validate(r).map_err(|e| at_index(e, i))?;
        }
        let mut prepared = self.prepared(&self.pending);
        prepared.extend(reports.iter().map(|r| Prepared::new(r, self.oracle.g)));
        accumulate_domain(&prepared, &mut self.counts);
        self.pending.clear();
        self.n += reports.len() as u64;
        Ok(())
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("olh parameters", &self.oracle, &other.oracle)?;
        self.counts.iter_mut().zip(&other.counts).for_each(|(a, b)| *a += b);
        self.pending.extend_from_slice(&other.pending);
        self.n += other.n;
        if self.pending.len() >= PENDING {
            self.flush();
        }
        Ok(())
    }
    fn count(&self) -> u64 {
        self.n
    }
    fn estimate(&self) -> FrequencyEstimate {
        let counts = self.support_counts();
        self.oracle.pure_params().estimate_from_counts(self.n, counts.into_iter().map(|c| c as f64))
    }
}

impl crate::state::SaveState for OlhAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n);
        w.u64s(&self.counts);
        w.len(self.pending.len());
        for p in &self.pending {
            w.u64(p.seed);
            w.u64(u64::from(p.y));
        }
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.n += r.u64("olh n")?;
        r.add_u64s("olh counts", &mut self.counts)?;
        let pending = r.len_any("olh pending reports", 16)?;
        for _ in 0..pending {
            let seed = r.u64("olh pending seed")?;
            let y = r.u64("olh pending value")?;
            if y >= u64::from(self.oracle.g) {
                return Err(Error::report("olh pending value", y, format!("a hash value below g = {}", self.oracle.g)));
            }
            self.pending.push(OlhReport { seed, y: y as u32 });
        }
        if self.pending.len() >= PENDING {
            self.flush();
        }
        Ok(())
    }
}

impl super::registry::Registered for Olh {
    const ADAPTIVE: bool = true;
    fn build(_: crate::kinds::OracleKind, epsilon: f64, d: usize, _: &super::registry::Params<'_>) -> Result<Self> {
        Self::new(epsilon, d)
    }
    fn output_probability(&self, x: usize, r: &OlhReport) -> f64 {
        Olh::output_probability(self, x, r)
    }
    /// The aggregator's batch path (it validates again, cheaply).
    fn add_validated<'a>(agg: &mut Self::Aggregator, reports: impl Iterator<Item = &'a OlhReport>) -> Result<()> {
        let inner: Vec<OlhReport> = reports.copied().collect();
        agg.add_batch(&inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::fast_rng;
    use rand::RngExt;

    /// `decode_fast` accepts exactly the byte strings `wire::decode` accepts, with the same
    /// report: encodings of random and edge reports, then each truncated, extended, with a
    /// byte changed, and hand-made non-canonical and overlong varints.
    #[test]
    fn the_fast_decode_agrees_with_the_wire_decode() {
        let mut rng = fast_rng(7);
        let edge = [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, 1 << 63, u64::MAX - 1, u64::MAX];
        let ys = [0, 1, 127, 128, 1 << 28, u32::MAX];
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for i in 0..2_000 {
            let seed = if i < edge.len() { edge[i] } else { rng.random::<u64>() >> rng.random_range(0..64) };
            let r = OlhReport { seed, y: ys[i % ys.len()].min(rng.random::<u32>() >> rng.random_range(0..32)) };
            let bytes = crate::wire::encode(&r);
            assert_eq!(OlhReport::decode_fast(&bytes), Some(r));
            inputs.extend(crate::wire::mutations(&bytes, &mut rng));
        }
        // 0 as two bytes (accepted by both), an 11-byte seed, a 10th seed byte of 2, y's 5th byte over 0x0F.
        let header = [crate::wire::WIRE_VERSION, OlhReport::KIND.byte];
        let hand_made = [
            &[0x80, 0x00, 0x03][..],
            &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x00],
            &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02, 0x00],
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x00],
            &[0x05, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F],
            &[0x05, 0xFF, 0xFF, 0xFF, 0xFF, 0x10],
            &[0x05, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
        ];
        for (payload, ok) in hand_made.into_iter().zip([true, true, false, false, true, false, false]) {
            let bytes = [&header[..], payload].concat();
            assert_eq!(crate::wire::decode::<OlhReport>(&bytes).is_ok(), ok, "{payload:02x?}");
            inputs.push(bytes);
        }
        for bytes in &inputs {
            let slow = crate::wire::decode::<OlhReport>(bytes).ok();
            assert_eq!(OlhReport::decode_fast(bytes), slow, "{bytes:02x?}");
        }
    }

    #[test]
    fn optimal_g_follows_the_integer_rule() {
        for &(eps, g) in &[(0.1, 2u32), (0.5, 3), (1.0, 4), (2.0, 8), (3.0, 21), (4.0, 56), (12.0, MAX_G)] {
            assert_eq!(optimal_g(Epsilon::new(eps).unwrap()), g, "eps = {eps}");
        }
        // Brute force: the integer g minimising Var* = (e − 1 + g)²/((e − 1)²(g − 1)).
        for i in 1..=60 {
            let eps = Epsilon::new(i as f64 * 0.1).unwrap();
            let e = eps.exp();
            let var = |g: f64| (e - 1.0 + g).powi(2) / ((e - 1.0).powi(2) * (g - 1.0));
            let best = (2..2000).min_by(|&a, &b| var(a as f64).total_cmp(&var(b as f64))).unwrap();
            let g = optimal_g(eps);
            assert!(var(g as f64) <= var(best as f64) * (1.0 + 1e-12), "eps = {}, g = {g}, best = {best}", eps.value());
        }
    }

    #[test]
    fn intervals_partition_the_hash_range() {
        for &g in &[2u32, 3, 7, 56, 1000, MAX_G] {
            let mut next = 0u64;
            for y in 0..g {
                let (lo, w) = interval(y, g);
                assert_eq!(lo as u64, next);
                // endpoints map to y, neighbours do not
                let f = |t: u64| ((t * g as u64) >> 32) as u32;
                assert_eq!(f(lo as u64), y);
                assert_eq!(f(lo as u64 + w as u64 - 1), y);
                if lo > 0 {
                    assert_eq!(f(lo as u64 - 1), y - 1);
                }
                next = lo as u64 + w as u64;
            }
            assert_eq!(next, 1 << 32, "g = {g}");
        }
    }

    #[test]
    fn kernels_equal_direct_hashing() {
        let mut rng = fast_rng(301);
        for &(eps, d) in &[(1.0, 37usize), (3.0, 4096 + 19), (0.3, 2)] {
            let o = Olh::new(eps, d).unwrap();
            let reports: Vec<_> = (0..300).map(|i| o.randomize_unchecked(i % d, &mut rng)).collect();
            let naive: Vec<u64> =
                (0..d).map(|v| reports.iter().filter(|r| o.hash(r.seed, v as u64) == r.y).count() as u64).collect();
            let mut a = o.aggregator();
            a.add_batch(&reports[..100]).unwrap();
            reports[100..].iter().for_each(|r| a.add(r).unwrap());
            assert_eq!(a.support_counts(), naive, "eps = {eps}, d = {d}");
            let cands: Vec<u64> = (0..d as u64).collect();
            assert_eq!(o.support_counts_for(&reports, &cands).unwrap(), naive);
            let big = [u64::MAX, 1 << 40, 12_345_678_901];
            let direct: Vec<u64> =
                big.iter().map(|&c| reports.iter().filter(|r| o.hash(r.seed, c) == r.y).count() as u64).collect();
            assert_eq!(o.support_counts_for(&reports, &big).unwrap(), direct);
        }
    }

    #[test]
    fn bad_reports_are_named() {
        let o = Olh::new(1.0, 10).unwrap();
        assert_eq!(o.g(), 4);
        let e = o.aggregator().validate(&OlhReport { seed: 1, y: 4 }).unwrap_err().to_string();
        assert!(e.contains("y is 4") && e.contains("[0, 4)"), "{e}");
        let e = o.support_counts_for(&[OlhReport { seed: 1, y: 0 }, OlhReport { seed: 1, y: 9 }], &[1]).unwrap_err();
        assert!(e.to_string().contains("report 1: y is 9"), "{e}");
        assert!(Olh::with_g(1.0, 10, 1).is_err() && Olh::with_g(1.0, 10, MAX_G + 1).is_err());
    }

    /// The batch kernel (both builds): y = H_seed(x) with probability p, and otherwise every
    /// other hash value equally likely (offset (y − h − 1) mod g over 8 bins, chi-square, 7 dof:
    /// P[χ² > 33.5] ≈ 2.4e-5); z = 4.42 for the keep share. g = 65027 makes 2³² mod (g − 1) =
    /// 65022: the Lemire redraw path runs (about 1.5e-5 of the draws).
    #[test]
    fn batch_keeps_with_p_and_spreads_the_rest_uniformly() {
        for (eps, g) in [(1.0, 0u32), (2.0, 0), (3.0, 65_027)] {
            let o = if g == 0 { Olh::new(eps, 1000).unwrap() } else { Olh::with_g(eps, 1000, g).unwrap() };
            let g = o.g();
            let n = 200_003;
            let vs: Vec<usize> = (0..n).map(|i| (i * 7919) % 1000).collect();
            let mut out = Vec::new();
            o.randomize_batch(&vs, &mut fast_rng(eps as u64), &mut out).unwrap();
            assert_eq!(out.len(), n);
            let (mut kept, mut bins) = (0u64, [0u64; 8]);
            for (r, &x) in out.iter().zip(&vs) {
                assert!(r.y < g);
                let h = o.hash(r.seed, x as u64);
                if r.y == h {
                    kept += 1;
                } else {
                    let off = (r.y + g - h - 1) % g; // in [0, g − 1)
                    bins[(off as u64 * 8 / (g as u64 - 1)) as usize] += 1;
                }
            }
            // P[y = h] = p (kept) + 0 (an other value never equals h).
            let p = o.p();
            let z = (kept as f64 - n as f64 * p) / (n as f64 * p * (1.0 - p)).sqrt();
            assert!(z.abs() < 4.42, "eps {eps}, g {g}: kept {kept} of {n}, z {z}");
            let rest: u64 = bins.iter().sum();
            // Expected share of each bin: its number of offsets / (g − 1).
            let chi2: f64 = (0..8u64)
                .map(|b| {
                    let lo = (b * (g as u64 - 1)).div_ceil(8);
                    let hi = ((b + 1) * (g as u64 - 1)).div_ceil(8);
                    let e = rest as f64 * (hi - lo) as f64 / (g as u64 - 1) as f64;
                    (bins[b as usize] as f64 - e).powi(2) / e.max(1e-9)
                })
                .sum();
            assert!(chi2 < 33.5, "eps {eps}, g {g}: chi2 {chi2}, bins {bins:?}");
        }
    }

    #[test]
    fn batch_builds_agree_and_bad_input_appends_nothing() {
        let o = Olh::new(1.0, 1000).unwrap();
        let vs: Vec<usize> = (0..1000).map(|i| (i * 7919) % 1000).collect();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        o.randomize_batch(&vs, &mut fast_rng(3), &mut a).unwrap();
        assert!(o.batch_kernel(&vs, &mut fast_rng(3), &mut b));
        assert_eq!(a, b, "the AVX2 and portable builds give the same reports");
        let mut bad = vs.clone();
        bad[123] = 5000;
        let e = o.randomize_batch(&bad, &mut fast_rng(3), &mut a).unwrap_err();
        assert!(e.to_string().contains("category 123"), "{e}");
        assert_eq!(a.len(), 1000);
    }
}
