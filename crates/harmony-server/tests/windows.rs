//! Continuous collection: for a collection of every task, batches received on three days (the
//! server's clock shifted), with retried and partly retried batches. Every window's and every
//! series point's estimate document equals, to 1e-12, a fresh aggregation of exactly the reports
//! received in it; so does each after a restart (which merges the stored bucket states). Over
//! SQLite, and over PostgreSQL when `HARMONY_TEST_POSTGRES` names one.

use harmony_client::{DeviceTask, Input, Policy, SimulatedDevices};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::estimates::{EstimateDocument, Query};
use harmony_protocol::{ReportBatch, ReportItem, from_hex_into};
use harmony_server::{AppState, Limits, Store};
use serde_json::Value as Json;
use std::net::SocketAddr;
use std::sync::Arc;

mod common;

const TOKEN: &str = "windows-token";
const DAY: i64 = 86_400;
/// 2026-01-05 (a Monday) at noon: the first simulated day.
const DAY0: i64 = 20_458 * DAY;

fn schema() -> Schema {
    Schema::new(vec![
        Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
        Attribute::Categorical { name: "color".into(), categories: vec!["red".into(), "green".into(), "blue".into()] },
        Attribute::Numeric { name: "score".into(), min: -1.0, max: 1.0 },
    ])
    .unwrap()
}

/// One spec per task kind that takes reports (rounds keep no mergeable state).
fn specs() -> Vec<(&'static str, Json)> {
    vec![
        ("means", serde_json::json!({"kind": "means"})),
        ("frequency", serde_json::json!({"kind": "frequency", "attribute": "color"})),
        ("range", serde_json::json!({"kind": "range", "attribute": "age", "bins": 8})),
        ("range2d", serde_json::json!({"kind": "range2d", "x": "age", "y": "score", "levels": 2})),
        (
            "linear-queries",
            serde_json::json!({"kind": "linear-queries", "attributes": ["color", "age"], "bins": {"age": 4}, "workload": "prefix"}),
        ),
        ("marginals", serde_json::json!({"kind": "marginals", "method": "direct", "bins": {"age": 4}, "ways": [2]})),
        ("heavy-hitters", serde_json::json!({"kind": "heavy-hitters", "method": "pem", "top": 3, "pad_length": 2})),
        (
            "heavy-hitters sketch",
            serde_json::json!({"kind": "heavy-hitters", "method": "sketch", "top": 3, "pad_length": 2}),
        ),
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
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                assert_close(&format!("{what}[{i}]"), p, q);
            }
        }
        (Json::Object(x), Json::Object(y)) => {
            assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>(), "{what}: keys");
            for (k, p) in x {
                assert_close(&format!("{what}.{k}"), p, &y[k]);
            }
        }
        _ => assert_eq!(a, b, "{what}"),
    }
}

/// A GET with the token: the JSON body (panics on another status than 200).
fn get(addr: SocketAddr, path: &str) -> Json {
    let (status, body) = common::raw(addr, "GET", path, b"", Some(TOKEN));
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// The document a fresh accumulator of exactly `reports` gives.
fn fresh(config: &harmony_protocol::CollectionConfig, reports: &[&ReportItem]) -> Json {
    let task = harmony_tasks::build(config).unwrap();
    let mut agg = task.aggregator();
    let mut buf = Vec::new();
    for r in reports {
        buf.clear();
        from_hex_into(&r.report, &mut buf).unwrap();
        task.validate(&buf).unwrap();
        agg.add(&buf).unwrap();
    }
    let result = task.estimate(agg.as_ref(), &Query::default()).unwrap();
    let doc = EstimateDocument { collection: config.id.clone(), reports: agg.count(), epsilon: config.epsilon, result };
    serde_json::to_value(doc).unwrap()
}

/// One collection's traffic: the reports stored per day.
struct Fed {
    id: String,
    config: harmony_protocol::CollectionConfig,
    days: Vec<Vec<ReportItem>>,
}

fn post(addr: SocketAddr, id: &str, version: u32, reports: &[ReportItem]) -> Json {
    let batch = ReportBatch { collection: id.into(), config_version: version, reports: reports.to_vec() };
    let (status, body) =
        common::raw(addr, "POST", &format!("/v1/collections/{id}/reports"), &serde_json::to_vec(&batch).unwrap(), None);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Creates a collection of `spec` and feeds it on three days: per day two batches, the second
/// day's retried whole and its last one partly (new and old ids).
fn feed(state: &AppState, addr: SocketAddr, name: &str, spec: &Json, seed: u64) -> Fed {
    feed_replicas(&[(state, addr)], name, spec, seed)
}

/// [`feed`] through several servers on one store: the collection is created on the first, and
/// each batch goes to the next server in turn (a retry to another than the first try).
fn feed_replicas(servers: &[(&AppState, SocketAddr)], name: &str, spec: &Json, seed: u64) -> Fed {
    let req = serde_json::json!({"schema": schema(), "epsilon": 2.0, "task": spec});
    let (status, body) = common::raw(servers[0].1, "POST", "/v1/collections", req.to_string().as_bytes(), Some(TOKEN));
    assert_eq!(status, 201, "{name}: {body}");
    let created: harmony_protocol::Created = serde_json::from_str(&body).unwrap();
    for (_, addr) in &servers[1..] {
        wait_for(&format!("{name}: served by every replica"), || {
            common::raw(*addr, "GET", &format!("/v1/collections/{}/config", created.id), b"", None).0 == 200
        });
    }
    let mut turn = 0usize;
    let mut next = || {
        turn += 1;
        servers[turn % servers.len()].1
    };
    let task = DeviceTask::with_policy(created.config.clone(), Policy::default()).unwrap();
    let mut devices = SimulatedDevices::new(seed);
    let items: Vec<Vec<String>> = (0..4).map(|i| vec![format!("item{i}"), format!("x{i}")]).collect();
    let mut days = Vec::new();
    let v = created.config.config_version;
    for day in 0..3i64 {
        for (state, _) in servers {
            state.shift_clock(DAY0 + day * DAY + DAY / 2 - harmony_server::store::unix_now());
        }
        let make = |devices: &mut SimulatedDevices, i: u64| {
            // Each day's data leans elsewhere, so windows differ.
            let age = ((i * 7 + day as u64 * 31) % 100) as f64 / 50.0 - 1.0;
            let score = ((i * 13 + day as u64 * 5) % 40) as f64 / 20.0 - 1.0;
            let color = Value::Category(((i + day as u64) % 3) as u32 % (1 + day as u32));
            let rec = [Value::Unit(age), color, Value::Unit(score)];
            let input = if name.starts_with("heavy-hitters") {
                Input::Items(&items[(i % 4) as usize])
            } else {
                Input::Record(&rec)
            };
            devices.item(&task, i, &input).unwrap()
        };
        let base = day as u64 * 1_000;
        let first: Vec<ReportItem> = (0..40).map(|i| make(&mut devices, base + i)).collect();
        let second: Vec<ReportItem> = (40..70).map(|i| make(&mut devices, base + i)).collect();
        assert_eq!(post(next(), &created.id, v, &first)["accepted"], 40);
        if day == 1 {
            // A retried batch: all duplicates, nothing stored twice.
            assert_eq!(post(next(), &created.id, v, &first)["duplicates"], 40);
            // Part retried: the old ids count once, the new ones are stored.
            let mixed: Vec<ReportItem> = first[30..].iter().cloned().chain(second.iter().cloned()).collect();
            let ack = post(next(), &created.id, v, &mixed);
            assert_eq!((ack["accepted"].as_u64(), ack["duplicates"].as_u64()), (Some(30), Some(10)), "{name}");
        } else {
            assert_eq!(post(next(), &created.id, v, &second)["accepted"], 30);
        }
        days.push(first.into_iter().chain(second).collect());
    }
    for (state, _) in servers {
        state.shift_clock(0);
    }
    Fed { id: created.id, config: created.config, days }
}

/// Polls `ok` every 20 ms for up to 10 s; panics naming `what` if it never holds.
fn wait_for(what: &str, mut ok: impl FnMut() -> bool) -> std::time::Duration {
    let t = std::time::Instant::now();
    while !ok() {
        assert!(t.elapsed() < std::time::Duration::from_secs(10), "{what}: not within 10 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    t.elapsed()
}

fn iso(day: i64) -> String {
    harmony_server::buckets::iso(DAY0 + day * DAY)[..10].to_string()
}

/// Windows and series of `f` equal fresh aggregations of their reports.
fn check(addr: SocketAddr, name: &str, f: &Fed) {
    let of = |days: std::ops::Range<usize>| -> Vec<&ReportItem> { f.days[days].iter().flatten().collect() };
    for (a, b) in [(0usize, 3usize), (0, 2), (1, 3), (1, 2), (2, 3)] {
        let path = format!("/v1/collections/{}/estimates?from={}&to={}", f.id, iso(a as i64), iso(b as i64));
        assert_close(&format!("{name} {path}"), &get(addr, &path), &fresh(&f.config, &of(a..b)));
    }
    // An open side, and the whole collection.
    let path = format!("/v1/collections/{}/estimates?from={}", f.id, iso(1));
    assert_close(&format!("{name} {path}"), &get(addr, &path), &fresh(&f.config, &of(1..3)));
    let path = format!("/v1/collections/{}/estimates", f.id);
    assert_close(&format!("{name} live"), &get(addr, &path), &fresh(&f.config, &of(0..3)));
    let series = get(addr, &format!("/v1/collections/{}/series?period=day", f.id));
    let points = series["points"].as_array().unwrap();
    assert_eq!(points.len(), 3, "{name}: {series}");
    for (d, p) in points.iter().enumerate() {
        assert_eq!(p["from"], format!("{}T00:00:00Z", iso(d as i64)));
        assert_close(&format!("{name} series day {d}"), &p["document"], &fresh(&f.config, &of(d..d + 1)));
    }
    // The change from day 0 to day 2: the differences of the fresh documents.
    let path =
        format!("/v1/collections/{}/compare?a_from={}&a_to={}&b_from={}&b_to={}", f.id, iso(0), iso(1), iso(2), iso(3));
    let got = get(addr, &path);
    let want = harmony_server::compare::differences(&fresh(&f.config, &of(0..1)), &fresh(&f.config, &of(2..3)));
    assert!(!want.is_empty() || name.starts_with("heavy-hitters"), "{name}: nothing to compare");
    assert_close(&format!("{name} {path}"), &got["differences"], &serde_json::to_value(&want).unwrap());
    assert_eq!((got["a"]["reports"].as_u64(), got["b"]["reports"].as_u64()), (Some(70), Some(70)), "{name}");
    // 2026-01-05 is a Monday: one week holds the three days.
    let weeks = get(addr, &format!("/v1/collections/{}/series?period=week&to={}", f.id, iso(2)));
    let points = weeks["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{name}: {weeks}");
    assert_close(&format!("{name} week"), &points[0]["document"], &fresh(&f.config, &of(0..2)));
}

/// Feeds a collection of every task through a server on `open()`'s store, checks it, restarts
/// the server on a store opened again and checks again.
fn windows_equal_fresh_aggregations(open: &dyn Fn() -> Arc<dyn Store>) {
    let state = AppState::new(open(), TOKEN).unwrap();
    let server = harmony_server::spawn_state(state.clone(), "127.0.0.1:0", 2, &Limits::default(), |r| r).unwrap();
    let fed: Vec<(&str, Fed)> = specs()
        .iter()
        .enumerate()
        .map(|(i, (name, spec))| (*name, feed(&state, server.addr, name, spec, i as u64)))
        .collect();
    for (name, f) in &fed {
        check(server.addr, name, f);
    }
    server.stop();
    drop(state);
    let state = AppState::new(open(), TOKEN).unwrap();
    let server = harmony_server::spawn_state(state, "127.0.0.1:0", 2, &Limits::default(), |r| r).unwrap();
    for (name, f) in &fed {
        check(server.addr, &format!("{name} after a restart"), f);
    }
    server.stop();
}

#[test]
fn windowed_and_series_estimates_equal_fresh_aggregation_over_sqlite() {
    let dir = std::env::temp_dir().join(format!("harmony-windows-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db.sqlite");
    windows_equal_fresh_aggregations(&|| Arc::new(harmony_server::SqliteStore::open(&path).unwrap()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn windowed_and_series_estimates_equal_fresh_aggregation_over_postgres() {
    let Ok(url) = std::env::var("HARMONY_TEST_POSTGRES") else {
        eprintln!("HARMONY_TEST_POSTGRES not set: PostgreSQL test skipped");
        return;
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let db = format!("harmony_windows_{}", std::process::id());
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
    let (base, _) = url.rsplit_once('/').unwrap();
    let db_url = format!("{base}/{db}");
    windows_equal_fresh_aggregations(&|| harmony_server::open_store(&db_url).unwrap());
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).unwrap();
}

#[test]
fn windows_refuse_misaligned_instants_and_rounds() {
    let state = AppState::new(
        {
            let dir = std::env::temp_dir().join(format!("harmony-windows-bad-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Arc::new(harmony_server::SqliteStore::open(&dir.join("db.sqlite")).unwrap())
        },
        TOKEN,
    )
    .unwrap();
    let server = harmony_server::spawn_state(state, "127.0.0.1:0", 2, &Limits::default(), |r| r).unwrap();
    let req =
        serde_json::json!({"schema": schema(), "epsilon": 2.0, "task": {"kind": "frequency", "attribute": "color"}});
    let body = req.to_string();
    let (s, b) = common::raw(server.addr, "POST", "/v1/collections?period=fortnight", body.as_bytes(), Some(TOKEN));
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("\"period\""), "{b}");
    let (s, b) = common::raw(server.addr, "POST", "/v1/collections?period=hour", body.as_bytes(), Some(TOKEN));
    assert_eq!(s, 201, "{b}");
    let id = serde_json::from_str::<Json>(&b).unwrap()["id"].as_str().unwrap().to_string();
    let ask = |q: &str| common::raw(server.addr, "GET", &format!("/v1/collections/{id}/{q}"), b"", Some(TOKEN));
    // An hour collection: hour boundaries are fine, half past is not.
    assert_eq!(ask("estimates?from=2026-01-05T10:00Z").0, 200);
    let (s, b) = ask("estimates?from=2026-01-05T10:30Z");
    assert!(s == 400 && b.contains("\"from\"") && b.contains("2026-01-05T10:00:00Z"), "{s} {b}");
    let (s, b) = ask("estimates?from=2026-01-05&to=2026-01-05");
    assert!(s == 400 && b.contains("\"to\""), "{s} {b}");
    let (s, b) = ask("compare?a_from=2026-01-05&a_to=2026-01-07&b_from=2026-01-06");
    assert!(s == 400 && b.contains("overlap"), "{s} {b}");
    let (s, b) = ask("series?period=minute");
    assert!(s == 400 && b.contains("\"period\""), "{s} {b}");
    server.stop();
}

#[test]
fn week_collections_refuse_daily_series() {
    let dir = std::env::temp_dir().join(format!("harmony-windows-week-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state =
        AppState::new(Arc::new(harmony_server::SqliteStore::open(&dir.join("db.sqlite")).unwrap()), TOKEN).unwrap();
    let server = harmony_server::spawn_state(state, "127.0.0.1:0", 2, &Limits::default(), |r| r).unwrap();
    let req = serde_json::json!({"schema": schema(), "epsilon": 2.0, "task": {"kind": "means"}});
    let (s, b) =
        common::raw(server.addr, "POST", "/v1/collections?period=week", req.to_string().as_bytes(), Some(TOKEN));
    assert_eq!(s, 201, "{b}");
    let id = serde_json::from_str::<Json>(&b).unwrap()["id"].as_str().unwrap().to_string();
    let (s, b) = common::raw(server.addr, "GET", &format!("/v1/collections/{id}/series?period=day"), b"", Some(TOKEN));
    assert!(s == 400 && b.contains("\"period\""), "{s} {b}");
    // 2026-01-07 is a Wednesday: not a week boundary.
    let (s, b) =
        common::raw(server.addr, "GET", &format!("/v1/collections/{id}/estimates?to=2026-01-07"), b"", Some(TOKEN));
    assert!(s == 400 && b.contains("\"to\""), "{s} {b}");
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Three replicas on one PostgreSQL database: collections created on one, batches and retries
/// spread over all of them. Within the poll's staleness bound every replica answers every window
/// and series point with a fresh aggregation of exactly its reports, as does a replica started
/// afterwards; an analyst token minted on one works on the others and its revocation reaches
/// them; `/readyz` says how far behind each is.
#[test]
fn replicas_answer_every_window_alike_over_postgres() {
    let Ok(url) = std::env::var("HARMONY_TEST_POSTGRES") else {
        eprintln!("HARMONY_TEST_POSTGRES not set: PostgreSQL test skipped");
        return;
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let db = format!("harmony_replicas_windows_{}", std::process::id());
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
    let (base, _) = url.rsplit_once('/').unwrap();
    let db_url = format!("{base}/{db}");
    let start = || {
        let state = AppState::new(harmony_server::open_store(&db_url).unwrap(), TOKEN).unwrap();
        let server = harmony_server::spawn_state(state.clone(), "127.0.0.1:0", 2, &Limits::default(), |r| r).unwrap();
        (state, server)
    };
    let (a, b) = (start(), start());
    let servers = [(&a.0, a.1.addr), (&b.0, b.1.addr)];
    let fed: Vec<(&str, Fed)> = specs()
        .iter()
        .enumerate()
        .map(|(i, (name, spec))| (*name, feed_replicas(&servers, name, spec, i as u64)))
        .collect();
    // Every replica converges on the same reports: the live count first, then every window.
    let mut slowest = std::time::Duration::ZERO;
    for (_, addr) in servers {
        for (name, f) in &fed {
            let path = format!("/v1/collections/{}/estimates", f.id);
            let waited = wait_for(&format!("{name} on {addr}"), || get(addr, &path)["reports"] == 210);
            slowest = slowest.max(waited);
        }
    }
    eprintln!("replicas converged {} ms after the last batch", slowest.as_millis());
    let c = start();
    for (name, f) in &fed {
        for addr in [a.1.addr, b.1.addr, c.1.addr] {
            check(addr, &format!("{name} on replica {addr}"), f);
        }
    }
    // Tokens: minted on one replica, honoured and then refused on another.
    let id = &fed[0].1.id;
    let (status, body) = common::raw(a.1.addr, "POST", &format!("/v1/collections/{id}/tokens"), b"{}", Some(TOKEN));
    assert_eq!(status, 201, "{body}");
    let minted: Json = serde_json::from_str(&body).unwrap();
    let (token, token_id) = (minted["token"].as_str().unwrap(), minted["token_id"].as_str().unwrap());
    let estimates = format!("/v1/collections/{id}/estimates");
    wait_for("a token minted on another replica", || {
        common::raw(b.1.addr, "GET", &estimates, b"", Some(token)).0 == 200
    });
    let (status, body) =
        common::raw(a.1.addr, "DELETE", &format!("/v1/collections/{id}/tokens/{token_id}"), b"", Some(TOKEN));
    assert!(status == 200 || status == 204, "{status}: {body}");
    wait_for("a revocation made on another replica", || {
        common::raw(c.1.addr, "GET", &estimates, b"", Some(token)).0 == 401
    });
    let ready = get(c.1.addr, "/readyz");
    assert!(ready["behind_ms"].as_i64().is_some_and(|ms| ms < 2_000), "{ready}");
    for (_, server) in [a, b, c] {
        server.stop();
    }
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).unwrap();
}

/// A recurring create (`?recurring=true`) publishes its period in the config devices fetch; rounds
/// cannot recur, and the flag takes true or false only.
#[test]
fn recurring_collections_publish_their_period() {
    let dir = std::env::temp_dir().join(format!("harmony-windows-recurring-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = Arc::new(harmony_server::SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    let state = AppState::new(store, TOKEN).unwrap();
    let server = harmony_server::spawn_state(state, "127.0.0.1:0", 2, &Limits::default(), |r| r).unwrap();
    let create = |query: &str, spec: Json| {
        let req = serde_json::json!({"schema": schema(), "epsilon": 1.0, "task": spec});
        common::raw(server.addr, "POST", &format!("/v1/collections{query}"), req.to_string().as_bytes(), Some(TOKEN))
    };
    let (status, body) = create("?period=week&recurring=true", serde_json::json!({"kind": "means"}));
    assert_eq!(status, 201, "{body}");
    let created: Json = serde_json::from_str(&body).unwrap();
    assert_eq!(created["config"]["recurring"], "week");
    let config = get(server.addr, &format!("/v1/collections/{}/config", created["id"].as_str().unwrap()));
    assert_eq!(config["recurring"], "week");
    let (status, body) = create("", serde_json::json!({"kind": "means"}));
    assert_eq!(status, 201, "{body}");
    assert!(serde_json::from_str::<Json>(&body).unwrap()["config"].get("recurring").is_none(), "{body}");
    let (status, body) = create("?recurring=yes", serde_json::json!({"kind": "means"}));
    assert!(status == 400 && body.contains("recurring") && body.contains("true or false"), "{status} {body}");
    let adaptive = serde_json::json!({"kind": "linear-queries", "attributes": ["age"], "bins": {"age": 4}, "workload": {"queries": [{"name": "young", "range": [0, 2]}]}, "mechanism": "adaptive-rounds", "batch_size": 10});
    let (status, body) = create("?recurring=true", adaptive);
    assert!(status == 400 && body.contains("cannot recur"), "{status} {body}");
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
