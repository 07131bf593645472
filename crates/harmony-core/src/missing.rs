//! Estimates of attributes that report missing values (`missing = "report"`, see
//! [`crate::schema`]): the share missing, and the mean or frequencies of the present values by
//! a ratio.
//!
//! # The ratios and their variance
//! A numeric attribute with missing values reports 0 (on [-1, 1]) for a missing one, and its
//! presence attribute reports "missing" (category 1). With Ŷ the estimated mean of the reported
//! values and m̂ the estimated missing share, the present values' mean on [-1, 1] is
//! R = Y/(1 − m), estimated by R̂ = Ŷ/(1 − m̂). A categorical attribute with the added category
//! m gives the present values' frequencies R_c = f_c/(1 − f_m) the same way.
//!
//! The variance is the delta method's (first order in 1/n, as every plug-in standard error
//! here): with P = 1 − m,
//! `Var(R̂) = [Var(Ŷ) + R²·Var(m̂) + 2R·Cov(Ŷ, m̂)] / P²`
//! (∂R/∂Y = 1/P, ∂R/∂m = R/P). The covariances come from the collection:
//!
//! * a category's and the missing category's estimates of one oracle over n reports:
//!   `Cov = M_cm/n`, M the oracle's cross moment
//!   ([`FrequencyOracle::aggregate_cross_moment`](crate::frequency::FrequencyOracle)), plus,
//!   where only the n_j users who sampled the attribute report it, the sampling term
//!   `−(1/n_j − 1/n)·f_c·f_m` (the finite-population covariance of two indicators);
//! * a numeric value and its presence attribute under a multi-attribute strategy: the noise is
//!   independent and t·1\[missing\] = 0 for every user, so only which users sampled each
//!   attribute correlates them: `Cov = (s − 1)/(d − 1)·Y·m/n` (s = d/k; 0 for split, Y·m/n for
//!   harmony), from the joint inclusion probability k(k − 1)/(d(d − 1)) of two attributes.

use crate::error::{Error, Result};
use crate::estimate::{Estimate, FrequencyEstimate};
use crate::frequency::{AnyOracle, FrequencyOracle};

/// Oracles whose present-value frequencies have a closed-form variance (a cross moment).
pub const RATIO_ORACLES: &str = "grr, sue, oue, adaptive, hadamard";

/// Checks that `oracle` can estimate the present-value frequencies of attribute `name`, which
/// reports missing values: an error naming the attribute and the oracles that can.
pub fn check_oracle(oracle: &AnyOracle, name: &str) -> Result<()> {
    let d = oracle.domain_size();
    if oracle.aggregate_cross_moment(&vec![0.0; d], 0, d - 1).is_some() {
        return Ok(());
    }
    Err(Error::param(
        "categorical mechanism",
        format!("{} for {name}", oracle.name()),
        format!(
            "one of {RATIO_ORACLES}: {name} reports missing values, and the variance of its present values' frequencies needs the oracle's cross moment"
        ),
    ))
}

/// An attribute's missing share and its present values' estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingEstimate {
    /// The share of users whose value is missing.
    pub missing: Estimate,
    /// The present values' mean (numeric, on [-1, 1]) or frequencies (categorical, without the
    /// missing category, summing to 1).
    pub present: Present,
}

/// The present values' estimate.
#[derive(Debug, Clone, PartialEq)]
pub enum Present {
    /// Mean on [-1, 1].
    Mean(Estimate),
    /// Frequencies among the present values.
    Frequencies(FrequencyEstimate),
}

/// R̂ = y/(1 − m) with the delta method's standard error, given Cov(ŷ, m̂).
pub fn ratio(y: Estimate, m: Estimate, cov: f64) -> Estimate {
    let p = 1.0 - m.value;
    if p <= 0.0 || !p.is_finite() {
        return Estimate::new(f64::NAN, f64::INFINITY);
    }
    let r = y.value / p;
    let var = (y.std_error.powi(2) + r * r * m.std_error.powi(2) + 2.0 * r * cov) / (p * p);
    Estimate::from_variance(r, var)
}

/// The present values' mean of a numeric attribute: `y` its estimate (missing values reported
/// as 0), `m` the presence attribute's "missing" frequency, `cov` their covariance.
pub fn present_mean(y: Estimate, m: Estimate, cov: f64) -> MissingEstimate {
    MissingEstimate { missing: m, present: Present::Mean(ratio(y, m, cov)) }
}

/// The present values' frequencies of a categorical attribute whose item `m` is "missing":
/// `cov(c)` is Cov(f̂_c, f̂_m).
pub fn present_frequencies(fe: &FrequencyEstimate, m: usize, cov: impl Fn(usize) -> f64) -> MissingEstimate {
    let missing = fe.get(m);
    let (mut frequencies, mut std_errors) = (Vec::new(), Vec::new());
    for c in (0..fe.len()).filter(|&c| c != m) {
        let e = ratio(fe.get(c), missing, cov(c));
        frequencies.push(e.value);
        std_errors.push(e.std_error);
    }
    MissingEstimate { missing, present: Present::Frequencies(FrequencyEstimate { n: fe.n, frequencies, std_errors }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_is_the_delta_method() {
        let (y, m) = (Estimate::new(0.3, 0.02), Estimate::new(0.4, 0.01));
        let r = ratio(y, m, 0.0001);
        assert!((r.value - 0.5).abs() < 1e-12);
        let var = (0.02f64.powi(2) + 0.25 * 0.01f64.powi(2) + 2.0 * 0.5 * 0.0001) / 0.36;
        assert!((r.std_error - var.sqrt()).abs() < 1e-12);
        assert!(ratio(y, Estimate::new(1.0, 0.1), 0.0).value.is_nan());
        let fe = FrequencyEstimate { n: 10, frequencies: vec![0.3, 0.3, 0.4], std_errors: vec![0.01; 3] };
        let Present::Frequencies(p) = present_frequencies(&fe, 2, |_| 0.0).present else { unreachable!() };
        assert_eq!(p.frequencies.len(), 2);
        assert!((p.frequencies.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
}
