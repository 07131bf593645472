use super::*;
use crate::simulate;
use harmony_analytics::marginals::Dataset;
use harmony_analytics::marginals::calm::GlsModel;
use harmony_analytics::marginals::joint::component_energies;
use harmony_core::frequency::{AdaptiveReport, GrrReport};
use harmony_core::sampling::{fast_rng, uniform_below};
use harmony_protocol::CreateCollection;
use std::collections::BTreeMap;

fn schema() -> Schema {
    let cat = |name: &str, labels: &[&str]| Attribute::Categorical {
        name: name.into(),
        categories: labels.iter().map(|s| s.to_string()).collect(),
    };
    Schema::new(vec![
        cat("a", &["x", "y", "z"]),
        cat("b", &["no", "yes"]),
        Attribute::Numeric { name: "age".into(), min: 0.0, max: 80.0 },
        cat("c", &["p", "q", "r", "s"]),
        Attribute::Numeric { name: "unused".into(), min: 0.0, max: 1.0 },
    ])
    .unwrap()
}

/// n encoded records with correlated attributes.
fn records(n: usize, seed: u64) -> Vec<Vec<Value>> {
    let mut rng = fast_rng(seed);
    let mut u = |k: u64| uniform_below(&mut rng, k) as u32;
    (0..n)
        .map(|_| {
            let a = u(3);
            let b = if u(4) == 0 { u(2) } else { a.min(1) };
            let age = ((a + b) as f64 + u(100) as f64 / 100.0) / 2.5 - 0.99;
            let c = if u(3) == 0 { u(4) } else { (a + 2 * b) % 4 };
            vec![Value::Category(a), Value::Category(b), Value::Unit(age), Value::Category(c), Value::Unit(0.0)]
        })
        .collect()
}

fn spec(method: MarginalsMethod, post: Option<MarginalsPost>) -> MarginalsSpec {
    MarginalsSpec {
        attributes: None,
        bins: BTreeMap::from([("age".to_string(), 4)]),
        ways: None,
        method,
        post,
        l: None,
        users: None,
        sets: None,
    }
}

fn build(spec: MarginalsSpec, epsilon: f64) -> MarginalsTask {
    let req = CreateCollection { schema: Some(schema()), epsilon, task: TaskSpec::Marginals(spec) };
    MarginalsTask::new(crate::resolve(&req, "m").unwrap()).unwrap()
}

fn doc(task: &dyn Task, agg: &dyn TaskAggregator) -> MarginalsEstimate {
    match task.estimate(agg, &Query::default()).unwrap() {
        TaskEstimate::Marginals(d) => d,
        other => panic!("{other:?}"),
    }
}

/// The truth of a collection: the layout's names and cardinalities, the devices' codes, and the
/// queries as attribute indices.
struct Truth {
    names: Vec<String>,
    cards: Vec<usize>,
    data: Dataset,
    queries: Vec<Vec<usize>>,
}

impl Truth {
    fn new(t: &MarginalsTask, rows: &[Vec<Value>], d: &MarginalsEstimate) -> Self {
        let codes: Vec<u32> = rows.iter().flat_map(|r| t.codes(r).unwrap()).collect();
        let names = t.layout.names.clone();
        let cards = t.layout.cards.clone();
        let index = |n: &String| names.iter().position(|a| a == n).unwrap();
        let queries = d.marginals.iter().map(|m| m.attributes.iter().map(index).collect()).collect();
        let data = Dataset::new(names.clone(), cards.clone(), codes).unwrap();
        Truth { names, cards, data, queries }
    }
    fn sets(&self, d: &MarginalsEstimate) -> Vec<Vec<usize>> {
        d.sets.iter().map(|s| s.iter().map(|n| self.names.iter().position(|a| a == n).unwrap()).collect()).collect()
    }
    /// Each query's closed-form cell variances at the truth with the collection's realized
    /// group counts (raw CALM, direct, Fourier).
    fn cell_variances(&self, method: MarginalsMethod, d: &MarginalsEstimate, epsilon: f64) -> Vec<Vec<f64>> {
        let n: u64 = d.group_reports.iter().sum();
        if method == MarginalsMethod::Fourier {
            let plan = FourierPlan::new(&self.names, &self.cards, epsilon, &self.queries).unwrap();
            let theta = plan.coefficients_of((0..self.data.n()).map(|i| self.data.record(i)));
            return (0..self.queries.len())
                .map(|qi| plan.cell_variances(qi, &theta, &d.group_reports).unwrap())
                .collect();
        }
        let sizes: Vec<usize> = d.group_reports.iter().map(|&s| s as usize).collect();
        let (names, cards) = (&self.names, &self.cards);
        let plan = match method {
            MarginalsMethod::Direct => CalmPlan::direct(names, cards, n as usize, epsilon, &self.queries, MAX_CELLS),
            _ => CalmPlan::with_sets(names, cards, n as usize, epsilon, self.sets(d), &self.queries, MAX_CELLS),
        }
        .unwrap();
        (0..self.queries.len())
            .map(|qi| plan.raw_cell_variances(qi, &sizes, &self.data.true_marginal(&self.queries[qi])))
            .collect()
    }
    /// The GLS model's predicted SSE of each query at the truth (CALM `gls`).
    fn gls_sse(&self, d: &MarginalsEstimate, epsilon: f64) -> Vec<f64> {
        let n: u64 = d.group_reports.iter().sum();
        let plan =
            CalmPlan::with_sets(&self.names, &self.cards, n as usize, epsilon, self.sets(d), &self.queries, MAX_CELLS)
                .unwrap();
        let sizes: Vec<usize> = d.group_reports.iter().map(|&s| s as usize).collect();
        let model: GlsModel = plan.gls_model(&sizes);
        self.queries
            .iter()
            .map(|q| {
                let cards: Vec<usize> = q.iter().map(|&a| self.cards[a]).collect();
                let e = component_energies(&self.data.true_marginal(q), &cards);
                model.query_sse(q, Some(&e)).unwrap()
            })
            .collect()
    }
}

const METHODS: [MarginalsMethod; 3] = [MarginalsMethod::Calm, MarginalsMethod::Direct, MarginalsMethod::Fourier];

/// Through the simulated devices (each drawing its group), every cell of CALM's raw answer,
/// direct's and Fourier's is within z = 5.64 closed-form standard errors (at the truth, with the
/// realized group counts) of the truth: two-sided 1.7e-8 per cell, Bonferroni over the 3 × 190
/// cells: < 1e-5 in all. The reported (plug-in) variances of each marginal sum to within 25% of
/// the closed form's and to within 10% of the predicted SSE (the same formulas at the clamped
/// estimates).
#[test]
fn cells_are_unbiased_with_the_closed_form_standard_error() {
    let rows = records(30_000, 1);
    let inputs: Vec<Input> = rows.iter().map(|r| Input::Record(r)).collect();
    for method in METHODS {
        let post = (method == MarginalsMethod::Calm).then_some(MarginalsPost::Raw);
        let t = build(spec(method, post), 2.0);
        let agg = simulate::run(&t, &inputs, 5).unwrap();
        let d = doc(&t, agg.as_ref());
        assert_eq!(d.post, if method == MarginalsMethod::Calm { "raw" } else { "none" });
        assert_eq!(d.marginals.len(), 10, "6 pairs and 4 triples of a, b, age, c");
        assert_eq!(d.marginals[1].labels[1], vec!["[0, 20)", "[20, 40)", "[40, 60)", "[60, 80)"]);
        let truth = Truth::new(&t, &rows, &d);
        let vars = truth.cell_variances(method, &d, 2.0);
        for (qi, m) in d.marginals.iter().enumerate() {
            let want = truth.data.true_marginal(&truth.queries[qi]);
            for (c, cell) in m.cells.iter().enumerate() {
                let z = (cell.value() - want[c]) / vars[qi][c].sqrt();
                assert!(
                    z.abs() < 5.64,
                    "{method:?} {:?} cell {c}: {} vs {} (z {z:.2})",
                    m.attributes,
                    cell.value(),
                    want[c]
                );
            }
            let reported: f64 = m.cells.iter().map(|c| c.se() * c.se()).sum();
            let closed: f64 = vars[qi].iter().sum();
            assert!((reported / closed - 1.0).abs() < 0.25, "{method:?} {:?}: {reported} vs {closed}", m.attributes);
            let predicted = m.predicted_sse.unwrap();
            assert!((predicted / reported - 1.0).abs() < 0.1, "{method:?}: predicted {predicted} vs {reported}");
        }
    }
}

/// CALM's post-processed answers are consistent non-negative tables with the GLS guide as
/// standard error and no interval; `gls` is unbiased and its guide is its predicted SSE.
#[test]
fn post_processed_cells_carry_the_gls_guide() {
    let rows = records(20_000, 2);
    let inputs: Vec<Input> = rows.iter().map(|r| Input::Record(r)).collect();
    for (post, name) in [(None, "joint"), (Some(MarginalsPost::Family), "family"), (Some(MarginalsPost::Gls), "gls")] {
        let t = build(spec(MarginalsMethod::Calm, post), 1.0);
        let d = doc(&t, simulate::run(&t, &inputs, 3).unwrap().as_ref());
        assert_eq!(d.post, name);
        for m in &d.marginals {
            let total: f64 = m.cells.iter().map(Est::value).sum();
            assert!((total - 1.0).abs() < 1e-9, "{name}: {total}");
            let guide = (m.predicted_sse.unwrap() / m.cells.len() as f64).sqrt();
            for c in &m.cells {
                assert!(c.ci95.is_none() && (c.se() - guide).abs() < 1e-15, "{name}: {c:?}");
                assert!(name == "gls" || c.value() >= 0.0, "{name}: {c:?}");
            }
        }
    }
}

/// The published config goes through JSON unchanged (CALM's sets written out), builds the same
/// task through the registry, and resolving it again changes nothing.
#[test]
fn config_round_trips_and_resolve_is_idempotent() {
    let rows = records(3_000, 4);
    let inputs: Vec<Input> = rows.iter().map(|r| Input::Record(r)).collect();
    for method in METHODS {
        let req =
            CreateCollection { schema: Some(schema()), epsilon: 1.5, task: TaskSpec::Marginals(spec(method, None)) };
        let config = crate::resolve(&req, "m").unwrap();
        let TaskSpec::Marginals(out) = &config.task else { unreachable!() };
        assert_eq!(out.attributes.as_deref().unwrap(), ["a", "b", "age", "c"]);
        assert_eq!(out.ways, Some(vec![2, 3]));
        assert_eq!(out.sets.is_some(), method == MarginalsMethod::Calm);
        assert_eq!(out.post.is_some(), method == MarginalsMethod::Calm);
        let back = CollectionConfig::from_json(&serde_json::to_string(&config).unwrap()).unwrap();
        assert_eq!(back, config);
        let again = CreateCollection { schema: Some(schema()), epsilon: 1.5, task: config.task.clone() };
        assert_eq!(crate::resolve(&again, "m").unwrap(), config);
        let (a, b) = (crate::build(&config).unwrap(), crate::build(&back).unwrap());
        let agg = simulate::run(a.as_ref(), &inputs, 9).unwrap();
        let (da, db) = (a.estimate(agg.as_ref(), &Query::default()), b.estimate(agg.as_ref(), &Query::default()));
        assert_eq!(da.unwrap(), db.unwrap());
    }
}

/// `validate` rejects a bad report and names the field; a valid one passes.
#[test]
fn bad_reports_are_rejected_naming_the_field() {
    let calm = build(spec(MarginalsMethod::Calm, None), 1.0);
    let fourier = build(spec(MarginalsMethod::Fourier, None), 1.0);
    let rows = records(1, 5);
    for t in [&calm, &fourier] {
        let mut good = Vec::new();
        t.randomize(&Input::Record(&rows[0]), &mut simulate::device_rng(1, 0), &mut good).unwrap();
        t.validate(&good).unwrap();
        assert!(t.validate(&good[..good.len() - 1]).unwrap_err().to_string().contains("payload"));
        assert!(t.validate(&[1]).unwrap_err().to_string().contains("header"));
    }
    let m = match &calm.spec.sets {
        Some(s) => s.len() as u32,
        None => unreachable!(),
    };
    let cases = [
        (wire::encode(&GroupReport { group: m, report: AdaptiveReport::Grr(GrrReport { y: 0 }) }), "group is"),
        (
            wire::encode(&GroupReport { group: 0, report: AdaptiveReport::Grr(GrrReport { y: 1 << 20 }) }),
            "invalid report",
        ),
        (wire::encode(&FourierReport { coefficient: 0, positive: true }), "kind is 32"),
    ];
    for (bytes, want) in cases {
        let e = calm.validate(&bytes).unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    let Method::Fourier { plan, .. } = &fourier.method else { unreachable!() };
    let bad = wire::encode(&FourierReport { coefficient: plan.coefficients() as u32, positive: false });
    assert!(fourier.validate(&bad).unwrap_err().to_string().contains("coefficient is"));
}

/// The state is integer counts: two halves merged give the one-pass estimate (bit-identical),
/// and so does the chunked run.
#[test]
fn merge_of_two_halves_equals_one_pass() {
    let rows = records(9_000, 6);
    let inputs: Vec<Input> = rows.iter().map(|r| Input::Record(r)).collect();
    for method in METHODS {
        let t = build(spec(method, None), 1.0);
        let one = simulate::sequential(&t, &inputs, 13, 0).unwrap();
        let mut a = t.simulate(&inputs[..4_000], 13, 0).unwrap();
        a.merge(t.simulate(&inputs[4_000..], 13, 4_000).unwrap().as_ref()).unwrap();
        let chunked = simulate::run(&t, &inputs, 13).unwrap();
        let want = doc(&t, one.as_ref());
        assert_eq!(doc(&t, a.as_ref()), want, "{method:?}");
        assert_eq!(doc(&t, chunked.as_ref()), want, "{method:?}");
        assert_eq!(a.count(), 9_000);
    }
}

/// No report: every cell `null`, no predicted error. A few devices: the groups without reports
/// are dropped, cells are estimated where some group informs them and `null` elsewhere.
#[test]
fn without_reports_there_is_no_estimate() {
    for method in METHODS {
        let t = build(spec(method, None), 1.0);
        let d = doc(&t, t.aggregator().as_ref());
        assert!(d.group_reports.iter().all(|&c| c == 0));
        for m in &d.marginals {
            assert!(m.predicted_sse.is_none() && m.cells.iter().all(|c| *c == Est::NONE), "{method:?}");
        }
        let rows = records(3, 7);
        let inputs: Vec<Input> = rows.iter().map(|r| Input::Record(r)).collect();
        let d = doc(&t, simulate::run(&t, &inputs, 1).unwrap().as_ref());
        assert_eq!(d.group_reports.iter().sum::<u64>(), 3);
        for m in &d.marginals {
            let none = m.cells.iter().filter(|c| c.estimate.is_none()).count();
            assert!(none == 0 || none == m.cells.len(), "{method:?} {:?}", m.attributes);
        }
    }
}

/// Spec and input errors name the field, the value and what was expected.
#[test]
fn errors_name_the_field() {
    let base = spec(MarginalsMethod::Calm, None);
    let named = |attrs: &[&str]| Some(attrs.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let bad = [
        (MarginalsSpec { attributes: named(&["a", "nope"]), ..base.clone() }, "task.attributes is \"nope\""),
        (MarginalsSpec { attributes: named(&["a", "a"]), ..base.clone() }, "listed twice"),
        (MarginalsSpec { attributes: named(&["a", "unused"]), ..base.clone() }, "task.bins is \"unused\""),
        (MarginalsSpec { attributes: named(&["a"]), ..base.clone() }, "task.attributes"),
        (MarginalsSpec { bins: BTreeMap::from([("a".into(), 3)]), ..base.clone() }, "task.bins is \"a\""),
        (MarginalsSpec { bins: BTreeMap::from([("age".into(), 1)]), ..base.clone() }, "task.bins is \"age = 1\""),
        (MarginalsSpec { ways: Some(vec![5]), ..base.clone() }, "task.ways"),
        (MarginalsSpec { ways: Some(vec![0, 2]), ..base.clone() }, "task.ways"),
        (MarginalsSpec { users: Some(0), ..base.clone() }, "task.users is 0"),
        (MarginalsSpec { l: Some(9), ..base.clone() }, "task.l is 9"),
        (MarginalsSpec { sets: Some(vec![vec!["a".into(), "zz".into()]]), ..base.clone() }, "task.sets"),
        (MarginalsSpec { sets: Some(vec![vec!["a".into(), "b".into()]]), ..base.clone() }, "task.sets"),
        (MarginalsSpec { post: Some(MarginalsPost::Gls), ..spec(MarginalsMethod::Direct, None) }, "task.post"),
        (MarginalsSpec { users: Some(10), ..spec(MarginalsMethod::Fourier, None) }, "task.users"),
    ];
    for (s, want) in bad {
        let e = resolve(&s, &schema(), 1.0).unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    let t = build(base, 1.0);
    let mut out = Vec::new();
    let mut rng = simulate::device_rng(1, 0);
    let e = t.randomize(&Input::Items(&[]), &mut rng, &mut out).unwrap_err().to_string();
    assert!(e.contains("a record"), "{e}");
    let mut row = records(1, 8).remove(0);
    row[3] = Value::Category(4);
    let e = t.randomize(&Input::Record(&row), &mut rng, &mut out).unwrap_err().to_string();
    assert!(e.contains("c is") && e.contains("[0, 4)"), "{e}");
    row[3] = Value::Category(0);
    row[2] = Value::Category(0);
    let e = t.randomize(&Input::Record(&row), &mut rng, &mut out).unwrap_err().to_string();
    assert!(e.contains("age is") && e.contains("[-1, 1]"), "{e}");
}

/// Heavy tier (release): MSE / predicted over R = 200 collections of 20,000 devices, summed over
/// the 190 cells of the 10 marginals, in [0.85, 1.15] for CALM raw and GLS (the prediction at
/// the truth with each run's realized group counts: exact for these unbiased answers), direct
/// and Fourier. The ratio's standard deviation is about √(2/(200·k)) with k ≥ 10 effectively
/// independent marginals, below 0.032: the band is ±4.7 of them (false failure < 1e-5 each).
/// The other post-processings are biased (projections): their error is not predicted.
#[test]
#[ignore]
fn calibration_mse_over_predicted() {
    let rows = records(20_000, 10);
    let inputs: Vec<Input> = rows.iter().map(|r| Input::Record(r)).collect();
    let r = 200;
    let cases = [
        (MarginalsMethod::Calm, Some(MarginalsPost::Raw)),
        (MarginalsMethod::Calm, Some(MarginalsPost::Gls)),
        (MarginalsMethod::Direct, None),
        (MarginalsMethod::Fourier, None),
    ];
    for (method, post) in cases {
        for eps in [1.0, 4.0] {
            let t = build(spec(method, post), eps);
            let (mut sse, mut pred) = (0.0, 0.0);
            let mut truth: Option<Truth> = None;
            for run in 0..r {
                let d = doc(&t, simulate::run(&t, &inputs, 500 + run).unwrap().as_ref());
                let tr = truth.get_or_insert_with(|| Truth::new(&t, &rows, &d));
                let predicted: Vec<f64> = match post {
                    Some(MarginalsPost::Gls) => tr.gls_sse(&d, eps),
                    _ => tr.cell_variances(method, &d, eps).iter().map(|v| v.iter().sum()).collect(),
                };
                for (qi, m) in d.marginals.iter().enumerate() {
                    let want = tr.data.true_marginal(&tr.queries[qi]);
                    sse += m.cells.iter().zip(&want).map(|(c, w)| (c.value() - w).powi(2)).sum::<f64>();
                    pred += predicted[qi];
                }
            }
            let ratio = sse / pred;
            eprintln!("marginals {method:?} {post:?} ε={eps}: MSE/predicted = {ratio:.4} over {r} runs");
            assert!((0.85..=1.15).contains(&ratio), "{method:?} {post:?} ε={eps}: MSE/predicted = {ratio}");
        }
    }
}
