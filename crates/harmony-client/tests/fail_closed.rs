//! The device's ledger fails closed: its reports, spends and permanent reports persist together
//! in one file, so an app restarted any number of times resends what it reported (never a
//! fresh, uncharged report); a charge whose report is not kept is a refusal; and two handles
//! (two processes of one app) spending under one budget never exceed it, the file lock held
//! across each read-check-write.

use harmony_client::budget::Spend;
use harmony_client::{ClientError, Device, DeviceTask, FileLedger, Input, Ledger, LedgerState, MemoryLedger, Policy};
use harmony_core::kinds::OracleKind;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::spec::{FrequencySpec, TaskSpec};
use harmony_protocol::{CollectionConfig, CreateCollection};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn config(id: &str) -> CollectionConfig {
    let schema = Schema::new(vec![Attribute::Categorical {
        name: "colour".into(),
        categories: ["r", "g", "b", "y"].map(String::from).to_vec(),
    }])
    .unwrap();
    let task = TaskSpec::Frequency(FrequencySpec { attribute: "colour".into(), mechanism: Some(OracleKind::Grr) });
    harmony_tasks::resolve(&CreateCollection { schema: Some(schema), epsilon: 1.0, task }, id).unwrap()
}

fn policy(budget: &str) -> Policy {
    Policy { budget: Some(budget.parse().unwrap()), ..Policy::default() }
}

const RECORD: [Value; 1] = [Value::Category(2)];

/// A fresh directory for one test's files.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harmony-fail-closed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rule(e: ClientError) -> String {
    match e {
        ClientError::Policy { rule, .. } => rule,
        other => panic!("expected a policy refusal, got {other}"),
    }
}

#[test]
fn a_hundred_restarts_re_serving_one_collection_get_no_fresh_report() {
    let dir = dir("restarts");
    let path = dir.join("device.json");
    let (mut reports, mut series) = (BTreeSet::new(), BTreeSet::new());
    for restart in 0..100 {
        // Every restart: a new process opens the same ledger file.
        let mut device = Device::with_budget(FileLedger::open(&path).unwrap(), || 1_000_000u64);
        // The same collection served again: the kept entry, same bytes and id.
        let task = DeviceTask::with_policy(config("c1"), policy("100/1")).unwrap();
        let item = device.prepare(&task, &Input::Record(&RECORD)).unwrap().item;
        reports.insert((item.id, item.report));
        // A recurring series, one new collection per restart: the permanent report.
        let task = DeviceTask::with_policy(config(&format!("day-{restart}")), policy("100/1")).unwrap();
        series.insert(device.prepare_series(&task, "daily", &Input::Record(&RECORD)).unwrap().item.report);
    }
    assert_eq!(reports.len(), 1, "one report for the collection over 100 restarts");
    assert_eq!(series.len(), 1, "one permanent report for the series over 100 restarts");
    let device = Device::new(FileLedger::open(&path).unwrap());
    assert_eq!(device.spends().len(), 2, "charged once each: {:?}", device.spends());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_charge_without_its_report_is_refused_not_randomized_again() {
    // A state whose report was lost while its charge was kept (an older split ledger, a file
    // restored from a backup): the collection is refused, never randomized again.
    let charged = |key: &str| Spend { collection: key.into(), epsilon: 1.0, delta: 0.0, at: 999_000 };
    let state = LedgerState { spends: vec![charged("c1")], ..LedgerState::default() };
    let mut device = Device::with_budget(MemoryLedger(state.clone()), || 1_000_000u64);
    let task = DeviceTask::with_policy(config("c1"), policy("100/1")).unwrap();
    let e = device.prepare(&task, &Input::Record(&RECORD)).unwrap_err();
    assert!(e.to_string().contains("c1 already charged, with no report kept"), "{e}");
    assert_eq!(rule(e), "ledger");
    assert!(device.ledger().get("c1").is_none() && device.spends().len() == 1);
    // Without a budget or a clock: the same refusal.
    let mut bare = Device::new(MemoryLedger(state));
    let unbudgeted = DeviceTask::new(config("c1")).unwrap();
    assert_eq!(rule(bare.prepare(&unbudgeted, &Input::Record(&RECORD)).unwrap_err()), "ledger");
    // A series whose permanent report was lost: its epoch's charge refuses a fresh one.
    let mut device = Device::with_budget(MemoryLedger::default(), || 1_000_000u64);
    let day0 = DeviceTask::with_policy(config("day-0"), policy("100/1")).unwrap();
    device.prepare_series(&day0, "daily", &Input::Record(&RECORD)).unwrap();
    let mut state = device.ledger().state().clone();
    state.series.clear();
    let mut device = Device::with_budget(MemoryLedger(state), || 1_000_000u64);
    let day1 = DeviceTask::with_policy(config("day-1"), policy("100/1")).unwrap();
    assert_eq!(rule(device.prepare_series(&day1, "daily", &Input::Record(&RECORD)).unwrap_err()), "ledger");
}

/// Two threads, each with its own handle on one ledger file (what two processes of one app
/// have), report to fresh collections at ε = 1 as fast as they can for `run`, under a budget of
/// ε 20 per 2-second window on the system clock. Every window of the file's spends holds at
/// most ε 20, and each thread's accepted reports are in the file.
fn two_handles_spend_under_one_budget(name: &str, run: Duration) {
    let dir = dir(name);
    let path = dir.join("device.json");
    let policy =
        Policy { budget: Some(harmony_client::Budget::new(20.0, 2.0 / 86_400.0).unwrap()), ..Policy::default() };
    let start = Instant::now();
    let accepted: Vec<Vec<String>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|t| {
                let (path, policy) = (path.clone(), policy.clone());
                s.spawn(move || {
                    let mut device = Device::with_budget(FileLedger::open(&path).unwrap(), harmony_client::SystemClock);
                    let mut mine = Vec::new();
                    for i in 0.. {
                        if start.elapsed() >= run {
                            break;
                        }
                        let id = format!("t{t}-{i}");
                        let task = DeviceTask::with_policy(config(&id), policy.clone()).unwrap();
                        match device.prepare(&task, &Input::Record(&RECORD)) {
                            Ok(_) => mine.push(id),
                            Err(e) => assert_eq!(rule(e), "budget"),
                        }
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let spends = Device::new(FileLedger::open(&path).unwrap()).spends().to_vec();
    let ids: BTreeSet<&str> = spends.iter().map(|s| s.collection.as_str()).collect();
    for id in accepted.iter().flatten() {
        assert!(ids.contains(id.as_str()), "{id} was reported but its spend is not in the file");
    }
    assert_eq!(ids.len(), spends.len(), "each collection charged once");
    assert!(accepted.iter().all(|a| !a.is_empty()), "both handles reported: {accepted:?}");
    // Every window (t − 2 s, t] ending at a spend holds at most ε 20.
    for s in &spends {
        let inside = spends.iter().filter(|o| o.at <= s.at && s.at - o.at < 2).count();
        assert!(inside <= 20, "{inside} spends of ε 1 in the 2-second window ending at {}", s.at);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_handles_spending_under_one_budget_never_exceed_it() {
    two_handles_spend_under_one_budget("fast", Duration::from_secs(3));
}

#[test]
#[ignore = "heavy: one minute"]
fn two_handles_spending_under_one_budget_for_a_minute_never_exceed_it() {
    two_handles_spend_under_one_budget("minute", Duration::from_secs(60));
}
