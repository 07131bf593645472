//! Reading data: a facade over `harmony-data` (tables in CSV, .csv.xz, Parquet or Arrow IPC;
//! the schema file; encoding; inference), so call sites keep their names.

pub use harmony_data::{Encoded, InvalidPolicy, SchemaFile};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The environment variable naming a directory that holds the bundled `data/` and `examples/`
/// (a checkout of this repository), for a `harmony` installed away from its sources.
pub const DATA_DIR_ENV: &str = "HARMONY_DATA_DIR";

/// A bundled file (`data/adult.csv`, `examples/adult.toml`, …): under `$HARMONY_DATA_DIR` when
/// it is set, else in the current directory if it has it, else in the repository this binary
/// was built from (`cargo install --path crates/harmony-cli` keeps that path). When none of
/// them has the file, a note on stderr names the places looked at and what to pass instead;
/// the returned path then fails to open with an error naming it.
pub fn bundled(rel: &str) -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = crate_dir.ancestors().nth(2).unwrap_or(crate_dir).join(rel);
    let candidates = match std::env::var_os(DATA_DIR_ENV) {
        Some(dir) => vec![PathBuf::from(dir).join(rel)],
        None => vec![PathBuf::from(rel), source],
    };
    if let Some(found) = candidates.iter().find(|p| p.exists()) {
        return found.clone();
    }
    let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    eprintln!(
        "note: the bundled {rel} is not at {}: set {DATA_DIR_ENV} to a checkout of Harmony, or \
         pass your own table with --data FILE (and its schema with --schema FILE.toml)",
        looked.join(" nor at ")
    );
    candidates.into_iter().last().expect("one candidate at least")
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
