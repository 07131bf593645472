//! The device side of every analysis: a [`Randomizer`] turns one user's input into one report
//! with an injected RNG, and checks reports — the counterpart of the server's
//! [`Aggregator`](crate::aggregate::Aggregator).
//!
//! A randomizer is an immutable value of precomputed constants (a mechanism, a record strategy,
//! a range hierarchy, …). It is dyn-compatible: the RNG is `&mut dyn Rng`, so
//! `Box<dyn Randomizer<Input = [Value], Report = RecordReport>>` works, and devices pass the OS
//! CSPRNG ([`crate::sampling::secure_rng`]) while simulations pass a seeded generator.
//!
//! `validate` lives here, not on the aggregator: checking a report needs the public constants
//! only (d, k, the schema), so a server validates a batch without touching (or locking) its
//! accumulator.
//!
//! # Example
//! ```
//! use harmony_core::randomizer::Randomizer;
//! use harmony_core::schema::{Attribute, Schema, Value};
//! use harmony_core::strategy::{RecordMechanism, StrategyKind, StrategyOptions};
//!
//! let schema = Schema::new(vec![Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 }])?;
//! let mech = RecordMechanism::new(schema, StrategyOptions::default_for(StrategyKind::Harmony, 1.0))?;
//! let device: &dyn Randomizer<Input = [Value], Report = _> = &mech;
//! let report = device.randomize(&[Value::Unit(0.3)], &mut harmony_core::sampling::fast_rng(1))?;
//! device.validate(&report)?;
//! # Ok::<(), harmony_core::Error>(())
//! ```

use crate::error::Result;
use rand::Rng;

/// One user's input → one report (see the module docs).
pub trait Randomizer: Send + Sync {
    /// What a device holds (a record, a category index, a value on [-1, 1], a set of items…).
    type Input: ?Sized;
    /// What it sends.
    type Report;

    /// Randomizes `input`; an error names the input that is outside the domain.
    fn randomize(&self, input: &Self::Input, rng: &mut dyn Rng) -> Result<Self::Report>;

    /// Checks a report against the public constants (kind, range, length); an error names the
    /// field, the value and what a valid report holds.
    fn validate(&self, report: &Self::Report) -> Result<()>;
}
