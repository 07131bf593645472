//! Numeric mean estimation on [-1, 1]: one value per user, one real (or one bit) per report.
//!
//! Every mechanism here has a per-report variance of the form `a·t² + b` (t the user's value),
//! which [`NumericMechanism::variance_coefficients`] exposes. The aggregator uses it to give a
//! plug-in standard error: E\[Y²] = (1 + a)·t² + b, so Σt² is estimated without bias from ΣY²
//! when 1 + a > 0 (and bounded by the mean's square otherwise).
//!
//! Real-valued outputs travel as fixed-point integers after unbiased randomized rounding on the
//! grid [`GRID_STEP`]·ℤ (post-processing: keeps ε-LDP and unbiasedness, hides float low bits);
//! the rounding variance (≤ step²/4, ≈ step²/6 on average) is included in `b` as step²/4 — an
//! upper bound, smaller than 10⁻¹³.
//!
//! | name | type | report | one-report variance |
//! |---|---|---|---|
//! | `laplace` | [`Laplace`] | `Fixed` | 8/ε² |
//! | `duchi` | [`Duchi`] | `Sign` | C² − t², C = (e^ε+1)/(e^ε−1) |
//! | `pm` | [`Piecewise`] | `Fixed` | t²/(e^{ε/2}−1) + (e^{ε/2}+3)/(3(e^{ε/2}−1)²) |
//! | `hm` | [`Hybrid`] | `Sign` or `Fixed` | constant in t for ε > ε* = 0.609352, Duchi's below |
//! | `scdf` | [`Scdf`] | `Fixed` | staircase noise with γ = 1/ε − 1/(e^ε − 1) (Wang et al. eq. 2) |
//! | `staircase` | [`Staircase`] | `Fixed` | staircase noise with the variance-optimal γ |
//!
//! Multidimensional mechanisms (t ∈ [-1, 1]^d) implement [`VectorMechanism`]: [`DuchiMulti`]
//! (`duchi-multi`, Duchi et al. with Harmony's correction) and [`HarmonyBit`] (`harmony-1bit`).
//! [`AnyNumeric`] picks a 1-D mechanism by name at run time.

use crate::aggregate::{Aggregator, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::Estimate;
use crate::params::{Epsilon, MIN_EPSILON, check_unit};
use rand::Rng;
use serde::{Deserialize, Serialize};

pub mod any;
pub mod duchi;
pub mod duchi_multi;
pub mod harmony_bit;
pub mod hybrid;
pub mod laplace;
#[cfg(test)]
mod lattice;
pub mod piecewise;
pub mod staircase;
pub mod vector;

pub use any::{AnyNumeric, NUMERIC_NAMES};
pub use duchi::Duchi;
pub use duchi_multi::{DuchiMulti, DuchiMultiReport};
pub use harmony_bit::{HarmonyBit, HarmonyBitReport};
pub use hybrid::{EPSILON_STAR, Hybrid};
pub use laplace::Laplace;
pub use piecewise::Piecewise;
pub use staircase::{Scdf, Staircase, StaircaseNoise};
pub use vector::{VectorMeanAggregator, VectorMechanism};

/// The fixed-point grid of real-valued reports: 2⁻²⁰ ≈ 9.5·10⁻⁷.
pub const GRID_STEP: f64 = 1.0 / (1u64 << 20) as f64;
/// Variance added by randomized rounding to the grid (upper bound step²/4).
pub const GRID_VARIANCE: f64 = GRID_STEP * GRID_STEP / 4.0;

/// The largest magnitude of any fixed-point report, 2⁴² (2⁶² grid units, so an `i64` never
/// saturates): a sanity cap above every mechanism's own bound (PM's C ≤ 2001 and the
/// unbounded mechanisms' [`noise_bound`] ≤ 42 003 over the accepted ε range).
pub const FIXED_BOUND: f64 = (1u64 << 42) as f64;

/// The smallest ε of the mechanisms with fixed-point reports: the global [`MIN_EPSILON`] (kept
/// for compatibility; every mechanism accepts the same range, see [`Epsilon`]).
pub const MIN_FIXED_EPSILON: f64 = MIN_EPSILON;

/// Validates ε for a mechanism with fixed-point reports: [`Epsilon::new`] (the global range).
pub fn check_fixed_epsilon(eps: f64, _mechanism: &str) -> Result<Epsilon> {
    Epsilon::new(eps)
}

/// The tail cut of the unbounded mechanisms, in noise scales: P(|Lap(λ)| > 42λ) = e⁻⁴²
/// ≈ 5.7·10⁻¹⁹ < 2⁻⁶⁰ (and P(G > 42/ε) ≤ e⁻⁴² for the staircase's geometric step count).
pub const TAIL_CUT: f64 = 42.0;

/// The support bound B(ε) = 3 + 84/ε of Laplace, SCDF and staircase reports (42 003 at
/// ε = [`MIN_EPSILON`]).
///
/// # Truncation
/// These mechanisms add unbounded noise; their samplers clamp t + noise to [−B, B] before
/// rounding, and their decoders refuse any report beyond ±B (one grid unit of slack for the
/// rounding), so an accumulator of reports is bounded (see `NumSums` in `strategy/aggregate.rs`).
///
/// * *Privacy*: clamping is post-processing of the exactly ε-LDP output: ε-LDP is unchanged.
/// * *Probability*: the clamp acts only when the noise exceeds B − 1 ≥ 2 + 84/ε in magnitude:
///   for Laplace (λ = 2/ε) with probability e^{−(B − 1)/λ} < e⁻⁴² ≈ 5.7·10⁻¹⁹ (< 2⁻⁶⁰); for the
///   staircase noise Δ(G + V) (Δ = 2, V ∈ [0, 1)) only if G > 42/ε, probability
///   e^{−ε(⌊42/ε⌋ + 1)} ≤ e⁻⁴².
/// * *Bias*: |E[clamped] − t| ≤ E[(|noise| − (B − 1))⁺], at most (λ/2)·e⁻⁴² = e⁻⁴²/ε for
///   Laplace and 2e⁻⁴²/(1 − e^{−ε}) for the staircase noise: below 6·10⁻¹⁶ (on [-1, 1]) for
///   every accepted ε, against a one-report standard deviation of at least 0.001 — ignored by
///   the closed forms, like the (smaller still) change of the variance.
pub fn noise_bound(eps: f64) -> f64 {
    3.0 + 2.0 * TAIL_CUT / eps
}

/// Checks every value of a batch against [-1, 1]; the error names the first bad index. The
/// message is only formatted on failure (no allocation on the happy path).
pub fn check_unit_batch(ts: &[f64]) -> Result<()> {
    if ts.iter().all(|t| (-1.0..=1.0).contains(t)) {
        return Ok(());
    }
    for (i, &t) in ts.iter().enumerate() {
        check_unit(&format!("value {i}"), t)?;
    }
    Ok(())
}

/// One value's result inside a batch kernel ([`batch_kernel`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lane {
    /// Grid units of a `Fixed` report, or 0 / 1 for a `Sign` report.
    pub units: i64,
    /// A `Sign` report (else `Fixed`).
    pub sign: bool,
    /// False if the fast path did not finish this value (a rare case: the `fix` function redoes
    /// it, scalar).
    pub done: bool,
}

impl Lane {
    #[inline(always)]
    fn report(self) -> NumericReport {
        if self.sign { NumericReport::Sign(self.units != 0) } else { NumericReport::Fixed(self.units) }
    }
}

/// Where a numeric batch kernel writes its reports: `Vec<NumericReport>`, or [`Units`] (grid
/// units only, for mechanisms whose reports are all `Fixed`).
pub(crate) trait LaneSink {
    /// Room for n more reports.
    fn reserve(&mut self, n: usize);
    /// The number of reports held (to truncate back to on a bad batch).
    fn len(&self) -> usize;
    /// Drops the reports after the first `len`.
    fn truncate(&mut self, len: usize);
    /// Appends one chunk: report i is `Sign(units[i] != 0)` if `sign[i]`, else `Fixed(units[i])`.
    fn push_chunk(&mut self, units: &[i64], sign: &[bool]);
    /// Appends `Fixed(u)` for every u of `units` (straight into the output: no staging copy).
    fn extend_units(&mut self, units: impl Iterator<Item = i64>);
    /// Whether some report of the `len` from index `start` is `Fixed(`[`NOT_DONE`]`)`.
    fn any_not_done(&self, start: usize, len: usize) -> bool;
    /// The grid units of report `index` (0 if it is not `Fixed`).
    fn unit(&self, index: usize) -> i64;
    /// Replaces report `index` with `Fixed(units)`.
    fn set_unit(&mut self, index: usize, units: i64);
}

impl LaneSink for Vec<NumericReport> {
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n)
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn truncate(&mut self, len: usize) {
        Vec::truncate(self, len)
    }
    #[inline(always)]
    fn push_chunk(&mut self, units: &[i64], sign: &[bool]) {
        self.extend(units.iter().zip(sign).map(|(&u, &s)| Lane { units: u, sign: s, done: true }.report()));
    }
    #[inline(always)]
    fn extend_units(&mut self, units: impl Iterator<Item = i64>) {
        self.extend(units.map(NumericReport::Fixed));
    }
    fn any_not_done(&self, start: usize, len: usize) -> bool {
        self[start..start + len].iter().fold(false, |any, r| any | (*r == NumericReport::Fixed(NOT_DONE)))
    }
    fn unit(&self, index: usize) -> i64 {
        match self[index] {
            NumericReport::Fixed(u) => u,
            NumericReport::Sign(_) => 0,
        }
    }
    fn set_unit(&mut self, index: usize, units: i64) {
        self[index] = NumericReport::Fixed(units);
    }
}

/// A [`LaneSink`] of grid units: report i is `Fixed(units[i])` (the `sign` flags must be false:
/// only for mechanisms whose reports are all `Fixed`).
pub(crate) struct Units<'a>(pub &'a mut Vec<i64>);

impl LaneSink for Units<'_> {
    fn reserve(&mut self, n: usize) {
        self.0.reserve(n)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn truncate(&mut self, len: usize) {
        self.0.truncate(len)
    }
    #[inline(always)]
    fn push_chunk(&mut self, units: &[i64], sign: &[bool]) {
        debug_assert!(!sign.iter().any(|&s| s));
        self.0.extend_from_slice(units);
    }
    #[inline(always)]
    fn extend_units(&mut self, units: impl Iterator<Item = i64>) {
        // Written straight into the spare capacity by a loop of our own, always inlined, so
        // the caller's AVX2 build vectorises it (`Vec::extend` is not reliably inlined).
        let v = &mut *self.0;
        let (len, want) = (v.len(), units.size_hint().0);
        v.reserve(want);
        let mut n = 0;
        for (slot, u) in v.spare_capacity_mut().iter_mut().zip(units) {
            slot.write(u);
            n += 1;
        }
        // SAFETY: the loop initialised the first n slots of the spare capacity (`zip` stops at
        // its end), so elements len..len + n are initialised and within the capacity.
        #[allow(unsafe_code)]
        unsafe {
            v.set_len(len + n)
        };
        debug_assert!(n >= want, "room was reserved for every unit");
    }
    #[inline(always)]
    fn any_not_done(&self, start: usize, len: usize) -> bool {
        // A branch-free fold (vectorised), not `any`'s early exit.
        self.0[start..start + len].iter().fold(false, |any, &u| any | (u == NOT_DONE))
    }
    fn unit(&self, index: usize) -> i64 {
        self.0[index]
    }
    fn set_unit(&mut self, index: usize, units: i64) {
        self.0[index] = units;
    }
}

/// Adds grid-unit reports (as written by a `randomize_units` batch API) to `agg`, checking each
/// against ±`bound` like `decode_fixed_bounded` (all or nothing; the error names the index).
pub(crate) fn add_units<M: NumericMechanism>(
    agg: &mut MeanAggregator<M>,
    units: &[i64],
    bound: f64,
    mechanism: &str,
) -> Result<()> {
    let limit = ((bound / GRID_STEP).ceil() + 1.0).min(i64::MAX as f64) as u64;
    if let Some(i) = units.iter().position(|u| u.unsigned_abs() > limit) {
        let e = decode_fixed_bounded(&NumericReport::Fixed(units[i]), bound, mechanism).unwrap_err();
        return Err(crate::aggregate::at_index(e, i));
    }
    let (mut sum, mut sum_sq) = (0.0, 0.0);
    for &u in units {
        let y = u as f64 * GRID_STEP;
        sum += y;
        sum_sq += y * y;
    }
    agg.add_sums(units.len() as u64, sum, sum_sq)
}

/// Values per step of a numeric batch kernel.
const CHUNK: usize = 64;

/// The shared driver of the numeric batch kernels. Per chunk of k ≤ 64 values it draws `W`
/// random words per value in one bulk call (word j of value i at `words[j·k + i]`: contiguous
/// per j, so the loop loads them as vectors), runs `lane` on every value in a branch-free loop that
/// LLVM vectorises (the callers compile it a second time with AVX2), then redoes the rare values
/// whose `done` is false with `fix` (same value and words, plus fresh words from `rng` if it
/// needs them), and appends the reports. Returns false if some value is NaN or outside [-1, 1]
/// (the reports are then garbage: the caller truncates them away).
#[inline(always)]
pub(crate) fn batch_kernel<R: Rng + ?Sized, S: LaneSink, const W: usize>(
    ts: &[f64],
    rng: &mut R,
    out: &mut S,
    lane: impl Fn(f64, [u64; W]) -> Lane,
    mut fix: impl FnMut(f64, [u64; W], &mut R) -> Lane,
) -> bool {
    out.reserve(ts.len());
    let mut ok = true;
    let mut words = [0u64; 3 * CHUNK];
    // Struct of arrays (vectorises better than an array of `Lane`s).
    let mut units = [0i64; CHUNK];
    let mut sign = [false; CHUNK];
    let mut done = [true; CHUNK];
    for chunk in ts.chunks(CHUNK) {
        let k = chunk.len();
        let words = &mut words[..W * CHUNK];
        crate::sampling::fill_words(rng, &mut words[..W * k]);
        let mut good = true;
        let mut all_done = true;
        macro_rules! one {
            ($i:expr, $t:expr) => {{
                let (i, t) = ($i, $t);
                good &= (-1.0..=1.0).contains(&t);
                let l = lane(t, std::array::from_fn(|j| words[j * k + i]));
                (units[i], sign[i], done[i]) = (l.units, l.sign, l.done);
                all_done &= l.done;
            }};
        }
        if let Ok(c) = <&[f64; CHUNK]>::try_from(chunk) {
            for (i, &t) in c.iter().enumerate() {
                one!(i, t);
            }
        } else {
            for (i, &t) in chunk.iter().enumerate() {
                one!(i, t);
            }
        }
        ok &= good;
        if !all_done {
            for (i, &t) in chunk.iter().enumerate() {
                if !done[i] {
                    let l = fix(t, std::array::from_fn(|j| words[j * k + i]), rng);
                    (units[i], sign[i]) = (l.units, l.sign);
                }
            }
        }
        out.push_chunk(&units[..k], &sign[..k]);
    }
    ok
}

/// Values per chunk of [`chunk_kernel`]: 128 words (one whole [`crate::sampling::FastRng`]
/// block, refilled in place) and 128 32-bit integers (fastest of 64, 128, 256, 512 for Laplace).
pub(crate) const BIG_CHUNK: usize = 128;

/// A numeric batch driver for kernels that work on a whole chunk at once (in several
/// vectorised passes, each with a short dependency chain, so the CPU overlaps many values):
/// per chunk of k ≤ [`BIG_CHUNK`] values it draws one random word and one random 32-bit
/// integer per value in bulk and calls `chunk(ts, words, halves, out)`, which appends one
/// `Fixed` report per value to `out` (through [`LaneSink::extend_units`]), `Fixed(`[`NOT_DONE`]`)`
/// for the rare values it leaves to `fix(t, word, half, rng)` (same value, word and integer,
/// plus fresh words from `rng` if it needs them), and returns whether some value was NaN or
/// outside [-1, 1]. Returns false in that case (the reports are then garbage: the caller
/// truncates them away).
#[inline(always)]
pub(crate) fn chunk_kernel<R: Rng + ?Sized, S: LaneSink>(
    ts: &[f64],
    rng: &mut R,
    out: &mut S,
    mut chunk: impl FnMut(&[f64], &[u64], &[u32], &mut S) -> bool,
    mut fix: impl FnMut(f64, u64, u32, &mut R) -> i64,
) -> bool {
    out.reserve(ts.len());
    let mut bad = false;
    // Aligned for whole-block refills straight into the buffers (`FastRng::try_fill_bytes`).
    #[repr(C, align(64))]
    struct Aligned<T>(T);
    let mut words = Aligned([0u64; BIG_CHUNK]);
    let mut halves = Aligned([0u32; BIG_CHUNK]);
    let (words, halves) = (&mut words.0, &mut halves.0);
    for ts in ts.chunks(BIG_CHUNK) {
        let k = ts.len();
        let (words, halves) = (&mut words[..k], &mut halves[..k]);
        crate::sampling::fill_words(rng, words);
        crate::sampling::fill_u32s(rng, halves);
        let start = out.len();
        bad |= chunk(ts, words, halves, out);
        debug_assert_eq!(out.len(), start + k);
        // A vectorised fold over the chunk; the rare chunk with a value left is scanned.
        if out.any_not_done(start, k) {
            for i in 0..k {
                if out.unit(start + i) == NOT_DONE {
                    out.set_unit(start + i, fix(ts[i], words[i], halves[i], rng));
                }
            }
        }
    }
    !bad
}

/// The grid units a [`chunk_kernel`] pass writes for a value it leaves to `fix` (never a valid
/// report: reports are within ±2⁶² + 1 units).
pub(crate) const NOT_DONE: i64 = i64::MIN;

/// Gives the mechanism type `$T` the inherent methods `batch_portable` (the [`batch_kernel`]
/// with `W` = `$W` words per value and the closures `$lane(&self)`, `$fix(&self)`),
/// `batch_avx2` (the same compiled with AVX2, BMI2, POPCNT and FMA) and `batch`
/// (`randomize_batch`'s body: the AVX2 build when the CPU has it, all or nothing on a bad
/// value). With `@dispatch $T` only the last two, around a `batch_portable` of the type's own.
macro_rules! numeric_batch {
    ($T:ty, $W:literal, $lane:expr, $fix:expr) => {
        impl $T {
            #[inline(always)]
            pub(crate) fn batch_portable<R: Rng + ?Sized, S: crate::numeric::LaneSink>(
                &self,
                ts: &[f64],
                rng: &mut R,
                out: &mut S,
            ) -> bool {
                crate::numeric::batch_kernel::<R, S, $W>(ts, rng, out, $lane(self), $fix(self))
            }
        }
        crate::numeric::numeric_batch!(@dispatch $T);
    };
    (@dispatch $T:ty) => {
        impl $T {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,bmi2,popcnt,fma")]
            fn batch_avx2<R: Rng + ?Sized, S: crate::numeric::LaneSink>(
                &self,
                ts: &[f64],
                rng: &mut R,
                out: &mut S,
            ) -> bool {
                self.batch_portable(ts, rng, out)
            }

            fn batch<R: Rng + ?Sized, S: crate::numeric::LaneSink>(
                &self,
                ts: &[f64],
                rng: &mut R,
                out: &mut S,
            ) -> Result<()> {
                let start = out.len();
                let ok =
                    crate::sampling::dispatch_avx2!(self.batch_avx2(ts, rng, out), self.batch_portable(ts, rng, out));
                if !ok {
                    out.truncate(start);
                    crate::numeric::check_unit_batch(ts)?;
                }
                Ok(())
            }
        }
    };
}
pub(crate) use numeric_batch;

/// One numeric report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NumericReport {
    /// One bit: the report's value is `+scale` (true) or `-scale` (false), `scale` a public
    /// constant of the mechanism (Duchi, HM's Duchi branch).
    Sign(bool),
    /// A fixed-point real: the value is `units · GRID_STEP`.
    Fixed(i64),
}

impl NumericReport {
    /// A real value rounded (unbiased, randomized) to the grid.
    #[inline]
    pub fn fixed<R: Rng + ?Sized>(rng: &mut R, y: f64) -> Self {
        NumericReport::Fixed(crate::sampling::randomized_round_fast(rng, y, GRID_STEP))
    }
}

/// A mechanism for one value in [-1, 1] whose reports average to an unbiased mean.
pub trait NumericMechanism: std::fmt::Debug + Clone + PartialEq + Send + Sync {
    /// Name used in the CLI and JSON (`laplace`, `duchi`, `pm`, `hm`, `scdf`, `staircase`).
    fn name(&self) -> &'static str;
    /// The privacy budget.
    fn epsilon(&self) -> Epsilon;
    /// Randomizes t ∈ [-1, 1] (checked by the caller).
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport;
    /// Checks a report and returns its unbiased value.
    fn decode(&self, report: &NumericReport) -> Result<f64>;
    /// (a, b) with Var(one report | t) = a·t² + b, rounding included.
    fn variance_coefficients(&self) -> (f64, f64);

    /// Randomizes t; an error if t is NaN or outside [-1, 1].
    fn randomize<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> Result<NumericReport> {
        check_unit("value", t)?;
        Ok(self.randomize_unchecked(t, rng))
    }
    /// Randomizes a batch into `out` (appended). All or nothing: if any input is NaN or outside
    /// [-1, 1], nothing is appended and the error names the first bad index.
    ///
    /// The range check is fused into the randomizing loop (one pass over the inputs); on error
    /// the reports already written are truncated away, so no report of the batch escapes.
    fn randomize_batch<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<NumericReport>) -> Result<()> {
        let start = out.len();
        let mut ok = true;
        out.reserve(ts.len());
        out.extend(ts.iter().map(|&t| {
            ok &= (-1.0..=1.0).contains(&t);
            self.randomize_unchecked(t, rng)
        }));
        if !ok {
            out.truncate(start);
            check_unit_batch(ts)?;
        }
        Ok(())
    }
    /// Variance of one report when the user's value is t.
    fn variance(&self, t: f64) -> f64 {
        let (a, b) = self.variance_coefficients();
        a * t * t + b
    }
    /// The largest one-report variance over t ∈ [-1, 1] (at t = 0 or |t| = 1).
    fn worst_case_variance(&self) -> f64 {
        let (a, b) = self.variance_coefficients();
        b.max(a + b)
    }
    /// Exact variance of the mean estimate over the given inputs: (1/n²)·Σ Var(t_i).
    fn aggregate_variance(&self, ts: &[f64]) -> f64 {
        let n = ts.len() as f64;
        ts.iter().map(|&t| self.variance(t)).sum::<f64>() / (n * n)
    }
    /// An empty aggregator for this mechanism.
    fn aggregator(&self) -> MeanAggregator<Self> {
        MeanAggregator::new(self.clone())
    }
}

/// Mean aggregator for any [`NumericMechanism`]: count, Σy, Σy².
#[derive(Debug, Clone, PartialEq)]
pub struct MeanAggregator<M> {
    mechanism: M,
    n: u64,
    sum: f64,
    sum_sq: f64,
}

impl<M: NumericMechanism> MeanAggregator<M> {
    /// An empty aggregator.
    pub fn new(mechanism: M) -> Self {
        MeanAggregator { mechanism, n: 0, sum: 0.0, sum_sq: 0.0 }
    }
    /// The mechanism whose reports this aggregates.
    pub fn mechanism(&self) -> &M {
        &self.mechanism
    }
}

/// Plug-in variance of a mean of n unbiased reports with one-report variance a·t² + b, from the
/// reports' sum and sum of squares. Shared by every numeric aggregator.
pub fn plug_in_mean_variance(n: f64, sum: f64, sum_sq: f64, a: f64, b: f64) -> f64 {
    if n < 1.0 {
        return f64::INFINITY;
    }
    let mean = sum / n;
    // Σt² estimate: unbiased from ΣY² when 1 + a is not ~0, else n·mean² (a lower bound on Σt²,
    // which makes the variance an upper bound when a < 0).
    let sum_t2 = if 1.0 + a > 1e-9 { ((sum_sq - n * b) / (1.0 + a)).clamp(0.0, n) } else { (n * mean * mean).min(n) };
    ((a * sum_t2 + n * b) / (n * n)).max(0.0)
}

impl<M: NumericMechanism> MeanAggregator<M> {
    /// Adds `n` reports given only through their sum and sum of squares (a packed batch API such
    /// as [`Duchi::add_signs`], which has checked the reports). Errors: a sum not finite.
    pub(crate) fn add_sums(&mut self, n: u64, sum: f64, sum_sq: f64) -> Result<()> {
        if !(sum.is_finite() && sum_sq.is_finite()) {
            return Err(Error::report("sum", sum, "finite sums"));
        }
        self.n += n;
        self.sum += sum;
        self.sum_sq += sum_sq;
        Ok(())
    }
}

impl<M: NumericMechanism> Aggregator for MeanAggregator<M> {
    type Report = NumericReport;
    type Output = Estimate;

    fn validate(&self, report: &NumericReport) -> Result<()> {
        self.mechanism.decode(report).map(|_| ())
    }
    fn add_unchecked(&mut self, report: &NumericReport) {
        let y = self.mechanism.decode(report).unwrap_or(0.0);
        self.n += 1;
        self.sum += y;
        self.sum_sq += y * y;
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("numeric mechanism", &self.mechanism, &other.mechanism)?;
        self.n += other.n;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        Ok(())
    }
    fn count(&self) -> u64 {
        self.n
    }
    fn estimate(&self) -> Estimate {
        let n = self.n as f64;
        let (a, b) = self.mechanism.variance_coefficients();
        let mean = if self.n == 0 { 0.0 } else { self.sum / n };
        Estimate::from_variance(mean, plug_in_mean_variance(n, self.sum, self.sum_sq, a, b))
    }
}

/// Whether `units` grid steps lie beyond ±`bound` with one unit of slack (randomized rounding
/// may round the bound itself up): `|units| > ⌈bound / GRID_STEP⌉ + 1`, compared exactly for
/// every i64 (the limit capped at i64::MAX).
#[inline]
fn beyond_bound(units: i64, bound: f64) -> bool {
    let (ua, b) = (units.unsigned_abs(), bound / GRID_STEP);
    // For 2 ≤ |u| ≤ 2^52 and b ≥ 0 (a bound), as integers: |u| > ⌈b⌉ + 1 ⟺ |u| − 2 ≥ ⌈b⌉ ⟺
    // |u| − 2 ≥ b, with |u| − 2 exact as a double: one conversion and one compare, no ceil (a
    // libm call on baseline x86-64) on a report's validation path. The rest the long way.
    if (2..=1 << 52).contains(&ua) && b >= 0.0 {
        return (ua - 2) as i64 as f64 >= b;
    }
    ua > (b.ceil() + 1.0).min(i64::MAX as f64) as u64
}

/// Rejects a `Fixed` report outside ±bound (used by every bounded real-valued mechanism).
pub fn decode_fixed_bounded(report: &NumericReport, bound: f64, mechanism: &str) -> Result<f64> {
    match *report {
        NumericReport::Fixed(u) => {
            let y = u as f64 * GRID_STEP;
            // Compared in grid units (exact for every i64), with one unit of slack.
            if beyond_bound(u, bound) {
                return Err(Error::report("value", y, format!("a {mechanism} output in [-{bound}, {bound}]")));
            }
            Ok(y)
        }
        NumericReport::Sign(_) => Err(Error::report("kind", "Sign", format!("a Fixed report for {mechanism}"))),
    }
}

impl<M: NumericMechanism> crate::state::SaveState for MeanAggregator<M> {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n);
        w.f64(self.sum);
        w.f64(self.sum_sq);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.n += r.u64("mean n")?;
        self.sum += r.f64("mean sum")?;
        self.sum_sq += r.f64("mean sum of squares")?;
        Ok(())
    }
}

#[cfg(test)]
mod batch_tests {
    //! The vectorised batch kernels of Laplace, PM and HM: the same distribution as the scalar
    //! path (moments at z = 4.42, two-sided false-failure rate 1e-5 per statistic; Laplace's
    //! CDF by chi-square), and the AVX2 and portable builds give the same reports.
    use super::*;
    use crate::estimate::Moments;
    use crate::sampling::fast_rng;

    fn moments<M: NumericMechanism>(m: &M, t: f64, n: usize, seed: u64) -> (Moments, Vec<NumericReport>) {
        let mut out = Vec::new();
        m.randomize_batch(&vec![t; n], &mut fast_rng(seed), &mut out).unwrap();
        assert_eq!(out.len(), n);
        let mut mo = Moments::default();
        out.iter().for_each(|r| mo.push(m.decode(r).unwrap()));
        (mo, out)
    }

    fn check<M: NumericMechanism>(m: &M) {
        for (k, &t) in [-1.0, -0.3, 0.0, 0.8, 1.0].iter().enumerate() {
            let (mo, _) = moments(m, t, 100_003, 40 + k as u64);
            let var = m.variance(t);
            let (zm, zv) = (mo.z_mean(t, var), mo.z_variance(var));
            assert!(
                zm.abs() < 4.42 && zv.abs() < 4.42,
                "{} eps {}: t {t}: z mean {zm}, z var {zv}",
                m.name(),
                m.epsilon().value()
            );
        }
    }

    #[test]
    fn laplace_batch_moments_and_cdf() {
        for eps in [0.5, 1.0, 4.0] {
            check(&Laplace::new(eps).unwrap());
        }
        // CDF of (y − t)/λ against Laplace(0, 1): 64 equiprobable bins, chi-square with 63 dof
        // (P[χ² > 122] ≈ 1e-5); the far tails (beyond 7.7, past the batch kernel's hot range
        // 11·ln 2 = 7.62: drawn by its cold path) counted apart.
        let m = Laplace::new(1.0).unwrap();
        let n = 400_000;
        let (_, out) = moments(&m, 0.25, n, 3);
        let mut bins = [0u64; 64];
        let mut far = 0u64;
        for r in &out {
            let z = (m.decode(r).unwrap() - 0.25) / m.scale();
            let cdf = if z < 0.0 { 0.5 * z.exp() } else { 1.0 - 0.5 * (-z).exp() };
            bins[((cdf * 64.0) as usize).min(63)] += 1;
            far += (z.abs() > 7.697_117_470_131_05) as u64;
        }
        let e = n as f64 / 64.0;
        let chi2: f64 = bins.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        assert!(chi2 < 122.0, "chi2 {chi2}");
        let p_far = (-7.697_117_470_131_05f64).exp();
        let z = (far as f64 - n as f64 * p_far) / (n as f64 * p_far).sqrt();
        assert!(z.abs() < 4.42, "far tail {far}");
    }

    #[test]
    fn pm_batch_moments() {
        for eps in [0.5, 1.0, 4.0] {
            check(&Piecewise::new(eps).unwrap());
        }
        // The smallest ε (C ≈ 4000, values up to ±C: beyond the scalar rounding's fast range).
        check(&Piecewise::new(crate::params::MIN_EPSILON).unwrap());
    }

    #[test]
    fn hm_batch_moments_and_branch_share() {
        for eps in [0.5, 1.0, 4.0] {
            let m = Hybrid::new(eps).unwrap();
            check(&m);
            let n = 100_003;
            let (_, out) = moments(&m, 0.4, n, 9);
            let signs = out.iter().filter(|r| matches!(r, NumericReport::Sign(_))).count() as f64;
            let p = 1.0 - m.alpha();
            let sd = (n as f64 * p * (1.0 - p)).sqrt().max(1e-9);
            assert!((signs - n as f64 * p).abs() < 4.42 * sd, "eps {eps}: {signs} Duchi reports of {n}, p {p}");
        }
    }

    #[test]
    fn avx2_and_portable_builds_agree() {
        let mut rng = fast_rng(12);
        let ts: Vec<f64> = (0..10_000).map(|_| 2.0 * crate::sampling::uniform01(&mut rng) - 1.0).collect();
        macro_rules! agree {
            ($m:expr) => {{
                let m = $m;
                let (mut a, mut b) = (Vec::new(), Vec::new());
                m.randomize_batch(&ts, &mut fast_rng(6), &mut a).unwrap();
                assert!(m.batch_portable(&ts, &mut fast_rng(6), &mut b));
                assert_eq!(a, b, "{}", m.name());
                let mut bad = ts.clone();
                bad[500] = f64::NAN;
                let e = m.randomize_batch(&bad, &mut fast_rng(6), &mut a).unwrap_err();
                assert!(e.to_string().contains("500"), "{e}");
                assert_eq!(a.len(), ts.len(), "nothing appended on a bad batch");
            }};
        }
        // Laplace: typical λ, and the largest and smallest accepted.
        agree!(Laplace::new(0.01).unwrap());
        agree!(Laplace::new(1.0).unwrap());
        agree!(Laplace::new(20.0).unwrap());
        agree!(Laplace::new(2e-3).unwrap());
        agree!(Piecewise::new(1.0).unwrap());
        agree!(Hybrid::new(2.0).unwrap());
        agree!(Hybrid::new(0.3).unwrap());
    }
}

#[cfg(test)]
mod bound_tests {
    /// The check as it was written before `beyond_bound`'s fast path.
    fn reference(units: i64, bound: f64) -> bool {
        units.unsigned_abs() > ((bound / super::GRID_STEP).ceil() + 1.0).min(i64::MAX as f64) as u64
    }

    #[test]
    fn beyond_bound_equals_the_ceil_formula() {
        let mut bounds = vec![0.0, 1.0, 0.5, 1e-9, 2.0f64.powi(-20), 3.7, 1e3, 1e9, 2.0f64.powi(33), 1e300];
        bounds.extend([f64::INFINITY, f64::NAN, -1.0, -0.0, f64::MIN_POSITIVE]);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            bounds.push((next() % 10_000_000) as f64 / 997.0);
        }
        let mut checked = 0;
        for &bound in &bounds {
            // Around the limit, and units of every magnitude and sign.
            let limit = ((bound / super::GRID_STEP).ceil() + 1.0).min(i64::MAX as f64) as u64;
            let l = limit as i64;
            let mut units: Vec<i64> =
                (-3..=3).flat_map(|d| [l.saturating_add(d), l.saturating_add(d).saturating_neg()]).collect();
            units.extend([0, 1, -1, 2, -2, i64::MAX, i64::MIN, 1 << 52, (1 << 52) + 1, -(1 << 52) - 3]);
            units.extend((0..50).map(|_| (next() >> (next() % 64)) as i64));
            for u in units {
                assert_eq!(super::beyond_bound(u, bound), reference(u, bound), "units {u}, bound {bound:e}");
                checked += 1;
            }
        }
        assert!(checked > 100_000, "{checked}");
    }
}
