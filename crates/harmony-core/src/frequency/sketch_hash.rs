//! The hash family of the sketch oracles ([`Cms`](super::Cms), [`Hcms`](super::Hcms),
//! [`Rappor`](super::Rappor)): 128-bit multiply-add-shift followed by a multiply-shift range
//! reduction.
//!
//! Function t of the family with seed s maps a u64 item x to a bucket in [0, m):
//!
//! ```text
//! y_t(x) = ((a_t·x + b_t) mod 2^128) >> 64        (the top 64 bits)
//! h_t(x) = (y_t(x)·m) >> 64                       (⌊m·y_t(x)/2^64⌋)
//! ```
//!
//! with a_t, b_t ∈ [0, 2^128) the words 4t..4t+3 of the SplitMix64 stream seeded with s
//! (a_t = w_4t·2^64 + w_4t+1, b_t = w_4t+2·2^64 + w_4t+3, w_j = [`splitmix64`]`(s + j·φ)`,
//! φ = 0x9E3779B97F4A7C15). The parameters are public and part of the wire contract: a client
//! and the server build the same family from the same seed.
//!
//! # Universality
//! For w-bit keys, x ↦ ((a·x + b) mod 2^w̄) >> (w̄ − l) with a, b uniform in [0, 2^w̄) is strongly
//! universal (2-independent) onto l bits whenever w̄ ≥ w + l − 1 (Dietzfelbinger, "Universal
//! hashing and k-wise independent random variables via integer arithmetic without primes",
//! STACS 1996; Thorup, "High speed hashing for integers and strings", 2015, §3.3). Here
//! w = l = 64 and w̄ = 128: for any two distinct u64 items x ≠ x', (y(x), y(x')) is uniform on
//! [0, 2^64)², over every u64 key (OLH's 64-bit multiply-shift is universal only below 2^33).
//!
//! The range reduction gives bucket β the s_β ∈ {⌊2^64/m⌋, ⌈2^64/m⌉} values y with
//! ⌊m·y/2^64⌋ = β, so for x ≠ x' (by 2-independence)
//!
//! ```text
//! P[h(x) = h(x')] = Σ_β (s_β/2^64)² = 1/m + r(m − r)/(m·2^128),   r = 2^64 mod m,
//! ```
//!
//! which is 1/m exactly when m is a power of two and at most 1/m + m·2^-130 otherwise: the
//! estimators' collision rate 1/m to 2^-100 for every m ≤ 2^30. Distinct functions t ≠ t' have
//! independent parameters, so their buckets are independent.

use crate::sampling::splitmix64;

/// φ = ⌊2^64/golden ratio⌋, the SplitMix64 increment.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A family of hash functions u64 → [0, m), each a 128-bit multiply-add-shift (see the module
/// docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashFamily {
    seed: u64,
    m: u64,
    /// (a_t, b_t) per function.
    params: Vec<(u128, u128)>,
}

/// Word j of the SplitMix64 stream seeded with `seed`.
#[inline]
fn stream_word(seed: u64, j: u64) -> u64 {
    splitmix64(seed.wrapping_add(j.wrapping_mul(GOLDEN)))
}

impl HashFamily {
    /// `functions` hash functions onto [0, m) from `seed`. The caller validates the sizes
    /// (m ≥ 1).
    pub fn new(seed: u64, functions: usize, m: usize) -> Self {
        debug_assert!(m >= 1);
        let params = (0..functions as u64)
            .map(|t| {
                let w = |i: u64| stream_word(seed, 4 * t + i) as u128;
                ((w(0) << 64) | w(1), (w(2) << 64) | w(3))
            })
            .collect();
        HashFamily { seed, m: m as u64, params }
    }
    /// The seed the parameters derive from.
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Number of functions.
    pub fn len(&self) -> usize {
        self.params.len()
    }
    /// True for an empty family.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }
    /// Number of buckets m.
    pub fn buckets(&self) -> usize {
        self.m as usize
    }
    /// The top 64 bits of a_t·x + b_t mod 2^128.
    #[inline(always)]
    pub fn word(&self, t: usize, x: u64) -> u64 {
        let (a, b) = self.params[t];
        (a.wrapping_mul(x as u128).wrapping_add(b) >> 64) as u64
    }
    /// h_t(x) ∈ [0, m).
    #[inline(always)]
    pub fn bucket(&self, t: usize, x: u64) -> usize {
        ((self.word(t, x) as u128 * self.m as u128) >> 64) as usize
    }
    /// Number of functions t in `range` with h_t(x) = h_t(x').
    pub fn collisions(&self, range: std::ops::Range<usize>, x: u64, x2: u64) -> usize {
        range.filter(|&t| self.bucket(t, x) == self.bucket(t, x2)).count()
    }

    // The collision analysis shared by the count-mean sketches (CMS and HCMS): a report of
    // item x, debiased for bucket collisions, estimates f_v with mean 1 for x = v and
    // m/(m − 1)·(γ(x, v) − 1/m) otherwise, γ the fraction of the functions under which x and v
    // collide (0 on average over seeds, up to 2^-100: see the module docs).

    /// γ(x, v): the fraction of the functions under which items x and v collide (1 for x = v).
    pub fn collision_fraction(&self, x: u64, v: u64) -> f64 {
        if x == v { 1.0 } else { self.collisions(0..self.len(), x, v) as f64 / self.len() as f64 }
    }
    /// m/(m − 1): the debiasing factor of a count-mean sketch.
    pub fn debias_scale(&self) -> f64 {
        self.m as f64 / (self.m as f64 - 1.0)
    }
    /// E[one debiased sketch report's estimate of f_v | item x] under this family: 1 for x = v,
    /// otherwise m/(m − 1)·(γ(x, v) − 1/m).
    pub fn report_mean(&self, x: usize, v: usize) -> f64 {
        if x == v {
            1.0
        } else {
            self.debias_scale() * (self.collision_fraction(x as u64, v as u64) - 1.0 / self.m as f64)
        }
    }
    /// E[f̂(v)] for a population with fractions `freqs`, under this family.
    pub fn expectation(&self, freqs: &[f64], v: usize) -> f64 {
        freqs.iter().enumerate().map(|(x, &f)| f * self.report_mean(x, v)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two-sided z of a 1e-5 false-failure rate shared by 24 checks (Bonferroni).
    const Z_BONFERRONI_24: f64 = 5.06;

    /// The collision rate over seeds is 1/m for pairs of items anywhere in u64, including pairs
    /// that differ only above bit 33 (24 z-tests, overall false-failure rate 1e-5).
    #[test]
    fn collision_rate_is_one_over_m_for_every_u64_pair() {
        let pairs: [(u64, u64); 6] =
            [(0, 1), (5, 5 + (1 << 40)), (1 << 33, 1 << 34), (3, u64::MAX), (u64::MAX - 1, u64::MAX), (7, 1 << 63)];
        let seeds = 100_000u64;
        for &m in &[2usize, 3, 16, 1000] {
            for &(x, y) in &pairs {
                let hits = (0..seeds).filter(|&s| HashFamily::new(s, 1, m).collisions(0..1, x, y) == 1).count();
                let p = 1.0 / m as f64;
                let z = (hits as f64 - seeds as f64 * p) / (seeds as f64 * p * (1.0 - p)).sqrt();
                assert!(z.abs() < Z_BONFERRONI_24, "m {m} ({x}, {y}): {hits} collisions of {seeds}, z = {z:.2}");
            }
        }
    }

    /// 2-independence: over seeds, (h(x), h(y)) is uniform on [m]² (χ², 15 dof, critical value
    /// 53.4 at 1e-5/3 per pair: 1e-5 for the three).
    #[test]
    fn bucket_pairs_are_uniform() {
        let m = 4usize;
        for &(x, y) in &[(1u64, 2u64), (9, 9 + (1 << 50)), (0, u64::MAX)] {
            let n = 64_000usize;
            let mut cells = vec![0u64; m * m];
            for s in 0..n as u64 {
                let f = HashFamily::new(s.wrapping_mul(0x2545_F491_4F6C_DD1D), 1, m);
                cells[f.bucket(0, x) * m + f.bucket(0, y)] += 1;
            }
            let e = n as f64 / (m * m) as f64;
            let chi2: f64 = cells.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
            assert!(chi2 < 53.4, "({x}, {y}): chi2 {chi2:.1}, cells {cells:?}");
        }
    }

    #[test]
    fn parameters_are_the_splitmix_stream_and_buckets_are_in_range() {
        let f = HashFamily::new(42, 3, 1000);
        assert_eq!(f.params[1].0 >> 64, splitmix64(42u64.wrapping_add(4u64.wrapping_mul(GOLDEN))) as u128);
        assert_eq!((f.len(), f.buckets(), f.seed()), (3, 1000, 42));
        for x in [0u64, 1, 12345, u64::MAX] {
            for t in 0..3 {
                assert!(f.bucket(t, x) < 1000);
            }
        }
        // A different seed is a different family; the same seed the same one.
        assert_ne!(HashFamily::new(43, 3, 1000), f);
        assert_eq!(HashFamily::new(42, 3, 1000), f);
    }
}
