//! Memoized randomized response for a recurring series: over 100 (then 101) collections of the
//! same value, the reports are one permanent report, so the likelihood ratio of all of them
//! between any two values is exactly that of one report (≤ e^ε, = e^ε for GRR), and the budget
//! is charged once; without memoization the budget refuses the 101st collection.

use harmony_client::{ClientError, Device, DeviceTask, Input, MemoryLedger, Policy, SimulatedDevices};
use harmony_core::frequency::AnyOracle;
use harmony_core::kinds::OracleKind;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::spec::{FrequencySpec, MeansSpec, TaskSpec};
use harmony_protocol::{CollectionConfig, CreateCollection};

const D: usize = 4;
const EPS: f64 = 1.0;

fn config(id: &str, epsilon: f64, task: TaskSpec) -> CollectionConfig {
    let schema = Schema::new(vec![
        Attribute::Numeric { name: "x1".into(), min: -1.0, max: 1.0 },
        Attribute::Categorical { name: "colour".into(), categories: ["r", "g", "b", "y"].map(String::from).to_vec() },
    ])
    .unwrap();
    harmony_tasks::resolve(&CreateCollection { schema: Some(schema), epsilon, task }, id).unwrap()
}

fn daily(k: usize) -> CollectionConfig {
    config(
        &format!("day-{k}"),
        EPS,
        TaskSpec::Frequency(FrequencySpec { attribute: "colour".into(), mechanism: Some(OracleKind::Grr) }),
    )
}

fn policy() -> Policy {
    Policy { budget: Some("100/1".parse().unwrap()), ..Policy::default() }
}

fn device() -> Device<MemoryLedger> {
    Device::with_budget(MemoryLedger::default(), || 1_000_000u64)
}

fn record(v: u32) -> [Value; 2] {
    [Value::Unit(0.3), Value::Category(v)]
}

/// max over v, v' of ln Π_i P[r_i | v] / P[r_i | v'] for the reports `hex` (GRR at ε, D values).
fn max_log_ratio(hex: &[String], distinct: bool) -> f64 {
    let oracle = AnyOracle::by_name("grr", EPS, D).unwrap();
    let reports: Vec<_> = hex
        .iter()
        .map(|h| {
            let mut b = Vec::new();
            harmony_protocol::from_hex_into(h, &mut b).unwrap();
            oracle.decode_report(&b).unwrap()
        })
        .collect();
    // Memoized reports are one draw: their joint probability is that of the first.
    let used = if distinct { &reports[..] } else { &reports[..1] };
    let ll = |v: usize| used.iter().map(|r| oracle.output_probability(v, r).ln()).sum::<f64>();
    let lls: Vec<f64> = (0..D).map(ll).collect();
    lls.iter().flat_map(|a| lls.iter().map(move |b| a - b)).fold(f64::NEG_INFINITY, f64::max)
}

#[test]
fn a_hundred_collections_of_one_value_cost_epsilon_once() {
    let mut dev = device();
    let mut reports = Vec::new();
    for k in 0..101 {
        let task = DeviceTask::with_policy(daily(k), policy()).unwrap();
        reports.push(dev.prepare_series(&task, "colour-daily", &Input::Record(&record(2))).unwrap().item);
    }
    // One permanent report, sent under 101 fresh report ids; one charge of ε.
    assert!(reports.iter().all(|r| r.report == reports[0].report));
    let ids: std::collections::BTreeSet<_> = reports.iter().map(|r| &r.id).collect();
    assert_eq!(ids.len(), 101);
    assert_eq!(dev.spends().len(), 1);
    assert_eq!(dev.spends()[0].epsilon, EPS);
    // The observer's likelihood ratio between any two values, from the output probabilities:
    // exactly e^ε for GRR whatever the report (p/q = e^ε), never more.
    let hex: Vec<String> = reports[..100].iter().map(|r| r.report.clone()).collect();
    let lr = max_log_ratio(&hex, false);
    assert!((lr - EPS).abs() < 1e-12, "ln ratio {lr}, ε {EPS}");
    // The same 100 collections randomized independently (seeded devices, a fixed seed): the
    // ratio multiplies, far above e^ε.
    let mut sim = SimulatedDevices::new(11);
    let task = DeviceTask::new(daily(0)).unwrap();
    let independent: Vec<String> =
        (0..100).map(|i| sim.item(&task, i, &Input::Record(&record(2))).unwrap().report).collect();
    let lr = max_log_ratio(&independent, true);
    assert!(lr > 10.0 * EPS, "independent reports: ln ratio {lr}");
}

#[test]
fn without_memoization_the_budget_refuses_the_101st() {
    let mut dev = device();
    for k in 0..100 {
        let task = DeviceTask::with_policy(daily(k), policy()).unwrap();
        dev.prepare(&task, &Input::Record(&record(2))).unwrap();
    }
    let task = DeviceTask::with_policy(daily(100), policy()).unwrap();
    let e = dev.prepare(&task, &Input::Record(&record(2))).unwrap_err();
    assert!(matches!(&e, ClientError::Policy { rule, .. } if rule == "budget"), "{e}");
    assert!(e.to_string().contains("ε 100 already spent"), "{e}");
}

/// Reports of two devices over `n` collections of one series under `policy`: one whose value
/// never changes, one whose value changes at every collection. Each entry: the report, or the
/// rule that refused the collection.
fn constant_and_changing(policy: &Policy, n: usize) -> [Vec<Result<String, String>>; 2] {
    [|_| 2, |k: usize| (k % D) as u32].map(|value: fn(usize) -> u32| {
        let mut dev = device();
        (0..n)
            .map(|k| {
                let task = DeviceTask::with_policy(daily(k), policy.clone()).unwrap();
                match dev.prepare_series(&task, "s", &Input::Record(&record(value(k)))) {
                    Ok(e) => Ok(e.item.report),
                    Err(ClientError::Policy { rule, .. }) => Err(rule),
                    Err(e) => panic!("{e}"),
                }
            })
            .collect()
    })
}

#[test]
fn refusals_depend_on_the_number_of_collections_not_on_the_values() {
    // Epochs of 2 collections, ε 1 each, budget 3: collections 0–5 are three epochs, the 7th
    // (the fourth epoch) is refused, whether the value changed at every collection or never.
    let policy = Policy { budget: Some("3/1".parse().unwrap()), series_refresh: Some(2), ..Policy::default() };
    let [constant, changing] = constant_and_changing(&policy, 8);
    let refused = |r: &[Result<String, String>]| r.iter().map(|x| x.is_err()).collect::<Vec<_>>();
    let expected = [false, false, false, false, false, false, true, true];
    assert_eq!(refused(&constant), expected);
    assert_eq!(refused(&changing), expected, "{changing:?}");
    assert!(changing[6..].iter().all(|r| r.as_ref().unwrap_err() == "budget"));
}

#[test]
fn a_value_change_inside_an_epoch_sends_the_same_bytes() {
    let policy = Policy { budget: Some("100/1".parse().unwrap()), series_refresh: Some(5), ..Policy::default() };
    let [constant, changing] = constant_and_changing(&policy, 20);
    for reports in [&constant, &changing] {
        let reports: Vec<&String> = reports.iter().map(|r| r.as_ref().unwrap()).collect();
        // Inside an epoch the bytes are those of its first collection, whatever the value did.
        for epoch in reports.chunks(5) {
            assert!(epoch.iter().all(|r| *r == epoch[0]), "{epoch:?}");
        }
    }
    // So the server cannot tell the two devices apart by when their reports repeat: both
    // repeat exactly at the same collections (an observer sees the same pattern of equal and
    // fresh reports). Across epochs each device draws afresh even when its value is unchanged:
    // over 20 collections, 4 draws; GRR at ε = 1 over 4 values draws the same report in all 4
    // epochs with probability p⁴ + 3q⁴ ≈ 0.054 (p = e/(e + 3), q = 1/(e + 3)), so 20 constant
    // devices that never show a fresh draw have probability < 10⁻²⁵.
    let mut changed = 0;
    for _ in 0..20 {
        let [constant, _] = constant_and_changing(&policy, 20);
        let firsts: std::collections::BTreeSet<_> = constant.iter().step_by(5).map(|r| r.clone().unwrap()).collect();
        changed += usize::from(firsts.len() > 1);
    }
    assert!(changed > 0, "an unchanged value re-drawn at every epoch");
}

#[test]
fn a_changed_randomizer_gets_a_fresh_report_and_other_tasks_are_refused() {
    let mut dev = device();
    let a = DeviceTask::with_policy(daily(0), policy()).unwrap();
    let r1 = dev.prepare_series(&a, "s", &Input::Record(&record(0))).unwrap();
    // The server changes ε within the series: not the same randomizer, a new report, charged.
    let spec = TaskSpec::Frequency(FrequencySpec { attribute: "colour".into(), mechanism: Some(OracleKind::Grr) });
    let b = DeviceTask::with_policy(config("day-1", 2.0, spec), policy()).unwrap();
    dev.prepare_series(&b, "s", &Input::Record(&record(0))).unwrap();
    assert_eq!(dev.spends().len(), 2);
    // The same collection again: the ledger's entry (same report id), no new charge.
    let again = dev.prepare_series(&a, "s", &Input::Record(&record(0))).unwrap();
    assert_eq!(again.item, r1.item);
    let means = config("m", 1.0, TaskSpec::Means(MeansSpec::default()));
    let m = DeviceTask::with_policy(means, policy()).unwrap();
    let e = dev.prepare_series(&m, "s", &Input::Record(&record(0))).unwrap_err();
    assert!(matches!(&e, ClientError::Policy { rule, .. } if rule == "memoization"), "{e}");
    let mut bare = Device::new(MemoryLedger::default());
    let e = bare.prepare_series(&a, "s", &Input::Record(&record(0))).unwrap_err();
    assert!(e.to_string().contains("without a clock"), "{e}");
}
