//! A slow query over a collection's reports (the dashboard's days, a replay, an export) must
//! not hold up readiness, token reads or gradient commits: they use other connections of the
//! store. (An analyst's 16 concurrent days queries made `/readyz` take 18 s.)

use harmony_server::{SqliteStore, Store};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_slow_report_scan_does_not_block_readiness_tokens_or_gradients() {
    let dir = std::env::temp_dir().join(format!("harmony-slowq-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    let key = store.create_collection("c1", "{}").unwrap();
    let rows = (0..100).map(|i| (format!("r{i}"), vec![1u8])).collect();
    store.insert_reports(key, rows).unwrap();
    let scanning = {
        let store = store.clone();
        std::thread::spawn(move || {
            // A scan that takes 2 s (as a large collection's would).
            store
                .for_each_stored(key, &mut |_| {
                    std::thread::sleep(Duration::from_millis(20));
                    ControlFlow::Continue(())
                })
                .unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let timed = |what: &str, f: &mut dyn FnMut()| {
        let t0 = Instant::now();
        f();
        let took = t0.elapsed();
        assert!(took < Duration::from_millis(500), "{what} took {took:?} during a slow scan");
    };
    timed("ping", &mut || store.ping().unwrap());
    timed("tokens", &mut || drop(store.tokens().unwrap()));
    timed("a gradient commit", &mut || assert!(store.insert_gradient(key, "dev1", 1, 1, &[1], None).unwrap()));
    timed("has_gradient", &mut || assert!(store.has_gradient(key, "dev1").unwrap()));
    scanning.join().unwrap();
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
