//! The server side: every aggregator is a commutative monoid (`add`, `merge`, `estimate`), so
//! aggregation parallelises, streams and recovers from a log for free.

use crate::error::{Error, Result};

/// A mergeable accumulator of reports.
///
/// `validate` checks a report against the mechanism's parameters (range, length, kind) without
/// touching the state; `add_unchecked` folds a validated report in. `add` and `add_batch` combine
/// them; `add_batch` validates the whole batch first, so a bad report leaves the state unchanged.
pub trait Aggregator: Clone + Send + Sync {
    /// The report type this aggregator accepts.
    type Report;
    /// What `estimate` returns.
    type Output;

    /// Checks a report; an error names the field, the value and the valid range.
    fn validate(&self, report: &Self::Report) -> Result<()>;
    /// Adds a report already checked by `validate`.
    fn add_unchecked(&mut self, report: &Self::Report);
    /// Adds a report already checked by `validate` `times` times: the state `times` calls of
    /// `add_unchecked` leave (an engine counts the repeats of each distinct stored report, then
    /// adds it once). Counting aggregators override it with one weighted add.
    fn add_unchecked_times(&mut self, report: &Self::Report, times: u64) {
        for _ in 0..times {
            self.add_unchecked(report);
        }
    }
    /// Combines another aggregator's state into this one.
    fn merge(&mut self, other: &Self) -> Result<()>;
    /// Number of reports added.
    fn count(&self) -> u64;
    /// The unbiased estimate with standard errors.
    fn estimate(&self) -> Self::Output;

    /// Validates and adds one report.
    fn add(&mut self, report: &Self::Report) -> Result<()> {
        self.validate(report)?;
        self.add_unchecked(report);
        Ok(())
    }

    /// Validates every report, then adds them all (all or nothing). The error names the index of
    /// the first bad report.
    fn add_batch(&mut self, reports: &[Self::Report]) -> Result<()> {
        for (i, r) in reports.iter().enumerate() {
            self.validate(r).map_err(|e| at_index(e, i))?;
        }
        for r in reports {
            self.add_unchecked(r);
        }
        Ok(())
    }
}

/// Prefixes a report error with the index of the report in its batch.
pub fn at_index(e: Error, i: usize) -> Error {
    match e {
        Error::InvalidReport { field, value, expected } => {
            Error::InvalidReport { field: format!("report {i}: {field}"), value, expected }
        }
        other => other,
    }
}

/// Checks that two merged aggregators were built with equal parameters.
pub fn check_compatible<T: PartialEq + std::fmt::Debug>(what: &str, a: &T, b: &T) -> Result<()> {
    if a != b {
        return Err(Error::Incompatible(format!("{what}: {a:?} vs {b:?}")));
    }
    Ok(())
}

/// Aggregates a slice of reports on all cores (rayon): chunks are folded into a few clones of
/// `empty` (one per rayon work split, not one per chunk, so the O(d) state of a large-domain
/// aggregator is cloned and merged O(threads) times and the whole costs O(n + threads·d)), then
/// merged. All or nothing: on an invalid report nothing is returned but the error of the first
/// invalid report by index.
#[cfg(feature = "parallel")]
pub fn aggregate_parallel<A>(empty: &A, reports: &[A::Report]) -> Result<A>
where
    A: Aggregator,
    A::Report: Sync,
{
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 14;
    debug_assert_eq!(empty.count(), 0, "aggregate_parallel starts from an empty aggregator");
    let folded = reports
        .par_chunks(CHUNK)
        .try_fold(
            || empty.clone(),
            |mut a, chunk| {
                a.add_batch(chunk)?;
                Ok::<A, Error>(a)
            },
        )
        .try_reduce(
            || empty.clone(),
            |mut a, b| {
                a.merge(&b)?;
                Ok(a)
            },
        );
    match folded {
        Ok(total) => Ok(total),
        Err(e @ Error::InvalidReport { .. }) => {
            // Cold path: name the first bad report of the whole slice (a parallel fold may stop
            // at any bad chunk first).
            for (i, r) in reports.iter().enumerate() {
                empty.validate(r).map_err(|e| at_index(e, i))?;
            }
            Err(e)
        }
        Err(e) => Err(e),
    }
}
