//! The same table read from CSV, Parquet (snappy, zstd, lz4, uncompressed; plain and
//! dictionary strings) and Arrow IPC (file and stream) encodes to the same columns; Arrow types
//! are read by name and type; bad files give one error naming the column and the problem.

use arrow_array::builder::{Int64Builder, ListBuilder};
use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Float64Array, Int32Array, LargeStringArray, RecordBatch, StringArray,
    StringViewArray, TimestampMillisecondArray,
};
use harmony_core::schema::ColumnValues;
use harmony_data::fixtures::{table_batch, write_ipc, write_parquet};
use harmony_data::{Batches, Columns, DataReader, Format, SchemaFile, encode_batches, read_table};
use parquet::basic::{Compression, ZstdLevel};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

fn encode_path(path: &Path, file: &SchemaFile) -> harmony_data::Result<Columns> {
    let mut r = DataReader::open(path)?;
    encode_batches(&mut r, &file.schema()?, &file.encode_options())
}

fn tmp() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "harmony-data-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn adult_reads_the_same_from_csv_parquet_and_arrow() {
    let file = SchemaFile::load(&repo("examples/adult.toml")).unwrap();
    let csv = encode_path(&repo("data/adult.csv"), &file).unwrap();
    assert_eq!((csv.n, csv.skipped), (48_842, 0));
    let table = read_table(&repo("data/adult.csv")).unwrap();
    let dir = tmp();
    let cases: Vec<(&str, Compression, bool)> = vec![
        ("snappy-dict.parquet", Compression::SNAPPY, true),
        ("zstd.parquet", Compression::ZSTD(ZstdLevel::default()), false),
        ("lz4.parquet", Compression::LZ4_RAW, true),
        ("plain.parquet", Compression::UNCOMPRESSED, false),
    ];
    for (name, codec, dict) in cases {
        let path = dir.join(name);
        let batch = table_batch(&table, &file, dict).unwrap();
        // Several row groups and batches: 48,842 rows in groups of 10,000.
        write_parquet(&path, [batch], codec, 10_000).unwrap();
        let mut r = DataReader::open(&path).unwrap();
        assert_eq!((r.format(), r.rows_hint()), (Format::Parquet, Some(48_842)));
        let got = encode_batches(&mut r, &file.schema().unwrap(), &file.encode_options()).unwrap();
        assert!(got == csv, "{name}: columns differ from the CSV's");
    }
    let batch = table_batch(&table, &file, true).unwrap();
    let parts: Vec<RecordBatch> = (0..5).map(|k| batch.slice(k * 10_000, (48_842 - k * 10_000).min(10_000))).collect();
    for (name, stream, format) in [("a.arrow", false, Format::ArrowFile), ("a.arrows", true, Format::ArrowStream)] {
        let path = dir.join(name);
        write_ipc(&path, &parts, stream).unwrap();
        let mut r = DataReader::open(&path).unwrap();
        assert_eq!(r.format(), format);
        assert!(encode_batches(&mut r, &file.schema().unwrap(), &file.encode_options()).unwrap() == csv, "{name}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

const TYPED_SCHEMA: &str = r#"
[units]
day = "days"
at = "seconds"
[[attributes]]
name = "n"
kind = "numeric"
min = 0
max = 10
[[attributes]]
name = "day"
kind = "numeric"
min = 0
max = 20000
[[attributes]]
name = "at"
kind = "numeric"
min = 0
max = 2e9
[[attributes]]
name = "flag"
kind = "categorical"
categories = ["?", "false", "true"]
[[attributes]]
name = "code"
kind = "categorical"
categories = ["?", "1", "7"]
[[attributes]]
name = "large"
kind = "categorical"
categories = ["?", "a", "b"]
[[attributes]]
name = "view"
kind = "categorical"
categories = ["?", "a", "b"]
"#;

fn typed_batch() -> RecordBatch {
    let cols: Vec<(&str, ArrayRef)> = vec![
        ("n", Arc::new(Float64Array::from(vec![Some(0.0), Some(5.0), Some(f64::NAN), Some(10.0)]))),
        ("day", Arc::new(Date32Array::from(vec![Some(0), Some(10_000), None, Some(20_000)]))),
        (
            "at",
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(0),
                Some(1_000_000_000_000),
                None,
                Some(2_000_000_000_000),
            ])),
        ),
        ("flag", Arc::new(BooleanArray::from(vec![Some(true), Some(false), None, None]))),
        ("code", Arc::new(Int32Array::from(vec![Some(7), Some(1), None, None]))),
        ("large", Arc::new(LargeStringArray::from(vec![Some("a"), Some(" b "), None, Some("NA")]))),
        ("view", Arc::new(StringViewArray::from(vec![Some("b"), Some("a"), Some(""), None]))),
    ];
    RecordBatch::try_from_iter(cols).unwrap()
}

#[test]
fn arrow_types_are_read_by_name_and_type() {
    let mut file: SchemaFile = toml::from_str(TYPED_SCHEMA).unwrap();
    let dir = tmp();
    let path = dir.join("typed.arrow");
    write_ipc(&path, &[typed_batch()], false).unwrap();
    // Record 3's numbers are missing (a NaN, nulls): an error names it, or it is skipped.
    let e = encode_path(&path, &file).unwrap_err().to_string();
    assert!(e.contains("typed.arrow: record 3, column \"n\"") && e.contains("missing"), "{e}");
    file.invalid = harmony_data::InvalidPolicy::Skip;
    let cols = encode_path(&path, &file).unwrap();
    assert_eq!((cols.n, cols.skipped), (3, 1));
    let unit = ColumnValues::Unit(vec![-1.0, 0.0, 1.0]);
    assert_eq!(&cols.columns[..3], &[unit.clone(), unit.clone(), unit]);
    // Booleans, integers and strings as labels; nulls, "" and "NA" as the category "?".
    assert_eq!(cols.columns[3], ColumnValues::Category(vec![2, 1, 0]));
    assert_eq!(cols.columns[4], ColumnValues::Category(vec![2, 1, 0]));
    assert_eq!(cols.columns[5], ColumnValues::Category(vec![1, 2, 0]));
    assert_eq!(cols.columns[6], ColumnValues::Category(vec![2, 1, 0]));
    // A date column needs a unit in the schema.
    file.units.remove("day");
    let e = encode_path(&path, &file).unwrap_err().to_string();
    assert!(e.contains("column \"day\" holds dates") && e.contains("[units]"), "{e}");
    // As text (read_table), dates and timestamps are ISO 8601.
    let t = read_table(&path).unwrap();
    assert_eq!(t.rows[1][1..3], ["1997-05-19".to_string(), "2001-09-09T01:46:40Z".to_string()]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn csv_dates_are_read_in_the_schema_unit() {
    let csv = "n,day,at,flag,code,large,view\n0,1970-01-01,1970-01-01T00:00:00Z,true,7,a,b\n\
               5,1997-05-19,2001-09-09T03:46:40+02:00,false,1,b,a\n10,2024-10-04,2033-05-18 03:33:20,,NA,?,\n";
    let file: SchemaFile = toml::from_str(TYPED_SCHEMA).unwrap();
    let mut r = DataReader::from_bytes("typed.csv", csv.as_bytes().to_vec()).unwrap();
    let cols = encode_batches(&mut r, &file.schema().unwrap(), &file.encode_options()).unwrap();
    let unit = ColumnValues::Unit(vec![-1.0, 0.0, 1.0]);
    assert_eq!(&cols.columns[..3], &[unit.clone(), unit.clone(), unit]);
    assert_eq!(cols.columns[3], ColumnValues::Category(vec![2, 1, 0]));
    let e = encode_path(Path::new("/nonexistent/x.csv"), &file).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/x.csv"), "{e}");
}

/// A Parquet file with a List column, read for a schema that names it: one error naming the
/// column and its type. A schema naming a column the file lacks: one error naming it.
#[test]
fn parquet_unsupported_type_and_missing_column() {
    let dir = tmp();
    let path = dir.join("list.parquet");
    let mut list = ListBuilder::new(Int64Builder::new());
    for i in 0..3 {
        list.values().append_value(i);
        list.append(true);
    }
    let cols: Vec<(&str, ArrayRef)> =
        vec![("x", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0]))), ("tags", Arc::new(list.finish()))];
    write_parquet(&path, [RecordBatch::try_from_iter(cols).unwrap()], Compression::SNAPPY, 1000).unwrap();
    let schema = |col: &str| -> SchemaFile {
        toml::from_str(&format!("[[attributes]]\nname = \"{col}\"\nkind = \"numeric\"\nmin = 0\nmax = 5\n")).unwrap()
    };
    assert_eq!(encode_path(&path, &schema("x")).unwrap().n, 3, "the other column reads fine");
    let e = encode_path(&path, &schema("tags")).unwrap_err().to_string();
    assert!(
        e.contains("list.parquet") && e.contains("column \"tags\"") && e.contains("List") && e.contains("cannot read"),
        "{e}"
    );
    let e = encode_path(&path, &schema("age")).unwrap_err().to_string();
    assert!(e.contains("no column \"age\"") && e.contains("columns: x, tags"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Bytes of a Parquet data page overwritten: one error naming the column, its row group and
/// records, and the decoder's complaint; the columns before it are not blamed.
#[test]
fn parquet_corrupt_page_names_the_column() {
    let dir = tmp();
    let path = dir.join("corrupt.parquet");
    let n = 50_000;
    let cols: Vec<(&str, ArrayRef)> = vec![
        ("a", Arc::new(Float64Array::from((0..n).map(|i| (i % 100) as f64).collect::<Vec<_>>()))),
        ("b", Arc::new(StringArray::from((0..n).map(|i| format!("label-{}", i % 7)).collect::<Vec<_>>()))),
        ("c", Arc::new(Int32Array::from((0..n).map(|i| i % 13).collect::<Vec<_>>()))),
    ];
    write_parquet(&path, [RecordBatch::try_from_iter(cols).unwrap()], Compression::SNAPPY, 20_000).unwrap();
    // Corrupt column c's chunk in row group 1 (records 20001–40000).
    let meta = parquet::file::reader::FileReader::metadata(
        &parquet::file::serialized_reader::SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap(),
    )
    .clone();
    let chunk = meta.row_group(1).column(2);
    let (start, len) = chunk.byte_range();
    let mut bytes = std::fs::read(&path).unwrap();
    for b in &mut bytes[start as usize + 2..(start + len) as usize - 2] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let file: SchemaFile = toml::from_str(
        "[[attributes]]\nname = \"a\"\nkind = \"numeric\"\nmin = 0\nmax = 100\n\
         [[attributes]]\nname = \"c\"\nkind = \"numeric\"\nmin = 0\nmax = 100\n",
    )
    .unwrap();
    let e = encode_path(&path, &file).unwrap_err().to_string();
    assert!(
        e.contains("corrupt.parquet: column \"c\" (row group 1, records 20001–40000)")
            && e.contains("cannot be decoded"),
        "{e}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// The fuzz tier's schema_csv crash: an xz stream whose footer's backward size is u32::MAX
/// overflowed lzma-rs's `backward_size + 1` (a panic with overflow checks). Every build refuses
/// the file with an error instead.
#[test]
fn an_xz_footer_that_overflows_is_an_error() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/xz_footer_overflow.csv.xz");
    let bytes = std::fs::read(&path).unwrap();
    let result = std::panic::catch_unwind(|| {
        let mut r = harmony_data::DataReader::from_bytes("data.csv.xz", bytes)?;
        harmony_data::infer_batches(&mut r, &harmony_data::InferOptions::default()).map(|_| ())
    });
    let outcome = result.expect("no panic");
    assert!(outcome.is_err(), "a corrupt xz stream is refused");
}

/// The fuzz tier's schema_csv out-of-memory: 8 bytes sniffed as an Arrow IPC stream whose first
/// message declared 0x5b03ffff bytes of metadata made arrow allocate 1.5 GB. Refused first.
#[test]
fn an_ipc_stream_declaring_huge_metadata_is_refused_before_allocating() {
    let bytes = vec![0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x03, 0x5B];
    let e = match DataReader::from_bytes("data.txt", bytes) {
        Ok(_) => panic!("an 8-byte IPC stream opened"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("1526988799 bytes of metadata"), "{e}");
}
