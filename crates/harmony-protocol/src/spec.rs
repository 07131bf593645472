//! What an analyst asks for: `POST /v1/collections` with a schema, ε and one task.
//!
//! ```json
//! {"schema": [{"kind": "numeric", "name": "age", "min": 0, "max": 100}],
//!  "epsilon": 1.0,
//!  "task": {"kind": "range", "attribute": "age", "bins": 100, "method": "hh"}}
//! ```
//!
//! Every option left out gets a default that the server writes out in the published
//! [`CollectionConfig`](crate::CollectionConfig), so a device randomizes with exactly the
//! choices the analyst sees. Unknown fields are refused everywhere (a typo is an error, not an
//! option silently dropped). Each collection runs one task: a device contributes one report
//! (or, for `train`, one gradient) per collection, at the collection's ε.

use harmony_core::kinds::{OracleKind, RecordNumeric};
use harmony_core::schema::Schema;
use harmony_core::strategy::{KChoice, StrategyKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `POST /v1/collections`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateCollection {
    /// The attributes a device holds (numeric with public bounds, or categorical with labels).
    /// Optional for `heavy-hitters`, whose devices hold sets of strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Schema>,
    /// The privacy budget of one device's report (a whole record, a set of items, a gradient).
    #[cfg_attr(feature = "openapi", schema(minimum = 0.002, maximum = 20))]
    pub epsilon: f64,
    /// The analysis.
    pub task: TaskSpec,
}

/// The longest collection name, in characters.
pub const MAX_COLLECTION_NAME: usize = 128;
/// The longest collection description, in characters.
pub const MAX_COLLECTION_DESCRIPTION: usize = 2000;

/// The body of `POST /v1/collections`: a [`CreateCollection`] with an optional `name` and
/// `description` the analyst gives it (shown by the collection list and the dashboard; devices
/// never see them, and they are not part of the published config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewCollection {
    /// A short name (1 to 128 characters, no control, line-separator or bidirectional control
    /// characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A longer description (up to 2,000 characters, same characters as `name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The attributes a device holds (numeric with public bounds, or categorical with labels).
    /// Optional for `heavy-hitters`, whose devices hold sets of strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Schema>,
    /// The privacy budget of one device's report (a whole record, a set of items, a gradient).
    #[cfg_attr(feature = "openapi", schema(minimum = 0.002, maximum = 20))]
    pub epsilon: f64,
    /// The analysis.
    pub task: TaskSpec,
}

impl NewCollection {
    /// The body for `req` with a name and a description.
    pub fn new(req: CreateCollection, name: Option<String>, description: Option<String>) -> Self {
        NewCollection { name, description, schema: req.schema, epsilon: req.epsilon, task: req.task }
    }

    /// The request and the label (name, description).
    pub fn split(self) -> (CreateCollection, CollectionLabel) {
        let req = CreateCollection { schema: self.schema, epsilon: self.epsilon, task: self.task };
        (req, CollectionLabel { name: self.name, description: self.description })
    }
}

impl From<CreateCollection> for NewCollection {
    fn from(req: CreateCollection) -> Self {
        NewCollection::new(req, None, None)
    }
}

/// How an analyst labels a collection: its optional name and description.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CollectionLabel {
    /// A short name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A longer description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl CollectionLabel {
    /// Checks the lengths: `name` 1 to [`MAX_COLLECTION_NAME`] characters, `description` at most
    /// [`MAX_COLLECTION_DESCRIPTION`]; the error is `(field, message)`.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(n) = &self.name {
            let len = n.chars().count();
            if len == 0 || len > MAX_COLLECTION_NAME || n.trim().is_empty() {
                let msg = format!("{len} characters: expected 1 to {MAX_COLLECTION_NAME}, not only spaces");
                return Err(("name", msg));
            }
        }
        if let Some(d) = &self.description {
            let len = d.chars().count();
            if len > MAX_COLLECTION_DESCRIPTION {
                return Err((
                    "description",
                    format!("{len} characters: expected at most {MAX_COLLECTION_DESCRIPTION}"),
                ));
            }
        }
        Ok(())
    }
}

/// The analyses a collection can run, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum TaskKind {
    /// Per-attribute means and frequencies of a whole record.
    Means,
    /// Frequencies of one categorical attribute.
    Frequency,
    /// Range queries, the CDF and quantiles of one numeric attribute.
    Range,
    /// Rectangles and a heatmap over two numeric attributes.
    Range2d,
    /// The most frequent items of sets of strings.
    HeavyHitters,
    /// k-way marginals over categorical (and binned numeric) attributes.
    Marginals,
    /// A workload of linear queries over a categorical domain.
    LinearQueries,
    /// A linear model by private gradient descent, in rounds.
    Train,
}

impl TaskKind {
    /// Every task.
    pub const ALL: &'static [TaskKind] = &[
        TaskKind::Means,
        TaskKind::Frequency,
        TaskKind::Range,
        TaskKind::Range2d,
        TaskKind::HeavyHitters,
        TaskKind::Marginals,
        TaskKind::LinearQueries,
        TaskKind::Train,
    ];
    /// The task's name (`heavy-hitters`, …).
    pub fn name(self) -> &'static str {
        match self {
            TaskKind::Means => "means",
            TaskKind::Frequency => "frequency",
            TaskKind::Range => "range",
            TaskKind::Range2d => "range2d",
            TaskKind::HeavyHitters => "heavy-hitters",
            TaskKind::Marginals => "marginals",
            TaskKind::LinearQueries => "linear-queries",
            TaskKind::Train => "train",
        }
    }
    /// The task named `name` (as [`TaskKind::name`] writes it), if any.
    pub fn from_name(name: &str) -> Option<TaskKind> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }
    /// Whether devices report in rounds against public state the server updates (a model).
    pub fn has_rounds(self) -> bool {
        matches!(self, TaskKind::Train)
    }
    /// Whether each device holds a set of items (strings) rather than a record of the schema's
    /// attributes.
    pub fn takes_items(self) -> bool {
        matches!(self, TaskKind::HeavyHitters)
    }
}

impl std::fmt::Display for TaskKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One task with its options (`"kind"` names it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TaskSpec {
    /// Per-attribute means and frequencies.
    Means(MeansSpec),
    /// Frequencies of one categorical attribute.
    Frequency(FrequencySpec),
    /// Ranges, CDF and quantiles of one numeric attribute.
    Range(RangeSpec),
    /// Rectangles and a heatmap over two numeric attributes.
    Range2d(Range2dSpec),
    /// Heavy hitters.
    HeavyHitters(HeavyHittersSpec),
    /// k-way marginals.
    Marginals(MarginalsSpec),
    /// Linear queries.
    LinearQueries(LinearQueriesSpec),
    /// Model rounds.
    Train(TrainSpec),
}

impl TaskSpec {
    /// The columns its devices read: one attribute's for frequency and range, the domain's for
    /// linear queries and for marginals that name it; `None` (every attribute) otherwise.
    pub fn read_columns(&self) -> Option<Vec<String>> {
        match self {
            TaskSpec::Frequency(f) => Some(vec![f.attribute.clone()]),
            TaskSpec::Range(r) => Some(vec![r.attribute.clone()]),
            TaskSpec::Range2d(r) => Some(vec![r.x.clone(), r.y.clone()]),
            TaskSpec::LinearQueries(l) => Some(l.attributes.clone()),
            TaskSpec::Marginals(m) => m.attributes.clone(),
            _ => None,
        }
    }

    /// Which task this is.
    pub fn kind(&self) -> TaskKind {
        match self {
            TaskSpec::Means(_) => TaskKind::Means,
            TaskSpec::Frequency(_) => TaskKind::Frequency,
            TaskSpec::Range(_) => TaskKind::Range,
            TaskSpec::Range2d(_) => TaskKind::Range2d,
            TaskSpec::HeavyHitters(_) => TaskKind::HeavyHitters,
            TaskSpec::Marginals(_) => TaskKind::Marginals,
            TaskSpec::LinearQueries(_) => TaskKind::LinearQueries,
            TaskSpec::Train(_) => TaskKind::Train,
        }
    }

    /// The mechanism, strategy and method names the spec writes out: its `strategy`,
    /// `numeric_mechanism`, `categorical_mechanism`, `mechanism` and `method` fields, as the
    /// config's JSON has them (what a device policy's allowlist is checked against).
    pub fn mechanism_names(&self) -> impl Iterator<Item = &'static str> {
        let names: [Option<&'static str>; 3] = match self {
            TaskSpec::Means(s) => [
                Some(s.strategy.name()),
                s.numeric_mechanism.map(|m| m.name()),
                s.categorical_mechanism.map(|m| m.name()),
            ],
            TaskSpec::Frequency(s) => [s.mechanism.map(|m| m.name()), None, None],
            TaskSpec::Range(s) => [Some(s.method.name()), None, None],
            TaskSpec::Range2d(_) => [Some(RangeMethod::Hh.name()), None, None],
            TaskSpec::HeavyHitters(s) => [Some(s.method.name()), None, None],
            TaskSpec::Marginals(s) => [Some(s.method.name()), None, None],
            TaskSpec::LinearQueries(s) => [Some(s.mechanism.name()), None, None],
            TaskSpec::Train(s) => [Some(s.mechanism.name()), None, None],
        };
        names.into_iter().flatten()
    }

    /// Whether the spec takes enrolled devices only (a `train` or adaptive-rounds spec whose
    /// `enrollment` is true): their gradients or answers then need a device key. A spec stored
    /// without the field (a collection created before enrollment was the default) is open.
    pub fn enrollment(&self) -> bool {
        match self {
            TaskSpec::Train(t) => t.enrollment == Some(true),
            TaskSpec::LinearQueries(l) => l.enrollment == Some(true),
            _ => false,
        }
    }

    /// Whether devices answer one analyst-chosen query per round (`linear-queries` with
    /// `adaptive-rounds`): a round takes the next `batch_size` devices, and each round's query is
    /// posted before its devices answer.
    pub fn answers_in_rounds(&self) -> bool {
        matches!(self, TaskSpec::LinearQueries(s) if s.mechanism == LinearMechanism::AdaptiveRounds)
    }

    /// The δ of the spec's mechanism: the Gaussian linear-queries mechanism's stated δ (`None`
    /// when it states none: a device never assumes a default), 0 for every other (pure ε-LDP).
    pub fn delta(&self) -> Option<f64> {
        match self {
            TaskSpec::LinearQueries(s) if s.mechanism == LinearMechanism::Gaussian => s.delta,
            _ => Some(0.0),
        }
    }
}

/// `means`: a device randomizes its whole record under one multi-attribute strategy.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MeansSpec {
    /// `split`, `harmony` (default) or `sample-k`.
    #[serde(default)]
    pub strategy: StrategyKind,
    /// Numeric mechanism (default: the strategy's: split duchi-multi, sample-k hm, harmony duchi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numeric_mechanism: Option<RecordNumeric>,
    /// Categorical oracle (default: the strategy's: oue, or hadamard for harmony).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categorical_mechanism: Option<OracleKind>,
    /// sample-k: `"optimal"` (default), `"paper"` or a number of attributes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<KChoice>,
}

/// `frequency`: one categorical attribute through one frequency oracle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FrequencySpec {
    /// The categorical attribute.
    pub attribute: String,
    /// The oracle (default: GRR when d < 3e^ε + 2, else OLH — the least variance with a
    /// report of a few bytes whatever d).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<OracleKind>,
}

/// How `range` collects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum RangeMethod {
    /// Hierarchical histograms with consistency (the default).
    #[default]
    Hh,
    /// Haar wavelets over the 1-bit Hadamard mechanism.
    Haar,
    /// Flat OUE over the bins (the baseline).
    Flat,
}

impl RangeMethod {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            RangeMethod::Hh => "hh",
            RangeMethod::Haar => "haar",
            RangeMethod::Flat => "flat",
        }
    }
}

/// `range`: one numeric attribute, discretized to `bins` equal-width bins over [min, max];
/// ranges and quantiles are asked at query time.
///
/// A device maps its value to [-1, 1] with the schema (`t`) and reports bin
/// `min(⌊(t + 1)/2 · bins⌋, bins − 1)`. For one bin per integer of an integer attribute in
/// [a, b], declare max = b + 1 and bins = b + 1 − a. The published spec writes out `bins` and,
/// for `hh`, `branching`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RangeSpec {
    /// The numeric attribute.
    pub attribute: String,
    /// Number of equal-width bins over the attribute's [min, max] (default 64; at least 2, at
    /// most 65,536, and few enough that a report fits in 4,096 bytes: about 26,000 for `flat` and
    /// `hh`, whose reports carry one bit per bin or node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bins: Option<usize>,
    /// `hh` (default), `haar` or `flat`.
    #[serde(default)]
    pub method: RangeMethod,
    /// The hierarchy's branching B ≥ 2 for `hh` (default: the B in 2..=16 of least closed-form
    /// variance over all ranges); refused with `haar` and `flat`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branching: Option<usize>,
}

/// `range2d`: two numeric attributes, each cut into `2^levels` equal-width bins over its
/// [min, max]; a quadtree of grids (level ℓ: `2^ℓ × 2^ℓ` cells) collected as hierarchical
/// histograms (`hh`, branching 4) over the finest cells in Morton order. Rectangles are asked at
/// query time; the estimate holds the finest grid as a heatmap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Range2dSpec {
    /// The numeric attribute on the x axis.
    pub x: String,
    /// The numeric attribute on the y axis.
    pub y: String,
    /// L: bins per axis `2^L` and quadtree levels (default 5, a 32 × 32 grid; 1 to 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<usize>,
}

/// How `heavy-hitters` walks the prefix tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum HeavyMethod {
    /// PEM: few wide levels, the best 2k kept per level (the default).
    #[default]
    Pem,
    /// TreeHist: one bit per level, threshold pruning.
    Treehist,
    /// PEM's levels and pruning over a Hadamard count-mean sketch per level: a server state of
    /// fixed size (`rows` × `columns` signed sums per level) whatever the number of reports.
    Sketch,
}

impl HeavyMethod {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            HeavyMethod::Pem => "pem",
            HeavyMethod::Treehist => "treehist",
            HeavyMethod::Sketch => "sketch",
        }
    }
}

/// How items become codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ItemEncoding {
    /// Strings hashed to `bits` bits (the default).
    #[default]
    Hash,
    /// Unsigned integer ids below 2^bits − 1.
    Id,
}

/// `heavy-hitters`: each device holds a set of strings (one item, or a set padded to
/// `pad_length` and sampled) and reports one prefix of one item's code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HeavyHittersSpec {
    /// `pem` (default), `treehist` or `sketch`.
    #[serde(default)]
    pub method: HeavyMethod,
    /// How many heavy hitters to find (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<usize>,
    /// Code length B in bits, 2..=64 (default 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bits: Option<u32>,
    /// `hash` (default) or `id`.
    #[serde(default)]
    pub items: ItemEncoding,
    /// Sets are padded to L items before one is sampled (default 1: one item per device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pad_length: Option<usize>,
    /// The prefix length of each level (default: the method's schedule for `bits` and `top`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<u32>>,
    /// `sketch` only: hash rows k of each level's sketch (default 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<usize>,
    /// `sketch` only: Hadamard coefficients m of each level's sketch, a power of two (default
    /// 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<usize>,
    /// Public candidate names, to label the codes found (never sent to devices' reports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<String>,
}

/// How `marginals` collects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum MarginalsMethod {
    /// CALM: materialize m marginals of l attributes, one user group each (the default).
    #[default]
    Calm,
    /// One user group per query, its full cross-product.
    Direct,
    /// The Fourier (InpHT) method over binary-encoded attributes.
    Fourier,
}

impl MarginalsMethod {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            MarginalsMethod::Calm => "calm",
            MarginalsMethod::Direct => "direct",
            MarginalsMethod::Fourier => "fourier",
        }
    }
}

/// CALM's post-processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum MarginalsPost {
    /// One non-negative joint table fitted to all marginals (the default; `family` when the
    /// table is too large).
    #[default]
    Joint,
    /// A consistent non-negative family.
    Family,
    /// The GLS consistency pass only (unbiased, may be negative).
    Gls,
    /// The exact projection onto the consistent non-negative families.
    Local,
    /// None: each query from its covering marginals (unbiased).
    Raw,
}

impl MarginalsPost {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            MarginalsPost::Joint => "joint",
            MarginalsPost::Family => "family",
            MarginalsPost::Gls => "gls",
            MarginalsPost::Local => "local",
            MarginalsPost::Raw => "raw",
        }
    }
}

/// `marginals`: all k-way marginals over some attributes (k in `ways`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MarginalsSpec {
    /// The attributes (default: every categorical attribute and every numeric one in `bins`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Vec<String>>,
    /// Equal-width bins of numeric attributes, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bins: BTreeMap<String, usize>,
    /// The marginal sizes asked (default [2, 3]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways: Option<Vec<usize>>,
    /// `calm` (default), `direct` or `fourier`.
    #[serde(default)]
    pub method: MarginalsMethod,
    /// CALM's post-processing (default `joint`; written out for `calm`, refused for the others,
    /// which are not post-processed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post: Option<MarginalsPost>,
    /// CALM: force the marginal size l (default: chosen by the predicted error; written out as
    /// the largest materialized set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l: Option<usize>,
    /// CALM: the number of devices expected (its choice of l and m depends on it; default
    /// 100,000). Estimates use the number that actually reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u64>,
    /// CALM: the materialized attribute sets (written out by the server; one device group each,
    /// drawn by each device uniformly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sets: Option<Vec<Vec<String>>>,
}

/// How `linear-queries` collects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum LinearMechanism {
    /// Hadamard Response over the domain, then A·p̂ (ε-LDP; the default).
    #[default]
    Hr,
    /// The Gaussian mechanism on the workload's columns ((ε, δ)-LDP).
    Gaussian,
    /// One device group per query, drawn by the device; 1 bit each (ε-LDP).
    Adaptive,
    /// One device group per query in rounds: `batch_size` devices answer query t, then the
    /// analyst may post query t + 1 chosen after reading the answers (`POST …/queries`); 1 bit
    /// each (ε-LDP).
    AdaptiveRounds,
}

impl LinearMechanism {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            LinearMechanism::Hr => "hr",
            LinearMechanism::Gaussian => "gaussian",
            LinearMechanism::Adaptive => "adaptive",
            LinearMechanism::AdaptiveRounds => "adaptive-rounds",
        }
    }
}

/// Where projected Gaussian answers go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Hull {
    /// conv{±a_v} (Bassily's K; the default).
    #[default]
    Symmetric,
    /// conv{a_v}: the answers of distributions.
    Simplex,
}

/// `linear-queries`: a workload A over the domain of some attributes; the answers A·p.
///
/// The domain is the cross-product of `attributes` (row-major, the last fastest); a numeric
/// attribute counts through its equal-width `bins` (a device maps its value to [-1, 1] with the
/// schema and takes bin `min(⌊(t + 1)/2 · k⌋, k − 1)`; labels `[lo, hi)`). The published spec
/// writes out `delta` for `gaussian`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LinearQueriesSpec {
    /// The attributes whose cross-product is the domain (categorical, or numeric in `bins`).
    pub attributes: Vec<String>,
    /// Equal-width bins of numeric attributes, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bins: BTreeMap<String, usize>,
    /// The workload: `"identity"`, `"prefix"`, a list of queries `{"queries": [{"range": [a,
    /// b]} | {"in": [labels]} | {"weights": [..]} | {"and": [..]}, …]}`, a matrix
    /// `{"matrix": [[..], ..], "names": [..]}` or `[[..], ..]`, or CSV text (one query per line,
    /// J numbers after an optional name): the formats of `harmony simulate --queries`.
    pub workload: serde_json::Value,
    /// `hr` (default), `gaussian`, `adaptive` or `adaptive-rounds` (then `workload` is a list
    /// of queries `{"queries": [...]}`: the first rounds' queries, in order).
    #[serde(default)]
    pub mechanism: LinearMechanism,
    /// `adaptive-rounds`: the devices that answer each query (an integer >= 1); refused with
    /// the other mechanisms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u64>,
    /// δ of the Gaussian mechanism, in (0, 1) (default 1e-6); refused with `hr` and `adaptive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
    /// Where the Gaussian answers are projected (default `symmetric`; `gaussian` only).
    #[serde(default)]
    pub hull: Hull,
    /// `adaptive-rounds`: only enrolled devices answer (a device key minted by the admin,
    /// `POST …/enrollments`, as the bearer token, posted under that key's device id), so
    /// invented device ids cannot fill a round. Absent in a request: `true` (the created
    /// collection stores it); `false` opens the rounds to any device id. Refused as `true` with
    /// the other mechanisms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enrollment: Option<bool>,
}

/// The model a `train` collection fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// Logistic regression (misclassification rate).
    Logistic,
    /// Least squares (mean squared error).
    Linear,
    /// Linear SVM, hinge loss.
    Svm,
}

impl Model {
    /// Its name (`logistic`, `linear`, `svm`).
    pub fn name(self) -> &'static str {
        match self {
            Model::Logistic => "logistic",
            Model::Linear => "linear",
            Model::Svm => "svm",
        }
    }
}

/// The gradient randomizer of a `train` collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum GradientMechanism {
    /// Hybrid with k-of-d sampling (the default).
    #[default]
    Hm,
    /// Piecewise with k-of-d sampling.
    Pm,
}

impl GradientMechanism {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            GradientMechanism::Hm => "hm",
            GradientMechanism::Pm => "pm",
        }
    }
}

/// Step sizes of model rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// A constant step computed from public quantities, tail-averaged iterates (the default).
    Noise,
    /// γ_t = γ₀/√t, the last iterate (the papers').
    Decay,
}

/// `train`: devices post one randomized gradient each, round by round.
///
/// The published spec is the request with the server's choices written out: `schedule`
/// always, and for `noise` also `kappa` and `gradient_scale`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TrainSpec {
    /// `logistic`, `linear` or `svm`.
    pub task: Model,
    /// The target column (left out of the features).
    pub target: String,
    /// Classification on a categorical target: the +1 label (default: the second of two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positive: Option<String>,
    /// Classification on a numeric target: +1 above this value (attribute units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The gradient randomizer: `hm` (default) or `pm`.
    #[serde(default)]
    pub mechanism: GradientMechanism,
    /// Devices per round g (≥ 1).
    pub batch_size: u64,
    /// `noise` (default) or `decay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// γ₀ of γ_t = γ₀/√t (> 0; `decay` only, where it is required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning_rate: Option<f64>,
    /// κ of the `noise` step (> 0; default harmony-learn's `NOISE_KAPPA`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kappa: Option<f64>,
    /// c ≥ 1: devices multiply ℓ'·x by c before clipping and the server divides the mean
    /// decoded gradient by c (default harmony-learn's `GRADIENT_SCALE` with `noise`, 1 with
    /// `decay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient_scale: Option<f64>,
    /// L2 regularisation λ (≥ 0, default 1e-4).
    #[serde(default = "default_lambda")]
    pub lambda: f64,
    /// Number of rounds T after which training stops: required with `noise` (the step depends
    /// on it), optional with `decay` (default unbounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u64>,
    /// Only enrolled devices contribute: a gradient needs a device key minted by the admin
    /// (`POST …/enrollments`) as its bearer token, posted under that key's device id, one per
    /// key. Absent in a request: `true` (the created collection stores it). `false` lets anyone
    /// post under an invented device id (one gradient per id), and so steer the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enrollment: Option<bool>,
}

impl TrainSpec {
    /// The schedule (a spec without one is `decay`: stored before schedules existed).
    pub fn schedule(&self) -> Schedule {
        self.schedule.unwrap_or(Schedule::Decay)
    }
    /// Whether the spec uses the `noise` schedule.
    pub fn is_noise(&self) -> bool {
        self.schedule() == Schedule::Noise
    }
}

fn default_lambda() -> f64 {
    1e-4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_defaults_and_refuse_unknown_fields() {
        let req: CreateCollection = serde_json::from_str(
            r#"{"schema": [{"kind": "numeric", "name": "age", "min": 0, "max": 100}], "epsilon": 1,
                "task": {"kind": "range", "attribute": "age", "bins": 100}}"#,
        )
        .unwrap();
        assert_eq!(
            req.task,
            TaskSpec::Range(RangeSpec {
                attribute: "age".into(),
                bins: Some(100),
                method: RangeMethod::Hh,
                branching: None
            })
        );
        let back: CreateCollection = serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
        assert_eq!(back, req);
        for bad in [
            r#"{"epsilon": 1, "task": {"kind": "range", "attribute": "a", "bogus": 1}}"#,
            r#"{"epsilon": 1, "task": {"kind": "nope"}}"#,
            r#"{"epsilon": 1, "task": {"kind": "means", "numeric_mechanism": "bogus"}}"#,
            r#"{"epsilon": 1, "task": {"kind": "means"}, "extra": 2}"#,
        ] {
            assert!(serde_json::from_str::<CreateCollection>(bad).is_err(), "{bad}");
        }
        let means: CreateCollection =
            serde_json::from_str(r#"{"epsilon": 1, "task": {"kind": "means", "k": 3}}"#).unwrap();
        assert_eq!(means.task.kind(), TaskKind::Means);
        let TaskSpec::Means(m) = means.task else { unreachable!() };
        assert_eq!((m.strategy, m.k), (StrategyKind::Harmony, Some(KChoice::Fixed(3))));
    }
}
