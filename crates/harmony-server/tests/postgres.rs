//! The PostgreSQL store against a real server named by `HARMONY_TEST_POSTGRES`
//! (e.g. `postgres://postgres@127.0.0.1:5432/harmony_test`; `.ci/run` starts one). Without the
//! variable the test says so and passes. It drops and recreates the harmony tables.

use harmony_client::protocol::{CreateCollection, ReportItem};
use harmony_client::{Client, RetryPolicy};
use harmony_core::sampling::fast_rng;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::RecordReport;
use harmony_server::Store;
use harmony_server::pg::PgStore;

#[test]
fn postgres_store_and_server() {
    let Ok(url) = std::env::var("HARMONY_TEST_POSTGRES") else {
        eprintln!("HARMONY_TEST_POSTGRES not set: PostgreSQL test skipped");
        return;
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute("DROP TABLE IF EXISTS harmony_reports, harmony_collections, harmony_gradients, harmony_models")
        .unwrap();
    // The store contract.
    {
        let s = PgStore::open(&url).unwrap();
        let k = s.create_collection("c1", "{}").unwrap();
        assert!(matches!(s.create_collection("c1", "{}"), Err(harmony_server::StoreError::Exists(_))));
        assert_eq!(s.insert_reports(k, vec![("a".into(), vec![1]), ("b".into(), vec![2])]).unwrap(), vec![true, true]);
        assert_eq!(s.insert_reports(k, vec![("b".into(), vec![9]), ("c".into(), vec![3])]).unwrap(), vec![false, true]);
        let mut bodies = Vec::new();
        s.for_each_report(k, &mut |b| bodies.push(b.to_vec())).unwrap();
        bodies.sort();
        assert_eq!(bodies, vec![vec![1], vec![2], vec![3]]);
        assert_eq!(s.count_reports(k).unwrap(), 3);
    }
    admin
        .batch_execute("DROP TABLE IF EXISTS harmony_reports, harmony_collections, harmony_gradients, harmony_models")
        .unwrap();
    // The server over PostgreSQL: idempotent batches, rebuild on restart.
    let schema = Schema::new(vec![
        Attribute::Numeric { name: "x".into(), min: 0.0, max: 1.0 },
        Attribute::Categorical { name: "c".into(), categories: vec!["a".into(), "b".into(), "c".into()] },
    ])
    .unwrap();
    let req = CreateCollection {
        schema,
        epsilon: 1.0,
        strategy: "split".into(),
        numeric_mechanism: None,
        categorical_mechanism: None,
        tasks: vec!["means".into()],
        train: None,
    };
    let server = harmony_server::spawn(harmony_server::open_store(&url).unwrap(), "tok", "127.0.0.1:0", 2).unwrap();
    let fast = RetryPolicy { attempts: 1, ..Default::default() };
    let analyst = Client::new(&server.url()).with_token("tok").with_retry(fast);
    let created = analyst.create_collection(&req).unwrap();
    let mech = harmony_client::mechanism(&created.config).unwrap();
    let mut rng = fast_rng(4);
    let (mut r, mut s, mut b) = (RecordReport::default(), Vec::new(), Vec::new());
    let items: Vec<ReportItem> = (0..5000)
        .map(|i| {
            let row = [Value::Unit((i % 100) as f64 / 50.0 - 0.99), Value::Category(i % 3)];
            harmony_client::randomize_item(&mech, &row, &mut rng, format!("id{i}"), &mut r, &mut s, &mut b).unwrap()
        })
        .collect();
    let client = Client::new(&server.url()).with_retry(fast);
    let ack = client.submit(&created.config, items[..3000].to_vec()).unwrap();
    assert_eq!((ack.accepted, ack.duplicates), (3000, 0));
    let ack = client.submit(&created.config, items[2000..].to_vec()).unwrap();
    assert_eq!((ack.accepted, ack.duplicates), (2000, 1000));
    let before = analyst.estimates(&created.id).unwrap();
    assert_eq!(before.reports, 5000);
    server.stop();
    let server = harmony_server::spawn(harmony_server::open_store(&url).unwrap(), "tok", "127.0.0.1:0", 2).unwrap();
    let after = Client::new(&server.url()).with_token("tok").estimates(&created.id).unwrap();
    assert_eq!(after.reports, 5000);
    let (x, y) = (serde_json::to_value(&before).unwrap(), serde_json::to_value(&after).unwrap());
    for v in 0..3 {
        let (p, q) = (
            x["attributes"][1]["categories"][v]["estimate"].as_f64().unwrap(),
            y["attributes"][1]["categories"][v]["estimate"].as_f64().unwrap(),
        );
        assert!((p - q).abs() < 1e-9, "{p} vs {q}");
    }
    server.stop();
}
