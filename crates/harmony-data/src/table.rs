//! A table held whole as text (what some commands still use): read from any format, then
//! encoded or inferred through the same code as the streaming path.

use crate::cells::Cells;
use crate::encode::{EncodeOptions, Encoded, encode_rows};
use crate::error::{Error, Result};
use crate::reader::{Batch, Batches, DataReader};
use crate::schema_file::InvalidPolicy;
use crate::temporal::{Unit, format_date, format_datetime};
use harmony_core::schema::Schema;
use std::path::Path;

/// A table held as text.
pub struct Table {
    /// Column names (unique, non-empty).
    pub header: Vec<String>,
    /// Rows (each as long as the header). A missing cell is its text as read (a CSV field,
    /// trimmed) or, from Parquet/Arrow, an empty string for a null; the encoder reads both
    /// as missing.
    pub rows: Vec<Vec<String>>,
}

/// Reads a whole table (any format; `-` = standard input) as text. Errors: a ragged row, no
/// data rows, or what the reader reports.
pub fn read_table(path: &Path) -> Result<Table> {
    table_of(DataReader::open(path)?, &path.display().to_string())
}

/// Every row of `reader` as text.
pub(crate) fn table_of(mut reader: DataReader, name: &str) -> Result<Table> {
    let header = reader.header().to_vec();
    let mut rows: Vec<Vec<String>> = Vec::new();
    while let Some(batch) = reader.next_batch()? {
        // Row by row (each row's cells written while it is in cache), not column by column.
        let columns = (0..header.len()).map(|c| batch.cells(c)).collect::<Result<Vec<_>>>()?;
        rows.reserve(batch.len());
        rows.extend((0..batch.len()).map(|i| columns.iter().map(|cells| text_of(cells, i)).collect()));
    }
    if rows.is_empty() {
        return Err(Error::data(format!("{name}: no data rows")));
    }
    Ok(Table { header, rows })
}

/// `table` as CSV text (a null as an empty field).
pub(crate) fn to_csv(table: &Table) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let bad = |e: csv::Error| Error::data(format!("writing CSV: {e}"));
    w.write_record(&table.header).map_err(bad)?;
    for row in &table.rows {
        w.write_record(row).map_err(bad)?;
    }
    w.into_inner().map_err(|e| Error::data(format!("writing CSV: {e}")))
}

/// Cell `i` as text: numbers in Rust's shortest form, dates as ISO 8601, nulls empty.
fn text_of(cells: &Cells, i: usize) -> String {
    match cells {
        Cells::Text(t) => t.get(i).unwrap_or("").to_string(),
        Cells::Dict { array, keys, values } => {
            if array.is_null(i) {
                String::new()
            } else {
                values.get(keys[i]).unwrap_or("").to_string()
            }
        }
        Cells::Number { values, .. } if values[i].is_nan() => String::new(),
        Cells::Number { values, .. } => values[i].to_string(),
        Cells::Bool(v) => ["false", "true", ""][v[i] as usize].to_string(),
        Cells::Time { values, .. } if values[i].is_nan() => String::new(),
        Cells::Time { values, unit: Unit::Days } if values[i].fract() == 0.0 => format_date(values[i] as i64),
        Cells::Time { values, unit } => format_datetime(Unit::Seconds.convert(values[i], *unit)),
    }
}

/// A table as one batch.
pub(crate) struct TableBatches<'t> {
    table: &'t Table,
    done: bool,
}

impl<'t> TableBatches<'t> {
    pub(crate) fn new(table: &'t Table) -> Self {
        TableBatches { table, done: false }
    }
}

impl Batches for TableBatches<'_> {
    fn header(&self) -> &[String] {
        &self.table.header
    }
    fn name(&self) -> &str {
        "the table"
    }
    fn next_batch(&mut self) -> Result<Option<Batch<'_>>> {
        if std::mem::replace(&mut self.done, true) || self.table.rows.is_empty() {
            return Ok(None);
        }
        Ok(Some(Batch::rows(&self.table.rows, 0)))
    }
}

/// Encodes a table against a schema, row-major. Missing categorical values are the label `?`
/// when the schema lists it. Errors name the row (1-based, header = row 1), the column, the
/// value and what was expected.
pub fn encode(table: &Table, schema: &Schema, policy: InvalidPolicy) -> Result<Encoded> {
    encode_rows(&mut TableBatches::new(table), schema, &EncodeOptions::with_policy(policy)).map_err(|e| match e {
        Error::Data(m) => Error::Data(m.trim_start_matches("the table: ").to_string()),
        e => e,
    })
}
