//! Estimates with their uncertainty: every number Harmony reports carries a standard error and
//! a 95% confidence interval.

use serde::{Deserialize, Serialize};

/// The two-sided 95% normal quantile.
pub const Z95: f64 = 1.959_963_984_540_054;

/// An unbiased estimate with its closed-form standard error and normal 95% CI.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The point estimate.
    pub value: f64,
    /// Standard error (square root of the closed-form variance, with plug-in where the
    /// variance depends on unknown population moments).
    pub std_error: f64,
    /// 95% confidence interval `[value − 1.96·se, value + 1.96·se]`.
    pub ci95: [f64; 2],
}

impl Estimate {
    /// Builds an estimate from a value and a variance (negative variances clamp to 0).
    pub fn from_variance(value: f64, variance: f64) -> Self {
        Self::new(value, variance.max(0.0).sqrt())
    }
    /// Builds an estimate from a value and a standard error.
    pub fn new(value: f64, std_error: f64) -> Self {
        Estimate { value, std_error, ci95: [value - Z95 * std_error, value + Z95 * std_error] }
    }
    /// Whether the CI covers `truth`.
    pub fn covers(&self, truth: f64) -> bool {
        self.ci95[0] <= truth && truth <= self.ci95[1]
    }
    /// Affine map `a·x + b` (e.g. from [-1, 1] back to an attribute's units).
    pub fn affine(&self, a: f64, b: f64) -> Self {
        Self::new(a * self.value + b, a.abs() * self.std_error)
    }
}

/// Estimated frequencies (fractions) of every item of a domain, each with its standard error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrequencyEstimate {
    /// Number of reports aggregated.
    pub n: u64,
    /// Unbiased frequency estimates, one per item (may be negative or above 1 before
    /// post-processing).
    pub frequencies: Vec<f64>,
    /// Standard error of each estimate.
    pub std_errors: Vec<f64>,
}

impl FrequencyEstimate {
    /// The estimate of an aggregator that has no reports yet: zeros with infinite standard
    /// errors.
    pub fn empty(d: usize) -> Self {
        FrequencyEstimate { n: 0, frequencies: vec![0.0; d], std_errors: vec![f64::INFINITY; d] }
    }
    /// Item `v` as an [`Estimate`].
    pub fn get(&self, v: usize) -> Estimate {
        Estimate::new(self.frequencies[v], self.std_errors[v])
    }
    /// Domain size.
    pub fn len(&self) -> usize {
        self.frequencies.len()
    }
    /// Whether the domain is empty (never, for a valid oracle).
    pub fn is_empty(&self) -> bool {
        self.frequencies.is_empty()
    }
    /// Counts (n · frequency) with their standard errors.
    pub fn counts(&self) -> Vec<Estimate> {
        let n = self.n as f64;
        (0..self.len()).map(|v| self.get(v).affine(n, 0.0)).collect()
    }
}

/// Streaming moments (count, mean, and central moments 2–4) for Monte-Carlo checks and
/// simulations. Mergeable (Chan/Terriberry update).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Moments {
    /// Count.
    pub n: u64,
    /// Running mean.
    pub mean: f64,
    m2: f64,
    m3: f64,
    m4: f64,
}

impl Moments {
    /// Adds one observation.
    #[inline]
    pub fn push(&mut self, x: f64) {
        let n1 = self.n as f64;
        self.n += 1;
        let n = self.n as f64;
        let delta = x - self.mean;
        let delta_n = delta / n;
        let delta_n2 = delta_n * delta_n;
        let term1 = delta * delta_n * n1;
        self.mean += delta_n;
        self.m4 += term1 * delta_n2 * (n * n - 3.0 * n + 3.0) + 6.0 * delta_n2 * self.m2 - 4.0 * delta_n * self.m3;
        self.m3 += term1 * delta_n * (n - 2.0) - 3.0 * delta_n * self.m2;
        self.m2 += term1;
    }
    /// Merges another set of moments.
    pub fn merge(&mut self, o: &Moments) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        let (na, nb) = (self.n as f64, o.n as f64);
        let n = na + nb;
        let delta = o.mean - self.mean;
        let d2 = delta * delta;
        let m2 = self.m2 + o.m2 + d2 * na * nb / n;
        let m3 =
            self.m3 + o.m3 + d2 * delta * na * nb * (na - nb) / (n * n) + 3.0 * delta * (na * o.m2 - nb * self.m2) / n;
        let m4 = self.m4
            + o.m4
            + d2 * d2 * na * nb * (na * na - na * nb + nb * nb) / (n * n * n)
            + 6.0 * d2 * (na * na * o.m2 + nb * nb * self.m2) / (n * n)
            + 4.0 * delta * (na * o.m3 - nb * self.m3) / n;
        self.mean += delta * nb / n;
        self.n += o.n;
        self.m2 = m2;
        self.m3 = m3;
        self.m4 = m4;
    }
    /// Unbiased sample variance.
    pub fn variance(&self) -> f64 {
        if self.n < 2 { 0.0 } else { self.m2 / (self.n as f64 - 1.0) }
    }
    /// Fourth central moment (population form).
    pub fn fourth_central(&self) -> f64 {
        if self.n == 0 { 0.0 } else { self.m4 / self.n as f64 }
    }
    /// z-score of the sample mean against `mean` when one observation has variance `var`.
    pub fn z_mean(&self, mean: f64, var: f64) -> f64 {
        (self.mean - mean) / (var / self.n as f64).sqrt()
    }
    /// z-score of the sample variance against `var`, using the empirical fourth central
    /// moment: Var(s²) ≈ (μ₄ − σ⁴)/n.
    pub fn z_variance(&self, var: f64) -> f64 {
        let se = ((self.fourth_central() - var * var).max(f64::MIN_POSITIVE) / self.n as f64).sqrt();
        (self.variance() - var) / se
    }
}

/// The z used by every Monte-Carlo test: |z| < 4.42 has a two-sided false-failure rate of 1e-5
/// for a normal statistic.
pub const Z_TEST: f64 = 4.42;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_match_direct_and_merge() {
        let xs: Vec<f64> = (0..1000).map(|i| ((i * 37) % 101) as f64 / 7.0).collect();
        let mut a = Moments::default();
        xs.iter().for_each(|&x| a.push(x));
        let mean = xs.iter().sum::<f64>() / 1000.0;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 999.0;
        let m4 = xs.iter().map(|x| (x - mean).powi(4)).sum::<f64>() / 1000.0;
        assert!((a.mean - mean).abs() < 1e-12);
        assert!((a.variance() - var).abs() < 1e-9);
        assert!((a.fourth_central() - m4).abs() / m4 < 1e-9);
        let (mut l, mut r) = (Moments::default(), Moments::default());
        xs[..300].iter().for_each(|&x| l.push(x));
        xs[300..].iter().for_each(|&x| r.push(x));
        l.merge(&r);
        assert!((l.variance() - var).abs() < 1e-9);
        assert!((l.fourth_central() - m4).abs() / m4 < 1e-9);
    }

    #[test]
    fn estimate_ci() {
        let e = Estimate::new(1.0, 0.5);
        assert!(e.covers(1.9) && !e.covers(2.0));
        let u = e.affine(-2.0, 1.0);
        assert_eq!(u.value, -1.0);
        assert_eq!(u.std_error, 1.0);
    }
}
