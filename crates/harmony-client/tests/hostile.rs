//! The device against a hostile server, on loopback: a fake server (a bare TCP listener in this
//! test) serves configs and models no honest server would, and the device refuses each with a
//! typed error naming the rule before any randomization (its ledger stays empty). Also the
//! policy's task/mechanism rules and the clamping of out-of-range values.

use harmony_client::{Client, ClientError, Device, DeviceTask, Input, Ledger, MemoryLedger, Policy, RetryPolicy};
use harmony_client::{SimulatedDevices, policy::DEFAULT_MAX_EPSILON};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::StrategyKind;
use harmony_protocol::spec::{FrequencySpec, GradientMechanism, MeansSpec, Model, TaskKind, TaskSpec, TrainSpec};
use harmony_protocol::{CollectionConfig, CreateCollection, ModelState};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

fn schema() -> Schema {
    Schema::new(vec![
        Attribute::Numeric { name: "x1".into(), min: -1.0, max: 1.0 },
        Attribute::Categorical { name: "label".into(), categories: vec!["no".into(), "yes".into()] },
    ])
    .unwrap()
}

fn config(id: &str, task: TaskSpec) -> CollectionConfig {
    let req = CreateCollection { schema: Some(schema()), epsilon: 2.0, task };
    harmony_tasks::resolve(&req, id).unwrap()
}

fn means(id: &str) -> CollectionConfig {
    config(id, TaskSpec::Means(MeansSpec { strategy: StrategyKind::Harmony, ..Default::default() }))
}

fn train(id: &str) -> CollectionConfig {
    config(
        id,
        TaskSpec::Train(TrainSpec {
            task: Model::Logistic,
            target: "label".into(),
            positive: None,
            threshold: None,
            mechanism: GradientMechanism::Hm,
            batch_size: 4,
            schedule: None,
            learning_rate: None,
            kappa: None,
            gradient_scale: None,
            lambda: 1e-4,
            rounds: Some(3),
            enrollment: None,
        }),
    )
}

/// A fake server on loopback answering every request with `body` (status 200), for `requests`
/// requests; returns its base URL.
fn hostile(body: String, requests: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
                line.clear();
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream.write_all(body.as_bytes()).unwrap();
        }
    });
    url
}

fn client(url: &str) -> Client {
    Client::new(url).with_retry(RetryPolicy { attempts: 1, ..Default::default() })
}

fn rule(e: &ClientError) -> &str {
    match e {
        ClientError::Policy { rule, .. } => rule,
        other => panic!("expected a policy refusal, got {other}"),
    }
}

#[test]
fn epsilon_700_is_refused_by_the_default_policy() {
    let mut c = means("c1");
    c.epsilon = 700.0;
    let url = hostile(serde_json::to_string(&c).unwrap(), 1);
    let fetched = client(&url).config("c1").unwrap();
    assert_eq!(fetched.epsilon, 700.0);
    let e = DeviceTask::new(fetched).unwrap_err();
    assert_eq!(rule(&e), "max_epsilon");
    let msg = e.to_string();
    assert!(msg.contains("700") && msg.contains(&DEFAULT_MAX_EPSILON.to_string()), "{msg}");
    // A stricter app policy refuses what the default allows.
    let e = DeviceTask::with_policy(means("c1"), Policy::with_max_epsilon(1.0).unwrap()).unwrap_err();
    assert_eq!(rule(&e), "max_epsilon");
    assert!(DeviceTask::with_policy(means("c1"), Policy::with_max_epsilon(2.0).unwrap()).is_ok());
    assert_eq!(rule(&Policy::with_max_epsilon(f64::NAN).unwrap_err()), "policy.max_epsilon");
}

#[test]
fn a_config_of_another_collection_is_refused() {
    let url = hostile(serde_json::to_string(&means("other")).unwrap(), 1);
    let e = client(&url).config("mine").unwrap_err();
    assert!(matches!(e, ClientError::Protocol { .. }) && e.to_string().contains("other"), "{e}");
}

#[test]
fn hostile_models_are_refused_before_randomization() {
    let task = DeviceTask::new(train("t1")).unwrap();
    let d = task.config().train.as_ref().unwrap().dimension;
    let record = [Value::Unit(0.5), Value::Category(1)];
    let model = |w: f64| ModelState {
        round: 1,
        parameters: vec![w; d],
        batch_size: 4,
        received: 0,
        done: false,
        schedule: harmony_protocol::spec::Schedule::Noise,
        step: 0.1,
        model: vec![0.0; d],
        averaged: 0,
    };
    // NaN cannot travel in JSON; a device holding one (or ±∞, or 1e300) still refuses it.
    let mut device = Device::new(MemoryLedger::default());
    for w in [f64::NAN, f64::INFINITY, 1e300] {
        let e = device.prepare_gradient(&task, &record, &model(w)).unwrap_err();
        assert!(matches!(&e, ClientError::Core(_)) && e.to_string().contains("parameters"), "{w}: {e}");
    }
    assert!(device.ledger().get("t1").is_none(), "nothing randomized, nothing recorded");
    // Over HTTP: a 1e300 model from the fake server.
    let url = hostile(serde_json::to_string(&model(1e300)).unwrap(), 1);
    let e = device.contribute_gradient(&client(&url), &task, &record).unwrap_err();
    assert!(e.to_string().contains("parameters"), "{e}");
    assert!(device.ledger().get("t1").is_none());
    // A sane model goes through.
    assert!(device.prepare_gradient(&task, &record, &model(0.1)).is_ok());
}

#[test]
fn tasks_and_mechanisms_outside_the_policy_are_refused() {
    let only_means = Policy { tasks: Some(vec![TaskKind::Means]), ..Policy::default() };
    assert!(DeviceTask::with_policy(means("m"), only_means.clone()).is_ok());
    let freq = config("f", TaskSpec::Frequency(FrequencySpec { attribute: "label".into(), mechanism: None }));
    let e = DeviceTask::with_policy(freq.clone(), only_means).unwrap_err();
    assert_eq!(rule(&e), "tasks");
    assert!(e.to_string().contains("frequency"), "{e}");
    let names = harmony_client::policy::mechanisms_of(&freq);
    assert_eq!(names.len(), 1, "{names:?}");
    let allowed = Policy { mechanisms: Some(names.clone()), ..Policy::default() };
    assert!(DeviceTask::with_policy(freq.clone(), allowed).is_ok());
    let other = Policy { mechanisms: Some(vec!["nothing".into()]), ..Policy::default() };
    let e = DeviceTask::with_policy(freq, other).unwrap_err();
    assert_eq!(rule(&e), "mechanisms");
    assert!(e.to_string().contains(&names[0]), "{e}");
}

#[test]
fn out_of_range_values_are_clamped_never_skipped() {
    let task = DeviceTask::new(means("m")).unwrap();
    for (raw, clamped) in [(5.0, 1.0), (-3.0, -1.0), (f64::NAN, 0.0), (f64::NEG_INFINITY, -1.0)] {
        for device in 0..20 {
            let mut a = SimulatedDevices::new(7);
            let mut b = SimulatedDevices::new(7);
            let x = a.item(&task, device, &Input::Record(&[Value::Unit(raw), Value::Category(0)])).unwrap();
            let y = b.item(&task, device, &Input::Record(&[Value::Unit(clamped), Value::Category(0)])).unwrap();
            assert_eq!(x.report, y.report, "{raw} is reported as {clamped}");
        }
    }
    // A category index out of range is an encoding error, not a data value: refused.
    let mut sim = SimulatedDevices::new(7);
    assert!(sim.item(&task, 0, &Input::Record(&[Value::Unit(0.0), Value::Category(9)])).is_err());
}

#[test]
fn out_of_range_bounds_are_refused_at_the_fetch() {
    // Inverted, empty or infinite bounds (∞ cannot travel in JSON: 1e999 is refused by the
    // parser, the others by the schema's validation).
    let good = serde_json::to_string(&means("c1")).unwrap();
    assert!(good.contains(r#""min":-1.0,"max":1.0"#), "{good}");
    for bounds in [r#""min":1.0,"max":-1.0"#, r#""min":-1e999,"max":1.0"#, r#""min":0.5,"max":0.5"#] {
        let url = hostile(good.replace(r#""min":-1.0,"max":1.0"#, bounds), 1);
        let e = client(&url).config("c1").unwrap_err();
        let named = e.to_string().contains("attribute range") || e.to_string().contains("number out of range");
        assert!(matches!(e, ClientError::Protocol { .. }) && named, "{bounds}: {e}");
    }
}

#[test]
fn olh_under_an_allowlist_of_grr_and_gaussian_is_refused() {
    // The server omits the frequency mechanism over 64 labels at ε = 1: the task picks OLH.
    let labels: Vec<String> = (0..64).map(|i| format!("v{i:03}")).collect();
    let body = serde_json::json!({
        "id": "f1", "config_version": 1, "wire_version": 1,
        "schema": [{"kind": "categorical", "name": "item", "categories": labels}],
        "epsilon": 1.0,
        "task": {"kind": "frequency", "attribute": "item"},
    });
    let fetched = client(&hostile(body.to_string(), 1)).config("f1").unwrap();
    assert!(harmony_client::policy::mechanisms_of(&fetched).is_empty(), "the config names no mechanism");
    let allow = |names: &[&str]| Policy {
        mechanisms: Some(names.iter().map(|n| n.to_string()).collect()),
        ..Policy::default()
    };
    let e = DeviceTask::with_policy(fetched.clone(), allow(&["grr", "gaussian"])).unwrap_err();
    assert_eq!(rule(&e), "mechanisms");
    assert!(e.to_string().contains("mechanisms is olh"), "{e}");
    assert!(DeviceTask::with_policy(fetched, allow(&["grr", "olh"])).is_ok());
    // A strategy that overrides the declared mechanisms: `harmony` runs Duchi and Hadamard,
    // whatever numeric and categorical mechanisms the config declares.
    let mut declared = means("m");
    let TaskSpec::Means(spec) = &mut declared.task else { unreachable!() };
    spec.numeric_mechanism = Some(harmony_core::kinds::RecordNumeric::Pm);
    spec.categorical_mechanism = Some(harmony_core::kinds::OracleKind::Grr);
    let written = harmony_client::policy::mechanisms_of(&declared);
    assert_eq!(written, ["harmony", "pm", "grr"]);
    let e = DeviceTask::with_policy(declared.clone(), allow(&["harmony", "pm", "grr"])).unwrap_err();
    assert_eq!(rule(&e), "mechanisms");
    assert!(DeviceTask::with_policy(declared, allow(&["harmony", "pm", "grr", "duchi", "hadamard"])).is_ok());
}

#[test]
fn item_ids_beyond_a_small_code_are_refused_before_any_data_is_read() {
    // A server publishes heavy hitters over ids in 2-bit codes: ids 0, 1, 2 encode, 3 and up
    // would make the task refuse (a threshold oracle on the device's id). An app that declares
    // its ids refuses the config itself, whatever its data.
    let config = |bits: u32| {
        let spec = serde_json::json!({"kind": "heavy-hitters", "items": "id", "bits": bits, "top": 2});
        let req = CreateCollection { schema: None, epsilon: 2.0, task: serde_json::from_value(spec).unwrap() };
        harmony_tasks::resolve(&req, "h").unwrap()
    };
    let app = Policy { max_item_id: Some(1000), ..Policy::default() };
    let e = DeviceTask::with_policy(config(2), app.clone()).unwrap_err();
    assert_eq!(rule(&e), "max_item_id");
    assert!(e.to_string().contains("ids up to 1000 in codes of 2 bits (ids < 3)"), "{e}");
    assert_eq!(rule(&DeviceTask::with_policy(config(9), app.clone()).unwrap_err()), "max_item_id");
    assert!(DeviceTask::with_policy(config(10), app).is_ok(), "2^10 − 1 = 1023 > 1000");
    // Undeclared, the config is accepted (the app has not said what its ids are).
    assert!(DeviceTask::new(config(2)).is_ok());
}
