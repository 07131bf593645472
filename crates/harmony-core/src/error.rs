//! The crate's one error type, tagged by phase.
//!
//! Every message names the field, the offending value and what was expected, e.g.
//! `invalid parameter: epsilon is NaN, expected a finite number > 0`.

use std::fmt;

/// A value rendered for an error message. Kept as text so the error is `Clone + PartialEq`
/// and never carries a raw user value beyond its display form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown(pub String);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<T: fmt::Debug> From<&T> for Shown {
    fn from(v: &T) -> Self {
        Shown(format!("{v:?}"))
    }
}

/// Errors of harmony-core, by phase: construction (`InvalidParameter`), randomization
/// (`InvalidInput`), aggregation/decoding (`InvalidReport`, `Incompatible`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A mechanism or strategy was constructed with a bad parameter.
    #[error("invalid parameter: {name} is {value}, expected {expected}")]
    InvalidParameter {
        /// Parameter name (`epsilon`, `d`, ...).
        name: &'static str,
        /// The rejected value.
        value: Shown,
        /// The valid range, in words.
        expected: String,
    },
    /// A client input (a user's value) is outside the mechanism's domain.
    #[error("invalid input: {name} is {value}, expected {expected}")]
    InvalidInput {
        /// Input name (`value`, `category`, `coordinate 3`, ...).
        name: String,
        /// The rejected value.
        value: Shown,
        /// The valid domain, in words.
        expected: String,
    },
    /// A report is malformed, truncated, of the wrong kind, or out of range.
    #[error("invalid report: {field} is {value}, expected {expected}")]
    InvalidReport {
        /// Which part of the report (`header`, `version`, `y`, `bits`, ...).
        field: String,
        /// What was found.
        value: Shown,
        /// What a valid report holds.
        expected: String,
    },
    /// Two aggregators of different mechanisms or parameters were merged.
    #[error("incompatible aggregators: {0}")]
    Incompatible(String),
}

/// Result alias for harmony-core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::InvalidParameter`].
    pub fn param(name: &'static str, value: impl fmt::Debug, expected: impl Into<String>) -> Self {
        Error::InvalidParameter { name, value: Shown(format!("{value:?}")), expected: expected.into() }
    }
    /// Shorthand for [`Error::InvalidInput`].
    pub fn input(name: impl Into<String>, value: impl fmt::Debug, expected: impl Into<String>) -> Self {
        Error::InvalidInput { name: name.into(), value: Shown(format!("{value:?}")), expected: expected.into() }
    }
    /// Shorthand for [`Error::InvalidReport`].
    pub fn report(field: impl Into<String>, value: impl fmt::Debug, expected: impl Into<String>) -> Self {
        Error::InvalidReport { field: field.into(), value: Shown(format!("{value:?}")), expected: expected.into() }
    }
}
