//! Backdated batches (`harmony serve --accept-backdated`): a batch's `Harmony-Received-At`
//! header is refused by a server without the flag (400) and, on a server with it, by a request
//! without the admin token (401) or with another token (403); with both, the batch lands in the
//! bucket and the stored received day of that instant, and stays there after a restart.

use harmony_client::{DeviceTask, Input, Policy, SimulatedDevices};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::{ReportBatch, ReportItem};
use harmony_server::{AppState, Limits};
use serde_json::Value as Json;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

mod common;

const TOKEN: &str = "backdated-admin-token";
const HEADER: &str = "Harmony-Received-At";

/// A POST of `body` with `headers` (name, value) on a fresh connection: (status, body).
fn post(addr: SocketAddr, path: &str, body: &[u8], headers: &[(&str, &str)]) -> (u16, Json) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Json::Null))
}

fn get(addr: SocketAddr, path: &str) -> Json {
    let (status, body) = common::raw(addr, "GET", path, b"", Some(TOKEN));
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// A `means` collection of one numeric attribute (day buckets): its id and a batch of the
/// simulated devices `devices` of `seed`.
fn collection(addr: SocketAddr, devices: std::ops::Range<u64>, seed: u64) -> (String, Vec<u8>) {
    let schema = Schema::new(vec![Attribute::Numeric { name: "x".into(), min: 0.0, max: 1.0 }]).unwrap();
    let req = serde_json::json!({"schema": schema, "epsilon": 2.0, "task": {"kind": "means"}});
    let (status, body) =
        common::raw(addr, "POST", "/v1/collections?period=day", req.to_string().as_bytes(), Some(TOKEN));
    assert_eq!(status, 201, "{body}");
    let created: harmony_protocol::Created = serde_json::from_str(&body).unwrap();
    let task = DeviceTask::with_policy(created.config.clone(), Policy::default()).unwrap();
    let mut sim = SimulatedDevices::new(seed);
    let reports: Vec<ReportItem> =
        devices.map(|i| sim.item(&task, i, &Input::Record(&[Value::Unit(0.5)])).unwrap()).collect();
    let batch = ReportBatch { collection: created.id.clone(), config_version: created.config.config_version, reports };
    (created.id, serde_json::to_vec(&batch).unwrap())
}

fn field(body: &Json) -> &str {
    body["error"]["field"].as_str().unwrap_or("")
}

#[test]
fn backdated_batches_need_the_flag_and_the_admin_token() {
    let dir = std::env::temp_dir().join(format!("harmony-backdated-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let open = || -> Arc<dyn harmony_server::Store> {
        Arc::new(harmony_server::SqliteStore::open(&dir.join("db.sqlite")).unwrap())
    };
    let bearer = format!("Bearer {TOKEN}");
    let admin = ("authorization", bearer.as_str());

    // Without --accept-backdated: a 400 naming the header, even with the admin token; nothing stored.
    let server = harmony_server::spawn(open(), TOKEN, "127.0.0.1:0", 2).unwrap();
    let (id, batch) = collection(server.addr, 0..20, 1);
    let path = format!("/v1/collections/{id}/reports");
    for headers in [vec![(HEADER, "2026-01-07")], vec![(HEADER, "2026-01-07"), admin]] {
        let (status, body) = post(server.addr, &path, &batch, &headers);
        assert_eq!(status, 400, "{body}");
        assert_eq!(field(&body), HEADER, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("--accept-backdated"), "{body}");
    }
    assert_eq!(get(server.addr, &format!("/v1/collections/{id}/estimates"))["reports"], 0);
    server.stop();

    // With it: no token 401, an analyst token 403, a future instant 400; the admin token lands.
    let state = AppState::new(open(), TOKEN).unwrap();
    let server = harmony_server::spawn_state(
        state,
        "127.0.0.1:0",
        2,
        &Limits::default(),
        harmony_server::api::reports::accept_backdated,
    )
    .unwrap();
    let addr = server.addr;
    let (status, body) = post(addr, &path, &batch, &[(HEADER, "2026-01-07")]);
    assert_eq!((status, field(&body)), (401, HEADER), "{body}");
    let (status, minted) =
        common::raw(addr, "POST", &format!("/v1/collections/{id}/tokens"), br#"{"label":"t"}"#, Some(TOKEN));
    assert_eq!(status, 201, "{minted}");
    let analyst = format!("Bearer {}", serde_json::from_str::<Json>(&minted).unwrap()["token"].as_str().unwrap());
    let (status, body) = post(addr, &path, &batch, &[(HEADER, "2026-01-07"), ("authorization", &analyst)]);
    assert_eq!((status, field(&body)), (403, HEADER), "{body}");
    for bad in ["2999-01-01", "yesterday", "-5"] {
        let (status, body) = post(addr, &path, &batch, &[(HEADER, bad), admin]);
        assert_eq!((status, field(&body)), (400, HEADER), "{bad}: {body}");
    }
    assert_eq!(get(addr, &format!("/v1/collections/{id}/estimates"))["reports"], 0);
    let (status, body) = post(addr, &path, &batch, &[(HEADER, "2026-01-07"), admin]);
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(20)), "{body}");
    // Another collection's batch dated by Unix seconds, and a timestamp's.
    let (id2, first) = collection(addr, 0..15, 2);
    let (status, body) =
        post(addr, &format!("/v1/collections/{id2}/reports"), &first, &[(HEADER, "1767700800"), admin]);
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(15)), "{body}");
    let (id3, timed) = collection(addr, 0..5, 3);
    let (status, body) =
        post(addr, &format!("/v1/collections/{id3}/reports"), &timed, &[(HEADER, "2026-01-08T23:59:59Z"), admin]);
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(5)), "{body}");
    server.stop();

    // The buckets and the received days, after a restart too.
    for round in ["served", "after a restart"] {
        let server = harmony_server::spawn(open(), TOKEN, "127.0.0.1:0", 2).unwrap();
        let series = get(server.addr, &format!("/v1/collections/{id}/series?period=day"));
        let points: Vec<(String, u64)> = series["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["from"].as_str().unwrap().to_string(), p["document"]["reports"].as_u64().unwrap()))
            .collect();
        assert_eq!(points, vec![("2026-01-07T00:00:00Z".to_string(), 20)], "{round}: {series}");
        let days = get(server.addr, &format!("/v1/collections/{id}/days"));
        assert_eq!(days, serde_json::json!([{"day": "2026-01-07", "reports": 20}]), "{round}");
        // 1767700800 is 2026-01-06T12:00:00Z.
        for (c, day) in [(&id2, "2026-01-06"), (&id3, "2026-01-08")] {
            let series = get(server.addr, &format!("/v1/collections/{c}/series?period=day"));
            assert_eq!(series["points"][0]["from"], format!("{day}T00:00:00Z"), "{round}: {series}");
            assert_eq!(series["points"].as_array().unwrap().len(), 1, "{round}: {series}");
        }
        server.stop();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
