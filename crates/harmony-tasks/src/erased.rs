//! The one shape of every analysis: [`Task`] (built from a config; randomizes on devices,
//! validates on the server, estimates) and [`TaskAggregator`] (a mergeable accumulator of
//! encoded reports). Both are object-safe, so a server holds `Box<dyn Task>` per collection
//! whatever its analysis.
//!
//! [`Typed`] adapts any harmony-core [`Aggregator`] whose reports travel on the wire
//! ([`WireReport`]) into a [`TaskAggregator`]: the analyses implement the typed traits
//! (`Randomizer`, `Aggregator`) in their own crates and the task modules wrap them.

use harmony_core::aggregate::Aggregator;
use harmony_core::error::{Error, Result};
use harmony_core::state::{SaveState, StateReader, StateWriter};
use harmony_core::wire::{self, WireReport};
use harmony_protocol::estimates::{EstimateDocument, Query, TaskEstimate};
use harmony_protocol::{CollectionConfig, TaskKind};
use rand::Rng;
use std::any::Any;

use crate::Input;

/// A collection's analysis, built from its config by [`crate::build`].
pub trait Task: Send + Sync {
    /// The config it was built from.
    fn config(&self) -> &CollectionConfig;
    /// Which task it is.
    fn kind(&self) -> TaskKind {
        self.config().task.kind()
    }
    /// A device's randomizer: `input` → one encoded report, appended to `out` (cleared first).
    /// Only the report leaves the device; an error names the input that is outside the domain.
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()>;
    /// Decodes and checks one encoded report against the public constants (the server, before
    /// storing). The error names the field, the value and what a valid report holds.
    fn validate(&self, report: &[u8]) -> Result<()>;
    /// An empty accumulator.
    fn aggregator(&self) -> Box<dyn TaskAggregator>;
    /// Validates each of `reports` as [`Task::validate`] does and adds it to `agg` (an
    /// accumulator of this task): a stored column's path, where a task may decode each report
    /// once instead of twice (validate, then add). Stops at the first invalid
    /// report: the error is the index of that report and why; the reports before it may have
    /// been added.
    fn add_checked_batch(&self, agg: &mut dyn TaskAggregator, reports: &[&[u8]]) -> Result<(), (usize, Error)> {
        for (i, r) in reports.iter().enumerate() {
            self.validate(r).and_then(|()| agg.add(r)).map_err(|e| (i, e))?;
        }
        Ok(())
    }
    /// [`Task::add_checked_batch`] for reports stored as columns of their decoded fields (an
    /// exported part's typed body column). The default encodes each row and validates and adds
    /// the bytes; a task may read the fields directly.
    fn add_checked_columns(
        &self,
        agg: &mut dyn TaskAggregator,
        columns: ReportColumns<'_>,
    ) -> Result<(), (usize, Error)> {
        add_columns_as_bytes(self, agg, columns)
    }
    /// Validates `report` as [`Task::validate`] does and adds it `times` times to `agg` (a
    /// counted column's path: each distinct report once with its count), decoding it once where
    /// the task can.
    fn add_checked_times(&self, agg: &mut dyn TaskAggregator, report: &[u8], times: u64) -> Result<()> {
        self.validate(report)?;
        agg.add_times(report, times)
    }
    /// The estimate document of an accumulator of this task (with `query`'s ranges/quantiles).
    fn estimate(&self, agg: &dyn TaskAggregator, query: &Query) -> Result<TaskEstimate>;
    /// Whether accumulators merge (everything but model rounds, whose order matters).
    fn mergeable(&self) -> bool {
        true
    }
    /// How stale a served estimate may be, in seconds, when computing one is expensive (a
    /// search over stored reports, an iterative fit): a server answers from its last document
    /// and recomputes in the background at most this often. 0 (the default): estimates are
    /// cheap and always current.
    fn refresh_seconds(&self) -> f64 {
        0.0
    }
    /// Simulated devices `first..first + inputs.len()`, device i randomizing with
    /// [`crate::simulate::device_rng`]`(seed, i)`: the accumulator of their reports. The default
    /// runs each through [`Task::randomize`], [`Task::validate`] and [`TaskAggregator::add`]; a
    /// task may take a faster path with the same draws (tested against this one).
    fn simulate(&self, inputs: &[Input<'_>], seed: u64, first: u64) -> Result<Box<dyn TaskAggregator>> {
        crate::simulate::sequential(self, inputs, seed, first)
    }
    /// The names of the mechanisms this task runs where its spec leaves them to the task or a
    /// strategy overrides them (`means`: the strategy and the record mechanism's numeric and
    /// categorical mechanisms; `frequency`: the oracle). A device policy's allowlist checks them
    /// beside the spec's own names. Empty (the default): the spec names what runs.
    fn built_mechanisms(&self) -> Vec<&'static str> {
        Vec::new()
    }
    /// Whether the randomizer refuses, before any draw, every record whose numeric values a
    /// device's clamp to [-1, 1] would change (`means`): a device then randomizes a record as it
    /// is and clamps only a refused one. Otherwise (the default) a device clamps first.
    fn refuses_out_of_range(&self) -> bool {
        false
    }
    /// The attribute a device may memoize one report per value of (a long-lived series of one
    /// categorical value: `frequency`'s attribute); `None` (the default) refuses memoization.
    fn memo_attribute(&self) -> Option<&str> {
        None
    }
}

/// Reports stored as columns of their decoded fields instead of bytes: an exported part's typed
/// body (harmony_data's `Bodies::OlhFields` and `Bodies::RecordFields`). The columns are signed,
/// as Arrow, Parquet and Spark hold integers: each holds the bits of the report's field.
#[derive(Debug, Clone, Copy)]
pub enum ReportColumns<'a> {
    /// OLH reports: row i is `OlhReport { seed: seeds[i] as u64, y: ys[i] as u32 }`.
    Olh {
        /// The seeds.
        seeds: &'a [i64],
        /// The hash values, as many.
        ys: &'a [i32],
    },
    /// Records of one numeric attribute and no joint report (a means collection's reports under
    /// a one-attribute strategy): row i is `RecordReport::one_fixed(attributes[i] as u32,
    /// units[i])`.
    FixedRecords {
        /// The attribute indices.
        attributes: &'a [i32],
        /// The fixed-point values, as many.
        units: &'a [i64],
    },
}

impl ReportColumns<'_> {
    /// The two columns' lengths.
    fn lengths(&self) -> (usize, usize) {
        match self {
            ReportColumns::Olh { seeds, ys } => (seeds.len(), ys.len()),
            ReportColumns::FixedRecords { attributes, units } => (attributes.len(), units.len()),
        }
    }
    /// The rows (the shorter column's length, should they differ).
    pub fn len(&self) -> usize {
        let (a, b) = self.lengths();
        a.min(b)
    }
    /// The rows, or an error when the columns differ in length (at the shorter's end).
    pub fn rows(&self) -> Result<usize, (usize, Error)> {
        match self.lengths() {
            (a, b) if a != b => Err((a.min(b), Error::param("columns", (a, b), "two columns of one length"))),
            (a, _) => Ok(a),
        }
    }
    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Row `i`'s report, encoded into `out` (cleared first).
    pub fn encode_row(&self, i: usize, out: &mut Vec<u8>) {
        out.clear();
        match self {
            ReportColumns::Olh { seeds, ys } => {
                let r = harmony_core::frequency::OlhReport { seed: seeds[i] as u64, y: ys[i] as u32 };
                wire::encode_into(&r, out);
            }
            ReportColumns::FixedRecords { attributes, units } => {
                let r = harmony_core::strategy::RecordReport::one_fixed(attributes[i] as u32, units[i]);
                wire::encode_into(&r, out);
            }
        }
    }
}

/// [`Task::add_checked_columns`]' default: each row encoded, validated and added as bytes.
pub fn add_columns_as_bytes<T: Task + ?Sized>(
    task: &T,
    agg: &mut dyn TaskAggregator,
    columns: ReportColumns<'_>,
) -> Result<(), (usize, Error)> {
    let mut buf = Vec::with_capacity(16);
    for i in 0..columns.rows()? {
        columns.encode_row(i, &mut buf);
        task.validate(&buf).and_then(|()| agg.add(&buf)).map_err(|e| (i, e))?;
    }
    Ok(())
}

/// A device's side of a [`Task`]: its config and its randomizer, nothing a server calls. A
/// `Box<dyn DeviceSide>` ([`crate::build_device`]) makes no [`Task`] vtable, so the validation,
/// aggregation, estimation and simulation code is not linked: what keeps the browser SDK's wasm
/// bundle small. Every [`Task`] is one (the same `randomize`, called directly).
pub trait DeviceSide: Send + Sync {
    /// The config it was built from.
    fn config(&self) -> &CollectionConfig;
    /// [`Task::randomize`].
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()>;
    /// [`Task::built_mechanisms`].
    fn built_mechanisms(&self) -> Vec<&'static str>;
    /// [`Task::refuses_out_of_range`].
    fn refuses_out_of_range(&self) -> bool;
    /// [`Task::memo_attribute`].
    fn memo_attribute(&self) -> Option<&str>;
}

impl<T: Task> DeviceSide for T {
    fn config(&self) -> &CollectionConfig {
        Task::config(self)
    }
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()> {
        Task::randomize(self, input, rng, out)
    }
    fn built_mechanisms(&self) -> Vec<&'static str> {
        Task::built_mechanisms(self)
    }
    fn refuses_out_of_range(&self) -> bool {
        Task::refuses_out_of_range(self)
    }
    fn memo_attribute(&self) -> Option<&str> {
        Task::memo_attribute(self)
    }
}

/// A mergeable accumulator of one task's reports.
pub trait TaskAggregator: Send + Sync {
    /// Adds an encoded report that passed [`Task::validate`] (decoded again here).
    fn add(&mut self, report: &[u8]) -> Result<()>;
    /// Adds an encoded report that passed [`Task::validate`] `times` times, decoding it once:
    /// the state `times` calls of [`TaskAggregator::add`] leave (an engine counts the repeats of
    /// each distinct stored report, then adds it once).
    fn add_times(&mut self, report: &[u8], times: u64) -> Result<()> {
        for _ in 0..times {
            self.add(report)?;
        }
        Ok(())
    }
    /// Folds in another accumulator of the same task (an error if it is not one).
    fn merge(&mut self, other: &dyn TaskAggregator) -> Result<()>;
    /// Reports added.
    fn count(&self) -> u64;
    /// A copy.
    fn clone_box(&self) -> Box<dyn TaskAggregator>;
    /// For downcasting to the typed accumulator.
    fn as_any(&self) -> &dyn Any;
    /// For updating the accumulator in place (adaptive query rounds, a task's batch path);
    /// `None` where that is not offered.
    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        None
    }
    /// Appends the accumulator's counters to `out`: a distributed engine's partial
    /// state, folded back in by [`TaskAggregator::merge_saved`]. Use [`crate::state::save`],
    /// which frames it with the task's fingerprint.
    fn save(&self, out: &mut Vec<u8>) -> Result<()>;
    /// Folds in a state [`TaskAggregator::save`] wrote for an accumulator of the same task.
    fn merge_saved(&mut self, state: &[u8]) -> Result<()>;
}

impl Clone for Box<dyn TaskAggregator> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// Any typed [`Aggregator`] as a [`TaskAggregator`], with the decoder of its reports.
pub struct Typed<A: Aggregator> {
    /// The typed accumulator.
    pub agg: A,
    decode: fn(&[u8]) -> Result<A::Report>,
}

impl<A: Aggregator> Clone for Typed<A> {
    fn clone(&self) -> Self {
        Typed { agg: self.agg.clone(), decode: self.decode }
    }
}

impl<A: Aggregator + 'static> Typed<A> {
    /// Wraps `agg`, whose reports decode with `decode`.
    pub fn new(agg: A, decode: fn(&[u8]) -> Result<A::Report>) -> Self {
        Typed { agg, decode }
    }
    /// Wraps `agg`, whose reports are one [`WireReport`] type.
    pub fn wire(agg: A) -> Self
    where
        A::Report: WireReport,
    {
        Self::new(agg, wire::decode::<A::Report>)
    }
    /// The typed accumulator behind `agg` (an error when it is another task's).
    pub fn of(agg: &dyn TaskAggregator) -> Result<&A> {
        agg.as_any().downcast_ref::<Typed<A>>().map(|t| &t.agg).ok_or_else(Self::another_task)
    }
    /// [`Typed::of`], to update.
    pub fn of_mut(agg: &mut dyn TaskAggregator) -> Result<&mut A> {
        let typed = agg.as_any_mut().and_then(|a| a.downcast_mut::<Typed<A>>());
        typed.map(|t| &mut t.agg).ok_or_else(Self::another_task)
    }
    /// A [`Task::add_checked_times`] that decodes the report once: `checked` decodes and checks
    /// it as the task's `validate` does, then it is added `times` times.
    pub fn add_times_checked(
        agg: &mut dyn TaskAggregator,
        report: &[u8],
        times: u64,
        checked: impl Fn(&[u8]) -> Result<A::Report>,
    ) -> Result<()> {
        let agg = Self::of_mut(agg)?;
        agg.add_unchecked_times(&checked(report)?, times);
        Ok(())
    }
    /// A [`Task::add_checked_batch`] that decodes each report once: `checked` decodes and checks
    /// it as the task's `validate` does, then it is added; an error carries the report's index.
    pub fn add_each(
        agg: &mut dyn TaskAggregator,
        reports: &[&[u8]],
        checked: impl Fn(&[u8]) -> Result<A::Report>,
    ) -> Result<(), (usize, Error)> {
        let agg = Self::of_mut(agg).map_err(|e| (0, e))?;
        for (i, r) in reports.iter().enumerate() {
            agg.add_unchecked(&checked(r).map_err(|e| (i, e))?);
        }
        Ok(())
    }
    fn another_task() -> Error {
        Error::Incompatible(format!("an accumulator of another task, expected {}", std::any::type_name::<A>()))
    }
}

impl<A: Aggregator + SaveState + 'static> TaskAggregator for Typed<A> {
    fn add(&mut self, report: &[u8]) -> Result<()> {
        let r = (self.decode)(report)?;
        self.agg.add_unchecked(&r);
        Ok(())
    }
    fn add_times(&mut self, report: &[u8], times: u64) -> Result<()> {
        let r = (self.decode)(report)?;
        self.agg.add_unchecked_times(&r, times);
        Ok(())
    }
    fn merge(&mut self, other: &dyn TaskAggregator) -> Result<()> {
        self.agg.merge(Typed::<A>::of(other)?)
    }
    fn count(&self) -> u64 {
        self.agg.count()
    }
    fn clone_box(&self) -> Box<dyn TaskAggregator> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }
    fn save(&self, out: &mut Vec<u8>) -> Result<()> {
        self.agg.save_state(&mut StateWriter(out));
        Ok(())
    }
    fn merge_saved(&mut self, state: &[u8]) -> Result<()> {
        // Into a copy, kept only when every counter fitted (all or nothing).
        let mut merged = self.agg.clone();
        let mut r = StateReader::new(state);
        merged.merge_state(&mut r)?;
        r.finish()?;
        self.agg = merged;
        Ok(())
    }
}

/// The estimate document of `agg` for `task`'s collection: what `harmony query` prints and the
/// engines return (the task's estimate, the reports aggregated, the collection's id and ε).
pub fn document(task: &dyn Task, agg: &dyn TaskAggregator, query: &Query) -> Result<EstimateDocument> {
    let result = task.estimate(agg, query)?;
    let c = task.config();
    Ok(EstimateDocument { collection: c.id.clone(), reports: agg.count(), epsilon: c.epsilon, result })
}

/// Encodes a report into `out` (cleared first).
pub fn encode_to<R: WireReport>(report: &R, out: &mut Vec<u8>) {
    out.clear();
    wire::encode_into(report, out);
}
