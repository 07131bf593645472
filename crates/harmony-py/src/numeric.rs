//! 1-D numeric mechanisms by name on numpy arrays.
//!
//! Values in [low, high] are mapped to [-1, 1] (t = 2(x − low)/(high − low) − 1; no pass at all
//! for the default [-1, 1]). A report is a float64: the mechanism's unbiased output on the
//! [-1, 1] scale — ±C for a sign report (Duchi, HM's Duchi branch), a multiple of 2⁻²⁰ for a
//! fixed-point one (exact in float64 up to |y| = 2³³). Their mean estimates the mean of t; the
//! estimate is mapped back to [low, high] (value and standard error).
//!
//! Duchi and Laplace randomize through their columnar batch APIs (`randomize_signs`,
//! `randomize_units`, as `harmony bench` measures them), the others through `randomize_batch`.

use crate::errors::{OrPy, input_error, param_error};
use crate::rng::with_rng;
use harmony_core::aggregate::{Aggregator, at_index};
use harmony_core::estimate::Estimate;
use harmony_core::numeric::{AnyNumeric, GRID_STEP, NumericMechanism, NumericReport};
use harmony_core::params::Range;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use rand::Rng;
use std::borrow::Cow;

/// A numeric mechanism chosen by name (`harmony_core::numeric::AnyNumeric`) on [low, high].
#[pyclass(frozen, module = "harmony_ldp._native")]
pub struct NativeNumeric {
    mech: AnyNumeric,
    range: Range,
    /// The value of a `Sign(true)` report, for the mechanisms that send signs.
    sign_scale: Option<f64>,
    /// Whether the mechanism sends fixed-point reports.
    fixed: bool,
}

/// Randomizes t ∈ [-1, 1]^n into report values.
fn randomize_values<R: Rng + ?Sized>(m: &AnyNumeric, ts: &[f64], rng: &mut R) -> harmony_core::Result<Vec<f64>> {
    match m {
        AnyNumeric::Duchi(d) => {
            let mut words = Vec::with_capacity(ts.len().div_ceil(64));
            d.randomize_signs(ts, rng, &mut words)?;
            let c = d.scale();
            Ok((0..ts.len()).map(|i| if (words[i / 64] >> (i % 64)) & 1 == 1 { c } else { -c }).collect())
        }
        AnyNumeric::Laplace(l) => {
            let mut units = Vec::with_capacity(ts.len());
            l.randomize_units(ts, rng, &mut units)?;
            // Same element size: the vector's allocation is kept.
            Ok(units.into_iter().map(|u| u as f64 * GRID_STEP).collect())
        }
        _ => {
            let mut out = Vec::with_capacity(ts.len());
            m.randomize_batch(ts, rng, &mut out)?;
            out.iter().map(|r| m.decode(r)).collect()
        }
    }
}

impl NativeNumeric {
    /// The report a float64 stands for: a sign report when it is ±C of a sign mechanism, else a
    /// fixed-point one (it must lie on the 2⁻²⁰ grid; the mechanism's decoder checks its range).
    fn report(&self, y: f64) -> harmony_core::Result<NumericReport> {
        if let Some(c) = self.sign_scale
            && y.abs() == c
        {
            return Ok(NumericReport::Sign(y > 0.0));
        }
        let units = y / GRID_STEP;
        if !(self.fixed && units.is_finite() && units.fract() == 0.0 && units.abs() < 9.2e18) {
            let what = match (self.sign_scale, self.fixed) {
                (Some(c), true) => format!("a {} report (±{c} or a multiple of 2^-20)", self.mech.name()),
                (Some(c), false) => format!("a {} report (±{c})", self.mech.name()),
                (None, _) => format!("a {} report (a multiple of 2^-20)", self.mech.name()),
            };
            return Err(harmony_core::Error::report("value", y, what));
        }
        Ok(NumericReport::Fixed(units as i64))
    }
    fn slice<'a>(a: &'a PyReadonlyArray1<'_, f64>, field: &str) -> PyResult<&'a [f64]> {
        a.as_slice().map_err(|_| input_error(field, "a non-contiguous array", "a contiguous array"))
    }
}

#[pymethods]
impl NativeNumeric {
    #[new]
    fn new(name: &str, epsilon: f64, low: f64, high: f64) -> PyResult<Self> {
        let mech = AnyNumeric::by_name(name, epsilon).or_py()?;
        let range = Range::new(low, high).map_err(|e| match e {
            harmony_core::Error::InvalidParameter { name: "min", value, .. } => {
                param_error("low", value, "a finite number")
            }
            harmony_core::Error::InvalidParameter { value, .. } => {
                param_error("high", value, &format!("a finite number > low ({low})"))
            }
            other => crate::errors::core_error(other),
        })?;
        let sign_scale = mech.decode(&NumericReport::Sign(true)).ok();
        let fixed = mech.decode(&NumericReport::Fixed(0)).is_ok();
        Ok(NativeNumeric { mech, range, sign_scale, fixed })
    }
    #[getter]
    fn name(&self) -> &'static str {
        self.mech.name()
    }
    #[getter]
    fn epsilon(&self) -> f64 {
        self.mech.epsilon().value()
    }
    #[getter]
    fn low(&self) -> f64 {
        self.range.min
    }
    #[getter]
    fn high(&self) -> f64 {
        self.range.max
    }

    /// Randomizes float64 values in [low, high]; the GIL is released meanwhile.
    #[pyo3(signature = (values, seed=None))]
    fn randomize<'py>(
        &self,
        py: Python<'py>,
        values: PyReadonlyArray1<'py, f64>,
        seed: Option<u64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let xs = Self::slice(&values, "values")?;
        let out = py.detach(|| -> PyResult<Vec<f64>> {
            let (lo, hi) = (self.range.min, self.range.max);
            if let Some(i) = xs.iter().position(|x| !(lo..=hi).contains(x)) {
                return Err(input_error(&format!("values[{i}]"), xs[i], &format!("a number in [{lo}, {hi}]")));
            }
            let ts: Cow<[f64]> = if (lo, hi) == (-1.0, 1.0) {
                Cow::Borrowed(xs)
            } else {
                Cow::Owned(xs.iter().map(|&x| self.range.to_unit_clamped(x)).collect())
            };
            with_rng!(seed, |rng| randomize_values(&self.mech, &ts, &mut rng)).or_py()
        })?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// (n, estimate, std_error, ci_low, ci_high) of the mean, in [low, high] units; the GIL is
    /// released meanwhile.
    fn estimate(&self, py: Python<'_>, reports: PyReadonlyArray1<'_, f64>) -> PyResult<(u64, f64, f64, f64, f64)> {
        let ys = Self::slice(&reports, "reports")?;
        let e = py.detach(|| -> harmony_core::Result<Estimate> {
            let mut agg = self.mech.aggregator();
            for (i, &y) in ys.iter().enumerate() {
                let r = self.report(y).map_err(|e| at_index(e, i))?;
                agg.validate(&r).map_err(|e| at_index(e, i))?;
                agg.add_unchecked(&r);
            }
            Ok(agg.estimate().affine(self.range.half_width(), self.range.from_unit(0.0)))
        });
        let e = e.or_py()?;
        Ok((ys.len() as u64, e.value, e.std_error, e.ci95[0], e.ci95[1]))
    }

    /// Variance of one report for each value of `values` (in [low, high]), in squared units.
    fn variance<'py>(
        &self,
        py: Python<'py>,
        values: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let xs = Self::slice(&values, "values")?;
        let (lo, hi) = (self.range.min, self.range.max);
        if let Some(i) = xs.iter().position(|x| !(lo..=hi).contains(x)) {
            return Err(input_error(&format!("values[{i}]"), xs[i], &format!("a number in [{lo}, {hi}]")));
        }
        let h2 = self.range.half_width().powi(2);
        let out = xs.iter().map(|&x| h2 * self.mech.variance(self.range.to_unit_clamped(x))).collect();
        Ok(PyArray1::from_vec(py, out))
    }

    /// The largest one-report variance over [low, high], in squared units.
    fn worst_case_variance(&self) -> f64 {
        self.range.half_width().powi(2) * self.mech.worst_case_variance()
    }

    /// (a, b) with Var(one report | t) = a·t² + b on the [-1, 1] scale.
    fn variance_coefficients(&self) -> (f64, f64) {
        self.mech.variance_coefficients()
    }
}
