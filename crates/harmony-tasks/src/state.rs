//! An accumulator's state as bytes: what a distributed engine (DataFusion, Spark) ships between
//! its partial and final aggregations (docs/SCALE.md).
//!
//! ```text
//! "HST1" | fingerprint (u64 LE, FNV-1a of the collection's config JSON) | postcard(accumulator)
//! ```
//!
//! The fingerprint makes a state of another collection (another ε, schema, mechanism or seed)
//! fail to merge with an error instead of adding counts that mean something else; the
//! accumulator's own `merge` then checks its parameters again. Model rounds and adaptive query
//! rounds depend on the order of their reports: their states save and restore whole, but do not
//! merge with another's ([`crate::Task::mergeable`]).

use crate::erased::{Task, TaskAggregator};
use harmony_core::error::{Error, Result};

/// The first bytes of every saved state.
pub const MAGIC: &[u8; 4] = b"HST1";
const HEADER: usize = 12;

/// FNV-1a (64 bits) of a collection's config as JSON: which collection a state belongs to.
pub fn fingerprint(task: &dyn Task) -> u64 {
    let json = serde_json::to_vec(task.config()).unwrap_or_default();
    json.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// `agg`'s state, framed with the task's fingerprint.
pub fn save(task: &dyn Task, agg: &dyn TaskAggregator) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&fingerprint(task).to_le_bytes());
    agg.save(&mut out)?;
    Ok(out)
}

/// Folds a state [`save`] wrote (for the same collection) into `agg`.
pub fn merge(task: &dyn Task, agg: &mut dyn TaskAggregator, state: &[u8]) -> Result<()> {
    if state.len() < HEADER || &state[..4] != MAGIC {
        return Err(Error::Incompatible(format!(
            "a saved accumulator state starts with \"HST1\" and a 12-byte header; got {} bytes starting {:02x?}",
            state.len(),
            &state[..state.len().min(4)]
        )));
    }
    let theirs = u64::from_le_bytes(state[4..HEADER].try_into().expect("8 bytes"));
    let ours = fingerprint(task);
    if theirs != ours {
        return Err(Error::Incompatible(format!(
            "a saved state of another collection (config fingerprint {theirs:016x}, expected {ours:016x} for collection {})",
            task.config().id
        )));
    }
    agg.merge_saved(&state[HEADER..])
}

/// A fresh accumulator of `task` with `state` folded in.
pub fn restore(task: &dyn Task, state: &[u8]) -> Result<Box<dyn TaskAggregator>> {
    let mut agg = task.aggregator();
    merge(task, agg.as_mut(), state)?;
    Ok(agg)
}
