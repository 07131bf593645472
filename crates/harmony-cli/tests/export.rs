//! `harmony export` + `harmony aggregate --engine local` give the document `harmony query` gives:
//! for one collection per report task, served on SQLite (and on PostgreSQL when
//! `HARMONY_TEST_POSTGRES` is set), 3,000 simulated Adult devices each. Also: a database written
//! before the `day` column opens, ingests and exports (old reports under `day=unknown`); a
//! corrupted part and an invalid report give errors naming the file (and the row); a training
//! collection is refused.

mod common;

use common::{adult_rows, fails, harmony, root, serve};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The largest relative difference between two JSON documents' numbers (∞ when their shapes or
/// any non-number differ).
fn rel_diff(a: &Value, b: &Value) -> f64 {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            if x == y { 0.0 } else { (x - y).abs() / x.abs().max(y.abs()) }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).map(|(p, q)| rel_diff(p, q)).fold(0.0, f64::max)
        }
        (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
            x.iter().map(|(k, p)| y.get(k).map_or(f64::INFINITY, |q| rel_diff(p, q))).fold(0.0, f64::max)
        }
        (x, y) if x == y => 0.0,
        _ => f64::INFINITY,
    }
}

struct Case {
    name: &'static str,
    task: &'static [&'static str],
    epsilon: &'static str,
    submit: &'static [&'static str],
    ask: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case { name: "means harmony", task: &["--strategy", "harmony"], epsilon: "1", submit: &[], ask: &[] },
    Case { name: "means split (duchi-multi)", task: &["--strategy", "split"], epsilon: "2", submit: &[], ask: &[] },
    Case {
        name: "frequency",
        task: &["--task", "frequency", "--column", "education"],
        epsilon: "1",
        submit: &[],
        ask: &[],
    },
    Case {
        name: "frequency cms",
        task: &["--task", "frequency", "--column", "education", "--categorical-mechanism", "cms"],
        epsilon: "2",
        submit: &[],
        ask: &[],
    },
    Case {
        name: "marginals calm",
        task: &[
            "--task",
            "marginals",
            "--k",
            "2",
            "--method",
            "calm",
            "--devices",
            "3000",
            "--attributes",
            "sex,race,income",
        ],
        epsilon: "1",
        submit: &[],
        ask: &[],
    },
    Case {
        name: "range hh",
        task: &["--task", "range", "--column", "age", "--method", "hh"],
        epsilon: "1",
        submit: &[],
        ask: &["--ranges", "20:30,40:65", "--quantiles", "0.25,0.5,0.75"],
    },
    Case {
        name: "heavy-hitters pem",
        task: &["--task", "heavy-hitters", "--column", "education", "--top", "5", "--method", "pem"],
        epsilon: "2",
        submit: &["--column", "education"],
        ask: &[],
    },
    Case {
        name: "linear-queries hr",
        task: &["--task", "linear-queries", "--method", "hr"],
        epsilon: "1",
        submit: &[],
        ask: &[],
    },
];

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("harmony-export-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn schema() -> String {
    root().join("examples/adult.toml").display().to_string()
}

/// Creates a collection on `server` and submits the devices of `data` (seeded); returns its id.
fn collect(server: &str, case: &Case, data: &str, seed: &str) -> String {
    let schema = schema();
    let mut create = vec!["collection", "create", "--server", server, "--token", "tok", "--schema", &schema];
    create.extend_from_slice(&["--epsilon", case.epsilon]);
    create.extend_from_slice(case.task);
    let id = harmony(&create).trim().to_string();
    submit(server, &id, case, data, seed);
    id
}

fn submit(server: &str, id: &str, case: &Case, data: &str, seed: &str) {
    let mut submit = vec!["submit", "--server", server, "--collection", id, "--data", data];
    submit.extend_from_slice(&["--simulate-devices", "--seed", seed]);
    submit.extend_from_slice(case.submit);
    harmony(&submit);
}

fn query(server: &str, id: &str, case: &Case) -> Value {
    let mut q = vec!["query", "--server", server, "--token", "tok", "--collection", id, "--format", "json"];
    q.extend_from_slice(case.ask);
    serde_json::from_str(&harmony(&q)).expect("query JSON")
}

/// Exports, then aggregates with each engine this harmony has (local; DataFusion when built with
/// the `datafusion` feature, on 3 partitions).
fn export_and_aggregate(db: &str, id: &str, out: &Path, case: &Case) -> Vec<(&'static str, Value)> {
    let out_s = out.display().to_string();
    harmony(&["export", "--db", db, "--collection", id, "--format", "parquet", "--out", &out_s]);
    let engines: &[&'static str] = if cfg!(feature = "datafusion") { &["local", "datafusion"] } else { &["local"] };
    engines
        .iter()
        .map(|&engine| {
            let mut agg = vec!["aggregate", "--engine", engine, "--reports", &out_s, "--collection", id];
            agg.extend_from_slice(&["--format", "json", "--partitions", "3"]);
            agg.extend_from_slice(case.ask);
            (engine, serde_json::from_str(&harmony(&agg)).expect("aggregate JSON"))
        })
        .collect()
}

fn stores(dir: &Path) -> Vec<String> {
    let mut v = vec![format!("sqlite://{}", dir.join("db.sqlite").display())];
    match std::env::var("HARMONY_TEST_POSTGRES") {
        Ok(url) => v.push(url),
        Err(_) => eprintln!("HARMONY_TEST_POSTGRES not set: the PostgreSQL half is skipped"),
    }
    v
}

#[test]
fn query_equals_export_then_aggregate() {
    let dir = temp("equality");
    let data = adult_rows(&dir, 0, 3000);
    for db in stores(&dir) {
        let server = serve(&db);
        let ids: Vec<String> = CASES.iter().map(|c| collect(&server.url, c, &data, "17")).collect();
        let served: Vec<Value> = CASES.iter().zip(&ids).map(|(c, id)| query(&server.url, id, c)).collect();
        drop(server);
        let store = db.split(':').next().unwrap();
        for ((case, id), served) in CASES.iter().zip(&ids).zip(&served) {
            assert_eq!(served["reports"], 3000, "{}: {served}", case.name);
            let out = dir.join(format!("out-{store}"));
            for (engine, aggregated) in export_and_aggregate(&db, id, &out, case) {
                let d = rel_diff(served, &aggregated);
                assert!(
                    d <= 1e-12,
                    "{} on {store}, --engine {engine}: relative difference {d:e}\nquery: {served}\naggregate: {aggregated}",
                    case.name
                );
                let how = if served == &aggregated { "bit-equal" } else { "within 1e-12" };
                eprintln!(
                    "{} on {store}: query = export + aggregate --engine {engine} ({how}, largest relative difference {d:e})",
                    case.name
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Removes the `day` column: the database as a server before it wrote it.
fn make_old(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("ALTER TABLE reports DROP COLUMN day").unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM pragma_table_info('reports') WHERE name = 'day'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn an_old_database_opens_ingests_and_exports() {
    let dir = temp("old");
    let path = dir.join("db.sqlite");
    let db = format!("sqlite://{}", path.display());
    let case = &CASES[0];
    let id = {
        let server = serve(&db);
        collect(&server.url, case, &adult_rows(&dir, 0, 500), "1")
    };
    make_old(&path);
    let server = serve(&db);
    submit(&server.url, &id, case, &adult_rows(&dir, 500, 700), "2");
    let served = query(&server.url, &id, case);
    drop(server);
    assert_eq!(served["reports"], 1200);
    let out = dir.join("out");
    for (engine, aggregated) in export_and_aggregate(&db, &id, &out, case) {
        match engine {
            "local" => assert_eq!(served, aggregated),
            _ => assert!(rel_diff(&served, &aggregated) <= 1e-12, "--engine {engine}: {aggregated}"),
        }
    }
    let col = out.join(format!("collection={id}"));
    let days: Vec<String> = std::fs::read_dir(&col)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("day="))
        .collect();
    let today = harmony_data::reports::day_dir(Some(harmony_server::store::utc_day_now()));
    // The 500 old reports have no day; the 700 new ones today's (a run across midnight UTC
    // could give two days: both are accepted).
    assert!(days.contains(&"day=unknown".to_string()), "{days:?}");
    assert!(days.iter().any(|d| *d == today || d.starts_with("day=2")), "{days:?}");
    let mut old = 0u64;
    for f in harmony_data::reports::part_files(&col).unwrap() {
        let unknown = f.to_string_lossy().contains("day=unknown");
        let n = harmony_data::reports::for_each_row(&f, &mut |r| {
            assert_eq!(r.day.is_none(), unknown);
            Ok(())
        })
        .unwrap();
        if unknown {
            old += n;
        }
    }
    assert_eq!(old, 500);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corrupted_parts_bad_reports_and_training_collections_are_refused() {
    let dir = temp("corrupt");
    let db = format!("sqlite://{}", dir.join("db.sqlite").display());
    let case = &CASES[2];
    let (id, train) = {
        let server = serve(&db);
        let train = Case {
            name: "train",
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
            ],
            epsilon: "4",
            submit: &[],
            ask: &[],
        };
        let schema = schema();
        let mut create = vec!["collection", "create", "--server", &server.url, "--token", "tok", "--schema", &schema];
        create.extend_from_slice(&["--epsilon", train.epsilon]);
        create.extend_from_slice(train.task);
        (collect(&server.url, case, &adult_rows(&dir, 0, 300), "3"), harmony(&create).trim().to_string())
    };
    let out = dir.join("out");
    // A training collection is refused, naming what is supported.
    let e = fails(&["export", "--db", &db, "--collection", &train, "--out", &out.display().to_string()]);
    assert!(e.contains("training collection") && e.contains("report collections"), "{e}");
    let out_s = out.display().to_string();
    export_and_aggregate(&db, &id, &out, case);
    let col = out.join(format!("collection={id}"));
    let parts = harmony_data::reports::part_files(&col).unwrap();
    assert_eq!(parts.len(), 1);
    let part = &parts[0];
    let good = std::fs::read(part).unwrap();
    let args = ["aggregate", "--reports", &out_s, "--format", "json"];
    // A truncated file (no footer).
    std::fs::write(part, &good[..good.len() / 2]).unwrap();
    let e = fails(&args);
    assert!(e.contains(&part.display().to_string()), "{e}");
    // A valid file whose row 1 is not a report of this task: the file and the row are named.
    let mut body = Vec::new();
    std::fs::write(part, &good).unwrap();
    harmony_data::reports::for_each_row(part, &mut |r| {
        if body.is_empty() {
            body = r.body.to_vec();
        }
        Ok(())
    })
    .unwrap();
    std::fs::remove_dir_all(part.parent().unwrap()).unwrap();
    let mut w = harmony_data::reports::ReportsWriter::create(&col).unwrap();
    w.push("good", None, &body).unwrap();
    w.push("bad", None, &[0xff, 0xff, 0xff]).unwrap();
    let written = w.finish().unwrap();
    let e = fails(&args);
    let bad = written.files[0].display().to_string();
    assert!(e.contains(&bad) && e.contains("row 1") && e.contains("\"bad\""), "{e}");
    // DataFusion: the same bad report named (its row in the batch), or, in a harmony built
    // without it, how to build it.
    let e = fails(&["aggregate", "--engine", "datafusion", "--reports", &out_s]);
    if cfg!(feature = "datafusion") {
        assert!(e.contains("invalid report") && e.contains("row 1"), "{e}");
    } else {
        assert!(e.contains("built without DataFusion") && e.contains("--features datafusion"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
