//! The HTTP API on loopback: auth, idempotency, validation, restart, and a fuzz of the report
//! endpoint (garbage bodies, wrong versions, oversized batches, wrong collection, replays).

use harmony_client::{Client, ClientError, DeviceTask, Input, MemoryLedger, RetryPolicy, SimulatedDevices};
use harmony_core::sampling::{fast_rng, uniform01};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::StrategyKind;
use harmony_protocol::estimates::{AttributeResult, EstimateDocument, MeansEstimate, Query, TaskEstimate};
use harmony_protocol::spec::{MeansSpec, TaskSpec};
use harmony_protocol::{CollectionConfig, CreateCollection, ReportBatch, ReportItem, from_hex_into, to_hex};
use harmony_server::{SqliteStore, Store};
use rand::Rng;
use std::path::PathBuf;
use std::sync::Arc;

mod common;

use std::io::{Read, Write};

const TOKEN: &str = "test-token";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harmony-api-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn schema() -> Schema {
    Schema::new(vec![
        Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
        Attribute::Categorical { name: "color".into(), categories: vec!["red".into(), "green".into(), "blue".into()] },
        Attribute::Numeric { name: "score".into(), min: -1.0, max: 1.0 },
    ])
    .unwrap()
}

fn request(strategy: StrategyKind) -> CreateCollection {
    CreateCollection {
        schema: Some(schema()),
        epsilon: 2.0,
        task: TaskSpec::Means(MeansSpec { strategy, ..Default::default() }),
    }
}

fn start(dir: &std::path::Path) -> harmony_server::Running {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    harmony_server::spawn(store, TOKEN, "127.0.0.1:0", 2).unwrap()
}

fn fast_client(url: &str) -> Client {
    Client::new(url).with_retry(RetryPolicy { attempts: 1, ..Default::default() })
}

fn records(n: usize, seed: u64) -> Vec<Value> {
    let mut rng = fast_rng(seed);
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(Value::Unit(2.0 * uniform01(&mut rng) - 1.0));
        v.push(Value::Category((uniform01(&mut rng) * 3.0) as u32 % 3));
        v.push(Value::Unit(uniform01(&mut rng) - 0.5));
    }
    v
}

/// The batch items of the simulated devices of `seed`, one per row of 3 values (report ids from
/// the OS CSPRNG).
fn items(task: &DeviceTask, values: &[Value], seed: u64) -> Vec<ReportItem> {
    let mut devices = SimulatedDevices::new(seed);
    values.chunks(3).enumerate().map(|(i, row)| devices.item(task, i as u64, &Input::Record(row)).unwrap()).collect()
}

fn device_task(config: &CollectionConfig) -> DeviceTask {
    DeviceTask::new(config.clone()).unwrap()
}

fn estimates(client: &Client, id: &str) -> EstimateDocument {
    client.estimates(id, &Query::default()).unwrap()
}

fn means(doc: &EstimateDocument) -> &MeansEstimate {
    match &doc.result {
        TaskEstimate::Means(m) => m,
        other => panic!("expected means estimates, got {other:?}"),
    }
}

/// Raw HTTP/1.1 POST (bypasses client-side checks); returns (status, body).
fn raw_post(addr: std::net::SocketAddr, path: &str, body: &[u8], auth: Option<&str>) -> (u16, String) {
    common::raw(addr, "POST", path, body, auth)
}

#[test]
fn auth_idempotency_validation_and_restart() {
    let dir = tmp("basic");
    let server = start(&dir);
    let url = server.url();
    // Analyst endpoints: missing and wrong tokens are 401.
    for c in [fast_client(&url), fast_client(&url).with_token("wrong")] {
        match c.create_collection(&request(StrategyKind::Harmony)) {
            Err(ClientError::Rejected { status: 401, field, .. }) => assert_eq!(field, "authorization"),
            other => panic!("expected 401, got {other:?}"),
        }
    }
    let analyst = fast_client(&url).with_token(TOKEN);
    // Bad parameters name the field.
    let mut bad = request(StrategyKind::Harmony);
    bad.epsilon = -1.0;
    match analyst.create_collection(&bad) {
        Err(ClientError::Rejected { status: 400, field, message }) => {
            assert_eq!(field, "epsilon", "{message}");
        }
        other => panic!("expected 400, got {other:?}"),
    }
    let created = analyst.create_collection(&request(StrategyKind::SampleK)).unwrap();
    let id = created.id.clone();
    assert!(matches!(
        fast_client(&url).estimates(&id, &Query::default()),
        Err(ClientError::Rejected { status: 401, .. })
    ));
    // Clients need only the public config.
    let config = fast_client(&url).config(&id).unwrap();
    assert_eq!(config, created.config);
    let task = device_task(&config);
    let values = records(3000, 5);
    let all = items(&task, &values, 9);
    let client = fast_client(&url);
    let ack = client.submit(&config, all[..2000].to_vec()).unwrap();
    assert_eq!((ack.accepted, ack.duplicates), (2000, 0));
    // A retried (overlapping) batch is counted once.
    let ack = client.submit(&config, all[1000..].to_vec()).unwrap();
    assert_eq!((ack.accepted, ack.duplicates), (1000, 1000));
    let est = estimates(&analyst, &id);
    assert_eq!(est.reports, 3000);
    // The same reports aggregated in process (the device's task: the same object the server
    // builds) give the same estimates.
    let mut local = task.task().aggregator();
    for it in &all {
        let mut b = Vec::new();
        from_hex_into(&it.report, &mut b).unwrap();
        task.task().validate(&b).unwrap();
        local.add(&b).unwrap();
    }
    let local_est = EstimateDocument {
        collection: id.clone(),
        reports: local.count(),
        epsilon: config.epsilon,
        result: task.task().estimate(local.as_ref(), &Query::default()).unwrap(),
    };
    assert_eq!((est.reports, est.epsilon), (local_est.reports, local_est.epsilon));
    // Categorical counts are exact; numeric sums can differ in the last bits by summation order.
    let (a, b) = (means(&est), means(&local_est));
    assert_eq!((a.strategy.as_str(), a.attributes.len()), (b.strategy.as_str(), 3));
    assert_eq!(a.strategy, "sample-k");
    for (x, y) in a.attributes.iter().zip(&b.attributes) {
        match (x, y) {
            (AttributeResult::Numeric { mean: m, .. }, AttributeResult::Numeric { mean: n, .. }) => {
                let (p, q) = (m.estimate.unwrap(), n.estimate.unwrap());
                assert!((p - q).abs() < 1e-9, "{p} vs {q}");
                assert!((m.std_error.unwrap() - n.std_error.unwrap()).abs() < 1e-9, "{m:?} vs {n:?}");
            }
            (
                AttributeResult::Categorical { categories: c, .. },
                AttributeResult::Categorical { categories: d, .. },
            ) => {
                assert_eq!(c.len(), 3);
                for (u, v) in c.iter().zip(d) {
                    let (p, q) = (u.frequency.estimate.unwrap(), v.frequency.estimate.unwrap());
                    assert!((p - q).abs() < 1e-9, "{}: {p} vs {q}", u.label);
                }
            }
            other => panic!("attribute kinds differ: {other:?}"),
        }
    }
    // Restart: the accumulator is rebuilt from the stored reports.
    server.stop();
    let server = start(&dir);
    let est2 = estimates(&fast_client(&server.url()).with_token(TOKEN), &id);
    assert_eq!(est2.reports, 3000);
    let again = fast_client(&server.url()).submit(&config, all[..10].to_vec()).unwrap();
    assert_eq!((again.accepted, again.duplicates), (0, 10));
    // Metrics and the OpenAPI document.
    let metrics = ureq::get(&format!("{}/metrics", server.url()));
    let m = metrics
        .header("authorization", &format!("Bearer {TOKEN}"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(m.contains("harmony_reports_duplicate_total 10"), "{m}");
    let doc = ureq::get(&format!("{}/openapi.json", server.url())).call().unwrap().body_mut().read_to_string().unwrap();
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert!(doc["paths"]["/v1/collections/{id}/reports"]["post"].is_object());
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn device_ledger_reports_once() {
    let dir = tmp("ledger");
    let server = start(&dir);
    let created =
        fast_client(&server.url()).with_token(TOKEN).create_collection(&request(StrategyKind::Harmony)).unwrap();
    let task = device_task(&created.config);
    let client = fast_client(&server.url());
    let mut device = harmony_client::Device::new(MemoryLedger::default());
    let row = [Value::Unit(0.5), Value::Category(2), Value::Unit(-0.25)];
    let input = Input::Record(&row);
    assert_eq!(device.report(&client, &task, &input).unwrap().accepted, 1);
    assert!(matches!(device.report(&client, &task, &input), Err(ClientError::AlreadyReported(_))));
    // A file ledger survives a restart of the device.
    let path = dir.join("ledger.json");
    let mut d2 = harmony_client::Device::new(harmony_client::FileLedger::open(&path).unwrap());
    d2.report(&client, &task, &input).unwrap();
    let mut d3 = harmony_client::Device::new(harmony_client::FileLedger::open(&path).unwrap());
    assert!(matches!(d3.report(&client, &task, &input), Err(ClientError::AlreadyReported(_))));
    assert_eq!(estimates(&fast_client(&server.url()).with_token(TOKEN), &created.id).reports, 2);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a device sends holds no raw value: the batch body carries only the report id and the
/// hex of the randomized report, never the record's numbers or labels.
#[test]
fn client_bytes_hold_no_raw_value() {
    // A one-shot listener captures the request bytes.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let capture = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut got = Vec::new();
        s.set_read_timeout(Some(std::time::Duration::from_millis(500))).unwrap();
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if got.windows(4).any(|w| w == b"\r\n\r\n") && got.ends_with(b"}") {
                break;
            }
        }
        let body = br#"{"accepted":1,"duplicates":0}"#;
        let _ =
            write!(s, "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: application/json\r\n\r\n", body.len());
        let _ = s.write_all(body);
        got
    });
    let schema = Schema::new(vec![
        Attribute::Numeric { name: "salary".into(), min: 0.0, max: 1_000_000.0 },
        Attribute::Categorical { name: "disease".into(), categories: vec!["diabetes".into(), "asthma".into()] },
    ])
    .unwrap();
    let config = CollectionConfig {
        id: "c".into(),
        config_version: harmony_protocol::CONFIG_VERSION,
        wire_version: harmony_core::wire::WIRE_VERSION,
        schema: Some(schema),
        epsilon: 1.0,
        task: TaskSpec::Means(MeansSpec { strategy: StrategyKind::Split, ..Default::default() }),
        train: None,
        recurring: None,
    };
    let raw = [123_456.0_f64, 1.0];
    let record = [Value::Unit(2.0 * raw[0] / 1_000_000.0 - 1.0), Value::Category(1)];
    let mut device = harmony_client::Device::new(MemoryLedger::default());
    device.report(&fast_client(&format!("http://{addr}")), &device_task(&config), &Input::Record(&record)).unwrap();
    let bytes = capture.join().unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("\"reports\""), "{text}");
    for needle in ["123456", "asthma", "diabetes", "salary", "disease", "-0.753"] {
        assert!(!text.contains(needle), "the request contains {needle:?}: {text}");
    }
    // Nor the encoded value's bytes (little-endian f64 of the unit value).
    let unit = (2.0 * raw[0] / 1_000_000.0 - 1.0_f64).to_le_bytes();
    assert!(!bytes.windows(8).any(|w| w == unit));
    assert!(!text.contains(&to_hex(&unit)));
}

#[test]
fn fuzz_report_endpoint_only_4xx_and_nothing_stored() {
    let dir = tmp("fuzz");
    let server = start(&dir);
    let addr = server.addr;
    let analyst = fast_client(&server.url()).with_token(TOKEN);
    let a = analyst.create_collection(&request(StrategyKind::SampleK)).unwrap();
    let b = analyst.create_collection(&request(StrategyKind::Split)).unwrap();
    let good = items(&device_task(&a.config), &records(50, 1), 2);
    let of_b = items(&device_task(&b.config), &records(5, 3), 4);
    // The version devices send (the current config format); the previous one is refused.
    let v = a.config.config_version;
    assert_eq!(v, harmony_protocol::CONFIG_VERSION);
    let path = format!("/v1/collections/{}/reports", a.id);
    let body = |reports: Vec<ReportItem>, collection: &str, v: u32| {
        serde_json::to_vec(&ReportBatch { collection: collection.into(), config_version: v, reports }).unwrap()
    };
    // One valid batch stored first: replays of it must not change the count.
    let (s, _) = raw_post(addr, &path, &body(good[..10].to_vec(), &a.id, v), None);
    assert_eq!(s, 200);
    let mut rng = fast_rng(77);
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("empty".into(), Vec::new()),
        ("not json".into(), b"\x00\xff garbage".to_vec()),
        ("json of another shape".into(), br#"{"hello": 1}"#.to_vec()),
        ("unknown field".into(), br#"{"collection":"x","config_version":1,"reports":[],"extra":1}"#.to_vec()),
        ("no reports".into(), body(Vec::new(), &a.id, v)),
        ("wrong collection in body".into(), body(good[10..12].to_vec(), &b.id, v)),
        ("a report of another collection".into(), body(vec![good[10].clone(), of_b[0].clone()], &a.id, v)),
        ("wrong config version".into(), body(good[10..12].to_vec(), &a.id, v - 1)),
        ("oversized batch".into(), body(vec![good[10].clone(); 10_001], &a.id, v)),
        ("id twice in a batch".into(), body(vec![good[10].clone(), good[10].clone()], &a.id, v)),
        ("empty id".into(), body(vec![ReportItem { id: String::new(), report: good[10].report.clone() }], &a.id, v)),
        ("long id".into(), body(vec![ReportItem { id: "x".repeat(65), report: good[10].report.clone() }], &a.id, v)),
        ("odd hex".into(), body(vec![ReportItem { id: "a".into(), report: "abc".into() }], &a.id, v)),
        ("not hex".into(), body(vec![ReportItem { id: "a".into(), report: "zz".into() }], &a.id, v)),
        ("huge report".into(), body(vec![ReportItem { id: "a".into(), report: "00".repeat(5000) }], &a.id, v)),
    ];
    // Wrong wire versions, kinds, truncations, trailing bytes and bit flips of a good report.
    let mut g = Vec::new();
    from_hex_into(&good[10].report, &mut g).unwrap();
    for (what, mutate) in [
        ("wire version 2", (|v: &mut Vec<u8>| v[0] = 2) as fn(&mut Vec<u8>)),
        ("wire kind 1", |v| v[1] = 1),
        ("truncated", |v| {
            v.pop();
        }),
        ("trailing byte", |v| v.push(0)),
        ("header only", |v| v.truncate(2)),
    ] {
        let mut m = g.clone();
        mutate(&mut m);
        cases.push((what.into(), body(vec![ReportItem { id: "m".into(), report: to_hex(&m) }], &a.id, v)));
    }
    for i in 0..300 {
        // Random mutations; a mutated report may still be valid, then the batch is accepted.
        let mut m = g.clone();
        let flips = 1 + (rng.next_u32() % 4) as usize;
        for _ in 0..flips {
            let p = (rng.next_u32() as usize) % m.len();
            m[p] ^= 1 << (rng.next_u32() % 8);
        }
        cases.push((
            format!("mutation {i}"),
            body(vec![ReportItem { id: format!("mut{i}"), report: to_hex(&m) }], &a.id, v),
        ));
        let mut junk = vec![0u8; (rng.next_u32() % 200) as usize];
        rng.fill_bytes(&mut junk);
        cases.push((format!("junk {i}"), junk));
    }
    let mut accepted_mutations = 0;
    for (what, bytes) in &cases {
        let before = estimates(&analyst, &a.id).reports;
        let (status, resp) = raw_post(addr, &path, bytes, None);
        let after = estimates(&analyst, &a.id).reports;
        if status == 200 {
            assert!(what.starts_with("mutation"), "{what}: accepted: {resp}");
            accepted_mutations += 1;
            continue;
        }
        assert!((400..500).contains(&status), "{what}: status {status}: {resp}");
        assert_eq!(before, after, "{what}: a rejected batch changed the count");
        if status != 413 || !resp.is_empty() {
            let e: serde_json::Value =
                serde_json::from_str(&resp).unwrap_or_else(|_| panic!("{what}: not a JSON error: {resp:?}"));
            assert!(e["error"]["field"].is_string() && e["error"]["message"].is_string(), "{what}: {resp}");
        }
    }
    // Replays of stored ids are acknowledged as duplicates and change nothing.
    let (s, resp) = raw_post(addr, &path, &body(good[..10].to_vec(), &a.id, v), None);
    assert_eq!(s, 200);
    assert!(resp.contains("\"duplicates\":10"), "{resp}");
    // Unknown collection: 404 with a JSON error; the other collection is untouched.
    let (s, _) = raw_post(addr, "/v1/collections/nope/reports", &body(good[..1].to_vec(), "nope", v), None);
    assert_eq!(s, 404);
    // A collection without reports has no estimates yet: its numbers are null, not a midpoint.
    let empty = estimates(&analyst, &b.id);
    assert_eq!(empty.reports, 0);
    for attribute in &means(&empty).attributes {
        match attribute {
            AttributeResult::Numeric { mean, unit, .. } => {
                assert_eq!((mean.estimate, mean.std_error, mean.ci95, unit.estimate), (None, None, None, None))
            }
            AttributeResult::Categorical { categories, .. } => {
                assert!(categories.iter().all(|c| c.frequency.estimate.is_none() && c.frequency.std_error.is_none()))
            }
        }
    }
    assert_eq!(estimates(&analyst, &a.id).reports, 10 + accepted_mutations);
    // The stored rows are exactly the accepted ones.
    server.stop();
    let store = SqliteStore::open(&dir.join("db.sqlite")).unwrap();
    let key = store.collections().unwrap().iter().find(|c| c.id == a.id).unwrap().key;
    assert_eq!(store.count_reports(key).unwrap(), 10 + accepted_mutations);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_body_over_the_limit_gets_a_json_413_and_stores_nothing() {
    let dir = tmp("oversize");
    let server = start(&dir);
    let analyst = fast_client(&server.url()).with_token(TOKEN);
    let a = analyst.create_collection(&request(StrategyKind::SampleK)).unwrap();
    let path = format!("/v1/collections/{}/reports", a.id);
    let big = vec![b' '; harmony_server::MAX_BODY + 1];
    for (p, auth) in [(path.as_str(), None), ("/v1/collections", Some(TOKEN))] {
        let (status, resp) = raw_post(server.addr, p, &big, auth);
        assert_eq!(status, 413, "{p}: {resp}");
        let e: serde_json::Value = serde_json::from_str(&resp).unwrap_or_else(|_| panic!("{p}: not JSON: {resp:?}"));
        assert_eq!(e["error"]["field"], "body", "{p}: {resp}");
        assert!(e["error"]["message"].as_str().unwrap().contains("limit"), "{p}: {resp}");
    }
    assert_eq!(estimates(&analyst, &a.id).reports, 0);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `GET …/days`: the stored reports per UTC day received (the dashboard's per-day counts),
/// readers only; a duplicate is not counted twice; the days survive a restart.
#[test]
fn days_count_the_stored_reports_per_utc_day() {
    let dir = tmp("days");
    let server = start(&dir);
    let url = server.url();
    let analyst = fast_client(&url).with_token(TOKEN);
    let created = analyst.create_collection(&request(StrategyKind::Harmony)).unwrap();
    let id = created.id.clone();
    let path = format!("/v1/collections/{id}/days");
    assert_eq!(common::raw(server.addr, "GET", &path, b"", Some(TOKEN)), (200, "[]".to_string()));
    let task = device_task(&created.config);
    let all = items(&task, &records(300, 3), 4);
    fast_client(&url).submit(&created.config, all.clone()).unwrap();
    fast_client(&url).submit(&created.config, all[..10].to_vec()).unwrap();
    let today = harmony_server::api::collections::civil_day(harmony_server::store::utc_day_now());
    let want = format!("[{{\"day\":\"{today}\",\"reports\":300}}]");
    assert_eq!(common::raw(server.addr, "GET", &path, b"", Some(TOKEN)), (200, want.clone()));
    assert_eq!(common::raw(server.addr, "GET", &path, b"", None).0, 401);
    assert_eq!(common::raw(server.addr, "GET", "/v1/collections/nope/days", b"", Some(TOKEN)).0, 404);
    server.stop();
    let server = start(&dir);
    assert_eq!(common::raw(server.addr, "GET", &path, b"", Some(TOKEN)), (200, want));
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
