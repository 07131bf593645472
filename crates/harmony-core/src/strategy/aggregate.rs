//! The server side of a record strategy: exact per-attribute sums and the mergeable
//! [`RecordAggregator`] with its estimates and standard errors.

use super::{AttributeMechanism, AttributeReport, RecordMechanism, RecordReport};
use crate::aggregate::Aggregator;
use crate::error::Result;
use crate::estimate::{Estimate, FrequencyEstimate};
use crate::frequency::{AnyAggregator, FrequencyOracle};
use crate::missing::{self, MissingEstimate};
use crate::numeric::{AnyNumeric, DuchiMulti, NumericMechanism, NumericReport, VectorMechanism};
use serde::Serialize;

/// Per-attribute sums of the decoded numeric reports, kept exactly: fixed-point reports as integer
/// grid units (Σu, Σu²) and sign reports as counts, so that the sums, and hence the estimates, do
/// not depend on the order in which reports are added or aggregators merged.
///
/// No sum can overflow, for any sequence of reports (accepted or not: a report that does not
/// decode adds nothing but its count) and any merges, up to n < 2⁶⁴ reports (`n` is a `u64`):
/// |u| ≤ 2⁶³ so |Σu| < 2⁶³·2⁶⁴ = 2¹²⁷ fits the `i128`; u² < 2¹²⁶ so Σu² < 2¹⁹⁰ fits the 192-bit
/// [`Wide`]; the sign counts are at most n. (Decoders also bound every accepted report to its
/// mechanism's support, e.g. ±(3 + 84/ε) for Laplace: |u| < 2³⁷.) An `i128` Σu² overflowed
/// after eight reports of 2⁶² units (found by fuzzing).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct NumSums {
    n: u64,
    units: i128,
    units_sq: Wide,
    positive: u64,
    negative: u64,
}

/// An unsigned 192-bit sum, `lo` + 2¹²⁸·`hi`: exact and order-independent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Wide {
    lo: u128,
    hi: u64,
}

impl Wide {
    fn add(&mut self, x: u128) {
        let (lo, carry) = self.lo.overflowing_add(x);
        self.lo = lo;
        self.hi += carry as u64;
    }
    fn merge(&mut self, other: Wide) {
        self.add(other.lo);
        self.hi += other.hi;
    }
    fn to_f64(self) -> f64 {
        self.hi as f64 * 2f64.powi(128) + self.lo as f64
    }
}

impl NumSums {
    fn add(&mut self, mech: &AnyNumeric, x: &NumericReport) {
        self.n += 1;
        // A report that does not decode counts as 0 (the unchecked path's convention).
        if mech.decode(x).is_ok() {
            match *x {
                NumericReport::Fixed(u) => {
                    self.units += u as i128;
                    self.units_sq.add(u.unsigned_abs() as u128 * u.unsigned_abs() as u128);
                }
                NumericReport::Sign(true) => self.positive += 1,
                NumericReport::Sign(false) => self.negative += 1,
            }
        }
    }
    fn merge(&mut self, other: &NumSums) {
        self.n += other.n;
        self.units += other.units;
        self.units_sq.merge(other.units_sq);
        self.positive += other.positive;
        self.negative += other.negative;
    }
    /// (ΣY, ΣY²) in the mechanism's output units.
    fn sums(&self, mech: &AnyNumeric) -> (f64, f64) {
        let step = crate::numeric::GRID_STEP;
        let c = mech.decode(&NumericReport::Sign(true)).unwrap_or(0.0);
        let signs = self.positive as f64 - self.negative as f64;
        let sum = self.units as f64 * step + signs * c;
        let sum_sq = self.units_sq.to_f64() * (step * step) + (self.positive + self.negative) as f64 * c * c;
        (sum, sum_sq)
    }
}

/// The per-attribute estimate of a record collection.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum AttributeEstimate {
    /// Mean on [-1, 1].
    Numeric(Estimate),
    /// Category frequencies.
    Categorical(FrequencyEstimate),
}

/// Mergeable aggregator of [`RecordReport`]s.
#[derive(Debug, Clone)]
pub struct RecordAggregator {
    mechanism: RecordMechanism,
    n: u64,
    numeric: Vec<NumSums>,
    categorical: Vec<Option<AnyAggregator>>,
    joint: Option<crate::numeric::VectorMeanAggregator<DuchiMulti>>,
}

impl RecordAggregator {
    /// An empty aggregator for `mechanism`'s reports.
    pub(super) fn new(mechanism: &RecordMechanism) -> Self {
        RecordAggregator {
            mechanism: mechanism.clone(),
            n: 0,
            numeric: vec![NumSums::default(); mechanism.schema.len()],
            categorical: mechanism
                .mechanisms
                .iter()
                .map(|m| if let AttributeMechanism::Categorical(o) = m { Some(o.aggregator()) } else { None })
                .collect(),
            joint: mechanism.joint.as_ref().map(|j| j.aggregator()),
        }
    }

    /// The record mechanism.
    pub fn mechanism(&self) -> &RecordMechanism {
        &self.mechanism
    }
    /// Per-attribute unbiased estimates (numeric on [-1, 1]) with plug-in standard errors.
    ///
    /// Each attribute is estimated from the n_j reports that carry it (all n for split): the
    /// mean of the n_j unbiased reports (numeric), the oracle's estimate over them
    /// (categorical). Given which users sampled j they are a simple random sample of the
    /// population, so this ratio estimator is unbiased for the population value; its variance
    /// adds the sampling term (1/n_j − 1/n)·S² to the randomization noise, where scaling every
    /// report by d/k and dividing by n (Horvitz–Thompson) would add (d/k − 1)/n·E\[t²\], larger
    /// by the squared mean.
    pub fn estimates(&self) -> Vec<AttributeEstimate> {
        let n = self.n as f64;
        let joint = self.joint.as_ref().map(|j| j.estimate());
        let mut out = Vec::with_capacity(self.numeric.len());
        for (j, m) in self.mechanism.mechanisms.iter().enumerate() {
            out.push(match m {
                AttributeMechanism::Joint => {
                    let pos = self.mechanism.numeric_positions.iter().position(|&p| p == j).unwrap_or(0);
                    AttributeEstimate::Numeric(joint.as_ref().map(|e| e[pos]).unwrap_or(Estimate::new(0.0, f64::NAN)))
                }
                AttributeMechanism::Numeric(mech) => {
                    let sums = self.numeric[j];
                    let nj = sums.n as f64;
                    if sums.n == 0 {
                        AttributeEstimate::Numeric(Estimate::new(0.0, f64::INFINITY))
                    } else {
                        let (sum, sum_sq) = sums.sums(mech);
                        let value = sum / nj;
                        let (a, b) = mech.variance_coefficients();
                        // Σt² over the n_j reporters, unbiased from ΣY² = Σ((1 + a)t² + b).
                        let sum_t2 = if 1.0 + a > 1e-9 {
                            ((sum_sq - nj * b) / (1.0 + a)).clamp(0.0, nj)
                        } else {
                            (nj * value * value).min(nj)
                        };
                        let noise = (a * sum_t2 + b * nj) / (nj * nj);
                        let spread = (sum_t2 / nj - value * value).max(0.0);
                        let var = noise + (1.0 / nj - 1.0 / n).max(0.0) * spread;
                        AttributeEstimate::Numeric(Estimate::from_variance(value, var))
                    }
                }
                AttributeMechanism::Categorical(_) => {
                    let agg = self.categorical[j].as_ref().expect("categorical aggregator");
                    let mut fe = agg.estimate();
                    let nj = agg.count() as f64;
                    if nj == 0.0 {
                        fe = FrequencyEstimate::empty(fe.frequencies.len());
                    } else {
                        let extra = (1.0 / nj - 1.0 / n).max(0.0);
                        for (se, &f) in fe.std_errors.iter_mut().zip(&fe.frequencies) {
                            let fc = f.clamp(0.0, 1.0);
                            *se = (*se * *se + extra * fc * (1.0 - fc)).sqrt();
                        }
                    }
                    fe.n = self.n;
                    AttributeEstimate::Categorical(fe)
                }
            });
        }
        out
    }
}

impl RecordAggregator {
    /// For every attribute that reports missing values (`missing = "report"`), its missing
    /// share and its present values' mean or frequencies ([`crate::missing`]); `None` for the
    /// others and for presence attributes. `estimates` are [`RecordAggregator::estimates`].
    /// A categorical attribute whose oracle has no closed-form cross moment gets NaN standard
    /// errors (the collection refuses such a spec: [`RecordMechanism::new`]).
    pub fn missing_estimates(&self, estimates: &[AttributeEstimate]) -> Vec<Option<MissingEstimate>> {
        let schema = &self.mechanism.schema;
        let n = self.n as f64;
        let d = schema.len() as f64;
        let sampling = if d > 1.0 { (self.mechanism.scale - 1.0) / (d - 1.0) } else { 0.0 };
        (0..schema.len())
            .map(|j| match (&estimates[j], schema.presence_of(j), schema.missing_category(j)) {
                (AttributeEstimate::Numeric(y), Some(p), _) => {
                    let AttributeEstimate::Categorical(fp) = &estimates[p] else { return None };
                    let m = fp.get(1);
                    Some(missing::present_mean(*y, m, sampling * y.value * m.value.clamp(0.0, 1.0) / n))
                }
                (AttributeEstimate::Categorical(fe), _, Some(m)) => {
                    let m = m as usize;
                    Some(missing::present_frequencies(fe, m, |c| self.category_covariance(j, fe, c, m)))
                }
                _ => None,
            })
            .collect()
    }

    /// Cov(f̂_a, f̂_b) of categorical attribute j's estimates `fe` (plug-in, frequencies clamped
    /// to [0, 1]): the oracle's cross moment over the n_j reports, plus the sampling term.
    fn category_covariance(&self, j: usize, fe: &FrequencyEstimate, a: usize, b: usize) -> f64 {
        let (AttributeMechanism::Categorical(o), Some(agg)) = (&self.mechanism.mechanisms[j], &self.categorical[j])
        else {
            return f64::NAN;
        };
        let nj = agg.count() as f64;
        let freqs: Vec<f64> = fe.frequencies.iter().map(|f| f.clamp(0.0, 1.0)).collect();
        let cross = o.aggregate_cross_moment(&freqs, a, b).unwrap_or(f64::NAN);
        cross / nj - (1.0 / nj - 1.0 / self.n as f64).max(0.0) * freqs[a] * freqs[b]
    }
}

impl Aggregator for RecordAggregator {
    type Report = RecordReport;
    type Output = Vec<AttributeEstimate>;

    fn validate(&self, r: &RecordReport) -> Result<()> {
        self.mechanism.validate_report(r)
    }

    fn add_unchecked(&mut self, r: &RecordReport) {
        self.n += 1;
        for (j, rep) in &r.attributes {
            let j = *j as usize;
            match (&self.mechanism.mechanisms[j], rep) {
                (AttributeMechanism::Numeric(mech), AttributeReport::Numeric(x)) => {
                    self.numeric[j].add(mech, x);
                }
                (AttributeMechanism::Categorical(_), AttributeReport::Categorical(x)) => {
                    if let Some(agg) = self.categorical[j].as_mut() {
                        agg.add_unchecked(x);
                    }
                }
                _ => {}
            }
        }
        if let (Some(agg), Some(x)) = (self.joint.as_mut(), r.joint.as_ref()) {
            agg.add_unchecked(x);
        }
    }

    fn merge(&mut self, other: &Self) -> Result<()> {
        crate::aggregate::check_compatible("record mechanism", &self.mechanism, &other.mechanism)?;
        self.n += other.n;
        for (a, b) in self.numeric.iter_mut().zip(&other.numeric) {
            a.merge(b);
        }
        for (a, b) in self.categorical.iter_mut().zip(&other.categorical) {
            if let (Some(a), Some(b)) = (a.as_mut(), b.as_ref()) {
                a.merge(b)?;
            }
        }
        if let (Some(a), Some(b)) = (self.joint.as_mut(), other.joint.as_ref()) {
            a.merge(b)?;
        }
        Ok(())
    }

    fn count(&self) -> u64 {
        self.n
    }

    fn estimate(&self) -> Vec<AttributeEstimate> {
        self.estimates()
    }
}

impl crate::state::SaveState for RecordAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n);
        w.len(self.numeric.len());
        for s in &self.numeric {
            w.u64(s.n);
            w.i128(s.units);
            w.u128(s.units_sq.lo);
            w.u64(s.units_sq.hi);
            w.u64(s.positive);
            w.u64(s.negative);
        }
        w.len(self.categorical.len());
        for a in self.categorical.iter().flatten() {
            a.save_state(w);
        }
        if let Some(j) = &self.joint {
            j.save_state(w);
        }
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.n += r.u64("record reports")?;
        r.len_exactly("numeric attributes", self.numeric.len())?;
        for s in &mut self.numeric {
            let other = NumSums {
                n: r.u64("numeric reports")?,
                units: r.i128("numeric sum")?,
                units_sq: Wide { lo: r.u128("numeric sum of squares")?, hi: r.u64("numeric sum of squares")? },
                positive: r.u64("numeric positive signs")?,
                negative: r.u64("numeric negative signs")?,
            };
            s.merge(&other);
        }
        r.len_exactly("categorical attributes", self.categorical.len())?;
        for a in self.categorical.iter_mut().flatten() {
            a.merge_state(r)?;
        }
        if let Some(j) = &mut self.joint {
            j.merge_state(r)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frequency::{AnyReport, GrrReport};
    use crate::numeric::DuchiMultiReport;
    use crate::sampling::fast_rng;
    use rand::RngExt;

    /// `decode_into` reads every numeric record `wire::decode` reads, the same report, and
    /// nothing `wire::decode` refuses: random records (signs, fixed values to ±i64::MAX, some
    /// with a categorical attribute or a joint report, which it leaves to `wire::decode`), each
    /// also truncated, extended and with a byte changed.
    #[test]
    fn the_fast_decode_agrees_with_the_wire_decode() {
        let mut rng = fast_rng(5);
        let mut r = RecordReport::default();
        let (mut inputs, mut read) = (Vec::new(), 0);
        for i in 0..3_000 {
            let attributes = (0..i % 5)
                .map(|k| {
                    let report = match rng.random_range(0..10) {
                        0 => AttributeReport::Categorical(AnyReport::Grr(GrrReport { y: rng.random_range(0..9) })),
                        1..4 => AttributeReport::Numeric(NumericReport::Sign(rng.random())),
                        _ => AttributeReport::Numeric(NumericReport::Fixed(
                            rng.random::<i64>() >> rng.random_range(0..64),
                        )),
                    };
                    (rng.random::<u32>() >> rng.random_range(0..32) | k, report)
                })
                .collect();
            let joint = (i % 17 == 0).then(|| DuchiMultiReport { bits: vec![rng.random()] });
            let report = RecordReport { attributes, joint };
            let bytes = crate::wire::encode(&report);
            let numeric = report.joint.is_none()
                && report.attributes.iter().all(|(_, a)| matches!(a, AttributeReport::Numeric(_)));
            assert_eq!(r.decode_into(&bytes).is_some(), numeric, "{report:?}");
            if numeric {
                assert_eq!(r, report);
                read += 1;
            }
            inputs.extend(crate::wire::mutations(&bytes, &mut rng));
        }
        assert!(read > 1_000, "{read} numeric records read");
        for bytes in &inputs {
            if r.decode_into(bytes).is_some() {
                assert_eq!(crate::wire::decode::<RecordReport>(bytes).ok().as_ref(), Some(&r), "{bytes:02x?}");
            }
        }
    }
}
