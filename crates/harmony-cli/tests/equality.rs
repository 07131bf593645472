//! Simulate and serve share one path: for each task, `harmony simulate --runs 1 --seed S` and
//! `harmony collection create` (same options) + `harmony submit --simulate-devices --seed S`
//! into `harmony serve` + `harmony query` give the same estimate document (every number equal
//! to 1e-12; bit-identical where the accumulators are integers), over SQLite and, when
//! `HARMONY_TEST_POSTGRES` is set, over PostgreSQL. Adult in the fast tier; Census-Income
//! (KDD) in the heavy tier (`--ignored`, release; on PostgreSQL one case per task).

mod common;

use common::{harmony, root, serve};
use serde_json::Value;
use std::path::{Path, PathBuf};

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
    /// Options of `harmony submit` only (how devices read their input: heavy hitters' items).
    submit: &'static [&'static str],
}

fn check(case: &Case, data: &Path, schema: &Path, db: &str, seed: u64) {
    check_asking(case, &[], data, schema, db, seed)
}

/// [`check`], with query-time options (`--ranges`, `--quantiles`) given to both `simulate` and
/// `query`.
fn check_asking(case: &Case, ask: &[&str], data: &Path, schema: &Path, db: &str, seed: u64) {
    let (data_s, schema_s, seed_s) = (data.display().to_string(), schema.display().to_string(), seed.to_string());
    let mut sim = vec!["simulate", "--data", &data_s, "--schema", &schema_s, "--epsilon", case.epsilon];
    sim.extend_from_slice(&["--runs", "1", "--seed", &seed_s, "--format", "json"]);
    sim.extend_from_slice(case.task);
    sim.extend_from_slice(ask);
    let out: Value = serde_json::from_str(&harmony(&sim)).expect("simulate JSON");
    let simulated = out["results"][0]["estimates"].clone();
    assert!(simulated.is_object(), "{}: no estimates in simulate's output", case.name);
    let server = serve(db);
    let mut create = vec!["collection", "create", "--server", &server.url, "--token", "tok", "--schema", &schema_s];
    create.extend_from_slice(&["--epsilon", case.epsilon]);
    create.extend_from_slice(case.task);
    let id = harmony(&create).trim().to_string();
    let mut submit = vec!["submit", "--server", &server.url, "--collection", &id, "--data", &data_s];
    submit.extend_from_slice(&["--simulate-devices", "--seed", &seed_s]);
    submit.extend_from_slice(case.submit);
    harmony(&submit);
    let mut query = vec!["query", "--server", &server.url, "--token", "tok", "--collection", &id, "--format", "json"];
    query.extend_from_slice(ask);
    let served: Value = serde_json::from_str(&harmony(&query)).expect("query JSON");
    let d = diff(&simulated, &served);
    let tolerance = if case.exact { 0.0 } else { 1e-12 };
    assert!(d <= tolerance, "{} on {db}: largest difference {d:e}\nsimulate: {simulated}\nserve: {served}", case.name);
    eprintln!("{} on {}: simulate = serve (largest difference {d:e})", case.name, db.split(':').next().unwrap_or(db));
}

/// The stores a case runs on, and the SQLite file's directory, removed when the guard drops
/// (a Census run's database is ~220 MB: left behind, repeated runs fill the disk).
fn stores(name: &str) -> (Scratch, Vec<String>) {
    let dir = std::env::temp_dir().join(format!("harmony-equality-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut v = vec![format!("sqlite://{}", dir.join("db.sqlite").display())];
    match std::env::var("HARMONY_TEST_POSTGRES") {
        Ok(url) => v.push(url),
        Err(_) => eprintln!("HARMONY_TEST_POSTGRES not set: the PostgreSQL half of {name} is skipped"),
    }
    (Scratch(dir), v)
}

/// A test's scratch directory, removed on drop (also when the test fails).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// On Census-Income, PostgreSQL runs one case per task (every method runs over SQLite, and over
/// both stores on Adult in the fast tier): the store is method-blind (it keeps report bytes),
/// and the heavy tier's time goes to the 199,523 devices per case.
fn census_case_on(case: &Case, db: &str) -> bool {
    const ON_POSTGRES: &[&str] = &[
        "means harmony",
        "frequency",
        "train",
        "heavy-hitters pem",
        "marginals calm",
        "range hh",
        "linear-queries hr",
    ];
    db.starts_with("sqlite:") || ON_POSTGRES.contains(&case.name)
}

const CASES: &[Case] = &[
    Case { name: "means harmony", task: &["--strategy", "harmony"], epsilon: "1", exact: true, submit: &[] },
    Case { name: "means split (duchi-multi)", task: &["--strategy", "split"], epsilon: "2", exact: true, submit: &[] },
    Case { name: "means sample-k", task: &["--strategy", "sample-k"], epsilon: "4", exact: true, submit: &[] },
];

/// Heavy hitters (PEM, TreeHist, the sketch) over one column, and 2-way marginals (CALM with its joint fit,
/// direct, Fourier) over some attributes, planned for `users` devices.
fn task_cases(attributes: &'static [&'static str], column: &'static str, users: &'static str) -> Vec<Case> {
    let leak = |v: Vec<&'static str>| -> &'static [&'static str] { Vec::leak(v) };
    let mut out = Vec::new();
    for method in ["pem", "treehist", "sketch"] {
        out.push(Case {
            name: match method {
                "pem" => "heavy-hitters pem",
                "treehist" => "heavy-hitters treehist",
                _ => "heavy-hitters sketch",
            },
            task: leak(vec!["--task", "heavy-hitters", "--column", column, "--top", "5", "--method", method]),
            epsilon: "2",
            exact: true,
            submit: leak(vec!["--column", column]),
        });
    }
    for method in ["calm", "direct", "fourier"] {
        let mut task = vec!["--task", "marginals", "--k", "2", "--method", method, "--devices", users];
        task.extend_from_slice(attributes);
        out.push(Case {
            name: match method {
                "calm" => "marginals calm",
                "direct" => "marginals direct",
                _ => "marginals fourier",
            },
            task: leak(task),
            epsilon: "1",
            exact: true,
            submit: &[],
        });
    }
    out
}

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
        submit: &[],
    });
    // The sketches (default parameters): integer bucket counts, so equal bit for bit.
    cases.push(Case {
        name: "frequency cms",
        task: &["--task", "frequency", "--column", "education", "--categorical-mechanism", "cms"],
        epsilon: "2",
        exact: true,
        submit: &[],
    });
    cases.push(Case {
        name: "frequency rappor",
        task: &["--task", "frequency", "--column", "occupation", "--categorical-mechanism", "rappor"],
        epsilon: "2",
        exact: true,
        submit: &[],
    });
    cases.push(Case {
        name: "train",
        // Open rounds: the seeded devices post under their own ids, as in simulate.
        task: &[
            "--task",
            "train",
            "--target",
            "income",
            "--model",
            "logistic",
            "--batch-size",
            "400",
            "--rounds",
            "3",
            "--no-enrollment",
        ],
        epsilon: "4",
        exact: true,
        submit: &[],
    });
    cases.extend(task_cases(&["--attributes", "sex,race,income,workclass,relationship"], "education", "48842"));
    let (_scratch, dbs) = stores("adult");
    for db in dbs {
        for c in &cases {
            check(c, &data, &schema, &db, 17);
        }
    }
}

#[test]
#[ignore = "heavy tier: Census-Income (KDD), 199,523 devices per case"]
fn census_simulate_equals_serve_sqlite() {
    census_simulate_equals_serve(false);
}

/// The PostgreSQL half (a test of its own so that the heavy tier runs the halves side by side).
#[test]
#[ignore = "heavy tier: Census-Income (KDD), 199,523 devices per case"]
fn census_simulate_equals_serve_postgres() {
    census_simulate_equals_serve(true);
}

fn census_simulate_equals_serve(postgres: bool) {
    let data = root().join("data/census_income_kdd.csv.xz");
    let schema = root().join("examples/census_income_kdd.toml");
    let mut cases: Vec<Case> = CASES.to_vec();
    cases.push(Case {
        name: "frequency",
        task: &["--task", "frequency", "--column", "education"],
        epsilon: "1",
        exact: true,
        submit: &[],
    });
    cases.push(Case {
        name: "train",
        // Open rounds: the seeded devices post under their own ids, as in simulate.
        task: &[
            "--task",
            "train",
            "--target",
            "income",
            "--model",
            "logistic",
            "--batch-size",
            "2000",
            "--rounds",
            "3",
            "--no-enrollment",
        ],
        epsilon: "4",
        exact: true,
        submit: &[],
    });
    cases.extend(task_cases(
        &["--attributes", "sex,race,citizenship,class_of_worker,tax_filer_stat"],
        "education",
        "199523",
    ));
    let name = if postgres { "census-postgres" } else { "census-sqlite" };
    let (_scratch, dbs) = stores(name);
    for db in dbs.into_iter().filter(|db| db.starts_with("sqlite:") != postgres) {
        for c in cases.iter().filter(|c| census_case_on(c, &db)) {
            check(c, &data, &schema, &db, 23);
        }
    }
}

/// `range` (every method; ranges and quantiles asked at query time) and `linear-queries`
/// (every mechanism): integer accumulators, so bit-identical.
const RANGE_LINEAR: &[Case] = &[
    Case {
        name: "range hh",
        task: &["--task", "range", "--column", "age", "--method", "hh"],
        epsilon: "1",
        exact: true,
        submit: &[],
    },
    Case {
        name: "range haar",
        task: &["--task", "range", "--column", "age", "--method", "haar"],
        epsilon: "2",
        exact: true,
        submit: &[],
    },
    Case {
        name: "range flat",
        task: &["--task", "range", "--column", "age", "--method", "flat", "--bins", "32"],
        epsilon: "4",
        exact: true,
        submit: &[],
    },
    Case {
        name: "range2d",
        task: &["--task", "range2d", "--attributes", "age,hours_per_week", "--levels", "4"],
        epsilon: "1",
        exact: true,
        submit: &[],
    },
    Case {
        name: "linear-queries hr",
        task: &["--task", "linear-queries", "--method", "hr"],
        epsilon: "1",
        exact: true,
        submit: &[],
    },
    Case {
        name: "linear-queries gaussian",
        task: &["--task", "linear-queries", "--method", "gaussian", "--attributes", "education", "--queries", "prefix"],
        epsilon: "2",
        exact: true,
        // Its δ = 10⁻⁶: the devices opt in to (ε, δ) mechanisms.
        submit: &["--policy", "examples/policies/approximate.toml"],
    },
    Case {
        name: "linear-queries adaptive",
        task: &["--task", "linear-queries", "--method", "adaptive", "--attributes", "education", "--queries", "prefix"],
        epsilon: "1",
        exact: true,
        submit: &[],
    },
];

/// What `range` cases ask at query time.
const ASK: &[&str] = &["--ranges", "20:30,40:65", "--quantiles", "0.25,0.5,0.75"];
/// What `range2d` cases ask at query time.
const ASK_2D: &[&str] = &["--rects", "25:45:35:45,17:91:60:100"];

fn range_and_linear(data: &Path, schema: &Path, name: &str, seed: u64) {
    let census = name.starts_with("census");
    let (_scratch, dbs) = stores(name);
    for db in dbs {
        // range2d reads hours_per_week, an Adult column.
        for c in RANGE_LINEAR.iter().filter(|c| !census || (c.name != "range2d" && census_case_on(c, &db))) {
            let ask = match c.name {
                "range2d" => ASK_2D,
                n if n.starts_with("range") => ASK,
                _ => &[],
            };
            check_asking(c, ask, data, schema, &db, seed);
        }
    }
}

#[test]
fn adult_range_and_linear_simulate_equals_serve() {
    range_and_linear(&root().join("data/adult.csv"), &root().join("examples/adult.toml"), "adult-range-linear", 17);
}

#[test]
#[ignore = "heavy tier: Census-Income (KDD), 199,523 devices per case"]
fn census_range_and_linear_simulate_equals_serve() {
    let (data, schema) = (root().join("data/census_income_kdd.csv.xz"), root().join("examples/census_income_kdd.toml"));
    range_and_linear(&data, &schema, "census-range-linear", 23);
}
