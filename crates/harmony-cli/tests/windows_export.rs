//! Windows on the export: a collection of every report task fed on three simulated days through
//! a server in this process (its clock shifted), exported (`harmony export`, one partition per
//! day) and aggregated per window (`harmony aggregate --from --to`): each window's document equals
//! the server's `GET …/estimates?from=&to=` to 1e-12, with the local engine (fast tier) and with
//! DataFusion (heavy tier, a `datafusion` build).

mod common;

use common::harmony;
use harmony_client::{Client, DeviceTask, Input, Policy, SimulatedDevices};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::{ReportBatch, ReportItem};
use harmony_server::{AppState, Limits};
use serde_json::Value as Json;

const TOKEN: &str = "windows-export-token";
const DAY: i64 = 86_400;
/// 2026-01-05 at 00:00 UTC.
const DAY0: i64 = 20_458 * DAY;

fn specs() -> Vec<(&'static str, Json)> {
    vec![
        ("means", serde_json::json!({"kind": "means"})),
        ("frequency", serde_json::json!({"kind": "frequency", "attribute": "color"})),
        ("range", serde_json::json!({"kind": "range", "attribute": "age", "bins": 8})),
        (
            "linear-queries",
            serde_json::json!({"kind": "linear-queries", "attributes": ["color", "age"], "bins": {"age": 4}, "workload": "prefix"}),
        ),
        ("marginals", serde_json::json!({"kind": "marginals", "method": "direct", "bins": {"age": 4}, "ways": [2]})),
        ("heavy-hitters", serde_json::json!({"kind": "heavy-hitters", "method": "pem", "top": 3, "pad_length": 2})),
    ]
}

/// Asserts two JSON documents equal, numbers to 1e-12 (relative above 1).
fn assert_close(what: &str, a: &Json, b: &Json) {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-12 * x.abs().max(1.0), "{what}: {x} vs {y}");
        }
        (Json::Array(x), Json::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{what}: lengths");
            x.iter().zip(y).enumerate().for_each(|(i, (p, q))| assert_close(&format!("{what}[{i}]"), p, q));
        }
        (Json::Object(x), Json::Object(y)) => {
            assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>(), "{what}: keys");
            x.iter().for_each(|(k, p)| assert_close(&format!("{what}.{k}"), p, &y[k]));
        }
        _ => assert_eq!(a, b, "{what}"),
    }
}

/// Creates a collection of `spec` and feeds it 60 simulated devices on each of three days.
fn feed(state: &AppState, client: &Client, name: &str, spec: &Json) -> String {
    let schema = Schema::new(vec![
        Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
        Attribute::Categorical { name: "color".into(), categories: vec!["red".into(), "green".into(), "blue".into()] },
    ])
    .unwrap();
    let req = serde_json::json!({"schema": schema, "epsilon": 2.0, "task": spec});
    let created = client.create_collection(&serde_json::from_value(req).unwrap()).unwrap();
    let task = DeviceTask::with_policy(created.config.clone(), Policy::default()).unwrap();
    let mut devices = SimulatedDevices::new(7);
    let items: Vec<Vec<String>> = (0..4).map(|i| vec![format!("item{i}")]).collect();
    for day in 0..3u64 {
        state.shift_clock(DAY0 + day as i64 * DAY + DAY / 2 - harmony_server::store::unix_now());
        let reports: Vec<ReportItem> = (0..60)
            .map(|i| {
                let rec =
                    [Value::Unit(((i * 7 + day * 31) % 100) as f64 / 50.0 - 1.0), Value::Category((i % 3) as u32)];
                let input =
                    if name == "heavy-hitters" { Input::Items(&items[(i % 4) as usize]) } else { Input::Record(&rec) };
                devices.item(&task, day * 1000 + i, &input).unwrap()
            })
            .collect();
        let batch =
            ReportBatch { collection: created.id.clone(), config_version: created.config.config_version, reports };
        let ack = client.submit_raw(&created.id, &serde_json::to_vec(&batch).unwrap()).unwrap();
        assert_eq!(ack.accepted, 60, "{name}");
    }
    state.shift_clock(0);
    created.id
}

/// The windows checked, as (from, to) dates (an open side when `None`).
const WINDOWS: [(Option<&str>, Option<&str>); 6] = [
    (Some("2026-01-05"), Some("2026-01-08")),
    (Some("2026-01-05"), Some("2026-01-07")),
    (Some("2026-01-06"), Some("2026-01-08")),
    (Some("2026-01-06"), Some("2026-01-07")),
    (Some("2026-01-07"), None),
    (None, Some("2026-01-06")),
];

fn windows_of_the_export(engines: &[&str]) {
    let dir = tempfile_dir();
    let db = format!("sqlite://{}", dir.join("db.sqlite").display());
    let state = AppState::new(harmony_server::open_store(&db).unwrap(), TOKEN).unwrap();
    let server = harmony_server::spawn_state(state.clone(), "127.0.0.1:0", 2, &Limits::default(), |r| r).unwrap();
    let client = Client::new(&format!("http://{}", server.addr)).with_token(TOKEN);
    let mut served = Vec::new();
    for (name, spec) in specs() {
        let id = feed(&state, &client, name, &spec);
        for (from, to) in WINDOWS {
            let params: Vec<(&str, &str)> =
                [("from", from), ("to", to)].into_iter().filter_map(|(k, v)| Some((k, v?))).collect();
            let doc = client.window_json(&id, "estimates", &params, &Default::default()).unwrap();
            served.push((name, id.clone(), from, to, serde_json::from_slice::<Json>(&doc).unwrap()));
        }
    }
    server.stop();
    drop(state);
    let out = dir.join("export").display().to_string();
    for (name, id, from, to, doc) in &served {
        if !std::path::Path::new(&out).join(format!("collection={id}")).exists() {
            harmony(&["export", "--db", &db, "--collection", id, "--out", &out]);
        }
        for engine in engines {
            let mut args =
                vec!["aggregate", "--engine", engine, "--reports", &out, "--collection", id, "--format", "json"];
            from.map(|f| args.extend(["--from", f]));
            to.map(|t| args.extend(["--to", t]));
            let got: Json = serde_json::from_str(&harmony(&args)).unwrap();
            assert_close(&format!("{name} {engine} [{from:?}, {to:?})"), &got, doc);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "harmony-windows-export-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn export_windows_equal_the_servers_with_the_local_engine() {
    windows_of_the_export(&["local"]);
}

#[test]
#[ignore = "heavy: needs a harmony built with the datafusion feature (CI's heavy tier)"]
fn export_windows_equal_the_servers_with_datafusion() {
    if !cfg!(feature = "datafusion") {
        eprintln!("built without the datafusion feature: skipped");
        return;
    }
    windows_of_the_export(&["datafusion"]);
}
