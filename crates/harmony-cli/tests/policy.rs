//! `harmony submit`'s device policy end to end (the binary against `harmony serve` on
//! loopback): `--budget 2/1` lets three ε = 1 collections get two submissions and refuses the
//! third before any report is sent, naming the rule, the ε spent, the request and the limit,
//! and a second submission to one collection is refused (its rows would report twice);
//! the same from a `--policy` TOML file; a bad policy file names the field.

mod common;

use common::{Server, fails, harmony, run, serve_sqlite};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

const SCHEMA: &str = "[[attributes]]\nname = \"x1\"\nkind = \"numeric\"\nmin = -1\nmax = 1\n\n\
    [[attributes]]\nname = \"label\"\nkind = \"categorical\"\ncategories = [\"no\", \"yes\"]\n";

fn ok(args: &[&str]) -> String {
    harmony(args).trim().to_string()
}

fn fixture(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("harmony-cli-policy-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("schema.toml"), SCHEMA).unwrap();
    let rows: String = (0..50).map(|i| format!("{},{}\n", (i as f64 / 25.0) - 1.0, ["no", "yes"][i % 2])).collect();
    std::fs::write(dir.join("rows.csv"), format!("x1,label\n{rows}")).unwrap();
    dir
}

/// Three ε = 1 means collections on `server`.
fn collections(server: &Server, dir: &Path) -> Vec<String> {
    let schema = dir.join("schema.toml").display().to_string();
    (0..3)
        .map(|_| {
            let args = ["collection", "create", "--server", &server.url, "--token", "tok", "--schema", &schema];
            ok(&[&args[..], &["--epsilon", "1", "--task", "means"]].concat())
        })
        .collect()
}

/// Reports the server aggregated for a collection.
fn reports(server: &Server, id: &str) -> u64 {
    let doc = ok(&["query", "--server", &server.url, "--token", "tok", "--collection", id, "--format", "json"]);
    serde_json::from_str::<Value>(&doc).unwrap()["reports"].as_u64().unwrap()
}

/// `submit` of the fixture's rows to `id` with `extra` options.
fn submit(server: &Server, dir: &Path, id: &str, extra: &[&str]) -> Output {
    let data = dir.join("rows.csv").display().to_string();
    let ledger = dir.join("budget.json").display().to_string();
    let args = ["submit", "--server", &server.url, "--collection", id, "--data", &data, "--budget-ledger", &ledger];
    run(&[&args[..], extra].concat())
}

fn check_budget(server: &Server, dir: &Path, extra: &[&str]) {
    let ids = collections(server, dir);
    for id in &ids[..2] {
        let out = submit(server, dir, id, extra);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(reports(server, id), 50);
    }
    // The rows' devices report once per collection: a second run to c1 is refused (it would
    // randomize every row again), and sends nothing.
    let e = String::from_utf8_lossy(&submit(server, dir, &ids[0], extra).stderr).into_owned();
    assert!(e.contains(&format!("already reported to collection {}", ids[0])), "{e}");
    assert_eq!(reports(server, &ids[0]), 50);
    let out = submit(server, dir, &ids[2], extra);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    for part in
        ["budget is ε 2 already spent", &format!("ε 1 requested by collection {}", ids[2]), "limit is ε 2 per 1 day"]
    {
        assert!(e.contains(part), "{part:?} not in {e}");
    }
    assert_eq!(reports(server, &ids[2]), 0, "nothing was sent to the third collection");
}

#[test]
fn submit_budget_refuses_the_third_collection() {
    let dir = fixture("budget");
    let server = serve_sqlite(&dir);
    check_budget(&server, &dir, &["--budget", "2/1"]);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn submit_policy_file_sets_the_budget_and_bad_files_name_the_field() {
    let dir = fixture("file");
    let server = serve_sqlite(&dir);
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "max_epsilon = 4\ntasks = [\"means\", \"frequency\"]\nbudget = \"2/1\"\n").unwrap();
    let p = policy.display().to_string();
    check_budget(&server, &dir, &["--policy", &p]);
    // --budget overrides the file's budget (a fresh ledger: 2 collections fit, not 3 at 1/1).
    let id = &collections(&server, &dir)[0];
    std::fs::remove_file(dir.join("budget.json")).unwrap();
    let out = submit(&server, &dir, id, &["--policy", &p, "--budget", "0.5/1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("limit is ε 0.5 per 1 day"));
    // A file refusing the task.
    std::fs::write(&policy, "max_epsilon = 4\ntasks = [\"frequency\"]\n").unwrap();
    let e = String::from_utf8_lossy(&submit(&server, &dir, id, &["--policy", &p]).stderr).into_owned();
    assert!(e.contains("tasks is means, the limit is frequency"), "{e}");
    for (bad, field) in [
        ("max_epsilon = 4\nbudjet = \"2/1\"\n", "budjet"),
        ("max_epsilon = 4\nbudget = \"2/0\"\n", "policy.budget.days"),
        ("max_epsilon = -1\n", "policy.max_epsilon"),
    ] {
        std::fs::write(&policy, bad).unwrap();
        let e = fails(&["submit", "--server", &server.url, "--collection", id, "--data", "x.csv", "--policy", &p]);
        assert!(e.contains(field), "{bad}: {e}");
    }
    let e = fails(&["submit", "--server", &server.url, "--collection", id, "--data", "x.csv", "--budget", "2"]);
    assert!(e.contains("--budget") && e.contains("E/DAYS"), "{e}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
