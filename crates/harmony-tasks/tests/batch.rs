//! The stored-column paths a distributed engine takes (`Task::add_checked_batch`,
//! `Task::add_checked_times`, `TaskAggregator::add_times`) against the server's path (`Task::validate`, then
//! `TaskAggregator::add`, one report at a time): for every task and method of the fuzz table,
//! the same accumulator (its estimate, to 1e-12), and the same verdict on every report of a
//! corpus of bad ones (truncated, another collection's, noise), with the index of the bad one.

#[path = "../../../fuzz/src/wire_reports.rs"]
#[allow(dead_code)]
mod wire_reports;

use harmony_protocol::estimates::Query;
use harmony_tasks::TaskAggregator;
use wire_reports::{Entry, rel_diff, table};

/// The two accumulators estimate the same (an aggregator may hold its reports differently, e.g.
/// OLH's batch kernel counts at once what single adds keep pending).
fn assert_same(e: &Entry, a: &dyn TaskAggregator, b: &dyn TaskAggregator, what: &str) {
    assert_eq!(a.count(), b.count(), "{}: {what}", e.label);
    let q = Query::default();
    let (a, b) = (e.task.estimate(a, &q).unwrap(), e.task.estimate(b, &q).unwrap());
    let (a, b) = (serde_json::to_value(a).unwrap(), serde_json::to_value(b).unwrap());
    let d = rel_diff(&a, &b);
    assert!(d <= 1e-12, "{}: {what} differs by {d:e}\n{a}\n{b}", e.label);
}

/// The entries an engine aggregates (model rounds have no stored-column path).
fn mergeable() -> impl Iterator<Item = (usize, &'static Entry)> {
    table().iter().enumerate().filter(|(_, e)| e.task.mergeable())
}

/// Bad (or surprising) bodies for `e`: every truncation of a valid report, one byte more,
/// the reports of the other entries, and seeded noise.
fn corpus(k: usize, e: &Entry) -> Vec<Vec<u8>> {
    let good = wire_reports::varied_report(e, 7, 99);
    let mut bodies: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
    bodies.push([&good[..], &[0]].concat());
    bodies.extend(mergeable().filter(|(j, _)| *j != k).map(|(_, o)| wire_reports::varied_report(o, 3, 5)));
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ k as u64;
    for len in [1usize, 2, 3, 5, 9, 16, 40] {
        bodies.push(
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect(),
        );
    }
    bodies
}

#[test]
fn batches_and_repeats_equal_report_by_report() {
    let mut checked = 0;
    for (_, e) in mergeable() {
        let reports: Vec<Vec<u8>> = (0..200).map(|i| wire_reports::varied_report(e, i, 77)).collect();
        let mut one_by_one = e.task.aggregator();
        for r in &reports {
            e.task.validate(r).unwrap();
            one_by_one.add(r).unwrap();
        }
        let mut batched = e.task.aggregator();
        let slices: Vec<&[u8]> = reports.iter().map(Vec::as_slice).collect();
        for chunk in slices.chunks(64) {
            e.task
                .add_checked_batch(batched.as_mut(), chunk)
                .unwrap_or_else(|(i, err)| panic!("{}: {i}: {err}", e.label));
        }
        assert_same(e, batched.as_ref(), one_by_one.as_ref(), "add_checked_batch");
        // Each of the first 20 reports k + 1 times, by add_times, by add_checked_times and by add.
        let (mut repeated, mut checked_times) = (e.task.aggregator(), e.task.aggregator());
        let mut added = e.task.aggregator();
        for (k, r) in reports.iter().take(20).enumerate() {
            repeated.add_times(r, k as u64 + 1).unwrap();
            e.task.add_checked_times(checked_times.as_mut(), r, k as u64 + 1).unwrap();
            (0..=k).for_each(|_| added.add(r).unwrap());
        }
        repeated.add_times(&reports[0], 0).unwrap();
        assert_eq!(repeated.count(), 210, "{}", e.label);
        assert_same(e, repeated.as_ref(), added.as_ref(), "add_times");
        assert_same(e, checked_times.as_ref(), added.as_ref(), "add_checked_times");
        checked += 1;
    }
    assert!(checked > 30, "{checked} mergeable entries");
}

#[test]
fn batches_refuse_what_validate_refuses_and_name_the_report() {
    let mut refused = 0;
    for (k, e) in mergeable() {
        let good = wire_reports::varied_report(e, 1, 99);
        for bad in corpus(k, e) {
            let server = e.task.validate(&bad);
            let mut agg = e.task.aggregator();
            let batch = e.task.add_checked_batch(agg.as_mut(), &[&good, &bad]);
            match (&server, &batch) {
                (Ok(()), Ok(())) => {}
                (Err(_), Err((1, _))) => refused += 1,
                _ => panic!("{}: body {bad:?}: validate says {server:?}, the batch {batch:?}", e.label),
            }
            let times = e.task.add_checked_times(e.task.aggregator().as_mut(), &bad, 5);
            assert_eq!(times.is_ok(), server.is_ok(), "{}: body {bad:?}: add_checked_times {times:?}", e.label);
        }
    }
    eprintln!("{refused} bad bodies refused by validate and by the batch alike");
    assert!(refused > 500, "{refused} bad bodies refused");
}

/// The entries' reports that are OLH reports, as their fields (harmony_data's `OlhFields`).
fn olh_columns(reports: &[Vec<u8>]) -> Option<(Vec<i64>, Vec<i32>)> {
    let decoded: Option<Vec<_>> = reports.iter().map(|r| harmony_core::frequency::OlhReport::decode_fast(r)).collect();
    let decoded = decoded?;
    Some((decoded.iter().map(|r| r.seed as i64).collect(), decoded.iter().map(|r| r.y as i32).collect()))
}

#[test]
fn olh_fields_equal_their_bytes_and_bad_values_are_named() {
    use harmony_tasks::ReportColumns;
    let mut checked = 0;
    for (_, e) in mergeable() {
        let reports: Vec<Vec<u8>> = (0..300).map(|i| wire_reports::varied_report(e, i, 77)).collect();
        let Some((seeds, ys)) = olh_columns(&reports) else { continue };
        let mut by_bytes = e.task.aggregator();
        let slices: Vec<&[u8]> = reports.iter().map(Vec::as_slice).collect();
        e.task.add_checked_batch(by_bytes.as_mut(), &slices).unwrap();
        let mut by_columns = e.task.aggregator();
        for (s, y) in seeds.chunks(128).zip(ys.chunks(128)) {
            let columns = ReportColumns::Olh { seeds: s, ys: y };
            e.task.add_checked_columns(by_columns.as_mut(), columns).unwrap_or_else(|(i, err)| panic!("{i}: {err}"));
        }
        assert_same(e, by_columns.as_ref(), by_bytes.as_ref(), "add_checked_columns");
        // The default path (bytes rebuilt) agrees too.
        let mut default = e.task.aggregator();
        let columns = ReportColumns::Olh { seeds: &seeds, ys: &ys };
        harmony_tasks::erased::add_columns_as_bytes(e.task.as_ref(), default.as_mut(), columns).unwrap();
        assert_same(e, default.as_ref(), by_bytes.as_ref(), "add_columns_as_bytes");
        // y = -1 (2^32 - 1) is outside [0, g): named by its row, as validate names it.
        let mut bad_ys = ys.clone();
        bad_ys[5] = -1;
        let columns = ReportColumns::Olh { seeds: &seeds, ys: &bad_ys };
        let (i, err) = e.task.add_checked_columns(e.task.aggregator().as_mut(), columns).unwrap_err();
        let mut buf = Vec::new();
        columns.encode_row(5, &mut buf);
        assert_eq!((i, err.to_string()), (5, e.task.validate(&buf).unwrap_err().to_string()), "{}", e.label);
        let short = ReportColumns::Olh { seeds: &seeds, ys: &ys[..10] };
        assert!(e.task.add_checked_columns(e.task.aggregator().as_mut(), short).is_err(), "{}", e.label);
        checked += 1;
    }
    assert!(checked >= 2, "{checked} entries with OLH reports");
}

#[test]
fn one_attribute_records_as_fields_equal_their_bytes_and_bad_ones_are_named() {
    use harmony_core::strategy::RecordReport;
    use harmony_tasks::ReportColumns;
    let mut checked = 0;
    for (_, e) in mergeable() {
        let reports: Vec<Vec<u8>> = (0..300).map(|i| wire_reports::varied_report(e, i, 77)).collect();
        let one: Option<Vec<(u32, i64)>> = reports
            .iter()
            .map(|r| harmony_core::wire::decode::<RecordReport>(r).ok().and_then(|x| x.as_one_fixed()))
            .collect();
        let Some(one) = one else { continue };
        let attributes: Vec<i32> = one.iter().map(|(j, _)| *j as i32).collect();
        let units: Vec<i64> = one.iter().map(|(_, u)| *u).collect();
        let mut by_bytes = e.task.aggregator();
        let slices: Vec<&[u8]> = reports.iter().map(Vec::as_slice).collect();
        e.task.add_checked_batch(by_bytes.as_mut(), &slices).unwrap();
        let mut by_columns = e.task.aggregator();
        let columns = ReportColumns::FixedRecords { attributes: &attributes, units: &units };
        e.task.add_checked_columns(by_columns.as_mut(), columns).unwrap_or_else(|(i, err)| panic!("{i}: {err}"));
        assert_same(e, by_columns.as_ref(), by_bytes.as_ref(), "add_checked_columns");
        // An attribute the schema lacks, and a value outside the mechanism's range: named by
        // their rows as validate names them.
        for (row, j, u) in [(3, 9, units[3]), (7, attributes[7], i64::MAX)] {
            let (mut js, mut us) = (attributes.clone(), units.clone());
            (js[row], us[row]) = (j, u);
            let columns = ReportColumns::FixedRecords { attributes: &js, units: &us };
            let (i, err) = e.task.add_checked_columns(e.task.aggregator().as_mut(), columns).unwrap_err();
            let mut buf = Vec::new();
            columns.encode_row(row, &mut buf);
            assert_eq!((i, err.to_string()), (row, e.task.validate(&buf).unwrap_err().to_string()), "{}", e.label);
        }
        checked += 1;
    }
    assert!(checked >= 2, "{checked} entries with one-attribute records");
}
