//! Saved accumulator states (`harmony_tasks::state`), what a distributed engine ships between its
//! partial and final aggregations: for every task and method of the fuzz table, reports split
//! into parts, each part's accumulator saved and merged into a fresh one, estimate what one
//! accumulator of every report estimates (to 1e-12); a state of another collection, a truncated
//! or padded state is an error, never a panic, and leaves the accumulator as it was. Rounds
//! (training, adaptive queries) save and restore whole.

#[path = "../../../fuzz/src/wire_reports.rs"]
#[allow(dead_code)]
mod wire_reports;

use harmony_protocol::estimates::Query;
use harmony_tasks::state;
use wire_reports::{rel_diff, table};

#[test]
fn saved_states_merge_to_the_single_accumulators_estimate() {
    let n = 240u64;
    let mut checked = 0;
    for e in table() {
        if !e.task.mergeable() {
            // Rounds (training, adaptive queries): reports apply in order, so parts do not merge
            // in any order, but the state saves and restores whole (a restarted server resumes
            // the round), byte for byte.
            let saved = state::save(e.task.as_ref(), e.task.aggregator().as_ref())
                .unwrap_or_else(|err| panic!("{}: {err}", e.label));
            let again =
                state::save(e.task.as_ref(), state::restore(e.task.as_ref(), &saved).unwrap().as_ref()).unwrap();
            assert_eq!(saved, again, "{}", e.label);
            continue;
        }
        let reports: Vec<Vec<u8>> = (0..n).map(|i| wire_reports::varied_report(e, i, 1000)).collect();
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
        (0..40).for_each(|i| agg.add(&wire_reports::varied_report(e, i, 1000)).unwrap());
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
