//! Issue 17 item 4 (recovery): a store that goes away and comes back (a PostgreSQL restart,
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
