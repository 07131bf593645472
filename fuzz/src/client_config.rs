//! `client_config`: what a device does with an untrusted server config. Input: the config's
//! JSON, optionally followed by a NUL byte and a `ModelState`'s JSON (the round a `train`
//! device computes its gradient at). The config is parsed, checked by the default device
//! policy and by a permissive one (ε up to f64::MAX: the mechanisms themselves must refuse what
//! they cannot run, fuzz.md F2), built, and a record (or item set, or gradient) randomized,
//! encoded, decoded and validated by the task the server builds from the same config: a report
//! a device sends is one the server accepts. Any panic is a crash.

use harmony_client::{DeviceTask, Input, Policy};
use harmony_core::sampling::fast_rng;
use harmony_core::schema::{Attribute, Value};
use harmony_protocol::estimates::{Query, TaskEstimate};
use harmony_protocol::{CollectionConfig, ModelState, from_hex_into};

/// A record for the config's schema: categories cycle, numerics spread over [-1, 1] (and one
/// out of range, which the device clamps).
fn record(config: &CollectionConfig, salt: u8) -> Vec<Value> {
    let attrs = config.schema.as_ref().map_or(&[][..], |s| s.attributes());
    attrs
        .iter()
        .enumerate()
        .map(|(j, a)| match a {
            Attribute::Categorical { categories, .. } => {
                Value::Category(((salt as usize + j) % categories.len().max(1)) as u32)
            }
            _ => Value::Unit(match (salt as usize + j) % 5 {
                0 => -1.0,
                1 => 1.0,
                2 => 0.25,
                3 => 1.5,
                _ => -0.75,
            }),
        })
        .collect()
}

/// The round state a `train` device computes at: the fuzzed one, else the fresh model the
/// server would publish.
fn model(config: &CollectionConfig, fuzzed: Option<&[u8]>) -> Option<ModelState> {
    if let Some(m) = fuzzed.and_then(|b| serde_json::from_slice::<ModelState>(b).ok()) {
        return Some(m);
    }
    let task = harmony_tasks::build(config).ok()?;
    match task.estimate(task.aggregator().as_ref(), &Query::default()).ok()? {
        TaskEstimate::Train(t) => Some(t.state),
        _ => None,
    }
}

/// Randomizes one input with a device built under `policy`; a report it produces must pass the
/// server's validation of the same config.
fn device(config: &CollectionConfig, policy: Policy, salt: u8, fuzzed_model: Option<&[u8]>) {
    let Ok(dev) = DeviceTask::with_policy(config.clone(), policy) else { return };
    let rec = record(config, salt);
    let items = vec![format!("item{salt}"), "ab".to_string(), String::new()];
    let state;
    let input = match config.task.kind() {
        harmony_protocol::TaskKind::HeavyHitters => Input::Items(&items),
        harmony_protocol::TaskKind::Train => match model(config, fuzzed_model) {
            Some(m) => {
                state = m;
                Input::Gradient { record: &rec, model: &state }
            }
            None => return,
        },
        _ => Input::Record(&rec),
    };
    let (mut rng, mut ids) = (fast_rng(salt as u64), fast_rng(7));
    let Ok(item) = dev.item(&input, &mut rng, &mut ids) else { return };
    let mut bytes = Vec::new();
    from_hex_into(&item.report, &mut bytes).expect("a device's report is hex");
    let server = harmony_tasks::build(config).expect("the server builds a config the device built");
    if let Err(e) = server.validate(&bytes) {
        panic!("the server refuses a device's report ({}): {e}", item.report);
    }
}

/// The fuzz target's body.
pub fn run(data: &[u8]) {
    let (json, fuzzed_model) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let Ok(config) = serde_json::from_slice::<CollectionConfig>(json) else { return };
    let salt = data.len() as u8;
    device(&config, Policy::default(), salt, fuzzed_model);
    if let Ok(permissive) = Policy::with_max_epsilon(f64::MAX) {
        device(&config, permissive, salt.wrapping_add(1), fuzzed_model);
    }
}
