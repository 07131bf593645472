//! Memoized (permanent) randomized response for recurring collections, RAPPOR-style.
//!
//! A device that reports the same value in every collection of a recurring series (a daily
//! question) would, with a fresh report each time, let the server average its noise away: k
//! independent reports at ε are kε-LDP together. With memoization the device randomizes a value
//! once per series and resends that permanent report in every later collection of the series
//! while its value stays the same; the k reports then tell an observer exactly what the first
//! one did (P[r, …, r | v] = P[r | v]), so the series costs ε once per distinct value.
//!
//! # Design
//! * **Series.** A series is named by its id (`Device::prepare_series(task, series, input)`);
//!   the proposed spec field is `series` in the frequency spec, written out in the config (a
//!   protocol change left to the lead: the device code takes the name as a parameter today).
//!   The memo key also holds a fingerprint of the randomizer (task spec, schema, ε): a report is
//!   reused only by an identical randomizer, so a server changing ε or the oracle within a
//!   series gets a fresh report, charged again.
//! * **Budget.** The permanent report is charged once, keyed by (series, fingerprint, value)
//!   rather than by collection: the ε it costs counts in the window of its first use, and
//!   resending it costs nothing. A new value is a new permanent report, charged.
//! * **Tasks.** Frequency only: one categorical value, a finite domain. Means' categorical
//!   attributes could be memoized per attribute, but a means report randomizes the whole record
//!   in one draw (sampled attributes, numeric mechanisms), so memoizing it needs a per-attribute
//!   report format; numeric values (continuous) would need bucketing first; heavy hitters and
//!   training are out (item sets; gradients change with the model).
//! * **Limits.** The permanent report is identical across the series: it links a device's
//!   reports (RAPPOR adds an instantaneous randomization on top to weaken that link; not built).
//!   The store holds the device's values in clear (as its own data); it is local.

use crate::Result;
use std::collections::BTreeMap;

/// Where a device keeps its permanent reports (hex), by memo key. `put` is durable before it
/// returns.
pub trait MemoStore {
    /// The permanent report for `key`.
    fn get(&self, key: &str) -> Option<String>;
    /// Records a permanent report.
    fn put(&mut self, key: &str, report: &str) -> Result<()>;
}

/// Permanent reports in memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryMemo(BTreeMap<String, String>);

impl MemoStore for MemoryMemo {
    fn get(&self, key: &str) -> Option<String> {
        self.0.get(key).cloned()
    }
    fn put(&mut self, key: &str, report: &str) -> Result<()> {
        self.0.insert(key.to_string(), report.to_string());
        Ok(())
    }
}
