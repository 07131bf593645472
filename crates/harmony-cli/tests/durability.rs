//! Durability: `harmony serve` is killed with SIGKILL in the middle of a submission by
//! concurrent clients, restarted on the same port, and the clients' retries finish. The final
//! count equals the number of distinct reports: nothing acknowledged is lost, nothing is
//! counted twice; the accumulators rebuilt on start agree with the live ones. For a means, a
//! marginals (CALM) and a heavy-hitters (PEM) collection.

use harmony_client::{Client, DeviceTask, Input, RetryPolicy, SimulatedDevices};
use harmony_core::sampling::{fast_rng, stream_seed, uniform01};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::StrategyKind;
use harmony_protocol::estimates::Query;
use harmony_protocol::spec::{MeansSpec, TaskSpec};
use harmony_protocol::{CreateCollection, ReportBatch, ReportItem};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn serve(db: &std::path::Path, port: u16, log: &std::path::Path) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_harmony"))
        .args(["serve", "--db", &format!("sqlite://{}", db.display()), "--listen", &format!("127.0.0.1:{port}")])
        .args(["--analyst-token", "tok"])
        .stdout(Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t.elapsed() < Duration::from_secs(60), "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The collections under test.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Means,
    Marginals,
    HeavyHitters,
}

impl Kind {
    /// The task (its spec in the wire's JSON).
    fn task(self, n: usize) -> TaskSpec {
        match self {
            Kind::Means => TaskSpec::Means(MeansSpec { strategy: StrategyKind::Harmony, ..Default::default() }),
            Kind::Marginals => serde_json::from_str(&format!(r#"{{"kind": "marginals", "ways": [2], "users": {n}}}"#))
                .expect("a marginals spec"),
            Kind::HeavyHitters => {
                serde_json::from_str(r#"{"kind": "heavy-hitters", "top": 5}"#).expect("a heavy-hitters spec")
            }
        }
    }
}

/// The largest difference between two JSON documents' numbers (∞ when their shapes differ).
fn diff(a: &serde_json::Value, b: &serde_json::Value) -> f64 {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => (x.as_f64().unwrap() - y.as_f64().unwrap()).abs(),
        (J::Array(x), J::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).map(|(p, q)| diff(p, q)).fold(0.0, f64::max)
        }
        (J::Object(x), J::Object(y)) if x.len() == y.len() => {
            x.iter().map(|(k, v)| y.get(k).map_or(f64::INFINITY, |w| diff(v, w))).fold(0.0, f64::max)
        }
        (x, y) if x == y => 0.0,
        _ => f64::INFINITY,
    }
}

fn run(n: usize, batch: usize, clients: usize, kind: Kind) {
    let dir = std::env::temp_dir().join(format!("harmony-durability-{}-{n}-{kind:?}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (db, log) = (dir.join("db.sqlite"), dir.join("server.log"));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = serve(&db, port, &log);
    let url = format!("http://127.0.0.1:{port}");
    let analyst = Client::new(&url).with_token("tok");
    let schema = Schema::new(vec![
        Attribute::Numeric { name: "x".into(), min: 0.0, max: 1.0 },
        Attribute::Categorical { name: "c".into(), categories: (0..8).map(|i| format!("c{i}")).collect() },
        Attribute::Categorical { name: "b".into(), categories: vec!["no".into(), "yes".into()] },
    ])
    .unwrap();
    let req = CreateCollection { schema: Some(schema), epsilon: 1.0, task: kind.task(n) };
    let created = analyst.create_collection(&req).unwrap();
    let task = DeviceTask::new(created.config.clone()).unwrap();
    let nb = n.div_ceil(batch);
    // Device i is simulated device i of seed 3, with report id `r{i}`; a retry resends its batch's
    // body unchanged.
    let mut devices = SimulatedDevices::new(3);
    let bodies: Vec<Vec<u8>> = (0..nb)
        .map(|b| {
            let mut rng = fast_rng(stream_seed(3, b as u64));
            let items = (b * batch..((b + 1) * batch).min(n))
                .map(|i| {
                    let x = uniform01(&mut rng);
                    let row = [
                        Value::Unit(2.0 * x - 1.0),
                        Value::Category((i % 8) as u32),
                        Value::Category(u32::from(x < 0.3)),
                    ];
                    let items = [format!("item{}", (x * x * 40.0) as u32)];
                    let input = match kind {
                        Kind::HeavyHitters => Input::Items(&items),
                        _ => Input::Record(&row),
                    };
                    let item = devices.item(&task, i as u64, &input).unwrap();
                    ReportItem { id: format!("r{i}"), ..item }
                })
                .collect();
            let batch = ReportBatch {
                collection: created.id.clone(),
                config_version: created.config.config_version,
                reports: items,
            };
            serde_json::to_vec(&batch).unwrap()
        })
        .collect();
    let retry = RetryPolicy { attempts: 400, base: Duration::from_millis(10), max: Duration::from_millis(200) };
    let next = AtomicUsize::new(0);
    let acked = AtomicUsize::new(0);
    let (accepted, duplicates) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                s.spawn(|| {
                    let c = Client::new(&url).with_retry(retry);
                    loop {
                        let b = next.fetch_add(1, Ordering::SeqCst);
                        if b >= nb {
                            return;
                        }
                        let ack = c.submit_raw(&created.id, &bodies[b]).expect("retries finish");
                        accepted.fetch_add(ack.accepted, Ordering::SeqCst);
                        duplicates.fetch_add(ack.duplicates, Ordering::SeqCst);
                        acked.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        // Kill the server once a third of the batches are acknowledged, mid-stream.
        while acked.load(Ordering::SeqCst) < nb / 3 {
            std::thread::sleep(Duration::from_millis(2));
        }
        server.kill().unwrap(); // SIGKILL
        server.wait().unwrap();
        let at_kill = acked.load(Ordering::SeqCst);
        assert!(at_kill < nb, "the kill came after the last batch");
        std::thread::sleep(Duration::from_millis(300));
        server = serve(&db, port, &log);
        for h in handles {
            h.join().unwrap();
        }
    });
    let est = analyst.estimates(&created.id, &Query::default()).unwrap();
    assert_eq!(est.reports, n as u64, "distinct reports stored and counted once");
    // Every report was acknowledged once as new or (a retry of a batch committed before the
    // kill) as a duplicate.
    assert_eq!(accepted.load(Ordering::SeqCst) + duplicates.load(Ordering::SeqCst), n as u64);
    // A clean restart rebuilds the same accumulator from the store.
    server.kill().unwrap();
    server.wait().unwrap();
    server = serve(&db, port, &log);
    let rebuilt = analyst.estimates(&created.id, &Query::default()).unwrap();
    assert_eq!(rebuilt.reports, n as u64);
    let (a, b) = (serde_json::to_value(&est).unwrap(), serde_json::to_value(&rebuilt).unwrap());
    let d = diff(&a, &b);
    assert!(
        d == 0.0,
        "{kind:?}: the rebuilt estimates are not identical to the live ones (largest difference {d:e})\n{a}\n{b}"
    );
    server.kill().unwrap();
    server.wait().unwrap();
    eprintln!(
        "{kind:?}, {n} reports: {} acknowledged as new, {} as duplicates (retries after the kill)",
        accepted.load(Ordering::SeqCst),
        duplicates.load(Ordering::SeqCst)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigkill_mid_submission_loses_nothing_counts_once() {
    run(40_000, 1000, 4, Kind::Means);
}

/// Durability of the analytics tasks: a marginals (CALM) and a heavy-hitters (PEM) collection.
#[test]
fn sigkill_marginals_and_heavy_hitters_lose_nothing_count_once() {
    run(20_000, 500, 4, Kind::Marginals);
    run(20_000, 500, 4, Kind::HeavyHitters);
}

/// The acceptance size: 10^6 reports from 8 concurrent clients.
#[test]
#[ignore]
fn sigkill_mid_submission_one_million() {
    run(1_000_000, 5000, 8, Kind::Means);
}
