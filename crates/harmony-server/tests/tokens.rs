//! Tokens on loopback: the admin token creates collections and mints
//! per-collection analyst tokens; an analyst token reads its own collection only; a revoked
//! token is refused at once and after a restart; the store keeps hashes, never tokens;
//! `/metrics` needs the metrics or the admin token; a refused request's body is never read.

use harmony_client::{Client, ClientError, RetryPolicy};
use harmony_core::schema::{Attribute, Schema};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::Query;
use harmony_protocol::spec::{FrequencySpec, TaskSpec};
use harmony_server::{AppState, Limits, SqliteStore, Store};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const ADMIN: &str = "admin-secret-1";
const METRICS: &str = "metrics-secret-2";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harmony-tokens-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn start(dir: &Path) -> harmony_server::Running {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    let state = AppState::with_tokens(store, ADMIN, Some(METRICS)).unwrap();
    harmony_server::spawn_state(state, "127.0.0.1:0", 2, &Limits::default(), |r| r).unwrap()
}

fn client(url: &str, token: &str) -> Client {
    Client::new(url).with_token(token).with_retry(RetryPolicy { attempts: 1, ..Default::default() })
}

fn create(c: &Client) -> Result<String, ClientError> {
    let schema =
        Schema::new(vec![Attribute::Categorical { name: "c".into(), categories: vec!["a".into(), "b".into()] }]);
    let task = TaskSpec::Frequency(FrequencySpec { attribute: "c".into(), mechanism: None });
    Ok(c.create_collection(&CreateCollection { schema: Some(schema.unwrap()), epsilon: 1.0, task })?.id)
}

fn status(r: Result<impl Sized, ClientError>) -> u16 {
    match r {
        Err(ClientError::Rejected { status, .. }) => status,
        Err(e) => panic!("{e}"),
        Ok(_) => 200,
    }
}

fn get(url: &str, token: Option<&str>) -> u16 {
    let mut r = ureq::get(url).config().http_status_as_error(false).build();
    if let Some(t) = token {
        r = r.header("authorization", &format!("Bearer {t}"));
    }
    r.call().unwrap().status().as_u16()
}

#[test]
fn tokens_are_scoped_hashed_and_revocable() {
    let dir = tmp("scoped");
    let server = start(&dir);
    let url = server.url();
    let admin = client(&url, ADMIN);
    let (a, b) = (create(&admin).unwrap(), create(&admin).unwrap());
    let ta = admin.create_token(&a, "dashboard ana").unwrap();
    assert!(ta.token.starts_with("hct_") && ta.token.len() == 68, "{}", ta.token);
    let reader = client(&url, &ta.token);
    // Its own collection: yes; the other, creating, minting, metrics: no.
    assert_eq!(reader.estimates(&a, &Query::default()).unwrap().reports, 0);
    assert_eq!(status(reader.estimates(&b, &Query::default())), 403);
    assert_eq!(status(create(&reader)), 403);
    assert_eq!(status(reader.create_token(&a, "")), 403);
    assert_eq!(get(&format!("{url}/metrics"), Some(&ta.token)), 403);
    let mine: Vec<String> = reader.collections().unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(mine, vec![a.clone()]);
    assert_eq!(admin.collections().unwrap().len(), 2);
    // Metrics: its token or the admin's; nothing else.
    assert_eq!(get(&format!("{url}/metrics"), None), 401);
    assert_eq!(get(&format!("{url}/metrics"), Some(METRICS)), 200);
    assert_eq!(get(&format!("{url}/metrics"), Some(ADMIN)), 200);
    assert_eq!(status(client(&url, METRICS).estimates(&a, &Query::default())), 403);
    // Bad labels, unknown collections and tokens.
    assert_eq!(status(admin.create_token(&a, "<b>")), 400);
    assert_eq!(status(admin.create_token("nope", "")), 404);
    assert_eq!(status(admin.revoke_token(&a, "0000000000000000")), 404);
    assert_eq!(status(admin.revoke_token(&b, &ta.token_id)), 404);
    // Rotation: a second token, then the first revoked: refused at once, listed as revoked.
    let ta2 = admin.create_token(&a, "rotated").unwrap();
    admin.revoke_token(&a, &ta.token_id).unwrap();
    assert_eq!(status(reader.estimates(&a, &Query::default())), 401);
    assert!(client(&url, &ta2.token).estimates(&a, &Query::default()).is_ok());
    let mut listed: Vec<(String, bool)> =
        admin.tokens(&a).unwrap().into_iter().map(|t| (t.token_id, t.revoked)).collect();
    listed.sort();
    let mut want = vec![(ta.token_id.clone(), true), (ta2.token_id.clone(), false)];
    want.sort();
    assert_eq!(listed, want);
    // After a restart: the same grants, loaded from the store.
    server.stop();
    let server = start(&dir);
    let url = server.url();
    assert_eq!(status(client(&url, &ta.token).estimates(&a, &Query::default())), 401);
    assert!(client(&url, &ta2.token).estimates(&a, &Query::default()).is_ok());
    assert_eq!(status(client(&url, &ta2.token).estimates(&b, &Query::default())), 403);
    server.stop();
    // The database holds hashes, never a token.
    let mut bytes = Vec::new();
    for f in std::fs::read_dir(&dir).unwrap() {
        bytes.extend(std::fs::read(f.unwrap().path()).unwrap());
    }
    for t in [&ta.token, &ta2.token] {
        assert!(!bytes.windows(t.len()).any(|w| w == t.as_bytes()), "a token is stored in the clear");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A POST with a wrong token is answered 401 before its body arrives: the client sends the
/// headers of a 1 MiB body and nothing else, and still gets its answer.
#[test]
fn refused_before_the_body_is_read() {
    let dir = tmp("early");
    let server = start(&dir);
    let addr = server.url().trim_start_matches("http://").to_string();
    for (token, want) in [("wrong", "401"), (METRICS, "403")] {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let head = format!(
            "POST /v1/collections HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n"
        );
        s.write_all(head.as_bytes()).unwrap();
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with(&format!("HTTP/1.1 {want}")), "{text}");
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Model steering (3,000 gradient posts under invented device ids once moved a model 30
/// rounds): a training collection takes (by default: a request without `enrollment`)
/// gradients only from enrolled devices — under the device id its key was minted for, one per
/// key — so invented ids, other collections' keys, revoked keys and the admin token all fail
/// and the model does not move; keys survive a restart and are stored hashed.
#[test]
fn invented_device_ids_cannot_steer_a_model_of_enrolled_devices() {
    let dir = tmp("enroll");
    let running = start(&dir);
    let url = format!("http://{}", running.addr);
    let admin = client(&url, ADMIN);
    let train = |enrollment: Option<bool>| -> harmony_protocol::CollectionConfig {
        let req: CreateCollection = serde_json::from_value(serde_json::json!({
            "schema": [{"kind": "numeric", "name": "x", "min": -1, "max": 1},
                       {"kind": "categorical", "name": "y", "categories": ["no", "yes"]}],
            "epsilon": 4,
            "task": {"kind": "train", "task": "logistic", "target": "y", "batch_size": 2, "rounds": 5,
                     "enrollment": enrollment}
        }))
        .unwrap();
        admin.create_collection(&req).unwrap().config
    };
    let (config, open) = (train(None), train(Some(false)));
    assert!(matches!(&config.task, TaskSpec::Train(t) if t.enrollment == Some(true)), "the published spec says so");
    assert!(matches!(&open.task, TaskSpec::Train(t) if t.enrollment == Some(false)), "the opt-out is stored");
    assert_eq!(status(admin.enroll(&open.id, 1, "")), 409, "a collection without enrollment mints no keys");
    assert_eq!(status(admin.enroll(&config.id, 0, "")), 400);
    assert_eq!(status(admin.enroll(&config.id, 10_001, "")), 400);
    assert_eq!(status(client(&url, "hct_nope").enroll(&config.id, 1, "")), 401);
    let devices = admin.enroll(&config.id, 3, "fleet-a").unwrap().devices;
    assert_eq!(devices.len(), 3);
    assert!(devices.iter().all(|d| d.device_id.starts_with("dev_") && d.key.starts_with("hdk_")));

    let task = harmony_tasks::train::TrainTask::new(config.clone()).unwrap();
    let row = [harmony_core::schema::Value::Unit(0.5), harmony_core::schema::Value::Category(1)];
    let post = |key: Option<&str>, device: &str, seed: u64| {
        let c = match key {
            Some(k) => client(&url, k),
            None => Client::new(&url).with_retry(RetryPolicy { attempts: 1, ..Default::default() }),
        };
        let model = c.model(&config.id).unwrap();
        let g = task.gradient(&model, &row, &mut harmony_core::sampling::fast_rng(seed)).unwrap();
        let report = harmony_protocol::to_hex(&harmony_core::wire::encode(&g));
        status(c.post_gradient(
            &config.id,
            &harmony_protocol::GradientPost { device_id: device.into(), round: model.round, report },
        ))
    };
    // The steering attempt: invented ids, without a key, with the admin token, with another
    // device's id, with another collection's key.
    for i in 0..100 {
        assert_eq!(post(None, &format!("invented-{i}"), i), 401);
    }
    assert_eq!(post(Some(ADMIN), "invented-x", 1), 401, "the admin token is no device key");
    assert_eq!(post(Some(&devices[0].key), &devices[1].device_id, 1), 403, "a key posts under its own id only");
    let other = admin.create_collection(&serde_json::from_value(serde_json::json!({
        "schema": [{"kind": "numeric", "name": "x", "min": -1, "max": 1},
                   {"kind": "categorical", "name": "y", "categories": ["no", "yes"]}],
        "epsilon": 4, "task": {"kind": "train", "task": "logistic", "target": "y", "batch_size": 2, "rounds": 5, "enrollment": true}
    })).unwrap()).unwrap().config;
    let foreign = admin.enroll(&other.id, 1, "").unwrap().devices.remove(0);
    assert_eq!(post(Some(&foreign.key), &foreign.device_id, 1), 403);
    let m = admin.model(&config.id).unwrap();
    assert_eq!((m.round, m.received), (1, 0), "nothing moved the model");

    // Enrolled devices: one gradient each; a revoked key is refused (also after a restart).
    assert_eq!(post(Some(&devices[0].key), &devices[0].device_id, 1), 200);
    assert_eq!(post(Some(&devices[0].key), &devices[0].device_id, 2), 409, "one gradient per key");
    admin.revoke_device(&config.id, &devices[2].device_id).unwrap();
    assert_eq!(status(admin.revoke_device(&config.id, "dev_0000000000000000")), 404);
    assert_eq!(post(Some(&devices[2].key), &devices[2].device_id, 3), 401);
    let listed = admin.enrollments(&config.id).unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed.iter().filter(|d| d.revoked).count(), 1);
    assert!(admin.tokens(&config.id).unwrap().is_empty(), "device keys are not analyst tokens");
    assert_eq!(
        status(client(&url, &devices[1].key).estimates(&config.id, &Query::default())),
        401,
        "a device key reads nothing"
    );
    running.stop();

    let running = start(&dir);
    let url = format!("http://{}", running.addr);
    let post = |key: &str, device: &str, seed: u64| {
        let c = client(&url, key);
        let model = c.model(&config.id).unwrap();
        let g = task.gradient(&model, &row, &mut harmony_core::sampling::fast_rng(seed)).unwrap();
        let report = harmony_protocol::to_hex(&harmony_core::wire::encode(&g));
        status(c.post_gradient(
            &config.id,
            &harmony_protocol::GradientPost { device_id: device.into(), round: model.round, report },
        ))
    };
    assert_eq!(post(&devices[2].key, &devices[2].device_id, 3), 401, "revoked after a restart");
    assert_eq!(post(&devices[1].key, &devices[1].device_id, 4), 200, "enrolled after a restart");
    let m = client(&url, ADMIN).model(&config.id).unwrap();
    assert_eq!(m.round, 2, "the two enrolled gradients completed round 1");
    running.stop();
    let bytes = std::fs::read(dir.join("db.sqlite")).unwrap_or_default();
    let wal = std::fs::read(dir.join("db.sqlite-wal")).unwrap_or_default();
    for d in &devices {
        let k = d.key.as_bytes();
        assert!(
            !bytes.windows(k.len()).any(|w| w == k) && !wal.windows(k.len()).any(|w| w == k),
            "key stored in the clear"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An adaptive query round filled by anonymous posts (the honest device refused, the answer
/// with a standard error of 0): an `adaptive-rounds` collection (by default: a request without
/// `enrollment`) takes answers only from enrolled devices, so 300 invented device ids leave the round empty
/// and open, and an enrolled device still answers it.
#[test]
fn invented_device_ids_cannot_fill_an_adaptive_round_of_enrolled_devices() {
    let dir = tmp("enroll-adaptive");
    let running = start(&dir);
    let url = format!("http://{}", running.addr);
    let admin = client(&url, ADMIN);
    let req: CreateCollection = serde_json::from_value(serde_json::json!({
        "schema": [{"kind": "categorical", "name": "c", "categories": ["a", "b"]}],
        "epsilon": 1,
        "task": {"kind": "linear-queries", "attributes": ["c"], "workload": {"queries": [{"range": [0, 0]}]},
                 "mechanism": "adaptive-rounds", "batch_size": 100}
    }))
    .unwrap();
    let config = admin.create_collection(&req).unwrap().config;
    assert!(
        matches!(&config.task, TaskSpec::LinearQueries(l) if l.enrollment == Some(true)),
        "the published spec says so"
    );
    let device = admin.enroll(&config.id, 1, "").unwrap().devices.remove(0);
    let task = harmony_client::DeviceTask::new(config.clone()).unwrap();
    let row = [harmony_core::schema::Value::Category(0)];
    let post = |key: Option<&str>, device: &str, seed: u64| {
        let c = match key {
            Some(k) => client(&url, k),
            None => Client::new(&url).with_retry(RetryPolicy { attempts: 1, ..Default::default() }),
        };
        let round = admin.query_round(&config.id).unwrap();
        let input = harmony_tasks::Input::Answer { record: &row, round: &round };
        let item = harmony_client::SimulatedDevices::new(seed).item(&task, 0, &input).unwrap();
        status(
            c.post_answer(&config.id, &harmony_protocol::AnswerPost { device_id: device.into(), report: item.report }),
        )
    };
    for i in 0..300 {
        assert_eq!(post(None, &format!("invented-{i}"), i), 401);
    }
    assert_eq!(post(Some(ADMIN), "invented-x", 1), 401, "the admin token is no device key");
    let round = admin.query_round(&config.id).unwrap();
    assert_eq!((round.round, round.received, round.open), (1, 0, true), "no anonymous answer counted");
    assert_eq!(post(Some(&device.key), &device.device_id, 1), 200);
    assert_eq!(post(Some(&device.key), &device.device_id, 2), 409, "one answer per key");
    assert_eq!(admin.query_round(&config.id).unwrap().received, 1);
    running.stop();
    let _ = std::fs::remove_dir_all(dir);
}
