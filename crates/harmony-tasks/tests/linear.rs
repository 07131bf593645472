//! The `linear-queries` task through the task shape: simulated devices (`simulate::run`), the
//! published config, report validation, merging, and the estimate document against the truth.
//!
//! Statistical checks are z-tests at z = 4.42 (two-sided false-failure rate 1e-5 per check).
//! The heavy tier (`#[ignore]`, release: `cargo test -p harmony-tasks --release -- --ignored`)
//! checks the calibration of the closed-form MSE.

use harmony_analytics::linear::{AdaptiveQuery, GaussianReport, GaussianWorkload, HrWorkload, QueryBitReport};
use harmony_core::error::Error;
use harmony_core::frequency::HrReport;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::wire;
use harmony_protocol::estimates::{Est, LinearEstimate, Query, TaskEstimate};
use harmony_protocol::spec::{Hull, LinearMechanism, LinearQueriesSpec, TaskSpec};
use harmony_protocol::{CollectionConfig, CreateCollection};
use harmony_tasks::linear::LinearTask;
use harmony_tasks::{Input, Task, TaskAggregator, simulate};
use serde_json::json;
use std::collections::BTreeMap;

const Z: f64 = 4.42;
const MECHANISMS: [LinearMechanism; 3] = [LinearMechanism::Hr, LinearMechanism::Gaussian, LinearMechanism::Adaptive];

fn schema() -> Schema {
    Schema::new(vec![
        Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
        Attribute::Categorical { name: "sex".into(), categories: vec!["F".into(), "M".into()] },
        Attribute::Categorical { name: "race".into(), categories: vec!["a".into(), "b".into(), "c".into()] },
    ])
    .unwrap()
}

/// Domain sex × age (4 bins): J = 8; six queries of every kind.
fn spec(mechanism: LinearMechanism) -> LinearQueriesSpec {
    LinearQueriesSpec {
        attributes: vec!["sex".into(), "age".into()],
        bins: BTreeMap::from([("age".to_string(), 4)]),
        workload: json!({"queries": [
            {"name": "women", "in": ["F"], "attribute": "sex"},
            {"range": [1, 2], "attribute": "age"},
            {"and": [{"in": ["M"], "attribute": "sex"}, {"range": [0, 0], "attribute": "age"}]},
            {"weights": [1, -1, 0.5, 0, 2, 0, 0, -0.25]},
            {"range": ["[25, 50)", 3], "attribute": "age"},
            {"in": ["M"], "attribute": "sex"}
        ]}),
        mechanism,
        delta: None,
        hull: Hull::Symmetric,
        batch_size: None,
        enrollment: None,
    }
}

fn request(spec: LinearQueriesSpec, eps: f64) -> CreateCollection {
    CreateCollection { schema: Some(schema()), epsilon: eps, task: TaskSpec::LinearQueries(spec) }
}

fn task(mechanism: LinearMechanism, eps: f64) -> LinearTask {
    LinearTask::new(harmony_tasks::resolve(&request(spec(mechanism), eps), "l").unwrap()).unwrap()
}

/// n records over the domain (skewed), with age at its bin's centre and an arbitrary race.
fn population(n: usize) -> Vec<Vec<Value>> {
    (0..n)
        .map(|i| {
            let (sex, bin) = ((i % 5 == 0) as u32, [0, 1, 1, 2, 2, 2, 3][i % 7]);
            vec![
                Value::Unit(2.0 * (bin as f64 + 0.5) / 4.0 - 1.0),
                Value::Category(sex),
                Value::Category((i % 3) as u32),
            ]
        })
        .collect()
}

fn inputs(rows: &[Vec<Value>]) -> Vec<Input<'_>> {
    rows.iter().map(|r| Input::Record(r)).collect()
}

/// The domain distribution of the inputs, by the task's own encoding.
fn distribution(task: &LinearTask, ins: &[Input<'_>]) -> Vec<f64> {
    let mut p = vec![0.0; task.domain().size()];
    for i in ins {
        p[task.index(i).unwrap()] += 1.0 / ins.len() as f64;
    }
    p
}

fn doc(task: &dyn Task, agg: &dyn TaskAggregator) -> LinearEstimate {
    match task.estimate(agg, &Query::default()).unwrap() {
        TaskEstimate::LinearQueries(d) => d,
        other => panic!("not a linear document: {other:?}"),
    }
}

/// The closed-form variance of every answer at the truth p (adaptive: at the realized sizes).
fn variances(task: &LinearTask, mech: LinearMechanism, eps: f64, p: &[f64], n: u64, groups: &[u64]) -> Vec<f64> {
    let w = task.workload().clone();
    match mech {
        LinearMechanism::Hr => HrWorkload::new(eps, w).unwrap().variances(p, n),
        LinearMechanism::Gaussian => {
            vec![GaussianWorkload::new(eps, 1e-6, w.clone()).unwrap().answer_variance(n); w.queries()]
        }
        LinearMechanism::Adaptive | LinearMechanism::AdaptiveRounds => {
            (0..w.queries()).map(|t| AdaptiveQuery::new(eps, w.row(t)).unwrap().variance(p, n, groups[t])).collect()
        }
    }
}

/// Over 200 collections of 2,000 devices, every query's error standardized by its closed-form
/// variance at the truth (adaptive: at the realized group sizes) has mean 0 (z = 4.42); the
/// projected answers stay in the workload's range.
#[test]
fn unbiased_against_the_truth_with_the_closed_form() {
    let (n, runs, eps) = (2000, 200, 1.0);
    let rows = population(n);
    let ins = inputs(&rows);
    for mech in MECHANISMS {
        let task = task(mech, eps);
        let p = distribution(&task, &ins);
        let truth = task.workload().apply(&p);
        let mut z1 = vec![0.0; truth.len()];
        for r in 0..runs {
            let agg = simulate::run(&task, &ins, 300 + r).unwrap();
            let d = doc(&task, agg.as_ref());
            assert_eq!((d.domain_size, d.queries.len()), (8, 6));
            assert_eq!(d.projection_bound.is_some(), mech == LinearMechanism::Gaussian);
            assert!(d.projection_bound.unwrap_or(0.0) < 1e-3, "{d:?}");
            let var = variances(&task, mech, eps, &p, n as u64, &d.group_reports);
            for (t, q) in d.queries.iter().enumerate() {
                z1[t] += (q.answer.value() - truth[t]) / var[t].sqrt();
                assert_eq!(q.projected.is_some(), mech != LinearMechanism::Adaptive);
            }
        }
        for (t, z) in z1.iter().enumerate() {
            let mean = z / runs as f64;
            assert!(mean.abs() < Z / (runs as f64).sqrt(), "{mech:?} query {t}: mean standardized error {mean}");
        }
    }
}

/// The fast `simulate` path draws what devices draw: bit-identical documents.
#[test]
fn fast_path_equals_devices() {
    let rows = population(3000);
    let ins = inputs(&rows);
    for mech in MECHANISMS {
        let task = task(mech, 2.0);
        let fast = task.simulate(&ins, 11, 77).unwrap();
        let slow = simulate::sequential(&task, &ins, 11, 77).unwrap();
        assert_eq!(doc(&task, fast.as_ref()), doc(&task, slow.as_ref()), "{mech:?}");
    }
}

/// Two halves merged give the one-pass document; another collection's accumulator does not
/// merge.
#[test]
fn merge_of_two_halves_equals_one_pass() {
    let rows = population(1500);
    let ins = inputs(&rows);
    for mech in MECHANISMS {
        let task = task(mech, 1.0);
        let all = simulate::sequential(&task, &ins, 3, 0).unwrap();
        let mut a = simulate::sequential(&task, &ins[..600], 3, 0).unwrap();
        a.merge(simulate::sequential(&task, &ins[600..], 3, 600).unwrap().as_ref()).unwrap();
        assert_eq!(doc(&task, a.as_ref()), doc(&task, all.as_ref()), "{mech:?}");
        assert!(a.merge(self::task(mech, 2.0).aggregator().as_ref()).is_err(), "{mech:?}: another ε");
    }
}

/// No report: every answer is null; adaptive queries without a report stay null.
#[test]
fn no_reports_give_no_estimates() {
    for mech in MECHANISMS {
        let task = task(mech, 1.0);
        let d = doc(&task, task.aggregator().as_ref());
        assert!(d.queries.iter().all(|q| q.answer == Est::NONE && q.projected.is_none()), "{mech:?}: {d:?}");
        assert_eq!(d.projection_bound, None);
    }
    let task = task(LinearMechanism::Adaptive, 1.0);
    let rows = population(3);
    let d = doc(&task, simulate::sequential(&task, &inputs(&rows), 1, 0).unwrap().as_ref());
    assert_eq!(d.group_reports.iter().sum::<u64>(), 3);
    for (q, &m) in d.queries.iter().zip(&d.group_reports) {
        assert_eq!(q.answer == Est::NONE, m == 0);
    }
}

/// The published config round-trips through JSON (δ written out for gaussian) and builds the
/// same task on a device; CSV and matrix workloads are read inline.
#[test]
fn resolve_and_build_round_trip() {
    for mech in MECHANISMS {
        let config = harmony_tasks::resolve(&request(spec(mech), 1.0), "c").unwrap();
        let TaskSpec::LinearQueries(s) = &config.task else { panic!() };
        assert_eq!(s.delta, (mech == LinearMechanism::Gaussian).then_some(1e-6));
        let back: CollectionConfig = serde_json::from_str(&serde_json::to_string(&config).unwrap()).unwrap();
        assert_eq!(back, config);
        let (server, device) = (harmony_tasks::build(&config).unwrap(), harmony_tasks::build(&back).unwrap());
        for (i, r) in population(40).iter().enumerate() {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            server.randomize(&Input::Record(r), &mut simulate::device_rng(9, i as u64), &mut a).unwrap();
            device.randomize(&Input::Record(r), &mut simulate::device_rng(9, i as u64), &mut b).unwrap();
            assert_eq!(a, b);
            server.validate(&b).unwrap();
        }
    }
    let csv =
        LinearQueriesSpec { workload: json!("women,1,1,1,1,0,0,0,0\n0,0,0,0,1,1,1,1\n"), ..spec(LinearMechanism::Hr) };
    let t = LinearTask::new(harmony_tasks::resolve(&request(csv, 1.0), "c").unwrap()).unwrap();
    assert_eq!((t.workload().queries(), t.workload().name(0), t.workload().name(1)), (2, "women", "q1"));
    let matrix = LinearQueriesSpec {
        workload: json!({"matrix": [[1, 0, 0, 0, 0, 0, 0, 0]], "names": ["first"]}),
        ..spec(LinearMechanism::Hr)
    };
    let t = LinearTask::new(harmony_tasks::resolve(&request(matrix, 1.0), "c").unwrap()).unwrap();
    assert_eq!(t.workload().name(0), "first");
    let prefix = LinearQueriesSpec { workload: json!("prefix"), ..spec(LinearMechanism::Adaptive) };
    let t = LinearTask::new(harmony_tasks::resolve(&request(prefix, 1.0), "c").unwrap()).unwrap();
    assert_eq!(t.workload().queries(), 8);
    // The domain index: sex is the first coordinate, age (4 bins) the fastest.
    assert_eq!(t.index(&Input::Record(&[Value::Unit(0.9), Value::Category(1), Value::Category(0)])).unwrap(), 7);
    assert_eq!(t.index(&Input::Record(&[Value::Unit(-1.0), Value::Category(0), Value::Category(2)])).unwrap(), 0);
}

fn resolve_err(s: LinearQueriesSpec) -> String {
    harmony_tasks::resolve(&request(s, 1.0), "c").unwrap_err().to_string()
}

#[test]
fn bad_specs_name_the_field() {
    let base = || spec(LinearMechanism::Hr);
    let cases = [
        (LinearQueriesSpec { attributes: vec![], ..base() }, "task.attributes is \"[]\""),
        (LinearQueriesSpec { attributes: vec!["sex".into(), "nope".into()], ..base() }, "task.attributes is \"nope\""),
        (LinearQueriesSpec { bins: BTreeMap::new(), ..base() }, "task.bins is age: missing"),
        (
            LinearQueriesSpec { bins: BTreeMap::from([("age".into(), 4), ("sex".into(), 2)]), ..base() },
            "task.bins is \"sex\"",
        ),
        (
            LinearQueriesSpec { bins: BTreeMap::from([("age".into(), 4), ("race".into(), 2)]), ..base() },
            "task.bins is \"race\"",
        ),
        (LinearQueriesSpec { bins: BTreeMap::from([("age".into(), 1)]), ..base() }, "task.bins is age: 1"),
        (LinearQueriesSpec { workload: json!("identiy"), ..base() }, "task.workload is \"identiy\""),
        (LinearQueriesSpec { workload: json!(3), ..base() }, "task.workload is Number(3)"),
        (
            LinearQueriesSpec { workload: json!({"queries": [{"in": ["F"], "attribute": "race"}]}), ..base() },
            "task.workload is queries[0].attribute is \"race\"",
        ),
        (LinearQueriesSpec { workload: json!("a,1,2\n"), ..base() }, "task.workload is CSV line 1"),
        (LinearQueriesSpec { delta: Some(1e-6), ..base() }, "task.delta is 1e-6"),
        (LinearQueriesSpec { delta: Some(1.0), ..spec(LinearMechanism::Gaussian) }, "task.delta is 1.0"),
    ];
    for (s, want) in cases {
        let e = resolve_err(s.clone());
        assert!(e.contains(want), "{s:?}:\n{e}\nexpected: {want}");
    }
    // 2,000 Gaussian answers do not fit in a report; HR's report does not grow with d.
    let big = json!({"matrix": vec![vec![1, 0, 0, 0, 0, 0, 0, 0]; 2000]});
    let e = resolve_err(LinearQueriesSpec { workload: big.clone(), ..spec(LinearMechanism::Gaussian) });
    assert!(e.contains("task.workload is \"2000 queries\"") && e.contains("4096 bytes"), "{e}");
    harmony_tasks::resolve(&request(LinearQueriesSpec { workload: big, ..base() }, 1.0), "c").unwrap();
    // Huge entries against a small sensitivity would overflow the 64-bit sums: refused.
    let offset = json!({"matrix": [[1e12, 1e12, 1e12, 1e12, 1e12, 1e12, 1e12, 1e12 + 1.0]]});
    let e = resolve_err(LinearQueriesSpec { workload: offset, ..spec(LinearMechanism::Gaussian) });
    assert!(e.contains("task.workload is \"entries up to") && e.contains("shift the queries"), "{e}");
}

/// `validate` rejects what no device sends, naming the field.
#[test]
fn bad_reports_are_rejected() {
    let mut rng = simulate::device_rng(2, 2);
    for (mech, field, bad) in [
        (LinearMechanism::Hr, "y", wire::encode(&HrReport { y: 1 << 30 })),
        (LinearMechanism::Gaussian, "values", wire::encode(&GaussianReport { values: vec![0; 5] })),
        (
            LinearMechanism::Gaussian,
            "values[2]",
            wire::encode(&GaussianReport { values: vec![0, 0, i64::MIN, 0, 0, 0] }),
        ),
        (LinearMechanism::Adaptive, "query", wire::encode(&QueryBitReport { query: 6, positive: true })),
    ] {
        let task = task(mech, 1.0);
        let mut good = Vec::new();
        task.randomize(&Input::Record(&population(1)[0]), &mut rng, &mut good).unwrap();
        task.validate(&good).unwrap();
        let field_of = |bytes: &[u8]| match task.validate(bytes).unwrap_err() {
            Error::InvalidReport { field, .. } => field,
            other => panic!("{mech:?}: {other}"),
        };
        assert_eq!(field_of(&good[..1]), "header");
        assert_eq!(field_of(&[good.as_slice(), &[0]].concat()), "payload");
        let mut kind = good.clone();
        kind[1] = 21;
        assert_eq!(field_of(&kind), "kind");
        assert_eq!(field_of(&bad), field, "{mech:?}");
    }
}

/// Heavy tier: the closed-form MSE is calibrated: over 300 collections of 20,000 devices, the
/// summed squared error of the six answers divided by the summed closed-form variance lies in
/// [0.85, 1.15] for every mechanism.
#[test]
#[ignore = "heavy statistical tier: run in release with --ignored"]
fn heavy_mse_matches_the_closed_form() {
    let (n, runs, eps) = (20_000, 300, 1.0);
    let rows = population(n);
    let ins = inputs(&rows);
    for mech in MECHANISMS {
        let task = task(mech, eps);
        let p = distribution(&task, &ins);
        let truth = task.workload().apply(&p);
        let (mut sq, mut pred) = (0.0, 0.0);
        for r in 0..runs {
            let d = doc(&task, simulate::run(&task, &ins, 9000 + r).unwrap().as_ref());
            let var = variances(&task, mech, eps, &p, n as u64, &d.group_reports);
            for (t, q) in d.queries.iter().enumerate() {
                sq += (q.answer.value() - truth[t]).powi(2);
                pred += var[t];
            }
        }
        let ratio = sq / pred;
        println!("{mech:?}: MSE/predicted = {ratio:.4}");
        assert!((0.85..=1.15).contains(&ratio), "{mech:?}: MSE / predicted = {ratio}");
    }
}

/// `adaptive-rounds`: `batch_size` required (and refused elsewhere), a list of queries, errors
/// naming the field; `simulate` runs the rounds in order (device i answers round ⌊i/g⌋ + 1, the
/// devices after the last round do not report) through the device's randomizer.
#[test]
fn adaptive_rounds_spec_and_simulate() {
    let rounds = || LinearQueriesSpec { batch_size: Some(10), ..spec(LinearMechanism::AdaptiveRounds) };
    let cases = [
        (LinearQueriesSpec { batch_size: None, ..rounds() }, "task.batch_size is \"missing\""),
        (LinearQueriesSpec { batch_size: Some(0), ..rounds() }, "task.batch_size is 0"),
        (LinearQueriesSpec { batch_size: Some(5), ..spec(LinearMechanism::Hr) }, "no batch_size with mechanism hr"),
        (LinearQueriesSpec { workload: json!("prefix"), ..rounds() }, "expected {\"queries\": [Q, ...]}"),
        (LinearQueriesSpec { delta: Some(1e-6), ..rounds() }, "task.delta is 1e-6"),
        (LinearQueriesSpec { enrollment: Some(true), ..spec(LinearMechanism::Hr) }, "no enrollment with mechanism hr"),
    ];
    for (s, want) in cases {
        let e = resolve_err(s.clone());
        assert!(e.contains(want), "{s:?}:\n{e}\nexpected: {want}");
    }
    let t = LinearTask::new(harmony_tasks::resolve(&request(rounds(), 1.0), "c").unwrap()).unwrap();
    let rows = population(100);
    let ins = inputs(&rows);
    let agg = t.simulate(&ins, 3, 0).unwrap();
    let d = doc(&t, agg.as_ref());
    assert_eq!((d.mechanism.as_str(), d.group_reports.clone()), ("adaptive-rounds", vec![10; 6]));
    // By hand: device i randomizes round ⌊i/10⌋ + 1's query through `Task::randomize`.
    let mut by_hand = t.rounds().unwrap().clone();
    let mut out = Vec::new();
    for (i, input) in ins.iter().take(60).enumerate() {
        let round = by_hand.state();
        assert_eq!(round.round, i as u64 / 10 + 1);
        let answer = Input::Answer { record: input.record("x").unwrap(), round: &round };
        t.randomize(&answer, &mut simulate::device_rng(3, i as u64), &mut out).unwrap();
        by_hand.add(&out).unwrap();
    }
    assert_eq!(doc(&t, &by_hand), d);
    assert!(t.randomize(&ins[0], &mut simulate::device_rng(3, 0), &mut out).unwrap_err().to_string().contains("round"));
}
