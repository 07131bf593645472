//! The HTTP protocol's JSON bodies, shared by the server and the client.
//!
//! Reports travel as their versioned binary wire encoding ([`harmony_core::wire`]), hex-encoded
//! inside a JSON batch: `{"collection": ID, "config_version": 1, "reports": [{"id": RID,
//! "report": HEX}, ...]}`. A report id is chosen by the device (random 128 bits by default) and
//! makes a retried batch idempotent.

use harmony_core::estimate::Estimate;
use harmony_core::schema::Schema;
use harmony_core::strategy::StrategyOptions;
use serde::{Deserialize, Serialize};

/// The version of the client configuration document ([`CollectionConfig`]).
pub const CONFIG_VERSION: u32 = 1;
/// Largest number of reports in one batch.
pub const MAX_BATCH: usize = 10_000;
/// Longest report id (characters `[A-Za-z0-9_-]`).
pub const MAX_REPORT_ID: usize = 64;
/// Largest encoded report (bytes, before hex).
pub const MAX_REPORT_BYTES: usize = 4096;

/// `POST /v1/collections`: what an analyst chooses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateCollection {
    /// The attributes (numeric with public bounds, or categorical with labels).
    pub schema: Schema,
    /// The privacy budget for a whole record.
    pub epsilon: f64,
    /// `split`, `harmony` or `sample-k` (default `harmony`).
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// Numeric mechanism (default: the strategy's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numeric_mechanism: Option<String>,
    /// Categorical oracle (default: the strategy's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categorical_mechanism: Option<String>,
    /// Analysis tasks (default `["means"]`; only `means` — means and frequencies — today).
    #[serde(default = "default_tasks")]
    pub tasks: Vec<String>,
    /// The training task (required with `"tasks": ["train"]`, refused otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train: Option<TrainSpec>,
}

/// A training task's hyper-parameters (`"train"` of [`CreateCollection`]).
///
/// The published spec ([`TrainPublished::spec`]) is the request with the server's choices
/// written out: `schedule` always, and for `noise` also `kappa` and `gradient_scale`. A stored
/// spec without `schedule` predates schedules and is a `decay` one (c = 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainSpec {
    /// `logistic`, `linear` or `svm`.
    pub task: String,
    /// The target column (left out of the features).
    pub target: String,
    /// Classification on a categorical target: the +1 label (default: the second of two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positive: Option<String>,
    /// Classification on a numeric target: +1 above this value (attribute units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The gradient randomizer: `hm` (default) or `pm` (k-of-d sampling).
    #[serde(default = "default_train_mechanism")]
    pub mechanism: String,
    /// Devices per round g (≥ 1).
    pub batch_size: u64,
    /// The step sizes: `noise` (the default of a new collection: a constant step computed from
    /// public quantities, tail averaging) or `decay` (γ_t = γ₀/√t, the last iterate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// γ₀ of γ_t = γ₀/√t (> 0; `decay` only, where it is required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning_rate: Option<f64>,
    /// κ of the `noise` step (> 0; default [`harmony_learn::trainer::NOISE_KAPPA`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kappa: Option<f64>,
    /// c ≥ 1: devices multiply ℓ'·x by c before clipping and the server divides the mean decoded
    /// gradient by c (default [`harmony_learn::trainer::GRADIENT_SCALE`] with `noise`, 1 with
    /// `decay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient_scale: Option<f64>,
    /// L2 regularisation λ (≥ 0, default 1e-4).
    #[serde(default = "default_lambda")]
    pub lambda: f64,
    /// Number of rounds T after which training stops: required with `noise` (the step depends
    /// on it; plan T = ⌊n/g⌋ for n expected devices), optional with `decay` (default unbounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u64>,
}

/// The values of [`TrainSpec::schedule`].
pub const SCHEDULES: &[&str] = &["noise", "decay"];

impl TrainSpec {
    /// Whether the spec uses the `noise` schedule (a spec without `schedule` is a `decay` one).
    pub fn is_noise(&self) -> bool {
        self.schedule.as_deref() == Some("noise")
    }
    /// The gradient scale c devices apply before clipping: the spec's, else the schedule's
    /// default (2 with `noise`, 1 with `decay`).
    pub fn scale(&self) -> f64 {
        let default = if self.is_noise() { harmony_learn::trainer::GRADIENT_SCALE } else { 1.0 };
        self.gradient_scale.unwrap_or(default)
    }
}

fn default_train_mechanism() -> String {
    "hm".into()
}

fn default_lambda() -> f64 {
    1e-4
}

/// The config version of a collection with a training task (it adds [`CollectionConfig::train`]).
pub const CONFIG_VERSION_TRAIN: u32 = 2;

/// The published training setup: the spec plus what the server fixed at creation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainPublished {
    /// The analyst's spec.
    pub spec: TrainSpec,
    /// Feature dimension d (intercept first).
    pub dimension: usize,
    /// Feature names, in order.
    pub features: Vec<String>,
    /// Coordinates each device samples and reports.
    pub sampled: usize,
    /// The constant step γ of the `noise` schedule, computed once at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<f64>,
}

/// `GET /v1/collections/{id}/model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelState {
    /// The current round t (1-based).
    pub round: u64,
    /// The last iterate w_t (length d): devices compute their gradient here.
    pub parameters: Vec<f64>,
    /// Devices per round.
    pub batch_size: u64,
    /// Gradients received in this round.
    pub received: u64,
    /// Whether the configured number of rounds has been run.
    pub done: bool,
    /// `noise` or `decay` (the collection's schedule).
    #[serde(default = "default_schedule")]
    pub schedule: String,
    /// The step γ_t of round `round` (constant with `noise`, γ₀/√t with `decay`).
    #[serde(default)]
    pub step: f64,
    /// The model to use: the mean of the tail-averaged iterates once there is one (`noise`,
    /// after round ⌊T/2⌋), else the last iterate (= `parameters`).
    #[serde(default)]
    pub model: Vec<f64>,
    /// How many iterates `model` averages (0: it is the last iterate).
    #[serde(default)]
    pub averaged: u64,
}

fn default_schedule() -> String {
    "decay".into()
}

/// `POST /v1/collections/{id}/gradients` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GradientPost {
    /// Device-chosen id (1..=64 of `[A-Za-z0-9_-]`); one gradient per device per collection.
    pub device_id: String,
    /// The round whose parameters the gradient was computed at.
    pub round: u64,
    /// Hex of the wire encoding of the randomized gradient.
    pub report: String,
}

/// The acknowledgement of a stored gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradientAck {
    /// The round the gradient was counted in.
    pub round: u64,
    /// Whether it completed the batch (the model advanced).
    pub advanced: bool,
}

fn default_strategy() -> String {
    "harmony".into()
}

fn default_tasks() -> Vec<String> {
    vec!["means".into()]
}

/// `GET /v1/collections/{id}/config`: everything a client needs to randomize.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectionConfig {
    /// The collection id.
    pub id: String,
    /// Version of this document's format ([`CONFIG_VERSION`]).
    pub config_version: u32,
    /// Wire version of the reports ([`harmony_core::wire::WIRE_VERSION`]).
    pub wire_version: u8,
    /// The schema.
    pub schema: Schema,
    /// The strategy, ε and mechanisms.
    pub strategy: StrategyOptions,
    /// The analysis tasks.
    pub tasks: Vec<String>,
    /// The training setup (`config_version` 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train: Option<TrainPublished>,
}

/// `POST /v1/collections` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Created {
    /// The new collection's id.
    pub id: String,
    /// Its client configuration.
    pub config: CollectionConfig,
}

/// One report in a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportItem {
    /// Device-chosen id, unique per collection.
    pub id: String,
    /// Hex of the binary wire encoding.
    pub report: String,
}

/// `POST /v1/collections/{id}/reports` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportBatch {
    /// The collection these reports were randomized for (must equal the path's id).
    pub collection: String,
    /// The config version the client randomized under.
    pub config_version: u32,
    /// The reports.
    pub reports: Vec<ReportItem>,
}

/// The acknowledgement of a durably written batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchAck {
    /// Reports stored by this request.
    pub accepted: u64,
    /// Reports whose id was already stored (a retry): counted once.
    pub duplicates: u64,
}

/// A 4xx/5xx body: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// The offending field (e.g. `reports[3].report: attributes[0].index`).
    pub field: String,
    /// A human-readable message naming the value and what was expected.
    pub message: String,
}

/// `GET /v1/collections/{id}/estimates`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimates {
    /// The collection id.
    pub collection: String,
    /// Reports aggregated.
    pub reports: u64,
    /// Strategy name.
    pub strategy: String,
    /// ε per record.
    pub epsilon: f64,
    /// One entry per attribute, in schema order.
    pub attributes: Vec<AttributeResult>,
}

/// One attribute's estimate, in the original units (numeric) or as frequencies (categorical).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum AttributeResult {
    /// A mean.
    Numeric {
        /// Attribute name.
        name: String,
        /// Estimated mean (original units).
        #[serde(deserialize_with = "nullable")]
        estimate: f64,
        /// Its standard error (`null` = infinite: no reports yet).
        #[serde(deserialize_with = "nullable")]
        std_error: f64,
        /// 95% confidence interval.
        #[serde(deserialize_with = "nullable_pair")]
        ci95: [f64; 2],
        /// The same on the randomizers' [-1, 1] scale.
        #[serde(deserialize_with = "nullable")]
        estimate_unit: f64,
        /// Standard error on [-1, 1].
        #[serde(deserialize_with = "nullable")]
        std_error_unit: f64,
    },
    /// Frequencies.
    Categorical {
        /// Attribute name.
        name: String,
        /// One per label.
        categories: Vec<CategoryResult>,
    },
}

/// One category's frequency estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryResult {
    /// The label.
    pub label: String,
    /// Estimated frequency.
    #[serde(deserialize_with = "nullable")]
    pub estimate: f64,
    /// Its standard error (`null` = infinite: no reports yet).
    #[serde(deserialize_with = "nullable")]
    pub std_error: f64,
    /// 95% confidence interval.
    #[serde(deserialize_with = "nullable_pair")]
    pub ci95: [f64; 2],
}

/// JSON has no infinities: a non-finite number is written as `null` and read back as NaN.
fn nullable<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

fn nullable_pair<'de, D: serde::Deserializer<'de>>(d: D) -> Result<[f64; 2], D::Error> {
    let [a, b] = <[Option<f64>; 2]>::deserialize(d)?;
    Ok([a.unwrap_or(f64::NAN), b.unwrap_or(f64::NAN)])
}

impl Estimates {
    /// Builds the response from an aggregator's per-attribute estimates.
    pub fn from_core(
        collection: &str,
        reports: u64,
        options: &StrategyOptions,
        schema: &Schema,
        est: &[harmony_core::strategy::AttributeEstimate],
    ) -> Self {
        use harmony_core::schema::Attribute;
        use harmony_core::strategy::AttributeEstimate as E;
        let attributes = schema
            .attributes()
            .iter()
            .zip(est)
            .map(|(a, e)| match (a, e) {
                (Attribute::Numeric { name, min, max }, E::Numeric(e)) => {
                    let units = e.affine(0.5 * (max - min), 0.5 * (max + min));
                    AttributeResult::Numeric {
                        name: name.clone(),
                        estimate: units.value,
                        std_error: units.std_error,
                        ci95: units.ci95,
                        estimate_unit: e.value,
                        std_error_unit: e.std_error,
                    }
                }
                (Attribute::Categorical { name, categories }, E::Categorical(fe)) => AttributeResult::Categorical {
                    name: name.clone(),
                    categories: categories
                        .iter()
                        .enumerate()
                        .map(|(v, label)| {
                            let e: Estimate = fe.get(v);
                            CategoryResult {
                                label: label.clone(),
                                estimate: e.value,
                                std_error: e.std_error,
                                ci95: e.ci95,
                            }
                        })
                        .collect(),
                },
                // The aggregator's estimates follow the schema's kinds.
                (a, _) => AttributeResult::Categorical { name: a.name().to_string(), categories: Vec::new() },
            })
            .collect();
        Estimates {
            collection: collection.to_string(),
            reports,
            strategy: options.kind.name().to_string(),
            epsilon: options.epsilon,
            attributes,
        }
    }
}

/// Lower-case hex of bytes.
pub fn to_hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// Decodes hex (either case) into `out`; `None` on an odd length or a non-hex character.
pub fn from_hex_into(text: &str, out: &mut Vec<u8>) -> Option<()> {
    let b = text.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    out.clear();
    out.reserve(b.len() / 2);
    fn nib(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    for pair in b.chunks_exact(2) {
        out.push(nib(pair[0])? << 4 | nib(pair[1])?);
    }
    Some(())
}

/// Whether a report id is acceptable: 1..=64 characters of `[A-Za-z0-9_-]`.
pub fn valid_report_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REPORT_ID
        && id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_roundtrip_and_rejections() {
        let bytes: Vec<u8> = (0..=255).collect();
        let mut out = Vec::new();
        from_hex_into(&to_hex(&bytes), &mut out).unwrap();
        assert_eq!(out, bytes);
        from_hex_into("ABcd", &mut out).unwrap();
        assert_eq!(out, vec![0xab, 0xcd]);
        assert!(from_hex_into("abc", &mut out).is_none());
        assert!(from_hex_into("zz", &mut out).is_none());
        assert!(valid_report_id("a-Z_09"));
        assert!(!valid_report_id(""));
        assert!(!valid_report_id("a b"));
        assert!(!valid_report_id(&"x".repeat(65)));
    }
}
