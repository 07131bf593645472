//! Direct baseline: each device draws one query uniformly at random (its group) and reports its
//! cell of that query's full cross-product by the adaptive oracle at ε. Unbiased, no
//! post-processing. As a plan ([`CalmPlan::direct`]) it is CALM with one set per query, each
//! query answered from its own set only, so it shares CALM's devices ([`super::groups`]), its
//! raw answers and their per-cell standard errors ([`calm::answer_raw`]): E\[SSE\] per query is
//! [`super::noise_sse`] + [`super::sampling_sse`] from the realized n_q devices of its group.
//!
//! # Privacy
//! One ε-LDP report per user, the query drawn independently of the data: ε-LDP.

use super::calm::{self, CalmPlan};
use super::{Dataset, MAX_CELLS, MarginalEstimate};
use harmony_core::{Error, Result};
use rand::Rng;

/// Estimates every query by its own device group (a simulation: every record of `data` is a
/// device randomizing with `rng`). Errors: ε invalid, no query, a bad query, a query of more
/// than [`MAX_CELLS`] cells, a query no device drew (fewer devices than queries).
pub fn run<R: Rng>(data: &Dataset, epsilon: f64, queries: &[Vec<usize>], rng: &mut R) -> Result<Vec<MarginalEstimate>> {
    let plan = CalmPlan::direct(data.names(), data.cards(), data.n(), epsilon, queries, MAX_CELLS)?;
    let raw = calm::collect(&plan, data, rng)?;
    calm::estimate(&plan, &raw, None)
        .marginals
        .into_iter()
        .zip(queries)
        .map(|(m, q)| {
            m.ok_or_else(|| {
                Error::input("query", data.label(q), format!("a query drawn by some of the {} devices", data.n()))
            })
        })
        .collect()
}
