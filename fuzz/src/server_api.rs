//! `server_api`: the real axum router (`harmony_server::router`, every layer) over a fresh
//! SQLite store in a temporary directory (RAM-backed /dev/shm when present), driven in process.
//! Input: `[selector, flags, chunk₀, 0, chunk₁, 0, …]`. The collection is the wire_reports
//! table's request `selector` (or, with flags bit 0, chunk₀ as the create body); the other
//! chunks are posted as reports (hex, one batch; flags bit 1: each chunk is a whole raw batch
//! body), as gradients to a train collection, then estimates, config and model are read, the
//! state is rebuilt from the store (a restart) and read again. Invariants: no 5xx on any
//! request (a handler panic is a 500, and aborts the fuzzer first), no panic, and the restarted
//! server reports the same count of reports as before.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use harmony_protocol::to_hex;
use harmony_server::{AppState, SqliteStore, Store};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tower::ServiceExt;

const TOKEN: &str = "fuzz-admin-token";

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap())
}

/// A fresh directory for one input's database, removed on drop.
struct TempDb(PathBuf);
impl TempDb {
    fn new() -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let base =
            if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("harmony-fuzz-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDb(dir)
    }
}
impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One request through the router: (status, body). A 5xx is a crash.
fn call(app: &axum::Router, method: &str, path: &str, body: Vec<u8>, auth: bool) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(path).header("content-type", "application/json");
    if auth {
        req = req.header("authorization", format!("Bearer {TOKEN}"));
    }
    let Ok(req) = req.body(Body::from(body)) else { return (StatusCode::BAD_REQUEST, Value::Null) };
    let (status, bytes) = runtime().block_on(async {
        let resp = app.clone().oneshot(req).await.expect("the router is infallible");
        let status = resp.status();
        (status, resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default())
    });
    let text = String::from_utf8_lossy(&bytes);
    assert!(!status.is_server_error(), "{method} {path}: {status}: {text}");
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn router(store: &Arc<dyn Store>) -> axum::Router {
    let state = AppState::new(store.clone(), TOKEN).expect("the state loads from the store");
    harmony_server::router(state)
}

/// Reports counted in an estimates document (None when not answered).
fn reports(app: &axum::Router, id: &str) -> Option<u64> {
    let (status, body) = call(app, "GET", &format!("/v1/collections/{id}/estimates?ranges=10:50"), vec![], true);
    if status.is_success() { body["reports"].as_u64() } else { None }
}

/// Posts the chunks: reports, or gradients to a train collection.
fn post(app: &axum::Router, id: &str, version: &Value, train: bool, raw: bool, chunks: &[&[u8]]) {
    let path = format!("/v1/collections/{id}/reports");
    if train {
        for (i, c) in chunks.iter().enumerate() {
            let body = json!({"device_id": format!("d{i}"), "round": 1 + (i as u64 % 2), "report": to_hex(c)});
            call(app, "POST", &format!("/v1/collections/{id}/gradients"), body.to_string().into_bytes(), false);
        }
    } else if raw {
        for c in chunks {
            call(app, "POST", &path, c.to_vec(), false);
        }
    } else if !chunks.is_empty() {
        let items: Vec<Value> =
            chunks.iter().enumerate().map(|(i, c)| json!({"id": format!("r{i}"), "report": to_hex(c)})).collect();
        let body = json!({"collection": id, "config_version": version, "reports": items});
        call(app, "POST", &path, body.to_string().into_bytes(), false);
    }
}

/// The fuzz target's body.
pub fn run(data: &[u8]) {
    let [selector, flags, rest @ ..] = data else { return };
    let chunks: Vec<&[u8]> = rest.split(|&b| b == 0).collect();
    let requests = crate::wire_reports::requests();
    let (create, chunks) = if flags & 1 == 1 {
        (chunks[0].to_vec(), &chunks[1..])
    } else {
        (requests[*selector as usize % requests.len()].1.to_string().into_bytes(), &chunks[..])
    };
    let chunks = &chunks[..chunks.len().min(16)];
    let db = TempDb::new();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db.0.join("db.sqlite")).expect("sqlite opens"));
    let app = router(&store);
    let (status, created) = call(&app, "POST", "/v1/collections", create, true);
    if !status.is_success() {
        return;
    }
    let id = created["id"].as_str().expect("a created collection has an id").to_string();
    let (status, config) = call(&app, "GET", &format!("/v1/collections/{id}/config"), vec![], false);
    assert!(status.is_success(), "config of a created collection: {status}");
    let train = config["task"]["kind"] == "train";
    post(&app, &id, &config["config_version"], train, flags & 2 == 2, chunks);
    let before = reports(&app, &id);
    if train {
        call(&app, "GET", &format!("/v1/collections/{id}/model"), vec![], false);
    }
    drop(app);
    let app = router(&store);
    let after = reports(&app, &id);
    if !train {
        assert_eq!(before, after, "reports counted before and after a restart");
    }
    call(&app, "GET", &format!("/v1/collections/{id}/config"), vec![], false);
    drop(app);
    drop(store);
}
