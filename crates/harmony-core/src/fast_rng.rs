//! [`FastRng`]: the seeded generator of simulations, tests and benchmarks (never of clients).
//!
//! Eight independent Xoshiro256++ streams (Blackman & Vigna 2019) advanced in lock step, their
//! outputs interleaved into a buffer of [`BLOCK`] words that is refilled in one go. The refill
//! has three builds, chosen once, at construction, by run-time detection: plain Rust over
//! `[u64; 8]` arrays (portable), the same code compiled with AVX-512 enabled (LLVM turns each
//! state update into a handful of 512-bit instructions with native 64-bit rotates, about five
//! times faster than one scalar Xoshiro256++), and AVX2 intrinsics (two 256-bit registers per
//! state word, rotates as two shifts and an or: LLVM leaves the portable code scalar under AVX2
//! because AVX2 has no 64-bit rotate; about three times the portable rate on AMD Zen 3). All
//! three compute the same integers, so a seed gives the same stream on every machine.
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
    path: Path,
}

impl std::fmt::Debug for FastRng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the state (it determines every future draw).
        f.debug_struct("FastRng").field("path", &self.path).finish_non_exhaustive()
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

/// The refill with AVX2 intrinsics: each state word of the 8 streams is two 256-bit registers.
/// AVX2 has no 64-bit rotate, so LLVM leaves `refill_portable` scalar under `avx2`; here a
/// rotate is two shifts and an or. The same integers as [`refill_portable`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
fn refill_avx2(s: &mut State, out: &mut [u64; BLOCK]) {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi64, _mm256_or_si256, _mm256_set_epi64x, _mm256_slli_epi64, _mm256_srli_epi64,
        _mm256_storeu_si256, _mm256_xor_si256,
    };
    macro_rules! load {
        ($w:expr, $half:literal) => {{
            let q = |i: usize| $w[4 * $half + i] as i64;
            _mm256_set_epi64x(q(3), q(2), q(1), q(0))
        }};
    }
    macro_rules! store {
        ($v:expr, $dst:expr) => {{
            let dst: &mut [u64; 4] = $dst.try_into().expect("4 words");
            // SAFETY: `dst` is 4 initialised `u64`s = 32 writable bytes; `storeu` has no
            // alignment requirement; AVX2 is enabled here (this function's target feature).
            unsafe { _mm256_storeu_si256(dst.as_mut_ptr().cast::<__m256i>(), $v) }
        }};
    }
    macro_rules! rotl {
        ($x:expr, $k:literal) => {
            _mm256_or_si256(_mm256_slli_epi64::<$k>($x), _mm256_srli_epi64::<{ 64 - $k }>($x))
        };
    }
    let mut st = [
        [load!(s[0], 0), load!(s[0], 1)],
        [load!(s[1], 0), load!(s[1], 1)],
        [load!(s[2], 0), load!(s[2], 1)],
        [load!(s[3], 0), load!(s[3], 1)],
    ];
    for step in out.chunks_exact_mut(LANES) {
        for h in 0..2 {
            let [s0, s1, s2, s3] = [st[0][h], st[1][h], st[2][h], st[3][h]];
            let r = _mm256_add_epi64(rotl!(_mm256_add_epi64(s0, s3), 23), s0);
            store!(r, &mut step[4 * h..4 * h + 4]);
            let t = _mm256_slli_epi64::<17>(s1);
            let s2 = _mm256_xor_si256(s2, s0);
            let s3 = _mm256_xor_si256(s3, s1);
            let s1 = _mm256_xor_si256(s1, s2);
            let s0 = _mm256_xor_si256(s0, s3);
            let s2 = _mm256_xor_si256(s2, t);
            let s3 = rotl!(s3, 45);
            st[0][h] = s0;
            st[1][h] = s1;
            st[2][h] = s2;
            st[3][h] = s3;
        }
    }
    for (w, regs) in s.iter_mut().zip(&st) {
        for (h, &v) in regs.iter().enumerate() {
            store!(v, &mut w[4 * h..4 * h + 4]);
        }
    }
}

/// Which build of the refill runs (all three compute the same integers). Off x86_64 only the
/// portable one exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
enum Path {
    Portable,
    Avx2,
    Avx512,
}

/// The widest refill this CPU supports (run-time detection; the result is cached by std).
fn detect_path() -> Path {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Path::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return Path::Avx2;
        }
    }
    Path::Portable
}

/// One block into `out`, through the build of the refill that `path` names.
#[inline]
fn refill_block(s: &mut State, path: Path, out: &mut [u64; BLOCK]) {
    #[cfg(target_arch = "x86_64")]
    match path {
        Path::Avx512 => {
            // SAFETY: `path` is `Avx512` only if `is_x86_feature_detected!("avx512f")` returned
            // true on this machine (`detect_path`), so the instructions `refill_avx512` is
            // compiled to exist here. Its body is safe Rust (no pointers; indexing is
            // bounds-checked).
            #[allow(unsafe_code)]
            unsafe {
                refill_avx512(s, out)
            };
            return;
        }
        Path::Avx2 => {
            // SAFETY: as above: `path` is `Avx2` only if `is_x86_feature_detected!("avx2")`
            // returned true (`detect_path`, `FastRng::avx2`).
            #[allow(unsafe_code)]
            unsafe {
                refill_avx2(s, out)
            };
            return;
        }
        Path::Portable => {}
    }
    let _ = path;
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
        FastRng { s, buf: [0; BLOCK], pos: BLOCK, path: detect_path() }
    }

    /// The same generator forced onto the portable refill (for the test that all paths agree).
    #[doc(hidden)]
    pub fn portable(seed: u64) -> Self {
        FastRng { path: Path::Portable, ..Self::new(seed) }
    }

    /// The same generator on the AVX2 refill, if this CPU has AVX2 (for the test that all paths
    /// agree); `None` otherwise.
    #[doc(hidden)]
    pub fn avx2(seed: u64) -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return Some(FastRng { path: Path::Avx2, ..Self::new(seed) });
        }
        let _ = seed;
        None
    }

    /// The name of the refill build in use: `"avx512"`, `"avx2"` or `"portable"`.
    pub fn refill_path(&self) -> &'static str {
        match self.path {
            Path::Avx512 => "avx512",
            Path::Avx2 => "avx2",
            Path::Portable => "portable",
        }
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self) {
        refill_block(&mut self.s, self.path, &mut self.buf);
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
            refill_block(&mut self.s, self.path, block);
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
    /// `fill_bytes_via_next_word` would give, but copied from the buffer block by block (one
    /// `memcpy` per block on little-endian targets), and whole blocks written straight into an
    /// 8-byte-aligned `dst` (as [`FastRng::fill_words`] does; bulk word draws through
    /// [`crate::sampling::fill_words`] land here).
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        let mut dst = dst;
        while dst.len() >= 8 {
            if self.pos >= BLOCK {
                #[cfg(target_endian = "little")]
                if dst.len() >= 8 * BLOCK && dst.as_ptr().align_offset(std::mem::align_of::<u64>()) == 0 {
                    let (head, rest) = dst.split_at_mut(8 * BLOCK);
                    // SAFETY: `head` is 8·BLOCK initialised, writable bytes, aligned for `u64`
                    // (checked just above), exclusively borrowed for the life of the view; every
                    // bit pattern is a valid `u64`. On a little-endian target the words' bytes in
                    // memory are their little-endian bytes, as `copy_le` would write them.
                    #[allow(unsafe_code)]
                    let block = unsafe { &mut *head.as_mut_ptr().cast::<[u64; BLOCK]>() };
                    refill_block(&mut self.s, self.path, block);
                    dst = rest;
                    continue;
                }
                self.refill();
            }
            let words = (BLOCK - self.pos).min(dst.len() / 8);
            let (head, rest) = dst.split_at_mut(8 * words);
            copy_le(&self.buf[self.pos..self.pos + words], head);
            self.pos += words;
            dst = rest;
        }
        if !dst.is_empty() {
            let w = self.word().to_le_bytes();
            dst.copy_from_slice(&w[..dst.len()]);
        }
        Ok(())
    }
}

/// Writes `words` little-endian into `dst` (8 bytes each; `dst.len()` = 8·`words.len()`).
#[inline(always)]
fn copy_le(words: &[u64], dst: &mut [u8]) {
    debug_assert_eq!(dst.len(), 8 * words.len());
    #[cfg(target_endian = "little")]
    {
        // SAFETY: `words` is n initialised `u64`s = 8n readable bytes with no padding, borrowed
        // for the life of the view; on a little-endian target their in-memory bytes are the
        // little-endian bytes of each word, in order.
        #[allow(unsafe_code)]
        let src = unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), 8 * words.len()) };
        dst.copy_from_slice(src);
    }
    #[cfg(not(target_endian = "little"))]
    for (w, c) in words.iter().zip(dst.chunks_exact_mut(8)) {
        c.copy_from_slice(&w.to_le_bytes());
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
    fn lanes_are_xoshiro256plusplus_and_all_paths_agree() {
        let mut a = FastRng::new(42);
        let mut lanes: Vec<[u64; 4]> = (0..LANES).map(|l| [a.s[0][l], a.s[1][l], a.s[2][l], a.s[3][l]]).collect();
        let mut b = FastRng::portable(42);
        let mut c = FastRng::avx2(42);
        for i in 0..5 * BLOCK + 3 {
            let expect = xoshiro_next(&mut lanes[i % LANES]);
            assert_eq!(a.next_u64(), expect, "word {i} ({})", a.refill_path());
            assert_eq!(b.next_u64(), expect, "word {i} (portable)");
            if let Some(c) = c.as_mut() {
                assert_eq!(c.next_u64(), expect, "word {i} (avx2)");
            }
        }
        // fill_words (whole blocks straight into the destination) on every path.
        let mut want = vec![0u64; 3 * BLOCK + 5];
        FastRng::portable(43).fill_words(&mut want);
        let mut got = vec![0u64; want.len()];
        FastRng::new(43).fill_words(&mut got);
        assert_eq!(got, want);
        if let Some(mut c) = FastRng::avx2(43) {
            c.fill_words(&mut got);
            assert_eq!(got, want, "avx2");
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
    fn fill_bytes_whole_blocks_in_place_are_the_word_stream() {
        // 8-byte-aligned destinations of whole blocks take the in-place refill; odd offsets and
        // a partly drained buffer the copying path. Every path gives the same bytes.
        #[repr(align(64))]
        struct Aligned([u8; 8 * (3 * BLOCK + 9)]);
        let mut buf = Aligned([0; 8 * (3 * BLOCK + 9)]);
        for (skip, offset, len) in
            [(0, 0, 2 * BLOCK * 8), (0, 8, 3 * BLOCK * 8), (5, 0, 3 * BLOCK * 8), (0, 3, 2 * BLOCK * 8 + 5)]
        {
            let mut a = FastRng::new(12);
            let mut b = FastRng::new(12);
            for _ in 0..skip {
                a.next_u64();
                b.next_u64();
            }
            let dst = &mut buf.0[offset..offset + len];
            a.fill_bytes(dst);
            let want: Vec<u8> = (0..len.div_ceil(8)).flat_map(|_| b.next_u64().to_le_bytes()).take(len).collect();
            assert_eq!(dst, &want[..], "skip {skip}, offset {offset}, len {len}");
            assert_eq!(a.next_u64(), b.next_u64(), "streams stay in step");
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
