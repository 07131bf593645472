//! Model rounds on loopback: a logistic training collection, one gradient per device, rounds
//! that advance when a batch is full, an in-process replay of the same reports, repeated devices,
//! stale rounds, malformed gradients and a restart mid-round. Each test runs on SQLite and, when
//! `HARMONY_TEST_POSTGRES` names a PostgreSQL database (see `tests/postgres.rs`), on PostgreSQL
//! too (skipped, passing, without it); PostgreSQL also gets two servers sharing one database.

use harmony_client::protocol::{CollectionConfig, CreateCollection, GradientPost, ModelState, TrainSpec, to_hex};
use harmony_client::{Client, ClientError, Device, MemoryLedger, RetryPolicy, randomize_gradient};
use harmony_core::sampling::{fast_rng, uniform01};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_learn::remote::{GradientReport, RemoteMechanism, apply_update};
use std::path::PathBuf;

const TOKEN: &str = "test-token";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harmony-rounds-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn schema() -> Schema {
    Schema::new(vec![
        Attribute::Numeric { name: "x1".into(), min: -1.0, max: 1.0 },
        Attribute::Numeric { name: "x2".into(), min: -1.0, max: 1.0 },
        Attribute::Categorical { name: "label".into(), categories: vec!["no".into(), "yes".into()] },
    ])
    .unwrap()
}

/// Rows with label = yes iff x1 + 0.5·x2 > 0.
fn rows(n: usize, seed: u64) -> Vec<Vec<Value>> {
    let mut rng = fast_rng(seed);
    (0..n)
        .map(|_| {
            let x1 = 2.0 * uniform01(&mut rng) - 1.0;
            let x2 = 2.0 * uniform01(&mut rng) - 1.0;
            vec![Value::Unit(x1), Value::Unit(x2), Value::Category(u32::from(x1 + 0.5 * x2 > 0.0))]
        })
        .collect()
}

fn spec(batch_size: u64, rounds: Option<u64>) -> TrainSpec {
    TrainSpec {
        task: "logistic".into(),
        target: "label".into(),
        positive: None,
        threshold: None,
        mechanism: "hm".into(),
        batch_size,
        learning_rate: 2.0,
        lambda: 1e-4,
        rounds,
    }
}

fn request(train: Option<TrainSpec>) -> CreateCollection {
    CreateCollection {
        schema: schema(),
        epsilon: 8.0,
        strategy: "harmony".into(),
        numeric_mechanism: None,
        categorical_mechanism: None,
        tasks: vec!["train".into()],
        train,
    }
}

/// A server over the store `url` names (`sqlite://PATH` or `postgres://…`).
fn start(url: &str) -> harmony_server::Running {
    harmony_server::spawn(harmony_server::open_store(url).unwrap(), TOKEN, "127.0.0.1:0", 2).unwrap()
}

fn sqlite_url(dir: &std::path::Path) -> String {
    format!("sqlite://{}", dir.join("db.sqlite").display())
}

/// The PostgreSQL URL of `HARMONY_TEST_POSTGRES`, or `None` (the caller skips). The tables are
/// not dropped: every test creates its own collections.
fn postgres_url(test: &str) -> Option<String> {
    match std::env::var("HARMONY_TEST_POSTGRES") {
        Ok(url) => Some(url),
        Err(_) => {
            eprintln!("HARMONY_TEST_POSTGRES not set: PostgreSQL test {test} skipped");
            None
        }
    }
}

fn analyst(url: &str) -> Client {
    Client::new(url).with_token(TOKEN).with_retry(RetryPolicy { attempts: 1, ..Default::default() })
}

/// Posts one gradient computed at the server's current model with a seeded RNG; returns its
/// wire bytes.
fn contribute(client: &Client, config: &CollectionConfig, row: &[Value], device: &str, seed: u64) -> Vec<u8> {
    let model = client.model(&config.id).unwrap();
    let report = randomize_gradient(config, &model, row, &mut fast_rng(seed)).unwrap();
    let bytes = harmony_core::wire::encode(&report);
    let post = GradientPost { device_id: device.into(), round: model.round, report: to_hex(&bytes) };
    let ack = client.post_gradient(&config.id, &post).unwrap();
    assert_eq!(ack.round, model.round);
    bytes
}

/// The parameters after replaying `reports` in order, `g` per round.
fn replay(config: &CollectionConfig, reports: &[Vec<u8>]) -> (u64, Vec<f64>, Vec<f64>) {
    let t = config.train.as_ref().unwrap();
    let mech = RemoteMechanism::new(&t.spec.mechanism, config.strategy.epsilon, t.dimension).unwrap();
    let g = t.spec.batch_size as usize;
    let mut w = vec![0.0; t.dimension];
    let mut round = 1;
    let mut acc = vec![0.0; t.dimension];
    for chunk in reports.chunks(g) {
        acc.fill(0.0);
        for b in chunk {
            mech.add(&harmony_core::wire::decode::<GradientReport>(b).unwrap(), &mut acc);
        }
        if chunk.len() == g {
            apply_update(&mut w, &acc, g, round, t.spec.learning_rate, t.spec.lambda);
            round += 1;
            acc.fill(0.0);
        }
    }
    (round, w, acc)
}

fn status(e: ClientError) -> (u16, String) {
    match e {
        ClientError::Rejected { status, field, .. } => (status, field),
        e => panic!("expected a rejection, got {e}"),
    }
}

#[test]
fn rounds_advance_and_match_an_in_process_replay() {
    let dir = tmp("e2e");
    rounds_advance_and_match_an_in_process_replay_on(&sqlite_url(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn postgres_rounds_advance_and_match_an_in_process_replay() {
    if let Some(url) = postgres_url("postgres_rounds_advance_and_match_an_in_process_replay") {
        rounds_advance_and_match_an_in_process_replay_on(&url);
    }
}

fn rounds_advance_and_match_an_in_process_replay_on(url: &str) {
    let server = start(url);
    let client = analyst(&server.url());
    let created = client.create_collection(&request(Some(spec(100, Some(8))))).unwrap();
    let config = client.config(&created.id).unwrap();
    assert_eq!(config.config_version, 2);
    let t = config.train.as_ref().unwrap();
    assert_eq!((t.dimension, t.features.len()), (3, 3));
    let data = rows(800, 3);
    let mut reports = Vec::new();
    for (i, row) in data.iter().enumerate() {
        reports.push(contribute(&client, &config, row, &format!("dev{i}"), 1000 + i as u64));
    }
    let m: ModelState = client.model(&config.id).unwrap();
    assert_eq!((m.round, m.received, m.done), (9, 0, true));
    let (round, w, _) = replay(&config, &reports);
    assert_eq!(m.round, round);
    assert_eq!(m.parameters, w, "server parameters equal the replay bit for bit");
    // Training is over: one more device gets a 409 on `round`.
    let model = client.model(&config.id).unwrap();
    let report = randomize_gradient(&config, &model, &data[0], &mut fast_rng(1)).unwrap();
    let post =
        GradientPost { device_id: "late".into(), round: 9, report: to_hex(&harmony_core::wire::encode(&report)) };
    assert_eq!(status(client.post_gradient(&config.id, &post).unwrap_err()), (409, "round".into()));
    // The model beats the majority class on the training rows.
    let fm = harmony_client::feature_map(&config.schema, &t.spec).unwrap();
    let (mut wrong, mut pos) = (0, 0);
    let mut x = vec![0.0; 3];
    for row in &data {
        fm.encode_row(row, &mut x);
        let y = fm.target(row);
        pos += usize::from(y > 0.0);
        let z: f64 = w.iter().zip(&x).map(|(a, b)| a * b).sum();
        wrong += usize::from((z > 0.0) != (y > 0.0));
    }
    let majority = pos.min(data.len() - pos);
    assert!(wrong < majority * 2 / 3, "{wrong} misclassified vs majority baseline {majority}");
    server.stop();
}

#[test]
fn a_device_contributes_once_and_stale_or_malformed_gradients_are_rejected() {
    let dir = tmp("once");
    a_device_contributes_once_and_stale_or_malformed_gradients_are_rejected_on(&sqlite_url(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn postgres_a_device_contributes_once_and_stale_or_malformed_gradients_are_rejected() {
    if let Some(url) = postgres_url("postgres_a_device_contributes_once_and_stale_or_malformed_gradients_are_rejected")
    {
        a_device_contributes_once_and_stale_or_malformed_gradients_are_rejected_on(&url);
    }
}

fn a_device_contributes_once_and_stale_or_malformed_gradients_are_rejected_on(url: &str) {
    let server = start(url);
    let client = analyst(&server.url());
    let config = client.create_collection(&request(Some(spec(3, None)))).unwrap().config;
    let data = rows(10, 5);
    // The SDK: a second contribution is refused by the ledger.
    let mut device = Device::new(MemoryLedger::default());
    let ack = device.contribute_gradient(&client, &config, &data[0]).unwrap();
    assert_eq!((ack.round, ack.advanced), (1, false));
    assert!(matches!(device.contribute_gradient(&client, &config, &data[1]), Err(ClientError::AlreadyReported(_))));
    // The server: the same device id again, even with a new report, is a 409 and nothing is stored.
    contribute(&client, &config, &data[1], "dev-a", 1);
    let before = client.model(&config.id).unwrap();
    assert_eq!(before.received, 2);
    let report = randomize_gradient(&config, &before, &data[2], &mut fast_rng(2)).unwrap();
    let hex = to_hex(&harmony_core::wire::encode(&report));
    let again = GradientPost { device_id: "dev-a".into(), round: 1, report: hex.clone() };
    assert_eq!(status(client.post_gradient(&config.id, &again).unwrap_err()), (409, "device_id".into()));
    assert_eq!(client.model(&config.id).unwrap(), before);
    // Fill the round; the round advances.
    contribute(&client, &config, &data[2], "dev-b", 3);
    let after = client.model(&config.id).unwrap();
    assert_eq!((after.round, after.received), (2, 0));
    assert_ne!(after.parameters, before.parameters);
    // A device of round 1 in ANY later round is still refused.
    let old = GradientPost { device_id: "dev-a".into(), round: 2, report: hex.clone() };
    assert_eq!(status(client.post_gradient(&config.id, &old).unwrap_err()), (409, "device_id".into()));
    // Its retry of the round-1 gradient after the round moved on: still `device_id` (stored).
    let retry = GradientPost { device_id: "dev-a".into(), round: 1, report: hex.clone() };
    assert_eq!(status(client.post_gradient(&config.id, &retry).unwrap_err()), (409, "device_id".into()));
    // A stale (or future) round: 409 on `round`, nothing stored.
    for round in [1, 3] {
        let stale = GradientPost { device_id: format!("dev-r{round}"), round, report: hex.clone() };
        assert_eq!(status(client.post_gradient(&config.id, &stale).unwrap_err()), (409, "round".into()));
    }
    // Malformed: 400 naming the field.
    let bad =
        |device_id: &str, report: &str| GradientPost { device_id: device_id.into(), round: 2, report: report.into() };
    assert_eq!(status(client.post_gradient(&config.id, &bad("dev-x", "zz")).unwrap_err()), (400, "report".into()));
    assert_eq!(status(client.post_gradient(&config.id, &bad("dev-x", "0101")).unwrap_err()).0, 400);
    assert_eq!(status(client.post_gradient(&config.id, &bad("a b", &hex)).unwrap_err()), (400, "device_id".into()));
    let mut wrong = report.clone();
    wrong.coords[0].0 = 7;
    let wrong = to_hex(&harmony_core::wire::encode(&wrong));
    let (s, f) = status(client.post_gradient(&config.id, &bad("dev-x", &wrong)).unwrap_err());
    assert_eq!(s, 400);
    assert!(f.starts_with("report"), "{f}");
    assert_eq!(client.model(&config.id).unwrap(), after);
    // Spec validation at creation names the field.
    let mut s = spec(3, None);
    s.mechanism = "laplace".into();
    assert_eq!(status(client.create_collection(&request(Some(s))).unwrap_err()), (400, "train.mechanism".into()));
    let mut s = spec(3, None);
    s.target = "nope".into();
    assert_eq!(status(client.create_collection(&request(Some(s))).unwrap_err()), (400, "train.target".into()));
    assert_eq!(
        status(client.create_collection(&request(Some(spec(0, None)))).unwrap_err()),
        (400, "train.batch_size".into())
    );
    assert_eq!(status(client.create_collection(&request(None)).unwrap_err()), (400, "train".into()));
    // Record reports to a training collection are refused (they would spend ε again).
    assert_eq!(status(client.submit(&config, vec![]).unwrap_err()), (409, "collection".into()));
    server.stop();
}

#[test]
fn a_restart_mid_round_rebuilds_the_same_state() {
    let dir = tmp("restart");
    a_restart_mid_round_rebuilds_the_same_state_on(&sqlite_url(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn postgres_a_restart_mid_round_rebuilds_the_same_state() {
    if let Some(url) = postgres_url("postgres_a_restart_mid_round_rebuilds_the_same_state") {
        a_restart_mid_round_rebuilds_the_same_state_on(&url);
    }
}

fn a_restart_mid_round_rebuilds_the_same_state_on(url: &str) {
    let server = start(url);
    let client = analyst(&server.url());
    let config = client.create_collection(&request(Some(spec(4, None)))).unwrap().config;
    let data = rows(12, 9);
    let mut reports = Vec::new();
    for (i, row) in data[..6].iter().enumerate() {
        reports.push(contribute(&client, &config, row, &format!("d{i}"), 50 + i as u64));
    }
    let before = client.model(&config.id).unwrap();
    assert_eq!((before.round, before.received), (2, 2));
    server.stop();
    let server = start(url);
    let client = analyst(&server.url());
    assert_eq!(client.model(&config.id).unwrap(), before);
    assert_eq!(client.config(&config.id).unwrap(), config);
    // Device d0 is still known after the restart.
    let post = GradientPost { device_id: "d0".into(), round: 2, report: to_hex(&reports[0]) };
    assert_eq!(status(client.post_gradient(&config.id, &post).unwrap_err()), (409, "device_id".into()));
    for (i, row) in data[6..].iter().enumerate() {
        reports.push(contribute(&client, &config, row, &format!("d{}", i + 6), 60 + i as u64));
    }
    let m = client.model(&config.id).unwrap();
    let (round, w, _) = replay(&config, &reports);
    assert_eq!((m.round, m.received), (round, 0));
    assert_eq!(m.parameters, w);
    server.stop();
}

#[test]
fn postgres_two_servers_sharing_a_database_keep_one_sequence_of_rounds() {
    let Some(url) = postgres_url("postgres_two_servers_sharing_a_database_keep_one_sequence_of_rounds") else {
        return;
    };
    let a = start(&url);
    let ca = analyst(&a.url());
    let config = ca.create_collection(&request(Some(spec(2, None)))).unwrap().config;
    // B loads the collection at round 1 with no gradient.
    let b = start(&url);
    let cb = analyst(&b.url());
    let data = rows(6, 11);
    let mut reports = vec![contribute(&ca, &config, &data[0], "s0", 70)];
    // B still believes round 1 is empty: its gradient is refused on `round` (nothing stored) and
    // B catches up with the stored round.
    let m = cb.model(&config.id).unwrap();
    assert_eq!((m.round, m.received), (1, 0));
    let report = harmony_core::wire::encode(&randomize_gradient(&config, &m, &data[1], &mut fast_rng(71)).unwrap());
    let post = GradientPost { device_id: "s1".into(), round: 1, report: to_hex(&report) };
    assert_eq!(status(cb.post_gradient(&config.id, &post).unwrap_err()), (409, "round".into()));
    assert_eq!(cb.model(&config.id).unwrap(), ca.model(&config.id).unwrap());
    // The retry through B completes round 1.
    let ack = cb.post_gradient(&config.id, &post).unwrap();
    assert_eq!((ack.round, ack.advanced), (1, true));
    reports.push(report);
    // A is behind (round 1); a device that fetched round 2 from B posts to A: A catches up first.
    let m = cb.model(&config.id).unwrap();
    assert_eq!((m.round, m.received), (2, 0));
    let report = harmony_core::wire::encode(&randomize_gradient(&config, &m, &data[2], &mut fast_rng(72)).unwrap());
    let post = GradientPost { device_id: "s2".into(), round: 2, report: to_hex(&report) };
    let ack = ca.post_gradient(&config.id, &post).unwrap();
    assert_eq!((ack.round, ack.advanced), (2, false));
    reports.push(report);
    // Now B is behind within round 2: refused on `round`, then accepted; the round advances.
    let m = cb.model(&config.id).unwrap();
    let report = harmony_core::wire::encode(&randomize_gradient(&config, &m, &data[3], &mut fast_rng(73)).unwrap());
    let post = GradientPost { device_id: "s3".into(), round: 2, report: to_hex(&report) };
    assert_eq!(status(cb.post_gradient(&config.id, &post).unwrap_err()), (409, "round".into()));
    let ack = cb.post_gradient(&config.id, &post).unwrap();
    assert_eq!((ack.round, ack.advanced), (2, true));
    reports.push(report);
    // Either server refuses a device stored through the other.
    let again = GradientPost { device_id: "s0".into(), round: 3, report: post.report.clone() };
    assert_eq!(status(ca.post_gradient(&config.id, &again).unwrap_err()), (409, "device_id".into()));
    assert_eq!(status(cb.post_gradient(&config.id, &again).unwrap_err()), (409, "device_id".into()));
    // One sequence of rounds: B and a freshly started server equal the replay bit for bit.
    let (round, w, _) = replay(&config, &reports);
    let m = cb.model(&config.id).unwrap();
    assert_eq!((m.round, m.received, &m.parameters), (round, 0, &w));
    a.stop();
    b.stop();
    let c = start(&url);
    let m = analyst(&c.url()).model(&config.id).unwrap();
    assert_eq!((m.round, m.received, m.parameters), (round, 0, w));
    c.stop();
}

#[test]
fn postgres_concurrent_gradients_through_two_servers_are_each_stored_once() {
    let Some(url) = postgres_url("postgres_concurrent_gradients_through_two_servers_are_each_stored_once") else {
        return;
    };
    let a = start(&url);
    let config = analyst(&a.url()).create_collection(&request(Some(spec(5, None)))).unwrap().config;
    let b = start(&url);
    let data = rows(40, 13);
    // Four devices at a time, alternating servers; each retries on a 409 `round` with a fresh model.
    let urls = [a.url(), b.url()];
    let refused = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..4usize {
            let (urls, config, data, refused) = (&urls, &config, &data, &refused);
            s.spawn(move || {
                for i in (t..data.len()).step_by(4) {
                    let client = analyst(&urls[i % 2]);
                    loop {
                        let m = client.model(&config.id).unwrap();
                        let r = randomize_gradient(config, &m, &data[i], &mut fast_rng(i as u64)).unwrap();
                        let post = GradientPost {
                            device_id: format!("c{i}"),
                            round: m.round,
                            report: to_hex(&harmony_core::wire::encode(&r)),
                        };
                        match client.post_gradient(&config.id, &post) {
                            Ok(_) => break,
                            Err(e) => {
                                assert_eq!(status(e), (409, "round".into()));
                                refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                }
            });
        }
    });
    eprintln!("{} posts refused on `round` and retried", refused.into_inner());
    a.stop();
    b.stop();
    // 40 gradients, 5 per round: a fresh server is at round 9 with an empty round.
    let c = start(&url);
    let m = analyst(&c.url()).model(&config.id).unwrap();
    assert_eq!((m.round, m.received), (9, 0));
    c.stop();
}
