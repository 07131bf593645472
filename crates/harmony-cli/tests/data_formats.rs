//! `--data` reads Parquet and Arrow IPC beside CSV: a Parquet copy of Adult (written here with
//! arrow-rs: integers as Int64, strings dictionary-encoded, empty cells as nulls) and an Arrow
//! IPC copy give `harmony simulate` exactly the estimates of the CSV, with the bundled schema
//! and with an inferred one.

use harmony_data::fixtures::{Compression, table_batch, write_ipc, write_parquet};
use harmony_data::{SchemaFile, read_table};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

/// `harmony simulate --format json` with `args`, minus what may differ between inputs: the
/// data's name and the timings.
fn simulate(data: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_harmony"))
        .args(["simulate", "--data", data.to_str().unwrap(), "--format", "json", "--seed", "5"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("data");
    o.remove("parse_seconds");
    for r in o["results"].as_array_mut().unwrap() {
        let r = r.as_object_mut().unwrap();
        r.remove("seconds");
        r.remove("seconds_per_run");
    }
    v
}

#[test]
fn parquet_and_arrow_copies_of_adult_give_the_csv_estimates() {
    let dir = std::env::temp_dir().join(format!("harmony-cli-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = repo("data/adult.csv");
    let schema = repo("examples/adult.toml");
    let file = SchemaFile::load(&schema).unwrap();
    let batch = table_batch(&read_table(&csv).unwrap(), &file, true).unwrap();
    let parquet = dir.join("adult.parquet");
    write_parquet(&parquet, [batch.clone()], Compression::SNAPPY, 16_384).unwrap();
    let arrow = dir.join("adult.arrow");
    write_ipc(&arrow, &[batch], false).unwrap();

    let with_schema = ["--schema", schema.to_str().unwrap(), "--runs", "2", "--epsilon", "1,4"];
    let expected = simulate(&csv, &with_schema);
    assert_eq!(expected["n"], 48_842);
    assert_eq!(expected["results"].as_array().unwrap().len(), 6);
    for data in [&parquet, &arrow] {
        assert!(simulate(data, &with_schema) == expected, "{}: estimates differ from the CSV's", data.display());
    }
    // Inferred schemas: the same from the typed copy as from the text.
    let inferred = ["--runs", "1", "--epsilon", "2", "--strategy", "sample-k"];
    let expected = simulate(&csv, &inferred);
    assert!(simulate(&parquet, &inferred) == expected, "inferred: estimates differ");
    std::fs::remove_dir_all(dir).unwrap();
}
