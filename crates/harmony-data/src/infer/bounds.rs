//! Public-looking bounds: the data's [min, max] widened to multiples of a 1-2-5 step (1, 2, 5,
//! 10, 20, 50, …, or 0.1, 0.2, 0.5, …), the step being the smallest such value ≥ a tenth of the
//! range (at least 1 for integers), so the bounds are at most ~20% wider than the data and do
//! not print the data's own extremes.

/// A 1-2-5 step: `mantissa × 10^exponent`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    mantissa: f64,
    exponent: i32,
}

impl Step {
    /// The smallest 1-2-5 step ≥ `at_least` (> 0).
    pub fn at_least(at_least: f64) -> Self {
        let mut exponent = at_least.log10().floor() as i32;
        loop {
            for mantissa in [1.0, 2.0, 5.0] {
                let s = Step { mantissa, exponent };
                if s.value() >= at_least * (1.0 - 1e-12) {
                    return s;
                }
            }
            exponent += 1;
        }
    }
    /// The step as a number.
    pub fn value(self) -> f64 {
        self.times(1.0)
    }
    /// `k × step`, computed so decimal steps print exactly (`3 × 0.1` is `0.3`).
    fn times(self, k: f64) -> f64 {
        if self.exponent >= 0 {
            k * self.mantissa * 10f64.powi(self.exponent)
        } else {
            k * self.mantissa / 10f64.powi(-self.exponent)
        }
    }
    /// `x / step`, snapped to an integer when within 1e-9 of one.
    fn ratio(self, x: f64) -> f64 {
        let r = if self.exponent >= 0 {
            x / (self.mantissa * 10f64.powi(self.exponent))
        } else {
            x * 10f64.powi(-self.exponent) / self.mantissa
        };
        if (r - r.round()).abs() < 1e-9 { r.round() } else { r }
    }
}

/// [min, max] (min < max) rounded outward to multiples of a 1-2-5 step; `integer` data get a
/// step of at least 1. Returns the bounds and the step.
pub fn outward(min: f64, max: f64, integer: bool) -> (f64, f64, f64) {
    let mut target = (max - min) / 10.0;
    if integer {
        target = target.max(1.0);
    }
    let step = Step::at_least(target);
    (step.times(step.ratio(min).floor()), step.times(step.ratio(max).ceil()), step.value())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_1_2_5() {
        assert_eq!(Step::at_least(7.3).value(), 10.0);
        assert_eq!(Step::at_least(1.5).value(), 2.0);
        assert_eq!(Step::at_least(3.0).value(), 5.0);
        assert_eq!(Step::at_least(0.03).value(), 0.05);
        assert_eq!(Step::at_least(100.0).value(), 100.0);
        assert_eq!(Step::at_least(147_242.0).value(), 200_000.0);
    }

    #[test]
    fn bounds_widen_to_round_numbers() {
        assert_eq!(outward(17.0, 90.0, true), (10.0, 90.0, 10.0));
        assert_eq!(outward(12_285.0, 1_484_705.0, true), (0.0, 1_600_000.0, 200_000.0));
        assert_eq!(outward(0.0, 99_999.0, true), (0.0, 100_000.0, 10_000.0));
        assert_eq!(outward(1.0, 16.0, true), (0.0, 16.0, 2.0));
        assert_eq!(outward(0.0, 6.0, true), (0.0, 6.0, 1.0));
        assert_eq!(outward(94.0, 95.0, true), (94.0, 95.0, 1.0));
        assert_eq!(outward(0.12, 0.97, false), (0.1, 1.0, 0.1));
        assert_eq!(outward(-3.7, 2.2, false), (-4.0, 3.0, 1.0));
        assert_eq!(outward(1700.09, 18_656.3, false), (0.0, 20_000.0, 2000.0));
        // Never narrower than the data.
        for (lo, hi) in [(0.3, 0.7), (-0.001, 1e-4), (1e9, 1.3e9), (5.0, 5.000_001)] {
            let (a, b, _) = outward(lo, hi, false);
            assert!(a <= lo && b >= hi && a < b, "[{lo}, {hi}] -> [{a}, {b}]");
        }
    }
}
