//! Generalized randomized response (GRR, "direct encoding"; docs/MECHANISMS.md §A2).
//!
//! The user keeps x with probability p = e^ε/(e^ε + d − 1) and otherwise reports
//! `(x + 1 + U{0..d−2}) mod d`, uniform over the d − 1 other values, each with probability
//! q = 1/(e^ε + d − 1). Every output o has P[o | x] ∈ {p, q} and p/q = e^ε, so the mechanism is
//! exactly ε-LDP. A report supports v iff it equals v: p* = p, q* = q, and
//! f̂_v = (C(v)/n − q)/(p − q) is unbiased with n·Var = (d − 2 + e^ε)/(e^ε − 1)² +
//! f_v (d − 2)/(e^ε − 1).
//!
//! p and q are computed as 1/(1 + (d − 1)e^−ε) and e^−ε·p, which neither overflow nor lose
//! precision at large ε.

use super::{FrequencyOracle, PureParams, check_batch};
use crate::aggregate::{Aggregator, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::params::{Epsilon, check_domain};
use crate::sampling::{Bernoulli, BernoulliWords, dispatch_avx2, fill_words, uniform_below};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Generalized randomized response over [0, d).
///
/// # Privacy
/// P[o | x] = p = e^ε/(e^ε + d − 1) if o = x and q = 1/(e^ε + d − 1) otherwise, so for any two
/// inputs and any output the ratio is at most p/q = e^ε, attained at o = x: exactly ε-LDP.
///
/// # Utility
/// With f_v the fraction of users holding v, the estimate of f_v has
/// `Var = [ (d − 2 + e^ε)/(e^ε − 1)² + f_v (d − 2)/(e^ε − 1) ] / n`; one report has variance
/// e^ε(d − 1)/(e^ε − 1)² if x = v and (d − 2 + e^ε)/(e^ε − 1)² otherwise. Best when
/// d < 3e^ε + 2. Report: ⌈log₂ d⌉ bits; aggregation O(n + d).
///
/// # Example
/// ```
/// use harmony_core::frequency::Grr;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let grr = Grr::new(2.0, 4).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = grr.aggregator();
/// for i in 0..4000 {
///     let v = if i % 4 == 0 { 1 } else { 0 }; // 75% hold 0, 25% hold 1
///     agg.add(&grr.randomize(v, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[0] - 0.75).abs() < 5.0 * est.std_errors[0]);
/// assert!((est.frequencies[3] - 0.0).abs() < 5.0 * est.std_errors[3]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Grr {
    eps: Epsilon,
    d: usize,
    p: f64,
    q: f64,
    keep: Bernoulli,
    /// The same Bernoulli(p), 64 lanes per draw, for the batch path.
    keep_words: BernoulliWords,
}

/// A GRR report: the reported category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GrrReport {
    /// The reported category, in [0, d).
    pub y: u32,
}

impl WireReport for GrrReport {
    const KIND: WireKind = ReportKind::Grr.wire();
}

impl Grr {
    /// GRR with budget `epsilon` over [0, d). Errors: ε not finite and > 0, d < 2.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_domain("d", d)?;
        let em = (-eps.value()).exp();
        let p = 1.0 / (1.0 + (d as f64 - 1.0) * em);
        let q = em * p;
        Ok(Grr { eps, d, p, q, keep: Bernoulli::new(p), keep_words: BernoulliWords::new(p) })
    }
    /// P[report = x | x] = e^ε/(e^ε + d − 1).
    pub fn p(&self) -> f64 {
        self.p
    }
    /// P[report = o | x] for each o ≠ x: 1/(e^ε + d − 1).
    pub fn q(&self) -> f64 {
        self.q
    }
    /// Support probabilities (p*, q*) = (p, q).
    pub fn pure_params(&self) -> PureParams {
        PureParams { p: self.p, q: self.q }
    }
    /// P[report | x] computed from the oracle's constants (0 for an out-of-range report or input).
    pub fn output_probability(&self, x: usize, report: &GrrReport) -> f64 {
        match report.y as usize {
            y if y >= self.d || x >= self.d => 0.0,
            y if y == x => self.p,
            _ => self.q,
        }
    }
}

/// Reports per step of the batch kernel (one 64-lane keep word).
const CHUNK: usize = 64;

impl Grr {
    /// The batch kernel; false if some input is ≥ d (the reports are then garbage, and the
    /// caller discards them). Per 64 reports: 64 exact Bernoulli(p) keep lanes
    /// ([`BernoulliWords`]) and 32 random words, each split into two 32-bit uniforms for
    /// Lemire's multiply-shift over the d − 1 other values (d − 1 < 2³¹). The loop over the 64
    /// reports is branch-free (LLVM vectorises it); a 32-bit draw in Lemire's rejection zone
    /// (probability (2³² mod (d − 1))/2³² < 2⁻¹) is redrawn afterwards, scalar, with
    /// [`uniform_below`], so every other value is exactly uniform.
    #[inline(always)]
    fn batch_kernel<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<GrrReport>) -> bool {
        out.reserve(vs.len());
        let d = self.d as u32;
        let d1 = d - 1;
        // 2^32 mod (d − 1): the low products below it are rejected.
        let zone = d1.wrapping_neg() % d1;
        let mut bad = false;
        let mut words = [0u64; CHUNK / 2];
        let mut ys = [0u32; CHUNK];
        let mut lows = [0u32; CHUNK];
        // One report from its input v, its 32 random bits r and its keep bit: (report, the low
        // half of Lemire's product, v out of range).
        let lane = |v: usize, r: u32, keep: u64| {
            let m = r as u64 * d1 as u64;
            let t = v as u32 + 1 + (m >> 32) as u32;
            let other = if t >= d { t - d } else { t };
            (if keep & 1 == 1 { v as u32 } else { other }, m as u32, v >= self.d)
        };
        for chunk in vs.chunks(CHUNK) {
            let keep = self.keep_words.sample(rng);
            let k = chunk.len();
            let half = k.div_ceil(2);
            fill_words(rng, &mut words[..half]);
            // Report i draws the low half of word i (i < half) or the high half of word i − half.
            if let Ok(c) = <&[usize; CHUNK]>::try_from(chunk) {
                // Full chunk: fixed-size loops, no bounds checks, vectorised.
                let mut b = false;
                for j in 0..CHUNK / 2 {
                    let (y, low, x) = lane(c[j], words[j] as u32, keep >> j);
                    (ys[j], lows[j]) = (y, low);
                    b |= x;
                }
                for j in 0..CHUNK / 2 {
                    let (y, low, x) = lane(c[j + CHUNK / 2], (words[j] >> 32) as u32, keep >> (j + CHUNK / 2));
                    (ys[j + CHUNK / 2], lows[j + CHUNK / 2]) = (y, low);
                    b |= x;
                }
                bad |= b;
            } else {
                for (i, &v) in chunk.iter().enumerate() {
                    let r = if i < half { words[i] as u32 } else { (words[i - half] >> 32) as u32 };
                    let (y, low, x) = lane(v, r, keep >> i);
                    (ys[i], lows[i]) = (y, low);
                    bad |= x;
                }
            }
            let mut rejected = false;
            for &low in &lows[..k] {
                rejected |= low < zone;
            }
            if rejected {
                for (i, &v) in chunk.iter().enumerate() {
                    if lows[i] < zone && (keep >> i) & 1 == 0 {
                        let t = v as u32 + 1 + uniform_below(rng, d1 as u64) as u32;
                        ys[i] = if t >= d { t - d } else { t };
                    }
                }
            }
            out.extend(ys[..k].iter().map(|&y| GrrReport { y }));
        }
        !bad
    }

    /// [`Grr::batch_kernel`] compiled with AVX2 and BMI2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi2,popcnt")]
    fn batch_avx2<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<GrrReport>) -> bool {
        self.batch_kernel(vs, rng, out)
    }
}

impl FrequencyOracle for Grr {
    type Report = GrrReport;
    type Aggregator = GrrAggregator;

    fn name(&self) -> &'static str {
        "grr"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    fn domain_size(&self) -> usize {
        self.d
    }
    #[inline]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> GrrReport {
        if self.keep.sample(rng) {
            return GrrReport { y: v as u32 };
        }
        // v + 1 + U{0..d−2} < 2d: one conditional subtraction replaces `mod d`.
        let t = v + 1 + uniform_below(rng, self.d as u64 - 1) as usize;
        GrrReport { y: (if t >= self.d { t - self.d } else { t }) as u32 }
    }
    /// Vectorised batch ([`Grr::batch_kernel`], an AVX2 build chosen at run time). Same
    /// distribution as `randomize_unchecked`. All or nothing: on a bad input nothing is
    /// appended and the error names its index.
    fn randomize_batch<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<GrrReport>) -> Result<()> {
        let start = out.len();
        let ok = dispatch_avx2!(self.batch_avx2(vs, rng, out), self.batch_kernel(vs, rng, out));
        if !ok {
            out.truncate(start);
            check_batch(vs, self.d)?;
        }
        Ok(())
    }
    fn validate_report(&self, r: &GrrReport) -> Result<()> {
        if r.y as usize >= self.d {
            return Err(Error::report("y", r.y, format!("a category in [0, {})", self.d)));
        }
        Ok(())
    }
    fn aggregator(&self) -> GrrAggregator {
        GrrAggregator { oracle: self.clone(), counts: vec![0; self.d], n: 0 }
    }
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        self.pure_params().report_variance(x == v)
    }
    fn worst_case_variance(&self) -> f64 {
        self.pure_params().worst_case_variance()
    }
    fn aggregate_variance(&self, freqs: &[f64], v: usize) -> f64 {
        self.pure_params().aggregate_variance(freqs[v])
    }
    /// A report supports one item: E\[Y_a·Y_b | x\] = (−q·P\[y = a\] − q·P\[y = b\] + q²)/(p − q)²,
    /// i.e. −q²/(p − q)² − q(f_a + f_b)/(p − q) summed over the population.
    fn aggregate_cross_moment(&self, freqs: &[f64], a: usize, b: usize) -> Option<f64> {
        let (p, q) = (self.p, self.q);
        Some(-(q * q + q * (p - q) * (freqs[a] + freqs[b])) / ((p - q) * (p - q)))
    }
    fn report_estimate(&self, report: &GrrReport, v: usize) -> f64 {
        let s = (report.y as usize == v) as u8 as f64;
        (s - self.q) / (self.p - self.q)
    }
}

/// Server-side GRR state: one count per category. O(d) memory, O(1) per report.
#[derive(Debug, Clone)]
pub struct GrrAggregator {
    oracle: Grr,
    counts: Vec<u64>,
    n: u64,
}

impl GrrAggregator {
    /// The number of reports equal to each category.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }
}

impl Aggregator for GrrAggregator {
    type Report = GrrReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &GrrReport) -> Result<()> {
        if r.y as usize >= self.oracle.d {
            return Err(Error::report("y", r.y, format!("a category in [0, {})", self.oracle.d)));
        }
        Ok(())
    }
    #[inline]
    fn add_unchecked(&mut self, r: &GrrReport) {
        self.counts[r.y as usize] += 1;
        self.n += 1;
    }
    fn add_unchecked_times(&mut self, r: &GrrReport, times: u64) {
        self.counts[r.y as usize] += times;
        self.n += times;
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("grr parameters", &self.oracle, &other.oracle)?;
        self.counts.iter_mut().zip(&other.counts).for_each(|(a, b)| *a += b);
        self.n += other.n;
        Ok(())
    }
    fn count(&self) -> u64 {
        self.n
    }
    fn estimate(&self) -> FrequencyEstimate {
        self.oracle.pure_params().estimate_from_counts(self.n, self.counts.iter().map(|&c| c as f64))
    }
}

impl crate::state::SaveState for GrrAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n);
        w.u64s(&self.counts);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.n += r.u64("grr n")?;
        r.add_u64s("grr counts", &mut self.counts)
    }
}

impl super::registry::Registered for Grr {
    const ADAPTIVE: bool = true;
    fn build(_: crate::kinds::OracleKind, epsilon: f64, d: usize, _: &super::registry::Params<'_>) -> Result<Self> {
        Self::new(epsilon, d)
    }
    fn output_probability(&self, x: usize, r: &GrrReport) -> f64 {
        Grr::output_probability(self, x, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::fast_rng;

    /// The realised probabilities of GRR's sampler (keep: ⌊p·2⁶⁴⌋/2⁶⁴; each other value: the
    /// rest over d − 1, Lemire exact) keep the ratio e^ε to 10⁻⁶ relative in ln up to
    /// [`crate::params::MAX_EPSILON`], for small and large d. Beyond the cap p rounds to 1 (at
    /// ε ≈ 37 for d = 2): the other values become impossible.
    #[test]
    fn realised_ratio_is_e_eps_up_to_max_epsilon() {
        use crate::sampling::Bernoulli;
        for eps in [crate::params::MIN_EPSILON, 1.0, 8.0, crate::params::MAX_EPSILON] {
            for d in [2usize, 3, 100, 1 << 20] {
                let g = Grr::new(eps, d).unwrap();
                let keep = Bernoulli::new(g.p()).probability();
                let other = (1.0 - keep) / (d - 1) as f64;
                assert!(other > 0.0, "eps {eps} d {d}: the other values are impossible");
                let ln = (keep / other).ln();
                assert!((ln / eps - 1.0).abs() <= 1e-6, "eps {eps} d {d}: realised ln-ratio {ln}");
            }
        }
        assert!(Bernoulli::new(1.0 / (1.0 + (-37f64).exp())).probability() == 1.0);
    }

    #[test]
    fn constants_are_stable_at_large_epsilon() {
        let g = Grr::new(crate::params::MAX_EPSILON, 1 << 20).unwrap();
        assert!(g.p() > 0.0 && g.p() <= 1.0 && g.q() >= 0.0);
        assert!(g.worst_case_variance().is_finite());
        let g = Grr::new(1.0, 3).unwrap();
        let e = 1f64.exp();
        assert!((g.p() - e / (e + 2.0)).abs() < 1e-15 && (g.q() - 1.0 / (e + 2.0)).abs() < 1e-15);
        assert!((g.p() / g.q() - e).abs() < 1e-12);
    }

    #[test]
    fn closed_forms_match_the_reference_sheet() {
        let (eps, d) = (1.3f64, 9usize);
        let g = Grr::new(eps, d).unwrap();
        let e = eps.exp();
        let df = d as f64;
        assert!((g.report_variance(2, 2) - e * (df - 1.0) / (e - 1.0).powi(2)).abs() < 1e-12);
        assert!((g.report_variance(1, 2) - (df - 2.0 + e) / (e - 1.0).powi(2)).abs() < 1e-12);
        let mut f = vec![0.0; d];
        f[0] = 0.7;
        f[3] = 0.3;
        let closed = (df - 2.0 + e) / (e - 1.0).powi(2) + 0.3 * (df - 2.0) / (e - 1.0);
        assert!((g.aggregate_variance(&f, 3) - closed).abs() < 1e-12);
        let by_sum: f64 = f.iter().enumerate().map(|(x, &fx)| fx * g.report_variance(x, 3)).sum();
        assert!((by_sum - closed).abs() < 1e-12);
    }

    #[test]
    fn randomize_stays_in_range_and_validate_rejects() {
        let g = Grr::new(0.5, 3).unwrap();
        let mut rng = fast_rng(101);
        let mut agg = g.aggregator();
        for _ in 0..1000 {
            let r = g.randomize(2, &mut rng).unwrap();
            assert!(r.y < 3);
            agg.add(&r).unwrap();
        }
        let e = agg.add(&GrrReport { y: 3 }).unwrap_err();
        assert!(e.to_string().contains("y is 3") && e.to_string().contains("[0, 3)"), "{e}");
        assert_eq!(agg.count(), 1000);
        assert!(g.randomize(3, &mut rng).is_err());
    }

    /// The batch kernel (both builds): every output probability P[o | x] ∈ {p, q} within
    /// z = 4.42 (two-sided false-failure rate 1e-5 per cell), including a partial last chunk.
    #[test]
    fn batch_matches_the_output_probabilities() {
        for &(eps, d) in &[(1.0, 5usize), (0.5, 2), (2.0, 3)] {
            let g = Grr::new(eps, d).unwrap();
            let n = 60_000 + 37;
            for x in 0..d {
                let vs = vec![x; n];
                let mut out = Vec::new();
                g.randomize_batch(&vs, &mut fast_rng(x as u64 + 7), &mut out).unwrap();
                assert_eq!(out.len(), n);
                let mut counts = vec![0u64; d];
                out.iter().for_each(|r| counts[r.y as usize] += 1);
                for (o, &c) in counts.iter().enumerate() {
                    let pr = g.output_probability(x, &GrrReport { y: o as u32 });
                    let z = (c as f64 - n as f64 * pr) / (n as f64 * pr * (1.0 - pr)).sqrt();
                    assert!(z.abs() < 4.42, "eps {eps}, d {d}, x {x}, o {o}: {c} of {n}, z = {z}");
                }
            }
        }
    }

    /// Lemire's rejection path: d − 1 = ⌈2³²/3⌉ puts a third of the 32-bit draws in the
    /// rejection zone; the redrawn other values stay in range and uniform (8 equal bins of the
    /// offset o − x − 1 mod d, chi-square, 7 dof: P[χ² > 33.5] ≈ 2.4e-5).
    #[test]
    fn batch_rejection_path_is_uniform() {
        let d = 1_431_655_767usize;
        let g = Grr::new(0.1, d).unwrap();
        let vs: Vec<usize> = (0..40_000).map(|i| (i * 2_654_435_761) % d).collect();
        let mut out = Vec::new();
        g.randomize_batch(&vs, &mut fast_rng(5), &mut out).unwrap();
        let mut bins = [0u64; 8];
        for (r, &x) in out.iter().zip(&vs) {
            let y = r.y as usize;
            assert!(y < d);
            if y != x {
                let off = (y + d - x - 1) % d; // in [0, d − 1)
                bins[off * 8 / (d - 1)] += 1;
            }
        }
        let total: u64 = bins.iter().sum();
        let e = total as f64 / 8.0;
        let chi2: f64 = bins.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        assert!(chi2 < 33.5, "chi2 {chi2}, bins {bins:?}");
    }

    #[test]
    fn batch_builds_agree_and_bad_input_appends_nothing() {
        let g = Grr::new(1.0, 1000).unwrap();
        let vs: Vec<usize> = (0..1000).map(|i| (i * 7919) % 1000).collect();
        let (mut a, mut b) = (vec![GrrReport { y: 0 }], Vec::new());
        assert!(g.batch_kernel(&vs, &mut fast_rng(3), &mut b));
        g.randomize_batch(&vs, &mut fast_rng(3), &mut a).unwrap();
        assert_eq!(&a[1..], &b[..], "the AVX2 and portable builds give the same reports");
        let mut bad = vs.clone();
        bad[700] = 1000;
        let e = g.randomize_batch(&bad, &mut fast_rng(3), &mut a).unwrap_err();
        assert!(e.to_string().contains("category 700"), "{e}");
        assert_eq!(a.len(), 1001);
    }
}
