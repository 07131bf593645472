//! 64 Bernoulli lanes per word: the bit-sliced comparison of lazily drawn uniforms with p's
//! binary expansion, and the word and `u32` fills the batch kernels draw from.

use super::*;
use rand::Rng;

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
    pub(super) masks: Vec<u64>,
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
    pub(super) fn fill_kernel<R: Rng + ?Sized, const C: usize>(
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
pub(super) const FILL_CHUNK: usize = 256;
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
