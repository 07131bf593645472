//! Tables for Harmony: reading CSV (plain or `.xz`), Parquet and Arrow IPC (file and stream),
//! the schema file, encoding rows to the randomizers' values, and schema inference.
//!
//! # Streaming
//! [`DataReader`] yields batches of a few thousand rows; [`encode_rows`] encodes each batch
//! straight into the row-major values a task's `Input::Record` borrows ([`Encoded`]), and
//! [`encode_batches`] into one vector per attribute ([`Columns`]), so a 10⁷-row file is never
//! held as rows of strings. Parquet reads only the schema's columns. An `.xz` file is decompressed on a
//! second thread as it is parsed.
//!
//! # Missing cells
//! A cell is missing when it is empty, a missing token ([`DEFAULT_MISSING_TOKENS`], or the
//! schema's `missing_tokens`), a null or a NaN. The encoder sees "missing", never an empty
//! string: a categorical attribute that lists `?` counts it there; otherwise it is a bad cell
//! for the [`InvalidPolicy`].
//!
//! # Example
//! ```
//! use harmony_data::{DataReader, EncodeOptions, encode_batches};
//! use harmony_core::schema::{Attribute, ColumnValues, Schema};
//! let csv = b"age,sex\n30,F\n50,M\n".to_vec();
//! let mut reader = DataReader::from_bytes("people.csv", csv).unwrap();
//! let schema = Schema::new(vec![
//!     Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
//!     Attribute::Categorical { name: "sex".into(), categories: vec!["F".into(), "M".into()] },
//! ])
//! .unwrap();
//! let cols = encode_batches(&mut reader, &schema, &EncodeOptions::default()).unwrap();
//! assert_eq!(cols.columns[0], ColumnValues::Unit(vec![-0.4, 0.0]));
//! assert_eq!(cols.columns[1], ColumnValues::Category(vec![0, 1]));
//! ```
#![deny(missing_docs)]

mod cells;
mod encode;
mod error;
pub mod fixtures;
mod format;
pub mod infer;
mod names;
mod parquet_source;
mod reader;
pub mod reports;
mod schema_file;
mod table;
pub mod temporal;

pub use cells::{Cells, SUPPORTED, Text};
pub use encode::{Columns, EncodeOptions, Encoded, columns_from_rows, encode_batches, encode_rows};
pub use error::{Error, Result};
pub use format::{Format, sniff};
pub use infer::{InferOptions, Inference, infer, infer_batches, infer_path};
pub use names::unique_names;
pub use reader::{BATCH_ROWS, Batch, Batches, DataReader, open_text};
pub use schema_file::{DEFAULT_MISSING_TOKENS, InvalidPolicy, MissingTokens, SchemaFile};
pub use table::{Table, encode, read_table};
pub use temporal::Unit;

use std::path::Path;

/// A table read and encoded for a simulation.
pub struct Loaded {
    /// The schema file (given, or inferred).
    pub file: SchemaFile,
    /// The encoded rows.
    pub encoded: Encoded,
    /// The inference, when no schema was given.
    pub inference: Option<Inference>,
    /// The data's format.
    pub format: Format,
}

/// Reads `path` (any format; `-` = standard input) into encoded rows against `schema`, or,
/// without one, against a schema inferred in a first pass over the data (standard input is
/// then read into memory once for the two passes).
pub fn load(path: &Path, schema: Option<SchemaFile>, options: &InferOptions) -> Result<Loaded> {
    let (file, encoded, inference, format) = load_with(path, schema, options, encode_rows)?;
    Ok(Loaded { file, encoded, inference, format })
}

/// A table read and encoded by attribute (one column per schema attribute).
pub struct LoadedColumns {
    /// The schema file (given, or inferred).
    pub file: SchemaFile,
    /// The encoded columns.
    pub columns: Columns,
    /// The inference, when no schema was given.
    pub inference: Option<Inference>,
}

/// [`load`], by attribute ([`encode_batches`]): what a columnar simulation holds (8 bytes per
/// number, 4 per category), never a `Value` per cell.
pub fn load_columns(path: &Path, schema: Option<SchemaFile>, options: &InferOptions) -> Result<LoadedColumns> {
    let (file, columns, inference, _) = load_with(path, schema, options, encode_batches)?;
    Ok(LoadedColumns { file, columns, inference })
}

type Encoder<T> = fn(&mut dyn Batches, &harmony_core::schema::Schema, &EncodeOptions) -> Result<T>;

fn load_with<T>(
    path: &Path,
    schema: Option<SchemaFile>,
    options: &InferOptions,
    encode: Encoder<T>,
) -> Result<(SchemaFile, T, Option<Inference>, Format)> {
    let stdin_bytes = if schema.is_none() && path == Path::new("-") {
        let mut all = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut all)
            .map_err(|source| Error::Io { path: "-".into(), source })?;
        Some(bytes::Bytes::from(all))
    } else {
        None
    };
    let open = || match &stdin_bytes {
        Some(b) => DataReader::from_shared("-", b.clone()),
        None => DataReader::open(path),
    };
    let (file, inference) = match schema {
        Some(f) => (f, None),
        None => {
            let mut reader = open()?;
            let mut inf = infer_batches(&mut reader, options)?;
            inf.warnings.splice(0..0, reader.notes().iter().cloned());
            (inf.file.clone(), Some(inf))
        }
    };
    let mut reader = open()?;
    let format = reader.format();
    let encoded = encode(&mut reader, &file.schema()?, &file.encode_options())?;
    Ok((file, encoded, inference, format))
}
