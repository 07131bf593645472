//! Simulate and serve share one path: for each task, `harmony simulate --runs 1 --seed S` and
//! `harmony collection create` (same options) + `harmony submit --simulate-devices --seed S`
//! into `harmony serve` + `harmony query` give the same estimate document (every number equal
//! to 1e-12; bit-identical where the accumulators are integers), over SQLite and, when
//! `HARMONY_TEST_POSTGRES` is set, over PostgreSQL. Adult in the fast tier; Census-Income
//! (KDD) in the heavy tier (`--ignored`, release).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_harmony");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn harmony(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).current_dir(root()).output().expect("run harmony");
    assert!(
        out.status.success(),
        "harmony {}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(db: &str) -> Server {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(BIN)
        .args(["serve", "--db", db, "--listen", &format!("127.0.0.1:{port}"), "--analyst-token", "tok"])
        .args(["--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t.elapsed() < Duration::from_secs(60), "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Server { child, url: format!("http://127.0.0.1:{port}") }
}

/// The largest difference between two JSON documents' numbers (∞ when their shapes differ),
/// ignoring the `collection` id.
fn diff(a: &Value, b: &Value) -> f64 {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => (x.as_f64().unwrap() - y.as_f64().unwrap()).abs(),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).map(|(p, q)| diff(p, q)).fold(0.0, f64::max)
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys: Vec<&String> = x.keys().chain(y.keys()).filter(|k| *k != "collection").collect();
            keys.iter().map(|k| x.get(*k).zip(y.get(*k)).map_or(f64::INFINITY, |(p, q)| diff(p, q))).fold(0.0, f64::max)
        }
        (x, y) if x == y => 0.0,
        _ => f64::INFINITY,
    }
}

/// One case: the options shared by `simulate` and `collection create`.
#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    task: &'static [&'static str],
    epsilon: &'static str,
    /// Exact (integer accumulators) or to 1e-12 (floating sums: duchi-multi, model rounds).
    exact: bool,
}

fn check(case: &Case, data: &Path, schema: &Path, db: &str, seed: u64) {
    let (data_s, schema_s, seed_s) = (data.display().to_string(), schema.display().to_string(), seed.to_string());
    let mut sim = vec!["simulate", "--data", &data_s, "--schema", &schema_s, "--epsilon", case.epsilon];
    sim.extend_from_slice(&["--runs", "1", "--seed", &seed_s, "--format", "json"]);
    sim.extend_from_slice(case.task);
    let out: Value = serde_json::from_str(&harmony(&sim)).expect("simulate JSON");
    let simulated = out["results"][0]["estimates"].clone();
    assert!(simulated.is_object(), "{}: no estimates in simulate's output", case.name);
    let server = serve(db);
    let mut create = vec!["collection", "create", "--server", &server.url, "--token", "tok", "--schema", &schema_s];
    create.extend_from_slice(&["--epsilon", case.epsilon]);
    create.extend_from_slice(case.task);
    let id = harmony(&create).trim().to_string();
    harmony(&[
        "submit",
        "--server",
        &server.url,
        "--collection",
        &id,
        "--data",
        &data_s,
        "--simulate-devices",
        "--seed",
        &seed_s,
    ]);
    let served: Value = serde_json::from_str(&harmony(&[
        "query",
        "--server",
        &server.url,
        "--token",
        "tok",
        "--collection",
        &id,
        "--format",
        "json",
    ]))
    .expect("query JSON");
    let d = diff(&simulated, &served);
    let tolerance = if case.exact { 0.0 } else { 1e-12 };
    assert!(d <= tolerance, "{} on {db}: largest difference {d:e}\nsimulate: {simulated}\nserve: {served}", case.name);
    eprintln!("{} on {}: simulate = serve (largest difference {d:e})", case.name, db.split(':').next().unwrap_or(db));
}

fn stores(name: &str) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("harmony-equality-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut v = vec![format!("sqlite://{}", dir.join("db.sqlite").display())];
    match std::env::var("HARMONY_TEST_POSTGRES") {
        Ok(url) => v.push(url),
        Err(_) => eprintln!("HARMONY_TEST_POSTGRES not set: the PostgreSQL half of {name} is skipped"),
    }
    v
}

const CASES: &[Case] = &[
    Case { name: "means harmony", task: &["--strategy", "harmony"], epsilon: "1", exact: true },
    Case { name: "means split (duchi-multi)", task: &["--strategy", "split"], epsilon: "2", exact: true },
    Case { name: "means sample-k", task: &["--strategy", "sample-k"], epsilon: "4", exact: true },
];

#[test]
fn adult_simulate_equals_serve() {
    let data = root().join("data/adult.csv");
    let schema = root().join("examples/adult.toml");
    let mut cases: Vec<Case> = CASES.to_vec();
    cases.push(Case {
        name: "frequency",
        task: &["--task", "frequency", "--column", "education"],
        epsilon: "1",
        exact: true,
    });
    cases.push(Case {
        name: "train",
        task: &["--task", "train", "--target", "income", "--model", "logistic", "--batch-size", "400", "--rounds", "3"],
        epsilon: "4",
        exact: true,
    });
    for db in stores("adult") {
        for c in &cases {
            check(c, &data, &schema, &db, 17);
        }
    }
}

#[test]
#[ignore = "heavy tier: Census-Income (KDD), 199,523 devices per case"]
fn census_simulate_equals_serve() {
    let data = root().join("data/census_income_kdd.csv.xz");
    let schema = root().join("examples/census_income_kdd.toml");
    let mut cases: Vec<Case> = CASES.to_vec();
    cases.push(Case {
        name: "frequency",
        task: &["--task", "frequency", "--column", "education"],
        epsilon: "1",
        exact: true,
    });
    for db in stores("census") {
        for c in &cases {
            check(c, &data, &schema, &db, 23);
        }
    }
}
