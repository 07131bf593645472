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

/// A precomputed Bernoulli(p) sampler that fills 64 independent lanes per call, consuming about
/// eight random words per 64 bits whatever p is.
///
/// Each lane compares a lazily generated uniform U = 0.u₁u₂… with the binary expansion of p
/// (the exact `f64` value), most significant bit first, stopping as soon as every lane is
/// decided. Lane = 1 iff U < p, so P\[1\] = p exactly (for the f64 p).
#[derive(Debug, Clone, PartialEq)]
pub struct BernoulliWords {
    /// Bit i of p after the binary point (MSB first) as a lane mask: all ones if the bit is 1,
    /// zero if 0; truncated after p's last 1 bit (lanes still undecided there end as 0 anyway).
    masks: Vec<u64>,
    always: bool,
}

/// Rounds run without an exit test: 64 lanes are all decided after r rounds with probability
/// (1 − 2^-r)^64, 0.37 at r = 6, so testing earlier mostly mispredicts.
const UNCONDITIONAL_ROUNDS: usize = 6;

impl BernoulliWords {
    /// Precomputes the binary expansion of p ∈ [0, 1].
    pub fn new(p: f64) -> Self {
        let always = p >= 1.0;
        let mut masks = Vec::new();
        if p > 0.0 && p < 1.0 {
            // p = m · 2^e with m a 53-bit integer: fractional bit `pos` (1-based) of p is bit
            // (shift − pos) of m, shift = −e.
            let (m, e) = decompose(p);
            let shift = (-e) as usize;
            masks = (1..=shift)
                .map(|pos| {
                    let k = shift - pos;
                    let bit = if k < 64 { (m >> k) & 1 } else { 0 };
                    0u64.wrapping_sub(bit)
                })
                .collect();
            while masks.last() == Some(&0) {
                masks.pop();
            }
        }
        BernoulliWords { masks, always }
    }

    /// 64 independent Bernoulli(p) lanes.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        self.sample_masked(rng, u64::MAX)
    }

    /// Like [`BernoulliWords::sample`], but only the lanes set in `mask` are drawn (the others
    /// are 0), and drawing stops as soon as those lanes are decided: fewer random words when
    /// only a few lanes are needed (e.g. the last, partial word of a bit vector). Each masked
    /// lane is still exactly Bernoulli(p), independent of the others.
    #[inline]
    pub fn sample_masked<R: Rng + ?Sized>(&self, rng: &mut R, mask: u64) -> u64 {
        if self.always {
            return mask;
        }
        let mut undecided = mask;
        let mut ones = 0u64;
        // Branch-free rounds: m is all ones where p's bit is 1. Lanes whose uniform bit is below
        // p's bit are decided 1, above it decided 0, equal stay undecided. The first rounds run
        // unconditionally (a decided lane is never changed again: `undecided` masks it).
        let (head, tail) = self.masks.split_at(self.masks.len().min(UNCONDITIONAL_ROUNDS));
        for &m in head {
            compare_round(rng.next_u64(), m, &mut ones, &mut undecided);
        }
        finish_rounds(rng, tail, ones, undecided)
    }

    /// Fills every lane of `out` (64 per word) with independent Bernoulli(p) draws, about four
    /// random words per output word (a quarter of [`BernoulliWords::sample`]'s cost when the
    /// output is long). Per chunk of 64 output words:
    ///
    /// 1. [`FILL_HEAD_ROUNDS`] rounds of the bit-sliced comparison U < p on every lane, from
    ///    random words fetched in bulk, in a branch-free loop that LLVM vectorises (an AVX2
    ///    build is chosen at run time). A lane still undecided after r rounds has U's first r
    ///    bits equal to p's, so its outcome is U' < p_r with U' uniform and p_r = frac(2^r·p)
    ///    (p's expansion shifted by r bits): an independent Bernoulli(p_r) draw. About 1/8 of
    ///    the lanes are undecided.
    /// 2. Those draws, for all the undecided lanes of the chunk at once, come densely packed from
    ///    the same method applied to p_r (recursively), and are scattered to the
    ///    undecided lanes' positions with a parallel bit deposit (BMI2 `pdep`; [`pdep`] is the
    ///    portable equivalent, with the same result).
    ///
    /// Every lane is exactly Bernoulli(p) (the f64 p), independent of the others.
    pub fn fill<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut [u64]) {
        if self.always {
            out.fill(u64::MAX);
            return;
        }
        if self.masks.is_empty() {
            out.fill(0);
            return;
        }
        self.fill_from(0, rng, out, u64::MAX)
    }

    /// Fills `out` with Bernoulli(frac(2^offset·p)) lanes: p's expansion from bit `offset` on.
    /// Only the lanes of `last_mask` are needed in the last word (the others are don't-care).
    fn fill_from<R: Rng + ?Sized>(&self, offset: usize, rng: &mut R, out: &mut [u64], last_mask: u64) {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: `has_avx2()` checked at run time that this CPU has AVX2, BMI2 and POPCNT, the only
            // features `fill_avx2` is compiled with; its body is safe Rust.
            #[allow(unsafe_code)]
            unsafe {
                self.fill_avx2(offset, rng, out, last_mask)
            };
            return;
        }
        match out.len() {
            0..=4 => self.fill_kernel::<R, 4>(offset, rng, out, last_mask, pdep),
            5..=32 => self.fill_kernel::<R, 32>(offset, rng, out, last_mask, pdep),
            _ => self.fill_kernel::<R, FILL_CHUNK>(offset, rng, out, last_mask, pdep),
        }
    }

    /// [`BernoulliWords::fill_kernel`] compiled with AVX2 and BMI2 (hardware `pdep`).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi2,popcnt")]
    fn fill_avx2<R: Rng + ?Sized>(&self, offset: usize, rng: &mut R, out: &mut [u64], last_mask: u64) {
        // The same function as the portable `pdep` (tested).
        let pdep = |src: u64, mask: u64| std::arch::x86_64::_pdep_u64(src, mask);
        match out.len() {
            0..=4 => self.fill_kernel::<R, 4>(offset, rng, out, last_mask, pdep),
            5..=32 => self.fill_kernel::<R, 32>(offset, rng, out, last_mask, pdep),
            _ => self.fill_kernel::<R, FILL_CHUNK>(offset, rng, out, last_mask, pdep),
        }
    }

    /// The kernel of [`BernoulliWords::fill`], `C` output words per chunk.
    #[inline(always)]
    fn fill_kernel<R: Rng + ?Sized, const C: usize>(
        &self,
        offset: usize,
        rng: &mut R,
        out: &mut [u64],
        last_mask: u64,
        pdep: impl Fn(u64, u64) -> u64,
    ) {
        let masks = &self.masks[offset..];
        let r = masks.len().min(FILL_HEAD_ROUNDS);
        let head = &masks[..r];
        let mut words = [[0u64; C]; FILL_HEAD_ROUNDS];
        let mut undecided = [0u64; C];
        // Dense draws for the undecided lanes: at most 64 per output word, plus one zero word
        // so that a 64-bit window starting in the last word can be read.
        let mut dense = [0u64; C];
        let n = out.len();
        for (ci, chunk) in out.chunks_mut(C).enumerate() {
            let k = chunk.len();
            for w in &mut words[..r] {
                fill_words(rng, &mut w[..k]);
            }
            if let Ok(h) = <&[u64; FILL_HEAD_ROUNDS]>::try_from(head) {
                // All head rounds (the usual case): a fixed round count, vectorised over words.
                let [w0, w1, w2] = &words;
                for (c, o) in chunk.iter_mut().enumerate() {
                    let (mut ones, mut und) = (0u64, u64::MAX);
                    compare_round(w0[c], h[0], &mut ones, &mut und);
                    compare_round(w1[c], h[1], &mut ones, &mut und);
                    compare_round(w2[c], h[2], &mut ones, &mut und);
                    *o = ones;
                    undecided[c] = und;
                }
            } else {
                for (c, o) in chunk.iter_mut().enumerate() {
                    let (mut ones, mut und) = (0u64, u64::MAX);
                    for (j, &m) in head.iter().enumerate() {
                        compare_round(words[j][c], m, &mut ones, &mut und);
                    }
                    *o = ones;
                    undecided[c] = und;
                }
            }
            if r == masks.len() {
                continue; // p's expansion ended within the head: undecided lanes are 0.
            }
            if ci * C + k == n {
                undecided[k - 1] &= last_mask;
            }
            let lanes: usize = undecided[..k].iter().map(|u| u.count_ones() as usize).sum();
            if lanes == 0 {
                continue;
            }
            let n_dense = lanes.div_ceil(64);
            self.fill_from(offset + r, rng, &mut dense[..n_dense], padding_mask(lanes));
            let mut pos = 0usize;
            for (c, o) in chunk.iter_mut().enumerate() {
                let (w, b) = (pos / 64, (pos % 64) as u32);
                // 64 bits of the dense stream from bit `pos` (only the low popcount(und) used).
                let next = if w + 1 < n_dense { dense[w + 1] } else { 0 };
                let window = ((next as u128) << 64 | dense[w.min(C - 1)] as u128) >> b;
                *o |= pdep(window as u64, undecided[c]);
                pos += undecided[c].count_ones() as usize;
            }
        }
    }
}

/// Output words per chunk of [`BernoulliWords::fill`].
const FILL_CHUNK: usize = 256;
/// Full rounds of [`BernoulliWords::fill`] before the undecided lanes (1/8 of them) are
/// finished densely packed.
pub const FILL_HEAD_ROUNDS: usize = 3;

/// Parallel bit deposit: the low `mask.count_ones()` bits of `src`, in order, at the positions
/// of `mask`'s set bits (zero elsewhere): BMI2's `pdep`, as a loop over the set bits of `mask`
/// (the AVX2 build of [`BernoulliWords::fill`] uses the instruction itself).
#[inline]
pub fn pdep(src: u64, mask: u64) -> u64 {
    let (mut m, mut out, mut bit) = (mask, 0u64, 0u32);
    while m != 0 {
        let low = m & m.wrapping_neg();
        out |= ((src >> bit) & 1).wrapping_neg() & low;
        m ^= low;
        bit += 1;
    }
    out
}

/// One round of the bit-sliced comparison U < p: random bits `u` against p's bit mask `m`.
#[inline(always)]
fn compare_round(u: u64, m: u64, ones: &mut u64, undecided: &mut u64) {
    *ones |= *undecided & !u & m;
    *undecided &= !(u ^ m);
}

/// The remaining rounds, one fresh word each, until every lane is decided. Lanes still
/// undecided after p's whole expansion have U's first bits equal to p's: U ≥ p, so 0.
#[inline(always)]
fn finish_rounds<R: Rng + ?Sized>(rng: &mut R, masks: &[u64], mut ones: u64, mut undecided: u64) -> u64 {
    for &m in masks {
        if undecided == 0 {
            break;
        }
        compare_round(rng.next_u64(), m, &mut ones, &mut undecided);
    }
    ones
}

/// Fills `dst` with random words: `dst.len()` words' worth of [`Rng::fill_bytes`] read
/// little-endian (the same words as that many `next_u64` calls for [`FastRng`] and Xoshiro, but
/// fetched in bulk: one call instead of one per word).
#[inline]
pub fn fill_words<R: Rng + ?Sized>(rng: &mut R, dst: &mut [u64]) {
    #[cfg(target_endian = "little")]
    {
        // SAFETY: a `[u64]` of length n is 8n initialised, writable bytes with no padding, and
        // every byte pattern is a valid `u64`; the byte view borrows `dst` mutably for its whole
        // life. On a little-endian target, bytes 8i..8i+8 read little-endian are word i.
        #[allow(unsafe_code)]
        let bytes = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), 8 * dst.len()) };
        rng.fill_bytes(bytes);
    }
    #[cfg(not(target_endian = "little"))]
    {
        let mut bytes = [0u8; 8 * 128];
        for chunk in dst.chunks_mut(128) {
            let b = &mut bytes[..8 * chunk.len()];
            rng.fill_bytes(b);
            for (w, c) in chunk.iter_mut().zip(b.chunks_exact(8)) {
                *w = u64::from_le_bytes(c.try_into().expect("chunks of 8 bytes"));
            }
        }
    }
}

/// Fills `dst` with random 32-bit integers: 4·`dst.len()` bytes of [`Rng::fill_bytes`] read
/// little-endian (for [`FastRng`]: the low, then the high half of each word; an odd count ends
/// with the low half of one more word, whose high half is dropped), fetched in bulk.
#[inline]
pub fn fill_u32s<R: Rng + ?Sized>(rng: &mut R, dst: &mut [u32]) {
    #[cfg(target_endian = "little")]
    {
        // SAFETY: a `[u32]` of length n is 4n initialised, writable bytes with no padding, and
        // every byte pattern is a valid `u32`; the byte view borrows `dst` mutably for its whole
        // life. On a little-endian target, bytes 4i..4i+4 read little-endian are integer i.
        #[allow(unsafe_code)]
        let bytes = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), 4 * dst.len()) };
        rng.fill_bytes(bytes);
    }
    #[cfg(not(target_endian = "little"))]
    {
        let mut bytes = [0u8; 4 * 256];
        for chunk in dst.chunks_mut(256) {
            let b = &mut bytes[..4 * chunk.len()];
            rng.fill_bytes(b);
            for (w, c) in chunk.iter_mut().zip(b.chunks_exact(4)) {
                *w = u32::from_le_bytes(c.try_into().expect("chunks of 4 bytes"));
            }
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

/// (w >> 12)·2⁻⁵² ∈ [0, 1), through the exponent trick (no integer-to-float conversion).
#[inline(always)]
fn unit52(w: u64) -> f64 {
    f64::from_bits((w >> 12) | 0x3ff0_0000_0000_0000) - 1.0
}

/// Width of the exponent field of [`laplace1_from_word`]: bits 52–62 of the word.
const LAPLACE_ZERO_BITS: u32 = 11;

/// A standard Laplace(0, 1) draw ±(−ln U) from one random word `w`, in float and integer
/// operations that AVX2 (with FMA) has for 4 lanes — no table, no `ln` call, no rejection — so
/// loops over it vectorise: (x, hot). When `hot` is false (probability 2⁻¹¹) the draw must be
/// finished by [`laplace1_from_word_finish`] with the same `w`.
///
/// The uniform U ∈ (0, 1) is generated as a binary exponent and a significand, which are
/// independent for a uniform: U = 2⁻⁽ᴸ⁺¹⁾·(1 + M), with L = the number of leading zeros of
/// bits 62…52 of `w` (P[L = l] = 2⁻⁽ˡ⁺¹⁾, exactly the exponent's law) and M = (bits 51…0)·2⁻⁵²
/// (uniform on the 52-bit grid of the significand: U has the relative precision of an `f64`
/// at every scale). L ≥ 11 (all 11 bits zero) is the cold case: then U = 2⁻¹¹·U' with U' a
/// fresh uniform, drawn the same way (the finish extends the exponent with fresh words, without
/// bound), so −ln U = 11·ln 2 + (−ln U') and the tail is exact at every depth: no truncation at
/// −ln 2⁻⁵³ or anywhere (the largest value is limited only by the number of words drawn). Bit
/// 63 is the sign (set: negative), independent of U.
///
/// ln U is fdlibm's `log` (Sun Microsystems 1993, as in musl before 2018: the reduction
/// U = 2ᵏ·x, x ∈ [√2/2, √2), by integer arithmetic on the bits, s = f/(2 + f) with f = x − 1,
/// a degree-14 minimax polynomial in s; error below 1 ulp), restricted to normal arguments in
/// (0, 1) and evaluated with fused multiply-adds: IEEE operations only (`mul_add` is one
/// correctly rounded operation on every target, in hardware or in software), so every build
/// computes the same value. It is split in two steps ([`ln_uniform_reduce`] and
/// [`ln_uniform_finish`]) that batch kernels run as separate loops.
#[inline(always)]
pub fn laplace1_from_word(w: u64) -> (f64, bool) {
    let (f, s, dk) = ln_uniform_reduce(0, w);
    (laplace_from_ln_uniform(ln_uniform_finish(f, s, dk), w), laplace1_is_hot(w))
}

/// Whether [`laplace1_from_word`]'s draw from `w` is hot (bits 52–62 not all zero).
#[inline(always)]
pub fn laplace1_is_hot(w: u64) -> bool {
    (w >> 52) & ((1 << LAPLACE_ZERO_BITS) - 1) != 0
}

/// ±(−ln U) from ln U ≤ 0 and the word `w` whose bit 63 is the sign (set: negative): one
/// `andn` and one `xor` on the bits.
#[inline(always)]
pub fn laplace_from_ln_uniform(ln_u: f64, w: u64) -> f64 {
    f64::from_bits(ln_u.to_bits() ^ (!w & (1 << 63)))
}

/// A standard Laplace(0, 1) draw with the full relative precision of [`laplace1_from_word`] at
/// every depth of the tail: its value for a hot `w`, else [`laplace1_from_word_finish`] (fresh
/// words of `rng` extend the exponent; probability 2⁻¹¹). The scalar (client) path of the
/// Laplace mechanism: the batch kernel's distribution, value by value.
#[inline]
pub fn laplace1_full<R: Rng + ?Sized>(rng: &mut R, w: u64) -> f64 {
    let (x, hot) = laplace1_from_word(w);
    if hot { x } else { laplace1_from_word_finish(rng, w) }
}

/// Finishes a [`laplace1_from_word`] draw on every path: for a hot `w` its value (no draw);
/// otherwise ±[`exp1_from_word_finish`] (the exponent extended with fresh words of `rng`),
/// with the sign of bit 63 of `w`.
#[cold]
#[inline(never)]
pub fn laplace1_from_word_finish<R: Rng + ?Sized>(rng: &mut R, w: u64) -> f64 {
    with_sign(exp1_from_word_finish(rng, w), w >> 63 == 1)
}

/// Exp(1) = −ln U from a word `w` laid out as in [`laplace1_from_word`] (bit 63 ignored),
/// without bound: while the exponent field of the current word is zero (U < 2⁻¹¹), U = 2⁻¹¹·U'
/// and the next word of `rng` draws U' (11 more leading zeros each time).
pub fn exp1_from_word_finish<R: Rng + ?Sized>(rng: &mut R, w: u64) -> f64 {
    let (mut zeros, mut v) = (0u64, w);
    while !laplace1_is_hot(v) {
        zeros += LAPLACE_ZERO_BITS as u64;
        v = rng.next_u64();
    }
    let (f, s, dk) = ln_uniform_reduce(zeros, v);
    -ln_uniform_finish(f, s, dk)
}

/// The first step of ln U for U = 2⁻ᶻ·2⁻⁽ᴸ⁺¹⁾·(1 + M): z = `zeros`, L the leading zeros of bits
/// 52–62 of `w` (not all zero) and M its low 52 bits (see [`laplace1_from_word`]). fdlibm's
/// reduction U = 2ᵏ·x, x ∈ [√2/2, √2), in integer operations on the bits: returns
/// (f, s, k) = (x − 1, f/(2 + f), k as an `f64`). Garbage (no panic) for a word that is not hot.
#[inline(always)]
pub fn ln_uniform_reduce(zeros: u64, w: u64) -> (f64, f64, f64) {
    const TWO52: u64 = 0x4330_0000_0000_0000; // 2⁵² (bits)
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5·2⁵²: integer ↔ float through the bits
    let g = (w >> 52) & ((1 << LAPLACE_ZERO_BITS) - 1);
    // The exponent field of g as an f64 (exact: g < 2⁵²) is 1023 + ⌊log₂ g⌋ = 1033 − L, and
    // U's is 1022 − L: 11 less.
    let g_exp = (f64::from_bits(g | TWO52) - f64::from_bits(TWO52)).to_bits() >> 52;
    let u_bits = (g_exp.wrapping_sub(LAPLACE_ZERO_BITS as u64) << 52) | (w & ((1 << 52) - 1));
    // fdlibm: adding 0x3ff00000 − 0x3fe6a09e to the high word carries into the exponent iff the
    // significand is ≥ √2's; x gets the remaining significand and the exponent of [√2/2, √2).
    let hx = u_bits.wrapping_add((0x3ff0_0000 - 0x3fe6_a09e) << 32);
    let x = f64::from_bits((hx & 0x000f_ffff_ffff_ffff) + (0x3fe6_a09e << 32));
    // k − z as an f64 without an integer conversion (AVX2 has none for 64-bit lanes).
    let dk = f64::from_bits((hx >> 52).wrapping_add(MAGIC.to_bits()).wrapping_sub(1023 + zeros)) - MAGIC;
    let f = x - 1.0;
    (f, f / (2.0 + f), dk)
}

/// The second step: ln U = k·ln 2 + ln(1 + f) from [`ln_uniform_reduce`]'s (f, s, k), with
/// fdlibm's polynomial R(s²) and reconstruction ln(1 + f) = f − hfsq + s·(hfsq + R),
/// hfsq = f²/2, k·ln 2 in two parts (ln2_hi has 32 trailing zero bits: k·ln2_hi is exact).
#[inline(always)]
pub fn ln_uniform_finish(f: f64, s: f64, dk: f64) -> f64 {
    ln_uniform_combine(f, s, dk, ln_uniform_poly(s))
}

/// fdlibm's R(s²) (the first half of [`ln_uniform_finish`]).
#[inline(always)]
pub fn ln_uniform_poly(s: f64) -> f64 {
    const LG1: f64 = f64::from_bits(0x3fe5_5555_5555_5593);
    const LG2: f64 = f64::from_bits(0x3fd9_9999_9997_fa04);
    const LG3: f64 = f64::from_bits(0x3fd2_4924_9422_9359);
    const LG4: f64 = f64::from_bits(0x3fcc_71c5_1d8e_78af);
    const LG5: f64 = f64::from_bits(0x3fc7_4664_96cb_03de);
    const LG6: f64 = f64::from_bits(0x3fc3_9a09_d078_c69f);
    const LG7: f64 = f64::from_bits(0x3fc2_f112_df3e_5244);
    let z = s * s;
    let w = z * z;
    let t1 = w * w.mul_add(w.mul_add(LG6, LG4), LG2);
    let t2 = z * w.mul_add(w.mul_add(w.mul_add(LG7, LG5), LG3), LG1);
    t2 + t1
}

/// ln U from (f, s, k) and R = [`ln_uniform_poly`]`(s)` (the second half of
/// [`ln_uniform_finish`]).
#[inline(always)]
pub fn ln_uniform_combine(f: f64, s: f64, dk: f64, r: f64) -> f64 {
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    let hfsq = 0.5 * f * f;
    dk.mul_add(LN2_HI, s.mul_add(hfsq + r, dk * LN2_LO) - hfsq + f)
}

/// Unbiased randomized rounding of `scaled` to an integer from 32 random bits `u`, in
/// operations AVX2 has for 4 lanes: (⌊scaled⌋ + [U < frac], decided), U = (u + V)·2⁻³² with V
/// a uniform on [0, 1) not drawn yet. The comparison is decided by u alone unless u equals
/// F = ⌊frac·2³²⌋ (probability 2⁻³²); then `decided` is false and [`randomized_round32`] with
/// the same u finishes it with a fresh word (V against frac·2³² − F, 52 bits): P[up] is frac
/// to within 2⁻⁸⁴ (the rounding is unbiased to 2⁻⁸⁴ of a step). Valid for |scaled| < 2⁵¹;
/// garbage beyond (callers check the range).
#[inline(always)]
pub fn randomized_round32_hot(u: u32, scaled: f64) -> (i64, bool) {
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5·2⁵²
    const TWO52: f64 = 4_503_599_627_370_496.0;
    let lo = scaled.floor();
    // ⌊frac·2³²⌋ + 2⁵² (exact: frac = scaled − ⌊scaled⌋ is exact, and so is the power-of-two
    // scaling); its bits are 2⁵²'s plus F, comparable as integers with u's.
    let f_bits = (((scaled - lo) * 4_294_967_296.0).floor() + TWO52).to_bits() as i64;
    let u_bits = (u as u64 | TWO52.to_bits()) as i64;
    // ⌊scaled⌋ as an integer: the bits of ⌊scaled⌋ + 1.5·2⁵² (exact for |⌊scaled⌋| < 2⁵¹).
    let int = ((lo + MAGIC).to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64);
    (int.wrapping_add((u_bits < f_bits) as i64), u_bits != f_bits)
}

/// [`randomized_round32_hot`] on every path: any `scaled` (|scaled| ≥ 2⁵¹ is an integer
/// already, saturated to the `i64` range; NaN gives 0), and a tie of u with ⌊frac·2³²⌋ decided by
/// a fresh word from `rng` (the only draw, probability 2⁻³²).
#[inline(always)]
pub fn randomized_round32<R: Rng + ?Sized>(rng: &mut R, u: u32, scaled: f64) -> i64 {
    if scaled.abs() < (1u64 << 51) as f64 {
        let (units, decided) = randomized_round32_hot(u, scaled);
        if decided {
            return units;
        }
    }
    let lo = scaled.floor();
    let x = (scaled - lo) * 4_294_967_296.0;
    let f = x.floor();
    let up = match (u as f64).partial_cmp(&f) {
        Some(std::cmp::Ordering::Less) => true,
        Some(std::cmp::Ordering::Equal) => unit52(rng.next_u64()) < x - f,
        _ => false,
    };
    (lo as i64).saturating_add(up as i64)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bernoulli_edges_are_exact() {
        let mut rng = fast_rng(1);
        for _ in 0..1000 {
            assert!(!bernoulli(&mut rng, 0.0));
            assert!(bernoulli(&mut rng, 1.0));
            assert!(!bernoulli(&mut rng, f64::NAN));
        }
    }

    #[test]
    fn bernoulli_words_expansion_is_exact() {
        // The stored expansion must reproduce p exactly.
        for &p in &[0.5, 0.25, 0.2689414213699951, 1.0 / 3.0, 1e-5, 0.999999, 3.0e-300] {
            let bw = BernoulliWords::new(p);
            let mut v = 0.0f64;
            for (i, &m) in bw.masks.iter().enumerate() {
                assert!(m == 0 || m == u64::MAX);
                if m != 0 {
                    v += (-(i as f64 + 1.0)).exp2();
                }
            }
            assert_eq!(bw.masks.last(), Some(&u64::MAX), "p = {p}: expansion ends with a 1 bit");
            assert_eq!(v, p, "p = {p}");
        }
    }

    #[test]
    fn pdep_matches_the_instruction() {
        let mut rng = fast_rng(22);
        assert_eq!(pdep(0b1011, 0b1111_0000), 0b1011_0000);
        assert_eq!(pdep(u64::MAX, 0), 0);
        assert_eq!(pdep(0b10, 0x8000_0000_0000_0001), 0x8000_0000_0000_0000);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("bmi2") {
            for _ in 0..10_000 {
                let (a, m) = (rng.next_u64(), rng.next_u64() & rng.next_u64());
                // SAFETY: BMI2 was detected on this CPU just above.
                #[allow(unsafe_code)]
                let hw = unsafe { std::arch::x86_64::_pdep_u64(a, m) };
                assert_eq!(pdep(a, m), hw, "a = {a:#x}, m = {m:#x}");
            }
        }
    }

    /// `fill`'s AVX2 build (hardware pdep) and portable build give the same words, for lengths
    /// around every chunk size and p's with short and long expansions.
    #[test]
    fn bernoulli_words_fill_builds_agree() {
        for &p in &[0.2689414213699951, 0.3125, 0.375, 0.5, 1e-5, 0.999] {
            let bw = BernoulliWords::new(p);
            for &len in &[1usize, 3, 4, 5, 31, 33, 255, 256, 257, 700] {
                let mut a = vec![0u64; len];
                bw.fill(&mut fast_rng(len as u64), &mut a);
                let mut b = vec![0u64; len];
                match len {
                    0..=4 => bw.fill_kernel::<_, 4>(0, &mut fast_rng(len as u64), &mut b, u64::MAX, pdep),
                    5..=32 => bw.fill_kernel::<_, 32>(0, &mut fast_rng(len as u64), &mut b, u64::MAX, pdep),
                    _ => bw.fill_kernel::<_, FILL_CHUNK>(0, &mut fast_rng(len as u64), &mut b, u64::MAX, pdep),
                }
                assert_eq!(a, b, "p = {p}, len {len}");
            }
        }
    }

    #[test]
    fn bernoulli_words_fill_mean_within_4_42_sigma() {
        let mut rng = fast_rng(21);
        for &p in &[0.5, 0.2689414213699951, 0.01, 0.9, 1.0, 0.0, 0.3125, 0.375, 1e-5, 0.1] {
            let bw = BernoulliWords::new(p);
            let mut out = vec![0u64; 20_001];
            bw.fill(&mut rng, &mut out);
            let ones: u64 = out.iter().map(|w| w.count_ones() as u64).sum();
            let n = 64.0 * out.len() as f64;
            let sd = (n * p * (1.0 - p)).sqrt();
            assert!((ones as f64 - n * p).abs() <= 4.42 * sd, "p = {p}: {ones} of {n}");
            // Lanes are independent: the pair (lane 0, lane 1) is 11 with probability p².
            let both = out.iter().filter(|&&w| w & 3 == 3).count() as f64;
            let m = out.len() as f64;
            let sd2 = (m * p * p * (1.0 - p * p)).sqrt();
            assert!((both - m * p * p).abs() <= 4.42 * sd2 + 1e-9, "p = {p}: pairs {both} of {m}");
        }
    }

    #[test]
    fn bernoulli_words_mean_within_4_42_sigma() {
        // z = 4.42 <-> two-sided false-failure rate 1e-5.
        let mut rng = fast_rng(2);
        for &p in &[0.5, 0.2689414213699951, 0.01, 0.9] {
            let bw = BernoulliWords::new(p);
            let words = 20_000u64;
            let ones: u64 = (0..words).map(|_| bw.sample(&mut rng).count_ones() as u64).sum();
            let n = (words * 64) as f64;
            let z = (ones as f64 - n * p) / (n * p * (1.0 - p)).sqrt();
            assert!(z.abs() < 4.42, "p = {p}, n = {n}, ones = {ones}, z = {z}");
        }
        assert_eq!(BernoulliWords::new(0.0).sample(&mut rng), 0);
        assert_eq!(BernoulliWords::new(1.0).sample(&mut rng), u64::MAX);
    }

    #[test]
    fn bernoulli_words_masked_lanes_are_exact_and_confined() {
        // z = 4.42 <-> two-sided false-failure rate 1e-5.
        let mut rng = fast_rng(11);
        let mask = 0xFFFFu64;
        for &p in &[0.5, 0.2689414213699951, 0.05] {
            let bw = BernoulliWords::new(p);
            let words = 50_000u64;
            let mut ones = 0u64;
            for _ in 0..words {
                let w = bw.sample_masked(&mut rng, mask);
                assert_eq!(w & !mask, 0);
                ones += w.count_ones() as u64;
            }
            let n = (words * 16) as f64;
            let z = (ones as f64 - n * p) / (n * p * (1.0 - p)).sqrt();
            assert!(z.abs() < 4.42, "p = {p}, n = {n}, ones = {ones}, z = {z}");
        }
        assert_eq!(BernoulliWords::new(1.0).sample_masked(&mut rng, 0b101), 0b101);
        assert_eq!(BernoulliWords::new(0.0).sample_masked(&mut rng, 0b101), 0);
    }

    #[test]
    fn precomputed_bernoulli_matches_bernoulli() {
        for &p in &[0.0, 1e-30, 0.25, 0.7310585786300049, 0.999, 1.0, 2.0, f64::NAN] {
            let b = Bernoulli::new(p);
            let (mut r1, mut r2) = (fast_rng(12), fast_rng(12));
            for _ in 0..1000 {
                assert_eq!(b.sample(&mut r1), bernoulli(&mut r2, p), "p = {p}");
            }
            if (0.0..=1.0).contains(&p) && p >= 1.0 / 4096.0 || p == 0.0 {
                assert_eq!(b.probability(), p);
            }
        }
    }

    #[test]
    fn splitmix64_is_pinned() {
        // Reference values of SplitMix64 seeded with 0 (first outputs of the generator).
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(0x9E37_79B9_7F4A_7C15), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn uniform_below_covers_range_without_bias() {
        let mut rng = fast_rng(3);
        let n = 7u64;
        let mut counts = [0u64; 7];
        let draws = 70_000;
        for _ in 0..draws {
            counts[uniform_below(&mut rng, n) as usize] += 1;
        }
        let e = draws as f64 / 7.0;
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        // chi-square, 6 dof: P[chi2 > 35.9] ~ 3e-6
        assert!(chi2 < 35.9, "chi2 = {chi2}, counts = {counts:?}");
        assert_eq!(uniform_below(&mut rng, 1), 0);
    }

    #[test]
    fn k_of_d_is_distinct_and_uniform() {
        let mut rng = fast_rng(4);
        let mut out = Vec::new();
        let mut counts = [0u64; 10];
        for _ in 0..20_000 {
            sample_k_of_d(&mut rng, 3, 10, &mut out);
            assert_eq!(out.len(), 3);
            assert!(out[0] != out[1] && out[1] != out[2] && out[0] != out[2]);
            for &i in &out {
                counts[i] += 1;
            }
        }
        let e = 20_000.0 * 3.0 / 10.0;
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        assert!(chi2 < 45.0, "chi2 = {chi2}");
    }

    #[test]
    fn sign_and_exp1_moments() {
        // z = 4.42 <-> two-sided false-failure rate 1e-5 per statistic.
        let mut rng = fast_rng(6);
        let n = 200_000;
        let mut m = crate::estimate::Moments::default();
        let mut negatives = 0u64;
        for _ in 0..n {
            let (neg, e) = sign_and_exp1(&mut rng);
            assert!(e >= 0.0 && e.is_finite());
            negatives += neg as u64;
            m.push(e);
        }
        // Exp(1): mean 1, variance 1.
        assert!(m.z_mean(1.0, 1.0).abs() < 4.42, "mean {} (n = {n})", m.mean);
        assert!(m.z_variance(1.0).abs() < 4.42, "variance {} (n = {n})", m.variance());
        let z = (negatives as f64 - n as f64 / 2.0) / (n as f64 / 4.0).sqrt();
        assert!(z.abs() < 4.42, "negatives {negatives} of {n}");
        // Laplace(0, 1): mean 0, variance 2.
        let mut l = crate::estimate::Moments::default();
        (0..n).for_each(|_| l.push(standard_laplace(&mut rng)));
        assert!(l.z_mean(0.0, 2.0).abs() < 4.42, "mean {}", l.mean);
        assert!(l.z_variance(2.0).abs() < 4.42, "variance {}", l.variance());
    }

    #[test]
    fn exp_ziggurat_matches_the_exponential_cdf() {
        // Chi-square over 64 equiprobable bins of Exp(1), plus the far tail beyond r = 7.7.
        let z = ExpZiggurat::build();
        assert!((z.x[0] - (ZIG_EXP_R + 1.0)).abs() < 1e-9, "base strip width {}", z.x[0]);
        for i in 1..256 {
            // Every layer has area v.
            let area = z.x[i] * (z.f[i + 1] - z.f[i]);
            assert!((area / ZIG_EXP_V - 1.0).abs() < 1e-9, "layer {i}: area {area}");
        }
        let mut rng = fast_rng(10);
        let (n, bins) = (640_000usize, 64usize);
        let mut counts = vec![0u64; bins];
        let mut tail = 0u64;
        for _ in 0..n {
            let (_, e) = sign_and_exp1(&mut rng);
            let cdf = -(-e).exp_m1();
            counts[((cdf * bins as f64) as usize).min(bins - 1)] += 1;
            tail += (e > ZIG_EXP_R) as u64;
        }
        let expect = n as f64 / bins as f64;
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - expect).powi(2) / expect).sum();
        // chi-square with 63 dof: P[chi2 > 122.0] ~ 1e-5.
        assert!(chi2 < 122.0, "chi2 = {chi2}");
        let p = (-ZIG_EXP_R).exp();
        let z_tail = (tail as f64 - n as f64 * p) / (n as f64 * p).sqrt();
        assert!(z_tail.abs() < 4.42, "tail count {tail}, expected {}", n as f64 * p);
    }

    #[test]
    fn bernoulli_fast_is_exact_at_the_edges_and_unbiased() {
        let mut rng = fast_rng(12);
        for _ in 0..1000 {
            assert!(!bernoulli_fast(&mut rng, 0.0) && !bernoulli_fast(&mut rng, -1.0));
            assert!(!bernoulli_fast(&mut rng, f64::NAN));
            assert!(bernoulli_fast(&mut rng, 1.0) && bernoulli_fast(&mut rng, 2.0));
        }
        for &p in &[0.5, 0.2689414213699951, 0.01, 0.999] {
            let n = 200_000;
            let ones = (0..n).filter(|_| bernoulli_fast(&mut rng, p)).count() as f64;
            let z = (ones - n as f64 * p) / (n as f64 * p * (1.0 - p)).sqrt();
            assert!(z.abs() < 4.42, "p = {p}: {ones} of {n}");
        }
    }

    #[test]
    fn randomized_round_fast_is_unbiased_on_both_paths() {
        let mut rng = fast_rng(13);
        let step = 1.0 / (1u64 << 20) as f64;
        for &y in &[0.3 * step, -2.7 * step, 1.0 + 0.25 * step, -5000.75 * step, 3000.0 + 0.4 * step] {
            let n = 100_000;
            let base = (y / step).floor();
            let frac = y / step - base;
            let ups = (0..n).filter(|_| randomized_round_fast(&mut rng, y, step) as f64 > base).count() as f64;
            let sd = (n as f64 * frac * (1.0 - frac)).sqrt();
            assert!((ups - n as f64 * frac).abs() < 4.42 * sd + 1.0, "y = {y}: {ups} ups of {n}, frac {frac}");
            let r = randomized_round_fast(&mut rng, y, step) as f64;
            assert!(r == base || r == base + 1.0, "y = {y}: {r} not adjacent to {base}");
        }
        assert_eq!(randomized_round_fast(&mut rng, 2.0 * step, step), 2);
    }

    #[test]
    fn geometric_rate_matches_geometric() {
        let mut rng = fast_rng(7);
        let r: f64 = 0.6;
        let n = 100_000;
        let mut m = crate::estimate::Moments::default();
        (0..n).for_each(|_| m.push(geometric_rate(&mut rng, -r.ln())));
        let (mean, var) = (r / (1.0 - r), r / ((1.0 - r) * (1.0 - r)));
        assert!(m.z_mean(mean, var).abs() < 4.42, "mean {} vs {mean}", m.mean);
        let zeros = {
            let mut rng = fast_rng(8);
            (0..n).filter(|_| geometric_rate(&mut rng, -r.ln()) == 0.0).count()
        };
        let z = (zeros as f64 - n as f64 * (1.0 - r)) / (n as f64 * r * (1.0 - r)).sqrt();
        assert!(z.abs() < 4.42, "P[G = 0]: {zeros} of {n}");
    }

    #[test]
    fn fill_bits_zeroes_padding_and_is_fair() {
        let mut rng = fast_rng(9);
        let mut w = [0u64; 2];
        let mut ones = 0u64;
        for _ in 0..10_000 {
            fill_bits(&mut rng, &mut w, 70);
            assert_eq!(w[1] >> 6, 0);
            ones += (w[0].count_ones() + w[1].count_ones()) as u64;
        }
        let n = 700_000.0;
        assert!(((ones as f64 - n / 2.0) / (n / 4.0).sqrt()).abs() < 4.42, "ones {ones}");
        assert_eq!(padding_mask(64), u64::MAX);
        assert_eq!(padding_mask(3), 0b111);
    }

    #[test]
    fn randomized_round_is_unbiased() {
        let mut rng = fast_rng(5);
        let step = 0.25;
        let y = 0.3;
        let n = 100_000;
        let s: i64 = (0..n).map(|_| randomized_round(&mut rng, y, step)).sum();
        let mean = s as f64 * step / n as f64;
        let sd = (0.2f64 * 0.8).sqrt() * step / (n as f64).sqrt();
        assert!(((mean - y) / sd).abs() < 4.42, "mean {mean}");
    }

    #[test]
    fn bernoulli63_from_word_equals_bernoulli_fast() {
        let mut rng = fast_rng(31);
        let mut ps = vec![
            0.0,
            -0.0,
            -1.0,
            1.0,
            2.0,
            1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.5,
            0.25,
            1e-300,
            5e-324,
            1.0 / 2048.0,
            1.0 / 2048.0 - 1e-18,
            0.999_999_999_999_999_9,
            1.0 - f64::EPSILON / 2.0,
        ];
        ps.extend((0..2000).map(|_| uniform01(&mut rng)));
        ps.extend((0..500).map(|_| uniform01(&mut rng) * 1e-5));
        ps.extend((0..500).map(|_| (-60.0 * uniform01(&mut rng)).exp2()));
        for &p in &ps {
            for k in 0..200 {
                let w = rng.next_u64();
                // Also words right at the threshold.
                let w = if k % 3 == 0 { (((p * 9_223_372_036_854_775_808.0) as i64 as u64) << 1) ^ (k & 3) } else { w };
                let want = bernoulli_fast(&mut crate::sampling::tests::OneWord(w), p);
                assert_eq!(bernoulli63_from_word(w, p), want, "p = {p:e}, w = {w:#x}");
            }
        }
    }

    #[test]
    fn word_helpers_equal_their_scalar_forms() {
        let mut rng = fast_rng(32);
        for k in 0..100_000u64 {
            let w = if k < 64 { (1u64 << k) | (k & 1) } else { rng.next_u64() };
            assert_eq!(uniform01_from_word(w), uniform01(&mut OneWord(w)), "w = {w:#x}");
            // The vectorisable hot path of randomized rounding equals the scalar one.
            let scaled = f64::from_bits(rng.next_u64() & !(0x7ffu64 << 52) | ((1000 + (k % 74)) << 52))
                * if k % 2 == 0 { 1.0 } else { -1.0 };
            for x in [scaled, (k as f64) - 50.0, -(k as f64) * 0.25, 0.0, -0.0, 2147483647.5, -1125899906842623.5] {
                if !randomized_round_is_cold(x) {
                    assert_eq!(randomized_round_hot(w, x), randomized_round_from_word(w, x, 1.0), "x = {x:e}");
                }
            }
        }
        // randomized_round_from_word: hot and cold paths, one word each, unbiased (see also
        // randomized_round_fast_is_unbiased_on_both_paths).
        let step = 1.0 / (1u64 << 20) as f64;
        for y in [0.3 * step, -2.7 * step, 5000.0 + 0.5 * step, -3.0e4 - 0.25 * step] {
            let scaled = y / step;
            let base = scaled.floor() as i64;
            for _ in 0..100 {
                let w = rng.next_u64();
                let r = randomized_round_from_word(w, y, step);
                assert!(r == base || r == base + 1, "y = {y}");
            }
            // Unbiased: P[up] = frac (z = 4.42).
            let frac = scaled - scaled.floor();
            let n = 100_000;
            let ups = (0..n).filter(|_| randomized_round_from_word(rng.next_u64(), y, step) > base).count() as f64;
            let sd = (n as f64 * frac * (1.0 - frac)).sqrt();
            assert!((ups - n as f64 * frac).abs() < 4.42 * sd + 1.0, "y = {y}: {ups} ups of {n}, frac {frac}");
        }
    }

    /// The uniform of [`laplace1_from_word`]'s layout, built independently: 2⁻⁽ᴸ⁺¹⁾·(1 + M).
    fn dyadic_uniform(w: u64) -> f64 {
        let g = (w >> 52) & 0x7ff;
        let l = g.leading_zeros() - 53;
        (1.0 + (w & ((1 << 52) - 1)) as f64 * (-52f64).exp2()) * (-(l as f64) - 1.0).exp2()
    }

    #[test]
    fn laplace1_from_word_is_minus_ln_u_within_an_ulp_or_two() {
        // Against the C library's `ln` (< 1 ulp) on the exactly representable U: random words,
        // every exponent, significands at 0, at the √2 reduction boundary and at the top.
        let mut rng = fast_rng(41);
        let mut words: Vec<u64> = (0..200_000).map(|_| rng.next_u64()).collect();
        for g in 1..0x800u64 {
            for m in [0, 1, 0x6_a09e_667f_3bcc, 0x6_a09e_667f_3bcd, (1 << 52) - 1, rng.next_u64() >> 12] {
                words.push(g << 52 | m | (rng.next_u64() & (1 << 63)));
            }
        }
        let mut worst = 0.0f64;
        for &w in &words {
            let (x, hot) = laplace1_from_word(w);
            assert_eq!(hot, (w >> 52) & 0x7ff != 0, "w = {w:#x}");
            if !hot {
                continue;
            }
            let want = -dyadic_uniform(w).ln();
            assert!(want > 0.0 && want < 11.0 * std::f64::consts::LN_2 + 1e-12);
            // Sign: bit 63 set = negative.
            assert_eq!(x < 0.0, w >> 63 == 1, "w = {w:#x}");
            let ulps = (x.abs() - want).abs() / (want * f64::EPSILON);
            worst = worst.max(ulps);
            assert!(ulps <= 2.0, "w = {w:#x}: {x} vs {want} ({ulps} ulp)");
            // The finish gives the same value for a hot word (no draw).
            assert_eq!(laplace1_from_word_finish(&mut OneWord(0), w), x);
        }
        eprintln!("laplace1_from_word: worst error {worst:.3} ulp of −ln U over {} words", words.len());
        assert!(worst > 0.0 && worst <= 2.0, "worst {worst} ulp");
    }

    /// An RNG that returns the given words in turn.
    struct Words(Vec<u64>);
    impl rand::TryRng for Words {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Ok(self.0.remove(0) as u32)
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Ok(self.0.remove(0))
        }
        fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), Self::Error> {
            unimplemented!("not used")
        }
    }

    #[test]
    fn laplace1_finish_extends_the_exponent_without_bound() {
        let ln2 = std::f64::consts::LN_2;
        let mut rng = fast_rng(42);
        for _ in 0..10_000 {
            let hot = rng.next_u64() | (1 << 60);
            let cold = rng.next_u64() & !(0x7ff << 52);
            let e = laplace1_from_word(hot).0.abs();
            // One, two, then 40 zero exponent fields before the hot word: 11·ln 2 each.
            for zeros in [1usize, 2, 40] {
                let mut seq = vec![cold & !(1 << 63); zeros - 1];
                seq.push(hot);
                let x = laplace1_from_word_finish(&mut Words(seq), cold);
                let want = 11.0 * zeros as f64 * ln2 + e;
                assert!((x.abs() - want).abs() <= 4.0 * f64::EPSILON * want, "{zeros}: {x} vs {want}");
                assert_eq!(x < 0.0, cold >> 63 == 1);
            }
        }
        // Conditional on the cold case, x − 11·ln 2 is again Exp(1) (z = 4.42): mean and
        // variance 1, and 2⁻¹¹ of those draws are cold again (beyond 22·ln 2).
        let n = 100_000;
        let mut m = crate::estimate::Moments::default();
        let mut deeper = 0u64;
        for _ in 0..n {
            let cold = rng.next_u64() & !(0x7ff << 52);
            let x = laplace1_from_word_finish(&mut rng, cold).abs() - 11.0 * ln2;
            deeper += (x > 11.0 * ln2) as u64;
            m.push(x);
        }
        assert!(m.z_mean(1.0, 1.0).abs() < 4.42 && m.z_variance(1.0).abs() < 4.42, "mean {}", m.mean);
        let p = (-11.0f64).exp2();
        assert!((deeper as f64 - n as f64 * p).abs() < 4.42 * (n as f64 * p).sqrt() + 1.0, "{deeper}");
    }

    #[test]
    fn exp1_unbounded_is_exp1_above_2_to_minus_33_and_extends_below() {
        let (mut a, mut b) = (fast_rng(43), fast_rng(43));
        for _ in 0..10_000 {
            assert_eq!(exp1_unbounded(&mut a), exp1(&mut b));
        }
        let ln2 = std::f64::consts::LN_2;
        let next = 1u64 << 63; // U' = (2⁵² + 1)·2⁻⁵³
        let tail = exp1_unbounded(&mut Words(vec![((1 << 20) - 1) << 11, next]));
        let want = 33.0 * ln2 - ((next >> 11) as f64 + 1.0).mul_add((-53f64).exp2(), 0.0).ln();
        assert!((tail - want).abs() < 1e-14 && tail > 33.0 * ln2, "{tail} vs {want}");
        assert!(exp1_unbounded(&mut Words(vec![0, 0, next])) > 66.0 * ln2);
    }

    #[test]
    fn randomized_round32_is_exact_and_unbiased() {
        let mut rng = fast_rng(44);
        // Hot = full wherever the hot path decides, and adjacent integers.
        for k in 0..200_000u64 {
            let u = rng.next_u64() as u32;
            let e = (k % 70) as f64 - 20.0;
            let scaled = (2.0 * uniform01(&mut rng) - 1.0) * e.exp2();
            let (hot, decided) = randomized_round32_hot(u, scaled);
            let full = randomized_round32(&mut OneWord(rng.next_u64()), u, scaled);
            if decided {
                assert_eq!(hot, full, "scaled {scaled:e}, u {u}");
            }
            assert!(full == scaled.floor() as i64 || full == scaled.floor() as i64 + 1);
        }
        // Unbiased (z = 4.42), including values with bits below 2⁻³² of a step, where u ties
        // with ⌊frac·2³²⌋ and a fresh word decides.
        for &scaled in &[0.3f64, -2.7, 1e6 + 0.25, -3e9 - 0.5, 1e-12, 0.5 + 3e-12, -7.0 - 1e-11] {
            let base = scaled.floor();
            let frac = scaled - base;
            let f32bits = (frac * 4_294_967_296.0).floor();
            let n = 200_000;
            let mut ups = 0u64;
            let mut tie_ups = 0u64;
            for i in 0..n {
                let u = rng.next_u64() as u32;
                ups += (randomized_round32(&mut rng, u, scaled) as f64 > base) as u64;
                // Forced ties: P[up] = frac·2³² − F.
                if i < 50_000 {
                    tie_ups += (randomized_round32(&mut rng, f32bits as u32, scaled) as f64 > base) as u64;
                }
            }
            let sd = (n as f64 * frac * (1.0 - frac)).sqrt();
            assert!((ups as f64 - n as f64 * frac).abs() < 4.42 * sd + 1.0, "{scaled}: {ups} of {n}");
            let rem = frac * 4_294_967_296.0 - f32bits;
            let sd = (5e4 * rem * (1.0 - rem)).sqrt();
            assert!((tie_ups as f64 - 5e4 * rem).abs() < 4.42 * sd + 1.0, "{scaled}: ties {tie_ups}, rem {rem}");
        }
        // Huge, infinite and NaN values: no panic, saturated.
        assert_eq!(randomized_round32(&mut rng, 7, 2f64.powi(60)), 1 << 60);
        assert_eq!(randomized_round32(&mut rng, 7, f64::INFINITY), i64::MAX);
        assert_eq!(randomized_round32(&mut rng, 7, -1e300), i64::MIN);
        assert_eq!(randomized_round32(&mut rng, 7, f64::NAN), 0);
    }

    #[test]
    fn fill_u32s_are_the_little_endian_halves_of_words() {
        for len in [0usize, 1, 2, 7, 255, 256, 257, 1000] {
            let mut got = vec![0u32; len];
            let mut a = fast_rng(45);
            fill_u32s(&mut a, &mut got);
            let mut b = fast_rng(45);
            let want: Vec<u32> = (0..len.div_ceil(2))
                .flat_map(|_| {
                    b.next_u64()
                        .to_le_bytes()
                        .chunks(4)
                        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                        .collect::<Vec<_>>()
                })
                .take(len)
                .collect();
            assert_eq!(got, want, "len {len}");
            assert_eq!(a.next_u64(), b.next_u64(), "len {len}: streams stay in step");
        }
    }

    /// An RNG that returns one fixed word (to feed a chosen word to a sampler).
    pub(crate) struct OneWord(pub u64);
    impl rand::TryRng for OneWord {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Ok((self.0 >> 32) as u32)
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Ok(self.0)
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            dst.iter_mut().zip(self.0.to_le_bytes().iter().cycle()).for_each(|(d, &b)| *d = b);
            Ok(())
        }
    }
}
