//! Parquet in record batches, reading only the selected columns. A page that cannot be decoded
//! is an error naming the column: on a failed batch, each selected column of that row group is
//! decoded alone to find which one fails.

use crate::error::{Error, Result};
use crate::reader::{BATCH_ROWS, Input};
use arrow_array::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::errors::ParquetError;
use parquet::file::reader::ChunkReader;

/// A batch and the header → batch column map.
pub(crate) type Mapped<'a> = (&'a RecordBatch, &'a [Option<usize>]);

/// A Parquet file being read.
pub(crate) struct ParquetSource {
    input: Input,
    meta: ArrowReaderMetadata,
    selected: Option<Vec<usize>>,
    reader: Option<ParquetRecordBatchReader>,
    current: Option<RecordBatch>,
    /// Header column → column of the projected batches.
    map: Vec<Option<usize>>,
    /// Records delivered so far.
    done: usize,
}

fn build<T: ChunkReader + 'static>(
    input: T,
    meta: &ArrowReaderMetadata,
    mask: ProjectionMask,
    row_group: Option<usize>,
) -> Result<ParquetRecordBatchReader, ParquetError> {
    let mut b = ParquetRecordBatchReaderBuilder::new_with_metadata(input, meta.clone())
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS);
    if let Some(g) = row_group {
        b = b.with_row_groups(vec![g]);
    }
    b.build()
}

/// Rewords the parquet crate's message for a codec left out of this build.
fn explain(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    if text.contains("Disabled feature") || text.contains("not supported yet") {
        format!("{text} (this build reads uncompressed, snappy, zstd and lz4 pages; re-save the file with one of them)")
    } else {
        text
    }
}

impl ParquetSource {
    /// Reads the footer; returns the source and the top-level column names.
    pub(crate) fn open(name: &str, input: Input) -> Result<(Self, Vec<String>)> {
        let loaded = match &input {
            Input::File(f) => ArrowReaderMetadata::load(f, Default::default()),
            Input::Bytes(b) => ArrowReaderMetadata::load(b, Default::default()),
        };
        let meta = loaded.map_err(|e| Error::data(format!("{name}: not a readable Parquet file ({})", explain(&e))))?;
        let fields: Vec<String> = meta.schema().fields().iter().map(|f| f.name().clone()).collect();
        let map = vec![None; fields.len()];
        Ok((ParquetSource { input, meta, selected: None, reader: None, current: None, map, done: 0 }, fields))
    }

    /// Total number of records.
    pub(crate) fn rows(&self) -> usize {
        self.meta.metadata().file_metadata().num_rows().max(0) as usize
    }

    /// Reads only `columns` (header positions).
    pub(crate) fn select(&mut self, columns: &[usize]) {
        let mut c = columns.to_vec();
        c.sort_unstable();
        c.dedup();
        self.selected = Some(c);
    }

    fn reader(&self, mask: ProjectionMask, row_group: Option<usize>) -> Result<ParquetRecordBatchReader, ParquetError> {
        match &self.input {
            Input::File(f) => build(f.try_clone()?, &self.meta, mask, row_group),
            Input::Bytes(b) => build(b.clone(), &self.meta, mask, row_group),
        }
    }

    fn mask(&self, columns: &[usize]) -> ProjectionMask {
        ProjectionMask::roots(self.meta.parquet_schema(), columns.iter().copied())
    }

    /// The next non-empty batch and the header → batch column map.
    pub(crate) fn next(&mut self, name: &str, header: &[String]) -> Result<Option<Mapped<'_>>> {
        if self.reader.is_none() {
            let columns = self.selected.clone().unwrap_or_else(|| (0..header.len()).collect());
            for (k, &c) in columns.iter().enumerate() {
                self.map[c] = Some(k);
            }
            let reader = self
                .reader(self.mask(&columns), None)
                .map_err(|e| Error::data(format!("{name}: cannot read the Parquet file ({})", explain(&e))))?;
            self.reader = Some(reader);
        }
        let reader = self.reader.as_mut().expect("built above");
        self.current = loop {
            match reader.next() {
                Some(Ok(b)) if b.num_rows() == 0 => continue,
                Some(Ok(b)) => break Some(b),
                Some(Err(e)) => return Err(self.diagnose(name, header, &e)),
                None => break None,
            }
        };
        match &self.current {
            Some(b) => {
                self.done += b.num_rows();
                Ok(Some((b, &self.map)))
            }
            None => Ok(None),
        }
    }

    /// Finds the column whose pages fail: each selected column alone, in each row group the
    /// failed batch overlaps (the records after the `done` already delivered).
    fn diagnose(&self, name: &str, header: &[String], e: &dyn std::fmt::Display) -> Error {
        let columns = self.selected.clone().unwrap_or_else(|| (0..header.len()).collect());
        let mut start = 0usize;
        for (g, group) in self.meta.metadata().row_groups().iter().enumerate() {
            let end = start + group.num_rows().max(0) as usize;
            if end > self.done && start < self.done + BATCH_ROWS {
                for &c in &columns {
                    let failed = match self.reader(self.mask(&[c]), Some(g)) {
                        Err(e) => Some(explain(&e)),
                        Ok(mut r) => r.find_map(|b| b.err()).map(|e| explain(&e)),
                    };
                    if let Some(why) = failed {
                        return Error::data(format!(
                            "{name}: column \"{}\" (row group {g}, records {}–{end}): the Parquet data cannot be decoded: {why}",
                            header[c],
                            start + 1
                        ));
                    }
                }
            }
            start = end;
        }
        Error::data(format!("{name}: records after {}: the Parquet data cannot be decoded: {}", self.done, explain(e)))
    }
}
