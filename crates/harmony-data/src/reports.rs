//! A collection's reports as Parquet (docs/EXPORT.md): the layout `harmony export` writes and
//! `harmony aggregate` (and later the engines of issue 21) read.
//!
//! ```text
//! DIR/collection=ID/spec.json                       the collection's config
//! DIR/collection=ID/day=YYYY-MM-DD/part-NNNNN.parquet
//! DIR/collection=ID/day=unknown/part-NNNNN.parquet  reports stored before days were kept
//! ```
//!
//! Columns: `report_id` (utf8), `day` (date32, null under `day=unknown`), `body` (binary: the
//! stored report bytes). Row groups of [`ROW_GROUP_ROWS`] rows. Both directions stream: the
//! writer holds at most [`MAX_OPEN_PARTS`] open parts (one row group each in memory), the
//! reader one batch of [`crate::BATCH_ROWS`] rows.

use crate::error::{Error, Result};
use arrow_array::builder::{BinaryBuilder, StringBuilder};
use arrow_array::{Array, ArrayRef, BinaryArray, Date32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows per Parquet row group.
pub const ROW_GROUP_ROWS: usize = 65_536;
/// Rows buffered before they are handed to a part's writer.
const WRITE_ROWS: usize = 8192;
/// Most parts open at once while writing (reports arrive in no order of day): the least
/// recently used is closed, and a later report of its day starts a new part.
pub const MAX_OPEN_PARTS: usize = 16;

/// The Arrow schema of a part.
pub fn reports_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("report_id", DataType::Utf8, false),
        Field::new("day", DataType::Date32, true),
        Field::new("body", DataType::Binary, false),
    ]))
}

/// The civil date (year, month, day) of a day count since 1970-01-01 (proleptic Gregorian).
pub fn civil_date(days: i32) -> (i64, u32, u32) {
    // H. Hinnant's `civil_from_days`.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The partition directory of a day: `day=YYYY-MM-DD`, or `day=unknown`.
pub fn day_dir(day: Option<i32>) -> String {
    match day {
        Some(d) => {
            let (y, m, dd) = civil_date(d);
            format!("day={y:04}-{m:02}-{dd:02}")
        }
        None => "day=unknown".to_string(),
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.display().to_string(), source }
}

fn pq(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> Error + '_ {
    move |e| Error::data(format!("{}: {e}", path.display()))
}

/// One open part: a Parquet writer and the rows not yet handed to it.
struct Part {
    path: PathBuf,
    writer: ArrowWriter<File>,
    ids: StringBuilder,
    bodies: BinaryBuilder,
    pending: usize,
    day: Option<i32>,
    last_use: u64,
}

impl Part {
    fn flush(&mut self) -> Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        let days: ArrayRef = Arc::new(Date32Array::from(vec![self.day; self.pending]));
        let cols: Vec<ArrayRef> = vec![Arc::new(self.ids.finish()), days, Arc::new(self.bodies.finish())];
        let batch = RecordBatch::try_new(reports_schema(), cols).map_err(|e| Error::data(e.to_string()))?;
        self.writer.write(&batch).map_err(pq(&self.path))?;
        self.pending = 0;
        Ok(())
    }

    /// Writes the footer and renames `part-N.parquet.tmp` to `part-N.parquet`.
    fn close(mut self) -> Result<PathBuf> {
        self.flush()?;
        self.writer.close().map_err(pq(&self.path))?;
        let done = self.path.with_extension("");
        std::fs::rename(&self.path, &done).map_err(io(&done))?;
        Ok(done)
    }
}

/// What a [`ReportsWriter`] wrote.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// Rows written.
    pub rows: u64,
    /// The part files, in the order they were closed.
    pub files: Vec<PathBuf>,
}

/// Writes one collection's reports under its directory (`DIR/collection=ID`), partitioned by
/// day. A part is written as `part-N.parquet.tmp` and renamed when complete, so a reader never
/// sees half a file.
pub struct ReportsWriter {
    dir: PathBuf,
    props: WriterProperties,
    open: HashMap<Option<i32>, Part>,
    next: HashMap<Option<i32>, u32>,
    clock: u64,
    written: Written,
}

impl ReportsWriter {
    /// A writer into `collection_dir` (created; refused if it already holds a day partition, so
    /// two exports never mix).
    pub fn create(collection_dir: &Path) -> Result<Self> {
        Self::open(collection_dir, false)
    }

    /// A writer that adds parts to `collection_dir` beside those already there (a server's
    /// archive, across restarts): each day's part numbers continue after the largest present.
    pub fn append(collection_dir: &Path) -> Result<Self> {
        Self::open(collection_dir, true)
    }

    fn open(collection_dir: &Path, append: bool) -> Result<Self> {
        std::fs::create_dir_all(collection_dir).map_err(io(collection_dir))?;
        let entries = if append { Vec::new() } else { read_names(collection_dir)? };
        for name in entries {
            if name.to_string_lossy().starts_with("day=") {
                return Err(Error::data(format!(
                    "{} already holds exported reports ({}); export into an empty directory",
                    collection_dir.display(),
                    name.to_string_lossy()
                )));
            }
        }
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_compression(Compression::SNAPPY)
            .build();
        Ok(ReportsWriter {
            dir: collection_dir.to_path_buf(),
            props,
            open: HashMap::new(),
            next: HashMap::new(),
            clock: 0,
            written: Written::default(),
        })
    }

    fn open_part(&mut self, day: Option<i32>) -> Result<Part> {
        if self.open.len() >= MAX_OPEN_PARTS
            && let Some(&oldest) = self.open.iter().min_by_key(|(_, p)| p.last_use).map(|(d, _)| d)
        {
            let part = self.open.remove(&oldest).expect("an open part");
            self.written.files.push(part.close()?);
        }
        let dir = self.dir.join(day_dir(day));
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let n = match self.next.entry(day) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(next_part_number(&dir)?),
        };
        let path = dir.join(format!("part-{n:05}.parquet.tmp"));
        *n += 1;
        let file = File::create(&path).map_err(io(&path))?;
        let writer = ArrowWriter::try_new(file, reports_schema(), Some(self.props.clone())).map_err(pq(&path))?;
        Ok(Part { path, writer, ids: StringBuilder::new(), bodies: BinaryBuilder::new(), pending: 0, day, last_use: 0 })
    }

    /// Appends one report.
    pub fn push(&mut self, id: &str, day: Option<i32>, body: &[u8]) -> Result<()> {
        if !self.open.contains_key(&day) {
            let part = self.open_part(day)?;
            self.open.insert(day, part);
        }
        self.clock += 1;
        let part = self.open.get_mut(&day).expect("opened above");
        part.last_use = self.clock;
        part.ids.append_value(id);
        part.bodies.append_value(body);
        part.pending += 1;
        self.written.rows += 1;
        if part.pending >= WRITE_ROWS {
            part.flush()?;
        }
        Ok(())
    }

    /// Closes every part.
    pub fn finish(mut self) -> Result<Written> {
        let mut parts: Vec<Part> = self.open.drain().map(|(_, p)| p).collect();
        parts.sort_by(|a, b| a.path.cmp(&b.path));
        for p in parts {
            self.written.files.push(p.close()?);
        }
        Ok(self.written)
    }
}

fn read_names(dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    let entries = std::fs::read_dir(dir).map_err(io(dir))?;
    entries.map(|e| e.map(|e| e.file_name()).map_err(io(dir))).collect()
}

/// The number after the largest `part-N.parquet` (or `.tmp`) in a day directory (0 when none).
fn next_part_number(day_dir: &Path) -> Result<u32> {
    let mut next = 0;
    for name in read_names(day_dir)? {
        let name = name.to_string_lossy();
        let n = name.strip_prefix("part-").and_then(|r| r.split('.').next()).and_then(|n| n.parse::<u32>().ok());
        if let Some(n) = n {
            next = next.max(n + 1);
        }
    }
    Ok(next)
}

/// The part files under a collection directory: `day=*/part-*.parquet`, sorted by path.
pub fn part_files(collection_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for day in std::fs::read_dir(collection_dir).map_err(io(collection_dir))? {
        let day = day.map_err(io(collection_dir))?.path();
        let is_day = day.file_name().is_some_and(|n| n.to_string_lossy().starts_with("day="));
        if !is_day || !day.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&day).map_err(io(&day))? {
            let f = f.map_err(io(&day))?.path();
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name.starts_with("part-") && name.ends_with(".parquet") {
                out.push(f);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// One report read back from a part.
#[derive(Debug, Clone, Copy)]
pub struct ReportRow<'a> {
    /// The report id.
    pub id: &'a str,
    /// The received day (days since 1970-01-01), if known.
    pub day: Option<i32>,
    /// The report bytes.
    pub body: &'a [u8],
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, path: &Path, name: &str, ty: &str) -> Result<&'a T> {
    let col = batch.column_by_name(name).ok_or_else(|| {
        Error::data(format!("{}: no column {name:?} (expected report_id, day, body)", path.display()))
    })?;
    col.as_any().downcast_ref::<T>().ok_or_else(|| {
        Error::data(format!("{}: column {name:?} is {}, expected {ty}", path.display(), col.data_type()))
    })
}

/// Calls `f` on every row of one part file, batch by batch; `f`'s error is reported with the
/// file and the row (0-based, in the file).
pub fn for_each_row(path: &Path, f: &mut dyn FnMut(ReportRow<'_>) -> Result<(), String>) -> Result<u64> {
    let file = File::open(path).map_err(io(path))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(pq(path))?
        .with_batch_size(crate::BATCH_ROWS)
        .build()
        .map_err(pq(path))?;
    let mut row = 0u64;
    for batch in reader {
        let batch = batch.map_err(|e| Error::data(format!("{}: row {row}: {e}", path.display())))?;
        let ids = column::<StringArray>(&batch, path, "report_id", "utf8")?;
        let days = column::<Date32Array>(&batch, path, "day", "date32")?;
        let bodies = column::<BinaryArray>(&batch, path, "body", "binary")?;
        for i in 0..batch.num_rows() {
            if ids.is_null(i) || bodies.is_null(i) {
                return Err(Error::data(format!("{}: row {row}: a null report_id or body", path.display())));
            }
            let day = (!days.is_null(i)).then(|| days.value(i));
            let r = ReportRow { id: ids.value(i), day, body: bodies.value(i) };
            f(r).map_err(|e| Error::data(format!("{}: row {row} (report {:?}): {e}", path.display(), r.id)))?;
            row += 1;
        }
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(-1), (1969, 12, 31));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(20_418), (2025, 11, 26));
        assert_eq!(day_dir(Some(20_418)), "day=2025-11-26");
        assert_eq!(day_dir(None), "day=unknown");
    }

    #[test]
    fn write_then_read_round_trips() {
        let dir = std::env::temp_dir().join(format!("harmony-reports-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let col = dir.join("collection=c");
        let mut w = ReportsWriter::create(&col).unwrap();
        let days = [Some(20_000), None, Some(20_001)];
        // More days than open parts, interleaved: parts are closed and reopened.
        let n = 5_000usize;
        for i in 0..n {
            let day = if i % 7 == 0 { days[i % 3] } else { Some(19_000 + (i % (MAX_OPEN_PARTS + 5)) as i32) };
            w.push(&format!("r{i}"), day, &(i as u32).to_le_bytes()).unwrap();
        }
        let written = w.finish().unwrap();
        assert_eq!(written.rows, n as u64);
        let files = part_files(&col).unwrap();
        assert_eq!(files.len(), written.files.len());
        assert!(files.iter().any(|f| f.to_string_lossy().contains("day=unknown")));
        let mut seen = vec![false; n];
        for f in &files {
            for_each_row(f, &mut |r| {
                let i: usize = r.id[1..].parse().unwrap();
                assert_eq!(r.body, (i as u32).to_le_bytes());
                let dir = f.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
                assert_eq!(dir, day_dir(r.day));
                seen[i] = true;
                Ok(())
            })
            .unwrap();
        }
        assert!(seen.iter().all(|s| *s));
        // A second export into the same directory is refused; an appending writer adds parts
        // numbered after the existing ones.
        assert!(ReportsWriter::create(&col).is_err());
        let mut a = ReportsWriter::append(&col).unwrap();
        a.push("late", Some(20_000), b"x").unwrap();
        let added = a.finish().unwrap();
        assert_eq!(part_files(&col).unwrap().len(), files.len() + 1);
        assert!(!files.contains(&added.files[0]), "{:?} overwrote a part", added.files[0]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
