//! Faults and attacks from ../shared/reviews/live-tests.md and fuzz.md, each a named test: a
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

/// Issue 17 item 1: a panic in a handler answers 500 in the JSON error format; the process,
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

/// fuzz.md F1 through the server (live-tests.md's record aggregator overflow): eight anonymous
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
    eprintln!("F1 batch: {status} {body}");
    assert!([200, 400, 500].contains(&status), "{status} {body}");
    if status != 200 {
        assert_ne!(error_field(&body), "", "{body}");
    }
    let (status, body) = raw(addr, "GET", &format!("/v1/collections/{id}/estimates"), b"", true);
    assert_eq!(status, 200, "{body}");
    let (status, _) = raw(addr, "GET", "/healthz", b"", false);
    assert_eq!(status, 200);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
