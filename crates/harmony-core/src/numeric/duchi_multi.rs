//! Duchi et al.'s multidimensional mechanism with Harmony's correction (docs/MECHANISMS.md §B7,
//! "Harmony fix" row).
//!
//! Derivation. The user rounds t ∈ [-1, 1]^d to v ∈ {±1}^d (v_j = +1 with probability
//! (1 + t_j)/2) and outputs B·s with s ∈ {±1}^d: uniform over T₊(v) = {s : ⟨s, v⟩ > 0} with
//! probability π, else uniform over T₋(v) = {s : ⟨s, v⟩ ≤ 0}. With 2^d·h = |T₊| (h = 1/2 for
//! odd d, h = (1 − C(d, d/2)/2^d)/2 for even d):
//!
//! * every s has probability π/|T₊| or (1 − π)/|T₋| given v, and
//!   π = e^ε·h/((e^ε − 1)h + 1) makes their ratio exactly e^ε, for every d;
//! * B = (1 + h(e^ε − 1))/(r(e^ε − 1)) with r = C(d − 1, ⌈(d − 1)/2⌉)/2^d makes E\[B·s | v] = v;
//!   both are Harmony's π = e·C_d^H/((e − 1)C_d^H + 2^d) and
//!   B = (2^d + C_d^H(e − 1))/(C(d − 1, ⌈(d − 1)/2⌉)(e − 1)) divided through by 2^d, so they stay
//!   finite for any d (the central binomial ratios are computed without ever forming 2^d).
//!
//! Var_j = B² − t_j² (E\[(B s_j)²] = B²).
//!
//! Sampler (O(d), never enumerating 2^d outputs): draw a uniformly random flip mask f ∈ {0,1}^d
//! and set s = v with the bits of f flipped. The agreement count a = d − |f| is Binomial(d, 1/2),
//! i.e. P(a) ∝ C(d, a), and given a the set of agreeing positions is uniform — exactly steps 2–3
//! of the agreement-count sampler. Restricting to the chosen side: for T₊ (a > d/2), a mask with
//! a < d/2 is complemented (a bijection onto a > d/2) and a = d/2 (even d) is redrawn; for T₋
//! (a ≤ d/2), odd d complements a > d/2, even d redraws it (complementing would double the
//! weight of a < d/2 against a = d/2). Each draw costs ⌈d/64⌉ random words and succeeds with
//! probability ≥ 1/2.

use super::VectorMechanism;
use crate::error::{Error, Result};
use crate::params::{Epsilon, check_dimension};
use crate::sampling::{bernoulli, bernoulli_fast, fill_bits, padding_mask};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// A [`DuchiMulti`] report: the sign vector s ∈ {±1}^d packed in bits (bit j of the vector is bit
/// j % 64 of word j / 64; 1 means +1). The padding bits of the last word are zero. The decoded
/// vector is B·s, B public.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DuchiMultiReport {
    /// ⌈d/64⌉ words of sign bits.
    pub bits: Vec<u64>,
}

impl WireReport for DuchiMultiReport {
    const KIND: WireKind = ReportKind::DuchiMulti.wire();
}

impl DuchiMultiReport {
    /// Whether coordinate j is +1.
    #[inline]
    pub fn sign(&self, j: usize) -> bool {
        (self.bits[j / 64] >> (j % 64)) & 1 == 1
    }
}

/// Duchi et al.'s multidimensional mechanism for t ∈ [-1, 1]^d, with Harmony's correction of π
/// and B so that it is exactly ε-LDP and unbiased for even d too.
///
/// # Privacy
/// Given the rounded v, an output s has probability π/|T₊| if ⟨s, v⟩ > 0 and (1 − π)/|T₋|
/// otherwise; with Harmony's π, (π/|T₊|)/((1 − π)/|T₋|) = e^ε exactly. Any two v, v' give s
/// one of these two probabilities each, so their ratio is at most e^ε (attained at v' = −v); the
/// rounding from t to v is a t-dependent mixture over v, which keeps the bound: exactly ε-LDP.
///
/// # Utility
/// Var_j = B² − t_j²; worst case B² at t = 0. B at ε = 1 for d = 1..4: 2.1640, 3.3279, 4.3279,
/// 4.7705 (Duchi's uncorrected constant for even d would be 6.4919, 7.9345, and not private).
/// d bits per report.
///
/// # Example
/// ```
/// use harmony_core::numeric::{DuchiMulti, VectorMechanism};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mech = DuchiMulti::new(2.0, 4)?;
/// let mut rng = fast_rng(42);
/// let rows: Vec<Vec<f64>> = (0..5000).map(|i| vec![0.5, -0.5, 0.0, (i % 3) as f64 - 1.0]).collect();
/// let mut reports = Vec::new();
/// mech.randomize_batch(&rows, &mut rng, &mut reports)?;
/// let mut agg = mech.aggregator();
/// agg.add_batch(&reports)?;
/// let est = agg.estimate();
/// for (j, truth) in [0.5, -0.5, 0.0, 0.0].into_iter().enumerate() {
///     println!("coordinate {j}: {:.3} ± {:.3} (truth {truth})", est[j].value, est[j].std_error);
///     assert!((est[j].value - truth).abs() < 5.0 * est[j].std_error);
/// }
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DuchiMulti {
    eps: Epsilon,
    d: usize,
    words: usize,
    /// P[output in T₊].
    pi: f64,
    /// B.
    b: f64,
    /// |T₊|/2^d.
    h: f64,
}

impl DuchiMulti {
    /// The corrected Duchi multidimensional mechanism with budget ε (in the global range of [`Epsilon`]) for
    /// d ∈ [1, 2²⁴] coordinates.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_dimension("d", d)?;
        let (e, em1) = (eps.exp(), eps.exp_m1());
        let h = if d % 2 == 1 { 0.5 } else { 0.5 * (1.0 - central_binomial_ratio(d)) };
        let r = 0.5 * central_binomial_ratio(2 * (d / 2));
        let pi = e * h / (em1 * h + 1.0);
        let b = (1.0 + h * em1) / (r * em1);
        Ok(DuchiMulti { eps, d, words: d.div_ceil(64), pi, b, h })
    }

    /// The output magnitude B: every decoded coordinate is ±B.
    pub fn scale(&self) -> f64 {
        self.b
    }
    /// π, the probability that ⟨s, v⟩ > 0.
    pub fn pi(&self) -> f64 {
        self.pi
    }
    /// |T₊|/2^d, the fraction of sign vectors s with ⟨s, v⟩ > 0.
    pub fn positive_fraction(&self) -> f64 {
        self.h
    }
    /// Number of 64-bit words of a report, ⌈d/64⌉.
    pub fn words(&self) -> usize {
        self.words
    }

    /// Randomizes t into `report`, reusing its buffer (no allocation once it has ⌈d/64⌉ words of
    /// capacity). t must have length d with coordinates in [-1, 1] (unchecked).
    pub fn randomize_into<R: Rng + ?Sized>(&self, t: &[f64], rng: &mut R, report: &mut DuchiMultiReport) {
        debug_assert_eq!(t.len(), self.d);
        let bits = &mut report.bits;
        bits.clear();
        bits.resize(self.words, 0);
        // 1. The side, then a uniform flip mask with the right number of flips.
        let positive = bernoulli(rng, self.pi);
        let d = self.d;
        loop {
            fill_bits(rng, bits, d);
            let flips = bits.iter().map(|w| w.count_ones() as usize).sum::<usize>();
            // Agreements a = d − flips; T₊ is a > d/2, i.e. 2·flips < d.
            let in_plus = 2 * flips < d;
            if positive == in_plus {
                break;
            }
            if 2 * flips == d {
                // A tie (even d) is in T₋, but we want T₊: redraw.
                continue;
            }
            if positive || d % 2 == 1 {
                // Complement onto the other side (flips ↦ d − flips).
                complement(bits, d);
                break;
            }
            // Even d, wanted T₋, got a > d/2: redraw.
        }
        // 2. Round t to v and output s = v with the mask's bits flipped.
        for (w, chunk) in bits.iter_mut().zip(t.chunks(64)) {
            let mut v = 0u64;
            for (i, &tj) in chunk.iter().enumerate() {
                v |= (bernoulli_fast(rng, 0.5 + 0.5 * tj) as u64) << i;
            }
            *w ^= v;
        }
        if let Some(last) = bits.last_mut() {
            *last &= padding_mask(d);
        }
    }
}

/// Flips the d valid bits of a packed vector.
fn complement(bits: &mut [u64], d: usize) {
    for w in bits.iter_mut() {
        *w = !*w;
    }
    if let Some(last) = bits.last_mut() {
        *last &= padding_mask(d);
    }
}

/// C(n, n/2)/2^n for even n, without forming 2^n: the product ∏_{i ≤ n/2} (2i − 1)/(2i) for
/// n/2 < 1000 (relative error ~1e-15), else the asymptotic series
/// (πk)^{-1/2}(1 − 1/(8k) + 1/(128k²) + 5/(1024k³) − 21/(32768k⁴)), k = n/2, whose truncation
/// error is below 1e-18 there.
pub(crate) fn central_binomial_ratio(n: usize) -> f64 {
    debug_assert!(n.is_multiple_of(2));
    let k = n / 2;
    if k < 1000 {
        (1..=k).fold(1.0, |acc, i| acc * (2 * i - 1) as f64 / (2 * i) as f64)
    } else {
        let k = k as f64;
        let s =
            1.0 - 1.0 / (8.0 * k) + 1.0 / (128.0 * k * k) + 5.0 / (1024.0 * k.powi(3)) - 21.0 / (32768.0 * k.powi(4));
        s / (std::f64::consts::PI * k).sqrt()
    }
}

impl VectorMechanism for DuchiMulti {
    type Report = DuchiMultiReport;

    fn name(&self) -> &'static str {
        "duchi-multi"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    fn dimension(&self) -> usize {
        self.d
    }
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: &[f64], rng: &mut R) -> DuchiMultiReport {
        let mut report = DuchiMultiReport { bits: Vec::with_capacity(self.words) };
        self.randomize_into(t, rng, &mut report);
        report
    }
    fn validate(&self, report: &DuchiMultiReport) -> Result<()> {
        if report.bits.len() != self.words {
            return Err(Error::report(
                "bits",
                format!("{} words", report.bits.len()),
                format!("{} 64-bit words (d = {})", self.words, self.d),
            ));
        }
        let last = report.bits[self.words - 1];
        let padding = last & !padding_mask(self.d);
        if padding != 0 {
            return Err(Error::report(
                "bits",
                format!("padding bits {padding:#x} set in word {}", self.words - 1),
                format!("zero bits at positions >= d = {}", self.d),
            ));
        }
        Ok(())
    }
    #[inline]
    fn accumulate(&self, report: &DuchiMultiReport, sum: &mut [f64], sum_sq: &mut [f64]) {
        let (b, b2) = (self.b, self.b * self.b);
        for (chunk, (s, s2)) in report.bits.iter().zip(sum.chunks_mut(64).zip(sum_sq.chunks_mut(64))) {
            for (i, (x, x2)) in s.iter_mut().zip(s2.iter_mut()).enumerate() {
                *x += if (chunk >> i) & 1 == 1 { b } else { -b };
                *x2 += b2;
            }
        }
    }
    fn variance_coefficients(&self) -> (f64, f64) {
        (-1.0, self.b * self.b)
    }
    /// ±1 per coordinate (units of B): integer sums, exact whatever the order.
    fn accumulate_units(&self, report: &DuchiMultiReport, sum: &mut [f64], sum_sq: &mut [f64]) {
        for (chunk, (s, s2)) in report.bits.iter().zip(sum.chunks_mut(64).zip(sum_sq.chunks_mut(64))) {
            for (i, (x, x2)) in s.iter_mut().zip(s2.iter_mut()).enumerate() {
                *x += if (chunk >> i) & 1 == 1 { 1.0 } else { -1.0 };
                *x2 += 1.0;
            }
        }
    }
    fn unit(&self) -> f64 {
        self.b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire;

    /// C(n, k) in f64 (small n).
    fn binom(n: u64, k: u64) -> f64 {
        (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
    }

    #[test]
    fn central_binomial_ratio_is_accurate_across_the_switch() {
        for n in [0usize, 2, 4, 10, 40] {
            let exact = binom(n as u64, n as u64 / 2) / 2f64.powi(n as i32);
            assert!((central_binomial_ratio(n) / exact - 1.0).abs() < 1e-14, "n = {n}");
        }
        // Product and series agree at the switch (k = 999 vs 1000 differ by the factor 1999/2000).
        let below = central_binomial_ratio(1998);
        let above = central_binomial_ratio(2000);
        assert!((above / (below * 1999.0 / 2000.0) - 1.0).abs() < 1e-14);
        // Large d stays finite and positive.
        let m = DuchiMulti::new(1.0, 1 << 24).unwrap();
        assert!(m.scale().is_finite() && m.scale() > 0.0 && m.pi() > 0.5 && m.pi() < 1.0);
    }

    #[test]
    fn reference_scales_at_eps_1() {
        let want = [2.1640, 3.3279, 4.3279, 4.7705, 5.7705, 5.9247, 6.9247, 6.9139];
        for (d, &w) in (1..=8).zip(&want) {
            let b = DuchiMulti::new(1.0, d).unwrap().scale();
            assert!((b - w).abs() < 1e-4, "d {d}: B {b} vs {w}");
        }
        // Odd d: all variants coincide with c·2^(d-1)/C(d-1,(d-1)/2).
        let c = Epsilon::new(1.0).unwrap().c();
        for d in [1u64, 3, 5, 7, 9] {
            let b = c * 2f64.powi(d as i32 - 1) / binom(d - 1, (d - 1) / 2);
            assert!((DuchiMulti::new(1.0, d as usize).unwrap().scale() / b - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn validation_and_wire() {
        let m = DuchiMulti::new(1.0, 70).unwrap();
        let e = m.validate(&DuchiMultiReport { bits: vec![0] }).unwrap_err();
        assert!(e.to_string().contains("bits is \"1 words\"") && e.to_string().contains("2 64-bit words"), "{e}");
        let e = m.validate(&DuchiMultiReport { bits: vec![0, 1 << 6] }).unwrap_err();
        assert!(e.to_string().contains("padding bits 0x40") && e.to_string().contains("d = 70"), "{e}");
        let r = DuchiMultiReport { bits: vec![u64::MAX, 0b11_1111] };
        assert!(m.validate(&r).is_ok());
        assert_eq!(wire::decode::<DuchiMultiReport>(&wire::encode(&r)).unwrap(), r);
        assert_eq!(wire::from_json::<DuchiMultiReport>(&wire::to_json(&r)).unwrap(), r);
        let y = m.decode(&r).unwrap();
        assert!(y.iter().all(|&x| x == m.scale()));
        assert!(matches!(DuchiMulti::new(1.0, 0), Err(Error::InvalidParameter { name: "d", .. })));
    }
}
