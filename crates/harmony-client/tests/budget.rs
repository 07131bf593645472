//! The privacy-budget ledger across collections: a server running many identical collections
//! gets reports only while the device's budget (ε per rolling window) allows, the window rolls
//! with an injected clock, the ledger survives a restart, and a server renaming its collection
//! on every fetch gets nothing.

use harmony_client::budget::{DAY, admit};
use harmony_client::{
    Budget, Client, ClientError, Cost, Device, DeviceTask, FileLedger, Input, Ledger, MemoryLedger, Policy, RetryPolicy,
};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::StrategyKind;
use harmony_protocol::spec::{MeansSpec, TaskSpec};
use harmony_protocol::{BatchAck, CollectionConfig, CreateCollection};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

fn config(id: &str, epsilon: f64) -> CollectionConfig {
    let schema = Schema::new(vec![
        Attribute::Numeric { name: "x1".into(), min: -1.0, max: 1.0 },
        Attribute::Categorical { name: "label".into(), categories: vec!["no".into(), "yes".into()] },
    ])
    .unwrap();
    let task = TaskSpec::Means(MeansSpec { strategy: StrategyKind::Harmony, ..Default::default() });
    harmony_tasks::resolve(&CreateCollection { schema: Some(schema), epsilon, task }, id).unwrap()
}

const RECORD: [Value; 2] = [Value::Unit(0.25), Value::Category(1)];

fn budget_policy(spec: &str) -> Policy {
    Policy { budget: Some(spec.parse().unwrap()), ..Policy::default() }
}

/// A clock the test moves.
fn clock(start: u64) -> (Arc<AtomicU64>, impl Fn() -> u64 + 'static) {
    let t = Arc::new(AtomicU64::new(start));
    let c = t.clone();
    (t, move || c.load(Ordering::SeqCst))
}

fn rule_and_message(e: ClientError) -> (String, String) {
    let msg = e.to_string();
    match e {
        ClientError::Policy { rule, .. } => (rule, msg),
        other => panic!("expected a policy refusal, got {other}"),
    }
}

fn prepare(device: &mut Device<MemoryLedger>, id: &str, policy: &Policy) -> harmony_client::Result<()> {
    let task = DeviceTask::with_policy(config(id, 1.0), policy.clone())?;
    device.prepare(&task, &Input::Record(&RECORD)).map(|_| ())
}

fn prepare_file(device: &mut Device<FileLedger>, id: &str, policy: &Policy) -> harmony_client::Result<()> {
    let task = DeviceTask::with_policy(config(id, 1.0), policy.clone())?;
    device.prepare(&task, &Input::Record(&RECORD)).map(|_| ())
}

#[test]
fn three_collections_at_epsilon_1_with_budget_2_per_day_the_third_is_refused() {
    let policy = budget_policy("2/1");
    let (_, now) = clock(1_000_000);
    let mut device = Device::with_budget(MemoryLedger::default(), now);
    prepare(&mut device, "c1", &policy).unwrap();
    prepare(&mut device, "c2", &policy).unwrap();
    // A retry of c1 resends its entry: no second charge.
    prepare(&mut device, "c1", &policy).unwrap();
    assert_eq!(device.spends().len(), 2);
    let (rule, msg) = rule_and_message(prepare(&mut device, "c3", &policy).unwrap_err());
    assert_eq!(rule, "budget");
    for part in ["ε 2 already spent", "ε 1 requested by collection c3", "limit is ε 2 per 1 day"] {
        assert!(msg.contains(part), "{part:?} not in {msg}");
    }
    assert!(device.ledger().get("c3").is_none(), "nothing randomized for c3");
    assert_eq!(device.spends().len(), 2, "the refusal charges nothing");
    // A policy with a budget on a device without a clock: refused, not ignored.
    let mut bare = Device::new(MemoryLedger::default());
    let (rule, msg) = rule_and_message(prepare(&mut bare, "c1", &policy).unwrap_err());
    assert_eq!(rule, "budget");
    assert!(msg.contains("without a clock"), "{msg}");
    assert!(bare.ledger().get("c1").is_none());
}

#[test]
fn the_window_rolls() {
    let policy = budget_policy("2/1");
    let t0 = 1_700_000_000;
    let (t, now) = clock(t0);
    let mut device = Device::with_budget(MemoryLedger::default(), now);
    prepare(&mut device, "c1", &policy).unwrap();
    t.store(t0 + DAY / 2, Ordering::SeqCst);
    prepare(&mut device, "c2", &policy).unwrap();
    // One second before c1 leaves the window: still 2 spent.
    t.store(t0 + DAY - 1, Ordering::SeqCst);
    assert_eq!(rule_and_message(prepare(&mut device, "c3", &policy).unwrap_err()).0, "budget");
    // A spend exactly one day old has left the window: c2's 1 + c3's 1 = 2.
    t.store(t0 + DAY, Ordering::SeqCst);
    prepare(&mut device, "c3", &policy).unwrap();
    let (_, msg) = rule_and_message(prepare(&mut device, "c4", &policy).unwrap_err());
    assert!(msg.contains("ε 2 already spent"), "{msg}");
    t.store(t0 + DAY + DAY / 2, Ordering::SeqCst);
    prepare(&mut device, "c4", &policy).unwrap();
    assert_eq!(device.spends().len(), 4);
    // Fractions of ε and of days: ten charges of 0.1 fit a budget of 1 per 0.5 day, an 11th does not.
    let b: Budget = "1/0.5".parse().unwrap();
    let mut spends = Vec::new();
    for i in 0..10 {
        spends.push(admit(&spends, Some(&b), &format!("s{i}"), Cost::pure(0.1), t0).unwrap());
    }
    assert!(admit(&spends, Some(&b), "s10", Cost::pure(0.1), t0 + DAY / 2 - 1).is_err());
    assert!(admit(&spends, Some(&b), "s10", Cost::pure(0.1), t0 + DAY / 2).is_ok());
    // A key already charged is refused (its report is kept beside its charge, or it is lost).
    let (rule, _) = rule_and_message(admit(&spends, Some(&b), "s3", Cost::pure(0.1), t0).unwrap_err());
    assert_eq!(rule, "ledger", "charged once per collection");
}

#[test]
fn the_budget_ledger_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!("harmony-budget-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("budget.json");
    let _ = std::fs::remove_file(&path);
    let policy = budget_policy("2/7");
    let (_, now) = clock(5_000_000);
    let mut device = Device::with_budget(FileLedger::open(&path).unwrap(), now);
    prepare_file(&mut device, "c1", &policy).unwrap();
    prepare_file(&mut device, "c2", &policy).unwrap();
    drop(device);
    // A new process: the same ledger file, three days later.
    let (_, later) = clock(5_000_000 + 3 * DAY);
    let mut device = Device::with_budget(FileLedger::open(&path).unwrap(), later);
    assert_eq!(device.spends().len(), 2);
    let (rule, msg) = rule_and_message(prepare_file(&mut device, "c3", &policy).unwrap_err());
    assert_eq!(rule, "budget");
    assert!(msg.contains("ε 2 per 7 days"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn budgets_parse_and_invalid_ones_name_the_rule() {
    let b: Budget = "2/1".parse().unwrap();
    assert_eq!((b.epsilon, b.days), (2.0, 1.0));
    assert_eq!(" 8 / 0.5 ".parse::<Budget>().unwrap(), Budget::new(8.0, 0.5).unwrap());
    for (bad, rule) in [
        ("2", "policy.budget"),
        ("x/1", "policy.budget"),
        ("0/1", "policy.budget.epsilon"),
        ("-1/1", "policy.budget.epsilon"),
        ("inf/1", "policy.budget.epsilon"),
        ("NaN/1", "policy.budget.epsilon"),
        ("2/0", "policy.budget.days"),
        ("2/1e-9", "policy.budget.days"),
    ] {
        let (r, msg) = rule_and_message(bad.parse::<Budget>().unwrap_err());
        assert_eq!(r, rule, "{bad}: {msg}");
    }
    // JSON (the browser SDK): "E/DAYS" or a table; a bad one names the rule.
    let p: Policy = serde_json::from_str(r#"{"max_epsilon": 4, "budget": "2/1"}"#).unwrap();
    assert_eq!(p.budget, Some(b));
    let p: Policy = serde_json::from_str(r#"{"max_epsilon": 4, "budget": {"epsilon": 2, "days": 1}}"#).unwrap();
    assert_eq!(p.budget, Some(b));
    let back: Policy = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
    assert_eq!(back, p);
    let e = serde_json::from_str::<Policy>(r#"{"max_epsilon": 4, "budget": "2/0"}"#).unwrap_err();
    assert!(e.to_string().contains("policy.budget.days"), "{e}");
    assert!(serde_json::from_str::<Policy>(r#"{"max_epsilon": 4, "budget": {"epsilon": 2, "weeks": 1}}"#).is_err());
}

/// A fake server on loopback: `GET …/config` answers `config(path)`, `POST …/reports` an ack;
/// counts the POSTs. Serves `requests` requests.
fn fake_server(
    requests: usize,
    config_for: impl Fn(&str) -> CollectionConfig + Send + 'static,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let posts = Arc::new(AtomicUsize::new(0));
    let counter = posts.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut first, mut line, mut length) = (String::new(), String::new(), 0usize);
            reader.read_line(&mut first).unwrap();
            while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                line.clear();
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let path = first.split_whitespace().nth(1).unwrap_or("").to_string();
            let answer = if first.starts_with("POST") {
                counter.fetch_add(1, Ordering::SeqCst);
                serde_json::to_string(&BatchAck { accepted: 1, duplicates: 0 }).unwrap()
            } else {
                serde_json::to_string(&config_for(&path)).unwrap()
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                answer.len()
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream.write_all(answer.as_bytes()).unwrap();
        }
    });
    (url, posts)
}

fn client(url: &str) -> Client {
    Client::new(url).with_retry(RetryPolicy { attempts: 1, ..Default::default() })
}

/// The id in `/v1/collections/{id}/config`.
fn id_of(path: &str) -> String {
    path.trim_start_matches("/v1/collections/").split('/').next().unwrap().to_string()
}

#[test]
fn a_server_running_identical_collections_gets_reports_only_within_the_budget() {
    // The server runs c1, c2, c3 with the same config (ε = 1); the device reports through HTTP.
    let (url, posts) = fake_server(5, |path| config(&id_of(path), 1.0));
    let policy = budget_policy("2/1");
    let (_, now) = clock(1_000_000);
    let mut device = Device::with_budget(MemoryLedger::default(), now);
    let c = client(&url);
    for id in ["c1", "c2"] {
        let task = DeviceTask::with_policy(c.config(id).unwrap(), policy.clone()).unwrap();
        device.report(&c, &task, &Input::Record(&RECORD)).unwrap();
    }
    let task = DeviceTask::with_policy(c.config("c3").unwrap(), policy.clone()).unwrap();
    let (rule, _) = rule_and_message(device.report(&c, &task, &Input::Record(&RECORD)).unwrap_err());
    assert_eq!(rule, "budget");
    assert_eq!(posts.load(Ordering::SeqCst), 2, "no report was sent to c3");
}

#[test]
fn a_server_renaming_its_collection_on_every_fetch_gets_no_report() {
    let n = Arc::new(AtomicUsize::new(0));
    let fresh = n.clone();
    let (url, posts) = fake_server(5, move |_| config(&format!("fresh-{}", fresh.fetch_add(1, Ordering::SeqCst)), 1.0));
    let (_, now) = clock(1_000_000);
    let mut device = Device::with_budget(MemoryLedger::default(), now);
    let c = client(&url);
    for _ in 0..5 {
        let e = c.config("c1").unwrap_err();
        assert!(matches!(e, ClientError::Protocol { .. }) && e.to_string().contains("fresh-"), "{e}");
    }
    assert_eq!(n.load(Ordering::SeqCst), 5, "five fetches, five new ids");
    // Asked for c1 every time, the device never built a task: nothing randomized, charged or sent.
    assert!(device.spends().is_empty() && device.ledger().get("c1").is_none());
    assert_eq!(posts.load(Ordering::SeqCst), 0);
    // And reporting twice to one id is refused after the acknowledgement (the ledger), charged once.
    let policy = budget_policy("2/1");
    let task = DeviceTask::with_policy(config("c1", 1.0), policy).unwrap();
    device.prepare(&task, &Input::Record(&RECORD)).unwrap();
    device.acknowledge("c1").unwrap();
    let e = device.prepare(&task, &Input::Record(&RECORD)).unwrap_err();
    assert!(matches!(e, ClientError::AlreadyReported(_)), "{e}");
    assert_eq!(device.spends().len(), 1);
}
