//! A dictionary column of reports (`dictionary<int32, binary>`: what `harmony export` writes
//! for a collection whose reports repeat, `harmony_data::reports::Bodies`). Each row is an
//! index into the distinct reports, and Parquet's reader hands the indices over without
//! building a value per row. The rows are counted per index; a distinct report is validated
//! (`Task::validate`, the server's check) the first time a row names it, and added once with
//! its count ([`TaskAggregator::add_times`]). The batches of one column chunk share their
//! dictionary (the same buffers), so the counts run on until the dictionary changes.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, DictionaryArray};
use datafusion::arrow::datatypes::{DataType, Int32Type};
use harmony_tasks::{Task, TaskAggregator};

/// Counts of the rows naming each report of the current dictionary.
#[derive(Default)]
pub struct DictionaryCounts {
    /// The dictionary the counts are of (held, so that its buffers, which identify it, live).
    values: Option<ArrayRef>,
    /// Its buffers' addresses, offset and length.
    identity: Vec<usize>,
    counts: Vec<u64>,
}

/// The buffers' addresses, the offset and the length of a dictionary's values.
fn identity(values: &ArrayRef) -> Vec<usize> {
    let data = values.to_data();
    let mut id: Vec<usize> = data.buffers().iter().map(|b| b.as_ptr() as usize).collect();
    id.extend([data.offset(), data.len()]);
    id
}

/// The `i`th value of a dictionary's binary values (`None` when null).
fn value_at(values: &dyn Array, i: usize) -> Option<&[u8]> {
    if values.is_null(i) {
        return None;
    }
    Some(match values.data_type() {
        DataType::Binary => values.as_binary::<i32>().value(i),
        DataType::LargeBinary => values.as_binary::<i64>().value(i),
        DataType::BinaryView => values.as_binary_view().value(i),
        other => unreachable!("checked when the dictionary was taken: {other}"),
    })
}

/// Whether dictionary values of type `t` are report bodies.
pub fn binary_values(t: &DataType) -> bool {
    matches!(t, DataType::Binary | DataType::LargeBinary | DataType::BinaryView)
}

impl DictionaryCounts {
    /// Counts a batch's rows (none null: the caller checked); errors name the row.
    pub fn add(
        &mut self,
        dict: &DictionaryArray<Int32Type>,
        task: &dyn Task,
        agg: &mut dyn TaskAggregator,
    ) -> Result<(), String> {
        let values = dict.values();
        if self.values.is_none() || identity(values) != self.identity {
            self.flush(agg)?;
            if !binary_values(values.data_type()) {
                return Err(format!("a dictionary of {}, expected binary report bodies", values.data_type()));
            }
            self.identity = identity(values);
            self.counts = vec![0; values.len()];
            self.values = Some(values.clone());
        }
        let counts = &mut self.counts;
        for (row, &k) in dict.keys().values().iter().enumerate() {
            let Some(c) = counts.get_mut(k as usize) else {
                return Err(format!("row {row} of the batch: dictionary index {k} out of range"));
            };
            if *c == 0 {
                let report = value_at(values.as_ref(), k as usize);
                let report = report.ok_or_else(|| format!("row {row} of the batch: a null report body"))?;
                task.validate(report).map_err(|e| format!("row {row} of the batch: invalid report: {e}"))?;
            }
            *c += 1;
        }
        Ok(())
    }

    /// Adds the counted reports to `agg` (each validated when first counted).
    pub fn flush(&mut self, agg: &mut dyn TaskAggregator) -> Result<(), String> {
        let Some(values) = self.values.take() else { return Ok(()) };
        for (i, &n) in self.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            let report = value_at(values.as_ref(), i).expect("a counted value is not null");
            agg.add_times(report, n).map_err(|e| format!("invalid report: {e}"))?;
        }
        self.counts.clear();
        self.identity.clear();
        Ok(())
    }
}
