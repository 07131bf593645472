//! Saved accumulator states (`harmony_tasks::state`), what a distributed engine ships between its
//! partial and final aggregations: for every task and method of the fuzz table, reports split
//! into parts, each part's accumulator saved and merged into a fresh one, estimate what one
//! accumulator of every report estimates (to 1e-12); a state of another collection, a truncated
//! or padded state is an error, never a panic, and leaves the accumulator as it was.

#[path = "../../../fuzz/src/wire_reports.rs"]
#[allow(dead_code)]
mod wire_reports;

use harmony_core::schema::{Attribute, Value};
use harmony_protocol::TaskKind;
use harmony_protocol::estimates::Query;
use harmony_tasks::{Input, state};
use serde_json::Value as Json;
use wire_reports::{Entry, table};

/// Report i of an entry: records that vary with i (so counts differ between categories).
fn report(e: &Entry, i: u64) -> Vec<u8> {
    let attrs = e.config.schema.as_ref().map_or(&[][..], |s| s.attributes());
    let record: Vec<Value> = attrs
        .iter()
        .enumerate()
        .map(|(j, a)| match a {
            Attribute::Categorical { categories, .. } => Value::Category(((i as usize + j) % categories.len()) as u32),
            _ => Value::Unit(((i * 7 + j as u64) % 21) as f64 / 10.0 - 1.0),
        })
        .collect();
    let items = vec![format!("item{}", i % 5), "cd".to_string()];
    let input = match e.config.task.kind() {
        TaskKind::HeavyHitters => Input::Items(&items),
        _ => Input::Record(&record),
    };
    let mut out = Vec::new();
    let mut rng = harmony_core::sampling::fast_rng(1000 + i);
    e.task.randomize(&input, &mut rng, &mut out).unwrap_or_else(|err| panic!("{}: {err}", e.label));
    out
}

/// The largest relative difference between two estimate documents' numbers (∞ when their shapes
/// differ).
fn rel_diff(a: &Json, b: &Json) -> f64 {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() / x.abs().max(y.abs()).max(1e-300)
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).map(|(x, y)| rel_diff(x, y)).fold(0.0, f64::max)
        }
        (Json::Object(x), Json::Object(y)) if x.len() == y.len() => {
            x.iter().map(|(k, v)| y.get(k).map_or(f64::INFINITY, |w| rel_diff(v, w))).fold(0.0, f64::max)
        }
        (x, y) if x == y => 0.0,
        _ => f64::INFINITY,
    }
}

#[test]
fn saved_states_merge_to_the_single_accumulators_estimate() {
    let n = 240u64;
    let mut checked = 0;
    for e in table() {
        if !e.task.mergeable() {
            let mut out = Vec::new();
            assert!(e.task.aggregator().save(&mut out).is_err(), "{}: an order-dependent state saved", e.label);
            continue;
        }
        let reports: Vec<Vec<u8>> = (0..n).map(|i| report(e, i)).collect();
        let mut whole = e.task.aggregator();
        reports.iter().for_each(|r| whole.add(r).unwrap());
        // Three parts of unequal sizes, one empty: saved, then merged into a fresh accumulator.
        let mut merged = e.task.aggregator();
        for part in [&reports[..17], &reports[17..17], &reports[17..]] {
            let mut agg = e.task.aggregator();
            part.iter().for_each(|r| agg.add(r).unwrap());
            let saved = state::save(e.task.as_ref(), agg.as_ref()).unwrap();
            state::merge(e.task.as_ref(), merged.as_mut(), &saved).unwrap_or_else(|err| panic!("{}: {err}", e.label));
        }
        assert_eq!(merged.count(), whole.count(), "{}", e.label);
        let q = Query::default();
        let want = serde_json::to_value(e.task.estimate(whole.as_ref(), &q).unwrap()).unwrap();
        let got = serde_json::to_value(e.task.estimate(merged.as_ref(), &q).unwrap()).unwrap();
        let d = rel_diff(&want, &got);
        assert!(d <= 1e-12, "{}: merged states differ by {d:e}\n{want}\n{got}", e.label);
        // A restored state round-trips byte for byte.
        let saved = state::save(e.task.as_ref(), whole.as_ref()).unwrap();
        let again = state::save(e.task.as_ref(), state::restore(e.task.as_ref(), &saved).unwrap().as_ref()).unwrap();
        assert_eq!(saved, again, "{}", e.label);
        checked += 1;
    }
    assert!(checked > 30, "{checked} mergeable entries");
}

#[test]
fn foreign_truncated_and_padded_states_are_errors() {
    let t = table();
    for (k, e) in t.iter().enumerate().filter(|(_, e)| e.task.mergeable()) {
        let mut agg = e.task.aggregator();
        (0..40).for_each(|i| agg.add(&report(e, i)).unwrap());
        let saved = state::save(e.task.as_ref(), agg.as_ref()).unwrap();
        let before = state::save(e.task.as_ref(), agg.as_ref()).unwrap();
        // Another collection's state (the next entry with another config): refused by the
        // fingerprint.
        let ours = state::fingerprint(e.task.as_ref());
        let other = t
            .iter()
            .cycle()
            .skip(k + 1)
            .take(t.len())
            .find(|o| o.task.mergeable() && state::fingerprint(o.task.as_ref()) != ours);
        let theirs = state::save(other.unwrap().task.as_ref(), other.unwrap().task.aggregator().as_ref()).unwrap();
        let err = state::merge(e.task.as_ref(), agg.as_mut(), &theirs).unwrap_err().to_string();
        assert!(err.contains("another collection"), "{}: {err}", e.label);
        // Every truncation, and one byte too many: errors; the accumulator is unchanged.
        let step = (saved.len() / 40).max(1);
        for cut in (0..saved.len()).step_by(step) {
            assert!(state::merge(e.task.as_ref(), agg.as_mut(), &saved[..cut]).is_err(), "{}: cut {cut}", e.label);
        }
        let padded = [&saved[..], &[0]].concat();
        let err = state::merge(e.task.as_ref(), agg.as_mut(), &padded).unwrap_err().to_string();
        assert!(err.contains("left over"), "{}: {err}", e.label);
        assert_eq!(
            state::save(e.task.as_ref(), agg.as_ref()).unwrap(),
            before,
            "{}: changed by a failed merge",
            e.label
        );
    }
}
