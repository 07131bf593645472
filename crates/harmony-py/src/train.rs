//! Training from Python: the rows as devices of a `train` collection, in order, round by round,
//! through the task a server runs (harmony-tasks, device i with `simulate::device_rng(seed, i)`,
//! as `harmony simulate --task train --seed` does), and the feature map that turns records
//! into the model's inputs for `predict`.

use crate::errors::{OrPy, input_error, param_error};
use crate::records::{ColumnArg, encode, estimate_rows, parse_request};
use harmony_protocol::CollectionConfig;
use harmony_protocol::estimates::Query;
use harmony_protocol::spec::TrainSpec;
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;

/// Trains a model: `request` is the JSON of a `CreateCollection` with a `train` task (schema
/// included; `batch_size` 0 asks for the papers' default and a missing `rounds` for ⌊n/g⌋, as
/// `--users n` does), every row of `columns` a device. Returns the resolved config (JSON: the spec with
/// the server's choices, the features, the step) and the estimate document (JSON: the model).
#[pyfunction]
#[pyo3(signature = (request, columns, seed))]
pub fn simulate_train<'py>(
    py: Python<'py>,
    request: &str,
    columns: Vec<ColumnArg<'py>>,
    seed: u64,
) -> PyResult<(String, String)> {
    let mut req = parse_request(request)?;
    let Some(schema) = req.schema.clone() else {
        return Err(param_error("spec.schema", "missing", "the schema of the records"));
    };
    let (values, n) = encode(&schema, &columns)?;
    if n == 0 {
        return Err(input_error("frame", "0 rows", "at least one record"));
    }
    let epsilon = req.epsilon;
    let found = req.task.kind().name();
    let Ok(spec) = <&mut TrainSpec>::try_from(&mut req.task) else {
        return Err(param_error("spec.task.kind", found, "train"));
    };
    // The defaults of `harmony simulate --task train --users n`: the papers' g, T = ⌊n/g⌋.
    if spec.batch_size == 0 {
        let d = harmony_tasks::train::feature_map(&schema, spec).or_py()?.dimension();
        spec.batch_size = harmony_learn::trainer::default_batch_size(d, Some(epsilon), n) as u64;
    }
    if spec.rounds.is_none() {
        spec.rounds = Some((n as u64 / spec.batch_size.max(1)).max(1));
    }
    let config = harmony_tasks::resolve(&req, "simulation").or_py()?;
    let task = harmony_tasks::build(&config).or_py()?;
    let doc = estimate_rows(py, task.as_ref(), config.epsilon, &values, schema.len(), seed, &Query::default())?;
    Ok((json(&config), json(&doc)))
}

/// The model's inputs of every row of `columns` (encoded against `config`'s schema) as an
/// (n, d) float64 array — the intercept first, then the features in the config's order — and
/// each row's target on the model's scale (±1 for a classifier, [-1, 1] for `linear`).
#[pyfunction]
#[pyo3(signature = (config, columns))]
#[allow(clippy::type_complexity)]
pub fn train_features<'py>(
    py: Python<'py>,
    config: &str,
    columns: Vec<ColumnArg<'py>>,
) -> PyResult<(Bound<'py, numpy::PyArray2<f64>>, Bound<'py, PyArray1<f64>>)> {
    let config = CollectionConfig::from_json(config).map_err(|e| param_error("config", e, "a train config"))?;
    let Ok(spec) = <&TrainSpec>::try_from(&config.task) else {
        return Err(param_error("config.task.kind", config.task.kind().name(), "train"));
    };
    let schema = config.schema().or_py()?;
    let fm = harmony_tasks::train::feature_map(schema, spec).or_py()?;
    let (values, n) = encode(schema, &columns)?;
    let d = fm.dimension();
    let (x, y) = py.detach(|| {
        let (mut x, mut y) = (vec![0.0; n * d], Vec::with_capacity(n));
        for (row, out) in values.chunks_exact(schema.len()).zip(x.chunks_exact_mut(d)) {
            fm.encode_row(row, out);
            y.push(fm.target(row));
        }
        (x, y)
    });
    Ok((PyArray1::from_vec(py, x).reshape([n, d])?, PyArray1::from_vec(py, y)))
}

/// JSON text of a document this module returns.
fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("JSON of a document")
}
