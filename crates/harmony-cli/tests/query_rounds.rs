//! `adaptive-rounds` linear queries from the command line, against `harmony serve` on loopback:
//! `collection create --method adaptive-rounds --batch-size N` (refused without the batch size,
//! and the batch size refused with another mechanism), `submit` answering the open round (a full
//! round refused, pointing at `collection ask`), `collection ask` opening the next round (refused
//! while one is open), the estimates per round, and `simulate` refusing the served-only mechanism.

mod common;

use common::{fails, harmony, serve_sqlite};
use serde_json::Value;
use std::path::PathBuf;

const SCHEMA: &str =
    "[[attributes]]\nname = \"color\"\nkind = \"categorical\"\ncategories = [\"red\", \"green\", \"blue\"]\n";

fn fixture(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("harmony-cli-query-rounds-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("schema.toml"), SCHEMA).unwrap();
    let rows: String = (0..12).map(|i| format!("{}\n", ["red", "green", "blue"][i % 3])).collect();
    std::fs::write(dir.join("rows.csv"), format!("color\n{rows}")).unwrap();
    std::fs::write(dir.join("queries.json"), r#"{"queries": [{"name": "red", "range": [0, 0]}]}"#).unwrap();
    dir
}

#[test]
fn adaptive_rounds_from_the_command_line() {
    let dir = fixture("cli");
    let server = serve_sqlite(&dir);
    let path = |f: &str| dir.join(f).display().to_string();
    let (schema, rows, queries) = (path("schema.toml"), path("rows.csv"), path("queries.json"));
    let create = ["collection", "create", "--server", &server.url, "--token", "tok", "--schema", &schema];
    let linear = ["--epsilon", "1", "--task", "linear-queries", "--attributes", "color", "--queries", &queries];
    let rounds = [&create[..], &linear[..], &["--method", "adaptive-rounds"]].concat();

    let e = fails(&rounds);
    assert!(e.contains("--batch-size") && e.contains("an integer >= 1"), "{e}");
    let e = fails(&[&create[..], &linear[..], &["--method", "hr", "--batch-size", "5"]].concat());
    assert!(e.contains("--batch-size") && e.contains("adaptive-rounds only"), "{e}");
    // Enrolled devices by default: a submit without their keys is refused before any device
    // randomizes, naming the command that mints them and the opt-out.
    let enrolled = harmony(&[&rounds[..], &["--batch-size", "5"]].concat()).trim().to_string();
    let e = fails(&["submit", "--server", &server.url, "--collection", &enrolled, "--data", &rows]);
    assert!(e.contains("takes enrolled devices only") && e.contains("harmony collection token enroll"), "{e}");
    assert!(e.contains("--device-keys") && e.contains("--no-enrollment"), "{e}");
    let id = harmony(&[&rounds[..], &["--batch-size", "5", "--no-enrollment"]].concat()).trim().to_string();

    let submit =
        ["submit", "--server", &server.url, "--collection", &id, "--data", &rows, "--simulate-devices", "--seed", "9"];
    harmony(&submit);
    let e = fails(&submit);
    assert!(e.contains("round 1") && e.contains("full") && e.contains("harmony collection ask"), "{e}");

    let ask = ["collection", "ask", "--server", &server.url, "--token", "tok", "--collection", &id];
    let green = r#"{"name": "green or blue", "in": ["green", "blue"]}"#;
    let opened: Value =
        serde_json::from_str(&harmony(&[&ask[..], &["--query", green, "--format", "json"]].concat())).unwrap();
    assert_eq!((opened["round"].as_u64(), opened["open"].as_bool()), (Some(2), Some(true)), "{opened}");
    assert_eq!((opened["name"].as_str(), opened["received"].as_u64()), (Some("green or blue"), Some(0)));
    let e = fails(&[&ask[..], &["--query", green]].concat());
    assert!(e.contains("round"), "a second query while round 2 is open: {e}");
    let e = fails(&[&ask[..], &["--query", "{not json"]].concat());
    assert!(e.contains("--query is not a JSON object"), "{e}");

    harmony(&submit);
    let query = ["query", "--server", &server.url, "--token", "tok", "--collection", &id, "--format", "json"];
    let doc: Value = serde_json::from_str(&harmony(&query)).unwrap();
    assert_eq!(doc["group_reports"], serde_json::json!([5, 5]), "{doc}");
    assert_eq!(doc["mechanism"], "adaptive-rounds", "{doc}");

    let sim = ["simulate", "--schema", &schema, "--data", &rows, "--task", "linear-queries", "--queries", &queries];
    let e = fails(&[&sim[..], &["--attributes", "color", "--method", "adaptive-rounds"]].concat());
    assert!(e.contains("collection ask") && e.contains("simulate runs gaussian, hr, adaptive"), "{e}");
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

/// A file of real (CSPRNG) devices is sent once per round: each run answers the open round with
/// the file's next devices, so the record of files already sent must not refuse the second run.
#[test]
fn one_file_answers_each_round_in_turn() {
    let dir = fixture("file");
    let server = serve_sqlite(&dir);
    let path = |f: &str| dir.join(f).display().to_string();
    let (schema, rows, queries, ledger) =
        (path("schema.toml"), path("rows.csv"), path("queries.json"), path("ledger.json"));
    let create = ["collection", "create", "--server", &server.url, "--token", "tok", "--schema", &schema];
    let linear = ["--epsilon", "1", "--task", "linear-queries", "--attributes", "color", "--queries", &queries];
    let rounds = ["--method", "adaptive-rounds", "--batch-size", "5", "--no-enrollment"];
    let id = harmony(&[&create[..], &linear[..], &rounds[..]].concat()).trim().to_string();
    let submit = ["submit", "--server", &server.url, "--collection", &id, "--data", &rows, "--budget-ledger", &ledger];
    harmony(&submit);
    let ask = ["collection", "ask", "--server", &server.url, "--token", "tok", "--collection", &id];
    harmony(&[&ask[..], &["--query", r#"{"name": "blue", "in": ["blue"]}"#]].concat());
    harmony(&submit);
    let query = ["query", "--server", &server.url, "--token", "tok", "--collection", &id, "--format", "json"];
    let doc: Value = serde_json::from_str(&harmony(&query)).unwrap();
    assert_eq!(doc["group_reports"], serde_json::json!([5, 5]), "{doc}");
}
