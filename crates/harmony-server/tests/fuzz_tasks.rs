//! Bad input for every task: specs refused with a JSON 400 naming the field, and the report
//! endpoint of a collection of each task fuzzed with mutated, truncated, re-kinded and junk
//! reports. Every answer is a 2xx or a JSON 4xx naming a field; nothing of a rejected batch is
//! stored (the stored count equals the acknowledged reports exactly); the estimates of every
//! collection still answer afterwards, every number finite or null.

use harmony_client::{Client, DeviceTask, Input, Policy, RetryPolicy, SimulatedDevices};
use harmony_core::kinds::OracleKind;
use harmony_core::sampling::{fast_rng, uniform01};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::StrategyKind;
use harmony_protocol::estimates::Query;
use harmony_protocol::spec::{
    FrequencySpec, LinearMechanism, LinearQueriesSpec, MeansSpec, RangeMethod, RangeSpec, TaskSpec,
};
use harmony_protocol::{CreateCollection, ReportBatch, ReportItem, from_hex_into, to_hex};
use harmony_server::{SqliteStore, Store};
use rand::Rng;
use std::sync::Arc;

mod common;

const TOKEN: &str = "fuzz-token";

fn schema() -> Schema {
    Schema::new(vec![
        Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
        Attribute::Categorical { name: "color".into(), categories: vec!["red".into(), "green".into(), "blue".into()] },
        Attribute::Numeric { name: "score".into(), min: -1.0, max: 1.0 },
    ])
    .unwrap()
}

/// One collection request per servable task and method (train takes gradients, fuzzed in
/// tests/rounds.rs).
fn requests() -> Vec<(String, CreateCollection)> {
    let req = |task| CreateCollection { schema: Some(schema()), epsilon: 2.0, task };
    let mut out = Vec::new();
    for strategy in [StrategyKind::Split, StrategyKind::Harmony, StrategyKind::SampleK] {
        out.push((format!("means {strategy:?}"), req(TaskSpec::Means(MeansSpec { strategy, ..Default::default() }))));
    }
    for &oracle in OracleKind::ALL {
        let spec = FrequencySpec { attribute: "color".into(), mechanism: Some(oracle) };
        out.push((format!("frequency {}", oracle.name()), req(TaskSpec::Frequency(spec))));
    }
    for method in [RangeMethod::Hh, RangeMethod::Haar, RangeMethod::Flat] {
        let spec = RangeSpec { attribute: "age".into(), bins: Some(16), method, branching: None };
        out.push((format!("range {}", method.name()), req(TaskSpec::Range(spec))));
    }
    for mechanism in [LinearMechanism::Hr, LinearMechanism::Gaussian] {
        let spec = LinearQueriesSpec {
            attributes: vec!["color".into(), "age".into()],
            bins: [("age".to_string(), 4)].into(),
            workload: serde_json::json!("prefix"),
            mechanism,
            delta: None,
            hull: Default::default(),
            enrollment: None,
            batch_size: None,
        };
        out.push((format!("linear-queries {}", mechanism.name()), req(TaskSpec::LinearQueries(spec))));
    }
    for method in ["calm", "direct", "fourier"] {
        let mut spec = serde_json::json!({"kind": "marginals", "method": method, "bins": {"age": 4}, "ways": [2]});
        if method == "calm" {
            spec["users"] = 1000.into();
        }
        out.push((format!("marginals {method}"), req(serde_json::from_value(spec).unwrap())));
    }
    for method in ["pem", "treehist", "sketch"] {
        let spec = serde_json::json!({"kind": "heavy-hitters", "method": method, "top": 3, "pad_length": 2});
        out.push((format!("heavy-hitters {method}"), req(serde_json::from_value(spec).unwrap())));
    }
    out
}

/// Raw HTTP/1.1 request (bypasses client-side checks); returns (status, body).
fn raw(addr: std::net::SocketAddr, method: &str, path: &str, body: &[u8], auth: bool) -> (u16, String) {
    common::raw(addr, method, path, body, auth.then_some(TOKEN))
}

/// Asserts a 4xx whose body is a JSON error naming a field; returns the field.
fn json_4xx(what: &str, status: u16, body: &str) -> String {
    assert!((400..500).contains(&status), "{what}: status {status}: {body}");
    let e: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|_| panic!("{what}: not a JSON error: {body:?}"));
    let field = e["error"]["field"].as_str().unwrap_or_else(|| panic!("{what}: no field: {body}"));
    assert!(e["error"]["message"].is_string(), "{what}: {body}");
    field.to_string()
}

/// Every number in a JSON document is finite (serde_json cannot hold NaN/inf: they arrive as
/// null), and the document parses.
fn assert_numbers_sane(what: &str, v: &serde_json::Value) {
    match v {
        serde_json::Value::Number(n) => assert!(n.as_f64().is_some_and(f64::is_finite), "{what}: {n}"),
        serde_json::Value::Array(a) => a.iter().for_each(|x| assert_numbers_sane(what, x)),
        serde_json::Value::Object(o) => o.values().for_each(|x| assert_numbers_sane(what, x)),
        _ => {}
    }
}

/// The records of `n` synthetic devices.
fn rows(n: usize, seed: u64) -> Vec<[Value; 3]> {
    let mut rng = fast_rng(seed);
    (0..n)
        .map(|_| {
            [
                Value::Unit(2.0 * uniform01(&mut rng) - 1.0),
                Value::Category((uniform01(&mut rng) * 3.0) as u32 % 3),
                Value::Unit(uniform01(&mut rng) - 0.5),
            ]
        })
        .collect()
}

/// Mutated copies of a good report: other wire versions and kinds, truncations, trailing bytes,
/// bit flips, zeroed and saturated tails.
fn mutations(good: &[u8], rng: &mut dyn Rng) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for version in [0u8, 2, 255] {
        let mut m = good.to_vec();
        m[0] = version;
        out.push((format!("wire version {version}"), m));
    }
    for kind in (0u8..=50).chain([127, 128, 255]) {
        if kind != good[1] {
            let mut m = good.to_vec();
            m[1] = kind;
            out.push((format!("kind {kind}"), m));
        }
    }
    for cut in 0..good.len() {
        out.push((format!("truncated to {cut}"), good[..cut].to_vec()));
    }
    for extra in [vec![0u8], vec![0xff; 9]] {
        out.push((format!("{} trailing bytes", extra.len()), [good, &extra].concat()));
    }
    for fill in [0x00u8, 0xff, 0x7f, 0x80] {
        let mut m = good.to_vec();
        m[2..].iter_mut().for_each(|b| *b = fill);
        out.push((format!("body filled with {fill:#x}"), m));
    }
    for i in 0..120 {
        let mut m = good.to_vec();
        for _ in 0..1 + rng.next_u32() % 4 {
            let p = rng.next_u32() as usize % m.len();
            m[p] ^= 1 << (rng.next_u32() % 8);
        }
        out.push((format!("bit flips {i}"), m));
    }
    out
}

#[test]
fn every_task_refuses_bad_reports_and_stores_nothing_of_them() {
    let dir = std::env::temp_dir().join(format!("harmony-fuzz-tasks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    let server = harmony_server::spawn(store, TOKEN, "127.0.0.1:0", 2).unwrap();
    let analyst =
        Client::new(&server.url()).with_token(TOKEN).with_retry(RetryPolicy { attempts: 1, ..Default::default() });
    let mut rng = fast_rng(99);
    let mut expected = Vec::new();
    for (name, req) in requests() {
        let created = analyst.create_collection(&req).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The Gaussian linear-queries request has δ = 10⁻⁶: its devices opt in to (ε, δ) mechanisms.
        let policy = Policy { approximate: true, max_delta: 1e-6, ..Policy::default() };
        let task = DeviceTask::with_policy(created.config.clone(), policy).unwrap();
        let mut devices = SimulatedDevices::new(7);
        let items: Vec<Vec<String>> = (0..20).map(|i| vec![format!("item{}", i % 4), format!("x{i}")]).collect();
        let good: Vec<ReportItem> = rows(20, 5)
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let input = match req.task {
                    TaskSpec::HeavyHitters(_) => Input::Items(&items[i]),
                    _ => Input::Record(r),
                };
                devices.item(&task, i as u64, &input).unwrap()
            })
            .collect();
        let path = format!("/v1/collections/{}/reports", created.id);
        let v = created.config.config_version;
        let body = |reports: Vec<ReportItem>| {
            serde_json::to_vec(&ReportBatch { collection: created.id.clone(), config_version: v, reports }).unwrap()
        };
        let (s, resp) = raw(server.addr, "POST", &path, &body(good[..10].to_vec()), false);
        assert_eq!(s, 200, "{name}: {resp}");
        let mut stored = 10u64;
        let mut bytes = Vec::new();
        from_hex_into(&good[10].report, &mut bytes).unwrap();
        for (i, (what, m)) in mutations(&bytes, &mut rng).into_iter().enumerate() {
            let bad = ReportItem { id: format!("m{i}"), report: to_hex(&m) };
            // Alone, and behind a good report (the whole batch must go, or the whole batch stay).
            for batch in [vec![bad.clone()], vec![good[10 + i % 10].clone(), bad]] {
                let n = batch.len() as u64;
                let (s, resp) = raw(server.addr, "POST", &path, &body(batch), false);
                if s == 200 {
                    let ack: serde_json::Value = serde_json::from_str(&resp).unwrap();
                    stored += ack["accepted"].as_u64().unwrap();
                    assert_eq!(ack["accepted"].as_u64().unwrap() + ack["duplicates"].as_u64().unwrap(), n, "{resp}");
                } else {
                    let field = json_4xx(&format!("{name}: {what}"), s, &resp);
                    assert!(field.starts_with("reports["), "{name}: {what}: field {field}");
                }
            }
        }
        expected.push((name, created.id, stored));
    }
    for (name, id, stored) in &expected {
        let (s, resp) = raw(server.addr, "GET", &format!("/v1/collections/{id}/estimates"), b"", true);
        assert_eq!(s, 200, "{name}: {resp}");
        let doc: serde_json::Value = serde_json::from_str(&resp).unwrap();
        assert_eq!(doc["reports"].as_u64(), Some(*stored), "{name}: the count is not the acknowledged reports");
        assert_numbers_sane(name, &doc);
        let typed = analyst.estimates(id, &Query::default()).unwrap();
        assert_eq!(typed.reports, *stored, "{name}");
    }
    server.stop();
    let store = SqliteStore::open(&dir.join("db.sqlite")).unwrap();
    for c in store.collections().unwrap() {
        let (name, _, stored) = expected.iter().find(|(_, id, _)| *id == c.id).unwrap();
        assert_eq!(store.count_reports(c.key).unwrap(), *stored, "{name}: stored rows");
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_specs_of_every_task_name_the_field() {
    let dir = std::env::temp_dir().join(format!("harmony-fuzz-specs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    let server = harmony_server::spawn(store, TOKEN, "127.0.0.1:0", 2).unwrap();
    let schema = serde_json::to_value(schema()).unwrap();
    let with = |task: serde_json::Value| serde_json::json!({"schema": schema, "epsilon": 1.0, "task": task});
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (with(serde_json::json!({"kind": "medians"})), "task"),
        (with(serde_json::json!({"kind": "means", "strategy": "all"})), "task"),
        (with(serde_json::json!({"kind": "means", "typo": 1})), "task"),
        (with(serde_json::json!({"kind": "frequency", "attribute": "age"})), "task.attribute"),
        (with(serde_json::json!({"kind": "frequency", "attribute": "nope"})), "task.attribute"),
        (with(serde_json::json!({"kind": "frequency", "attribute": "color", "mechanism": "xx"})), "task"),
        (with(serde_json::json!({"kind": "range", "attribute": "color"})), "task.attribute"),
        (with(serde_json::json!({"kind": "range", "attribute": "age", "bins": 1})), "task.bins"),
        (with(serde_json::json!({"kind": "range", "attribute": "age", "bins": 1_000_000})), "task.bins"),
        (
            with(serde_json::json!({"kind": "range", "attribute": "age", "method": "haar", "branching": 4})),
            "task.branching",
        ),
        (
            with(serde_json::json!({"kind": "linear-queries", "attributes": [], "workload": "identity"})),
            "task.attributes",
        ),
        (with(serde_json::json!({"kind": "linear-queries", "attributes": ["color"], "workload": 7})), "task.workload"),
        (with(serde_json::json!({"kind": "heavy-hitters", "top": 0})), "task.top"),
        (with(serde_json::json!({"kind": "heavy-hitters", "bits": 70})), "task.bits"),
        (with(serde_json::json!({"kind": "heavy-hitters", "pad_length": 0})), "task.pad_length"),
        (with(serde_json::json!({"kind": "marginals", "attributes": ["color", "nope"]})), "task.attributes"),
        (with(serde_json::json!({"kind": "marginals", "bins": {"age": 1}})), "task.bins"),
        (
            with(
                serde_json::json!({"kind": "linear-queries", "attributes": ["color"], "workload": "identity", "delta": 0.1}),
            ),
            "task.delta",
        ),
        (
            with(
                serde_json::json!({"kind": "train", "task": "logistic", "target": "nope", "batch_size": 10, "rounds": 5}),
            ),
            "task.target",
        ),
        (
            with(
                serde_json::json!({"kind": "train", "task": "linear", "target": "age", "batch_size": 10, "rounds": 0}),
            ),
            "task.rounds",
        ),
        (serde_json::json!({"schema": schema, "epsilon": -1.0, "task": {"kind": "means"}}), "epsilon"),
        (serde_json::json!({"epsilon": 1.0, "task": {"kind": "range", "attribute": "age"}}), "schema"),
    ];
    for (body, expected) in cases {
        let (s, resp) = raw(server.addr, "POST", "/v1/collections", body.to_string().as_bytes(), true);
        let field = json_4xx(&body.to_string(), s, &resp);
        assert!(field.starts_with(expected), "{body}: field {field:?}, expected {expected}: {resp}");
    }
    server.stop();
    let store = SqliteStore::open(&dir.join("db.sqlite")).unwrap();
    assert!(store.collections().unwrap().is_empty(), "a refused spec was stored");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
