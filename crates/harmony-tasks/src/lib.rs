//! # harmony-tasks
//!
//! Every analysis is a collection. A collection's published config
//! ([`CollectionConfig`](harmony_protocol::CollectionConfig)) names one task; this crate turns it
//! into the one shape every analysis shares:
//!
//! ```text
//! CreateCollection ──resolve──▶ CollectionConfig ──build──▶ dyn Task
//!                                                   ├─ randomize(input, rng) → report bytes   (devices)
//!                                                   ├─ validate(report bytes)                (server, before storing)
//!                                                   ├─ aggregator() → dyn TaskAggregator      (add, merge, count; mergeable state)
//!                                                   └─ estimate(aggregator, query) → the task's estimate document
//! ```
//!
//! [`resolve`] validates an analyst's request and writes out every choice (defaults, a
//! hierarchy's branching, CALM's materialized sets, a model's dimension and step); [`build`]
//! makes the task from a config, on the server and on every device alike. `harmony simulate`
//! runs these same objects in process ([`simulate`]), `harmony serve` over HTTP, and a
//! distributed engine merges their aggregators.
//!
//! The crates that own an analysis own its randomizer, aggregator and report kinds
//! (harmony-core: means and frequencies; harmony-analytics: ranges, heavy hitters, marginals,
//! linear queries; harmony-learn: gradients); the modules here only adapt them to [`Task`].
//! Devices build this crate without rayon (default features off), so it compiles for wasm32.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cost;
pub mod domain;
pub mod erased;
pub mod frequency;
pub mod heavy;
pub mod input;
pub mod linear;
pub mod linear_rounds;
pub mod marginals;
pub mod means;
pub mod poison;
pub mod range;
pub mod range2d;
pub mod registry;
pub mod simulate;
pub mod state;
pub mod text;
pub mod train;

pub use erased::{DeviceSide, ReportColumns, Task, TaskAggregator, Typed, document};
pub use harmony_protocol::estimates::Query;
pub use input::Input;
pub use registry::{build, build_device, create, id_code_bits, resolve};
