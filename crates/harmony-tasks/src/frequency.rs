//! `frequency`: one categorical attribute through one frequency oracle (any of harmony-core's).

use crate::erased::{Task, TaskAggregator, Typed};
use crate::input::{Input, category};
use harmony_core::error::{Error, Result};
use harmony_core::frequency::{AnyAggregator, AnyOracle, AnyReport};
use harmony_core::kinds::OracleKind;
use harmony_core::schema::{Attribute, Schema};
use harmony_core::{Aggregator, FrequencyOracle};
use harmony_protocol::CollectionConfig;
use harmony_protocol::estimates::{CategoryResult, Est, FrequencyEstimate, Query, TaskEstimate};
use harmony_protocol::spec::{FrequencySpec, TaskSpec};
use rand::Rng;

/// The default oracle for d categories at ε: GRR when d < 3e^ε + 2 (where it has the least
/// variance), else OLH (OUE's variance with a report of a few bytes whatever d).
pub fn default_oracle(epsilon: f64, d: usize) -> OracleKind {
    if (d as f64) < 3.0 * epsilon.exp() + 2.0 { OracleKind::Grr } else { OracleKind::Olh }
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
    let (_, labels) = categorical(schema, &spec.attribute)?;
    let kind = spec.mechanism.unwrap_or_else(|| default_oracle(epsilon, labels.len()));
    AnyOracle::new(kind, epsilon, labels.len())?;
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
}

impl FrequencyTask {
    /// Builds the oracle of a frequency config.
    pub fn new(config: CollectionConfig) -> Result<Self> {
        let TaskSpec::Frequency(spec) = &config.task else {
            return Err(Error::param("task", config.task.kind().name(), "frequency"));
        };
        let (attribute, labels) = categorical(config.schema()?, &spec.attribute)?;
        let (labels, name) = (labels.to_vec(), spec.attribute.clone());
        let kind = spec.mechanism.unwrap_or_else(|| default_oracle(config.epsilon, labels.len()));
        let oracle = AnyOracle::new(kind, config.epsilon, labels.len())?;
        Ok(FrequencyTask { config, attribute, name, labels, oracle })
    }
    /// The oracle.
    pub fn oracle(&self) -> &AnyOracle {
        &self.oracle
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
        self.oracle.validate_report(&self.oracle.decode_report(report)?)
    }
    fn aggregator(&self) -> Box<dyn TaskAggregator> {
        Box::new(Typed::new(self.oracle.aggregator(), AnyReport::decode))
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
        Ok(TaskEstimate::Frequency(FrequencyEstimate {
            attribute: self.name.clone(),
            mechanism: self.oracle.name().to_string(),
            categories,
        }))
    }
}
