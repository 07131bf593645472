//! Reading a table in batches: CSV (plain or xz), Parquet, Arrow IPC file or stream. A batch
//! holds a few thousand rows; nothing holds the whole table.

use crate::cells::{Cells, Text, arrow_cells};
use crate::error::{Error, Result};
use crate::format::{Format, XzReader, read_head, sniff};
use crate::names::unique_names;
use crate::parquet_source::ParquetSource;
use arrow_array::RecordBatch;
use arrow_schema::ArrowError;
use std::fs::File;
use std::io::{Read, Seek};
use std::path::Path;

/// Rows per batch.
pub const BATCH_ROWS: usize = 16 * 1024;

/// Rows per CSV batch: fewer, since a batch is encoded column by column and each CSV record is
/// its own allocation; 1,024 records of a wide table (~0.7 MB for Census-Income's 42 columns)
/// stay in a 1 MiB L2 cache across the columns, 16,384 did not (Census simulate: 2.6x slower).
const CSV_BATCH_ROWS: usize = 1024;

/// Where a batch's rows come from, for naming a row in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowNames {
    /// Text rows after a header: record k is "row k + 2" (the header is row 1).
    Text,
    /// Arrow records: record k is "record k + 1".
    Records,
}

/// A few thousand rows of a table.
pub struct Batch<'a> {
    data: BatchData<'a>,
    first: usize,
    len: usize,
}

enum BatchData<'a> {
    Csv(&'a [csv::StringRecord]),
    Rows(&'a [Vec<String>]),
    Arrow { batch: &'a RecordBatch, map: &'a [Option<usize>], names: &'a [String] },
}

impl<'a> Batch<'a> {
    /// A batch of rows held as strings (the legacy [`Table`](crate::Table)).
    pub(crate) fn rows(rows: &'a [Vec<String>], first: usize) -> Self {
        Batch { data: BatchData::Rows(rows), first, len: rows.len() }
    }
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Column `col` (an index into the reader's header). Errors: an unsupported Arrow type,
    /// or a column not selected (a bug).
    pub fn cells(&self, col: usize) -> Result<Cells<'a>> {
        match self.data {
            BatchData::Csv(rows) => Ok(Cells::Text(Text::Csv(rows, col))),
            BatchData::Rows(rows) => Ok(Cells::Text(Text::Rows(rows, col))),
            BatchData::Arrow { batch, map, names } => {
                let k = map[col].ok_or_else(|| Error::data(format!("column \"{}\" was not selected", names[col])))?;
                arrow_cells(batch.column(k).as_ref(), &names[col])
            }
        }
    }
    /// How messages name row `i` of this batch: `row N` for text (the header is row 1),
    /// `record N` (1-based) for Parquet and Arrow.
    pub fn row_name(&self, i: usize) -> String {
        match self.row_names() {
            RowNames::Text => format!("row {}", self.first + i + 2),
            RowNames::Records => format!("record {}", self.first + i + 1),
        }
    }
    fn row_names(&self) -> RowNames {
        match self.data {
            BatchData::Csv(_) | BatchData::Rows(_) => RowNames::Text,
            BatchData::Arrow { .. } => RowNames::Records,
        }
    }
}

/// A source of batches: a [`DataReader`] or a [`Table`](crate::Table).
pub trait Batches {
    /// The column names (unique, non-empty).
    fn header(&self) -> &[String];
    /// The source's name for messages (the path, `-` for standard input).
    fn name(&self) -> &str;
    /// Reads only these columns where the format allows it (before the first batch).
    fn select(&mut self, _columns: &[usize]) {}
    /// The number of rows, when the format says so up front.
    fn rows_hint(&self) -> Option<usize> {
        None
    }
    /// The next batch, or `None` at the end.
    fn next_batch(&mut self) -> Result<Option<Batch<'_>>>;
}

/// Reads any supported file in batches (see [`Format`]).
pub struct DataReader {
    name: String,
    format: Format,
    header: Vec<String>,
    notes: Vec<String>,
    source: Source,
    next_row: usize,
}

enum Source {
    Csv {
        rdr: csv::Reader<Box<dyn Read + Send>>,
        records: Vec<csv::StringRecord>,
    },
    Ipc {
        batches: Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>> + Send>,
        current: Option<RecordBatch>,
        map: Vec<Option<usize>>,
    },
    Parquet(ParquetSource),
}

/// An input: a file, or bytes already read (standard input).
pub(crate) enum Input {
    File(File),
    Bytes(bytes::Bytes),
}

impl DataReader {
    /// Opens `path` (`-` = standard input), detecting the format. Standard input is streamed
    /// for CSV and Arrow streams, read whole for Parquet and Arrow files (they need seeking).
    pub fn open(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let io = |source| Error::Io { path: name.clone(), source };
        if path == Path::new("-") {
            let mut stdin = std::io::stdin();
            let head = read_head(&mut stdin).map_err(io)?;
            let format = sniff(&head, &name)?;
            if matches!(format, Format::Parquet | Format::ArrowFile) {
                let mut all = head;
                stdin.read_to_end(&mut all).map_err(io)?;
                return Self::from_input(name, format, Input::Bytes(all.into()));
            }
            let stream: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(head).chain(stdin));
            return Self::from_stream(name, format, stream);
        }
        let mut file = File::open(path).map_err(io)?;
        let head = read_head(&mut file).map_err(io)?;
        let format = sniff(&head, &name)?;
        file.rewind().map_err(io)?;
        match format {
            Format::Parquet | Format::ArrowFile => Self::from_input(name, format, Input::File(file)),
            _ => Self::from_stream(name, format, Box::new(std::io::BufReader::with_capacity(1 << 20, file))),
        }
    }

    /// Reads bytes already in memory (a whole file of any format), named `name` in messages.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<Self> {
        Self::from_shared(name, bytes.into())
    }

    /// [`DataReader::from_bytes`] for shared bytes (cloning them is free).
    pub fn from_shared(name: &str, bytes: bytes::Bytes) -> Result<Self> {
        let format = sniff(&bytes[..bytes.len().min(crate::format::SNIFF_LEN)], name)?;
        match format {
            Format::Parquet | Format::ArrowFile => Self::from_input(name.to_string(), format, Input::Bytes(bytes)),
            _ => Self::from_stream(name.to_string(), format, Box::new(std::io::Cursor::new(bytes))),
        }
    }

    fn from_stream(name: String, format: Format, stream: Box<dyn Read + Send>) -> Result<Self> {
        match format {
            Format::Csv => Self::csv(name, format, stream),
            Format::CsvXz => Self::csv(name, format, Box::new(XzReader::new(stream))),
            Format::ArrowStream => {
                let stream = check_ipc_head(&name, stream)?;
                let reader = arrow_ipc::reader::StreamReader::try_new(stream, None)
                    .map_err(|e| Error::data(format!("{name}: not a readable Arrow IPC stream ({e})")))?;
                let fields: Vec<String> = reader.schema().fields().iter().map(|f| f.name().clone()).collect();
                Ok(Self::ipc(name, format, fields, Box::new(reader)))
            }
            Format::Parquet | Format::ArrowFile => unreachable!("seekable formats are opened by from_input"),
        }
    }

    fn from_input(name: String, format: Format, input: Input) -> Result<Self> {
        if format == Format::Parquet {
            let (source, fields) = ParquetSource::open(&name, input)?;
            let (header, notes) = unique_names(&fields);
            return Ok(DataReader { name, format, header, notes, source: Source::Parquet(source), next_row: 0 });
        }
        let bad = |e: ArrowError| Error::data(format!("{name}: not a readable Arrow IPC file ({e})"));
        let (fields, batches): (Vec<String>, Box<dyn Iterator<Item = _> + Send>) = match input {
            Input::File(f) => {
                let r = arrow_ipc::reader::FileReader::try_new_buffered(f, None).map_err(bad)?;
                (r.schema().fields().iter().map(|f| f.name().clone()).collect(), Box::new(r))
            }
            Input::Bytes(b) => {
                let r = arrow_ipc::reader::FileReader::try_new(std::io::Cursor::new(b), None).map_err(bad)?;
                (r.schema().fields().iter().map(|f| f.name().clone()).collect(), Box::new(r))
            }
        };
        Ok(Self::ipc(name, format, fields, batches))
    }

    fn ipc(
        name: String,
        format: Format,
        fields: Vec<String>,
        batches: Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>> + Send>,
    ) -> Self {
        let (header, notes) = unique_names(&fields);
        let map = (0..header.len()).map(Some).collect();
        DataReader { name, format, header, notes, source: Source::Ipc { batches, current: None, map }, next_row: 0 }
    }

    fn csv(name: String, format: Format, stream: Box<dyn Read + Send>) -> Result<Self> {
        let mut stream = std::io::BufReader::with_capacity(1 << 16, stream);
        let head =
            std::io::BufRead::fill_buf(&mut stream).map_err(|source| Error::Io { path: name.clone(), source })?;
        let first_line = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
        let delimiter = delimiter_of(first_line);
        let mut notes = Vec::new();
        if delimiter != b',' {
            notes.push(format!(
                "{name}: the header has no comma but {}: read as {}-delimited text",
                delimiter_name(delimiter),
                delimiter_name(delimiter)
            ));
        }
        let stream: Box<dyn Read + Send> = Box::new(stream);
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .trim(csv::Trim::All)
            .delimiter(delimiter)
            .from_reader(stream);
        let raw = rdr.headers().map_err(|e| Error::data(format!("{name}: reading the CSV header: {e}")))?.clone();
        if raw.is_empty() {
            return Err(Error::data(format!("{name}: empty input: expected a CSV header row")));
        }
        let (header, renamed) = unique_names(&raw.iter().collect::<Vec<_>>());
        notes.extend(renamed);
        let records = vec![csv::StringRecord::new(); CSV_BATCH_ROWS];
        Ok(DataReader { name, format, header, notes, source: Source::Csv { rdr, records }, next_row: 0 })
    }

    /// The detected format.
    pub fn format(&self) -> Format {
        self.format
    }
    /// Notes on renamed columns (empty or repeated header names).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
    /// The position of column `name`, or an error listing the columns.
    pub fn position(&self, name: &str) -> Result<usize> {
        position(&self.header, &self.name, name)
    }
}

/// Delimiters read besides the comma, when a header has no comma.
const OTHER_DELIMITERS: [u8; 3] = [b';', b'\t', b'|'];

/// The delimiter of CSV text whose header line is `line`: a comma, unless the line has no comma
/// outside quotes and has `;`, a tab or `|` (the most frequent of them).
fn delimiter_of(line: &[u8]) -> u8 {
    let mut counts = [0usize; 4];
    let mut quoted = false;
    for &b in line {
        match b {
            b'"' => quoted = !quoted,
            b',' if !quoted => counts[0] += 1,
            _ if !quoted => {
                if let Some(i) = OTHER_DELIMITERS.iter().position(|&d| d == b) {
                    counts[i + 1] += 1;
                }
            }
            _ => {}
        }
    }
    if counts[0] > 0 {
        return b',';
    }
    (0..3).filter(|&i| counts[i + 1] > 0).max_by_key(|&i| counts[i + 1]).map_or(b',', |i| OTHER_DELIMITERS[i])
}

/// A delimiter's name for messages.
fn delimiter_name(d: u8) -> &'static str {
    match d {
        b';' => "semicolons",
        b'\t' => "tabs",
        b'|' => "pipes",
        _ => "commas",
    }
}

/// The position of column `name` in `header`, or an error naming the source and the columns.
pub(crate) fn position(header: &[String], source: &str, name: &str) -> Result<usize> {
    header.iter().position(|h| h == name).ok_or_else(|| {
        let shown: Vec<&str> = header.iter().take(50).map(String::as_str).collect();
        let more = if header.len() > 50 { format!(", … ({} columns)", header.len()) } else { String::new() };
        Error::data(format!("{source}: the data has no column \"{name}\" (columns: {}{more})", shown.join(", ")))
    })
}

impl Batches for DataReader {
    fn header(&self) -> &[String] {
        &self.header
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn select(&mut self, columns: &[usize]) {
        if let Source::Parquet(p) = &mut self.source {
            p.select(columns);
        }
    }
    fn rows_hint(&self) -> Option<usize> {
        match &self.source {
            Source::Parquet(p) => Some(p.rows()),
            _ => None,
        }
    }
    fn next_batch(&mut self) -> Result<Option<Batch<'_>>> {
        let first = self.next_row;
        let name = &self.name;
        let (data, len) = match &mut self.source {
            Source::Csv { rdr, records } => {
                let width = self.header.len();
                let mut filled = 0;
                while filled < records.len() {
                    let more = rdr
                        .read_record(&mut records[filled])
                        .map_err(|e| Error::data(format!("{name}: reading row {}: {e}", first + filled + 2)))?;
                    if !more {
                        break;
                    }
                    let got = records[filled].len();
                    if got != width {
                        return Err(Error::data(format!(
                            "{name}: row {} has {got} fields, expected {width} (the header's column count)",
                            first + filled + 2
                        )));
                    }
                    filled += 1;
                }
                (BatchData::Csv(&records[..filled]), filled)
            }
            Source::Ipc { batches, current, map } => {
                *current = loop {
                    match batches.next().transpose().map_err(|e| {
                        Error::data(format!("{name}: reading the Arrow batch after record {first}: {e}"))
                    })? {
                        Some(b) if b.num_rows() == 0 => continue,
                        next => break next,
                    }
                };
                match current {
                    Some(b) => (BatchData::Arrow { batch: b, map, names: &self.header }, b.num_rows()),
                    None => return Ok(None),
                }
            }
            Source::Parquet(p) => match p.next(name, &self.header)? {
                Some((batch, map)) => (BatchData::Arrow { batch, map, names: &self.header }, batch.num_rows()),
                None => return Ok(None),
            },
        };
        if len == 0 {
            return Ok(None);
        }
        self.next_row += len;
        Ok(Some(Batch { data, first, len }))
    }
}

/// Opens CSV text (`-` = standard input; xz decompressed as it is read) for a caller that
/// parses it itself. A Parquet or Arrow file is read whole and given as CSV text (its header,
/// then every row, a null as an empty field).
pub fn open_text(path: &Path) -> Result<Box<dyn Read + Send>> {
    let name = path.display().to_string();
    let io = |source| Error::Io { path: name.clone(), source };
    let (mut input, head): (Box<dyn Read + Send>, Vec<u8>) = if path == Path::new("-") {
        let mut stdin = std::io::stdin();
        let head = read_head(&mut stdin).map_err(io)?;
        (Box::new(stdin), head)
    } else {
        let mut file = File::open(path).map_err(io)?;
        let head = read_head(&mut file).map_err(io)?;
        (Box::new(std::io::BufReader::with_capacity(1 << 20, file)), head)
    };
    let format = sniff(&head, &name)?;
    input = Box::new(std::io::Cursor::new(head).chain(input));
    match format {
        Format::Csv => Ok(input),
        Format::CsvXz => Ok(Box::new(XzReader::new(input))),
        Format::Parquet | Format::ArrowFile | Format::ArrowStream => {
            let mut all = Vec::new();
            input.read_to_end(&mut all).map_err(io)?;
            let table = crate::table::table_of(DataReader::from_bytes(&name, all)?, &name)?;
            Ok(Box::new(std::io::Cursor::new(crate::table::to_csv(&table)?)))
        }
    }
}

/// Largest metadata of an Arrow IPC stream's first message (its schema), bytes.
const MAX_IPC_METADATA: usize = 16 << 20;

/// Refuses an Arrow IPC stream whose first message declares metadata over
/// [`MAX_IPC_METADATA`] before arrow allocates it (an 8-byte file declaring 1.5 GB made arrow
/// allocate 1.5 GB: the fuzz tier's schema_csv); the stream is handed on unchanged otherwise.
fn check_ipc_head(name: &str, mut stream: Box<dyn Read + Send>) -> Result<Box<dyn Read + Send>> {
    let mut head = Vec::with_capacity(8);
    (&mut stream).take(8).read_to_end(&mut head).map_err(|e| Error::data(format!("{name}: {e}")))?;
    let len = match head.as_slice() {
        [0xFF, 0xFF, 0xFF, 0xFF, a, b, c, d] => i32::from_le_bytes([*a, *b, *c, *d]),
        [a, b, c, d, ..] => i32::from_le_bytes([*a, *b, *c, *d]),
        _ => 0,
    };
    if len < 0 || len as usize > MAX_IPC_METADATA {
        return Err(Error::data(format!(
            "{name}: not a readable Arrow IPC stream (its first message declares {len} bytes of metadata, expected 0 to {MAX_IPC_METADATA})"
        )));
    }
    Ok(Box::new(std::io::Cursor::new(head).chain(stream)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semicolon_tab_and_pipe_delimiters_are_detected_and_named() {
        for (d, name) in [(";", "semicolons"), ("\t", "tabs"), ("|", "pipes")] {
            let text = format!("age{d}sex{d}\"a,b\"\n30{d}F{d}x\n41{d}M{d}y\n");
            let mut r = DataReader::from_bytes("t.csv", text.into_bytes()).unwrap();
            assert_eq!(r.header(), ["age", "sex", "a,b"], "{name}");
            assert!(r.notes().iter().any(|n| n.contains(name) && n.contains("t.csv")), "{:?}", r.notes());
            let batch = r.next_batch().unwrap().unwrap();
            let Cells::Text(t) = batch.cells(1).unwrap() else { panic!("text cells") };
            assert_eq!((t.get(0), t.get(1)), (Some("F"), Some("M")));
        }
        let r = DataReader::from_bytes("c.csv", b"a,b;c\n1,2;3\n".to_vec()).unwrap();
        assert_eq!((r.header().len(), r.notes().len()), (2, 0), "a comma wins");
        assert_eq!(delimiter_of(b"\"x;y\""), b',', "quoted semicolons are text");
    }
}
