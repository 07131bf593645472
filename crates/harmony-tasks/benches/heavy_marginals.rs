//! Ingest facts of the `heavy-hitters` and `marginals` tasks on Adult (data/adult.csv, its 9
//! categorical attributes; devices beyond its 48,842 rows repeat them):
//!
//! ```text
//! cargo bench -p harmony-tasks --features parallel --bench heavy_marginals
//! ```
//!
//! Before the benchmarks, the encoded report sizes (min / median / max bytes over 100,000
//! devices) are printed. `validate_add`: a server's per-report work (decode and check, then
//! decode and add) over 65,536 stored reports; `estimate_1m`: the estimate document of 10^6
//! reports. Heavy hitters: one item per device, occupation|native-country|education (2,029
//! distinct items), PEM and TreeHist at B = 32, top 20. Marginals: every 2- and 3-way marginal
//! of the 9 attributes (120 marginals) by CALM (joint post-processing, planned for 10^6
//! devices) and direct, every 2-way one by Fourier; ε = 1.

use divan::Bencher;
use divan::counter::ItemsCount;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::spec::{HeavyHittersSpec, HeavyMethod, ItemEncoding, MarginalsMethod, MarginalsSpec, TaskSpec};
use harmony_protocol::{CreateCollection, estimates::Query};
use harmony_tasks::{Input, Task, TaskAggregator, simulate};
use std::sync::OnceLock;

const TASKS: [&str; 5] = ["heavy-pem", "heavy-treehist", "marginals-calm", "marginals-direct", "marginals-fourier"];
const CATEGORICAL: [&str; 9] = [
    "workclass",
    "education",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native_country",
    "income",
];

/// Adult's categorical columns: the schema (labels sorted) and each row's record and item.
struct Adult {
    schema: Schema,
    records: Vec<Vec<Value>>,
    items: Vec<Vec<String>>,
}

fn adult() -> &'static Adult {
    static DATA: OnceLock<Adult> = OnceLock::new();
    DATA.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/adult.csv");
        let text = std::fs::read_to_string(path).expect("data/adult.csv");
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let cols: Vec<usize> = CATEGORICAL.iter().map(|c| header.iter().position(|h| h == c).unwrap()).collect();
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').map(str::trim).collect()).collect();
        let labels: Vec<Vec<String>> = cols
            .iter()
            .map(|&j| {
                let mut v: Vec<String> = rows.iter().map(|r| r[j].to_string()).collect();
                v.sort();
                v.dedup();
                v
            })
            .collect();
        let records = rows
            .iter()
            .map(|r| {
                cols.iter()
                    .zip(&labels)
                    .map(|(&j, l)| Value::Category(l.binary_search(&r[j].to_string()).unwrap() as u32))
                    .collect()
            })
            .collect();
        let items = rows.iter().map(|r| vec![format!("{}|{}|{}", r[cols[3]], r[cols[7]], r[cols[1]])]).collect();
        let attrs = CATEGORICAL
            .iter()
            .zip(labels)
            .map(|(n, categories)| Attribute::Categorical { name: n.to_string(), categories })
            .collect();
        Adult { schema: Schema::new(attrs).unwrap(), records, items }
    })
}

fn task(name: &str) -> Box<dyn Task> {
    let heavy = |method| {
        TaskSpec::HeavyHitters(HeavyHittersSpec {
            method,
            top: None,
            bits: None,
            items: ItemEncoding::Hash,
            pad_length: None,
            levels: None,
            rows: None,
            columns: None,
            candidates: vec![],
        })
    };
    let marginals = |method, ways: Option<Vec<usize>>, users| {
        TaskSpec::Marginals(MarginalsSpec {
            attributes: None,
            bins: Default::default(),
            ways,
            method,
            post: None,
            l: None,
            users,
            sets: None,
        })
    };
    let spec = match name {
        "heavy-pem" => heavy(HeavyMethod::Pem),
        "heavy-treehist" => heavy(HeavyMethod::Treehist),
        "marginals-calm" => marginals(MarginalsMethod::Calm, None, Some(1_000_000)),
        "marginals-direct" => marginals(MarginalsMethod::Direct, None, None),
        _ => marginals(MarginalsMethod::Fourier, Some(vec![2]), None),
    };
    let req = CreateCollection { schema: Some(adult().schema.clone()), epsilon: 1.0, task: spec };
    harmony_tasks::build(&harmony_tasks::resolve(&req, name).unwrap()).unwrap()
}

/// Device i's input (Adult's rows repeated).
fn inputs(name: &str, n: usize) -> Vec<Input<'static>> {
    let a = adult();
    let rows = a.records.len();
    (0..n)
        .map(|i| {
            if name.starts_with("heavy") {
                Input::Items(&a.items[i % rows])
            } else {
                Input::Record(&a.records[i % rows])
            }
        })
        .collect()
}

fn main() {
    for name in TASKS {
        let t = task(name);
        let mut sizes: Vec<usize> =
            simulate::reports(t.as_ref(), &inputs(name, 100_000), 1, 0).unwrap().iter().map(Vec::len).collect();
        sizes.sort_unstable();
        println!(
            "{name}: report bytes min {} / median {} / max {} (100,000 devices)",
            sizes[0],
            sizes[sizes.len() / 2],
            sizes[sizes.len() - 1]
        );
    }
    divan::main();
}

#[divan::bench(args = TASKS)]
fn validate_add(bencher: Bencher, name: &str) {
    let t = task(name);
    let reports = simulate::reports(t.as_ref(), &inputs(name, 1 << 16), 2, 0).unwrap();
    bencher.counter(ItemsCount::new(reports.len())).bench_local(|| {
        let mut agg = t.aggregator();
        for r in &reports {
            t.validate(r).unwrap();
            agg.add(r).unwrap();
        }
        agg.count()
    });
}

#[divan::bench(args = TASKS, sample_count = 3, sample_size = 1)]
fn estimate_1m(bencher: Bencher, name: &str) {
    let t = task(name);
    let agg: Box<dyn TaskAggregator> = simulate::run(t.as_ref(), &inputs(name, 1_000_000), 3).unwrap();
    bencher.bench_local(|| t.estimate(agg.as_ref(), &Query::default()).unwrap());
}
