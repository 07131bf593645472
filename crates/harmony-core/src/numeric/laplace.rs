//! The Laplace mechanism (docs/MECHANISMS.md §B1): t + Lap(2/ε).
//!
//! Derivation. The density of the output y given t is (ε/4)·exp(−ε|y − t|/2). For two inputs
//! t, t' ∈ [-1, 1] the ratio is exp(ε(|y − t'| − |y − t|)/2) ≤ exp(ε|t − t'|/2) ≤ e^ε (triangle
//! inequality, |t − t'| ≤ 2), with equality for t = 1, t' = −1 and y ≥ 1. Lap(λ) has variance
//! 2λ², so one report has variance 8/ε² whatever t.
//!
//! Sampling. One report (`randomize`, the client path) and batches (`randomize_batch`,
//! [`Laplace::randomize_units`]) use the same draw: one `u64` for the noise, −ln U with U's binary
//! exponent and significand drawn separately ([`crate::sampling::laplace1_from_word`]: U has the
//! full relative precision of an `f64` at every depth, so the tail has no holes — an earlier
//! scalar path drew its tail through `r + exp1_unbounded`, about 20 significant bits near
//! U ≈ 2⁻³³, which left grid outputs reachable from one input and not from another), and 32
//! random bits for the rounding ([`crate::sampling::randomized_round32`], ties decided by a fresh
//! word). The output is clamped to ±[`noise_bound`]`(ε)` before rounding (post-processing; see
//! [`noise_bound`] for the probability, < 2⁻⁶⁰, and the bias, < 6·10⁻¹⁶) and decoders refuse
//! reports beyond it.

use super::{
    BIG_CHUNK, GRID_STEP, GRID_VARIANCE, LaneSink, MeanAggregator, NOT_DONE, NumericMechanism, NumericReport, Units,
    add_units, check_fixed_epsilon, chunk_kernel, decode_fixed_bounded, noise_bound, numeric_batch,
};
use crate::error::Result;
use crate::params::Epsilon;
#[cfg(doc)]
use crate::sampling::laplace1_from_word;
use crate::sampling::{
    laplace_from_ln_uniform, laplace1_from_word_finish, laplace1_full, laplace1_is_hot, ln_uniform_combine,
    ln_uniform_poly, ln_uniform_reduce, randomized_round32, randomized_round32_hot,
};
use rand::Rng;

/// The Laplace mechanism on [-1, 1]: the report is t + Lap(2/ε), rounded to the fixed-point grid.
///
/// # Privacy
/// The sensitivity of t ∈ [-1, 1] is 2, and Laplace noise of scale 2/ε makes the output density
/// ratio of any two inputs at most exp(ε·|t − t'|/2) ≤ e^ε, with equality at t = ±1: exactly
/// ε-LDP. Rounding to the grid and clamping to ±[`noise_bound`]`(ε)` = ±(3 + 84/ε) are
/// post-processing (the clamp acts with probability below 2⁻⁶⁰).
///
/// # Utility
/// Var = 8/ε² (+ the grid's rounding variance ≤ 2⁻⁴²), constant in t: `variance_coefficients()`
/// is (0, 8/ε² + [`GRID_VARIANCE`]). Reports beyond ±[`noise_bound`]`(ε)` are refused.
///
/// # Example
/// ```
/// use harmony_core::numeric::{Laplace, NumericMechanism};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mech = Laplace::new(2.0)?;
/// let mut rng = fast_rng(42);
/// let mut agg = mech.aggregator();
/// let ts: Vec<f64> = (0..5000).map(|i| (i % 21) as f64 / 10.0 - 1.0).collect();
/// for &t in &ts {
///     agg.add(&mech.randomize(t, &mut rng)?)?;
/// }
/// let truth = ts.iter().sum::<f64>() / ts.len() as f64;
/// let est = agg.estimate();
/// println!("laplace: {:.3} ± {:.3} (truth {truth:.3})", est.value, est.std_error);
/// assert!((est.value - truth).abs() < 5.0 * est.std_error);
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Laplace {
    eps: Epsilon,
    scale: f64,
    /// The output bound B = [`noise_bound`]`(ε)`.
    bound: f64,
}

impl Laplace {
    /// A Laplace mechanism with budget ε in the global range ([`Epsilon`]).
    pub fn new(epsilon: f64) -> Result<Self> {
        let eps = check_fixed_epsilon(epsilon, "laplace")?;
        Ok(Laplace { eps, scale: 2.0 / epsilon, bound: noise_bound(epsilon) })
    }

    /// Laplace with the constants of `e` (any e > 0) under the validated `eps`: the lattice
    /// tests' table of the slack below the accepted range only.
    #[cfg(test)]
    pub(crate) fn with_scale(eps: Epsilon, e: f64) -> Self {
        Laplace { eps, scale: 2.0 / e, bound: noise_bound(e) }
    }

    /// The output bound B = 3 + 84/ε: outputs are clamped to [−B, B] (probability < 2⁻⁶⁰) and
    /// reports beyond it refused ([`noise_bound`]).
    pub fn bound(&self) -> f64 {
        self.bound
    }

    /// The noise scale λ = 2/ε (density (1/2λ)·exp(−|x|/λ)).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The output density at y for input t (before rounding): exp(−|y − t|/λ)/(2λ).
    pub fn density(&self, t: f64, y: f64) -> f64 {
        (-(y - t).abs() / self.scale).exp() / (2.0 * self.scale)
    }
}

impl Laplace {
    /// Randomizes a batch into grid units: `out` gets one `i64` per value, the `units` of the
    /// `Fixed(units)` report that [`NumericMechanism::randomize_batch`] would give (the same
    /// kernel and draws; 8 bytes per report instead of 16). All or nothing: if any value is NaN
    /// or outside [-1, 1], nothing is appended and the error names the first bad index.
    /// [`Laplace::add_units`] aggregates such reports.
    pub fn randomize_units<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<i64>) -> Result<()> {
        self.batch(ts, rng, &mut Units(out))
    }

    /// Adds grid-unit reports (as written by [`Laplace::randomize_units`]) to `agg`. Errors
    /// (nothing added): a report beyond ±[`Laplace::bound`] (its index is named).
    pub fn add_units(&self, agg: &mut MeanAggregator<Laplace>, units: &[i64]) -> Result<()> {
        add_units(agg, units, self.bound, "laplace")
    }
}

/// The batch kernel's hot path has |x| < 11·ln 2 ≈ 7.62 (x the standard Laplace draw: a hot
/// draw has U ≥ 2⁻¹¹), so |t + λx| < 1 + 7.7·λ; its rounding needs that below 2³¹ (|scaled| <
/// 2⁵¹ grid units), which holds for λ below this bound (ε > 1.5·10⁻⁸: every accepted ε), and
/// then no clamping to ±[`noise_bound`] is needed either (1 + 7.7λ < 3 + 42λ). For a larger λ
/// every value would take the scalar path.
const HOT_MAX_SCALE: f64 = ((1u64 << 30) as f64) / 7.7;

/// Per-value intermediate results of [`laplace_chunk`]'s passes: fdlibm's (f, s, k).
type Scratch = [[f64; BIG_CHUNK]; 4];

/// One chunk of the batch kernel (k ≤ [`BIG_CHUNK`] values), appended to `out`: per value the
/// word for the noise ([`laplace1_from_word`]'s layout: sign, binary exponent and significand of
/// the uniform; ln U in vectorisable fdlibm arithmetic) and 32 bits for the rounding
/// ([`randomized_round32_hot`]). Three vectorised passes — the integer reduction and the
/// division ([`ln_uniform_reduce`]); the polynomial ([`ln_uniform_finish`]), the sign and
/// t + λx; the rounding, written straight to `out` — each with a short dependency chain, so the
/// CPU overlaps many values (the whole ~100-cycle chain in one pass ran 25% slower). The rare
/// cold values (U < 2⁻¹¹: probability 2⁻¹¹; a rounding tie: 2⁻³²) get [`NOT_DONE`] and go to
/// [`Laplace::batch_fix`], and so does every value when λ ≥ [`HOT_MAX_SCALE`]. Returns whether
/// some t is NaN or outside [-1, 1]. Hot values equal [`laplace1_from_word`] and
/// [`randomized_round32_hot`] on the same word and bits (tested).
#[inline(always)]
fn laplace_chunk<S: LaneSink>(
    scale_units: f64,
    hot_scale: bool,
    scratch: &mut Scratch,
    ts: &[f64],
    words: &[u64],
    halves: &[u32],
    out: &mut S,
) -> bool {
    let n = ts.len();
    let (words, halves) = (&words[..n], &halves[..n]);
    // |t| > 1 or NaN, on the bits (a pass of its own: the first touch of `ts` streams from
    // memory, cheaper here than inside the arithmetic passes).
    let bad = ts.iter().fold(0u64, |bad, t| bad | ((t.to_bits() & !(1 << 63)) > 1f64.to_bits()) as u64) != 0;
    if !hot_scale {
        out.extend_units(ts.iter().map(|_| NOT_DONE));
        return bad;
    }
    let [f, s, dk, r] = scratch;
    let (f, s, dk, r) = (&mut f[..n], &mut s[..n], &mut dk[..n], &mut r[..n]);
    for i in 0..n {
        (f[i], s[i], dk[i]) = ln_uniform_reduce(0, words[i]);
    }
    for i in 0..n {
        r[i] = ln_uniform_poly(s[i]);
    }
    let scaled = f;
    for i in 0..n {
        let x = laplace_from_ln_uniform(ln_uniform_combine(scaled[i], s[i], dk[i], r[i]), words[i]);
        // (t + λx)/step with the division by the power of two 2⁻²⁰ exact: t·2²⁰ + (λ·2²⁰)·x.
        scaled[i] = scale_units.mul_add(x, ts[i] * (1.0 / GRID_STEP));
    }
    out.extend_units(scaled.iter().zip(halves).zip(words).map(|((&scaled, &u), &w)| {
        let (units, decided) = randomized_round32_hot(u, scaled);
        if decided & laplace1_is_hot(w) { units } else { NOT_DONE }
    }));
    bad
}

impl Laplace {
    /// The batch kernel's units for a value that [`laplace_chunk`] left, on every path: the
    /// noise's exponent extended with fresh words if needed ([`laplace1_from_word_finish`]),
    /// the output clamped to ±[`Laplace::bound`], a rounding tie decided by a fresh word
    /// ([`randomized_round32`]). For a hot word and bits it is the hot path's value.
    fn batch_fix<R: Rng + ?Sized>(&self, t: f64, w: u64, u: u32, rng: &mut R) -> i64 {
        self.units_from(laplace1_from_word_finish(rng, w), t, u, rng)
    }

    /// The units of t + λx: the hot path's arithmetic (t·2²⁰ + (λ·2²⁰)·x, one rounding), the
    /// clamp to ±B, and the rounding from the 32 bits `u` ([`randomized_round32`]).
    #[inline(always)]
    pub(crate) fn units_from<R: Rng + ?Sized>(&self, x: f64, t: f64, u: u32, rng: &mut R) -> i64 {
        let scaled = (self.scale / GRID_STEP).mul_add(x, t * (1.0 / GRID_STEP));
        let bound = self.bound / GRID_STEP;
        randomized_round32(rng, u, scaled.clamp(-bound, bound))
    }

    /// The batch kernel ([`chunk_kernel`] with [`laplace_chunk`]); false if some t is bad.
    #[inline(always)]
    pub(crate) fn batch_portable<R: Rng + ?Sized, S: LaneSink>(&self, ts: &[f64], rng: &mut R, out: &mut S) -> bool {
        let (scale_units, hot_scale) = (self.scale / GRID_STEP, self.scale < HOT_MAX_SCALE);
        let mut scratch = [[0.0; BIG_CHUNK]; 4];
        chunk_kernel(
            ts,
            rng,
            out,
            #[inline(always)]
            |ts, words, halves, out| laplace_chunk(scale_units, hot_scale, &mut scratch, ts, words, halves, out),
            |t, w, u, rng| self.batch_fix(t, w, u, rng),
        )
    }
}

numeric_batch!(@dispatch Laplace);

impl NumericMechanism for Laplace {
    fn name(&self) -> &'static str {
        "laplace"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    /// One word for the noise ([`laplace1_full`]: the batch kernel's full-precision draw) and
    /// 32 bits for the rounding: the batch kernel's distribution, value by value.
    #[inline(always)]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport {
        let w = rng.next_u64();
        let u = rng.next_u32();
        let x = laplace1_full(rng, w);
        NumericReport::Fixed(self.units_from(x, t, u, rng))
    }
    /// Vectorised batch (an AVX2 + FMA build chosen at run time): per value one noise word and
    /// 32 rounding bits drawn in bulk (1.5 words), −ln U in vectorised fdlibm arithmetic; the
    /// 2⁻¹¹ of draws with U < 2⁻¹¹ (and the 2⁻³² rounding ties) finish scalar with fresh words.
    /// Same distribution as `randomize_unchecked` (not the same stream: that one draws its two
    /// words per value in turn).
    fn randomize_batch<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<NumericReport>) -> Result<()> {
        self.batch(ts, rng, out)
    }
    fn decode(&self, report: &NumericReport) -> Result<f64> {
        decode_fixed_bounded(report, self.bound, "laplace")
    }
    fn variance_coefficients(&self) -> (f64, f64) {
        (0.0, 2.0 * self.scale * self.scale + GRID_VARIANCE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::numeric::GRID_STEP;

    #[test]
    fn density_ratio_is_exactly_e_eps() {
        for eps in [0.1, 0.5, 1.0, 2.0, 4.0, 8.0] {
            let m = Laplace::new(eps).unwrap();
            let grid: Vec<f64> = (0..=40).map(|i| -1.0 + i as f64 * 0.05).collect();
            let ys: Vec<f64> = (0..=200).map(|i| -5.0 + i as f64 * 0.05).collect();
            let mut worst = 0.0f64;
            for &t in &grid {
                for &u in &grid {
                    for &y in &ys {
                        worst = worst.max(m.density(t, y) / m.density(u, y));
                    }
                }
            }
            let target = eps.exp();
            assert!((worst / target - 1.0).abs() < 1e-9, "eps {eps}: max ratio {worst}, e^eps {target}");
        }
    }

    #[test]
    fn constants_and_bad_parameters() {
        let m = Laplace::new(1.0).unwrap();
        assert_eq!(m.name(), "laplace");
        assert_eq!(m.scale(), 2.0);
        assert!((m.worst_case_variance() - 8.0).abs() < 1e-12);
        for bad in [f64::NAN, f64::INFINITY, 0.0, -1.0, 1e-4, 21.0] {
            let e = Laplace::new(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidParameter { name: "epsilon", .. }), "{e}");
        }
        assert!(Laplace::new(1e-4).unwrap_err().to_string().contains(">= 0.002"));
    }

    #[test]
    fn decode_refuses_reports_beyond_the_noise_bound() {
        for eps in [2e-3, 1.0, 20.0] {
            let m = Laplace::new(eps).unwrap();
            assert_eq!(m.bound(), 3.0 + 84.0 / eps);
            // One grid unit of slack above ⌈B/step⌉ (the rounding of B itself), none beyond.
            let units = (m.bound() / GRID_STEP).ceil() as i64 + 1;
            assert!(m.decode(&NumericReport::Fixed(units)).is_ok() && m.decode(&NumericReport::Fixed(-units)).is_ok());
            for bad in [units + 1, -units - 1, 1 << 62, i64::MIN, i64::MAX] {
                let e = m.decode(&NumericReport::Fixed(bad)).unwrap_err();
                assert!(matches!(e, Error::InvalidReport { .. }) && e.to_string().contains("laplace"), "{e}");
            }
        }
        let m = Laplace::new(1.0).unwrap();
        assert!(m.decode(&NumericReport::Sign(true)).unwrap_err().to_string().contains("kind"));
    }

    #[test]
    fn units_api_equals_the_report_batch() {
        use crate::Aggregator;
        use crate::sampling::fast_rng;
        let m = Laplace::new(0.5).unwrap();
        let ts: Vec<f64> = (0..777).map(|i| (i % 21) as f64 / 10.0 - 1.0).collect();
        let (mut reports, mut units) = (Vec::new(), Vec::new());
        m.randomize_batch(&ts, &mut fast_rng(4), &mut reports).unwrap();
        m.randomize_units(&ts, &mut fast_rng(4), &mut units).unwrap();
        let want: Vec<NumericReport> = units.iter().map(|&u| NumericReport::Fixed(u)).collect();
        assert_eq!(reports, want);
        let (mut a, mut b) = (m.aggregator(), m.aggregator());
        a.add_batch(&reports).unwrap();
        m.add_units(&mut b, &units).unwrap();
        let (ea, eb) = (a.estimate(), b.estimate());
        assert_eq!(a.count(), b.count());
        assert!((ea.value - eb.value).abs() < 1e-12 && (ea.std_error - eb.std_error).abs() < 1e-12);
        // Bad values: nothing appended; out-of-bound units: nothing added, the index named.
        let mut bad = ts.clone();
        bad[9] = 2.0;
        assert!(m.randomize_units(&bad, &mut fast_rng(4), &mut units).unwrap_err().to_string().contains('9'));
        assert_eq!(units.len(), ts.len());
        let e = m.add_units(&mut b, &[0, i64::MAX]).unwrap_err();
        assert!(e.to_string().contains("laplace"), "{e}");
        assert_eq!(b.count(), ts.len() as u64);
    }

    /// The batch kernel's reports computed value by value from the definition: per chunk of
    /// [`BIG_CHUNK`] values the words, then the 32-bit integers, drawn in bulk; a hot value is
    /// [`crate::sampling::laplace1_from_word`] then t·2²⁰ + (λ·2²⁰)·x rounded by
    /// [`randomized_round32_hot`]; the others, in order, [`Laplace::batch_fix`] with fresh words.
    fn reference_units(m: &Laplace, ts: &[f64], seed: u64) -> Vec<i64> {
        use crate::sampling::{fast_rng, fill_u32s, fill_words, laplace1_from_word};
        let mut rng = fast_rng(seed);
        let mut out = Vec::new();
        for chunk in ts.chunks(BIG_CHUNK) {
            let (mut w, mut h) = (vec![0u64; chunk.len()], vec![0u32; chunk.len()]);
            fill_words(&mut rng, &mut w);
            fill_u32s(&mut rng, &mut h);
            for i in 0..chunk.len() {
                let (x, hot) = laplace1_from_word(w[i]);
                let scaled = (m.scale / GRID_STEP).mul_add(x, chunk[i] * (1.0 / GRID_STEP));
                let (units, decided) = randomized_round32_hot(h[i], scaled);
                out.push(if hot && decided && m.scale < HOT_MAX_SCALE { units } else { NOT_DONE });
            }
            let base = out.len() - chunk.len();
            for i in 0..chunk.len() {
                if out[base + i] == NOT_DONE {
                    out[base + i] = m.batch_fix(chunk[i], w[i], h[i], &mut rng);
                }
            }
        }
        out
    }

    #[test]
    fn batch_equals_its_value_by_value_definition() {
        use crate::sampling::{fast_rng, uniform01};
        let mut rng = fast_rng(50);
        let ts: Vec<f64> = (0..20_000).map(|_| 2.0 * uniform01(&mut rng) - 1.0).chain([1.0, -1.0, 0.0, -0.0]).collect();
        // λ = 2/ε: the smallest, typical and the largest accepted.
        for eps in [20.0, 1.0, 0.01, 2e-3] {
            let m = Laplace::new(eps).unwrap();
            let mut got = Vec::new();
            m.randomize_units(&ts, &mut fast_rng(7), &mut got).unwrap();
            let want = reference_units(&m, &ts, 7);
            assert_eq!(got, want, "eps {eps}");
            assert!(got.iter().all(|&u| u != NOT_DONE));
            // ~10 of the 20 004 values take the cold path (U < 2⁻¹¹) at every ε.
            let cold = ts.len() as f64 * (-11f64).exp2();
            assert!(cold > 5.0);
        }
        // The clamp: values beyond ±B come out at the bound (probability < 2⁻⁶⁰, so forced here
        // by a word whose uniform is below 2⁻⁶⁰⁰: 55 cold words of zeros, then a hot one).
        let m = Laplace::new(2e-3).unwrap();
        let mut zeros = ConstWords(vec![1 << 52; 1].into_iter().chain(std::iter::repeat(0)).take(56).collect());
        let units = m.units_from(laplace1_from_word_finish(&mut zeros, 0), 0.5, 7, &mut fast_rng(1));
        let b = (m.bound() / GRID_STEP).floor() as i64;
        assert!(units == b || units == b + 1, "clamped to +B: {units} units, B = {b} units");
    }

    /// An RNG that returns the given words (last first), for forcing a path.
    struct ConstWords(Vec<u64>);
    impl rand::TryRng for ConstWords {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> std::result::Result<u32, Self::Error> {
            Ok(self.0.pop().unwrap_or(0) as u32)
        }
        fn try_next_u64(&mut self) -> std::result::Result<u64, Self::Error> {
            Ok(self.0.pop().unwrap_or(0))
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> std::result::Result<(), Self::Error> {
            dst.fill(0);
            Ok(())
        }
    }

    #[test]
    fn bad_inputs_are_refused_whole() {
        use crate::sampling::fast_rng;
        let m = Laplace::new(1.0).unwrap();
        let ts = vec![0.5; 300];
        for (i, bad) in [(0, f64::NAN), (129, 1.000_000_1), (299, f64::NEG_INFINITY), (255, -1.5)] {
            let mut xs = ts.clone();
            xs[i] = bad;
            let mut out = vec![7i64];
            let e = m.randomize_units(&xs, &mut fast_rng(1), &mut out).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(&format!("value {i} ")) && msg.contains("[-1, 1]"), "{msg}");
            assert_eq!(out, vec![7], "nothing appended");
        }
    }

    /// Heavy tier (release, `--ignored`): 10⁶ reports per ε through the batch API, against
    /// Laplace(t, 2/ε): the CDF of (y − t)/λ in 256 equiprobable bins (χ², 255 dof,
    /// P[χ² > 383] ≈ 1e-6), mean and variance (z = 4.42), the share beyond 11·ln 2 (the cold
    /// path, 2⁻¹¹ of draws) and the sign balance.
    #[test]
    #[ignore]
    fn heavy_batch_cdf_moments_and_tail() {
        use crate::estimate::Moments;
        use crate::sampling::fast_rng;
        let n = 1_000_000;
        for (k, (eps, t)) in [(0.5, -1.0), (1.0, 0.25), (4.0, 1.0), (2e-3, 0.0)].into_iter().enumerate() {
            let m = Laplace::new(eps).unwrap();
            let mut units = Vec::new();
            m.randomize_units(&vec![t; n], &mut fast_rng(60 + k as u64), &mut units).unwrap();
            let (mut bins, mut cold, mut neg, mut mo) = (vec![0u64; 256], 0u64, 0u64, Moments::default());
            for &u in &units {
                let y = u as f64 * GRID_STEP;
                mo.push(y);
                let z = (y - t) / m.scale();
                let cdf = if z < 0.0 { 0.5 * z.exp() } else { 1.0 - 0.5 * (-z).exp() };
                bins[((cdf * 256.0) as usize).min(255)] += 1;
                cold += (z.abs() > 11.0 * std::f64::consts::LN_2) as u64;
                neg += (z < 0.0) as u64;
            }
            let e = n as f64 / 256.0;
            let chi2: f64 = bins.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
            assert!(chi2 < 383.0, "eps {eps}: chi2 {chi2}");
            let var = m.variance(t);
            assert!(mo.z_mean(t, var).abs() < 4.42 && mo.z_variance(var).abs() < 4.42, "eps {eps}: {}", mo.mean);
            let p = (-11f64).exp2();
            assert!((cold as f64 - n as f64 * p).abs() < 4.42 * (n as f64 * p).sqrt(), "eps {eps}: {cold} cold");
            assert!((neg as f64 - n as f64 / 2.0).abs() < 4.42 * (n as f64 / 4.0).sqrt(), "eps {eps}: {neg}");
        }
    }
}
