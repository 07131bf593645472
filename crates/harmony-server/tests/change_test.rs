//! The change test between windows ([`harmony_server::compare`]) is calibrated: on simulated
//! frequency reports with no change, |z| > 1.96 in 5 ± 1% of 2,000 pairs of disjoint windows;
//! with a planted change of 3 standard errors of the difference, |z| > 1.96 in at least 80%
//! (the normal test's power there is 85%). Each window's devices hold fixed shares: the
//! estimates' standard errors are the randomization's noise around the reporting devices' values
//! (sampling devices from a larger population would add f(1 − f)/n to each variance).

use harmony_core::sampling::{fast_rng, uniform01};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::Query;
use harmony_tasks::Input;

/// Reports per window.
const N: usize = 2_000;
const PAIRS: usize = 2_000;

fn task() -> Box<dyn harmony_tasks::Task> {
    let schema = Schema::new(vec![Attribute::Categorical {
        name: "c".into(),
        categories: vec!["a".into(), "b".into(), "d".into()],
    }])
    .unwrap();
    let task = serde_json::from_value(serde_json::json!({"kind": "frequency", "attribute": "c"})).unwrap();
    let config =
        harmony_tasks::resolve(&CreateCollection { schema: Some(schema), epsilon: 1.0, task }, "calibration").unwrap();
    harmony_tasks::build(&config).unwrap()
}

/// The result JSON of one window of `N` devices, a share `p` of them (rounded) holding category
/// `a` and the others `b` or `d` at random. The estimates' standard errors are those of the
/// reporting devices' shares (the randomization's noise): the windows' devices are their
/// populations.
fn window(task: &dyn harmony_tasks::Task, p: f64, rng: &mut harmony_core::sampling::FastRng) -> serde_json::Value {
    let mut agg = task.aggregator();
    let mut buf = Vec::new();
    let holders = (p * N as f64).round() as usize;
    for i in 0..N {
        let c = if i < holders { 0 } else { 1 + u32::from(uniform01(rng) < 0.5) };
        buf.clear();
        task.randomize(&Input::Record(&[Value::Category(c)]), rng, &mut buf).unwrap();
        agg.add(&buf).unwrap();
    }
    serde_json::to_value(task.estimate(agg.as_ref(), &Query::default()).unwrap()).unwrap()
}

/// The share of pairs (A at `pa`, B at `pb`) whose category `a` difference has |z| > 1.96, and
/// the mean standard error of the difference.
fn rejections(task: &dyn harmony_tasks::Task, pa: f64, pb: f64, seed: u64) -> (f64, f64) {
    let mut rng = fast_rng(seed);
    let (mut hits, mut se) = (0usize, 0.0);
    for _ in 0..PAIRS {
        let (a, b) = (window(task, pa, &mut rng), window(task, pb, &mut rng));
        let d = harmony_server::compare::differences(&a, &b);
        let first = d.iter().find(|d| d.path.ends_with("categories[a]")).unwrap_or_else(|| panic!("{d:?}"));
        hits += usize::from(first.z.abs() > 1.96);
        se += first.std_error;
    }
    (hits as f64 / PAIRS as f64, se / PAIRS as f64)
}

#[test]
fn change_test_is_calibrated_and_detects_a_three_se_change() {
    let task = task();
    let (null, se) = rejections(task.as_ref(), 0.3, 0.3, 1);
    assert!((0.04..=0.06).contains(&null), "no change: |z| > 1.96 in {:.2}% of {PAIRS} pairs", 100.0 * null);
    let (power, _) = rejections(task.as_ref(), 0.3, 0.3 + 3.0 * se, 2);
    assert!(power >= 0.80, "a change of 3 SEs ({:.4}): detected in {:.1}% of {PAIRS} pairs", 3.0 * se, 100.0 * power);
    eprintln!(
        "no change: {:.2}% rejected; 3 SE change ({:.4}): {:.1}% detected",
        100.0 * null,
        3.0 * se,
        100.0 * power
    );
}
