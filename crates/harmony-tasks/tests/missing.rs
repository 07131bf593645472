//! Missing values as data (`missing = "report"`) on real records: UCI Adult with 10% and 40% of
//! its cells blanked at random (seeded), the schema inferred (every column reports its missing
//! cells), then collected by the `means` task under split, harmony and sample-k, and by the
//! `frequency` task. The estimates of the missing shares and of the present values' means and
//! frequencies are checked against the data:
//!
//! * unbiased: the mean standardized error over the runs within z = 4.42 / √runs;
//! * calibrated: MSE/predicted (the squared error over the document's standard error squared),
//!   averaged per (strategy, rate, kind) over the runs and over attributes and categories (so
//!   that fnlwgt, in the millions, weighs as much as a frequency), in [0.85, 1.15].
//!
//! The fast tier runs 12 runs at 10% blanked (unbiasedness only); the heavy tier (`#[ignore]`,
//! release) 200 runs at both rates.

use harmony_core::schema::{Schema, Value};
use harmony_core::strategy::StrategyKind;
use harmony_data::{DataReader, EncodeOptions, InferOptions, encode_rows, infer_batches};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{AttributeResult, Est, Query, TaskEstimate};
use harmony_protocol::spec::{FrequencySpec, MeansSpec, TaskSpec};
use harmony_tasks::Input;

const Z: f64 = 4.42;

/// Adult's CSV with each cell replaced, with probability `p`, by a missing token.
fn blanked_adult(p: f64, seed: u64) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult.csv");
    harmony_data::fixtures::blanked_csv(&std::fs::read_to_string(path).unwrap(), p, seed).into_bytes()
}

/// The inferred schema and the encoded records.
fn population(p: f64, seed: u64) -> (Schema, Vec<Value>) {
    let bytes = blanked_adult(p, seed);
    let mut reader = DataReader::from_bytes("adult-blanked.csv", bytes.clone()).unwrap();
    let inf = infer_batches(&mut reader, &InferOptions::default()).unwrap();
    let schema = inf.file.schema().unwrap();
    assert!(schema.reports_missing());
    let mut reader = DataReader::from_bytes("adult-blanked.csv", bytes).unwrap();
    let enc = encode_rows(&mut reader, &schema, &EncodeOptions::default()).unwrap();
    assert_eq!((enc.n, enc.skipped), (48842, 0), "no row is dropped");
    (schema, enc.values)
}

/// One checked number: (kind, its truth).
struct Cell {
    kind: &'static str,
    truth: f64,
}

/// The truths of a means document's checked numbers, in document order: per attribute, its
/// missing share, then its present mean (numeric, units) or present frequencies.
fn truths(schema: &Schema, values: &[Value]) -> Vec<Cell> {
    let d = schema.len();
    let rows: Vec<&[Value]> = values.chunks(d).collect();
    let n = rows.len() as f64;
    let mut out = Vec::new();
    for (j, a) in schema.attributes().iter().enumerate() {
        if let Some(p) = schema.presence_of(j) {
            let present: Vec<f64> = rows
                .iter()
                .filter(|r| r[p] == Value::Category(0))
                .map(|r| if let Value::Unit(t) = r[j] { t } else { unreachable!() })
                .collect();
            out.push(Cell { kind: "missing share", truth: 1.0 - present.len() as f64 / n });
            let range = a.range().unwrap();
            let mean = present.iter().sum::<f64>() / present.len() as f64;
            out.push(Cell { kind: "present mean", truth: range.from_unit(mean) });
        } else if let Some(m) = schema.missing_category(j) {
            let mut counts = vec![0.0; a.cardinality()];
            for r in &rows {
                let Value::Category(c) = r[j] else { unreachable!() };
                counts[c as usize] += 1.0;
            }
            let missing = counts[m as usize];
            out.push(Cell { kind: "missing share", truth: missing / n });
            for (c, &k) in counts.iter().enumerate().filter(|&(c, _)| c != m as usize) {
                let _ = c;
                out.push(Cell { kind: "present frequency", truth: k / (n - missing) });
            }
        }
    }
    out
}

/// The checked numbers of a means document, in the order of [`truths`].
fn estimates(doc: &TaskEstimate) -> Vec<Est> {
    let TaskEstimate::Means(m) = doc else { panic!("a means document") };
    let mut out = Vec::new();
    for a in &m.attributes {
        match a {
            AttributeResult::Numeric { mean, missing: Some(share), .. } => out.extend([*share, *mean]),
            AttributeResult::Categorical { missing: Some(share), present: Some(p), .. } => {
                out.push(*share);
                out.extend(p.iter().map(|c| c.frequency));
            }
            _ => {}
        }
    }
    out
}

/// Per cell: Σ z and (Σ squared error, Σ predicted variance); per kind: (Σ z², count).
#[derive(Default)]
struct Tally {
    z: Vec<f64>,
    cell_sq: Vec<(f64, f64)>,
    kinds: std::collections::BTreeMap<&'static str, (f64, f64)>,
}

impl Tally {
    fn add(&mut self, cells: &[Cell], est: &[Est]) {
        assert_eq!(cells.len(), est.len());
        self.z.resize(cells.len(), 0.0);
        self.cell_sq.resize(cells.len(), (0.0, 0.0));
        for (i, (c, e)) in cells.iter().zip(est).enumerate() {
            let (x, se) = (e.estimate.unwrap(), e.std_error.unwrap());
            self.z[i] += (x - c.truth) / se;
            // Pooled on the standardized scale: each cell weighs the same whatever its units.
            let k = self.kinds.entry(c.kind).or_default();
            k.0 += ((x - c.truth) / se).powi(2);
            k.1 += 1.0;
            self.cell_sq[i].0 += (x - c.truth).powi(2);
            self.cell_sq[i].1 += se * se;
        }
    }
    fn check(&self, what: &str, cells: &[Cell], runs: usize, calibration: bool) {
        for (i, z) in self.z.iter().enumerate() {
            let mean = z / runs as f64;
            assert!(mean.abs() < Z / (runs as f64).sqrt(), "{what}: cell {i} ({}): mean z {mean}", cells[i].kind);
        }
        if std::env::var("MISSING_CELLS").is_ok() {
            for (i, (sq, pred)) in self.cell_sq.iter().enumerate() {
                println!(
                    "  cell {i} {}: MSE/predicted {:.3}, mean z {:.3}",
                    cells[i].kind,
                    sq / pred,
                    self.z[i] / runs as f64
                );
            }
        }
        for (kind, (sq, pred)) in &self.kinds {
            println!("{what}: {kind}: MSE/predicted = {:.3}", sq / pred);
            if calibration {
                assert!((0.85..=1.15).contains(&(sq / pred)), "{what}: {kind}: MSE/predicted = {}", sq / pred);
            }
        }
    }
}

fn means_task(schema: &Schema, strategy: StrategyKind, epsilon: f64) -> Box<dyn harmony_tasks::Task> {
    let spec = MeansSpec { strategy, ..Default::default() };
    let req = CreateCollection { schema: Some(schema.clone()), epsilon, task: TaskSpec::Means(spec) };
    harmony_tasks::build(&harmony_tasks::resolve(&req, "m").unwrap()).unwrap()
}

fn check_means(p: f64, seed: u64, runs: usize, calibration: bool) {
    let (schema, values) = population(p, seed);
    let cells = truths(&schema, &values);
    let inputs: Vec<Input> = values.chunks(schema.len()).map(Input::Record).collect();
    // ε = 8 by default (split spreads it over 22 attributes: 0.36 each); MISSING_EPSILON for others.
    let epsilon = std::env::var("MISSING_EPSILON").ok().and_then(|e| e.parse().ok()).unwrap_or(8.0);
    for strategy in [StrategyKind::Split, StrategyKind::Harmony, StrategyKind::SampleK] {
        let task = means_task(&schema, strategy, epsilon);
        let mut tally = Tally::default();
        for r in 0..runs {
            let agg = task.simulate(&inputs, 1000 + r as u64, 0).unwrap();
            tally.add(&cells, &estimates(&task.estimate(agg.as_ref(), &Query::default()).unwrap()));
        }
        tally.check(&format!("{} blanked {p}, ε = {epsilon}", strategy.name()), &cells, runs, calibration);
    }
}

/// The frequency task on a categorical attribute with missing values (GRR and OUE).
fn check_frequency(p: f64, seed: u64, runs: usize, calibration: bool) {
    let (schema, values) = population(p, seed);
    let j = schema.position("education").unwrap();
    let m = schema.missing_category(j).unwrap() as usize;
    let d = schema.len();
    let mut counts = vec![0.0; schema.attributes()[j].cardinality()];
    for r in values.chunks(d) {
        let Value::Category(c) = r[j] else { unreachable!() };
        counts[c as usize] += 1.0;
    }
    let n: f64 = counts.iter().sum();
    let mut cells = vec![Cell { kind: "missing share", truth: counts[m] / n }];
    cells.extend(
        (0..counts.len())
            .filter(|&c| c != m)
            .map(|c| Cell { kind: "present frequency", truth: counts[c] / (n - counts[m]) }),
    );
    let inputs: Vec<Input> = values.chunks(d).map(Input::Record).collect();
    for mechanism in [harmony_core::kinds::OracleKind::Grr, harmony_core::kinds::OracleKind::Oue] {
        let spec = FrequencySpec { attribute: "education".into(), mechanism: Some(mechanism) };
        let req = CreateCollection { schema: Some(schema.clone()), epsilon: 2.0, task: TaskSpec::Frequency(spec) };
        let task = harmony_tasks::build(&harmony_tasks::resolve(&req, "f").unwrap()).unwrap();
        let mut tally = Tally::default();
        for r in 0..runs {
            let agg = task.simulate(&inputs, 5000 + r as u64, 0).unwrap();
            let TaskEstimate::Frequency(f) = task.estimate(agg.as_ref(), &Query::default()).unwrap() else {
                panic!("a frequency document")
            };
            let mut est = vec![f.missing.unwrap()];
            est.extend(f.present.unwrap().iter().map(|c| c.frequency));
            tally.add(&cells, &est);
        }
        tally.check(&format!("frequency {mechanism:?} blanked {p}"), &cells, runs, calibration);
    }
}

#[test]
fn missing_shares_and_present_values_are_unbiased() {
    check_means(0.10, 18, 12, false);
    check_frequency(0.10, 18, 12, false);
}

#[test]
fn olh_is_refused_for_an_attribute_reporting_missing_values() {
    let (schema, _) = population(0.10, 18);
    let spec = FrequencySpec { attribute: "education".into(), mechanism: Some(harmony_core::kinds::OracleKind::Olh) };
    let req = CreateCollection { schema: Some(schema.clone()), epsilon: 2.0, task: TaskSpec::Frequency(spec) };
    let e = harmony_tasks::resolve(&req, "f").unwrap_err().to_string();
    assert!(e.contains("olh for education") && e.contains("grr"), "{e}");
    // Without a mechanism the default is OUE, not OLH, at this domain size and ε.
    let spec = FrequencySpec { attribute: "education".into(), mechanism: None };
    let req = CreateCollection { schema: Some(schema), epsilon: 0.5, task: TaskSpec::Frequency(spec) };
    let TaskSpec::Frequency(f) = harmony_tasks::resolve(&req, "f").unwrap().task else { unreachable!() };
    assert_eq!(f.mechanism, Some(harmony_core::kinds::OracleKind::Oue));
}

/// Range and quantiles over a numeric attribute that reports missing values are refused (its
/// missing values sit at the midpoint, which a bin would count), naming the attribute and the
/// way out.
#[test]
fn range_refuses_a_numeric_attribute_reporting_missing_values() {
    let (schema, _) = population(0.10, 18);
    let range = harmony_protocol::spec::RangeSpec {
        attribute: "age".into(),
        bins: Some(16),
        method: harmony_protocol::spec::RangeMethod::Flat,
        branching: None,
    };
    let req = CreateCollection { schema: Some(schema), epsilon: 2.0, task: TaskSpec::Range(range) };
    let e = harmony_tasks::resolve(&req, "r").unwrap_err().to_string();
    assert!(e.contains("age") && e.contains("missing = \"report\"") && e.contains("impute"), "{e}");
}

/// Marginals bin such an attribute with one more cell, "(missing)": the 2-way marginal of age
/// (8 bins) and sex has 9 × 3 cells, and its unbiased cells (direct method) match the data's
/// shares, missing ones included.
#[test]
fn marginals_count_missing_values_in_their_own_cell() {
    let (schema, values) = population(0.10, 18);
    let spec: harmony_protocol::spec::MarginalsSpec = serde_json::from_value(
        serde_json::json!({"attributes": ["age", "sex"], "bins": {"age": 8}, "ways": [2], "method": "direct"}),
    )
    .unwrap();
    let req = CreateCollection { schema: Some(schema.clone()), epsilon: 4.0, task: TaskSpec::Marginals(spec) };
    let task = harmony_tasks::build(&harmony_tasks::resolve(&req, "m").unwrap()).unwrap();
    let d = schema.len();
    let (age, presence, sex) =
        (schema.position("age").unwrap(), schema.position("age:missing").unwrap(), schema.position("sex").unwrap());
    let mut truth = vec![0.0; 27];
    for r in values.chunks(d) {
        let a = match (r[presence], r[age]) {
            (Value::Category(1), _) => 8,
            (_, Value::Unit(t)) => (((t + 1.0) / 2.0 * 8.0).floor() as usize).min(7),
            _ => unreachable!(),
        };
        let Value::Category(s) = r[sex] else { unreachable!() };
        truth[a * 3 + s as usize] += 1.0 / 48842.0;
    }
    let inputs: Vec<Input> = values.chunks(d).map(Input::Record).collect();
    let agg = harmony_tasks::simulate::run(task.as_ref(), &inputs, 7).unwrap();
    let TaskEstimate::Marginals(m) = task.estimate(agg.as_ref(), &Query::default()).unwrap() else { unreachable!() };
    let marginal = &m.marginals[0];
    assert_eq!(marginal.labels[0].last().map(String::as_str), Some("(missing)"));
    assert_eq!(marginal.cells.len(), 27);
    for (c, (e, t)) in marginal.cells.iter().zip(&truth).enumerate() {
        let (x, se) = (e.estimate.unwrap(), e.std_error.unwrap());
        assert!((x - t).abs() < Z * se, "cell {c}: {x} ± {se}, truth {t}");
    }
}

#[test]
#[ignore = "heavy statistical tier: run in release with --ignored"]
fn heavy_missing_values_are_unbiased_and_calibrated() {
    for (p, seed) in [(0.10, 18), (0.40, 19)] {
        let runs = std::env::var("MISSING_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(200);
        check_means(p, seed, runs, true);
        check_frequency(p, seed, 200, true);
    }
}
