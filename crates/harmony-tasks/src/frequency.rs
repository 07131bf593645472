//! `frequency`: one categorical attribute through one frequency oracle (any of harmony-core's).

use crate::erased::{ReportColumns, Task, TaskAggregator, Typed, add_columns_as_bytes};
use crate::input::{Input, category};
use harmony_core::error::{Error, Result};
use harmony_core::frequency::{AnyAggregator, AnyOracle, AnyReport, BassilySmithReport, OlhReport, UnaryReport};
use harmony_core::kinds::OracleKind;
use harmony_core::missing::Present;
use harmony_core::schema::{Attribute, Schema};
use harmony_core::wire;
use harmony_core::{Aggregator, FrequencyOracle};
use harmony_protocol::CollectionConfig;
use harmony_protocol::estimates::{CategoryResult, Est, FrequencyEstimate, Query, TaskEstimate};
use harmony_protocol::spec::{FrequencySpec, TaskSpec};
use rand::Rng;

/// A stored column's loop: each row's report (or why it does not decode) checked as `validate`
/// checks it and added; the error is the first bad row's index and why.
fn add_checked_each<R>(
    rows: impl Iterator<Item = Result<R>>,
    check: impl Fn(&R) -> Result<()>,
    mut add: impl FnMut(&R),
) -> Result<(), (usize, Error)> {
    for (i, r) in rows.enumerate() {
        let r = r.and_then(|r| check(&r).map(|()| r)).map_err(|e| (i, e))?;
        add(&r);
    }
    Ok(())
}

/// The default oracle for d categories at ε: GRR when d < 3e^ε + 2 (where it has the least
/// variance), else OLH (OUE's variance with a report of a few bytes whatever d).
pub fn default_oracle(epsilon: f64, d: usize) -> OracleKind {
    if (d as f64) < 3.0 * epsilon.exp() + 2.0 { OracleKind::Grr } else { OracleKind::Olh }
}

/// [`default_oracle`], but OUE instead of OLH for an attribute that reports missing values
/// (its present-value frequencies need a closed-form cross moment, which OLH lacks).
pub fn default_oracle_for(schema: &Schema, name: &str, epsilon: f64, d: usize) -> OracleKind {
    match default_oracle(epsilon, d) {
        OracleKind::Olh if schema.position(name).and_then(|j| schema.missing_category(j)).is_some() => OracleKind::Oue,
        k => k,
    }
}

/// The attribute's index and labels, or an error naming the attribute.
fn categorical<'a>(schema: &'a Schema, name: &str) -> Result<(usize, &'a [String])> {
    let j = schema
        .attributes()
        .iter()
        .position(|a| a.name() == name)
        .ok_or_else(|| Error::param("task.attribute", name, "the name of one of the schema's attributes"))?;
    match &schema.attributes()[j] {
        Attribute::Categorical { categories, .. } => Ok((j, categories)),
        Attribute::Numeric { .. } => Err(Error::param("task.attribute", name, "a categorical attribute")),
    }
}

/// Writes out the oracle (and checks the attribute and the oracle's parameters).
pub fn resolve(spec: &FrequencySpec, schema: &Schema, epsilon: f64) -> Result<FrequencySpec> {
    let (j, labels) = categorical(schema, &spec.attribute)?;
    let kind = spec.mechanism.unwrap_or_else(|| default_oracle_for(schema, &spec.attribute, epsilon, labels.len()));
    let oracle = AnyOracle::new(kind, epsilon, labels.len())?;
    if schema.missing_category(j).is_some() {
        harmony_core::missing::check_oracle(&oracle, &spec.attribute)?;
    }
    Ok(FrequencySpec { attribute: spec.attribute.clone(), mechanism: Some(kind) })
}

/// The `frequency` task.
#[derive(Debug)]
pub struct FrequencyTask {
    config: CollectionConfig,
    attribute: usize,
    name: String,
    labels: Vec<String>,
    oracle: AnyOracle,
    /// The "(missing)" category, when the attribute reports missing values.
    missing: Option<usize>,
}

impl FrequencyTask {
    /// Builds the oracle of a frequency config.
    pub fn new(config: CollectionConfig) -> Result<Self> {
        let TaskSpec::Frequency(spec) = &config.task else {
            return Err(Error::param("task", config.task.kind().name(), "frequency"));
        };
        let (attribute, labels) = categorical(config.schema()?, &spec.attribute)?;
        let (labels, name) = (labels.to_vec(), spec.attribute.clone());
        let schema = config.schema()?;
        let kind =
            spec.mechanism.unwrap_or_else(|| default_oracle_for(schema, &spec.attribute, config.epsilon, labels.len()));
        let oracle = AnyOracle::new(kind, config.epsilon, labels.len())?;
        let missing = schema.missing_category(attribute).map(|m| m as usize);
        if missing.is_some() {
            harmony_core::missing::check_oracle(&oracle, &spec.attribute)?;
        }
        Ok(FrequencyTask { config, attribute, name, labels, oracle, missing })
    }
    /// The oracle.
    pub fn oracle(&self) -> &AnyOracle {
        &self.oracle
    }
    /// A report decoded and checked (what [`Task::validate`] checks).
    fn checked(&self, report: &[u8]) -> Result<AnyReport> {
        let r = self.oracle.decode_report(report)?;
        self.oracle.validate_report(&r)?;
        Ok(r)
    }
}

impl Task for FrequencyTask {
    fn config(&self) -> &CollectionConfig {
        &self.config
    }
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()> {
        let record = input.record("frequency")?;
        let v = category(record, self.attribute, self.labels.len(), &self.name)?;
        *out = self.oracle.randomize(v, rng)?.encode();
        Ok(())
    }
    fn validate(&self, report: &[u8]) -> Result<()> {
        self.checked(report).map(drop)
    }
    fn aggregator(&self) -> Box<dyn TaskAggregator> {
        Box::new(Typed::new(self.oracle.aggregator(), AnyReport::decode))
    }
    /// Each report decoded once, checked as [`Task::validate`] checks it and added (the
    /// aggregators batch internally: OLH's pending reports, unary's groups of 16). OLH's,
    /// Bassily–Smith's and unary reports (mostly distinct: the engines' `binary` path) decode
    /// without serde ([`OlhReport::decode_fast`], [`BassilySmithReport::decode_fast`],
    /// [`UnaryReport::decode_into`] into one reused report); a report they do not read takes
    /// the wire decoder, which names what is wrong.
    fn add_checked_batch(&self, agg: &mut dyn TaskAggregator, reports: &[&[u8]]) -> Result<(), (usize, Error)> {
        match (&self.oracle, Typed::<AnyAggregator>::of_mut(agg)) {
            (AnyOracle::Olh(o), Ok(AnyAggregator::Olh(a))) => {
                let rows = reports.iter().map(|b| OlhReport::decode_fast(b).map_or_else(|| wire::decode(b), Ok));
                add_checked_each(rows, |r| o.validate_report(r), |r| a.add_unchecked(r))
            }
            (AnyOracle::BassilySmith(o), Ok(AnyAggregator::BassilySmith(a))) => {
                let decode = |b: &[u8]| BassilySmithReport::decode_fast(b).map_or_else(|| wire::decode(b), Ok);
                add_checked_each(reports.iter().map(|b| decode(b)), |r| o.validate_report(r), |r| a.add_unchecked(r))
            }
            (AnyOracle::Sue(o) | AnyOracle::Oue(o), Ok(AnyAggregator::Unary(a))) => {
                let mut r = UnaryReport { bits: Vec::new() };
                for (i, bytes) in reports.iter().enumerate() {
                    if r.decode_into(bytes).is_none() {
                        r = wire::decode(bytes).map_err(|e| (i, e))?;
                    }
                    o.validate_report(&r).map_err(|e| (i, e))?;
                    a.add_unchecked(&r);
                }
                Ok(())
            }
            _ => Typed::<AnyAggregator>::add_each(agg, reports, |r| self.checked(r)),
        }
    }
    fn add_checked_columns(
        &self,
        agg: &mut dyn TaskAggregator,
        columns: ReportColumns<'_>,
    ) -> Result<(), (usize, Error)> {
        let rows = columns.rows()?;
        match (columns, &self.oracle, Typed::<AnyAggregator>::of_mut(agg)) {
            (ReportColumns::Olh { seeds, ys }, AnyOracle::Olh(o), Ok(AnyAggregator::Olh(a))) => {
                let rows =
                    seeds[..rows].iter().zip(&ys[..rows]).map(|(&s, &y)| Ok(OlhReport { seed: s as u64, y: y as u32 }));
                add_checked_each(rows, |r| o.validate_report(r), |r| a.add_unchecked(r))
            }
            _ => add_columns_as_bytes(self, agg, columns),
        }
    }
    fn add_checked_times(&self, agg: &mut dyn TaskAggregator, report: &[u8], times: u64) -> Result<()> {
        Typed::<AnyAggregator>::add_times_checked(agg, report, times, |r| self.checked(r))
    }
    /// The oracle that runs (the spec may leave it to the task).
    fn built_mechanisms(&self) -> Vec<&'static str> {
        vec![self.oracle.name()]
    }
    /// The attribute: a device may keep one report per category of it.
    fn memo_attribute(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn estimate(&self, agg: &dyn TaskAggregator, _query: &Query) -> Result<TaskEstimate> {
        let agg = Typed::<AnyAggregator>::of(agg)?;
        let fe = agg.estimate();
        let empty = agg.count() == 0;
        let categories = self
            .labels
            .iter()
            .enumerate()
            .map(|(v, label)| CategoryResult {
                label: label.clone(),
                frequency: if empty { Est::NONE } else { Est::from_core(&fe.get(v)) },
            })
            .collect();
        let (missing, present) = match self.missing {
            Some(m) if !empty => {
                let n = agg.count() as f64;
                let freqs: Vec<f64> = fe.frequencies.iter().map(|f| f.clamp(0.0, 1.0)).collect();
                let cov = |c| self.oracle.aggregate_cross_moment(&freqs, c, m).unwrap_or(f64::NAN) / n;
                let me = harmony_core::missing::present_frequencies(&fe, m, cov);
                let Present::Frequencies(p) = &me.present else { unreachable!("categorical") };
                let present = (0..p.len())
                    .map(|v| CategoryResult { label: self.labels[v].clone(), frequency: Est::from_core(&p.get(v)) })
                    .collect();
                (Some(Est::from_core(&me.missing)), Some(present))
            }
            Some(_) => (Some(Est::NONE), None),
            None => (None, None),
        };
        let mut doc = FrequencyEstimate {
            attribute: self.name.clone(),
            mechanism: self.oracle.name().to_string(),
            categories,
            missing,
            present,
            in_domain_note: None,
            warnings: Vec::new(),
        };
        crate::domain::frequency(&mut doc, agg.count());
        Ok(TaskEstimate::Frequency(doc))
    }
}
