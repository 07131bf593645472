//! Samplers from one random word already drawn, in the float and integer operations AVX2 has for
//! four lanes (no table, no `ln` call, no rejection on the hot path): the batch kernels' inner
//! loops.

use super::*;
use rand::Rng;

/// (w >> 12)·2⁻⁵² ∈ [0, 1), through the exponent trick (no integer-to-float conversion).
#[inline(always)]
pub(super) fn unit52(w: u64) -> f64 {
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
