//! All sampling primitives in one place. Every mechanism draws its randomness through these.
//!
//! Conventions: `p = 0` and `p = 1` are exact (never / always); uniform integers have no modulo
//! bias (Lemire's method); uniform reals use the top 53 bits of a `u64`.
//!
//! RNGs: client paths use [`secure_rng`] (ChaCha20 seeded from the OS); simulations and tests use
//! [`fast_rng`] ([`FastRng`]: 8 interleaved Xoshiro256++ streams from a `u64` seed).

use rand::Rng;
use rand::SeedableRng;
use rand::rngs::{ChaCha20Rng, SysRng};

pub use crate::fast_rng::FastRng;
use one_word::unit52;
pub use one_word::*;
pub use words::*;

mod one_word;
#[cfg(test)]
mod tests;
mod words;

/// A cryptographically secure RNG seeded by the operating system. Use it on every client path.
///
/// # Panics
/// If the OS entropy source fails (a broken system: randomizing without it is not safe).
pub fn secure_rng() -> ChaCha20Rng {
    ChaCha20Rng::try_from_rng(&mut SysRng).expect("the OS entropy source failed; refusing to randomize without it")
}

/// A fast seeded RNG for simulations and tests (never for real clients).
pub fn fast_rng(seed: u64) -> FastRng {
    FastRng::new(seed)
}

/// Derives an independent stream seed from a base seed and a stream index (SplitMix64 finaliser),
/// so parallel chunks of a simulation are reproducible whatever the thread count.
#[inline]
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(0x632B_E59B_D9B4_E019);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform real in [0, 1) with 53 random bits.
#[inline]
pub fn uniform01<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// [`uniform01`] for a random word `w` already drawn: (w >> 11)·2⁻⁵³, the same value, built
/// without an integer-to-float conversion (AVX2 has none for 64-bit integers, so `as f64` keeps
/// a loop scalar): the top 52 bits through the exponent trick, plus the 53rd bit as 2⁻⁵³ (the
/// sum is exact).
#[inline(always)]
pub fn uniform01_from_word(w: u64) -> f64 {
    let hi = f64::from_bits((w >> 12) | 0x3ff0_0000_0000_0000) - 1.0;
    // 2⁻⁵³ (bits 0x3ca0…) if bit 11 of w is set, else +0.0, without a branch.
    let lo = f64::from_bits(0u64.wrapping_sub((w >> 11) & 1) & 0x3ca0_0000_0000_0000);
    hi + lo
}

/// Uniform real in (0, 1] (never 0: safe under `ln`).
#[inline]
pub fn uniform01_open_low<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    ((rng.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Uniform real in [lo, hi).
#[inline]
pub fn uniform_in<R: Rng + ?Sized>(rng: &mut R, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * uniform01(rng)
}

/// Bernoulli(p): true with probability exactly p for every p ≥ 2^-12 (p·2^64 is then an integer);
/// below that the error is < 2^-64 absolute. `p <= 0` is never, `p >= 1` always.
#[inline]
pub fn bernoulli<R: Rng + ?Sized>(rng: &mut R, p: f64) -> bool {
    if p >= 1.0 {
        return true;
    }
    if p.is_nan() || p <= 0.0 {
        return false;
    }
    // p < 1 so p * 2^64 < 2^64 and the cast is exact for p >= 2^-12.
    let threshold = (p * 18_446_744_073_709_551_616.0) as u64;
    rng.next_u64() < threshold
}

/// A precomputed [`bernoulli`]: the same draws (same exactness, same random words consumed)
/// without recomputing the threshold p·2^64 on every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bernoulli {
    threshold: u64,
    /// 0: never (p ≤ 0 or NaN), 1: compare, 2: always (p ≥ 1).
    mode: u8,
}

impl Bernoulli {
    /// Precomputes Bernoulli(p).
    pub fn new(p: f64) -> Self {
        if p >= 1.0 {
            Bernoulli { threshold: 0, mode: 2 }
        } else if p > 0.0 {
            Bernoulli { threshold: (p * 18_446_744_073_709_551_616.0) as u64, mode: 1 }
        } else {
            // p ≤ 0 or NaN: never.
            Bernoulli { threshold: 0, mode: 0 }
        }
    }
    /// One draw: true with probability p.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> bool {
        match self.mode {
            1 => rng.next_u64() < self.threshold,
            m => m == 2,
        }
    }
    /// The exact probability of `true`: threshold/2^64 (or 0 / 1).
    pub fn probability(&self) -> f64 {
        match self.mode {
            1 => self.threshold as f64 / 18_446_744_073_709_551_616.0,
            m => (m == 2) as u8 as f64,
        }
    }
}

/// True when the CPU has AVX2, BMI2, POPCNT and FMA (run-time detection, cached by std): batch
/// kernels then run a second build of the same Rust code compiled with those features (LLVM
/// vectorises their branch-free loops 4 × 64 bits wide). Every kernel computes the same values
/// on both builds: integer and correctly rounded IEEE operations only — Rust never contracts a
/// multiplication and an addition into an FMA, and an explicit `mul_add` (Laplace's batch
/// kernel) is one correctly rounded operation on every target (the FMA instruction here; the
/// C library's `fma`, exact in software where the hardware has none, in the portable build).
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("popcnt")
            && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Calls `$portable` or, when [`has_avx2`], `$avx2` — a function with
/// `#[target_feature(enable = "avx2,bmi2,popcnt")]` (or `"avx2,bmi2,popcnt,fma"`) whose body is
/// the same `#[inline(always)]` kernel.
macro_rules! dispatch_avx2 {
    ($avx2:expr, $portable:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            if $crate::sampling::has_avx2() {
                // SAFETY: `has_avx2()` checked at run time that this CPU has AVX2, BMI2, POPCNT and
                // FMA, the only features the callee may be compiled with; its body is safe Rust.
                #[allow(unsafe_code)]
                unsafe {
                    $avx2
                }
            } else {
                $portable
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $portable
        }
    }};
}
pub(crate) use dispatch_avx2;

/// The SplitMix64 output function of state `x` (Steele, Lea, Flood 2014): a fixed, public
/// 64-bit mixer. Frequency oracles derive hash parameters and public matrices from it, so its
/// values are part of the wire contract and must never change.
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Splits a positive finite f64 into (m, e) with value = m · 2^e, m < 2^53 an integer.
fn decompose(x: f64) -> (u64, i32) {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    if exp == 0 { (frac, -1074) } else { (frac | (1u64 << 52), exp - 1075) }
}

/// Uniform integer in [0, n) from a first random word `r` already drawn (n ≥ 1), exact: Lemire's
/// multiply; in the rare rejection zone (probability < n/2^64) a fresh [`uniform_below`] draw
/// replaces it, so the result is exactly uniform and branch-predictable on hot loops.
#[inline(always)]
pub fn uniform_below_from<R: Rng + ?Sized>(rng: &mut R, r: u64, n: u64) -> u64 {
    let m = (r as u128) * (n as u128);
    if (m as u64) < n {
        let threshold = n.wrapping_neg() % n;
        if (m as u64) < threshold {
            return uniform_below(rng, n);
        }
    }
    (m >> 64) as u64
}

impl Bernoulli {
    /// The draw for a random word `r` already drawn: true with probability p exactly (as
    /// [`Bernoulli::sample`], which consumes one word the same way).
    #[inline(always)]
    pub fn from_word(&self, r: u64) -> bool {
        (r < self.threshold) & (self.mode == 1) | (self.mode == 2)
    }
}

/// Uniform integer in [0, n) without modulo bias (Lemire's nearly divisionless method). n ≥ 1.
#[inline]
pub fn uniform_below<R: Rng + ?Sized>(rng: &mut R, n: u64) -> u64 {
    debug_assert!(n > 0);
    let mut m = (rng.next_u64() as u128) * (n as u128);
    let mut low = m as u64;
    if low < n {
        let threshold = n.wrapping_neg() % n;
        while low < threshold {
            m = (rng.next_u64() as u128) * (n as u128);
            low = m as u64;
        }
    }
    (m >> 64) as u64
}

/// Standard exponential Exp(1) by inversion.
#[inline]
pub fn exp1<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    -uniform01_open_low(rng).ln()
}

/// Exp(1) = −ln U with no upper bound: [`exp1`]'s value (U = (m + 1)·2⁻⁵³, m the top 53 bits of
/// one word) when m ≥ 2²⁰, i.e. U > 2⁻³³ (the same value for the same word: seeded streams of
/// [`exp1`]'s callers are unchanged); otherwise (probability 2⁻³³) U = 2⁻³³·U' with U' a fresh
/// uniform, −ln U = 33·ln 2 + (−ln U'), recursively. [`exp1`] alone stops at −ln 2⁻⁵³ ≈ 36.7.
#[inline]
pub fn exp1_unbounded<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let mut extra = 0.0;
    loop {
        let m = rng.next_u64() >> 11;
        if m >= 1 << 20 {
            return extra - ((m + 1) as f64 * (1.0 / (1u64 << 53) as f64)).ln();
        }
        extra += 33.0 * std::f64::consts::LN_2;
    }
}

/// Laplace(0, scale) as the difference of two independent Exp(1) draws, times `scale`.
#[inline]
pub fn laplace<R: Rng + ?Sized>(rng: &mut R, scale: f64) -> f64 {
    scale * (exp1(rng) - exp1(rng))
}

/// The 256-layer ziggurat for Exp(1) (Marsaglia & Tsang 2000): layer i ≥ 1 is the rectangle
/// [0, x[i]] × [e^(−x[i]), e^(−x[i+1])]; layer 0 is the base strip of the same area v (the
/// rectangle [0, r] × [0, e^(−r)] plus the tail beyond r), given the width x[0] = v/e^(−r).
#[derive(Debug)]
pub struct ExpZiggurat {
    x: [f64; 257],
    f: [f64; 257],
}

/// r and v of the 256-layer exponential ziggurat (x[256] = 0 to 4e-15 with these values).
const ZIG_EXP_R: f64 = 7.697_117_470_131_05;
const ZIG_EXP_V: f64 = 0.003_949_659_822_581_557;

static EXP_ZIGGURAT: std::sync::OnceLock<ExpZiggurat> = std::sync::OnceLock::new();

impl ExpZiggurat {
    fn build() -> Self {
        let mut x = [0.0; 257];
        x[0] = ZIG_EXP_V / (-ZIG_EXP_R).exp();
        x[1] = ZIG_EXP_R;
        for i in 1..255 {
            x[i + 1] = -(ZIG_EXP_V / x[i] + (-x[i]).exp()).ln();
        }
        x[256] = 0.0;
        let mut f = [0.0; 257];
        for i in 0..257 {
            f[i] = (-x[i]).exp();
        }
        ExpZiggurat { x, f }
    }
}

/// A fair sign and an independent Exp(1) draw. Ziggurat method: in ~99% of calls one `u64` and
/// no `ln` (bits 0–7 pick the layer, bit 8 is the sign, bits 12–63 the uniform position); the
/// rest take a wedge test (one `exp`) or the tail r + Exp(1) (one `ln`). Exact in distribution up
/// to f64 rounding, like inversion.
#[inline]
pub fn sign_and_exp1<R: Rng + ?Sized>(rng: &mut R) -> (bool, f64) {
    let z = EXP_ZIGGURAT.get_or_init(ExpZiggurat::build);
    let u = rng.next_u64();
    let (i, x) = ziggurat_point(z, u);
    if x < z.x[i + 1] {
        return ((u >> 8) & 1 == 1, x);
    }
    sign_and_exp1_slow(rng, z, u)
}

/// The layer index and the uniform point u·x[i] of a ziggurat draw (the uniform in [0, 1) is
/// built from 52 bits through the exponent trick, no integer-to-float conversion).
#[inline(always)]
fn ziggurat_point(z: &ExpZiggurat, u: u64) -> (usize, f64) {
    let i = (u & 0xff) as usize;
    let unit = f64::from_bits((u >> 12) | 0x3ff0_0000_0000_0000) - 1.0;
    (i, unit * z.x[i])
}

/// The rare cases of [`sign_and_exp1`]: the wedge test or the tail, then fresh draws.
#[cold]
#[inline(never)]
fn sign_and_exp1_slow<R: Rng + ?Sized>(rng: &mut R, z: &ExpZiggurat, mut u: u64) -> (bool, f64) {
    loop {
        let negative = (u >> 8) & 1 == 1;
        let (i, x) = ziggurat_point(z, u);
        if x < z.x[i + 1] {
            return (negative, x);
        }
        if i == 0 {
            // Beyond r in the base strip: the tail, r + Exp(1) by memorylessness (unbounded).
            return (negative, ZIG_EXP_R + exp1_unbounded(rng));
        }
        if z.f[i + 1] + (z.f[i] - z.f[i + 1]) * uniform01(rng) < (-x).exp() {
            return (negative, x);
        }
        u = rng.next_u64();
    }
}

/// Bernoulli(p) from one `u64`, branch-free: true iff the top 63 random bits, as an integer, are
/// below p·2⁶³ (one signed conversion, cheaper than [`bernoulli`]'s unsigned one). P = p exactly
/// for p ∈ [2⁻¹¹, 1) (p·2⁶³ is then an integer), within 2⁻⁶³ below 2⁻¹¹; p ≤ 0 or NaN is never and
/// p ≥ 1 always.
#[inline]
pub fn bernoulli_fast<R: Rng + ?Sized>(rng: &mut R, p: f64) -> bool {
    let threshold = (p * 9_223_372_036_854_775_808.0) as i64; // saturating
    (((rng.next_u64() >> 1) as i64) < threshold) | (p >= 1.0)
}

/// The decision of [`bernoulli_fast`] for a random word `w` already drawn, in integer and bit
/// operations only (no float-to-integer conversion, which AVX2 lacks), so loops over it
/// vectorise: true iff (w >> 1) < ⌊p·2⁶³⌋, or p ≥ 1; false if p ≤ 0 or NaN. Equal to
/// `bernoulli_fast` on the same word for every p (tested).
#[inline(always)]
pub fn bernoulli63_from_word(w: u64, p: f64) -> bool {
    // ⌊p·2⁶³⌋ for p ∈ (0, 1) from the bits of x = p·2⁶³ (exact scaling): x = m·2^(e − 1075)
    // with m the 53-bit significand; a shift left for x ≥ 2⁵², right (truncating) below.
    let bits = (p * 9_223_372_036_854_775_808.0).to_bits();
    let e = ((bits >> 52) & 0x7ff) as i64 - 1075;
    let m = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    let up = (e.clamp(0, 63)) as u64;
    let down = (-e).clamp(0, 64) as u64;
    let t = m << up;
    let threshold = if down < 64 { t >> down } else { 0 };
    ((w >> 1) < threshold) & (p > 0.0) | (p >= 1.0)
}

/// Unbiased randomized rounding of `y` to `step`·ℤ like [`randomized_round`], about twice as
/// fast: when |y/step| < 2³⁰ it writes y/step in fixed point with 32 fractional bits
/// (truncating below 2⁻³² of a step, a bias under 2⁻³²·step) and adds 32 random bits; larger
/// values fall back to [`randomized_round`]. (The batch kernels use
/// [`randomized_round_from_word`], exact to 2⁻⁵² of a step; this scalar form keeps the streams
/// of existing seeded runs.)
#[inline]
pub fn randomized_round_fast<R: Rng + ?Sized>(rng: &mut R, y: f64, step: f64) -> i64 {
    let scaled = y / step;
    if scaled.abs() < (1u64 << 30) as f64 {
        let fixed = (scaled * (1u64 << 32) as f64) as i64;
        (fixed + (rng.next_u64() >> 32) as i64) >> 32
    } else {
        randomized_round_slow(rng, y, step)
    }
}

/// The out-of-line large-value path of [`randomized_round_fast`] (keeps the hot path small
/// enough to inline).
#[cold]
#[inline(never)]
fn randomized_round_slow<R: Rng + ?Sized>(rng: &mut R, y: f64, step: f64) -> i64 {
    randomized_round(rng, y, step)
}

/// Unbiased randomized rounding of `y` to `step`·ℤ from one random word `w` already drawn:
/// ⌊s⌋ + [U < s − ⌊s⌋] with s = y/step and U = (w >> 12)·2⁻⁵² (an exact comparison: P[up] =
/// ⌈frac·2⁵²⌉/2⁵², within 2⁻⁵² of frac). Batch kernels use [`randomized_round_hot`], the same
/// value through vectorisable operations, and call this function on the lanes where
/// [`randomized_round_is_cold`].
#[inline(always)]
pub fn randomized_round_from_word(w: u64, y: f64, step: f64) -> i64 {
    let scaled = y / step;
    // ⌊scaled⌋ without a libm call (SSE2 has no floor): truncate, then step down if above.
    let t = scaled as i64; // saturating; NaN gives 0
    let lo = t - ((t as f64) > scaled) as i64;
    let frac = scaled - lo as f64;
    lo.saturating_add((unit52(w) < frac) as i64)
}

/// Whether `scaled` = y/step is outside the range of [`randomized_round_hot`] (|scaled| ≥ 2⁵⁰,
/// or NaN).
#[inline(always)]
pub fn randomized_round_is_cold(scaled: f64) -> bool {
    scaled.abs() >= (1u64 << 50) as f64 || scaled.is_nan()
}

/// [`randomized_round_from_word`]'s value for |scaled| < 2⁵⁰ (garbage otherwise), through
/// operations AVX2 has for 4 lanes at once: floor, and the integer ⌊scaled⌋ read from the bits
/// of ⌊scaled⌋ + 1.5·2⁵² (exact: an integer below 2⁵¹ in magnitude plus 1.5·2⁵² is
/// representable, and its significand is the integer plus 2⁵¹ in two's complement).
#[inline(always)]
pub fn randomized_round_hot(w: u64, scaled: f64) -> i64 {
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5·2⁵²
    let lo = scaled.floor();
    let int = ((lo + MAGIC).to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64);
    int + (unit52(w) < scaled - lo) as i64
}

/// Standard Laplace(0, 1): a fair sign times an Exp(1) draw, both from [`sign_and_exp1`] (one
/// `u64` and no `ln` in ~99% of calls; the older [`laplace`] uses two `u64`s and two `ln`s).
#[inline]
pub fn standard_laplace<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let (negative, e) = sign_and_exp1(rng);
    with_sign(e, negative)
}

/// −x if `negative`, else x, without a branch (the sign is a coin flip: a branch on it would be
/// mispredicted half the time).
#[inline(always)]
pub fn with_sign(x: f64, negative: bool) -> f64 {
    f64::from_bits(x.to_bits() ^ ((negative as u64) << 63))
}

/// Geometric number of failures before the first success when the failure probability is
/// r = e^(−λ), given `lambda` = λ = −ln r > 0: P[G = i] = (1 − r)·rⁱ. Computed as ⌊E/λ⌋ with
/// E ~ Exp(1) from [`sign_and_exp1`] (no `ln r` per call), returned as `f64` so huge values
/// cannot wrap.
#[inline]
pub fn geometric_rate<R: Rng + ?Sized>(rng: &mut R, lambda: f64) -> f64 {
    (sign_and_exp1(rng).1 / lambda).floor()
}

/// Fills `words` with `nbits` independent fair bits (bit j of the vector is bit j % 64 of word
/// j / 64); bits at positions ≥ `nbits` (the padding of the last word) are zero.
/// `words.len()` must be ⌈nbits/64⌉.
#[inline]
pub fn fill_bits<R: Rng + ?Sized>(rng: &mut R, words: &mut [u64], nbits: usize) {
    debug_assert_eq!(words.len(), nbits.div_ceil(64));
    for w in words.iter_mut() {
        *w = rng.next_u64();
    }
    if let Some(last) = words.last_mut() {
        *last &= padding_mask(nbits);
    }
}

/// The mask of the valid bits of the last word of an `nbits`-bit vector (all ones when `nbits`
/// is a multiple of 64).
#[inline]
pub fn padding_mask(nbits: usize) -> u64 {
    match nbits % 64 {
        0 => u64::MAX,
        r => (1u64 << r) - 1,
    }
}

/// Geometric number of failures before the first success, success probability `1 - ratio`,
/// i.e. P[G = i] = (1 − ratio)·ratioⁱ. `ratio` in [0, 1).
#[inline]
pub fn geometric<R: Rng + ?Sized>(rng: &mut R, ratio: f64) -> u64 {
    if ratio <= 0.0 {
        return 0;
    }
    let g = (uniform01_open_low(rng).ln() / ratio.ln()).floor();
    if g >= u64::MAX as f64 { u64::MAX } else { g as u64 }
}

/// Floyd's algorithm: k distinct values of [0, d), uniform over the k-subsets. For j = d − k,
/// …, d − 1 it draws t uniform on [0, j] and calls `insert(t)`; when `insert` reports t already
/// present (false) it inserts j, which cannot be. `insert` keeps the set (a list, a bitmap).
#[inline]
pub fn floyd<R: Rng + ?Sized>(rng: &mut R, k: usize, d: usize, mut insert: impl FnMut(usize) -> bool) {
    debug_assert!(k <= d);
    for j in (d - k)..d {
        let t = uniform_below(rng, j as u64 + 1) as usize;
        if !insert(t) {
            insert(j);
        }
    }
}

/// Samples k distinct indices from [0, d) uniformly ([`floyd`]), written to `out` (cleared
/// first) in a random order. O(k²) membership checks, meant for small k.
pub fn sample_k_of_d<R: Rng + ?Sized>(rng: &mut R, k: usize, d: usize, out: &mut Vec<usize>) {
    debug_assert!(k <= d);
    out.clear();
    if k == 1 {
        // Floyd's loop with k = 1, without the bookkeeping: the same single draw.
        out.push(uniform_below(rng, d as u64) as usize);
        return;
    }
    floyd(rng, k, d, |t| {
        let fresh = !out.contains(&t);
        if fresh {
            out.push(t);
        }
        fresh
    });
    // Floyd's set is uniform but its order is not; shuffle for a random order.
    for i in (1..out.len()).rev() {
        let j = uniform_below(rng, i as u64 + 1) as usize;
        out.swap(i, j);
    }
}

/// Unbiased randomized rounding of `y` to the grid `step·ℤ`: returns the integer unit count.
/// E[units·step] = y exactly (up to f64 rounding), and the added variance is
/// frac·(1 − frac)·step² ≤ step²/4.
#[inline]
pub fn randomized_round<R: Rng + ?Sized>(rng: &mut R, y: f64, step: f64) -> i64 {
    let scaled = y / step;
    let lo = scaled.floor();
    let frac = scaled - lo;
    let up = bernoulli(rng, frac);
    lo as i64 + up as i64
}
