//! Seeded, parallel simulation of the linear-query mechanisms over a population of encoded
//! values (each user randomized exactly as a client would, then aggregated). Used by
//! `harmony simulate --task linear-queries` and the statistical tests.
//!
//! Users are cut into chunks of [`CHUNK`]; chunk c uses the RNG stream `stream_seed(seed, c)`,
//! so results do not depend on the thread count.

use super::{
    AdaptiveQuery, GaussianAggregator, GaussianReport, GaussianWorkload, HrWorkload, Workload, WorkloadEstimate,
    partition,
};
use harmony_core::sampling::{fast_rng, stream_seed};
use harmony_core::{Aggregator, Error, FrequencyEstimate, FrequencyOracle, Result};
use rayon::prelude::*;

/// Users per parallel chunk.
pub const CHUNK: usize = 4096;

/// Every user of `values` sends a Gaussian report; returns the merged aggregator.
pub fn gaussian(mech: &GaussianWorkload, values: &[usize], seed: u64) -> Result<GaussianAggregator> {
    let parts: Vec<Result<GaussianAggregator>> = values
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let mut rng = fast_rng(stream_seed(seed, c as u64));
            let mut agg = mech.aggregator();
            let mut buf = GaussianReport { values: vec![0i64; mech.queries()] };
            for &v in chunk {
                mech.randomize_into(v, &mut rng, &mut buf.values)?;
                agg.add(&buf)?;
            }
            Ok(agg)
        })
        .collect();
    let mut total = mech.aggregator();
    for p in parts {
        total.merge(&p?)?;
    }
    Ok(total)
}

/// Every user sends a Hadamard Response report; returns HR's frequency estimate over \[J\].
pub fn hr(mech: &HrWorkload, values: &[usize], seed: u64) -> Result<FrequencyEstimate> {
    let oracle = mech.oracle();
    let parts: Vec<Result<_>> = values
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let mut rng = fast_rng(stream_seed(seed, c as u64));
            let mut reports = Vec::with_capacity(chunk.len());
            oracle.randomize_batch(chunk, &mut rng, &mut reports)?;
            let mut agg = oracle.aggregator();
            agg.add_batch(&reports)?;
            Ok(agg)
        })
        .collect();
    let mut total = oracle.aggregator();
    for p in parts {
        total.merge(&p?)?;
    }
    Ok(total.estimate())
}

/// Adaptive queries: the users are split into d random disjoint groups (one per query, from
/// stream `u64::MAX` of `seed`), and group t answers query t with Duchi's 1-bit mechanism.
/// Returns the answers and the group sizes. Errors: fewer users than queries.
pub fn adaptive(
    epsilon: f64,
    workload: &Workload,
    values: &[usize],
    seed: u64,
) -> Result<(WorkloadEstimate, Vec<u64>)> {
    let d = workload.queries();
    if values.len() < d {
        return Err(Error::input("users", values.len(), format!("at least one user per query (d = {d})")));
    }
    let groups = partition(values.len(), d, &mut fast_rng(stream_seed(seed, u64::MAX)))?;
    let queries: Vec<AdaptiveQuery> =
        (0..d).map(|t| AdaptiveQuery::new(epsilon, workload.row(t))).collect::<Result<_>>()?;
    let idx: Vec<usize> = (0..values.len()).collect();
    let parts: Vec<Result<Vec<_>>> = idx
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let mut rng = fast_rng(stream_seed(seed, c as u64));
            let mut aggs: Vec<_> = queries.iter().map(AdaptiveQuery::aggregator).collect();
            for &i in chunk {
                let t = groups[i] as usize;
                aggs[t].add(queries[t].randomize(values[i], &mut rng)?);
            }
            Ok(aggs)
        })
        .collect();
    let mut total: Vec<_> = queries.iter().map(AdaptiveQuery::aggregator).collect();
    for p in parts {
        for (a, b) in total.iter_mut().zip(p?) {
            a.merge(&b)?;
        }
    }
    let sizes = total.iter().map(|a| a.count()).collect();
    let answers = total.iter().map(|a| a.estimate()).collect();
    Ok((WorkloadEstimate { n: values.len() as u64, answers }, sizes))
}
