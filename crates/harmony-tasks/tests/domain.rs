//! Every task's estimate document, on a small collection (the first 2,000 rows of UCI Adult at
//! ε = 1): no in-domain value or interval endpoint lies outside its domain (a mean's attribute
//! range, [0, 1] for any share, a linear query's weight range, the column's range for
//! quantiles), while the raw values do leave it (so the check is not vacuous) and are left as
//! they were.

use harmony_core::kinds::OracleKind;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_data::{DataReader, EncodeOptions, InferOptions, encode_rows, infer_batches};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{AttributeResult, Est, Query, TaskEstimate};
use harmony_tasks::Input;

const ROWS: usize = 2000;

/// Adult's inferred schema and its first [`ROWS`] encoded records.
fn adult() -> (Schema, Vec<Vec<Value>>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult.csv");
    let bytes = std::fs::read(path).unwrap();
    let mut reader = DataReader::from_bytes("adult.csv", bytes.clone()).unwrap();
    let schema = infer_batches(&mut reader, &InferOptions::default()).unwrap().file.schema().unwrap();
    let mut reader = DataReader::from_bytes("adult.csv", bytes).unwrap();
    let enc = encode_rows(&mut reader, &schema, &EncodeOptions::default()).unwrap();
    let rows = enc.values.chunks(schema.len()).take(ROWS).map(<[Value]>::to_vec).collect();
    (schema, rows)
}

/// Counts of (raw values outside their domain, in-domain values checked).
#[derive(Default, Debug)]
struct Walk {
    raw_outside: usize,
    checked: usize,
}

impl Walk {
    fn est(&mut self, what: &str, e: &Est, lo: f64, hi: f64) {
        let tol = 1e-9 * (hi - lo).abs().max(1.0);
        let inside = |x: f64| x >= lo - tol && x <= hi + tol;
        if let Some(x) = e.estimate {
            self.raw_outside += usize::from(!inside(x) || e.ci95.is_some_and(|[a, b]| !inside(a) || !inside(b)));
        }
        if let Some(x) = e.shown() {
            assert!(inside(x), "{what}: in-domain value {x} outside [{lo}, {hi}] ({e:?})");
            self.checked += 1;
        }
        if let Some([a, b]) = e.shown_ci() {
            assert!(inside(a) && inside(b) && a <= b, "{what}: in-domain CI [{a}, {b}] outside [{lo}, {hi}] ({e:?})");
        }
        if let Some(d) = e.in_domain {
            // Only where the raw value or interval differs.
            assert!(e.estimate != Some(d.estimate) || e.ci95 != d.ci95, "{what}: a redundant in_domain");
        }
    }
    fn shares<'a>(&mut self, what: &str, es: impl IntoIterator<Item = &'a Est>) {
        let es: Vec<&Est> = es.into_iter().collect();
        for e in &es {
            self.est(what, e, 0.0, 1.0);
        }
    }
    /// Frequencies on the simplex: in-domain values sum to 1.
    fn simplex<'a>(&mut self, what: &str, es: impl IntoIterator<Item = &'a Est>) {
        let es: Vec<&Est> = es.into_iter().collect();
        self.shares(what, es.iter().copied());
        let total: f64 = es.iter().filter_map(|e| e.shown()).sum();
        assert!((total - 1.0).abs() < 1e-9, "{what}: in-domain frequencies sum to {total}");
    }
}

fn walk_document(w: &mut Walk, schema: &Schema, doc: &TaskEstimate, weight_range: [f64; 2]) {
    match doc {
        TaskEstimate::Means(m) => {
            for (a, r) in schema.attributes().iter().zip(&m.attributes) {
                match (a, r) {
                    (Attribute::Numeric { min, max, .. }, AttributeResult::Numeric { name, mean, unit, .. }) => {
                        w.est(name, mean, *min, *max);
                        w.est(name, unit, -1.0, 1.0);
                    }
                    (_, AttributeResult::Categorical { name, categories, .. }) => {
                        w.simplex(name, categories.iter().map(|c| &c.frequency));
                    }
                    _ => panic!("kinds differ"),
                }
            }
        }
        TaskEstimate::Frequency(f) => w.simplex(&f.attribute, f.categories.iter().map(|c| &c.frequency)),
        TaskEstimate::Range(r) => {
            w.shares("cdf", r.cdf.iter().map(|p| &p.value));
            let shown: Vec<f64> = r.cdf.iter().filter_map(|p| p.value.shown()).collect();
            assert!(shown.windows(2).all(|p| p[0] <= p[1]), "the in-domain CDF is not monotone: {shown:?}");
            w.shares("ranges", r.ranges.iter().map(|x| &x.share));
            let [lo, hi] = r.bounds;
            for q in &r.quantiles {
                for [a, b] in q.value.into_iter().chain(q.interval) {
                    assert!(a >= lo && b <= hi && a <= b, "quantile {}: [{a}, {b}] outside [{lo}, {hi}]", q.q);
                }
            }
        }
        TaskEstimate::Range2d(r) => {
            w.shares("heatmap", r.heatmap.iter().flatten());
            w.shares("rects", r.rects.iter().map(|x| &x.share));
        }
        TaskEstimate::HeavyHitters(h) => w.shares("heavy hitters", h.items.iter().map(|i| &i.frequency)),
        TaskEstimate::Marginals(m) => {
            for mr in &m.marginals {
                w.simplex(&mr.attributes.join("×"), &mr.cells);
            }
        }
        TaskEstimate::LinearQueries(l) => {
            for q in &l.queries {
                w.est(&q.name, &q.answer, weight_range[0], weight_range[1]);
            }
        }
        TaskEstimate::Train(_) => {}
    }
}

/// Every task on the collection: means (three strategies), frequency (every oracle), range
/// (three methods), heavy hitters, marginals (five ways to post-process or not) and linear
/// queries (three mechanisms).
fn specs() -> Vec<serde_json::Value> {
    use serde_json::json;
    let mut s = vec![
        json!({"kind": "means", "strategy": "split"}),
        json!({"kind": "means", "strategy": "harmony"}),
        json!({"kind": "means", "strategy": "sample-k"}),
    ];
    for k in OracleKind::ALL {
        s.push(json!({"kind": "frequency", "attribute": "education", "mechanism": k.name()}));
    }
    for m in ["hh", "haar", "flat"] {
        s.push(json!({"kind": "range", "attribute": "age", "method": m}));
    }
    s.push(json!({"kind": "range2d", "x": "age", "y": "hours_per_week", "levels": 3}));
    s.push(json!({"kind": "heavy-hitters", "top": 5}));
    for post in ["raw", "gls", "joint"] {
        let attrs = ["workclass", "education", "race", "sex"];
        s.push(json!({"kind": "marginals", "attributes": attrs, "ways": [2], "method": "calm", "post": post}));
    }
    for m in ["direct", "fourier"] {
        s.push(json!({"kind": "marginals", "attributes": ["workclass", "race", "sex"], "ways": [2], "method": m}));
    }
    for m in ["hr", "gaussian", "adaptive"] {
        s.push(json!({"kind": "linear-queries", "attributes": ["education"], "workload": "prefix", "mechanism": m}));
    }
    s
}

#[test]
fn every_documents_in_domain_values_and_intervals_lie_in_their_domain() {
    let (schema, rows) = adult();
    let country = schema.attributes().iter().position(|a| a.name() == "native_country").unwrap();
    let items: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let (Value::Category(c), Attribute::Categorical { categories, .. }) =
                (&r[country], &schema.attributes()[country])
            else {
                panic!("categorical")
            };
            vec![categories[*c as usize].clone()]
        })
        .collect();
    let mut walk = Walk::default();
    for (i, spec) in specs().into_iter().enumerate() {
        let body = serde_json::json!({"schema": schema, "epsilon": 1.0, "task": spec});
        let request: CreateCollection = serde_json::from_value(body).unwrap();
        let task = harmony_tasks::build(&harmony_tasks::resolve(&request, "c").unwrap()).unwrap();
        let inputs: Vec<Input<'_>> = match spec["kind"].as_str() {
            Some("heavy-hitters") => items.iter().map(|i| Input::Items(i)).collect(),
            _ => rows.iter().map(|r| Input::Record(r)).collect(),
        };
        let agg = harmony_tasks::simulate::run(task.as_ref(), &inputs, 11 + i as u64).unwrap();
        let query = Query {
            ranges: vec![[17.0, 30.0], [60.0, 90.0]],
            quantiles: None,
            rects: vec![[17.0, 30.0, 0.0, 40.0], [60.0, 90.0, 40.0, 99.0]],
        };
        let doc = task.estimate(agg.as_ref(), &query).unwrap();
        walk_document(&mut walk, &schema, &doc, [0.0, 1.0]);
        // The document's JSON parses back to the same document.
        let text = serde_json::to_string(&doc).unwrap();
        assert_eq!(serde_json::from_str::<TaskEstimate>(&text).unwrap(), doc, "{spec}");
    }
    // Not vacuous: at 2,000 reports many raw values leave their domain.
    assert!(walk.raw_outside > 50 && walk.checked > 1000, "{walk:?}");
}

#[test]
fn small_collections_warn_and_say_how_many_reports_would_help() {
    let (schema, rows) = adult();
    let body = serde_json::json!({"schema": schema, "epsilon": 1.0, "task": {"kind": "means", "strategy": "split"}});
    let request: CreateCollection = serde_json::from_value(body).unwrap();
    let task = harmony_tasks::build(&harmony_tasks::resolve(&request, "c").unwrap()).unwrap();
    let inputs: Vec<Input<'_>> = rows.iter().map(|r| Input::Record(r)).collect();
    let agg = harmony_tasks::simulate::run(task.as_ref(), &inputs, 3).unwrap();
    let TaskEstimate::Means(m) = task.estimate(agg.as_ref(), &Query::default()).unwrap() else { panic!() };
    // Split over 15 attributes at ε = 1 and 2,000 reports: every attribute is noise.
    assert_eq!(m.warnings.len(), schema.len(), "{:?}", m.warnings);
    for w in &m.warnings {
        assert!(w.std_error > 0.05 * w.scale && w.reports == ROWS as u64, "{w:?}");
        // SE ∝ 1/√n: at reports_needed the standard error is 1% of the scale.
        let at_needed = w.std_error * (w.reports as f64 / w.reports_needed as f64).sqrt();
        assert!((at_needed / (0.01 * w.scale) - 1.0).abs() < 1e-3, "{w:?}");
        assert!(w.message.contains(&w.subject) && w.message.contains("more"), "{}", w.message);
    }
    assert!(m.in_domain_note.as_deref().unwrap().contains("simplex"));
}
