//! The estimate document of every task: `GET /v1/collections/{id}/estimates`, `harmony query`
//! and `harmony simulate --format json` (its `estimates` key) print the same JSON.
//!
//! Every number carries its standard error and 95% CI ([`Est`]); each is `null` when it does
//! not exist: no report yet (a collection with 0 reports has no estimate, not a midpoint), a
//! standard error that is infinite, or an answer that was post-processed (biased; its raw
//! standard error is given where it is a useful guide, and says so).
//!
//! **Raw and in-domain values.** `estimate` and `ci95` are the unbiased (raw) estimate: the one
//! that merges, and the one to average across collections. It can fall where no real value can
//! (a negative frequency, a mean below the attribute's minimum, a CDF above 1). Where it does,
//! the same number carries `in_domain` ([`InDomain`]): the estimate moved into its domain
//! (frequencies projected onto the simplex, means and CIs clamped to [min, max], CDFs made
//! monotone in [0, 1], marginals made consistent and non-negative). That is the value to show;
//! it is biased towards the domain's interior. Each task's document says how in `in_domain_note`,
//! and lists in `warnings` the estimates whose predicted standard error is large against their
//! scale ([`PrecisionWarning`]).
//!
//! ```json
//! {"collection": "…", "reports": 48842, "epsilon": 1.0, "task": "range", "attribute": "age", …}
//! ```

use harmony_core::estimate::Estimate;
use serde::{Deserialize, Serialize};

/// A number with its uncertainty; `null` fields when undefined (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Est {
    /// The point estimate (raw: unbiased where the task's estimator is, and what merges).
    pub estimate: Option<f64>,
    /// Its standard error.
    pub std_error: Option<f64>,
    /// Its 95% confidence interval.
    pub ci95: Option<[f64; 2]>,
    /// The estimate and interval moved into their domain, present only where either differs
    /// from the raw one (see the module docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_domain: Option<InDomain>,
}

/// An estimate moved into its domain (post-processing: no privacy cost, biased). Its interval
/// is the raw 95% CI with each end clamped to the domain, widened to contain the in-domain
/// point: the truth lies in the domain, so it covers the truth whenever the raw CI does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InDomain {
    /// The in-domain point estimate.
    pub estimate: f64,
    /// Its interval (`null` where the raw estimate has none).
    pub ci95: Option<[f64; 2]>,
}

/// An estimate too imprecise to read: its predicted standard error exceeds
/// [`PrecisionWarning::WARN_FRACTION`] of its scale (the width of its domain: 1 for a share,
/// max − min for a mean, the weights' range for a linear query). The standard error is the
/// task's closed form at the reports aggregated (the one `harmony plan` predicts); as it scales
/// as 1/√n, `reports_needed` = ⌈n·(SE / (TARGET_FRACTION·scale))²⌉ reports bring it to
/// [`PrecisionWarning::TARGET_FRACTION`] of the scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PrecisionWarning {
    /// What it is about (an attribute, a marginal's attributes, a query's name).
    pub subject: String,
    /// The largest standard error among its estimates.
    pub std_error: f64,
    /// Its scale (the width of its domain).
    pub scale: f64,
    /// The reports aggregated.
    pub reports: u64,
    /// The reports that would bring the standard error to `TARGET_FRACTION` of the scale.
    pub reports_needed: u64,
    /// One line saying so.
    pub message: String,
}

impl PrecisionWarning {
    /// A standard error above this fraction of the scale is flagged (a 95% CI of about ±10% of
    /// the domain's width).
    pub const WARN_FRACTION: f64 = 0.05;
    /// The useful precision `reports_needed` aims at: a standard error of 1% of the scale.
    pub const TARGET_FRACTION: f64 = 0.01;

    /// The warning for standard error `se` of `subject` on `scale` at `reports`, if it is due.
    pub fn check(subject: &str, se: f64, scale: f64, reports: u64) -> Option<Self> {
        if !(se.is_finite() && scale.is_finite() && scale > 0.0 && reports > 0) || se <= Self::WARN_FRACTION * scale {
            return None;
        }
        let ratio = se / (Self::TARGET_FRACTION * scale);
        let needed = (reports as f64 * ratio * ratio).ceil().min(u64::MAX as f64) as u64;
        let message = format!(
            "{subject}: standard error {se:.3} is {:.0}% of its scale {scale}; about {needed} reports ({} more) would bring it to {:.0}%",
            100.0 * se / scale,
            needed.saturating_sub(reports),
            100.0 * Self::TARGET_FRACTION,
        );
        Some(PrecisionWarning {
            subject: subject.to_string(),
            std_error: se,
            scale,
            reports,
            reports_needed: needed,
            message,
        })
    }
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

impl Est {
    /// No estimate.
    pub const NONE: Est = Est { estimate: None, std_error: None, ci95: None, in_domain: None };

    /// From a core estimate; non-finite parts become `null`.
    pub fn from_core(e: &Estimate) -> Self {
        let se = finite(e.std_error);
        Est {
            estimate: finite(e.value),
            std_error: se,
            ci95: match (finite(e.ci95[0]), finite(e.ci95[1]), se) {
                (Some(a), Some(b), Some(_)) => Some([a, b]),
                _ => None,
            },
            in_domain: None,
        }
    }
    /// A value with a standard error (95% CI from the normal approximation).
    pub fn new(value: f64, std_error: f64) -> Self {
        Self::from_core(&Estimate::new(value, std_error))
    }
    /// A post-processed value: no standard error, no interval.
    pub fn point(value: f64) -> Self {
        Est { estimate: finite(value), std_error: None, ci95: None, in_domain: None }
    }
    /// The value to show: the in-domain estimate where there is one, else the raw one.
    pub fn shown(&self) -> Option<f64> {
        self.in_domain.map(|d| d.estimate).or(self.estimate)
    }
    /// The interval to show: the in-domain one where there is one, else the raw one.
    pub fn shown_ci(&self) -> Option<[f64; 2]> {
        match self.in_domain {
            Some(d) => d.ci95,
            None => self.ci95,
        }
    }
    /// The estimate, or NaN.
    pub fn value(&self) -> f64 {
        self.estimate.unwrap_or(f64::NAN)
    }
    /// The standard error, or NaN.
    pub fn se(&self) -> f64 {
        self.std_error.unwrap_or(f64::NAN)
    }
}

/// `GET /v1/collections/{id}/estimates`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EstimateDocument {
    /// The collection id (`simulation` in `harmony simulate`).
    pub collection: String,
    /// Reports (or gradients) aggregated.
    pub reports: u64,
    /// ε of one report.
    pub epsilon: f64,
    /// The task's estimates.
    #[serde(flatten)]
    pub result: TaskEstimate,
}

/// The estimates of one task (`"task"` names it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "task", rename_all = "kebab-case")]
pub enum TaskEstimate {
    /// Per-attribute means and frequencies.
    Means(MeansEstimate),
    /// One attribute's frequencies.
    Frequency(FrequencyEstimate),
    /// CDF, ranges and quantiles.
    Range(RangeEstimate),
    /// Rectangles and a heatmap over two attributes.
    Range2d(Range2dEstimate),
    /// Heavy hitters.
    HeavyHitters(HeavyHittersEstimate),
    /// Marginals.
    Marginals(MarginalsEstimate),
    /// Linear queries.
    LinearQueries(LinearEstimate),
    /// The model of a training collection.
    Train(TrainEstimate),
}

impl TaskEstimate {
    /// The document's note on its in-domain values and its precision warnings (none for a
    /// model, whose estimate is a parameter vector).
    pub fn notes(&self) -> (Option<&String>, &[PrecisionWarning]) {
        match self {
            TaskEstimate::Means(m) => (m.in_domain_note.as_ref(), &m.warnings),
            TaskEstimate::Frequency(f) => (f.in_domain_note.as_ref(), &f.warnings),
            TaskEstimate::Range(r) => (r.in_domain_note.as_ref(), &r.warnings),
            TaskEstimate::Range2d(r) => (r.in_domain_note.as_ref(), &r.warnings),
            TaskEstimate::HeavyHitters(h) => (h.in_domain_note.as_ref(), &h.warnings),
            TaskEstimate::Marginals(m) => (m.in_domain_note.as_ref(), &m.warnings),
            TaskEstimate::LinearQueries(l) => (l.in_domain_note.as_ref(), &l.warnings),
            TaskEstimate::Train(_) => (None, &[]),
        }
    }
}

/// `means`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MeansEstimate {
    /// The strategy (`split`, `harmony`, `sample-k`).
    pub strategy: String,
    /// One entry per attribute, in schema order.
    pub attributes: Vec<AttributeResult>,
    /// How the in-domain values were obtained, when any differs from the raw estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_domain_note: Option<String>,
    /// The estimates too imprecise to read, with the reports that would make them useful.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<PrecisionWarning>,
}

/// One attribute's estimate, in the original units (numeric) or as frequencies (categorical).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum AttributeResult {
    /// A mean.
    Numeric {
        /// Attribute name.
        name: String,
        /// The mean in the attribute's units (of the present values, when the attribute
        /// reports missing values).
        #[serde(flatten)]
        mean: Est,
        /// The same on the randomizers' [-1, 1] scale.
        unit: Est,
        /// The share of devices whose value is missing (attributes with `missing = "report"`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        missing: Option<Est>,
    },
    /// Frequencies.
    Categorical {
        /// Attribute name.
        name: String,
        /// One per label (the last is "(missing)" when the attribute reports missing values).
        categories: Vec<CategoryResult>,
        /// The share of devices whose value is missing (attributes with `missing = "report"`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        missing: Option<Est>,
        /// The frequencies among the devices whose value is present, one per label but
        /// "(missing)" (attributes with `missing = "report"`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        present: Option<Vec<CategoryResult>>,
    },
}

/// One category's frequency estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CategoryResult {
    /// The label.
    pub label: String,
    /// Its frequency (a fraction of the devices).
    #[serde(flatten)]
    pub frequency: Est,
}

/// `frequency`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FrequencyEstimate {
    /// The attribute.
    pub attribute: String,
    /// The oracle.
    pub mechanism: String,
    /// One per label (the last is "(missing)" when the attribute reports missing values).
    pub categories: Vec<CategoryResult>,
    /// The share of devices whose value is missing (attributes with `missing = "report"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<Est>,
    /// The frequencies among the devices whose value is present, one per label but
    /// "(missing)" (attributes with `missing = "report"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present: Option<Vec<CategoryResult>>,
    /// How the in-domain values were obtained, when any differs from the raw estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_domain_note: Option<String>,
    /// The estimates too imprecise to read, with the reports that would make them useful.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<PrecisionWarning>,
}

/// `range`: the CDF, the ranges and the quantiles asked (default: none and 0.1, 0.5, 0.9), in
/// the attribute's units and in bins.
///
/// Methods: `flat` and `haar` answer with their unbiased estimators and exact standard errors.
/// `hh` answers with the consistent estimate (Hay et al.'s constrained inference: unbiased, its
/// weights being public constants); its `std_error` and `ci95` are the raw hierarchical
/// estimator's, whose variance is exact and which the consistent one beats in practice (a
/// conservative guide). Standard errors plug in the estimated bin fractions; the split of devices
/// across levels uses the realized level sizes `level_reports`. Until every level has a report
/// every number is `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RangeEstimate {
    /// The attribute.
    pub attribute: String,
    /// `hh`, `haar` or `flat`.
    pub method: String,
    /// Number of bins D.
    pub bins: usize,
    /// The attribute's [min, max]: bin t covers [min + t·w, min + (t+1)·w), w = (max − min)/D
    /// (the last bin includes max).
    pub bounds: [f64; 2],
    /// Reports per level of the collection (one entry for `flat`).
    pub level_reports: Vec<u64>,
    /// P[x < edge] at every bin edge (D + 1 points) when D ≤ 1024, else at every ⌈D/1024⌉-th
    /// edge and at D.
    pub cdf: Vec<CdfPoint>,
    /// The ranges asked.
    pub ranges: Vec<RangeResult>,
    /// The quantiles asked.
    pub quantiles: Vec<QuantileResult>,
    /// How the in-domain values were obtained, when any differs from the raw estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_domain_note: Option<String>,
    /// The estimates too imprecise to read, with the reports that would make them useful.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<PrecisionWarning>,
}

/// `range2d`: the finest grid as a heatmap and the rectangles asked, in the attributes' units
/// and in bins.
///
/// Every answer is the consistent quadtree estimate (Hay et al.'s constrained inference over the
/// levels: unbiased, its weights being public constants) with its exact standard error: the
/// answer is one linear combination of the raw node estimates, whose variance is closed-form at
/// the estimated cell fractions (plugged in) and the realized level sizes `level_reports`. Until
/// every level has a report every number is `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Range2dEstimate {
    /// The x attribute.
    pub x: String,
    /// The y attribute.
    pub y: String,
    /// Bins per axis (`2^levels`).
    pub bins: usize,
    /// The x attribute's [min, max]: x bin i covers [min + i·w, min + (i+1)·w), w = (max − min)/bins.
    pub x_bounds: [f64; 2],
    /// The y attribute's [min, max], binned likewise.
    pub y_bounds: [f64; 2],
    /// Reports per quadtree level (level 1: 2 × 2 cells, …, the last: bins × bins).
    pub level_reports: Vec<u64>,
    /// The share of devices in each finest cell: `heatmap[j][i]` is x bin i, y bin j.
    pub heatmap: Vec<Vec<Est>>,
    /// The rectangles asked.
    pub rects: Vec<RectResult>,
    /// How the in-domain values were obtained, when any differs from the raw estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_domain_note: Option<String>,
    /// The estimates too imprecise to read, with the reports that would make them useful.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<PrecisionWarning>,
}

/// One rectangle's share of the devices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RectResult {
    /// The rectangle asked, in the attributes' units: [x_lo, x_hi) × [y_lo, y_hi).
    pub rect: [f64; 4],
    /// The bins it was rounded to, [x_a, x_b) × [y_a, y_b) (each end to the nearest bin edge).
    pub bins: [usize; 4],
    /// The share of devices in it.
    #[serde(flatten)]
    pub share: Est,
}

/// One point of the CDF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CdfPoint {
    /// The bin edge t (0..=D).
    pub bin: usize,
    /// The edge in the attribute's units.
    pub x: f64,
    /// P[x < edge].
    #[serde(flatten)]
    pub value: Est,
}

/// One range's share of the devices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RangeResult {
    /// The range asked, in the attribute's units ([lo, hi)).
    pub range: [f64; 2],
    /// The bins it was rounded to ([a, b): each end to the nearest bin edge, within [0, D]).
    pub bins: [usize; 2],
    /// The share of devices in [a, b).
    #[serde(flatten)]
    pub share: Est,
}

/// One quantile: a bin and an interval from inverting the CDF's pointwise 95% band; every field
/// but `q` is `null` until there is an estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuantileResult {
    /// The level q in (0, 1).
    pub q: f64,
    /// The estimated bin: the first t with F̂(t + 1) ≥ q.
    pub bin: Option<usize>,
    /// The bin's interval in units [lo, hi).
    pub value: Option<[f64; 2]>,
    /// The 95% interval in bins [lower, upper]: the first t with F̂(t + 1) + 1.96·se ≥ q and the
    /// first with F̂(t + 1) − 1.96·se ≥ q (D − 1 when none).
    pub interval_bins: Option<[usize; 2]>,
    /// The same in units (lower bin's start, upper bin's end).
    pub interval: Option<[f64; 2]>,
}

/// `heavy-hitters`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeavyHittersEstimate {
    /// `pem`, `treehist` or `sketch`.
    pub method: String,
    /// Code length B.
    pub bits: u32,
    /// The padding length L of the sets (frequencies are L times the share of reports).
    pub pad_length: usize,
    /// The top items, by estimate; empty until every level has a report (the search walks the
    /// levels in order).
    pub items: Vec<HeavyHitterResult>,
    /// Per level: prefix bits, reports, candidates, kept (candidates and kept are 0 for levels
    /// the search did not reach).
    pub levels: Vec<HeavyLevel>,
    /// How the in-domain values were obtained, when any differs from the raw estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_domain_note: Option<String>,
    /// The estimates too imprecise to read, with the reports that would make them useful.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<PrecisionWarning>,
}

/// One heavy hitter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeavyHitterResult {
    /// Its code (hex of the B-bit code).
    pub code: String,
    /// Its name, when a public candidate maps to the code (several joined by ` | ` when their
    /// codes collide).
    pub item: Option<String>,
    /// The share of devices holding it: unbiased given the candidates of the last level (which
    /// come from the other levels' reports), with its closed-form standard error; ranking the
    /// candidates by the same estimates favours those drawn high near the k-th place.
    #[serde(flatten)]
    pub frequency: Est,
}

/// One level of the prefix search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeavyLevel {
    /// Prefix length.
    pub prefix_bits: u32,
    /// Reports of this level.
    pub reports: u64,
    /// Candidates estimated.
    pub candidates: usize,
    /// Candidates kept.
    pub kept: usize,
}

/// `marginals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MarginalsEstimate {
    /// `calm`, `direct` or `fourier`.
    pub method: String,
    /// The post-processing applied (`joint`, `family` — also when `joint` fell back to it for a
    /// too large joint table —, `gls`, `local`, `raw`, or `none` for direct and fourier).
    pub post: String,
    /// The device groups' attribute sets (CALM's materialized sets, direct's queries; empty for
    /// `fourier`, whose groups are its coefficients).
    pub sets: Vec<Vec<String>>,
    /// Reports per group (per set; per coefficient for `fourier`).
    pub group_reports: Vec<u64>,
    /// One per query (every k-way marginal for k in `ways`, k ascending, attributes in order).
    pub marginals: Vec<MarginalResult>,
    /// How the in-domain values were obtained, when any differs from the raw estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_domain_note: Option<String>,
    /// The estimates too imprecise to read, with the reports that would make them useful.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<PrecisionWarning>,
}

/// One marginal: its cells in row-major order (the last attribute fastest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MarginalResult {
    /// The attributes.
    pub attributes: Vec<String>,
    /// The labels of each attribute (bins as `[lo, hi)` for numeric ones).
    pub labels: Vec<Vec<String>>,
    /// The cells' shares. Unbiased cells (`raw`, `direct`, `fourier`) carry their closed-form
    /// standard error and 95% CI. Post-processed cells (`joint`, `family`, `gls`, `local`) have
    /// no standard error of their own: `std_error` is then the root mean square per-cell error
    /// of the GLS-consistent estimate they start from (√(predicted_sse / cells)), a guide, and
    /// `ci95` is `null`; cells reconstructed by maximum entropy (no covering set) have neither.
    /// All `null` when the marginal cannot be estimated yet (no report in the groups it needs).
    pub cells: Vec<Est>,
    /// The predicted total squared error of the cells (closed form, plug-in: of the unbiased
    /// answer, or of the GLS-consistent estimate for post-processed cells; `null` when none
    /// exists).
    pub predicted_sse: Option<f64>,
}

/// `linear-queries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LinearEstimate {
    /// `hr`, `gaussian` or `adaptive`.
    pub mechanism: String,
    /// J: the size of the domain the queries are over.
    pub domain_size: usize,
    /// `gaussian`: σ of each report's noise (in the queries' units).
    pub sigma: Option<f64>,
    /// `adaptive`: reports per query (the realized group sizes; empty for the others).
    pub group_reports: Vec<u64>,
    /// One per query: the unbiased answer with its standard error and CI.
    pub queries: Vec<LinearResult>,
    /// `gaussian`: a certified bound on the L2 distance between the projected answers and the
    /// exact projection (the projection's iterations are capped; `null` otherwise).
    pub projection_bound: Option<f64>,
    /// How the in-domain values were obtained, when any differs from the raw estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_domain_note: Option<String>,
    /// The estimates too imprecise to read, with the reports that would make them useful.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<PrecisionWarning>,
}

/// One query's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LinearResult {
    /// The query's name.
    pub name: String,
    /// The unbiased answer (`null` until the query has a report).
    #[serde(flatten)]
    pub answer: Est,
    /// The projected answer (post-processed: biased, no standard error, lower L2 error in high
    /// dimensions): `gaussian` onto the workload's hull (`hull`), `hr` from the distribution
    /// projected onto the simplex; `null` for `adaptive` and without reports.
    pub projected: Option<f64>,
}

/// `train`: the model and its round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TrainEstimate {
    /// The feature names (intercept first).
    pub features: Vec<String>,
    /// The public round state, with the model to use.
    pub state: crate::bodies::ModelState,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_round_trip_and_non_finite_numbers_are_null() {
        let doc = EstimateDocument {
            collection: "c".into(),
            reports: 0,
            epsilon: 1.0,
            result: TaskEstimate::Means(MeansEstimate {
                strategy: "harmony".into(),
                attributes: vec![AttributeResult::Numeric {
                    name: "age".into(),
                    mean: Est::from_core(&Estimate::new(0.0, f64::INFINITY)),
                    unit: Est::NONE,
                    missing: None,
                }],
                in_domain_note: None,
                warnings: Vec::new(),
            }),
        };
        let text = serde_json::to_string(&doc).unwrap();
        assert!(text.contains("\"task\":\"means\"") && text.contains("\"std_error\":null"), "{text}");
        assert_eq!(serde_json::from_str::<EstimateDocument>(&text).unwrap(), doc);
        assert_eq!(Est::new(1.0, 0.5).ci95.unwrap()[1], 1.0 + 1.959_963_984_540_054 * 0.5);
    }

    #[test]
    fn documents_without_in_domain_fields_still_parse_and_warnings_follow_the_rule() {
        // A document written before the in-domain values and warnings existed.
        let old = r#"{"collection":"c","reports":10,"epsilon":1.0,"task":"frequency","attribute":"a",
            "mechanism":"oue","categories":[{"label":"x","estimate":-0.2,"std_error":0.1,"ci95":[-0.4,0.0]}]}"#;
        let doc: EstimateDocument = serde_json::from_str(old).unwrap();
        let TaskEstimate::Frequency(f) = &doc.result else { panic!() };
        assert!(f.warnings.is_empty() && f.in_domain_note.is_none() && f.categories[0].frequency.in_domain.is_none());
        assert_eq!(f.categories[0].frequency.shown(), Some(-0.2));
        // Absent fields are not written: the old document's JSON is unchanged.
        assert!(!serde_json::to_string(&doc).unwrap().contains("in_domain"));
        // The rule: SE above 5% of the scale warns; SE ∝ 1/√n gives the reports for 1%.
        assert!(PrecisionWarning::check("a", 0.05, 1.0, 100).is_none());
        let w = PrecisionWarning::check("age", 7.3, 73.0, 2000).unwrap();
        assert_eq!(w.reports_needed, 200_000);
        assert!(w.message.contains("198000 more"), "{}", w.message);
        assert!(PrecisionWarning::check("a", f64::NAN, 1.0, 100).is_none());
        assert!(PrecisionWarning::check("a", 1.0, 1.0, 0).is_none());
    }
}

/// What an analyst asks of a collection's estimates at query time:
/// `GET …/estimates?ranges=20:30,40:65&quantiles=0.5,0.9`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    /// `range`: ranges [lo, hi) in the attribute's units.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<[f64; 2]>,
    /// `range`: quantile levels in (0, 1) (default 0.1, 0.5, 0.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantiles: Option<Vec<f64>>,
    /// `range2d`: rectangles [x_lo, x_hi) × [y_lo, y_hi) in the attributes' units.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rects: Vec<[f64; 4]>,
}

impl Query {
    /// Parses a URL query string (`ranges=LO:HI,…&quantiles=Q,…`; empty → the defaults). The
    /// error is `(field, message)`.
    pub fn parse(query: &str) -> Result<Self, (String, String)> {
        let mut q = Query::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let bad = |what: &str| (key.to_string(), format!("{key} is {value:?}, expected {what}"));
            match key {
                "ranges" => {
                    for r in value.split(',').filter(|r| !r.is_empty()) {
                        let (lo, hi) = r.split_once(':').ok_or_else(|| bad("LO:HI pairs separated by commas"))?;
                        let (lo, hi) = (lo.parse::<f64>(), hi.parse::<f64>());
                        match (lo, hi) {
                            (Ok(lo), Ok(hi)) if lo.is_finite() && hi.is_finite() && lo <= hi => q.ranges.push([lo, hi]),
                            _ => return Err(bad("LO:HI pairs of finite numbers with LO <= HI")),
                        }
                    }
                }
                "quantiles" => {
                    let mut levels = Vec::new();
                    for v in value.split(',').filter(|v| !v.is_empty()) {
                        match v.parse::<f64>() {
                            Ok(x) if x > 0.0 && x < 1.0 => levels.push(x),
                            _ => return Err(bad("levels in (0, 1) separated by commas")),
                        }
                    }
                    q.quantiles = Some(levels);
                }
                "rects" => {
                    for r in value.split(',').filter(|r| !r.is_empty()) {
                        let v: Vec<f64> = r.split(':').filter_map(|x| x.parse::<f64>().ok()).collect();
                        match v[..] {
                            [x1, x2, y1, y2] if v.iter().all(|x| x.is_finite()) && x1 <= x2 && y1 <= y2 => {
                                q.rects.push([x1, x2, y1, y2])
                            }
                            _ => return Err(bad("X1:X2:Y1:Y2 rectangles of finite numbers (X1 <= X2, Y1 <= Y2)")),
                        }
                    }
                }
                _ => {
                    return Err((
                        key.to_string(),
                        format!("unknown query parameter {key:?}, expected ranges, quantiles or rects"),
                    ));
                }
            }
        }
        Ok(q)
    }
    /// The query string [`Self::parse`] reads (empty for the defaults).
    pub fn to_query_string(&self) -> String {
        let mut parts = Vec::new();
        if !self.ranges.is_empty() {
            let r: Vec<String> = self.ranges.iter().map(|[a, b]| format!("{a}:{b}")).collect();
            parts.push(format!("ranges={}", r.join(",")));
        }
        if let Some(q) = &self.quantiles {
            let q: Vec<String> = q.iter().map(|x| x.to_string()).collect();
            parts.push(format!("quantiles={}", q.join(",")));
        }
        if !self.rects.is_empty() {
            let r: Vec<String> = self.rects.iter().map(|[a, b, c, d]| format!("{a}:{b}:{c}:{d}")).collect();
            parts.push(format!("rects={}", r.join(",")));
        }
        parts.join("&")
    }
}

#[cfg(test)]
mod query_tests {
    use super::*;

    #[test]
    fn query_strings_round_trip_and_name_bad_parameters() {
        let q = Query::parse("ranges=20:30,40.5:65&quantiles=0.5,0.9").unwrap();
        assert_eq!(q.ranges, vec![[20.0, 30.0], [40.5, 65.0]]);
        assert_eq!(Query::parse(&q.to_query_string()).unwrap(), q);
        assert_eq!(Query::parse("").unwrap(), Query::default());
        assert_eq!(Query::parse("ranges=3:1").unwrap_err().0, "ranges");
        assert_eq!(Query::parse("quantiles=1.5").unwrap_err().0, "quantiles");
        assert_eq!(Query::parse("top=3").unwrap_err().0, "top");
        let r = Query::parse("rects=20:30:0:40.5,1:2:3:4").unwrap();
        assert_eq!(r.rects, vec![[20.0, 30.0, 0.0, 40.5], [1.0, 2.0, 3.0, 4.0]]);
        assert_eq!(Query::parse(&r.to_query_string()).unwrap(), r);
        assert_eq!(Query::parse("rects=1:2:3").unwrap_err().0, "rects");
        assert_eq!(Query::parse("rects=2:1:3:4").unwrap_err().0, "rects");
    }
}
