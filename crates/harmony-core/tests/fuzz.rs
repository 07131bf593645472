//! Property-based fuzzing of every constructor and decoder: arbitrary parameters, inputs, bytes
//! and JSON never panic; they give a value or a typed error.
//!
//! Fast tier: a few thousand cases per target. Heavy tier (`--ignored`, release): ≥ 10⁶ cases per
//! target (`HARMONY_FUZZ_CASES` overrides).

use harmony_core::Aggregator;
use harmony_core::frequency::*;
use harmony_core::numeric::*;
use harmony_core::sampling::fast_rng;
use harmony_core::wire::{self, WireReport};
use harmony_core::{FrequencyOracle, NumericMechanism};
use proptest::prelude::*;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Cases executed (printed, so the closing claim "≥ 10⁶ cases" is checked, not assumed).
static CASES: AtomicU64 = AtomicU64::new(0);

fn count() {
    CASES.fetch_add(1, Ordering::Relaxed);
}
use proptest::test_runner::{Config, TestRunner};

fn runner(cases: u32) -> TestRunner {
    let cases = std::env::var("HARMONY_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(cases);
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

/// ε values that stress validation: specials, tiny, huge, ordinary.
fn epsilon() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(f64::MIN_POSITIVE),
        Just(1e-300),
        Just(1e-9),
        Just(700.0),
        Just(701.0),
        -10.0..50.0f64,
        any::<f64>(),
    ]
}

/// Inputs for numeric mechanisms: mostly in [-1, 1], plus out-of-range and specials.
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![4 => -1.0..=1.0f64, 1 => any::<f64>(), 1 => Just(f64::NAN), 1 => Just(1.0 + f64::EPSILON)]
}

/// Bytes: pure noise or a valid encoding that was mutated (flip, truncate, extend).
fn mutated(valid: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let n = valid.len();
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..48),
        (0..n, any::<usize>(), any::<u8>(), 0usize..4, proptest::collection::vec(any::<u8>(), 0..4)).prop_map(
            move |(i, pos, byte, op, tail)| {
                let mut b = valid[i].clone();
                match op {
                    0 if !b.is_empty() => {
                        let p = pos % b.len();
                        b[p] ^= byte | 1;
                    }
                    1 => b.truncate(pos % (b.len() + 1)),
                    2 => b.extend(tail),
                    _ => {
                        if b.len() > 2 {
                            let p = 2 + pos % (b.len() - 2);
                            b[p] = byte;
                        }
                    }
                }
                b
            }
        ),
    ]
}

/// Decodes arbitrary bytes as `T`, then validates and (if valid) aggregates with `agg`.
fn decode_then_aggregate<T, A>(bytes: &[u8], agg: &mut A)
where
    T: WireReport,
    A: Aggregator<Report = T>,
{
    if let Ok(r) = wire::decode::<T>(bytes) {
        if agg.validate(&r).is_ok() {
            agg.add_unchecked(&r);
        }
        let _ = wire::to_json(&r);
    }
    if let Ok(text) = std::str::from_utf8(bytes)
        && let Ok(r) = wire::from_json::<T>(text)
    {
        let _ = agg.add(&r);
    }
}

fn fuzz_oracle<O: FrequencyOracle>(oracle: O, cases: u32)
where
    O::Report: WireReport,
{
    let mut rng = fast_rng(7);
    let valid: Vec<Vec<u8>> = (0..oracle.domain_size().min(16))
        .map(|v| wire::encode(&oracle.randomize(v, &mut rng).expect("valid input")))
        .collect();
    let agg = RefCell::new(oracle.aggregator());
    runner(cases)
        .run(&mutated(valid), |bytes| {
            count();
            decode_then_aggregate::<O::Report, _>(&bytes, &mut *agg.borrow_mut());
            Ok(())
        })
        .expect("no panic");
    let _ = agg.borrow().estimate();
}

fn fuzz_numeric_decoders(cases: u32) {
    let mut rng = fast_rng(8);
    for name in NUMERIC_NAMES {
        let mech = AnyNumeric::by_name(name, 1.0).expect("valid");
        let valid: Vec<Vec<u8>> = [-1.0, 0.0, 0.5, 1.0]
            .iter()
            .map(|&t| wire::encode(&mech.randomize(t, &mut rng).expect("valid input")))
            .collect();
        let agg = RefCell::new(mech.aggregator());
        runner(cases / 4)
            .run(&mutated(valid), |bytes| {
                count();
                decode_then_aggregate::<NumericReport, _>(&bytes, &mut *agg.borrow_mut());
                Ok(())
            })
            .expect("no panic");
        let _ = agg.borrow().estimate();
    }
    for d in [1usize, 2, 5, 64, 65] {
        let dm = DuchiMulti::new(1.0, d).expect("valid");
        let hb = HarmonyBit::new(1.0, d).expect("valid");
        let t = vec![0.25; d];
        let v1 = vec![wire::encode(&dm.randomize(&t, &mut rng).expect("valid"))];
        let v2 = vec![wire::encode(&hb.randomize(&t, &mut rng).expect("valid"))];
        let (a1, a2) = (RefCell::new(dm.aggregator()), RefCell::new(hb.aggregator()));
        runner(cases / 8)
            .run(&(mutated(v1), mutated(v2)), |(b1, b2)| {
                count();
                count();
                decode_then_aggregate::<DuchiMultiReport, _>(&b1, &mut *a1.borrow_mut());
                decode_then_aggregate::<HarmonyBitReport, _>(&b2, &mut *a2.borrow_mut());
                Ok(())
            })
            .expect("no panic");
    }
}

fn fuzz_frequency_decoders(cases: u32) {
    const DOMAINS: [usize; 5] = [2, 3, 17, 64, 100];
    const ORACLES: u32 = 9;
    // Round up so that the total is never below `cases`.
    let per = cases.div_ceil(DOMAINS.len() as u32 * ORACLES);
    for d in DOMAINS {
        fuzz_oracle(Grr::new(1.0, d).expect("valid"), per);
        fuzz_oracle(Sue::new(1.0, d).expect("valid"), per);
        fuzz_oracle(Oue::new(2.0, d).expect("valid"), per);
        fuzz_oracle(Olh::new(1.0, d).expect("valid"), per);
        fuzz_oracle(Hadamard::new(1.0, d).expect("valid"), per);
        fuzz_oracle(HadamardResponse::new(3.0, d).expect("valid"), per);
        fuzz_oracle(BassilySmith::new(1.0, d).expect("valid"), per);
        fuzz_oracle(Auto::new(1.0, d).expect("valid"), per);
        fuzz_oracle(SubsetSelection::new(1.0, d).expect("valid"), per);
    }
}

fn fuzz_constructors(cases: u32) {
    let rng = RefCell::new(fast_rng(9));
    runner(cases)
        .run(&(epsilon(), 0usize..600, value(), 0usize..700, 0usize..8, 0usize..16), |(eps, d, t, v, ni, fi)| {
            count();
            let rng = &mut *rng.borrow_mut();
            let name = NUMERIC_NAMES[ni % NUMERIC_NAMES.len()];
            if let Ok(m) = AnyNumeric::by_name(name, eps) {
                if let Ok(r) = m.randomize(t, rng) {
                    prop_assert!((-1.0..=1.0).contains(&t));
                    m.decode(&r).expect("own report decodes");
                }
                let _ = (m.variance(t), m.worst_case_variance());
            }
            let fname = FREQUENCY_NAMES[fi % FREQUENCY_NAMES.len()];
            if let Ok(o) = AnyOracle::by_name(fname, eps, d) {
                if let Ok(r) = o.randomize(v, rng) {
                    prop_assert!(v < d);
                    o.aggregator().add(&r).expect("own report validates");
                }
                let _ = o.worst_case_variance();
            }
            if d <= 64 {
                let tv = vec![t; d];
                if let Ok(m) = DuchiMulti::new(eps, d)
                    && let Ok(r) = m.randomize(&tv, rng)
                {
                    m.aggregator().add(&r).expect("own report validates");
                }
                if let Ok(m) = HarmonyBit::new(eps, d)
                    && let Ok(r) = m.randomize(&tv, rng)
                {
                    m.aggregator().add(&r).expect("own report validates");
                }
            }
            Ok(())
        })
        .expect("no panic; own reports always validate");
    // Absurd sizes are rejected or built without allocating the domain.
    for name in FREQUENCY_NAMES {
        for d in [0usize, 1, usize::MAX, (1 << 31) + 1] {
            assert!(AnyOracle::by_name(name, 1.0, d).is_err(), "{name} d = {d}");
        }
    }
}

#[test]
fn fuzz_fast_tier() {
    fuzz_constructors(3_000);
    fuzz_numeric_decoders(2_000);
    fuzz_frequency_decoders(8_000);
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn fuzz_heavy_tier_one_million_cases_each() {
    let at = |_: ()| CASES.load(Ordering::Relaxed);
    let c0 = at(());
    fuzz_constructors(1_000_000);
    let c1 = at(());
    fuzz_numeric_decoders(1_000_000);
    let c2 = at(());
    fuzz_frequency_decoders(1_000_000);
    let c3 = at(());
    println!("fuzz cases: constructors {}, numeric decoders {}, frequency decoders {}", c1 - c0, c2 - c1, c3 - c2);
    assert!(c1 - c0 >= 1_000_000 && c2 - c1 >= 1_000_000 && c3 - c2 >= 1_000_000);
}
