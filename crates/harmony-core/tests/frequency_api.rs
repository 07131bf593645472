//! The frequency oracles' contracts: merging is exact, incompatible merges and bad reports are
//! typed errors, `add_batch` is all or nothing, bad parameters and inputs name the field, value
//! and range, and decoding never panics.

mod frequency_support;

use harmony_core::aggregate::aggregate_parallel;
use harmony_core::error::Error;
use harmony_core::frequency::*;
use harmony_core::sampling::fast_rng;
use harmony_core::wire::{self, WireReport};
use harmony_core::{Aggregator, FrequencyOracle};

fn reports(o: &AnyOracle, n: usize, seed: u64) -> Vec<AnyReport> {
    let mut rng = fast_rng(seed);
    let d = o.domain_size();
    (0..n).map(|i| o.randomize((i * i + 3) % d, &mut rng).unwrap()).collect()
}

#[test]
fn merge_and_parallel_equal_a_single_pass() {
    for (i, name) in FREQUENCY_NAMES.iter().enumerate() {
        for d in [3usize, 70] {
            let o = AnyOracle::by_name(name, 1.5, d).unwrap();
            let rs = reports(&o, 5000, 4000 + i as u64);
            let mut single = o.aggregator();
            rs.iter().for_each(|r| single.add(r).unwrap());
            let (a, b) = rs.split_at(1234);
            let (b, c) = b.split_at(777);
            let mut pa = o.aggregator();
            pa.add_batch(a).unwrap();
            let mut pb = o.aggregator();
            b.iter().for_each(|r| pb.add(r).unwrap());
            let mut pc = o.aggregator();
            pc.add_batch(c).unwrap();
            pb.merge(&pc).unwrap();
            pa.merge(&pb).unwrap();
            assert_eq!(pa.count(), 5000);
            assert_eq!(pa.estimate(), single.estimate(), "{name} d = {d}");
            let par = aggregate_parallel(&o.aggregator(), &rs).unwrap();
            assert_eq!(par.estimate(), single.estimate(), "{name} d = {d} (parallel)");
            // Merging an empty aggregator changes nothing.
            pa.merge(&o.aggregator()).unwrap();
            assert_eq!(pa.estimate(), single.estimate());
        }
    }
}

#[test]
fn merging_different_parameters_is_incompatible() {
    for name in FREQUENCY_NAMES {
        let base = AnyOracle::by_name(name, 1.0, 10).unwrap();
        for other in [AnyOracle::by_name(name, 2.0, 10).unwrap(), AnyOracle::by_name(name, 1.0, 11).unwrap()] {
            let e = base.aggregator().merge(&other.aggregator()).unwrap_err();
            assert!(matches!(e, Error::Incompatible(_)), "{name}: {e}");
        }
    }
    let a = BassilySmith::with_matrix(1.0, 10, 16, 1).unwrap();
    let b = BassilySmith::with_matrix(1.0, 10, 16, 2).unwrap();
    assert!(matches!(a.aggregator().merge(&b.aggregator()), Err(Error::Incompatible(_))));
    let a = Olh::with_g(1.0, 10, 3).unwrap();
    let b = Olh::with_g(1.0, 10, 4).unwrap();
    assert!(matches!(a.aggregator().merge(&b.aggregator()), Err(Error::Incompatible(_))));
}

/// A d-bit vector with its first `ones` bits set.
fn ss_bits(d: usize, ones: usize) -> Vec<u64> {
    let mut bits = vec![0u64; d.div_ceil(64)];
    (0..ones).for_each(|v| bits[v / 64] |= 1 << (v % 64));
    bits
}

/// A report of the right kind that `validate` must reject, with the field it must name.
fn bad_report(o: &AnyOracle) -> Vec<(AnyReport, &'static str)> {
    let d = o.domain_size();
    match o {
        AnyOracle::Grr(_) => vec![(AnyReport::Grr(GrrReport { y: d as u32 }), "y is")],
        AnyOracle::Sue(_) | AnyOracle::Oue(_) => vec![
            (AnyReport::Unary(UnaryReport { bits: vec![0; d.div_ceil(64) + 1] }), "bits is"),
            (AnyReport::Unary(UnaryReport { bits: vec![] }), "bits is"),
            (AnyReport::Unary(UnaryReport { bits: vec![1 << (d % 64); d.div_ceil(64)] }), "padding"),
        ],
        AnyOracle::Olh(h) => vec![(AnyReport::Olh(OlhReport { seed: 9, y: h.g() }), "y is")],
        AnyOracle::Hadamard(h) => vec![(AnyReport::Hadamard(HadamardReport { j: h.rows() as u32, bit: true }), "j is")],
        AnyOracle::Hr(h) => vec![(AnyReport::Hr(HrReport { y: h.outputs() as u32 }), "y is")],
        AnyOracle::BassilySmith(b) => {
            vec![(AnyReport::BassilySmith(BassilySmithReport { j: b.rows() as u32, bit: false }), "j is")]
        }
        AnyOracle::Adaptive(a) => {
            let wrap = |r: AnyReport| AnyReport::Adaptive(AutoReport(Box::new(r)));
            let mut bad: Vec<(AnyReport, &str)> =
                bad_report(a.inner()).into_iter().map(|(r, f)| (wrap(r), f)).collect();
            let other =
                if a.branch() == "grr" { AnyReport::Hr(HrReport { y: 0 }) } else { AnyReport::Grr(GrrReport { y: 0 }) };
            bad.push((wrap(other), "kind is"));
            bad
        }
        AnyOracle::Ss(o) => vec![
            (AnyReport::Ss(SsReport { bits: vec![0; d.div_ceil(64)] }), "bits is"),
            (AnyReport::Ss(SsReport { bits: vec![] }), "bits is"),
            (AnyReport::Ss(SsReport { bits: vec![1 << (d % 64); d.div_ceil(64)] }), "padding"),
            (AnyReport::Ss(SsReport { bits: ss_bits(d, o.k() + 1) }), "bits set"),
        ],
        AnyOracle::Cms(c) => {
            let w = c.m().div_ceil(64);
            vec![
                (AnyReport::Cms(CmsReport { j: c.k() as u32, bits: vec![0; w] }), "j is"),
                (AnyReport::Cms(CmsReport { j: 0, bits: vec![0; w + 1] }), "bits is"),
            ]
        }
        AnyOracle::Hcms(c) => vec![
            (AnyReport::Hcms(HcmsReport { j: c.k() as u32, l: 0, bit: true }), "j is"),
            (AnyReport::Hcms(HcmsReport { j: 0, l: c.m() as u32, bit: true }), "l is"),
        ],
        AnyOracle::Rappor(r) => {
            let s = r.params().shape;
            vec![
                (
                    AnyReport::Rappor(RapporReport { cohort: s.cohorts as u32, bits: vec![0; s.m.div_ceil(64)] }),
                    "cohort is",
                ),
                (AnyReport::Rappor(RapporReport { cohort: 0, bits: vec![] }), "bits is"),
            ]
        }
    }
}

#[test]
fn out_of_range_reports_are_named_and_add_batch_is_all_or_nothing() {
    for (i, name) in FREQUENCY_NAMES.iter().enumerate() {
        // d = 5: adaptive uses GRR at eps = 1; d = 100 (not a multiple of 64): SS.
        for d in [5usize, 100] {
            let o = AnyOracle::by_name(name, 1.0, d).unwrap();
            let good = reports(&o, 300, 5000 + i as u64);
            for (bad, field) in bad_report(&o) {
                let mut agg = o.aggregator();
                agg.add_batch(&good[..100]).unwrap();
                let before = agg.estimate();
                let e = agg.validate(&bad).unwrap_err();
                assert!(matches!(e, Error::InvalidReport { .. }), "{name}: {e}");
                assert!(e.to_string().contains(field), "{name} d = {d}: '{e}' lacks '{field}'");
                assert!(e.to_string().contains("expected"), "{name}: {e}");
                // One bad report at index 170 of a batch of 200: nothing is added.
                let mut batch = good[100..300].to_vec();
                batch[170] = bad.clone();
                let e = agg.add_batch(&batch).unwrap_err();
                assert!(e.to_string().contains("report 170:"), "{name}: {e}");
                assert!(agg.add(&bad).is_err());
                assert_eq!(agg.count(), 100, "{name}");
                assert_eq!(agg.estimate(), before, "{name} d = {d}: a rejected batch changed the state");
                // The parallel path names the global index.
                let mut all = good.clone();
                all[250] = bad;
                let e = aggregate_parallel(&o.aggregator(), &all).unwrap_err();
                assert!(e.to_string().contains("report 250:"), "{name}: {e}");
            }
        }
    }
}

#[test]
fn bad_parameters_and_inputs_are_named() {
    for name in FREQUENCY_NAMES {
        for eps in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -1.0] {
            let e = AnyOracle::by_name(name, eps, 10).unwrap_err();
            assert!(matches!(e, Error::InvalidParameter { name: "epsilon", .. }), "{name} {eps}: {e}");
            assert!(e.to_string().contains("epsilon is"), "{e}");
        }
        for d in [0usize, 1] {
            let e = AnyOracle::by_name(name, 1.0, d).unwrap_err();
            assert!(matches!(e, Error::InvalidParameter { name: "d", .. }), "{name} d = {d}: {e}");
            assert!(e.to_string().contains(&format!("d is {d}")), "{e}");
        }
        let o = AnyOracle::by_name(name, 1.0, 10).unwrap();
        let mut rng = fast_rng(6000);
        let e = o.randomize(10, &mut rng).unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }) && e.to_string().contains("[0, 10)"), "{name}: {e}");
        let mut out = Vec::new();
        let e = o.randomize_batch(&[1, 2, 10, 3], &mut rng, &mut out).unwrap_err();
        assert!(e.to_string().contains("category 2 is 10"), "{name}: {e}");
        assert!(out.is_empty());
    }
    // The direct constructors validate too.
    assert!(Grr::new(f64::NAN, 3).is_err() && Sue::new(1.0, 1).is_err() && Oue::new(-1.0, 3).is_err());
    assert!(Olh::new(0.0, 3).is_err() && Hadamard::new(1.0, 0).is_err() && HadamardResponse::new(1.0, 1).is_err());
    assert!(BassilySmith::new(f64::INFINITY, 3).is_err() && Adaptive::new(1.0, 1).is_err());
    assert!(BassilySmith::with_matrix(1.0, 10, 0, 1).unwrap_err().to_string().contains("m is 0"));
}

fn check_decoding<T: WireReport + std::fmt::Debug + PartialEq>(r: &T) {
    let bytes = wire::encode(r);
    assert_eq!(&wire::decode::<T>(&bytes).unwrap(), r);
    assert_eq!(&wire::from_json::<T>(&wire::to_json(r)).unwrap(), r);
    for cut in 0..bytes.len() {
        let e = wire::decode::<T>(&bytes[..cut]).unwrap_err();
        assert!(matches!(e, Error::InvalidReport { .. }), "{e}");
    }
    let mut long = bytes.clone();
    long.push(7);
    assert!(wire::decode::<T>(&long).unwrap_err().to_string().contains("trailing"));
}

#[test]
fn wire_roundtrips_and_rejects_truncated_or_garbled_bytes() {
    let mut rng = fast_rng(7000);
    for name in FREQUENCY_NAMES {
        let o = AnyOracle::by_name(name, 1.0, 70).unwrap();
        let r = o.randomize(69, &mut rng).unwrap();
        match &r {
            AnyReport::Grr(x) => check_decoding(x),
            AnyReport::Unary(x) => check_decoding(x),
            AnyReport::Olh(x) => check_decoding(x),
            AnyReport::Hadamard(x) => check_decoding(x),
            AnyReport::Hr(x) => check_decoding(x),
            AnyReport::BassilySmith(x) => check_decoding(x),
            AnyReport::Adaptive(x) => check_decoding(x),
            AnyReport::Cms(x) => check_decoding(x),
            AnyReport::Hcms(x) => check_decoding(x),
            AnyReport::Rappor(x) => check_decoding(x),
            AnyReport::Ss(x) => check_decoding(x),
        }
        // Garbled bytes: every single-byte corruption decodes to an error or to a report that
        // the aggregator validates or rejects, never a panic.
        let bytes = r.encode();
        let agg = o.aggregator();
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut g = bytes.clone();
                g[i] ^= flip;
                if let Ok(decoded) = o.decode_report(&g) {
                    let _ = agg.validate(&decoded);
                }
                let _ = AnyReport::decode(&g);
            }
        }
        assert!(o.report_from_json("{\"nope\": 1}").is_err());
        assert!(o.decode_report(&[]).unwrap_err().to_string().contains("header"));
    }
    // A unary report whose word count is garbled is rejected by the aggregator, by name.
    let oue = Oue::new(1.0, 70).unwrap();
    let bytes = wire::encode(&UnaryReport { bits: vec![1, 2, 3] });
    let r = wire::decode::<UnaryReport>(&bytes).unwrap();
    assert!(oue.aggregator().validate(&r).unwrap_err().to_string().contains("bits is \"3 words\""));
}

#[test]
fn estimates_with_no_reports_are_zero_with_infinite_error() {
    for name in FREQUENCY_NAMES {
        let o = AnyOracle::by_name(name, 1.0, 6).unwrap();
        let e = o.aggregator().estimate();
        assert_eq!(e.n, 0);
        assert_eq!(e.frequencies, vec![0.0; 6], "{name}");
        assert!(e.std_errors.iter().all(|s| s.is_infinite()), "{name}");
    }
}

#[test]
fn extreme_epsilons_stay_finite() {
    let mut rng = fast_rng(8000);
    for name in FREQUENCY_NAMES {
        for eps in [harmony_core::params::MIN_EPSILON, harmony_core::params::MAX_EPSILON] {
            let o = AnyOracle::by_name(name, eps, 40).unwrap();
            assert!(o.worst_case_variance().is_finite() && o.worst_case_variance() >= 0.0, "{name} eps = {eps}");
            let mut agg = o.aggregator();
            for i in 0..200 {
                agg.add(&o.randomize(i % 3, &mut rng).unwrap()).unwrap();
            }
            let est = agg.estimate();
            assert!(
                est.frequencies.iter().chain(&est.std_errors).all(|x| x.is_finite()),
                "{name} eps = {eps}: {est:?}"
            );
            if eps == harmony_core::params::MAX_EPSILON && ["grr", "sue", "hr", "adaptive"].contains(name) {
                // Almost no noise left (OUE keeps p = 1/2; OLH, Hadamard and BS keep hash or row
                // noise): each of the 200 reports supports item 0 wrongly with probability at most
                // 1/(e^10 + 1) = 4.5e-5 (SUE's bits), so more than two such flips (0.01 of f̂)
                // has probability below 2e-7.
                assert!((est.frequencies[0] - 67.0 / 200.0).abs() < 0.0101, "{name}: {:?}", &est.frequencies[..3]);
            }
        }
    }
}
