//! `harmony submit --days N --until DATE` and `--received-at WHEN` (the admin `--token`) against
//! `harmony serve --accept-backdated`: the file's devices land in N consecutive days, evenly and
//! in order, and the summary says how many per day; a server without the flag refuses the
//! header, and the error names it.

mod common;
use common::{BIN, Server, adult_rows, fails, harmony, root, serve_sqlite, serve_with};
use std::process::Command;

/// `harmony serve --accept-backdated` (admin token `tok`) on SQLite in `dir`.
fn serve_backdated(dir: &std::path::Path) -> Server {
    let db = format!("sqlite://{}", dir.join("backdated.sqlite").display());
    serve_with(&db, &["--accept-backdated"])
}

/// A daily frequency collection of `server`: its id.
fn create(server: &Server) -> String {
    let schema = root().join("examples/adult.toml").display().to_string();
    let args =
        ["collection", "create", "--server", &server.url, "--token", "tok", "--schema", &schema, "--epsilon", "1"];
    harmony(&[&args[..], &["--task", "frequency", "--column", "sex", "--period", "day"]].concat()).trim().to_string()
}

/// The (day, reports) of the collection's daily series.
fn days(server: &Server, id: &str) -> Vec<(String, u64)> {
    let q =
        ["query", "--server", &server.url, "--token", "tok", "--collection", id, "--series", "day", "--format", "json"];
    let out: serde_json::Value = serde_json::from_str(&harmony(&q)).unwrap();
    out["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["from"].as_str().unwrap()[..10].to_string(), p["document"]["reports"].as_u64().unwrap()))
        .collect()
}

#[test]
fn submit_days_spreads_the_devices_over_backdated_days() {
    let dir = std::env::temp_dir().join(format!("harmony-cli-backdated-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rows = adult_rows(&dir, 0, 300);
    let more = adult_rows(&dir, 300, 50);
    let ledger = dir.join("budget.json").display().to_string();
    let submit = |server: &Server, id: &str, data: &str, dating: &[&str]| -> Vec<String> {
        let base = ["submit", "--server", &server.url, "--collection", id, "--data", data, "--budget-ledger", &ledger];
        [&base[..], &["--token", "tok"], dating].concat().iter().map(|s| s.to_string()).collect()
    };

    // Without --accept-backdated: refused, naming the header and the flag; nothing stored.
    let plain = serve_sqlite(&dir);
    let id = create(&plain);
    let args = submit(&plain, &id, &rows, &["--days", "3", "--until", "2026-01-10"]);
    let e = fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(e.contains("Harmony-Received-At") && e.contains("--accept-backdated"), "{e}");
    assert!(days(&plain, &id).is_empty());
    drop(plain);

    let server = serve_backdated(&dir);
    let id = create(&server);
    let args = submit(&server, &id, &rows, &["--days", "3", "--until", "2026-01-10"]);
    let out = Command::new(BIN).args(&args).current_dir(root()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("submitted 300 devices over 3 periods received 2026-01-08 to 2026-01-10"), "{stderr}");
    for day in ["2026-01-08", "2026-01-09", "2026-01-10"] {
        assert!(stderr.contains(&format!("  {day}: 100 devices, 100 stored, 0 already stored")), "{stderr}");
    }
    let args = submit(&server, &id, &more, &["--received-at", "2026-01-02T10:00:00Z"]);
    harmony(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let want = [("2026-01-02", 50), ("2026-01-08", 100), ("2026-01-09", 100), ("2026-01-10", 100)];
    assert_eq!(days(&server, &id), want.map(|(d, n)| (d.to_string(), n)).to_vec());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
