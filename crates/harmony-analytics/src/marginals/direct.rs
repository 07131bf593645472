//! Direct baseline: the users are split at random into one group per query; group q reports
//! its cell of query q's full cross-product by the adaptive oracle at ε. Unbiased, no
//! post-processing. E\[SSE\] per query: [`noise_sse`] + sampling from n/Q users.
//!
//! # Privacy
//! One ε-LDP report per user: ε-LDP.

use super::{Dataset, FoParams, MarginalEstimate, adaptive_estimate, gini, noise_sse, random_groups, sampling_sse};
use harmony_core::{Error, Result};
use rand::Rng;

/// Estimates every query by its own user group.
pub fn run<R: Rng + ?Sized>(
    data: &Dataset,
    epsilon: f64,
    queries: &[Vec<usize>],
    rng: &mut R,
) -> Result<Vec<MarginalEstimate>> {
    FoParams::adaptive(epsilon, 2)?;
    if queries.is_empty() {
        return Err(Error::input("queries", "none", "at least one marginal to estimate"));
    }
    let groups = random_groups(data.n(), queries.len(), rng);
    let mut out = Vec::with_capacity(queries.len());
    let mut cells = Vec::new();
    for (q, g) in queries.iter().zip(&groups) {
        let d = data.domain(q);
        cells.clear();
        cells.extend(g.iter().map(|&i| data.cell(i, q)));
        let est = adaptive_estimate(epsilon, d, &cells, rng)?;
        let n_g = g.len().max(1) as f64;
        let fo = FoParams::adaptive(epsilon, d)?;
        let predicted = noise_sse(fo, d, d, n_g) + sampling_sse(gini(&est), n_g, data.n() as f64);
        out.push(MarginalEstimate { attrs: q.clone(), cells: est, predicted_sse: Some(predicted) });
    }
    Ok(out)
}
