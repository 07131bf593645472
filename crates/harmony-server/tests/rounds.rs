//! Model rounds on loopback: a logistic training collection, one gradient per device, rounds
//! that advance when a batch is full, an in-process replay of the same reports, repeated devices,
//! stale rounds, malformed gradients and a restart mid-round. Each test runs on SQLite and, when
//! `HARMONY_TEST_POSTGRES` names a PostgreSQL database (see `tests/postgres.rs`), on PostgreSQL
//! too (skipped, passing, without it); PostgreSQL also gets two servers sharing one database.

use harmony_client::{Client, ClientError, Device, DeviceTask, MemoryLedger, RetryPolicy};
use harmony_core::sampling::{fast_rng, uniform01};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_learn::features::Dataset;
use harmony_learn::loss::Loss;
use harmony_learn::mechanism::GradientRandomizer;
use harmony_learn::remote::{GradientReport, RemoteMechanism};
use harmony_learn::trainer::{NOISE_KAPPA, TrainConfig, train};
use harmony_protocol::spec::{GradientMechanism, Model, Schedule, TaskSpec, TrainSpec};
use harmony_protocol::{
    CollectionConfig, CreateCollection, ErrorBody, GradientPost, ModelState, TrainPublished, to_hex,
};
use harmony_tasks::train::{TrainTask, feature_map, gradient_scale};
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

/// A `decay` spec (γ₀ = 2).
fn spec(batch_size: u64, rounds: Option<u64>) -> TrainSpec {
    TrainSpec {
        task: Model::Logistic,
        target: "label".into(),
        positive: None,
        threshold: None,
        mechanism: GradientMechanism::Hm,
        batch_size,
        schedule: Some(Schedule::Decay),
        learning_rate: Some(2.0),
        kappa: None,
        gradient_scale: None,
        lambda: 1e-4,
        rounds,
        enrollment: Some(false), // open rounds: the devices here post under invented ids
    }
}

/// A spec with the default (`noise`) schedule and its defaults: T rounds of g devices.
fn noise_spec(batch_size: u64, rounds: u64) -> TrainSpec {
    TrainSpec { schedule: None, learning_rate: None, rounds: Some(rounds), ..spec(batch_size, None) }
}

fn request(train: TrainSpec) -> CreateCollection {
    CreateCollection { schema: Some(schema()), epsilon: 8.0, task: TaskSpec::Train(train) }
}

/// The training spec a config publishes.
fn train_spec(config: &CollectionConfig) -> &TrainSpec {
    match &config.task {
        TaskSpec::Train(s) => s,
        other => panic!("collection {} runs {other:?}, expected train", config.id),
    }
}

/// A device's randomized gradient at `model` for `row`, drawn from `fast_rng(seed)`, by the
/// collection's task built from its config (as every device builds it).
fn gradient(config: &CollectionConfig, model: &ModelState, row: &[Value], seed: u64) -> GradientReport {
    TrainTask::new(config.clone()).unwrap().gradient(model, row, &mut fast_rng(seed)).unwrap()
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
    let bytes = harmony_core::wire::encode(&gradient(config, &model, row, seed));
    let post = GradientPost { device_id: device.into(), round: model.round, report: to_hex(&bytes) };
    let ack = client.post_gradient(&config.id, &post).unwrap();
    assert_eq!(ack.round, model.round);
    bytes
}

/// The parameters after replaying the reports of a `decay` collection in order, `g` per round,
/// with the update written out as it was before schedules existed: w ← w − γ₀/√t·(ḡ + λw).
fn replay(config: &CollectionConfig, reports: &[Vec<u8>]) -> (u64, Vec<f64>, Vec<f64>) {
    let (spec, d) = (train_spec(config), config.train.as_ref().unwrap().dimension);
    assert!(!spec.is_noise() && gradient_scale(spec) == 1.0);
    let mech = RemoteMechanism::new(spec.mechanism.name(), config.epsilon, d).unwrap();
    let g = spec.batch_size as usize;
    let mut w = vec![0.0; d];
    let mut round = 1;
    let mut acc = vec![0.0; d];
    for chunk in reports.chunks(g) {
        acc.fill(0.0);
        for b in chunk {
            mech.add(&harmony_core::wire::decode::<GradientReport>(b).unwrap(), &mut acc);
        }
        if chunk.len() == g {
            let gamma = spec.learning_rate.unwrap() / (round as f64).sqrt();
            for (wj, &aj) in w.iter_mut().zip(&acc) {
                *wj -= gamma * (aj / g as f64 + spec.lambda * *wj);
            }
            round += 1;
            acc.fill(0.0);
        }
    }
    (round, w, acc)
}

/// Device i of a trainer run: the trainer's clipped, scaled gradient randomized with the seed
/// device i used must give exactly device i's report (so the trainer's w_t, the device's c and
/// its clipping equal the server's); then the report is decoded into the accumulator.
struct SeededDevices {
    mech: RemoteMechanism,
    seeds: Vec<u64>,
    reports: Vec<Vec<u8>>,
    next: usize,
}

impl GradientRandomizer for SeededDevices {
    fn name(&self) -> &'static str {
        "seeded-devices"
    }
    fn dimension(&self) -> usize {
        self.mech.dimension()
    }
    fn variance(&self) -> f64 {
        self.mech.variance()
    }
    fn randomize_add<R: rand::Rng + ?Sized>(&mut self, g: &[f64], _rng: &mut R, acc: &mut [f64]) {
        let i = self.next;
        self.next += 1;
        let r = self.mech.randomize(g, &mut fast_rng(self.seeds[i]));
        assert_eq!(harmony_core::wire::encode(&r), self.reports[i], "device {i}: the trainer's report differs");
        self.mech.add(&r, acc);
    }
}

/// `harmony_learn::trainer::train` with `TrainConfig::noise` (batch g, the spec's κ, c and λ,
/// R² = the features' max ‖x‖₁) on `data`'s rows in device order, replaying the devices' seeds.
fn trainer_model(
    config: &CollectionConfig,
    data: &[Vec<Value>],
    seeds: &[u64],
    reports: &[Vec<u8>],
) -> harmony_learn::trainer::Model {
    let spec = train_spec(config);
    let fm = feature_map(config.schema().unwrap(), spec).unwrap();
    let d = fm.dimension();
    let mut x = vec![0.0; data.len() * d];
    for (row, xi) in data.iter().zip(x.chunks_mut(d)) {
        fm.encode_row(row, xi);
    }
    let y = data.iter().map(|r| fm.target(r)).collect();
    let dataset = Dataset::new(x, y, d).unwrap();
    let users: Vec<u32> = (0..data.len() as u32).collect();
    let mut cfg = TrainConfig::noise(Loss::for_task(fm.task()), fm.max_l1());
    cfg.schedule = harmony_learn::trainer::Schedule::Noise(spec.kappa.unwrap());
    cfg.gradient_scale = spec.gradient_scale.unwrap();
    cfg.lambda = spec.lambda;
    cfg.batch_size = Some(spec.batch_size as usize);
    let mech = RemoteMechanism::new(spec.mechanism.name(), config.epsilon, d).unwrap();
    let mut devices = SeededDevices { mech, seeds: seeds.to_vec(), reports: reports.to_vec(), next: 0 };
    let eps = Some(config.epsilon);
    let m = train(&dataset, &users, &mut devices, eps, &cfg, &mut fast_rng(0)).unwrap();
    assert_eq!(devices.next, data.len(), "every device replayed");
    m
}

fn assert_close(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (u, v) in a.iter().zip(b) {
        assert!((u - v).abs() <= 1e-12, "{what}: {a:?} vs {b:?}");
    }
}

/// Posts a raw JSON collection request (one the typed request cannot express); returns the
/// status and the error's field and message.
fn create_raw(url: &str, body: &serde_json::Value) -> (u16, String, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut resp = agent
        .post(&format!("{url}/v1/collections"))
        .header("authorization", &format!("Bearer {TOKEN}"))
        .content_type("application/json")
        .send(body.to_string().as_bytes())
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap();
    let e: ErrorBody = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{status}: not a JSON error: {text}"));
    (status, e.error.field, e.error.message)
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
    let created = client.create_collection(&request(spec(100, Some(8)))).unwrap();
    let config = client.config(&created.id).unwrap();
    assert_eq!(config.config_version, harmony_protocol::CONFIG_VERSION);
    // A `decay` spec is published as given (no noise step, κ or c written in).
    assert_eq!(train_spec(&config), &spec(100, Some(8)));
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
    let report = gradient(&config, &model, &data[0], 1);
    let post =
        GradientPost { device_id: "late".into(), round: 9, report: to_hex(&harmony_core::wire::encode(&report)) };
    assert_eq!(status(client.post_gradient(&config.id, &post).unwrap_err()), (409, "round".into()));
    // The model beats the majority class on the training rows.
    let (wrong, majority) = misclassified(&config, &data, &w);
    assert!(wrong < majority * 2 / 3, "{wrong} misclassified vs majority baseline {majority}");
    server.stop();
}

/// Rows of `data` the linear model `w` misclassifies, and the majority-class baseline's count.
fn misclassified(config: &CollectionConfig, data: &[Vec<Value>], w: &[f64]) -> (usize, usize) {
    let fm = feature_map(config.schema().unwrap(), train_spec(config)).unwrap();
    let (mut wrong, mut pos) = (0, 0);
    let mut x = vec![0.0; fm.dimension()];
    for row in data {
        fm.encode_row(row, &mut x);
        let y = fm.target(row);
        pos += usize::from(y > 0.0);
        let z: f64 = w.iter().zip(&x).map(|(a, b)| a * b).sum();
        wrong += usize::from((z > 0.0) != (y > 0.0));
    }
    (wrong, pos.min(data.len() - pos))
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
    let config = client.create_collection(&request(spec(3, None))).unwrap().config;
    let data = rows(10, 5);
    // The SDK: a second contribution is refused by the ledger.
    let task = DeviceTask::new(config.clone()).unwrap();
    let mut device = Device::new(MemoryLedger::default());
    let ack = device.contribute_gradient(&client, &task, &data[0]).unwrap();
    assert_eq!((ack.round, ack.advanced), (1, false));
    assert!(matches!(device.contribute_gradient(&client, &task, &data[1]), Err(ClientError::AlreadyReported(_))));
    // The server: the same device id again, even with a new report, is a 409 and nothing is stored.
    contribute(&client, &config, &data[1], "dev-a", 1);
    let before = client.model(&config.id).unwrap();
    assert_eq!(before.received, 2);
    let report = gradient(&config, &before, &data[2], 2);
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
    // Spec validation at creation names the field. An unknown mechanism or a train task without
    // its spec does not parse (the typed request cannot express them: posted as raw JSON).
    let mut s = serde_json::to_value(request(spec(3, None))).unwrap();
    s["task"]["mechanism"] = "laplace".into();
    let (code, field, message) = create_raw(&server.url(), &s);
    assert_eq!((code, field.as_str()), (400, "task"), "{message}");
    assert!(message.contains("laplace") && message.contains("hm") && message.contains("pm"), "{message}");
    let mut s = spec(3, None);
    s.target = "nope".into();
    assert_eq!(status(client.create_collection(&request(s)).unwrap_err()), (400, "task.target".into()));
    assert_eq!(status(client.create_collection(&request(spec(0, None))).unwrap_err()), (400, "task.batch_size".into()));
    let mut s = serde_json::to_value(request(spec(3, None))).unwrap();
    s["task"] = serde_json::json!({"kind": "train"});
    let (code, field, message) = create_raw(&server.url(), &s);
    assert_eq!((code, field.as_str()), (400, "task"), "{message}");
    assert!(message.contains("missing field"), "{message}");
    // A training task needs a schema (its features and target).
    let no_schema = CreateCollection { schema: None, ..request(spec(3, None)) };
    assert_eq!(status(client.create_collection(&no_schema).unwrap_err()), (400, "schema".into()));
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
    let config = client.create_collection(&request(spec(4, None))).unwrap().config;
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
    let config = ca.create_collection(&request(spec(2, None))).unwrap().config;
    // B loads the collection at round 1 with no gradient.
    let b = start(&url);
    let cb = analyst(&b.url());
    let data = rows(6, 11);
    let mut reports = vec![contribute(&ca, &config, &data[0], "s0", 70)];
    // B still believes round 1 is empty: its gradient is refused on `round` (nothing stored) and
    // B catches up with the stored round.
    let m = cb.model(&config.id).unwrap();
    assert_eq!((m.round, m.received), (1, 0));
    let report = harmony_core::wire::encode(&gradient(&config, &m, &data[1], 71));
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
    let report = harmony_core::wire::encode(&gradient(&config, &m, &data[2], 72));
    let post = GradientPost { device_id: "s2".into(), round: 2, report: to_hex(&report) };
    let ack = ca.post_gradient(&config.id, &post).unwrap();
    assert_eq!((ack.round, ack.advanced), (2, false));
    reports.push(report);
    // Now B is behind within round 2: refused on `round`, then accepted; the round advances.
    let m = cb.model(&config.id).unwrap();
    let report = harmony_core::wire::encode(&gradient(&config, &m, &data[3], 73));
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
    let config = analyst(&a.url()).create_collection(&request(spec(5, None))).unwrap().config;
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
                        let r = gradient(config, &m, &data[i], i as u64);
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

/// Posts one gradient per row (device i uses seed `seed0 + i`); returns the seeds and reports.
fn contribute_all(
    client: &Client,
    config: &CollectionConfig,
    data: &[Vec<Value>],
    seed0: u64,
) -> (Vec<u64>, Vec<Vec<u8>>) {
    let seeds: Vec<u64> = (0..data.len() as u64).map(|i| seed0 + i).collect();
    let reports = data
        .iter()
        .zip(&seeds)
        .map(|(row, &seed)| contribute(client, config, row, &format!("n{seed}"), seed))
        .collect();
    (seeds, reports)
}

#[test]
fn noise_rounds_equal_the_trainer() {
    let dir = tmp("noise");
    noise_rounds_equal_the_trainer_on(&sqlite_url(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn postgres_noise_rounds_equal_the_trainer() {
    if let Some(url) = postgres_url("postgres_noise_rounds_equal_the_trainer") {
        noise_rounds_equal_the_trainer_on(&url);
    }
}

/// The default schedule is `noise`; its published κ, c, γ; the tail average in `GET …/model`;
/// the final model equals `harmony_learn::trainer::train` on the same devices to 1e-12. At ε = 8
/// the step is the noiseless cap 1/(βR²) and the model beats the majority class; at ε = 0.5 it
/// is κ/(σ_b√T)/(βR²), below the cap.
fn noise_rounds_equal_the_trainer_on(url: &str) {
    let server = start(url);
    let client = analyst(&server.url());
    for (epsilon, g, rounds) in [(8.0, 25u64, 8u64), (0.5, 10, 20)] {
        let req = CreateCollection { epsilon, ..request(noise_spec(g, rounds)) };
        let config = client.create_collection(&req).unwrap().config;
        // The server writes the default schedule and its κ and c into the published spec.
        let spec = train_spec(&config);
        assert_eq!(spec.schedule, Some(Schedule::Noise));
        assert_eq!((spec.kappa, spec.gradient_scale, spec.learning_rate), (Some(NOISE_KAPPA), Some(2.0), None));
        let step = config.train.as_ref().unwrap().step.expect("a noise collection publishes its step");
        // Logistic (β = ¼) on an intercept and two numeric features (R² = 3).
        let cap = 1.0 / (0.25 * 3.0);
        assert!(if epsilon > 1.0 { step == cap } else { step > 0.0 && step < 0.9 * cap }, "ε = {epsilon}: γ = {step}");
        let m = client.model(&config.id).unwrap();
        assert_eq!((m.schedule, m.step, m.averaged), (Schedule::Noise, step, 0));
        assert_eq!(m.model, m.parameters);
        let n = (g * rounds) as usize;
        let data = rows(n, 21);
        // The first half: the model is the last iterate.
        let (half, g) = (n / 2, g as usize);
        let (mut seeds, mut reports) = contribute_all(&client, &config, &data[..half], 3000);
        let m = client.model(&config.id).unwrap();
        assert_eq!((m.round, m.averaged), (rounds / 2 + 1, 0));
        assert_eq!(m.model, m.parameters);
        // Round T/2 + 1 is the first averaged one.
        let (s, r) = contribute_all(&client, &config, &data[half..half + g], 3000 + half as u64);
        seeds.extend(s);
        reports.extend(r);
        let m = client.model(&config.id).unwrap();
        assert_eq!((m.round, m.averaged), (rounds / 2 + 2, 1));
        assert_eq!(m.model, m.parameters);
        let (s, r) = contribute_all(&client, &config, &data[half + g..], 3000 + (half + g) as u64);
        seeds.extend(s);
        reports.extend(r);
        let m = client.model(&config.id).unwrap();
        assert_eq!((m.round, m.received, m.done, m.averaged), (rounds + 1, 0, true, rounds - rounds / 2));
        assert_ne!(m.model, m.parameters, "the model is the tail average, not the last iterate");
        let want = trainer_model(&config, &data, &seeds, &reports);
        assert_eq!(want.batches as u64, rounds);
        assert!((want.step - step).abs() <= 1e-12 * step, "trainer step {} vs server {step}", want.step);
        assert_close(&m.model, &want.w, "server model vs trainer");
        if epsilon > 1.0 {
            let (wrong, majority) = misclassified(&config, &data, &m.model);
            assert!(wrong < majority * 2 / 3, "{wrong} misclassified vs majority baseline {majority}");
        }
    }
    server.stop();
}

#[test]
fn a_restart_rebuilds_the_averaged_model() {
    let dir = tmp("noise-restart");
    a_restart_rebuilds_the_averaged_model_on(&sqlite_url(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn postgres_a_restart_rebuilds_the_averaged_model() {
    if let Some(url) = postgres_url("postgres_a_restart_rebuilds_the_averaged_model") {
        a_restart_rebuilds_the_averaged_model_on(&url);
    }
}

fn a_restart_rebuilds_the_averaged_model_on(url: &str) {
    let server = start(url);
    let client = analyst(&server.url());
    let config = client.create_collection(&request(noise_spec(2, 6))).unwrap().config;
    let data = rows(12, 23);
    // 11 devices: rounds 1..=5 done (4 and 5 averaged), one gradient of round 6.
    let (mut seeds, mut reports) = contribute_all(&client, &config, &data[..11], 4000);
    let before = client.model(&config.id).unwrap();
    assert_eq!((before.round, before.received, before.averaged), (6, 1, 2));
    server.stop();
    let server = start(url);
    let client = analyst(&server.url());
    assert_eq!(client.config(&config.id).unwrap(), config);
    assert_eq!(client.model(&config.id).unwrap(), before, "the same round, iterate, tail sum and accumulator");
    let (s, r) = contribute_all(&client, &config, &data[11..], 4011);
    seeds.extend(s);
    reports.extend(r);
    let m = client.model(&config.id).unwrap();
    assert_eq!((m.round, m.done, m.averaged), (7, true, 3));
    assert_close(&m.model, &trainer_model(&config, &data, &seeds, &reports).w, "after a restart");
    server.stop();
}

/// A collection stored before schedules existed (no `schedule`, `gradient_scale` or `step`) loads,
/// publishes the same config and trains with γ₀/√t, c = 1 and the last iterate, bit for bit.
#[test]
fn a_decay_collection_stored_before_schedules_is_unchanged() {
    let dir = tmp("old-decay");
    let url = sqlite_url(&dir);
    let fm = feature_map(&schema(), &spec(4, None)).unwrap();
    let k = RemoteMechanism::new("hm", 8.0, fm.dimension()).unwrap().sampled();
    let strategy =
        harmony_core::strategy::StrategyOptions::default_for(harmony_core::strategy::StrategyKind::Harmony, 8.0);
    let old = serde_json::json!({
        "id": "old0", "config_version": 2, "wire_version": harmony_core::wire::WIRE_VERSION,
        "schema": schema(), "strategy": strategy, "tasks": ["train"],
        "train": {"spec": {"task": "logistic", "target": "label", "mechanism": "hm", "batch_size": 4,
                           "learning_rate": 2.0, "lambda": 0.0001, "rounds": 3},
                  "dimension": fm.dimension(), "features": fm.names(), "sampled": k}
    });
    harmony_server::open_store(&url).unwrap().create_collection("old0", &old.to_string()).unwrap();
    let server = start(&url);
    let client = analyst(&server.url());
    let config = client.config("old0").unwrap();
    // Published in the current format (version 2 kept): the same spec, with no schedule, scale,
    // step or enrollment written in (stored without enrollment: its rounds stay open).
    let want = CollectionConfig {
        id: "old0".into(),
        config_version: 2,
        wire_version: harmony_core::wire::WIRE_VERSION,
        schema: Some(schema()),
        epsilon: 8.0,
        task: TaskSpec::Train(TrainSpec { schedule: None, rounds: Some(3), enrollment: None, ..spec(4, None) }),
        train: Some(TrainPublished {
            dimension: fm.dimension(),
            features: fm.names().to_vec(),
            sampled: k,
            step: None,
        }),
        recurring: None,
    };
    assert_eq!(config, want, "the published config is the stored one");
    let published = serde_json::to_value(&config).unwrap();
    for field in ["schedule", "gradient_scale", "kappa", "enrollment"] {
        assert!(published["task"].get(field).is_none(), "{field} written into {published}");
    }
    assert!(published["train"].get("step").is_none(), "{published}");
    let data = rows(12, 29);
    let reports: Vec<Vec<u8>> = data
        .iter()
        .enumerate()
        .map(|(i, row)| contribute(&client, &config, row, &format!("o{i}"), 500 + i as u64))
        .collect();
    let m = client.model("old0").unwrap();
    let (round, w, _) = replay(&config, &reports);
    assert_eq!((m.round, m.done, m.schedule, m.averaged), (round, true, Schedule::Decay, 0));
    assert_eq!(m.parameters, w, "bit for bit the old update");
    assert_eq!((m.model, m.step), (w, 2.0 / 4f64.sqrt()));
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_schedule_specs_are_rejected_naming_the_field() {
    let dir = tmp("bad-spec");
    let server = start(&sqlite_url(&dir));
    let client = analyst(&server.url());
    let reject = |s: TrainSpec| match client.create_collection(&request(s)).unwrap_err() {
        ClientError::Rejected { status: 400, field, message, .. } => (field, message),
        e => panic!("expected a 400, got {e}"),
    };
    // An unknown schedule does not parse (the typed spec cannot express it: raw JSON).
    let mut raw = serde_json::to_value(request(noise_spec(5, 4))).unwrap();
    raw["task"]["schedule"] = "fast".into();
    let (code, field, message) = create_raw(&server.url(), &raw);
    assert_eq!((code, field.as_str()), (400, "task"), "{message}");
    for w in ["fast", "noise", "decay"] {
        assert!(message.contains(w), "{message:?} lacks {w:?}");
    }
    let cases: Vec<(TrainSpec, &str, &[&str])> = vec![
        (TrainSpec { rounds: None, ..noise_spec(5, 4) }, "task.rounds", &["missing", ">= 1"]),
        (noise_spec(5, 0), "task.rounds", &["rounds is 0", ">= 1"]),
        (TrainSpec { kappa: Some(-1.0), ..noise_spec(5, 4) }, "task.kappa", &["kappa is -1", "> 0"]),
        (TrainSpec { gradient_scale: Some(0.5), ..noise_spec(5, 4) }, "task.gradient_scale", &["0.5", ">= 1"]),
        (
            TrainSpec { learning_rate: Some(1.0), ..noise_spec(5, 4) },
            "task.learning_rate",
            &["learning_rate is 1", "noise"],
        ),
        (TrainSpec { learning_rate: None, ..spec(5, None) }, "task.learning_rate", &["missing", "> 0"]),
        (TrainSpec { learning_rate: Some(0.0), ..spec(5, None) }, "task.learning_rate", &["learning_rate is 0", "> 0"]),
        (TrainSpec { kappa: Some(2.0), ..spec(5, None) }, "task.kappa", &["kappa is 2", "decay"]),
        (
            TrainSpec { gradient_scale: Some(0.0), ..spec(5, None) },
            "task.gradient_scale",
            &["gradient_scale is 0", ">= 1"],
        ),
    ];
    for (s, field, words) in cases {
        let (f, message) = reject(s.clone());
        assert_eq!(f, field, "{s:?}: {message}");
        for w in words {
            assert!(message.contains(w), "{field}: {message:?} lacks {w:?}");
        }
    }
    // A decay collection with c = 2: devices scale, the server divides (accepted, published).
    let s = TrainSpec { gradient_scale: Some(2.0), ..spec(5, None) };
    let config = client.create_collection(&request(s)).unwrap().config;
    let spec = train_spec(&config);
    assert_eq!(
        (spec.schedule, gradient_scale(spec), config.train.as_ref().unwrap().step),
        (Some(Schedule::Decay), 2.0, None)
    );
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
