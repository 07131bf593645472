//! LDP analytics beyond means and frequencies, built on `harmony-core`'s frequency oracles:
//!
//! - [`range`]: range queries, the CDF and quantiles over an ordered attribute (hierarchical
//!   histograms with constrained inference, Haar wavelets, a flat baseline);
//! - [`heavy`]: heavy hitters over huge domains (PEM, TreeHist, set-valued inputs);
//! - [`marginals`]: k-way marginals (CALM and baselines);
//! - [`linear`]: linear-query workloads (Gaussian mechanism with projection, Hadamard Response
//!   with simplex projection).
//!
//! Every estimate carries a standard error. No I/O: callers feed encoded values.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod heavy;
pub mod linear;
pub mod marginals;
mod par;
pub mod range;
