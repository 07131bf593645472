//! The device side from Python: a collection's published config checked against the device's
//! policy (harmony-client's `DeviceTask`, the Rust SDK's own check: the server's config is never
//! trusted), then records or item sets randomized with the OS CSPRNG into the batch items a
//! device posts (`{id, report}`: a random report id and the hex wire encoding); and one device
//! ([`NativeDevice`]: `harmony_client::Device` with its budget and its store of reports, spends
//! and permanent reports). The HTTP side (fetching the config, posting with retries) is
//! `harmony_ldp.Device` in Python.

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
        ClientError::AlreadyReported(id) => crate::errors::harmony_error(
            "already reported",
            "collection",
            id,
            "a collection this device has not reported to (one report per collection)",
        ),
        ClientError::Ledger { path, message } => crate::errors::harmony_error(
            "device store",
            "store",
            path.display(),
            &format!("a readable store ({message})"),
        ),
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

/// Where a [`NativeDevice`] keeps its state: a file (persistent, locked across processes) or
/// memory (the object's lifetime).
enum Store {
    File(harmony_client::FileLedger),
    Memory(harmony_client::MemoryLedger),
}

impl harmony_client::Ledger for Store {
    fn state(&self) -> &harmony_client::LedgerState {
        match self {
            Store::File(l) => l.state(),
            Store::Memory(l) => l.state(),
        }
    }
    fn update(
        &mut self,
        f: &mut dyn FnMut(&mut harmony_client::LedgerState) -> harmony_client::Result<bool>,
    ) -> harmony_client::Result<()> {
        match self {
            Store::File(l) => l.update(f),
            Store::Memory(l) => l.update(f),
        }
    }
}

/// One device of `harmony_client`: its policy and its store (report ledger, budget spends and
/// series' permanent reports in one state, one file under an OS lock). Each call runs a
/// `harmony_client::Device` over the store, with an OS-seeded generator, charged at the system
/// clock's time.
#[pyclass(frozen, module = "harmony_ldp._native")]
pub struct NativeDevice {
    policy: Policy,
    store: std::sync::Mutex<Store>,
}

type ClientDevice = harmony_client::Device<Store>;

impl NativeDevice {
    fn task(&self, config: &str) -> PyResult<DeviceTask> {
        let config =
            CollectionConfig::from_json(config).map_err(|e| param_error("config", e, "a collection config"))?;
        DeviceTask::with_policy(config, self.policy.clone()).map_err(client_error)
    }
    /// Runs `f` on a device over the store (given back afterwards, whatever `f` returns).
    fn with_device<T>(&self, f: impl FnOnce(&mut ClientDevice) -> T) -> T {
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let taken = std::mem::replace(&mut *store, Store::Memory(harmony_client::MemoryLedger::default()));
        let mut device = harmony_client::Device::with_budget(taken, harmony_client::SystemClock);
        let out = f(&mut device);
        *store = device.into_ledger();
        out
    }
}

#[pymethods]
impl NativeDevice {
    /// `policy`: the JSON of `harmony_client::Policy`; `store`: the state file (`None`: memory).
    #[new]
    #[pyo3(signature = (policy, store=None))]
    fn new(policy: &str, store: Option<std::path::PathBuf>) -> PyResult<Self> {
        let policy: Policy = serde_json::from_str(policy)
            .map_err(|e| param_error("policy", e, "max_epsilon, approximate, max_delta, tasks, mechanisms, budget"))?;
        policy.check_self().map_err(client_error)?;
        let store = match store {
            Some(path) => Store::File(harmony_client::FileLedger::open(&path).map_err(client_error)?),
            None => Store::Memory(harmony_client::MemoryLedger::default()),
        };
        Ok(NativeDevice { policy, store: std::sync::Mutex::new(store) })
    }

    /// This device's one report to the collection of `config` for its record (one row of
    /// encoded columns; numeric values out of range are clamped): the kept report when the
    /// store has one, else randomized, charged and stored before it is returned; for a
    /// recurring `series`, the series' permanent report. `(id, report)`.
    #[pyo3(signature = (config, columns, series=None))]
    fn prepare(&self, config: &str, columns: Vec<ColumnArg<'_>>, series: Option<&str>) -> PyResult<(String, String)> {
        let task = self.task(config)?;
        let schema = task.config().schema().map_err(crate::errors::core_error)?;
        let (record, n) = encode(schema, &columns)?;
        if n != 1 {
            return Err(input_error("record", format!("{n} rows"), "one row (one device)"));
        }
        let input = Input::Record(&record);
        let entry = self
            .with_device(|device| match series {
                Some(s) => device.prepare_series(&task, s, &input),
                None => device.prepare(&task, &input),
            })
            .map_err(client_error)?;
        Ok((entry.item.id, entry.item.report))
    }

    /// Records the server's acknowledgement of the collection's report.
    fn acknowledge(&self, collection: &str) -> PyResult<()> {
        self.with_device(|device| device.acknowledge(collection)).map_err(client_error)
    }

    /// Charges the collection of `config` once for a batch of devices sent from this machine
    /// (refused by the budget, or when the collection was already charged here).
    fn charge_batch(&self, config: &str) -> PyResult<()> {
        let task = self.task(config)?;
        self.with_device(|device| device.charge_batch(&task)).map(drop).map_err(client_error)
    }

    /// The spends in the store: `(key, epsilon, delta, unix seconds)`.
    fn spends(&self) -> Vec<(String, f64, f64, u64)> {
        self.with_device(|device| {
            device.spends().iter().map(|s| (s.collection.clone(), s.epsilon, s.delta, s.at)).collect()
        })
    }
}
