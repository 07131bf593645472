//! Harmony's device SDK for browsers: thin wasm-bindgen exports over harmony-client. The JS
//! package (web/sdk/: `HarmonyDevice`, fetch, retries, localStorage) wraps them.
//!
//! * `checkConfig(config, policy, asked)`: the same refusals and messages as the Rust client's
//!   `DeviceTask::with_policy` (and `Client::config`'s collection-id check).
//! * `Collection`: a fetched config checked against the app's policy, with a ChaCha20 generator
//!   seeded from `crypto.getRandomValues` (getrandom's `wasm_js`). Its `randomize(record)`
//!   (no ledger, no budget) is in the test bundle only (the `vectors` feature).
//! * `DeviceState`: harmony-client's `Device` (ledger: one report per collection, a retry gets
//!   the same bytes; budget ledger across collections) over a JSON state the JS side persists.
//!
//! Errors are JS `Error`s whose message is the Rust client's `ClientError` text. The seeded
//! `vectorItem` (shared test vectors) exists only in the test bundle built with the `vectors`
//! feature: the committed bundle has no seeded path at all.
#![warn(missing_docs)]

pub mod sdk;

use wasm_bindgen::prelude::*;

fn js(e: harmony_client::ClientError) -> JsError {
    JsError::new(&e.to_string())
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("JSON of a plain value")
}

/// Checks a fetched config (JSON text) against the app's policy (JSON text; empty: the default
/// policy) and that it is the collection `asked` for; throws the Rust client's refusal.
#[wasm_bindgen(js_name = checkConfig)]
pub fn check_config(config: &str, policy: &str, asked: &str) -> Result<(), JsError> {
    sdk::Collection::open(config, policy, asked).map(|_| ()).map_err(js)
}

/// A collection's config checked against the device's policy, with its OS-seeded generator.
#[wasm_bindgen]
pub struct Collection(sdk::Collection);

#[wasm_bindgen]
impl Collection {
    /// Parses and checks the config (see `checkConfig`); throws the refusal.
    #[wasm_bindgen(constructor)]
    pub fn new(config: &str, policy: &str, asked: &str) -> Result<Collection, JsError> {
        sdk::Collection::open(config, policy, asked).map(Collection).map_err(js)
    }
    /// The collection id.
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> String {
        self.0.task().config().id.clone()
    }
    /// The config's version (what a report batch names).
    #[wasm_bindgen(getter, js_name = configVersion)]
    pub fn config_version(&self) -> u32 {
        self.0.task().config().config_version
    }
    /// ε of one report.
    #[wasm_bindgen(getter)]
    pub fn epsilon(&self) -> f64 {
        self.0.task().config().epsilon
    }
}

/// Randomizing without the ledger or the budget exists only in the test bundle (the `vectors`
/// feature): the shipped bundle's devices report through `DeviceState.prepare` alone.
#[cfg(feature = "vectors")]
#[wasm_bindgen]
impl Collection {
    /// One report item `{"id", "report"}` (JSON) for a raw input (JSON), without ledger or
    /// budget: for measuring (the test bundle only).
    pub fn randomize(&mut self, input: &str) -> Result<String, JsError> {
        self.0.randomize(input).map(|item| json(&item)).map_err(js)
    }
}

/// A device's ledger and budget over the JSON state the page persists.
#[wasm_bindgen]
pub struct DeviceState(sdk::DeviceState);

#[wasm_bindgen]
impl DeviceState {
    /// From the persisted state (JSON; empty: a new device).
    #[wasm_bindgen(constructor)]
    pub fn new(state: &str) -> Result<DeviceState, JsError> {
        sdk::DeviceState::open(state).map(DeviceState).map_err(js)
    }
    /// The collection's ledger entry `{"item": {"id", "report"}, "acknowledged"}` (JSON): made
    /// once, charged to the budget at `now_seconds`, and the same entry until acknowledged;
    /// throws the refusal (policy, budget, already reported, bad input).
    pub fn prepare(&mut self, collection: &Collection, input: &str, now_seconds: f64) -> Result<String, JsError> {
        // Seconds since the epoch: a negative or NaN clock reads as 1970 (every spend then in
        // the window: stricter), as the native SystemClock does.
        let now = if now_seconds.is_finite() && now_seconds > 0.0 { now_seconds as u64 } else { 0 };
        self.0.prepare(&collection.0, input, now).map(|e| json(&e)).map_err(js)
    }
    /// Records the server's acknowledgement of the collection's report.
    pub fn acknowledge(&mut self, collection: &str) -> Result<(), JsError> {
        self.0.acknowledge(collection).map_err(js)
    }
    /// The state to persist (JSON).
    pub fn state(&self) -> String {
        json(&self.0.state())
    }
}

/// TEST BUNDLE ONLY (feature `vectors`): the report item for a raw input with the seeded
/// generators of the shared test vectors (see `sdk::vector_item`). Never in the shipped bundle.
#[cfg(feature = "vectors")]
#[wasm_bindgen(js_name = vectorItem)]
pub fn vector_item(config: &str, input: &str, seed: u64) -> Result<String, JsError> {
    sdk::vector_item(config, input, seed).map(|item| json(&item)).map_err(js)
}
