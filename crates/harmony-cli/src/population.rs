//! The devices of a simulation or a submission: one per CSV row (its record encoded by the
//! schema) or one per set of items, as [`harmony_tasks::Input`]s.

use harmony_core::schema::{Schema, Value};
use harmony_tasks::Input;

/// One input per device.
#[derive(Debug, Clone)]
pub enum Population {
    /// Records encoded by a schema: n rows of d values.
    Records {
        /// The values, row by row.
        values: Vec<Value>,
        /// Values per row.
        d: usize,
    },
    /// Item sets (heavy hitters; built by its simulate and submit paths).
    #[allow(dead_code)]
    Items(Vec<Vec<String>>),
}

impl Population {
    /// Records of `schema` (values of `Schema::encode`, row-major).
    pub fn records(schema: &Schema, values: Vec<Value>) -> Self {
        Population::Records { values, d: schema.len() }
    }
    /// Number of devices.
    pub fn len(&self) -> usize {
        match self {
            Population::Records { values, d } => values.len() / (*d).max(1),
            Population::Items(sets) => sets.len(),
        }
    }
    /// Every device's input, in order.
    pub fn inputs(&self) -> Vec<Input<'_>> {
        match self {
            Population::Records { values, d } => values.chunks_exact(*d).map(Input::Record).collect(),
            Population::Items(sets) => sets.iter().map(|s| Input::Items(s)).collect(),
        }
    }
    /// The records (empty for item sets).
    pub fn values(&self) -> &[Value] {
        match self {
            Population::Records { values, .. } => values,
            Population::Items(_) => &[],
        }
    }
}
