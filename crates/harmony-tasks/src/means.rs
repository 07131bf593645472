//! `means`: a device randomizes its whole record under one multi-attribute strategy
//! (harmony-core's [`RecordMechanism`]); the server estimates every attribute's mean (numeric,
//! in its units) or frequencies (categorical).

use crate::erased::{ReportColumns, Task, TaskAggregator, Typed, add_columns_as_bytes, encode_to};
use crate::input::Input;
use harmony_core::aggregate::Aggregator;
use harmony_core::error::{Error, Result};
use harmony_core::estimate::{Estimate, FrequencyEstimate};
use harmony_core::missing::{MissingEstimate, Present};
use harmony_core::numeric::NumericReport;
use harmony_core::randomizer::Randomizer;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::{
    AttributeEstimate, AttributeReport, KChoice, RecordAggregator, RecordMechanism, RecordReport, StrategyOptions,
};
use harmony_core::wire;
use harmony_protocol::CollectionConfig;
use harmony_protocol::estimates::{AttributeResult, CategoryResult, Est, MeansEstimate, Query, TaskEstimate};
use harmony_protocol::spec::{MeansSpec, TaskSpec};
use rand::Rng;

/// The strategy options a resolved spec describes (defaults filled in).
pub fn options(spec: &MeansSpec, epsilon: f64) -> StrategyOptions {
    let d = StrategyOptions::default_for(spec.strategy, epsilon);
    StrategyOptions {
        numeric_mechanism: spec.numeric_mechanism.unwrap_or(d.numeric_mechanism),
        categorical_mechanism: spec.categorical_mechanism.unwrap_or(d.categorical_mechanism),
        k: spec.k.unwrap_or(KChoice::Optimal),
        ..d
    }
}

/// Writes out every choice of a means spec (and checks it builds on the schema).
pub fn resolve(spec: &MeansSpec, schema: &Schema, epsilon: f64) -> Result<MeansSpec> {
    let o = options(spec, epsilon);
    let mech = RecordMechanism::new(schema.clone(), o.clone())?;
    let (num, cat) = (Some(o.numeric_mechanism), Some(o.categorical_mechanism));
    // sample-k publishes the k it chose, so devices never re-derive it.
    let k = Some(match o.kind {
        harmony_core::strategy::StrategyKind::SampleK => KChoice::Fixed(mech.k()),
        _ => o.k,
    });
    Ok(MeansSpec { strategy: o.kind, numeric_mechanism: num, categorical_mechanism: cat, k })
}

/// The `means` task.
#[derive(Debug)]
pub struct MeansTask {
    config: CollectionConfig,
    mech: RecordMechanism,
}

impl MeansTask {
    /// Builds the record mechanism of a means config.
    pub fn new(config: CollectionConfig) -> Result<Self> {
        let TaskSpec::Means(spec) = &config.task else {
            return Err(Error::param("task", config.task.kind().name(), "means"));
        };
        let mech = RecordMechanism::new(config.schema()?.clone(), options(spec, config.epsilon))?;
        Ok(MeansTask { config, mech })
    }
    /// The record mechanism.
    pub fn mechanism(&self) -> &RecordMechanism {
        &self.mech
    }
    /// The estimates of a record accumulator as the document's attributes, one per schema
    /// attribute (presence attributes included: `"age:missing"`'s frequencies are also `age`'s
    /// `missing`).
    pub fn document(&self, agg: &RecordAggregator) -> MeansEstimate {
        let empty = agg.count() == 0;
        let schema = self.mech.schema();
        let estimates = agg.estimates();
        let missing = agg.missing_estimates(&estimates);
        let attributes = (0..schema.len())
            .map(|j| attribute_result(&schema.attributes()[j], &estimates[j], missing[j].as_ref(), empty))
            .collect();
        let strategy = self.mech.options().kind.name().to_string();
        let mut doc = MeansEstimate { strategy, attributes, in_domain_note: None, warnings: Vec::new() };
        crate::domain::means(&mut doc, schema, agg.count());
        doc
    }
}

/// An estimate, or none without reports.
fn est(e: &Estimate, empty: bool) -> Est {
    if empty { Est::NONE } else { Est::from_core(e) }
}

/// Labels with their frequencies.
fn categories(labels: &[String], fe: &FrequencyEstimate, empty: bool) -> Vec<CategoryResult> {
    labels
        .iter()
        .enumerate()
        .map(|(v, label)| CategoryResult { label: label.clone(), frequency: est(&fe.get(v), empty) })
        .collect()
}

fn attribute_result(a: &Attribute, e: &AttributeEstimate, m: Option<&MissingEstimate>, empty: bool) -> AttributeResult {
    let missing = m.map(|m| est(&m.missing, empty));
    match (a, e, m.map(|m| &m.present)) {
        (Attribute::Numeric { name, min, max }, AttributeEstimate::Numeric(e), present) => {
            let e = match present {
                Some(Present::Mean(p)) => p,
                _ => e,
            };
            let units = e.affine(0.5 * (max - min), 0.5 * (max + min));
            AttributeResult::Numeric { name: name.clone(), mean: est(&units, empty), unit: est(e, empty), missing }
        }
        (Attribute::Categorical { name, categories: labels }, AttributeEstimate::Categorical(fe), present) => {
            let present = match present {
                Some(Present::Frequencies(p)) => Some(categories(&labels[..labels.len() - 1], p, empty)),
                _ => None,
            };
            AttributeResult::Categorical {
                name: name.clone(),
                categories: categories(labels, fe, empty),
                missing,
                present,
            }
        }
        // The aggregator's estimates follow the schema's kinds (RecordAggregator::estimates).
        (a, _, _) => AttributeResult::Categorical {
            name: a.name().to_string(),
            categories: Vec::new(),
            missing: None,
            present: None,
        },
    }
}

impl MeansTask {
    /// A report decoded and checked as [`Task::validate`] checks it.
    fn checked(&self, report: &[u8]) -> Result<RecordReport> {
        let r = wire::decode::<RecordReport>(report)?;
        self.mech.validate_report(&r)?;
        Ok(r)
    }
}

impl Task for MeansTask {
    fn config(&self) -> &CollectionConfig {
        &self.config
    }
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()> {
        let report = Randomizer::randomize(&self.mech, input.record("means")?, rng)?;
        encode_to(&report, out);
        Ok(())
    }
    fn validate(&self, report: &[u8]) -> Result<()> {
        self.checked(report).map(drop)
    }
    fn aggregator(&self) -> Box<dyn TaskAggregator> {
        Box::new(Typed::wire(self.mech.aggregator()))
    }
    /// Each report decoded once, checked as [`Task::validate`] checks it and added (the default
    /// decodes twice: decoding is most of a record report's cost); numeric records decode
    /// without serde into one reused report ([`RecordReport::decode_into`]), the others, and
    /// any report it does not read, through `wire::decode`, which names what is wrong.
    fn add_checked_batch(&self, agg: &mut dyn TaskAggregator, reports: &[&[u8]]) -> Result<(), (usize, Error)> {
        let agg = Typed::<RecordAggregator>::of_mut(agg).map_err(|e| (0, e))?;
        let mut r = RecordReport::default();
        for (i, bytes) in reports.iter().enumerate() {
            if r.decode_into(bytes).is_none() {
                r = wire::decode(bytes).map_err(|e| (i, e))?;
            }
            self.mech.validate_report(&r).map_err(|e| (i, e))?;
            agg.add_unchecked(&r);
        }
        Ok(())
    }
    /// One-attribute records as columns: each row set into one reused record, checked as
    /// [`Task::validate`] checks it and added.
    fn add_checked_columns(
        &self,
        agg: &mut dyn TaskAggregator,
        columns: ReportColumns<'_>,
    ) -> Result<(), (usize, Error)> {
        let rows = columns.rows()?;
        let ReportColumns::FixedRecords { attributes, units } = columns else {
            return add_columns_as_bytes(self, agg, columns);
        };
        let agg = Typed::<RecordAggregator>::of_mut(agg).map_err(|e| (0, e))?;
        let mut r = RecordReport::one_fixed(0, 0);
        for (i, (&j, &u)) in attributes[..rows].iter().zip(&units[..rows]).enumerate() {
            r.attributes[0] = (j as u32, AttributeReport::Numeric(NumericReport::Fixed(u)));
            self.mech.validate_report(&r).map_err(|e| (i, e))?;
            agg.add_unchecked(&r);
        }
        Ok(())
    }
    fn add_checked_times(&self, agg: &mut dyn TaskAggregator, report: &[u8], times: u64) -> Result<()> {
        Typed::<RecordAggregator>::add_times_checked(agg, report, times, |r| self.checked(r))
    }
    fn estimate(&self, agg: &dyn TaskAggregator, _query: &Query) -> Result<TaskEstimate> {
        Ok(TaskEstimate::Means(self.document(Typed::<RecordAggregator>::of(agg)?)))
    }
    fn simulate(&self, inputs: &[Input<'_>], seed: u64, first: u64) -> Result<Box<dyn TaskAggregator>> {
        let records = inputs.iter().map(|i| i.record("means")).collect::<Result<Vec<_>>>()?;
        Ok(Box::new(Typed::wire(simulate(self, &records, seed, first)?)))
    }
    /// The strategy and the record mechanism's numeric and categorical mechanisms (those a
    /// strategy fixes, e.g. harmony's, included), each that runs.
    fn built_mechanisms(&self) -> Vec<&'static str> {
        let strategy = match &self.config.task {
            TaskSpec::Means(spec) => spec.strategy.name(),
            _ => "none",
        };
        let (numeric, categorical) = self.mech.mechanism_names();
        [strategy, numeric, categorical].into_iter().filter(|n| *n != "none").collect()
    }
    /// The record mechanism refuses a numeric value NaN or outside [-1, 1] before any draw.
    fn refuses_out_of_range(&self) -> bool {
        true
    }
}

/// Simulated devices of a means collection, fast: the record mechanism's own loop
/// (`randomize_into`, buffers reused, no encoding) with each device's RNG — the same draws as
/// [`Task::randomize`] (`tests::fast_path_equals_devices`).
pub fn simulate(task: &MeansTask, records: &[&[Value]], seed: u64, first: u64) -> Result<RecordAggregator> {
    let mut agg = task.mech.aggregator();
    let (mut report, mut scratch) = (RecordReport::default(), Vec::new());
    for (i, record) in records.iter().enumerate() {
        let mut rng = crate::simulate::device_rng(seed, first + i as u64);
        task.mech
            .randomize_into(record, &mut rng, &mut report, &mut scratch)
            .map_err(|e| crate::simulate::at_device(e, first + i as u64))?;
        agg.add_unchecked(&report);
    }
    Ok(agg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate;
    use harmony_core::schema::Attribute;
    use harmony_core::strategy::StrategyKind;
    use harmony_protocol::CreateCollection;

    fn schema() -> Schema {
        Schema::new(vec![
            Attribute::Numeric { name: "x".into(), min: 0.0, max: 10.0 },
            Attribute::Categorical { name: "c".into(), categories: (0..5).map(|i| format!("c{i}")).collect() },
            Attribute::Numeric { name: "y".into(), min: -1.0, max: 1.0 },
        ])
        .unwrap()
    }

    /// The columnar simulation (`simulate::run_columns`) gives `simulate::run`'s accumulator on
    /// the same rows: the same estimates, bit for bit, over several chunks.
    #[test]
    fn columns_equal_rows() {
        let n = 3 * simulate::CHUNK + 17;
        let rows: Vec<Value> = (0..n)
            .flat_map(|i| {
                [Value::Unit((i % 21) as f64 / 10.0 - 1.0), Value::Category((i % 5) as u32), Value::Unit(0.5)]
            })
            .collect();
        let inputs: Vec<Input> = rows.chunks(3).map(Input::Record).collect();
        let columns = vec![
            harmony_core::schema::ColumnValues::Unit(
                rows.iter().step_by(3).map(|v| if let Value::Unit(t) = v { *t } else { 0.0 }).collect(),
            ),
            harmony_core::schema::ColumnValues::Category((0..n).map(|i| (i % 5) as u32).collect()),
            harmony_core::schema::ColumnValues::Unit(vec![0.5; n]),
        ];
        let spec = MeansSpec { strategy: StrategyKind::SampleK, ..Default::default() };
        let req = CreateCollection { schema: Some(schema()), epsilon: 2.0, task: TaskSpec::Means(spec) };
        let task = crate::build(&crate::resolve(&req, "t").unwrap()).unwrap();
        let a = simulate::run(task.as_ref(), &inputs, 4).unwrap();
        let b = simulate::run_columns(task.as_ref(), &columns, 4).unwrap();
        let q = Query::default();
        assert_eq!(task.estimate(a.as_ref(), &q).unwrap(), task.estimate(b.as_ref(), &q).unwrap());
        assert_eq!(b.count(), n as u64);
    }

    /// The fast simulation path draws exactly what devices draw: the same accumulator, hence
    /// bit-identical estimates, for every strategy.
    #[test]
    fn fast_path_equals_devices() {
        let rows: Vec<Vec<Value>> = (0..3000)
            .map(|i| vec![Value::Unit((i % 21) as f64 / 10.0 - 1.0), Value::Category(i % 5), Value::Unit(0.5)])
            .collect();
        let inputs: Vec<Input> = rows.iter().map(|r| Input::Record(r)).collect();
        for strategy in [StrategyKind::Split, StrategyKind::Harmony, StrategyKind::SampleK] {
            let spec = MeansSpec { strategy, ..Default::default() };
            let req = CreateCollection { schema: Some(schema()), epsilon: 2.0, task: TaskSpec::Means(spec) };
            let config = crate::resolve(&req, "t").unwrap();
            let task = crate::build(&config).unwrap();
            let fast = task.simulate(&inputs, 9, 100).unwrap();
            let slow = simulate::sequential(task.as_ref(), &inputs, 9, 100).unwrap();
            let (a, b) = (
                task.estimate(fast.as_ref(), &Query::default()).unwrap(),
                task.estimate(slow.as_ref(), &Query::default()).unwrap(),
            );
            assert_eq!(a, b, "{strategy:?}");
            assert_eq!(fast.count(), 3000);
        }
    }
}
