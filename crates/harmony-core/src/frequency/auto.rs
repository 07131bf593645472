//! The registered `adaptive` oracle (CALM §2.2.3's choice, docs/MECHANISMS.md §A7, generalised): of
//! every registered oracle that `adaptive` may choose ([`Registered::ADAPTIVE`]), the one whose
//! one-report variance for an item nobody holds, Var(Y_v | x ≠ v), is the smallest at (ε, d).
//!
//! With GRR and OUE only ([`Adaptive`](super::Adaptive), CALM's), the switch point is where
//! their variances cross:
//! (d − 2 + e^ε) < 4e^ε ⇔ d < 3e^ε + 2. Subset Selection contains GRR (k = 1) and matches OUE at
//! large d, so it is chosen whenever its best k exceeds 1. Ties (within 10⁻⁹ relative, which
//! covers SS with k = 1 against GRR) go to the oracle registered first.

use super::FrequencyOracle;
use super::any::{AnyAggregator, AnyOracle, AnyReport, ORACLES};
use super::registry::{Params, Registered};
use crate::aggregate::Aggregator;
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::kinds::OracleKind;
use crate::params::{Epsilon, check_domain};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Relative margin below which two variances tie.
const TIE: f64 = 1e-9;

/// The `adaptive` oracle: the registered oracle with the smallest variance at (ε, d).
///
/// # Privacy
/// Whichever oracle is chosen is exactly ε-LDP (see its own docs); the choice depends only on
/// the public (ε, d).
///
/// # Utility
/// The chosen oracle's: `Var = [V*/n]` plus its f_v term, V* = min over the candidates of
/// Var(Y_v | x ≠ v).
///
/// # Example
/// ```
/// use harmony_core::frequency::Auto;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let a = Auto::new(1.0, 5).unwrap(); // 5 < 3e + 2, and SS's best k is 1: GRR
/// assert_eq!(a.branch(), "grr");
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = a.aggregator();
/// for i in 0..5000 {
///     agg.add(&a.randomize(if i % 5 == 0 { 4 } else { 0 }, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[4] - 0.2).abs() < 5.0 * est.std_errors[4]);
/// assert_eq!(Auto::new(1.0, 100).unwrap().branch(), "ss");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Auto {
    inner: Box<AnyOracle>,
}

/// A report of the `adaptive` oracle: the chosen oracle's report. It encodes as that report's
/// [`AnyReport`] form (variant index, then the report), so GRR and OUE reports keep the bytes of
/// the former two-branch adaptive oracle (variants 0 and 1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct AutoReport(pub Box<AnyReport>);

impl<'de> Deserialize<'de> for AutoReport {
    /// Refuses an adaptive report nested in another (no oracle produces one), so an untrusted
    /// payload cannot recurse.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use std::cell::Cell;
        thread_local!(static INSIDE: Cell<bool> = const { Cell::new(false) });
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                INSIDE.set(false);
            }
        }
        if INSIDE.replace(true) {
            return Err(serde::de::Error::custom("an adaptive report inside an adaptive report"));
        }
        let _reset = Reset;
        AnyReport::deserialize(d).map(|r| AutoReport(Box::new(r)))
    }
}

impl WireReport for AutoReport {
    const KIND: WireKind = ReportKind::Adaptive.wire();
}

impl Auto {
    /// The adaptive oracle for (ε, d). Errors: ε not finite and > 0, d < 2.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        Epsilon::new(epsilon)?;
        check_domain("d", d)?;
        let mut best: Option<(f64, AnyOracle)> = None;
        for info in ORACLES.iter().filter(|o| o.adaptive) {
            let o = AnyOracle::new(info.kind, epsilon, d)?;
            let v = o.report_variance(1, 0);
            if best.as_ref().is_none_or(|(b, _)| v < b * (1.0 - TIE)) {
                best = Some((v, o));
            }
        }
        let (_, inner) = best.ok_or_else(|| Error::param("mechanism", "adaptive", "a registered candidate"))?;
        Ok(Auto { inner: Box::new(inner) })
    }
    /// The chosen oracle.
    pub fn inner(&self) -> &AnyOracle {
        &self.inner
    }
    /// The chosen oracle's name (`grr`, `oue`, `ss`, …).
    pub fn branch(&self) -> &'static str {
        self.inner.name()
    }
}

impl FrequencyOracle for Auto {
    type Report = AutoReport;
    type Aggregator = AutoAggregator;

    fn name(&self) -> &'static str {
        "adaptive"
    }
    fn epsilon(&self) -> Epsilon {
        self.inner.epsilon()
    }
    fn domain_size(&self) -> usize {
        self.inner.domain_size()
    }
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> AutoReport {
        AutoReport(Box::new(self.inner.randomize_unchecked(v, rng)))
    }
    fn validate_report(&self, r: &AutoReport) -> Result<()> {
        self.inner.validate_report(&r.0)
    }
    fn aggregator(&self) -> AutoAggregator {
        AutoAggregator(Box::new(self.inner.aggregator()))
    }
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        self.inner.report_variance(x, v)
    }
    fn worst_case_variance(&self) -> f64 {
        self.inner.worst_case_variance()
    }
    fn aggregate_variance(&self, freqs: &[f64], v: usize) -> f64 {
        self.inner.aggregate_variance(freqs, v)
    }
    fn aggregate_cross_moment(&self, freqs: &[f64], a: usize, b: usize) -> Option<f64> {
        self.inner.aggregate_cross_moment(freqs, a, b)
    }
    /// NaN for a report of another oracle.
    fn report_estimate(&self, r: &AutoReport, v: usize) -> f64 {
        self.inner.report_estimate(&r.0, v)
    }
}

impl Registered for Auto {
    fn build(_: OracleKind, epsilon: f64, d: usize, _: &Params<'_>) -> Result<Self> {
        Auto::new(epsilon, d)
    }
    /// From the chosen oracle's constants (0 for a report of another oracle).
    fn output_probability(&self, x: usize, r: &AutoReport) -> f64 {
        self.inner.output_probability(x, &r.0)
    }
    fn log_likelihood_ratio(&self, x: usize, x2: usize, r: &AutoReport) -> f64 {
        self.inner.log_likelihood_ratio(x, x2, &r.0)
    }
    fn add_validated<'a>(agg: &mut AutoAggregator, reports: impl Iterator<Item = &'a AutoReport>) -> Result<()> {
        // Collected first: the inner oracle's batch path then has one concrete iterator type
        // (passing the adapter would nest without end through `AnyAggregator`).
        let inner: Vec<&AnyReport> = reports.map(|r| &*r.0).collect();
        agg.0.add_validated(inner.into_iter())
    }
}

/// Server-side state of the `adaptive` oracle: the chosen oracle's aggregator.
#[derive(Debug, Clone)]
pub struct AutoAggregator(Box<AnyAggregator>);

impl Aggregator for AutoAggregator {
    type Report = AutoReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &AutoReport) -> Result<()> {
        self.0.validate(&r.0)
    }
    fn add_unchecked(&mut self, r: &AutoReport) {
        self.0.add_unchecked(&r.0)
    }
    fn add_unchecked_times(&mut self, r: &AutoReport, times: u64) {
        self.0.add_unchecked_times(&r.0, times)
    }
    fn add_batch(&mut self, reports: &[AutoReport]) -> Result<()> {
        for (i, r) in reports.iter().enumerate() {
            self.validate(r).map_err(|e| crate::aggregate::at_index(e, i))?;
        }
        <Auto as Registered>::add_validated(self, reports.iter())
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        self.0.merge(&other.0)
    }
    fn count(&self) -> u64 {
        self.0.count()
    }
    fn estimate(&self) -> FrequencyEstimate {
        self.0.estimate()
    }
}

impl crate::state::SaveState for AutoAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        self.0.save_state(w)
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.0.merge_state(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frequency::{Grr, Oue, SubsetSelection, UnaryReport};

    #[test]
    fn chooses_the_smallest_variance_among_the_registered_oracles() {
        for eps in [0.5, 1.0, 2.0, 4.0] {
            for d in [2usize, 3, 8, 24, 25, 100, 1000] {
                let a = Auto::new(eps, d).unwrap();
                let best = ORACLES
                    .iter()
                    .filter(|o| o.adaptive)
                    .map(|o| AnyOracle::new(o.kind, eps, d).unwrap().report_variance(1, 0))
                    .fold(f64::INFINITY, f64::min);
                let chosen = a.report_variance(1, 0);
                assert!(chosen <= best * (1.0 + TIE), "eps {eps} d {d}: {} has {chosen}, best {best}", a.branch());
            }
        }
        // GRR while SS's best k is 1 (a tie), SS beyond; never worse than GRR or OUE.
        assert_eq!(Auto::new(2.0, 8).unwrap().branch(), "grr");
        assert_eq!(Auto::new(2.0, 16).unwrap().branch(), "ss");
        for d in [3usize, 10, 24, 25, 40] {
            let v = Auto::new(2.0, d).unwrap().report_variance(1, 0);
            let g = Grr::new(2.0, d).unwrap().report_variance(1, 0);
            let o = Oue::new(2.0, d).unwrap().report_variance(1, 0);
            assert!(v <= g.min(o) * (1.0 + TIE), "d = {d}");
        }
        let AnyOracle::Ss(ss) = Auto::new(1.0, 100).unwrap().inner().clone() else { panic!("not ss") };
        assert_eq!(ss.k(), SubsetSelection::new(1.0, 100).unwrap().k());
    }

    #[test]
    fn grr_and_oue_reports_keep_their_bytes() {
        // The former two-branch encoding: [1][8][branch 0 = GRR][y] and [1][8][branch 1 = OUE][bits].
        let grr = AutoReport(Box::new(AnyReport::Grr(crate::frequency::GrrReport { y: 3 })));
        assert_eq!(crate::wire::encode(&grr), [1, 8, 0, 3]);
        let oue = AutoReport(Box::new(AnyReport::Unary(UnaryReport { bits: vec![5] })));
        assert_eq!(crate::wire::encode(&oue), [1, 8, 1, 1, 5]);
        assert_eq!(crate::wire::decode::<AutoReport>(&[1, 8, 1, 1, 5]).unwrap(), oue);
        // Nested adaptive reports are refused, however deep.
        let mut nested = vec![1u8, 8];
        nested.extend(std::iter::repeat_n(6u8, 100_000));
        // (postcard reports its own wording; the point is an error, not a stack overflow).
        let e = crate::wire::decode::<AutoReport>(&nested).unwrap_err().to_string();
        assert!(e.contains("payload"), "{e}");
        assert_eq!(crate::wire::decode::<AutoReport>(&[1, 8, 0, 3]).unwrap(), grr);
        // CALM's two-branch report (inside marginals and range reports) encodes the same way.
        let calm = crate::frequency::AdaptiveReport::Oue(UnaryReport { bits: vec![5] });
        assert_eq!(postcard::to_allocvec(&calm).unwrap(), [1, 1, 5]);
    }

    #[test]
    fn wrong_oracle_reports_and_merges_are_rejected() {
        let g = Auto::new(1.0, 4).unwrap();
        let o = Auto::new(1.0, 64).unwrap();
        let mut ga = g.aggregator();
        let e = ga.add(&AutoReport(Box::new(AnyReport::Unary(UnaryReport { bits: vec![0] })))).unwrap_err();
        assert!(matches!(e, Error::InvalidReport { .. }) && e.to_string().contains("a Grr report"), "{e}");
        let e = ga.merge(&o.aggregator()).unwrap_err();
        assert!(matches!(e, Error::Incompatible(_)), "{e}");
    }
}
