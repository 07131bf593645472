//! `harmony simulate` with no `--data` finds the bundled Adult data from any directory: an
//! installed binary run outside the checkout, or pointed elsewhere by `HARMONY_DATA_DIR`.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

/// An empty scratch directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("harmony-bundled-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn simulate_in(dir: &std::path::Path, data_dir: Option<&std::path::Path>) -> Output {
    let mut cmd = Command::new(common::BIN);
    cmd.args(["simulate", "--runs", "1", "--epsilon", "1", "--format", "json"]).current_dir(dir);
    cmd.env_remove("HARMONY_DATA_DIR");
    if let Some(d) = data_dir {
        cmd.env("HARMONY_DATA_DIR", d);
    }
    cmd.output().expect("run harmony")
}

#[test]
fn simulate_from_a_directory_outside_the_checkout_uses_the_bundled_data() {
    let dir = scratch("outside");
    let out = simulate_in(&dir, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json on stdout");
    assert_eq!(doc["n"], 48842, "{doc}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn simulate_names_the_missing_bundled_data_and_the_flag_to_pass() {
    let empty = scratch("empty");
    let out = simulate_in(&empty, Some(&empty));
    assert!(!out.status.success(), "simulate succeeded without the bundled data");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = empty.join("data/adult.csv");
    assert!(stderr.contains(&expected.display().to_string()), "{stderr}");
    assert!(stderr.contains("HARMONY_DATA_DIR") && stderr.contains("--data FILE"), "{stderr}");
    std::fs::remove_dir_all(&empty).ok();
}

#[test]
fn simulate_reads_the_bundled_data_from_harmony_data_dir() {
    let here = scratch("env");
    let out = simulate_in(&here, Some(&common::root()));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&here).ok();
}
