//! Read-and-encode time, side by side in one run (best of 3 each):
//! * CSV: the previous path of harmony-cli (whole table as `Vec<Vec<String>>`, then
//!   `Schema::encode` per cell; copied below verbatim but for error types) against the
//!   streaming reader, on Adult (data/adult.csv) and Census-Income (data/census_income_kdd.csv.xz);
//! * Parquet: 3×10⁶ synthetic rows, 5 columns (fixtures::synthetic), streaming reader, against
//!   the same table written as CSV (dates as ISO 8601 text) read by the same streaming reader.
//!
//! "Streaming" is `encode_rows` (row-major values, what `harmony simulate` and `submit` use);
//! the Parquet file is also timed with `encode_batches` (by attribute).
//!
//! `cargo run --release -p harmony-data --example read_speed`

use harmony_core::schema::{Schema, Value};
use harmony_data::fixtures::{Compression, synthetic, synthetic_schema, write_parquet};
use harmony_data::{DataReader, SchemaFile, encode_batches, encode_rows, read_table};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The previous `read_csv`: decompress .xz whole, every cell a `String`.
fn old_read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let reader: Box<dyn std::io::Read> = if path.extension().is_some_and(|e| e == "xz") {
        let mut raw = Vec::new();
        lzma_rs::xz_decompress(&mut std::io::BufReader::new(std::fs::File::open(path).unwrap()), &mut raw).unwrap();
        Box::new(std::io::Cursor::new(raw))
    } else {
        Box::new(std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path).unwrap()))
    };
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(reader);
    let header: Vec<String> = rdr.headers().unwrap().iter().map(|s| s.trim().to_string()).collect();
    let mut rows = Vec::new();
    for rec in rdr.records() {
        rows.push(rec.unwrap().iter().map(|s| s.trim().to_string()).collect::<Vec<String>>());
    }
    (header, rows)
}

/// The previous `encode` (policy "error").
fn old_encode(header: &[String], rows: &[Vec<String>], schema: &Schema) -> Vec<Value> {
    let cols: Vec<usize> =
        schema.attributes().iter().map(|a| header.iter().position(|h| h == a.name()).unwrap()).collect();
    let mut values = Vec::with_capacity(rows.len() * schema.len());
    for row in rows {
        for (j, &c) in cols.iter().enumerate() {
            let attr = &schema.attributes()[j];
            let raw = row[c].as_str();
            let raw = if raw.is_empty() && !attr.is_numeric() { "?" } else { raw };
            values.push(schema.encode(j, raw).unwrap());
        }
    }
    values
}

fn best_of_3(mut f: impl FnMut() -> usize) -> (f64, usize) {
    let mut best = f64::INFINITY;
    let mut n = 0;
    for _ in 0..3 {
        let t = Instant::now();
        n = f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, n)
}

fn new_path(path: &Path, file: &SchemaFile) -> usize {
    let mut r = DataReader::open(path).unwrap();
    encode_rows(&mut r, &file.schema().unwrap(), &file.encode_options()).unwrap().n
}

fn by_columns(path: &Path, file: &SchemaFile) -> usize {
    let mut r = DataReader::open(path).unwrap();
    encode_batches(&mut r, &file.schema().unwrap(), &file.encode_options()).unwrap().n
}

/// The table of `parquet` written as CSV.
fn to_csv(parquet: &Path, csv: &Path) {
    let table = read_table(parquet).unwrap();
    let mut w = csv::Writer::from_path(csv).unwrap();
    w.write_record(&table.header).unwrap();
    for row in &table.rows {
        w.write_record(row).unwrap();
    }
    w.flush().unwrap();
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (data, schema) in [
        ("data/adult.csv", "examples/adult.toml"),
        ("data/census_income_kdd.csv.xz", "examples/census_income_kdd.toml"),
    ] {
        let (data, file) = (root.join(data), SchemaFile::load(&root.join(schema)).unwrap());
        let schema = file.schema().unwrap();
        let (old, n_old) = best_of_3(|| {
            let (h, rows) = old_read_csv(&data);
            old_encode(&h, &rows, &schema).len() / schema.len()
        });
        let (new, n_new) = best_of_3(|| new_path(&data, &file));
        assert_eq!(n_old, n_new);
        println!(
            "{}: {n_new} rows x {} attributes: previous {old:.3} s, streaming {new:.3} s (previous/streaming = {:.2})",
            data.display(),
            schema.len(),
            old / new
        );
    }
    let dir = std::env::temp_dir().join(format!("harmony-read-speed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("synthetic.parquet");
    write_parquet(&path, synthetic(3_000_000, 1 << 16, 7), Compression::SNAPPY, 1 << 20).unwrap();
    let csv = dir.join("synthetic.csv");
    to_csv(&path, &csv);
    let file = synthetic_schema();
    let (t, n) = best_of_3(|| new_path(&path, &file));
    let (tc, _) = best_of_3(|| by_columns(&path, &file));
    let (t_csv, n_csv) = best_of_3(|| new_path(&csv, &file));
    assert_eq!(n, n_csv);
    let mb = |p: &Path| std::fs::metadata(p).unwrap().len() as f64 / 1e6;
    println!(
        "synthetic.parquet ({:.1} MB, snappy): {n} rows x 5 columns (Int64, Float64, Date32, dictionary strings, Boolean): rows {t:.3} s, columns {tc:.3} s",
        mb(&path)
    );
    println!("synthetic.csv ({:.1} MB, same table): rows {t_csv:.3} s (CSV/Parquet = {:.2})", mb(&csv), t_csv / t);
    std::fs::remove_dir_all(dir).unwrap();
}
