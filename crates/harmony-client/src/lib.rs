//! Harmony device SDK: fetch a collection's configuration, randomize locally with the OS
//! CSPRNG, and submit with retries and backoff.
//!
//! * [`DeviceTask`]: a collection as a device sees it — the published config and the task's
//!   randomizer (built by harmony-tasks from the config, the same object the server and
//!   `harmony simulate` build), for every task.
//! * [`Device`]: a device's secure generator and its [`Ledger`], which remembers per collection
//!   the one report it made: a retry resends the same bytes under the same report id (the server
//!   counts it once) and a device never randomizes twice for one collection (which would spend
//!   its privacy budget again). The ledger keeps the reports, the budget's spends and the
//!   series' permanent reports in one state changed together ([`FileLedger`] natively: one
//!   file, under an OS lock across each read-check-write); a charge with no report kept is a
//!   refusal, never a fresh report.
//! * [`Policy`]: what the app (never the server) lets a collection ask of the device: the
//!   largest ε per collection (default [`policy::DEFAULT_MAX_EPSILON`] = 10), whether (ε, δ)
//!   mechanisms may run and the largest δ (default: pure ε only; δ ≤
//!   [`policy::DEFAULT_MAX_DELTA`] = 10⁻⁹ when allowed), the tasks and mechanisms allowed
//!   (checked against what the built task runs); out-of-range numeric values are clamped on the device, never skipped.
//!   A [`DeviceTask`] checks its config against it before building any randomizer.
//! * [`budget`]: the privacy budget across collections: a [`Policy`]'s [`Budget`] (at most ε,
//!   and δ, per rolling window of days) charged per collection id the device asked for, in the
//!   device's [`Ledger`] at a [`Clock`]'s time.
//! * [`memo`]: memoized (permanent) randomized response for recurring frequency series
//!   ([`Device::prepare_series`]): one permanent report per epoch of a data-independent
//!   schedule, charged ε once per epoch whatever the value.
//! * [`SimulatedDevices`]: seeded devices for simulations and tests only.
//! * [`Client`] (native targets): the HTTP transport, with retries.
//!
//! Only randomized reports leave the device, never a raw value.
#![warn(missing_docs)]

pub mod budget;
mod device;
#[cfg(not(target_arch = "wasm32"))]
mod http;
mod ledger;
pub mod memo;
pub mod policy;

#[cfg(not(target_arch = "wasm32"))]
pub use budget::SystemClock;
pub use budget::{Clock, Cost};
pub use device::{Device, DeviceTask, SimulatedDevices, TaskObject, report_id};
pub use harmony_protocol as protocol;
pub use harmony_tasks::Input;
#[cfg(not(target_arch = "wasm32"))]
pub use http::{Client, RetryPolicy};
#[cfg(not(target_arch = "wasm32"))]
pub use ledger::FileLedger;
pub use ledger::{Ledger, LedgerEntry, LedgerState, MemoryLedger, SeriesEntry};
pub use policy::{Budget, Policy};

use std::path::PathBuf;

/// Client errors.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server rejected the request (4xx): retrying will not help.
    #[error("server rejected the request ({status}): {field}: {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// The field the server named.
        field: String,
        /// The server's message.
        message: String,
    },
    /// Transport errors or 5xx after every retry.
    #[error("request to {url} failed after {attempts} attempts: {last}")]
    Unavailable {
        /// The URL.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        last: String,
    },
    /// A server URL without `http://` or `https://`: a configuration error, never retried.
    #[error("server URL is \"{url}\": it must start with http:// or https://")]
    BadUrl {
        /// The URL as given.
        url: String,
    },
    /// The first connection to the server was refused (or its host not found): nothing listens
    /// there, so the request is not retried.
    #[error("cannot connect to {url} ({message}): is `harmony serve` running at {url}?")]
    Unreachable {
        /// The server's base URL.
        url: String,
        /// The transport's error.
        message: String,
    },
    /// TLS: a server certificate that is not trusted, or a CA file that does not load (the
    /// native transport only).
    #[cfg(not(target_arch = "wasm32"))]
    #[error("{context}: {message}")]
    Tls {
        /// The host or the file.
        context: String,
        /// What was wrong (an untrusted certificate says to pass `--ca-cert`).
        message: String,
    },
    /// A response that does not parse, or does not answer the request (another collection).
    #[error("unexpected response from {url}: {message}")]
    Protocol {
        /// The URL.
        url: String,
        /// What did not parse.
        message: String,
    },
    /// Randomization or configuration errors from harmony-core and harmony-tasks.
    #[error(transparent)]
    Core(#[from] harmony_core::Error),
    /// The ledger file.
    #[error("ledger {path}: {message}")]
    Ledger {
        /// Ledger path.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// This device already reported to this collection.
    #[error("this device already reported to collection {0}")]
    AlreadyReported(String),
    /// The collection asks for more than the device's [`Policy`] allows (checked before any
    /// randomization).
    #[error("the device's policy refuses this collection: {rule} is {value}, the limit is {limit}")]
    Policy {
        /// The policy rule (`max_epsilon`, `approximate`, `max_delta`, `tasks`, `mechanisms`,
        /// `budget`, `ledger` (a charge with no report kept), `memoization`, or `policy.*` for a
        /// policy that is itself invalid).
        rule: String,
        /// The value the collection asks for.
        value: String,
        /// What the policy allows.
        limit: String,
    },
    /// The collection runs another task than the call expects (e.g. a gradient for `means`).
    #[error("collection {id} runs task {task}, expected {expected}")]
    WrongTask {
        /// The collection.
        id: String,
        /// Its task.
        task: String,
        /// What the call needs.
        expected: String,
    },
}

/// Result alias.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;
