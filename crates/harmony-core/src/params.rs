//! Validated parameters and the shared validators (one place for every range check).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// A privacy budget ε: finite and in [[`MIN_EPSILON`], [`MAX_EPSILON`]]. Precomputes e^ε and
/// e^ε − 1 (via `exp_m1`, accurate at small ε).
///
/// # The accepted range
/// Every mechanism of this crate builds its ε through this type, so this is the one range of ε
/// the library accepts (docs/PRIVACY-SAMPLERS.md). It is where the floating-point samplers are
/// provably, or by exhaustive enumeration, ε-LDP with a slack below 10⁻⁶·ε in ln-ratio (at
/// PM's two edge grid points, next to ±C, below 2⁻²⁹/p_tail ≈ 2⁻²⁶/ε: docs/PRIVACY-SAMPLERS.md):
///
/// * below [`MIN_EPSILON`] the float lattice of the real-valued samplers (PM, HM's PM branch,
///   Laplace, SCDF, staircase) is no longer fine enough against the 2⁻²⁰ report grid: the slack
///   grows faster than ε shrinks (Laplace: 2.2·10⁻⁶·ε at ε = 10⁻³; PM: 0.41 in ln-ratio at
///   ε = 10⁻⁹);
/// * above [`MAX_EPSILON`] the small output probabilities (e.g. Duchi's 1/(e^ε + 1), GRR's
///   (d − 1)/(e^ε + d − 1)) are computed with a relative error near e^ε·2⁻⁵³ (10⁻³ at ε = 30),
///   and from ε ≈ 37 they round to 0: outputs become impossible, an infinite ratio.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Epsilon {
    eps: f64,
    exp: f64,
    expm1: f64,
}

/// The smallest ε accepted: 0.002 (see [`Epsilon`]).
pub const MIN_EPSILON: f64 = 2e-3;

/// The largest ε accepted: 20 (see [`Epsilon`]).
pub const MAX_EPSILON: f64 = 20.0;

impl Epsilon {
    /// Validates ε: finite and in [[`MIN_EPSILON`], [`MAX_EPSILON`]].
    pub fn new(eps: f64) -> Result<Self> {
        if !(eps.is_finite() && (MIN_EPSILON..=MAX_EPSILON).contains(&eps)) {
            return Err(Error::param(
                "epsilon",
                eps,
                format!(
                    "a finite number >= {MIN_EPSILON} and <= {MAX_EPSILON} (the range where every sampler is exactly \
                     epsilon-LDP in floating point)"
                ),
            ));
        }
        Ok(Epsilon { eps, exp: eps.exp(), expm1: eps.exp_m1() })
    }
    /// ε itself.
    pub fn value(self) -> f64 {
        self.eps
    }
    /// e^ε.
    pub fn exp(self) -> f64 {
        self.exp
    }
    /// e^ε − 1, computed with `exp_m1`.
    pub fn exp_m1(self) -> f64 {
        self.expm1
    }
    /// c = (e^ε + 1)/(e^ε − 1), the Duchi / 1-bit scale.
    pub fn c(self) -> f64 {
        (self.exp + 1.0) / self.expm1
    }
    /// ε divided by a positive integer (budget splitting).
    pub fn split(self, parts: usize) -> Result<Self> {
        if parts == 0 {
            return Err(Error::param("parts", parts, "an integer >= 1"));
        }
        Epsilon::new(self.eps / parts as f64)
    }
}

impl TryFrom<f64> for Epsilon {
    type Error = Error;
    fn try_from(v: f64) -> Result<Self> {
        Epsilon::new(v)
    }
}

impl From<Epsilon> for f64 {
    fn from(e: Epsilon) -> f64 {
        e.eps
    }
}

/// Validates a categorical domain size d ≥ 2 (and ≤ 2^31 so indices fit in `u32`).
pub fn check_domain(name: &'static str, d: usize) -> Result<usize> {
    if !(2..=(1usize << 31)).contains(&d) {
        return Err(Error::param(name, d, "an integer >= 2 and <= 2^31"));
    }
    Ok(d)
}

/// Validates a dimension (number of attributes / coordinates) d ≥ 1.
pub fn check_dimension(name: &'static str, d: usize) -> Result<usize> {
    if !(1..=(1usize << 24)).contains(&d) {
        return Err(Error::param(name, d, "an integer >= 1 and <= 2^24"));
    }
    Ok(d)
}

/// Validates a value for a mechanism on [-1, 1].
#[inline]
pub fn check_unit(name: &str, t: f64) -> Result<f64> {
    if !(-1.0..=1.0).contains(&t) {
        return Err(Error::input(name, t, "a number in [-1, 1]"));
    }
    Ok(t)
}

/// Validates a category index in [0, d).
#[inline]
pub fn check_category(v: usize, d: usize) -> Result<usize> {
    if v >= d {
        return Err(Error::input("category", v, format!("an index in [0, {d})")));
    }
    Ok(v)
}

/// Validates a probability in [0, 1] (NaN rejected).
pub fn check_probability(name: &'static str, p: f64) -> Result<f64> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::param(name, p, "a probability in [0, 1]"));
    }
    Ok(p)
}

/// An attribute's range [min, max] with the affine map to and from [-1, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Range {
    /// Lower bound (in the attribute's units).
    pub min: f64,
    /// Upper bound (in the attribute's units).
    pub max: f64,
}

impl Range {
    /// Validates min < max, both finite.
    pub fn new(min: f64, max: f64) -> Result<Self> {
        if !min.is_finite() {
            return Err(Error::param("min", min, "a finite number"));
        }
        if !(max.is_finite() && max > min) {
            return Err(Error::param("max", max, format!("a finite number > min ({min})")));
        }
        Ok(Range { min, max })
    }
    /// Maps x ∈ [min, max] to [-1, 1]; an error (naming `name`) outside the range.
    pub fn to_unit(&self, name: &str, x: f64) -> Result<f64> {
        if !(self.min..=self.max).contains(&x) {
            return Err(Error::input(name, x, format!("a number in [{}, {}]", self.min, self.max)));
        }
        Ok(self.to_unit_clamped(x))
    }
    /// Maps x to [-1, 1], clamping values outside [min, max].
    ///
    /// A range so wide that 2·(max − min) overflows (±1e308 once made every value NaN)
    /// is mapped through halves, which stay finite; every other range bit for bit as always.
    pub fn to_unit_clamped(&self, x: f64) -> f64 {
        let t = if self.wide() {
            2.0 * ((0.5 * x - 0.5 * self.min) / self.half_width()) - 1.0
        } else {
            2.0 * (x - self.min) / (self.max - self.min) - 1.0
        };
        t.clamp(-1.0, 1.0)
    }
    /// Maps t ∈ [-1, 1] back to the attribute's units.
    pub fn from_unit(&self, t: f64) -> f64 {
        if self.wide() {
            return 2.0 * (0.5 * self.min + 0.5 * (t + 1.0) * self.half_width());
        }
        self.min + (t + 1.0) * 0.5 * (self.max - self.min)
    }
    /// Half-width (max − min)/2: multiply a [-1, 1] standard error by it to get units.
    pub fn half_width(&self) -> f64 {
        if self.wide() {
            return 0.5 * self.max - 0.5 * self.min;
        }
        0.5 * (self.max - self.min)
    }
    /// Whether 2·(max − min) overflows an f64.
    fn wide(&self) -> bool {
        !(2.0 * (self.max - self.min)).is_finite()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A range whose width overflows maps every value into [-1, 1] and back to a
    /// finite number (it made every value NaN).
    #[test]
    fn ranges_of_overflowing_width_stay_finite() {
        let r = Range::new(-1e308, 1e308).unwrap();
        for (x, t) in [(-1e308, -1.0), (0.0, 0.0), (1e308, 1.0), (5e307, 0.5)] {
            assert_eq!(r.to_unit_clamped(x), t, "{x}");
            assert!((r.from_unit(t) - x).abs() <= 1e292, "{x}");
        }
        assert_eq!(r.half_width(), 1e308);
        let narrow = Range::new(-1e300, 1e300).unwrap();
        assert_eq!(narrow.to_unit_clamped(0.0), 2.0 * (0.0 + 1e300) / 2e300 - 1.0);
    }

    #[test]
    fn epsilon_rejects_bad_values_with_names() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -1.0, 1e-3, 1.99e-3, 20.01, 701.0] {
            let e = Epsilon::new(bad).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, Error::InvalidParameter { name: "epsilon", .. }), "{msg}");
            assert!(msg.contains("epsilon is") && msg.contains(">= 0.002") && msg.contains("<= 20"), "{msg}");
        }
        let e = Epsilon::new(1.0).unwrap();
        assert!((e.exp() - 1f64.exp()).abs() < 1e-15);
        assert!((Epsilon::new(2e-3).unwrap().exp_m1() - 2.002_001_334_000_267e-3).abs() < 1e-18);
        assert!(Epsilon::new(MIN_EPSILON).is_ok() && Epsilon::new(MAX_EPSILON).is_ok());
    }

    #[test]
    fn domain_and_range_validation() {
        assert!(check_domain("d", 1).unwrap_err().to_string().contains("d is 1"));
        assert!(check_domain("d", 2).is_ok());
        assert!(check_unit("value", 1.5).is_err());
        assert!(check_unit("value", f64::NAN).is_err());
        assert!(check_category(5, 5).unwrap_err().to_string().contains("[0, 5)"));
        let r = Range::new(17.0, 90.0).unwrap();
        assert_eq!(r.to_unit("age", 17.0).unwrap(), -1.0);
        assert_eq!(r.to_unit("age", 90.0).unwrap(), 1.0);
        assert!(r.to_unit("age", 91.0).unwrap_err().to_string().contains("age is 91.0"));
        assert!((r.from_unit(r.to_unit_clamped(40.0)) - 40.0).abs() < 1e-12);
        assert!(Range::new(1.0, 1.0).is_err());
        assert!(Range::new(f64::NAN, 1.0).is_err());
    }
}
