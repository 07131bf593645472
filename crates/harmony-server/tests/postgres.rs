//! The PostgreSQL store against a real server named by `HARMONY_TEST_POSTGRES`
//! (e.g. `postgres://postgres@127.0.0.1:5432/harmony_test`; `.ci/run` starts one). Without the
//! variable the test says so and passes. It drops and recreates the harmony tables.

use harmony_client::{Client, DeviceTask, Input, RetryPolicy, SimulatedDevices};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::StrategyKind;
use harmony_protocol::estimates::Query;
use harmony_protocol::spec::{MeansSpec, TaskSpec};
use harmony_protocol::{CreateCollection, ReportItem};
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
        .batch_execute(
            "DROP TABLE IF EXISTS harmony_periods, harmony_bucket_states, harmony_reports, harmony_collections, harmony_gradients, harmony_models, harmony_queries, harmony_tokens",
        )
        .unwrap();
    // The store contract.
    {
        let s = PgStore::open(&url).unwrap();
        let k = s.create_collection("c1", "{}").unwrap();
        assert!(matches!(s.create_collection("c1", "{}"), Err(harmony_server::StoreError::Exists(_))));
        assert_eq!(s.insert_reports(k, vec![("a".into(), vec![1]), ("b".into(), vec![2])]).unwrap(), vec![true, true]);
        // The same id with other bytes: a conflict, and nothing of that batch stored.
        let e = s.insert_reports(k, vec![("c".into(), vec![3]), ("b".into(), vec![9])]).unwrap_err();
        assert!(matches!(&e, harmony_server::StoreError::Conflict { index: 1, id } if id == "b"), "{e}");
        assert_eq!(s.insert_reports(k, vec![("b".into(), vec![2]), ("c".into(), vec![3])]).unwrap(), vec![false, true]);
        let mut bodies = Vec::new();
        s.for_each_report(k, &mut |b| bodies.push(b.to_vec())).unwrap();
        bodies.sort();
        assert_eq!(bodies, vec![vec![1], vec![2], vec![3]]);
        assert_eq!(s.count_reports(k).unwrap(), 3);
        assert_eq!(s.day_counts(k).unwrap(), vec![(Some(harmony_server::store::utc_day_now()), 3)]);
        // Analyst tokens: stored (hashes), listed, revoked.
        let t = harmony_server::store::StoredToken {
            token_id: "t1".into(),
            collection: "c1".into(),
            hash: vec![7; 32],
            label: "ana".into(),
            created: 5,
            revoked: false,
        };
        s.insert_token(&t).unwrap();
        assert_eq!(s.tokens().unwrap(), vec![t.clone()]);
        assert!(s.revoke_token("t1").unwrap() && !s.revoke_token("t2").unwrap());
        assert_eq!(s.tokens().unwrap(), vec![harmony_server::store::StoredToken { revoked: true, ..t.clone() }]);
        // Device keys: inserted all or none (a repeated id fails the whole batch).
        let dev = |id: &str, h: u8| harmony_server::store::StoredToken {
            token_id: id.into(),
            hash: vec![h; 32],
            ..t.clone()
        };
        assert!(s.insert_tokens(&[dev("dev_1", 1), dev("dev_1", 2)]).is_err());
        assert_eq!(s.tokens().unwrap().len(), 1, "nothing of a failed batch stored");
        s.insert_tokens(&[dev("dev_1", 1), dev("dev_2", 2)]).unwrap();
        assert_eq!(s.tokens().unwrap().len(), 3);
    }
    // A database created before the `day` column: it opens (the column is added), its old
    // reports read back with no day, new ones with today's.
    admin
        .batch_execute(
            "DROP TABLE IF EXISTS harmony_periods, harmony_bucket_states, harmony_reports, harmony_collections, harmony_gradients, harmony_models, harmony_queries;
             CREATE TABLE harmony_collections (key BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, config TEXT NOT NULL);
             CREATE TABLE harmony_reports (collection BIGINT NOT NULL, report_id TEXT NOT NULL, body BYTEA NOT NULL,
                 PRIMARY KEY (collection, report_id));
             INSERT INTO harmony_collections (key, id, config) VALUES (1, 'old', '{}');
             INSERT INTO harmony_reports VALUES (1, 'old', '\\x01');",
        )
        .unwrap();
    {
        let s = PgStore::open(&url).unwrap();
        assert_eq!(s.insert_reports(1, vec![("new".into(), vec![2])]).unwrap(), vec![true]);
        let mut rows = Vec::new();
        s.for_each_stored(1, &mut |r| {
            rows.push((r.id.to_string(), r.day, r.body.to_vec()));
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
        rows.sort();
        let today = harmony_server::store::utc_day_now();
        assert_eq!(rows, vec![("new".into(), Some(today), vec![2]), ("old".into(), None, vec![1])]);
    }
    drop(PgStore::open(&url).unwrap());
    admin
        .batch_execute("DROP TABLE IF EXISTS harmony_periods, harmony_bucket_states, harmony_reports, harmony_collections, harmony_gradients, harmony_models, harmony_queries")
        .unwrap();
    // The server over PostgreSQL: idempotent batches, rebuild on restart.
    let schema = Schema::new(vec![
        Attribute::Numeric { name: "x".into(), min: 0.0, max: 1.0 },
        Attribute::Categorical { name: "c".into(), categories: vec!["a".into(), "b".into(), "c".into()] },
    ])
    .unwrap();
    let req = CreateCollection {
        schema: Some(schema),
        epsilon: 1.0,
        task: TaskSpec::Means(MeansSpec { strategy: StrategyKind::Split, ..Default::default() }),
    };
    let server = harmony_server::spawn(harmony_server::open_store(&url).unwrap(), "tok", "127.0.0.1:0", 2).unwrap();
    let fast = RetryPolicy { attempts: 1, ..Default::default() };
    let analyst = Client::new(&server.url()).with_token("tok").with_retry(fast);
    let created = analyst.create_collection(&req).unwrap();
    let task = DeviceTask::new(created.config.clone()).unwrap();
    let mut devices = SimulatedDevices::new(4);
    let items: Vec<ReportItem> = (0..5000)
        .map(|i| {
            let row = [Value::Unit((i % 100) as f64 / 50.0 - 0.99), Value::Category(i % 3)];
            let item = devices.item(&task, u64::from(i), &Input::Record(&row)).unwrap();
            ReportItem { id: format!("id{i}"), ..item }
        })
        .collect();
    let client = Client::new(&server.url()).with_retry(fast);
    let ack = client.submit(&created.config, items[..3000].to_vec()).unwrap();
    assert_eq!((ack.accepted, ack.duplicates), (3000, 0));
    let ack = client.submit(&created.config, items[2000..].to_vec()).unwrap();
    assert_eq!((ack.accepted, ack.duplicates), (2000, 1000));
    let before = analyst.estimates(&created.id, &Query::default()).unwrap();
    assert_eq!(before.reports, 5000);
    server.stop();
    let server = harmony_server::spawn(harmony_server::open_store(&url).unwrap(), "tok", "127.0.0.1:0", 2).unwrap();
    let after = Client::new(&server.url()).with_token("tok").estimates(&created.id, &Query::default()).unwrap();
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
