//! Adaptive linear queries in rounds on loopback (`linear-queries`, `mechanism:
//! "adaptive-rounds"`): an adaptive median search over Adult's ages whose second query depends on
//! the first answer, seeded devices through the client SDK equal to `harmony simulate`'s
//! in-process rounds bit for bit, a restart mid-round, the 409s of the round rule, and real
//! devices (OS CSPRNG, ledger). SQLite, and PostgreSQL when `HARMONY_TEST_POSTGRES` names a
//! database (skipped, passing, without it).

mod common;

use harmony_client::{Client, ClientError, Device, DeviceTask, MemoryLedger, RetryPolicy, SimulatedDevices};
use harmony_core::sampling::{fast_rng, uniform_below};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::spec::{LinearMechanism, LinearQueriesSpec, TaskSpec};
use harmony_protocol::{AnswerPost, CollectionConfig, CreateCollection, EstimateDocument, TaskEstimate};
use harmony_tasks::{Input, Query};
use serde_json::{Value as Json, json};

const TOKEN: &str = "test-token";
/// Devices per round and ε: SE ≈ C/√g = 1.31/31.6 ≈ 0.041 per answer.
const BATCH: u64 = 1000;
const EPSILON: f64 = 2.0;
/// The seed of the simulated devices.
const SEED: u64 = 42;

fn start(url: &str) -> harmony_server::Running {
    harmony_server::spawn(harmony_server::open_store(url).unwrap(), TOKEN, "127.0.0.1:0", 2).unwrap()
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("harmony-qrounds-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn analyst(url: &str) -> Client {
    Client::new(url).with_token(TOKEN).with_retry(RetryPolicy { attempts: 1, ..Default::default() })
}

/// Adult's ages (17..=90) as one categorical attribute, in a seeded random order (which devices
/// arrive in a round must not depend on their values: the order is a uniform permutation).
fn adult_ages() -> (Schema, Vec<Vec<Value>>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut rows: Vec<Vec<Value>> = text
        .lines()
        .skip(1)
        .map(|l| {
            let age: u32 = l.split(',').next().unwrap().parse().unwrap();
            vec![Value::Category(age - 17)]
        })
        .collect();
    let mut rng = fast_rng(7);
    for i in (1..rows.len()).rev() {
        rows.swap(i, uniform_below(&mut rng, i as u64 + 1) as usize);
    }
    let ages = (17..=90).map(|a| a.to_string()).collect();
    (Schema::new(vec![Attribute::Categorical { name: "age".into(), categories: ages }]).unwrap(), rows)
}

/// "age <= a" as a query (category indices 0..=a − 17).
fn at_most(a: u32) -> Json {
    json!({"name": format!("age <= {a}"), "range": [0, a - 17]})
}

fn request(schema: &Schema, queries: Vec<Json>) -> CreateCollection {
    let spec = LinearQueriesSpec {
        attributes: vec!["age".into()],
        bins: Default::default(),
        workload: json!({ "queries": queries }),
        mechanism: LinearMechanism::AdaptiveRounds,
        delta: None,
        hull: Default::default(),
        enrollment: Some(false), // open rounds: these devices post under invented ids
        batch_size: Some(BATCH),
    };
    CreateCollection { schema: Some(schema.clone()), epsilon: EPSILON, task: TaskSpec::LinearQueries(spec) }
}

fn linear(doc: &EstimateDocument) -> &harmony_protocol::estimates::LinearEstimate {
    match &doc.result {
        TaskEstimate::LinearQueries(l) => l,
        other => panic!("{other:?}"),
    }
}

/// Seeded devices `range` answer the current round through the client SDK (device i: the
/// simulated device i of [`SEED`], as `harmony simulate` draws it).
fn answer(client: &Client, config: &CollectionConfig, rows: &[Vec<Value>], range: std::ops::Range<usize>) {
    let task = DeviceTask::new(config.clone()).unwrap();
    let mut sim = SimulatedDevices::new(SEED);
    let round = client.query_round(&config.id).unwrap();
    for i in range {
        let item = sim.item(&task, i as u64, &Input::Answer { record: &rows[i], round: &round }).unwrap();
        let ack = client.post_answer(&config.id, &AnswerPost { device_id: item.id, report: item.report }).unwrap();
        assert_eq!(ack.round, round.round);
    }
}

fn status(e: ClientError) -> (u16, String) {
    match e {
        ClientError::Rejected { status, field, .. } => (status, field),
        other => panic!("{other}"),
    }
}

#[test]
fn adaptive_median_search_on_adult() {
    let dir = tmp("sqlite");
    adaptive_median_search_on(&format!("sqlite://{}", dir.join("db.sqlite").display()));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn postgres_adaptive_median_search_on_adult() {
    match std::env::var("HARMONY_TEST_POSTGRES") {
        Ok(url) => adaptive_median_search_on(&url),
        Err(_) => eprintln!("HARMONY_TEST_POSTGRES not set: PostgreSQL test skipped"),
    }
}

/// Query 1 = share of age ≤ 40; query 2 = share ≤ 30 if that answer is above 1/2, else ≤ 50.
/// Every answer within z = 4.42 standard errors of the truth (false-failure rate 1e-5 each);
/// the rounds survive a restart mid-round; the served document equals `harmony simulate`'s
/// (the task's in-process rounds for the same two queries and seed) bit for bit.
fn adaptive_median_search_on(url: &str) {
    let (schema, rows) = adult_ages();
    let g = BATCH as usize;
    let mut running = start(url);
    let base = format!("http://{}", running.addr);
    let client = analyst(&base);
    let config = client.create_collection(&request(&schema, vec![at_most(40)])).unwrap().config;
    let id = config.id.clone();

    // Round 1 is open: no next query yet.
    assert_eq!(status(client.post_query(&id, &at_most(30)).unwrap_err()), (409, "round".into()));
    answer(&client, &config, &rows, 0..g);
    let round = client.query_round(&id).unwrap();
    assert_eq!((round.round, round.received, round.open), (1, BATCH, false));
    // A full round takes no answer (409 naming `round`).
    let extra = DeviceTask::new(config.clone()).unwrap();
    let item = SimulatedDevices::new(1).item(&extra, 0, &Input::Answer { record: &rows[g], round: &round }).unwrap();
    let e = client.post_answer(&id, &AnswerPost { device_id: item.id, report: item.report }).unwrap_err();
    assert_eq!(status(e), (409, "round".into()));

    // The analyst reads answer 1 and chooses query 2.
    let first = linear(&client.estimates(&id, &Query::default()).unwrap()).queries[0].answer.estimate.unwrap();
    let second = if first > 0.5 { at_most(30) } else { at_most(50) };
    let opened = client.post_query(&id, &second).unwrap();
    assert_eq!((opened.round, opened.received, opened.open), (2, 0, true));

    // Half of round 2, a restart, the other half.
    answer(&client, &config, &rows, g..g + g / 2);
    let before = client.estimates(&id, &Query::default()).unwrap();
    running.stop();
    running = start(url);
    let client = analyst(&format!("http://{}", running.addr));
    assert_eq!(client.estimates(&id, &Query::default()).unwrap(), before, "the restart rebuilt the rounds");
    assert_eq!(client.query_round(&id).unwrap().received, BATCH / 2);
    answer(&client, &config, &rows, g + g / 2..2 * g);
    // An answer to the closed round 1 is a 409 naming `round`.
    let item =
        SimulatedDevices::new(2).item(&extra, 0, &Input::Answer { record: &rows[3 * g], round: &round }).unwrap();
    let e = client.post_answer(&id, &AnswerPost { device_id: item.id, report: item.report }).unwrap_err();
    assert_eq!(status(e), (409, "round".into()));

    let served = client.estimates(&id, &Query::default()).unwrap();
    let doc = linear(&served);
    assert_eq!(doc.group_reports, vec![BATCH, BATCH]);
    let thresholds = [40, if first > 0.5 { 30 } else { 50 }];
    for (q, a) in doc.queries.iter().zip(thresholds) {
        let truth = rows.iter().filter(|r| matches!(r[0], Value::Category(c) if c + 17 <= a)).count() as f64
            / rows.len() as f64;
        let (est, se) = (q.answer.estimate.unwrap(), q.answer.std_error.unwrap());
        assert!((est - truth).abs() <= 4.42 * se, "{}: {est} ± {se}, truth {truth}", q.name);
        eprintln!("{}: {est:.4} ± {se:.4} (truth {truth:.4})", q.name);
    }

    // `harmony simulate`'s path: the same task objects in process, both queries up front.
    let sim_config = harmony_tasks::resolve(&request(&schema, vec![at_most(40), second]), "sim").unwrap();
    let task = harmony_tasks::build(&sim_config).unwrap();
    let inputs: Vec<Input> = rows[..2 * g].iter().map(|r| Input::Record(r)).collect();
    let agg = task.simulate(&inputs, SEED, 0).unwrap();
    let TaskEstimate::LinearQueries(simulated) = task.estimate(agg.as_ref(), &Query::default()).unwrap() else {
        panic!()
    };
    assert_eq!(&simulated, doc, "simulate == serve, bit for bit");
    running.stop();
}

/// Real devices (OS CSPRNG, ledger): one answer per device and collection, a retry after an
/// acknowledgement is `AlreadyReported`, answers for another round and bad queries are refused
/// with the field named, the generic report endpoint is refused.
#[test]
fn device_flow_and_refusals() {
    let (schema, rows) = adult_ages();
    let server =
        common::TestServer::start("qrounds-devices", |s| harmony_server::spawn(s, TOKEN, "127.0.0.1:0", 2).unwrap());
    let base = format!("http://{}", server.addr());
    let client = analyst(&base);
    let mut req = request(&schema, vec![at_most(40), at_most(60)]);
    if let TaskSpec::LinearQueries(s) = &mut req.task {
        s.batch_size = Some(3);
    }
    let config = client.create_collection(&req).unwrap().config;
    let id = config.id.clone();
    let task = DeviceTask::new(config.clone()).unwrap();
    let mut devices: Vec<Device<MemoryLedger>> = (0..7).map(|_| Device::new(MemoryLedger::default())).collect();
    // Rounds 1 and 2 (given at creation) take 3 devices each; round 2 opens when round 1 fills.
    for (i, d) in devices.iter_mut().enumerate().take(6) {
        let ack = d.contribute_answer(&client, &task, &rows[i]).unwrap();
        assert_eq!((ack.round, ack.full), (1 + i as u64 / 3, i % 3 == 2));
    }
    assert!(matches!(devices[0].contribute_answer(&client, &task, &rows[0]), Err(ClientError::AlreadyReported(_))));
    let e = devices[6].contribute_answer(&client, &task, &rows[6]).unwrap_err();
    assert_eq!(status(e), (409, "round".into()));
    // Bad queries name `query`; a bad body names the field; the reports endpoint refuses.
    let e = client.post_query(&id, &json!({"range": [0, 99]})).unwrap_err();
    assert_eq!(status(e), (400, "query".into()));
    let (code, body) = common::raw(
        server.addr(),
        "POST",
        &format!("/v1/collections/{id}/answers"),
        b"{\"device_id\": \"a\", \"report\": \"zz\"}",
        None,
    );
    assert!(code == 400 && body.contains("\"report\""), "{code} {body}");
    let batch = format!(
        "{{\"collection\": \"{id}\", \"config_version\": {}, \"reports\": [{{\"id\": \"x\", \"report\": \"00\"}}]}}",
        config.config_version
    );
    let (code, body) =
        common::raw(server.addr(), "POST", &format!("/v1/collections/{id}/reports"), batch.as_bytes(), None);
    assert!(code == 409 && body.contains("answers"), "{code} {body}");
    let (code, _) = common::raw(server.addr(), "POST", &format!("/v1/collections/{id}/queries"), b"{}", None);
    assert_eq!(code, 401, "posting a query takes a token");
    let opened = client.post_query(&id, &json!({"in": ["30", "31"]})).unwrap();
    assert_eq!((opened.round, opened.open), (3, true));
    let doc = client.estimates(&id, &Query::default()).unwrap();
    assert_eq!(linear(&doc).group_reports, vec![3, 3, 0]);
    assert_eq!(linear(&doc).queries[2].answer.estimate, None, "no answer yet: no estimate");
}
