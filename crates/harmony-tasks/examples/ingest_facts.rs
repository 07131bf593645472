//! Ingest-relevant facts of the range and linear-queries tasks, beside `means` measured in the
//! same run: encoded report sizes (min / mean / max over 200,000 simulated devices), the cost
//! of `validate` + `add` per report (one thread), and the time of one estimate document (three
//! ranges, the default quantiles) from an accumulator of 10^6 reports. Times are this thread's
//! CPU time where Linux gives it (so a loaded, shared machine does not inflate them), averaged
//! over ≥ 0.3 s of ingest and ≥ 0.05 s of estimates.
//!
//! ```text
//! cargo run --release -p harmony-tasks --example ingest_facts
//! ```

use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::Query;
use harmony_protocol::spec::{Hull, LinearMechanism, LinearQueriesSpec, MeansSpec, RangeMethod, RangeSpec, TaskSpec};
use harmony_tasks::{Input, Task, simulate};
use std::collections::BTreeMap;
use std::time::Instant;

const DEVICES: usize = 200_000;
const BIG: usize = 1_000_000;

fn schema() -> Schema {
    Schema::new(vec![
        Attribute::Numeric { name: "x".into(), min: 0.0, max: 100.0 },
        Attribute::Categorical { name: "c".into(), categories: (0..8).map(|i| format!("c{i}")).collect() },
    ])
    .expect("schema")
}

fn range(method: RangeMethod, bins: usize) -> TaskSpec {
    TaskSpec::Range(RangeSpec { attribute: "x".into(), bins: Some(bins), method, branching: None })
}

fn linear(mechanism: LinearMechanism, bins: usize, workload: &str) -> TaskSpec {
    TaskSpec::LinearQueries(LinearQueriesSpec {
        attributes: vec!["x".into()],
        bins: BTreeMap::from([("x".to_string(), bins)]),
        workload: serde_json::Value::String(workload.into()),
        mechanism,
        delta: None,
        hull: Hull::Symmetric,
        enrollment: None,
        batch_size: None,
    })
}

/// n records: x spread over [0, 100] (a skewed mix), c cycling.
fn records(n: usize) -> Vec<Vec<Value>> {
    let mut rng = harmony_core::sampling::fast_rng(1);
    (0..n)
        .map(|i| {
            let u = harmony_core::sampling::uniform01(&mut rng);
            vec![Value::Unit(2.0 * u * u - 1.0), Value::Category((i % 8) as u32)]
        })
        .collect()
}

fn main() {
    let cases: Vec<(&str, TaskSpec)> = vec![
        ("means (harmony)", TaskSpec::Means(MeansSpec::default())),
        ("range hh D=64", range(RangeMethod::Hh, 64)),
        ("range haar D=64", range(RangeMethod::Haar, 64)),
        ("range flat D=64", range(RangeMethod::Flat, 64)),
        ("range hh D=1024", range(RangeMethod::Hh, 1024)),
        ("range haar D=65536", range(RangeMethod::Haar, 1 << 16)),
        ("linear hr prefix J=64", linear(LinearMechanism::Hr, 64, "prefix")),
        ("linear gaussian prefix J=64", linear(LinearMechanism::Gaussian, 64, "prefix")),
        ("linear adaptive prefix J=64", linear(LinearMechanism::Adaptive, 64, "prefix")),
        ("linear hr prefix J=256", linear(LinearMechanism::Hr, 256, "prefix")),
        ("linear gaussian prefix J=256", linear(LinearMechanism::Gaussian, 256, "prefix")),
        ("linear gaussian identity J=1024", linear(LinearMechanism::Gaussian, 1024, "identity")),
    ];
    let rows = records(BIG);
    let inputs: Vec<Input> = rows.iter().map(|r| Input::Record(r)).collect();
    let query = Query { ranges: vec![[10.0, 20.0], [25.0, 75.0], [0.0, 50.0]], quantiles: None, rects: vec![] };
    let mut measured = Vec::new();
    for (name, spec) in cases {
        let req = CreateCollection { schema: Some(schema()), epsilon: 1.0, task: spec };
        let task = harmony_tasks::build(&harmony_tasks::resolve(&req, "facts").expect("resolve")).expect("build");
        let reports = simulate::reports(task.as_ref(), &inputs[..DEVICES], 7, 0).expect("reports");
        let agg = simulate::run(task.as_ref(), &inputs, 8).expect("simulate");
        assert_eq!(agg.count(), BIG as u64);
        let ns = per_item(0.3, reports.len(), || ingest(task.as_ref(), &reports));
        let ms = per_item(0.05, 1, || {
            std::hint::black_box(task.estimate(agg.as_ref(), &query).expect("estimate"));
        }) / 1e6;
        measured.push((name, reports, ns, ms));
    }
    let clock = if cpu_seconds().is_some() { "thread CPU time" } else { "wall-clock time" };
    println!("{clock}; one thread\n");
    println!("| task | report bytes min / mean / max | validate + add ns/report | ×means | estimate at 10^6 reports |");
    println!("|---|---|---|---|---|");
    let base = measured[0].2;
    for (name, reports, ns, ms) in &measured {
        let sizes: Vec<usize> = reports.iter().map(Vec::len).collect();
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        println!("| {name} | {min} / {mean:.1} / {max} | {ns:.0} | {:.2} | {ms:.3} ms |", ns / base);
    }
}

/// validate + add of every report into a fresh accumulator.
fn ingest(task: &dyn Task, reports: &[Vec<u8>]) {
    let mut agg = task.aggregator();
    for r in reports {
        task.validate(r).expect("valid");
        agg.add(r).expect("add");
    }
    std::hint::black_box(agg.count());
}

/// This thread's CPU time (Linux: /proc/thread-self/schedstat, ns; stale by at most a
/// scheduler tick), so that other processes on a shared machine do not count.
fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    (ns > 0).then_some(ns as f64 * 1e-9)
}

/// Runs `f` (which handles `items` items) until at least `seconds` of CPU (else wall-clock)
/// time have passed, three times at least: nanoseconds per item.
fn per_item(seconds: f64, items: usize, mut f: impl FnMut()) -> f64 {
    let now = || cpu_seconds().unwrap_or_else(|| START.with(|s| s.elapsed().as_secs_f64()));
    let (start, mut runs) = (now(), 0usize);
    while runs < 3 || now() - start < seconds {
        f();
        runs += 1;
    }
    (now() - start) * 1e9 / (runs * items) as f64
}

thread_local! {
    static START: Instant = Instant::now();
}
