//! What the device policy adds to client randomize time (heavy tier, release):
//!
//!     cargo test --release -p harmony-client --test policy_bench -- --ignored --nocapture
//!
//! Every Adult record (48,842 rows, 15 attributes; data/adult.csv) is one device reporting to a
//! `means` collection at ε = 1 with the OS-seeded ChaCha20 of the client path. Two comparisons:
//! * per report: `DeviceTask::item` without the policy ([`bare_item`]: the task's randomizer,
//!   the report id and the hex encoding), vs `DeviceTask::item` (the policy's per-input part:
//!   for `means`, nothing unless the task refuses the record, then the clamp);
//! * per device (one report to one collection, as a device does it): build the task from the
//!   fetched config and randomize, vs `DeviceTask::with_policy` (`Policy::check`: ε, task,
//!   mechanisms; then the same build), `budget::admit` against a year of daily spends (365
//!   entries) and `DeviceTask::item`.
//!
//! Side by side in one run: the records are cut into chunks ([`REPORT_CHUNK`] records per
//! report, [`DEVICE_CHUNK`] per device); each chunk runs without and with the policy back to
//! back, the order alternating from chunk to chunk (A B, B A, …), so both sides of a pair see
//! the same machine load; [`ROUNDS`] rounds. The figure is the median over all pairs of the
//! ratio with / without (a burst of load on a shared machine moves a few pairs, not the
//! median), printed with its quartiles. The target is ≤ 1.05 for each. Measured
//! on a shared 2-core machine at load ≈ 3–6: per report 1.012–1.028 in 10 runs of 13 and
//! 1.078–1.095 in 3 (the whole distribution shifted in those runs, interquartile range ≈ 1.03 –
//! 1.10: not yet explained); per device 1.040–1.047 in 6 runs (interquartile range ≈ 0.98 –
//! 1.12; what the policy adds there, timed alone: `budget::admit`
//! over 365 spends ≈ 0.5–1 µs, `Policy` clone + check ≈ 0.2 µs, of a ≈ 45–50 µs device). Not
//! comfortably below 1.05 on repeated runs, so the assertion stays a regression guard at
//! [`GUARD`].

use harmony_client::budget::{DAY, Spend, admit};
use harmony_client::policy::mechanisms_of;
use harmony_client::{Budget, ClientError, Cost, DeviceTask, Input, Policy, report_id};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::StrategyKind;
use harmony_protocol::spec::{MeansSpec, TaskKind, TaskSpec};
use harmony_protocol::{CollectionConfig, CreateCollection, ReportItem, to_hex};
use harmony_tasks::Task;
use rand::Rng;
use std::hint::black_box;
use std::time::Instant;

const ROUNDS: usize = 5;
const REPORT_CHUNK: usize = 64;
const DEVICE_CHUNK: usize = 4;
/// Per device, every [`DEVICE_STRIDE`]th record (a device's build of the task, ≈ 50 µs,
/// dominates; 12,211 devices a round).
const DEVICE_STRIDE: usize = 4;
const GUARD: f64 = 1.15;
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

/// `DeviceTask::item` without the policy: its signature and body minus the clamp (not inlined,
/// the generators behind `dyn Rng`), so that the ratio is what the policy adds, not what a call
/// through the SDK costs over code inlined into the bench.
#[inline(never)]
fn bare_item(
    task: &dyn Task,
    input: &Input<'_>,
    rng: &mut dyn Rng,
    ids: &mut dyn Rng,
) -> Result<ReportItem, ClientError> {
    let mut buf = Vec::new();
    task.randomize(input, rng, &mut buf)?;
    Ok(ReportItem { id: report_id(ids), report: to_hex(&buf) })
}

#[test]
#[ignore = "timing; run in release"]
fn policy_overhead_on_randomize_time() {
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
        ..Policy::default()
    };
    let budget = policy.budget.unwrap();
    let now = 1_800_000_000;
    let spends: Vec<Spend> = (0..365)
        .map(|k| Spend { collection: format!("daily-{k}"), epsilon: 1.0, delta: 0.0, at: now - (k + 1) * DAY })
        .collect();
    let device = DeviceTask::with_policy(config.clone(), policy.clone()).unwrap();
    let mut rng = harmony_core::sampling::secure_rng();
    let mut ids = harmony_core::sampling::secure_rng();
    let mut run = |which: usize, r: &Vec<Value>| match which {
        // Per report: `DeviceTask::item` without the policy, vs `item`.
        0 => {
            black_box(bare_item(device.task(), &Input::Record(r), &mut rng, &mut ids).unwrap());
        }
        1 => {
            black_box(device.item(&Input::Record(r), &mut rng, &mut ids).unwrap());
        }
        // Per device (one report to one collection): build the task from the fetched config and
        // randomize, vs check the config, build, admit against the budget ledger and randomize.
        2 => {
            let c = config.clone();
            let task = harmony_tasks::build(&c).unwrap();
            black_box((bare_item(task.as_ref(), &Input::Record(r), &mut rng, &mut ids).unwrap(), c));
        }
        _ => {
            let task = DeviceTask::with_policy(config.clone(), policy.clone()).unwrap();
            black_box(admit(black_box(&spends), Some(&budget), &config.id, Cost::pure(config.epsilon), now).unwrap());
            black_box(task.item(&Input::Record(r), &mut rng, &mut ids).unwrap());
        }
    };
    let device_records: Vec<&Vec<Value>> = records.iter().step_by(DEVICE_STRIDE).collect();
    let all: Vec<&Vec<Value>> = records.iter().collect();
    let mut ratios = [Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for (pair, (set, chunk)) in [(&all, REPORT_CHUNK), (&device_records, DEVICE_CHUNK)].into_iter().enumerate() {
            for (k, chunk) in set.chunks(chunk).enumerate() {
                let (without, with) = (2 * pair, 2 * pair + 1);
                let order = if (round + k) % 2 == 0 { [without, with] } else { [with, without] };
                let mut t = [0.0; 4];
                for which in order {
                    // Both sides start with the chunk's records in cache.
                    black_box(chunk.iter().flat_map(|r| r.iter()).filter(|v| matches!(v, Value::Unit(_))).count());
                    let start = Instant::now();
                    for r in chunk {
                        run(which, r);
                    }
                    t[which] = start.elapsed().as_secs_f64();
                }
                ratios[pair].push(t[with] / t[without]);
            }
        }
    }
    let [report, per_device] = ratios.map(|mut r| {
        r.sort_by(f64::total_cmp);
        let q = |p: f64| r[((r.len() - 1) as f64 * p).round() as usize];
        (q(0.5), q(0.25), q(0.75), r.len())
    });
    println!(
        "Adult, means (harmony) at ε = 1, ChaCha20, {ROUNDS} rounds, median ratio with / without policy over pairs \
         run back to back (quartiles):\n\
         per report ({} pairs of {REPORT_CHUNK} records; clamp):  {:.3} ({:.3} – {:.3})\n\
         per device ({} pairs of {DEVICE_CHUNK} devices; check + budget + clamp):  {:.3} ({:.3} – {:.3})",
        report.3, report.0, report.1, report.2, per_device.3, per_device.0, per_device.1, per_device.2
    );
    for (what, ratio) in [("per report", report.0), ("per device", per_device.0)] {
        assert!(
            ratio <= GUARD,
            "{what}: the policy adds {:.1}% (> {:.0}%)",
            100.0 * (ratio - 1.0),
            100.0 * (GUARD - 1.0)
        );
    }
}
