//! Aggregators under adversarial reports: every numeric report a
//! decoder accepts is bounded by its mechanism's support, and no aggregator sum overflows or
//! wraps for any sequence of accepted reports, up to 2⁶³ of them.

use harmony_core::Aggregator;
use harmony_core::frequency::{AnyReport, GrrReport};
use harmony_core::numeric::{AnyNumeric, GRID_STEP, NUMERIC_NAMES, NumericMechanism, NumericReport, noise_bound};
use harmony_core::schema::{Attribute, Schema};
use harmony_core::strategy::{
    AttributeEstimate, AttributeReport, KChoice, RecordMechanism, RecordReport, StrategyKind, StrategyOptions,
};

/// A split collection of one numeric attribute (0–100) and one categorical (3 values), the
/// shape of the F1 collection (split + `numeric` + grr).
fn collection(numeric: &str, epsilon: f64) -> RecordMechanism {
    let schema = Schema::new(vec![
        Attribute::Numeric { name: "x".into(), min: 0.0, max: 100.0 },
        Attribute::Categorical { name: "c".into(), categories: vec!["a".into(), "b".into(), "c".into()] },
    ])
    .unwrap();
    let options = StrategyOptions {
        kind: StrategyKind::Split,
        epsilon,
        numeric_mechanism: numeric.parse().unwrap(),
        categorical_mechanism: "grr".parse().unwrap(),
        k: KChoice::Optimal,
    };
    RecordMechanism::new(schema, options).unwrap()
}

fn record(units: i64) -> RecordReport {
    RecordReport {
        attributes: vec![
            (0, AttributeReport::Numeric(NumericReport::Fixed(units))),
            (1, AttributeReport::Categorical(AnyReport::Grr(GrrReport { y: 0 }))),
        ],
        joint: None,
    }
}

/// The largest grid-unit report `agg` accepts (binary search; validation is monotone in |u|).
fn largest_accepted(agg: &harmony_core::strategy::RecordAggregator) -> i64 {
    let (mut lo, mut hi) = (0i64, 1i64 << 62);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if agg.validate(&record(mid)).is_ok() { lo = mid } else { hi = mid }
    }
    lo
}

/// F1 regression: the fuzzer's record report for a split + laplace + grr collection carried
/// `Fixed(2⁶² + 1)`, which the decoders accepted (bound 2⁴²); eight of them overflowed the
/// record aggregator's `i128` Σu² (a panic in debug builds, a silent wrap in release). Now the
/// report is refused (beyond ±(3 + 84/ε)), and the largest accepted report, added 8 times and
/// the aggregator then merged with itself 60 times (n = 2⁶³ reports), gives exact sums: the mean
/// is that report's value and the standard error is finite. Fails on the old main (the add is
/// accepted, then the sum overflows).
#[test]
fn f1_huge_reports_are_refused_and_sums_never_overflow() {
    for name in ["laplace", "scdf", "staircase"] {
        for eps in [0.004, 2.0] {
            let m = collection(name, eps);
            let mut agg = m.aggregator();
            let e = agg.add(&record((1 << 62) + 1)).unwrap_err();
            assert!(e.to_string().contains(name), "{name}: {e}");
            assert_eq!(agg.count(), 0);
            // Split: each of the two attributes at ε/2; the bound is B(ε/2) plus one grid unit.
            let top = largest_accepted(&agg);
            let bound_units = (noise_bound(eps / 2.0) / GRID_STEP).ceil() as i64 + 1;
            assert_eq!(top, bound_units, "{name} eps {eps}");
            for sign in [1, -1] {
                let mut agg = m.aggregator();
                for _ in 0..8 {
                    agg.add(&record(sign * top)).unwrap();
                }
                for _ in 0..60 {
                    let copy = agg.clone();
                    agg.merge(&copy).unwrap();
                }
                assert_eq!(agg.count(), 1 << 63);
                let AttributeEstimate::Numeric(est) = &agg.estimates()[0] else { panic!("numeric") };
                let want = (sign * top) as f64 * GRID_STEP;
                assert!(
                    (est.value - want).abs() <= 1e-12 * want.abs(),
                    "{name} eps {eps}: mean {} vs {want}",
                    est.value
                );
                assert!(est.std_error.is_finite() && est.std_error >= 0.0, "{name} eps {eps}: se {}", est.std_error);
            }
        }
    }
}

/// Every 1-D mechanism's decoder bounds its reports to the mechanism's support (PM and HM: ±C;
/// Laplace, SCDF, staircase: ±(3 + 84/ε); Duchi: signs only), over the whole ε range.
#[test]
fn every_numeric_decoder_bounds_its_reports() {
    for eps in [harmony_core::params::MIN_EPSILON, 0.5, 1.0, 8.0, harmony_core::params::MAX_EPSILON] {
        for name in NUMERIC_NAMES {
            let m = AnyNumeric::by_name(name, eps).unwrap();
            let limit = match &m {
                AnyNumeric::Piecewise(p) => p.scale(),
                AnyNumeric::Hybrid(h) => h.piecewise().map(|p| p.scale()).unwrap_or(0.0),
                AnyNumeric::Duchi(_) => 0.0,
                _ => noise_bound(eps),
            };
            let units = if limit > 0.0 { (limit / GRID_STEP).ceil() as i64 + 1 } else { -1 };
            for u in [units + 1, -units - 1, 1 << 62, i64::MAX, i64::MIN] {
                assert!(m.decode(&NumericReport::Fixed(u)).is_err(), "{name} eps {eps}: Fixed({u}) accepted");
            }
            if units >= 0 {
                assert!(m.decode(&NumericReport::Fixed(units)).is_ok(), "{name} eps {eps}");
                assert!(m.decode(&NumericReport::Fixed(-units)).is_ok(), "{name} eps {eps}");
            }
        }
    }
}
