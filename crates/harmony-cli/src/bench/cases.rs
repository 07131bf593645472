//! One benchmark case: seeded inputs, timed randomization (one thread, batch API) and timed
//! aggregation (a rayon pool) for each family of mechanisms.

use harmony_core::Aggregator;
use harmony_core::aggregate::aggregate_parallel;
use harmony_core::frequency::{
    AnyOracle, CmsReport, FrequencyOracle, PackedRows, RapporReport, UnaryEncoding, UnaryReport,
};
use harmony_core::numeric::{AnyNumeric, DuchiMulti, HarmonyBit, NumericMechanism, VectorMechanism};
use harmony_core::sampling::{fast_rng, stream_seed, uniform01};
use harmony_core::wire::WireReport;
use serde::Serialize;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Zipf exponent of the categorical workload (the same as the Python peers' workload).
pub const ZIPF_S: f64 = 1.1;
/// Largest number of f64 coordinates held by the input pool of a vector mechanism (128 MiB).
const VECTOR_POOL_COORDS: usize = 1 << 24;

/// How long each measurement repeats its timed section, and how often at most.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Repeat until the timed sections add up to this.
    pub min_time: Duration,
    /// ... or this many repetitions.
    pub max_reps: u32,
}

/// What one measurement produced (one row of the output).
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// Reports per second through `randomize_batch` on one thread.
    pub randomize_per_s: f64,
    /// Reports per second through `aggregate_parallel` + `estimate`.
    pub aggregate_per_s: f64,
    /// Seconds per `randomize_batch` of all n inputs (mean over repetitions).
    pub randomize_s: f64,
    /// Seconds per aggregation of all n reports, `estimate` included (mean over repetitions).
    pub aggregate_s: f64,
    /// Of which `estimate` (debiasing, transforms, standard errors).
    pub estimate_s: f64,
    /// Repetitions of the randomize and of the aggregate measurement.
    pub reps: (u32, u32),
    /// Size of one report in the binary wire format (mean over a sample), when known.
    pub bytes_per_report: Option<f64>,
    /// Frequency oracles: randomize rate through [`AnyOracle`] (set by the caller).
    pub randomize_any_per_s: Option<f64>,
}

/// Repeats `f` (which times its own critical section) until `timing` is satisfied; returns the
/// number of repetitions and the summed durations.
fn repeat<F: FnMut() -> (Duration, Duration)>(timing: Timing, mut f: F) -> (u32, Duration, Duration) {
    let (mut reps, mut total, mut extra) = (0u32, Duration::ZERO, Duration::ZERO);
    while reps == 0 || (total < timing.min_time && reps < timing.max_reps) {
        let (t, e) = f();
        total += t;
        extra += e;
        reps += 1;
    }
    (reps, total, extra)
}

fn per_s(items: usize, reps: u32, total: Duration) -> f64 {
    items as f64 * reps as f64 / total.as_secs_f64().max(1e-12)
}

/// Times the aggregation of `reports` into clones of `empty` on `pool`, then `estimate`.
fn time_aggregate<A>(
    empty: &A,
    reports: &[A::Report],
    pool: &rayon::ThreadPool,
    timing: Timing,
) -> (u32, Duration, Duration)
where
    A: Aggregator,
    A::Report: Sync,
{
    repeat(timing, || {
        let t0 = Instant::now();
        let agg = pool.install(|| aggregate_parallel(empty, reports)).expect("benchmark reports are valid");
        let t1 = Instant::now();
        let est = agg.estimate();
        let t2 = Instant::now();
        black_box(est);
        drop(agg);
        (t2 - t0, t2 - t1)
    })
}

fn finish(n: usize, rand: (u32, Duration), agg: (u32, Duration, Duration), bytes: Option<f64>) -> Measured {
    Measured {
        randomize_per_s: per_s(n, rand.0, rand.1),
        aggregate_per_s: per_s(n, agg.0, agg.1),
        randomize_s: rand.1.as_secs_f64() / rand.0 as f64,
        aggregate_s: agg.1.as_secs_f64() / agg.0 as f64,
        estimate_s: agg.2.as_secs_f64() / agg.0 as f64,
        reps: (rand.0, agg.0),
        bytes_per_report: bytes,
        randomize_any_per_s: None,
    }
}

/// Mean wire size of the first (up to) 256 reports.
fn mean_size<T>(reports: &[T], size: impl Fn(&T) -> usize) -> Option<f64> {
    let k = reports.len().min(256);
    (k > 0).then(|| reports[..k].iter().map(size).sum::<usize>() as f64 / k as f64)
}

/// `n` values uniform on [-1, 1].
pub fn numeric_inputs(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = fast_rng(seed);
    (0..n).map(|_| 2.0 * uniform01(&mut rng) - 1.0).collect()
}

/// `n` categories from Zipf([`ZIPF_S`]) over [0, d) (category 0 the most frequent).
pub fn zipf_inputs(n: usize, d: usize, seed: u64) -> Vec<usize> {
    let mut cdf: Vec<f64> = Vec::with_capacity(d);
    let mut acc = 0.0;
    for k in 1..=d {
        acc += (k as f64).powf(-ZIPF_S);
        cdf.push(acc);
    }
    let mut rng = fast_rng(seed);
    (0..n)
        .map(|_| {
            let u = uniform01(&mut rng) * acc;
            cdf.partition_point(|&c| c <= u).min(d - 1)
        })
        .collect()
}

/// A pool of distinct input vectors in [-1, 1]^d, at most [`VECTOR_POOL_COORDS`] coordinates in all;
/// user i holds row i mod pool size.
pub fn vector_pool(n: usize, d: usize, seed: u64) -> Vec<Vec<f64>> {
    let rows = (VECTOR_POOL_COORDS / d).clamp(1, n.max(1));
    let mut rng = fast_rng(seed);
    (0..rows).map(|_| (0..d).map(|_| 2.0 * uniform01(&mut rng) - 1.0).collect()).collect()
}

/// Benchmarks a 1-D numeric mechanism on `inputs` through its own batch API (Duchi and Laplace:
/// the packed ones, [`columnar`]); `randomize_any_per_s` is then the rate through
/// `AnyNumeric::randomize_batch` (`NumericReport` output), else None.
pub fn numeric(mech: &AnyNumeric, inputs: &[f64], seed: u64, pool: &rayon::ThreadPool, timing: Timing) -> Measured {
    let packed = match mech {
        // One sign bit per report, 64 per word.
        AnyNumeric::Duchi(d) => columnar(
            inputs.len(),
            64,
            |rng, out| d.randomize_signs(inputs, rng, out),
            |agg, words, k| d.add_signs(agg, words, k),
            &d.aggregator(),
            seed,
            pool,
            timing,
        ),
        // One i64 of grid units per report.
        AnyNumeric::Laplace(l) => columnar(
            inputs.len(),
            1,
            |rng, out| l.randomize_units(inputs, rng, out),
            |agg, units, _| l.add_units(agg, units),
            &l.aggregator(),
            seed,
            pool,
            timing,
        ),
        _ => return numeric_reports(mech, inputs, seed, pool, timing),
    };
    let any = numeric_reports(mech, inputs, seed ^ 1, pool, timing);
    // Wire size of the same reports sent one by one.
    Measured { randomize_any_per_s: Some(any.randomize_per_s), bytes_per_report: any.bytes_per_report, ..packed }
}

/// A numeric mechanism through a columnar batch API: `randomize` appends ⌈n/per⌉ elements of `T`
/// for the n inputs (`per` reports per element), `add` aggregates a chunk of elements holding
/// k reports; aggregation runs per chunk of [`PACKED_CHUNK`] reports on the pool, merged.
#[allow(clippy::too_many_arguments)]
fn columnar<T, M, F, A>(
    n: usize,
    per: usize,
    mut randomize: F,
    add: A,
    empty: &harmony_core::numeric::MeanAggregator<M>,
    seed: u64,
    pool: &rayon::ThreadPool,
    timing: Timing,
) -> Measured
where
    T: Send + Sync,
    M: NumericMechanism,
    F: FnMut(&mut harmony_core::sampling::FastRng, &mut Vec<T>) -> harmony_core::Result<()>,
    A: Fn(&mut harmony_core::numeric::MeanAggregator<M>, &[T], usize) -> harmony_core::Result<()> + Sync,
{
    use rayon::prelude::*;
    let mut rng = fast_rng(seed);
    let mut out: Vec<T> = Vec::with_capacity(n.div_ceil(per));
    let (rr, rt, _) = repeat(timing, || {
        out.clear();
        let t = Instant::now();
        randomize(&mut rng, &mut out).expect("inputs are in [-1, 1]");
        black_box(&out);
        (t.elapsed(), Duration::ZERO)
    });
    let agg = repeat(timing, || {
        let t0 = Instant::now();
        let total = pool.install(|| {
            out.par_chunks(PACKED_CHUNK / per)
                .enumerate()
                .map(|(i, chunk)| {
                    let mut a = empty.clone();
                    let k = (n - i * PACKED_CHUNK).min(PACKED_CHUNK);
                    add(&mut a, chunk, k).expect("benchmark reports are valid");
                    a
                })
                .reduce(
                    || empty.clone(),
                    |mut a, b| {
                        a.merge(&b).expect("same mechanism");
                        a
                    },
                )
        });
        let t1 = Instant::now();
        let est = total.estimate();
        let t2 = Instant::now();
        black_box(est);
        (t2 - t0, t2 - t1)
    });
    finish(n, (rr, rt), agg, None)
}

/// A 1-D numeric mechanism through `AnyNumeric::randomize_batch` (`NumericReport` output).
fn numeric_reports(mech: &AnyNumeric, inputs: &[f64], seed: u64, pool: &rayon::ThreadPool, timing: Timing) -> Measured {
    let mut rng = fast_rng(seed);
    let mut out = Vec::with_capacity(inputs.len());
    let (rr, rt, _) = repeat(timing, || {
        out.clear();
        let t = Instant::now();
        mech.randomize_batch(inputs, &mut rng, &mut out).expect("inputs are in [-1, 1]");
        black_box(&out);
        (t.elapsed(), Duration::ZERO)
    });
    let agg = time_aggregate(&mech.aggregator(), &out, pool, timing);
    let bytes = mean_size(&out, |r| harmony_core::wire::encode(r).len());
    finish(inputs.len(), (rr, rt), agg, bytes)
}

/// Benchmarks a vector mechanism: n users, user i holding `rows[i mod rows.len()]`.
pub fn vector<M>(mech: &M, rows: &[Vec<f64>], n: usize, seed: u64, pool: &rayon::ThreadPool, timing: Timing) -> Measured
where
    M: VectorMechanism,
    M::Report: WireReport,
{
    let users: Vec<&[f64]> = (0..n).map(|i| rows[i % rows.len()].as_slice()).collect();
    let mut rng = fast_rng(seed);
    let mut out = Vec::with_capacity(n);
    let (rr, rt, _) = repeat(timing, || {
        out.clear();
        let t = Instant::now();
        mech.randomize_batch(&users, &mut rng, &mut out).expect("inputs are in [-1, 1]^d");
        black_box(&out);
        (t.elapsed(), Duration::ZERO)
    });
    drop(users);
    let agg = time_aggregate(&mech.aggregator(), &out, pool, timing);
    let bytes = mean_size(&out, |r| harmony_core::wire::encode(r).len());
    finish(n, (rr, rt), agg, bytes)
}

/// Times `randomize_batch` of `inputs` through `oracle` (repeated); returns the last reports.
fn time_randomize_oracle<O: FrequencyOracle>(
    oracle: &O,
    inputs: &[usize],
    seed: u64,
    timing: Timing,
) -> (u32, Duration, Vec<O::Report>) {
    let mut rng = fast_rng(seed);
    let mut out = Vec::with_capacity(inputs.len());
    let (reps, total, _) = repeat(timing, || {
        out.clear();
        let t = Instant::now();
        oracle.randomize_batch(inputs, &mut rng, &mut out).expect("inputs are in [0, d)");
        black_box(&out);
        (t.elapsed(), Duration::ZERO)
    });
    (reps, total, out)
}

/// A concrete oracle through its own `randomize_batch` and aggregator.
fn typed<O>(oracle: &O, inputs: &[usize], seed: u64, pool: &rayon::ThreadPool, timing: Timing) -> Measured
where
    O: FrequencyOracle,
    O::Report: WireReport,
{
    let (rr, rt, out) = time_randomize_oracle(oracle, inputs, seed, timing);
    let agg = time_aggregate(&oracle.aggregator(), &out, pool, timing);
    let bytes = mean_size(&out, |r| harmony_core::wire::encode(r).len());
    finish(inputs.len(), (rr, rt), agg, bytes)
}

/// SUE / OUE through the packed batch API: `randomize_packed` into one flat buffer of words,
/// aggregated with `add_packed` per chunk of [`PACKED_CHUNK`] reports on the pool, then merged.
fn packed(oracle: &UnaryEncoding, inputs: &[usize], seed: u64, pool: &rayon::ThreadPool, timing: Timing) -> Measured {
    use rayon::prelude::*;
    let w = oracle.words();
    let mut rng = fast_rng(seed);
    let mut out: Vec<u64> = Vec::with_capacity(inputs.len() * w);
    let (rr, rt, _) = repeat(timing, || {
        out.clear();
        let t = Instant::now();
        oracle.randomize_packed(inputs, &mut rng, &mut out).expect("inputs are in [0, d)");
        black_box(&out);
        (t.elapsed(), Duration::ZERO)
    });
    let empty = oracle.aggregator();
    let agg = repeat(timing, || {
        let t0 = Instant::now();
        let total = pool.install(|| {
            out.par_chunks(PACKED_CHUNK * w)
                .map(|chunk| {
                    let mut a = empty.clone();
                    a.add_packed(chunk).expect("benchmark reports are valid");
                    a
                })
                .reduce(
                    || empty.clone(),
                    |mut a, b| {
                        a.merge(&b).expect("same oracle");
                        a
                    },
                )
        });
        let t1 = Instant::now();
        let est = total.estimate();
        let t2 = Instant::now();
        black_box(est);
        (t2 - t0, t2 - t1)
    });
    // Wire size of the same reports sent one by one.
    let bytes = mean_size(&out.chunks_exact(w).take(256).collect::<Vec<_>>(), |bits| {
        harmony_core::wire::encode(&UnaryReport { bits: bits.to_vec() }).len()
    });
    finish(inputs.len(), (rr, rt), agg, bytes)
}

/// Reports per `add_packed` call in the packed aggregation.
const PACKED_CHUNK: usize = 1 << 14;

/// A row-and-bits sketch (CMS, RAPPOR) through its packed batch API: `randomize` appends the n
/// reports to a [`PackedRows`] (row indices and `w` words of bits each), `add` aggregates a
/// sub-range of them; aggregation per chunk of [`PACKED_CHUNK`] reports on the pool, merged,
/// then `estimate`. `size` is the wire size of report (row, bits) sent alone.
#[allow(clippy::too_many_arguments)]
fn packed_rows<A, F, G, S>(
    n: usize,
    w: usize,
    mut randomize: F,
    add: G,
    size: S,
    empty: &A,
    seed: u64,
    pool: &rayon::ThreadPool,
    timing: Timing,
) -> Measured
where
    A: Aggregator + Send,
    F: FnMut(&mut harmony_core::sampling::FastRng, &mut PackedRows),
    G: Fn(&mut A, &[u32], &[u64]) + Sync,
    S: Fn(u32, &[u64]) -> usize,
{
    use rayon::prelude::*;
    let mut rng = fast_rng(seed);
    let mut out = PackedRows::new();
    let (rr, rt, _) = repeat(timing, || {
        out.clear();
        let t = Instant::now();
        randomize(&mut rng, &mut out);
        black_box(&out);
        (t.elapsed(), Duration::ZERO)
    });
    let agg = repeat(timing, || {
        let t0 = Instant::now();
        let total = pool.install(|| {
            out.rows
                .par_chunks(PACKED_CHUNK)
                .zip(out.bits.par_chunks(PACKED_CHUNK * w))
                .map(|(rows, bits)| {
                    let mut a = empty.clone();
                    add(&mut a, rows, bits);
                    a
                })
                .reduce(
                    || empty.clone(),
                    |mut a, b| {
                        a.merge(&b).expect("same oracle");
                        a
                    },
                )
        });
        let t1 = Instant::now();
        let est = total.estimate();
        let t2 = Instant::now();
        black_box(est);
        (t2 - t0, t2 - t1)
    });
    let bytes = mean_size(&(0..out.len().min(256)).collect::<Vec<_>>(), |&i| {
        let (row, bits) = out.get(i, w);
        size(row, bits)
    });
    finish(n, (rr, rt), agg, bytes)
}

/// Benchmarks a frequency oracle on `inputs` through the concrete oracle's own batch API (the
/// packed one for SUE / OUE). Returns the measurement and the randomize rate through
/// [`AnyOracle`]'s `randomize_batch` (the run-time-dispatched path).
pub fn frequency(
    oracle: &AnyOracle,
    inputs: &[usize],
    seed: u64,
    pool: &rayon::ThreadPool,
    timing: Timing,
) -> (Measured, f64) {
    let m = match oracle {
        AnyOracle::Grr(o) => typed(o, inputs, seed, pool, timing),
        AnyOracle::Sue(o) | AnyOracle::Oue(o) => packed(o, inputs, seed, pool, timing),
        AnyOracle::Olh(o) => typed(o, inputs, seed, pool, timing),
        AnyOracle::Hadamard(o) => typed(o, inputs, seed, pool, timing),
        AnyOracle::Hr(o) => typed(o, inputs, seed, pool, timing),
        AnyOracle::BassilySmith(o) => typed(o, inputs, seed, pool, timing),
        AnyOracle::Adaptive(o) => typed(o, inputs, seed, pool, timing),
        AnyOracle::Hcms(o) => typed(o, inputs, seed, pool, timing),
        AnyOracle::Ss(o) => typed(o, inputs, seed, pool, timing),
        AnyOracle::Cms(o) => packed_rows(
            inputs.len(),
            o.m().div_ceil(64),
            |rng, out| o.randomize_packed(inputs, rng, out).expect("inputs are in [0, d)"),
            |a, rows, bits| a.add_packed(rows, bits).expect("benchmark reports are valid"),
            |j, bits| harmony_core::wire::encode(&CmsReport { j, bits: bits.to_vec() }).len(),
            &o.aggregator(),
            seed,
            pool,
            timing,
        ),
        AnyOracle::Rappor(o) => {
            // The d × d regression of the domain is factorised once per oracle (untimed, like
            // building the oracle); each estimate then decodes with it.
            o.domain_decoder().expect("the default RAPPOR shapes identify the domain");
            packed_rows(
                inputs.len(),
                o.params().shape.m.div_ceil(64),
                |rng, out| o.randomize_packed(inputs, rng, out).expect("inputs are in [0, d)"),
                |a, rows, bits| a.add_packed(rows, bits).expect("benchmark reports are valid"),
                |cohort, bits| harmony_core::wire::encode(&RapporReport { cohort, bits: bits.to_vec() }).len(),
                &o.aggregator(),
                seed,
                pool,
                timing,
            )
        }
    };
    let (reps, total, out) = time_randomize_oracle(oracle, inputs, seed ^ 1, timing);
    drop(out);
    (m, per_s(inputs.len(), reps, total))
}

/// Builds and benchmarks a vector mechanism by name.
pub fn vector_by_name(
    name: &str,
    eps: f64,
    d: usize,
    n: usize,
    seed: u64,
    pool: &rayon::ThreadPool,
    timing: Timing,
) -> anyhow::Result<Measured> {
    let rows = vector_pool(n, d, stream_seed(seed, d as u64));
    Ok(match name {
        "duchi-multi" => vector(&DuchiMulti::new(eps, d)?, &rows, n, seed, pool, timing),
        "harmony-1bit" => vector(&HarmonyBit::new(eps, d)?, &rows, n, seed, pool, timing),
        other => anyhow::bail!("not a vector mechanism: {other}"),
    })
}
