//! `--data` reads Parquet and Arrow IPC beside CSV: a Parquet copy of Adult (written here with
//! arrow-rs: integers as Int64, strings dictionary-encoded, empty cells as nulls) and an Arrow
//! IPC copy give `harmony simulate` exactly the estimates of the CSV, with the bundled schema
//! and with an inferred one; `harmony submit` and `harmony query --data` read the Parquet copy
//! and the server's estimates equal the simulation's on the CSV.

mod common;

use common::{harmony, serve_sqlite};
use harmony_data::fixtures::{Compression, table_batch, write_ipc, write_parquet};
use harmony_data::{SchemaFile, read_table};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo(rel: &str) -> PathBuf {
    common::root().join(rel)
}

/// `harmony simulate --format json` with `args`, minus what may differ between inputs: the
/// data's name and the timings.
fn simulate(data: &Path, args: &[&str]) -> Value {
    let base = ["simulate", "--data", data.to_str().unwrap(), "--format", "json", "--seed", "5"];
    let mut v: Value = serde_json::from_str(&harmony(&[&base[..], args].concat())).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("data");
    o.remove("title");
    o.remove("parse_seconds");
    for r in o["results"].as_array_mut().unwrap() {
        let r = r.as_object_mut().unwrap();
        r.remove("seconds");
        r.remove("seconds_per_run");
    }
    v
}

/// A Parquet copy of Adult (with the bundled schema) in a fresh directory.
fn parquet_adult(tag: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("harmony-cli-formats-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = SchemaFile::load(&repo("examples/adult.toml")).unwrap();
    let batch = table_batch(&read_table(&repo("data/adult.csv")).unwrap(), &file, true).unwrap();
    let parquet = dir.join("adult.parquet");
    write_parquet(&parquet, [batch], Compression::SNAPPY, 16_384).unwrap();
    (dir, parquet)
}

/// `submit --data adult.parquet` (simulated devices, seed 17) into `serve`, then `query --data
/// adult.parquet`: the estimate document equals `simulate --data adult.csv --runs 1 --seed 17`'s
/// (integer accumulators: every number equal), for means and frequency; the truth printed beside
/// the estimates is the same from the Parquet copy as from the CSV.
#[test]
fn submit_and_query_read_a_parquet_copy_of_adult() {
    let (dir, parquet) = parquet_adult("submit");
    let (csv, schema) = (repo("data/adult.csv"), repo("examples/adult.toml"));
    let (csv, schema, pq) = (csv.to_str().unwrap(), schema.to_str().unwrap(), parquet.to_str().unwrap());
    let server = serve_sqlite(&dir);
    let cases: [&[&str]; 2] = [&["--strategy", "harmony"], &["--task", "frequency", "--column", "education"]];
    for task in cases {
        let mut sim = vec!["simulate", "--data", csv, "--schema", schema, "--epsilon", "1", "--runs", "1"];
        sim.extend_from_slice(&["--seed", "17", "--format", "json"]);
        sim.extend_from_slice(task);
        let simulated: Value = serde_json::from_str(&harmony(&sim)).unwrap();
        let mut create = vec!["collection", "create", "--server", &server.url, "--token", "tok", "--schema", schema];
        create.extend_from_slice(&["--epsilon", "1"]);
        create.extend_from_slice(task);
        let id = harmony(&create).trim().to_string();
        let url = server.url.as_str();
        harmony(&["submit", "--server", url, "--collection", &id, "--data", pq, "--simulate-devices", "--seed", "17"]);
        let query: [&str; 9] = ["query", "--server", url, "--token", "tok", "--collection", &id, "--data", pq];
        let mut served: Value = serde_json::from_str(&harmony(&[&query[..], &["--format", "json"]].concat())).unwrap();
        let mut expected = simulated["results"][0]["estimates"].clone();
        assert!(expected.is_object(), "{task:?}: no estimates in simulate's output");
        for doc in [&mut served, &mut expected] {
            doc.as_object_mut().unwrap().remove("collection");
        }
        assert_eq!(served, expected, "{task:?}: served estimates (Parquet) differ from simulate's (CSV)");
        // The truth column: the same from the Parquet copy as from the CSV, absent without --data.
        let table = harmony(&query);
        assert_eq!(table, harmony(&[&query[..8], &[csv]].concat()), "{task:?}: truths differ");
        assert_ne!(table, harmony(&query[..7]), "{task:?}: query --data printed no truth");
    }
    drop(server);
    std::fs::remove_dir_all(dir).unwrap();
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
    // Heavy hitters streams CSV itself: the Parquet copy is converted to CSV text first.
    let heavy: [&str; 10] =
        ["--task", "heavy-hitters", "--column", "education", "--top", "5", "--runs", "1", "--epsilon", "4"];
    assert!(simulate(&parquet, &heavy) == simulate(&csv, &heavy), "heavy hitters: estimates differ");
    std::fs::remove_dir_all(dir).unwrap();
}
