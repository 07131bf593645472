//! Scale (release, ignored): a 3×10⁶-row, 5-column Parquet file (`age` Int64, `income`
//! Float64, `signup` Date32, `region` dictionary strings with 2% nulls, `active` Boolean;
//! snappy, row groups of 2^20 rows) parses (read and encoded) in ≤ 1 s, and `harmony simulate`
//! on it peaks below twice the size of the columns it simulates from: `harmony-data` encodes the
//! table by attribute (8 B per number, 4 per category: 3·8 + 2·4 = 32 B per row, 96 MB at
//! 3·10⁶) and `harmony_tasks::simulate::run_columns` lays out 4,096 rows at a time as the tasks'
//! row-major `Value`s. Printed beside it: the ratio to 8 bytes per value (120 MB) and to what
//! row-major inputs would take (5 `Value`s of 16 B and an `Input` of 32 B per row: 336 MB).
//!
//! Run: `cargo test --release -p harmony-cli --test scale -- --ignored --nocapture`
//! (`HARMONY_SCALE_ROWS=10000000` for another row count: both bounds scale with it).

use harmony_core::schema::Value;
use harmony_data::fixtures::{Compression, synthetic, synthetic_schema, write_parquet};
use harmony_tasks::Input;
use std::mem::size_of;
use std::process::Command;

const ROWS: usize = 3_000_000;

fn rows() -> usize {
    std::env::var("HARMONY_SCALE_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(ROWS)
}

/// Peak resident set of the waited-for children of this process, in bytes (this test binary
/// has one test, so one child).
#[cfg(unix)]
fn children_max_rss() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_CHILDREN is a valid `who`.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_CHILDREN, &mut u), 0);
        u
    };
    usage.ru_maxrss as u64 * 1024
}

#[cfg(unix)]
#[test]
#[ignore = "release tier: writes a 3e6-row Parquet file and measures harmony simulate"]
fn three_million_parquet_rows_parse_in_a_second_within_twice_their_columns() {
    let dir = std::env::temp_dir().join(format!("harmony-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("synthetic.parquet");
    let schema = dir.join("synthetic.toml");
    let rows = rows();
    write_parquet(&data, synthetic(rows, 1 << 16, 7), Compression::SNAPPY, 1 << 20).unwrap();
    std::fs::write(&schema, toml::to_string(&synthetic_schema()).unwrap()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harmony"))
        .args(["simulate", "--data", data.to_str().unwrap(), "--schema", schema.to_str().unwrap()])
        .args(["--runs", "1", "--epsilon", "1", "--strategy", "sample-k", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let peak = children_max_rss();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let parse = json["parse_seconds"].as_f64().unwrap();
    let columns = (rows * 5 * 8) as u64;
    let held = (rows * (3 * 8 + 2 * 4)) as u64;
    let inputs = (rows * (5 * size_of::<Value>() + size_of::<Input>())) as u64;
    let file_mb = std::fs::metadata(&data).unwrap().len() as f64 / 1e6;
    println!(
        "{rows} x 5 Parquet ({file_mb:.1} MB): parse {parse:.3} s; simulate peak RSS {:.1} MB = {:.2} x the encoded columns' {:.0} MB = {:.2} x row-major inputs' {:.0} MB = {:.2} x 8 B per value ({:.0} MB)",
        peak as f64 / 1e6,
        peak as f64 / held as f64,
        held as f64 / 1e6,
        peak as f64 / inputs as f64,
        inputs as f64 / 1e6,
        peak as f64 / columns as f64,
        columns as f64 / 1e6
    );
    assert_eq!(json["n"], rows);
    let bound = rows as f64 / ROWS as f64;
    assert!(parse <= bound, "parse took {parse} s, expected <= {bound} s");
    assert!(peak < 2 * held, "peak RSS {peak} B, expected < 2 x the columns' {held} B");
    std::fs::remove_dir_all(dir).unwrap();
}
