//! A new user's first hour, each stumble a test: `plan` on an inferred schema with gaps, tasks
//! that read one column, `submit --invalid skip`, no `--schema` where none is read, a repeated
//! submission refused, a warning for an ε default devices refuse, fast and clear network errors,
//! schema typos and other delimiters named, tables that never cut a label or print an empty
//! truth column, ISO 8601 times, `/` on the dashboard, one truth for `simulate` and `query`.

mod common;

use common::{BIN, free_port, harmony, root, run};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("harmony-cli-papercuts-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// Rows of age (17–90), prestg10 (blank in row 4), income (missing in every 4th row, `NA`), a
/// categorical occupation with long labels (blank in every 7th row).
fn people(dir: &Path) -> PathBuf {
    let occ = ["Construction and Extraction, group A", "Construction and Extraction, group B", "Sales"];
    let mut text = String::from("age,prestg10,income,occ\n");
    for i in 0..60 {
        let prestg = if i == 2 { String::new() } else { format!("{}", 20 + i % 50) };
        let income = if i % 4 == 0 { "NA".to_string() } else { format!("{}", 1000 * (i % 10)) };
        let occ = if i % 7 == 0 { "" } else { occ[i % 3] };
        text.push_str(&format!("{},{prestg},{income},\"{occ}\"\n", 17 + i));
    }
    let path = dir.join("people.csv");
    std::fs::write(&path, text).unwrap();
    path
}

const SCHEMA: &str = r#"
[[attributes]]
name = "age"
kind = "numeric"
min = 17
max = 90

[[attributes]]
name = "prestg10"
kind = "numeric"
min = 0
max = 100

[[attributes]]
name = "income"
kind = "numeric"
min = 0
max = 10000
missing = "report"

[[attributes]]
name = "occ"
kind = "categorical"
categories = ["Construction and Extraction, group A", "Construction and Extraction, group B", "Sales"]
missing = "report"
"#;

#[test]
fn plan_runs_on_the_schema_inference_writes_for_a_table_with_gaps() {
    let dir = scratch("plan");
    let schema = harmony(&["schema", "infer", "--data", &p(&people(&dir))]);
    assert!(schema.contains("missing = \"report\""), "{schema}");
    let path = dir.join("inferred.toml");
    std::fs::write(&path, schema).unwrap();
    let out = run(&["plan", "--schema", &p(&path), "--devices", "10000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("left out") && stderr(&out).contains("reports missing values"), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("recommended"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// The first 3,000 rows of Adult with gaps blanked into numeric and categorical columns alike
/// (age, hours_per_week, sex; workclass and occupation have their own).
fn blanked_adult(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(root().join("data/adult.csv")).unwrap();
    let keep = [0usize, 1, 4, 6, 9, 12, 14]; // age workclass education_num occupation sex hours income
    let mut out = String::new();
    for (i, line) in text.lines().take(3001).enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        let row: Vec<&str> = keep
            .iter()
            .map(|&j| {
                let blank = i > 0 && ((j == 0 && i % 50 == 0) || (j == 12 && i % 70 == 0) || (j == 9 && i % 90 == 0));
                if blank { "" } else { cells[j] }
            })
            .collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    let path = dir.join("blanked.csv");
    std::fs::write(&path, out).unwrap();
    path
}

#[test]
fn a_blanked_adult_goes_from_inference_to_the_served_estimates_without_an_error() {
    let dir = scratch("blanked");
    let data = blanked_adult(&dir);
    let schema = harmony(&["schema", "infer", "--data", &p(&data)]);
    for column in ["age", "sex", "hours_per_week"] {
        let block = schema.split("[[attributes]]").find(|b| b.contains(&format!("name = \"{column}\""))).unwrap();
        assert!(block.contains("missing = \"report\""), "{column}: {schema}");
    }
    let path = dir.join("blanked.toml");
    std::fs::write(&path, &schema).unwrap();
    let (data_s, schema_s) = (p(&data), p(&path));
    let plan = harmony(&["plan", "--schema", &schema_s, "--devices", "3000"]);
    assert!(plan.contains("recommended"), "{plan}");
    let sim = harmony(&["simulate", "--data", &data_s, "--schema", &schema_s, "--epsilon", "2", "--runs", "1"]);
    assert!(sim.contains("n = 3000"), "{sim}");
    let (mut child, url, _) = serve(&dir);
    let ledger = dir.join("ledger.json");
    for task in [&["--task", "means"][..], &["--task", "frequency", "--column", "sex"][..]] {
        let id = created(&url, &path, &[&["--epsilon", "2"][..], task].concat());
        let out = submit(&url, &id, &data, &ledger, &[]);
        assert!(out.status.success(), "{task:?}: {}", stderr(&out));
        assert_eq!(reports(&url, &id), 3000, "{task:?}");
        let q = ["query", "--server", url.as_str(), "--token", "tok", "--collection", &id, "--data", &data_s];
        let table = harmony(&q);
        assert!(table.contains("sex="), "{task:?}: {table}");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

/// `harmony serve` on a free port, its stderr read up to the listening line: the lines printed
/// at start.
fn serve(dir: &Path) -> (Child, String, Vec<String>) {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["serve", "--db", &format!("sqlite://{}", p(&dir.join("db.sqlite")))])
        .args(["--listen", &format!("127.0.0.1:{port}"), "--admin-token", "tok", "--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    while lines.len() < 20 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let done = line.contains("listening");
        lines.push(line);
        if done {
            break;
        }
    }
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    common::wait_for_port(port);
    (child, format!("http://127.0.0.1:{port}"), lines)
}

fn create(url: &str, schema: &Path, args: &[&str]) -> std::process::Output {
    let base = ["collection", "create", "--server", url, "--token", "tok", "--schema", &p(schema)];
    run(&[&base[..], args].concat())
}

fn created(url: &str, schema: &Path, args: &[&str]) -> String {
    let out = create(url, schema, args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn submit(url: &str, id: &str, data: &Path, ledger: &Path, extra: &[&str]) -> std::process::Output {
    let base = ["submit", "--server", url, "--collection", id, "--data", &p(data), "--budget-ledger", &p(ledger)];
    run(&[&base[..], extra].concat())
}

fn reports(url: &str, id: &str) -> u64 {
    let doc = harmony(&["query", "--server", url, "--token", "tok", "--collection", id, "--format", "json"]);
    serde_json::from_str::<Value>(&doc).unwrap()["reports"].as_u64().unwrap()
}

/// `GET path` on loopback: the status line and the headers.
fn get_head(url: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split("\r\n\r\n").next().unwrap().to_string()
}

#[test]
fn serve_opens_on_the_dashboard_and_collections_read_only_what_they_use() {
    let dir = scratch("serve");
    let (mut child, url, start) = serve(&dir);
    let url = url.as_str();
    let dashboard = format!("dashboard: {url}/dashboard/");
    assert!(start.iter().any(|l| l.contains(&dashboard)), "{start:?}");
    let head = get_head(url, "/");
    assert!(head.starts_with("HTTP/1.1 307") && head.to_ascii_lowercase().contains("location: /dashboard/"), "{head}");

    let schema = dir.join("schema.toml");
    std::fs::write(&schema, SCHEMA).unwrap();
    let data = people(&dir);
    let ledger = dir.join("ledger.json");

    // A range collection over age: prestg10's blank in row 4 is not its business.
    let range = created(url, &schema, &["--epsilon", "1", "--task", "range", "--column", "age"]);
    let out = submit(url, &range, &data, &ledger, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(reports(url, &range), 60);
    // The same file again: refused (every row would report twice), unless forced.
    let out = submit(url, &range, &data, &ledger, &[]);
    assert!(!out.status.success() && stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(reports(url, &range), 60);
    let out = submit(url, &range, &data, &ledger, &["--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(reports(url, &range), 120);

    // A means collection reads every column: the blank refuses the file, `--invalid skip` skips
    // its row and says so.
    let means = created(url, &schema, &["--epsilon", "1"]);
    let out = submit(url, &means, &data, &ledger, &[]);
    assert!(!out.status.success() && stderr(&out).contains("row 4, column \"prestg10\""), "{}", stderr(&out));
    let out = submit(url, &means, &data, &ledger, &["--invalid", "skip"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("1 rows skipped"), "{}", stderr(&out));
    assert_eq!(reports(url, &means), 59);
    // The schema's `invalid = "skip"` does the same.
    let skipping = dir.join("skip.toml");
    std::fs::write(&skipping, format!("invalid = \"skip\"\n{SCHEMA}")).unwrap();
    let means2 = created(url, &schema, &["--epsilon", "1"]);
    let out = submit(url, &means2, &data, &ledger, &["--schema", &p(&skipping)]);
    assert!(out.status.success() && stderr(&out).contains("1 rows skipped"), "{}", stderr(&out));

    // No empty truth column without --data; labels whole; the truth of --data is the present
    // values' (as simulate's).
    let query = ["query", "--server", url, "--token", "tok", "--collection", &means];
    let table = harmony(&query);
    assert!(!table.lines().any(|l| l.starts_with("estimate of") && l.contains("truth")), "{table}");
    for label in ["occ=Construction and Extraction, group A", "occ=Construction and Extraction, group B | present"] {
        assert!(table.contains(label), "{label}: {table}");
    }
    let with_truth = harmony(&[&query[..], &["--data", &p(&data)]].concat());
    let present: Vec<f64> = (0..60).filter(|i| i % 4 != 0 && *i != 2).map(|i| 1000.0 * (i % 10) as f64).collect();
    let truth = present.iter().sum::<f64>() / present.len() as f64;
    let row = with_truth.lines().find(|l| l.starts_with("income (mean of present)")).unwrap();
    assert!(row.trim_end().ends_with(&format!("{truth:.4}")), "{truth}: {row}");

    // No schema for heavy hitters; a warning for an ε default devices refuse.
    let hh = ["collection", "create", "--server", url, "--token", "tok", "--epsilon", "1", "--task", "heavy-hitters"];
    let out = run(&hh);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = create(url, &schema, &["--epsilon", "11"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("exceeds the default device policy's max_epsilon 10"), "{}", stderr(&out));

    // Token times in ISO 8601 (UTC).
    harmony(&["collection", "token", "create", "--server", url, "--token", "tok", "--collection", &means]);
    let list = harmony(&["collection", "token", "list", "--server", url, "--token", "tok", "--collection", &means]);
    let row = list.lines().nth(1).unwrap();
    assert!(row.contains("T") && row.contains("Z ") && row.contains(":"), "{list}");
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn unreachable_or_schemeless_servers_fail_within_a_second() {
    let url = format!("http://127.0.0.1:{}", free_port());
    for (server, expected) in [
        (url.as_str(), format!("is `harmony serve` running at {url}?")),
        ("127.0.0.1:8080", "must start with http:// or https://".to_string()),
    ] {
        let t = Instant::now();
        let out = run(&["collection", "list", "--server", server, "--token", "tok"]);
        assert!(t.elapsed() < Duration::from_secs(1), "{server}: {:?}", t.elapsed());
        assert!(!out.status.success() && stderr(&out).contains(&expected), "{server}: {}", stderr(&out));
    }
    let out = run(&["collection", "list", "--server", &url, "--token", "tok"]);
    assert_eq!(stderr(&out).matches("os error").count(), 1, "{}", stderr(&out));
    let out = run(&["simulate", "--data", "/nonexistent/people.csv", "--runs", "1"]);
    assert_eq!(stderr(&out).matches("No such file or directory").count(), 1, "{}", stderr(&out));
}

#[test]
fn schema_typos_and_other_delimiters_are_named() {
    let dir = scratch("typos");
    let schema = dir.join("typo.toml");
    std::fs::write(
        &schema,
        SCHEMA.replace(
            "missing = \"report\"\n\n[[attributes]]\nname = \"occ\"",
            "mising = \"report\"\n\n[[attributes]]\nname = \"occ\"",
        ),
    )
    .unwrap();
    let out = run(&["simulate", "--data", &p(&people(&dir)), "--schema", &p(&schema), "--runs", "1"]);
    let e = stderr(&out);
    assert!(!out.status.success() && e.contains("attribute \"income\" has an unknown key \"mising\""), "{e}");

    let semi = dir.join("semi.csv");
    let text = std::fs::read_to_string(people(&dir)).unwrap().replace(',', ";");
    std::fs::write(&semi, text).unwrap();
    let out = run(&["simulate", "--data", &p(&semi), "--runs", "1", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("semicolons"), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["d"].as_u64().unwrap() >= 4, "one attribute per column: {}", doc["d"]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn simulate_prints_the_recommended_configuration_and_the_present_values_truth() {
    let out = harmony(&["simulate", "--runs", "2"]);
    assert!(out.contains("recommended") && !out.contains("first run of eps = 0.5 / split"), "{out}");
    assert!(out.contains("workclass="), "categorical attributes too: {out}");
    // The truth of an attribute with `missing = "report"` is its present values' mean.
    let dir = scratch("truth");
    let schema = dir.join("schema.toml");
    std::fs::write(&schema, SCHEMA.replace("min = 0\nmax = 100\n", "min = 0\nmax = 100\nmissing = \"report\"\n"))
        .unwrap();
    let sim = ["simulate", "--data", &p(&people(&dir)), "--schema", &p(&schema), "--runs", "1", "--epsilon", "1"];
    let doc: Value = serde_json::from_str(&harmony(&[&sim[..], &["--format", "json"]].concat())).unwrap();
    let income = doc["results"][0]["attributes"].as_array().unwrap().iter().find(|a| a["name"] == "income").unwrap();
    let present: Vec<f64> = (0..60).filter(|i| i % 4 != 0).map(|i| 1000.0 * (i % 10) as f64).collect();
    let truth = present.iter().sum::<f64>() / present.len() as f64;
    assert!((income["true_mean"].as_f64().unwrap() - truth).abs() < 1e-9, "{truth}: {income}");
    assert_eq!(income["true_missing_share"].as_f64(), Some(0.25));
    let served = &doc["results"][0]["estimates"]["attributes"];
    let served = served.as_array().unwrap().iter().find(|a| a["name"] == "income").unwrap();
    assert_eq!(income["estimate"], served["estimate"], "the estimate `query` prints");
    let _ = root();
    std::fs::remove_dir_all(dir).unwrap();
}
