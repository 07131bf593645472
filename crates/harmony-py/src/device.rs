//! The device side from Python: a collection's published config checked against the device's
//! policy (harmony-client's `DeviceTask`, the Rust SDK's own check: the server's config is never
//! trusted), then records or item sets randomized with the OS CSPRNG into the batch items a
//! device posts (`{id, report}`: a random report id and the hex wire encoding). The HTTP side
//! (fetching the config, posting with retries) is `harmony_ldp.Device` in Python.

use crate::errors::{HarmonyError, input_error, param_error};
use crate::records::{ColumnArg, encode};
use harmony_client::{ClientError, DeviceTask, Input, Policy};
use harmony_protocol::CollectionConfig;
use pyo3::prelude::*;

/// A client error as a `HarmonyError`: a policy refusal names its rule.
fn client_error(e: ClientError) -> PyErr {
    match e {
        ClientError::Policy { rule, value, limit } => {
            let message =
                format!("the device's policy refuses this collection: {rule} is {value}, the limit is {limit}");
            HarmonyError::new_err((message, format!("policy.{rule}"), value, limit))
        }
        ClientError::Core(e) => crate::errors::core_error(e),
        other => param_error("config", other, "a config this device can randomize for"),
    }
}

/// A collection as a device sees it: its config, checked against the device's policy.
#[pyclass(frozen, module = "harmony_ldp._native")]
pub struct NativeDeviceTask {
    task: DeviceTask,
}

#[pymethods]
impl NativeDeviceTask {
    /// `config`: the JSON of `GET …/config`; `policy`: the JSON of `harmony_client::Policy`.
    #[new]
    fn new(config: &str, policy: &str) -> PyResult<Self> {
        let config =
            CollectionConfig::from_json(config).map_err(|e| param_error("config", e, "a collection config"))?;
        let policy: Policy =
            serde_json::from_str(policy).map_err(|e| param_error("policy", e, "max_epsilon, tasks, mechanisms"))?;
        Ok(NativeDeviceTask { task: DeviceTask::with_policy(config, policy).map_err(client_error)? })
    }

    /// The batch items of encoded records (one device per row), OS CSPRNG; the GIL is released.
    fn records(&self, py: Python<'_>, columns: Vec<ColumnArg<'_>>) -> PyResult<Vec<(String, String)>> {
        let schema = self.task.config().schema().map_err(crate::errors::core_error)?;
        let (values, n) = encode(schema, &columns)?;
        let width = schema.len();
        py.detach(|| {
            let mut rng = crate::rng::os_rng()?;
            let mut ids = crate::rng::os_rng()?;
            (0..n)
                .map(|i| {
                    let input = Input::Record(&values[i * width..(i + 1) * width]);
                    let item = self.task.item(&input, &mut rng, &mut ids).map_err(client_error)?;
                    Ok((item.id, item.report))
                })
                .collect()
        })
    }

    /// The batch items of item sets (heavy hitters: one device per set), OS CSPRNG.
    fn item_sets(&self, py: Python<'_>, items: Vec<Vec<String>>) -> PyResult<Vec<(String, String)>> {
        if let Some(i) = items.iter().position(|s| s.is_empty()) {
            return Err(input_error(&format!("items[{i}]"), "an empty set", "at least one item"));
        }
        py.detach(|| {
            let mut rng = crate::rng::os_rng()?;
            let mut ids = crate::rng::os_rng()?;
            items
                .iter()
                .map(|s| {
                    let item = self.task.item(&Input::Items(s), &mut rng, &mut ids).map_err(client_error)?;
                    Ok((item.id, item.report))
                })
                .collect()
        })
    }
}
