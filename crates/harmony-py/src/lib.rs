//! `harmony_ldp._native`: the Rust half of the `harmony-ldp` Python package.
//!
//! The public API is the pure-Python package around it (`python/harmony_ldp`), which checks and
//! converts its arguments (dtypes, shapes, ranges) and builds DataFrames; this module holds the
//! mechanisms ([`oracle`], [`numeric`]) and the record simulation ([`records`]). Every long call
//! releases the GIL (`Python::detach`) while it reads the input arrays and writes Rust vectors,
//! which become numpy arrays without a copy (`PyArray1::from_vec`).
//!
//! Errors are `harmony_ldp.HarmonyError` (a `ValueError`) carrying the field, the value and what
//! was expected ([`errors`]); nothing here panics on user input.

use pyo3::prelude::*;

mod aggregate;
mod device;
mod errors;
mod numeric;
mod oracle;
mod records;
mod rng;
mod train;

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<oracle::NativeOracle>()?;
    m.add_class::<numeric::NativeNumeric>()?;
    m.add_class::<records::NativeSchema>()?;
    m.add_class::<device::NativeDeviceTask>()?;
    m.add_class::<device::NativeDevice>()?;
    m.add_class::<aggregate::NativeAggregator>()?;
    m.add_function(wrap_pyfunction!(aggregate::resolve_config, m)?)?;
    m.add_function(wrap_pyfunction!(records::simulate, m)?)?;
    m.add_function(wrap_pyfunction!(records::simulate_task, m)?)?;
    m.add_function(wrap_pyfunction!(records::simulate_items, m)?)?;
    m.add_function(wrap_pyfunction!(train::simulate_train, m)?)?;
    m.add_function(wrap_pyfunction!(train::train_features, m)?)?;
    m.add(
        "FREQUENCY_NAMES",
        harmony_core::frequency::FREQUENCY_NAMES
            .iter()
            .filter(|s| !harmony_core::frequency::SKETCH_NAMES.contains(s))
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
    )?;
    m.add("NUMERIC_NAMES", harmony_core::numeric::NUMERIC_NAMES.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
    m.add(
        "STRATEGY_NAMES",
        harmony_core::strategy::StrategyKind::NAMES.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    )?;
    m.add("Z95", harmony_core::estimate::Z95)?;
    m.add("GRID_STEP", harmony_core::numeric::GRID_STEP)?;
    Ok(())
}
