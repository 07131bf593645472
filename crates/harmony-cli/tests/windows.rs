//! Continuous collection from the command line: `collection create --period` sets the bucket
//! period the server stores (`POST /v1/collections?period=`), and `harmony query --series`
//! reads it back: an hourly collection answers an hourly series whose points hold every
//! submitted report, a daily one refuses a series finer than its period.

mod common;
use common::{adult_rows, fails, harmony, root, serve_sqlite};

#[test]
fn create_period_sets_the_finest_series_a_collection_answers() {
    let dir = std::env::temp_dir().join(format!("harmony-cli-windows-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let server = serve_sqlite(&dir);
    let schema = root().join("examples/adult.toml").display().to_string();
    let create = ["collection", "create", "--server", &server.url, "--token", "tok", "--schema", &schema];
    let task = ["--epsilon", "1", "--task", "frequency", "--column", "education"];
    let hourly = harmony(&[&create[..], &task[..], &["--period", "hour"]].concat()).trim().to_string();
    let daily = harmony(&[&create[..], &task[..]].concat()).trim().to_string();
    let e = fails(&[&create[..], &task[..], &["--period", "minute"]].concat());
    assert!(e.contains("--period") && e.contains("minute") && e.contains("hour"), "{e}");

    let rows = adult_rows(&dir, 0, 2000);
    for id in [&hourly, &daily] {
        let budget = dir.join(format!("budget-{id}.json")).display().to_string();
        harmony(&["submit", "--server", &server.url, "--collection", id, "--data", &rows, "--budget-ledger", &budget]);
    }
    let query = |id: &str, period: &str| {
        let q = ["query", "--server", &server.url, "--token", "tok", "--collection", id, "--series", period];
        [&q[..], &["--format", "json"]].concat().iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let args = query(&hourly, "hour");
    let out: serde_json::Value =
        serde_json::from_str(&harmony(&args.iter().map(String::as_str).collect::<Vec<_>>())).unwrap();
    assert_eq!(out["period"], "hour", "{out}");
    let points = out["points"].as_array().unwrap();
    // The submit may straddle an hour's end: one point, or two.
    assert!((1..=2).contains(&points.len()), "{out}");
    let reports: u64 = points.iter().map(|p| p["document"]["reports"].as_u64().unwrap()).sum();
    assert_eq!(reports, 2000, "every report in an hourly point");

    let args = query(&daily, "hour");
    let e = fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(e.contains("period") && e.contains("day"), "a daily collection has no hourly series: {e}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
