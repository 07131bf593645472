//! Whole records under one ε: multi-attribute collection strategies.
//!
//! A record of d attributes becomes one report that is ε-LDP for the whole record:
//!
//! * `split` (baseline): every attribute reported at ε/d (numeric by a 1-D mechanism, or the
//!   numeric part jointly by Duchi's multidimensional mechanism at d_n·ε/d; categorical by a
//!   frequency oracle). Sequential composition gives ε.
//! * `sample-k` (Wang et al. ICDE'19, Alg. 4): sample k of the d attributes without replacement,
//!   report each at ε/k and scale by d/k (Horvitz–Thompson). The attributes not sampled reveal
//!   nothing; composition over the k sampled ones gives ε.
//! * `harmony` (Nguyen et al. 2016): sample one attribute at full ε; numeric by Duchi's 1-bit
//!   mechanism, categorical by the 1-bit Hadamard mechanism, scaled by d. It is `sample-k` with
//!   k = 1 and those two mechanisms.
//!
//! # Variance (exact, per attribute)
//! With s = d/k and a user's contribution Z = s·1\[sampled\]·Y (Y the mechanism's unbiased
//! report), E\[Z²\] = s·E\[Y²\], so for a numeric attribute with one-report variance a·t² + b:
//! `Var(t̂) = [(s(a+1) − 1)·Σt² + s·n·b] / n²`, and for a categorical item v:
//! `Var(f̂_v) = [s·(V̄_v + f_v) − f_v] / n`, V̄_v the oracle's mean one-report variance
//! (`FrequencyOracle::aggregate_variance`). With s = 1 (split) both reduce to the plain forms.
//! Standard errors plug in estimates for Σt² and f_v.

use crate::error::{Error, Result};
use crate::frequency::{AnyOracle, AnyReport, FrequencyOracle};
use crate::kinds::{NumericKind, OracleKind, RecordNumeric};
use crate::missing;
use crate::numeric::{AnyNumeric, DuchiMulti, NumericMechanism, NumericReport, VectorMechanism};
use crate::params::Epsilon;
use crate::sampling::sample_k_of_d;
use crate::schema::{Attribute, Schema, Value};
use rand::Rng;
use serde::{Deserialize, Serialize};

mod aggregate;
pub mod plan;

pub use aggregate::{AttributeEstimate, RecordAggregator};

/// The multi-attribute strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum StrategyKind {
    /// ε/d per attribute.
    Split,
    /// Sample one attribute (Duchi 1-bit / 1-bit Hadamard), scaled by d.
    Harmony,
    /// Sample k attributes at ε/k each, scaled by d/k.
    SampleK,
}

impl StrategyKind {
    /// Names used by the CLI and JSON.
    pub const NAMES: &'static [&'static str] = &["split", "harmony", "sample-k"];
    /// Parses a strategy name.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "split" => Ok(StrategyKind::Split),
            "harmony" => Ok(StrategyKind::Harmony),
            "sample-k" => Ok(StrategyKind::SampleK),
            _ => Err(Error::param("strategy", name, "one of split, harmony, sample-k")),
        }
    }
    /// The strategy's name.
    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Split => "split",
            StrategyKind::Harmony => "harmony",
            StrategyKind::SampleK => "sample-k",
        }
    }
}

impl Default for StrategyKind {
    /// `harmony`: the least variance for most schemas (see `harmony plan`).
    fn default() -> Self {
        StrategyKind::Harmony
    }
}

/// How `sample-k` picks k. JSON: `"optimal"`, `"paper"` or a number (the older
/// `"Optimal"`, `"Paper"` and `{"Fixed": k}` are read too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KChoice {
    /// argmin of the closed-form worst-case variance (default).
    Optimal,
    /// The paper's rule k = max(1, min(d, ⌊ε/2.5⌋)).
    Paper,
    /// A fixed k.
    Fixed(usize),
}

impl Serialize for KChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            KChoice::Optimal => s.serialize_str("optimal"),
            KChoice::Paper => s.serialize_str("paper"),
            KChoice::Fixed(k) => s.serialize_u64(*k as u64),
        }
    }
}

impl<'de> Deserialize<'de> for KChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(usize),
            Name(String),
            Fixed {
                #[serde(rename = "Fixed")]
                fixed: usize,
            },
        }
        match Raw::deserialize(d)? {
            Raw::Number(k) | Raw::Fixed { fixed: k } => Ok(KChoice::Fixed(k)),
            Raw::Name(n) if n.eq_ignore_ascii_case("optimal") => Ok(KChoice::Optimal),
            Raw::Name(n) if n.eq_ignore_ascii_case("paper") => Ok(KChoice::Paper),
            Raw::Name(n) => Err(serde::de::Error::custom(format!(
                "k is {n:?}, expected \"optimal\", \"paper\" or a number of attributes"
            ))),
        }
    }
}

/// Everything that defines a collection's randomizer besides the schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyOptions {
    /// The strategy.
    pub kind: StrategyKind,
    /// The total budget for the whole record.
    pub epsilon: f64,
    /// Numeric mechanism: `split`: any 1-D mechanism or duchi-multi; `sample-k`: any 1-D
    /// mechanism (pm and hm are the good ones); ignored by `harmony` (duchi).
    pub numeric_mechanism: RecordNumeric,
    /// Categorical oracle: any frequency oracle; ignored by `harmony` (hadamard).
    pub categorical_mechanism: OracleKind,
    /// How `sample-k` chooses k (ignored by the other strategies).
    pub k: KChoice,
}

impl StrategyOptions {
    /// The defaults of each strategy: split → duchi-multi + oue, sample-k → hm + oue (k optimal),
    /// harmony → duchi + hadamard.
    pub fn default_for(kind: StrategyKind, epsilon: f64) -> Self {
        let (numeric_mechanism, categorical_mechanism) = match kind {
            StrategyKind::Split => (RecordNumeric::DuchiMulti, OracleKind::Oue),
            StrategyKind::SampleK => (RecordNumeric::Hm, OracleKind::Oue),
            StrategyKind::Harmony => (RecordNumeric::Duchi, OracleKind::Hadamard),
        };
        StrategyOptions { kind, epsilon, numeric_mechanism, categorical_mechanism, k: KChoice::Optimal }
    }
}

/// The per-attribute mechanism of a record mechanism.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeMechanism {
    /// A 1-D numeric mechanism on [-1, 1].
    Numeric(AnyNumeric),
    /// A frequency oracle over the attribute's categories.
    Categorical(AnyOracle),
    /// Covered by the joint numeric mechanism (split with duchi-multi).
    Joint,
}

/// One sampled attribute's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AttributeReport {
    /// From a numeric mechanism.
    Numeric(NumericReport),
    /// From a frequency oracle.
    Categorical(AnyReport),
}

/// A whole record's report: the sampled attributes (index, report) and, for split with
/// duchi-multi, the joint report of the numeric part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RecordReport {
    /// (attribute index, report) for each reported attribute.
    pub attributes: Vec<(u32, AttributeReport)>,
    /// The joint numeric report (split + duchi-multi only).
    pub joint: Option<<DuchiMulti as VectorMechanism>::Report>,
}

impl crate::wire::WireReport for RecordReport {
    const KIND: crate::wire::WireKind = crate::wire::ReportKind::Record.wire();
}

impl RecordReport {
    /// A record of one numeric attribute, `attribute`, reporting `NumericReport::Fixed(units)`,
    /// and no joint report (what a one-attribute strategy's device sends for a real value).
    pub fn one_fixed(attribute: u32, units: i64) -> RecordReport {
        RecordReport {
            attributes: vec![(attribute, AttributeReport::Numeric(NumericReport::Fixed(units)))],
            joint: None,
        }
    }
    /// `(attribute, units)` when this is a [`RecordReport::one_fixed`] record.
    pub fn as_one_fixed(&self) -> Option<(u32, i64)> {
        match (self.attributes.as_slice(), &self.joint) {
            ([(j, AttributeReport::Numeric(NumericReport::Fixed(u)))], None) => Some((*j, *u)),
            _ => None,
        }
    }
    /// Decodes a report whose attributes are all numeric and that has no joint report into
    /// `self`, as [`crate::wire::decode`] does (postcard: the attributes' count, each as index,
    /// `Numeric`'s variant tag, `Sign` and a bool byte or `Fixed` and a zigzag varint; then `None`
    /// for the joint report), without serde and reusing `self.attributes`: an engine's batch
    /// path over stored means reports. `None` for any other report, read or refused by
    /// `wire::decode` (a categorical attribute, a joint report, bytes postcard refuses).
    pub fn decode_into(&mut self, bytes: &[u8]) -> Option<()> {
        use crate::wire::{WIRE_VERSION, WireReport, take_varint};
        self.attributes.clear();
        self.joint = None;
        let [WIRE_VERSION, kind, payload @ ..] = bytes else { return None };
        if *kind != Self::KIND.byte {
            return None;
        }
        let (len, mut at) = take_varint(payload, usize::BITS)?;
        // Each attribute takes at least three bytes.
        if len > (payload.len() - at) as u64 / 3 {
            return None;
        }
        for _ in 0..len {
            let (index, n) = take_varint(&payload[at..], 32)?;
            at += n;
            // AttributeReport::Numeric is variant 0 (a one-byte varint), then NumericReport's tag.
            let report = match payload.get(at..at + 2)? {
                [0, 0] => NumericReport::Sign(match *payload.get(at + 2)? {
                    0 => false,
                    1 => true,
                    _ => return None,
                }),
                [0, 1] => {
                    let (z, n) = take_varint(&payload[at + 2..], 64)?;
                    at += n - 1;
                    NumericReport::Fixed(((z >> 1) as i64) ^ -((z & 1) as i64))
                }
                _ => return None,
            };
            at += 3;
            self.attributes.push((index as u32, AttributeReport::Numeric(report)));
        }
        (payload.get(at..)? == [0]).then_some(())
    }
}

/// A record randomizer: schema + strategy, with every mechanism precomputed.
#[derive(Debug, Clone)]
pub struct RecordMechanism {
    /// Shared: aggregators clone the mechanism, and a schema's label maps are not cheap.
    schema: std::sync::Arc<Schema>,
    options: StrategyOptions,
    k: usize,
    scale: f64,
    mechanisms: Vec<AttributeMechanism>,
    joint: Option<DuchiMulti>,
    numeric_positions: Vec<usize>,
    /// Category count per attribute (0 for numeric ones), for the per-record validation.
    cards: Vec<u32>,
}

/// Field by field; the schema (label maps) is compared only when the two mechanisms do not share
/// it, so merging aggregators of one mechanism is cheap.
impl PartialEq for RecordMechanism {
    fn eq(&self, other: &Self) -> bool {
        (std::sync::Arc::ptr_eq(&self.schema, &other.schema) || self.schema == other.schema)
            && self.options == other.options
            && self.k == other.k
            && self.scale == other.scale
            && self.mechanisms == other.mechanisms
            && self.joint == other.joint
            && self.numeric_positions == other.numeric_positions
            && self.cards == other.cards
    }
}

#[inline]
fn unit_value(record: &[Value], j: usize, schema: &Schema) -> Result<f64> {
    match record[j] {
        Value::Unit(t) if (-1.0..=1.0).contains(&t) => Ok(t),
        other => Err(Error::input(schema.attributes()[j].name(), other, "a numeric value mapped to [-1, 1]")),
    }
}

#[inline]
fn category_value(record: &[Value], j: usize, d: u32, schema: &Schema) -> Result<usize> {
    match record[j] {
        Value::Category(c) if c < d => Ok(c as usize),
        other => Err(Error::input(schema.attributes()[j].name(), other, format!("a category index in [0, {d})"))),
    }
}

/// Category count of every attribute (0 for numeric ones).
fn cards_of(schema: &Schema) -> Vec<u32> {
    schema.attributes().iter().map(|a| if a.is_numeric() { 0 } else { a.cardinality() as u32 }).collect()
}

/// [`RecordMechanism::check_record`] for a schema and its category counts (0 for numeric).
fn check_record(schema: &Schema, cards: &[u32], record: &[Value]) -> Result<()> {
    let d = schema.len();
    if record.len() != d {
        return Err(Error::input("record", format!("{} values", record.len()), format!("{d} values")));
    }
    // Validate the whole record first, so a bad value is an error whichever attributes the
    // sampling picks (and nothing depends on the sample).
    // Hot path: one branch-free pass; the per-attribute pass below only names the bad value.
    let valid = record.iter().zip(cards).fold(true, |ok, (v, &card)| {
        ok & match *v {
            Value::Unit(t) => (card == 0) & (-1.0..=1.0).contains(&t),
            Value::Category(c) => (card != 0) & (c < card),
        }
    });
    if !valid {
        for (j, &card) in cards.iter().enumerate() {
            if card == 0 {
                unit_value(record, j, schema)?;
            } else {
                category_value(record, j, card, schema)?;
            }
        }
    }
    Ok(())
}

impl RecordMechanism {
    /// Builds the record mechanism; errors name the bad option.
    pub fn new(schema: Schema, options: StrategyOptions) -> Result<Self> {
        let eps = Epsilon::new(options.epsilon)?;
        let d = schema.len();
        let (num_name, cat_name) = match options.kind {
            StrategyKind::Harmony => (RecordNumeric::Duchi, OracleKind::Hadamard),
            _ => (options.numeric_mechanism, options.categorical_mechanism),
        };
        let one_d = match (num_name.one_d(), options.kind) {
            (Some(m), _) => Some(m),
            (None, StrategyKind::Split) => None,
            (None, _) => {
                return Err(Error::param(
                    "numeric_mechanism",
                    num_name.name(),
                    "a 1-D numeric mechanism (duchi-multi is for the split strategy only)",
                ));
            }
        };
        let k = match options.kind {
            StrategyKind::Split => d,
            StrategyKind::Harmony => 1,
            StrategyKind::SampleK => match options.k {
                KChoice::Fixed(k) if (1..=d).contains(&k) => k,
                KChoice::Fixed(k) => return Err(Error::param("k", k, format!("an integer in [1, {d}]"))),
                KChoice::Paper => paper_k(options.epsilon, d),
                KChoice::Optimal => optimal_k(&schema, options.epsilon, one_d.unwrap_or(NumericKind::Duchi), cat_name)?,
            },
        };
        let per_attr = eps.split(k)?.value();
        let numeric_positions: Vec<usize> =
            schema.attributes().iter().enumerate().filter(|(_, a)| a.is_numeric()).map(|(j, _)| j).collect();
        let joint = if one_d.is_none() && !numeric_positions.is_empty() {
            Some(DuchiMulti::new(per_attr * numeric_positions.len() as f64, numeric_positions.len())?)
        } else {
            None
        };
        let mut mechanisms = Vec::with_capacity(d);
        for (j, a) in schema.attributes().iter().enumerate() {
            mechanisms.push(match a {
                Attribute::Numeric { .. } if joint.is_some() => AttributeMechanism::Joint,
                Attribute::Numeric { .. } => {
                    // `one_d` is None only with a joint mechanism, handled above.
                    AttributeMechanism::Numeric(AnyNumeric::new(one_d.unwrap_or(NumericKind::Duchi), per_attr)?)
                }
                Attribute::Categorical { categories, .. } => {
                    let o = AnyOracle::new(cat_name, per_attr, categories.len())?;
                    if schema.missing_category(j).is_some() {
                        missing::check_oracle(&o, a.name())?;
                    }
                    AttributeMechanism::Categorical(o)
                }
            });
        }
        let cards = cards_of(&schema);
        Ok(RecordMechanism {
            scale: d as f64 / k as f64,
            schema: std::sync::Arc::new(schema),
            options,
            k,
            mechanisms,
            joint,
            numeric_positions,
            cards,
        })
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
    /// The options it was built with.
    pub fn options(&self) -> &StrategyOptions {
        &self.options
    }
    /// Attributes reported per record (k; d for split).
    pub fn k(&self) -> usize {
        self.k
    }
    /// The Horvitz–Thompson scale d/k.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// Per-attribute mechanisms.
    pub fn mechanisms(&self) -> &[AttributeMechanism] {
        &self.mechanisms
    }
    /// The joint numeric mechanism (split + duchi-multi).
    pub fn joint(&self) -> Option<&DuchiMulti> {
        self.joint.as_ref()
    }
    /// Names of the numeric and categorical mechanisms actually used.
    pub fn mechanism_names(&self) -> (&'static str, &'static str) {
        let num = if let Some(j) = &self.joint {
            j.name()
        } else {
            self.mechanisms
                .iter()
                .find_map(|m| if let AttributeMechanism::Numeric(x) = m { Some(x.name()) } else { None })
                .unwrap_or("none")
        };
        let cat = self
            .mechanisms
            .iter()
            .find_map(|m| if let AttributeMechanism::Categorical(x) = m { Some(x.name()) } else { None })
            .unwrap_or("none");
        (num, cat)
    }

    /// Checks a record (values encoded by [`Schema::encode`]): d values, each of its attribute's
    /// kind and range. The error names the first bad attribute, its value and what was expected.
    pub fn check_record(&self, record: &[Value]) -> Result<()> {
        check_record(&self.schema, &self.cards, record)
    }

    /// Randomizes a record (values already encoded by [`Schema::encode`]) into `out`, reusing
    /// its buffers. Errors name the attribute.
    pub fn randomize_into<R: Rng + ?Sized>(
        &self,
        record: &[Value],
        rng: &mut R,
        out: &mut RecordReport,
        scratch: &mut Vec<usize>,
    ) -> Result<()> {
        self.check_record(record)?;
        let d = self.schema.len();
        out.joint = None;
        if self.k == d {
            scratch.clear();
            scratch.extend(0..d);
        } else {
            sample_k_of_d(rng, self.k, d, scratch);
        }
        // Overwrite the previous record's entries in place where the kinds match (a unary
        // report keeps its word vector): the same draws as building fresh reports, no allocation.
        let mut slot = 0;
        for &j in scratch.iter() {
            let fresh = match &self.mechanisms[j] {
                AttributeMechanism::Joint => continue,
                AttributeMechanism::Numeric(m) => {
                    AttributeReport::Numeric(m.randomize_unchecked(unit_value(record, j, &self.schema)?, rng))
                }
                AttributeMechanism::Categorical(o) => {
                    let v = category_value(record, j, self.cards[j], &self.schema)?;
                    if let Some((idx, AttributeReport::Categorical(rep))) = out.attributes.get_mut(slot) {
                        *idx = j as u32;
                        o.randomize_reusing(v, rng, rep);
                        slot += 1;
                        continue;
                    }
                    AttributeReport::Categorical(o.randomize_unchecked(v, rng))
                }
            };
            if slot < out.attributes.len() {
                out.attributes[slot] = (j as u32, fresh);
            } else {
                out.attributes.push((j as u32, fresh));
            }
            slot += 1;
        }
        out.attributes.truncate(slot);
        if let Some(joint) = &self.joint {
            let mut t = Vec::with_capacity(self.numeric_positions.len());
            for &j in &self.numeric_positions {
                t.push(unit_value(record, j, &self.schema)?);
            }
            out.joint = Some(joint.randomize_unchecked(&t, rng));
        }
        Ok(())
    }

    /// Randomizes a record into a fresh report.
    pub fn randomize<R: Rng + ?Sized>(&self, record: &[Value], rng: &mut R) -> Result<RecordReport> {
        let mut out = RecordReport::default();
        self.randomize_into(record, rng, &mut out, &mut Vec::new())?;
        Ok(out)
    }

    /// Checks a record report against the strategy (see [`Randomizer::validate`]).
    pub fn validate_report(&self, r: &RecordReport) -> Result<()> {
        let m = self;
        let d = m.schema.len();
        let expected_len = if m.joint.is_some() { m.k - m.numeric_positions.len() } else { m.k };
        if r.attributes.len() != expected_len {
            return Err(Error::report("attributes", r.attributes.len(), format!("{expected_len} sampled attributes")));
        }
        for (i, (j, rep)) in r.attributes.iter().enumerate() {
            let j = *j as usize;
            if j >= d {
                return Err(Error::report(format!("attributes[{i}].index"), j, format!("an attribute index < {d}")));
            }
            if r.attributes[..i].iter().any(|(p, _)| *p as usize == j) {
                return Err(Error::report(format!("attributes[{i}].index"), j, "distinct attribute indices"));
            }
            match (&m.mechanisms[j], rep) {
                (AttributeMechanism::Numeric(mech), AttributeReport::Numeric(x)) => {
                    mech.decode(x)?;
                }
                (AttributeMechanism::Categorical(o), AttributeReport::Categorical(x)) => {
                    o.validate_report(x)?;
                }
                _ => {
                    return Err(Error::report(
                        format!("attributes[{i}]"),
                        "a report of the wrong kind",
                        format!("the kind of attribute {}", m.schema.attributes()[j].name()),
                    ));
                }
            }
        }
        match (&self.joint, &r.joint) {
            (Some(joint), Some(x)) => joint.validate(x),
            (None, None) => Ok(()),
            (Some(_), None) => Err(Error::report("joint", "missing", "a duchi-multi report")),
            (None, Some(_)) => Err(Error::report("joint", "present", "no joint report for this strategy")),
        }
    }

    /// An empty aggregator.
    pub fn aggregator(&self) -> RecordAggregator {
        RecordAggregator::new(self)
    }

    /// Worst-case one-user variance of every attribute's estimate (numeric: on [-1, 1], over
    /// t; categorical: over items and distributions, an upper bound). Divide by n for the
    /// variance of the estimate. Used by `plan` and by the choice of k.
    pub fn worst_case_variances(&self) -> Vec<f64> {
        self.mechanisms
            .iter()
            .map(|m| match m {
                AttributeMechanism::Numeric(x) => {
                    let (a, b) = x.variance_coefficients();
                    sampled_numeric_worst(a, b, self.scale)
                }
                AttributeMechanism::Joint => self.joint.as_ref().map(|j| j.worst_case_variance()).unwrap_or(f64::NAN),
                AttributeMechanism::Categorical(o) => sampled_categorical_worst(o.worst_case_variance(), self.scale),
            })
            .collect()
    }

    /// Variance of attribute j's numeric estimate (on [-1, 1]) given the true values' Σt and
    /// Σt² over n users: E[1/n_j]·v̄ + (E[1/n_j] − 1/n)·Σ(t − t̄)²/(n − 1), the randomization
    /// noise of the n_j reports plus the sampling of which users report j (see
    /// [`RecordAggregator::estimates`]); v̄ = (a·Σt² + b·n)/n is the mean one-report variance.
    /// Exact for split (n_j = n); for sampled strategies E[1/n_j] is to second order in 1/n.
    pub fn numeric_variance(&self, j: usize, sum_t: f64, sum_t2: f64, n: f64) -> f64 {
        let (a, b) = match &self.mechanisms[j] {
            AttributeMechanism::Numeric(m) => m.variance_coefficients(),
            AttributeMechanism::Joint => self.joint.as_ref().map(|m| m.variance_coefficients()).unwrap_or((0.0, 0.0)),
            AttributeMechanism::Categorical(_) => return f64::NAN,
        };
        let s = if matches!(self.mechanisms[j], AttributeMechanism::Joint) { 1.0 } else { self.scale };
        let inv = inverse_count(n, s);
        let v_bar = (a * sum_t2 + b * n) / n;
        let spread = if n > 1.0 { (sum_t2 - sum_t * sum_t / n).max(0.0) / (n - 1.0) } else { 0.0 };
        inv * v_bar + (inv - 1.0 / n).max(0.0) * spread
    }

    /// Variance of attribute j's frequency estimate of every category, given the true
    /// frequencies over n users: E[1/n_j]·V̄_v + (E[1/n_j] − 1/n)·n·f_v(1 − f_v)/(n − 1), with
    /// V̄_v the oracle's mean one-report variance (`aggregate_variance`, f_v term included).
    pub fn categorical_variance(&self, j: usize, freqs: &[f64], n: f64) -> Vec<f64> {
        match &self.mechanisms[j] {
            AttributeMechanism::Categorical(o) => {
                let inv = inverse_count(n, self.scale);
                (0..freqs.len())
                    .map(|v| {
                        let f = freqs[v];
                        let spread = if n > 1.0 { n * f * (1.0 - f) / (n - 1.0) } else { 0.0 };
                        inv * o.aggregate_variance(freqs, v) + (inv - 1.0 / n).max(0.0) * spread
                    })
                    .collect()
            }
            _ => vec![f64::NAN; freqs.len()],
        }
    }
}

/// A device randomizes its whole record (values encoded by [`Schema::encode`]) into one
/// [`RecordReport`].
impl crate::randomizer::Randomizer for RecordMechanism {
    type Input = [Value];
    type Report = RecordReport;

    fn randomize(&self, record: &[Value], rng: &mut dyn Rng) -> Result<RecordReport> {
        RecordMechanism::randomize(self, record, rng)
    }
    fn validate(&self, report: &RecordReport) -> Result<()> {
        self.validate_report(report)
    }
}

/// E[1/n_j] for n_j ~ Binomial(n, 1/s), the users who report an attribute sampled with
/// probability k/d = 1/s: 1/μ + σ²/μ³ = s/n + s(s − 1)/n² (second order; exact, 1/n, at s = 1).
pub fn inverse_count(n: f64, s: f64) -> f64 {
    s / n + s * (s - 1.0).max(0.0) / (n * n)
}

/// The paper's rule k = max(1, min(d, ⌊ε/2.5⌋)).
pub fn paper_k(epsilon: f64, d: usize) -> usize {
    ((epsilon / 2.5).floor() as usize).clamp(1, d)
}

/// Worst-case n·Var of a numeric attribute's estimate under sampling with s = d/k and a
/// mechanism with coefficients (a, b): s·(a·E\[t²\] + b) + (s − 1)·Var(t), largest at E\[t²\] ∈
/// {0, 1} with mean 0: max(s·b, s(a + 1) − 1 + s·b).
pub fn sampled_numeric_worst(a: f64, b: f64, s: f64) -> f64 {
    (s * b).max(s * (a + 1.0) - 1.0 + s * b)
}

/// Worst-case n·Var of a categorical attribute's frequency estimate under sampling with
/// s = d/k, from the oracle's worst one-report variance V at ε/k: s·V + (s − 1)·f(1 − f) ≤
/// s·V + (s − 1)/4.
pub fn sampled_categorical_worst(v: f64, s: f64) -> f64 {
    s * v + (s - 1.0) / 4.0
}

/// k minimising the summed closed-form worst-case variance over the schema's attributes
/// (numeric: [`sampled_numeric_worst`]; categorical: s·(V_worst + 1) − 1 with V_worst the
/// oracle's worst one-report variance at ε/k).
///
/// Cost: for each k one oracle per distinct category count (the worst-case variance depends on
/// (ε/k, d) only), so O(d · distinct counts) oracle constructions, not O(d²).
pub fn optimal_k(schema: &Schema, epsilon: f64, numeric: NumericKind, categorical: OracleKind) -> Result<usize> {
    let d = schema.len();
    let mut cards: Vec<usize> =
        schema.attributes().iter().filter(|a| !a.is_numeric()).map(|a| a.cardinality()).collect();
    cards.sort_unstable();
    let mut distinct: Vec<(usize, usize)> = Vec::new(); // (cardinality, attributes)
    for c in cards {
        match distinct.last_mut() {
            Some((last, m)) if *last == c => *m += 1,
            _ => distinct.push((c, 1)),
        }
    }
    let numeric_count = schema.numeric_count() as f64;
    let mut best = (f64::INFINITY, 1);
    for k in 1..=d {
        let per = epsilon / k as f64;
        let s = d as f64 / k as f64;
        let mut total = 0.0;
        if numeric_count > 0.0 {
            let (ca, cb) = AnyNumeric::new(numeric, per)?.variance_coefficients();
            total += numeric_count * sampled_numeric_worst(ca, cb, s);
        }
        for &(card, m) in &distinct {
            let o = AnyOracle::new(categorical, per, card)?;
            total += m as f64 * sampled_categorical_worst(o.worst_case_variance(), s);
        }
        if total < best.0 {
            best = (total, k);
        }
    }
    Ok(best.1)
}
