//! Bad parameters, bad inputs and malformed reports give the right error variant with a message
//! naming the field, the value and the valid range; aggregators merge exactly and refuse to
//! merge different mechanisms.

use harmony_core::numeric::{
    AnyNumeric, DuchiMulti, DuchiMultiReport, HarmonyBit, HarmonyBitReport, NUMERIC_NAMES, NumericMechanism,
    NumericReport, VectorMechanism,
};
use harmony_core::sampling::fast_rng;
use harmony_core::{Aggregator, Error, wire};

#[test]
fn bad_epsilon_is_an_invalid_parameter_for_every_mechanism() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.5, 1e9] {
        for name in NUMERIC_NAMES {
            let e = AnyNumeric::by_name(name, bad).unwrap_err();
            assert!(matches!(e, Error::InvalidParameter { name: "epsilon", .. }), "{name} {bad}: {e}");
            assert!(e.to_string().contains("epsilon is"), "{e}");
        }
        for e in [DuchiMulti::new(bad, 3).unwrap_err(), HarmonyBit::new(bad, 3).unwrap_err()] {
            assert!(matches!(e, Error::InvalidParameter { name: "epsilon", .. }), "{e}");
        }
    }
    for e in [DuchiMulti::new(1.0, 0).unwrap_err(), HarmonyBit::new(1.0, (1 << 24) + 1).unwrap_err()] {
        assert!(matches!(e, Error::InvalidParameter { name: "d", .. }), "{e}");
        assert!(e.to_string().contains("d is"), "{e}");
    }
}

#[test]
fn bad_values_are_invalid_inputs_naming_the_value_and_range() {
    let mut rng = fast_rng(1);
    for name in NUMERIC_NAMES {
        let m = AnyNumeric::by_name(name, 1.0).unwrap();
        for bad in [f64::NAN, 1.0000001, -2.0, f64::INFINITY] {
            let e = m.randomize(bad, &mut rng).unwrap_err();
            assert!(matches!(e, Error::InvalidInput { .. }), "{name}: {e}");
            let msg = e.to_string();
            assert!(msg.contains("value is") && msg.contains("[-1, 1]"), "{name}: {msg}");
        }
        let mut out = vec![NumericReport::Sign(true)];
        let e = m.randomize_batch(&[0.0, 0.5, -1.0, 3.5, 0.0], &mut rng, &mut out).unwrap_err();
        assert!(e.to_string().contains("value 3 is 3.5"), "{name}: {e}");
        assert_eq!(out.len(), 1, "{name}: nothing appended on error");
    }
}

#[test]
fn bad_vectors_name_the_length_or_coordinate() {
    let mut rng = fast_rng(2);
    let dm = DuchiMulti::new(1.0, 3).unwrap();
    let hb = HarmonyBit::new(1.0, 3).unwrap();
    let e = dm.randomize(&[0.0, 0.1], &mut rng).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }) && e.to_string().contains("vector length is 2, expected 3"), "{e}");
    let e = hb.randomize(&[0.0, f64::NAN, 0.0], &mut rng).unwrap_err();
    assert!(e.to_string().contains("coordinate 1 is NaN") && e.to_string().contains("[-1, 1]"), "{e}");
    let mut out = Vec::new();
    let e = dm.randomize_batch(&[vec![0.0; 3], vec![0.0, 0.0, 1.5]], &mut rng, &mut out).unwrap_err();
    assert!(e.to_string().contains("row 1 coordinate 2 is 1.5"), "{e}");
    let e = dm.randomize_batch(&[vec![0.0; 3], vec![0.0; 4]], &mut rng, &mut out).unwrap_err();
    assert!(e.to_string().contains("row 1 vector length is 4"), "{e}");
    assert!(out.is_empty());
}

#[test]
fn malformed_reports_are_invalid_reports() {
    for name in NUMERIC_NAMES {
        let m = AnyNumeric::by_name(name, 1.0).unwrap();
        let mut agg = m.aggregator();
        // Far out of range for every mechanism.
        let e = agg.add(&NumericReport::Fixed(i64::MAX)).unwrap_err();
        assert!(matches!(e, Error::InvalidReport { .. }), "{name}: {e}");
        // The wrong kind for the one-bit mechanism, and a batch error names the index.
        if *name == "duchi" {
            let e = agg.add_batch(&[NumericReport::Sign(true), NumericReport::Fixed(0)]).unwrap_err();
            assert!(e.to_string().contains("report 1: kind"), "{e}");
        } else if *name != "hm" {
            let e = agg.add_batch(&[NumericReport::Fixed(0), NumericReport::Sign(true)]).unwrap_err();
            assert!(e.to_string().contains("report 1: kind is \"Sign\""), "{name}: {e}");
        }
        assert_eq!(agg.count(), 0, "{name}: a bad batch adds nothing");
    }
    let pm = AnyNumeric::by_name("pm", 1.0).unwrap();
    let c = match pm {
        AnyNumeric::Piecewise(p) => p.scale(),
        _ => unreachable!(),
    };
    let e = pm.decode(&NumericReport::Fixed(((c + 0.01) * (1u64 << 20) as f64) as i64)).unwrap_err();
    assert!(e.to_string().contains("value is") && e.to_string().contains("pm output in [-"), "{e}");

    let dm = DuchiMulti::new(1.0, 70).unwrap();
    let mut agg = dm.aggregator();
    let e = agg.add(&DuchiMultiReport { bits: vec![0; 3] }).unwrap_err();
    assert!(e.to_string().contains("bits is \"3 words\", expected 2 64-bit words (d = 70)"), "{e}");
    let e = agg.add(&DuchiMultiReport { bits: vec![0, 1 << 63] }).unwrap_err();
    assert!(e.to_string().contains("padding bits") && e.to_string().contains("positions >= d = 70"), "{e}");
    let hb = HarmonyBit::new(1.0, 4).unwrap();
    let e = hb.aggregator().add(&HarmonyBitReport { j: 4, positive: true }).unwrap_err();
    assert!(e.to_string().contains("j is 4, expected a coordinate index in [0, 4)"), "{e}");

    // Wire envelopes: wrong kind byte, garbage payload.
    let bytes = wire::encode(&HarmonyBitReport { j: 1, positive: true });
    assert!(wire::decode::<DuchiMultiReport>(&bytes).unwrap_err().to_string().contains("kind is 9"));
    assert!(wire::decode::<HarmonyBitReport>(&[1, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
}

#[test]
fn merging_halves_equals_aggregating_all() {
    let mut rng = fast_rng(3);
    let ts: Vec<f64> = (0..3001).map(|i| ((i * 7) % 201) as f64 / 100.0 - 1.0).collect();
    for name in NUMERIC_NAMES {
        let m = AnyNumeric::by_name(name, 1.5).unwrap();
        let mut reports = Vec::new();
        m.randomize_batch(&ts, &mut rng, &mut reports).unwrap();
        let mut all = m.aggregator();
        all.add_batch(&reports).unwrap();
        let (mut left, mut right) = (m.aggregator(), m.aggregator());
        left.add_batch(&reports[..1234]).unwrap();
        right.add_batch(&reports[1234..]).unwrap();
        left.merge(&right).unwrap();
        let (a, b) = (all.estimate(), left.estimate());
        assert_eq!(all.count(), left.count());
        assert!(
            (a.value - b.value).abs() < 1e-12 && (a.std_error - b.std_error).abs() < 1e-12,
            "{name}: {a:?} vs {b:?}"
        );
    }
    let dm = DuchiMulti::new(1.0, 5).unwrap();
    let rows: Vec<Vec<f64>> = (0..1000).map(|i| vec![(i % 3) as f64 - 1.0, 0.5, -0.5, 0.0, 1.0]).collect();
    let mut reports = Vec::new();
    dm.randomize_batch(&rows, &mut rng, &mut reports).unwrap();
    let mut all = dm.aggregator();
    all.add_batch(&reports).unwrap();
    let (mut left, mut right) = (dm.aggregator(), dm.aggregator());
    left.add_batch(&reports[..400]).unwrap();
    right.add_batch(&reports[400..]).unwrap();
    left.merge(&right).unwrap();
    for (a, b) in all.estimate().iter().zip(left.estimate()) {
        assert!((a.value - b.value).abs() < 1e-12 && (a.std_error - b.std_error).abs() < 1e-12);
    }
}

#[test]
fn merging_different_mechanisms_is_incompatible() {
    let pm = AnyNumeric::by_name("pm", 1.0).unwrap();
    for other in [AnyNumeric::by_name("hm", 1.0).unwrap(), AnyNumeric::by_name("pm", 2.0).unwrap()] {
        let e = pm.aggregator().merge(&other.aggregator()).unwrap_err();
        assert!(matches!(e, Error::Incompatible(_)), "{e}");
    }
    let e = DuchiMulti::new(1.0, 3).unwrap().aggregator().merge(&DuchiMulti::new(1.0, 4).unwrap().aggregator());
    assert!(matches!(e, Err(Error::Incompatible(_))));
    let e = HarmonyBit::new(1.0, 3).unwrap().aggregator().merge(&HarmonyBit::new(2.0, 3).unwrap().aggregator());
    assert!(matches!(e, Err(Error::Incompatible(_))));
}

#[test]
fn empty_aggregators_report_infinite_uncertainty() {
    let m = AnyNumeric::by_name("duchi", 1.0).unwrap();
    let est = m.aggregator().estimate();
    assert_eq!(est.value, 0.0);
    assert!(est.std_error.is_infinite());
    let v = HarmonyBit::new(1.0, 2).unwrap().aggregator().estimate();
    assert_eq!(v.len(), 2);
    assert!(v.iter().all(|e| e.std_error.is_infinite()));
}
