//! Faults and attacks found by live and fuzz testing, each a named test: a
//! panic in a handler is a 500 JSON for that request and the server goes on.

use axum::routing::get;
use harmony_server::{SqliteStore, Store};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

const TOKEN: &str = "faults-token";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harmony-faults-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn start(dir: &std::path::Path) -> harmony_server::Running {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    harmony_server::spawn_with(store, TOKEN, "127.0.0.1:0", 2, |r| r.route("/test/panic", get(boom))).unwrap()
}

async fn boom() -> &'static str {
    panic!("a handler bug")
}

/// One raw HTTP/1.1 request; returns (status, body); status 0 when the connection closed
/// without an answer.
fn raw(addr: SocketAddr, method: &str, path: &str, body: &[u8], auth: bool) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let auth = if auth { format!("authorization: Bearer {TOKEN}\r\n") } else { String::new() };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{auth}connection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

fn error_field(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"));
    v["error"]["field"].as_str().unwrap_or_else(|| panic!("not the error format: {body}")).to_string()
}

/// A panic in a handler answers 500 in the JSON error format; the process,
/// the other connections and later requests are unaffected.
#[test]
fn handler_panic_is_a_500_json_and_the_server_goes_on() {
    let dir = tmp("panic");
    let server = start(&dir);
    let addr = server.addr;
    let threads: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let (status, body) = raw(addr, "GET", "/test/panic", b"", false);
                    assert_eq!(status, 500, "{body}");
                    assert_eq!(error_field(&body), "server");
                    assert_eq!(raw(addr, "GET", "/healthz", b"", false).0, 200);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The record aggregator's overflow found by fuzzing, through the server: eight anonymous
/// Laplace reports of ±2^62 grid units to a split collection. Whatever the aggregator does
/// with them (refused, summed exactly, or a panic in debug builds), the answer is JSON, never a
/// dropped connection or "shutting down", and the collection keeps serving estimates and
/// accepting reports.
#[test]
fn f1_overflow_reports_never_take_a_collection_down() {
    let dir = tmp("f1");
    let server = start(&dir);
    let addr = server.addr;
    let create = br#"{"schema": [{"kind": "numeric", "name": "x", "min": 0, "max": 100},
        {"kind": "categorical", "name": "c", "categories": ["a", "b", "d"]}], "epsilon": 2,
        "task": {"kind": "means", "strategy": "split", "numeric_mechanism": "laplace", "categorical_mechanism": "grr"}}"#;
    let (status, body) = raw(addr, "POST", "/v1/collections", create, true);
    assert_eq!(status, 201, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_string();
    let items: Vec<String> = (0..8)
        .map(|i| format!(r#"{{"id": "f1-{i}", "report": "010b02000001808080808080808080010101000000"}}"#))
        .collect();
    let batch = format!(r#"{{"collection": "{id}", "config_version": 3, "reports": [{}]}}"#, items.join(","));
    let (status, body) = raw(addr, "POST", &format!("/v1/collections/{id}/reports"), batch.as_bytes(), false);
    // Reports beyond the mechanism's support (±(3 + 84/ε) grid units) are refused by the decoder.
    assert_eq!(status, 400, "{body}");
    assert!(error_field(&body).starts_with("reports[0].report"), "{body}");
    let (status, body) = raw(addr, "GET", &format!("/v1/collections/{id}/estimates"), b"", true);
    assert_eq!(status, 200, "{body}");
    let (status, _) = raw(addr, "GET", "/healthz", b"", false);
    assert_eq!(status, 200);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A means collection (split, `laplace` on x in 0..=100, grr on c) with `n` honest reports of
/// x = 40; returns its id.
fn laplace_collection(addr: SocketAddr, n: usize) -> String {
    let create = br#"{"schema": [{"kind": "numeric", "name": "x", "min": 0, "max": 100},
        {"kind": "categorical", "name": "c", "categories": ["a", "b", "d"]}], "epsilon": 2,
        "task": {"kind": "means", "strategy": "split", "numeric_mechanism": "laplace", "categorical_mechanism": "grr"}}"#;
    let (status, body) = raw(addr, "POST", "/v1/collections", create, true);
    assert_eq!(status, 201, "{body}");
    let created: harmony_protocol::Created = serde_json::from_str(&body).unwrap();
    let task = harmony_client::DeviceTask::new(created.config.clone()).unwrap();
    let mut devices = harmony_client::SimulatedDevices::new(3);
    let items: Vec<String> = (0..n)
        .map(|i| {
            let row = [harmony_core::schema::Value::Unit(-0.2), harmony_core::schema::Value::Category(1)];
            let it = devices.item(&task, i as u64, &harmony_client::Input::Record(&row)).unwrap();
            format!(r#"{{"id": "{}", "report": "{}"}}"#, it.id, it.report)
        })
        .collect();
    let batch = format!(r#"{{"collection": "{}", "config_version": 3, "reports": [{}]}}"#, created.id, items.join(","));
    let (status, body) = raw(addr, "POST", &format!("/v1/collections/{}/reports", created.id), batch.as_bytes(), false);
    assert_eq!(status, 200, "{body}");
    created.id
}

/// A report beyond the support (one anonymous Laplace report of 2^62 grid units moved a 0–100 mean from
/// 40.5 to 1.8e13): a numeric report beyond its mechanism's support is a 400 naming the report,
/// nothing is stored, and the mean stays where the honest reports put it.
#[test]
fn one_report_beyond_the_support_cannot_move_a_mean() {
    let dir = tmp("support");
    let server = start(&dir);
    let addr = server.addr;
    let id = laplace_collection(addr, 2000);
    let estimates = || -> Value {
        let (status, body) = raw(addr, "GET", &format!("/v1/collections/{id}/estimates"), b"", true);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    };
    let before = estimates();
    let batch = format!(
        r#"{{"collection": "{id}", "config_version": 3, "reports": [{{"id": "p62", "report": "010b010000018080808080808080800100"}}]}}"#
    );
    let (status, body) = raw(addr, "POST", &format!("/v1/collections/{id}/reports"), batch.as_bytes(), false);
    assert_eq!(status, 400, "{body}");
    assert!(error_field(&body).starts_with("reports[0].report"), "{body}");
    let after = estimates();
    assert_eq!(before, after, "nothing stored, nothing moved");
    assert_eq!(after["reports"].as_u64(), Some(2000));
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A corrupt stored report (one stored report overwritten with `x'00'`: the restart refused to serve any
/// collection): the corrupt collection is quarantined — its endpoints 503 naming the reason,
/// `/readyz` counting it — and every other collection is served with its reports.
#[test]
fn a_corrupt_row_quarantines_its_collection_not_the_server() {
    let dir = tmp("corrupt");
    let server = start(&dir);
    let (bad, good) = (laplace_collection(server.addr, 50), laplace_collection(server.addr, 70));
    server.stop();
    let db = rusqlite::Connection::open(dir.join("db.sqlite")).unwrap();
    // (`reports` is WITHOUT ROWID: pick the row by its key.)
    let changed = db
        .execute(
            "UPDATE reports SET body = x'00' WHERE collection = (SELECT key FROM collections WHERE id = ?1)
             AND report_id = (SELECT MIN(report_id) FROM reports WHERE collection = (SELECT key FROM collections WHERE id = ?1))",
            [&bad],
        )
        .unwrap();
    assert_eq!(changed, 1);
    // A start reads the stored bucket states, not the reports: corrupt one of those too.
    let changed = db
        .execute(
            "UPDATE bucket_states SET state = x'00' WHERE seq = (SELECT MIN(seq) FROM bucket_states
             WHERE collection = (SELECT key FROM collections WHERE id = ?1))",
            [&bad],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);
    let server = start(&dir);
    let addr = server.addr;
    let (status, body) = raw(addr, "GET", &format!("/v1/collections/{bad}/estimates"), b"", true);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("quarantined") && body.contains("does not merge"), "{body}");
    let (status, body) = raw(addr, "GET", &format!("/v1/collections/{good}/estimates"), b"", true);
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["reports"].as_u64(), Some(70));
    let (status, body) = raw(addr, "GET", "/readyz", b"", false);
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["quarantined"].as_u64(), Some(1), "{body}");
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
