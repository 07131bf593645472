//! What a device holds for one collection.

use harmony_core::error::{Error, Result};
use harmony_core::schema::{Schema, Value};
use harmony_protocol::{ModelState, QueryRound};

/// A device's input to a task's randomizer.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// Its record, encoded by the collection's schema (`Schema::encode`: numeric values on
    /// [-1, 1], categories as indices). Every task but heavy hitters and train reads this.
    Record(&'a [Value]),
    /// Its set of items (heavy hitters): one string, or several.
    Items(&'a [String]),
    /// Its record and the public round state it computes a gradient at (train).
    Gradient {
        /// The record (target included).
        record: &'a [Value],
        /// The round's model.
        model: &'a ModelState,
    },
    /// Its record and the current round's query it answers (`adaptive-rounds` linear queries).
    Answer {
        /// The record.
        record: &'a [Value],
        /// The round (`GET …/query`).
        round: &'a QueryRound,
    },
}

impl<'a> Input<'a> {
    /// The record, or an error naming what the task expected.
    pub fn record(&self, task: &str) -> Result<&'a [Value]> {
        match *self {
            Input::Record(r) => Ok(r),
            other => Err(mismatch(task, "a record", other)),
        }
    }
    /// The item set, or an error naming what the task expected.
    pub fn items(&self, task: &str) -> Result<&'a [String]> {
        match *self {
            Input::Items(i) => Ok(i),
            other => Err(mismatch(task, "a set of items", other)),
        }
    }
    /// The record and the model, or an error naming what the task expected.
    pub fn gradient(&self, task: &str) -> Result<(&'a [Value], &'a ModelState)> {
        match *self {
            Input::Gradient { record, model } => Ok((record, model)),
            other => Err(mismatch(task, "a record and the round's model", other)),
        }
    }
    /// The record and the round, or an error naming what the task expected.
    pub fn answer(&self, task: &str) -> Result<(&'a [Value], &'a QueryRound)> {
        match *self {
            Input::Answer { record, round } => Ok((record, round)),
            other => Err(mismatch(task, "a record and the current round's query", other)),
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            Input::Record(_) => "a record",
            Input::Items(_) => "a set of items",
            Input::Gradient { .. } => "a record and a model",
            Input::Answer { .. } => "a record and a query round",
        }
    }
}

fn mismatch(task: &str, expected: &str, got: Input<'_>) -> Error {
    Error::input("input", got.kind(), format!("{expected} (task {task})"))
}

/// The value of attribute `j` of a record as a category index < `d`, or an error naming it.
pub fn category(record: &[Value], j: usize, d: usize, name: &str) -> Result<usize> {
    match record.get(j) {
        Some(Value::Category(c)) if (*c as usize) < d => Ok(*c as usize),
        other => Err(Error::input(name, other, format!("a category index in [0, {d})"))),
    }
}

/// The value of attribute `j` of a record on [-1, 1], or an error naming it.
pub fn unit(record: &[Value], j: usize, name: &str) -> Result<f64> {
    match record.get(j) {
        Some(Value::Unit(t)) if (-1.0..=1.0).contains(t) => Ok(*t),
        other => Err(Error::input(name, other, "a numeric value mapped to [-1, 1]")),
    }
}

/// Refuses to bin numeric attribute `j` when it reports missing values (`missing = "report"`):
/// a missing value is reported at the range's midpoint, which a bin would count as a value.
pub fn binnable(schema: &Schema, j: usize, field: &'static str) -> Result<()> {
    if schema.presence_of(j).is_none() {
        return Ok(());
    }
    Err(Error::param(
        field,
        schema.attributes()[j].name(),
        "a numeric attribute without missing = \"report\" (its missing values are reported at the midpoint, which \
         bins would count): impute them (missing = { impute = v }) for this task; the means task estimates the \
         present values' mean and the share missing",
    ))
}
