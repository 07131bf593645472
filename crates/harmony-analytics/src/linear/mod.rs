//! Linear queries over a domain \[J\] (Bassily, "Linear Queries Estimation with Local
//! Differential Privacy", AISTATS'19; docs/MECHANISMS.md §G).
//!
//! A [`Workload`] is a matrix A ∈ R^(d×J) (d queries; parsed from JSON/CSV or built in, see
//! [`workload`]); the goal is A·p, p the users' distribution over the [`Domain`]. Three
//! mechanisms, each with closed-form standard errors and 95% CIs on its unbiased answers:
//!
//! | mechanism | privacy | per-user report | Var of each unbiased answer | post-processing |
//! |---|---|---|---|---|
//! | [`GaussianWorkload`] | (ε, δ) | d reals (fixed point) | (σ² + s²/6)/n, σ ∝ Δ√(ln(1/δ))/ε | [`project()`](fn@project) onto conv{±a_v} |
//! | [`HrWorkload`] | ε | log₂ K bits | closed form via two FWHTs per block ([`hr`]) | simplex projection of p̂ |
//! | [`AdaptiveQuery`] / [`AdaptiveWorkload`] | ε | query index + 1 bit, one group per query | ≈ r²C²·d/n ([`adaptive`]) | none |
//!
//! Post-processed answers are biased; their standard errors are not given (the unbiased ones
//! are a conservative guide). [`simulate`] runs each mechanism over a population of encoded
//! values with a seeded RNG, in parallel.
//!
//! Devices: [`HrWorkload`], [`GaussianWorkload`] and [`AdaptiveWorkload`] implement
//! [`Randomizer`](harmony_core::Randomizer) over a domain index v < J, with mergeable
//! [`Aggregator`](harmony_core::Aggregator)s of exact integer state (HR's output histogram, the
//! Gaussian reports' integer grid sums, the adaptive groups' counts). The adaptive device draws
//! its own query (see [`adaptive`]).

pub mod adaptive;
pub mod calibrate;
pub mod gaussian;
pub mod hr;
pub mod project;
#[cfg(feature = "parallel")]
pub mod simulate;
pub mod workload;

pub use adaptive::{
    AdaptiveAggregator, AdaptiveQuery, AdaptiveWorkload, AdaptiveWorkloadAggregator, QueryBitReport, partition,
};
pub use calibrate::{analytic_gaussian_sigma, classic_gaussian_sigma};
pub use gaussian::{GaussianAggregator, GaussianReport, GaussianWorkload};
pub use hr::{HrWorkload, HrWorkloadEstimate};
pub use project::{Hull, ProjectOptions, Projection, project};
pub use workload::{Domain, DomainAttribute, Workload};

use harmony_core::Estimate;
use serde::Serialize;

/// Unbiased answers to a workload, one [`Estimate`] (value, standard error, 95% CI) per query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadEstimate {
    /// Number of reports.
    pub n: u64,
    /// One estimate per query, in workload order.
    pub answers: Vec<Estimate>,
}

impl WorkloadEstimate {
    /// The point estimates.
    pub fn values(&self) -> Vec<f64> {
        self.answers.iter().map(|e| e.value).collect()
    }
}

/// The empirical distribution of encoded values over \[J\]. Errors: a value ≥ J, no value.
pub fn distribution(values: &[usize], j: usize) -> harmony_core::Result<Vec<f64>> {
    if values.is_empty() {
        return Err(harmony_core::Error::input("values", "[]", "at least one user"));
    }
    let mut p = vec![0.0; j];
    for (i, &v) in values.iter().enumerate() {
        if v >= j {
            return Err(harmony_core::Error::input(format!("value of user {i}"), v, format!("an index in [0, {j})")));
        }
        p[v] += 1.0;
    }
    let n = values.len() as f64;
    p.iter_mut().for_each(|x| *x /= n);
    Ok(p)
}

#[cfg(test)]
mod tests;
