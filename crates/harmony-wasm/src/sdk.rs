//! The plain-Rust side of the browser SDK: what the wasm exports in `lib.rs` wrap, callable
//! natively by the tests. Nothing here decides anything about privacy: the policy check, the
//! clamp, the randomizers, the ledger and the budget are harmony-client's; this module only turns
//! JSON into their inputs and their state back into JSON.

use harmony_client::policy::fallback;
use harmony_client::{ClientError, Device, DeviceTask, Input, Ledger, LedgerEntry, MemoryLedger, Policy, Result};
use harmony_core::schema::{Attribute, Role, Value};
use harmony_protocol::CollectionConfig;
use rand::Rng;
use rand::rngs::ChaCha20Rng;
use std::cell::Cell;
use std::rc::Rc;

/// The path a config is fetched from (what a [`ClientError::Protocol`] names).
pub fn config_path(asked: &str) -> String {
    format!("/v1/collections/{asked}/config")
}

/// Parses a fetched config and checks it is the collection the device asked for, as
/// `harmony_client::Client::config` does (same errors, the path in place of the URL).
pub fn parse_config(config_json: &str, asked: &str) -> Result<CollectionConfig> {
    let url = config_path(asked);
    let config: CollectionConfig = serde_json::from_str(config_json)
        .map_err(|e| ClientError::Protocol { url: url.clone(), message: e.to_string() })?;
    if config.id != asked {
        return Err(ClientError::Protocol {
            url,
            message: format!("the config is for collection {:?}, asked for {asked:?}", config.id),
        });
    }
    Ok(config)
}

/// Parses the app's policy (`{"max_epsilon": 10, "tasks": [...], "mechanisms": [...],
/// "budget": "2/1"}`; `null` or an empty string: the default policy); an unusable one is
/// refused with the rule it breaks.
pub fn parse_policy(policy_json: &str) -> Result<Policy> {
    let text = policy_json.trim();
    if text.is_empty() || text == "null" {
        return Ok(Policy::default());
    }
    let bad = |e: serde_json::Error| ClientError::Policy {
        rule: "policy".into(),
        value: e.to_string(),
        limit: "a policy object (max_epsilon, tasks, mechanisms, budget)".into(),
    };
    let value: serde_json::Value = serde_json::from_str(text).map_err(bad)?;
    // A bad budget is refused with the Rust client's own error (`policy.budget*`), not wrapped
    // in the parser's message.
    match value.get("budget") {
        Some(serde_json::Value::String(b)) => drop(b.parse::<harmony_client::Budget>()?),
        Some(serde_json::Value::Object(b)) => {
            if let (Some(e), Some(d)) =
                (b.get("epsilon").and_then(|v| v.as_f64()), b.get("days").and_then(|v| v.as_f64()))
            {
                let delta = b.get("delta").and_then(|v| v.as_f64()).unwrap_or(0.0);
                harmony_client::Budget::new(e, d)?.with_delta(delta)?;
            }
        }
        _ => {}
    }
    let policy: Policy = serde_json::from_value(value).map_err(bad)?;
    policy.check_self()?;
    Ok(policy)
}

/// A device's input, owned: an encoded record or a set of items.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedInput {
    /// A record encoded by the collection's schema.
    Record(Vec<Value>),
    /// Heavy hitters' items.
    Items(Vec<String>),
}

impl OwnedInput {
    /// The borrowed [`Input`] the task reads.
    pub fn as_input(&self) -> Input<'_> {
        match self {
            OwnedInput::Record(r) => Input::Record(r),
            OwnedInput::Items(i) => Input::Items(i),
        }
    }
}

fn bad_input(name: &str, value: &serde_json::Value, expected: &str) -> ClientError {
    ClientError::Core(harmony_core::Error::input(name, value, expected))
}

/// Encodes a raw JSON input for `config`: for heavy hitters a string or an array of strings;
/// otherwise an object with a value per attribute of the schema by name, numbers (or numeric
/// strings) for numeric attributes and labels for categorical ones. A number outside the
/// attribute's [min, max] is clamped to it (the policy's rule: clamp, never skip). A value the
/// server's config cannot encode — absent or null under a missing policy of `error`, a label
/// outside its categories, a number that does not parse — is replaced by a uniformly random
/// value drawn from `rng` (`harmony_client::policy::fallback`): once a config is accepted,
/// whether the device reports never depends on its data.
pub fn encode_input(config: &CollectionConfig, raw: &serde_json::Value, rng: &mut dyn Rng) -> Result<OwnedInput> {
    if config.task.kind().takes_items() {
        let items = match raw {
            serde_json::Value::String(s) => vec![s.clone()],
            serde_json::Value::Array(a) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string).ok_or_else(|| bad_input("items", v, "a string")))
                .collect::<Result<_>>()?,
            other => return Err(bad_input("items", other, "a string or an array of strings")),
        };
        return Ok(OwnedInput::Items(items));
    }
    let schema = config.schema()?;
    let Some(fields) = raw.as_object() else {
        return Err(bad_input("record", raw, "an object with a value per attribute"));
    };
    let mut record = Vec::with_capacity(schema.len());
    for (j, attribute) in schema.attributes().iter().enumerate() {
        // A presence attribute reads its numeric attribute's field.
        let name = match schema.role(j) {
            Role::Presence(b) => schema.attributes()[b].name(),
            Role::Value(_) => attribute.name(),
        };
        let mut or_fallback = |encoded: Option<Value>| encoded.unwrap_or_else(|| fallback(attribute, rng));
        // An absent field or null is a missing value: the attribute's missing policy decides.
        let Some(v) = fields.get(name).filter(|v| !v.is_null()) else {
            record.push(or_fallback(schema.encode_cell(j, None).ok()));
            continue;
        };
        if let Role::Presence(_) = schema.role(j) {
            record.push(Value::Category(0));
            continue;
        }
        record.push(or_fallback(match attribute {
            Attribute::Numeric { .. } => {
                let x = match v {
                    serde_json::Value::Number(n) => n.as_f64(),
                    serde_json::Value::String(s) => s.trim().parse().ok(),
                    _ => None,
                };
                let range = attribute.range().expect("a numeric attribute has a range");
                x.map(|x| Value::Unit(range.to_unit_clamped(x)))
            }
            Attribute::Categorical { .. } => match v {
                serde_json::Value::String(s) => schema.encode(j, s).ok(),
                serde_json::Value::Number(n) => schema.encode(j, &n.to_string()).ok(),
                _ => None,
            },
        }));
    }
    Ok(OwnedInput::Record(record))
}

/// A collection as this device sees it: the config checked against the app's policy, and a
/// generator seeded from the OS CSPRNG (`crypto.getRandomValues` in a browser).
pub struct Collection {
    task: DeviceTask,
    rng: ChaCha20Rng,
    ids: ChaCha20Rng,
}

impl Collection {
    /// Parses the fetched config (checked to be `asked`'s) and the policy, and builds the
    /// device task: a config the policy refuses builds nothing.
    pub fn open(config_json: &str, policy_json: &str, asked: &str) -> Result<Self> {
        let config = parse_config(config_json, asked)?;
        let task = DeviceTask::with_policy(config, parse_policy(policy_json)?)?;
        let (rng, ids) = (harmony_core::sampling::secure_rng(), harmony_core::sampling::secure_rng());
        Ok(Collection { task, rng, ids })
    }
    /// The device task.
    pub fn task(&self) -> &DeviceTask {
        &self.task
    }
    /// One randomized report item for a raw input (no ledger, no budget: for measuring and
    /// for simulations; a device reports through [`DeviceState::prepare`]).
    pub fn randomize(&mut self, raw_json: &str) -> Result<harmony_protocol::ReportItem> {
        let raw = parse_raw(raw_json)?;
        let input = encode_input(self.task.config(), &raw, &mut self.rng)?;
        self.task.item(&input.as_input(), &mut self.rng, &mut self.ids)
    }
}

fn parse_raw(raw_json: &str) -> Result<serde_json::Value> {
    serde_json::from_str(raw_json).map_err(|e| bad_input("record", &serde_json::Value::String(e.to_string()), "JSON"))
}

/// What a browser persists (localStorage): harmony-client's ledger state (the report per
/// collection id the device asked for, the budget's spends and the series' permanent reports).
pub use harmony_client::LedgerState as State;

/// A device over a persisted [`State`]: harmony-client's [`Device`] with its budget ledger;
/// the caller stores [`DeviceState::state`] after every change and before sending anything.
pub struct DeviceState {
    device: Device<MemoryLedger>,
    now: Rc<Cell<u64>>,
}

impl DeviceState {
    /// A device from its persisted state (an empty string: a new device).
    pub fn open(state_json: &str) -> Result<Self> {
        let state: State = if state_json.trim().is_empty() {
            State::default()
        } else {
            serde_json::from_str(state_json)
                .map_err(|e| ClientError::Ledger { path: "state".into(), message: e.to_string() })?
        };
        let now = Rc::new(Cell::new(0));
        let clock = {
            let now = now.clone();
            move || now.get()
        };
        let device = Device::with_budget(MemoryLedger(state), clock);
        Ok(DeviceState { device, now })
    }
    /// The collection's report: made once (charged to the budget at `now`, seconds since the
    /// epoch, and recorded) and the same entry on every later call until acknowledged
    /// ([`Device::prepare`]).
    pub fn prepare(&mut self, collection: &Collection, raw_json: &str, now: u64) -> Result<LedgerEntry> {
        self.now.set(now);
        let raw = parse_raw(raw_json)?;
        let input = encode_input(collection.task.config(), &raw, &mut harmony_core::sampling::secure_rng())?;
        self.device.prepare(&collection.task, &input.as_input())
    }
    /// Records the server's acknowledgement.
    pub fn acknowledge(&mut self, collection: &str) -> Result<()> {
        self.device.acknowledge(collection)
    }
    /// The state to persist.
    pub fn state(&self) -> State {
        self.device.ledger().state().clone()
    }
}

/// Simulation and test vectors only: the report item `DeviceTask::item` makes for a raw input
/// under the default policy with the seeded generators `fast_rng(seed)` (randomization) and
/// `fast_rng(!seed)` (report id). Exported to JS only by the `vectors` feature's test bundle.
pub fn vector_item(config_json: &str, raw_json: &str, seed: u64) -> Result<harmony_protocol::ReportItem> {
    let config: CollectionConfig = serde_json::from_str(config_json)
        .map_err(|e| ClientError::Protocol { url: "vector".into(), message: e.to_string() })?;
    let task = DeviceTask::new(config)?;
    let (mut rng, mut ids) = (harmony_core::sampling::fast_rng(seed), harmony_core::sampling::fast_rng(!seed));
    let input = encode_input(task.config(), &parse_raw(raw_json)?, &mut rng)?;
    task.item(&input.as_input(), &mut rng, &mut ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::schema::Schema;
    use harmony_protocol::CreateCollection;
    use harmony_protocol::spec::FrequencySpec;
    use harmony_protocol::spec::TaskSpec;

    /// A server's label list that silences every device with another label, and a missing
    /// policy left at `error`: once the config is accepted, each such value is encoded as a
    /// uniformly random one (never refused), so whether the device reports does not depend on
    /// its data.
    #[test]
    fn unknown_labels_and_missing_values_are_a_uniform_fallback_never_a_refusal() {
        let schema = Schema::new(vec![
            Attribute::Categorical { name: "sex".into(), categories: vec!["male".into(), "female".into()] },
            Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
        ])
        .unwrap();
        let task = TaskSpec::Frequency(FrequencySpec { attribute: "sex".into(), mechanism: None });
        let config =
            harmony_tasks::resolve(&CreateCollection { schema: Some(schema), epsilon: 1.0, task }, "f").unwrap();
        let mut rng = harmony_core::sampling::fast_rng(3);
        let n = 4000;
        let (mut female, mut sum) = (0, 0.0);
        for raw in [serde_json::json!({"sex": "other", "age": 40}), serde_json::json!({"age": null})] {
            for _ in 0..n {
                let OwnedInput::Record(r) = encode_input(&config, &raw, &mut rng).unwrap() else { unreachable!() };
                female += usize::from(r[0] == Value::Category(1));
                if let (Value::Unit(t), true) = (r[1], raw["age"].is_null()) {
                    sum += t;
                }
            }
        }
        // Uniform categories: 2n draws of a fair coin; 4.42 standard deviations (≈ 1e-5 false
        // failures). Uniform numeric on [-1, 1]: mean 0, variance 1/3.
        let z = (female as f64 - n as f64) / (0.5 * (2.0 * n as f64).sqrt());
        assert!(z.abs() < 4.42, "female {female} of {}: z {z}", 2 * n);
        let z = sum / (n as f64 / 3.0).sqrt();
        assert!(z.abs() < 4.42, "mean of the missing numeric {}: z {z}", sum / n as f64);
        // A known label and a present value are encoded as they are.
        let raw = serde_json::json!({"sex": "female", "age": 100});
        let OwnedInput::Record(r) = encode_input(&config, &raw, &mut rng).unwrap() else { unreachable!() };
        assert_eq!(r, [Value::Category(1), Value::Unit(1.0)]);
    }
}
