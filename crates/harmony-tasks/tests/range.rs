//! The `range` task through the task shape: simulated devices (`simulate::run`), the published
//! config, report validation, merging, and the estimate document against the truth.
//!
//! Statistical checks are z-tests at z = 4.42 (two-sided false-failure rate 1e-5 per check).
//! The heavy tier (`#[ignore]`, release: `cargo test -p harmony-tasks --release -- --ignored`)
//! checks the calibration of the closed-form MSE.

use harmony_analytics::range::{HaarAggregator, HhAggregator, RangeEstimator, cumulative};
use harmony_core::Aggregator;
use harmony_core::error::Error;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::estimates::{Est, Query, RangeEstimate, TaskEstimate};
use harmony_protocol::spec::{RangeMethod, RangeSpec, TaskSpec};
use harmony_protocol::{CollectionConfig, CreateCollection};
use harmony_tasks::{Input, Task, Typed, simulate};

const Z: f64 = 4.42;
const METHODS: [RangeMethod; 3] = [RangeMethod::Hh, RangeMethod::Haar, RangeMethod::Flat];

fn schema() -> Schema {
    Schema::new(vec![
        Attribute::Categorical { name: "c".into(), categories: vec!["a".into(), "b".into()] },
        Attribute::Numeric { name: "x".into(), min: 0.0, max: 100.0 },
    ])
    .unwrap()
}

fn request(method: RangeMethod, bins: usize, eps: f64) -> CreateCollection {
    let spec = RangeSpec { attribute: "x".into(), bins: Some(bins), method, branching: None };
    CreateCollection { schema: Some(schema()), epsilon: eps, task: TaskSpec::Range(spec) }
}

fn task(method: RangeMethod, bins: usize, eps: f64) -> Box<dyn Task> {
    harmony_tasks::build(&harmony_tasks::resolve(&request(method, bins, eps), "r").unwrap()).unwrap()
}

/// n records whose x falls in bin v of D with weight ∝ (v + 1)(D − v) + a spike at bin 2, each
/// at its bin's centre; returns the records and the true bin fractions.
fn population(n: usize, d: usize) -> (Vec<Vec<Value>>, Vec<f64>) {
    let w: Vec<f64> = (0..d).map(|v| ((v + 1) * (d - v)) as f64 + if v == 2 { 3.0 * d as f64 } else { 0.0 }).collect();
    let total: f64 = w.iter().sum();
    let (mut rows, mut acc) = (Vec::with_capacity(n), 0.0);
    for (v, wv) in w.iter().enumerate() {
        acc += wv / total;
        let upto = if v + 1 == d { n } else { (acc * n as f64).round() as usize };
        while rows.len() < upto {
            rows.push(vec![
                Value::Category((rows.len() % 2) as u32),
                Value::Unit(2.0 * (v as f64 + 0.5) / d as f64 - 1.0),
            ]);
        }
    }
    let mut f = vec![0.0; d];
    for r in &rows {
        let Value::Unit(t) = r[1] else { unreachable!() };
        f[((t + 1.0) / 2.0 * d as f64) as usize] += 1.0 / n as f64;
    }
    (rows, f)
}

fn inputs(rows: &[Vec<Value>]) -> Vec<Input<'_>> {
    rows.iter().map(|r| Input::Record(r)).collect()
}

fn doc(task: &dyn Task, agg: &dyn harmony_tasks::TaskAggregator, query: &Query) -> RangeEstimate {
    match task.estimate(agg, query).unwrap() {
        TaskEstimate::Range(d) => d,
        other => panic!("not a range document: {other:?}"),
    }
}

/// The estimator behind an accumulator (hh: its raw view is reached through `raw`), with the
/// closed-form variance at the truth and the realized level sizes.
fn predicted(task: &dyn Task, agg: &dyn harmony_tasks::TaskAggregator, a: usize, b: usize, f: &[f64]) -> (f64, f64) {
    let cum = cumulative(f);
    let parts = |e: &dyn RangeEstimator| {
        let p = e.range_variance_cum(a, b, &cum);
        (e.range_unchecked(a, b), p.noise + p.split)
    };
    match task.config().task {
        TaskSpec::Range(RangeSpec { method: RangeMethod::Hh, .. }) => {
            let e = Typed::<HhAggregator>::of(agg).unwrap().estimate().unwrap();
            let (raw, var) = parts(&e.raw());
            (raw, var)
        }
        TaskSpec::Range(RangeSpec { method: RangeMethod::Haar, .. }) => {
            parts(&Typed::<HaarAggregator>::of(agg).unwrap().estimate().unwrap())
        }
        _ => {
            let d = f.len();
            let flat = harmony_analytics::range::FlatOue::new(task.config().epsilon, d).unwrap();
            let a_ = Typed::<harmony_core::frequency::UnaryAggregator>::of(agg).unwrap();
            parts(&flat.estimate(a_).unwrap())
        }
    }
}

/// Over 150 collections of 2,000 devices (each drawing its level), every range's error
/// standardized by the closed-form variance at the truth and the realized level sizes has mean 0
/// (z = 4.42; hh: the consistent answer, standardized by the raw estimator's variance, a
/// conservative bound) and the document's CDF at D is the answer for [0, D).
#[test]
fn unbiased_against_the_truth_with_the_closed_form() {
    let (d, n, runs) = (16, 2000, 150);
    let (rows, f) = population(n, d);
    let ins = inputs(&rows);
    let ranges = [(0usize, d), (0, d / 2), (1, d - 1), (2, 3), (5, 11)];
    let query = Query {
        ranges: ranges.iter().map(|&(a, b)| [100.0 * a as f64 / d as f64, 100.0 * b as f64 / d as f64]).collect(),
        quantiles: None,
        rects: vec![],
    };
    for method in METHODS {
        let task = task(method, d, 1.0);
        let mut z1 = vec![0.0; ranges.len()];
        for r in 0..runs {
            let agg = simulate::run(task.as_ref(), &ins, 1000 + r).unwrap();
            assert_eq!(agg.count(), n as u64);
            let doc = doc(task.as_ref(), agg.as_ref(), &query);
            for (i, &(a, b)) in ranges.iter().enumerate() {
                assert_eq!(doc.ranges[i].bins, [a, b]);
                let (_, var) = predicted(task.as_ref(), agg.as_ref(), a, b, &f);
                let truth: f64 = f[a..b].iter().sum();
                if var > 0.0 {
                    z1[i] += (doc.ranges[i].share.value() - truth) / var.sqrt();
                } else {
                    assert!((doc.ranges[i].share.value() - truth).abs() < 1e-9, "{method:?} [{a},{b}) exact");
                }
            }
            let raw = |e: &Est| (e.estimate, e.std_error, e.ci95);
            assert_eq!(raw(&doc.cdf.last().unwrap().value), raw(&doc.ranges[0].share), "{method:?}: CDF at D");
        }
        for (i, &(a, b)) in ranges.iter().enumerate() {
            let mean = z1[i] / runs as f64;
            assert!(mean.abs() < Z / (runs as f64).sqrt(), "{method:?} [{a},{b}): mean standardized error {mean}");
        }
    }
}

/// The fast `simulate` path draws what devices draw: the same accumulator, bit-identical
/// documents, for every method; a device range starting anywhere (`first`) included.
#[test]
fn fast_path_equals_devices() {
    let (rows, _) = population(3000, 40);
    let ins = inputs(&rows);
    let query = Query { ranges: vec![[10.0, 35.5], [0.0, 100.0]], quantiles: Some(vec![0.25, 0.5]), rects: vec![] };
    for method in METHODS {
        let task = task(method, 40, 2.0);
        let fast = task.simulate(&ins, 7, 123).unwrap();
        let slow = simulate::sequential(task.as_ref(), &ins, 7, 123).unwrap();
        assert_eq!(doc(task.as_ref(), fast.as_ref(), &query), doc(task.as_ref(), slow.as_ref(), &query), "{method:?}");
        assert_eq!(fast.count(), 3000);
    }
}

/// Two halves of the devices merged give the one-pass document; an accumulator of another
/// collection does not merge.
#[test]
fn merge_of_two_halves_equals_one_pass() {
    let (rows, _) = population(2000, 20);
    let ins = inputs(&rows);
    let query = Query { ranges: vec![[3.0, 71.0]], quantiles: None, rects: vec![] };
    for method in METHODS {
        let task = task(method, 20, 1.0);
        let all = simulate::sequential(task.as_ref(), &ins, 5, 0).unwrap();
        let mut a = simulate::sequential(task.as_ref(), &ins[..700], 5, 0).unwrap();
        let b = simulate::sequential(task.as_ref(), &ins[700..], 5, 700).unwrap();
        a.merge(b.as_ref()).unwrap();
        assert_eq!(doc(task.as_ref(), a.as_ref(), &query), doc(task.as_ref(), all.as_ref(), &query), "{method:?}");
        let other = self::task(method, 21, 1.0).aggregator();
        assert!(a.merge(other.as_ref()).is_err(), "{method:?}: another collection's accumulator");
    }
    let freq = self::task(RangeMethod::Haar, 20, 1.0).aggregator();
    let mut hh = self::task(RangeMethod::Hh, 20, 1.0).aggregator();
    assert!(matches!(hh.merge(freq.as_ref()), Err(Error::Incompatible(_))));
}

/// No report yet (or a level without one): every number is null, never a made-up value.
#[test]
fn no_reports_give_no_estimates() {
    let query = Query { ranges: vec![[10.0, 20.0]], quantiles: Some(vec![0.5]), rects: vec![] };
    for method in METHODS {
        let task = task(method, 32, 1.0);
        let empty = doc(task.as_ref(), task.aggregator().as_ref(), &query);
        assert!(empty.cdf.iter().all(|p| p.value == Est::NONE) && empty.cdf.len() == 33, "{method:?}");
        assert_eq!(empty.ranges[0].share, Est::NONE);
        assert_eq!((empty.quantiles[0].bin, empty.quantiles[0].interval), (None, None));
        assert!(empty.level_reports.iter().all(|&c| c == 0));
        let (rows, _) = population(1, 32);
        let one = simulate::sequential(task.as_ref(), &inputs(&rows), 1, 0).unwrap();
        let d = doc(task.as_ref(), one.as_ref(), &query);
        // One report: flat estimates; hh and haar (several levels) still have an empty level.
        assert_eq!(d.ranges[0].share == Est::NONE, method != RangeMethod::Flat, "{method:?}");
    }
}

/// The published config round-trips through JSON and builds the same task on a device: same
/// reports from the same draws.
#[test]
fn resolve_and_build_round_trip() {
    for method in METHODS {
        let config = harmony_tasks::resolve(&request(method, 50, 1.0), "c1").unwrap();
        let TaskSpec::Range(spec) = &config.task else { panic!() };
        assert_eq!(spec.bins, Some(50));
        assert_eq!(spec.branching.is_some(), method == RangeMethod::Hh, "{method:?}: {spec:?}");
        let text = serde_json::to_string(&config).unwrap();
        let back: CollectionConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, config);
        assert_eq!(
            harmony_tasks::resolve(
                &CreateCollection { schema: back.schema.clone(), epsilon: 1.0, task: back.task.clone() },
                "c1"
            )
            .unwrap(),
            config,
            "resolving a resolved spec changes nothing"
        );
        let (server, device) = (harmony_tasks::build(&config).unwrap(), harmony_tasks::build(&back).unwrap());
        let (rows, _) = population(50, 50);
        for (i, r) in rows.iter().enumerate() {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            server.randomize(&Input::Record(r), &mut simulate::device_rng(3, i as u64), &mut a).unwrap();
            device.randomize(&Input::Record(r), &mut simulate::device_rng(3, i as u64), &mut b).unwrap();
            assert_eq!(a, b);
            server.validate(&b).unwrap();
        }
    }
    let config = harmony_tasks::resolve(&request(RangeMethod::Hh, 64, 1.0), "c").unwrap();
    let TaskSpec::Range(spec) = &config.task else { panic!() };
    assert_eq!(spec.branching, Some(harmony_analytics::range::choose_branching(1.0, 64).unwrap()));
}

fn resolve_err(spec: RangeSpec) -> String {
    let req = CreateCollection { schema: Some(schema()), epsilon: 1.0, task: TaskSpec::Range(spec) };
    harmony_tasks::resolve(&req, "c").unwrap_err().to_string()
}

#[test]
fn bad_specs_name_the_field() {
    let spec =
        |attribute: &str, bins, method, branching| RangeSpec { attribute: attribute.into(), bins, method, branching };
    let cases = [
        (spec("c", None, RangeMethod::Hh, None), "task.attribute is \"c\""),
        (spec("nope", None, RangeMethod::Hh, None), "task.attribute is \"nope\""),
        (spec("x", Some(1), RangeMethod::Hh, None), "task.bins is 1"),
        (spec("x", Some((1 << 16) + 1), RangeMethod::Haar, None), "task.bins is 65537"),
        (spec("x", Some(64), RangeMethod::Haar, Some(4)), "task.branching is 4"),
        (spec("x", Some(64), RangeMethod::Hh, Some(1)), "task.branching is 1"),
        (spec("x", Some(50_000), RangeMethod::Flat, None), "task.bins is 50000"),
        (spec("x", Some(50_000), RangeMethod::Hh, Some(10)), "task.bins is 50000"),
    ];
    for (s, want) in cases {
        let e = resolve_err(s.clone());
        assert!(e.contains(want), "{s:?}: {e}");
    }
    assert!(resolve_err(spec("x", Some(50_000), RangeMethod::Flat, None)).contains("4096 bytes"));
    // Haar reports stay small at the most bins.
    harmony_tasks::resolve(&request(RangeMethod::Haar, 1 << 16, 1.0), "c").unwrap();
}

/// `validate` rejects what no device sends, naming the field; `randomize` rejects a record
/// without the attribute's value.
#[test]
fn bad_reports_and_inputs_are_rejected() {
    let mut rng = simulate::device_rng(1, 1);
    for method in METHODS {
        let task = task(method, 64, 1.0);
        let mut good = Vec::new();
        task.randomize(&Input::Record(&[Value::Category(0), Value::Unit(0.0)]), &mut rng, &mut good).unwrap();
        task.validate(&good).unwrap();
        let field = |bytes: &[u8]| match task.validate(bytes).unwrap_err() {
            Error::InvalidReport { field, .. } => field,
            other => panic!("{method:?}: {other}"),
        };
        assert_eq!(field(&[]), "header");
        assert_eq!(field(&good[..good.len() - 1]), "payload");
        assert_eq!(field(&[good.as_slice(), &[0]].concat()), "payload");
        let mut wrong = good.clone();
        wrong[1] = 2;
        assert_eq!(field(&wrong), "kind");
        if method != RangeMethod::Flat {
            let mut level = good.clone();
            level[2] = 0;
            assert_eq!(field(&level), "level", "{method:?}");
            level[2] = 9;
            assert_eq!(field(&level), "level", "{method:?}");
        }
        let e = task.randomize(&Input::Record(&[Value::Category(0), Value::Category(1)]), &mut rng, &mut good);
        let e = e.unwrap_err().to_string();
        assert!(e.contains("x is") && e.contains("Category(1)"), "{e}");
        let e = task.randomize(&Input::Items(&["a".to_string()]), &mut rng, &mut good).unwrap_err();
        assert!(e.to_string().contains("a record (task range)"), "{e}");
    }
    // A report of another method (a Haar report sent to an hh collection) is of another kind.
    let (hh, haar) = (task(RangeMethod::Hh, 64, 1.0), task(RangeMethod::Haar, 64, 1.0));
    let mut r = Vec::new();
    haar.randomize(&Input::Record(&[Value::Category(0), Value::Unit(0.5)]), &mut rng, &mut r).unwrap();
    assert!(hh.validate(&r).unwrap_err().to_string().contains("kind is 21, expected 20 (HhReport)"));
}

/// A query's ranges are rounded to the nearest bin edges and its levels checked; bad ones are
/// refused with the parameter named.
#[test]
fn queries_round_to_bins_and_bad_ones_are_refused() {
    let task = task(RangeMethod::Haar, 10, 1.0);
    let (rows, _) = population(500, 10);
    let agg = simulate::run(task.as_ref(), &inputs(&rows), 2).unwrap();
    let q =
        Query { ranges: vec![[14.0, 26.0], [-50.0, 250.0], [33.0, 33.0]], quantiles: Some(vec![0.5]), rects: vec![] };
    let d = doc(task.as_ref(), agg.as_ref(), &q);
    assert_eq!(d.ranges.iter().map(|r| r.bins).collect::<Vec<_>>(), vec![[1, 3], [0, 10], [3, 3]]);
    assert_eq!(d.ranges[2].share, Est::new(0.0, 0.0), "an empty range is exactly 0");
    let qr = &d.quantiles[0];
    let [lo, hi] = qr.interval_bins.unwrap();
    assert!(lo <= qr.bin.unwrap() && qr.bin.unwrap() <= hi, "{qr:?}");
    assert_eq!(qr.value.unwrap()[1] - qr.value.unwrap()[0], 10.0);
    for (bad, name) in [
        (Query { ranges: vec![[5.0, 1.0]], quantiles: None, rects: vec![] }, "query.ranges[0]"),
        (Query { ranges: vec![[0.0, 1.0], [f64::NAN, 1.0]], quantiles: None, rects: vec![] }, "query.ranges[1]"),
        (Query { ranges: vec![], quantiles: Some(vec![0.5, 1.0]), rects: vec![] }, "query.quantiles[1]"),
    ] {
        let e = task.estimate(agg.as_ref(), &bad).unwrap_err().to_string();
        assert!(e.contains(name), "{e}");
    }
    // D > 1024: the CDF is given at every ⌈D/1024⌉-th edge and at D.
    let big = self::task(RangeMethod::Haar, 3000, 1.0);
    let d = doc(big.as_ref(), big.aggregator().as_ref(), &Query::default());
    assert_eq!((d.cdf.len(), d.cdf[1].bin, d.cdf.last().unwrap().bin), (1001, 3, 3000));
    assert_eq!(d.quantiles.len(), 3);
}

/// Heavy tier: the closed-form MSE (truth, realized level sizes) is calibrated: over 300
/// collections of 20,000 devices, the mean squared error of 100 random ranges divided by the
/// mean predicted lies in [0.85, 1.15] for every method (hh: the raw estimator; its consistent
/// answer's MSE must not exceed the raw prediction).
#[test]
#[ignore = "heavy statistical tier: run in release with --ignored"]
fn heavy_mse_matches_the_closed_form() {
    let (d, n, runs) = (64, 20_000, 300);
    let (rows, f) = population(n, d);
    let ins = inputs(&rows);
    let mut qrng = harmony_core::sampling::fast_rng(77);
    let ranges: Vec<(usize, usize)> = (0..100).map(|_| harmony_analytics::range::random_range(d, &mut qrng)).collect();
    let query = Query {
        ranges: ranges.iter().map(|&(a, b)| [100.0 * a as f64 / d as f64, 100.0 * b as f64 / d as f64]).collect(),
        quantiles: Some(vec![]),
        rects: vec![],
    };
    for method in METHODS {
        let task = task(method, d, 1.0);
        let (mut sq, mut sq_doc, mut pred) = (0.0, 0.0, 0.0);
        for r in 0..runs {
            let agg = simulate::run(task.as_ref(), &ins, 5000 + r).unwrap();
            let doc = doc(task.as_ref(), agg.as_ref(), &query);
            for (i, &(a, b)) in ranges.iter().enumerate() {
                let truth: f64 = f[a..b].iter().sum();
                let (raw, var) = predicted(task.as_ref(), agg.as_ref(), a, b, &f);
                sq += (raw - truth).powi(2);
                sq_doc += (doc.ranges[i].share.value() - truth).powi(2);
                pred += var;
            }
        }
        let ratio = sq / pred;
        println!("{method:?}: MSE/predicted = {ratio:.4} (document's answers: {:.4})", sq_doc / pred);
        assert!((0.85..=1.15).contains(&ratio), "{method:?}: MSE / predicted = {ratio}");
        assert!(sq_doc / pred <= 1.15, "{method:?}: the document's answers' MSE / predicted = {}", sq_doc / pred);
    }
}
