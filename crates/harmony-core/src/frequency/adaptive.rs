//! CALM's adaptive oracle (CALM §2.2.3; docs/MECHANISMS.md §A7): GRR when d < 3e^ε + 2, else OUE.
//! Marginals, ranges and linear queries build on these two branches' constants; the registered
//! `adaptive` oracle ([`Auto`](super::Auto)) chooses among every registered oracle instead.
//!
//! The switch point is where the f_v = 0 variances cross: (d − 2 + e^ε) < 4e^ε ⇔ d < 3e^ε + 2.

use super::FrequencyOracle;
use super::grr::{Grr, GrrAggregator, GrrReport};
use super::unary::{Oue, UnaryAggregator, UnaryEncoding, UnaryReport};
use crate::aggregate::Aggregator;
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::params::Epsilon;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// GRR if d < 3e^ε + 2, otherwise OUE.
///
/// # Privacy
/// Whichever oracle is chosen is exactly ε-LDP (see [`Grr`] and [`UnaryEncoding`]); the choice
/// depends only on the public (ε, d).
///
/// # Utility
/// `Var = [min(4e^ε, d − 2 + e^ε)/(e^ε − 1)² + f_v·t]/n` with t = (d − 2)/(e^ε − 1) for GRR and
/// t = 1 for OUE.
///
/// # Example
/// ```
/// use harmony_core::frequency::Adaptive;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let a = Adaptive::new(1.0, 5).unwrap(); // 5 < 3e + 2: GRR
/// assert!(matches!(a, Adaptive::Grr(_)));
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = a.aggregator();
/// for i in 0..5000 {
///     agg.add(&a.randomize(if i % 5 == 0 { 4 } else { 0 }, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[4] - 0.2).abs() < 5.0 * est.std_errors[4]);
/// assert!(matches!(Adaptive::new(1.0, 100).unwrap(), Adaptive::Oue(_)));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Adaptive {
    /// Chosen when d < 3e^ε + 2.
    Grr(Grr),
    /// Chosen when d ≥ 3e^ε + 2.
    Oue(UnaryEncoding),
}

/// A report of the adaptive oracle (carried inside the reports of the tasks that use it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AdaptiveReport {
    /// From the GRR branch.
    Grr(GrrReport),
    /// From the OUE branch.
    Oue(UnaryReport),
}

impl Adaptive {
    /// The adaptive oracle for (ε, d). Errors: ε not finite and > 0, d < 2.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        let grr = Grr::new(epsilon, d)?;
        if (d as f64) < 3.0 * grr.epsilon().exp() + 2.0 {
            Ok(Adaptive::Grr(grr))
        } else {
            Ok(Adaptive::Oue(Oue::new(epsilon, d)?))
        }
    }
    /// P[report | x] from the chosen oracle's constants (0 for a report of the other branch).
    pub fn output_probability(&self, x: usize, r: &AdaptiveReport) -> f64 {
        match (self, r) {
            (Adaptive::Grr(o), AdaptiveReport::Grr(r)) => o.output_probability(x, r),
            (Adaptive::Oue(o), AdaptiveReport::Oue(r)) => o.output_probability(x, r),
            _ => 0.0,
        }
    }
    /// The chosen branch's name (`grr` or `oue`).
    pub fn branch(&self) -> &'static str {
        match self {
            Adaptive::Grr(_) => "grr",
            Adaptive::Oue(_) => "oue",
        }
    }
}

macro_rules! both {
    ($self:expr, $o:ident => $e:expr) => {
        match $self {
            Adaptive::Grr($o) => $e,
            Adaptive::Oue($o) => $e,
        }
    };
}

impl FrequencyOracle for Adaptive {
    type Report = AdaptiveReport;
    type Aggregator = AdaptiveAggregator;

    fn name(&self) -> &'static str {
        "adaptive"
    }
    fn epsilon(&self) -> Epsilon {
        both!(self, o => o.epsilon())
    }
    fn domain_size(&self) -> usize {
        both!(self, o => o.domain_size())
    }
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> AdaptiveReport {
        match self {
            Adaptive::Grr(o) => AdaptiveReport::Grr(o.randomize_unchecked(v, rng)),
            Adaptive::Oue(o) => AdaptiveReport::Oue(o.randomize_unchecked(v, rng)),
        }
    }
    fn validate_report(&self, r: &AdaptiveReport) -> Result<()> {
        match (self, r) {
            (Adaptive::Grr(o), AdaptiveReport::Grr(r)) => o.validate_report(r),
            (Adaptive::Oue(o), AdaptiveReport::Oue(r)) => o.validate_report(r),
            (Adaptive::Grr(_), AdaptiveReport::Oue(_)) => Err(wrong_branch("oue", "grr")),
            (Adaptive::Oue(_), AdaptiveReport::Grr(_)) => Err(wrong_branch("grr", "oue")),
        }
    }
    fn aggregator(&self) -> AdaptiveAggregator {
        match self {
            Adaptive::Grr(o) => AdaptiveAggregator::Grr(o.aggregator()),
            Adaptive::Oue(o) => AdaptiveAggregator::Oue(o.aggregator()),
        }
    }
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        both!(self, o => o.report_variance(x, v))
    }
    fn worst_case_variance(&self) -> f64 {
        both!(self, o => o.worst_case_variance())
    }
    fn aggregate_variance(&self, freqs: &[f64], v: usize) -> f64 {
        both!(self, o => o.aggregate_variance(freqs, v))
    }
    fn aggregate_cross_moment(&self, freqs: &[f64], a: usize, b: usize) -> Option<f64> {
        both!(self, o => o.aggregate_cross_moment(freqs, a, b))
    }
    /// NaN for a report of the other branch.
    fn report_estimate(&self, r: &AdaptiveReport, v: usize) -> f64 {
        match (self, r) {
            (Adaptive::Grr(o), AdaptiveReport::Grr(r)) => o.report_estimate(r, v),
            (Adaptive::Oue(o), AdaptiveReport::Oue(r)) => o.report_estimate(r, v),
            _ => f64::NAN,
        }
    }
}

/// Server-side state of the adaptive oracle: the chosen branch's aggregator.
#[derive(Debug, Clone)]
pub enum AdaptiveAggregator {
    /// GRR branch.
    Grr(GrrAggregator),
    /// OUE branch.
    Oue(UnaryAggregator),
}

fn wrong_branch(found: &str, expected: &str) -> Error {
    Error::report(
        "kind",
        format!("a {found} report"),
        format!("a {expected} report (this adaptive oracle uses {expected})"),
    )
}

impl Aggregator for AdaptiveAggregator {
    type Report = AdaptiveReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &AdaptiveReport) -> Result<()> {
        match (self, r) {
            (AdaptiveAggregator::Grr(a), AdaptiveReport::Grr(r)) => a.validate(r),
            (AdaptiveAggregator::Oue(a), AdaptiveReport::Oue(r)) => a.validate(r),
            (AdaptiveAggregator::Grr(_), AdaptiveReport::Oue(_)) => Err(wrong_branch("oue", "grr")),
            (AdaptiveAggregator::Oue(_), AdaptiveReport::Grr(_)) => Err(wrong_branch("grr", "oue")),
        }
    }
    fn add_unchecked(&mut self, r: &AdaptiveReport) {
        match (self, r) {
            (AdaptiveAggregator::Grr(a), AdaptiveReport::Grr(r)) => a.add_unchecked(r),
            (AdaptiveAggregator::Oue(a), AdaptiveReport::Oue(r)) => a.add_unchecked(r),
            // Unreachable for validated reports; a mismatched report is ignored.
            _ => {}
        }
    }
    fn add_unchecked_times(&mut self, r: &AdaptiveReport, times: u64) {
        match (self, r) {
            (AdaptiveAggregator::Grr(a), AdaptiveReport::Grr(r)) => a.add_unchecked_times(r, times),
            (AdaptiveAggregator::Oue(a), AdaptiveReport::Oue(r)) => a.add_unchecked_times(r, times),
            _ => {}
        }
    }
    fn add_batch(&mut self, reports: &[AdaptiveReport]) -> Result<()> {
        for (i, r) in reports.iter().enumerate() {
            self.validate(r).map_err(|e| crate::aggregate::at_index(e, i))?;
        }
        self.add_validated(reports.iter());
        Ok(())
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        match (self, other) {
            (AdaptiveAggregator::Grr(a), AdaptiveAggregator::Grr(b)) => a.merge(b),
            (AdaptiveAggregator::Oue(a), AdaptiveAggregator::Oue(b)) => a.merge(b),
            (a, b) => Err(Error::Incompatible(format!(
                "adaptive aggregators of different branches: {} vs {}",
                a.branch(),
                b.branch()
            ))),
        }
    }
    fn count(&self) -> u64 {
        match self {
            AdaptiveAggregator::Grr(a) => a.count(),
            AdaptiveAggregator::Oue(a) => a.count(),
        }
    }
    fn estimate(&self) -> FrequencyEstimate {
        match self {
            AdaptiveAggregator::Grr(a) => a.estimate(),
            AdaptiveAggregator::Oue(a) => a.estimate(),
        }
    }
}

impl AdaptiveAggregator {
    /// Adds already validated reports (the OUE branch uses the carry-save batch path).
    pub(crate) fn add_validated<'a>(&mut self, reports: impl Iterator<Item = &'a AdaptiveReport>) {
        match self {
            AdaptiveAggregator::Grr(a) => reports.for_each(|r| {
                if let AdaptiveReport::Grr(r) = r {
                    a.add_unchecked(r)
                }
            }),
            AdaptiveAggregator::Oue(a) => {
                a.add_validated(reports.filter_map(|r| if let AdaptiveReport::Oue(r) = r { Some(r) } else { None }))
            }
        }
    }
    fn branch(&self) -> &'static str {
        match self {
            AdaptiveAggregator::Grr(_) => "grr",
            AdaptiveAggregator::Oue(_) => "oue",
        }
    }
}

impl crate::state::SaveState for AdaptiveAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        match self {
            AdaptiveAggregator::Grr(a) => a.save_state(w),
            AdaptiveAggregator::Oue(a) => a.save_state(w),
        }
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        match self {
            AdaptiveAggregator::Grr(a) => a.merge_state(r),
            AdaptiveAggregator::Oue(a) => a.merge_state(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_point_is_3e_plus_2() {
        let e = 2f64.exp(); // 3e + 2 = 24.17
        assert_eq!(Adaptive::new(2.0, 24).unwrap().branch(), "grr");
        assert_eq!(Adaptive::new(2.0, 25).unwrap().branch(), "oue");
        assert!(3.0 * e + 2.0 > 24.0 && 3.0 * e + 2.0 < 25.0);
        // The chosen branch has the smaller f_v = 0 variance.
        for d in [3usize, 10, 24, 25, 40] {
            let a = Adaptive::new(2.0, d).unwrap();
            let g = Grr::new(2.0, d).unwrap().report_variance(0, 1);
            let o = Oue::new(2.0, d).unwrap().report_variance(0, 1);
            assert!((a.report_variance(0, 1) - g.min(o)).abs() < 1e-12, "d = {d}");
        }
    }

    #[test]
    fn wrong_branch_reports_and_merges_are_rejected() {
        let g = Adaptive::new(1.0, 4).unwrap();
        let o = Adaptive::new(1.0, 64).unwrap();
        let mut ga = g.aggregator();
        let e = ga.add(&AdaptiveReport::Oue(UnaryReport { bits: vec![0] })).unwrap_err();
        assert!(matches!(e, Error::InvalidReport { .. }) && e.to_string().contains("a grr report"), "{e}");
        let e = ga.merge(&o.aggregator()).unwrap_err();
        assert!(matches!(e, Error::Incompatible(_)), "{e}");
    }
}
