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

/// Aggregates a slice of reports on all cores (rayon): each chunk into its own clone of `empty`,
/// then merged. All or nothing: the first invalid report (by index) is returned as the error.
#[cfg(feature = "parallel")]
pub fn aggregate_parallel<A>(empty: &A, reports: &[A::Report]) -> Result<A>
where
    A: Aggregator,
    A::Report: Sync,
{
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 14;
    let parts: Vec<Result<A>> = reports
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(ci, chunk)| {
            let mut a = empty.clone();
            a.add_batch(chunk).map_err(|e| reindex(e, ci * CHUNK))?;
            Ok(a)
        })
        .collect();
    let mut total = empty.clone();
    for p in parts {
        total.merge(&p?)?;
    }
    Ok(total)
}

#[cfg(feature = "parallel")]
fn reindex(e: Error, offset: usize) -> Error {
    // "report i: ..." from add_batch becomes the index in the whole slice.
    match e {
        Error::InvalidReport { field, value, expected } => {
            let field = match field.strip_prefix("report ").and_then(|s| s.split_once(':')) {
                Some((i, rest)) => match i.parse::<usize>() {
                    Ok(i) => format!("report {}:{rest}", i + offset),
                    Err(_) => field,
                },
                None => field,
            };
            Error::InvalidReport { field, value, expected }
        }
        other => other,
    }
}
