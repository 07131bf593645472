//! All sampling primitives in one place. Every mechanism draws its randomness through these.
//!
//! Conventions: `p = 0` and `p = 1` are exact (never / always); uniform integers have no modulo
//! bias (Lemire's method); uniform reals use the top 53 bits of a `u64`.
//!
//! RNGs: client paths use [`secure_rng`] (ChaCha20 seeded from the OS); simulations and tests use
//! [`fast_rng`] (Xoshiro256++ from a `u64` seed).

use rand::Rng;
use rand::SeedableRng;
use rand::rngs::{ChaCha20Rng, SysRng, Xoshiro256PlusPlus};

/// A cryptographically secure RNG seeded by the operating system. Use it on every client path.
///
/// # Panics
/// If the OS entropy source fails (a broken system: randomizing without it is not safe).
pub fn secure_rng() -> ChaCha20Rng {
    ChaCha20Rng::try_from_rng(&mut SysRng).expect("the OS entropy source failed; refusing to randomize without it")
}

/// A fast seeded RNG for simulations and tests (never for real clients).
pub fn fast_rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
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
    if !(p > 0.0) {
        return false;
    }
    // p < 1 so p * 2^64 < 2^64 and the cast is exact for p >= 2^-12.
    let threshold = (p * 18_446_744_073_709_551_616.0) as u64;
    rng.next_u64() < threshold
}

/// A precomputed Bernoulli(p) sampler that fills 64 independent lanes per call, consuming about
/// eight random words per 64 bits whatever p is.
///
/// Each lane compares a lazily generated uniform U = 0.u₁u₂… with the binary expansion of p
/// (the exact `f64` value), most significant bit first, stopping as soon as every lane is
/// decided. Lane = 1 iff U < p, so P[1] = p exactly (for the f64 p).
#[derive(Debug, Clone)]
pub struct BernoulliWords {
    /// Bits of p after the binary point, MSB first (up to 1074 for subnormals; we keep 64·k).
    bits: Vec<u64>,
    nbits: usize,
    always: bool,
}

impl BernoulliWords {
    /// Precomputes the binary expansion of p ∈ [0, 1].
    pub fn new(p: f64) -> Self {
        let always = p >= 1.0;
        let mut bits = Vec::new();
        let mut nbits = 0;
        if p > 0.0 && p < 1.0 {
            // p = m · 2^(exp) with m a 53-bit integer; expand exactly.
            let (m, e) = decompose(p);
            // p = m / 2^(-e); bit i (1-based after the point) of p.
            let shift = (-e) as usize; // number of fractional bits needed
            nbits = shift;
            bits = vec![0u64; shift.div_ceil(64)];
            for i in 0..53 {
                if (m >> i) & 1 == 1 {
                    // value 2^(i+e) -> fractional position pos = -(i+e), 1-based
                    let pos = shift - i; // 1..=shift
                    let idx = pos - 1;
                    bits[idx / 64] |= 1u64 << (63 - (idx % 64));
                }
            }
        }
        BernoulliWords { bits, nbits, always }
    }

    /// 64 independent Bernoulli(p) lanes.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        if self.always {
            return u64::MAX;
        }
        let mut undecided = u64::MAX;
        let mut ones = 0u64;
        for i in 0..self.nbits {
            let pbit = (self.bits[i / 64] >> (63 - (i % 64))) & 1;
            let u = rng.next_u64();
            if pbit == 1 {
                // lanes where u-bit is 0 < 1: U < p, decided 1
                ones |= undecided & !u;
                undecided &= u;
            } else {
                // lanes where u-bit is 1 > 0: U > p, decided 0
                undecided &= !u;
            }
            if undecided == 0 {
                break;
            }
        }
        // Remaining lanes have U's first nbits equal to p's: U >= p, so 0.
        ones
    }
}

/// Splits a positive finite f64 into (m, e) with value = m · 2^e, m < 2^53 an integer.
fn decompose(x: f64) -> (u64, i32) {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    if exp == 0 { (frac, -1074) } else { (frac | (1u64 << 52), exp - 1075) }
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

/// Laplace(0, scale) as the difference of two independent Exp(1) draws, times `scale`.
#[inline]
pub fn laplace<R: Rng + ?Sized>(rng: &mut R, scale: f64) -> f64 {
    scale * (exp1(rng) - exp1(rng))
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

/// Samples k distinct indices from [0, d) uniformly (Floyd's algorithm), written to `out`
/// (cleared first). Order is random. O(k²) membership checks, meant for small k.
pub fn sample_k_of_d<R: Rng + ?Sized>(rng: &mut R, k: usize, d: usize, out: &mut Vec<usize>) {
    debug_assert!(k <= d);
    out.clear();
    for j in (d - k)..d {
        let t = uniform_below(rng, j as u64 + 1) as usize;
        if out.contains(&t) {
            out.push(j);
        } else {
            out.push(t);
        }
    }
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
            for i in 0..bw.nbits {
                if (bw.bits[i / 64] >> (63 - (i % 64))) & 1 == 1 {
                    v += (-(i as f64 + 1.0)).exp2();
                }
            }
            assert_eq!(v, p, "p = {p}");
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
}
