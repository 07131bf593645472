//! δ is part of the device's policy: an (ε, δ) mechanism (the Gaussian linear-queries
//! mechanism) runs only when the app opts in (`approximate`), its δ is bounded by `max_delta`
//! (default 10⁻⁹), and δ is charged in the budget next to ε (basic composition: the δ of a
//! window's spends add up).

use harmony_client::{Budget, ClientError, Device, DeviceTask, Input, MemoryLedger, Policy};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::spec::{Hull, LinearMechanism, LinearQueriesSpec, TaskSpec};
use harmony_protocol::{CollectionConfig, CreateCollection};

/// A linear-queries config over 16 labels, identity workload, the Gaussian mechanism at ε and
/// the stated δ (the hostile config of the audit: ε = 1, δ = 1 − 10⁻⁹).
fn gaussian(id: &str, epsilon: f64, delta: Option<f64>) -> CollectionConfig {
    let labels = (0..16).map(|i| format!("c{i:02}")).collect();
    let schema = Schema::new(vec![Attribute::Categorical { name: "color".into(), categories: labels }]).unwrap();
    let spec = LinearQueriesSpec {
        attributes: vec!["color".into()],
        bins: Default::default(),
        workload: serde_json::json!("identity"),
        mechanism: LinearMechanism::Gaussian,
        batch_size: None,
        delta: Some(1e-6),
        hull: Hull::default(),
        enrollment: None,
    };
    let req = CreateCollection { schema: Some(schema), epsilon, task: TaskSpec::LinearQueries(spec) };
    let mut config = harmony_tasks::resolve(&req, id).unwrap();
    // The server states whatever δ it likes (0 < δ < 1 builds).
    let TaskSpec::LinearQueries(s) = &mut config.task else { unreachable!() };
    s.delta = delta;
    config
}

fn rule(e: ClientError) -> String {
    match e {
        ClientError::Policy { rule, .. } => rule,
        other => panic!("expected a policy refusal, got {other}"),
    }
}

const RECORD: [Value; 1] = [Value::Category(3)];

#[test]
fn gaussian_with_delta_near_one_is_refused_under_the_default_policy() {
    let audit = gaussian("g1", 1.0, Some(1.0 - 1e-9));
    // The task itself builds (0 < δ < 1): only the policy stands between it and the device.
    assert!(harmony_tasks::build(&audit).is_ok());
    let e = DeviceTask::new(audit.clone()).unwrap_err();
    assert!(e.to_string().contains("approximate") && e.to_string().contains("0.999999999"), "{e}");
    assert_eq!(rule(e), "approximate");
    // The server's default δ (10⁻⁶) is refused by default too: no (ε, δ) mechanism runs
    // unless the app opts in.
    assert_eq!(rule(DeviceTask::new(gaussian("g2", 1.0, Some(1e-6))).unwrap_err()), "approximate");
    // Opted in, δ is bounded by max_delta (default 10⁻⁹): the audit's δ still refused.
    let opted = Policy { approximate: true, ..Policy::default() };
    let e = DeviceTask::with_policy(audit, opted.clone()).unwrap_err();
    assert!(e.to_string().contains("limit is 0.000000001"), "{e}");
    assert_eq!(rule(e), "max_delta");
    assert_eq!(rule(DeviceTask::with_policy(gaussian("g2", 1.0, Some(1e-6)), opted.clone()).unwrap_err()), "max_delta");
    // A Gaussian config that states no δ is refused (the device assumes none).
    assert_eq!(rule(DeviceTask::with_policy(gaussian("g3", 1.0, None), opted.clone()).unwrap_err()), "max_delta");
    // NaN and negative δ never pass.
    for bad in [f64::NAN, -1e-12] {
        assert_eq!(
            rule(DeviceTask::with_policy(gaussian("g4", 1.0, Some(bad)), opted.clone()).unwrap_err()),
            "max_delta"
        );
    }
    // Within the bound it runs.
    assert!(DeviceTask::with_policy(gaussian("g5", 1.0, Some(1e-9)), opted).is_ok());
    // A policy whose own max_delta is out of [0, 1) is refused as such.
    let bad = Policy { approximate: true, max_delta: 1.0, ..Policy::default() };
    assert_eq!(rule(DeviceTask::with_policy(gaussian("g6", 1.0, Some(1e-9)), bad).unwrap_err()), "policy.max_delta");
}

#[test]
fn delta_is_charged_in_the_budget_next_to_epsilon() {
    let budget = Budget::new(10.0, 1.0).unwrap();
    let with_delta = budget.with_delta(2.5e-9).unwrap();
    let policy = |b: Budget| Policy { approximate: true, budget: Some(b), ..Policy::default() };
    // A budget without δ (the default, 0) fits no (ε, δ) collection.
    let mut device = Device::with_budget(MemoryLedger::default(), || 1_000_000u64);
    let task = DeviceTask::with_policy(gaussian("a", 1.0, Some(1e-9)), policy(budget)).unwrap();
    let e = device.prepare(&task, &Input::Record(&RECORD)).unwrap_err();
    assert!(e.to_string().contains("δ 1e-9 requested"), "{e}");
    assert_eq!(rule(e), "budget");
    assert!(device.spends().is_empty());
    // δ 2.5·10⁻⁹ per window: two collections at δ 10⁻⁹ fit, a third does not (ε would).
    for id in ["a", "b"] {
        let task = DeviceTask::with_policy(gaussian(id, 1.0, Some(1e-9)), policy(with_delta)).unwrap();
        device.prepare(&task, &Input::Record(&RECORD)).unwrap();
    }
    let charged: Vec<(f64, f64)> = device.spends().iter().map(|s| (s.epsilon, s.delta)).collect();
    assert_eq!(charged, [(1.0, 1e-9), (1.0, 1e-9)]);
    let task = DeviceTask::with_policy(gaussian("c", 1.0, Some(1e-9)), policy(with_delta)).unwrap();
    let e = device.prepare(&task, &Input::Record(&RECORD)).unwrap_err();
    assert!(e.to_string().contains("δ 2e-9 already spent"), "{e}");
    assert_eq!(rule(e), "budget");
    // The budget's δ parses from a table and round-trips; out of [0, 1) it names the field.
    let p: Policy =
        serde_json::from_str(r#"{"max_epsilon": 4, "budget": {"epsilon": 2, "days": 1, "delta": 1e-8}}"#).unwrap();
    assert_eq!(p.budget.unwrap().delta, 1e-8);
    assert_eq!(serde_json::from_str::<Policy>(&serde_json::to_string(&p).unwrap()).unwrap(), p);
    let e = serde_json::from_str::<Policy>(r#"{"max_epsilon": 4, "budget": {"epsilon": 2, "days": 1, "delta": 1}}"#)
        .unwrap_err();
    assert!(e.to_string().contains("policy.budget.delta"), "{e}");
}
