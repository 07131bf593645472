//! Every error raised to Python is a `harmony_ldp.HarmonyError` (defined in Python, a
//! `ValueError`) with the attributes `field`, `value` and `expected`; its message is the core's
//! wording, `invalid input: values[3] is -1, expected an integer in [0, 8)`.

use pyo3::PyErr;

pyo3::import_exception!(harmony_ldp._errors, HarmonyError);

/// A `HarmonyError` with the core's message format (`{phase}: {field} is {value}, expected
/// {expected}`).
pub fn harmony_error(phase: &str, field: &str, value: impl std::fmt::Display, expected: &str) -> PyErr {
    let value = value.to_string();
    let message = format!("{phase}: {field} is {value}, expected {expected}");
    HarmonyError::new_err((message, field.to_string(), value, expected.to_string()))
}

/// A bad user input (a value to randomize, a record).
pub fn input_error(field: &str, value: impl std::fmt::Display, expected: &str) -> PyErr {
    harmony_error("invalid input", field, value, expected)
}

/// A bad report (a value to aggregate).
pub fn report_error(field: &str, value: impl std::fmt::Display, expected: &str) -> PyErr {
    harmony_error("invalid report", field, value, expected)
}

/// A bad constructor argument.
pub fn param_error(field: &str, value: impl std::fmt::Display, expected: &str) -> PyErr {
    harmony_error("invalid parameter", field, value, expected)
}

/// The core's error as a `HarmonyError`, with the same message.
pub fn core_error(e: harmony_core::Error) -> PyErr {
    use harmony_core::Error as E;
    let message = e.to_string();
    let (field, value, expected) = match e {
        E::InvalidParameter { name, value, expected } => (name.to_string(), value.0, expected),
        E::InvalidInput { name, value, expected } => (name, value.0, expected),
        E::InvalidReport { field, value, expected } => (field, value.0, expected),
        E::Incompatible(what) => ("aggregator".to_string(), what, "aggregators of the same mechanism".to_string()),
    };
    HarmonyError::new_err((message, field, value, expected))
}

/// `?` on a core result inside the bindings.
pub trait OrPy<T> {
    /// Converts the error with [`core_error`].
    fn or_py(self) -> pyo3::PyResult<T>;
}

impl<T> OrPy<T> for harmony_core::Result<T> {
    fn or_py(self) -> pyo3::PyResult<T> {
        self.map_err(core_error)
    }
}
