//! # harmony-core
//!
//! Local differential privacy (LDP) mechanisms: client-side randomizers and server-side
//! mergeable aggregators, each with its exact ε and closed-form variance.
//!
//! * [`numeric`]: mean estimation on [-1, 1] (Laplace, Duchi, Piecewise, Hybrid, SCDF,
//!   Staircase, Duchi multidimensional with Harmony's correction, Harmony's 1-bit sampling).
//! * [`frequency`]: frequency oracles over [0, d) (GRR, SUE, OUE, OLH, 1-bit Hadamard, Hadamard
//!   Response, Bassily–Smith, Subset Selection, adaptive) and the sketches (Apple's CMS and HCMS, RAPPOR).
//! * [`postprocess`]: opt-in, composable post-processing (norm-sub, simplex projection,
//!   clip-and-renormalise).
//! * [`wire`]: the versioned binary and JSON report encodings.
//!
//! Privacy rule: client paths use [`sampling::secure_rng`]; simulations and tests pass a seeded
//! [`sampling::fast_rng`].
#![deny(missing_docs)]
// `unsafe` is denied crate-wide. The few sites that need it (SIMD intrinsics after run-time
// feature detection, byte views of integer slices) each opt in with `#[allow(unsafe_code)]`
// beside a SAFETY comment; `grep -rn "allow(unsafe_code)" crates/harmony-core/src` lists them.
#![deny(unsafe_code)]

pub mod aggregate;
pub mod error;
pub mod estimate;
pub mod fast_rng;
pub mod frequency;
pub mod kinds;
pub mod missing;
pub mod numeric;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod params;
pub mod postprocess;
pub mod randomizer;
pub mod sampling;
pub mod schema;
pub mod shuffle;
pub mod state;
pub mod strategy;
pub mod wire;

pub use aggregate::Aggregator;
pub use error::{Error, Result};
pub use estimate::{Estimate, FrequencyEstimate};
pub use frequency::FrequencyOracle;
pub use kinds::{NumericKind, OracleKind, RecordNumeric};
pub use numeric::NumericMechanism;
pub use params::Epsilon;
pub use randomizer::Randomizer;
