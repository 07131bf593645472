//! Recurring collections (the config's `recurring`: one report per device and period): the device
//! refuses one unless its policy sets a budget, keeps one report per period in its ledger (a
//! retry within the period resends it, an acknowledged one is not sent again), charges each
//! period once, and its budget's rolling window caps the periods it reports in.

use harmony_client::{ClientError, Device, DeviceTask, Input, Ledger, MemoryLedger, Policy};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::spec::{FrequencySpec, TaskSpec};
use harmony_protocol::{CollectionConfig, CreateCollection, Period};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const DAY: u64 = 86_400;
/// 2026-01-05 (a Monday) at 09:00 UTC.
const T0: u64 = 20_458 * DAY + 9 * 3_600;
const RECORD: [Value; 1] = [Value::Category(1)];

fn config(period: Period) -> CollectionConfig {
    let schema =
        Schema::new(vec![Attribute::Categorical { name: "c".into(), categories: vec!["a".into(), "b".into()] }])
            .unwrap();
    let task = TaskSpec::Frequency(FrequencySpec { attribute: "c".into(), mechanism: None });
    let mut c =
        harmony_tasks::resolve(&CreateCollection { schema: Some(schema), epsilon: 1.0, task }, "daily").unwrap();
    c.recurring = Some(period);
    c
}

fn refusal(e: ClientError) -> (String, String) {
    let msg = e.to_string();
    match e {
        ClientError::Policy { rule, .. } => (rule, msg),
        other => panic!("expected a policy refusal, got {other}"),
    }
}

#[test]
fn a_recurring_collection_needs_a_budget_and_a_clock() {
    let (rule, msg) = refusal(DeviceTask::with_policy(config(Period::Day), Policy::default()).unwrap_err());
    assert_eq!(rule, "recurring", "{msg}");
    assert!(msg.contains("recurring every day") && msg.contains("budget"), "{msg}");
    let policy = Policy { budget: Some("3/7".parse().unwrap()), ..Policy::default() };
    let task = DeviceTask::with_policy(config(Period::Day), policy).unwrap();
    let mut bare = Device::new(MemoryLedger::default());
    assert!(bare.prepare(&task, &Input::Record(&RECORD)).is_err(), "no clock: refused");
    assert!(bare.ledger().state().ledger.is_empty(), "nothing randomized");
}

#[test]
fn one_report_per_period_each_charged_and_the_window_caps_them() {
    // ε 1 per report, at most ε 3 in any 7 days.
    let policy = Policy { budget: Some("3/7".parse().unwrap()), ..Policy::default() };
    let task = DeviceTask::with_policy(config(Period::Day), policy).unwrap();
    let now = Arc::new(AtomicU64::new(T0));
    let clock = now.clone();
    let mut device = Device::with_budget(MemoryLedger::default(), move || clock.load(Ordering::SeqCst));
    let first = device.prepare(&task, &Input::Record(&RECORD)).unwrap();
    // Later the same day: the same report (a retry), no second charge.
    now.store(T0 + 10 * 3_600, Ordering::SeqCst);
    assert_eq!(device.prepare(&task, &Input::Record(&RECORD)).unwrap().item, first.item);
    assert_eq!(device.spends().len(), 1);
    device.acknowledge("daily").unwrap();
    assert!(matches!(device.prepare(&task, &Input::Record(&RECORD)), Err(ClientError::AlreadyReported(_))));
    // The next two days: a new report each, each charged, keyed by its day.
    for d in 1..3 {
        now.store(T0 + d * DAY, Ordering::SeqCst);
        let e = device.prepare(&task, &Input::Record(&RECORD)).unwrap();
        assert_ne!(e.item.id, first.item.id);
        device.acknowledge("daily").unwrap();
    }
    let keys: Vec<String> = device.ledger().state().ledger.keys().cloned().collect();
    let day0 = T0 / DAY * DAY;
    let want: Vec<String> = (0..3).map(|d| format!("daily@{:012}", day0 + d * DAY)).collect();
    assert_eq!(keys, want);
    assert!(device.ledger().state().ledger.values().all(|e| e.acknowledged));
    assert_eq!(device.spends().len(), 3);
    // The fourth day: ε 3 spent in the last 7 days, refused before any randomization.
    now.store(T0 + 3 * DAY, Ordering::SeqCst);
    let (rule, _) = refusal(device.prepare(&task, &Input::Record(&RECORD)).unwrap_err());
    assert_eq!(rule, "budget");
    assert_eq!(device.ledger().state().ledger.len(), 3);
    // A week after the first: the window has rolled past it.
    now.store(T0 + 7 * DAY, Ordering::SeqCst);
    device.prepare(&task, &Input::Record(&RECORD)).unwrap();
    assert_eq!(device.spends().len(), 4);
}

#[test]
fn weekly_and_hourly_periods_key_by_their_start() {
    let policy = Policy { budget: Some("100/1".parse().unwrap()), ..Policy::default() };
    for (period, later, same) in [(Period::Week, 3 * DAY, true), (Period::Hour, 3_600, false)] {
        let task = DeviceTask::with_policy(config(period), policy.clone()).unwrap();
        let now = Arc::new(AtomicU64::new(T0));
        let clock = now.clone();
        let device = Device::with_budget(MemoryLedger::default(), move || clock.load(Ordering::SeqCst));
        let a = device.ledger_key(&task).unwrap();
        assert_eq!(a, format!("daily@{:012}", period.start(T0 as i64)));
        now.store(T0 + later, Ordering::SeqCst);
        assert_eq!(device.ledger_key(&task).unwrap() == a, same, "{period:?}");
    }
}
