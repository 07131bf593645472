//! The `wire_reports` fuzz target's body (fuzz/src/wire_reports.rs, compiled here unchanged) in
//! the fast tier: its table covers every task and method, every committed seed replays without
//! a crash, and the input that once overflowed an aggregator is refused. `HARMONY_WRITE_SEEDS=1 cargo test -p
//! harmony-tasks --test fuzz_seeds` rewrites the seed corpora of wire_reports, client_config
//! and server_api (fuzz/seeds/TARGET/) from the table.

#[path = "../../../fuzz/src/wire_reports.rs"]
#[allow(dead_code)]
mod wire_reports;

use harmony_core::numeric::NumericReport;
use harmony_core::schema::{Attribute, Value};
use harmony_core::strategy::{AttributeReport, RecordReport};
use harmony_core::wire;
use harmony_protocol::estimates::{Query, TaskEstimate};
use harmony_tasks::Input;
use std::path::PathBuf;
use wire_reports::{Entry, run, table};

fn seeds_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds").join(target)
}

fn index(label: &str) -> u8 {
    table().iter().position(|e| e.label == label).unwrap_or_else(|| panic!("no {label} in the table")) as u8
}

/// The aggregator-overflow input, byte for byte after the target's header: the outside campaign's 32-byte input
/// was `70 07` (its selector and repeat count) then this 30-byte record report of a split +
/// laplace + grr collection of 2 numeric and 2 categorical attributes, whose first numeric is
/// `Fixed(2^62)` grid units; eight of them overflowed the record aggregator's i128 Σu². Through
/// this target's path (the registry's task, `validate`, then add ×8, merge, estimate) it is
/// refused by the laplace decoder's bound; the same report with a small value is accepted, so
/// the refusal is the bound and not the shape.
#[test]
fn f1_input_is_refused_by_the_wire_reports_path() {
    const F1: &str = "010b040000018080808080808080800101010001020001ff7f0301000000";
    let mut report = Vec::new();
    harmony_protocol::from_hex_into(F1, &mut report).unwrap();
    let rec: RecordReport = wire::decode(&report).unwrap();
    assert!(matches!(rec.attributes[0].1, AttributeReport::Numeric(NumericReport::Fixed(u)) if u == 1 << 62));
    for name in ["laplace", "scdf", "staircase"] {
        let i = index(&format!("means split {name} grr"));
        let input = [&[i, 0x07, 0x00][..], &report].concat();
        assert!(!run(&input), "{name}: F1 accepted");
        let err = table()[i as usize].task.validate(&report).unwrap_err().to_string();
        assert!(err.contains(name), "{name}: {err}");
        let mut small = rec.clone();
        small.attributes[0].1 = AttributeReport::Numeric(NumericReport::Fixed(3));
        let input = [&[i, 0x07, 0x00][..], &wire::encode(&small)].concat();
        assert!(run(&input), "{name}: the F1 shape with a small value is refused");
    }
}

/// Found while auditing the accumulators for this target: a Gaussian linear-queries collection
/// of a matrix workload with a data-independent row of 1e6 accepts reports of ±2^28 grid steps
/// (the registry allows up to 2^31), and its aggregator summed them in i64: 2^35 such reports
/// overflowed (a panic in debug builds, a silent wrap in release), far fewer than 2^40. Through
/// the target's path: the largest accepted report, added 16 times, then the aggregator merged
/// with itself 32 times (2^36 reports), estimates that report's value exactly.
#[test]
fn gaussian_matrix_sums_never_overflow() {
    use harmony_analytics::linear::{GaussianAggregator, GaussianReport};
    let i = index("linear-queries gaussian huge-matrix");
    let task = &table()[i as usize].task;
    let report = |v: i64| wire::encode(&GaussianReport { values: vec![v, 0] });
    let (mut lo, mut hi) = (0i64, i64::MAX);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if task.validate(&report(mid)).is_ok() { lo = mid } else { hi = mid }
    }
    assert!(lo > 1 << 27, "largest accepted entry {lo}");
    for v in [lo, -lo] {
        assert!(run(&[&[i, 15, 0][..], &report(v)].concat()), "{v} refused");
        let mut agg = task.aggregator();
        for _ in 0..16 {
            agg.add(&report(v)).unwrap();
        }
        for _ in 0..32 {
            let copy = agg.clone();
            agg.merge(copy.as_ref()).unwrap();
        }
        assert_eq!(agg.count(), 1 << 36);
        let g = harmony_tasks::Typed::<GaussianAggregator>::of(agg.as_ref()).unwrap();
        let want = v as f64 * g.mechanism().step();
        let got = g.mean()[0];
        assert!((got - want).abs() <= 1e-12 * want.abs(), "{got} vs {want}");
    }
}

/// Every request of the table resolves (a refused one would be a silent gap in coverage), and
/// the table covers every task.
#[test]
fn the_table_covers_every_task() {
    assert_eq!(wire_reports::unresolved(), Vec::<(String, String)>::new());
    let kinds: std::collections::BTreeSet<_> = table().iter().map(|e| e.config.task.kind().name()).collect();
    assert_eq!(kinds.len(), harmony_protocol::TaskKind::ALL.len(), "{kinds:?}");
    assert!(table().len() <= 256, "the selector is one byte");
}

/// A valid report of each entry (the input its devices randomize).
fn valid_report(e: &Entry, seed: u64) -> Vec<u8> {
    let attrs = e.config.schema.as_ref().map_or(&[][..], |s| s.attributes());
    let record: Vec<Value> = attrs
        .iter()
        .enumerate()
        .map(|(j, a)| match a {
            Attribute::Categorical { .. } => Value::Category(j as u32 % 2),
            _ => Value::Unit(0.5 - 0.25 * j as f64),
        })
        .collect();
    let items = vec!["ab".to_string(), "cd".to_string()];
    let model;
    let input = match e.config.task.kind() {
        harmony_protocol::TaskKind::HeavyHitters => Input::Items(&items),
        harmony_protocol::TaskKind::Train => {
            let TaskEstimate::Train(t) = e.task.estimate(e.task.aggregator().as_ref(), &Query::default()).unwrap()
            else {
                panic!("train estimate")
            };
            model = t.state;
            Input::Gradient { record: &record, model: &model }
        }
        _ => Input::Record(&record),
    };
    let mut out = Vec::new();
    let mut rng = harmony_core::sampling::fast_rng(seed);
    e.task.randomize(&input, &mut rng, &mut out).unwrap_or_else(|err| panic!("{}: {err}", e.label));
    out
}

/// Every entry's valid report is accepted by the target's path (add ×1–16, merge, estimate).
#[test]
fn every_entry_accepts_its_devices_reports() {
    for (i, e) in table().iter().enumerate() {
        for seed in 0..3 {
            let input = [&[i as u8, seed as u8 * 5, 0][..], &valid_report(e, seed)].concat();
            assert!(run(&input), "{}: a device's report refused", e.label);
        }
    }
}

fn write_seeds() {
    let write = |target: &str, name: String, bytes: &[u8]| {
        let dir = seeds_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    };
    for (i, e) in table().iter().enumerate() {
        let name = e.label.replace(' ', "_");
        let report = valid_report(e, 1);
        write("wire_reports", name.clone(), &[&[i as u8, 3, 0][..], &report].concat());
        // server_api: the same collection (the selector indexes the requests in this order when
        // all resolve), the report twice (two items), then nothing else.
        write("server_api", name.clone(), &[&[i as u8, 0][..], &report, &[0], &valid_report(e, 2)].concat());
        // client_config: one config per task and method (the first of each label's two words).
        let key: Vec<&str> = e.label.split(' ').take(2).collect();
        if table()
            .iter()
            .find(|f| f.label.split(' ').take(2).eq(key.iter().copied()))
            .is_some_and(|f| f.label == e.label)
        {
            write("client_config", name, &serde_json::to_vec(&e.config).unwrap());
        }
    }
    // The aggregator overflow (selector and form byte of this target) and ε = 1e20 in a train config.
    let f1 = "010b040000018080808080808080800101010001020001ff7f0301000000";
    let mut report = Vec::new();
    harmony_protocol::from_hex_into(f1, &mut report).unwrap();
    write("wire_reports", "f1".into(), &[&[index("means split laplace grr"), 7, 0][..], &report].concat());
    let train = &table()[index("train linear hm") as usize];
    let mut f2 = serde_json::to_value(&train.config).unwrap();
    f2["epsilon"] = 1e20.into();
    write("client_config", "f2".into(), &serde_json::to_vec(&f2).unwrap());
}

/// Replays every committed seed of `wire_reports` (and rewrites the seeds first when
/// `HARMONY_WRITE_SEEDS` is set).
#[test]
fn committed_seeds_replay() {
    if std::env::var_os("HARMONY_WRITE_SEEDS").is_some() {
        write_seeds();
    }
    let dir = seeds_dir("wire_reports");
    let mut n = 0;
    for f in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(f.unwrap().path()).unwrap();
        run(&bytes);
        n += 1;
    }
    assert!(n > table().len(), "{n} seeds in {}", dir.display());
}
