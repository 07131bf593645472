//! Reading data: a facade over `harmony-data` (tables in CSV, .csv.xz, Parquet or Arrow IPC;
//! the schema file; encoding; inference), so call sites keep their names.

pub use harmony_data::{Encoded, InvalidPolicy, SchemaFile};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The directory holding the bundled `data/` and `examples/`: the current directory if it has
/// them, else the repository this binary was built from.
pub fn bundled(rel: &str) -> PathBuf {
    let here = PathBuf::from(rel);
    if here.exists() {
        return here;
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(rel)
}

/// Reads a table (any format; `-` = standard input) and encodes it against `schema`, row-major,
/// batch by batch: the table is never held as text (what `submit`, `query --data` and training
/// collections read).
pub fn encode_file(
    path: &Path,
    schema: &harmony_core::schema::Schema,
    policy: InvalidPolicy,
) -> harmony_data::Result<Encoded> {
    encode_file_with(path, schema, &harmony_data::EncodeOptions::with_policy(policy))
}

/// [`encode_file`] with every option (the columns read, missing tokens, units); notes on how
/// the file was read (a delimiter other than the comma, renamed columns) go to stderr.
pub fn encode_file_with(
    path: &Path,
    schema: &harmony_core::schema::Schema,
    options: &harmony_data::EncodeOptions,
) -> harmony_data::Result<Encoded> {
    let mut reader = harmony_data::DataReader::open(path)?;
    for note in reader.notes() {
        eprintln!("note: {note}");
    }
    harmony_data::encode_rows(&mut reader, schema, options)
}

/// Opens CSV text for a command that parses it itself: `-` = standard input, `.xz` decompressed
/// as it is read. A Parquet or Arrow file is read whole through `harmony-data` and given as CSV
/// text (nulls as empty fields).
pub fn open_data(path: &Path) -> harmony_data::Result<Box<dyn Read + Send>> {
    harmony_data::open_text(path)
}
