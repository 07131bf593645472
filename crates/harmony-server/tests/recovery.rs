//! Recovery: a store that goes away and comes back (a PostgreSQL restart,
//! emulated over SQLite so it runs in the fast tier; the real restart is
//! `harmony-cli/tests/pg_restart.rs`, heavy tier). While it is down writes answer 503 with
//! `Retry-After` and `/readyz` 503; a batch whose commit outcome is unknown (the connection died
//! during COMMIT, but the rows are stored) is safe to retry, and the live accumulator is rebuilt
//! from the store, so `estimates.reports` equals the stored count afterwards.

use common::flaky::{DOWN, Flaky, LOSE_ACK, UP};
use harmony_server::Store;
use serde_json::Value;
use std::sync::Arc;

mod common;

/// The JSON body of a batch of `(report id, hex report)`.
fn batch(id: &str, version: u32, items: &[(String, String)]) -> Vec<u8> {
    let reports: Vec<Value> = items.iter().map(|(rid, hex)| serde_json::json!({"id": rid, "report": hex})).collect();
    serde_json::to_vec(&serde_json::json!({"collection": id, "config_version": version, "reports": reports})).unwrap()
}

#[test]
fn a_commit_with_unknown_outcome_is_retried_and_the_accumulator_rebuilt() {
    let dir = std::env::temp_dir().join(format!("harmony-recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let flaky = Arc::new(Flaky::open(&dir.join("db.sqlite")));
    let store: Arc<dyn Store> = flaky.clone();
    let server = harmony_server::spawn(store, "tok", "127.0.0.1:0", 2).unwrap();
    let addr = server.addr;
    let create = br#"{"schema": [{"kind": "numeric", "name": "x", "min": 0, "max": 1}], "epsilon": 1,
        "task": {"kind": "means"}}"#;
    let (status, body) = common::raw(addr, "POST", "/v1/collections", create, Some("tok"));
    assert_eq!(status, 201, "{body}");
    let created: harmony_protocol::Created = serde_json::from_str(&body).unwrap();
    let (id, version) = (created.id.clone(), created.config.config_version);
    let key = flaky.inner.collections().unwrap()[0].key;
    let task = harmony_client::DeviceTask::new(created.config).unwrap();
    let mut devices = harmony_client::SimulatedDevices::new(7);
    let mut items = |tag: &str, n: usize| -> Vec<u8> {
        let rows: Vec<(String, String)> = (0..n)
            .map(|i| {
                let row = [harmony_core::schema::Value::Unit(0.5)];
                let input = harmony_client::Input::Record(&row);
                let item = devices.item(&task, i as u64, &input).unwrap();
                (format!("{tag}-{i}"), item.report)
            })
            .collect();
        batch(&id, version, &rows)
    };
    let (a, b, c) = (items("a", 30), items("b", 20), items("c", 10));
    let post = |body: &[u8]| common::request(addr, "POST", &format!("/v1/collections/{id}/reports"), body, None);
    let reports = || -> (u16, u64) {
        let (status, body) = common::raw(addr, "GET", &format!("/v1/collections/{id}/estimates"), b"", Some("tok"));
        (status, serde_json::from_str::<Value>(&body).ok().and_then(|v| v["reports"].as_u64()).unwrap_or(0))
    };
    assert_eq!(post(&a).0, 200);
    assert_eq!(reports(), (200, 30));

    // The connection dies during COMMIT: 503 with Retry-After, though the rows are stored.
    flaky.set(LOSE_ACK);
    let (status, head, body) = post(&b);
    assert_eq!(status, 503, "{body}");
    assert!(head.contains("\r\nretry-after: "), "{head}");
    assert_eq!(flaky.inner.count_reports(key).unwrap(), 50, "B committed although its answer was 503");

    // The store goes down: writes, the stale collection's estimates and /readyz answer 503;
    // /healthz 200.
    flaky.set(DOWN);
    for (status, head, body) in [post(&c), common::request(addr, "GET", "/readyz", b"", None)] {
        assert_eq!(status, 503, "{body}");
        assert!(head.contains("\r\nretry-after: "), "{head}");
    }
    assert_eq!(reports().0, 503, "a collection that must be rebuilt is not estimated from a partial accumulator");
    assert_eq!(common::raw(addr, "GET", "/healthz", b"", None).0, 200);

    // Back up: the retry of B is all duplicates, and the accumulator holds A and B exactly once.
    flaky.set(UP);
    assert_eq!(common::raw(addr, "GET", "/readyz", b"", None).0, 200);
    let (status, _, body) = post(&b);
    assert_eq!(status, 200, "{body}");
    let ack: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((ack["accepted"].as_u64(), ack["duplicates"].as_u64()), (Some(0), Some(20)));
    assert_eq!(reports(), (200, 50));
    assert_eq!(post(&c).0, 200);
    assert_eq!(reports(), (200, flaky.inner.count_reports(key).unwrap()));
    assert_eq!(reports().1, 60);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory and a flaky store in it, served with the admin token `tok`.
fn flaky_server(tag: &str) -> (std::path::PathBuf, Arc<Flaky>, harmony_server::Running) {
    let dir = std::env::temp_dir().join(format!("harmony-recovery-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let flaky = Arc::new(Flaky::open(&dir.join("db.sqlite")));
    let store: Arc<dyn Store> = flaky.clone();
    let server = harmony_server::spawn(store, "tok", "127.0.0.1:0", 2).unwrap();
    (dir, flaky, server)
}

/// `POST /v1/collections` with an `Idempotency-Key` header.
fn create_with_key(addr: std::net::SocketAddr, body: &[u8], key: &str) -> (u16, String) {
    common::raw(addr, "POST", "/v1/collections", body, Some(&format!("tok\r\nidempotency-key: {key}")))
}

/// A create whose commit outcome is unknown. Without a key the stored
/// collection is served as soon as the store answers (no restart); under an Idempotency-Key the
/// retry returns the collection the first attempt stored — one collection, never two — and the
/// key with another spec is a 409. `harmony_client` sends a key and retries by itself.
#[test]
fn a_create_with_unknown_outcome_is_served_and_retried_under_its_key() {
    let (dir, flaky, server) = flaky_server("create");
    let addr = server.addr;
    let means = br#"{"schema": [{"kind": "numeric", "name": "x", "min": 0, "max": 1}], "epsilon": 1, "task": {"kind": "means"}}"#;
    flaky.set(LOSE_ACK);
    assert_eq!(common::raw(addr, "POST", "/v1/collections", means, Some("tok")).0, 503);
    let stored = flaky.inner.collections().unwrap();
    assert_eq!(stored.len(), 1, "committed although answered 503");
    let id = stored[0].id.clone();
    let served = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        common::raw(addr, "GET", &format!("/v1/collections/{id}/config"), b"", None).0 == 200
    });
    assert!(served, "the stored collection is served without a restart");

    let (status, body) = create_with_key(addr, means, "key-1");
    assert_eq!(status, 503, "{body}");
    flaky.set(UP);
    let (status, body) = create_with_key(addr, means, "key-1");
    assert_eq!(status, 201, "{body}");
    let first: harmony_protocol::Created = serde_json::from_str(&body).unwrap();
    assert_eq!(flaky.inner.collections().unwrap().len(), 2, "the retry stored nothing new");
    let (status, body) = create_with_key(addr, means, "key-1");
    assert_eq!((status, serde_json::from_str::<harmony_protocol::Created>(&body).unwrap().id), (201, first.id.clone()));
    let other = br#"{"schema": [{"kind": "numeric", "name": "x", "min": 0, "max": 2}], "epsilon": 1, "task": {"kind": "means"}}"#;
    let (status, body) = create_with_key(addr, other, "key-1");
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("idempotency-key"), "{body}");
    assert_eq!(create_with_key(addr, means, "bad key!").0, 400);

    // The client: every answer lost, its own retry (same key) gets the one stored collection.
    flaky.set(LOSE_ACK);
    let req: harmony_protocol::CreateCollection = serde_json::from_slice(means).unwrap();
    let client = harmony_client::Client::new(&format!("http://{addr}")).with_token("tok");
    let created = client.create_collection(&req).unwrap();
    flaky.set(UP);
    let all = flaky.inner.collections().unwrap();
    assert_eq!(all.len(), 3, "one collection for the client's create and its retries");
    assert!(all.iter().any(|c| c.id == created.id));
    assert_eq!(common::raw(addr, "GET", &format!("/v1/collections/{}/config", created.id), b"", None).0, 200);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A gradient whose commit outcome is unknown. The round is reloaded from the
/// store before its next use: `GET …/model` counts the stored gradient (and the step it
/// completed), and the device's retry learns it was stored (409 `device_id`).
#[test]
fn a_gradient_with_unknown_outcome_reloads_the_round() {
    let (dir, flaky, server) = flaky_server("gradient");
    let url = format!("http://{}", server.addr);
    let client = harmony_client::Client::new(&url)
        .with_token("tok")
        .with_retry(harmony_client::RetryPolicy { attempts: 1, ..Default::default() });
    let req: harmony_protocol::CreateCollection = serde_json::from_value(serde_json::json!({
        "schema": [{"kind": "numeric", "name": "x", "min": -1, "max": 1},
                   {"kind": "categorical", "name": "y", "categories": ["no", "yes"]}],
        "epsilon": 4, "task": {"kind": "train", "task": "logistic", "target": "y", "batch_size": 2, "rounds": 3,
                               "enrollment": false}
    }))
    .unwrap();
    let config = client.create_collection(&req).unwrap().config;
    let task = harmony_tasks::train::TrainTask::new(config.clone()).unwrap();
    let row = [harmony_core::schema::Value::Unit(0.3), harmony_core::schema::Value::Category(1)];
    let post = |device: &str, seed: u64| {
        let model = client.model(&config.id).unwrap();
        let g = task.gradient(&model, &row, &mut harmony_core::sampling::fast_rng(seed)).unwrap();
        let bytes = harmony_core::wire::encode(&g);
        let p = harmony_protocol::GradientPost {
            device_id: device.into(),
            round: model.round,
            report: harmony_protocol::to_hex(&bytes),
        };
        client.post_gradient(&config.id, &p)
    };
    let status = |r: Result<harmony_protocol::GradientAck, harmony_client::ClientError>| match r {
        Ok(_) => 200,
        Err(harmony_client::ClientError::Rejected { status, .. }) => status,
        Err(harmony_client::ClientError::Unavailable { last, .. }) if last.starts_with("HTTP 503") => 503,
        Err(e) => panic!("{e}"),
    };
    flaky.set(LOSE_ACK);
    assert_eq!(status(post("d1", 1)), 503, "the client gives up after one attempt");
    flaky.set(UP);
    let m = client.model(&config.id).unwrap();
    assert_eq!((m.round, m.received), (1, 1), "the stored gradient is counted");
    assert_eq!(status(post("d1", 1)), 409, "the retry learns it was stored");
    flaky.set(LOSE_ACK);
    assert_eq!(status(post("d2", 2)), 503);
    flaky.set(UP);
    let m = client.model(&config.id).unwrap();
    assert_eq!((m.round, m.received), (2, 0), "the round the lost gradient completed is the served one");
    assert_eq!(status(post("d3", 3)), 200);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
