//! Request and response bodies besides specs, configs and estimates.

use serde::{Deserialize, Serialize};

/// One report in a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReportItem {
    /// Device-chosen id (1..=64 of `[A-Za-z0-9_-]`), unique per collection.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9_-]{1,64}$"))]
    pub id: String,
    /// Hex of the binary wire encoding (at most 4,096 bytes).
    #[cfg_attr(feature = "openapi", schema(pattern = r"^([0-9a-fA-F]{2})+$", max_length = 8192))]
    pub report: String,
}

/// `POST /v1/collections/{id}/reports` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReportBatch {
    /// The collection these reports were randomized for (must equal the path's id).
    pub collection: String,
    /// The config version the client randomized under.
    pub config_version: u32,
    /// The reports (1 to 10,000).
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 10000))]
    pub reports: Vec<ReportItem>,
}

/// The acknowledgement of a durably written batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchAck {
    /// Reports stored by this request.
    pub accepted: u64,
    /// Reports whose id was already stored with the same bytes (a retry): counted once.
    pub duplicates: u64,
}

/// `GET /v1/collections/{id}/model`: the public state of a training collection's round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    pub schedule: crate::spec::Schedule,
    /// The step γ_t of round `round` (constant with `noise`, γ₀/√t with `decay`).
    pub step: f64,
    /// The model to use: the mean of the tail-averaged iterates once there is one (`noise`,
    /// after round ⌊T/2⌋), else the last iterate (= `parameters`).
    pub model: Vec<f64>,
    /// How many iterates `model` averages (0: it is the last iterate).
    pub averaged: u64,
}

/// `POST /v1/collections/{id}/gradients` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GradientPost {
    /// Device-chosen id (1..=64 of `[A-Za-z0-9_-]`); one gradient per device per collection.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9_-]{1,64}$"))]
    pub device_id: String,
    /// The round whose parameters the gradient was computed at.
    pub round: u64,
    /// Hex of the wire encoding of the randomized gradient.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^([0-9a-fA-F]{2})+$", max_length = 8192))]
    pub report: String,
}

/// The acknowledgement of a stored gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GradientAck {
    /// The round the gradient was counted in.
    pub round: u64,
    /// Whether it completed the batch (the model advanced).
    pub advanced: bool,
}

/// `GET /v1/collections/{id}/query`: the current round of an `adaptive-rounds` linear-queries
/// collection (`POST …/queries` opens the next one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueryRound {
    /// The current round t (1-based); a device's report carries query index t − 1.
    pub round: u64,
    /// The query's name.
    pub name: String,
    /// Round t's query, as the analyst posted it (`{"range": [a, b]}`, `{"in": [...]}`,
    /// `{"weights": [...]}`, `{"and": [...]}`): a device evaluates it on its own value.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub query: serde_json::Value,
    /// r_t = max_v |q_t\[v\]| (a device answers q_t\[v\]/r_t with Duchi's 1-bit mechanism).
    pub scale: f64,
    /// Devices per round.
    pub batch_size: u64,
    /// Answers received in round t.
    pub received: u64,
    /// Whether round t takes answers (`received < batch_size`); a full round waits for the
    /// analyst's next query.
    pub open: bool,
}

/// `POST /v1/collections/{id}/answers` body: one device's answer to the current round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AnswerPost {
    /// Device-chosen id (1..=64 of `[A-Za-z0-9_-]`); one answer per device per collection.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9_-]{1,64}$"))]
    pub device_id: String,
    /// Hex of the wire encoding of the device's `QueryBitReport` (query index t − 1 and its bit).
    #[cfg_attr(feature = "openapi", schema(pattern = r"^([0-9a-fA-F]{2})+$", max_length = 64))]
    pub report: String,
}

/// The acknowledgement of a stored answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AnswerAck {
    /// The round the answer was counted in.
    pub round: u64,
    /// Whether it filled the round.
    pub full: bool,
}

/// A 4xx/5xx body: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// The offending field (e.g. `reports[3].report: attributes[0].index`).
    pub field: String,
    /// A human-readable message naming the value and what was expected.
    pub message: String,
}

/// `POST /v1/collections/{id}/tokens` body (admin token): a label for the new analyst token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// Who or what the token is for (0..=64 of `[A-Za-z0-9 _.@-]`); shown in listings.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9 _.@-]{0,64}$"))]
    pub label: String,
}

/// `POST /v1/collections/{id}/enrollments` body (admin token): device keys to mint for a
/// training collection or adaptive-rounds collection that takes enrolled devices (the default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EnrollRequest {
    /// How many devices (1..=10,000 per request).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10000))]
    pub count: u32,
    /// Who the keys are for (0..=64 of `[A-Za-z0-9 _.@-]`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9 _.@-]{0,64}$"))]
    pub label: String,
}

/// One enrolled device: its id and its key (shown this once; the server keeps its SHA-256).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeviceKey {
    /// The device id its gradient must be posted under (`dev_` and 16 hex digits).
    pub device_id: String,
    /// The bearer key (`hdk_` and 64 hex digits).
    pub key: String,
}

/// The answer to an enrollment: the new devices of a collection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Enrolled {
    /// The collection.
    pub collection: String,
    /// The devices, each with its key.
    pub devices: Vec<DeviceKey>,
}

/// A new per-collection analyst token: `token` is shown this once (the server keeps only its
/// SHA-256); it reads this collection's estimates and model, nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenCreated {
    /// The collection the token reads.
    pub collection: String,
    /// The token's public id (for listing and revoking).
    pub token_id: String,
    /// The bearer token itself (`hct_` and 64 hex digits).
    pub token: String,
    /// Its label.
    pub label: String,
}

/// A per-collection analyst token as listed (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenInfo {
    /// The token's public id.
    pub token_id: String,
    /// Its label.
    pub label: String,
    /// When it was made (Unix seconds).
    pub created: u64,
    /// Whether it was revoked (a revoked token is refused at once).
    pub revoked: bool,
}

/// One collection in `GET /v1/collections`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CollectionSummary {
    /// Its id.
    pub id: String,
    /// Its task's kind (`means`, `frequency`, `range`, `marginals`, `heavy-hitters`,
    /// `linear-queries`, `train`).
    pub task: String,
    /// The ε of one device's report.
    pub epsilon: f64,
    /// Reports (or, for `train`, gradients) aggregated so far.
    pub reports: u64,
    /// The name given at create, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The description given at create, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When it was created (ISO 8601, UTC); absent for a collection stored before creation
    /// times were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}
