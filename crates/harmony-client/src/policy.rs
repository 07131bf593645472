//! The device's privacy policy: what the app (never the server) lets a collection ask of this
//! device. A [`DeviceTask`](crate::DeviceTask) checks the fetched config against it before it
//! builds any randomizer, and applies it to every input before any randomization.
//!
//! * `max_epsilon`: the largest ε one collection may spend (one report, or one gradient of a
//!   training collection: a device contributes once per collection). The
//!   [default](Policy::default) is [`DEFAULT_MAX_EPSILON`] = 10.
//! * `tasks`: the tasks allowed (`None`: every task, the default).
//! * `mechanisms`: the mechanism, strategy and method names allowed (`None`: every one, the
//!   default), matched against the names the config writes out (`strategy`,
//!   `numeric_mechanism`, `categorical_mechanism`, `mechanism`, `method`).
//! * Out-of-range values: a numeric value outside [-1, 1] is clamped to the nearest end, a
//!   non-finite one becomes 0 (the middle of the range). The device clamps, never skips: whether
//!   it reports does not depend on its data (a skipped report would itself tell the server that
//!   the value was out of range). Clamping is local post-processing of the input, so ε is
//!   unchanged; the estimate is that of the clamped values.
//!
//! Every refusal is [`ClientError::Policy`] naming the rule, the value and the limit. The policy
//! is plain data (no files, no threads): the browser SDK builds one from JSON, the CLI from its
//! flags.

use crate::{ClientError, Result};
use harmony_core::schema::Value;
use harmony_protocol::{CollectionConfig, TaskKind};
use serde::{Deserialize, Serialize};

/// The default largest ε per collection.
pub const DEFAULT_MAX_EPSILON: f64 = 10.0;

/// The fields of a config's task spec that name a mechanism, a strategy or a method.
const MECHANISM_FIELDS: [&str; 5] = ["strategy", "numeric_mechanism", "categorical_mechanism", "mechanism", "method"];

/// A device's privacy policy (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The largest ε one collection may spend.
    pub max_epsilon: f64,
    /// The tasks allowed (`None`: every task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<TaskKind>>,
    /// The mechanism, strategy and method names allowed (`None`: every one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanisms: Option<Vec<String>>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { max_epsilon: DEFAULT_MAX_EPSILON, tasks: None, mechanisms: None }
    }
}

fn refuse(rule: &str, value: impl ToString, limit: impl ToString) -> ClientError {
    ClientError::Policy { rule: rule.into(), value: value.to_string(), limit: limit.to_string() }
}

impl Policy {
    /// The default policy with another largest ε per collection.
    pub fn with_max_epsilon(max_epsilon: f64) -> Result<Self> {
        let p = Policy { max_epsilon, ..Policy::default() };
        p.check_self()?;
        Ok(p)
    }

    /// The policy itself is usable: `max_epsilon` a positive finite number.
    pub fn check_self(&self) -> Result<()> {
        if !(self.max_epsilon.is_finite() && self.max_epsilon > 0.0) {
            return Err(refuse("policy.max_epsilon", self.max_epsilon, "a finite number > 0"));
        }
        Ok(())
    }

    /// Checks a fetched config: its ε, its task and every mechanism it names.
    pub fn check(&self, config: &CollectionConfig) -> Result<()> {
        self.check_self()?;
        // NaN is refused too (it is not <= any limit).
        if config.epsilon.is_nan() || config.epsilon > self.max_epsilon {
            return Err(refuse("max_epsilon", config.epsilon, self.max_epsilon));
        }
        let kind = config.task.kind();
        if let Some(tasks) = &self.tasks
            && !tasks.contains(&kind)
        {
            let names: Vec<&str> = tasks.iter().map(|t| t.name()).collect();
            return Err(refuse("tasks", kind.name(), names.join(", ")));
        }
        if let Some(allowed) = &self.mechanisms {
            for name in mechanisms_of(config) {
                if !allowed.contains(&name) {
                    return Err(refuse("mechanisms", name, allowed.join(", ")));
                }
            }
        }
        Ok(())
    }

    /// The record the device randomizes: numeric values clamped to [-1, 1], non-finite ones 0
    /// (see the module docs); categories unchanged (the schema check refuses an index out of
    /// range: that is an encoding error, not a data value).
    pub fn clamp(&self, record: &[Value]) -> Vec<Value> {
        record
            .iter()
            .map(|v| match *v {
                Value::Unit(t) if t.is_nan() => Value::Unit(0.0),
                Value::Unit(t) => Value::Unit(t.clamp(-1.0, 1.0)),
                c => c,
            })
            .collect()
    }
}

/// The mechanism, strategy and method names a config's task spec writes out.
pub fn mechanisms_of(config: &CollectionConfig) -> Vec<String> {
    let spec = serde_json::to_value(&config.task).unwrap_or_default();
    MECHANISM_FIELDS.iter().filter_map(|f| spec.get(*f).and_then(|v| v.as_str()).map(str::to_string)).collect()
}
