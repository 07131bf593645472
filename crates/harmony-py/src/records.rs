//! Schemas (the CLI's TOML schema files, or the same structure as JSON) and the seeded
//! simulations of `harmony simulate`, through the task registry (harmony-tasks): every row is a
//! simulated device, device i randomizing with `simulate::device_rng(seed, i)` and run r seeded
//! `simulate::run_seed(seed, r)`, so a seed gives the CLI's numbers bit for bit.

use crate::errors::{OrPy, input_error, param_error};
use harmony_core::estimate::Estimate;
use harmony_core::kinds::{OracleKind, RecordNumeric};
use harmony_core::missing::{MissingEstimate, Present};
use harmony_core::schema::{Attribute, Declared, Schema, Value};
use harmony_core::strategy::{AttributeEstimate, KChoice, RecordAggregator, RecordMechanism, StrategyKind};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{EstimateDocument, Query};
use harmony_protocol::spec::MeansSpec;
use harmony_tasks::means::MeansTask;
use harmony_tasks::simulate::{run, run_seed};
use harmony_tasks::{Input, Typed};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A schema file: the format of the CLI's `--schema` (`examples/adult.toml`), field for field.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    epsilon: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    strategies: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    numeric_mechanism: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    categorical_mechanism: Option<String>,
    #[serde(default)]
    invalid: Invalid,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    bins: BTreeMap<String, usize>,
    attributes: Vec<Declared>,
}

/// What to do with a value outside the schema (applied by the Python side when encoding).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Invalid {
    #[default]
    Error,
    Skip,
    Clamp,
}

/// A validated schema with the collection defaults of its file.
#[pyclass(frozen, module = "harmony_ldp._native")]
pub struct NativeSchema {
    file: SchemaFile,
    schema: Schema,
}

impl NativeSchema {
    fn from_file(file: SchemaFile) -> PyResult<Self> {
        let schema = Schema::with_missing(file.attributes.clone()).or_py()?;
        Ok(NativeSchema { file, schema })
    }
}

#[pymethods]
impl NativeSchema {
    /// Parses a TOML schema file's text.
    #[staticmethod]
    fn from_toml(text: &str) -> PyResult<Self> {
        let file: SchemaFile = toml::from_str(text)
            .map_err(|e| param_error("schema", format!("TOML that does not parse ({e})"), "a schema file"))?;
        Self::from_file(file)
    }
    /// Parses the same structure as JSON.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        let file: SchemaFile = serde_json::from_str(text).map_err(|e| {
            param_error("schema", format!("a structure that does not parse ({e})"), "a schema file's fields")
        })?;
        Self::from_file(file)
    }
    /// The schema file as JSON.
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.file).map_err(|e| param_error("schema", e, "a serializable schema"))
    }
    /// The schema file as TOML.
    fn to_toml(&self) -> PyResult<String> {
        toml::to_string(&self.file).map_err(|e| param_error("schema", e, "a serializable schema"))
    }
    /// `harmony plan`'s comparison at `epsilon`: per combination (strategy, numeric mechanism,
    /// categorical oracle, k) the worst-case variance per user of every attribute.
    #[pyo3(signature = (epsilon, categorical_mechanism=None))]
    fn plan(&self, epsilon: f64, categorical_mechanism: Option<&str>) -> PyResult<Vec<PlanRow>> {
        let extra = match categorical_mechanism {
            Some(c) => Some(
                c.parse::<OracleKind>()
                    .map_err(|_| param_error("categorical_mechanism", format!("{c:?}"), "a frequency oracle's name"))?,
            ),
            None => None,
        };
        let choices = harmony_core::strategy::plan::compare(&self.schema, epsilon, extra).or_py()?;
        Ok(choices
            .into_iter()
            .map(|c| (c.strategy.name(), c.numeric_mechanism, c.categorical_mechanism, c.k, c.variances))
            .collect())
    }
}

/// One choice of `NativeSchema::plan`: strategy, numeric mechanism, categorical oracle, k and
/// the worst-case variance per user of each attribute.
type PlanRow = (&'static str, &'static str, &'static str, usize, Vec<f64>);

/// One column of records, as the Python side encodes it: raw numbers (numeric attributes) or
/// category codes (categorical ones).
#[derive(FromPyObject)]
pub enum ColumnArg<'py> {
    Codes(PyReadonlyArray1<'py, i64>),
    Numbers(PyReadonlyArray1<'py, f64>),
}

/// The records row-major, validated against the schema (errors name the row and column).
pub(crate) fn encode(schema: &Schema, columns: &[ColumnArg<'_>]) -> PyResult<(Vec<Value>, usize)> {
    let d = schema.len();
    if columns.len() != d {
        return Err(input_error("columns", format!("{} columns", columns.len()), &format!("{d} (one per attribute)")));
    }
    let slices: Vec<Result<&[i64], &[f64]>> = columns
        .iter()
        .map(|c| match c {
            ColumnArg::Codes(a) => a.as_slice().map(Ok),
            ColumnArg::Numbers(a) => a.as_slice().map(Err),
        })
        .collect::<Result<_, _>>()
        .map_err(|_| input_error("columns", "a non-contiguous array", "contiguous arrays"))?;
    let n = slices.first().map(|s| s.map_or_else(|x| x.len(), |x| x.len())).unwrap_or(0);
    let mut values = vec![Value::Unit(0.0); n * d];
    for (j, (a, s)) in schema.attributes().iter().zip(&slices).enumerate() {
        let len = s.map_or_else(|x| x.len(), |x| x.len());
        if len != n {
            return Err(input_error(&format!("column {:?}", a.name()), format!("{len} rows"), &format!("{n} rows")));
        }
        match (a, s) {
            (Attribute::Numeric { name, min, max }, Err(xs)) => {
                let range = harmony_core::params::Range { min: *min, max: *max };
                for (i, &x) in xs.iter().enumerate() {
                    values[i * d + j] = Value::Unit(
                        range
                            .to_unit(name, x)
                            .map_err(|_| cell_error(i, name, x, &format!("a number in [{min}, {max}]")))?,
                    );
                }
            }
            (Attribute::Categorical { name, categories }, Ok(codes)) => {
                let k = categories.len() as i64;
                for (i, &c) in codes.iter().enumerate() {
                    if !(0..k).contains(&c) {
                        return Err(cell_error(i, name, c, &format!("a category code in [0, {k})")));
                    }
                    values[i * d + j] = Value::Category(c as u32);
                }
            }
            _ => {
                let want = if a.is_numeric() { "float64 numbers" } else { "int64 category codes" };
                return Err(input_error(&format!("column {:?}", a.name()), "an array of the other kind", want));
            }
        }
    }
    Ok((values, n))
}

fn cell_error(row: usize, column: &str, value: impl std::fmt::Display, expected: &str) -> PyErr {
    input_error(&format!("row {row}, column {column:?}"), value, expected)
}

/// The truth per attribute: the mean (on [-1, 1]) or the frequencies.
fn truths(schema: &Schema, values: &[Value], n: usize) -> Vec<Vec<f64>> {
    let d = schema.len();
    (0..d)
        .map(|j| {
            let card = schema.attributes()[j].cardinality();
            let mut acc = vec![0.0; if schema.attributes()[j].is_numeric() { 1 } else { card }];
            for row in values.chunks(d) {
                match row[j] {
                    Value::Unit(t) => acc[0] += t,
                    Value::Category(c) => acc[c as usize] += 1.0,
                }
            }
            acc.iter().map(|x| x / n as f64).collect()
        })
        .collect()
}

/// The long table of `simulate`, column by column.
#[derive(Default)]
struct Table {
    epsilon: Vec<f64>,
    strategy: Vec<&'static str>,
    k: Vec<usize>,
    numeric_mechanism: Vec<&'static str>,
    categorical_mechanism: Vec<&'static str>,
    run: Vec<usize>,
    attribute: Vec<String>,
    category: Vec<Option<String>>,
    truth: Vec<f64>,
    estimate: Vec<f64>,
    std_error: Vec<f64>,
    ci_low: Vec<f64>,
    ci_high: Vec<f64>,
}

impl Table {
    fn push_run(
        &mut self,
        mech: &RecordMechanism,
        run: usize,
        est: &[AttributeEstimate],
        missing: &[Option<MissingEstimate>],
        truth: &[Vec<f64>],
    ) {
        let schema = mech.schema();
        let (num, cat) = mech.mechanism_names();
        let mut row = |attr: &str, category: Option<String>, truth: f64, e: Estimate| {
            self.epsilon.push(mech.options().epsilon);
            self.strategy.push(mech.options().kind.name());
            self.k.push(mech.k());
            self.numeric_mechanism.push(num);
            self.categorical_mechanism.push(cat);
            self.run.push(run);
            self.attribute.push(attr.to_string());
            self.category.push(category);
            self.truth.push(truth);
            self.estimate.push(e.value);
            self.std_error.push(e.std_error);
            self.ci_low.push(e.ci95[0]);
            self.ci_high.push(e.ci95[1]);
        };
        for (j, ((a, e), t)) in schema.attributes().iter().zip(est).zip(truth).enumerate() {
            match (a, e) {
                (Attribute::Numeric { name, min, max }, AttributeEstimate::Numeric(e)) => {
                    // As the CLI reports it: the [-1, 1] estimate mapped to the attribute's units.
                    let (half, mid) = (0.5 * (max - min), 0.5 * (max + min));
                    row(name, None, half * t[0] + mid, e.affine(half, mid));
                    // Reporting missing values: the present values' mean (missing ones are 0 on
                    // [-1, 1], so its truth is the mean over all over the share present).
                    if let (Some(Some(me)), Some(p)) = (missing.get(j), schema.presence_of(j)) {
                        let Present::Mean(pm) = &me.present else { continue };
                        let kept = 1.0 - truth[p][1];
                        row(name, Some("(present mean)".into()), half * t[0] / kept + mid, pm.affine(half, mid));
                    }
                }
                (Attribute::Categorical { name, categories }, AttributeEstimate::Categorical(fe)) => {
                    for (v, label) in categories.iter().enumerate() {
                        row(name, Some(label.clone()), t[v], fe.get(v));
                    }
                    if let Some(Some(MissingEstimate { present: Present::Frequencies(pf), .. })) = missing.get(j) {
                        let kept = 1.0 - t.last().copied().unwrap_or(0.0);
                        for (v, label) in categories.iter().take(pf.len()).enumerate() {
                            row(name, Some(format!("{label} | present")), t[v] / kept, pf.get(v));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    fn into_dict(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("epsilon", PyArray1::from_vec(py, self.epsilon))?;
        d.set_item("strategy", self.strategy)?;
        d.set_item("k", self.k)?;
        d.set_item("numeric_mechanism", self.numeric_mechanism)?;
        d.set_item("categorical_mechanism", self.categorical_mechanism)?;
        d.set_item("run", self.run)?;
        d.set_item("attribute", self.attribute)?;
        d.set_item("category", self.category)?;
        d.set_item("truth", PyArray1::from_vec(py, self.truth))?;
        d.set_item("estimate", PyArray1::from_vec(py, self.estimate))?;
        d.set_item("std_error", PyArray1::from_vec(py, self.std_error))?;
        d.set_item("ci_low", PyArray1::from_vec(py, self.ci_low))?;
        d.set_item("ci_high", PyArray1::from_vec(py, self.ci_high))?;
        Ok(d)
    }
}

fn parse_k(k: &str) -> PyResult<KChoice> {
    Ok(match k {
        "optimal" => KChoice::Optimal,
        "paper" => KChoice::Paper,
        n => match n.parse::<usize>() {
            Ok(k) if k >= 1 => KChoice::Fixed(k),
            _ => return Err(param_error("k", format!("{n:?}"), "optimal, paper or a positive integer")),
        },
    })
}

/// The means spec of one strategy, as `harmony simulate` builds it (`specs::means`): the
/// mechanisms given (or the schema file's) for the strategies that take them.
fn means_spec(kind: StrategyKind, num: &Option<String>, cat: &Option<String>, k: KChoice) -> PyResult<MeansSpec> {
    let fixed = kind == StrategyKind::Harmony;
    let num = num.as_deref().filter(|_| !fixed).map(|n| n.parse::<RecordNumeric>()).transpose().or_py()?;
    let cat = cat.as_deref().filter(|_| !fixed).map(|n| n.parse::<OracleKind>()).transpose().or_py()?;
    Ok(MeansSpec { strategy: kind, numeric_mechanism: num, categorical_mechanism: cat, k: Some(k) })
}

/// `harmony simulate` (the means task) on encoded columns: for each ε and strategy, the means
/// task the registry resolves, and `runs` runs of simulated devices seeded `run_seed(seed, r)`.
/// Returns the long table as a dict of columns. The GIL is released while the runs go.
#[pyfunction]
#[pyo3(signature = (schema, columns, epsilons, strategies, numeric_mechanism, categorical_mechanism, k, runs, seed))]
#[allow(clippy::too_many_arguments)]
pub fn simulate<'py>(
    py: Python<'py>,
    schema: &NativeSchema,
    columns: Vec<ColumnArg<'py>>,
    epsilons: Option<Vec<f64>>,
    strategies: Option<Vec<String>>,
    numeric_mechanism: Option<String>,
    categorical_mechanism: Option<String>,
    k: &str,
    runs: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    if runs == 0 {
        return Err(param_error("runs", 0, "an integer >= 1"));
    }
    let file = &schema.file;
    let epsilons = epsilons.or(file.epsilon.clone()).unwrap_or(vec![0.5, 1.0, 2.0, 4.0]);
    let strategies: Vec<StrategyKind> = strategies
        .or(file.strategies.clone())
        .unwrap_or(StrategyKind::NAMES.iter().map(|s| s.to_string()).collect())
        .iter()
        .map(|s| StrategyKind::parse(s))
        .collect::<harmony_core::Result<_>>()
        .or_py()?;
    let k = parse_k(k)?;
    let (num, cat) = (
        numeric_mechanism.or(file.numeric_mechanism.clone()),
        categorical_mechanism.or(file.categorical_mechanism.clone()),
    );
    let mut tasks = Vec::new();
    for &eps in &epsilons {
        for &kind in &strategies {
            let spec = means_spec(kind, &num, &cat, k)?;
            let req = CreateCollection { schema: Some(schema.schema.clone()), epsilon: eps, task: spec.into() };
            tasks.push(harmony_tasks::resolve(&req, "simulation").and_then(MeansTask::new).or_py()?);
        }
    }
    let (values, n) = encode(&schema.schema, &columns)?;
    if n == 0 {
        return Err(input_error("columns", "0 rows", "at least one record"));
    }
    let table = py.detach(|| -> harmony_core::Result<Table> {
        let truth = truths(&schema.schema, &values, n);
        let inputs: Vec<Input> = values.chunks_exact(schema.schema.len()).map(Input::Record).collect();
        let mut table = Table::default();
        for task in &tasks {
            for r in 0..runs {
                let agg = run(task, &inputs, run_seed(seed, r as u64))?;
                let typed = Typed::<RecordAggregator>::of(agg.as_ref())?;
                let est = typed.estimates();
                let missing = typed.missing_estimates(&est);
                table.push_run(task.mechanism(), r, &est, &missing, &truth);
            }
        }
        Ok(table)
    });
    table.or_py()?.into_dict(py)
}

/// A request from its JSON; the error names the path of the field that does not fit
/// (`task.bins`; `task` for an unknown kind or option of a task), as the server's 400 does.
pub(crate) fn parse_request(text: &str) -> PyResult<CreateCollection> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path.is_empty() || path == "." { "spec".to_string() } else { path };
        param_error(&field, format!("a value that does not parse ({})", e.into_inner()), "a CreateCollection request")
    })
}

/// Any task from its request (the JSON of `harmony_protocol::CreateCollection`, schema
/// included) on encoded columns: the registry resolves and builds the task, every row is a
/// simulated device (device i with `device_rng(seed, i)`), and the estimate document comes
/// back as JSON (with the query's ranges/quantiles, JSON of `harmony_protocol::Query`). Tasks
/// whose devices hold a record only (not `train`, whose devices report in rounds against a
/// model, nor `heavy-hitters`, whose devices hold sets of strings).
#[pyfunction]
#[pyo3(signature = (request, columns, seed, query))]
pub fn simulate_task<'py>(
    py: Python<'py>,
    request: &str,
    columns: Vec<ColumnArg<'py>>,
    seed: u64,
    query: &str,
) -> PyResult<String> {
    let req: CreateCollection = parse_request(request)?;
    let query: Query = serde_json::from_str(query)
        .map_err(|e| param_error("query", format!("a query that does not parse ({e})"), "ranges and quantiles"))?;
    let kind = req.task.kind();
    if kind.has_rounds() {
        return Err(param_error("spec.task.kind", kind.name(), "a task whose devices report once (not train)"));
    }
    let config = harmony_tasks::resolve(&req, "simulation").or_py()?;
    let task = harmony_tasks::build(&config).or_py()?;
    let schema = config.schema().or_py()?;
    let (values, n) = encode(schema, &columns)?;
    if n == 0 {
        return Err(input_error("columns", "0 rows", "at least one record"));
    }
    let doc = estimate_rows(py, task.as_ref(), config.epsilon, &values, schema.len(), seed, &query)?;
    serde_json::to_string(&doc).map_err(|e| param_error("estimates", e, "a serializable document"))
}

/// Every row of `values` (`width` per record) a simulated device of `task` (device i with
/// `device_rng(seed, i)`), aggregated and estimated, off the GIL: the estimate document.
pub(crate) fn estimate_rows(
    py: Python<'_>,
    task: &dyn harmony_tasks::Task,
    epsilon: f64,
    values: &[Value],
    width: usize,
    seed: u64,
    query: &Query,
) -> PyResult<EstimateDocument> {
    let doc = py.detach(|| -> harmony_core::Result<EstimateDocument> {
        let inputs: Vec<Input> = values.chunks_exact(width).map(Input::Record).collect();
        let agg = run(task, &inputs, seed)?;
        let result = task.estimate(agg.as_ref(), query)?;
        Ok(EstimateDocument { collection: "simulation".into(), reports: agg.count(), epsilon, result })
    });
    doc.or_py()
}

/// Most items one simulated device may hold.
const MAX_ITEMS_PER_DEVICE: usize = 10_000;

/// A `heavy-hitters` task (the JSON of `CreateCollection`, no schema needed) on the devices'
/// item sets: device i holds `items[i]` (one string or several) and randomizes it with
/// `device_rng(seed, i)`, as in `harmony simulate --task heavy-hitters --seed`; the estimate
/// document comes back as JSON.
#[pyfunction]
#[pyo3(signature = (request, items, seed))]
pub fn simulate_items(py: Python<'_>, request: &str, items: Vec<Vec<String>>, seed: u64) -> PyResult<String> {
    let req: CreateCollection = parse_request(request)?;
    let kind = req.task.kind();
    if !kind.takes_items() {
        return Err(param_error(
            "spec.task.kind",
            kind.name(),
            "heavy-hitters (the task whose devices hold item sets)",
        ));
    }
    if items.is_empty() {
        return Err(input_error("items", "0 devices", "at least one device's items"));
    }
    if let Some(i) = items.iter().position(|s| s.is_empty() || s.len() > MAX_ITEMS_PER_DEVICE) {
        let what = format!("a set of {} items", items[i].len());
        return Err(input_error(&format!("items[{i}]"), what, &format!("1..={MAX_ITEMS_PER_DEVICE} items")));
    }
    let config = harmony_tasks::resolve(&req, "simulation").or_py()?;
    let task = harmony_tasks::build(&config).or_py()?;
    let doc = py.detach(|| -> harmony_core::Result<EstimateDocument> {
        let inputs: Vec<Input> = items.iter().map(|s| Input::Items(s)).collect();
        let agg = run(task.as_ref(), &inputs, seed)?;
        let result = task.estimate(agg.as_ref(), &Query::default())?;
        Ok(EstimateDocument { collection: "simulation".into(), reports: agg.count(), epsilon: config.epsilon, result })
    });
    serde_json::to_string(&doc.or_py()?).map_err(|e| param_error("estimates", e, "a serializable document"))
}
