//! A dictionary column of reports (`dictionary<int32, binary>`: what `harmony export` writes
//! for a collection whose reports repeat, `harmony_data::reports::Bodies`). Each row is an
//! index into the distinct reports, and Parquet's reader hands the indices over without
//! building a value per row. The rows are counted per index; when the dictionary changes (the
//! batches of one column chunk share it: the same buffers), each distinct report counted is
//! validated (`Task::validate`, the server's check) and added once with its count, one decode
//! for both ([`Task::add_checked_times`]); an invalid one is named by the row that first read it.

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
    /// Per index counted: the first row that named it (rows of this accumulator's column).
    first: Vec<u64>,
    /// Rows read so far.
    rows: u64,
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
            self.flush(task, agg)?;
            if !binary_values(values.data_type()) {
                return Err(format!("a dictionary of {}, expected binary report bodies", values.data_type()));
            }
            self.identity = identity(values);
            self.counts = vec![0; values.len()];
            self.first = vec![0; values.len()];
            self.values = Some(values.clone());
        }
        let (counts, first) = (&mut self.counts, &mut self.first);
        for (row, &k) in dict.keys().values().iter().enumerate() {
            let Some(c) = counts.get_mut(k as usize) else {
                return Err(format!("row {row} of the batch: dictionary index {k} out of range"));
            };
            if *c == 0 {
                if values.is_null(k as usize) {
                    return Err(format!("row {row} of the batch: a null report body"));
                }
                first[k as usize] = self.rows + row as u64;
            }
            *c += 1;
        }
        self.rows += dict.len() as u64;
        Ok(())
    }

    /// Validates each counted report and adds it to `agg` with its count.
    pub fn flush(&mut self, task: &dyn Task, agg: &mut dyn TaskAggregator) -> Result<(), String> {
        let Some(values) = self.values.take() else { return Ok(()) };
        for (i, &n) in self.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            let report = value_at(values.as_ref(), i).expect("a counted value is not null");
            task.add_checked_times(agg, report, n).map_err(|e| {
                format!(
                    "row {} of the partition's column (the first with this report): invalid report: {e}",
                    self.first[i]
                )
            })?;
        }
        self.counts.clear();
        self.first.clear();
        self.identity.clear();
        Ok(())
    }
}
