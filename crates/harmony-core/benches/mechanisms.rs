//! Micro-benchmarks (divan) of randomize and aggregate for representative mechanisms, with a
//! seeded fast RNG. Throughput is in items (reports) per second.
//!
//! ```text
//! cargo bench -p harmony-core --bench mechanisms            # everything
//! cargo bench -p harmony-core --bench mechanisms -- olh     # names containing "olh"
//! ```
//! The whole-grid numbers (every mechanism, n = 10⁶, rayon aggregation) come from
//! `harmony bench`; these are for quick before/after comparisons while optimising one mechanism.

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use harmony_core::Aggregator;
use harmony_core::aggregate::aggregate_parallel;
use harmony_core::frequency::{AnyOracle, FrequencyOracle, Grr};
use harmony_core::numeric::{AnyNumeric, HarmonyBit, NumericMechanism, VectorMechanism};
use harmony_core::sampling::{fast_rng, uniform_below, uniform01};

/// Reports per measured batch.
const N: usize = 10_000;
const EPS: f64 = 1.0;

fn main() {
    divan::main();
}

fn numeric_inputs() -> Vec<f64> {
    let mut rng = fast_rng(1);
    (0..N).map(|_| 2.0 * uniform01(&mut rng) - 1.0).collect()
}

fn categorical_inputs(d: usize) -> Vec<usize> {
    let mut rng = fast_rng(2);
    (0..N).map(|_| uniform_below(&mut rng, d as u64) as usize).collect()
}

fn oracle_reports(name: &str, d: usize) -> (AnyOracle, Vec<<AnyOracle as FrequencyOracle>::Report>) {
    let oracle = AnyOracle::by_name(name, EPS, d).expect("valid oracle");
    let mut out = Vec::with_capacity(N);
    oracle.randomize_batch(&categorical_inputs(d), &mut fast_rng(3), &mut out).expect("valid inputs");
    (oracle, out)
}

/// One-thread `randomize_batch` of N values in [-1, 1].
#[divan::bench(args = ["laplace", "duchi", "pm", "hm"])]
fn randomize_numeric(bencher: Bencher, name: &str) {
    let mech = AnyNumeric::by_name(name, EPS).expect("valid mechanism");
    let inputs = numeric_inputs();
    let mut rng = fast_rng(4);
    let mut out = Vec::with_capacity(N);
    bencher.counter(ItemsCount::new(N)).bench_local(|| {
        out.clear();
        mech.randomize_batch(black_box(&inputs), &mut rng, &mut out).expect("valid inputs");
        black_box(&out);
    });
}

/// One-thread `randomize_batch` of N categories uniform over [0, D).
#[divan::bench(args = ["grr", "oue", "olh", "hadamard", "hr"], consts = [16, 1024])]
fn randomize_frequency<const D: usize>(bencher: Bencher, name: &str) {
    let oracle = AnyOracle::by_name(name, EPS, D).expect("valid oracle");
    let inputs = categorical_inputs(D);
    let mut rng = fast_rng(5);
    let mut out = Vec::with_capacity(N);
    bencher.counter(ItemsCount::new(N)).bench_local(|| {
        out.clear();
        oracle.randomize_batch(black_box(&inputs), &mut rng, &mut out).expect("valid inputs");
        black_box(&out);
    });
}

/// The concrete `Grr` (no `AnyOracle` dispatch per report), as a reference for the above.
#[divan::bench(consts = [16, 1024])]
fn randomize_grr_concrete<const D: usize>(bencher: Bencher) {
    let grr = Grr::new(EPS, D).expect("valid oracle");
    let inputs = categorical_inputs(D);
    let mut rng = fast_rng(5);
    let mut out = Vec::with_capacity(N);
    bencher.counter(ItemsCount::new(N)).bench_local(|| {
        out.clear();
        grr.randomize_batch(black_box(&inputs), &mut rng, &mut out).expect("valid inputs");
        black_box(&out);
    });
}

/// 2^17 HR reports at large d: one accumulator vs `aggregate_parallel` (which clones the empty
/// aggregator per 16 384-report chunk), on the calling thread's rayon pool; `estimate` included.
#[divan::bench(args = ["single", "aggregate_parallel"], consts = [65536, 1048576], sample_count = 10)]
fn aggregate_hr_large_d<const D: usize>(bencher: Bencher, how: &str) {
    let oracle = AnyOracle::by_name("hr", EPS, D).expect("valid oracle");
    let n = 1 << 17;
    let mut rng = fast_rng(7);
    let inputs: Vec<usize> = (0..n).map(|_| uniform_below(&mut rng, D as u64) as usize).collect();
    let mut reports = Vec::with_capacity(n);
    oracle.randomize_batch(&inputs, &mut rng, &mut reports).expect("valid inputs");
    let empty = oracle.aggregator();
    bencher.counter(ItemsCount::new(n)).bench_local(|| {
        let agg = if how == "single" {
            let mut a = empty.clone();
            a.add_batch(black_box(&reports)).expect("valid reports");
            a
        } else {
            aggregate_parallel(&empty, black_box(&reports)).expect("valid reports")
        };
        agg.estimate()
    });
}

/// One-thread `add_batch` + `estimate` of N reports (OLH: N·D hash evaluations).
#[divan::bench(args = ["grr", "oue", "olh", "hadamard", "hr"], consts = [1024, 65536])]
fn aggregate_frequency<const D: usize>(bencher: Bencher, name: &str) {
    let (oracle, reports) = oracle_reports(name, D);
    bencher.counter(ItemsCount::new(N)).with_inputs(|| oracle.aggregator()).bench_local_values(|mut agg| {
        agg.add_batch(black_box(&reports)).expect("valid reports");
        agg.estimate()
    });
}

/// Harmony's 1-bit mechanism at d = 64: randomize (rows from a small pool) and aggregate.
#[divan::bench]
fn harmony_1bit_d64(bencher: Bencher) {
    const D: usize = 64;
    let mech = HarmonyBit::new(EPS, D).expect("valid mechanism");
    let mut rng = fast_rng(6);
    let pool: Vec<Vec<f64>> = (0..256).map(|_| (0..D).map(|_| 2.0 * uniform01(&mut rng) - 1.0).collect()).collect();
    let rows: Vec<&[f64]> = (0..N).map(|i| pool[i % pool.len()].as_slice()).collect();
    let mut out = Vec::with_capacity(N);
    bencher.counter(ItemsCount::new(N)).bench_local(|| {
        out.clear();
        mech.randomize_batch(black_box(&rows), &mut rng, &mut out).expect("valid inputs");
        let mut agg = mech.aggregator();
        agg.add_batch(&out).expect("valid reports");
        black_box(agg.estimate());
    });
}
