//! The fused collection path (`RecordColumns` + `RecordAggregator::collect`): estimates unbiased
//! with the closed-form variance for every kind of attribute mechanism, the same input errors as
//! the per-record path (with the row), reproducibility and ranges. The exact law of the
//! aggregate for small populations is checked in `strategy/collect.rs`'s unit tests.

use harmony_core::Aggregator;
use harmony_core::Error;
use harmony_core::estimate::{Moments, Z_TEST};
use harmony_core::sampling::fast_rng;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::strategy::{
    AttributeEstimate, KChoice, RecordColumns, RecordMechanism, RecordReport, StrategyKind, StrategyOptions,
};

/// Two numeric attributes and categorical ones of 3, 2 and 70 categories (70 > 64: unary
/// reports of two words).
fn schema() -> Schema {
    let cat = |name: &str, d: usize| Attribute::Categorical {
        name: name.into(),
        categories: (0..d).map(|v| format!("{name}{v}")).collect(),
    };
    Schema::new(vec![
        Attribute::Numeric { name: "a".into(), min: 0.0, max: 10.0 },
        cat("c", 3),
        Attribute::Numeric { name: "b".into(), min: -1.0, max: 1.0 },
        cat("s", 2),
        cat("w", 70),
    ])
    .unwrap()
}

fn population(n: usize) -> Vec<Value> {
    (0..n)
        .flat_map(|i| {
            [
                Value::Unit((i % 11) as f64 / 5.0 - 1.0),
                Value::Category(((i % 3 == 0) as u32) + (i % 5 == 0) as u32),
                Value::Unit((i * 7 % 13) as f64 / 6.0 - 1.0),
                Value::Category((i % 4 == 0) as u32),
                Value::Category((i * i % 70) as u32),
            ]
        })
        .collect()
}

/// Over many collections of a fixed population by `collect`, every attribute's estimate (for
/// categorical ones: of two categories) has the truth as mean and the closed-form variance, at
/// z = 4.42 (false failure 1e-5 per check).
#[test]
fn collect_estimates_unbiased_with_closed_form_variance() {
    let schema = schema();
    let n = 300usize;
    let rows = population(n);
    let data = RecordColumns::new(&schema, &rows).unwrap();
    let d = schema.len();
    let cases: &[(StrategyKind, &str, &str, KChoice, f64)] = &[
        (StrategyKind::SampleK, "hm", "oue", KChoice::Fixed(2), 2.0),
        (StrategyKind::SampleK, "pm", "grr", KChoice::Fixed(1), 1.0),
        (StrategyKind::SampleK, "hm", "adaptive", KChoice::Fixed(1), 4.0),
        (StrategyKind::SampleK, "laplace", "sue", KChoice::Fixed(3), 3.0),
        (StrategyKind::Harmony, "duchi", "hadamard", KChoice::Optimal, 1.0),
        (StrategyKind::Split, "duchi-multi", "oue", KChoice::Optimal, 2.0),
        (StrategyKind::Split, "laplace", "olh", KChoice::Optimal, 4.0),
        (StrategyKind::Split, "pm", "grr", KChoice::Optimal, 8.0),
    ];
    let mut rng = fast_rng(2024);
    for &(kind, num, cat, k, eps) in cases {
        let opts = StrategyOptions {
            kind,
            epsilon: eps,
            numeric_mechanism: num.parse().unwrap(),
            categorical_mechanism: cat.parse().unwrap(),
            k,
        };
        let mech = RecordMechanism::new(schema.clone(), opts).unwrap();
        let runs = 2000;
        // Per attribute, the estimates of (numeric) the mean, (categorical) categories 0 and 1.
        let mut mom = vec![[Moments::default(); 2]; d];
        for _ in 0..runs {
            let mut agg = mech.aggregator();
            agg.collect(&data, 0..n, &mut rng).unwrap();
            assert_eq!(agg.count(), n as u64);
            for (j, e) in agg.estimates().iter().enumerate() {
                match e {
                    AttributeEstimate::Numeric(e) => mom[j][0].push(e.value),
                    AttributeEstimate::Categorical(f) => {
                        mom[j][0].push(f.frequencies[0]);
                        mom[j][1].push(f.frequencies[1]);
                    }
                }
            }
        }
        let column = |j: usize| rows.iter().skip(j).step_by(d).copied().collect::<Vec<Value>>();
        for (j, a) in schema.attributes().iter().enumerate() {
            let values = column(j);
            let checks: Vec<(f64, f64)> = if a.is_numeric() {
                let ts: Vec<f64> = values.iter().map(|v| if let Value::Unit(t) = v { *t } else { 0.0 }).collect();
                let (s, s2) = (ts.iter().sum::<f64>(), ts.iter().map(|t| t * t).sum::<f64>());
                vec![(s / n as f64, mech.numeric_variance(j, s, s2, n as f64))]
            } else {
                let mut freqs = vec![0.0; a.cardinality()];
                for v in &values {
                    if let Value::Category(c) = v {
                        freqs[*c as usize] += 1.0 / n as f64;
                    }
                }
                let var = mech.categorical_variance(j, &freqs, n as f64);
                vec![(freqs[0], var[0]), (freqs[1], var[1])]
            };
            for (c, (truth, var)) in checks.into_iter().enumerate() {
                let m = &mom[j][c];
                let (zm, zv) = (m.z_mean(truth, var), m.z_variance(var));
                assert!(zm.abs() < Z_TEST, "{kind:?} {num}/{cat}: attribute {j}[{c}] mean z = {zm:.2} (var {var:.3e})");
                assert!(
                    zv.abs() < Z_TEST,
                    "{kind:?} {num}/{cat}: attribute {j}[{c}] variance z = {zv:.2} (emp {:.3e} vs {var:.3e})",
                    m.variance()
                );
            }
        }
    }
}

/// Bad records: `RecordColumns::new` gives the per-record path's error, prefixed with the row.
#[test]
fn invalid_values_give_the_per_record_error_with_the_row() {
    let schema = schema();
    let mech = RecordMechanism::new(schema.clone(), StrategyOptions::default_for(StrategyKind::SampleK, 1.0)).unwrap();
    let bad_cells = [
        (0, Value::Unit(1.5)),
        (1, Value::Category(3)),
        (2, Value::Category(0)),
        (4, Value::Category(70)),
        (3, Value::Unit(0.0)),
    ];
    for (col, bad) in bad_cells {
        let mut rows = population(5);
        rows[3 * 5 + col] = bad;
        let reference = mech.randomize(&rows[15..20], &mut fast_rng(1)).unwrap_err();
        let e = RecordColumns::new(&schema, &rows).unwrap_err();
        let Error::InvalidInput { name, value, expected } = &e else { panic!("{e:?}") };
        let Error::InvalidInput { name: n0, value: v0, expected: x0 } = &reference else { panic!("{reference:?}") };
        assert_eq!(name, &format!("row 3: {n0}"), "{e}");
        assert_eq!((value, expected), (v0, x0));
        assert!(e.to_string().contains(schema.attributes()[col].name()), "{e}");
    }
    let e = RecordColumns::new(&schema, &population(2)[..7]).unwrap_err();
    assert!(e.to_string().contains("7 values") && e.to_string().contains("5 attributes"), "{e}");
}

/// A range beyond the data, or columns of another schema, are errors that add nothing.
#[test]
fn collect_rejects_bad_ranges_and_other_schemas() {
    let schema = schema();
    let data = RecordColumns::new(&schema, &population(10)).unwrap();
    assert_eq!(data.len(), 10);
    let mech = RecordMechanism::new(schema, StrategyOptions::default_for(StrategyKind::Split, 1.0)).unwrap();
    let mut agg = mech.aggregator();
    let e = agg.collect(&data, 5..11, &mut fast_rng(1)).unwrap_err();
    assert!(e.to_string().contains("5..11") && e.to_string().contains("10 records"), "{e}");
    let other = Schema::new(vec![Attribute::Numeric { name: "x".into(), min: 0.0, max: 1.0 }]).unwrap();
    let other_data = RecordColumns::new(&other, &[Value::Unit(0.5)]).unwrap();
    let e = agg.collect(&other_data, 0..1, &mut fast_rng(1)).unwrap_err();
    assert!(e.to_string().contains("category counts"), "{e}");
    assert_eq!(agg.count(), 0);
}

/// The same seed gives the same estimates; collecting two ranges into two aggregators and
/// merging them gives the estimates of collecting both into one (counts and numeric sums are
/// exact integers).
#[test]
fn collect_is_reproducible_and_ranges_merge() {
    let schema = schema();
    let n = 5000;
    let data = RecordColumns::new(&schema, &population(n)).unwrap();
    for kind in [StrategyKind::Split, StrategyKind::SampleK, StrategyKind::Harmony] {
        let mut opts = StrategyOptions::default_for(kind, 2.0);
        if kind == StrategyKind::Split {
            // Exact integer sums (duchi-multi's joint sums are floating point, so the merge
            // order moves their last bits).
            (opts.numeric_mechanism, opts.categorical_mechanism) =
                (harmony_core::RecordNumeric::Pm, harmony_core::OracleKind::Grr);
        }
        let mech = RecordMechanism::new(schema.clone(), opts).unwrap();
        let run = |seed: u64| {
            let mut agg = mech.aggregator();
            agg.collect(&data, 0..n, &mut fast_rng(seed)).unwrap();
            agg.estimates()
        };
        assert_eq!(run(9), run(9), "{kind:?}");
        assert_ne!(run(9), run(10), "{kind:?}");
        let (mut a, mut b, mut both) = (mech.aggregator(), mech.aggregator(), mech.aggregator());
        a.collect(&data, 0..1234, &mut fast_rng(3)).unwrap();
        b.collect(&data, 1234..n, &mut fast_rng(4)).unwrap();
        both.collect(&data, 0..1234, &mut fast_rng(3)).unwrap();
        both.collect(&data, 1234..n, &mut fast_rng(4)).unwrap();
        a.merge(&b).unwrap();
        assert_eq!(a.count(), n as u64);
        assert_eq!(a.estimates(), both.estimates(), "{kind:?}");
        // Into an aggregator that never collected (its unary counters not yet allocated).
        let mut fresh = mech.aggregator();
        fresh.merge(&a).unwrap();
        assert_eq!(fresh.estimates(), a.estimates(), "{kind:?}");
        // Per-record reports and collected ones aggregate together.
        let mut report = RecordReport::default();
        mech.randomize_into(&population(1), &mut fast_rng(5), &mut report, &mut Vec::new()).unwrap();
        a.add(&report).unwrap();
        assert_eq!(a.count(), n as u64 + 1);
    }
}
