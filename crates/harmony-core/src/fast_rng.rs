//! [`FastRng`]: the seeded generator of simulations, tests and benchmarks (never of clients).
//!
//! Eight independent Xoshiro256++ streams (Blackman & Vigna 2019) advanced in lock step, their
//! outputs interleaved into a buffer of [`BLOCK`] words that is refilled in one go. The refill is
//! plain Rust over `[u64; 8]` arrays: on a CPU with AVX-512 it is compiled a second time with that
//! feature enabled (chosen once, at construction, by run-time detection), where LLVM turns each
//! state update into a handful of 512-bit instructions (native 64-bit rotates) and generates a
//! word about five times faster than one scalar Xoshiro256++. Both code paths compute the same
//! integers, so a seed gives the same stream on every machine.
//!
//! Consumers that need many words at once call [`FastRng::fill_words`] or
//! [`crate::sampling::fill_words`], which copy whole blocks.

use rand::{SeedableRng, TryRng};
use std::convert::Infallible;

const LANES: usize = 8;
/// Words per refill: 16 steps of the 8 streams.
pub const BLOCK: usize = LANES * 16;

type State = [[u64; LANES]; 4];

/// The seeded fast generator: 8 interleaved Xoshiro256++ streams, buffered. Not for clients.
#[derive(Clone)]
pub struct FastRng {
    s: State,
    buf: [u64; BLOCK],
    pos: usize,
    wide: bool,
}

impl std::fmt::Debug for FastRng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the state (it determines every future draw).
        f.debug_struct("FastRng").field("wide", &self.wide).finish_non_exhaustive()
    }
}

/// One block of the 8 streams: writes `BLOCK` words to `out`, advances `s`.
#[inline(always)]
fn refill_portable(s: &mut State, out: &mut [u64; BLOCK]) {
    let [mut s0, mut s1, mut s2, mut s3] = *s;
    for step in out.chunks_exact_mut(LANES) {
        for l in 0..LANES {
            step[l] = s0[l].wrapping_add(s3[l]).rotate_left(23).wrapping_add(s0[l]);
            let t = s1[l] << 17;
            s2[l] ^= s0[l];
            s3[l] ^= s1[l];
            s1[l] ^= s2[l];
            s0[l] ^= s3[l];
            s2[l] ^= t;
            s3[l] = s3[l].rotate_left(45);
        }
    }
    *s = [s0, s1, s2, s3];
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn refill_avx512(s: &mut State, out: &mut [u64; BLOCK]) {
    refill_portable(s, out)
}

#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

#[cfg(not(target_arch = "x86_64"))]
fn has_avx512() -> bool {
    false
}

/// One block into `out`, through the AVX-512 build of the refill when `wide`.
#[inline]
fn refill_block(s: &mut State, wide: bool, out: &mut [u64; BLOCK]) {
    #[cfg(target_arch = "x86_64")]
    if wide {
        // SAFETY: `wide` is true only if `is_x86_feature_detected!("avx512f")` returned true on
        // this machine (`FastRng::new`), so the instructions `refill_avx512` is compiled to exist
        // here. The function body is safe Rust (no pointers; indexing is bounds-checked).
        #[allow(unsafe_code)]
        unsafe {
            refill_avx512(s, out)
        };
        return;
    }
    let _ = wide;
    refill_portable(s, out);
}

impl FastRng {
    /// Seeds the 8 streams from one `u64` (SplitMix64 expansion, as `Xoshiro256PlusPlus`'s
    /// `seed_from_u64`; an all-zero stream state cannot occur because SplitMix64 is a bijection
    /// of distinct counters).
    pub fn new(seed: u64) -> Self {
        let mut state = seed;
        let mut s = [[0u64; LANES]; 4];
        for l in 0..LANES {
            for w in s.iter_mut() {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                w[l] = z ^ (z >> 31);
            }
        }
        FastRng { s, buf: [0; BLOCK], pos: BLOCK, wide: has_avx512() }
    }

    /// The same generator forced onto the portable refill (for the test that both paths agree).
    #[doc(hidden)]
    pub fn portable(seed: u64) -> Self {
        FastRng { wide: false, ..Self::new(seed) }
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self) {
        refill_block(&mut self.s, self.wide, &mut self.buf);
        self.pos = 0;
    }

    /// The next word.
    #[inline(always)]
    pub fn word(&mut self) -> u64 {
        if self.pos >= BLOCK {
            self.refill();
        }
        let r = self.buf[self.pos];
        self.pos += 1;
        r
    }

    /// Fills `dst` with the next `dst.len()` words of the stream (the same words, in the same
    /// order, as that many calls to [`FastRng::word`]), whole blocks at a time.
    pub fn fill_words(&mut self, dst: &mut [u64]) {
        let mut dst = dst;
        // Drain the buffer first.
        let take = (BLOCK - self.pos).min(dst.len());
        dst[..take].copy_from_slice(&self.buf[self.pos..self.pos + take]);
        self.pos += take;
        dst = &mut dst[take..];
        let mut blocks = dst.chunks_exact_mut(BLOCK);
        for block in &mut blocks {
            let block: &mut [u64; BLOCK] = block.try_into().expect("chunks_exact gives BLOCK words");
            refill_block(&mut self.s, self.wide, block);
        }
        let rest = blocks.into_remainder();
        if !rest.is_empty() {
            self.refill();
            rest.copy_from_slice(&self.buf[..rest.len()]);
            self.pos = rest.len();
        }
    }
}

impl TryRng for FastRng {
    type Error = Infallible;

    #[inline(always)]
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok((self.word() >> 32) as u32)
    }

    #[inline(always)]
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.word())
    }

    /// Little-endian bytes of the next words (a partial last word is consumed whole), as
    /// `fill_bytes_via_next_word` would give, but copied from the buffer block by block.
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        let mut chunks = dst.chunks_exact_mut(8);
        loop {
            if self.pos >= BLOCK {
                self.refill();
            }
            let avail = &self.buf[self.pos..];
            let mut used = 0;
            // `avail` first: zip drops the left item when the right side runs out.
            for (w, c) in avail.iter().zip(&mut chunks) {
                c.copy_from_slice(&w.to_le_bytes());
                used += 1;
            }
            self.pos += used;
            if used < avail.len() {
                break;
            }
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let w = self.word().to_le_bytes();
            rest.copy_from_slice(&w[..rest.len()]);
        }
        Ok(())
    }
}

impl SeedableRng for FastRng {
    type Seed = [u8; 8];

    fn from_seed(seed: Self::Seed) -> Self {
        FastRng::new(u64::from_le_bytes(seed))
    }

    fn seed_from_u64(seed: u64) -> Self {
        FastRng::new(seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    /// Scalar Xoshiro256++ (the reference algorithm), for lane-by-lane comparison.
    fn xoshiro_next(s: &mut [u64; 4]) -> u64 {
        let r = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        r
    }

    #[test]
    fn lanes_are_xoshiro256plusplus_and_both_paths_agree() {
        let mut a = FastRng::new(42);
        let mut lanes: Vec<[u64; 4]> = (0..LANES).map(|l| [a.s[0][l], a.s[1][l], a.s[2][l], a.s[3][l]]).collect();
        let mut b = FastRng::portable(42);
        for i in 0..5 * BLOCK + 3 {
            let expect = xoshiro_next(&mut lanes[i % LANES]);
            assert_eq!(a.next_u64(), expect, "word {i}");
            assert_eq!(b.next_u64(), expect, "word {i} (portable)");
        }
    }

    #[test]
    fn fill_words_equals_word_by_word() {
        for &len in &[0usize, 1, 7, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 17] {
            let mut a = FastRng::new(7);
            let mut b = FastRng::new(7);
            a.next_u64(); // start mid-buffer
            b.next_u64();
            let mut got = vec![0u64; len];
            a.fill_words(&mut got);
            let want: Vec<u64> = (0..len).map(|_| b.next_u64()).collect();
            assert_eq!(got, want, "len {len}");
            assert_eq!(a.next_u64(), b.next_u64(), "len {len}: streams stay in step");
        }
    }

    #[test]
    fn fill_bytes_is_the_little_endian_word_stream() {
        for &len in &[0usize, 3, 8, 8 * BLOCK - 5, 8 * BLOCK, 8 * BLOCK + 13, 5000] {
            let mut a = FastRng::new(11);
            let mut b = FastRng::new(11);
            a.next_u64();
            b.next_u64();
            let mut got = vec![0u8; len];
            a.fill_bytes(&mut got);
            let want: Vec<u8> = (0..len.div_ceil(8)).flat_map(|_| b.next_u64().to_le_bytes()).take(len).collect();
            assert_eq!(got, want, "len {len}");
            assert_eq!(a.next_u64(), b.next_u64(), "len {len}: streams stay in step");
        }
    }

    #[test]
    fn bits_are_balanced() {
        let mut r = FastRng::new(3);
        let n = 20_000u64;
        let ones: u64 = (0..n).map(|_| r.next_u64().count_ones() as u64).sum();
        let bits = 64.0 * n as f64;
        let z = (ones as f64 - bits / 2.0) / (bits / 4.0).sqrt();
        assert!(z.abs() < 4.42, "z = {z}");
    }
}
