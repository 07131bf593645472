//! Simulated devices: what `harmony simulate` runs in process and `harmony submit
//! --simulate-devices` sends to a server, with the same draws.
//!
//! Device i of a run seeded `seed` randomizes with its own generator [`device_rng`]`(seed, i)`
//! (Xoshiro256++ from a SplitMix64-derived seed): its report depends on nothing but its input,
//! the seed and i, so a simulation gives bit-identical reports whatever the thread count,
//! chunking or order — and so the same estimates as the same devices sent through a server.
//! Seeded generators are for simulation only: real devices use the OS CSPRNG.

use crate::erased::{Task, TaskAggregator};
use crate::input::Input;
use harmony_core::error::{Error, Result};
use harmony_core::sampling::stream_seed;
use harmony_core::schema::ColumnValues;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

/// Devices per parallel chunk.
pub const CHUNK: usize = 4096;

/// The generator of simulated device `device` in a run seeded `seed`.
pub fn device_rng(seed: u64, device: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(stream_seed(seed, device))
}

/// Prefixes an input error with the device (row) it came from.
pub fn at_device(e: Error, device: u64) -> Error {
    match e {
        Error::InvalidInput { name, value, expected } => {
            Error::InvalidInput { name: format!("device {device}: {name}"), value, expected }
        }
        other => other,
    }
}

/// The encoded reports of devices `first..first + inputs.len()` (device i randomizes
/// `inputs[i - first]` with [`device_rng`]`(seed, i)`).
pub fn reports(task: &dyn Task, inputs: &[Input<'_>], seed: u64, first: u64) -> Result<Vec<Vec<u8>>> {
    inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let device = first + i as u64;
            let mut out = Vec::new();
            task.randomize(input, &mut device_rng(seed, device), &mut out).map_err(|e| at_device(e, device))?;
            Ok(out)
        })
        .collect()
}

/// Devices `first..` through the task one by one: randomize, validate, add (the reference path
/// of [`Task::simulate`]).
pub fn sequential<T: Task + ?Sized>(
    task: &T,
    inputs: &[Input<'_>],
    seed: u64,
    first: u64,
) -> Result<Box<dyn TaskAggregator>> {
    let mut agg = task.aggregator();
    let mut out = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let device = first + i as u64;
        task.randomize(input, &mut device_rng(seed, device), &mut out).map_err(|e| at_device(e, device))?;
        task.validate(&out)?;
        agg.add(&out)?;
    }
    Ok(agg)
}

/// Runs every input as a simulated device (device i = `inputs[i]`) and returns the accumulator:
/// in parallel chunks merged in order when the task's accumulators merge (feature `parallel`),
/// else in one pass. The result does not depend on the thread count.
pub fn run(task: &dyn Task, inputs: &[Input<'_>], seed: u64) -> Result<Box<dyn TaskAggregator>> {
    if !task.mergeable() || inputs.len() <= CHUNK {
        return task.simulate(inputs, seed, 0);
    }
    chunked(task, inputs.len(), &|rows| task.simulate(&inputs[rows.clone()], seed, rows.start as u64))
}

/// The accumulators of rows `0..n` by chunks of [`CHUNK`] (in parallel with feature
/// `parallel`), merged in order: the same result whatever the thread count.
fn chunked(
    task: &dyn Task,
    n: usize,
    chunk: &(dyn Fn(std::ops::Range<usize>) -> Result<Box<dyn TaskAggregator>> + Sync),
) -> Result<Box<dyn TaskAggregator>> {
    let rows = |c: usize| c * CHUNK..((c + 1) * CHUNK).min(n);
    #[cfg(feature = "parallel")]
    let parts: Vec<Result<Box<dyn TaskAggregator>>> = {
        use rayon::prelude::*;
        (0..n.div_ceil(CHUNK)).into_par_iter().map(|c| chunk(rows(c))).collect()
    };
    #[cfg(not(feature = "parallel"))]
    let parts: Vec<Result<Box<dyn TaskAggregator>>> = (0..n.div_ceil(CHUNK)).map(|c| chunk(rows(c))).collect();
    let mut total = task.aggregator();
    for p in parts {
        total.merge(p?.as_ref())?;
    }
    Ok(total)
}

/// [`run`] over a population held by attribute (one column per schema attribute, as
/// `harmony-data` encodes a table): each chunk of [`CHUNK`] rows is laid out row-major only while
/// it is simulated, so the population is never held as `Value`s. Device i is row i, so the
/// draws, and the accumulator, are [`run`]'s on the same rows. Mergeable tasks only (an error
/// otherwise: run those over rows).
pub fn run_columns(task: &dyn Task, columns: &[ColumnValues], seed: u64) -> Result<Box<dyn TaskAggregator>> {
    if !task.mergeable() {
        return Err(Error::param("task", task.kind().name(), "a task whose accumulators merge (columnar simulation)"));
    }
    let n = columns.first().map_or(0, ColumnValues::len);
    if let Some(c) = columns.iter().find(|c| c.len() != n) {
        return Err(Error::input("columns", format!("{} rows", c.len()), format!("{n} rows in every column")));
    }
    chunked(task, n, &|rows| {
        let d = columns.len().max(1);
        let mut values = Vec::with_capacity(rows.len() * d);
        for i in rows.clone() {
            values.extend(columns.iter().map(|col| col.get(i)));
        }
        let inputs: Vec<Input> = values.chunks_exact(d).map(Input::Record).collect();
        task.simulate(&inputs, seed, rows.start as u64)
    })
}

/// The seed of run `run` (0-based) of a simulation seeded `seed`: the seed itself for the first
/// run (so `harmony submit --simulate-devices --seed S` reproduces run 1 of `harmony simulate
/// --seed S`), then independent streams.
pub fn run_seed(seed: u64, run: u64) -> u64 {
    if run == 0 { seed } else { stream_seed(seed, run) }
}
