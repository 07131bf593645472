//! A collection's reports as Parquet (docs/EXPORT.md): the layout `harmony export` writes and
//! `harmony aggregate` and the DataFusion and Spark engines (docs/SCALE.md) read.
//!
//! ```text
//! DIR/collection=ID/spec.json                       the collection's config
//! DIR/collection=ID/day=YYYY-MM-DD/part-NNNNN.parquet
//! DIR/collection=ID/day=unknown/part-NNNNN.parquet  reports stored before days were kept
//! ```
//!
//! Columns: `report_id` (utf8), `day` (date32, null under `day=unknown`), `body` (the stored
//! report bytes: binary, or dictionary<int32, binary> when the collection's reports repeat, or
//! two fields for distinct OLH reports and one-attribute fixed-point records: [`Bodies`]). Row groups of [`ROW_GROUP_ROWS`] rows ([`DICTIONARY_ROW_GROUP_ROWS`] for a
//! dictionary), or [`ROW_GROUP_BYTES`] encoded. Both directions stream: the writer holds at
//! most [`MAX_OPEN_PARTS`] open parts (one row group each in memory, encoded), the reader one
//! batch of [`crate::BATCH_ROWS`] rows.

use crate::error::{Error, Result};
use arrow_array::builder::{BinaryBuilder, BinaryDictionaryBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, BinaryArray, Date32Array, DictionaryArray, Int32Array, Int64Array, RecordBatch, StringArray,
    StructArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use harmony_core::frequency::OlhReport;
use harmony_core::strategy::RecordReport;
use harmony_core::wire;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows per Parquet row group of plain bodies.
pub const ROW_GROUP_ROWS: usize = 65_536;
/// Rows per Parquet row group of dictionary bodies: Parquet keeps one dictionary per row group,
/// and a reader adds each distinct report once per dictionary, so long row groups pay (unary
/// at d = 16: 19,881 distinct reports in 65,536 rows, 52,847 in 1.4 million). Held encoded in
/// memory while written (an index and a report id per row), at most [`ROW_GROUP_BYTES`].
pub const DICTIONARY_ROW_GROUP_ROWS: usize = 4 << 20;
/// Most bytes of a row group held in memory while written: a longer one is cut there.
pub const ROW_GROUP_BYTES: usize = 32 << 20;
/// Most bytes of a dictionary part's dictionary page (Parquet's default, which plain parts keep,
/// is 1 MiB; past it, the rest of the row group is written plain and a reader of the dictionary
/// column builds a dictionary per batch).
const DICTIONARY_PAGE_BYTES: usize = 16 << 20;
/// Rows buffered before they are handed to a part's writer.
const WRITE_ROWS: usize = 8192;
/// Rows a writer holds before it chooses the body encoding from them ([`Bodies::of`]), unless
/// their bodies reach [`SAMPLE_BYTES`] first.
pub const SAMPLE_ROWS: usize = 65_536;
/// Most body bytes a part holds while the encoding is not chosen.
const SAMPLE_BYTES: usize = 16 << 20;
/// Most parts open at once while writing (reports arrive in no order of day): the least
/// recently used is closed, and a later report of its day starts a new part.
pub const MAX_OPEN_PARTS: usize = 16;

/// How a part holds the report bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Bodies {
    /// `binary`: each row's bytes.
    #[default]
    Plain,
    /// `dictionary<int32, binary>`: each distinct report once per batch, and each row's index.
    /// For collections whose reports repeat (a counting oracle's: GRR's category, Hadamard's row
    /// and bit): Parquet stores them dictionary-encoded either way, and a reader given this type
    /// gets the indices without building a value per row (DataFusion counts them: harmony-dist).
    Dictionary,
    /// `struct<seed: int64, y: int32>`: OLH reports as their two fields (each the bits of the
    /// report's u64 seed and u32 hash value), for collections whose reports are all distinct
    /// OLH reports: no bytes to decode, and an engine reads two fixed-width columns
    /// (harmony_tasks::ReportColumns). Every row must be a canonical OLH report (as a device
    /// encodes it), so that it reads back to the same bytes.
    OlhFields,
    /// `struct<attribute: int32, units: int64>`: records of one numeric attribute reporting a
    /// fixed-point value and no joint report (`RecordReport::one_fixed`: a one-attribute means
    /// collection's reports from PM, Laplace, …), for collections whose reports are all such
    /// and distinct; canonical as for `OlhFields`.
    RecordFields,
}

/// The type of the `body` column.
pub fn body_type(bodies: Bodies) -> DataType {
    match bodies {
        Bodies::Plain => DataType::Binary,
        Bodies::Dictionary => DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Binary)),
        Bodies::OlhFields => DataType::Struct(olh_fields()),
        Bodies::RecordFields => DataType::Struct(record_fields()),
    }
}

/// The fields of a `RecordFields` body.
fn record_fields() -> arrow_schema::Fields {
    vec![Field::new("attribute", DataType::Int32, false), Field::new("units", DataType::Int64, false)].into()
}

/// The one-attribute fixed-point record `body` encodes canonically, as (attribute, units).
fn canonical_record(body: &[u8], record: &mut RecordReport, scratch: &mut Vec<u8>) -> Option<(u32, i64)> {
    record.decode_into(body)?;
    let one = record.as_one_fixed()?;
    scratch.clear();
    wire::encode_into(record, scratch);
    (scratch.as_slice() == body).then_some(one)
}

/// The fields of an `OlhFields` body.
fn olh_fields() -> arrow_schema::Fields {
    vec![Field::new("seed", DataType::Int64, false), Field::new("y", DataType::Int32, false)].into()
}

/// The OLH report `body` encodes canonically (as a device does), if it is one.
fn canonical_olh(body: &[u8], scratch: &mut Vec<u8>) -> Option<OlhReport> {
    let r = OlhReport::decode_fast(body)?;
    scratch.clear();
    wire::encode_into(&r, scratch);
    (scratch.as_slice() == body).then_some(r)
}

/// The Arrow schema of a part whose bodies are `Bodies::Plain`.
pub fn reports_schema() -> SchemaRef {
    reports_schema_of(Bodies::Plain)
}

/// The Arrow schema of a part.
pub fn reports_schema_of(bodies: Bodies) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("report_id", DataType::Utf8, false),
        Field::new("day", DataType::Date32, true),
        Field::new("body", body_type(bodies), false),
    ]))
}

impl Bodies {
    /// The encoding a writer chooses from its first rows ([`SAMPLE_ROWS`], fewer at the end or
    /// past [`SAMPLE_BYTES`]): a dictionary when they are at least 64 and at most half of them
    /// distinct, else plain. Reports drawn uniformly from D values are half distinct in 65,536
    /// rows when D is about 41,000: a row group's dictionary then holds 4% as many reports as
    /// the row group has rows, or fewer. Plain rows that are all canonical OLH reports:
    /// `OlhFields`; all one-attribute fixed-point records: `RecordFields`.
    pub fn of(first: &BinaryArray) -> Bodies {
        let rows = first.len();
        if rows < 64 {
            return Bodies::Plain;
        }
        let mut seen = std::collections::HashSet::new();
        for b in first.iter() {
            if seen.insert(b.unwrap_or_default()) && seen.len() * 2 > rows {
                let (mut scratch, mut record) = (Vec::new(), RecordReport::default());
                let mut bodies = first.iter().map(Option::unwrap_or_default);
                if bodies.clone().all(|b| canonical_olh(b, &mut scratch).is_some()) {
                    return Bodies::OlhFields;
                }
                if bodies.all(|b| canonical_record(b, &mut record, &mut scratch).is_some()) {
                    return Bodies::RecordFields;
                }
                return Bodies::Plain;
            }
        }
        Bodies::Dictionary
    }

    /// The Parquet settings of parts in this encoding.
    fn props(self) -> WriterProperties {
        let props = WriterProperties::builder().set_compression(Compression::SNAPPY);
        match self {
            Bodies::Plain => props.set_max_row_group_row_count(Some(ROW_GROUP_ROWS)),
            // Random seeds and noisy values neither repeat nor compress much: read as they lie.
            Bodies::OlhFields | Bodies::RecordFields => {
                let name = if self == Bodies::OlhFields { "seed" } else { "units" };
                let col = parquet::schema::types::ColumnPath::from(vec!["body".to_string(), name.to_string()]);
                props
                    .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
                    .set_column_dictionary_enabled(col.clone(), false)
                    .set_column_compression(col, Compression::UNCOMPRESSED)
            }
            Bodies::Dictionary => props
                .set_max_row_group_row_count(Some(DICTIONARY_ROW_GROUP_ROWS))
                .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES),
        }
        .build()
    }

    /// The encoding of an existing part's body column.
    fn of_type(t: &DataType) -> Option<Bodies> {
        [Bodies::Plain, Bodies::Dictionary, Bodies::OlhFields, Bodies::RecordFields]
            .into_iter()
            .find(|b| body_type(*b) == *t)
    }

    /// A batch's bodies in this encoding; `Err(row)` for a row it cannot hold.
    fn column(self, bodies: BinaryArray) -> std::result::Result<ArrayRef, usize> {
        Ok(match self {
            Bodies::Plain => Arc::new(bodies),
            Bodies::OlhFields => {
                let (mut seeds, mut ys) = (Vec::with_capacity(bodies.len()), Vec::with_capacity(bodies.len()));
                let mut scratch = Vec::new();
                for (i, b) in bodies.iter().enumerate() {
                    let r = canonical_olh(b.unwrap_or_default(), &mut scratch).ok_or(i)?;
                    seeds.push(r.seed as i64);
                    ys.push(r.y as i32);
                }
                let cols: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(seeds)), Arc::new(Int32Array::from(ys))];
                Arc::new(StructArray::new(olh_fields(), cols, None))
            }
            Bodies::RecordFields => {
                let (mut attributes, mut units) = (Vec::with_capacity(bodies.len()), Vec::with_capacity(bodies.len()));
                let (mut scratch, mut record) = (Vec::new(), RecordReport::default());
                for (i, b) in bodies.iter().enumerate() {
                    let (j, u) = canonical_record(b.unwrap_or_default(), &mut record, &mut scratch).ok_or(i)?;
                    attributes.push(j as i32);
                    units.push(u);
                }
                let cols: Vec<ArrayRef> =
                    vec![Arc::new(Int32Array::from(attributes)), Arc::new(Int64Array::from(units))];
                Arc::new(StructArray::new(record_fields(), cols, None))
            }
            Bodies::Dictionary => {
                let mut b = BinaryDictionaryBuilder::<Int32Type>::with_capacity(bodies.len(), 256, 4096);
                for v in bodies.iter() {
                    b.append(v.unwrap_or_default()).expect("fewer than 2^31 distinct reports in a batch");
                }
                Arc::new(b.finish())
            }
        })
    }
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

/// One open part: its file, its Parquet writer once the body encoding is known (at its first
/// batch), and the rows not yet handed to it.
struct Part {
    path: PathBuf,
    file: Option<File>,
    writer: Option<ArrowWriter<File>>,
    ids: StringBuilder,
    bodies: BinaryBuilder,
    pending: usize,
    day: Option<i32>,
    last_use: u64,
}

/// What every part of a writer shares: the body encoding (fixed by the first batch any part
/// writes, [`SAMPLE_ROWS`] long unless the part closes sooner, or given).
struct Encoding {
    bodies: Option<Bodies>,
}

impl Part {
    fn flush(&mut self, enc: &mut Encoding) -> Result<()> {
        if self.pending == 0 && self.writer.is_some() {
            return Ok(());
        }
        let bodies = self.bodies.finish();
        let kind = *enc.bodies.get_or_insert_with(|| Bodies::of(&bodies));
        let schema = reports_schema_of(kind);
        if let Some(file) = self.file.take() {
            let w = ArrowWriter::try_new(file, schema.clone(), Some(kind.props())).map_err(pq(&self.path))?;
            self.writer = Some(w);
        }
        let writer = self.writer.as_mut().expect("created above");
        let days: ArrayRef = Arc::new(Date32Array::from(vec![self.day; self.pending]));
        let ids = self.ids.finish();
        let body = kind.column(bodies).map_err(|i| {
            let (what, fields) = match kind {
                Bodies::RecordFields => ("a one-attribute fixed-point record", "body.attribute, body.units"),
                _ => ("an OLH report", "body.seed, body.y"),
            };
            Error::data(format!(
                "{}: report {:?} is not {what} as a device encodes it, and this collection's parts hold such reports as fields ({fields})",
                self.path.display(),
                ids.value(i)
            ))
        })?;
        let cols: Vec<ArrayRef> = vec![Arc::new(ids), days, body];
        let batch = RecordBatch::try_new(schema, cols).map_err(|e| Error::data(e.to_string()))?;
        writer.write(&batch).map_err(pq(&self.path))?;
        if writer.in_progress_size() >= ROW_GROUP_BYTES {
            writer.flush().map_err(pq(&self.path))?;
        }
        self.pending = 0;
        Ok(())
    }

    /// Writes the footer and renames `part-N.parquet.tmp` to `part-N.parquet`.
    fn close(mut self, enc: &mut Encoding) -> Result<PathBuf> {
        self.flush(enc)?;
        self.writer.take().expect("flushed").close().map_err(pq(&self.path))?;
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
    enc: Encoding,
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
        // Parts added beside others keep their encoding (readers take one schema for all).
        let bodies = if append { existing_bodies(collection_dir)? } else { None };
        Ok(ReportsWriter {
            dir: collection_dir.to_path_buf(),
            enc: Encoding { bodies },
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
            self.written.files.push(part.close(&mut self.enc)?);
        }
        let dir = self.dir.join(day_dir(day));
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let n = match self.next.entry(day) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(next_part_number(&dir)?),
        };
        let path = dir.join(format!("part-{n:05}.parquet.tmp"));
        *n += 1;
        let file = Some(File::create(&path).map_err(io(&path))?);
        let (ids, bodies) = (StringBuilder::new(), BinaryBuilder::new());
        Ok(Part { path, file, writer: None, ids, bodies, pending: 0, day, last_use: 0 })
    }

    /// The writer with its body encoding given (else it is chosen from the first rows written,
    /// [`Bodies::of`], or taken from the existing parts when appending). Before the first push.
    pub fn with_bodies(mut self, bodies: Bodies) -> Self {
        self.enc.bodies = Some(bodies);
        self
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
        // The first batch waits for a sample large enough to choose the encoding from.
        let sampled = part.pending >= SAMPLE_ROWS || part.bodies.values_slice().len() >= SAMPLE_BYTES;
        if part.pending >= WRITE_ROWS && (self.enc.bodies.is_some() || sampled) {
            part.flush(&mut self.enc)?;
        }
        Ok(())
    }

    /// Closes every part.
    pub fn finish(mut self) -> Result<Written> {
        let mut parts: Vec<Part> = self.open.drain().map(|(_, p)| p).collect();
        parts.sort_by(|a, b| a.path.cmp(&b.path));
        for p in parts {
            self.written.files.push(p.close(&mut self.enc)?);
        }
        Ok(self.written)
    }
}

/// The body encoding of the parts already under `collection_dir` (`None` when there are none).
fn existing_bodies(collection_dir: &Path) -> Result<Option<Bodies>> {
    let Some(part) = part_files(collection_dir)?.into_iter().next() else { return Ok(None) };
    let file = File::open(&part).map_err(io(&part))?;
    let schema = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq(&part))?.schema().clone();
    let body = schema.field_with_name("body").map_err(|e| Error::data(format!("{}: {e}", part.display())))?;
    match Bodies::of_type(body.data_type()) {
        Some(b) => Ok(Some(b)),
        None => Err(Error::data(format!(
            "{}: column \"body\" is {}, expected {BODY_TYPES}",
            part.display(),
            body.data_type()
        ))),
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
    part_files_within(collection_dir, None, None)
}

/// The day (days since 1970-01-01) of a partition directory's name `day=YYYY-MM-DD`; `None` for
/// `day=unknown` or another name.
pub fn day_of_dir(name: &str) -> Option<i32> {
    let date = name.strip_prefix("day=")?;
    let mut parts = date.splitn(3, '-').map(|p| p.parse::<u32>().ok());
    let (y, m, d) = (parts.next()??, parts.next()??, parts.next()??);
    let days = crate::temporal::days_from_civil(i64::from(y), m, d);
    (day_dir(Some(days as i32)) == name).then_some(days as i32)
}

/// [`part_files`] of the day partitions in `[from, to)` (days since 1970-01-01; an open side
/// when `None`): a window of the export. With either bound, `day=unknown` (reports stored
/// before days were kept) is outside every window.
pub fn part_files_within(collection_dir: &Path, from: Option<i32>, to: Option<i32>) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let bounded = from.is_some() || to.is_some();
    for day in std::fs::read_dir(collection_dir).map_err(io(collection_dir))? {
        let day = day.map_err(io(collection_dir))?.path();
        let name = day.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !name.starts_with("day=") || !day.is_dir() {
            continue;
        }
        if bounded {
            let Some(d) = day_of_dir(&name) else { continue };
            if from.is_some_and(|f| d < f) || to.is_some_and(|t| d >= t) {
                continue;
            }
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

/// The types a part's body column may have ([`Bodies`]).
const BODY_TYPES: &str =
    "binary, dictionary<int32, binary>, struct<seed: int64, y: int32> or struct<attribute: int32, units: int64>";

/// A part's body column: binary, a dictionary of binary values, or OLH's fields.
enum BodyColumn<'a> {
    Plain(&'a BinaryArray),
    Dictionary(&'a DictionaryArray<Int32Type>, &'a BinaryArray),
    OlhFields(&'a StructArray, &'a Int64Array, &'a Int32Array),
    RecordFields(&'a StructArray, &'a Int32Array, &'a Int64Array),
}

impl BodyColumn<'_> {
    fn is_null(&self, i: usize) -> bool {
        match self {
            BodyColumn::Plain(a) => a.is_null(i),
            BodyColumn::Dictionary(d, _) => d.is_null(i),
            BodyColumn::OlhFields(s, seeds, ys) => s.is_null(i) || seeds.is_null(i) || ys.is_null(i),
            BodyColumn::RecordFields(s, js, us) => s.is_null(i) || js.is_null(i) || us.is_null(i),
        }
    }
    /// Row `i`'s report bytes (OLH's fields encoded into `scratch`).
    fn value<'b>(&'b self, i: usize, scratch: &'b mut Vec<u8>) -> &'b [u8] {
        match self {
            BodyColumn::Plain(a) => a.value(i),
            BodyColumn::Dictionary(d, v) => v.value(d.keys().value(i) as usize),
            BodyColumn::OlhFields(_, seeds, ys) => {
                scratch.clear();
                wire::encode_into(&OlhReport { seed: seeds.value(i) as u64, y: ys.value(i) as u32 }, scratch);
                scratch
            }
            BodyColumn::RecordFields(_, js, us) => {
                scratch.clear();
                wire::encode_into(&RecordReport::one_fixed(js.value(i) as u32, us.value(i)), scratch);
                scratch
            }
        }
    }
}

fn body_column<'a>(batch: &'a RecordBatch, path: &Path) -> Result<BodyColumn<'a>> {
    let col = batch.column_by_name("body").ok_or_else(|| {
        Error::data(format!("{}: no column \"body\" (expected report_id, day, body)", path.display()))
    })?;
    if let Some(a) = col.as_binary_opt::<i32>() {
        return Ok(BodyColumn::Plain(a));
    }
    if let Some(s) = col.as_struct_opt() {
        let field = |name| s.column_by_name(name);
        let seeds = field("seed").and_then(|c| c.as_primitive_opt::<Int64Type>());
        if let (Some(seeds), Some(ys)) = (seeds, field("y").and_then(|c| c.as_primitive_opt::<Int32Type>())) {
            return Ok(BodyColumn::OlhFields(s, seeds, ys));
        }
        let js = field("attribute").and_then(|c| c.as_primitive_opt::<Int32Type>());
        if let (Some(js), Some(us)) = (js, field("units").and_then(|c| c.as_primitive_opt::<Int64Type>())) {
            return Ok(BodyColumn::RecordFields(s, js, us));
        }
    }
    let dict = col.as_dictionary_opt::<Int32Type>();
    match dict.and_then(|d| d.values().as_binary_opt::<i32>().map(|v| (d, v))) {
        Some((d, v)) => Ok(BodyColumn::Dictionary(d, v)),
        None => Err(Error::data(format!(
            "{}: column \"body\" is {}, expected {BODY_TYPES}",
            path.display(),
            col.data_type()
        ))),
    }
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
    let (mut row, mut scratch) = (0u64, Vec::new());
    for batch in reader {
        let batch = batch.map_err(|e| Error::data(format!("{}: row {row}: {e}", path.display())))?;
        let ids = column::<StringArray>(&batch, path, "report_id", "utf8")?;
        let days = column::<Date32Array>(&batch, path, "day", "date32")?;
        let bodies = body_column(&batch, path)?;
        for i in 0..batch.num_rows() {
            if ids.is_null(i) || bodies.is_null(i) {
                return Err(Error::data(format!("{}: row {row}: a null report_id or body", path.display())));
            }
            let day = (!days.is_null(i)).then(|| days.value(i));
            let r = ReportRow { id: ids.value(i), day, body: bodies.value(i, &mut scratch) };
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
    fn day_partitions_name_their_day() {
        for d in [0, 20_458, 20_489, -1] {
            assert_eq!(day_of_dir(&day_dir(Some(d))), Some(d));
        }
        assert_eq!(day_of_dir("day=unknown"), None);
        assert_eq!(day_of_dir("day=2026-02-30"), None);
        assert_eq!(day_of_dir("day=2026-1-5"), None);
    }

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
        // Every report differs: plain.
        assert_eq!(existing_bodies(&col).unwrap(), Some(Bodies::Plain));
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

    #[test]
    fn a_row_group_is_cut_at_its_byte_bound() {
        let dir = std::env::temp_dir().join(format!("harmony-reports-bytes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // 20,000 distinct bodies of 4,000 bytes: 76 MiB, fewer rows than a row group holds.
        let mut w = ReportsWriter::create(&dir).unwrap();
        // Incompressible bytes (a 64-bit LCG's high bytes): encoded, the row group is as long.
        let body = |i: usize| {
            let mut x = i as u64 + 1;
            (0..4000)
                .map(|_| (x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407), (x >> 56) as u8).1)
                .collect::<Vec<u8>>()
        };
        for i in 0..20_000 {
            w.push(&format!("r{i}"), None, &body(i)).unwrap();
        }
        let files = w.finish().unwrap().files;
        let meta = ParquetRecordBatchReaderBuilder::try_new(File::open(&files[0]).unwrap()).unwrap().metadata().clone();
        assert!(meta.num_row_groups() >= 2, "{} row groups", meta.num_row_groups());
        assert_eq!(meta.file_metadata().num_rows(), 20_000);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn body_has_dictionary_page(part: &Path) -> bool {
        let meta = ParquetRecordBatchReaderBuilder::try_new(File::open(part).unwrap()).unwrap().metadata().clone();
        meta.row_group(0).column(2).dictionary_page_offset().is_some()
    }

    #[test]
    fn repeating_bodies_are_written_as_a_dictionary_and_appends_keep_it() {
        let dir = std::env::temp_dir().join(format!("harmony-reports-dict-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let col = dir.join("collection=c");
        // Reports that repeat: the writer chooses a dictionary by itself.
        let mut w = ReportsWriter::create(&col).unwrap();
        let body = |i: usize| if i < 1_000_000 { vec![(i % 5) as u8; i % 3] } else { i.to_le_bytes().to_vec() };
        let n = 3 * WRITE_ROWS + 17;
        for i in 0..n {
            w.push(&format!("r{i}"), Some(20_000), &body(i)).unwrap();
        }
        let mut files = w.finish().unwrap().files;
        // Appended parts keep the encoding, although these reports are all distinct.
        let mut a = ReportsWriter::append(&col).unwrap();
        for i in 1_000_000..1_000_000 + WRITE_ROWS {
            a.push(&format!("r{i}"), Some(20_001), &body(i)).unwrap();
        }
        files.extend(a.finish().unwrap().files);
        let mut read = 0;
        for f in &files {
            assert_eq!(existing_bodies(f.parent().unwrap().parent().unwrap()).unwrap(), Some(Bodies::Dictionary));
            let schema = ParquetRecordBatchReaderBuilder::try_new(File::open(f).unwrap()).unwrap().schema().clone();
            assert_eq!(schema.field_with_name("body").unwrap().data_type(), &body_type(Bodies::Dictionary));
            assert!(body_has_dictionary_page(f));
            for_each_row(f, &mut |r| {
                let i: usize = r.id[1..].parse().unwrap();
                assert_eq!(r.body, &body(i)[..]);
                read += 1;
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(read, n + WRITE_ROWS);
        // Reports of a domain of 20,000 values: about 19,000 distinct in the 65,536 rows the
        // writer looks at, 29%: a dictionary, whose row groups are long.
        let col = dir.join("collection=d");
        let mut w = ReportsWriter::create(&col).unwrap();
        for i in 0..2 * SAMPLE_ROWS {
            w.push(&format!("r{i}"), None, &((i * 7919) % 20_000).to_le_bytes()[..4]).unwrap();
        }
        let files = w.finish().unwrap().files;
        assert_eq!(existing_bodies(&col).unwrap(), Some(Bodies::Dictionary));
        let meta = ParquetRecordBatchReaderBuilder::try_new(File::open(&files[0]).unwrap()).unwrap().metadata().clone();
        assert_eq!((meta.num_row_groups(), meta.row_group(0).num_rows()), (1, 2 * SAMPLE_ROWS as i64));
        // Distinct reports (the round-trip test's): plain.
        let distinct = BinaryArray::from_iter_values((0..WRITE_ROWS as u32).map(|i| i.to_le_bytes()));
        assert_eq!(Bodies::of(&distinct), Bodies::Plain);
        let few = BinaryArray::from_iter_values((0..63u32).map(|_| [1u8]));
        assert_eq!(Bodies::of(&few), Bodies::Plain, "fewer than 64 rows");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Writes reports 0..n (ids `r{i}`, two days) under `col`, checks the writer chose `bodies`,
    /// and reads every report back to its bytes.
    fn write_read_back(col: &Path, n: u64, report: &dyn Fn(u64) -> Vec<u8>, bodies: Bodies) {
        let mut w = ReportsWriter::create(col).unwrap();
        for i in 0..n {
            w.push(&format!("r{i}"), Some(20_000 + (i % 2) as i32), &report(i)).unwrap();
        }
        let files = w.finish().unwrap().files;
        assert_eq!(existing_bodies(col).unwrap(), Some(bodies));
        let mut read = 0;
        for f in &files {
            for_each_row(f, &mut |r| {
                assert_eq!(r.body, report(r.id[1..].parse().unwrap()));
                read += 1;
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(read, n);
    }

    #[test]
    fn distinct_olh_reports_are_written_as_fields_and_read_back_as_bytes() {
        let dir = std::env::temp_dir().join(format!("harmony-reports-olh-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let col = dir.join("collection=o");
        // Seeds of every varint length (1 to 10 bytes), y up to 2^31 - 1.
        let report = |i: u64| {
            let seed = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (i % 64);
            wire::encode(&OlhReport { seed, y: (i * 2_654_435_761 % (1 << 31)) as u32 })
        };
        write_read_back(&col, SAMPLE_ROWS as u64 + 3 * WRITE_ROWS as u64 + 5, &report, Bodies::OlhFields);
        // Appended parts keep the fields; a report that is not a canonical OLH report (another
        // kind, or an overlong varint that decodes to the same report) is refused by its id.
        let olh = wire::encode(&OlhReport { seed: 5, y: 1 });
        let overlong = [&olh[..2], &[0x85, 0x00, 0x01]].concat();
        assert_eq!(OlhReport::decode_fast(&overlong), Some(OlhReport { seed: 5, y: 1 }));
        for bad in [vec![1u8, 2, 3], overlong] {
            let mut a = ReportsWriter::append(&col).unwrap();
            a.push("good", Some(20_003), &olh).unwrap();
            a.push("bad one", Some(20_003), &bad).unwrap();
            let err = a.finish().unwrap_err().to_string();
            assert!(err.contains("report \"bad one\" is not an OLH report"), "{err}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn one_attribute_records_are_written_as_fields_and_read_back_as_bytes() {
        let dir = std::env::temp_dir().join(format!("harmony-reports-rec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let col = dir.join("collection=m");
        // Units of both signs and every zigzag varint length.
        let report = |i: u64| {
            let units = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (i % 64)) as i64;
            wire::encode(&RecordReport::one_fixed((i % 3) as u32, if i.is_multiple_of(2) { units } else { -units }))
        };
        write_read_back(&col, SAMPLE_ROWS as u64 + WRITE_ROWS as u64 + 3, &report, Bodies::RecordFields);
        // A record of two attributes is refused by its id.
        let mut two = RecordReport::one_fixed(0, 5);
        two.attributes.push((1, two.attributes[0].1.clone()));
        let mut a = ReportsWriter::append(&col).unwrap();
        a.push("two", Some(20_001), &wire::encode(&two)).unwrap();
        let err = a.finish().unwrap_err().to_string();
        assert!(err.contains("report \"two\" is not a one-attribute fixed-point record"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
