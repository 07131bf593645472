//! Duchi et al.'s one-dimensional mechanism (docs/MECHANISMS.md §B2): one bit per user.
//!
//! Derivation. The report is +C with probability P₊(t) = 1/2 + t/(2C), else −C, with
//! C = (e^ε + 1)/(e^ε − 1). Then E\[Y] = C(2P₊ − 1) = t and E\[Y²] = C², so Var = C² − t².
//! P₊ is increasing in t, so the worst ratio is P₊(1)/P₊(−1) = (C + 1)/(C − 1) = e^ε (and the
//! same for the −C output by symmetry).

use super::{MeanAggregator, NumericMechanism, NumericReport, check_unit_batch};
use crate::error::{Error, Result};
use crate::params::Epsilon;
use crate::sampling::{bernoulli_fast, bernoulli63_from_word, dispatch_avx2, fill_words};
use rand::Rng;

/// Duchi et al.'s 1-D mechanism: reports ±C with C = (e^ε + 1)/(e^ε − 1).
///
/// # Privacy
/// P[+C | t] = 1/2 + t/(2C) ranges over [1/(e^ε + 1), e^ε/(e^ε + 1)] for t ∈ [-1, 1], so the
/// probability of either output changes by a factor of at most e^ε between two inputs, with
/// equality at t = ±1: exactly ε-LDP. (Numerically: the coin is drawn against P₊·2⁶³, exact for
/// P₊ ≥ 2⁻¹¹, within 2⁻⁶³ below; the smaller probability 1/(e^ε + 1) is computed with a
/// relative error near e^ε·2⁻⁵³, which is why ε is capped at [`crate::params::MAX_EPSILON`] = 20:
/// there the realised ratio is e^ε to 10⁻⁷ relative, tested; at ε ≈ 37 the probability would
/// round to 0.)
///
/// # Utility
/// Var = C² − t²; worst case C² at t = 0. `variance_coefficients()` is (−1, C²).
/// One bit per report.
///
/// # Example
/// ```
/// use harmony_core::numeric::{Duchi, NumericMechanism};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mech = Duchi::new(1.0)?;
/// let mut rng = fast_rng(42);
/// let ts: Vec<f64> = (0..5000).map(|i| ((i * 7) % 200) as f64 / 100.0 - 1.0).collect();
/// let mut reports = Vec::new();
/// mech.randomize_batch(&ts, &mut rng, &mut reports)?;
/// let mut agg = mech.aggregator();
/// agg.add_batch(&reports)?;
/// let truth = ts.iter().sum::<f64>() / ts.len() as f64;
/// let est = agg.estimate();
/// println!("duchi: {:.3} ± {:.3} (truth {truth:.3})", est.value, est.std_error);
/// assert!((est.value - truth).abs() < 5.0 * est.std_error);
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Duchi {
    eps: Epsilon,
    c: f64,
    half_inv_c: f64,
}

impl Duchi {
    /// Duchi's mechanism with budget ε (in the global range of [`Epsilon`]).
    pub fn new(epsilon: f64) -> Result<Self> {
        Ok(Self::from_epsilon(Epsilon::new(epsilon)?))
    }

    /// From an already validated ε.
    pub fn from_epsilon(eps: Epsilon) -> Self {
        let c = eps.c();
        Duchi { eps, c, half_inv_c: 0.5 / c }
    }

    /// The output magnitude C = (e^ε + 1)/(e^ε − 1).
    pub fn scale(&self) -> f64 {
        self.c
    }

    /// P[report = +C | t] = 1/2 + t/(2C).
    #[inline]
    pub fn prob_positive(&self, t: f64) -> f64 {
        0.5 + t * self.half_inv_c
    }
}

impl Duchi {
    /// Randomizes a batch into packed sign bits: bit i % 64 of word i / 64 is 1 iff report i is
    /// +C (appended to `out`, ⌈n/64⌉ words; the padding bits of the last word are 0). The same
    /// kernel and draws as [`NumericMechanism::randomize_batch`].
    /// All or nothing: if any value is NaN or outside [-1, 1], nothing is appended and the
    /// error names the first bad index. [`Duchi::add_signs`] aggregates such words.
    pub fn randomize_signs<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<u64>) -> Result<()> {
        let start = out.len();
        out.reserve(ts.len().div_ceil(64));
        if !self.signs(ts, rng, |bits, _| out.push(bits)) {
            out.truncate(start);
            check_unit_batch(ts)?;
        }
        Ok(())
    }

    /// Adds `n` packed sign reports (as written by [`Duchi::randomize_signs`]) to `agg`. Errors
    /// (nothing added): `signs` is not ⌈n/64⌉ words, or a padding bit is set.
    pub fn add_signs(&self, agg: &mut MeanAggregator<Duchi>, signs: &[u64], n: usize) -> Result<()> {
        if signs.len() != n.div_ceil(64) {
            return Err(Error::report(
                "signs",
                format!("{} words", signs.len()),
                format!("{} words for {n} reports", n.div_ceil(64)),
            ));
        }
        if let Some(&last) = signs.last()
            && last & !crate::sampling::padding_mask(n) != 0
        {
            return Err(Error::report(
                "signs",
                format!("padding bits {last:#x}"),
                format!("zero bits at positions >= {}", n % 64),
            ));
        }
        let plus: u64 = signs.iter().map(|w| w.count_ones() as u64).sum();
        agg.add_sums(n as u64, self.c * (2.0 * plus as f64 - n as f64), n as f64 * self.c * self.c)
    }

    /// Feeds `sink` one word of 64 sign bits per 64 values (and the number k of values in it);
    /// false if some value is NaN or outside [-1, 1] (the bits are then garbage).
    #[inline]
    fn signs<R: Rng + ?Sized, F: FnMut(u64, usize)>(&self, ts: &[f64], rng: &mut R, sink: F) -> bool {
        dispatch_avx2!(self.signs_avx2(ts, rng, sink), self.signs_kernel(ts, rng, sink))
    }

    /// [`Duchi::signs_kernel`] compiled with AVX2 and BMI2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi2,popcnt")]
    fn signs_avx2<R: Rng + ?Sized, F: FnMut(u64, usize)>(&self, ts: &[f64], rng: &mut R, sink: F) -> bool {
        self.signs_kernel(ts, rng, sink)
    }

    /// The batch kernel: 16 random bits per value (16 words per 64 values), compared with the
    /// top 16 bits of P₊(t) = p in a branch-free loop that LLVM vectorises: U₁₆ < ⌊2¹⁶p⌋ is +C,
    /// U₁₆ > ⌊2¹⁶p⌋ is −C, and the values where they are equal (probability 2⁻¹⁶) are decided
    /// afterwards, scalar, by a fresh word against the rest of p's bits
    /// ([`bernoulli63_from_word`] of frac(2¹⁶p)). P[+C] = p exactly for p ≥ 2⁻¹¹, as in
    /// `randomize_unchecked` (whose stream is not the same).
    #[inline(always)]
    fn signs_kernel<R: Rng + ?Sized, F: FnMut(u64, usize)>(&self, ts: &[f64], rng: &mut R, mut sink: F) -> bool {
        const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5·2⁵²: bits(x + MAGIC) − bits(MAGIC) = x
        let mut ok = true;
        let mut words = [0u64; 16];
        let mut ties = [false; 64];
        // Value i uses bits 16·(i / 16).. of word i % 16: (sign bit, tie).
        let lane = |t: f64, w: u64, i: usize| {
            let scaled = (self.prob_positive(t) * 65_536.0).floor();
            let top = ((scaled + MAGIC).to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64);
            let r = ((w >> (16 * (i / 16))) & 0xffff) as i64;
            (r < top, r == top)
        };
        for chunk in ts.chunks(64) {
            let k = chunk.len();
            fill_words(rng, &mut words[..k.min(16)]);
            let mut bits = 0u64;
            let mut good = true;
            let mut any_tie = false;
            if let Ok(c) = <&[f64; 64]>::try_from(chunk) {
                // Four runs of 16 values, each with a constant shift (vectorised).
                for q in 0..4 {
                    let c: &[f64; 16] = c[16 * q..16 * q + 16].try_into().expect("16 values");
                    let mut part = 0u64;
                    let mut t16 = false;
                    for j in 0..16 {
                        good &= (-1.0..=1.0).contains(&c[j]);
                        let (b, tie) = lane(c[j], words[j], 16 * q);
                        part |= (b as u64) << j;
                        ties[16 * q + j] = tie;
                        t16 |= tie;
                    }
                    bits |= part << (16 * q);
                    any_tie |= t16;
                }
            } else {
                for (i, &t) in chunk.iter().enumerate() {
                    good &= (-1.0..=1.0).contains(&t);
                    let (b, tie) = lane(t, words[i % 16], i);
                    bits |= (b as u64) << i;
                    ties[i] = tie;
                    any_tie |= tie;
                }
            }
            if any_tie {
                for (i, &t) in chunk.iter().enumerate() {
                    if ties[i] {
                        let scaled = self.prob_positive(t) * 65_536.0;
                        let b = bernoulli63_from_word(rng.next_u64(), scaled - scaled.floor());
                        bits = bits & !(1u64 << i) | (b as u64) << i;
                    }
                }
            }
            ok &= good;
            sink(bits, k);
        }
        ok
    }
}

/// Decodes a `Sign` report of magnitude `scale` (Duchi, HM's Duchi branch).
#[inline]
pub(crate) fn decode_sign(report: &NumericReport, scale: f64, mechanism: &str) -> Result<f64> {
    match *report {
        NumericReport::Sign(positive) => Ok(if positive { scale } else { -scale }),
        NumericReport::Fixed(u) => {
            Err(Error::report("kind", format!("Fixed({u})"), format!("a Sign report for {mechanism}")))
        }
    }
}

impl NumericMechanism for Duchi {
    fn name(&self) -> &'static str {
        "duchi"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    #[inline(always)]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport {
        NumericReport::Sign(bernoulli_fast(rng, self.prob_positive(t)))
    }
    /// Vectorised batch ([`Duchi::signs_kernel`], an AVX2 build chosen at run time): the same
    /// distribution as `randomize_unchecked` (16 random bits per value in the common case).
    fn randomize_batch<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<NumericReport>) -> Result<()> {
        let start = out.len();
        out.reserve(ts.len());
        let ok = self.signs(ts, rng, |bits, k| {
            out.extend((0..k).map(|i| NumericReport::Sign((bits >> i) & 1 == 1)));
        });
        if !ok {
            out.truncate(start);
            check_unit_batch(ts)?;
        }
        Ok(())
    }
    fn decode(&self, report: &NumericReport) -> Result<f64> {
        decode_sign(report, self.c, "duchi")
    }
    fn variance_coefficients(&self) -> (f64, f64) {
        (-1.0, self.c * self.c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_probability_ratio_is_exactly_e_eps() {
        for eps in [0.05, 0.5, 1.0, 2.0, 4.0, 10.0] {
            let m = Duchi::new(eps).unwrap();
            let grid: Vec<f64> = (0..=40).map(|i| -1.0 + i as f64 * 0.05).collect();
            let mut worst = 0.0f64;
            for &t in &grid {
                for &u in &grid {
                    let (pt, pu) = (m.prob_positive(t), m.prob_positive(u));
                    worst = worst.max(pt / pu).max((1.0 - pt) / (1.0 - pu));
                }
            }
            let target = eps.exp();
            assert!((worst / target - 1.0).abs() < 1e-9, "eps {eps}: max ratio {worst}, e^eps {target}");
            // Unbiased: C·(2P₊ − 1) = t, and E[Y²] = C².
            for &t in &grid {
                let mean = m.scale() * (2.0 * m.prob_positive(t) - 1.0);
                assert!((mean - t).abs() < 1e-12, "eps {eps}, t {t}: mean {mean}");
            }
        }
    }

    /// The realised probabilities (what the samplers' integer thresholds give) keep the ratio
    /// e^ε to 10⁻⁶ relative in ln over the whole accepted range, for the scalar coin
    /// (⌊P₊·2⁶³⌋/2⁶³) and the batch coin (16 bits, then 63 bits of the rest). Beyond the cap the
    /// constants break: P₊(−1) = 1/2 − 1/(2C) is 31% off at ε = 37 and rounds to 0 at ε = 38 (an
    /// impossible output).
    #[test]
    fn realised_probabilities_keep_the_ratio_up_to_max_epsilon() {
        let scalar = |p: f64| ((p * 9_223_372_036_854_775_808.0) as i64 as f64) / 9_223_372_036_854_775_808.0;
        let batch = |p: f64| {
            let top = (p * 65_536.0).floor();
            let rest = p * 65_536.0 - top;
            (top + scalar(rest)) / 65_536.0
        };
        for eps in [crate::params::MIN_EPSILON, 0.5, 1.0, 4.0, 10.0, 15.0, crate::params::MAX_EPSILON] {
            let m = Duchi::new(eps).unwrap();
            for realise in [&scalar as &dyn Fn(f64) -> f64, &batch] {
                let (hi, lo) = (realise(m.prob_positive(1.0)), realise(m.prob_positive(-1.0)));
                assert!(lo > 0.0 && hi < 1.0, "eps {eps}: an output is impossible");
                let worst = (hi / lo).ln().max(((1.0 - lo) / (1.0 - hi)).ln());
                assert!(worst <= eps * (1.0 + 1e-6), "eps {eps}: realised ln-ratio {worst}");
                assert!(worst >= eps * (1.0 - 1e-6), "eps {eps}: realised ln-ratio {worst}");
            }
        }
        // P₊(−1) = 1/2 − 1/(2C) as computed, against 1/(e^ε + 1): 31% off at ε = 37, 0 at 38.
        let p_minus = |e: f64| 0.5 - 0.5 / ((e.exp() + 1.0) / e.exp_m1());
        assert!(p_minus(37.0) / (1.0 / (37f64.exp() + 1.0)) > 1.3);
        assert_eq!(p_minus(38.0), 0.0, "at ε = 38 +C is impossible under t = −1");
        assert!(Duchi::new(37.0).is_err());
    }

    #[test]
    fn constants_and_decoding() {
        let m = Duchi::new(1.0).unwrap();
        assert!((m.scale() - 2.163953413738653).abs() < 1e-12);
        assert_eq!(m.decode(&NumericReport::Sign(false)).unwrap(), -m.scale());
        let e = m.decode(&NumericReport::Fixed(3)).unwrap_err();
        assert!(matches!(e, Error::InvalidReport { .. }) && e.to_string().contains("Sign report for duchi"), "{e}");
        assert_eq!(m.variance(0.5), m.scale().powi(2) - 0.25);
        assert_eq!(m.worst_case_variance(), m.scale().powi(2));
        assert!(matches!(Duchi::new(f64::NAN), Err(Error::InvalidParameter { name: "epsilon", .. })));
    }

    /// The vectorised batch (AVX2 build where available), the portable kernel and the packed
    /// signs give the same reports; their share of +C matches P₊(t) (z = 4.42), ties included.
    #[test]
    fn batch_kernels_agree_and_match_the_probability() {
        use crate::Aggregator;
        use crate::sampling::fast_rng;
        let m = Duchi::new(0.7).unwrap();
        let mut rng = fast_rng(9);
        let ts: Vec<f64> =
            (0..1000).map(|_| 2.0 * crate::sampling::uniform01(&mut rng) - 1.0).chain([-1.0, 1.0, 0.0]).collect();
        let mut want = Vec::new();
        m.randomize_batch(&ts, &mut fast_rng(4), &mut want).unwrap();
        let mut portable = Vec::new();
        assert!(m.signs_kernel(&ts, &mut fast_rng(4), |bits, k| portable.extend((0..k).map(|i| (bits >> i) & 1 == 1))));
        let mut signs = Vec::new();
        m.randomize_signs(&ts, &mut fast_rng(4), &mut signs).unwrap();
        assert_eq!(signs.len(), ts.len().div_ceil(64));
        for (i, r) in want.iter().enumerate() {
            let bit = (signs[i / 64] >> (i % 64)) & 1 == 1;
            assert_eq!(*r, NumericReport::Sign(bit), "report {i}");
            assert_eq!(portable[i], bit, "report {i} (portable)");
        }
        // P[+C | t] for a few t, one of them (t = 0, p = 1/2 = 0x8000/2^16) a tie at every
        // value of the top 16 bits but one: the tie path carries 2^-16 of the mass.
        for (k, &t) in [-1.0, -0.37, 0.0, 0.5, 1.0].iter().enumerate() {
            let n = 200_000;
            let mut s = Vec::new();
            m.randomize_signs(&vec![t; n], &mut fast_rng(20 + k as u64), &mut s).unwrap();
            let plus: u64 = s.iter().map(|w| w.count_ones() as u64).sum();
            let p = m.prob_positive(t);
            let z = (plus as f64 - n as f64 * p) / (n as f64 * p * (1.0 - p)).sqrt();
            assert!(z.abs() < 4.42, "t {t}: {plus} of {n}, p {p}");
        }
        // Packed aggregation equals report-by-report aggregation.
        let (mut a, mut b) = (m.aggregator(), m.aggregator());
        a.add_batch(&want).unwrap();
        m.add_signs(&mut b, &signs, ts.len()).unwrap();
        let (ea, eb) = (a.estimate(), b.estimate());
        assert_eq!(a.count(), b.count());
        assert!((ea.value - eb.value).abs() < 1e-12 && (ea.std_error - eb.std_error).abs() < 1e-12);
        // Bad input: nothing appended, the index named; bad packed reports refused.
        let mut bad = ts.clone();
        bad[77] = 1.5;
        let e = m.randomize_signs(&bad, &mut fast_rng(4), &mut signs).unwrap_err();
        assert!(e.to_string().contains("77"), "{e}");
        assert_eq!(signs.len(), ts.len().div_ceil(64));
        assert!(m.add_signs(&mut b, &signs, ts.len() + 64).is_err());
        assert!(m.add_signs(&mut b, &[u64::MAX], 3).unwrap_err().to_string().contains("padding"));
        assert_eq!(b.count(), ts.len() as u64);
    }
}
