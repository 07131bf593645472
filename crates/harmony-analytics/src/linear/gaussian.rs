//! The Gaussian mechanism on the workload's columns (Bassily, AISTATS'19, Alg. 1–2;
//! docs/MECHANISMS.md §G): a user with value v sends y = a_v + N(0, σ² I_d).
//!
//! # Privacy
//! The l2 sensitivity of v ↦ a_v is Δ = max_{v,v'} ‖a_v − a_v'‖₂
//! ([`Workload::l2_sensitivity`]: √2 for A = I, exact by enumeration for moderate J²·d,
//! otherwise the bound 2r with r = max_v ‖a_v‖₂, as in docs/MECHANISMS.md §G). Adding N(0, σ²I) with
//! σ from [`analytic_gaussian_sigma`](ε, δ, Δ) is (ε, δ)-LDP (Balle–Wang's exact condition,
//! every ε > 0). Each coordinate is then sent as an integer multiple of the grid step s = σ/1024 by
//! unbiased randomized rounding (post-processing: no privacy cost; the low bits of a float
//! cannot leak the input).
//!
//! # Utility
//! The mean ȳ of n reports is unbiased for A·p (p the users' empirical distribution) with
//! `Var(ȳ_t) = (σ² + s²/6)/n` per query (s²/6: the rounding's variance, frac·(1 − frac)·s²
//! averaged over a uniform fractional part; ≈ 1.6·10⁻⁷·σ²). In the high-dimensional regime
//! (n small against d²/log J) projecting ȳ onto K = conv{±a_v} ([`project()`](fn@super::project)) cuts the l2 error
//! from σ√(d/n) to roughly (σ² log J/n)^(1/4)·r (Bassily), at the price of bias.
//!
//! # Reports
//! [`GaussianReport`] (wire kind 22): the d grid values, each a zigzag varint of 2–3 bytes
//! (|value| ≲ 1024·(|a_v|/σ + 4)), so about 2 + ⌈log₁₂₈ d⌉ + 2.5·d bytes.

use super::calibrate::analytic_gaussian_sigma;
use super::{Workload, WorkloadEstimate};
use harmony_core::aggregate::check_compatible;
use harmony_core::sampling::{randomized_round_fast, uniform01};
use harmony_core::wire::{WireKind, WireReport};
use harmony_core::{Aggregator, Epsilon, Error, Estimate, Randomizer, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Grid step of the reports: σ/2^10.
const GRID: f64 = 1024.0;

/// The Gaussian mechanism over a workload's columns.
///
/// # Example
/// ```
/// use harmony_analytics::linear::{Domain, GaussianWorkload, Workload};
/// use harmony_core::{Aggregator, Randomizer};
/// use std::sync::Arc;
/// let w = Arc::new(Workload::prefix(&Domain::indices(8).unwrap()).unwrap());
/// let g = GaussianWorkload::new(1.0, 1e-6, w).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(7);
/// let mut agg = g.aggregator();
/// for i in 0..20_000 {
///     agg.add(&g.randomize(&(i % 8), &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// // Query 3 = P[v <= 3] = 0.5.
/// assert!((est.answers[3].value - 0.5).abs() < 5.0 * est.answers[3].std_error);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianWorkload {
    workload: Arc<Workload>,
    eps: Epsilon,
    delta: f64,
    sensitivity: f64,
    exact_sensitivity: bool,
    /// max_v ‖a_v‖_∞: bounds the noiseless part of a report entry.
    max_entry: f64,
    sigma: f64,
    step: f64,
}

impl GaussianWorkload {
    /// The mechanism for budget (ε, δ) on `workload`. Errors: ε not finite and > 0, δ outside
    /// (0, 1), a workload whose columns are all equal (nothing to estimate).
    pub fn new(epsilon: f64, delta: f64, workload: Arc<Workload>) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        if !(delta > 0.0 && delta < 1.0) {
            return Err(Error::param("delta", delta, "a number in (0, 1) (the δ of (ε, δ)-LDP)"));
        }
        let (sensitivity, exact_sensitivity) = workload.l2_sensitivity();
        if sensitivity <= 0.0 {
            return Err(Error::input("workload", "every column equal", "at least two distinct columns a_v"));
        }
        let max_entry =
            (0..workload.domain_size()).flat_map(|v| workload.column(v).iter().map(|x| x.abs())).fold(0.0f64, f64::max);
        let sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)?;
        Ok(GaussianWorkload {
            workload,
            eps,
            delta,
            sensitivity,
            exact_sensitivity,
            max_entry,
            sigma,
            step: sigma / GRID,
        })
    }
    /// σ of the noise.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }
    /// The report grid step s = σ/1024.
    pub fn step(&self) -> f64 {
        self.step
    }
    /// The l2 sensitivity Δ used to calibrate σ.
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }
    /// Whether Δ is the exact diameter of the columns (else the bound 2r).
    pub fn exact_sensitivity(&self) -> bool {
        self.exact_sensitivity
    }
    /// ε.
    pub fn epsilon(&self) -> Epsilon {
        self.eps
    }
    /// δ.
    pub fn delta(&self) -> f64 {
        self.delta
    }
    /// The workload.
    pub fn workload(&self) -> &Arc<Workload> {
        &self.workload
    }
    /// d: the report length.
    pub fn queries(&self) -> usize {
        self.workload.queries()
    }
    /// One report's variance per coordinate: σ² + s²/6.
    pub fn report_variance(&self) -> f64 {
        self.sigma * self.sigma + self.step * self.step / 6.0
    }
    /// The variance of each answer of the mean of n reports.
    pub fn answer_variance(&self, n: u64) -> f64 {
        self.report_variance() / n as f64
    }
    /// Writes the report of a user with value v (grid units: multiply by [`step`](Self::step))
    /// into `out` (length d). No allocation. Errors: v ≥ J or a wrong `out` length.
    pub fn randomize_into<R: Rng + ?Sized>(&self, v: usize, rng: &mut R, out: &mut [i64]) -> Result<()> {
        let j = self.workload.domain_size();
        if v >= j {
            return Err(Error::input("value", v, format!("an index in [0, {j})")));
        }
        if out.len() != self.queries() {
            return Err(Error::input("report buffer", out.len(), format!("length d = {}", self.queries())));
        }
        let col = self.workload.column(v);
        let mut i = 0;
        while i < out.len() {
            let (z0, z1) = normal_pair(rng);
            out[i] = randomized_round_fast(rng, col[i] + self.sigma * z0, self.step);
            if i + 1 < out.len() {
                out[i + 1] = randomized_round_fast(rng, col[i + 1] + self.sigma * z1, self.step);
            }
            i += 2;
        }
        Ok(())
    }
    /// The largest |value| of a valid report, in grid steps: (max |a_v| + 40σ)/s.
    pub fn entry_bound(&self) -> i64 {
        entry_bound(self)
    }
    /// The largest encoded report (bytes, wire header included): every value at the bound
    /// |a_v| + 40σ the server accepts.
    pub fn max_report_bytes(&self) -> usize {
        harmony_core::wire::encode(&GaussianReport { values: vec![entry_bound(self); self.queries()] }).len()
    }
    /// An empty aggregator.
    pub fn aggregator(&self) -> GaussianAggregator {
        GaussianAggregator { mech: self.clone(), sums: vec![0; self.queries()], n: 0 }
    }
}

/// Two independent N(0, 1) draws (Marsaglia's polar method).
#[inline]
pub fn normal_pair<R: Rng + ?Sized>(rng: &mut R) -> (f64, f64) {
    loop {
        let u = 2.0 * uniform01(rng) - 1.0;
        let v = 2.0 * uniform01(rng) - 1.0;
        let s = u * u + v * v;
        if s > 0.0 && s < 1.0 {
            let f = (-2.0 * s.ln() / s).sqrt();
            return (u * f, v * f);
        }
    }
}

/// One device's report: its noisy answers to the d queries, in grid units (multiply by the
/// mechanism's [`step`](GaussianWorkload::step)).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GaussianReport {
    /// The d values.
    pub values: Vec<i64>,
}

impl WireReport for GaussianReport {
    const KIND: WireKind = WireKind { byte: 22, name: "GaussianReport" };
}

/// A device: its domain index v < J → a_v + N(0, σ²I), on the grid.
impl Randomizer for GaussianWorkload {
    type Input = usize;
    type Report = GaussianReport;

    fn randomize(&self, v: &usize, rng: &mut dyn Rng) -> Result<GaussianReport> {
        let mut values = vec![0; self.queries()];
        self.randomize_into(*v, rng, &mut values)?;
        Ok(GaussianReport { values })
    }
    fn validate(&self, r: &GaussianReport) -> Result<()> {
        check_report(self, &r.values)
    }
}

/// Server side: per-query sums of the reports (integers, exact) and their count. Mergeable.
///
/// The sums are `i128`: an accepted entry is bounded by (max |a_v| + 40σ)/s, which a matrix
/// workload with huge entries (any finite number is accepted) saturates at 2⁶³ − 1, so
/// |Σ| < 2⁶³·2⁶⁴ = 2¹²⁷ for any n < 2⁶⁴ reports: exact for every sequence of accepted reports
/// and merges (an `i64` Σ overflowed after two such reports).
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianAggregator {
    mech: GaussianWorkload,
    sums: Vec<i128>,
    n: u64,
}

/// |report entry| bound: max |a_v| + 40σ, in grid units (anything beyond is not a valid report).
fn entry_bound(m: &GaussianWorkload) -> i64 {
    ((m.max_entry + 40.0 * m.sigma) / m.step).ceil() as i64
}

/// Checks a report's length and its entries against |a_v| + 40σ (probability < 10⁻³⁴⁰ for a
/// genuine report).
fn check_report(m: &GaussianWorkload, values: &[i64]) -> Result<()> {
    if values.len() != m.queries() {
        return Err(Error::report("values", format!("{} values", values.len()), format!("d = {} values", m.queries())));
    }
    let bound = entry_bound(m);
    // unsigned_abs: i64::MIN has no i64 absolute value (and must be refused, not wrap).
    if let Some(t) = values.iter().position(|x| x.unsigned_abs() > bound as u64) {
        return Err(Error::report(format!("values[{t}]"), values[t], format!("|value| <= {bound} grid steps")));
    }
    Ok(())
}

impl GaussianAggregator {
    /// ȳ: the unbiased answer vector (zeros before any report).
    pub fn mean(&self) -> Vec<f64> {
        let k = if self.n == 0 { 0.0 } else { self.mech.step / self.n as f64 };
        self.sums.iter().map(|&s| s as f64 * k).collect()
    }
    /// The mechanism.
    pub fn mechanism(&self) -> &GaussianWorkload {
        &self.mech
    }
}

impl Aggregator for GaussianAggregator {
    type Report = GaussianReport;
    type Output = WorkloadEstimate;

    /// Errors: wrong length, or an entry beyond |a_v| + 40σ.
    fn validate(&self, r: &GaussianReport) -> Result<()> {
        check_report(&self.mech, &r.values)
    }
    fn add_unchecked(&mut self, r: &GaussianReport) {
        self.sums.iter_mut().zip(&r.values).for_each(|(s, &x)| *s += x as i128);
        self.n += 1;
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("gaussian workload parameters", &self.mech, &other.mech)?;
        self.sums.iter_mut().zip(&other.sums).for_each(|(s, x)| *s += x);
        self.n += other.n;
        Ok(())
    }
    fn count(&self) -> u64 {
        self.n
    }
    /// The unbiased answers with their closed-form standard errors √((σ² + s²/6)/n).
    fn estimate(&self) -> WorkloadEstimate {
        let var = if self.n == 0 { f64::INFINITY } else { self.mech.answer_variance(self.n) };
        WorkloadEstimate {
            n: self.n,
            answers: self.mean().into_iter().map(|x| Estimate::from_variance(x, var)).collect(),
        }
    }
}

impl harmony_core::state::SaveState for GaussianAggregator {
    fn save_state(&self, w: &mut harmony_core::state::StateWriter<'_>) {
        w.u64(self.n);
        w.i128s(&self.sums);
    }
    fn merge_state(&mut self, r: &mut harmony_core::state::StateReader<'_>) -> Result<()> {
        self.n += r.u64("gaussian reports")?;
        r.add_i128s("gaussian sums", &mut self.sums)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear::Domain;
    use harmony_core::sampling::fast_rng;

    /// A matrix workload may hold any finite entries: one row of 1e300 in every column (a
    /// query that does not depend on the data) leaves the sensitivity at √2 but makes the entry
    /// bound (max |a_v| + 40σ)/s saturate at i64::MAX, so the decoder accepts entries up to
    /// 2⁶³ − 1 and two reports overflowed an i64 Σ (a panic in debug builds, a wrap in release).
    /// The sums are i128: |Σ| < 2⁶³·2⁶⁴ = 2¹²⁷ for n < 2⁶⁴ reports, so they are exact for
    /// every sequence of accepted reports and merges.
    #[test]
    fn extreme_reports_of_a_matrix_workload_never_overflow() {
        let json = format!("[[{}], [1, 0, 0]]", ["1e300"; 3].join(", "));
        let w = Arc::new(Workload::parse_json(&json, &Domain::indices(3).unwrap()).unwrap());
        let g = GaussianWorkload::new(1.0, 1e-6, w).unwrap();
        let top = GaussianReport { values: vec![i64::MAX, 0] };
        let bottom = GaussianReport { values: vec![-i64::MAX, 0] };
        for r in [&top, &bottom] {
            let mut a = g.aggregator();
            for _ in 0..16 {
                a.add(r).unwrap();
            }
            for _ in 0..59 {
                let copy = a.clone();
                a.merge(&copy).unwrap();
            }
            assert_eq!(a.count(), 1 << 63);
            let want = r.values[0] as f64 * g.step();
            let got = a.mean()[0];
            assert!((got - want).abs() <= 1e-12 * want.abs(), "{got} vs {want}");
        }
        assert!(g.aggregator().add(&GaussianReport { values: vec![i64::MIN, 0] }).is_err());
    }

    #[test]
    fn reports_are_validated_and_merge_is_exact() {
        let w = Arc::new(Workload::identity(&Domain::indices(5).unwrap()).unwrap());
        let g = GaussianWorkload::new(1.0, 1e-6, w.clone()).unwrap();
        assert!((g.sensitivity() - std::f64::consts::SQRT_2).abs() < 1e-15 && g.exact_sensitivity());
        let mut rng = fast_rng(3);
        let mut buf = vec![0; 5];
        assert!(g.randomize_into(5, &mut rng, &mut buf).unwrap_err().to_string().contains("[0, 5)"));
        let (mut a, mut b) = (g.aggregator(), g.aggregator());
        for i in 0..100 {
            g.randomize_into(i % 5, &mut rng, &mut buf).unwrap();
            let r = GaussianReport { values: buf.clone() };
            if i % 2 == 0 { a.add(&r).unwrap() } else { b.add(&r).unwrap() }
        }
        let mut all = a.clone();
        all.merge(&b).unwrap();
        assert_eq!(all.count(), 100);
        let e = a.add(&GaussianReport { values: vec![0; 4] }).unwrap_err().to_string();
        assert!(e.contains("values is \"4 values\"") && e.contains("d = 5"), "{e}");
        for x in [i64::MAX, i64::MIN] {
            let e = g.validate(&GaussianReport { values: vec![x, 0, 0, 0, 0] }).unwrap_err().to_string();
            assert!(e.contains("values[0]") && e.contains("grid steps"), "{e}");
        }
        assert_eq!(a.count(), 50);
        let other = GaussianWorkload::new(2.0, 1e-6, w).unwrap().aggregator();
        assert!(a.merge(&other).is_err());
        let e = GaussianWorkload::new(1.0, 1.0, Arc::new(Workload::identity(&Domain::indices(3).unwrap()).unwrap()))
            .unwrap_err();
        assert!(e.to_string().contains("delta is 1.0"), "{e}");
    }
}
