//! `harmony submit --simulate-devices --seed S` run twice with the same file: device i sends the
//! same report id each time, so the server acknowledges the second run's reports as already
//! stored and counts nothing twice.

mod common;
use common::{BIN, adult_rows, harmony, root, serve_sqlite};
use std::process::Command;

#[test]
fn a_repeated_simulated_submission_is_stored_once() {
    let dir = std::env::temp_dir().join(format!("harmony-cli-resubmit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rows = adult_rows(&dir, 0, 200);
    let server = serve_sqlite(&dir);
    let schema = root().join("examples/adult.toml").display().to_string();
    let create = ["collection", "create", "frequency", "--server", &server.url, "--token", "tok", "--schema", &schema];
    let id = harmony(&[&create[..], &["--epsilon", "1", "--column", "sex"]].concat()).trim().to_string();
    let ledger = dir.join("budget.json").display().to_string();
    let submit = ["submit", "--server", &server.url, "--collection", &id, "--data", &rows, "--budget-ledger", &ledger];
    let run = || {
        let args = [&submit[..], &["--simulate-devices", "--seed", "3"]].concat();
        let out = Command::new(BIN).args(&args).current_dir(root()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        stderr
    };
    let first = run();
    assert!(first.contains("200 stored, 0 already stored"), "{first}");
    let second = run();
    assert!(second.contains("0 stored, 200 already stored"), "{second}");
    let q = ["query", "--server", &server.url, "--token", "tok", "--collection", &id, "--format", "json"];
    let doc: serde_json::Value = serde_json::from_str(&harmony(&q)).unwrap();
    assert_eq!(doc["reports"].as_u64(), Some(200), "{doc}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
