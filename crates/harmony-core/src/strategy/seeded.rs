//! Seeded collection of a whole population, as simulations run it (`harmony simulate`, the
//! Python package's `simulate`): one function, so that every front end gives the same numbers
//! for the same seed.

use super::{RecordAggregator, RecordColumns, RecordMechanism};
use crate::error::Result;
use crate::sampling::{fast_rng, stream_seed};

/// Records per RNG stream of [`collect_seeded`]: chunk c of the records is randomized with
/// `fast_rng(stream_seed(seed, c))`.
pub const COLLECT_CHUNK: usize = 4096;

/// The seed of run `run` of the cell (ε number `epsilon_index`, strategy number
/// `strategy_index`) of a simulation grid with base seed `seed`: independent streams per cell
/// and run, the same whatever else the grid holds before or after.
pub fn simulation_seed(seed: u64, epsilon_index: usize, strategy_index: usize, run: usize) -> u64 {
    stream_seed(seed, ((epsilon_index as u64) << 40) | ((strategy_index as u64) << 32) | run as u64)
}

/// Randomizes every record of `data` as a client would and aggregates them
/// ([`RecordAggregator::collect`]), on all cores of the current rayon pool. Chunks of
/// [`COLLECT_CHUNK`] records get independent seeded streams, so the result depends on `seed`
/// only, not on the thread count.
///
/// # Example
/// ```
/// use harmony_core::schema::{Attribute, Schema, Value};
/// use harmony_core::strategy::{collect_seeded, RecordColumns, RecordMechanism, StrategyKind, StrategyOptions};
/// let schema = Schema::new(vec![Attribute::Numeric { name: "t".into(), min: -1.0, max: 1.0 }]).unwrap();
/// let rows: Vec<Value> = (0..10_000).map(|i| Value::Unit(if i % 2 == 0 { 0.5 } else { -0.1 })).collect();
/// let data = RecordColumns::new(&schema, &rows).unwrap();
/// let mech = RecordMechanism::new(schema, StrategyOptions::default_for(StrategyKind::SampleK, 2.0)).unwrap();
/// let a = collect_seeded(&mech, &data, 7).unwrap().estimates();
/// assert_eq!(a, collect_seeded(&mech, &data, 7).unwrap().estimates());
/// ```
#[cfg(feature = "parallel")]
pub fn collect_seeded(mech: &RecordMechanism, data: &RecordColumns, seed: u64) -> Result<RecordAggregator> {
    use rayon::prelude::*;
    let chunks = data.len().div_ceil(COLLECT_CHUNK);
    let chunk = |agg: &mut RecordAggregator, ci: usize| {
        let mut rng = fast_rng(stream_seed(seed, ci as u64));
        agg.collect(data, ci * COLLECT_CHUNK..data.len().min((ci + 1) * COLLECT_CHUNK), &mut rng)
    };
    if mech.joint().is_some() {
        // duchi-multi's sums are floating point: one aggregator per chunk, merged in chunk
        // order, so they do not depend on how rayon splits the chunks.
        let parts: Vec<Result<RecordAggregator>> = (0..chunks)
            .into_par_iter()
            .map(|ci| {
                let mut agg = mech.aggregator();
                chunk(&mut agg, ci)?;
                Ok(agg)
            })
            .collect();
        let mut total = mech.aggregator();
        for p in parts {
            crate::Aggregator::merge(&mut total, &p?)?;
        }
        return Ok(total);
    }
    // Every other sum is an exact integer, the same whatever the merge order: one aggregator per
    // thread, each collecting a contiguous range of chunks.
    let groups = rayon::current_num_threads().clamp(1, chunks.max(1));
    let parts: Vec<Result<RecordAggregator>> = (0..groups)
        .into_par_iter()
        .map(|g| {
            let mut agg = mech.aggregator();
            for ci in g * chunks / groups..(g + 1) * chunks / groups {
                chunk(&mut agg, ci)?;
            }
            Ok(agg)
        })
        .collect();
    let mut parts = parts.into_iter();
    let mut total = parts.next().unwrap_or_else(|| Ok(mech.aggregator()))?;
    for p in parts {
        crate::Aggregator::merge(&mut total, &p?)?;
    }
    Ok(total)
}

#[cfg(all(test, feature = "parallel"))]
mod tests {
    use super::*;
    use crate::schema::{Attribute, Schema, Value};
    use crate::strategy::{AttributeEstimate, StrategyKind, StrategyOptions};

    /// The thread count does not change the numbers (the property the CLI and the Python
    /// package rely on to agree), and other seeds give other numbers.
    #[test]
    fn seeded_collection_is_independent_of_the_thread_count() {
        let schema = Schema::new(vec![
            Attribute::Numeric { name: "a".into(), min: -1.0, max: 1.0 },
            Attribute::Numeric { name: "b".into(), min: -1.0, max: 1.0 },
            Attribute::Categorical { name: "c".into(), categories: vec!["x".into(), "y".into(), "z".into()] },
        ])
        .unwrap();
        let rows: Vec<Value> = (0..20_000u32)
            .flat_map(|i| [Value::Unit((i % 7) as f64 / 7.0), Value::Unit(-0.5), Value::Category(i % 3)])
            .collect();
        let data = RecordColumns::new(&schema, &rows).unwrap();
        for kind in [StrategyKind::Split, StrategyKind::SampleK, StrategyKind::Harmony] {
            let mech = RecordMechanism::new(schema.clone(), StrategyOptions::default_for(kind, 1.0)).unwrap();
            let run = |threads: usize, seed: u64| -> Vec<AttributeEstimate> {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                pool.install(|| collect_seeded(&mech, &data, seed).unwrap().estimates())
            };
            let one = run(1, 3);
            assert_eq!(one, run(3, 3), "{kind:?}");
            assert_ne!(one, run(1, 4), "{kind:?}");
        }
        assert_ne!(simulation_seed(1, 0, 1, 0), simulation_seed(1, 1, 0, 0));
        assert_eq!(simulation_seed(5, 2, 1, 3), stream_seed(5, (2 << 40) | (1 << 32) | 3));
    }
}
