//! Rounds survive SIGKILL: `harmony serve` on a SQLite file is killed with SIGKILL in the middle
//! of a round (a `train` collection, an `adaptive-rounds` linear-queries collection with a query
//! the analyst posted), restarted on the same file, and the round resumes with the same state:
//! the same round number, model or query, and every acknowledged gradient or answer counted
//! (equal, bit for bit, to the in-process state machine fed the acknowledged reports in order).

mod common;

use common::{BIN, free_port, wait_for_port};
use harmony_client::{Client, DeviceTask, RetryPolicy, SimulatedDevices};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::spec::{GradientMechanism, LinearMechanism, LinearQueriesSpec, Model, TaskSpec, TrainSpec};
use harmony_protocol::{AnswerPost, CollectionConfig, CreateCollection, GradientPost};
use harmony_tasks::linear_rounds::QueryRounds;
use harmony_tasks::train::TrainTask;
use harmony_tasks::{Input, Query, Task, TaskAggregator};
use serde_json::json;
use std::process::{Child, Command, Stdio};

/// `harmony serve` on the SQLite file `db`, on a fresh loopback port.
fn serve(db: &std::path::Path) -> (Child, Client) {
    let port = free_port();
    let child = Command::new(BIN)
        .args(["serve", "--db", &format!("sqlite://{}", db.display()), "--listen", &format!("127.0.0.1:{port}")])
        .args(["--analyst-token", "tok", "--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port);
    let client = Client::new(&format!("http://127.0.0.1:{port}"))
        .with_token("tok")
        .with_retry(RetryPolicy { attempts: 1, ..Default::default() });
    (child, client)
}

fn hex(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    harmony_protocol::from_hex_into(text, &mut out).unwrap();
    out
}

fn kill9(mut child: Child) {
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("harmony-rounds-kill-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn train_request() -> CreateCollection {
    let schema = Schema::new(vec![
        Attribute::Numeric { name: "x".into(), min: -1.0, max: 1.0 },
        Attribute::Categorical { name: "y".into(), categories: vec!["no".into(), "yes".into()] },
    ])
    .unwrap();
    let spec = TrainSpec {
        task: Model::Logistic,
        target: "y".into(),
        positive: None,
        threshold: None,
        mechanism: GradientMechanism::Hm,
        batch_size: 8,
        schedule: None,
        learning_rate: None,
        kappa: None,
        gradient_scale: None,
        lambda: 1e-4,
        rounds: Some(4),
        enrollment: Some(false), // open rounds: the devices post under their own ids
    };
    CreateCollection { schema: Some(schema), epsilon: 4.0, task: TaskSpec::Train(spec) }
}

/// Device `i` posts its seeded gradient at the server's current model; returns its wire bytes.
fn post_gradient(client: &Client, config: &CollectionConfig, i: u64) -> Vec<u8> {
    let model = client.model(&config.id).unwrap();
    let x = ((i * 37) % 20) as f64 / 10.0 - 1.0;
    let record = [Value::Unit(x), Value::Category(u32::from(x > 0.1))];
    let task = DeviceTask::new(config.clone()).unwrap();
    let input = Input::Gradient { record: &record, model: &model };
    let item = SimulatedDevices::new(11).item(&task, i, &input).unwrap();
    let post = GradientPost { device_id: item.id, round: model.round, report: item.report.clone() };
    let ack = client.post_gradient(&config.id, &post).unwrap();
    assert_eq!(ack.round, model.round);
    hex(&item.report)
}

#[test]
fn sigkill_mid_training_round_resumes_the_same_round() {
    let dir = tmp("train");
    let db = dir.join("db.sqlite");
    let (server, client) = serve(&db);
    let config = client.create_collection(&train_request()).unwrap().config;
    // Two full rounds and 5 of round 3's 8 gradients, each acknowledged.
    let mut acked: Vec<Vec<u8>> = (0..21).map(|i| post_gradient(&client, &config, i)).collect();
    let before = client.model(&config.id).unwrap();
    assert_eq!((before.round, before.received), (3, 5));
    kill9(server);

    let (server, client) = serve(&db);
    let after = client.model(&config.id).unwrap();
    assert_eq!(after, before, "the restarted server serves the same round, model and count");
    // The in-process state machine fed the acknowledged gradients in order: the same state.
    let task = TrainTask::new(config.clone()).unwrap();
    let replay = |reports: &[Vec<u8>]| {
        let mut agg = task.aggregator();
        reports.iter().for_each(|b| agg.add(b).unwrap());
        agg
    };
    let doc = client.estimates(&config.id, &Query::default()).unwrap();
    assert_eq!(doc.result, task.estimate(replay(&acked).as_ref(), &Query::default()).unwrap());
    // The round goes on from there: its 3 missing gradients close it.
    acked.extend((21..24).map(|i| post_gradient(&client, &config, i)));
    let next = client.model(&config.id).unwrap();
    assert_eq!((next.round, next.received), (4, 0));
    let doc = client.estimates(&config.id, &Query::default()).unwrap();
    assert_eq!(doc.result, task.estimate(replay(&acked).as_ref(), &Query::default()).unwrap());
    kill9(server);
    let _ = std::fs::remove_dir_all(dir);
}

fn adaptive_request() -> CreateCollection {
    let colors = ["red", "green", "blue", "black"].map(String::from).to_vec();
    let schema = Schema::new(vec![Attribute::Categorical { name: "color".into(), categories: colors }]).unwrap();
    let spec = LinearQueriesSpec {
        attributes: vec!["color".into()],
        bins: Default::default(),
        workload: json!({"queries": [{"name": "red", "range": [0, 0]}]}),
        mechanism: LinearMechanism::AdaptiveRounds,
        delta: None,
        hull: Default::default(),
        enrollment: Some(false), // open rounds: the devices post under their own ids
        batch_size: Some(10),
    };
    CreateCollection { schema: Some(schema), epsilon: 1.0, task: TaskSpec::LinearQueries(spec) }
}

/// Device `i` answers the current round; returns its wire bytes.
fn post_answer(client: &Client, config: &CollectionConfig, i: u64) -> Vec<u8> {
    let round = client.query_round(&config.id).unwrap();
    let record = [Value::Category((i % 4) as u32)];
    let task = DeviceTask::new(config.clone()).unwrap();
    let item = SimulatedDevices::new(5).item(&task, i, &Input::Answer { record: &record, round: &round }).unwrap();
    let ack = client.post_answer(&config.id, &AnswerPost { device_id: item.id, report: item.report.clone() }).unwrap();
    assert_eq!(ack.round, round.round);
    hex(&item.report)
}

#[test]
fn sigkill_mid_adaptive_round_resumes_the_same_round() {
    let dir = tmp("adaptive");
    let db = dir.join("db.sqlite");
    let (server, client) = serve(&db);
    let config = client.create_collection(&adaptive_request()).unwrap().config;
    let mut acked: Vec<Vec<u8>> = (0..10).map(|i| post_answer(&client, &config, i)).collect();
    let second = json!({"name": "green or blue", "range": [1, 2]});
    client.post_query(&config.id, &second).unwrap();
    acked.extend((10..14).map(|i| post_answer(&client, &config, i)));
    let (round, doc) =
        (client.query_round(&config.id).unwrap(), client.estimates(&config.id, &Query::default()).unwrap());
    assert_eq!((round.round, round.received, round.open), (2, 4, true));
    kill9(server);

    let (server, client) = serve(&db);
    assert_eq!(client.query_round(&config.id).unwrap(), round, "the same open round, query and count");
    let restarted = client.estimates(&config.id, &Query::default()).unwrap();
    assert_eq!(restarted.result, doc.result);
    // The rounds the task's own state machine builds from the acknowledged answers, in order.
    let task = harmony_tasks::build(&config).unwrap();
    let mut agg = task.aggregator();
    acked[..10].iter().for_each(|b| agg.add(b).unwrap());
    let mut rounds = agg.as_any().downcast_ref::<QueryRounds>().unwrap().clone();
    rounds.push(&second).unwrap();
    let mut agg: Box<dyn TaskAggregator> = Box::new(rounds);
    acked[10..].iter().for_each(|b| agg.add(b).unwrap());
    assert_eq!(restarted.result, task.estimate(agg.as_ref(), &Query::default()).unwrap());
    // The round goes on: its 6 missing answers fill it.
    (14..20).for_each(|i| {
        post_answer(&client, &config, i);
    });
    let now = client.query_round(&config.id).unwrap();
    assert_eq!((now.round, now.received, now.open), (2, 10, false));
    kill9(server);
    let _ = std::fs::remove_dir_all(dir);
}
