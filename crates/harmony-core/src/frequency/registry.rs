//! What a frequency oracle registers: its constructor from a name with parameters, its exact
//! output probabilities, whether `adaptive` may choose it, and its batch paths. Each oracle
//! implements [`Registered`] in its own module and takes one line in the list of
//! [`any`](super::any), which generates [`AnyOracle`](super::AnyOracle), its reports and
//! aggregators, [`OracleKind`](crate::kinds::OracleKind) and the [`ORACLES`](super::ORACLES)
//! table from it. Adding an oracle is its module plus that line.

use super::FrequencyOracle;
use crate::aggregate::Aggregator;
use crate::error::{Error, Result};
use crate::kinds::OracleKind;
use rand::Rng;

/// A frequency oracle in the registry.
pub trait Registered: FrequencyOracle + Sized {
    /// The parameters its name may carry (`name:key=value:…`); empty for most.
    const PARAMS: &'static [&'static str] = &[];
    /// Whether `adaptive` considers it: unbiased, with no parameters beyond (ε, d), and a
    /// closed-form variance ([`FrequencyOracle::report_variance`]).
    const ADAPTIVE: bool = false;

    /// Builds the oracle `kind` (one of the names it registers) with budget `epsilon` over
    /// [0, d); omitted parameters take their defaults. Errors: the oracle's own parameter errors.
    fn build(kind: OracleKind, epsilon: f64, d: usize, params: &Params<'_>) -> Result<Self>;

    /// P[report | x] from the oracle's constants (for OLH, conditional on the report's seed).
    fn output_probability(&self, x: usize, report: &Self::Report) -> f64;

    /// ln(P[r | x]/P[r | x']); the sketches override it to avoid forming probabilities that
    /// underflow.
    fn log_likelihood_ratio(&self, x: usize, x2: usize, report: &Self::Report) -> f64 {
        (self.output_probability(x, report) / self.output_probability(x2, report)).ln()
    }

    /// Randomizes v (< d) into `report`: the same draws as
    /// [`FrequencyOracle::randomize_unchecked`]; an oracle whose report owns a buffer reuses it.
    #[inline]
    fn randomize_into<R: Rng + ?Sized>(&self, v: usize, rng: &mut R, report: &mut Self::Report) {
        *report = self.randomize_unchecked(v, rng);
    }

    /// Adds reports that passed `validate` (the batch path: oracles with a faster one override
    /// it).
    fn add_validated<'a>(agg: &mut Self::Aggregator, reports: impl Iterator<Item = &'a Self::Report>) -> Result<()>
    where
        Self::Report: 'a,
    {
        reports.for_each(|r| agg.add_unchecked(r));
        Ok(())
    }
}

/// A mechanism name with optional parameters: `name` or `name:key=value:key=value`.
#[derive(Debug, Clone)]
pub struct Params<'a> {
    full: &'a str,
    name: &'a str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Params<'a> {
    /// Splits `name:key=value:…`.
    pub fn parse(full: &'a str) -> Self {
        let mut parts = full.split(':');
        let name = parts.next().unwrap_or("").trim();
        let pairs = parts.map(|kv| kv.split_once('=').map_or((kv.trim(), ""), |(k, v)| (k.trim(), v.trim()))).collect();
        Params { full, name, pairs }
    }
    /// The name before the first `:`.
    pub fn name(&self) -> &'a str {
        self.name
    }
    /// Errors on a key outside `keys` (or any key when `keys` is empty); `takes_some` names the
    /// oracles that take parameters.
    pub fn allow(&self, keys: &[&str], takes_some: &str) -> Result<()> {
        if let Some((k, _)) = self.pairs.iter().find(|(k, _)| !keys.contains(k)) {
            let expected = if keys.is_empty() {
                format!("no parameters for {} ({takes_some} take some)", self.name)
            } else {
                format!("{} parameters among {}, as {}:key=value:…, not {k:?}", self.name, keys.join(", "), self.name)
            };
            return Err(Error::param("mechanism", self.full, expected));
        }
        Ok(())
    }
    /// The value of `key` (the last one given), or `default`.
    pub fn get<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T> {
        Ok(self.get_opt(key)?.unwrap_or(default))
    }
    /// The value of `key` (the last one given), if any.
    pub fn get_opt<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>> {
        match self.pairs.iter().rev().find(|(k, _)| *k == key) {
            None => Ok(None),
            Some((_, v)) => v
                .parse()
                .map(Some)
                .map_err(|_| Error::param("mechanism", self.full, format!("a number for {key} (got {v:?})"))),
        }
    }
}
