//! Continuous collection at scale (heavy tier, release settings): for each task that takes
//! reports, 30 days of 10^6 simulated reports a day stored as daily bucket states; a server
//! started on the store answers a 30-day window and a 30-point daily series with p99 ≤ 100 ms
//! (100 requests each over HTTP on loopback). Prints each task's stored bytes per bucket state.
//!
//! Each day is stored as its bucket's saved state (what ingest stores with every batch and what
//! every window merges): no window reads a report, so the reports themselves are not written.
//!
//! Heavy hitters run with `method: sketch` (a fixed k × m sketch per level, whatever the
//! reports): the report-keeping methods (`pem`, `treehist`) answer a window by scanning its
//! reports, in time proportional to them, outside the 100 ms bound.

use harmony_core::schema::{Attribute, Schema, Value};
use harmony_server::{AppState, Limits};
use harmony_tasks::{Input, Task, TaskAggregator};
use std::time::Instant;

mod common;

const TOKEN: &str = "scale-token";
const DAY: i64 = 86_400;
/// 2026-01-05: the first day.
const DAY0: i64 = 20_458 * DAY;
const DAYS: i64 = 30;
const PER_DAY: u64 = 1_000_000;

fn schema() -> Schema {
    Schema::new(vec![
        Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
        Attribute::Categorical { name: "color".into(), categories: vec!["red".into(), "green".into(), "blue".into()] },
    ])
    .unwrap()
}

fn specs() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        ("means", serde_json::json!({"kind": "means"})),
        ("frequency", serde_json::json!({"kind": "frequency", "attribute": "color"})),
        ("range", serde_json::json!({"kind": "range", "attribute": "age", "bins": 64})),
        (
            "linear-queries",
            serde_json::json!({"kind": "linear-queries", "attributes": ["color", "age"], "bins": {"age": 8}, "workload": "prefix"}),
        ),
        ("marginals", serde_json::json!({"kind": "marginals", "method": "direct", "bins": {"age": 8}, "ways": [2]})),
        ("heavy-hitters", serde_json::json!({"kind": "heavy-hitters", "method": "sketch", "top": 5, "pad_length": 2})),
    ]
}

/// The accumulator of day `day`'s 10^6 simulated reports (two threads, merged).
fn day_state(task: &dyn Task, name: &str, day: u64) -> Box<dyn TaskAggregator> {
    let half = |part: u64| {
        let mut agg = task.aggregator();
        let (mut buf, items) = (Vec::new(), (0..50).map(|i| vec![format!("w{i}")]).collect::<Vec<_>>());
        for i in (part * PER_DAY / 2)..((part + 1) * PER_DAY / 2) {
            let mut rng = harmony_tasks::simulate::device_rng(day, i);
            let age = ((i * 7 + day * 13) % 100) as f64 / 50.0 - 1.0;
            let rec = [Value::Unit(age), Value::Category((i % 3) as u32)];
            let input =
                if name == "heavy-hitters" { Input::Items(&items[(i * i % 50) as usize]) } else { Input::Record(&rec) };
            task.randomize(&input, &mut rng, &mut buf).unwrap();
            agg.add(&buf).unwrap();
        }
        agg
    };
    let (mut a, b) = std::thread::scope(|s| {
        let h = s.spawn(|| half(1));
        (half(0), h.join().unwrap())
    });
    a.merge(b.as_ref()).unwrap();
    a
}

/// p99 in ms of `n` GETs of `path`, each until its last byte.
fn p99(addr: std::net::SocketAddr, path: &str, n: usize) -> f64 {
    let mut lat: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            let (status, body) = common::raw(addr, "GET", path, b"", Some(TOKEN));
            assert_eq!(status, 200, "GET {path}: {body}");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    lat.sort_by(f64::total_cmp);
    lat[(0.99 * (n - 1) as f64).round() as usize]
}

#[test]
#[ignore = "heavy: 180 million simulated reports; run in release (CI's heavy tier)"]
fn thirty_days_of_a_million_reports_answer_windows_and_series_within_100ms() {
    let dir = std::env::temp_dir().join(format!("harmony-windows-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = dir.join("scale.db").display().to_string();
    let store = harmony_server::open_store(&url).unwrap();
    let mut ids = Vec::new();
    for (name, spec) in specs() {
        let req = serde_json::json!({"schema": schema(), "epsilon": 2.0, "task": spec});
        let create: harmony_protocol::CreateCollection = serde_json::from_value(req).unwrap();
        let config = harmony_tasks::resolve(&create, &format!("scale-{name}")).unwrap();
        let task = harmony_tasks::build(&config).unwrap();
        let key = store.create_collection_meta(&config.id, &serde_json::to_string(&config).unwrap(), "{}").unwrap();
        let t = Instant::now();
        let mut states = Vec::new();
        for d in 0..DAYS {
            let agg = day_state(task.as_ref(), name, d as u64);
            states.push((DAY0 + d * DAY, harmony_tasks::state::save(task.as_ref(), agg.as_ref()).unwrap()));
        }
        let bytes = states.iter().map(|(_, s)| s.len()).sum::<usize>() / states.len();
        eprintln!("{name}: {DAYS} days of {PER_DAY} reports in {:.1} s", t.elapsed().as_secs_f64());
        // Stored as the states of a collection kept before buckets: one transaction.
        store.adopt_buckets(key, DAY, states).unwrap();
        ids.push((name, config.id, bytes));
    }
    drop(store);
    let t = Instant::now();
    let state = AppState::new(harmony_server::open_store(&url).unwrap(), TOKEN).unwrap();
    eprintln!("server start (merging every stored state): {:.2} s", t.elapsed().as_secs_f64());
    let server = harmony_server::spawn_state(state, "127.0.0.1:0", 2, &Limits::default(), |r| r).unwrap();
    let (from, to) = ("2026-01-05", "2026-02-04");
    eprintln!("| task | bytes per bucket state | 30-day window p99 | 30-point series p99 |");
    for (name, id, bytes) in &ids {
        let window = format!("/v1/collections/{id}/estimates?from={from}&to={to}");
        let (_, body) = common::raw(server.addr, "GET", &window, b"", Some(TOKEN));
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(doc["reports"].as_u64(), Some(DAYS as u64 * PER_DAY), "{name}: {body:.300}");
        let series = format!("/v1/collections/{id}/series?period=day&from={from}&to={to}");
        let (_, body) = common::raw(server.addr, "GET", &series, b"", Some(TOKEN));
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(doc["points"].as_array().map(Vec::len), Some(DAYS as usize), "{name}");
        let (w, s) = (p99(server.addr, &window, 100), p99(server.addr, &series, 100));
        eprintln!("| {name} | {bytes} | {w:.1} ms | {s:.1} ms |");
        assert!(w <= 100.0 && s <= 100.0, "{name}: window p99 {w:.1} ms, series p99 {s:.1} ms (bound 100 ms)");
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
