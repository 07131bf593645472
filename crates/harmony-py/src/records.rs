//! Schemas (the CLI's TOML schema files, or the same structure as JSON) and the seeded
//! multi-attribute simulation of `harmony simulate`: the same run seeds
//! (`strategy::simulation_seed`) and the same collection (`strategy::collect_seeded`), so a
//! seed gives the CLI's numbers.

use crate::errors::{OrPy, input_error, param_error};
use harmony_core::estimate::Estimate;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::{
    AttributeEstimate, KChoice, RecordColumns, RecordMechanism, StrategyKind, StrategyOptions, collect_seeded,
    simulation_seed,
};
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
    attributes: Vec<Attribute>,
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
        let schema = Schema::new(file.attributes.clone()).or_py()?;
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
}

/// One column of records, as the Python side encodes it: raw numbers (numeric attributes) or
/// category codes (categorical ones).
#[derive(FromPyObject)]
pub enum ColumnArg<'py> {
    Codes(PyReadonlyArray1<'py, i64>),
    Numbers(PyReadonlyArray1<'py, f64>),
}

/// The records row-major, validated against the schema (errors name the row and column).
fn encode(schema: &Schema, columns: &[ColumnArg<'_>]) -> PyResult<(Vec<Value>, usize)> {
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
    fn push_run(&mut self, mech: &RecordMechanism, run: usize, est: &[AttributeEstimate], truth: &[Vec<f64>]) {
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
        for ((a, e), t) in schema.attributes().iter().zip(est).zip(truth) {
            match (a, e) {
                (Attribute::Numeric { name, min, max }, AttributeEstimate::Numeric(e)) => {
                    // As the CLI reports it: the [-1, 1] estimate mapped to the attribute's units.
                    let (half, mid) = (0.5 * (max - min), 0.5 * (max + min));
                    row(name, None, half * t[0] + mid, e.affine(half, mid));
                }
                (Attribute::Categorical { name, categories }, AttributeEstimate::Categorical(fe)) => {
                    for (v, label) in categories.iter().enumerate() {
                        row(name, Some(label.clone()), t[v], fe.get(v));
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
        n => KChoice::Fixed(
            n.parse().map_err(|_| param_error("k", format!("{n:?}"), "optimal, paper or a positive integer"))?,
        ),
    })
}

/// `harmony simulate` on encoded columns: for each ε (index ei) and strategy (index si), `runs`
/// runs seeded with `simulation_seed(seed, ei, si, r)`. Returns the long table as a dict of
/// columns. The GIL is released while the runs go.
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
    let (numeric, categorical) = (
        numeric_mechanism.or(file.numeric_mechanism.clone()),
        categorical_mechanism.or(file.categorical_mechanism.clone()),
    );
    let (values, n) = encode(&schema.schema, &columns)?;
    if n == 0 {
        return Err(input_error("columns", "0 rows", "at least one record"));
    }
    let table = py.detach(|| -> harmony_core::Result<Table> {
        let truth = truths(&schema.schema, &values, n);
        let data = RecordColumns::new(&schema.schema, &values)?;
        let mut table = Table::default();
        for (ei, &eps) in epsilons.iter().enumerate() {
            for (si, &kind) in strategies.iter().enumerate() {
                let mut opts = StrategyOptions::default_for(kind, eps);
                opts.k = k;
                if kind != StrategyKind::Harmony {
                    if let Some(m) = &numeric {
                        opts.numeric_mechanism = m.clone();
                    }
                    if let Some(m) = &categorical {
                        opts.categorical_mechanism = m.clone();
                    }
                }
                let mech = RecordMechanism::new(schema.schema.clone(), opts)?;
                for r in 0..runs {
                    let agg = collect_seeded(&mech, &data, simulation_seed(seed, ei, si, r))?;
                    table.push_run(&mech, r, &agg.estimates(), &truth);
                }
            }
        }
        Ok(table)
    });
    table.or_py()?.into_dict(py)
}
