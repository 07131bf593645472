//! Readiness: `/healthz` says the process is up, `/readyz` that the state is loaded and the
//! store answers (a health check that said 200 while every write was 503 after a PostgreSQL
//! restart would lie).

use common::flaky::{DOWN, Flaky, UP};
use harmony_server::Store;
use serde_json::Value;
use std::sync::Arc;

mod common;

fn error_field(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"));
    v["error"]["field"].as_str().unwrap_or_else(|| panic!("not the error format: {body}")).to_string()
}

#[test]
fn readyz_reports_a_store_outage_while_it_lasts_and_healthz_stays_up() {
    let dir = std::env::temp_dir().join(format!("harmony-ready-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let flaky = Arc::new(Flaky::open(&dir.join("db.sqlite")));
    let store: Arc<dyn Store> = flaky.clone();
    let server = harmony_server::spawn(store, "tok", "127.0.0.1:0", 2).unwrap();
    let create = br#"{"schema": [{"kind": "numeric", "name": "x", "min": 0, "max": 1}], "epsilon": 1,
        "task": {"kind": "means"}}"#;
    assert_eq!(common::raw(server.addr, "POST", "/v1/collections", create, Some("tok")).0, 201);

    let (status, body) = common::raw(server.addr, "GET", "/readyz", b"", None);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["status"].as_str(), v["collections"].as_u64(), v["quarantined"].as_u64()),
        (Some("ready"), Some(1), Some(0))
    );

    flaky.set(DOWN);
    let (status, body) = common::raw(server.addr, "GET", "/readyz", b"", None);
    assert_eq!((status, error_field(&body).as_str()), (503, "store"), "{body}");
    assert!(body.contains("connection refused"), "the reason is named: {body}");
    assert_eq!(common::raw(server.addr, "GET", "/healthz", b"", None).0, 200, "the process is up");
    assert_eq!(common::raw(server.addr, "POST", "/v1/collections", create, Some("tok")).0, 503);

    flaky.set(UP);
    assert_eq!(common::raw(server.addr, "GET", "/readyz", b"", None).0, 200);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
