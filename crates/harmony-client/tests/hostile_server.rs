//! The hostile-server harness: a fake collection server on loopback serves every adversarial
//! config of `tests/hostile/configs.json` (the list the Python and browser device tests share),
//! and the device fetches each through its HTTP client and checks it against its policy:
//! every config is refused naming the rule the list expects, or accepted and then answered
//! within the policy (ε ≤ max_epsilon, no δ unless allowed, one report, charged once).

use harmony_client::{Client, ClientError, Device, DeviceTask, Input, MemoryLedger, Policy, RetryPolicy};
use harmony_core::schema::{Attribute, Value};
use serde_json::Value as Json;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

fn cases() -> Vec<Json> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hostile/configs.json");
    let text = std::fs::read_to_string(path).unwrap();
    let file: Json = serde_json::from_str(&text).unwrap();
    file["cases"].as_array().unwrap().clone()
}

/// The collection id a case is fetched under.
fn asked(case: &Json) -> String {
    case.get("asked").and_then(Json::as_str).unwrap_or_else(|| case["config"]["id"].as_str().unwrap()).to_string()
}

/// A fake server on loopback serving each case's config at its id's config path (404
/// otherwise), for `requests` requests; returns its base URL.
fn serve(cases: &[Json], requests: usize) -> String {
    let routes: Vec<(String, String)> =
        cases.iter().map(|c| (format!("/v1/collections/{}/config", asked(c)), c["config"].to_string())).collect();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut first, mut line) = (String::new(), String::new());
            reader.read_line(&mut first).unwrap();
            while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
                line.clear();
            }
            let path = first.split_whitespace().nth(1).unwrap_or("");
            let (status, body) = match routes.iter().find(|(p, _)| p == path) {
                Some((_, body)) => ("200 OK", body.clone()),
                None => ("404 Not Found", r#"{"error":{"field":"path","message":"no such collection"}}"#.into()),
            };
            let head = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream.write_all(body.as_bytes()).unwrap();
        }
    });
    url
}

/// The rule that refused the config (`config` for one that does not parse, answer the request
/// or build), or `None` when the device accepts it; with the accepted task.
fn outcome(client: &Client, case: &Json, policy: &Policy) -> Result<DeviceTask, String> {
    let config = client.config(&asked(case)).map_err(|_| "config".to_string())?;
    DeviceTask::with_policy(config, policy.clone()).map_err(|e| match e {
        ClientError::Policy { rule, .. } => rule,
        _ => "config".to_string(),
    })
}

/// A record of the task's schema (the first category, the middle of each range).
fn record(task: &DeviceTask) -> Vec<Value> {
    let attributes = task.config().schema.as_ref().map_or(&[][..], |s| s.attributes());
    attributes
        .iter()
        .map(|a| match a {
            Attribute::Numeric { .. } => Value::Unit(0.0),
            _ => Value::Category(0),
        })
        .collect()
}

#[test]
fn every_adversarial_config_is_refused_or_answered_within_the_policy() {
    let cases = cases();
    assert!(cases.len() >= 15, "{} cases", cases.len());
    let url = serve(&cases, cases.len());
    let client = Client::new(&url).with_retry(RetryPolicy { attempts: 1, ..Default::default() });
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let policy: Policy = match &case["policy"] {
            Json::Null => Policy::default(),
            p => serde_json::from_value(p.clone()).unwrap(),
        };
        let expected = case["refused"].as_str();
        match (outcome(&client, case, &policy), expected) {
            (Err(rule), Some(want)) => assert_eq!(rule, want, "{name}: refused by {rule}, expected {want}"),
            (Err(rule), None) => panic!("{name}: refused by {rule}, expected accepted"),
            (Ok(_), Some(want)) => panic!("{name}: accepted, expected refused by {want}"),
            (Ok(task), None) => {
                let config = task.config();
                assert!(config.epsilon <= policy.max_epsilon, "{name}: ε {}", config.epsilon);
                let delta = harmony_client::policy::delta_of(config).unwrap_or(0.0);
                assert!(delta == 0.0 || policy.approximate, "{name}: δ {delta}");
                let mut device = Device::with_budget(MemoryLedger::default(), harmony_client::SystemClock);
                let r = record(&task);
                let entry = device.prepare(&task, &Input::Record(&r)).unwrap();
                assert_eq!(device.prepare(&task, &Input::Record(&r)).unwrap(), entry, "{name}: one report");
                let spends = device.spends();
                assert!(spends.len() == 1 && spends[0].epsilon == config.epsilon, "{name}: {spends:?}");
            }
        }
    }
}
