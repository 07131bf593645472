//! Reading data: a facade over `harmony-data` (tables in CSV, .csv.xz, Parquet or Arrow IPC;
//! the schema file; encoding; inference), so call sites keep their names.

pub use harmony_data::{Encoded, InvalidPolicy, SchemaFile, Table, encode, infer};
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

/// Reads a whole table as text, whatever its format (CSV, .csv.xz, Parquet, Arrow IPC; `-` =
/// standard input). The name is historical: see [`harmony_data::read_table`].
pub fn read_csv(path: &Path) -> harmony_data::Result<Table> {
    harmony_data::read_table(path)
}

/// Opens CSV text for a command that parses it itself: `-` = standard input, `.xz` decompressed
/// as it is read. A Parquet or Arrow file is an error saying so.
pub fn open_data(path: &Path) -> harmony_data::Result<Box<dyn Read + Send>> {
    harmony_data::open_text(path)
}
