//! What the device policy adds to client randomize time (heavy tier, release):
//!
//!     cargo test --release -p harmony-client --test policy_bench -- --ignored --nocapture
//!
//! Every Adult record (48,842 rows, 15 attributes; data/adult.csv) is one device reporting to a
//! `means` collection at ε = 1 with the OS-seeded ChaCha20 of the client path. Side by side in
//! one run, alternating, [`ROUNDS`] times each:
//! * without the policy: the task's randomizer, the report id, the hex encoding (what
//!   `DeviceTask::item` does, minus the clamp);
//! * with it: everything a device does per collection under a full policy — `Policy::check` of
//!   the config (ε, task, mechanisms), `budget::admit` against a year of daily spends (365
//!   entries), then `DeviceTask::item` (clamp + the same randomizer, id and encoding).
//!
//! The ratio of the fastest round of each must be ≤ 1.05 (the target of issue 16).

use harmony_client::budget::{DAY, Spend, admit};
use harmony_client::policy::mechanisms_of;
use harmony_client::{Budget, DeviceTask, Input, Policy, report_id};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::StrategyKind;
use harmony_protocol::spec::{MeansSpec, TaskKind, TaskSpec};
use harmony_protocol::{CollectionConfig, CreateCollection, to_hex};
use std::hint::black_box;
use std::time::Instant;

const ROUNDS: usize = 7;
const NUMERIC: [&str; 6] = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"];

/// Adult's 15 attributes (bounds and categories from the file) and its encoded records.
fn adult() -> (Schema, Vec<Vec<Value>>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/adult.csv");
    let text = std::fs::read_to_string(path).expect("data/adult.csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').take(15).collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').take(15).map(str::trim).collect()).collect();
    let mut attributes = Vec::new();
    for (j, name) in header.iter().enumerate() {
        if NUMERIC.contains(name) {
            let xs = rows.iter().map(|r| r[j].parse::<f64>().unwrap());
            let (min, max) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
            attributes.push(Attribute::Numeric { name: name.to_string(), min, max });
        } else {
            let mut cats: Vec<String> =
                rows.iter().map(|r| if r[j].is_empty() { "?" } else { r[j] }.to_string()).collect();
            cats.sort();
            cats.dedup();
            attributes.push(Attribute::Categorical { name: name.to_string(), categories: cats });
        }
    }
    let records = rows
        .iter()
        .map(|r| {
            attributes
                .iter()
                .enumerate()
                .map(|(j, a)| match a {
                    Attribute::Numeric { min, max, .. } => {
                        Value::Unit(2.0 * (r[j].parse::<f64>().unwrap() - min) / (max - min) - 1.0)
                    }
                    Attribute::Categorical { categories, .. } => {
                        let v = if r[j].is_empty() { "?" } else { r[j] };
                        Value::Category(categories.iter().position(|c| c == v).unwrap() as u32)
                    }
                })
                .collect()
        })
        .collect();
    (Schema::new(attributes).unwrap(), records)
}

#[test]
#[ignore = "timing; run in release"]
fn policy_adds_at_most_5_percent_to_randomize_time() {
    let (schema, records) = adult();
    assert_eq!((records.len(), schema.len()), (48_842, 15));
    let task = TaskSpec::Means(MeansSpec { strategy: StrategyKind::Harmony, ..Default::default() });
    let config: CollectionConfig =
        harmony_tasks::resolve(&CreateCollection { schema: Some(schema), epsilon: 1.0, task }, "adult").unwrap();
    let policy = Policy {
        max_epsilon: 4.0,
        tasks: Some(vec![TaskKind::Means, TaskKind::Frequency]),
        mechanisms: Some(mechanisms_of(&config)),
        budget: Some(Budget::new(10.0, 1.0).unwrap()),
    };
    let budget = policy.budget.unwrap();
    let now = 1_800_000_000;
    let spends: Vec<Spend> =
        (0..365).map(|k| Spend { collection: format!("daily-{k}"), epsilon: 1.0, at: now - (k + 1) * DAY }).collect();
    let device = DeviceTask::with_policy(config.clone(), policy.clone()).unwrap();
    let bare = harmony_tasks::build(&config).unwrap();
    let mut rng = harmony_core::sampling::secure_rng();
    let mut ids = harmony_core::sampling::secure_rng();
    let (mut without, mut with) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let mut buf = Vec::new();
        for r in &records {
            buf.clear();
            bare.randomize(&Input::Record(r), &mut rng, &mut buf).unwrap();
            black_box((report_id(&mut ids), to_hex(&buf)));
        }
        without = without.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        for r in &records {
            policy.check(&config).unwrap();
            black_box(admit(&spends, Some(&budget), &config.id, config.epsilon, now).unwrap());
            black_box(device.item(&Input::Record(r), &mut rng, &mut ids).unwrap());
        }
        with = with.min(t.elapsed().as_secs_f64());
    }
    let n = records.len() as f64;
    let ratio = with / without;
    println!(
        "Adult, {} records, means (harmony) at ε = 1, ChaCha20, fastest of {ROUNDS} rounds: without policy {:.0} ns/record, with {:.0} ns/record, ratio {ratio:.3}",
        records.len(),
        1e9 * without / n,
        1e9 * with / n
    );
    assert!(ratio <= 1.05, "the policy adds {:.1}% (> 5%)", 100.0 * (ratio - 1.0));
}
