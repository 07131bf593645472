//! A collection's aggregator from Python: what an engine's workers run on their partitions
//! (`harmony_ldp.spark`). Built from the collection's config (`spec.json`), it adds report bodies
//! (an Arrow binary column's offsets and bytes, without a copy per report), saves its state
//! (`harmony_tasks::state`: the counters, framed with the config's fingerprint), merges saved
//! states, and estimates the document `harmony query` prints. Reports exported as their fields
//! (OLH's, one-attribute records') come as two integer columns.

use crate::errors::{OrPy, param_error, report_error};
use harmony_protocol::CollectionConfig;
use harmony_protocol::estimates::Query;
use harmony_tasks::{ReportColumns, Task, TaskAggregator, state};
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The config a server publishes for a collection request (`CreateCollection` JSON) under `id`:
/// every choice written out, as `harmony_tasks::resolve` makes it.
#[pyfunction]
pub fn resolve_config(request: &str, id: &str) -> PyResult<String> {
    let req = crate::records::parse_request(request)?;
    let config = harmony_tasks::resolve(&req, id).or_py()?;
    serde_json::to_string(&config).map_err(|e| param_error("config", e, "a config"))
}

/// One accumulator of a collection's reports.
#[pyclass(module = "harmony_ldp._native")]
pub struct NativeAggregator {
    task: Box<dyn Task>,
    agg: Box<dyn TaskAggregator>,
}

impl NativeAggregator {
    /// Every row validated as the server does (each encoded), then all added as columns.
    fn add_columns(&mut self, py: Python<'_>, columns: ReportColumns<'_>) -> PyResult<u64> {
        let (task, agg) = (&self.task, &mut self.agg);
        let invalid = |i: usize, e| report_error(&format!("reports[{i}]"), e, "a report of this collection");
        py.detach(|| {
            let mut buf = Vec::with_capacity(16);
            for i in 0..columns.rows().map_err(|(i, e)| invalid(i, e))? {
                columns.encode_row(i, &mut buf);
                task.validate(&buf).map_err(|e| invalid(i, e))?;
            }
            task.add_checked_columns(agg.as_mut(), columns).map_err(|(i, e)| invalid(i, e))
        })?;
        Ok(columns.len() as u64)
    }
}

#[pymethods]
impl NativeAggregator {
    /// `spec`: the collection's config (JSON).
    #[new]
    fn new(spec: &str) -> PyResult<Self> {
        let config = CollectionConfig::from_json(spec).map_err(|e| param_error("spec", e, "a collection config"))?;
        let task = harmony_tasks::build(&config).or_py()?;
        if !task.mergeable() {
            return Err(param_error(
                "spec",
                format!("task \"{}\"", config.task.kind().name()),
                "a task whose reports aggregate in any order (not model or query rounds)",
            ));
        }
        let agg = task.aggregator();
        Ok(NativeAggregator { task, agg })
    }

    /// Adds reports `data[offsets[i]:offsets[i+1]]` (an Arrow binary column's buffers), each
    /// validated as the server does; all or nothing. The error names the row. The GIL is released.
    fn add_packed(
        &mut self,
        py: Python<'_>,
        offsets: PyReadonlyArray1<'_, i64>,
        data: PyReadonlyArray1<'_, u8>,
    ) -> PyResult<u64> {
        let (offsets, data) = (offsets.as_slice()?, data.as_slice()?);
        let (task, agg) = (&self.task, &mut self.agg);
        let body = |i: usize| {
            let (a, b) = (offsets[i], offsets[i + 1]);
            usize::try_from(a).ok().zip(usize::try_from(b).ok()).and_then(|(a, b)| data.get(a..b)).ok_or_else(|| {
                report_error(&format!("reports[{i}]"), format!("bytes {a}..{b}"), "offsets within the data")
            })
        };
        let invalid = |i: usize, e| report_error(&format!("reports[{i}]"), e, "a report of this collection");
        let n = offsets.len().saturating_sub(1);
        // Every report validated before any is added (all or nothing, without copying the
        // accumulator: a heavy-hitter accumulator holds its reports).
        py.detach(|| {
            (0..n).try_for_each(|i| task.validate(body(i)?).map_err(|e| invalid(i, e)))?;
            (0..n).try_for_each(|i| agg.add(body(i)?).map_err(|e| invalid(i, e)))
        })?;
        Ok(n as u64)
    }

    /// Adds OLH reports given as their fields (an exported part's `struct<seed: int64, y: int32>`
    /// body: row i is the seed `seeds[i]` and hash value `ys[i]`, each the bits of the report's
    /// unsigned field), each validated as the server does; all or nothing. The GIL is released.
    fn add_olh_fields(
        &mut self,
        py: Python<'_>,
        seeds: PyReadonlyArray1<'_, i64>,
        ys: PyReadonlyArray1<'_, i32>,
    ) -> PyResult<u64> {
        self.add_columns(py, ReportColumns::Olh { seeds: seeds.as_slice()?, ys: ys.as_slice()? })
    }

    /// Adds one-attribute fixed-point records given as their fields (an exported part's
    /// `struct<attribute: int32, units: int64>` body), as `add_olh_fields` adds OLH's.
    fn add_record_fields(
        &mut self,
        py: Python<'_>,
        attributes: PyReadonlyArray1<'_, i32>,
        units: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<u64> {
        self.add_columns(
            py,
            ReportColumns::FixedRecords { attributes: attributes.as_slice()?, units: units.as_slice()? },
        )
    }

    /// The saved state (bytes) to ship to the merging side.
    fn save<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = state::save(self.task.as_ref(), self.agg.as_ref()).or_py()?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Merges a saved state of the same collection.
    fn merge(&mut self, saved: &[u8]) -> PyResult<()> {
        state::merge(self.task.as_ref(), self.agg.as_mut(), saved).or_py()
    }

    /// Reports added (here and through merged states).
    #[getter]
    fn count(&self) -> u64 {
        self.agg.count()
    }

    /// The estimate document (JSON); `query` is `harmony query`'s URL query
    /// (`ranges=LO:HI,…&quantiles=Q,…`, empty for the defaults).
    fn estimate(&self, query: &str) -> PyResult<String> {
        let query = Query::parse(query).map_err(|(field, msg)| param_error(&field, query, &msg))?;
        let doc = harmony_tasks::document(self.task.as_ref(), self.agg.as_ref(), &query).or_py()?;
        serde_json::to_string(&doc).map_err(|e| param_error("estimate", e, "a document"))
    }
}
