//! `wire_reports`: every report kind of every task, through the objects `harmony serve` uses.
//!
//! Input: `[selector, repeat, form, report…]`. `selector` picks a collection from [`table`]
//! (every task × every method, strategy, numeric mechanism and oracle; built by
//! `harmony_tasks::resolve` + `build`, so it is the server's own `dyn Task`); `repeat` adds the
//! report 1–16 times; `form` bit 0 reads the rest as a JSON report (re-encoded to the wire)
//! instead of binary. The report is validated exactly as the server does before storing
//! (`Task::validate`), added, the aggregator merged with a copy of itself (mergeable tasks) and
//! estimated: an estimate is a document whose every number is finite (or `null`), never a panic.
//! Built with overflow checks on, so an accumulator that wraps is a crash.
//!
//! This file is also compiled into harmony-tasks' fast tier (tests/fuzz_seeds.rs): the committed
//! seeds and fuzz.md's F1 input run through this same function in `cargo test`.

use harmony_core::wire::{self, WireReport};
use harmony_protocol::estimates::Query;
use harmony_protocol::{CollectionConfig, CreateCollection};
use harmony_tasks::Task;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::OnceLock;

/// The schema every record task reads: two numerics (one the train target), two categoricals.
pub fn schema() -> Value {
    json!([
        {"kind": "numeric", "name": "age", "min": 0, "max": 100},
        {"kind": "categorical", "name": "color", "categories": ["red", "green", "blue"]},
        {"kind": "numeric", "name": "score", "min": -1, "max": 1},
        {"kind": "categorical", "name": "size", "categories": ["s", "m", "l", "xl", "xxl"]}
    ])
}

/// Every collection request the table covers: (label, request JSON).
pub fn requests() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut add = |label: String, task: Value, eps: f64| {
        out.push((label, json!({"schema": schema(), "epsilon": eps, "task": task})));
    };
    let oracles = harmony_core::kinds::OracleKind::NAMES;
    let numerics = harmony_core::kinds::RecordNumeric::NAMES;
    for strategy in ["split", "harmony", "sample-k"] {
        for eps in [0.5, 4.0] {
            add(format!("means {strategy} eps {eps}"), json!({"kind": "means", "strategy": strategy}), eps);
        }
        for n in numerics.iter().filter(|n| strategy == "split" || **n != "duchi-multi") {
            add(
                format!("means {strategy} {n}"),
                json!({"kind": "means", "strategy": strategy, "numeric_mechanism": n}),
                2.0,
            );
            // With grr: the shape of fuzz.md's F1 collection.
            let spec =
                json!({"kind": "means", "strategy": strategy, "numeric_mechanism": n, "categorical_mechanism": "grr"});
            add(format!("means {strategy} {n} grr"), spec, 2.0);
        }
        for o in oracles {
            add(
                format!("means {strategy} {o}"),
                json!({"kind": "means", "strategy": strategy, "categorical_mechanism": o}),
                2.0,
            );
        }
    }
    for o in oracles {
        for attr in ["color", "size"] {
            add(format!("frequency {o} {attr}"), json!({"kind": "frequency", "attribute": attr, "mechanism": o}), 1.0);
        }
    }
    for method in ["hh", "haar", "flat"] {
        add(format!("range {method}"), json!({"kind": "range", "attribute": "age", "bins": 16, "method": method}), 1.0);
    }
    for mechanism in ["hr", "gaussian"] {
        let spec = json!({"kind": "linear-queries", "attributes": ["color", "age"], "bins": {"age": 4},
            "workload": "prefix", "mechanism": mechanism});
        add(format!("linear-queries {mechanism}"), spec, 1.0);
    }
    // A matrix workload with a data-independent row of 1e6: Gaussian reports of up to ~2^28
    // grid steps (the registry allows 2^31), which overflowed i64 sums after ~2^35 reports.
    let spec = json!({"kind": "linear-queries", "attributes": ["color"], "mechanism": "gaussian",
        "workload": [[1e6, 1e6, 1e6], [1, 0, 0]]});
    add("linear-queries gaussian huge-matrix".into(), spec, 1.0);
    for method in ["calm", "direct", "fourier"] {
        let mut spec = json!({"kind": "marginals", "method": method, "bins": {"age": 4, "score": 2}, "ways": [2]});
        if method == "calm" {
            spec["users"] = 1000.into();
        }
        add(format!("marginals {method}"), spec, 1.0);
    }
    for method in ["pem", "treehist"] {
        let spec = json!({"kind": "heavy-hitters", "method": method, "top": 3, "pad_length": 2});
        add(format!("heavy-hitters {method}"), spec, 2.0);
    }
    for model in ["linear", "logistic", "svm"] {
        for mechanism in ["hm", "pm"] {
            let mut spec = json!({"kind": "train", "task": model, "target": "score", "mechanism": mechanism, "batch_size": 4, "rounds": 8});
            if model != "linear" {
                spec["threshold"] = 0.0.into();
            }
            add(format!("train {model} {mechanism}"), spec, 1.0);
        }
    }
    // One numeric attribute: each means report is one fixed-point value (what `harmony export`
    // writes as fields, harmony_data::reports::Bodies::RecordFields).
    for n in ["pm", "laplace"] {
        let task = json!({"kind": "means", "strategy": "split", "numeric_mechanism": n});
        out.push((format!("means one-numeric {n}"), json!({"schema": [schema()[0]], "epsilon": 1.0, "task": task})));
    }
    // Appended last: the committed seeds' selectors of the entries above stay as they were.
    for levels in [1, 3] {
        let task = json!({"kind": "range2d", "x": "age", "y": "score", "levels": levels});
        out.push((format!("range2d levels {levels}"), json!({"schema": schema(), "epsilon": 1.0, "task": task})));
    }
    out
}

/// One resolved collection of the table.
pub struct Entry {
    /// What it is (`means split laplace`, …).
    pub label: String,
    /// Its published config.
    pub config: CollectionConfig,
    /// The server's task object.
    pub task: Box<dyn Task>,
}

/// The resolved table (built once): every request of [`requests`] that resolves. A request
/// the registry refuses would be a gap in coverage: [`unresolved`] lists them.
pub fn table() -> &'static [Entry] {
    static TABLE: OnceLock<Vec<Entry>> = OnceLock::new();
    TABLE.get_or_init(|| {
        requests()
            .into_iter()
            .filter_map(|(label, req)| {
                let req: CreateCollection = serde_json::from_value(req).ok()?;
                let config = harmony_tasks::resolve(&req, "fuzz").ok()?;
                let task = harmony_tasks::build(&config).ok()?;
                Some(Entry { label, config, task })
            })
            .collect()
    })
}

/// Requests of [`requests`] the registry refuses, with the error (expected: none).
pub fn unresolved() -> Vec<(String, String)> {
    requests()
        .into_iter()
        .filter_map(|(label, req)| {
            let req: CreateCollection = match serde_json::from_value(req) {
                Ok(r) => r,
                Err(e) => return Some((label, e.to_string())),
            };
            harmony_tasks::resolve(&req, "fuzz").err().map(|e| (label, e.to_string()))
        })
        .collect()
}

/// A JSON report of type `T`, re-encoded to its wire bytes.
fn json_wire<T: WireReport + DeserializeOwned>(bytes: &[u8]) -> Option<Vec<u8>> {
    serde_json::from_slice::<T>(bytes).ok().map(|r| wire::encode(&r))
}

/// The wire bytes of a JSON report of whichever JSON-capable type parses (`pick` chooses).
fn from_json(pick: u8, bytes: &[u8]) -> Option<Vec<u8>> {
    use harmony_core::frequency::*;
    use harmony_core::numeric::*;
    match pick % 8 {
        0 => json_wire::<harmony_core::strategy::RecordReport>(bytes),
        1 => json_wire::<NumericReport>(bytes),
        2 => json_wire::<harmony_learn::remote::GradientReport>(bytes),
        3 => json_wire::<DuchiMultiReport>(bytes),
        4 => json_wire::<HarmonyBitReport>(bytes),
        5 => json_wire::<GrrReport>(bytes),
        6 => json_wire::<UnaryReport>(bytes),
        _ => json_wire::<OlhReport>(bytes),
    }
}

/// Every number of an estimate document is finite (serde_json writes NaN and ±∞ as `null`,
/// which is the explicit "no estimate"; a number that parses back as non-finite is a bug).
pub fn assert_finite(what: &str, v: &Value) {
    match v {
        Value::Number(n) => assert!(n.as_f64().is_some_and(f64::is_finite), "{what}: {n}"),
        Value::Array(a) => a.iter().for_each(|x| assert_finite(what, x)),
        Value::Object(o) => o.values().for_each(|x| assert_finite(what, x)),
        _ => {}
    }
}

/// Device `i`'s report for an entry, from a record that varies with `i` (categories cycle, numbers
/// step through [-1, 1]; heavy hitters: one of five items), randomized with `fast_rng(seed + i)`:
/// what the state and engine tests (harmony-tasks/tests/state.rs, harmony-dist) aggregate.
pub fn varied_report(e: &Entry, i: u64, seed: u64) -> Vec<u8> {
    use harmony_core::schema::{Attribute, Value as Cell};
    let attrs = e.config.schema.as_ref().map_or(&[][..], |s| s.attributes());
    let record: Vec<Cell> = attrs
        .iter()
        .enumerate()
        .map(|(j, a)| match a {
            Attribute::Categorical { categories, .. } => Cell::Category(((i as usize + j) % categories.len()) as u32),
            _ => Cell::Unit(((i * 7 + j as u64) % 21) as f64 / 10.0 - 1.0),
        })
        .collect();
    let items = vec![format!("item{}", i % 5), "cd".to_string()];
    let input = match e.config.task.kind() {
        harmony_protocol::TaskKind::HeavyHitters => harmony_tasks::Input::Items(&items),
        _ => harmony_tasks::Input::Record(&record),
    };
    let mut out = Vec::new();
    let mut rng = harmony_core::sampling::fast_rng(seed + i);
    e.task.randomize(&input, &mut rng, &mut out).unwrap_or_else(|err| panic!("{}: {err}", e.label));
    out
}

/// The largest relative difference between two estimate documents' numbers (∞ when their shapes
/// or any non-number differ).
pub fn rel_diff(a: &Value, b: &Value) -> f64 {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
            if x == y { 0.0 } else { (x - y).abs() / x.abs().max(y.abs()) }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).map(|(p, q)| rel_diff(p, q)).fold(0.0, f64::max)
        }
        (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
            x.iter().map(|(k, p)| y.get(k).map_or(f64::INFINITY, |q| rel_diff(p, q))).fold(0.0, f64::max)
        }
        (x, y) if x == y => 0.0,
        _ => f64::INFINITY,
    }
}

/// The fuzz target's body. Returns whether the report was accepted (for tests).
pub fn run(data: &[u8]) -> bool {
    let [selector, repeat, form, rest @ ..] = data else { return false };
    let table = table();
    let entry = &table[*selector as usize % table.len()];
    let bytes = if form & 1 == 1 {
        match from_json(form >> 1, rest) {
            Some(b) => b,
            None => return false,
        }
    } else {
        rest.to_vec()
    };
    let task = &entry.task;
    if task.validate(&bytes).is_err() {
        return false;
    }
    let mut agg = task.aggregator();
    let n = 1 + (*repeat % 16) as u64;
    for _ in 0..n {
        agg.add(&bytes).unwrap_or_else(|e| panic!("{}: add of a validated report failed: {e}", entry.label));
    }
    assert_eq!(agg.count(), n, "{}", entry.label);
    if task.mergeable() {
        let copy = agg.clone();
        agg.merge(copy.as_ref()).unwrap_or_else(|e| panic!("{}: merge: {e}", entry.label));
        assert_eq!(agg.count(), 2 * n, "{}", entry.label);
    }
    let query = Query {
        ranges: vec![[10.0, 50.0], [-1e9, 1e9]],
        quantiles: None,
        rects: vec![[10.0, 50.0, -0.5, 0.5], [-1e9, 1e9, -1e9, 1e9]],
    };
    if let Ok(est) = task.estimate(agg.as_ref(), &query) {
        let doc = serde_json::to_value(&est).expect("an estimate serializes");
        assert_finite(&entry.label, &doc);
    }
    true
}
