//! Missing values as data through the CLI and the server: Adult with 10% of its cells blanked
//! (seeded, a mix of missing tokens), its schema inferred by `harmony schema infer` (every column
//! `missing = "report"`), then
//!
//! * `harmony simulate` keeps every row and reports the missing shares and the present values'
//!   means and frequencies;
//! * `harmony submit --simulate-devices` into `harmony serve`, then `harmony query`: the
//!   estimate document equals `harmony simulate --runs 1 --seed 17`'s, for means under split,
//!   harmony and sample-k and for `--task frequency`, and `harmony query --data` prints the
//!   present values' estimates beside their truths (the calibration of these estimates over 200
//!   runs is harmony-tasks' `tests/missing.rs`).

mod common;

use common::{harmony, serve_sqlite};
use serde_json::Value;
use std::path::PathBuf;

/// Adult's CSV with each cell replaced, with probability `p`, by a missing token.
fn blanked_adult(p: f64, seed: u64) -> String {
    let text = std::fs::read_to_string(common::root().join("data/adult.csv")).unwrap();
    harmony_data::fixtures::blanked_csv(&text, p, seed)
}

fn setup(tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("harmony-cli-missing-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("adult-blank10.csv");
    std::fs::write(&data, blanked_adult(0.10, 18)).unwrap();
    let schema = dir.join("schema.toml");
    std::fs::write(&schema, harmony(&["schema", "infer", "--data", data.to_str().unwrap()])).unwrap();
    (dir, data, schema)
}

#[test]
fn simulate_keeps_every_row_and_prints_missing_shares_and_present_values() {
    let (dir, data, schema) = setup("simulate");
    let text = std::fs::read_to_string(&schema).unwrap();
    assert_eq!(text.lines().filter(|l| *l == "missing = \"report\"").count(), 16, "{text}");
    let (data, schema) = (data.to_str().unwrap(), schema.to_str().unwrap());
    let args = ["simulate", "--data", data, "--schema", schema, "--epsilon", "8", "--runs", "1", "--seed", "3"];
    let json: Value = serde_json::from_str(&harmony(&[&args[..], &["--format", "json"]].concat())).unwrap();
    let doc = &json["results"][0]["estimates"];
    assert_eq!(doc["reports"], 48842, "no row is skipped: {doc}");
    let attrs = doc["attributes"].as_array().unwrap();
    let age = attrs.iter().find(|a| a["name"] == "age").unwrap();
    assert!(age["missing"]["estimate"].as_f64().unwrap() > 0.05, "{age}");
    let sex = attrs.iter().find(|a| a["name"] == "sex").unwrap();
    assert_eq!(sex["categories"].as_array().unwrap().len(), 3, "{sex}");
    assert_eq!(sex["present"].as_array().unwrap().len(), 2, "{sex}");
    assert!(attrs.iter().any(|a| a["name"] == "age:missing"), "the presence attribute is listed");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn served_estimates_equal_simulated_ones_with_missing_values() {
    let (dir, data, schema) = setup("serve");
    let (data, schema) = (data.to_str().unwrap(), schema.to_str().unwrap());
    let server = serve_sqlite(&dir);
    let url = server.url.as_str();
    let cases: [&[&str]; 4] = [
        &["--strategy", "split"],
        &["--strategy", "harmony"],
        &["--strategy", "sample-k"],
        &["--task", "frequency", "--column", "education"],
    ];
    for task in cases {
        let mut sim = vec!["simulate", "--data", data, "--schema", schema, "--epsilon", "4", "--runs", "1"];
        sim.extend_from_slice(&["--seed", "17", "--format", "json"]);
        sim.extend_from_slice(task);
        let simulated: Value = serde_json::from_str(&harmony(&sim)).unwrap();
        let mut create = vec!["collection", "create", "--server", url, "--token", "tok", "--schema", schema];
        create.extend_from_slice(&["--epsilon", "4"]);
        create.extend_from_slice(task);
        let id = harmony(&create).trim().to_string();
        harmony(&[
            "submit",
            "--server",
            url,
            "--collection",
            &id,
            "--data",
            data,
            "--simulate-devices",
            "--seed",
            "17",
        ]);
        let query = ["query", "--server", url, "--token", "tok", "--collection", &id, "--format", "json"];
        let mut served: Value = serde_json::from_str(&harmony(&query)).unwrap();
        let mut expected = simulated["results"][0]["estimates"].clone();
        for doc in [&mut served, &mut expected] {
            doc.as_object_mut().unwrap().remove("collection");
        }
        assert_eq!(served, expected, "{task:?}: served estimates differ from simulate's");
        let text = served.to_string();
        assert!(text.contains("\"missing\":{") && text.contains("\"present\":["), "{task:?}: {text}");
        // The table beside the truth: present values' means and frequencies.
        let table = harmony(&[&query[..7], &["--data", data]].concat());
        let row = if task[0] == "--task" { "education=Bachelors | present" } else { "age (mean of present)" };
        assert!(table.contains(row), "{task:?}: {table}");
    }
    drop(server);
    std::fs::remove_dir_all(dir).unwrap();
}
